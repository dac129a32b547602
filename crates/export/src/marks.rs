//! Plan 9's append-only (DMAPPEND) and exclusive-use (DMEXCL) marks of a
//! regular file. Unix files have no such bits, so a file made through the
//! export with either keeps them in an extended attribute, and its qids
//! carry them as QTAPPEND and QTEXCL.

use ninep_wire::consts::mode::{DMAPPEND, DMEXCL};
use ninep_wire::{Qid, QidType};
use rustix::fs::{FileType, XattrFlags};

use crate::Inner;
use crate::confine::Node;

/// The extended attribute holding a file's marks, one letter each.
const PLAN9_MARKS: &str = "user.9p.mode";

/// Each mark: its mode bit, its qid bit and its letter in the attribute.
const MARKS: [(u32, QidType, u8); 2] = [
    (DMAPPEND, QidType::APPEND, b'a'),
    (DMEXCL, QidType::EXCL, b'l'),
];

impl Inner {
    /// The marks of the regular file at `path`. `path` is followed only
    /// when it is one of the server's own `/proc/self/fd` links.
    pub(crate) fn marks(&self, path: &str, follow: bool) -> QidType {
        let mut buf = [0u8; 8];
        let got = if follow {
            rustix::fs::getxattr(path, PLAN9_MARKS, &mut buf)
        } else {
            rustix::fs::lgetxattr(path, PLAN9_MARKS, &mut buf)
        };
        let Ok(n) = got else {
            return QidType::FILE;
        };
        let mut ty = QidType::FILE;
        for &b in &buf[..n] {
            for (_, bit, letter) in MARKS {
                if b == letter {
                    ty = ty | bit;
                }
            }
        }
        ty
    }

    /// `qid` with the marks of `node` added.
    pub(crate) fn marked(&self, node: &Node, mut qid: Qid) -> Qid {
        if node.ty == FileType::RegularFile {
            qid.ty = qid.ty | self.marks(&self.proc_path(node), true);
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
