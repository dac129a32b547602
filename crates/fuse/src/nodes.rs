//! Inode numbers, where each file was last seen, and the fids behind them.
//!
//! A fid carries the identity of the attach it descends from, so a file
//! reached by one user cannot be used by another: each node keeps one walked
//! fid per user. A user who has none yet walks one from their own attach
//! along the file's path, rebuilt from the parent and name every lookup and
//! rename records.
//!
//! A qid.path tells files apart only as well as the server numbers them:
//! some give the root and the first file the same path, a buggy one reuses
//! paths. A file found by a lookup is therefore the inode
//! - already known by that name, if it has the same qid.path and kind;
//! - else the one last numbered for its qid.path and still known to the
//!   kernel, if of the same kind, not the root, and a non-directory the
//!   server says has more than one link (a hard link);
//! - else a new one.
//!
//! Servers reuse a deleted file's qid.path (an export's paths are host
//! inode numbers), so the inode a path is shared with is the newest one
//! numbered for it, and none once the kernel forgets it.
//!
//! So the kernel is never given the root, or a known inode of another kind
//! (which it would mark bad), for another file, and no file's fids or
//! place are taken over by another's.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fuser::{FileAttr, FileType};
use ninep_client::Fid;
use ninep_wire::{Name, Qid};

use crate::whole::WholeDirs;

pub(crate) const ROOT: u64 = fuser::INodeNo::ROOT.0;

struct Node {
    /// Walked (never opened) fids on the file, by the uid that owns them.
    fids: HashMap<u32, Arc<Fid>>,
    /// The directory and name the file was last found by; `None` for the
    /// root and for files whose last known name is gone.
    place: Option<(u64, Name)>,
    /// The kernel's lookup count; the node goes when it drops to zero.
    lookups: u64,
    /// What the file was when found, to tell it from others of its qid.path.
    qid_path: u64,
    kind: FileType,
}

/// Attributes given to the kernel, and when they came from the server
/// (`None` once they are known to be out of date).
struct Given {
    attr: FileAttr,
    fetched: Option<Instant>,
}

/// The inode number first given to a qid.path, and the kind of file it was.
struct Numbered {
    ino: u64,
    kind: FileType,
}

pub(crate) struct Nodes {
    by_ino: HashMap<u64, Node>,
    /// (directory, name) -> ino: the inverse of each node's place.
    by_place: HashMap<(u64, Name), u64>,
    /// qid.path -> its first number, kept for good so a file keeps its
    /// number while the kernel forgets and finds it again.
    numbered: HashMap<u64, Numbered>,
    /// ino -> the qid.version its cached pages belong to.
    cached_version: HashMap<u64, u32>,
    /// ino -> the attributes the kernel was last given (the size grown by
    /// writes since), and when they came from the server.
    given: HashMap<u64, Given>,
    /// Directories whose every entry is known.
    whole: WholeDirs,
    next_ino: u64,
}

impl Nodes {
    pub fn new(uid: u32, root: Fid) -> Nodes {
        let mut nodes = Nodes {
            by_ino: HashMap::new(),
            by_place: HashMap::new(),
            numbered: HashMap::new(),
            cached_version: HashMap::new(),
            given: HashMap::new(),
            whole: WholeDirs::default(),
            next_ino: ROOT + 1,
        };
        let (qid_path, kind) = (root.qid().path, FileType::Directory);
        nodes
            .numbered
            .insert(qid_path, Numbered { ino: ROOT, kind });
        let node = Node {
            fids: HashMap::from([(uid, Arc::new(root))]),
            place: None,
            lookups: 1,
            qid_path,
            kind,
        };
        nodes.by_ino.insert(ROOT, node);
        nodes
    }

    /// The inode number of `name` in directory `parent`, listed with `qid`
    /// and `kind`: the number a lookup would give it, if it may share one.
    pub fn listed(&mut self, parent: u64, name: &str, qid: Qid, kind: FileType) -> u64 {
        // A name no lookup could take is known at no place.
        let name = Name::new(name).unwrap_or_default();
        self.whole.listed(parent, &name);
        self.identify(parent, &name, qid, kind, true)
    }

    /// The inode of the file with `qid` and `kind` found as `name` in
    /// `parent`, by the rule above; `may_share` if the server allows it
    /// other names.
    fn identify(
        &mut self,
        parent: u64,
        name: &Name,
        qid: Qid,
        kind: FileType,
        may_share: bool,
    ) -> u64 {
        let known_here = self
            .by_place
            .get(&(parent, name.clone()))
            .copied()
            .filter(|ino| {
                self.by_ino
                    .get(ino)
                    .is_some_and(|n| n.qid_path == qid.path && n.kind == kind)
            });
        let latest = self
            .numbered
            .get(&qid.path)
            .filter(|latest| may_share && latest.ino != ROOT && latest.kind == kind);
        if let Some(ino) = known_here.or(latest.map(|latest| latest.ino)) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.numbered.insert(qid.path, Numbered { ino, kind });
        ino
    }

    pub fn exists(&self, ino: u64) -> bool {
        self.by_ino.contains_key(&ino)
    }

    pub fn fid(&self, ino: u64, uid: u32) -> Option<Arc<Fid>> {
        self.by_ino.get(&ino)?.fids.get(&uid).cloned()
    }

    /// The inode of the file last found as `name` in `parent`.
    pub fn ino_at(&self, parent: u64, name: &Name) -> Option<u64> {
        self.by_place.get(&(parent, name.clone())).copied()
    }

    /// The fid `uid` keeps on the file last found as `name` in `parent`.
    pub fn fid_at(&self, parent: u64, name: &Name, uid: u32) -> Option<Arc<Fid>> {
        self.fid(self.ino_at(parent, name)?, uid)
    }

    /// The names that lead from the root to `ino`, if they are all known.
    pub fn path(&self, mut ino: u64) -> Option<Vec<Name>> {
        let mut names = Vec::new();
        while ino != ROOT {
            let (parent, name) = self.by_ino.get(&ino)?.place.clone()?;
            names.push(name);
            ino = parent;
            if names.len() > self.by_ino.len() {
                return None; // a cycle: the table is out of date
            }
        }
        names.reverse();
        Some(names)
    }

    /// The directory `ino` was found in, for `..` in listings.
    pub fn parent(&self, ino: u64) -> u64 {
        self.by_ino
            .get(&ino)
            .and_then(|n| n.place.as_ref())
            .map_or(ROOT, |p| p.0)
    }

    /// Records a lookup of `name` in `parent` by `uid`, which found a file
    /// with `qid` and attributes `attr` and walked `fid` if given; without
    /// one, a fid is walked along the path when first needed. Either way
    /// the user's older fid goes: on servers whose fids name paths (diod),
    /// a fid from before a rename names nothing now. Answers the file's
    /// inode number.
    pub fn found(
        &mut self,
        parent: u64,
        name: Name,
        uid: u32,
        fid: Option<Fid>,
        qid: Qid,
        attr: &FileAttr,
    ) -> u64 {
        // Directories have one name; other files as many as their links.
        let may_share = attr.kind != FileType::Directory && attr.nlink > 1;
        let ino = self.identify(parent, &name, qid, attr.kind, may_share);
        let node = self.by_ino.entry(ino).or_insert_with(|| Node {
            fids: HashMap::new(),
            place: None,
            lookups: 0,
            qid_path: qid.path,
            kind: attr.kind,
        });
        node.lookups += 1;
        match fid {
            Some(fid) => node.fids.insert(uid, Arc::new(fid)),
            None => node.fids.remove(&uid),
        };
        self.whole.entry_made(parent, &name);
        self.place(ino, Some((parent, name)));
        ino
    }

    /// Notes that directory `dir`, just made through this mount, is empty,
    /// for as long as entries are trusted (`ttl`).
    pub fn made_empty(&mut self, dir: u64, ttl: Duration) {
        self.whole.made_empty(dir, ttl);
    }

    /// True if `name` is known to be absent from `dir`, made through this
    /// mount less than `ttl` ago.
    pub fn absent(&self, dir: u64, name: &Name, ttl: Duration) -> bool {
        self.whole.absent(dir, name, ttl)
    }

    /// Forgets what was known of `dir`'s entries: the server may show
    /// otherwise. True if anything was known.
    pub fn not_whole(&mut self, dir: u64) -> bool {
        self.whole.forget(dir)
    }

    /// Notes `name` made in `dir`, before it is found.
    pub fn entry_made(&mut self, dir: u64, name: &Name) {
        self.whole.entry_made(dir, name);
    }

    /// Moves `ino` to `place`, keeping the index in step.
    fn place(&mut self, ino: u64, place: Option<(u64, Name)>) {
        let Some(node) = self.by_ino.get_mut(&ino) else {
            return;
        };
        let old = std::mem::replace(&mut node.place, place.clone());
        if let Some(old) = old
            && self.by_place.get(&old) == Some(&ino)
        {
            self.by_place.remove(&old);
        }
        // A file that held the place before is no longer found there.
        if let Some(new) = place
            && let Some(displaced) = self.by_place.insert(new, ino)
            && displaced != ino
            && let Some(node) = self.by_ino.get_mut(&displaced)
        {
            node.place = None;
        }
    }

    /// The walked fid `uid` keeps on `ino`, handed over to be opened, if it
    /// is a file's (not a directory's, whose fid serves every lookup in
    /// it) and no request is using it.
    pub fn take_fid(&mut self, ino: u64, uid: u32) -> Option<Fid> {
        let node = self.by_ino.get_mut(&ino)?;
        if node.kind == FileType::Directory {
            return None;
        }
        let fid = node.fids.remove(&uid)?;
        Arc::try_unwrap(fid)
            .map_err(|shared| node.fids.insert(uid, shared))
            .ok()
    }

    /// Keeps a fid walked for another user; false if the node went meanwhile.
    pub fn add_fid(&mut self, ino: u64, uid: u32, fid: Arc<Fid>) -> bool {
        match self.by_ino.get_mut(&ino) {
            Some(node) => {
                node.fids.entry(uid).or_insert(fid);
                true
            }
            None => false,
        }
    }

    /// The kernel forgets `n` lookups; the last one clunks the fids, and
    /// says so.
    pub fn forget(&mut self, ino: u64, n: u64) -> bool {
        if ino == ROOT {
            return false;
        }
        let Some(node) = self.by_ino.get_mut(&ino) else {
            return false;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups > 0 {
            return false;
        }
        let path = node.qid_path;
        self.place(ino, None);
        self.by_ino.remove(&ino);
        if self.numbered.get(&path).is_some_and(|n| n.ino == ino) {
            self.numbered.remove(&path);
        }
        self.cached_version.remove(&ino);
        self.given.remove(&ino);
        self.whole.forget(ino);
        true
    }

    /// `name` in `parent` is gone (unlinked, or replaced by a rename).
    pub fn unlinked(&mut self, parent: u64, name: &Name) {
        self.whole.entry_gone(parent, name);
        if !self.displaced(parent, name) {
            // A name its file was not last found by: another link to a file
            // found by a later one, which is not known. Each file with
            // links elsewhere is asked about again.
            let linked = |g: &&mut Given| g.attr.nlink > 1 && g.attr.kind != FileType::Directory;
            for given in self.given.values_mut().filter(linked) {
                given.fetched = None;
            }
        }
    }

    /// The file at `name` in `parent`, if known there, is there no more:
    /// its link count and change time moved. True if it was known.
    fn displaced(&mut self, parent: u64, name: &Name) -> bool {
        let Some(ino) = self.by_place.get(&(parent, name.clone())).copied() else {
            return false;
        };
        self.place(ino, None);
        self.changed(ino);
        true
    }

    /// `name` in `parent` is now `newname` in `newparent`. The moved file's
    /// fids, and those of everything below it, are dropped: on servers whose
    /// fids name paths they name nothing now, and new ones are walked by
    /// the new path when next needed.
    pub fn renamed(&mut self, parent: u64, name: &Name, newparent: u64, newname: &Name) {
        self.whole.entry_gone(parent, name);
        self.whole.entry_made(newparent, newname);
        let Some(moved) = self.by_place.get(&(parent, name.clone())).copied() else {
            return;
        };
        let _ = self.displaced(newparent, newname);
        self.place(moved, Some((newparent, newname.clone())));
        self.changed(moved);
        let below: Vec<u64> = self
            .by_ino
            .keys()
            .copied()
            .filter(|&ino| self.is_within(ino, moved))
            .collect();
        for ino in below {
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.fids.clear();
            }
        }
    }

    /// True if `ino` is `top` or inside it.
    fn is_within(&self, mut ino: u64, top: u64) -> bool {
        for _ in 0..=self.by_ino.len() {
            if ino == top {
                return true;
            }
            match self.by_ino.get(&ino).and_then(|n| n.place.as_ref()) {
                Some((parent, _)) => ino = *parent,
                None => return false,
            }
        }
        false
    }

    /// Notes attributes of `ino` just fetched from the server and given to
    /// the kernel.
    pub fn given(&mut self, ino: u64, attr: FileAttr) {
        let fetched = Some(Instant::now());
        self.given.insert(ino, Given { attr, fetched });
    }

    /// The attributes of `ino` last given, however old.
    pub fn given_attr(&self, ino: u64) -> Option<FileAttr> {
        self.given.get(&ino).map(|given| given.attr)
    }

    /// The attributes of `ino` last given, if fetched within `ttl`.
    pub fn fresh(&self, ino: u64, ttl: Duration) -> Option<FileAttr> {
        let given = self.given.get(&ino)?;
        (given.fetched?.elapsed() < ttl).then_some(given.attr)
    }

    /// Notes a change to `ino` that the attributes given do not show: the
    /// next ones come from the server.
    pub fn changed(&mut self, ino: u64) {
        if let Some(given) = self.given.get_mut(&ino) {
            given.fetched = None;
        }
    }

    /// Notes an entry other than a directory made in or removed from
    /// directory `dir` through this mount, at `now`: its times move as the
    /// server's do, without asking it. (A subdirectory changes its link
    /// count, which servers count differently: [`Nodes::changed`] then.)
    pub fn entries_changed(&mut self, dir: u64, now: SystemTime) {
        if let Some(given) = self.given.get_mut(&dir) {
            given.attr.mtime = now;
            given.attr.ctime = now;
        }
    }

    /// Notes times set on `ino` through this mount.
    pub fn times_set(&mut self, ino: u64, atime: Option<SystemTime>, mtime: Option<SystemTime>) {
        if let Some(given) = self.given.get_mut(&ino) {
            let now = SystemTime::now();
            given.attr.atime = atime.unwrap_or(given.attr.atime);
            given.attr.mtime = mtime.unwrap_or(given.attr.mtime);
            given.attr.ctime = now;
        }
    }

    /// Notes a write that ended at `end`: the kernel grows the file to it.
    pub fn written(&mut self, ino: u64, end: u64) {
        if let Some(given) = self.given.get_mut(&ino) {
            given.attr.size = given.attr.size.max(end);
        }
    }

    /// The size of `ino` as the kernel knows it, if noted.
    pub fn size(&self, ino: u64) -> Option<u64> {
        self.given.get(&ino).map(|given| given.attr.size)
    }

    /// Notes that the server's `ino`, at `version`, now holds what the
    /// kernel wrote back from its pages: they stay at the next open if
    /// the file is still at that version. Nothing for an inode forgotten
    /// meanwhile, whose pages went with it.
    pub fn written_back(&mut self, ino: u64, version: u32) {
        if self.by_ino.contains_key(&ino) {
            self.cached_version.insert(ino, version);
        }
    }

    /// Whether the page cache of `ino` holds `version`'s contents, as far
    /// as the mount knows.
    pub fn holds_pages(&self, ino: u64, version: u32) -> bool {
        self.cached_version.get(&ino) == Some(&version)
    }

    /// Notes that the page cache of `ino` now holds `version`'s contents;
    /// true if it held them already.
    pub fn keep_cache(&mut self, ino: u64, version: u32) -> bool {
        self.cached_version.insert(ino, version) == Some(version)
    }
}
