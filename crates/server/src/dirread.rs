//! Directory reads in both formats: 9P2000 and .u read whole stat entries
//! with Tread, from where the last read ended; 9P2000.L Treaddir reads
//! dirents from a cookie. Both serve a listing taken when a read starts at
//! offset 0, so offsets never skip or repeat an entry.

use std::sync::Arc;

use bytes::BytesMut;
use ninep_wire::consts::dotl;
use ninep_wire::*;

use crate::dispatch::{Handler, Resolved, not_open, read, state};
use crate::error::{Error, Result};
use crate::fids::FidState;
use crate::fs::{DirEntry, Filesystem};
use crate::translate;

/// A directory listing being read: taken when a read starts at offset 0.
#[derive(Default)]
pub(crate) struct DirCursor {
    pub entries: Option<Arc<Vec<DirEntry>>>,
    /// 9P2000: the offset the next read must start at, and the entry it is at.
    pub next_offset: u64,
    pub next_index: usize,
}

impl<F: Filesystem> Handler<'_, F> {
    /// The listing of a directory fid, taken afresh when a read starts at 0.
    async fn listing(&self, s: &FidState<F::File>, offset: u64) -> Result<Arc<Vec<DirEntry>>> {
        let have = s.dir.lock().entries.clone();
        match have {
            Some(entries) if offset != 0 => Ok(entries),
            _ => {
                let entries = Arc::new(self.fs().read_dir(&self.cx(s), &s.file).await?);
                let mut cursor = s.dir.lock();
                cursor.entries = Some(entries.clone());
                cursor.next_offset = 0;
                cursor.next_index = 0;
                Ok(entries)
            }
        }
    }

    /// A 9P2000 directory read: whole stat entries, from the offset where the
    /// last read ended (or 0).
    pub(crate) async fn read_stats(
        &self,
        s: &FidState<F::File>,
        offset: u64,
        count: u32,
    ) -> Result<Msg> {
        let entries = self.listing(s, offset).await?;
        let start = {
            let cursor = s.dir.lock();
            if offset != cursor.next_offset {
                return Err(Error::with_errno(
                    Errno::EINVAL,
                    "bad offset in directory read",
                ));
            }
            cursor.next_index
        };
        let mut data = BytesMut::new();
        let mut index = start;
        for entry in &entries[start.min(entries.len())..] {
            let ext = self.extension_of(s, entry).await;
            let stat = translate::stat(&entry.attr, self.session.dialect, ext);
            let len = stat.encoded_len(self.session.dialect) + 2;
            if data.len() + len > count as usize {
                break;
            }
            stat.encode_entry(&mut data, self.session.dialect)
                .map_err(|e| Error::new(e.to_string()))?;
            index += 1;
        }
        if index == start && start < entries.len() {
            return Err(Error::with_errno(
                Errno::EINVAL,
                "read count too small for a directory entry",
            ));
        }
        let mut cursor = s.dir.lock();
        cursor.next_offset = offset + data.len() as u64;
        cursor.next_index = index;
        Ok(Rread {
            data: data.freeze(),
        }
        .into())
    }

    /// 9P2000.L Treaddir: `.`, `..`, then the listing; each entry's offset is
    /// the cookie that resumes after it.
    pub(crate) async fn readdir(&self, m: Treaddir, r: &Resolved<F::File>) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = state(&g)?;
        s.open.ok_or_else(not_open)?;
        if !s.qid.ty.is_dir() {
            return Err(Error::not_dir());
        }
        let count = m.count.min(self.session.msize - READDIRHDRSZ) as usize;
        let entries = self.listing(s, m.offset).await?;
        let cx = self.cx(s);
        let dot = |name: &str, qid: Qid, offset: u64| Dirent {
            qid,
            offset,
            ty: dotl::DT_DIR,
            name: Name::new(name).unwrap_or_default(),
        };
        let mut data = BytesMut::new();
        let mut index = m.offset;
        loop {
            let entry = match index {
                0 => dot(".", s.qid, 1),
                1 => {
                    let parent = match self.fs().walk(&cx, &s.file, &dotdot()).await {
                        Ok((_, qid)) => qid,
                        Err(_) => s.qid,
                    };
                    dot("..", parent, 2)
                }
                i => match entries.get((i - 2) as usize) {
                    Some(e) => Dirent {
                        qid: e.attr.qid,
                        offset: i + 1,
                        ty: convert::dirent_type(e.attr.mode),
                        name: e.name.clone(),
                    },
                    None => break,
                },
            };
            if data.len() + entry.encoded_len() > count {
                break;
            }
            entry.encode(&mut data);
            index += 1;
        }
        if data.is_empty() && (index as usize) < entries.len() + 2 {
            return Err(Error::with_errno(
                Errno::EINVAL,
                "read count too small for a directory entry",
            ));
        }
        Ok(Rreaddir {
            data: data.freeze(),
        }
        .into())
    }
}

fn dotdot() -> Name {
    Name::new("..").unwrap_or_default()
}
