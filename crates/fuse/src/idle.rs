//! Files closed under loose caching but left open at the server for a
//! while, so that opening one again soon (PostMark appending to a file it
//! wrote, a build reading a header once more) is answered without a round
//! trip, as Linux's SMB client defers its closes. A file kept open is given
//! out again only for as long as loose caching trusts attributes (counted
//! from the close), and is taken to be unchanged by others: a change
//! another client makes in that time is missed by the open, as loose
//! caching misses it in the size and times the kernel keeps.
//!
//! Each is kept on the inode and user it was opened for, with the open
//! flags it was opened with: it serves a later open asking for the same
//! flags, or for less access where it was opened for reading and writing.
//! An open that truncates never takes one. The oldest go once more than
//! the mount allows are kept; the server sees their clunks.
//!
//! A server that runs out of descriptors gets them all back before the
//! request that met the shortage is made again ([`Inner::with_room`]).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fuser::FileType;
use ninep_client::File;
use ninep_wire::consts::dotl;
use ninep_wire::{Errno, QidType};

use crate::handles::Handle;
use crate::{Inner, KernelErrno, fail, files};

/// Open files (`F`: the mount's are its client's) kept after their close,
/// by inode.
pub(crate) struct IdleFiles<F> {
    /// Each inode's, one per user.
    by_ino: HashMap<u64, Vec<Idle<F>>>,
    /// (when kept, inode, user), oldest first: a record whose file has
    /// gone or been kept again since is passed over.
    order: VecDeque<(Instant, u64, u32)>,
    /// How many are kept now.
    count: usize,
    /// Most kept at once (0: none).
    most: usize,
    /// How long one is kept.
    keep_for: Duration,
}

struct Idle<F> {
    user: u32,
    file: F,
    /// The open flags it was opened with (O_TRUNC aside, which is done).
    flags: u32,
    since: Instant,
}

/// Whether a file opened with `kept` serves an open asking for `wanted`:
/// the same flags, and the same access or less.
fn serves(kept: u32, wanted: u32) -> bool {
    let (kept_mode, wanted_mode) = (kept & dotl::O_ACCMODE, wanted & dotl::O_ACCMODE);
    kept & !dotl::O_ACCMODE == wanted & !dotl::O_ACCMODE
        && (kept_mode == wanted_mode || kept_mode == dotl::O_RDWR)
}

impl<F> IdleFiles<F> {
    pub fn new(most: usize, keep_for: Duration) -> IdleFiles<F> {
        IdleFiles {
            by_ino: HashMap::new(),
            order: VecDeque::new(),
            count: 0,
            most,
            keep_for,
        }
    }

    /// Keeps `file`, just closed, of `user`'s on `ino`, opened with
    /// `flags`. Where the user has one there already, the one opened for
    /// more access stays.
    pub fn keep(&mut self, ino: u64, user: u32, file: F, flags: u32, now: Instant) {
        if self.most == 0 {
            return;
        }
        let kept = self.by_ino.entry(ino).or_default();
        if let Some(there) = kept.iter_mut().find(|idle| idle.user == user) {
            if serves(there.flags, flags) && !serves(flags, there.flags) {
                return;
            }
            there.file = file;
            there.flags = flags;
            there.since = now;
        } else {
            kept.push(Idle {
                user,
                file,
                flags,
                since: now,
            });
            self.count += 1;
        }
        self.order.push_back((now, ino, user));
        self.expire(now);
        // Records of files taken or kept again pile up where files are
        // reopened often: dropped once they are most of the queue.
        if self.order.len() > self.most.saturating_mul(2) {
            let by_ino = &self.by_ino;
            self.order.retain(|&(since, ino, user)| {
                by_ino.get(&ino).is_some_and(|kept| {
                    kept.iter()
                        .any(|idle| idle.user == user && idle.since == since)
                })
            });
        }
    }

    /// A file kept of `user`'s on `ino` that serves an open with `flags`,
    /// no longer kept, and the flags it was opened with.
    pub fn take(&mut self, ino: u64, user: u32, flags: u32, now: Instant) -> Option<(F, u32)> {
        if flags & dotl::O_TRUNC != 0 {
            return None;
        }
        self.expire(now);
        let kept = self.by_ino.get_mut(&ino)?;
        let at = kept
            .iter()
            .position(|idle| idle.user == user && serves(idle.flags, flags))?;
        let idle = kept.swap_remove(at);
        if kept.is_empty() {
            self.by_ino.remove(&ino);
        }
        self.count -= 1;
        Some((idle.file, idle.flags))
    }

    /// Clunks the files kept on `ino`: it was removed or forgotten.
    pub fn forget(&mut self, ino: u64) {
        if let Some(kept) = self.by_ino.remove(&ino) {
            self.count -= kept.len();
        }
    }

    /// All those kept, no longer kept.
    pub fn drain(&mut self) -> Vec<F> {
        self.order.clear();
        self.count = 0;
        self.by_ino
            .drain()
            .flat_map(|(_, kept)| kept.into_iter().map(|idle| idle.file))
            .collect()
    }

    /// Clunks those kept longer than allowed, and the oldest beyond the
    /// most allowed.
    pub fn expire(&mut self, now: Instant) {
        while let Some(&(since, ino, user)) = self.order.front() {
            let stale = now.duration_since(since) >= self.keep_for;
            if !stale && self.count <= self.most {
                break;
            }
            self.order.pop_front();
            let Some(kept) = self.by_ino.get_mut(&ino) else {
                continue;
            };
            // Only the file this record was made for.
            let Some(at) = kept
                .iter()
                .position(|idle| idle.user == user && idle.since == since)
            else {
                continue;
            };
            kept.swap_remove(at);
            if kept.is_empty() {
                self.by_ino.remove(&ino);
            }
            self.count -= 1;
        }
    }
}

/// Giving kept files back: to a server out of descriptors, and the
/// choice of which closes may keep one.
impl Inner {
    /// What `call` gets, asked once more if the server had run out of
    /// descriptors and this mount, keeping files open, had some to give
    /// back (or gave them back meanwhile): they are clunked before the
    /// second call. Every request that walks, opens or makes may meet the
    /// shortage at a server whose fids hold descriptors (an export's do),
    /// even for a name that is not there. ninep's export leaves nothing
    /// made when it refuses a make; a server that does may answer the
    /// second call with EEXIST.
    pub(crate) async fn with_room<T, F>(&self, call: impl Fn() -> F) -> Result<T, KernelErrno>
    where
        F: Future<Output = Result<T, KernelErrno>>,
    {
        let short = |e| e == fail(Errno::EMFILE) || e == fail(Errno::ENFILE);
        let before = self.rooms_made.load(Ordering::Acquire);
        match call().await {
            Err(e) if short(e) && self.made_room(before).await => call().await,
            done => done,
        }
    }

    /// Gives the files kept open back to the server, unless that was done
    /// since the count of rooms made was `before`; whether there is room
    /// now that there was not.
    async fn made_room(&self, before: u64) -> bool {
        let _alone = self.making_room.lock().await;
        if self.rooms_made.load(Ordering::Acquire) != before {
            return true;
        }
        let made = self.close_idle().await;
        if made {
            self.rooms_made.fetch_add(1, Ordering::Release);
        }
        made
    }

    /// Clunks every file kept open, all at once, and returns once the
    /// server has answered for each that nothing else holds (one a task
    /// still holds is clunked when it lets go); false if none was kept.
    pub(crate) async fn close_idle(&self) -> bool {
        let kept = self.idle.lock().drain();
        let made = !kept.is_empty();
        let closing = kept
            .into_iter()
            .filter_map(|file| Arc::try_unwrap(file).ok())
            .map(File::close);
        futures::future::join_all(closing).await;
        made
    }

    /// Whether the file `h` had open may stay open after its close: a
    /// regular file cached in pages, not for exclusive use, of which nobody
    /// may still hold a lock through this mount (a lock held by a fid goes
    /// when it is clunked).
    pub(crate) fn may_keep_open(&self, h: &Handle) -> bool {
        let regular = self
            .nodes()
            .given_attr(h.ino)
            .is_some_and(|attr| attr.kind == FileType::RegularFile);
        // One open at a time: kept, it would refuse every other.
        let exclusive = h.file.qid().ty.contains(QidType::EXCL);
        // Opened as the writeback cache has files opened, or no open
        // would ever ask for it again.
        let reusable = files::writeback_flags(h.flags) == h.flags;
        regular
            && reusable
            && !exclusive
            && !h.exact
            && !self.locked.lock().iter().any(|&(ino, _)| ino == h.ino)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Duration = Duration::from_secs(20);
    const RW: u32 = dotl::O_RDWR | dotl::O_LARGEFILE;
    const RO: u32 = dotl::O_RDONLY | dotl::O_LARGEFILE;

    #[test]
    fn a_file_serves_the_same_access_or_less() {
        let now = Instant::now();
        let mut idle = IdleFiles::new(8, KEEP);
        idle.keep(1, 0, "rw", RW, now);
        assert_eq!(idle.take(1, 1, RO, now), None, "another user's");
        assert_eq!(idle.take(1, 0, RO | dotl::O_SYNC, now), None, "other flags");
        assert_eq!(idle.take(1, 0, RO | dotl::O_TRUNC, now), None);
        assert_eq!(idle.take(1, 0, RO, now), Some(("rw", RW)));
        assert_eq!(idle.take(1, 0, RO, now), None, "given out once");
        idle.keep(2, 0, "ro", RO, now);
        assert_eq!(idle.take(2, 0, RW, now), None, "more access");
        // Of two, the one open for more stays.
        idle.keep(2, 0, "rw", RW, now);
        idle.keep(2, 0, "ro again", RO, now);
        assert_eq!(idle.take(2, 0, RO, now), Some(("rw", RW)));
        assert_eq!(idle.count, 0);
    }

    #[test]
    fn files_go_when_old_or_too_many() {
        let start = Instant::now();
        let mut idle = IdleFiles::new(2, KEEP);
        idle.keep(1, 0, "one", RW, start);
        idle.keep(2, 0, "two", RW, start + Duration::from_secs(1));
        idle.keep(3, 0, "three", RW, start + Duration::from_secs(2));
        let later = start + Duration::from_secs(3);
        assert_eq!(idle.take(1, 0, RW, later), None, "the oldest went");
        assert_eq!(idle.count, 2);
        let late = start + Duration::from_secs(21);
        assert_eq!(idle.take(2, 0, RW, late), None, "kept too long");
        assert_eq!(idle.take(3, 0, RW, late), Some(("three", RW)));
        idle.keep(4, 0, "four", RW, late);
        idle.forget(4);
        assert_eq!(idle.take(4, 0, RW, late), None);
        assert_eq!(idle.count, 0);
        idle.keep(5, 0, "five", RW, late);
        idle.keep(6, 1, "six", RO, late);
        let mut all = idle.drain();
        all.sort();
        assert_eq!(all, ["five", "six"]);
        assert_eq!(idle.take(5, 0, RW, late), None);
    }

    #[test]
    fn files_kept_again_and_again_leave_few_records() {
        let start = Instant::now();
        let mut idle = IdleFiles::new(4, KEEP);
        for i in 0..1000 {
            let now = start + Duration::from_micros(i);
            idle.keep(1, 0, i, RW, now);
            assert_eq!(idle.take(1, 0, RW, now), Some((i, RW)));
        }
        assert!(idle.order.len() <= 8, "{} records", idle.order.len());
    }

    #[test]
    fn nothing_is_kept_where_none_may_be() {
        let now = Instant::now();
        let mut idle = IdleFiles::new(0, KEEP);
        idle.keep(1, 0, "one", RW, now);
        assert_eq!(idle.take(1, 0, RW, now), None);
    }
}
