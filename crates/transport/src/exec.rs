//! `exec!COMMAND`: a connection that is a command's standard input and
//! output, as the v9fs paper ran u9fs over ssh: `exec!ssh host ninep serve
//! --stdio DIR`. The command runs under `sh -c`; it is killed when the
//! connection is dropped. What it writes to standard error goes to ours.

use std::io;
use std::pin::Pin;
use std::process::Stdio;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A running command, spoken to through its standard input and output.
#[derive(Debug)]
pub(crate) struct Piped {
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Held so that the command lives as long as the connection.
    _child: Child,
}

impl Piped {
    /// Starts `command` under `sh -c`.
    pub fn spawn(command: &str) -> io::Result<Piped> {
        let mut child = Command::new("sh")
            .args(["-c", command])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the command's pipes are missing"));
        };
        Ok(Piped {
            stdin,
            stdout,
            _child: child,
        })
    }
}

impl AsyncRead for Piped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

impl AsyncWrite for Piped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}
