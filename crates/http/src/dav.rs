//! The 9P tree as dav-server's file system: PUT, DELETE, MKCOL and the
//! WebDAV methods (PROPFIND, PROPPATCH, COPY, MOVE, LOCK, UNLOCK) are
//! dav-server's, on the operations here, each of which walks from the
//! door's root.
//!
//! A PUT that replaces a whole file writes to a temporary name beside it
//! and renames that over the file once the body is complete, so readers
//! never see half an upload; a server that refuses to rename onto an
//! existing name (Plan 9's rule) has the old file removed first, and one
//! that refuses the temporary file is written in place. An upload that
//! breaks off has its temporary file removed.
//!
//! Dead properties (PROPPATCH) live in the door's memory, by qid.path, so
//! they follow a file through MOVE and are lost when the door stops.

use std::collections::HashMap;
use std::io::SeekFrom;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use dav_server::davpath::DavPath;
use dav_server::fs::{
    DavDirEntry, DavFile, DavFileSystem, DavMetaData, DavProp, FsError, FsFuture, FsResult,
    FsStream, OpenOptions, ReadDirMeta,
};
use futures::StreamExt;
use http::StatusCode;
use ninep_client::{Fid, File, FileInfo, Transfer};
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};
use ninep_wire::{Errno, Name};
use parking_lot::Mutex;

use crate::listing::rows;
use crate::validators::tag;

/// Dead properties of each file, by qid.path, then by namespace and name.
type Props = HashMap<u64, HashMap<String, DavProp>>;

/// The tree under the door's root, for dav-server.
#[derive(Debug, Clone)]
pub struct NinepFs {
    root: Arc<Fid>,
    props: Arc<Mutex<Props>>,
    window: u64,
}

impl NinepFs {
    /// The tree under `root`; copies hold at most `window` bytes in flight.
    pub fn new(root: Arc<Fid>, window: u64) -> NinepFs {
        NinepFs {
            root,
            props: Arc::default(),
            window,
        }
    }

    async fn walk(&self, path: &DavPath) -> FsResult<Fid> {
        self.root.walk(&names(path)?).await.map_err(fs_error)
    }

    async fn stat(&self, path: &DavPath) -> FsResult<FileInfo> {
        self.walk(path).await?.stat().await.map_err(fs_error)
    }

    /// The directory holding `path`, and the last name of `path`.
    async fn parent(&self, path: &DavPath) -> FsResult<(Fid, Name)> {
        let mut names = names(path)?;
        let name = names.pop().ok_or(FsError::Forbidden)?;
        let dir = self.root.walk(&names).await.map_err(fs_error)?;
        Ok((dir, name))
    }

    async fn remove(&self, path: &DavPath, dir: bool) -> FsResult<()> {
        let fid = self.walk(path).await?;
        if fid.qid().ty.is_dir() != dir {
            return Err(FsError::Forbidden);
        }
        let qid = fid.qid();
        fid.remove().await.map_err(fs_error)?;
        self.props.lock().remove(&qid.path);
        Ok(())
    }

    async fn open_file(&self, path: &DavPath, oo: OpenOptions) -> FsResult<OpenFile> {
        let existing = match self.walk(path).await {
            Ok(fid) if fid.qid().ty.is_dir() => return Err(FsError::Forbidden),
            Ok(_) if oo.create_new => return Err(FsError::Exists),
            Ok(fid) => Some(fid),
            Err(FsError::NotFound) if oo.create || oo.create_new => None,
            Err(e) => return Err(e),
        };
        if oo.write && oo.truncate && !oo.append {
            let (dir, name) = self.parent(path).await?;
            if let Some(upload) = Upload::start(dir, name).await {
                return Ok(upload);
            }
        }
        let flags = match (oo.read, oo.write) {
            (_, false) => O_RDONLY,
            (false, true) => O_WRONLY,
            (true, true) => O_RDWR,
        } | if oo.truncate { O_TRUNC } else { 0 };
        let file = match existing {
            Some(fid) => fid.open(flags).await,
            None => {
                let (dir, name) = self.parent(path).await?;
                dir.create(&name, 0o644, flags & !O_TRUNC).await
            }
        };
        Ok(OpenFile::new(file.map_err(fs_error)?, None))
    }

    async fn copy_file(&self, from: &DavPath, to: &DavPath) -> FsResult<()> {
        let source = self.walk(from).await?;
        let source_qid = source.qid();
        let source = source.open(O_RDONLY).await.map_err(fs_error)?;
        let whole = OpenOptions {
            write: true,
            create: true,
            truncate: true,
            ..OpenOptions::default()
        };
        let mut dest = self.open_file(to, whole).await?;
        let how = Transfer {
            max_window: self.window,
            ..Transfer::default()
        };
        let copied = async {
            let mut reader = source.read_range(0, None, how).await?;
            let mut writer = dest.file.write_range(0, how).await?;
            while let Some(piece) = reader.next().await? {
                writer.write(piece).await?;
            }
            writer.finish().await
        };
        copied.await.map_err(fs_error)?;
        let qid = dest.file.qid();
        if let Some(upload) = dest.upload.take() {
            upload.commit().await?;
        }
        let mut props = self.props.lock();
        if let Some(copied) = props.get(&source_qid.path).cloned() {
            props.insert(qid.path, copied);
        }
        Ok(())
    }
}

/// The names of a DAV path (already percent-decoded and free of `..`
/// above the root by dav-server), checked as 9P names.
fn names(path: &DavPath) -> FsResult<Vec<Name>> {
    path.as_bytes()
        .split(|&b| b == b'/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let s = std::str::from_utf8(s).map_err(|_| FsError::Forbidden)?;
            match Name::new(s) {
                Ok(name) if !name.is_dot_or_dotdot() => Ok(name),
                _ => Err(FsError::Forbidden),
            }
        })
        .collect()
}

/// dav-server's error for a failed 9P request.
fn fs_error(e: ninep_client::Error) -> FsError {
    match e.errno() {
        Errno::ENOENT | Errno::ENOTDIR => FsError::NotFound,
        Errno::EACCES | Errno::EPERM | Errno::EROFS | Errno::EISDIR => FsError::Forbidden,
        Errno::EEXIST | Errno::ENOTEMPTY => FsError::Exists,
        Errno::ENOSPC => FsError::InsufficientStorage,
        Errno::EFBIG => FsError::TooLarge,
        Errno::ENAMETOOLONG => FsError::PathTooLong,
        Errno::ELOOP => FsError::LoopDetected,
        Errno::EXDEV => FsError::IsRemote,
        Errno::ENOSYS => FsError::NotImplemented,
        _ => FsError::GeneralFailure,
    }
}

/// A file's attributes, for dav-server.
#[derive(Debug, Clone)]
struct Meta(FileInfo);

impl DavMetaData for Meta {
    fn len(&self) -> u64 {
        self.0.size
    }

    fn modified(&self) -> FsResult<SystemTime> {
        Ok(UNIX_EPOCH + Duration::new(self.0.mtime, self.0.mtime_nsec))
    }

    fn is_dir(&self) -> bool {
        self.0.is_dir()
    }

    fn etag(&self) -> Option<String> {
        tag(&self.0)
    }

    fn status_changed(&self) -> FsResult<SystemTime> {
        Ok(UNIX_EPOCH + Duration::new(self.0.ctime, self.0.ctime_nsec))
    }

    fn executable(&self) -> FsResult<bool> {
        Ok(self.0.mode & 0o100 != 0)
    }
}

/// A directory entry, for dav-server.
struct Entry {
    name: String,
    info: Option<FileInfo>,
}

impl DavDirEntry for Entry {
    fn name(&self) -> Vec<u8> {
        self.name.as_bytes().to_vec()
    }

    fn metadata(&self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        let meta = self
            .info
            .clone()
            .map(|i| Box::new(Meta(i)) as Box<dyn DavMetaData>);
        Box::pin(async move { meta.ok_or(FsError::NotFound) })
    }
}

/// A whole-file upload under a temporary name, renamed over the target by
/// [`Upload::commit`]; removed if dropped before.
#[derive(Debug)]
struct Upload {
    dir: Arc<Fid>,
    temp: Name,
    target: Name,
    committed: bool,
}

impl Upload {
    /// Creates the temporary file beside `target` in `dir`; none if the
    /// server will not have it.
    async fn start(dir: Fid, target: Name) -> Option<OpenFile> {
        let temp = Name::entry(format!(".{}.upload-{:08x}", target.as_str(), random())).ok()?;
        let file = dir
            .clone_fid()
            .await
            .ok()?
            .create(&temp, 0o644, O_RDWR)
            .await
            .ok()?;
        let upload = Upload {
            dir: Arc::new(dir),
            temp,
            target,
            committed: false,
        };
        Some(OpenFile::new(file, Some(upload)))
    }

    /// Renames the upload over its target.
    async fn commit(mut self) -> FsResult<()> {
        let dir = &self.dir;
        let renamed = match dir.rename_at(&self.temp, dir, &self.target).await {
            Err(e) if e.errno() == Errno::EEXIST => {
                // Plan 9 renames onto no existing name.
                dir.unlink_at(&self.target, false).await.map_err(fs_error)?;
                dir.rename_at(&self.temp, dir, &self.target).await
            }
            other => other,
        };
        self.committed = renamed.is_ok();
        renamed.map_err(fs_error)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let (dir, temp) = (self.dir.clone(), self.temp.clone());
        tokio::spawn(async move {
            let _ = dir.unlink_at(&temp, false).await;
        });
    }
}

/// A number to keep concurrent uploads' temporary names apart.
fn random() -> u32 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(SystemTime::now()) as u32
}

/// An open file, for dav-server.
#[derive(Debug)]
struct OpenFile {
    file: File,
    pos: u64,
    upload: Option<Upload>,
}

impl OpenFile {
    fn new(file: File, upload: Option<Upload>) -> OpenFile {
        OpenFile {
            file,
            pos: 0,
            upload,
        }
    }

    async fn write(&mut self, data: Bytes) -> FsResult<()> {
        let len = data.len() as u64;
        self.file
            .write_all_at(self.pos, data)
            .await
            .map_err(fs_error)?;
        self.pos += len;
        Ok(())
    }
}

impl DavFile for OpenFile {
    fn metadata(&mut self) -> FsFuture<'_, Box<dyn DavMetaData>> {
        Box::pin(async move {
            let info = self.file.stat().await.map_err(fs_error)?;
            Ok(Box::new(Meta(info)) as Box<dyn DavMetaData>)
        })
    }

    fn write_buf(&mut self, mut buf: Box<dyn Buf + Send>) -> FsFuture<'_, ()> {
        let data = buf.copy_to_bytes(buf.remaining());
        Box::pin(self.write(data))
    }

    fn write_bytes(&mut self, buf: Bytes) -> FsFuture<'_, ()> {
        Box::pin(self.write(buf))
    }

    fn read_bytes(&mut self, count: usize) -> FsFuture<'_, Bytes> {
        Box::pin(async move {
            let count = count.min(u32::MAX as usize) as u32;
            let data = self.file.read_at(self.pos, count).await.map_err(fs_error)?;
            self.pos += data.len() as u64;
            Ok(data)
        })
    }

    fn seek(&mut self, pos: SeekFrom) -> FsFuture<'_, u64> {
        Box::pin(async move {
            let base = match pos {
                SeekFrom::Start(n) => {
                    self.pos = n;
                    return Ok(n);
                }
                SeekFrom::Current(_) => self.pos,
                SeekFrom::End(_) => self.file.stat().await.map_err(fs_error)?.size,
            };
            let (SeekFrom::Current(delta) | SeekFrom::End(delta)) = pos else {
                unreachable!("Start returned above")
            };
            self.pos = base
                .checked_add_signed(delta)
                .ok_or(FsError::GeneralFailure)?;
            Ok(self.pos)
        })
    }

    fn flush(&mut self) -> FsFuture<'_, ()> {
        Box::pin(async move {
            match self.upload.take() {
                Some(upload) => upload.commit().await,
                None => Ok(()),
            }
        })
    }
}

impl DavFileSystem for NinepFs {
    fn open<'a>(
        &'a self,
        path: &'a DavPath,
        options: OpenOptions,
    ) -> FsFuture<'a, Box<dyn DavFile>> {
        Box::pin(async move {
            let file = self.open_file(path, options).await?;
            Ok(Box::new(file) as Box<dyn DavFile>)
        })
    }

    fn read_dir<'a>(
        &'a self,
        path: &'a DavPath,
        _meta: ReadDirMeta,
    ) -> FsFuture<'a, FsStream<Box<dyn DavDirEntry>>> {
        Box::pin(async move {
            let dir = self.walk(path).await?;
            let entries = rows(&dir).await.map_err(fs_error)?;
            let entries = entries.into_iter().map(|row| {
                let entry = Entry {
                    name: row.name,
                    info: row.info,
                };
                Ok(Box::new(entry) as Box<dyn DavDirEntry>)
            });
            Ok(futures::stream::iter(entries).boxed())
        })
    }

    fn metadata<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, Box<dyn DavMetaData>> {
        Box::pin(async move { Ok(Box::new(Meta(self.stat(path).await?)) as Box<dyn DavMetaData>) })
    }

    fn create_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        Box::pin(async move {
            let (dir, name) = self.parent(path).await?;
            dir.mkdir(&name, 0o755).await.map_err(fs_error)?;
            Ok(())
        })
    }

    fn remove_dir<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        Box::pin(self.remove(path, true))
    }

    fn remove_file<'a>(&'a self, path: &'a DavPath) -> FsFuture<'a, ()> {
        Box::pin(self.remove(path, false))
    }

    fn rename<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        Box::pin(async move {
            let (from_dir, from_name) = self.parent(from).await?;
            let (to_dir, to_name) = self.parent(to).await?;
            from_dir
                .rename_at(&from_name, &to_dir, &to_name)
                .await
                .map_err(fs_error)
        })
    }

    fn copy<'a>(&'a self, from: &'a DavPath, to: &'a DavPath) -> FsFuture<'a, ()> {
        Box::pin(self.copy_file(from, to))
    }

    fn have_props<'a>(
        &'a self,
        _path: &'a DavPath,
    ) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(std::future::ready(true))
    }

    fn patch_props<'a>(
        &'a self,
        path: &'a DavPath,
        patch: Vec<(bool, DavProp)>,
    ) -> FsFuture<'a, Vec<(StatusCode, DavProp)>> {
        Box::pin(async move {
            let qid = self.walk(path).await?.qid();
            let mut props = self.props.lock();
            let props = props.entry(qid.path).or_default();
            let done = patch
                .into_iter()
                .map(|(set, prop)| {
                    let key = prop_key(&prop);
                    let name = DavProp {
                        xml: None,
                        ..prop.clone()
                    };
                    if set {
                        props.insert(key, prop);
                    } else {
                        props.remove(&key);
                    }
                    (StatusCode::OK, name)
                })
                .collect();
            Ok(done)
        })
    }

    fn get_props<'a>(&'a self, path: &'a DavPath, do_content: bool) -> FsFuture<'a, Vec<DavProp>> {
        Box::pin(async move {
            let qid = self.walk(path).await?.qid();
            let props = self.props.lock();
            let list = props.get(&qid.path).into_iter().flat_map(|p| p.values());
            Ok(list
                .map(|p| DavProp {
                    xml: if do_content { p.xml.clone() } else { None },
                    ..p.clone()
                })
                .collect())
        })
    }

    fn get_prop<'a>(&'a self, path: &'a DavPath, prop: DavProp) -> FsFuture<'a, Vec<u8>> {
        Box::pin(async move {
            let qid = self.walk(path).await?.qid();
            let props = self.props.lock();
            props
                .get(&qid.path)
                .and_then(|p| p.get(&prop_key(&prop)))
                .and_then(|p| p.xml.clone())
                .ok_or(FsError::NotFound)
        })
    }
}

/// A dead property's key: its namespace and name.
fn prop_key(prop: &DavProp) -> String {
    format!(
        "{{{}}}{}",
        prop.namespace.as_deref().unwrap_or(""),
        prop.name
    )
}
