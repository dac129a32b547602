//! Who a request runs as: the user database, and switching the credentials
//! of the thread that performs a request.
//!
//! In multi-user mode each filesystem call runs on a thread whose effective
//! uid, gid and groups are for that call those of the attaching user, so
//! the kernel makes the permission checks. Linux credentials are per thread
//! at the system-call level, so switching one thread affects no other
//! request. The real and saved uid stay 0, which is what lets the thread
//! switch back.
//!
//! The database (/etc/passwd and /etc/group) is read on tokio's blocking
//! pool, not on a thread that serves requests, and read again when either
//! file has changed: a server looks at them at most once a second, as
//! clients attach or ask for the names of owners.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ninep_server::{Error, Result};
use ninep_wire::{Errno, NONUNAME};
use parking_lot::Mutex;
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

/// How long the files are trusted before they are looked at again.
const RECHECK: Duration = Duration::from_secs(1);

/// A resolved user: ids, groups and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Creds {
    /// The user's id.
    pub uid: u32,
    /// The user's primary group.
    pub gid: u32,
    /// Every group the user is in, the primary one included.
    pub groups: Vec<u32>,
    /// The user's name, or the uid in decimal if it has none.
    pub name: String,
}

/// Users and groups as the host's /etc/passwd and /etc/group (or files in
/// their format) have them. Lookups answer from the files as last read;
/// [`UserDb::refresh`] reads them again if they have changed.
#[derive(Debug)]
pub struct UserDb {
    files: Files,
    read: Mutex<Option<Reading>>,
}

impl Default for UserDb {
    /// The host's /etc/passwd and /etc/group.
    fn default() -> Self {
        UserDb::from_files("/etc/passwd", "/etc/group")
    }
}

/// What a server's policy asks to tell whether a proof of one of a user's
/// names covers an attach by the other.
impl ninep_server::auth::Users for UserDb {
    fn uid(&self, name: &str) -> Option<u32> {
        self.tables().users.get(name).map(|u| u.0)
    }
    fn name(&self, uid: u32) -> Option<String> {
        self.tables().user_names.get(&uid).cloned()
    }
}

/// Where the database is.
#[derive(Debug, Clone)]
struct Files {
    passwd: PathBuf,
    group: PathBuf,
}

/// The files as last read, and when they were last looked at.
#[derive(Debug)]
struct Reading {
    tables: Arc<Tables>,
    versions: Versions,
    checked: Instant,
}

/// What tells one version of a file from another: a file replaced (useradd
/// renames a new copy into place) or rewritten differs in one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    ino: u64,
    size: u64,
    modified: SystemTime,
}

/// The versions of passwd and group; `None` for a file that is missing.
type Versions = [Option<Version>; 2];

#[derive(Debug, Default, Clone)]
struct Tables {
    /// name -> (uid, primary gid)
    users: HashMap<String, (u32, u32)>,
    user_names: HashMap<u32, String>,
    group_names: HashMap<u32, String>,
    group_ids: HashMap<String, u32>,
    /// uid name -> supplementary gids
    members: HashMap<String, Vec<u32>>,
}

impl Files {
    fn versions(&self) -> Versions {
        [&self.passwd, &self.group].map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some(Version {
                ino: meta.ino(),
                size: meta.size(),
                modified: meta.modified().ok()?,
            })
        })
    }

    /// Reads both files, with the versions read. The versions are taken
    /// first: a change made while the files are read then shows at the
    /// next look instead of going unseen.
    fn read(&self) -> (Versions, Tables) {
        let versions = self.versions();
        let mut t = Tables::default();
        let passwd = std::fs::read_to_string(&self.passwd).unwrap_or_default();
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if let [name, _, uid, gid, ..] = f.as_slice()
                && let (Ok(uid), Ok(gid)) = (uid.parse(), gid.parse())
            {
                t.users.insert((*name).to_owned(), (uid, gid));
                t.user_names
                    .entry(uid)
                    .or_insert_with(|| (*name).to_owned());
            }
        }
        let group = std::fs::read_to_string(&self.group).unwrap_or_default();
        for line in group.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if let [name, _, gid, members] = f.as_slice()
                && let Ok(gid) = gid.parse::<u32>()
            {
                t.group_names
                    .entry(gid)
                    .or_insert_with(|| (*name).to_owned());
                t.group_ids.insert((*name).to_owned(), gid);
                for m in members.split(',').filter(|m| !m.is_empty()) {
                    t.members.entry(m.to_owned()).or_default().push(gid);
                }
            }
        }
        (versions, t)
    }
}

impl UserDb {
    /// The database in `passwd` and `group`, files in the format of
    /// /etc/passwd and /etc/group; nothing is read yet.
    pub fn from_files(passwd: impl Into<PathBuf>, group: impl Into<PathBuf>) -> UserDb {
        UserDb {
            files: Files {
                passwd: passwd.into(),
                group: group.into(),
            },
            read: Mutex::new(None),
        }
    }

    /// Reads the files, on the blocking pool, if they were never read or
    /// have changed since; looks at them at most once a second.
    pub async fn refresh(&self) {
        let seen = {
            let mut read = self.read.lock();
            match read.as_mut() {
                Some(r) if r.checked.elapsed() < RECHECK => return,
                // This caller looks; others meanwhile go on with the
                // tables they have.
                Some(r) => {
                    r.checked = Instant::now();
                    Some(r.versions)
                }
                // Nothing to go on with: every caller reads.
                None => None,
            }
        };
        let files = self.files.clone();
        let reading = tokio::task::spawn_blocking(move || {
            if seen == Some(files.versions()) {
                return None;
            }
            Some(files.read())
        });
        if let Ok(Some((versions, tables))) = reading.await {
            self.keep(versions, tables);
        }
    }

    fn keep(&self, versions: Versions, tables: Tables) -> Arc<Tables> {
        let tables = Arc::new(tables);
        *self.read.lock() = Some(Reading {
            tables: tables.clone(),
            versions,
            checked: Instant::now(),
        });
        tables
    }

    /// The tables as last read. A database never refreshed, as outside a
    /// server (a command line resolving a user before it serves), is read
    /// here, on the calling thread.
    fn tables(&self) -> Arc<Tables> {
        if let Some(r) = &*self.read.lock() {
            return r.tables.clone();
        }
        let (versions, tables) = self.files.read();
        self.keep(versions, tables)
    }

    /// The user an attach names: by numeric id if given, else by name.
    pub fn resolve(&self, uname: &str, n_uname: u32) -> Result<Creds> {
        let t = self.tables();
        let (name, uid, gid) = if n_uname != NONUNAME {
            let name = t.user_names.get(&n_uname).cloned();
            let gid = name
                .as_ref()
                .and_then(|n| t.users.get(n))
                .map_or(n_uname, |u| u.1);
            (name.unwrap_or_else(|| n_uname.to_string()), n_uname, gid)
        } else {
            let (uid, gid) = *t
                .users
                .get(uname)
                .ok_or_else(|| Error::with_errno(Errno::EACCES, format!("unknown user {uname}")))?;
            (uname.to_owned(), uid, gid)
        };
        let mut groups = t.members.get(&name).cloned().unwrap_or_default();
        if !groups.contains(&gid) {
            groups.push(gid);
        }
        Ok(Creds {
            uid,
            gid,
            groups,
            name,
        })
    }

    /// The name of user `uid`, or the uid in decimal.
    pub fn user_name(&self, uid: u32) -> String {
        self.tables()
            .user_names
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    /// The name of group `gid`, or the gid in decimal.
    pub fn group_name(&self, gid: u32) -> String {
        self.tables()
            .group_names
            .get(&gid)
            .cloned()
            .unwrap_or_else(|| gid.to_string())
    }

    /// The id of the group called `name`, which may be a gid in decimal.
    pub fn group_id(&self, name: &str) -> Option<u32> {
        self.tables()
            .group_ids
            .get(name)
            .copied()
            .or_else(|| name.parse().ok())
    }
}

/// Runs `f` on this thread as `creds`, then switches back to root. With
/// `None` (squash mode) runs `f` as the server.
pub(crate) fn run_as<T>(creds: Option<&Creds>, f: impl FnOnce() -> T) -> Result<T> {
    let Some(c) = creds else {
        return Ok(f());
    };
    let keep = None::<Uid>;
    let keep_gid = None::<Gid>;
    let groups: Vec<Gid> = c.groups.iter().map(|&g| Gid::from_raw(g)).collect();
    // Back to root however this ends: a switch that fails half-way, or a
    // call that panics, leaves the thread (a runtime worker or a pool
    // thread, serving others next) in no other user's identity.
    let _root = Restore;
    // Groups and gid first, while still root; the uid last.
    set_thread_groups(&groups).map_err(Error::from_errno_io)?;
    set_thread_res_gid(keep_gid, Some(Gid::from_raw(c.gid)), keep_gid)
        .map_err(Error::from_errno_io)?;
    set_thread_res_uid(keep, Some(Uid::from_raw(c.uid)), keep).map_err(Error::from_errno_io)?;
    Ok(f())
}

/// Switches the thread back to root when dropped.
struct Restore;

impl Drop for Restore {
    /// Back to root: uid first, so that the rest is allowed again.
    fn drop(&mut self) {
        let results = [
            set_thread_res_uid(None::<Uid>, Some(Uid::ROOT), None::<Uid>),
            set_thread_res_gid(None::<Gid>, Some(Gid::ROOT), None::<Gid>),
            set_thread_groups(&[]),
        ];
        if results.iter().any(Result::is_err) {
            // A thread that cannot become root again must not serve another
            // user's request with the wrong identity.
            eprintln!("ninep: cannot restore root credentials on a server thread");
            std::process::abort();
        }
    }
}

trait FromIo {
    fn from_errno_io(e: rustix::io::Errno) -> Error;
}

impl FromIo for Error {
    fn from_errno_io(e: rustix::io::Errno) -> Error {
        Error::from_errno(Errno(e.raw_os_error() as u32))
    }
}

#[cfg(test)]
mod tests {
    use rustix::process::{getegid, geteuid};

    use super::*;

    #[test]
    fn a_call_that_panics_leaves_its_thread_root() {
        assert!(
            geteuid().is_root(),
            "switching a thread's ids needs root: run this test as root"
        );
        let nobody = Creds {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
            name: "nobody".into(),
        };
        let call = std::panic::catch_unwind(|| {
            run_as(Some(&nobody), || {
                assert_eq!(geteuid().as_raw(), 65534);
                panic!("the call fails");
            })
        });
        assert!(call.is_err());
        assert!(geteuid().is_root() && getegid().is_root());
    }
}
