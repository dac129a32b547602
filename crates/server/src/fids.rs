//! The fid table of one connection.
//!
//! Changes to the table take effect in the order requests arrive, even though
//! the requests run concurrently: a client may send Tclunk and reuse the fid
//! number before Rclunk comes back, and its next request must see the new fid.
//! So the reader thread of the connection inserts and removes entries as each
//! request arrives; a fid being created (by attach or walk) is inserted
//! locked, and requests that name it wait until its creator finishes.
//!
//! Authentication fids (Tauth) share the table's numbers, so that no fid
//! of either kind can take the number of the other, but hold no file.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ninep_wire::{Fid, Qid};
use parking_lot::Mutex;
use tokio::sync::{OwnedRwLockWriteGuard, RwLock};

use crate::auth::AuthFid;
use crate::dirread::DirCursor;
use crate::fs::User;
use crate::xattr::Xattr;

/// What the framework knows of a fid besides the file server's `File`.
pub(crate) struct FidState<T> {
    pub file: T,
    pub qid: Qid,
    pub user: Arc<User>,
    /// Linux open flags once the fid is open.
    pub open: Option<u32>,
    /// Remove the file when the fid is clunked (9P2000 ORCLOSE).
    pub rclose: bool,
    /// The exclusive-use claim on its file (DMEXCL) while it is open. It
    /// goes with the state, however the fid ends.
    pub exclusive: Option<Exclusive>,
    pub dir: Mutex<DirCursor>,
    pub xattr: Option<Xattr>,
}

impl<T> FidState<T> {
    pub fn new(file: T, qid: Qid, user: Arc<User>) -> Self {
        FidState {
            file,
            qid,
            user,
            open: None,
            rclose: false,
            exclusive: None,
            dir: Mutex::new(DirCursor::default()),
            xattr: None,
        }
    }
}

/// The files open for exclusive use (DMEXCL) anywhere on a server, by qid
/// path.
#[derive(Clone, Default)]
pub(crate) struct ExclusiveFiles(Arc<Mutex<HashSet<u64>>>);

impl ExclusiveFiles {
    /// Claims the file with qid path `path`; `None` if it is open already.
    pub fn claim(&self, path: u64) -> Option<Exclusive> {
        let claimed = self.0.lock().insert(path);
        claimed.then(|| Exclusive {
            files: self.clone(),
            path,
        })
    }
}

/// A file claimed for exclusive use: free again once this is dropped.
pub(crate) struct Exclusive {
    files: ExclusiveFiles,
    path: u64,
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        self.files.0.lock().remove(&self.path);
    }
}

pub(crate) type Slot<T> = RwLock<Option<FidState<T>>>;
type Table<T> = Mutex<HashMap<Fid, Entry<T>>>;

/// A fid of either kind.
pub(crate) enum Entry<T> {
    /// A fid for a file, made by attach or walk.
    File(Arc<Slot<T>>),
    /// An authentication fid, made by Tauth.
    Auth(Arc<AuthFid>),
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        match self {
            Entry::File(slot) => Entry::File(slot.clone()),
            Entry::Auth(afid) => Entry::Auth(afid.clone()),
        }
    }
}

/// The fids of a connection.
pub(crate) struct Fids<T> {
    table: Arc<Table<T>>,
    limit: usize,
}

/// Why a fid could not be reserved.
pub(crate) enum Refusal {
    InUse,
    TooMany,
}

impl<T: Send + Sync + 'static> Fids<T> {
    pub fn new(limit: usize) -> Self {
        Fids {
            table: Arc::new(Mutex::new(HashMap::new())),
            limit,
        }
    }

    /// The fid numbered `fid`, of either kind.
    pub fn entry(&self, fid: Fid) -> Option<Entry<T>> {
        self.table.lock().get(&fid).cloned()
    }

    /// The file fid numbered `fid`.
    pub fn get(&self, fid: Fid) -> Option<Arc<Slot<T>>> {
        match self.entry(fid)? {
            Entry::File(slot) => Some(slot),
            Entry::Auth(_) => None,
        }
    }

    /// Enters the authentication fid `afid` as `fid`.
    pub fn insert_auth(&self, fid: Fid, afid: Arc<AuthFid>) -> Result<(), Refusal> {
        let mut table = self.table.lock();
        self.check_free(&table, fid)?;
        table.insert(fid, Entry::Auth(afid));
        Ok(())
    }

    /// Refuses a number in use, and one past the limit.
    fn check_free(&self, table: &HashMap<Fid, Entry<T>>, fid: Fid) -> Result<(), Refusal> {
        if fid == Fid::NOFID || table.contains_key(&fid) {
            return Err(Refusal::InUse);
        }
        if table.len() >= self.limit {
            return Err(Refusal::TooMany);
        }
        Ok(())
    }

    /// Reserves `fid` for a fid being created; it stays locked until the
    /// returned [`Pending`] is filled or dropped.
    pub fn reserve(&self, fid: Fid) -> Result<Pending<T>, Refusal> {
        let mut table = self.table.lock();
        self.check_free(&table, fid)?;
        let slot = Arc::new(RwLock::new(None));
        let guard = slot.clone().try_write_owned().expect("a new lock is free");
        table.insert(fid, Entry::File(slot.clone()));
        Ok(Pending {
            fid,
            slot,
            guard: Some(guard),
            table: self.table.clone(),
        })
    }

    /// True if the table holds no fid.
    pub fn is_empty(&self) -> bool {
        self.table.lock().is_empty()
    }

    /// Takes `fid` out of the table (Tclunk, Tremove).
    pub fn remove(&self, fid: Fid) -> Option<Entry<T>> {
        self.table.lock().remove(&fid)
    }

    /// Empties the table (Tversion, hang-up), and returns the file fids:
    /// an authentication fid needs no more than to be let go.
    pub fn drain(&self) -> Vec<Arc<Slot<T>>> {
        let drained: Vec<_> = self.table.lock().drain().map(|(_, e)| e).collect();
        drained
            .into_iter()
            .filter_map(|entry| match entry {
                Entry::File(slot) => Some(slot),
                Entry::Auth(_) => None,
            })
            .collect()
    }
}

/// A fid being created. Filled, it becomes usable; dropped unfilled (the
/// walk failed or was flushed), it leaves the table.
pub(crate) struct Pending<T> {
    fid: Fid,
    slot: Arc<Slot<T>>,
    guard: Option<OwnedRwLockWriteGuard<Option<FidState<T>>>>,
    table: Arc<Table<T>>,
}

impl<T> Pending<T> {
    pub fn fill(mut self, state: FidState<T>) {
        if let Some(guard) = self.guard.as_mut() {
            **guard = Some(state);
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        let filled = self.guard.as_ref().is_some_and(|g| g.is_some());
        if !filled {
            let mut table = self.table.lock();
            if let Some(Entry::File(slot)) = table.get(&self.fid)
                && Arc::ptr_eq(slot, &self.slot)
            {
                table.remove(&self.fid);
            }
        }
        // The guard drops after this, releasing requests waiting on the fid.
    }
}
