//! An open file: reads and writes split by iounit, directory listings, and
//! tokio's AsyncRead/AsyncWrite over a file position.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use ninep_wire::*;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::conn::Client;
use crate::error::Error;
use crate::fsys::Fid;
use crate::info::{DirEntry, FileInfo};
use crate::transfer::{RangeRead, RangeWrite, Transfer};

type Op<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

/// An open fid. Dropping it clunks the fid.
pub struct File {
    fid: Fid,
    iounit: u32,
    /// Position for AsyncRead and AsyncWrite.
    pos: u64,
    // In mutexes only so that a File is Sync; poll_read and poll_write
    // reach them through `get_mut`, without locking.
    reading: parking_lot::Mutex<Option<Op<Bytes>>>,
    writing: parking_lot::Mutex<Option<Op<u32>>>,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File")
            .field("fid", &self.fid)
            .field("iounit", &self.iounit)
            .field("pos", &self.pos)
            .finish()
    }
}

impl File {
    pub(crate) fn new(fid: Fid, iounit: u32) -> File {
        let max = fid.client().msize() - IOHDRSZ;
        let iounit = if iounit == 0 || iounit > max {
            max
        } else {
            iounit
        };
        File {
            fid,
            iounit,
            pos: 0,
            reading: parking_lot::Mutex::new(None),
            writing: parking_lot::Mutex::new(None),
        }
    }

    /// The file's qid as the open returned it.
    pub fn qid(&self) -> Qid {
        self.fid.qid()
    }

    /// Most bytes one read or write message carries.
    pub fn iounit(&self) -> u32 {
        self.iounit
    }

    /// The open fid.
    pub fn fid(&self) -> &Fid {
        &self.fid
    }

    /// The file's attributes.
    pub async fn stat(&self) -> Result<FileInfo, Error> {
        self.fid.stat().await
    }

    /// Vouches that a write at an offset of this file means the same
    /// whenever it is made (a regular file that only this client writes,
    /// as a copy's destination), so that a client recovering its
    /// connection sends one cut off again even if the server gives the
    /// file a qid.version of 0, as diod does. Appends are never sent again.
    pub fn vouch_writes_repeatable(&self) {
        self.fid.client().inner.vouch(self.fid.fid);
    }

    /// One read of at most `count` bytes (and at most iounit) at `offset`.
    /// Fewer bytes than asked is not an error; none means end of file.
    pub async fn read_at(&self, offset: u64, count: u32) -> Result<Bytes, Error> {
        read_at(&self.fid, offset, count.min(self.iounit)).await
    }

    /// One write of at most iounit bytes of `data` at `offset`; returns how
    /// many were written.
    pub async fn write_at(&self, offset: u64, data: Bytes) -> Result<u32, Error> {
        let n = data.len().min(self.iounit as usize);
        write_at(&self.fid, offset, data.slice(..n)).await
    }

    /// Writes all of `data` at `offset`, in iounit pieces.
    pub async fn write_all_at(&self, mut offset: u64, mut data: Bytes) -> Result<(), Error> {
        while !data.is_empty() {
            let n = self.write_at(offset, data.clone()).await? as usize;
            if n == 0 {
                return Err(Error::protocol("server wrote nothing"));
            }
            data = data.slice(n..);
            offset += n as u64;
        }
        Ok(())
    }

    /// A reader of `len` bytes (or to the end of file) from `offset`, with
    /// requests pipelined where `how` and the file allow.
    pub async fn read_range(
        &self,
        offset: u64,
        len: Option<u64>,
        how: Transfer,
    ) -> Result<RangeRead<'_>, Error> {
        RangeRead::start(self, offset, len, how).await
    }

    /// A writer from `offset` on, with requests pipelined where `how` and
    /// the file allow. [`RangeWrite::finish`] waits for the last write.
    pub async fn write_range(&self, offset: u64, how: Transfer) -> Result<RangeWrite<'_>, Error> {
        RangeWrite::start(self, offset, how).await
    }

    /// The rest of the file from the current position.
    pub async fn read_all(mut self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        loop {
            let data = self.read_at(self.pos, self.iounit).await?;
            if data.is_empty() {
                return Ok(out);
            }
            self.pos += data.len() as u64;
            out.extend_from_slice(&data);
        }
    }

    /// Every entry of this open directory, read from the start (again, if
    /// it was read before).
    pub async fn read_dir(&self) -> Result<Vec<DirEntry>, Error> {
        let client = self.fid.client().clone();
        let dialect = client.dialect();
        let mut entries = Vec::new();
        let mut offset = 0;
        loop {
            if dialect == Dialect::L {
                let msg = Treaddir {
                    fid: self.fid.fid,
                    offset,
                    count: self.iounit,
                };
                let r = client.inner.call(msg).await?;
                if r.data.is_empty() {
                    return Ok(entries);
                }
                for d in Dirent::entries(&r.data) {
                    let d = d.map_err(|e| Error::protocol(e.to_string()))?;
                    offset = d.offset;
                    if !d.name.is_dot_or_dotdot() {
                        entries.push(DirEntry {
                            name: d.name.into_string(),
                            qid: d.qid,
                            info: None,
                        });
                    }
                }
            } else {
                let data = self.read_at(offset, self.iounit).await?;
                if data.is_empty() {
                    return Ok(entries);
                }
                offset += data.len() as u64;
                for s in Stat::entries(&data, dialect) {
                    let s = s.map_err(|e| Error::protocol(e.to_string()))?;
                    entries.push(DirEntry {
                        name: s.name.clone(),
                        qid: s.qid,
                        info: Some(FileInfo::from_stat(s, dialect)),
                    });
                }
            }
        }
    }

    /// Clunks the fid and waits for the server (an xattr or ORCLOSE file
    /// reports its outcome here).
    pub async fn close(self) -> Result<(), Error> {
        self.fid.clunk().await
    }
}

/// As much of a read of `count` bytes at `offset` as lies within the
/// offsets 9P can name: no byte past the largest, so that where a read
/// ends is always an offset too (a server may answer any read in full).
pub(crate) fn readable(offset: u64, count: u32) -> u32 {
    u32::try_from(u64::MAX - offset).map_or(count, |room| count.min(room))
}

/// Refuses a write of `len` bytes at `offset` that would pass the largest
/// offset 9P can name, as a file too large for it (EFBIG).
pub(crate) fn writable(offset: u64, len: usize) -> Result<(), Error> {
    match offset.checked_add(len as u64) {
        Some(_) => Ok(()),
        None => Err(Error::refused(
            Errno::EFBIG,
            "a write past the largest offset",
        )),
    }
}

async fn read_at(fid: &Fid, offset: u64, count: u32) -> Result<Bytes, Error> {
    read_fid(fid.client(), fid.fid, offset, count).await
}

/// One read of fid number `fid`, which need not have a handle yet.
pub(crate) async fn read_fid(
    client: &Client,
    fid: ninep_wire::Fid,
    offset: u64,
    count: u32,
) -> Result<Bytes, Error> {
    let count = readable(offset, count);
    let msg = Tread { fid, offset, count };
    read_reply(client.inner.call(msg).await, count)
}

async fn write_at(fid: &Fid, offset: u64, data: Bytes) -> Result<u32, Error> {
    let len = data.len();
    writable(offset, len)?;
    let msg = Twrite {
        fid: fid.fid,
        offset,
        data,
    };
    write_reply(fid.client().inner.call(msg).await, len)
}

/// The data of the reply to a Tread of `count` bytes.
pub(crate) fn read_reply(reply: Result<Rread, Error>, count: u32) -> Result<Bytes, Error> {
    let r = reply?;
    if r.data.len() > count as usize {
        return Err(Error::protocol("Rread longer than asked"));
    }
    Ok(r.data)
}

/// The count of the reply to a Twrite of `len` bytes.
pub(crate) fn write_reply(reply: Result<Rwrite, Error>, len: usize) -> Result<u32, Error> {
    let r = reply?;
    if r.count as usize > len {
        return Err(Error::protocol("Rwrite longer than asked"));
    }
    Ok(r.count)
}

/// A handle that request futures can own: the client and fid number.
fn detached(fid: &Fid) -> (crate::conn::Client, ninep_wire::Fid) {
    (fid.client().clone(), fid.fid)
}

impl AsyncRead for File {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let reading = this.reading.get_mut();
        if reading.is_none() {
            let (client, fid) = detached(&this.fid);
            let count = (buf.remaining() as u32).min(this.iounit);
            let offset = this.pos;
            *reading = Some(Box::pin(async move {
                let reply = client.inner.call(Tread { fid, offset, count }).await;
                read_reply(reply, count)
            }));
        }
        let op = reading.as_mut().map(|op| op.as_mut().poll(cx));
        let result = ready!(op.unwrap_or(Poll::Ready(Ok(Bytes::new()))));
        *reading = None;
        let data = result?;
        // The read was sized to fit, unless the caller's buffer shrank.
        let n = data.len().min(buf.remaining());
        buf.put_slice(&data[..n]);
        this.pos += n as u64;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for File {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let writing = this.writing.get_mut();
        if writing.is_none() {
            let (client, fid) = detached(&this.fid);
            let n = data.len().min(this.iounit as usize);
            let data = Bytes::copy_from_slice(&data[..n]);
            let offset = this.pos;
            *writing = Some(Box::pin(async move {
                let reply = client.inner.call(Twrite { fid, offset, data }).await;
                write_reply(reply, n)
            }));
        }
        let op = writing.as_mut().map(|op| op.as_mut().poll(cx));
        let result = ready!(op.unwrap_or(Poll::Ready(Ok(0))));
        *writing = None;
        let n = result?;
        this.pos += n as u64;
        Poll::Ready(Ok(n as usize))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Every completed write has reached the server.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
