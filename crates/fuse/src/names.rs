//! Names in directories: made (directories, special files, links),
//! removed and renamed, with the inode table kept in step.

use std::time::SystemTime;

use fuser::FileAttr;
use ninep_client::Node;
use ninep_wire::Name;

use crate::{Cache, Inner, KernelErrno, errno};

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

impl Inner {
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
        let at = name.as_str();
        let what_links = match what {
            Make::Dir { .. } => Links::Subdirectory,
            Make::Link { to } => Links::Of(to),
            Make::Node { .. } | Make::Symlink { .. } => Links::None,
        };
        // A new directory's qid, if any.
        let made = match what {
            Make::Dir { mode, gid } => dir.mkdir_with_gid(at, mode, gid).await.map(Some),
            Make::Node { mode, rdev, gid } => {
                let rdev = u64::from(rdev);
                dir.mknod(at, Node { mode, rdev }, gid).await.map(|_| None)
            }
            Make::Symlink { target, gid } => dir.symlink(at, &target, gid).await.map(|_| None),
            Make::Link { to } => {
                let to = self.fid(to, user).await?;
                dir.link(at, &to).await.map(|()| None)
            }
        };
        let new_dir = made.map_err(errno)?;
        self.nodes().entry_made(parent, name);
        self.entries_changed(parent, what_links);
        let attr = self.lookup(parent, name, user).await?;
        // A directory the server keeps versions of (not a synthetic one,
        // which may come with entries of its own) starts empty: under loose
        // caching the names made in it next need not be looked for first.
        if let Some(qid) = new_dir
            && qid.version != 0
            && self.cache == Cache::Loose
        {
            self.nodes().made_empty(attr.ino.0);
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
        self.settle_times(|ino| Some(ino) == named).await;
        let dir = self.fid(parent, user).await?;
        dir.unlink_at(name.as_str(), dir_only)
            .await
            .map_err(errno)?;
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
        let named = {
            let nodes = self.nodes();
            [
                nodes.ino_at(parent, oldname),
                nodes.ino_at(newparent, newname),
            ]
        };
        self.settle_times(|ino| named.contains(&Some(ino))).await;
        let from = self.fid(parent, user).await?;
        let to = self.fid(newparent, user).await?;
        from.rename_at(oldname, &to, newname).await.map_err(errno)?;
        let mut nodes = self.nodes();
        nodes.renamed(parent, oldname, newparent, newname);
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
