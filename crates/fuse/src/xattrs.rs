//! Extended attributes (9P2000.L only), and the memory of which files have
//! no capabilities, which spares the server a question before each write.

use bytes::Bytes;
use ninep_wire::{Dialect, Errno};

use crate::{Inner, KernelErrno, errno, fail};

/// The attribute holding a file's capabilities.
const CAPABILITY: &str = "security.capability";

/// The attribute holding a file's access ACL.
const ACL_ACCESS: &str = "system.posix_acl_access";

/// An extended attribute's value, or a list of names, as the kernel asked.
pub(crate) enum Xattr {
    /// Asked with room for 0 bytes: how many there are.
    Size(u32),
    Value(Bytes),
}

impl Inner {
    /// The value of attribute `name` of `ino`, or with `name` empty the
    /// list of its names, if it fits in `size` bytes (0: how big it is).
    pub async fn xattr(
        &self,
        ino: u64,
        user: u32,
        name: &str,
        size: u32,
    ) -> Result<Xattr, KernelErrno> {
        self.has_xattrs()?;
        // The kernel asks for this before every write through the page
        // cache, to drop it. A file seen without one keeps that answer until
        // an attribute is set through this mount; a server on Linux drops
        // capabilities on writes itself.
        let caps = name == CAPABILITY;
        if caps && self.no_caps.lock().contains(&ino) {
            return Err(fail(Errno::ENODATA));
        }
        let fid = self.fid(ino, user).await?;
        let value = if name.is_empty() {
            fid.xattr_names().await
        } else {
            fid.xattr(name).await
        };
        let value = match value.map_err(errno) {
            Err(e) if caps && e == fail(Errno::ENODATA) => {
                self.without_caps(ino, true);
                return Err(e);
            }
            other => other?,
        };
        match value.len() {
            n if size == 0 => Ok(Xattr::Size(n as u32)),
            n if n > size as usize => Err(fail(Errno::ERANGE)),
            _ => Ok(Xattr::Value(value)),
        }
    }

    /// Sets attribute `name` of `ino` (setxattr(2)'s `flags`).
    pub async fn set_xattr(
        &self,
        ino: u64,
        user: u32,
        name: &str,
        value: Bytes,
        flags: u32,
    ) -> Result<(), KernelErrno> {
        self.has_xattrs()?;
        if name == CAPABILITY {
            self.without_caps(ino, false);
        }
        let fid = self.fid(ino, user).await?;
        fid.set_xattr(name, value, flags).await.map_err(errno)?;
        self.acl_changed(ino, name);
        Ok(())
    }

    /// Removes attribute `name` of `ino`.
    pub async fn remove_xattr(&self, ino: u64, user: u32, name: &str) -> Result<(), KernelErrno> {
        self.has_xattrs()?;
        let fid = self.fid(ino, user).await?;
        fid.remove_xattr(name).await.map_err(errno)?;
        self.acl_changed(ino, name);
        Ok(())
    }

    /// After attribute `name` of `ino` changed: an access ACL changes who
    /// may open the file, so the next open asks the server.
    fn acl_changed(&self, ino: u64, name: &str) {
        if name == ACL_ACCESS {
            self.idle.lock().forget(ino);
        }
    }

    /// Extended attributes are 9P2000.L's alone.
    fn has_xattrs(&self) -> Result<(), KernelErrno> {
        match self.conn.dialect {
            Dialect::L => Ok(()),
            _ => Err(fail(Errno::EOPNOTSUPP)),
        }
    }

    /// Records whether `ino` is known to have no capabilities.
    pub fn without_caps(&self, ino: u64, none: bool) {
        let mut known = self.no_caps.lock();
        if none {
            known.insert(ino);
        } else {
            known.remove(&ino);
        }
    }
}
