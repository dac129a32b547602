//! Calls on data: opening, reading, writing, listing directories and
//! syncing. All but opening a regular file or a directory run on the
//! blocking pool (see `Export::call`), except reads of regular files the
//! kernel can answer without waiting, and small writes to tmpfs.

use std::io::IoSliceMut;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;
use ninep_server::{Cx, DirEntry, Error, Opened, Result};
use ninep_wire::consts::dotl;
use ninep_wire::{Name, QidType};
use rustix::fs::{AtFlags, Dir, FileType, OFlags};
use rustix::io::{Errno, ReadWriteFlags};

use crate::open_flags::oflags;
use crate::{Export, ExportFile, Inner, errno};

pub(crate) async fn open(export: &Export, file: &mut ExportFile, flags: u32) -> Result<Opened> {
    let wants_write = matches!(flags & dotl::O_ACCMODE, dotl::O_WRONLY | dotl::O_RDWR)
        || flags & dotl::O_TRUNC != 0;
    if wants_write {
        export.readonly()?;
    }
    let node = file.node.clone();
    // Opening a device or a fifo may wait; so may truncating.
    let may_wait = !matches!(node.ty, FileType::RegularFile | FileType::Directory)
        || flags & dotl::O_TRUNC != 0;
    let open = move |inner: &Inner| {
        let mut o = oflags(flags);
        if node.is_dir() {
            o = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        }
        // An append-only mark changes nothing for a reader.
        if wants_write {
            let before = rustix::fs::fstat(&node.fd).map_err(errno)?;
            if inner.marked(&node, &before).ty.contains(QidType::APPEND) {
                // Writes land at the end; truncation is ignored (open(5)).
                o = (o | OFlags::APPEND) - OFlags::TRUNC;
            }
        }
        let fd = inner.reopen(&node, o)?;
        let st = rustix::fs::fstat(&fd).map_err(errno)?;
        Ok((fd, inner.marked(&node, &st)))
    };
    let (fd, qid) = if may_wait {
        export.call(&file.creds, open).await?
    } else {
        export.call_here(&file.creds, open).await?
    };
    file.io = Some(Arc::new(fd));
    Ok(Opened { qid, iounit: 0 })
}

/// Reads no bigger than this are tried on the thread serving the request
/// (see `read`). RWF_NOWAIT needs an initialised buffer, and zeroing one
/// costs about what it saves once a read is larger.
const READ_HERE_MAX: usize = 64 * 1024;

/// Reads up to `count` bytes at `offset`. A regular file's data is usually
/// in the page cache, so the read is first tried on the thread serving the
/// request with RWF_NOWAIT, which the kernel answers only when it need not
/// wait (on a disk, a lock); what is left goes through the blocking pool,
/// whose call also gives any error.
pub(crate) async fn read(
    export: &Export,
    file: &ExportFile,
    offset: u64,
    count: u32,
) -> Result<Bytes> {
    let fd = file.opened()?;
    let count = count as usize;
    let mut buf = Vec::new();
    if file.node.ty == FileType::RegularFile {
        let finished = export
            .call_here(&file.creds, |_| {
                Ok(read_without_waiting(&fd, &mut buf, offset, count))
            })
            .await?;
        if finished {
            return Ok(Bytes::from(buf));
        }
    }
    let stream = is_stream(file.node.ty);
    export
        .call(&file.creds, move |_| {
            let done = buf.len();
            buf.reserve_exact(count - done);
            let spare = rustix::buffer::spare_capacity(&mut buf);
            if stream {
                rustix::io::read(&*fd, spare)
            } else {
                rustix::io::pread(&*fd, spare, offset + done as u64)
            }
            .map_err(errno)?;
            Ok(Bytes::from(buf))
        })
        .await
}

/// A fifo or a socket: a stream of bytes with no offsets, read and written
/// where it stands (pread and pwrite refuse it: ESPIPE).
fn is_stream(ty: FileType) -> bool {
    matches!(ty, FileType::Fifo | FileType::Socket)
}

/// Reads up to `count` bytes at `offset` into `buf` as far as the kernel
/// goes without waiting, and says whether that finished the read (`count`
/// bytes, or the end of the file). Any refusal (EAGAIN: not cached;
/// EOPNOTSUPP: a file system without RWF_NOWAIT, unless it is tmpfs with
/// the pages in memory) or error leaves the rest to a blocking call. Reads
/// that would not fit READ_HERE_MAX are left whole.
fn read_without_waiting(fd: &OwnedFd, buf: &mut Vec<u8>, offset: u64, count: usize) -> bool {
    // preadv2 takes an offset of -1 (u64::MAX) for the file's own position:
    // reads that reach past i64::MAX are left to pread, which has no such
    // meaning (and refuses them, but on files of unsigned offsets).
    if i64::try_from(offset.saturating_add(count as u64)).is_err() {
        return false;
    }
    // The size says how much to zero, and one byte more: a file that grew
    // is read on, and one that reports no size (/proc) is read by the
    // blocking call. A read that comes back short exactly at the size
    // ends there: the file as it was at the stat.
    let Ok(st) = rustix::fs::fstat(fd) else {
        return false;
    };
    let size = u64::try_from(st.st_size).unwrap_or(0);
    let left = size.saturating_sub(offset);
    let len = usize::try_from(left)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(count);
    if len > READ_HERE_MAX {
        return false;
    }
    buf.resize(len, 0);
    let mut done = 0;
    let finished = loop {
        if done == len {
            break len == count;
        }
        let at = offset + done as u64;
        let rest = &mut [IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(fd, rest, at, ReadWriteFlags::NOWAIT) {
            Ok(0) => break true,
            Ok(n) => {
                done += n;
                // Short of the byte past the size just read: the end, with
                // no call more to find it (also after a partial RWF_NOWAIT
                // read that stopped there).
                if done < len && at + n as u64 >= size {
                    break true;
                }
            }
            // tmpfs refuses RWF_NOWAIT: what it holds in memory is read
            // here, up to the file's size, which is then its end.
            Err(Errno::OPNOTSUPP) => {
                let want = len - done;
                let Some(n) = ninep_transport::in_memory(fd.as_fd(), at, want) else {
                    break false;
                };
                match rustix::io::pread(fd, &mut buf[done..done + n], at) {
                    Ok(got) if got == n => done += n,
                    _ => break false,
                }
                if n < want {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    buf.truncate(done);
    finished
}

/// Writes no bigger than this may be made on the thread serving the
/// request (see `write`); a larger one takes longer than the trip through
/// the pool saves, and the connection reads nothing meanwhile.
const WRITE_HERE_MAX: usize = 64 * 1024;

/// Writes `data` at `offset`, on the blocking pool unless it is small and
/// lands on the pages in memory of a regular file on tmpfs (or past its
/// end; see `ninep_transport::writes_in_memory`): a write elsewhere may
/// wait (on dirty pages, a disk, a device, a network file system or a
/// /proc file under the export), and the connection would read no request
/// meanwhile, not even the Tflush of the write. RWF_NOWAIT cannot tell:
/// ext4 and tmpfs refuse it on buffered writes (EOPNOTSUPP).
pub(crate) async fn write(
    export: &Export,
    file: &ExportFile,
    offset: u64,
    data: Bytes,
) -> Result<u32> {
    let fd = file.opened()?;
    let stream = is_stream(file.node.ty);
    let _turn = file.writing.lock().await;
    // Asked once the writes before it are done: they may have changed it.
    let here = data.len() <= WRITE_HERE_MAX
        && ninep_transport::writes_in_memory(fd.as_fd(), offset, data.len());
    let write = move |_: &Inner| {
        let mut done = 0;
        while done < data.len() {
            let rest = &data[done..];
            let n = if stream {
                rustix::io::write(&*fd, rest)
            } else {
                rustix::io::pwrite(&*fd, rest, offset + done as u64)
            }
            .map_err(errno)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done as u32)
    };
    if here {
        export.call_here(&file.creds, write).await
    } else {
        export.call(&file.creds, write).await
    }
}

pub(crate) async fn read_dir(export: &Export, cx: &Cx, dir: &ExportFile) -> Result<Vec<DirEntry>> {
    export.inner.users.refresh().await;
    let node = dir.node.clone();
    // A 9P2000.L dirent carries only the qid and type, which the
    // directory itself gives; 9P2000 listings carry whole stats.
    let entries_suffice = cx.dialect == ninep_wire::Dialect::L;
    export
        .call(&dir.creds, move |inner| {
            let fd = inner.reopen(&node, OFlags::RDONLY | OFlags::DIRECTORY)?;
            let mut entries = Vec::new();
            // Dir::new reads this descriptor; read_from would open "." in it,
            // which needs search permission a reader may not have.
            let listing = fd.try_clone().map_err(Error::from)?;
            let mut list = Dir::new(listing).map_err(errno)?;
            while let Some(entry) = list.read() {
                let entry = entry.map_err(errno)?;
                let raw = entry.file_name().to_bytes();
                if raw == b"." || raw == b".." {
                    continue;
                }
                // Names 9P cannot carry (not UTF-8, too long) are left out.
                let Some(name) = std::str::from_utf8(raw)
                    .ok()
                    .and_then(|s| Name::new(s).ok())
                else {
                    tracing::debug!("skipping a name 9P cannot carry");
                    continue;
                };
                if entries_suffice && entry.file_type() != FileType::Unknown {
                    let attr = inner.entry_attr(node.dev, entry.ino(), entry.file_type(), &name);
                    entries.push(DirEntry { name, attr });
                    continue;
                }
                let attr = match rustix::fs::statat(&fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => {
                        let mut attr = inner.attr(&st, &name);
                        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                            let path = || format!("/proc/self/fd/{}/{name}", fd.as_raw_fd());
                            attr.qid.ty = attr.qid.ty | inner.marks(&st, path, false);
                        }
                        attr
                    }
                    // Readable but not searchable: what the entry itself says.
                    Err(rustix::io::Errno::ACCESS) => {
                        inner.entry_attr(node.dev, entry.ino(), entry.file_type(), &name)
                    }
                    Err(_) => continue, // gone since the listing was read
                };
                entries.push(DirEntry { name, attr });
            }
            Ok(entries)
        })
        .await
}

pub(crate) async fn fsync(export: &Export, file: &ExportFile, datasync: bool) -> Result<()> {
    let node = file.node.clone();
    let io = file.io.clone();
    export
        .call(&file.creds, move |inner| {
            let reopened;
            let fd = match &io {
                Some(fd) => fd.as_fd(),
                None => {
                    let flags = if node.is_dir() {
                        OFlags::RDONLY | OFlags::DIRECTORY
                    } else {
                        OFlags::RDONLY
                    };
                    reopened = inner.reopen(&node, flags)?;
                    reopened.as_fd()
                }
            };
            if datasync {
                rustix::fs::fdatasync(fd).map_err(errno)
            } else {
                rustix::fs::fsync(fd).map_err(errno)
            }
        })
        .await
}
