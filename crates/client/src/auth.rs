//! Proving who we are to a server that asks: Tauth makes an authentication
//! fid, a [`Prover`] runs its scheme's exchange on it, and Tattach names
//! it. MUNGE, as diod's clients do it, is the one scheme here; TLS client
//! certificates prove a user beneath 9P and need nothing of this.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;

use bytes::Bytes;
use ninep_wire::{Errno, Rread, Rwrite, Tauth, Tread, Twrite};

use crate::conn::Client;
use crate::error::Error;
use crate::fsys::{Fid, Fsys};

/// A boxed future, as [`Prover`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs one scheme's exchange on an authentication fid.
pub trait Prover: Send + Sync + std::fmt::Debug {
    /// Proves to the server, through `afid`, that we are the user whose
    /// numeric id is `n_uname` (or, if that is `NONUNAME`, the one the
    /// Tauth named).
    fn prove<'a>(&'a self, afid: &'a AuthFid, n_uname: u32) -> BoxFuture<'a, Result<(), Error>>;
}

/// An authentication fid. Dropping it clunks it.
#[derive(Debug)]
pub struct AuthFid {
    fid: Fid,
}

impl AuthFid {
    /// Reads the server's side of the exchange.
    pub async fn read(&self, offset: u64, count: u32) -> Result<Bytes, Error> {
        let fid = self.fid.number();
        let Rread { data } = self.fid.client().call(Tread { fid, offset, count }).await?;
        Ok(data)
    }

    /// Writes our side of the exchange; answers how much the server took.
    pub async fn write(&self, offset: u64, data: Bytes) -> Result<u32, Error> {
        let fid = self.fid.number();
        let Rwrite { count } = self.fid.client().call(Twrite { fid, offset, data }).await?;
        Ok(count)
    }

    /// The fid number on the wire.
    pub fn number(&self) -> ninep_wire::Fid {
        self.fid.number()
    }
}

impl Client {
    /// Tauth: an authentication fid for an attach as `uname` (or the
    /// numeric id `n_uname`) to `aname`.
    pub async fn auth(&self, uname: &str, n_uname: u32, aname: &str) -> Result<AuthFid, Error> {
        let afid = self.inner.alloc_fid();
        let msg = Tauth {
            afid,
            uname: uname.to_owned(),
            aname: aname.to_owned(),
            n_uname,
        };
        match self.inner.call(msg).await {
            Ok(r) => Ok(AuthFid {
                fid: Fid::new(self.clone(), afid, r.aqid),
            }),
            Err(e) => {
                self.inner.free_fid(afid);
                Err(e)
            }
        }
    }

    /// Attaches as a user proven by `prover`, as diod's clients do: Tauth,
    /// the exchange, then Tattach naming the afid, which is clunked after.
    /// A server that answers Tauth "not required" (ENOENT) is attached to
    /// without proof.
    pub async fn attach_proven(
        &self,
        uname: &str,
        n_uname: u32,
        aname: &str,
        prover: &dyn Prover,
    ) -> Result<Fsys, Error> {
        let afid = match self.auth(uname, n_uname, aname).await {
            Ok(afid) => afid,
            Err(e) if e.is_remote() && e.errno() == Errno::ENOENT => {
                return self.attach_as(uname, n_uname, aname).await;
            }
            Err(e) => return Err(e),
        };
        prover.prove(&afid, n_uname).await?;
        self.attach_through(Some(afid.number()), uname, n_uname, aname)
            .await
    }
}

/// MUNGE, as diod's clients prove a user: a credential of ours, from the
/// `munge` command, written to the afid.
#[derive(Debug, Clone, Default)]
pub struct Munge {
    /// munged's socket, if not the default one.
    pub socket: Option<PathBuf>,
}

impl Munge {
    /// A credential from munged for `uid` (only root may ask for another
    /// user's), or for whoever runs us.
    async fn credential(&self, uid: Option<u32>) -> Result<Vec<u8>, Error> {
        let mut munge = tokio::process::Command::new("munge");
        munge.arg("--no-input");
        if let Some(socket) = &self.socket {
            munge.arg("--socket").arg(socket);
        }
        if let Some(uid) = uid {
            munge.arg("--uid").arg(uid.to_string());
        }
        let out = munge
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::refused(Errno::EPERM, format!("cannot run munge: {e}")))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            return Err(Error::refused(Errno::EPERM, why.trim().to_owned()));
        }
        let mut cred = out.stdout;
        cred.truncate(cred.trim_ascii_end().len());
        Ok(cred)
    }
}

impl Prover for Munge {
    fn prove<'a>(&'a self, afid: &'a AuthFid, n_uname: u32) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let ours = rustix::process::geteuid().as_raw();
            let uid = (n_uname != ninep_wire::NONUNAME && n_uname != ours).then_some(n_uname);
            let cred = Bytes::from(self.credential(uid).await?);
            let mut offset = 0;
            while offset < cred.len() {
                let taken = afid.write(offset as u64, cred.slice(offset..)).await?;
                if taken == 0 {
                    return Err(Error::protocol("the server took none of the credential"));
                }
                offset += taken as usize;
            }
            Ok(())
        })
    }
}
