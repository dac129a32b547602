//! MUNGE, as diod authenticates: the client writes a MUNGE credential (the
//! text `munge` prints) to the afid at offset 0, in one write or several;
//! at Tattach the server decodes it, and the attach is served if the
//! credential's uid is that of the user attached as. munged refuses a
//! credential decoded before (a replay) or past its time to live.
//!
//! The credential is decoded by running `unmunge`, MUNGE's own command:
//! munged's socket protocol is private to libmunge and changes with its
//! releases, while the commands are its documented interface. It costs a
//! process per attach (a few milliseconds; see scripts/bench-auth).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use ninep_wire::Errno;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{BoxFuture, Exchange, Proof, Scheme};
use crate::error::{Error, Result};
use crate::fs::User;

/// The longest credential taken; MUNGE's are a few hundred bytes.
const MAX_CREDENTIAL: usize = 64 * 1024;

/// How long munged may take to decode a credential.
const DECODE_TIMEOUT: Duration = Duration::from_secs(10);

/// The MUNGE scheme of a server.
#[derive(Debug, Clone, Default)]
pub struct Munge {
    /// munged's socket, if not the default one.
    pub socket: Option<PathBuf>,
}

impl Scheme for Munge {
    fn name(&self) -> &str {
        "munge"
    }

    fn start(&self, _user: &User) -> Result<Box<dyn Exchange>> {
        Ok(Box::new(Credential {
            socket: self.socket.clone(),
            text: Vec::new(),
        }))
    }
}

/// A credential being written to an afid.
struct Credential {
    socket: Option<PathBuf>,
    text: Vec<u8>,
}

fn refused(why: impl Into<String>) -> Error {
    Error::with_errno(Errno::EPERM, why.into())
}

impl Exchange for Credential {
    fn write(&mut self, offset: u64, data: Bytes) -> BoxFuture<'_, Result<u32>> {
        Box::pin(async move {
            // Each write goes on where the last ended, as diod takes them.
            if offset != self.text.len() as u64 {
                return Err(Error::with_errno(
                    Errno::EIO,
                    "MUNGE credential written at an unexpected offset",
                ));
            }
            if self.text.len() + data.len() > MAX_CREDENTIAL {
                return Err(refused("MUNGE credential too long"));
            }
            self.text.extend_from_slice(&data);
            Ok(data.len() as u32)
        })
    }

    fn proof(&mut self) -> BoxFuture<'_, Result<Proof>> {
        Box::pin(async move {
            if self.text.is_empty() {
                return Err(refused("MUNGE credential missing"));
            }
            let decoded = tokio::time::timeout(DECODE_TIMEOUT, self.decode())
                .await
                .map_err(|_| refused("munged did not answer"))??;
            parse_uid(&decoded)
                .ok_or_else(|| refused("unmunge printed no uid"))
                .map(|(uname, uid)| Proof {
                    uname: Some(uname),
                    uid: Some(uid),
                })
        })
    }
}

impl Credential {
    /// Runs unmunge on the credential; its metadata, or why it refused.
    async fn decode(&self) -> Result<String> {
        let mut unmunge = Command::new("unmunge");
        if let Some(socket) = &self.socket {
            unmunge.arg("--socket").arg(socket);
        }
        let mut child = unmunge
            .args(["--keys", "UID", "--metadata", "-", "--output", "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| refused(format!("cannot run unmunge: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // unmunge may refuse before reading it all; its status says why.
            let _ = stdin.write_all(&self.text).await;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| refused(format!("unmunge: {e}")))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            let why = why.trim().trim_start_matches("unmunge: Error: ");
            return Err(refused(format!("MUNGE credential refused: {why}")));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The user of unmunge's `UID:  alice (1000)` line.
fn parse_uid(metadata: &str) -> Option<(String, u32)> {
    let value = metadata
        .lines()
        .find_map(|line| line.strip_prefix("UID:"))?
        .trim();
    let (name, uid) = value.strip_suffix(')')?.rsplit_once(" (")?;
    Some((name.trim().to_owned(), uid.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_unmunge_metadata() {
        assert_eq!(
            parse_uid("UID:             alice (1000)\n"),
            Some(("alice".into(), 1000))
        );
        assert_eq!(parse_uid("STATUS: Success (0)\n"), None);
        assert_eq!(parse_uid("UID: x (y)\n"), None);
    }

    #[tokio::test]
    async fn writes_must_follow_each_other() {
        let mut cred = Munge::default()
            .start(&User {
                uname: String::new(),
                n_uname: 0,
                aname: String::new(),
            })
            .unwrap();
        assert_eq!(
            cred.write(0, Bytes::from_static(b"MUNGE:")).await.unwrap(),
            6
        );
        assert!(cred.write(0, Bytes::from_static(b"x")).await.is_err());
        assert!(cred.write(7, Bytes::from_static(b"x")).await.is_err());
        assert_eq!(cred.write(6, Bytes::from_static(b"ab")).await.unwrap(), 2);
        let too_long = Bytes::from(vec![b'a'; MAX_CREDENTIAL]);
        assert!(cred.write(8, too_long).await.is_err());
    }
}
