//! Directory listings, resumable wherever the kernel resumes them: from
//! Treaddir cookies (9P2000.L), or from a listing read whole when a read
//! starts at 0 (9P2000 and .u directories cannot seek).

use fuser::FileType;
use ninep_client::File;
use ninep_wire::{Dialect, Dirent, Qid, Treaddir, convert};

use crate::attrs::file_type;
use crate::{Inner, KernelErrno, errno};

/// One directory entry, with the offset that resumes after it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: String,
    pub qid: Qid,
    pub kind: FileType,
    pub next: u64,
}

impl Inner {
    /// Entries of the open directory `fh` on `ino` from `offset`, each with
    /// its inode number.
    pub async fn readdir(
        &self,
        ino: u64,
        fh: u64,
        offset: u64,
    ) -> Result<Vec<(u64, Entry)>, KernelErrno> {
        let h = self.handle(fh)?;
        let entries = if self.conn.dialect == Dialect::L {
            self.read_entries(&h.file, offset).await?
        } else {
            let mut listing = h.listing.lock().await;
            if offset == 0 {
                *listing = read_listing(&h.file).await?;
            }
            listing.iter().skip(offset as usize).cloned().collect()
        };
        let mut nodes = self.nodes();
        let numbered = entries
            .into_iter()
            .map(|e| {
                let number = match e.name.as_str() {
                    "." => ino,
                    ".." => nodes.parent(ino),
                    _ => nodes.listed(ino, &e.name, e.qid, e.kind),
                };
                (number, e)
            })
            .collect();
        Ok(numbered)
    }

    /// One Treaddir's worth of entries from cookie `offset`.
    async fn read_entries(&self, file: &File, offset: u64) -> Result<Vec<Entry>, KernelErrno> {
        let msg = Treaddir {
            fid: file.fid().number(),
            offset,
            count: file.iounit(),
        };
        let r = self.conn.client.call(msg).await.map_err(errno)?;
        let mut out = Vec::new();
        for d in Dirent::entries(&r.data) {
            let Ok(d) = d else { break };
            out.push(Entry {
                name: d.name.into_string(),
                qid: d.qid,
                kind: file_type(convert::file_type(d.ty)),
                next: d.offset,
            });
        }
        Ok(out)
    }
}

/// A 9P2000 or .u directory's entries, read whole; the offset after each
/// is its index plus one.
async fn read_listing(file: &File) -> Result<Vec<Entry>, KernelErrno> {
    // The server lists neither `.` nor `..`; the kernel's readers expect both.
    let dot = |name: &str, next| Entry {
        name: name.to_owned(),
        qid: file.qid(),
        kind: FileType::Directory,
        next,
    };
    let mut out = vec![dot(".", 1), dot("..", 2)];
    for e in file.read_dir().await.map_err(errno)? {
        let mode = e.info.map_or(0, |info| info.mode);
        let next = out.len() as u64 + 1;
        out.push(Entry {
            name: e.name,
            qid: e.qid,
            kind: file_type(mode),
            next,
        });
    }
    Ok(out)
}
