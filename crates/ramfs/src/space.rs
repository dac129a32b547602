//! What a ramfs may hold: its files' bytes are the server's memory, so each
//! file and the whole tree are held to a limit, and every file's memory is
//! counted against the tree's while the file exists.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ninep_server::{Error, Result};
use ninep_wire::Errno;

/// The limits of a ramfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest a file may grow, by a write or a truncation (past it:
    /// EFBIG). One write at a far offset would otherwise ask for all the
    /// memory there is.
    pub max_file_size: u64,
    /// The most memory all files together may hold, their room to grow
    /// into included (past it: ENOSPC).
    pub max_bytes: u64,
}

/// The largest a file grows by default.
pub const MAX_FILE_SIZE: u64 = 1 << 30;

impl Default for Limits {
    /// Files of at most [`MAX_FILE_SIZE`], and half of the machine's memory
    /// for them all.
    fn default() -> Limits {
        let info = rustix::system::sysinfo();
        let memory = (info.totalram as u64).saturating_mul(info.mem_unit as u64);
        Limits {
            max_file_size: MAX_FILE_SIZE,
            max_bytes: memory / 2,
        }
    }
}

/// A tree's limits and the bytes its files hold now.
#[derive(Debug)]
pub(crate) struct Space {
    limits: Limits,
    used: AtomicU64,
}

impl Space {
    pub(crate) fn new(limits: Limits) -> Arc<Space> {
        Arc::new(Space {
            limits,
            used: AtomicU64::new(0),
        })
    }

    /// Counts `more` bytes as held, if the tree has room for them.
    fn take(&self, more: u64) -> Result<()> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(more)
                    .filter(|&total| total <= self.limits.max_bytes)
            })
            .map(drop)
            .map_err(|_| Error::from_errno(Errno::ENOSPC))
    }

    fn give_back(&self, less: u64) {
        self.used.fetch_sub(less, Ordering::Relaxed);
    }
}

/// A file's bytes, counted against its tree's [`Space`] until dropped:
/// all the memory it holds, room to grow into included.
#[derive(Debug)]
pub(crate) struct Contents {
    data: Vec<u8>,
    space: Arc<Space>,
}

impl Contents {
    pub(crate) fn new(space: &Arc<Space>) -> Contents {
        Contents {
            data: Vec::new(),
            space: space.clone(),
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Makes the file `size` bytes long, zeros where it grows, if the
    /// limits allow.
    pub(crate) fn resize(&mut self, size: u64) -> Result<()> {
        let max_file = self.space.limits.max_file_size;
        if size > max_file {
            return Err(Error::from_errno(Errno::EFBIG));
        }
        let len = usize::try_from(size).map_err(|_| Error::from_errno(Errno::EFBIG))?;
        let held = self.data.capacity();
        if len > held {
            // Room to grow into, doubling as a Vec does, so that a file
            // written a piece at a time is not copied at every piece; the
            // room is memory held, so it is counted, and where the limit
            // leaves none, only what the file needs is.
            let roomy = len.max(held.saturating_mul(2)).min(max_file as usize);
            let room = match self.space.take((roomy - held) as u64) {
                Ok(()) => roomy,
                Err(_) => {
                    self.space.take((len - held) as u64)?;
                    len
                }
            };
            self.data.reserve_exact(room - self.data.len());
            self.recount(room);
            self.data.resize(len, 0);
        } else if len < self.data.len() {
            // A shrink gives its memory back.
            self.data.truncate(len);
            self.data.shrink_to_fit();
            self.recount(held);
        } else {
            self.data.resize(len, 0);
        }
        Ok(())
    }

    /// Counts the memory the file holds now, `counted` having been counted.
    fn recount(&self, counted: usize) {
        let held = self.data.capacity();
        if held > counted {
            self.space
                .used
                .fetch_add((held - counted) as u64, Ordering::Relaxed);
        } else {
            self.space.give_back((counted - held) as u64);
        }
    }

    /// Puts `data` at `offset`, growing the file to hold it.
    pub(crate) fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::from_errno(Errno::EFBIG))?;
        if end > self.data.len() as u64 {
            self.resize(end)?;
        }
        let start = offset as usize;
        self.data[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }
}

impl Drop for Contents {
    fn drop(&mut self) {
        self.space.give_back(self.data.capacity() as u64);
    }
}
