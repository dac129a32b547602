//! The same facts as each dialect spells them: Plan 9 modes and Unix modes,
//! 9P2000 open modes and Linux open flags, device numbers, directory entry
//! types. Servers and clients both convert through here, so a bit lost on
//! one side is lost on the other too, and the tests catch it once.

use crate::consts::{dotl, mode::*, open::*, unix::*};
use crate::{Dialect, QidType};

/// Plan 9's set-id and sticky bits beside Unix's (9P2000.u carries them).
const SET_ID_BITS: [(u32, u32); 3] = [
    (DMSETUID, S_ISUID),
    (DMSETGID, S_ISGID),
    (DMSETVTX, S_ISVTX),
];

/// Qid type bits that are also Plan 9 mode bits.
const QID_MODE_BITS: [(QidType, u32); 5] = [
    (QidType::DIR, DMDIR),
    (QidType::APPEND, DMAPPEND),
    (QidType::EXCL, DMEXCL),
    (QidType::AUTH, DMAUTH),
    (QidType::TMP, DMTMP),
];

/// The Plan 9 mode of a file of Unix mode `mode` whose qid type is `ty`:
/// permission bits, the DM bits its qid type carries and, in 9P2000.u, its
/// Unix file type and set-id bits. 9P2000 has no place for either.
pub fn plan9_mode(mode: u32, ty: QidType, dialect: Dialect) -> u32 {
    let mut plan9 = mode & 0o777;
    for (q, dm) in QID_MODE_BITS {
        if ty.contains(q) {
            plan9 |= dm;
        }
    }
    if mode & S_IFMT == S_IFDIR {
        plan9 |= DMDIR;
    }
    if dialect == Dialect::U {
        plan9 |= match mode & S_IFMT {
            S_IFLNK => DMSYMLINK,
            S_IFCHR | S_IFBLK => DMDEVICE,
            S_IFIFO => DMNAMEDPIPE,
            S_IFSOCK => DMSOCKET,
            _ => 0,
        };
        for (dm, bit) in SET_ID_BITS {
            if mode & bit != 0 {
                plan9 |= dm;
            }
        }
    }
    plan9
}

/// The Unix mode of a file of Plan 9 mode `plan9`. In 9P2000.u a device's
/// `extension` (`b 8 1`) tells a block device from a character one.
pub fn unix_mode(plan9: u32, extension: &str, dialect: Dialect) -> u32 {
    let u = dialect == Dialect::U;
    let ty = if plan9 & DMDIR != 0 {
        S_IFDIR
    } else if u && plan9 & DMSYMLINK != 0 {
        S_IFLNK
    } else if u && plan9 & DMDEVICE != 0 {
        if extension.starts_with('b') {
            S_IFBLK
        } else {
            S_IFCHR
        }
    } else if u && plan9 & DMNAMEDPIPE != 0 {
        S_IFIFO
    } else if u && plan9 & DMSOCKET != 0 {
        S_IFSOCK
    } else {
        S_IFREG
    };
    ty | permissions(plan9, dialect)
}

/// The Unix permission bits of Plan 9 mode `plan9`, set-id and sticky bits
/// included in 9P2000.u.
pub fn permissions(plan9: u32, dialect: Dialect) -> u32 {
    let mut perm = plan9 & 0o777;
    if dialect == Dialect::U {
        for (dm, bit) in SET_ID_BITS {
            if plan9 & dm != 0 {
                perm |= bit;
            }
        }
    }
    perm
}

/// Linux open flags for a 9P2000 open mode. ORCLOSE and OCEXEC have no
/// flag: they are the server's and the client's to carry out.
pub fn open_flags(mode: u8) -> u32 {
    let access = match mode & 3 {
        OREAD | OEXEC => dotl::O_RDONLY,
        OWRITE => dotl::O_WRONLY,
        _ => dotl::O_RDWR,
    };
    let trunc = if mode & OTRUNC != 0 { dotl::O_TRUNC } else { 0 };
    access | trunc
}

/// The 9P2000 open mode for Linux open flags: access and truncation; the
/// other flags have no Plan 9 meaning.
pub fn open_mode(flags: u32) -> u8 {
    let access = match flags & dotl::O_ACCMODE {
        dotl::O_WRONLY => OWRITE,
        dotl::O_RDWR => ORDWR,
        _ => OREAD,
    };
    let trunc = if flags & dotl::O_TRUNC != 0 {
        OTRUNC
    } else {
        0
    };
    access | trunc
}

/// Linux's device number from major and minor (glibc's 64-bit encoding;
/// numbers that fit also match the kernel's 32-bit one, which FUSE uses).
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (major, minor) = (u64::from(major), u64::from(minor));
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// The major and minor numbers of Linux device number `rdev`.
pub fn major_minor(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// 9P2000.u's extension string for a device of Unix mode `mode`: `c 1 3`
/// or `b 8 1`; none for other files.
pub fn device_extension(mode: u32, rdev: u64) -> Option<String> {
    let letter = match mode & S_IFMT {
        S_IFCHR => 'c',
        S_IFBLK => 'b',
        _ => return None,
    };
    let (major, minor) = major_minor(rdev);
    Some(format!("{letter} {major} {minor}"))
}

/// The Unix file type and device number a 9P2000.u device extension names.
pub fn device(extension: &str) -> Option<(u32, u64)> {
    let mut words = extension.split_whitespace();
    let ty = match words.next()? {
        "c" => S_IFCHR,
        "b" => S_IFBLK,
        _ => return None,
    };
    let major = words.next()?.parse().ok()?;
    let minor = words.next()?.parse().ok()?;
    if words.next().is_some() {
        return None;
    }
    Some((ty, makedev(major, minor)))
}

/// The Unix file type a qid type tells: directory, symbolic link, or else
/// regular (devices, fifos and sockets have no qid bit of their own).
pub fn qid_file_type(ty: QidType) -> u32 {
    if ty.is_dir() {
        S_IFDIR
    } else if ty.contains(QidType::SYMLINK) {
        S_IFLNK
    } else {
        S_IFREG
    }
}

/// The directory entry type (Linux d_type, as Rreaddir carries it) of a
/// file of Unix mode `mode`.
pub fn dirent_type(mode: u32) -> u8 {
    match mode & S_IFMT {
        S_IFDIR => dotl::DT_DIR,
        S_IFREG => dotl::DT_REG,
        S_IFLNK => dotl::DT_LNK,
        S_IFCHR => dotl::DT_CHR,
        S_IFBLK => dotl::DT_BLK,
        S_IFIFO => dotl::DT_FIFO,
        S_IFSOCK => dotl::DT_SOCK,
        _ => dotl::DT_UNKNOWN,
    }
}

/// The Unix file type (`S_IFDIR`, ...) of directory entry type `ty`; 0 for
/// DT_UNKNOWN and numbers Linux does not use.
pub fn file_type(ty: u8) -> u32 {
    match ty {
        dotl::DT_DIR => S_IFDIR,
        dotl::DT_REG => S_IFREG,
        dotl::DT_LNK => S_IFLNK,
        dotl::DT_CHR => S_IFCHR,
        dotl::DT_BLK => S_IFBLK,
        dotl::DT_FIFO => S_IFIFO,
        dotl::DT_SOCK => S_IFSOCK,
        _ => 0,
    }
}
