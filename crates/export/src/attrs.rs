//! Attributes: a host stat as 9P sees it, and the calls that read and
//! change attributes (Tgetattr, Tsetattr, Tstatfs and their 9P2000 forms).

use std::sync::Arc;

use ninep_server::{Attr, Error, Result, SetAttr, SetTime, Time};
use ninep_wire::Rstatfs;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};

use crate::{Export, ExportFile, Inner, errno};

fn time(sec: i64, nsec: i64) -> Time {
    Time {
        sec: sec.max(0) as u64,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

impl Inner {
    pub(crate) fn attr(&self, st: &rustix::fs::Stat, name: &str) -> Attr {
        Attr {
            qid: self.qid(st),
            name: name.to_owned(),
            mode: st.st_mode,
            uid: self.users.user_name(st.st_uid),
            gid: self.users.group_name(st.st_gid),
            muid: String::new(),
            n_uid: st.st_uid,
            n_gid: st.st_gid,
            nlink: st.st_nlink,
            rdev: st.st_rdev,
            size: st.st_size as u64,
            blksize: st.st_blksize as u64,
            blocks: st.st_blocks as u64,
            atime: time(st.st_atime, st.st_atime_nsec as i64),
            mtime: time(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: time(st.st_ctime, st.st_ctime_nsec as i64),
        }
    }

    /// Attributes of a directory entry that cannot be stat'ed: its inode
    /// number and type, and nothing else.
    pub(crate) fn entry_attr(&self, dev: u64, ino: u64, ty: FileType, name: &str) -> Attr {
        let mode = ty.as_raw_mode();
        Attr {
            qid: self.qid_of(dev, ino, mode, 0),
            name: name.to_owned(),
            mode,
            nlink: 1,
            ..Attr::default()
        }
    }
}

pub(crate) async fn getattr(export: &Export, file: &ExportFile) -> Result<Attr> {
    export.inner.users.refresh().await;
    let node = file.node.clone();
    export
        .call_here(&file.creds, move |inner| {
            let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
            let mut attr = inner.attr(&st, &node.place().1);
            attr.qid = inner.marked(&node, &st);
            Ok(attr)
        })
        .await
}

pub(crate) async fn setattr(export: &Export, file: &ExportFile, set: &SetAttr) -> Result<()> {
    export.readonly()?;
    export.inner.users.refresh().await;
    let node = file.node.clone();
    let io = file.io.clone();
    let set = set.clone();
    // Truncation may free many blocks on a disk.
    let truncates = set.size.is_some();
    let change = move |inner: &Inner| {
        let is_link = node.ty == FileType::Symlink;
        if let Some(mode) = set.mode {
            if is_link {
                return Err(Error::not_supported());
            }
            rustix::fs::chmodat(
                rustix::fs::CWD,
                inner.proc_path(&node).as_str(),
                Mode::from_raw_mode(mode & 0o7777),
                AtFlags::empty(),
            )
            .map_err(errno)?;
        }
        let gid = match &set.gid_name {
            Some(name) => Some(
                inner
                    .users
                    .group_id(name)
                    .ok_or_else(|| Error::new("unknown group"))?,
            ),
            None => set.gid,
        };
        // Every other change bumps ctime itself; an empty chown, which
        // also clears the set-id bits of a file not the caller's to
        // keep them on, is only for a bump alone.
        let bump_only = set.ctime
            && set.mode.is_none()
            && set.size.is_none()
            && set.atime.is_none()
            && set.mtime.is_none();
        if set.uid.is_some() || gid.is_some() || bump_only {
            let uid = set.uid.map(rustix::process::Uid::from_raw);
            let gid = gid.map(rustix::process::Gid::from_raw);
            rustix::fs::chownat(
                &node.fd,
                "",
                uid,
                gid,
                AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(errno)?;
        }
        if let Some(size) = set.size {
            // A fid open for writing truncates through its descriptor
            // (ftruncate), which the file's mode no longer governs.
            let writable = io.filter(|fd| {
                let access = rustix::fs::fcntl_getfl(&**fd).map(|f| f & OFlags::ACCMODE);
                matches!(access, Ok(OFlags::WRONLY | OFlags::RDWR))
            });
            let fd = match writable {
                Some(fd) => fd,
                None => Arc::new(inner.reopen(&node, OFlags::WRONLY)?),
            };
            rustix::fs::ftruncate(&*fd, size).map_err(errno)?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            let spec = |t: Option<SetTime>| match t {
                None => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                },
                Some(SetTime::Now) => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                },
                Some(SetTime::At(t)) => Timespec {
                    tv_sec: t.sec as i64,
                    tv_nsec: t.nsec as _,
                },
            };
            let times = Timestamps {
                last_access: spec(set.atime),
                last_modification: spec(set.mtime),
            };
            if is_link {
                // A link's own times, through its O_PATH descriptor.
                rustix::fs::utimensat(&node.fd, "", &times, AtFlags::EMPTY_PATH)
            } else {
                rustix::fs::utimensat(
                    rustix::fs::CWD,
                    inner.proc_path(&node).as_str(),
                    &times,
                    AtFlags::empty(),
                )
            }
            .map_err(errno)?;
        }
        Ok(())
    };
    if truncates {
        export.call(&file.creds, change).await
    } else {
        export.call_here(&file.creds, change).await
    }
}

pub(crate) async fn statfs(export: &Export, file: &ExportFile) -> Result<Rstatfs> {
    let node = file.node.clone();
    export
        .call_here(&file.creds, move |_| {
            let s = rustix::fs::fstatfs(&node.fd).map_err(errno)?;
            Ok(Rstatfs {
                ty: s.f_type as u32,
                bsize: s.f_bsize as u32,
                blocks: s.f_blocks,
                bfree: s.f_bfree,
                bavail: s.f_bavail,
                files: s.f_files,
                ffree: s.f_ffree,
                fsid: 0,
                namelen: s.f_namelen as u32,
            })
        })
        .await
}
