//! What the device servers share: attributes of synthetic files and reads
//! of generated text.

use bytes::Bytes;
use ninep_server::{Attr, Time};
use ninep_wire::Qid;
use ninep_wire::consts::unix::S_IFDIR;

/// The attributes of a synthetic file or directory `name` owned by
/// `owner`, with permissions `mode` (`S_IFDIR` set for a directory).
pub(crate) fn attr(qid: Qid, name: &str, mode: u32, owner: &str) -> Attr {
    let owner = if owner.is_empty() { "none" } else { owner };
    let now = Time::now();
    Attr {
        qid,
        name: name.to_owned(),
        mode,
        uid: owner.to_owned(),
        gid: owner.to_owned(),
        muid: owner.to_owned(),
        nlink: if mode & S_IFDIR != 0 { 2 } else { 1 },
        blksize: 8192,
        atime: now,
        mtime: now,
        ctime: now,
        ..Attr::default()
    }
}

/// The bytes of `text` from `offset`, at most `count`.
pub(crate) fn text_at(text: &str, offset: u64, count: u32) -> Bytes {
    let bytes = text.as_bytes();
    let start = (offset as usize).min(bytes.len());
    let end = start.saturating_add(count as usize).min(bytes.len());
    Bytes::copy_from_slice(&bytes[start..end])
}
