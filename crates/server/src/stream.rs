//! The stream extension (docs/streams.md): a read or write of a sequential
//! range as many replies on one tag, paced by credit.
//!
//! A stream is a request like any other (one entry in the in-flight table,
//! flushed the same way), whose task sends several replies through
//! `Conn::send_piece`. The connection's reader hands it the Tscredit or
//! Tsdata that arrive on its tag through a [`StreamIo`], stored with its
//! in-flight entry, so that a message for a stream that has just ended (or
//! been flushed) finds no entry and is dropped.
//!
//! Memory: a read stream reads from the file only what the client's credit
//! covers (capped at the read window of [`StreamLimits`]), and only as fast
//! as the reply queue takes its pieces; a write stream grants at most the
//! write window, and data beyond its grant ends it with an error.

use std::sync::Arc;

use bytes::Bytes;
use ninep_wire::*;
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc};

use crate::dispatch::{Answer, Handler, Reply, Resolved, not_open, read, state};
use crate::error::{Error, Result};
use crate::fids::FidState;
use crate::fs::{Cx, Filesystem, can_read, can_write};
use crate::server::StreamLimits;

/// Credit of a read stream: bytes the server may still send.
pub(crate) struct Credit {
    bytes: Mutex<u64>,
    window: u64,
    more: Notify,
}

impl Credit {
    /// Adds a grant; what would take the credit past the window is dropped.
    fn grant(&self, bytes: u64) {
        let mut credit = self.bytes.lock();
        *credit = (*credit + bytes).min(self.window);
        self.more.notify_one();
    }

    /// Waits for credit and takes up to `want` bytes of it.
    async fn take(&self, want: u64) -> u64 {
        loop {
            let more = self.more.notified();
            {
                let mut credit = self.bytes.lock();
                if *credit > 0 {
                    let n = want.min(*credit);
                    *credit -= n;
                    return n;
                }
            }
            more.await;
        }
    }
}

/// What the reader gives a write stream.
pub(crate) enum Inbound {
    Data(Bytes),
    /// More data came than was granted.
    Overrun,
}

/// Data of a write stream on its way from the reader to the stream's task,
/// and the credit it may still use.
pub(crate) struct Inbox {
    tx: mpsc::UnboundedSender<Inbound>,
    allowed: Arc<Mutex<u64>>,
}

/// The reader's end of a stream.
pub(crate) enum StreamIo {
    Read(Arc<Credit>),
    Write(Inbox),
}

/// The stream task's end.
pub(crate) enum StreamTask {
    Read(Arc<Credit>),
    Write {
        rx: mpsc::UnboundedReceiver<Inbound>,
        allowed: Arc<Mutex<u64>>,
        window: u64,
    },
}

/// The two ends of a new stream, if `msg` starts one.
pub(crate) fn open(msg: &Msg, limits: &StreamLimits) -> Option<(StreamIo, StreamTask)> {
    match msg {
        Msg::Tsread(m) => {
            let window = limits.read_window as u64;
            let credit = Arc::new(Credit {
                bytes: Mutex::new((m.credit as u64).min(window)),
                window,
                more: Notify::new(),
            });
            Some((StreamIo::Read(credit.clone()), StreamTask::Read(credit)))
        }
        Msg::Tswrite(_) => {
            let (tx, rx) = mpsc::unbounded_channel();
            let allowed = Arc::new(Mutex::new(0));
            let io = StreamIo::Write(Inbox {
                tx,
                allowed: allowed.clone(),
            });
            let task = StreamTask::Write {
                rx,
                allowed,
                window: limits.write_window as u64,
            };
            Some((io, task))
        }
        _ => None,
    }
}

impl StreamIo {
    /// Hands a Tscredit or Tsdata to the stream; one of the wrong kind is
    /// dropped, as one for no stream is.
    pub(crate) fn deliver(&self, msg: Msg) {
        match (self, msg) {
            (StreamIo::Read(credit), Msg::Tscredit(m)) => credit.grant(m.credit as u64),
            (StreamIo::Write(inbox), Msg::Tsdata(m)) => {
                let mut allowed = inbox.allowed.lock();
                let len = m.data.len() as u64;
                let inbound = if len <= *allowed {
                    *allowed -= len;
                    Inbound::Data(m.data)
                } else {
                    Inbound::Overrun
                };
                let _ = inbox.tx.send(inbound);
            }
            _ => {}
        }
    }
}

/// The state of a fid that must be a file (not a directory or an extended
/// attribute) open as `access` allows.
fn open_file<'g, T>(
    g: &'g Option<FidState<T>>,
    access: fn(u32) -> bool,
    refusal: &'static str,
) -> Result<&'g FidState<T>> {
    let s = state(g)?;
    let flags = s.open.ok_or_else(not_open)?;
    if !access(flags) || s.xattr.is_some() {
        return Err(Error::with_errno(Errno::EBADF, refusal));
    }
    if s.qid.ty.is_dir() {
        return Err(Error::is_dir());
    }
    Ok(s)
}

impl<F: Filesystem> Handler<'_, F> {
    /// Runs a stream to its final reply (or error); the pieces before it go
    /// out as it goes.
    pub(crate) async fn stream(
        &self,
        task: StreamTask,
        tag: u16,
        id: u64,
        msg: Msg,
        r: Resolved<F::File>,
    ) -> Result<Msg> {
        match (task, msg) {
            (StreamTask::Read(credit), Msg::Tsread(m)) => {
                self.read_stream(&credit, tag, id, m, &r).await
            }
            (
                StreamTask::Write {
                    rx,
                    allowed,
                    window,
                },
                Msg::Tswrite(m),
            ) => {
                self.write_stream(rx, &allowed, window, tag, id, m, &r)
                    .await
            }
            _ => Err(Error::not_supported()),
        }
    }

    async fn read_stream(
        &self,
        credit: &Credit,
        tag: u16,
        id: u64,
        m: Tsread,
        r: &Resolved<F::File>,
    ) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = open_file(&g, can_read, "fid not open for reading")?;
        let cx = Cx {
            streaming: true,
            ..self.cx(s)
        };
        let piece = (self.session.msize - IOHDRSZ) as u64;
        let (mut offset, mut left) = (m.offset, m.count);
        while left > 0 {
            let want = credit.take(piece.min(left)).await;
            let (got, sent) = match self
                .spliced(&cx, &s.file, offset, want as u32, Answer::Piece)
                .await
            {
                Some(piped) => (piped.len(), Reply::Piped(piped)),
                None => {
                    let mut data = self.fs().read(&cx, &s.file, offset, want as u32).await?;
                    data.truncate(want as usize);
                    (data.len(), Msg::from(Rsread { data }).into())
                }
            };
            // Credit not used by a short read is not used up.
            credit.grant(want - got as u64);
            if got == 0 {
                break;
            }
            offset += got as u64;
            left -= got as u64;
            if !self.conn.send_piece(self.session, tag, id, sent).await {
                break;
            }
        }
        Ok(Rsread { data: Bytes::new() }.into())
    }

    #[allow(clippy::too_many_arguments)] // the two ends of the stream, and where it goes
    async fn write_stream(
        &self,
        mut rx: mpsc::UnboundedReceiver<Inbound>,
        allowed: &Mutex<u64>,
        window: u64,
        tag: u16,
        id: u64,
        m: Tswrite,
        r: &Resolved<F::File>,
    ) -> Result<Msg> {
        let g = read(&r.fid).await?;
        let s = open_file(&g, can_write, "fid not open for writing")?;
        let cx = self.cx(s);
        let grant = async |bytes: u64| {
            *allowed.lock() += bytes;
            let credit = Rscredit {
                credit: bytes as u32,
            };
            self.conn
                .send_piece(self.session, tag, id, Msg::from(credit).into())
                .await
        };
        let window = window.min(u32::MAX as u64);
        if !grant(window).await {
            return Err(Error::from_errno(Errno::EINTR));
        }
        let (mut offset, mut total, mut ungranted) = (m.offset, 0u64, 0u64);
        loop {
            let mut data = match rx.recv().await {
                Some(Inbound::Data(data)) if data.is_empty() => break,
                Some(Inbound::Data(data)) => data,
                Some(Inbound::Overrun) => {
                    return Err(Error::with_errno(
                        Errno::EPROTO,
                        "write stream past its credit",
                    ));
                }
                None => return Err(Error::from_errno(Errno::EINTR)),
            };
            let len = data.len() as u64;
            while !data.is_empty() {
                let n = self.fs().write(&cx, &s.file, offset, data.clone()).await? as usize;
                if n == 0 {
                    return Err(Error::from_errno(Errno::EIO));
                }
                let n = n.min(data.len());
                data = data.slice(n..);
                offset += n as u64;
            }
            total += len;
            ungranted += len;
            // The low water mark: half the window written, grant it again.
            if ungranted >= window / 2 {
                if !grant(ungranted).await {
                    return Err(Error::from_errno(Errno::EINTR));
                }
                ungranted = 0;
            }
        }
        Ok(Rswrite { count: total }.into())
    }
}
