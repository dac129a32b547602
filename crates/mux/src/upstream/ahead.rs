//! Reading ahead of a client that reads a regular upstream file in order.
//!
//! A read that starts where the last one on the same open file ended (or
//! the first read of a client's stream) starts a transfer of the rest of
//! the file upstream, pipelined (or streamed, where
//! the server offers streams) by the client library, and the reads after it
//! are answered from what that transfer brings. A client that streams a
//! file through the mux, or just reads it in order, then moves at the
//! upstream link's pace instead of one round trip per read. Only regular
//! files with a qid version, neither append-only nor exclusive-use, are read
//! ahead: for anything else reading early would change what the client gets.
//!
//! Memory: a transfer holds at most the mux's read-ahead (the window or
//! stream credit of the transfer), plus [`QUEUED`] pieces waiting to be
//! asked for.

use std::sync::Arc;

use bytes::Bytes;
use ninep_client::{Error, Transfer};
use ninep_wire::QidType;
use ninep_wire::consts::{mode, unix};
use tokio::sync::{Mutex, mpsc};

use super::RemoteFile;

/// Pieces read ahead and not yet asked for.
const QUEUED: usize = 4;

/// The read-ahead state of one open file.
#[derive(Default)]
pub(crate) struct Ahead {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Where the last read ended.
    last_end: Option<u64>,
    /// Whether the file may be read ahead, once known.
    eligible: Option<bool>,
    running: Option<Running>,
}

/// A transfer under way, and what it brought that was not asked for yet.
struct Running {
    /// Offset of `leftover`'s first byte.
    next: u64,
    leftover: Bytes,
    pieces: mpsc::Receiver<Result<Bytes, Error>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Dropping the transfer flushes what it has in flight.
        self.task.abort();
    }
}

impl Ahead {
    /// Reads up to `count` bytes at `offset` of `remote`'s open file; a
    /// read of a client's stream (`streaming`) starts reading ahead at once.
    pub async fn read(
        &self,
        remote: &Arc<RemoteFile>,
        offset: u64,
        count: u32,
        streaming: bool,
    ) -> Result<Bytes, Error> {
        let mut state = self.state.lock().await;
        let in_order = state.last_end == Some(offset) && offset > 0;
        if state.running.as_ref().is_some_and(|r| r.next != offset) {
            state.running = None;
        }
        if state.running.is_none() && (in_order || streaming) {
            match state.eligible {
                Some(true) => state.running = Some(start(remote.clone(), offset)),
                Some(false) => {}
                None => {
                    // Whether the file may be read ahead is learnt beside a
                    // plain read of what was asked: one round trip for both,
                    // and the transfer starts right after it.
                    let file = remote.open_file().ok_or_else(closed)?;
                    let (eligible, data) =
                        tokio::join!(may_read_ahead(remote), file.read_at(offset, count));
                    let (eligible, data) = (eligible?, data?);
                    let end = offset + data.len() as u64;
                    state.eligible = Some(eligible);
                    state.last_end = Some(end);
                    if eligible && !data.is_empty() {
                        state.running = Some(start(remote.clone(), end));
                    }
                    return Ok(data);
                }
            }
        }
        let Some(running) = state.running.as_mut() else {
            // Out of order: a plain read, without holding up other reads.
            drop(state);
            let data = remote
                .open_file()
                .ok_or_else(closed)?
                .read_at(offset, count)
                .await?;
            self.state.lock().await.last_end = Some(offset + data.len() as u64);
            return Ok(data);
        };
        if running.leftover.is_empty() {
            match running.pieces.recv().await {
                Some(Ok(piece)) => running.leftover = piece,
                Some(Err(e)) => {
                    state.running = None;
                    return Err(e);
                }
                None => {
                    // The end of the file, as far as the transfer saw it.
                    state.running = None;
                    return Ok(Bytes::new());
                }
            }
        }
        let n = running.leftover.len().min(count as usize);
        let data = running.leftover.split_to(n);
        running.next += n as u64;
        state.last_end = Some(running.next);
        Ok(data)
    }

    /// Stops reading ahead: the file is being clunked. The transfer's task
    /// holds the file, so it must be stopped, not merely forgotten, and
    /// waited for: once the clunk is answered the upstream fid must be on
    /// its way to being clunked too, or a client opening files one after
    /// another could find the server's fids used up.
    pub async fn stop(&self) {
        let running = self.state.lock().await.running.take();
        if let Some(mut running) = running {
            running.task.abort();
            let _ = (&mut running.task).await;
        }
    }
}

/// Whether `remote`'s open file may be read ahead: reading early must not
/// change what the client gets.
async fn may_read_ahead(remote: &RemoteFile) -> Result<bool, Error> {
    let file = remote.open_file().ok_or_else(closed)?;
    let info = file.stat().await?;
    let qid = file.qid();
    let ordered = qid.ty.contains(QidType::APPEND)
        || qid.ty.contains(QidType::EXCL)
        || info.plan9_mode & (mode::DMAPPEND | mode::DMEXCL) != 0;
    Ok(info.mode & unix::S_IFMT == unix::S_IFREG
        && qid.version != 0
        && !ordered
        && remote.read_ahead() > 0)
}

/// Starts reading `remote`'s file from `offset` to its end.
fn start(remote: Arc<RemoteFile>, offset: u64) -> Running {
    let (tx, pieces) = mpsc::channel(QUEUED);
    let task = tokio::spawn(async move {
        let Some(file) = remote.open_file() else {
            return;
        };
        let how = Transfer {
            max_window: remote.read_ahead(),
            ..Transfer::default()
        };
        let mut range = match file.read_range(offset, None, how).await {
            Ok(range) => range,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        loop {
            let piece = match range.next().await {
                Ok(Some(piece)) => Ok(piece),
                Ok(None) => return,
                Err(e) => Err(e),
            };
            let failed = piece.is_err();
            if tx.send(piece).await.is_err() || failed {
                return;
            }
        }
    });
    Running {
        next: offset,
        leftover: Bytes::new(),
        pieces,
        task,
    }
}

fn closed() -> Error {
    Error::Remote {
        errno: ninep_wire::Errno::EBADF,
        ename: "not open".into(),
    }
}
