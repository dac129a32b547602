//! Calls on names: attaching, walking, and making, linking, removing and
//! renaming directory entries. They run on the thread serving the request
//! (see `Export::call_here`).

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;

use ninep_server::{Error, Opened, Result, User};
use ninep_wire::consts::dotl;
use ninep_wire::consts::mode::DMAPPEND;
use ninep_wire::{Dialect, Errno, Name, Qid};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use crate::confine::{Node, Place, beneath, not_dir_entry};
use crate::open_flags::oflags;
use crate::{Export, ExportFile, Identity, errno};

pub(crate) async fn attach(export: &Export, user: &User) -> Result<(ExportFile, Qid)> {
    let inner = &export.inner;
    if !user.aname.is_empty() && user.aname != inner.path && user.aname != "/" {
        return Err(Error::with_errno(Errno::ENOENT, "no such tree"));
    }
    inner.users.refresh().await;
    let creds = match &inner.options.identity {
        Identity::Server => None,
        Identity::Squash(c) => Some(Arc::new(c.clone())),
        Identity::Multiuser => Some(Arc::new(inner.users.resolve(&user.uname, user.n_uname)?)),
    };
    let root = inner.root.clone();
    let file = ExportFile {
        node: root.clone(),
        io: None,
        writing: Arc::default(),
        creds,
    };
    let qid = export
        .call_here(&file.creds, move |inner| {
            let st = rustix::fs::fstat(&root.fd).map_err(errno)?;
            // The user must be able to search the root.
            rustix::fs::accessat(&root.fd, ".", rustix::fs::Access::EXEC_OK, AtFlags::EACCESS)
                .or_else(|e| {
                    if e == rustix::io::Errno::INVAL {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .map_err(errno)?;
            Ok(inner.qid(&st))
        })
        .await?;
    Ok((file, qid))
}

pub(crate) async fn walk(
    export: &Export,
    dialect: Dialect,
    dir: &ExportFile,
    name: &Name,
) -> Result<(ExportFile, Qid)> {
    let from = dir.node.clone();
    let name = name.to_string();
    let (node, qid) = export
        .call_here(&dir.creds, move |inner| {
            let (node, st) = if name == ".." {
                let node = from.place().0.unwrap_or_else(|| inner.root.clone());
                let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
                (node, st)
            } else {
                let (node, st) = inner.lookup_with_stat(&from, &name)?;
                // 9P2000 cannot show a link as one, so it reaches the target.
                if dialect == Dialect::Base && node.ty == FileType::Symlink {
                    let node = inner.follow(&from, &name, node)?;
                    let st = rustix::fs::fstat(&node.fd).map_err(errno)?;
                    (node, st)
                } else {
                    (node, st)
                }
            };
            let qid = inner.marked(&node, &st);
            Ok((node, qid))
        })
        .await?;
    let file = ExportFile {
        node,
        io: None,
        writing: Arc::default(),
        creds: dir.creds.clone(),
    };
    Ok((file, qid))
}

/// What `then` gives for `name`, just made in `parent` as the file whose
/// stat is `made`. A call refused after the making (its node needs a
/// descriptor, and the server may be out of them) leaves nothing behind,
/// so that asking again may succeed: what was made is removed, if the
/// name still holds it, unchanged: a node renamed into its place since,
/// or one made anew with its inode number, has a later change time.
fn undone_on_failure<T>(
    parent: &Node,
    name: &str,
    made: &Stat,
    then: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let identity = |st: &Stat| (st.st_ino, st.st_dev, st.st_ctime, st.st_ctime_nsec);
    then().inspect_err(|_| remove_if_still(parent, name, |now| identity(now) == identity(made)))
}

/// Removes `name` from `parent` if `made` says it still names the file
/// made there: another client may have put its own in its place meanwhile.
/// Needs no descriptor, as what it undoes failed for want of one.
fn remove_if_still(parent: &Node, name: &str, made: impl FnOnce(&Stat) -> bool) {
    let Ok(now) = rustix::fs::statat(&parent.fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return;
    };
    if made(&now) {
        let how = if FileType::from_raw_mode(now.st_mode) == FileType::Directory {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        let _ = rustix::fs::unlinkat(&parent.fd, name, how);
    }
}

/// Undoes the making of `name` in `dir` as the file of qid `made`, which a
/// caller of the export failed after (see [`ninep_server::Filesystem::unmake`]).
pub(crate) async fn unmake(export: &Export, dir: &ExportFile, name: &Name, made: Qid) {
    let Ok(name) = not_dir_entry(name).map(str::to_owned) else {
        return;
    };
    let parent = dir.node.clone();
    let _ = export
        .call_here(&dir.creds, move |inner| {
            remove_if_still(&parent, &name, |now| inner.qid(now).path == made.path);
            Ok(())
        })
        .await;
}

/// The stat of `name`, just made in `parent`, for [`undone_on_failure`].
fn just_made(parent: &Node, name: &str) -> Result<Stat> {
    rustix::fs::statat(&parent.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)
}

pub(crate) async fn create(
    export: &Export,
    dir: &ExportFile,
    name: &Name,
    mode: u32,
    flags: u32,
) -> Result<(ExportFile, Opened)> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let parent = dir.node.clone();
    let (node, fd, qid) = export
        .call_here(&dir.creds, move |inner| {
            let mut o = oflags(flags) | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
            if mode & DMAPPEND != 0 {
                o |= OFlags::APPEND;
            }
            let fd = rustix::fs::openat2(
                &parent.fd,
                name.as_str(),
                o,
                Mode::from_raw_mode(mode & 0o7777),
                beneath(),
            )
            .map_err(errno)?;
            inner.unmask(&parent, fd.as_fd(), mode);
            let st = rustix::fs::fstat(&fd).map_err(errno)?;
            let node = undone_on_failure(&parent, &name, &st, || inner.lookup(&parent, &name))?;
            if node.ino != st.st_ino || node.dev != st.st_dev {
                return Err(Error::with_errno(
                    Errno::ENOENT,
                    "file was replaced as it was made",
                ));
            }
            if let Err(e) = inner.mark(&node, mode) {
                let _ = rustix::fs::unlinkat(&parent.fd, name.as_str(), AtFlags::empty());
                return Err(Error::with_errno(
                    Errno(e.raw_os_error() as u32),
                    "append-only and exclusive files need extended attributes here",
                ));
            }
            Ok((node.clone(), fd, inner.marked(&node, &st)))
        })
        .await?;
    let file = ExportFile {
        node,
        io: Some(Arc::new(fd)),
        writing: Arc::default(),
        creds: dir.creds.clone(),
    };
    Ok((file, Opened { qid, iounit: 0 }))
}

pub(crate) async fn mkdir(
    export: &Export,
    dir: &ExportFile,
    name: &Name,
    mode: u32,
) -> Result<Qid> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let parent = dir.node.clone();
    export
        .call_here(&dir.creds, move |inner| {
            rustix::fs::mkdirat(
                &parent.fd,
                name.as_str(),
                Mode::from_raw_mode(mode & 0o7777),
            )
            .map_err(errno)?;
            let made = just_made(&parent, &name)?;
            undone_on_failure(&parent, &name, &made, || inner.made(&parent, &name, mode))
        })
        .await
}

pub(crate) async fn symlink(
    export: &Export,
    dir: &ExportFile,
    name: &Name,
    target: &str,
) -> Result<Qid> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let target = target.to_owned();
    let parent = dir.node.clone();
    export
        .call_here(&dir.creds, move |inner| {
            rustix::fs::symlinkat(target.as_str(), &parent.fd, name.as_str()).map_err(errno)?;
            inner.qid_at(&parent, &name)
        })
        .await
}

pub(crate) async fn mknod(
    export: &Export,
    dir: &ExportFile,
    name: &Name,
    mode: u32,
    major: u32,
    minor: u32,
) -> Result<Qid> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let ty = FileType::from_raw_mode(mode);
    let device = matches!(ty, FileType::CharacterDevice | FileType::BlockDevice);
    if device && !export.inner.options.allow_special {
        return Err(Error::with_errno(Errno::EPERM, "device nodes are not made"));
    }
    let parent = dir.node.clone();
    export
        .call_here(&dir.creds, move |inner| {
            let dev = rustix::fs::makedev(major, minor);
            rustix::fs::mknodat(
                &parent.fd,
                name.as_str(),
                ty,
                Mode::from_raw_mode(mode & 0o7777),
                dev,
            )
            .map_err(errno)?;
            let made = just_made(&parent, &name)?;
            undone_on_failure(&parent, &name, &made, || inner.made(&parent, &name, mode))
        })
        .await
}

pub(crate) async fn link(
    export: &Export,
    dir: &ExportFile,
    file: &ExportFile,
    name: &Name,
) -> Result<()> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let parent = dir.node.clone();
    let node = file.node.clone();
    export
        .call_here(&dir.creds, move |inner| {
            let fd = node.fd.as_raw_fd().to_string();
            rustix::fs::linkat(
                &inner.proc_fd,
                fd.as_str(),
                &parent.fd,
                name.as_str(),
                AtFlags::SYMLINK_FOLLOW,
            )
            .map_err(errno)
        })
        .await
}

pub(crate) async fn readlink(export: &Export, file: &ExportFile) -> Result<String> {
    let node = file.node.clone();
    export
        .call_here(&file.creds, move |_| {
            let target = rustix::fs::readlinkat(&node.fd, "", Vec::new()).map_err(errno)?;
            target
                .into_string()
                .map_err(|_| Error::with_errno(Errno::EINVAL, "link target is not UTF-8"))
        })
        .await
}

pub(crate) async fn remove(export: &Export, file: &ExportFile) -> Result<()> {
    export.readonly()?;
    let node = file.node.clone();
    export
        .call_here(&file.creds, move |inner| {
            let (Some(parent), name) = node.place() else {
                return Err(Error::with_errno(Errno::EBUSY, "cannot remove the root"));
            };
            inner.still_there(&parent, &name, &node)?;
            let flags = if node.is_dir() {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(&parent.fd, name.as_str(), flags).map_err(errno)
        })
        .await
}

pub(crate) async fn unlinkat(
    export: &Export,
    dir: &ExportFile,
    name: &Name,
    flags: u32,
) -> Result<()> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let parent = dir.node.clone();
    export
        .call_here(&dir.creds, move |_| {
            let at = if flags & dotl::AT_REMOVEDIR != 0 {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(&parent.fd, name.as_str(), at).map_err(errno)
        })
        .await
}

pub(crate) async fn rename(
    export: &Export,
    file: &ExportFile,
    newdir: Option<&ExportFile>,
    name: &Name,
) -> Result<()> {
    export.readonly()?;
    let name = not_dir_entry(name)?.to_owned();
    let node = file.node.clone();
    let newdir = newdir.map(|d| d.node.clone());
    export
        .call_here(&file.creds, move |inner| {
            let (Some(parent), oldname) = node.place() else {
                return Err(Error::with_errno(Errno::EBUSY, "cannot rename the root"));
            };
            let target = newdir.unwrap_or_else(|| parent.clone());
            inner.still_there(&parent, &oldname, &node)?;
            rustix::fs::renameat(&parent.fd, oldname.as_str(), &target.fd, name.as_str())
                .map_err(errno)?;
            *node.place.lock() = Place {
                parent: Some(target),
                name,
            };
            Ok(())
        })
        .await
}

pub(crate) async fn renameat(
    export: &Export,
    olddir: &ExportFile,
    oldname: &Name,
    newdir: &ExportFile,
    newname: &Name,
) -> Result<()> {
    export.readonly()?;
    let (oldname, newname) = (
        not_dir_entry(oldname)?.to_owned(),
        not_dir_entry(newname)?.to_owned(),
    );
    let (from, to) = (olddir.node.clone(), newdir.node.clone());
    export
        .call_here(&olddir.creds, move |_| {
            rustix::fs::renameat(&from.fd, oldname.as_str(), &to.fd, newname.as_str())
                .map_err(errno)
        })
        .await
}
