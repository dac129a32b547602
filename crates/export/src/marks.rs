//! Plan 9's append-only (DMAPPEND) and exclusive-use (DMEXCL) marks of a
//! regular file. Unix files have no such bits, so a file made through the
//! export with either keeps them in an extended attribute, and its qids
//! carry them as QTAPPEND and QTEXCL.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ninep_wire::consts::mode::{DMAPPEND, DMEXCL};
use ninep_wire::{Qid, QidType};
use parking_lot::Mutex;
use rustix::fs::{FileType, Stat, XattrFlags};
use rustix::io::Errno;

use crate::Inner;
use crate::confine::Node;

/// The extended attribute holding a file's marks, one letter each.
const PLAN9_MARKS: &str = "user.9p.mode";

/// Files whose marks are remembered at most; past it the memory starts
/// afresh.
const SEEN_MAX: usize = 1 << 16;

/// The marks read so far, by file, each with the file's ctime when read.
/// Setting an extended attribute changes a file's ctime, and a new file on
/// a reused inode has a new one, so marks read at the same ctime are still
/// the file's: most qids are made without reading the attribute again
/// (through /proc, a path lookup and a read each). Only marks read a while
/// after the file's last change are kept (see [`SETTLED`]), and only marks
/// the reader could read: another user may be refused the attribute.
#[derive(Default)]
pub(crate) struct MarksSeen(Mutex<HashMap<FileId, Seen>>);

/// How long after a file's last change its marks are remembered. A file
/// system stamps changes with a clock of coarse ticks (some, FAT, in steps
/// of 2 s): a mark set within the tick of the last change leaves the ctime
/// as it was, so marks read while that tick may still be running could be
/// outdated at the same ctime. Git trusts its index the same way.
const SETTLED: Duration = Duration::from_secs(2);

/// A file by its device and inode numbers.
type FileId = (u64, u64);

/// Marks as read, and the file's ctime (seconds, nanoseconds) then.
#[derive(Clone, Copy)]
struct Seen {
    ctime: (i64, i64),
    marks: QidType,
}

/// Each mark: its mode bit, its qid bit and its letter in the attribute.
const MARKS: [(u32, QidType, u8); 2] = [
    (DMAPPEND, QidType::APPEND, b'a'),
    (DMEXCL, QidType::EXCL, b'l'),
];

impl Inner {
    /// The marks of the regular file whose status is `st`, read (when not
    /// remembered) at the path `path` gives. That path is followed only
    /// when it is one of the server's own `/proc/self/fd` links.
    pub(crate) fn marks(&self, st: &Stat, path: impl FnOnce() -> String, follow: bool) -> QidType {
        let file = (st.st_dev, st.st_ino);
        let ctime = (st.st_ctime, st.st_ctime_nsec as i64);
        if let Some(seen) = self.marks_seen.0.lock().get(&file)
            && seen.ctime == ctime
        {
            return seen.marks;
        }
        let Some(marks) = read_marks(&path(), follow) else {
            return QidType::FILE;
        };
        if settled(ctime) {
            let mut all = self.marks_seen.0.lock();
            if all.len() >= SEEN_MAX {
                all.clear();
            }
            all.insert(file, Seen { ctime, marks });
        }
        marks
    }

    /// The qid of `node`, whose status is `st`, with its marks.
    pub(crate) fn marked(&self, node: &Node, st: &Stat) -> Qid {
        let mut qid = self.qid(st);
        if node.ty == FileType::RegularFile {
            qid.ty = qid.ty | self.marks(st, || self.proc_path(node), true);
        }
        qid
    }

    /// Gives `node`, a file just made with `mode`, the marks that mode has.
    pub(crate) fn mark(&self, node: &Node, mode: u32) -> rustix::io::Result<()> {
        let letters: Vec<u8> = MARKS
            .iter()
            .filter(|(dm, ..)| mode & dm != 0)
            .map(|(.., letter)| *letter)
            .collect();
        if letters.is_empty() {
            return Ok(());
        }
        rustix::fs::setxattr(
            self.proc_path(node).as_str(),
            PLAN9_MARKS,
            &letters,
            XattrFlags::empty(),
        )
    }
}

/// Whether a file last changed at `ctime` changed longer than [`SETTLED`]
/// ago.
fn settled((sec, nsec): (i64, i64)) -> bool {
    let changed = i128::from(sec) * 1_000_000_000 + i128::from(nsec);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    now - changed > SETTLED.as_nanos() as i128
}

/// The marks in the attribute of the file at `path` (none without one);
/// None if the attribute could not be read (not the caller's to read).
fn read_marks(path: &str, follow: bool) -> Option<QidType> {
    let mut buf = [0u8; 8];
    let got = if follow {
        rustix::fs::getxattr(path, PLAN9_MARKS, &mut buf)
    } else {
        rustix::fs::lgetxattr(path, PLAN9_MARKS, &mut buf)
    };
    let n = match got {
        Ok(n) => n,
        Err(Errno::NODATA) => return Some(QidType::FILE),
        Err(_) => return None,
    };
    let mut ty = QidType::FILE;
    for &b in &buf[..n] {
        for (_, bit, letter) in MARKS {
            if b == letter {
                ty = ty | bit;
            }
        }
    }
    Some(ty)
}
