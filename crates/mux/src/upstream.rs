//! The connections to mounted servers, one per address and shared by every
//! client of the mux, and the translation of their qids into one space.
//!
//! A server's files are reached only through [`RemoteFile`]s, whose every
//! operation takes a turn in the server's request window for the requests
//! it sends. The turn is this module's, so no other part of the mux can
//! send outside the window, forget to wait for it, or wait for a second
//! turn while holding one. The one exception is reading ahead (the client
//! library's [`ninep_client::ReadAhead`]):
//! its transfer is bounded by the read-ahead instead, and a client's read
//! holds a turn while it waits for what the transfer brings.

mod remote;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};

use ninep_client::{Client, Dialer, Options, Prover, ReadAhead, ReadAheadBudget, Recovery};
use ninep_devices::dial::{Gateways, Route, connect_as, route};
use ninep_server::{Error, Result};
use ninep_wire::{Dialect, Errno, Qid};
use parking_lot::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};

pub(crate) use remote::RemoteFile;

/// The source number of the mux's own files (its directories and `#ns`).
pub(crate) const LOCAL: u32 = 0;

/// The longest a server may take to be dialled and to answer Tversion:
/// mounts of one address wait for each other's dial.
const DIAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One mounted server's connection.
pub(crate) struct Upstream {
    /// Names this connection in qids and mount points; never reused.
    pub id: u32,
    addr: String,
    client: Client,
    /// Requests in flight to this server. Past it, requests wait their turn
    /// in arrival order (holding their clients' request slots), so a slow
    /// server holds back its own clients and no one else, and the server's
    /// tags and request limit are never exceeded.
    window: Semaphore,
    /// What open files on it read ahead.
    read_ahead: ReadAheads,
    /// The read-aheads of the files open on this server, by qid.path: a
    /// write or a resize through any fid of a file makes what every one of
    /// them holds stale.
    read_aheads: Mutex<HashMap<u64, Vec<Weak<ReadAhead>>>>,
    /// What proves the user of an attach, where the server asks.
    prover: Option<Arc<dyn Prover>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish()
    }
}

impl Upstream {
    /// A turn to send one request (or one short sequence of them), for
    /// this module's handles alone (see the module's comment).
    async fn turn(&self) -> SemaphorePermit<'_> {
        self.window
            .acquire()
            .await
            .expect("the window is never closed")
    }

    /// Whether the server has hung up.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn dialect(&self) -> Dialect {
        self.client.dialect()
    }

    /// The root of tree `aname` of the server, attached to as `uname`.
    pub async fn attach(
        self: &Arc<Self>,
        uname: &str,
        n_uname: u32,
        aname: &str,
    ) -> Result<RemoteFile> {
        let _turn = self.turn().await;
        let attached = match &self.prover {
            Some(prover) => {
                self.client
                    .attach_proven(uname, n_uname, aname, prover.as_ref())
                    .await
            }
            None => self.client.attach_as(uname, n_uname, aname).await,
        };
        let fsys = attached.map_err(|e| self.error(e))?;
        Ok(RemoteFile::walked(self.clone(), fsys.into_root()))
    }

    /// A read-ahead for an open file whose qid.path is `path`, known to
    /// [`Upstream::forget_read_ahead`] while it lives.
    fn read_ahead_for(self: &Arc<Self>, path: u64) -> KnownReadAhead {
        let ahead = Arc::new(self.read_ahead.for_file());
        let mut all = self.read_aheads.lock();
        let of_file = all.entry(path).or_default();
        of_file.retain(|a| a.strong_count() > 0);
        of_file.push(Arc::downgrade(&ahead));
        KnownReadAhead {
            up: self.clone(),
            path,
            ahead,
        }
    }

    /// Forgets what was read ahead of the file whose qid.path is `path`
    /// through any of its open fids: it was just written or resized.
    async fn forget_read_ahead(&self, path: u64) {
        let live: Vec<Arc<ReadAhead>> = self
            .read_aheads
            .lock()
            .get(&path)
            .map(|of_file| of_file.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default();
        for ahead in live {
            ahead.forget().await;
        }
    }

    /// The error a client gets for a failed upstream request.
    fn error(&self, e: ninep_client::Error) -> Error {
        match e {
            ninep_client::Error::Remote { errno, ename } => Error::with_errno(errno, ename),
            ninep_client::Error::Closed => Error::with_errno(
                Errno::EIO,
                format!("mount point gone: {} hung up", self.addr),
            ),
            other => Error::with_errno(other.errno(), format!("{}: {other}", self.addr)),
        }
    }
}

/// An open file's read-ahead, which its server's connection knows of
/// until it is dropped, so that a write through any fid of the file
/// forgets what it holds.
pub(crate) struct KnownReadAhead {
    up: Arc<Upstream>,
    path: u64,
    ahead: Arc<ReadAhead>,
}

impl std::ops::Deref for KnownReadAhead {
    type Target = ReadAhead;
    fn deref(&self) -> &ReadAhead {
        &self.ahead
    }
}

impl Drop for KnownReadAhead {
    fn drop(&mut self) {
        let mut all = self.up.read_aheads.lock();
        if let Some(of_file) = all.get_mut(&self.path) {
            let this = Arc::downgrade(&self.ahead);
            of_file.retain(|a| a.strong_count() > 0 && !a.ptr_eq(&this));
            if of_file.is_empty() {
                all.remove(&self.path);
            }
        }
    }
}

/// What the mux reads ahead of its clients: per open file, and for all
/// of them together.
#[derive(Clone)]
pub(crate) struct ReadAheads {
    pub per_file: u64,
    pub budget: ReadAheadBudget,
}

impl ReadAheads {
    /// The read-ahead of one open file.
    fn for_file(&self) -> ReadAhead {
        ReadAhead::new(self.per_file).sharing(&self.budget)
    }
}

/// Every upstream connection, by address.
pub(crate) struct Upstreams {
    conns: tokio::sync::Mutex<HashMap<String, Arc<Upstream>>>,
    next_id: AtomicU32,
    window: usize,
    read_ahead: ReadAheads,
    options: Options,
    dialer: Dialer,
    /// Who the mux is to gateways on the way to a server, proven by its
    /// prover: its own user; none when it attaches per user.
    gateway_user: Option<String>,
    prover: Option<Arc<dyn Prover>>,
    recovery: Option<Recovery>,
}

impl Upstreams {
    pub fn new(
        window: usize,
        read_ahead: ReadAheads,
        options: Options,
        dialer: Dialer,
        gateway_user: Option<String>,
        prover: Option<Arc<dyn Prover>>,
        recovery: Option<Recovery>,
    ) -> Upstreams {
        Upstreams {
            conns: tokio::sync::Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(LOCAL + 1),
            window: window.max(1),
            read_ahead,
            options,
            dialer,
            gateway_user,
            prover,
            recovery,
        }
    }

    /// The live connection to `addr`, dialled if there is none (or the last
    /// one died: that is how a dead server is remounted).
    pub async fn get(&self, addr: &str) -> std::result::Result<Arc<Upstream>, ninep_client::Error> {
        // Held across the dial so that two mounts of one address share it.
        let mut conns = self.conns.lock().await;
        if let Some(up) = conns.get(addr).filter(|up| !up.client.is_closed()) {
            return Ok(up.clone());
        }
        let options = self.options.clone();
        let dial = async {
            match (route(addr), &self.recovery) {
                (Route::Direct(addr), Some(recovery)) => {
                    Client::dial_recovering(addr, &self.dialer, options, recovery.clone()).await
                }
                // An address may go through a gateway's /net
                // (GW:/tcp!host!port), which the mux attaches to as its
                // own user, proving it as to the servers (as nobody in
                // particular when it attaches per user).
                _ => {
                    let gateways = match &self.gateway_user {
                        Some(uname) => Gateways {
                            uname,
                            prover: self.prover.as_deref(),
                        },
                        None => Gateways::as_user("none"),
                    };
                    connect_as(addr, &self.dialer, options, gateways).await
                }
            }
        };
        let client = tokio::time::timeout(DIAL_TIMEOUT, dial)
            .await
            .map_err(|_| std::io::Error::from_raw_os_error(Errno::ETIMEDOUT.0 as i32))??;
        let up = Arc::new(Upstream {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            addr: addr.to_owned(),
            client,
            window: Semaphore::new(self.window),
            read_ahead: self.read_ahead.clone(),
            read_aheads: Mutex::default(),
            prover: self.prover.clone(),
        });
        conns.insert(addr.to_owned(), up.clone());
        Ok(up)
    }
}

/// Qid translation. A client sees one server, so qids of different servers
/// must not collide. As in Hickey's mux, the low 48 bits of a qid path pass
/// through and the top 16 bits are replaced: each (source, top 16 bits)
/// pair met gets the next free 16-bit prefix. Servers number files from 0
/// up, so each needs few prefixes; two servers never share one. Once 65,536
/// prefixes are given out, further new ones are refused with EOVERFLOW.
pub(crate) struct Qids {
    prefixes: Mutex<HashMap<(u32, u16), u16>>,
}

impl Qids {
    pub fn new() -> Qids {
        // The mux's own files use prefix 0, as they are numbered.
        Qids {
            prefixes: Mutex::new(HashMap::from([((LOCAL, 0), 0)])),
        }
    }

    /// `qid` of source `src` as clients see it.
    pub fn translate(&self, src: u32, qid: Qid) -> Result<Qid> {
        let top = (qid.path >> 48) as u16;
        let mut prefixes = self.prefixes.lock();
        let next = prefixes.len();
        let prefix = match prefixes.get(&(src, top)) {
            Some(&p) => p,
            None if next <= u16::MAX as usize => {
                prefixes.insert((src, top), next as u16);
                next as u16
            }
            None => {
                return Err(Error::with_errno(Errno::EOVERFLOW, "qid space exhausted"));
            }
        };
        Ok(Qid {
            path: (u64::from(prefix) << 48) | (qid.path & 0xffff_ffff_ffff),
            ..qid
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qids_of_two_servers_never_collide() {
        let qids = Qids::new();
        let q = |path| Qid {
            path,
            ..Qid::default()
        };
        let a = qids.translate(1, q(1)).unwrap();
        let b = qids.translate(2, q(1)).unwrap();
        assert_ne!(a.path, b.path);
        assert_eq!(a.path & 0xffff_ffff_ffff, 1);
        // The same file keeps its qid.
        assert_eq!(qids.translate(1, q(1)).unwrap(), a);
        // High bits in use get a prefix of their own.
        let c = qids.translate(1, q(0xabcd_0000_0000_0001)).unwrap();
        assert_ne!(c.path, a.path);
        assert_eq!(qids.translate(LOCAL, q(7)).unwrap().path, 7);
    }

    #[test]
    fn prefixes_run_out_with_an_error() {
        let qids = Qids::new();
        for top in 0..u16::MAX {
            qids.translate(
                1,
                Qid {
                    path: u64::from(top) << 48,
                    ..Qid::default()
                },
            )
            .unwrap();
        }
        let last = Qid {
            path: u64::from(u16::MAX) << 48,
            ..Qid::default()
        };
        assert_eq!(
            qids.translate(1, last).unwrap_err().errno(),
            Errno::EOVERFLOW
        );
    }
}
