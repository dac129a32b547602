//! Attributes between the two sides of the mux: the client library's view
//! of a file turned into the server framework's (the same fields under
//! other names, with the qid translated), and the framework's attribute
//! changes into the client library's.

use ninep_client::{DirEntry, FileInfo};
use ninep_server::{Attr, SetAttr, SetTime, Time};
use ninep_wire::{Qid, convert};

pub(crate) fn from_info(info: &FileInfo, qid: Qid, name: String) -> Attr {
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
        blksize: info.blksize,
        blocks: info.blocks,
        atime: Time {
            sec: info.atime,
            nsec: info.atime_nsec,
        },
        mtime: Time {
            sec: info.mtime,
            nsec: info.mtime_nsec,
        },
        ctime: Time {
            sec: info.ctime,
            nsec: info.ctime_nsec,
        },
    }
}

/// What a 9P2000.L directory entry says of a file: its qid and so its type.
pub(crate) fn from_entry(entry: &DirEntry, qid: Qid) -> Attr {
    Attr {
        qid,
        name: entry.name.clone(),
        mode: convert::qid_file_type(entry.qid.ty),
        ..Attr::default()
    }
}

/// Attribute changes as the client library takes them.
pub(crate) fn to_client(set: &SetAttr) -> ninep_client::SetAttr {
    ninep_client::SetAttr {
        mode: set.mode,
        uid: set.uid,
        gid: set.gid,
        group: set.gid_name.clone(),
        size: set.size,
        atime: set.atime.map(time_to_client),
        mtime: set.mtime.map(time_to_client),
        ctime: set.ctime,
    }
}

fn time_to_client(t: SetTime) -> ninep_client::SetTime {
    match t {
        SetTime::Now => ninep_client::SetTime::Now,
        SetTime::At(Time { sec, nsec }) => ninep_client::SetTime::At { sec, nsec },
    }
}
