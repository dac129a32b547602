//! Who a request runs as: the user database, and switching the credentials
//! of the thread that performs a request.
//!
//! In multi-user mode each filesystem call runs on a thread whose effective
//! uid, gid and groups are for that call those of the attaching user, so
//! the kernel makes the permission checks. Linux credentials are per thread
//! at the system-call level, so switching one thread affects no other
//! request. The real and saved uid stay 0, which is what lets the thread
//! switch back.

use std::collections::HashMap;

use ninep_server::{Error, Result};
use ninep_wire::{Errno, NONUNAME};
use parking_lot::Mutex;
use rustix::process::{Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

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

/// /etc/passwd and /etc/group, read when first needed and kept.
#[derive(Debug, Default)]
pub struct UserDb {
    cache: Mutex<Option<Tables>>,
}

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

fn read_tables() -> Tables {
    let mut t = Tables::default();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
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
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
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
    t
}

impl UserDb {
    fn with<T>(&self, f: impl FnOnce(&Tables) -> T) -> T {
        let mut cache = self.cache.lock();
        f(cache.get_or_insert_with(read_tables))
    }

    /// The user an attach names: by numeric id if given, else by name.
    pub fn resolve(&self, uname: &str, n_uname: u32) -> Result<Creds> {
        self.with(|t| {
            let (name, uid, gid) = if n_uname != NONUNAME {
                let name = t.user_names.get(&n_uname).cloned();
                let gid = name
                    .as_ref()
                    .and_then(|n| t.users.get(n))
                    .map_or(n_uname, |u| u.1);
                (name.unwrap_or_else(|| n_uname.to_string()), n_uname, gid)
            } else {
                let (uid, gid) = *t.users.get(uname).ok_or_else(|| {
                    Error::with_errno(Errno::EACCES, format!("unknown user {uname}"))
                })?;
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
        })
    }

    /// The name of user `uid`, or the uid in decimal.
    pub fn user_name(&self, uid: u32) -> String {
        self.with(|t| t.user_names.get(&uid).cloned())
            .unwrap_or_else(|| uid.to_string())
    }

    /// The name of group `gid`, or the gid in decimal.
    pub fn group_name(&self, gid: u32) -> String {
        self.with(|t| t.group_names.get(&gid).cloned())
            .unwrap_or_else(|| gid.to_string())
    }

    /// The id of the group called `name`, which may be a gid in decimal.
    pub fn group_id(&self, name: &str) -> Option<u32> {
        self.with(|t| t.group_ids.get(name).copied())
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
