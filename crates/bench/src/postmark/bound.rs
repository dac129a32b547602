//! The limit of PostMark through any server that answers one request at a
//! time: the workload's requests, one loopback round trip each, sent to a
//! thread that makes only the file system calls each request needs, with
//! no protocol to decode and no hand-off to another thread.
//!
//! The requests are the ones the 9P workload sends: for a read, a walk
//! (which looks the name up and stats it, as a server must to give a qid),
//! an open, reads of at most [`PIECE`] bytes and a clunk (a close); for an
//! append the same with writes; for a create, the walk that clones the
//! directory's fid (a round trip with nothing to do), the create (open
//! with O_CREAT|O_EXCL and a stat for the qid), the write and the clunk;
//! for a deletion, a walk and a remove. What a run takes is then the
//! machine's round trips plus the file system's own work, which no 9P
//! server on the same machine can beat with the same client.

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Config, Report, Served, Store, drive};

/// Largest read or write in one request, as the 9P client's iounit at its
/// default msize.
pub const PIECE: u32 = 1024 * 1024 - 24;

/// The request's header: op, length, file number, offset.
const HEAD: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    Clone = 1,
    Walk,
    Open,
    Create,
    Read,
    Write,
    Clunk,
    Remove,
}

impl Op {
    fn from_u32(n: u32) -> Option<Op> {
        [
            Op::Clone,
            Op::Walk,
            Op::Open,
            Op::Create,
            Op::Read,
            Op::Write,
            Op::Clunk,
            Op::Remove,
        ]
        .into_iter()
        .find(|op| *op as u32 == n)
    }
}

/// Runs the workload in `root/config.dir` (made, and removed at the end,
/// if missing) through the socket.
pub async fn run(config: &Config, root: &Path) -> Result<Report> {
    config.check()?;
    let dir = root.join(&config.dir);
    let made_dir = match std::fs::create_dir(&dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e).with_context(|| format!("make {}", dir.display())),
    };
    let dir_fd = rustix::fs::open(
        &dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("open {}", dir.display()))?;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let server = std::thread::Builder::new()
        .name("postmark-bound".into())
        .spawn(move || serve(&listener, &dir_fd))?;
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let phases = drive(
        config,
        Socket {
            stream,
            reply: Vec::new(),
        },
    )
    .await;
    // The store is gone with `drive`: the server sees the end and returns.
    let served = server
        .join()
        .map_err(|_| anyhow::anyhow!("the bound's server panicked"))?;
    let phases = phases?;
    served.context("the bound's server")?;
    if made_dir {
        std::fs::remove_dir(&dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    Ok(phases.report(config, Served::Bound))
}

/// The client's side: each request written whole, its reply read whole.
struct Socket {
    stream: tokio::net::TcpStream,
    reply: Vec<u8>,
}

impl Socket {
    /// One round trip; returns the reply's result (a count, or 0).
    async fn call(&mut self, op: Op, id: u64, offset: u64, len: u32, data: &[u8]) -> Result<u64> {
        let mut request = Vec::with_capacity(HEAD + data.len());
        request.extend_from_slice(&(op as u32).to_le_bytes());
        request.extend_from_slice(&len.to_le_bytes());
        request.extend_from_slice(&id.to_le_bytes());
        request.extend_from_slice(&offset.to_le_bytes());
        request.extend_from_slice(data);
        self.stream.write_all(&request).await?;
        let result = self.stream.read_i64_le().await?;
        if result < 0 {
            bail!(
                "{op:?} of pm{id:07}: {}",
                io::Error::from_raw_os_error(-result as i32)
            );
        }
        if op == Op::Read {
            self.reply.resize(result as usize, 0);
            self.stream.read_exact(&mut self.reply).await?;
        }
        Ok(result as u64)
    }

    async fn write_all(&mut self, id: u64, offset: u64, data: &[u8]) -> Result<()> {
        let mut done = 0;
        while done < data.len() {
            let piece = &data[done..data.len().min(done + PIECE as usize)];
            let n = self
                .call(
                    Op::Write,
                    id,
                    offset + done as u64,
                    piece.len() as u32,
                    piece,
                )
                .await?;
            ensure!(n > 0, "pm{id:07}: a write took nothing");
            done += n as usize;
        }
        Ok(())
    }
}

/// The workload's names are `pm` and a number: the number is sent.
fn number(name: &str) -> Result<u64> {
    name.strip_prefix("pm")
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("{name}: not a workload name"))
}

impl Store for Socket {
    async fn create(&mut self, name: &str, data: Bytes) -> Result<()> {
        let id = number(name)?;
        self.call(Op::Clone, id, 0, 0, &[]).await?;
        self.call(Op::Create, id, 0, 0, &[]).await?;
        self.write_all(id, 0, &data).await?;
        self.call(Op::Clunk, id, 0, 0, &[]).await?;
        Ok(())
    }

    async fn read(&mut self, name: &str, size: u64) -> Result<u64> {
        let id = number(name)?;
        self.call(Op::Walk, id, 0, 0, &[]).await?;
        self.call(Op::Open, id, 0, OFlags::RDONLY.bits(), &[])
            .await?;
        let mut got = 0;
        while got < size {
            let n = self.call(Op::Read, id, got, PIECE, &[]).await?;
            if n == 0 {
                break;
            }
            got += n;
        }
        self.call(Op::Clunk, id, 0, 0, &[]).await?;
        Ok(got)
    }

    async fn append(&mut self, name: &str, offset: u64, data: Bytes) -> Result<()> {
        let id = number(name)?;
        self.call(Op::Walk, id, 0, 0, &[]).await?;
        self.call(Op::Open, id, 0, OFlags::WRONLY.bits(), &[])
            .await?;
        self.write_all(id, offset, &data).await?;
        self.call(Op::Clunk, id, 0, 0, &[]).await?;
        Ok(())
    }

    async fn remove(&mut self, name: &str) -> Result<()> {
        let id = number(name)?;
        self.call(Op::Walk, id, 0, 0, &[]).await?;
        self.call(Op::Remove, id, 0, 0, &[]).await?;
        Ok(())
    }
}

/// The server's side, on a thread of its own: one connection, one request
/// at a time, until the client hangs up.
fn serve(listener: &TcpListener, dir: &OwnedFd) -> io::Result<()> {
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    let mut open: Option<OwnedFd> = None;
    let mut head = [0u8; HEAD];
    let mut data = Vec::new();
    let mut reply = Vec::new();
    loop {
        match stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let field = |at: usize, len: usize| {
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(&head[at..at + len]);
            u64::from_le_bytes(b)
        };
        let request = Request {
            op: Op::from_u32(field(0, 4) as u32)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no such op"))?,
            len: field(4, 4) as usize,
            name: format!("pm{:07}", field(8, 8)),
            offset: field(16, 8),
        };
        if request.op == Op::Write {
            data.resize(request.len, 0);
            stream.read_exact(&mut data)?;
        }
        reply.clear();
        reply.extend_from_slice(&[0; 8]);
        let result = answer(&request, dir, &data, &mut open, &mut reply);
        let result = result.map_or_else(|e| -i64::from(e.raw_os_error()), |n| n as i64);
        reply[..8].copy_from_slice(&result.to_le_bytes());
        stream.write_all(&reply)?;
    }
}

/// One request as the server reads it.
struct Request {
    op: Op,
    /// How much to read; open flags for an open.
    len: usize,
    name: String,
    offset: u64,
}

/// Makes the file system calls of one request on the directory `dir` and
/// the file opened last; read data is put after the reply's result.
fn answer(
    request: &Request,
    dir: &OwnedFd,
    data: &[u8],
    open: &mut Option<OwnedFd>,
    reply: &mut Vec<u8>,
) -> Result<usize, Errno> {
    let Request {
        op,
        len,
        ref name,
        offset,
    } = *request;
    match op {
        Op::Clone => Ok(0),
        Op::Walk => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|_| 0),
        Op::Open => {
            let flags = OFlags::from_bits_retain(len as u32) | OFlags::CLOEXEC;
            *open = Some(rustix::fs::openat(dir, name, flags, Mode::empty())?);
            Ok(0)
        }
        Op::Create => {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o644))?;
            rustix::fs::fstat(&fd)?;
            *open = Some(fd);
            Ok(0)
        }
        Op::Read => {
            let fd = open.as_ref().ok_or(Errno::BADF)?;
            let at = reply.len();
            reply.resize(at + len, 0);
            let n = rustix::io::pread(fd, &mut reply[at..], offset)?;
            reply.truncate(at + n);
            Ok(n)
        }
        Op::Write => rustix::io::pwrite(open.as_ref().ok_or(Errno::BADF)?, data, offset),
        Op::Clunk => {
            *open = None;
            Ok(0)
        }
        Op::Remove => rustix::fs::unlinkat(dir, name, AtFlags::empty()).map(|()| 0),
    }
}
