//! POSIX record locks, kept by the server (9P2000.L; with other dialects
//! the kernel keeps them, for this host only).

use std::time::Duration;

use ninep_client::File;
use ninep_wire::consts::dotl;
use ninep_wire::{Errno, Tgetlock, Tlock};

use crate::{Inner, KernelErrno, errno, fail};

/// A POSIX record lock as the kernel gives it: type (F_RDLCK, F_WRLCK,
/// F_UNLCK, which are 9P2000.L's numbers too), an inclusive byte range and
/// the owner (an open file table, for the kernel).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lock {
    pub ty: u8,
    pub start: u64,
    pub end: u64,
    pub owner: u64,
}

impl Lock {
    /// The end of a lock that runs to the end of the file (OFFSET_MAX).
    pub const TO_END: u64 = i64::MAX as u64;

    /// 9P's length: 0 means to the end of the file.
    fn length(&self) -> u64 {
        if self.end >= Self::TO_END {
            0
        } else {
            self.end.saturating_sub(self.start) + 1
        }
    }

    /// 9P names a lock's owner by a 32-bit process id.
    fn proc_id(&self) -> u32 {
        (self.owner ^ (self.owner >> 32)) as u32
    }
}

impl Inner {
    /// Takes, changes or drops `lock` on `ino` through the open file `fh`.
    /// `wait`: until no other owner holds a conflicting lock.
    pub async fn set_lock(
        &self,
        ino: u64,
        fh: u64,
        lock: Lock,
        wait: bool,
    ) -> Result<(), KernelErrno> {
        if lock.ty != dotl::LOCK_TYPE_UNLCK {
            self.locked.lock().insert((ino, lock.owner));
        }
        let h = self.handle(fh)?;
        self.lock(&h.file, lock, wait).await
    }

    /// A close of `fh` by `owner` drops the owner's record locks on `ino`.
    pub async fn unlock_on_close(&self, ino: u64, fh: u64, owner: u64) -> Result<(), KernelErrno> {
        if !self.locked.lock().remove(&(ino, owner)) {
            return Ok(());
        }
        let all = Lock {
            ty: dotl::LOCK_TYPE_UNLCK,
            start: 0,
            end: Lock::TO_END,
            owner,
        };
        let h = self.handle(fh)?;
        self.lock(&h.file, all, false).await
    }

    /// The lock that would stop `lock` being taken through the open file
    /// `fh`, if any (F_GETLK).
    pub async fn conflicting(&self, fh: u64, lock: Lock) -> Result<Option<Lock>, KernelErrno> {
        let h = self.handle(fh)?;
        let msg = Tgetlock {
            fid: h.file.fid().number(),
            ty: lock.ty,
            start: lock.start,
            length: lock.length(),
            proc_id: lock.proc_id(),
            client_id: self.conn.lock_client.clone(),
        };
        let r = self.conn.client.call(msg).await.map_err(errno)?;
        if r.ty == dotl::LOCK_TYPE_UNLCK {
            return Ok(None);
        }
        let end = match r.length {
            0 => Lock::TO_END,
            n => r.start.saturating_add(n - 1),
        };
        Ok(Some(Lock {
            ty: r.ty,
            start: r.start,
            end,
            owner: 0,
        }))
    }

    /// Sends `lock` for `file`. `wait`: retry while another owner holds a
    /// conflicting lock, as Linux's client does (servers answer "blocked"
    /// rather than hold the request).
    async fn lock(&self, file: &File, lock: Lock, wait: bool) -> Result<(), KernelErrno> {
        let mut pause = Duration::from_millis(10);
        loop {
            let msg = Tlock {
                fid: file.fid().number(),
                ty: lock.ty,
                flags: if wait { dotl::LOCK_FLAGS_BLOCK } else { 0 },
                start: lock.start,
                length: lock.length(),
                proc_id: lock.proc_id(),
                client_id: self.conn.lock_client.clone(),
            };
            let r = self.conn.client.call(msg).await.map_err(errno)?;
            match r.status {
                dotl::LOCK_SUCCESS => return Ok(()),
                dotl::LOCK_BLOCKED | dotl::LOCK_GRACE if wait => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                dotl::LOCK_BLOCKED | dotl::LOCK_GRACE => return Err(fail(Errno::EAGAIN)),
                _ => return Err(fail(Errno::ENOLCK)),
            }
        }
    }
}
