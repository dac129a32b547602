//! Writing behind a writer that writes a regular file in order.
//!
//! Each write is taken at once and sent in the background: writes that
//! follow each other are gathered into writes of an iounit each and sent
//! as one transfer (pipelined or streamed, as [`crate::transfer`] decides),
//! so a writer of small pieces moves at the link's pace instead of one
//! round trip per write. A write elsewhere first waits for the transfer
//! before it, so the server sees writes to overlapping bytes in the order
//! they were made. The first error of a transfer is kept and given to the
//! next write or [`WriteBehind::flush`], the latest point at which a
//! writer may learn of it, as with the page cache's writeback. The last
//! piece short of an iounit is sent by [`WriteBehind::flush`] or
//! [`WriteBehind::settle`], or by the write that does not follow on.
//!
//! Only a caller that knows early writes cannot change what the file holds
//! should write behind: regular files with a qid version, neither
//! append-only nor exclusive-use, not opened to append.
//!
//! Dropping a [`WriteBehind`] lets what it took still be written: the
//! transfer's task holds the file until then.
//!
//! Memory: a transfer holds at most its window (the `max` given to
//! [`WriteBehind::new`]) plus [`QUEUED`] iounits not yet sent and the
//! piece being gathered.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::sync::{Mutex, mpsc};

use crate::ahead::OpenFile;
use crate::error::Error;
use crate::file::writable;
use crate::transfer::Transfer;

/// Iounits gathered and not yet sent.
const QUEUED: usize = 16;

/// The write-behind state of one open file.
#[derive(Debug)]
pub struct WriteBehind {
    /// Most bytes in flight for a transfer.
    max: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: Option<Running>,
    /// The first error of a transfer, not yet reported.
    error: Option<Error>,
}

/// A transfer under way.
#[derive(Debug)]
struct Running {
    /// Offset of `gathered`'s first byte.
    offset: u64,
    /// Writes taken and not yet sent, gathered up to `chunk` bytes.
    gathered: BytesMut,
    /// The most bytes one write to the server carries (the iounit).
    chunk: usize,
    writes: mpsc::Sender<Bytes>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Where the next write taken would follow on.
    fn next(&self) -> u64 {
        self.offset + self.gathered.len() as u64
    }

    /// Sends what is gathered, whole chunks only unless `all`.
    async fn send(&mut self, all: bool) -> Result<(), ()> {
        while self.gathered.len() >= self.chunk || (all && !self.gathered.is_empty()) {
            let n = self.gathered.len().min(self.chunk);
            let piece = self.gathered.split_to(n).freeze();
            self.offset += n as u64;
            self.writes.send(piece).await.map_err(drop)?;
        }
        Ok(())
    }
}

impl WriteBehind {
    /// Write-behind with at most `max` bytes in flight.
    pub fn new(max: u64) -> WriteBehind {
        WriteBehind {
            max,
            state: Mutex::new(State::default()),
        }
    }

    /// Takes `data` to be written at `offset` of `holder`'s open file, and
    /// returns once it is on its way; or returns the error of an earlier
    /// write not yet reported, and takes nothing.
    pub async fn write<H: OpenFile>(
        &self,
        holder: &Arc<H>,
        offset: u64,
        data: Bytes,
    ) -> Result<(), Error> {
        writable(offset, data.len())?;
        let mut state = self.state.lock().await;
        if state.running.as_ref().is_some_and(|r| r.next() != offset) {
            state.finish().await;
        }
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let running = match &mut state.running {
            Some(running) => running,
            None => state.running.insert(self.start(holder, offset)?),
        };
        running.gathered.extend_from_slice(&data);
        if running.send(false).await.is_err() {
            // The transfer ended early: its error is the answer.
            state.finish().await;
            return Err(state.error.take().unwrap_or_else(ended));
        }
        Ok(())
    }

    /// Waits until every write taken is done; returns the first error since
    /// the last one reported.
    pub async fn flush(&self) -> Result<(), Error> {
        let mut state = self.state.lock().await;
        state.finish().await;
        state.error.take().map_or(Ok(()), Err)
    }

    /// Waits until every write taken is done, keeping an error for the
    /// next write or flush to report.
    pub async fn settle(&self) {
        self.state.lock().await.finish().await;
    }

    /// Whether writes taken may still be on their way.
    pub fn is_idle(&self) -> bool {
        self.state
            .try_lock()
            .is_ok_and(|state| state.running.is_none())
    }

    /// Starts writing `holder`'s file from `offset` with what comes on the
    /// transfer's channel.
    fn start<H: OpenFile>(&self, holder: &Arc<H>, offset: u64) -> Result<Running, Error> {
        let chunk = holder.open_file().ok_or_else(ended)?.iounit() as usize;
        let (writes, mut taken) = mpsc::channel::<Bytes>(QUEUED);
        let how = Transfer {
            max_window: self.max,
            ..Transfer::default()
        };
        let holder = holder.clone();
        let task = tokio::spawn(async move {
            let file = holder.open_file().ok_or_else(ended)?;
            let mut range = file.write_range(offset, how).await?;
            while let Some(piece) = taken.recv().await {
                range.write(piece).await?;
            }
            range.finish().await.map(drop)
        });
        Ok(Running {
            offset,
            gathered: BytesMut::new(),
            chunk,
            writes,
            task,
        })
    }
}

impl State {
    /// Ends the transfer, once all it took is written; keeps its error.
    async fn finish(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        // A send fails only if the transfer ended, whose error follows.
        let _ = running.send(true).await;
        let Running { writes, task, .. } = running;
        drop(writes);
        let outcome = match task.await {
            Ok(outcome) => outcome,
            Err(e) => Err(Error::protocol(format!("write-behind stopped: {e}"))),
        };
        if let Err(e) = outcome {
            self.error.get_or_insert(e);
        }
    }
}

fn ended() -> Error {
    Error::Remote {
        errno: ninep_wire::Errno::EBADF,
        ename: "not open".into(),
    }
}
