//! The open files and directories: by handle, by inode, and which of them
//! may have writes on their way, so that what a request must wait for or
//! forget is found without going through every open file.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ninep_client::{File, ReadAhead, WriteBehind};

use crate::dirs::Entry;

/// An open file or directory.
pub(crate) struct Handle {
    /// Shared with the transfer that reads it ahead, while one runs.
    pub file: Arc<File>,
    /// The inode it was opened on, and whose fids opened it.
    pub ino: u64,
    pub user: u32,
    /// The open flags the server was given (O_TRUNC aside, which is done).
    pub flags: u32,
    /// A synthetic file, or one of unknown length: read and written
    /// directly, a short read going back to the reader as it is, as such
    /// files mean it, and never read ahead.
    pub exact: bool,
    pub ahead: ReadAhead,
    /// Writes taken and sent in the background, for regular files under
    /// strict caching; without, each write waits for the server.
    pub behind: Option<WriteBehind>,
    /// A 9P2000 directory's listing, read whole when a read starts at 0.
    pub listing: tokio::sync::Mutex<Vec<Entry>>,
}

/// The open files, indexed.
#[derive(Default)]
pub(crate) struct Handles {
    by_fh: HashMap<u64, Arc<Handle>>,
    /// The handles open on each inode.
    by_ino: HashMap<u64, Vec<u64>>,
    /// Handles whose writes may still be on their way: each is added once
    /// a write of it is taken, and dropped by a settle that finds it idle.
    writing: HashSet<u64>,
}

impl Handles {
    pub fn get(&self, fh: u64) -> Option<Arc<Handle>> {
        self.by_fh.get(&fh).cloned()
    }

    pub fn insert(&mut self, fh: u64, handle: Handle) {
        self.by_ino.entry(handle.ino).or_default().push(fh);
        self.by_fh.insert(fh, Arc::new(handle));
    }

    pub fn remove(&mut self, fh: u64) -> Option<Arc<Handle>> {
        let handle = self.by_fh.remove(&fh)?;
        if let Some(on_ino) = self.by_ino.get_mut(&handle.ino) {
            on_ino.retain(|&other| other != fh);
            if on_ino.is_empty() {
                self.by_ino.remove(&handle.ino);
            }
        }
        self.writing.remove(&fh);
        Some(handle)
    }

    /// The handles open on `ino`.
    pub fn on(&self, ino: u64) -> Vec<(u64, Arc<Handle>)> {
        self.by_ino
            .get(&ino)
            .into_iter()
            .flatten()
            .filter_map(|&fh| Some((fh, self.get(fh)?)))
            .collect()
    }

    /// Notes that `fh` has taken a write to send in the background: called
    /// once the write-behind holds it, so that a settle finding the handle
    /// idle before then cannot drop a mark made after.
    pub fn mark_writing(&mut self, fh: u64) {
        if self.by_fh.contains_key(&fh) {
            self.writing.insert(fh);
        }
    }

    /// The handles `which` picks among those whose writes may be on their way.
    pub fn writing(&self, which: impl Fn(u64, &Handle) -> bool) -> Vec<(u64, Arc<Handle>)> {
        self.writing
            .iter()
            .filter_map(|&fh| Some((fh, self.get(fh)?)))
            .filter(|(fh, h)| which(*fh, h))
            .collect()
    }

    /// Drops the mark of `fh` if its writes are all done.
    pub fn settled(&mut self, fh: u64) {
        let idle = self
            .by_fh
            .get(&fh)
            .is_none_or(|h| h.behind.as_ref().is_none_or(WriteBehind::is_idle));
        if idle {
            self.writing.remove(&fh);
        }
    }
}
