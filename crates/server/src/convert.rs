//! Mapping between the dialects and the file-server trait: Plan 9 modes and
//! Unix modes, stat and getattr, wstat and setattr, open modes and flags.

use ninep_wire::consts::{dotl, mode::*, open::*, unix::*};
use ninep_wire::{Dialect, NONUNAME, Name, QidType, Rgetattr, Stat};

use crate::error::{Error, Result};
use crate::fs::{Attr, SetAttr, SetTime, Time};

/// The Plan 9 mode of a file: permission bits, DM bits from its qid type and,
/// in 9P2000.u, the Unix file type and setuid bits.
pub(crate) fn plan9_mode(attr: &Attr, dialect: Dialect) -> u32 {
    let ty = attr.qid.ty;
    let mut mode = attr.mode & 0o777;
    for (q, dm) in [
        (QidType::DIR, DMDIR),
        (QidType::APPEND, DMAPPEND),
        (QidType::EXCL, DMEXCL),
        (QidType::AUTH, DMAUTH),
        (QidType::TMP, DMTMP),
    ] {
        if ty.contains(q) {
            mode |= dm;
        }
    }
    if attr.is_dir() {
        mode |= DMDIR;
    }
    if dialect == Dialect::U {
        mode |= match attr.mode & S_IFMT {
            S_IFLNK => DMSYMLINK,
            S_IFCHR | S_IFBLK => DMDEVICE,
            S_IFIFO => DMNAMEDPIPE,
            S_IFSOCK => DMSOCKET,
            _ => 0,
        };
        for (bit, dm) in [
            (S_ISUID, DMSETUID),
            (S_ISGID, DMSETGID),
            (S_ISVTX, DMSETVTX),
        ] {
            if attr.mode & bit != 0 {
                mode |= dm;
            }
        }
    }
    mode
}

/// Linux's split of a device number into major and minor.
pub(crate) fn major_minor(rdev: u64) -> (u32, u32) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// Linux's device number from major and minor.
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (major, minor) = (major as u64, minor as u64);
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

/// The 9P2000.u extension of a device file: `c 1 3`.
pub(crate) fn device_extension(attr: &Attr) -> Option<String> {
    let letter = match attr.mode & S_IFMT {
        S_IFCHR => 'c',
        S_IFBLK => 'b',
        _ => return None,
    };
    let (major, minor) = major_minor(attr.rdev);
    Some(format!("{letter} {major} {minor}"))
}

/// A stat for 9P2000 or 9P2000.u; `extension` is the symlink target or
/// device numbers (9P2000.u only).
pub(crate) fn stat(attr: &Attr, dialect: Dialect, extension: String) -> Stat {
    let length = if attr.is_dir() { 0 } else { attr.size };
    Stat {
        ty: 0,
        dev: 0,
        qid: attr.qid,
        mode: plan9_mode(attr, dialect),
        atime: attr.atime.sec as u32,
        mtime: attr.mtime.sec as u32,
        length,
        name: attr.name.clone(),
        uid: attr.uid.clone(),
        gid: attr.gid.clone(),
        muid: attr.muid.clone(),
        extension: if dialect == Dialect::U {
            extension
        } else {
            String::new()
        },
        n_uid: attr.n_uid,
        n_gid: attr.n_gid,
        n_muid: NONUNAME,
    }
}

pub(crate) fn getattr(attr: &Attr) -> Rgetattr {
    Rgetattr {
        valid: dotl::GETATTR_BASIC,
        qid: attr.qid,
        mode: attr.mode,
        uid: attr.n_uid,
        gid: attr.n_gid,
        nlink: attr.nlink,
        rdev: attr.rdev,
        size: attr.size,
        blksize: attr.blksize,
        blocks: attr.blocks,
        atime_sec: attr.atime.sec,
        atime_nsec: attr.atime.nsec as u64,
        mtime_sec: attr.mtime.sec,
        mtime_nsec: attr.mtime.nsec as u64,
        ctime_sec: attr.ctime.sec,
        ctime_nsec: attr.ctime.nsec as u64,
        btime_sec: 0,
        btime_nsec: 0,
        generation: 0,
        data_version: 0,
    }
}

/// The Linux d_type of a file, for Rreaddir.
pub(crate) fn dirent_type(attr: &Attr) -> u8 {
    match attr.mode & S_IFMT {
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

/// A 9P2000 open mode as Linux open flags. ORCLOSE is the framework's to
/// handle and is not included.
pub(crate) fn open_flags(mode: u8) -> u32 {
    let access = match mode & 3 {
        OREAD | OEXEC => dotl::O_RDONLY,
        OWRITE => dotl::O_WRONLY,
        _ => dotl::O_RDWR,
    };
    let trunc = if mode & OTRUNC != 0 { dotl::O_TRUNC } else { 0 };
    access | trunc
}

/// What a Twstat asks for: attribute changes and perhaps a new name. Fields
/// left at "don't touch" (all ones, empty) are not changed; the type, dev,
/// qid and muid cannot be, and a stat that touches one is refused whole,
/// as lib9p refuses it.
pub(crate) fn wstat(
    stat: &Stat,
    current: &Attr,
    dialect: Dialect,
) -> Result<(SetAttr, Option<Name>)> {
    let keep = Stat::dont_touch();
    for (touched, refusal) in [
        (stat.ty != keep.ty, "wstat -- attempt to change type"),
        (stat.dev != keep.dev, "wstat -- attempt to change dev"),
        (stat.qid != keep.qid, "wstat -- attempt to change qid"),
        (
            !stat.muid.is_empty() || stat.n_muid != keep.n_muid,
            "wstat -- attempt to change muid",
        ),
    ] {
        if touched {
            return Err(Error::with_errno(ninep_wire::Errno::EPERM, refusal));
        }
    }
    let mut set = SetAttr::default();
    if stat.mode != !0 {
        if (stat.mode & DMDIR != 0) != current.is_dir() {
            return Err(Error::new("can't change directory bit"));
        }
        let mut perm = stat.mode & 0o777;
        if dialect == Dialect::U {
            for (dm, bit) in [
                (DMSETUID, S_ISUID),
                (DMSETGID, S_ISGID),
                (DMSETVTX, S_ISVTX),
            ] {
                if stat.mode & dm != 0 {
                    perm |= bit;
                }
            }
        }
        set.mode = Some(perm);
    }
    if stat.length != !0 {
        if current.is_dir() && stat.length != 0 {
            return Err(Error::is_dir());
        }
        set.size = Some(stat.length);
    }
    let time = |t: u32| {
        SetTime::At(Time {
            sec: t as u64,
            nsec: 0,
        })
    };
    if stat.mtime != !0 {
        set.mtime = Some(time(stat.mtime));
    }
    if stat.atime != !0 {
        set.atime = Some(time(stat.atime));
    }
    if !stat.uid.is_empty() && stat.uid != current.uid {
        return Err(Error::with_errno(
            ninep_wire::Errno::EPERM,
            "can't change owner",
        ));
    }
    if !stat.gid.is_empty() && stat.gid != current.gid {
        set.gid_name = Some(stat.gid.clone());
    }
    if dialect == Dialect::U {
        if stat.n_uid != NONUNAME {
            set.uid = Some(stat.n_uid);
        }
        if stat.n_gid != NONUNAME {
            set.gid = Some(stat.n_gid);
        }
    }
    let rename = if stat.name.is_empty() || stat.name == current.name {
        None
    } else {
        let name = Name::new(stat.name.as_str()).map_err(|e| Error::new(e.to_string()))?;
        if name.is_dot_or_dotdot() {
            return Err(Error::new("illegal name"));
        }
        Some(name)
    };
    Ok((set, rename))
}

/// The Tsetattr message as attribute changes.
pub(crate) fn setattr(m: &ninep_wire::Tsetattr) -> SetAttr {
    let v = m.valid;
    let time = |set: u32, plain: u32, sec: u64, nsec: u64| {
        if v & set != 0 {
            Some(SetTime::At(Time {
                sec,
                nsec: nsec as u32,
            }))
        } else if v & plain != 0 {
            Some(SetTime::Now)
        } else {
            None
        }
    };
    SetAttr {
        mode: (v & dotl::SETATTR_MODE != 0).then_some(m.mode & 0o7777),
        uid: (v & dotl::SETATTR_UID != 0).then_some(m.uid),
        gid: (v & dotl::SETATTR_GID != 0).then_some(m.gid),
        gid_name: None,
        size: (v & dotl::SETATTR_SIZE != 0).then_some(m.size),
        atime: time(
            dotl::SETATTR_ATIME_SET,
            dotl::SETATTR_ATIME,
            m.atime_sec,
            m.atime_nsec,
        ),
        mtime: time(
            dotl::SETATTR_MTIME_SET,
            dotl::SETATTR_MTIME,
            m.mtime_sec,
            m.mtime_nsec,
        ),
        ctime: v & dotl::SETATTR_CTIME != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip() {
        for (major, minor) in [(1, 3), (8, 1), (136, 3), (259, 70000), (4095, 255)] {
            assert_eq!(major_minor(makedev(major, minor)), (major, minor));
        }
        assert_eq!(makedev(1, 3), 0x103);
    }

    #[test]
    fn open_modes() {
        assert_eq!(open_flags(OREAD), dotl::O_RDONLY);
        assert_eq!(open_flags(OEXEC), dotl::O_RDONLY);
        assert_eq!(open_flags(ORDWR | OTRUNC), dotl::O_RDWR | dotl::O_TRUNC);
        assert_eq!(open_flags(OWRITE | ORCLOSE), dotl::O_WRONLY);
    }

    #[test]
    fn plan9_modes_follow_the_dialect() {
        let attr = Attr {
            mode: S_IFLNK | S_ISUID | 0o777,
            ..Attr::default()
        };
        assert_eq!(plan9_mode(&attr, Dialect::Base), 0o777);
        assert_eq!(plan9_mode(&attr, Dialect::U), DMSYMLINK | DMSETUID | 0o777);
    }
}
