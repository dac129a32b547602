//! Qids for host files: a path unique across the devices under the export
//! (the device's number in order of discovery, then the inode number) and
//! a version taken from the modification time.

use std::collections::HashMap;

use ninep_server::Result;
use ninep_wire::{Qid, QidType};
use parking_lot::Mutex;
use rustix::fs::{AtFlags, FileType};

use crate::confine::Node;
use crate::{Inner, errno};

/// Device numbers seen under the export, numbered in order of discovery.
#[derive(Debug)]
pub(crate) struct Devices {
    seen: Mutex<HashMap<u64, u64>>,
}

impl Devices {
    /// Numbering that starts with the root's device as 0.
    pub(crate) fn new(root: u64) -> Devices {
        Devices {
            seen: Mutex::new(HashMap::from([(root, 0)])),
        }
    }

    /// The number of `dev`, given it now if it is new.
    fn index(&self, dev: u64) -> u64 {
        let mut seen = self.seen.lock();
        let next = seen.len() as u64;
        *seen.entry(dev).or_insert(next)
    }
}

impl Inner {
    pub(crate) fn qid(&self, st: &rustix::fs::Stat) -> Qid {
        // The paper's convention: a version that changes with the file,
        // taken from its modification time.
        let version = (st.st_mtime as u32) ^ (st.st_mtime_nsec as u32);
        self.qid_of(st.st_dev, st.st_ino, st.st_mode, version)
    }

    /// A qid path unique across the devices under the export: the device's
    /// number in order of discovery, then the inode number.
    pub(crate) fn qid_of(&self, dev: u64, ino: u64, mode: u32, version: u32) -> Qid {
        let ty = match FileType::from_raw_mode(mode) {
            FileType::Directory => QidType::DIR,
            FileType::Symlink => QidType::SYMLINK,
            _ => QidType::FILE,
        };
        Qid {
            ty,
            version,
            path: (self.devices.index(dev) << 56) | (ino & 0x00ff_ffff_ffff_ffff),
        }
    }

    /// The qid of `name` in `dir`, not following a link.
    pub(crate) fn qid_at(&self, dir: &Node, name: &str) -> Result<Qid> {
        let st = rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
        Ok(self.qid(&st))
    }
}
