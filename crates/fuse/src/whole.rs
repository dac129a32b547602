//! Directories whose every entry the mount knows: made through it, under
//! loose caching, on a mount of one attach (whose callers all see the same
//! names) of a server that keeps versions of its directories.
//!
//! A directory just made is empty, and while each change to it is made
//! through this mount, the mount can tell a name absent without asking the
//! server: the lookup the kernel sends before each create costs nothing.
//! This holds for as long as entries are trusted (a tree one mount has to
//! itself, as loose caching promises) and until the server shows otherwise:
//! a listing with a name not made here, a name made that was already
//! there, or a change that may or may not have happened (a request that
//! failed or was abandoned).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use ninep_wire::Name;

/// Most entries kept of one directory; past them it is not known whole.
const MOST_NAMES: usize = 1 << 16;

/// The directories known whole, by inode.
#[derive(Default)]
pub(crate) struct WholeDirs {
    dirs: HashMap<u64, Whole>,
    /// The directories in the order they were made, to drop the stale.
    made: VecDeque<(Instant, u64)>,
}

struct Whole {
    names: HashSet<Name>,
    since: Instant,
}

impl WholeDirs {
    /// Notes that directory `dir` was just made, empty; drops what was
    /// known of those made `ttl` or more ago.
    pub fn made_empty(&mut self, dir: u64, ttl: Duration) {
        while let Some(&(since, old)) = self.made.front()
            && since.elapsed() >= ttl
        {
            self.made.pop_front();
            if self.dirs.get(&old).is_some_and(|w| w.since == since) {
                self.dirs.remove(&old);
            }
        }
        let since = Instant::now();
        let names = HashSet::new();
        self.dirs.insert(dir, Whole { names, since });
        self.made.push_back((since, dir));
    }

    /// True if `name` is known to be absent from `dir`, made less than
    /// `ttl` ago.
    pub fn absent(&self, dir: u64, name: &Name, ttl: Duration) -> bool {
        self.dirs
            .get(&dir)
            .is_some_and(|w| w.since.elapsed() < ttl && !w.names.contains(name))
    }

    /// Forgets what was known of `dir`; true if anything was.
    pub fn forget(&mut self, dir: u64) -> bool {
        self.dirs.remove(&dir).is_some()
    }

    /// Notes `name` made in `dir`.
    pub fn entry_made(&mut self, dir: u64, name: &Name) {
        if let Some(w) = self.dirs.get_mut(&dir) {
            w.names.insert(name.clone());
            if w.names.len() > MOST_NAMES {
                self.dirs.remove(&dir);
            }
        }
    }

    /// Notes `name` gone from `dir`.
    pub fn entry_gone(&mut self, dir: u64, name: &Name) {
        if let Some(w) = self.dirs.get_mut(&dir) {
            w.names.remove(name);
        }
    }

    /// Notes `name` listed in `dir` by the server: one not made here means
    /// another client changes the directory.
    pub fn listed(&mut self, dir: u64, name: &Name) {
        if self.dirs.get(&dir).is_some_and(|w| !w.names.contains(name)) {
            self.dirs.remove(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::new(s).expect("a valid name")
    }

    #[test]
    fn names_made_and_gone_are_followed() {
        let ttl = Duration::from_secs(20);
        let mut whole = WholeDirs::default();
        whole.made_empty(7, ttl);
        assert!(whole.absent(7, &name("a"), ttl));
        assert!(!whole.absent(8, &name("a"), ttl), "not known, not absent");
        whole.entry_made(7, &name("a"));
        assert!(!whole.absent(7, &name("a"), ttl));
        whole.entry_gone(7, &name("a"));
        assert!(whole.absent(7, &name("a"), ttl));
        whole.entry_made(7, &name("b"));
        whole.listed(7, &name("b"));
        assert!(whole.absent(7, &name("c"), ttl), "a name made here listed");
        whole.listed(7, &name("c"));
        assert!(
            !whole.absent(7, &name("d"), ttl),
            "a name made elsewhere listed"
        );
    }

    #[test]
    fn what_is_known_lasts_as_long_as_entries_are_trusted() {
        let mut whole = WholeDirs::default();
        whole.made_empty(7, Duration::from_secs(20));
        assert!(!whole.absent(7, &name("a"), Duration::ZERO));
        // Making another drops those made a ttl or more ago.
        whole.made_empty(8, Duration::ZERO);
        assert!(!whole.forget(7));
        assert!(whole.forget(8));
    }

    #[test]
    fn a_directory_of_too_many_names_is_not_known() {
        let ttl = Duration::from_secs(20);
        let mut whole = WholeDirs::default();
        whole.made_empty(7, ttl);
        for i in 0..=MOST_NAMES {
            whole.entry_made(7, &name(&i.to_string()));
        }
        assert!(!whole.absent(7, &name("none"), ttl));
    }
}
