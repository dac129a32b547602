//! The client's view of a file's attributes turned into the server's: the
//! same fields under other names, with the qid translated.

use ninep_client::{DirEntry, FileInfo};
use ninep_server::{Attr, SetAttr, SetTime, Time};
use ninep_wire::consts::{dotl, mode, unix};
use ninep_wire::{Dialect, Fid, Msg, Qid, QidType, Stat, Tsetattr, Twstat};

use ninep_server::{Error, Result};

pub(crate) fn from_info(info: &FileInfo, qid: Qid, name: String) -> Attr {
    let mtime = Time {
        sec: info.mtime,
        nsec: info.mtime_nsec,
    };
    Attr {
        qid,
        name,
        mode: info.mode,
        uid: info.uid.clone(),
        gid: info.gid.clone(),
        muid: info.muid.clone(),
        n_uid: info.n_uid,
        n_gid: info.n_gid,
        nlink: info.nlink,
        rdev: info.rdev,
        size: info.size,
        blksize: 4096,
        blocks: info.size.div_ceil(512),
        atime: Time {
            sec: info.atime,
            nsec: 0,
        },
        mtime,
        ctime: mtime,
    }
}

/// What a 9P2000.L directory entry says of a file: its qid and so its type.
pub(crate) fn from_entry(entry: &DirEntry, qid: Qid) -> Attr {
    let ty = if entry.qid.ty.is_dir() {
        unix::S_IFDIR
    } else if entry.qid.ty.contains(QidType::SYMLINK) {
        unix::S_IFLNK
    } else {
        unix::S_IFREG
    };
    Attr {
        qid,
        name: entry.name.clone(),
        mode: ty,
        ..Attr::default()
    }
}

fn secs(t: SetTime) -> (u64, u64) {
    let t = match t {
        SetTime::Now => Time::now(),
        SetTime::At(t) => t,
    };
    (t.sec, u64::from(t.nsec))
}

/// The request that makes `set` on `fid`, in the server's dialect. `qid` is
/// the file's own, for the Plan 9 mode a wstat must carry.
pub(crate) fn setattr(dialect: Dialect, fid: Fid, qid: Qid, set: &SetAttr) -> Result<Msg> {
    if dialect == Dialect::L {
        let mut m = Tsetattr {
            fid,
            valid: 0,
            mode: 0,
            uid: 0,
            gid: 0,
            size: 0,
            atime_sec: 0,
            atime_nsec: 0,
            mtime_sec: 0,
            mtime_nsec: 0,
        };
        if let Some(mode) = set.mode {
            m.valid |= dotl::SETATTR_MODE;
            m.mode = mode;
        }
        if let Some(uid) = set.uid {
            m.valid |= dotl::SETATTR_UID;
            m.uid = uid;
        }
        let gid = match (&set.gid, &set.gid_name) {
            (Some(gid), _) => Some(*gid),
            (None, Some(name)) => Some(name.parse().map_err(|_| {
                Error::with_errno(
                    ninep_wire::Errno::EINVAL,
                    "group names do not reach 9P2000.L",
                )
            })?),
            (None, None) => None,
        };
        if let Some(gid) = gid {
            m.valid |= dotl::SETATTR_GID;
            m.gid = gid;
        }
        if let Some(size) = set.size {
            m.valid |= dotl::SETATTR_SIZE;
            m.size = size;
        }
        if let Some(t) = set.atime {
            m.valid |= dotl::SETATTR_ATIME;
            if let SetTime::At(_) = t {
                m.valid |= dotl::SETATTR_ATIME_SET;
                (m.atime_sec, m.atime_nsec) = secs(t);
            }
        }
        if let Some(t) = set.mtime {
            m.valid |= dotl::SETATTR_MTIME;
            if let SetTime::At(_) = t {
                m.valid |= dotl::SETATTR_MTIME_SET;
                (m.mtime_sec, m.mtime_nsec) = secs(t);
            }
        }
        if set.ctime {
            m.valid |= dotl::SETATTR_CTIME;
        }
        return Ok(m.into());
    }
    let mut stat = Stat::dont_touch();
    if let Some(perm) = set.mode {
        let mut dm = perm & 0o777;
        for (q, bit) in [
            (QidType::DIR, mode::DMDIR),
            (QidType::APPEND, mode::DMAPPEND),
            (QidType::EXCL, mode::DMEXCL),
        ] {
            if qid.ty.contains(q) {
                dm |= bit;
            }
        }
        stat.mode = dm;
    }
    if set.uid.is_some() {
        return Err(Error::with_errno(
            ninep_wire::Errno::EPERM,
            "owners cannot be changed over 9P2000",
        ));
    }
    match (&set.gid_name, set.gid) {
        (Some(name), _) => stat.gid = name.clone(),
        (None, Some(gid)) if dialect == Dialect::U => stat.n_gid = gid,
        (None, Some(gid)) => stat.gid = gid.to_string(),
        (None, None) => {}
    }
    if dialect == Dialect::U {
        stat.n_uid = !0;
        if set.gid.is_none() {
            stat.n_gid = !0;
        }
        stat.n_muid = !0;
    }
    if let Some(size) = set.size {
        stat.length = size;
    }
    // 9P2000 times are whole seconds until 2106.
    if let Some(t) = set.atime {
        stat.atime = secs(t).0 as u32;
    }
    if let Some(t) = set.mtime {
        stat.mtime = secs(t).0 as u32;
    }
    Ok(Twstat { fid, stat }.into())
}
