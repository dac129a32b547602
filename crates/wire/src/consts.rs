//! Protocol constants, grouped by where they appear, named as the Plan 9
//! manual and Linux's `include/net/9p/9p.h` name them.

// Each name is the manual's (or 9p.h's); a group's comment says where its
// constants appear, and the comments below note what the name alone does not.
#![allow(missing_docs)]

/// Plan 9 mode bits: `Stat::mode`, `Tcreate::perm` (9P2000 and .u).
pub mod mode {
    pub const DMDIR: u32 = 0x8000_0000;
    pub const DMAPPEND: u32 = 0x4000_0000;
    pub const DMEXCL: u32 = 0x2000_0000;
    pub const DMMOUNT: u32 = 0x1000_0000;
    pub const DMAUTH: u32 = 0x0800_0000;
    pub const DMTMP: u32 = 0x0400_0000;
    /// 9P2000.u.
    pub const DMSYMLINK: u32 = 0x0200_0000;
    /// 9P2000.u (Linux): hard link, only in Tcreate.
    pub const DMLINK: u32 = 0x0100_0000;
    pub const DMDEVICE: u32 = 0x0080_0000;
    pub const DMNAMEDPIPE: u32 = 0x0020_0000;
    pub const DMSOCKET: u32 = 0x0010_0000;
    pub const DMSETUID: u32 = 0x0008_0000;
    pub const DMSETGID: u32 = 0x0004_0000;
    pub const DMSETVTX: u32 = 0x0001_0000;
    pub const DMREAD: u32 = 0o4;
    pub const DMWRITE: u32 = 0o2;
    pub const DMEXEC: u32 = 0o1;
}

/// Topen and Tcreate `mode[1]` (9P2000 and .u).
pub mod open {
    pub const OREAD: u8 = 0;
    pub const OWRITE: u8 = 1;
    pub const ORDWR: u8 = 2;
    pub const OEXEC: u8 = 3;
    pub const OTRUNC: u8 = 0x10;
    pub const OCEXEC: u8 = 0x20;
    pub const ORCLOSE: u8 = 0x40;
}

/// 9P2000.L values: open flags, attribute masks, lock and unlink values.
pub mod dotl {
    // Tlopen / Tlcreate flags (generic Linux numbering).
    pub const O_RDONLY: u32 = 0o0;
    pub const O_WRONLY: u32 = 0o1;
    pub const O_RDWR: u32 = 0o2;
    pub const O_NOACCESS: u32 = 0o3;
    pub const O_ACCMODE: u32 = 0o3;
    pub const O_CREAT: u32 = 0o100;
    pub const O_EXCL: u32 = 0o200;
    pub const O_NOCTTY: u32 = 0o400;
    pub const O_TRUNC: u32 = 0o1000;
    pub const O_APPEND: u32 = 0o2000;
    pub const O_NONBLOCK: u32 = 0o4000;
    pub const O_DSYNC: u32 = 0o10000;
    pub const O_FASYNC: u32 = 0o20000;
    pub const O_DIRECT: u32 = 0o40000;
    pub const O_LARGEFILE: u32 = 0o100000;
    pub const O_DIRECTORY: u32 = 0o200000;
    pub const O_NOFOLLOW: u32 = 0o400000;
    pub const O_NOATIME: u32 = 0o1000000;
    pub const O_CLOEXEC: u32 = 0o2000000;
    pub const O_SYNC: u32 = 0o4000000;

    // Tgetattr request_mask / Rgetattr valid.
    pub const GETATTR_MODE: u64 = 0x1;
    pub const GETATTR_NLINK: u64 = 0x2;
    pub const GETATTR_UID: u64 = 0x4;
    pub const GETATTR_GID: u64 = 0x8;
    pub const GETATTR_RDEV: u64 = 0x10;
    pub const GETATTR_ATIME: u64 = 0x20;
    pub const GETATTR_MTIME: u64 = 0x40;
    pub const GETATTR_CTIME: u64 = 0x80;
    pub const GETATTR_INO: u64 = 0x100;
    pub const GETATTR_SIZE: u64 = 0x200;
    pub const GETATTR_BLOCKS: u64 = 0x400;
    pub const GETATTR_BTIME: u64 = 0x800;
    pub const GETATTR_GEN: u64 = 0x1000;
    pub const GETATTR_DATA_VERSION: u64 = 0x2000;
    pub const GETATTR_BASIC: u64 = 0x7ff;
    pub const GETATTR_ALL: u64 = 0x3fff;

    // Tsetattr valid.
    pub const SETATTR_MODE: u32 = 0x1;
    pub const SETATTR_UID: u32 = 0x2;
    pub const SETATTR_GID: u32 = 0x4;
    pub const SETATTR_SIZE: u32 = 0x8;
    pub const SETATTR_ATIME: u32 = 0x10;
    pub const SETATTR_MTIME: u32 = 0x20;
    pub const SETATTR_CTIME: u32 = 0x40;
    pub const SETATTR_ATIME_SET: u32 = 0x80;
    pub const SETATTR_MTIME_SET: u32 = 0x100;

    // Lock types (Tlock, Tgetlock, Rgetlock), Tlock flags, Rlock status.
    pub const LOCK_TYPE_RDLCK: u8 = 0;
    pub const LOCK_TYPE_WRLCK: u8 = 1;
    pub const LOCK_TYPE_UNLCK: u8 = 2;
    pub const LOCK_FLAGS_BLOCK: u32 = 1;
    pub const LOCK_FLAGS_RECLAIM: u32 = 2;
    pub const LOCK_SUCCESS: u8 = 0;
    pub const LOCK_BLOCKED: u8 = 1;
    pub const LOCK_ERROR: u8 = 2;
    pub const LOCK_GRACE: u8 = 3;

    /// Tunlinkat flags: remove a directory.
    pub const AT_REMOVEDIR: u32 = 0x200;

    // Txattrcreate flags.
    pub const XATTR_CREATE: u32 = 1;
    pub const XATTR_REPLACE: u32 = 2;

    // Dirent type (Linux d_type).
    pub const DT_UNKNOWN: u8 = 0;
    pub const DT_FIFO: u8 = 1;
    pub const DT_CHR: u8 = 2;
    pub const DT_DIR: u8 = 4;
    pub const DT_BLK: u8 = 6;
    pub const DT_REG: u8 = 8;
    pub const DT_LNK: u8 = 10;
    pub const DT_SOCK: u8 = 12;
}

/// Unix `st_mode` file types, as 9P2000.L modes and getattr carry them.
pub mod unix {
    pub const S_IFMT: u32 = 0o170000;
    pub const S_IFSOCK: u32 = 0o140000;
    pub const S_IFLNK: u32 = 0o120000;
    pub const S_IFREG: u32 = 0o100000;
    pub const S_IFBLK: u32 = 0o060000;
    pub const S_IFDIR: u32 = 0o040000;
    pub const S_IFCHR: u32 = 0o020000;
    pub const S_IFIFO: u32 = 0o010000;
    pub const S_ISUID: u32 = 0o4000;
    pub const S_ISGID: u32 = 0o2000;
    pub const S_ISVTX: u32 = 0o1000;
}
