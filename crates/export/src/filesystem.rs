//! The export as a [`Filesystem`]: each 9P call answered by the module for
//! its kind of operation.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use bytes::Bytes;
use ninep_server::{Attr, Cx, DirEntry, Filesystem, Opened, Result, SetAttr, User};
use ninep_wire::{Name, Qid, Rgetlock, Rstatfs, Tgetlock, Tlock};
use rustix::fs::FileType;

use crate::{Export, ExportFile, attrs, data, locks, names, xattrs};

impl Filesystem for Export {
    type File = ExportFile;

    async fn attach(&self, user: &User) -> Result<(ExportFile, Qid)> {
        names::attach(self, user).await
    }

    async fn walk(&self, cx: &Cx, dir: &ExportFile, name: &Name) -> Result<(ExportFile, Qid)> {
        names::walk(self, cx.dialect, dir, name).await
    }

    async fn getattr(&self, _cx: &Cx, file: &ExportFile) -> Result<Attr> {
        attrs::getattr(self, file).await
    }

    async fn setattr(&self, _cx: &Cx, file: &ExportFile, set: &SetAttr) -> Result<()> {
        attrs::setattr(self, file, set).await
    }

    async fn open(&self, _cx: &Cx, file: &mut ExportFile, flags: u32) -> Result<Opened> {
        data::open(self, file, flags).await
    }

    async fn create(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        flags: u32,
        _gid: u32,
    ) -> Result<(ExportFile, Opened)> {
        names::create(self, dir, name, mode, flags).await
    }

    async fn mkdir(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        _gid: u32,
    ) -> Result<Qid> {
        names::mkdir(self, dir, name, mode).await
    }

    async fn symlink(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        target: &str,
        _gid: u32,
    ) -> Result<Qid> {
        names::symlink(self, dir, name, target).await
    }

    async fn mknod(
        &self,
        _cx: &Cx,
        dir: &ExportFile,
        name: &Name,
        mode: u32,
        major: u32,
        minor: u32,
        _gid: u32,
    ) -> Result<Qid> {
        names::mknod(self, dir, name, mode, major, minor).await
    }

    async fn link(&self, _cx: &Cx, dir: &ExportFile, file: &ExportFile, name: &Name) -> Result<()> {
        names::link(self, dir, file, name).await
    }

    async fn unmake(&self, _cx: &Cx, dir: &ExportFile, name: &Name, made: Qid) {
        names::unmake(self, dir, name, made).await
    }

    async fn readlink(&self, _cx: &Cx, file: &ExportFile) -> Result<String> {
        names::readlink(self, file).await
    }

    async fn read(&self, _cx: &Cx, file: &ExportFile, offset: u64, count: u32) -> Result<Bytes> {
        data::read(self, file, offset, count).await
    }

    fn host_file(&self, file: &ExportFile) -> Option<Arc<OwnedFd>> {
        // Directories and devices are read the usual way.
        (file.node.ty == FileType::RegularFile)
            .then(|| file.io.clone())
            .flatten()
    }

    async fn write(&self, _cx: &Cx, file: &ExportFile, offset: u64, data: Bytes) -> Result<u32> {
        data::write(self, file, offset, data).await
    }

    async fn read_dir(&self, cx: &Cx, dir: &ExportFile) -> Result<Vec<DirEntry>> {
        data::read_dir(self, cx, dir).await
    }

    async fn remove(&self, _cx: &Cx, file: &ExportFile) -> Result<()> {
        names::remove(self, file).await
    }

    async fn unlinkat(&self, _cx: &Cx, dir: &ExportFile, name: &Name, flags: u32) -> Result<()> {
        names::unlinkat(self, dir, name, flags).await
    }

    async fn rename(
        &self,
        _cx: &Cx,
        file: &ExportFile,
        newdir: Option<&ExportFile>,
        name: &Name,
    ) -> Result<()> {
        names::rename(self, file, newdir, name).await
    }

    async fn renameat(
        &self,
        _cx: &Cx,
        olddir: &ExportFile,
        oldname: &Name,
        newdir: &ExportFile,
        newname: &Name,
    ) -> Result<()> {
        names::renameat(self, olddir, oldname, newdir, newname).await
    }

    async fn statfs(&self, _cx: &Cx, file: &ExportFile) -> Result<Rstatfs> {
        attrs::statfs(self, file).await
    }

    async fn fsync(&self, _cx: &Cx, file: &ExportFile, datasync: bool) -> Result<()> {
        data::fsync(self, file, datasync).await
    }

    async fn lock(&self, _cx: &Cx, file: &ExportFile, lock: &Tlock) -> Result<u8> {
        locks::lock(self, file, lock)
    }

    async fn getlock(&self, _cx: &Cx, file: &ExportFile, lock: &Tgetlock) -> Result<Rgetlock> {
        Ok(locks::getlock(self, file, lock))
    }

    async fn clunk(&self, _cx: &Cx, file: ExportFile) -> Result<()> {
        locks::clunked(self, &file);
        Ok(())
    }

    async fn xattr_get(&self, _cx: &Cx, file: &ExportFile, name: &str) -> Result<Bytes> {
        xattrs::get(self, file, name).await
    }

    async fn xattr_set(
        &self,
        _cx: &Cx,
        file: &ExportFile,
        name: &str,
        value: Bytes,
        flags: u32,
    ) -> Result<()> {
        xattrs::set(self, file, name, value, flags).await
    }
}
