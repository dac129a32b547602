//! Operations on the names in a directory, in whichever dialect the server
//! speaks: 9P2000.L's own messages where it has them, and otherwise what
//! Linux's client does with 9P2000.u and 9P2000 (Tcreate with .u
//! extensions, walk and Tremove, a wstat of the name). Where a dialect
//! cannot express an operation it is refused before anything is sent.

use ninep_wire::consts::{dotl, mode::*, open, unix::*};
use ninep_wire::*;

use crate::error::Error;
use crate::fsys::{Fid, bad_name, entry_name};

/// A special file for [`Fid::mknod`]: its Unix file type and, for
/// devices, number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    /// Unix mode: file type (`S_IFIFO`, `S_IFCHR`, ...) and permissions.
    pub mode: u32,
    /// Device number of a character or block device (Linux's encoding).
    pub rdev: u64,
}

impl Fid {
    /// Makes directory `name` in this directory.
    pub async fn mkdir(&self, name: &str, perm: u32) -> Result<Qid, Error> {
        self.mkdir_with_gid(name, perm, NONUNAME).await
    }

    /// As [`Fid::mkdir`], naming the group of the new directory (9P2000.L;
    /// other dialects ignore it).
    pub async fn mkdir_with_gid(&self, name: &str, perm: u32, gid: u32) -> Result<Qid, Error> {
        let name = entry_name(name)?;
        if self.client.dialect() == Dialect::L {
            let msg = Tmkdir {
                dfid: self.fid,
                name,
                mode: perm & 0o7777,
                gid,
            };
            return Ok(self.client.inner.call(msg).await?.qid);
        }
        let dialect = self.client.dialect();
        let perm = convert::plan9_mode(S_IFDIR | (perm & 0o7777), QidType::DIR, dialect);
        self.create_special(name, perm, String::new()).await
    }

    /// Makes the special file `name` (a fifo, socket or device; a regular
    /// file too) in this directory. 9P2000 has none: EPERM, as mknod(2)
    /// fails where a file system cannot make the node.
    pub async fn mknod(&self, name: &str, node: Node, gid: u32) -> Result<Qid, Error> {
        let name = entry_name(name)?;
        let (major, minor) = convert::major_minor(node.rdev);
        match self.client.dialect() {
            Dialect::L => {
                let msg = Tmknod {
                    dfid: self.fid,
                    name,
                    mode: node.mode,
                    major,
                    minor,
                    gid,
                };
                Ok(self.client.inner.call(msg).await?.qid)
            }
            dialect => {
                // A mode without a file type means a regular file, as in mknod(2).
                let ty = match node.mode & S_IFMT {
                    0 => S_IFREG,
                    ty => ty,
                };
                match ty {
                    S_IFREG => {}
                    S_IFIFO | S_IFSOCK | S_IFCHR | S_IFBLK if dialect == Dialect::U => {}
                    S_IFIFO | S_IFSOCK | S_IFCHR | S_IFBLK => {
                        return Err(no_such_files(dialect, "special files"));
                    }
                    _ => {
                        let what = "mknod makes no directories or links";
                        return Err(Error::refused(Errno::EINVAL, what));
                    }
                }
                let mode = ty | (node.mode & !S_IFMT);
                let perm = convert::plan9_mode(mode, QidType::FILE, dialect);
                let extension = convert::device_extension(mode, node.rdev).unwrap_or_default();
                self.create_special(name, perm, extension).await
            }
        }
    }

    /// Makes `name` in this directory a symbolic link to `target`.
    pub async fn symlink(&self, name: &str, target: &str, gid: u32) -> Result<Qid, Error> {
        let name = entry_name(name)?;
        match self.client.dialect() {
            Dialect::L => {
                let msg = Tsymlink {
                    fid: self.fid,
                    name,
                    symtgt: target.to_owned(),
                    gid,
                };
                Ok(self.client.inner.call(msg).await?.qid)
            }
            Dialect::U => {
                self.create_special(name, DMSYMLINK | 0o777, target.to_owned())
                    .await
            }
            Dialect::Base => Err(no_such_files(Dialect::Base, "symbolic links")),
        }
    }

    /// Makes `name` in this directory a hard link to the file `to`.
    pub async fn link(&self, name: &str, to: &Fid) -> Result<(), Error> {
        let name = entry_name(name)?;
        match self.client.dialect() {
            Dialect::L => {
                let msg = Tlink {
                    dfid: self.fid,
                    fid: to.fid,
                    name,
                };
                self.client.inner.call(msg).await.map(drop)
            }
            // 9P2000.u names the file to link to by its fid number.
            Dialect::U => self
                .create_special(name, DMLINK, to.fid.0.to_string())
                .await
                .map(drop),
            Dialect::Base => Err(no_such_files(Dialect::Base, "hard links")),
        }
    }

    /// A Tcreate in a second fid on this directory (Tcreate turns its fid
    /// into the new file, which is clunked when the fid is dropped).
    async fn create_special(&self, name: Name, perm: u32, extension: String) -> Result<Qid, Error> {
        let at = self.clone_fid().await?;
        let msg = Tcreate {
            fid: at.fid,
            name,
            perm,
            mode: open::OREAD,
            extension,
        };
        Ok(self.client.inner.call(msg).await?.qid)
    }

    /// Removes `name` from this directory, as unlink(2) or, with
    /// `dir_only`, rmdir(2): ENOTDIR and EISDIR where the file is of the
    /// other kind.
    pub async fn unlink_at(&self, name: &str, dir_only: bool) -> Result<(), Error> {
        let name = entry_name(name)?;
        if self.client.dialect() == Dialect::L {
            let msg = Tunlinkat {
                dirfid: self.fid,
                name: name.clone(),
                flags: if dir_only { dotl::AT_REMOVEDIR } else { 0 },
            };
            match self.client.inner.call(msg).await {
                // Servers without Tunlinkat (diod) are sent walk and Tremove,
                // as by Linux.
                Err(e) if e.errno() == Errno::EOPNOTSUPP => {}
                other => return other.map(drop),
            }
        }
        let file = self.walk(&[name]).await?;
        // Tremove removes whatever it is given; unlink and rmdir may not.
        match (dir_only, file.qid().ty.is_dir()) {
            (true, false) => Err(Error::refused(Errno::ENOTDIR, Errno::ENOTDIR.ename())),
            (false, true) => Err(Error::refused(Errno::EISDIR, Errno::EISDIR.ename())),
            _ => file.remove().await,
        }
    }

    /// Renames `oldname` in this directory to `newname` in `to`.
    pub async fn rename_at(&self, oldname: &Name, to: &Fid, newname: &Name) -> Result<(), Error> {
        for name in [oldname, newname] {
            name.check_entry().map_err(|e| bad_name(name, e))?;
        }
        if self.client.dialect() == Dialect::L {
            let msg = Trenameat {
                olddirfid: self.fid,
                oldname: oldname.clone(),
                newdirfid: to.fid,
                newname: newname.clone(),
            };
            match self.client.inner.call(msg).await {
                // Servers that know only Trename (diod), as Linux expects.
                Err(e) if e.errno() == Errno::EOPNOTSUPP => {}
                other => return other.map(drop),
            }
        } else {
            self.within_one_directory(to)?;
        }
        let file = self.walk(std::slice::from_ref(oldname)).await?;
        file.rename(self, to, newname).await
    }

    /// Renames this file, which is in directory `from`, to `newname` in
    /// `to`. 9P2000 and .u rename by a wstat of the name, within one
    /// directory: EXDEV across directories, as from Linux's client.
    pub async fn rename(&self, from: &Fid, to: &Fid, newname: &Name) -> Result<(), Error> {
        newname.check_entry().map_err(|e| bad_name(newname, e))?;
        if self.client.dialect() == Dialect::L {
            let msg = Trename {
                fid: self.fid,
                dfid: to.fid,
                name: newname.clone(),
            };
            return self.client.inner.call(msg).await.map(drop);
        }
        from.within_one_directory(to)?;
        let stat = Stat {
            name: newname.to_string(),
            ..Stat::dont_touch()
        };
        let msg = Twstat {
            fid: self.fid,
            stat,
        };
        self.client.inner.call(msg).await.map(drop)
    }
}

impl Fid {
    /// A wstat renames within a directory only: EXDEV unless this
    /// directory is `to`.
    fn within_one_directory(&self, to: &Fid) -> Result<(), Error> {
        if self.qid().path != to.qid().path {
            let what = format!("{} renames within a directory only", self.client.dialect());
            return Err(Error::refused(Errno::EXDEV, what));
        }
        Ok(())
    }
}

/// The refusal of files a dialect has no way to make.
fn no_such_files(dialect: Dialect, what: &str) -> Error {
    Error::refused(Errno::EPERM, format!("{dialect} has no {what}"))
}
