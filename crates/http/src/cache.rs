//! Files the door has sent, kept with the qid they were read under.
//!
//! A kept file is sent again only after it is opened by its name, as a
//! GET of it would open it, with the same qid (path, version and type): a
//! walk, the open and a clunk, sent together, are the 9P requests of such
//! a GET, where a file not kept takes a walk, an open, a stat, a read and
//! a clunk. The open makes the server judge the door's access again, which
//! may change (chmod) while the qid holds. The qid is what the door's ETag
//! is made of, so a kept file is sent exactly when a cache holding that
//! ETag would be told 304.
//!
//! Synthetic files (qid.version 0) are never kept, nor files larger than
//! one read, nor files modified within the last few seconds: a version
//! taken from a modification time may not change for a write that lands
//! in the same clock tick as the one before. (The age is judged by the
//! door's clock: a server whose clock runs behind makes files look
//! older.) The door forgets everything when it changes the tree itself.
//!
//! Memory is bounded in two generations of at most half the budget each:
//! new and used files go into the young one, and when the next would not
//! fit, the old one is dropped and the young one becomes old, so files
//! not used since the last turn go first. (Bytes still being sent to a
//! client are not counted once their file is dropped.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ninep_client::FileInfo;
use ninep_wire::Qid;
use parking_lot::Mutex;

/// Largest file kept: what one read brings at the default msize.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// How long a file must have stood unmodified to be kept.
const SETTLED: Duration = Duration::from_secs(2);

/// Bytes counted for an entry beside its data and its name.
const ENTRY_BYTES: usize = 256;

/// A file as it was sent.
#[derive(Debug)]
pub struct Kept {
    /// The qid its walk gave.
    pub qid: Qid,
    /// Its attributes.
    pub info: FileInfo,
    /// All of its data.
    pub data: Bytes,
}

impl Kept {
    /// Bytes counted for this file kept under `name`.
    fn bytes(&self, name: &str) -> usize {
        counted(name, &self.info, self.data.len())
    }
}

/// Bytes counted for a file of `len` bytes with attributes `info` kept
/// under `name`.
fn counted(name: &str, info: &FileInfo, len: usize) -> usize {
    len + name.len() + info.name.len() + ENTRY_BYTES
}

/// The files kept, under a budget of bytes.
#[derive(Debug)]
pub struct Cache {
    budget: usize,
    generations: Mutex<Generations>,
}

#[derive(Debug, Default)]
struct Generations {
    young: HashMap<String, Arc<Kept>>,
    young_bytes: usize,
    old: HashMap<String, Arc<Kept>>,
}

impl Cache {
    /// A cache of at most `budget` bytes; 0 keeps nothing.
    pub fn new(budget: usize) -> Cache {
        Cache {
            budget,
            generations: Mutex::default(),
        }
    }

    /// The file kept under `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<Kept>> {
        let mut g = self.generations.lock();
        if let Some(kept) = g.young.get(name) {
            return Some(kept.clone());
        }
        let kept = g.old.remove(name)?;
        g.insert_young(name.to_owned(), kept.clone(), self.budget);
        Some(kept)
    }

    /// Keeps the file read under `name` (its qid `qid`, attributes `info`
    /// and data `data`) if it is worth keeping: one with a version, read
    /// whole, small, and not modified just now. Nothing is copied unless
    /// it is.
    pub fn keep(&self, name: &str, qid: Qid, info: &FileInfo, data: &Bytes) {
        let worth = qid.version != 0
            && !qid.ty.is_dir()
            && info.qid == qid
            && data.len() as u64 == info.size
            && info.size <= MAX_FILE_BYTES
            && settled(info.mtime)
            && counted(name, info, data.len()) <= self.budget / 2;
        if !worth {
            return;
        }
        let kept = Kept {
            qid,
            info: info.clone(),
            // Its own copy: the bytes read may share a buffer far larger.
            data: Bytes::copy_from_slice(data),
        };
        self.generations
            .lock()
            .insert_young(name.to_owned(), Arc::new(kept), self.budget);
    }

    /// Forgets the file under `name`.
    pub fn forget(&self, name: &str) {
        let mut g = self.generations.lock();
        if let Some(was) = g.young.remove(name) {
            g.young_bytes -= was.bytes(name);
        }
        g.old.remove(name);
    }

    /// Forgets every file.
    pub fn clear(&self) {
        *self.generations.lock() = Generations::default();
    }
}

impl Generations {
    fn insert_young(&mut self, name: String, kept: Arc<Kept>, budget: usize) {
        if let Some(was) = self.young.remove(&name) {
            self.young_bytes -= was.bytes(&name);
        }
        self.old.remove(&name);
        let bytes = kept.bytes(&name);
        if self.young_bytes + bytes > budget / 2 {
            self.old = std::mem::take(&mut self.young);
            self.young_bytes = 0;
        }
        self.young_bytes += bytes;
        self.young.insert(name, kept);
    }
}

/// True if a file last modified at `mtime` (seconds since the epoch) was
/// modified long enough ago to be kept.
fn settled(mtime: u64) -> bool {
    let modified = UNIX_EPOCH + Duration::from_secs(mtime);
    SystemTime::now()
        .duration_since(modified)
        .is_ok_and(|age| age >= SETTLED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ninep_wire::QidType;

    fn keep(cache: &Cache, name: &str, kept: Kept) {
        cache.keep(name, kept.qid, &kept.info, &kept.data);
    }

    /// A settled file of `len` bytes at qid path `path`.
    fn file(path: u64, len: usize) -> Kept {
        let qid = Qid {
            ty: QidType::FILE,
            version: 1,
            path,
        };
        let info = FileInfo {
            qid,
            size: len as u64,
            mtime: 1,
            ..FileInfo::default()
        };
        Kept {
            qid,
            info,
            data: Bytes::from(vec![path as u8; len]),
        }
    }

    #[test]
    fn keeps_only_settled_small_files_with_a_version() {
        let cache = Cache::new(1 << 20);
        let mut synthetic = file(1, 10);
        synthetic.qid.version = 0;
        synthetic.info.qid.version = 0;
        keep(&cache, "synthetic", synthetic);
        let mut fresh = file(2, 10);
        fresh.info.mtime = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        keep(&cache, "fresh", fresh);
        let mut partial = file(3, 10);
        partial.info.size = 20;
        keep(&cache, "partial", partial);
        keep(&cache, "large", file(4, MAX_FILE_BYTES as usize + 1));
        keep(&cache, "kept", file(5, 10));
        for name in ["synthetic", "fresh", "partial", "large"] {
            assert!(cache.get(name).is_none(), "{name} was kept");
        }
        assert_eq!(cache.get("kept").unwrap().data, vec![5; 10]);
        cache.forget("kept");
        assert!(cache.get("kept").is_none());
    }

    /// Bytes the cache counts for the files it holds.
    fn held(cache: &Cache) -> usize {
        let g = cache.generations.lock();
        g.young
            .iter()
            .chain(&g.old)
            .map(|(name, kept)| kept.bytes(name))
            .sum()
    }

    #[test]
    fn holds_no_more_than_its_budget_and_keeps_what_is_used() {
        const LEN: usize = 1000;
        let budget = 16 * (LEN + ENTRY_BYTES + 8);
        let cache = Cache::new(budget);
        for i in 0..200u64 {
            keep(&cache, &format!("f{i}"), file(i, LEN));
            let held = held(&cache);
            assert!(
                held <= budget,
                "{held} bytes held under a budget of {budget} at f{i}"
            );
            let g = cache.generations.lock();
            let name = format!("f{i}");
            assert!(
                g.young.contains_key(&name) || g.old.contains_key(&name),
                "{name} went"
            );
        }
        assert!(held(&cache) >= budget / 4, "too little kept");
        // One file asked for all along stays.
        for i in 200..400u64 {
            keep(&cache, &format!("f{i}"), file(i, LEN));
            assert!(cache.get("f199").is_some(), "f199 went at f{i}");
        }
    }
}
