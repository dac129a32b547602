//! Bulk transfers of a range of an open file, in order, with as many
//! requests in flight as the link needs.
//!
//! One request at a time costs a round trip per iounit, which on a long link
//! leaves it idle most of the time. Pipelining keeps a window of requests in
//! flight at consecutive offsets (see [`crate::window`]) and puts the replies
//! back in order. That is only safe where a read or write at an offset means
//! the same whenever it is made: regular files with a qid version (not 0,
//! the mark of a synthetic file), neither append-only nor exclusive-use.
//! Anything else is read and written one request at a time. A caller who
//! asks for pipelining by name vouches that a regular file of version 0 is
//! an ordinary file (diod, for one, reports version 0 for every file);
//! append-only and exclusive-use files are never pipelined.
//!
//! Where the server agreed to the stream extension (docs/streams.md), a
//! transfer can instead be one stream: a Tsread or Tswrite whose data flows
//! on one tag, as fast as the credit (the window) allows, for any file.
//!
//! Cancel safety: dropping a [`RangeRead`] or [`RangeWrite`] flushes the
//! requests (or the stream) it has in flight.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use ninep_wire::consts::{mode, unix};
use ninep_wire::*;

use crate::error::Error;
use crate::file::{File, readable, writable};
use crate::info::FileInfo;
use crate::stream::{ReadReplies, WriteReplies};
use crate::window::{Sent, StreamCredit, Window};

/// How a transfer moves data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Streamed if the server agreed to the stream extension, else
    /// pipelined where that is safe, else one request at a time.
    Auto,
    /// One request in flight at a time, as a simple program does it.
    OneAtATime,
    /// A window of requests in flight (if the file allows it; a regular
    /// file of qid.version 0 is taken to be ordinary).
    Pipelined,
    /// The stream extension (docs/streams.md), if the server agreed to it;
    /// else as [`Mode::Auto`].
    Streamed,
}

/// How to run a transfer.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    /// How to move the data; the file and the server may narrow it.
    pub mode: Mode,
    /// Most bytes in flight (and held for reassembly) at once; for a
    /// stream, the most credit granted. Both start lower and grow with the
    /// bandwidth-delay product the transfer measures.
    pub max_window: u64,
}

impl Transfer {
    /// A transfer in `mode` with the default window.
    pub fn new(mode: Mode) -> Transfer {
        Transfer {
            mode,
            ..Transfer::default()
        }
    }
}

impl Default for Transfer {
    fn default() -> Self {
        Transfer {
            mode: Mode::Auto,
            max_window: 256 << 20,
        }
    }
}

/// Requests in flight when a pipelined transfer starts.
const START_REQUESTS: u64 = 4;

/// The mode a transfer of `file` really runs in, and the file's size if it
/// was looked up. A stream only if `may_stream`.
async fn plan(file: &File, how: Transfer, may_stream: bool) -> Result<(Mode, u64), Error> {
    if how.mode == Mode::OneAtATime {
        return Ok((Mode::OneAtATime, 0));
    }
    // A stream means what one request at a time means, for any file.
    let streams = may_stream && file.fid().client().streams();
    if matches!(how.mode, Mode::Auto | Mode::Streamed) && streams {
        return Ok((Mode::Streamed, 0));
    }
    let info = file.stat().await?;
    let qid = file.qid();
    let versioned = qid.version != 0 || how.mode == Mode::Pipelined;
    if offsets_are_stable(qid, &info) && versioned {
        Ok((Mode::Pipelined, info.size))
    } else {
        Ok((Mode::OneAtATime, info.size))
    }
}

/// Whether a read or write at an offset of the file (qid `qid`, attributes
/// `info`) means the same whenever it is made, as far as its type says: a
/// regular file, neither append-only nor exclusive-use. A qid.version of 0
/// (a synthetic file) is the caller's to weigh.
pub(crate) fn offsets_are_stable(qid: Qid, info: &FileInfo) -> bool {
    let ordered = qid.ty.contains(QidType::APPEND)
        || qid.ty.contains(QidType::EXCL)
        || info.plan9_mode & (mode::DMAPPEND | mode::DMEXCL) != 0;
    info.mode & unix::S_IFMT == unix::S_IFREG && !ordered
}

fn window(mode: Mode, chunk: u64, max: u64) -> Window {
    match mode {
        Mode::OneAtATime => Window::fixed(chunk),
        _ => Window::new((START_REQUESTS * chunk).min(max), max),
    }
}

/// A reply to one Tread of a pipelined read.
struct ReadPiece {
    offset: u64,
    count: u32,
    sent: Sent,
    data: Result<Bytes, Error>,
}

/// A range of a file being read, handed out in order by [`RangeRead::next`].
pub struct RangeRead<'f> {
    file: &'f File,
    mode: Mode,
    chunk: u32,
    /// Where the next new request starts.
    next: u64,
    /// Where the range ends, if the caller gave a length.
    end: Option<u64>,
    /// The end of the file as far as is known: its size when the transfer
    /// started, or the furthest byte read since. One request goes past it, to
    /// find the end of file (or that the file grew) without waiting.
    known_end: u64,
    /// Offset of the next byte to hand out.
    deliver: u64,
    /// Most bytes in flight, as the caller asked.
    max_window: u64,
    window: Window,
    inflight: FuturesUnordered<BoxFuture<'static, ReadPiece>>,
    inflight_bytes: u64,
    /// Replies that came before those at lower offsets, by offset.
    arrived: BTreeMap<u64, ReadPiece>,
    arrived_bytes: u64,
    finished: bool,
    /// The stream, when the transfer is one.
    stream: Option<StreamRead>,
}

impl std::fmt::Debug for RangeRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeRead")
            .field("mode", &self.mode)
            .field("deliver", &self.deliver)
            .field("end", &self.end)
            .field("window", &self.window.bytes())
            .finish()
    }
}

impl<'f> RangeRead<'f> {
    pub(crate) async fn start(
        file: &'f File,
        offset: u64,
        len: Option<u64>,
        how: Transfer,
    ) -> Result<RangeRead<'f>, Error> {
        let (mode, size) = plan(file, how, true).await?;
        let chunk = file.iounit();
        let stream = match mode {
            Mode::Streamed => Some(StreamRead::start(file, offset, len, how.max_window)?),
            _ => None,
        };
        Ok(RangeRead {
            file,
            mode,
            chunk,
            next: offset,
            end: len.map(|len| offset.saturating_add(len)),
            known_end: size.max(offset),
            deliver: offset,
            max_window: how.max_window,
            window: window(mode, chunk as u64, how.max_window),
            inflight: FuturesUnordered::new(),
            inflight_bytes: 0,
            arrived: BTreeMap::new(),
            arrived_bytes: 0,
            finished: false,
            stream,
        })
    }

    /// The mode the transfer runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The offset of the next byte [`RangeRead::next`] hands out.
    pub fn position(&self) -> u64 {
        self.deliver
    }

    /// The next piece of the range, or `None` at its end (or the end of the
    /// file). Pieces are never empty and come in order; an error ends the
    /// transfer exactly at the offset where it happened.
    pub async fn next(&mut self) -> Result<Option<Bytes>, Error> {
        if let Some(stream) = &mut self.stream {
            loop {
                match stream.next().await {
                    Err(e) if e.is_interrupted() => {
                        // Cut off with the connection: a new stream goes on
                        // from the last byte handed out, once it is back.
                        self.file.fid().client().ready().await?;
                        let len = self.end.map(|end| end - self.deliver);
                        *stream = StreamRead::start(self.file, self.deliver, len, self.max_window)?;
                    }
                    // Nothing came yet (`next` stays where the range began
                    // while streaming) and the server has no stream to
                    // spare: read as from a server without streams.
                    Err(e) if stream_refused(&e) && self.deliver == self.next => {
                        self.without_stream().await?;
                        break;
                    }
                    piece => {
                        let piece = piece?;
                        let len = piece.as_ref().map_or(0, |p| p.len() as u64);
                        self.deliver = self
                            .deliver
                            .checked_add(len)
                            .ok_or_else(|| Error::protocol("a stream past the largest offset"))?;
                        return Ok(piece);
                    }
                }
            }
        }
        loop {
            // Nothing lies past the largest offset.
            if self.finished || self.end == Some(self.deliver) || self.deliver == u64::MAX {
                self.finish();
                return Ok(None);
            }
            if let Some(piece) = self.arrived.remove(&self.deliver) {
                self.arrived_bytes -= piece.count as u64;
                let data = match piece.data {
                    Ok(data) if !data.is_empty() => data,
                    other => {
                        self.finish();
                        return other.map(|_| None);
                    }
                };
                self.deliver += data.len() as u64;
                self.known_end = self.known_end.max(self.deliver);
                if data.len() < piece.count as usize {
                    // A short read: the rest of the piece is asked for again,
                    // before anything else is handed out.
                    let rest = piece.count - data.len() as u32;
                    self.issue(self.deliver, rest)?;
                }
                return Ok(Some(data));
            }
            self.fill()?;
            let Some(piece) = self.inflight.next().await else {
                return Err(Error::protocol("read transfer stalled"));
            };
            self.inflight_bytes -= piece.count as u64;
            let got = piece.data.as_ref().map_or(0, |d| d.len() as u64);
            self.window.delivered(piece.sent, got, Instant::now());
            self.arrived_bytes += piece.count as u64;
            self.arrived.insert(piece.offset, piece);
        }
    }

    /// Goes on pipelined, or one request at a time, as [`plan`] decides
    /// for a server without streams.
    async fn without_stream(&mut self) -> Result<(), Error> {
        let how = Transfer {
            mode: Mode::Auto,
            max_window: self.max_window,
        };
        let (mode, size) = plan(self.file, how, false).await?;
        self.stream = None;
        self.mode = mode;
        self.known_end = size.max(self.deliver);
        self.window = window(mode, self.chunk as u64, self.max_window);
        Ok(())
    }

    /// Sends requests while the window has room.
    fn fill(&mut self) -> Result<(), Error> {
        let chunk = self.chunk as u64;
        loop {
            let held = self.inflight_bytes + self.arrived_bytes;
            if held > 0 && held + chunk > self.window.bytes() {
                return Ok(());
            }
            if self.end.is_some_and(|end| self.next >= end) || self.next > self.known_end {
                return Ok(());
            }
            // Requests end at the known end of file, so that the last one
            // before it comes back whole, and one more goes beyond it.
            let mut count = chunk;
            if let Some(end) = self.end {
                count = count.min(end - self.next);
            }
            if self.next < self.known_end {
                count = count.min(self.known_end - self.next);
            }
            let count = u64::from(readable(self.next, count as u32));
            if count == 0 {
                // At the largest offset: nothing lies beyond.
                return Ok(());
            }
            self.issue(self.next, count as u32)?;
            self.next += count;
        }
    }

    fn issue(&mut self, offset: u64, count: u32) -> Result<(), Error> {
        let fid = self.file.fid();
        let msg = Tread {
            fid: fid.fid,
            offset,
            count,
        };
        let sent = self.window.sent(Instant::now());
        let reply = fid.client().inner.start(msg)?;
        self.inflight_bytes += count as u64;
        self.inflight.push(Box::pin(async move {
            ReadPiece {
                offset,
                count,
                sent,
                data: crate::file::read_reply(reply.await, count),
            }
        }));
        Ok(())
    }

    /// Gives up on everything in flight (flushing it) and reads no more.
    fn finish(&mut self) {
        self.finished = true;
        self.inflight.clear();
        self.arrived.clear();
        self.inflight_bytes = 0;
        self.arrived_bytes = 0;
    }
}

/// Whether `e` is a server's refusal of one more stream (Rerror "too many
/// streams", EAGAIN): the connection has as many as the server allows.
fn stream_refused(e: &Error) -> bool {
    e.is_remote() && e.errno() == Errno::EAGAIN
}

/// A reply to one Twrite of a pipelined write.
struct WritePiece {
    offset: u64,
    data: Bytes,
    sent: Sent,
    count: Result<u32, Error>,
}

/// Data being written to a file from an offset on, in order of offset,
/// with a window of writes in flight.
pub struct RangeWrite<'f> {
    file: &'f File,
    mode: Mode,
    /// Where the next byte given to [`RangeWrite::write`] goes.
    next: u64,
    /// Bytes the server has confirmed.
    written: u64,
    window: Window,
    inflight: FuturesUnordered<BoxFuture<'static, WritePiece>>,
    inflight_bytes: u64,
    /// The stream, when the transfer is one.
    stream: Option<WriteReplies>,
}

impl std::fmt::Debug for RangeWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeWrite")
            .field("mode", &self.mode)
            .field("next", &self.next)
            .field("window", &self.window.bytes())
            .finish()
    }
}

impl<'f> RangeWrite<'f> {
    pub(crate) async fn start(
        file: &'f File,
        offset: u64,
        how: Transfer,
    ) -> Result<RangeWrite<'f>, Error> {
        // A write stream cut off with the connection leaves unknown what
        // reached the file, where pipelined writes are each sent again: a
        // client that recovers pipelines instead.
        let may_stream = !file.fid().client().recovers();
        let (mode, _) = plan(file, how, may_stream).await?;
        let stream = match mode {
            Mode::Streamed => {
                let msg = Tswrite {
                    fid: file.fid().fid,
                    offset,
                };
                Some(WriteReplies::start(&file.fid().client().inner, msg)?)
            }
            _ => None,
        };
        Ok(RangeWrite {
            file,
            mode,
            next: offset,
            written: 0,
            window: window(mode, file.iounit() as u64, how.max_window),
            inflight: FuturesUnordered::new(),
            inflight_bytes: 0,
            stream,
        })
    }

    /// The mode the transfer runs in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Sends `data` as the next bytes of the range, waiting only while the
    /// window is full. An error from any write in flight ends the transfer.
    pub async fn write(&mut self, mut data: Bytes) -> Result<(), Error> {
        let chunk = self.file.iounit() as usize;
        if let Some(stream) = &self.stream {
            return stream.write(data, chunk).await;
        }
        while !data.is_empty() {
            let piece = data.split_to(chunk.min(data.len()));
            while self.inflight_bytes > 0
                && self.inflight_bytes + piece.len() as u64 > self.window.bytes()
            {
                self.complete_one().await?;
            }
            let offset = self.next;
            writable(offset, piece.len())?;
            self.next += piece.len() as u64;
            self.issue(offset, piece)?;
        }
        Ok(())
    }

    /// Waits for every write in flight; returns the bytes written.
    pub async fn finish(mut self) -> Result<u64, Error> {
        if let Some(stream) = self.stream.take() {
            return stream.finish().await;
        }
        while !self.inflight.is_empty() {
            self.complete_one().await?;
        }
        Ok(self.written)
    }

    async fn complete_one(&mut self) -> Result<(), Error> {
        let Some(piece) = self.inflight.next().await else {
            return Ok(());
        };
        self.inflight_bytes -= piece.data.len() as u64;
        let count = piece.count? as usize;
        self.window
            .delivered(piece.sent, count as u64, Instant::now());
        self.written += count as u64;
        if count == 0 {
            return Err(Error::protocol("server wrote nothing"));
        }
        if count < piece.data.len() {
            // A short write: the rest goes again, at its own offset.
            self.issue(piece.offset + count as u64, piece.data.slice(count..))?;
        }
        Ok(())
    }

    fn issue(&mut self, offset: u64, data: Bytes) -> Result<(), Error> {
        let fid = self.file.fid();
        let msg = Twrite {
            fid: fid.fid,
            offset,
            data: data.clone(),
        };
        let sent = self.window.sent(Instant::now());
        let reply = fid.client().inner.start(msg)?;
        self.inflight_bytes += data.len() as u64;
        let len = data.len();
        self.inflight.push(Box::pin(async move {
            WritePiece {
                offset,
                data,
                sent,
                count: crate::file::write_reply(reply.await, len),
            }
        }));
        Ok(())
    }
}

/// A read stream: Tsread, then Rsread pieces as [`StreamCredit`] allows.
struct StreamRead {
    replies: ReadReplies,
    credit: StreamCredit,
    done: bool,
}

impl StreamRead {
    fn start(file: &File, offset: u64, len: Option<u64>, max: u64) -> Result<Self, Error> {
        let max = max.clamp(file.iounit() as u64, u32::MAX as u64);
        let credit = StreamCredit::new(max, Instant::now());
        let msg = Tsread {
            fid: file.fid().fid,
            offset,
            count: len.unwrap_or(u64::MAX),
            credit: credit.window() as u32,
        };
        Ok(StreamRead {
            replies: ReadReplies::start(&file.fid().client().inner, msg)?,
            credit,
            done: false,
        })
    }

    async fn next(&mut self) -> Result<Option<Bytes>, Error> {
        if self.done {
            return Ok(None);
        }
        let piece = match self.replies.try_next() {
            Some(piece) => piece,
            None => {
                // Nothing left to hand out: grant what was consumed now, so
                // that a server holding a smaller window never stalls.
                self.grant(self.credit.due(true))?;
                self.replies.next().await
            }
        };
        match piece {
            Ok(Some(data)) => {
                self.credit.consumed(data.len() as u64, Instant::now());
                self.grant(self.credit.due(false))?;
                Ok(Some(data))
            }
            end => {
                self.done = true;
                end
            }
        }
    }

    fn grant(&mut self, credit: u64) -> Result<(), Error> {
        if credit > 0 {
            self.replies.grant(credit as u32)?;
            self.credit.granted(credit, Instant::now());
        }
        Ok(())
    }
}
