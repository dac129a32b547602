//! Mapping between the dialects and the file-server trait: stat and
//! getattr, wstat and setattr. The conversions underneath (modes, open
//! flags, device numbers) are the wire crate's, shared with the client.

use ninep_wire::consts::{dotl, mode::*};
use ninep_wire::{Dialect, NONUNAME, Name, Rgetattr, Stat, convert};

use crate::error::{Error, Result};
use crate::fs::{Attr, SetAttr, SetTime, Time};

/// A stat for 9P2000 or 9P2000.u; `extension` is the symlink target or
/// device numbers (9P2000.u only).
pub(crate) fn stat(attr: &Attr, dialect: Dialect, extension: String) -> Stat {
    let length = if attr.is_dir() { 0 } else { attr.size };
    Stat {
        ty: 0,
        dev: 0,
        qid: attr.qid,
        mode: convert::plan9_mode(attr.mode, attr.qid.ty, dialect),
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
        set.mode = Some(convert::permissions(stat.mode, dialect));
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
        let name = Name::entry(stat.name.as_str())
            .map_err(|e| Error::with_errno(e.errno(), e.to_string()))?;
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
