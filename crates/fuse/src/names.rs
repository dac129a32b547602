//! Names in directories: made (directories, special files, links),
//! removed and renamed, with the inode table kept in step.

use std::time::SystemTime;

use fuser::FileAttr;
use ninep_client::{Error, Node};
use ninep_wire::{Errno, Name};

use crate::{Access, Cache, Inner, KernelErrno, errno, fail};

/// A new directory entry to make.
pub(crate) enum Make {
    Dir {
        mode: u32,
        gid: u32,
    },
    Node {
        mode: u32,
        rdev: u32,
        gid: u32,
    },
    Symlink {
        target: String,
        gid: u32,
    },
    /// A hard link to the file of inode `to`.
    Link {
        to: u64,
    },
}

/// Whose link count an entry made or removed changes.
enum Links {
    /// A subdirectory: its parent's.
    Subdirectory,
    /// A hard link: the inode's.
    Of(u64),
    None,
}

/// A name being made in a directory that may be known whole: unless
/// [`Making::done`], what is known of the directory goes, since a request
/// that failed or was abandoned may have made the name all the same.
pub(crate) struct Making<'a> {
    inner: &'a Inner,
    dir: u64,
    done: bool,
    /// Whether the directory was known whole, as the first failure found
    /// it: a making asked again (see [`Inner::with_room`]) fails as one.
    was_whole: std::sync::OnceLock<bool>,
}

impl Making<'_> {
    /// The name is made and noted.
    pub fn done(mut self) {
        self.done = true;
    }

    /// The kernel's errno for `e`, which the making failed with. A name
    /// taken to be absent that is there (made meanwhile by another client)
    /// gives ESTALE, on which the kernel looks the name up again (now at
    /// the server) and goes on as it would have.
    pub fn failed(&self, e: Error) -> KernelErrno {
        let known = *self
            .was_whole
            .get_or_init(|| self.inner.nodes().not_whole(self.dir));
        match e.errno() {
            Errno::EEXIST if known => fail(Errno::ESTALE),
            _ => errno(e),
        }
    }
}

impl Drop for Making<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.inner.nodes().not_whole(self.dir);
        }
    }
}

impl Inner {
    /// Starts making a name in `dir`.
    pub(crate) fn making(&self, dir: u64) -> Making<'_> {
        Making {
            inner: self,
            dir,
            done: false,
            was_whole: std::sync::OnceLock::new(),
        }
    }

    /// Notes an entry made in or removed from `dir`, changing `links`.
    fn entries_changed(&self, dir: u64, links: Links) {
        let mut nodes = self.nodes();
        match links {
            Links::Subdirectory => nodes.changed(dir),
            Links::Of(ino) => {
                nodes.changed(ino);
                nodes.entries_changed(dir, SystemTime::now());
            }
            Links::None => nodes.entries_changed(dir, SystemTime::now()),
        }
    }

    /// Makes `name` in directory `parent`, then looks it up: mkdir, mknod,
    /// symlink and link all answer with the new entry.
    pub async fn make(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
        what: Make,
    ) -> Result<FileAttr, KernelErrno> {
        let dir = self.fid(parent, user).await?;
        let making = self.making(parent);
        let at = name.as_str();
        let what_links = match what {
            Make::Dir { .. } => Links::Subdirectory,
            Make::Link { to } => Links::Of(to),
            Make::Node { .. } | Make::Symlink { .. } => Links::None,
        };
        // A new directory's qid, if any.
        let make = || async {
            let made = match &what {
                &Make::Dir { mode, gid } => dir.mkdir_with_gid(at, mode, gid).await.map(Some),
                &Make::Node { mode, rdev, gid } => {
                    let rdev = u64::from(rdev);
                    dir.mknod(at, Node { mode, rdev }, gid).await.map(|_| None)
                }
                Make::Symlink { target, gid } => dir.symlink(at, target, *gid).await.map(|_| None),
                &Make::Link { to } => {
                    let to = self.fid(to, user).await?;
                    dir.link(at, &to).await.map(|()| None)
                }
            };
            made.map_err(|e| making.failed(e))
        };
        let new_dir = self.with_room(make).await?;
        self.nodes().entry_made(parent, name);
        making.done();
        self.entries_changed(parent, what_links);
        let attr = self.lookup(parent, name, user).await?;
        // A directory the server keeps versions of (not a synthetic one,
        // which may come with entries of its own) starts empty. Under loose
        // caching, on a mount of one attach (whose callers all see the same
        // names), the names made in it next need not be looked for first.
        if let Some(qid) = new_dir
            && qid.version != 0
            && self.cache == Cache::Loose
            && self.access == Access::Single
        {
            self.nodes().made_empty(attr.ino.0, self.ttl);
        }
        Ok(attr)
    }

    /// Removes `name` from directory `parent`: rmdir if `dir_only`, else unlink.
    pub async fn remove(
        &self,
        parent: u64,
        name: &Name,
        user: u32,
        dir_only: bool,
    ) -> Result<(), KernelErrno> {
        // Times set behind go to the file they were for, whichever way
        // the server's fids name it.
        let named = self.nodes().ino_at(parent, name);
        let _ = self.settle_times(|ino| Some(ino) == named).await;
        let dir = self.fid(parent, user).await?;
        dir.unlink_at(name.as_str(), dir_only)
            .await
            .map_err(errno)?;
        if let Some(ino) = named {
            // Its last link may have gone: the server frees it once no fid
            // holds it open.
            self.idle.lock().forget(ino);
        }
        self.nodes().unlinked(parent, name);
        let links = if dir_only {
            Links::Subdirectory
        } else {
            Links::None
        };
        self.entries_changed(parent, links);
        Ok(())
    }

    /// Renames `oldname` in `parent` to `newname` in `newparent`.
    pub async fn rename(
        &self,
        parent: u64,
        oldname: &Name,
        newparent: u64,
        newname: &Name,
        user: u32,
    ) -> Result<(), KernelErrno> {
        // Times set behind go to the files they were for, wherever the
        // rename moves them (a directory moved moves what is inside).
        let _ = self.settle_times(|_| true).await;
        let replaced = self.nodes().ino_at(newparent, newname);
        let from = self.fid(parent, user).await?;
        let to = self.fid(newparent, user).await?;
        let making = self.making(newparent);
        from.rename_at(oldname, &to, newname)
            .await
            .map_err(|e| making.failed(e))?;
        if let Some(ino) = replaced {
            // As for a remove: the server frees it once no fid holds it.
            self.idle.lock().forget(ino);
        }
        let mut nodes = self.nodes();
        nodes.renamed(parent, oldname, newparent, newname);
        making.done();
        if parent == newparent {
            nodes.entries_changed(parent, SystemTime::now());
        } else {
            // A directory moved changes both link counts: asked for anew.
            nodes.changed(parent);
            nodes.changed(newparent);
        }
        Ok(())
    }
}
