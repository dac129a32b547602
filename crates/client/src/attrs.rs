//! Attributes in whichever dialect the server speaks: Tsetattr, Treadlink,
//! Tstatfs and Tfsync in 9P2000.L; a wstat, a stat's extension and the
//! "don't touch" wstat that means sync in 9P2000 and .u.

use ninep_wire::consts::{dotl, unix::*};
use ninep_wire::*;

use crate::error::Error;
use crate::file::File;
use crate::fsys::Fid;

/// Attribute changes for [`Fid::setattr`]; `None` leaves an attribute as
/// it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// Permission bits, set-id and sticky bits among them. A file type in
    /// the mode is the file's own (9P2000.u needs it for devices); without
    /// one it is taken from the qid.
    pub mode: Option<u32>,
    /// Numeric owner (9P2000.u, .L).
    pub uid: Option<u32>,
    /// Numeric group (9P2000.u, .L).
    pub gid: Option<u32>,
    /// Group by name (9P2000, .u; for .L a number in decimal).
    pub group: Option<String>,
    /// Length, truncating or extending the file.
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<SetTime>,
    /// Modification time.
    pub mtime: Option<SetTime>,
    /// Set the change time to the server's clock (9P2000.L; the others
    /// change it with any change).
    pub ctime: bool,
}

/// A time to set: the server's clock (9P2000.L; the client's for the
/// others), or a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetTime {
    /// The time of the change.
    Now,
    /// A time since the Unix epoch.
    At {
        /// Seconds.
        sec: u64,
        /// Nanoseconds (9P2000 and .u keep whole seconds).
        nsec: u32,
    },
}

impl SetTime {
    fn seconds(self) -> (u64, u32) {
        match self {
            SetTime::Now => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                (now.as_secs(), now.subsec_nanos())
            }
            SetTime::At { sec, nsec } => (sec, nsec),
        }
    }
}

impl SetAttr {
    fn is_empty(&self) -> bool {
        *self == SetAttr::default()
    }
}

/// What statfs(2) reports of the file system holding a file (9P2000.L).
pub type FsStats = Rstatfs;

impl Fid {
    /// Changes the file's attributes: a Tsetattr, or a Twstat carrying the
    /// changes a stat can. 9P2000 has no numeric ids (EPERM for them).
    pub async fn setattr(&self, set: &SetAttr) -> Result<(), Error> {
        if set.is_empty() {
            return Ok(());
        }
        let dialect = self.client.dialect();
        if dialect == Dialect::L {
            let msg = tsetattr(self.fid, set)?;
            return self.client.inner.call(msg).await.map(drop);
        }
        let mut set = std::borrow::Cow::Borrowed(set);
        if let Some(mode) = set.mode
            && mode & S_IFMT == 0
            && dialect == Dialect::U
            && convert::qid_file_type(self.qid().ty) == S_IFREG
        {
            // A wstat carries the whole mode, and a qid cannot tell a
            // device, fifo or socket from a regular file: the stat can.
            let ty = self.stat().await?.mode & S_IFMT;
            set.to_mut().mode = Some(ty | mode);
        }
        let stat = twstat(&set, self.qid(), dialect)?;
        let msg = Twstat {
            fid: self.fid,
            stat,
        };
        self.client.inner.call(msg).await.map(drop)
    }

    /// The target of a symbolic link; EINVAL for other files, as
    /// readlink(2), and for every file of a 9P2000 server.
    pub async fn readlink(&self) -> Result<String, Error> {
        match self.client.dialect() {
            Dialect::L => {
                let msg = Treadlink { fid: self.fid };
                Ok(self.client.inner.call(msg).await?.target)
            }
            Dialect::U => {
                let info = self.stat().await?;
                if info.mode & S_IFMT != S_IFLNK {
                    return Err(Error::refused(Errno::EINVAL, "not a symbolic link"));
                }
                Ok(info.extension)
            }
            Dialect::Base => Err(Error::refused(
                Errno::EINVAL,
                "9P2000 has no symbolic links",
            )),
        }
    }

    /// Asks the server to commit the file to stable storage: Tfsync
    /// (`datasync`: the data alone), or the all-"don't touch" Twstat that
    /// means sync in 9P2000 and .u. Servers may want the fid open.
    pub async fn fsync(&self, datasync: bool) -> Result<(), Error> {
        if self.client.dialect() == Dialect::L {
            let msg = Tfsync {
                fid: self.fid,
                datasync: Some(u32::from(datasync)),
            };
            return self.client.inner.call(msg).await.map(drop);
        }
        let msg = Twstat {
            fid: self.fid,
            stat: Stat::dont_touch(),
        };
        self.client.inner.call(msg).await.map(drop)
    }

    /// Figures of the file system holding the file. 9P2000 and .u have no
    /// way to ask: their figures are those of a tree that counts nothing
    /// ([`Rstatfs::uncounted`]), as Linux's client reports them, so that df
    /// still answers.
    pub async fn statfs(&self) -> Result<FsStats, Error> {
        match self.client.dialect() {
            Dialect::L => self.client.inner.call(Tstatfs { fid: self.fid }).await,
            _ => Ok(Rstatfs::uncounted()),
        }
    }
}

impl File {
    /// Asks the server to commit the file to stable storage (see
    /// [`Fid::fsync`]).
    pub async fn fsync(&self, datasync: bool) -> Result<(), Error> {
        self.fid().fsync(datasync).await
    }
}

/// The Tsetattr for `set`. "Now" is the server's clock; a given time goes
/// with its _SET bit.
fn tsetattr(fid: ninep_wire::Fid, set: &SetAttr) -> Result<Tsetattr, Error> {
    let mut m = Tsetattr {
        fid,
        valid: 0,
        mode: 0,
        uid: 0,
        gid: 0,
        size: 0,
        atime_sec: 0,
        atime_nsec: 0,
        mtime_sec: 0,
        mtime_nsec: 0,
    };
    if let Some(mode) = set.mode {
        m.valid |= dotl::SETATTR_MODE;
        m.mode = mode;
    }
    if let Some(uid) = set.uid {
        m.valid |= dotl::SETATTR_UID;
        m.uid = uid;
    }
    let gid =
        match (set.gid, &set.group) {
            (Some(gid), _) => Some(gid),
            (None, Some(name)) => Some(name.parse().map_err(|_| {
                Error::refused(Errno::EINVAL, "9P2000.L names groups by number only")
            })?),
            (None, None) => None,
        };
    if let Some(gid) = gid {
        m.valid |= dotl::SETATTR_GID;
        m.gid = gid;
    }
    if let Some(size) = set.size {
        m.valid |= dotl::SETATTR_SIZE;
        m.size = size;
    }
    for (time, plain, given) in [
        (set.atime, dotl::SETATTR_ATIME, dotl::SETATTR_ATIME_SET),
        (set.mtime, dotl::SETATTR_MTIME, dotl::SETATTR_MTIME_SET),
    ] {
        let Some(time) = time else { continue };
        m.valid |= plain;
        if let SetTime::At { sec, nsec } = time {
            m.valid |= given;
            let nsec = u64::from(nsec);
            if plain == dotl::SETATTR_ATIME {
                (m.atime_sec, m.atime_nsec) = (sec, nsec);
            } else {
                (m.mtime_sec, m.mtime_nsec) = (sec, nsec);
            }
        }
    }
    if set.ctime {
        m.valid |= dotl::SETATTR_CTIME;
    }
    Ok(m)
}

/// The wstat for `set` on a file of qid `qid`, in 9P2000 or .u.
fn twstat(set: &SetAttr, qid: Qid, dialect: Dialect) -> Result<Stat, Error> {
    let mut stat = Stat::dont_touch();
    if let Some(mode) = set.mode {
        // A wstat carries the whole Plan 9 mode: the type bits must stay.
        let ty = match mode & S_IFMT {
            0 => convert::qid_file_type(qid.ty),
            ty => ty,
        };
        stat.mode = convert::plan9_mode(ty | (mode & 0o7777), qid.ty, dialect);
    }
    let numeric = set.uid.is_some() || set.gid.is_some();
    if numeric && dialect != Dialect::U {
        return Err(Error::refused(
            Errno::EPERM,
            "9P2000 names owners and groups only by name",
        ));
    }
    stat.n_uid = set.uid.unwrap_or(NONUNAME);
    stat.n_gid = set.gid.unwrap_or(NONUNAME);
    if let Some(group) = &set.group {
        stat.gid = group.clone();
    }
    if let Some(size) = set.size {
        stat.length = size;
    }
    // 9P2000 times are whole seconds, until 2106.
    if let Some(t) = set.atime {
        stat.atime = t.seconds().0 as u32;
    }
    if let Some(t) = set.mtime {
        stat.mtime = t.seconds().0 as u32;
    }
    Ok(stat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ninep_wire::consts::mode::*;

    fn qid(ty: QidType) -> Qid {
        Qid {
            ty,
            version: 0,
            path: 1,
        }
    }

    #[test]
    fn a_wstat_keeps_the_files_type() {
        let chmod = SetAttr {
            mode: Some(0o4755),
            ..SetAttr::default()
        };
        let dir = twstat(&chmod, qid(QidType::DIR), Dialect::Base).unwrap();
        assert_eq!(dir.mode, DMDIR | 0o755);
        let file = twstat(&chmod, qid(QidType::APPEND), Dialect::U).unwrap();
        assert_eq!(file.mode, DMAPPEND | DMSETUID | 0o755);
        let device = SetAttr {
            mode: Some(S_IFCHR | 0o600),
            ..SetAttr::default()
        };
        let dev = twstat(&device, qid(QidType::FILE), Dialect::U).unwrap();
        assert_eq!(dev.mode, DMDEVICE | 0o600);
        assert_eq!((dev.n_uid, dev.n_gid, dev.length), (NONUNAME, NONUNAME, !0));
    }

    #[test]
    fn numeric_ids_need_9p2000u() {
        let chown = SetAttr {
            uid: Some(1000),
            ..SetAttr::default()
        };
        let err = twstat(&chown, qid(QidType::FILE), Dialect::Base).unwrap_err();
        assert_eq!(err.errno(), Errno::EPERM);
        let stat = twstat(&chown, qid(QidType::FILE), Dialect::U).unwrap();
        assert_eq!((stat.n_uid, stat.n_gid), (1000, NONUNAME));
    }

    #[test]
    fn setattr_sends_given_times_with_their_set_bits() {
        let set = SetAttr {
            atime: Some(SetTime::Now),
            mtime: Some(SetTime::At { sec: 7, nsec: 9 }),
            ctime: true,
            ..SetAttr::default()
        };
        let m = tsetattr(ninep_wire::Fid(3), &set).unwrap();
        assert_eq!(
            m.valid,
            dotl::SETATTR_ATIME
                | dotl::SETATTR_MTIME
                | dotl::SETATTR_MTIME_SET
                | dotl::SETATTR_CTIME
        );
        assert_eq!((m.mtime_sec, m.mtime_nsec, m.atime_sec), (7, 9, 0));
        let by_name = SetAttr {
            group: Some("staff".into()),
            ..SetAttr::default()
        };
        assert_eq!(
            tsetattr(ninep_wire::Fid(3), &by_name).unwrap_err().errno(),
            Errno::EINVAL
        );
    }
}
