//! What the client reports about files, the same whatever the dialect.

use ninep_wire::consts::unix::*;
use ninep_wire::{Dialect, Qid, Rgetattr, Stat, convert};

/// A file's attributes, from a 9P2000/.u stat or a 9P2000.L getattr.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileInfo {
    /// The file's name (9P2000 and .u; for .L, the last element walked).
    pub name: String,
    /// The file's qid.
    pub qid: Qid,
    /// Unix `st_mode`: file type and permission bits.
    pub mode: u32,
    /// Plan 9 mode bits (9P2000, .u), else derived from `mode`.
    pub plan9_mode: u32,
    /// Length in bytes.
    pub size: u64,
    /// Owner's name (under 9P2000.L, the numeric id in decimal).
    pub uid: String,
    /// Group's name (under 9P2000.L, the numeric id in decimal).
    pub gid: String,
    /// Last modifier's name (empty under 9P2000.L).
    pub muid: String,
    /// Numeric ids (9P2000.u, .L).
    pub n_uid: u32,
    /// Numeric group (9P2000.u, .L).
    pub n_gid: u32,
    /// Number of hard links (1 where the dialect does not say).
    pub nlink: u64,
    /// Device number of a device file (Linux's encoding).
    pub rdev: u64,
    /// Bytes of storage, in 512-byte blocks (from the size where the
    /// dialect does not say).
    pub blocks: u64,
    /// The size of block I/O goes best in (4096 where the dialect does not
    /// say).
    pub blksize: u64,
    /// Last access, seconds since the epoch.
    pub atime: u64,
    /// Nanoseconds of the last access (9P2000.L).
    pub atime_nsec: u32,
    /// Last modification, seconds since the epoch.
    pub mtime: u64,
    /// Nanoseconds of the last modification (9P2000.L).
    pub mtime_nsec: u32,
    /// Last change of the file or its attributes, seconds since the epoch
    /// (the modification time where the dialect does not say).
    pub ctime: u64,
    /// Nanoseconds of the last change (9P2000.L).
    pub ctime_nsec: u32,
    /// 9P2000.u: symlink target or device numbers.
    pub extension: String,
}

impl FileInfo {
    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }

    /// The attributes in a 9P2000 or 9P2000.u stat.
    pub fn from_stat(s: Stat, dialect: Dialect) -> FileInfo {
        let mode = convert::unix_mode(s.mode, &s.extension, dialect);
        let rdev = match mode & S_IFMT {
            S_IFCHR | S_IFBLK => convert::device(&s.extension).map_or(0, |(_, rdev)| rdev),
            _ => 0,
        };
        FileInfo {
            name: s.name,
            qid: s.qid,
            mode,
            plan9_mode: s.mode,
            size: s.length,
            uid: s.uid,
            gid: s.gid,
            muid: s.muid,
            n_uid: s.n_uid,
            n_gid: s.n_gid,
            nlink: 1,
            rdev,
            blocks: s.length.div_ceil(512),
            blksize: 4096,
            atime: s.atime as u64,
            atime_nsec: 0,
            mtime: s.mtime as u64,
            mtime_nsec: 0,
            ctime: s.mtime as u64,
            ctime_nsec: 0,
            extension: s.extension,
        }
    }

    pub(crate) fn from_getattr(r: Rgetattr, name: String) -> FileInfo {
        let plan9_mode = convert::plan9_mode(r.mode, r.qid.ty, Dialect::Base);
        FileInfo {
            name,
            qid: r.qid,
            mode: r.mode,
            plan9_mode,
            size: r.size,
            n_uid: r.uid,
            n_gid: r.gid,
            uid: r.uid.to_string(),
            gid: r.gid.to_string(),
            muid: String::new(),
            nlink: r.nlink,
            rdev: r.rdev,
            blocks: r.blocks,
            blksize: r.blksize,
            atime: r.atime_sec,
            atime_nsec: r.atime_nsec as u32,
            mtime: r.mtime_sec,
            mtime_nsec: r.mtime_nsec as u32,
            ctime: r.ctime_sec,
            ctime_nsec: r.ctime_nsec as u32,
            extension: String::new(),
        }
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// The file's qid.
    pub qid: Qid,
    /// Full attributes where the listing carried them (9P2000, .u).
    pub info: Option<FileInfo>,
}
