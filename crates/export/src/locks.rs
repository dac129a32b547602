//! POSIX record locks among the clients of one export, as 9P2000.L Tlock and
//! Tgetlock ask for them: byte ranges, read and write locks, owned by a
//! client and a process on it, with fcntl's conflict rules. They are kept
//! by the export, not taken on the host. A lock goes with the open fid it
//! was taken through, as a process's locks go with its descriptors: when
//! the fid is clunked, or its session ends (a client that vanished).

use std::collections::HashMap;

use ninep_server::Result;
use ninep_wire::consts::dotl::{
    LOCK_BLOCKED, LOCK_SUCCESS, LOCK_TYPE_RDLCK, LOCK_TYPE_UNLCK, LOCK_TYPE_WRLCK,
};
use ninep_wire::{Rgetlock, Tgetlock, Tlock};
use parking_lot::Mutex;
use std::sync::Arc;

use crate::{Export, ExportFile};

/// Who holds a lock: the client's id string and the process on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub client: String,
    pub proc_id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    pub owner: Owner,
    /// The open fid it was taken through ([`opened_by`]).
    pub via: usize,
    pub write: bool,
    pub start: u64,
    /// Exclusive end; u64::MAX means to the end of the file.
    pub end: u64,
}

/// Locks by file (device and inode).
#[derive(Debug, Default)]
pub struct LockTable {
    files: Mutex<HashMap<(u64, u64), Vec<Lock>>>,
}

/// A lock's end from 9P's start and length (0 = to the end of file).
pub fn end_of(start: u64, length: u64) -> u64 {
    if length == 0 {
        u64::MAX
    } else {
        start.saturating_add(length)
    }
}

fn overlaps(a: &Lock, start: u64, end: u64) -> bool {
    a.start < end && start < a.end
}

impl LockTable {
    /// Takes, changes or releases a lock, through the open fid `via`; the
    /// Rlock status.
    pub fn lock(
        &self,
        file: (u64, u64),
        owner: Owner,
        via: usize,
        ty: u8,
        start: u64,
        end: u64,
    ) -> u8 {
        let mut files = self.files.lock();
        let locks = files.entry(file).or_default();
        if ty != LOCK_TYPE_UNLCK
            && conflict(locks, &owner, ty == LOCK_TYPE_WRLCK, start, end).is_some()
        {
            return LOCK_BLOCKED;
        }
        // The owner's own locks in the range are replaced (split if needed).
        let mut kept = Vec::with_capacity(locks.len() + 1);
        for l in locks.drain(..) {
            if l.owner != owner || !overlaps(&l, start, end) {
                kept.push(l);
                continue;
            }
            if l.start < start {
                kept.push(Lock {
                    end: start,
                    ..l.clone()
                });
            }
            if l.end > end {
                kept.push(Lock { start: end, ..l });
            }
        }
        if ty == LOCK_TYPE_RDLCK || ty == LOCK_TYPE_WRLCK {
            kept.push(Lock {
                owner,
                via,
                write: ty == LOCK_TYPE_WRLCK,
                start,
                end,
            });
        }
        *locks = kept;
        if locks.is_empty() {
            files.remove(&file);
        }
        LOCK_SUCCESS
    }

    /// Releases every lock taken through the open fid `via`.
    pub fn release(&self, file: (u64, u64), via: usize) {
        let mut files = self.files.lock();
        if let Some(locks) = files.get_mut(&file) {
            locks.retain(|l| l.via != via);
            if locks.is_empty() {
                files.remove(&file);
            }
        }
    }

    /// The first lock that would stop `owner` taking this one.
    pub fn test(
        &self,
        file: (u64, u64),
        owner: &Owner,
        write: bool,
        start: u64,
        end: u64,
    ) -> Option<Lock> {
        let files = self.files.lock();
        files
            .get(&file)
            .and_then(|locks| conflict(locks, owner, write, start, end).cloned())
    }
}

fn conflict<'a>(
    locks: &'a [Lock],
    owner: &Owner,
    write: bool,
    start: u64,
    end: u64,
) -> Option<&'a Lock> {
    locks
        .iter()
        .find(|l| l.owner != *owner && overlaps(l, start, end) && (write || l.write))
}

/// Which open fid `file` is: its descriptor's address, the same for as
/// long as the fid is open.
fn opened_by(file: &ExportFile) -> Result<usize> {
    Ok(Arc::as_ptr(&file.opened()?) as usize)
}

/// Tlock on `file`, which must be open: the Rlock status.
pub(crate) fn lock(export: &Export, file: &ExportFile, lock: &Tlock) -> Result<u8> {
    let owner = Owner {
        client: lock.client_id.clone(),
        proc_id: lock.proc_id,
    };
    let end = end_of(lock.start, lock.length);
    Ok(export.inner.locks.lock(
        (file.node.dev, file.node.ino),
        owner,
        opened_by(file)?,
        lock.ty,
        lock.start,
        end,
    ))
}

/// The fid of `file` is gone: the locks taken through it go too.
pub(crate) fn clunked(export: &Export, file: &ExportFile) {
    if let Ok(via) = opened_by(file) {
        export
            .inner
            .locks
            .release((file.node.dev, file.node.ino), via);
    }
}

/// Tgetlock on `file`: the first lock in the way, or the lock asked about
/// with type UNLCK if none is.
pub(crate) fn getlock(export: &Export, file: &ExportFile, lock: &Tgetlock) -> Rgetlock {
    let owner = Owner {
        client: lock.client_id.clone(),
        proc_id: lock.proc_id,
    };
    let write = lock.ty == LOCK_TYPE_WRLCK;
    let end = end_of(lock.start, lock.length);
    match export.inner.locks.test(
        (file.node.dev, file.node.ino),
        &owner,
        write,
        lock.start,
        end,
    ) {
        Some(held) => Rgetlock {
            ty: if held.write {
                LOCK_TYPE_WRLCK
            } else {
                LOCK_TYPE_RDLCK
            },
            start: held.start,
            length: if held.end == u64::MAX {
                0
            } else {
                held.end - held.start
            },
            proc_id: held.owner.proc_id,
            client_id: held.owner.client,
        },
        None => Rgetlock {
            ty: LOCK_TYPE_UNLCK,
            start: lock.start,
            length: lock.length,
            proc_id: lock.proc_id,
            client_id: lock.client_id.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(p: u32) -> Owner {
        Owner {
            client: "host".into(),
            proc_id: p,
        }
    }

    #[test]
    fn fcntl_rules() {
        let t = LockTable::default();
        let f = (1, 2);
        assert_eq!(t.lock(f, who(1), 1, LOCK_TYPE_RDLCK, 0, 100), LOCK_SUCCESS);
        // Readers share; a writer is refused over a read lock.
        assert_eq!(t.lock(f, who(2), 2, LOCK_TYPE_RDLCK, 50, 150), LOCK_SUCCESS);
        assert_eq!(t.lock(f, who(3), 3, LOCK_TYPE_WRLCK, 90, 95), LOCK_BLOCKED);
        assert_eq!(
            t.test(f, &who(3), true, 90, 95).map(|l| l.owner),
            Some(who(1))
        );
        // Beyond both read locks a writer is fine.
        assert_eq!(
            t.lock(f, who(3), 3, LOCK_TYPE_WRLCK, 150, end_of(150, 0)),
            LOCK_SUCCESS
        );
        // Unlocking the middle of a lock splits it.
        assert_eq!(t.lock(f, who(1), 1, LOCK_TYPE_UNLCK, 10, 20), LOCK_SUCCESS);
        assert!(t.test(f, &who(4), true, 12, 18).is_none());
        assert_eq!(
            t.test(f, &who(4), true, 0, 10).map(|l| l.owner),
            Some(who(1))
        );
        // A lock holder's own locks never conflict with it.
        assert_eq!(t.lock(f, who(1), 1, LOCK_TYPE_WRLCK, 0, 10), LOCK_SUCCESS);
        // Its fid clunked, its locks go; the others' stay.
        t.release(f, 1);
        assert!(t.test(f, &who(4), true, 0, 10).is_none());
        assert_eq!(
            t.test(f, &who(4), true, 50, 60).map(|l| l.owner),
            Some(who(2))
        );
    }
}
