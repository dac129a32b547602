//! Reading ahead of a reader that reads a regular file in order.
//!
//! A read that starts where the last one on the same open file ended (or
//! any read, for a reader that says it streams) starts a transfer of the
//! rest of the file, pipelined or streamed as [`crate::transfer`] decides,
//! and the reads after it are answered from what that transfer brings. A
//! reader that asks for one piece at a time then moves at the link's pace
//! instead of one round trip per read. Only regular files with a qid
//! version, neither append-only nor exclusive-use, are read ahead: for
//! anything else reading early would change what the reader gets.
//!
//! Memory: a transfer holds at most its window (the `max` given to
//! [`ReadAhead::new`]), plus [`QUEUED`] pieces waiting to be asked for and
//! [`SKIPPED_MAX`] bytes passed over by reads that came out of order. The
//! read-ahead of many files at once (a mount's, a mux's) shares a
//! [`ReadAheadBudget`]: each transfer's window comes out of it while it
//! runs, and a file read in order while the budget is spent is read
//! without reading ahead until some comes back. A transfer whose reader
//! takes nothing for a while (a file read a little and left open) stops
//! and gives its window back, so that paused readers cannot keep it from
//! the rest; its reader, back, reads on where it was.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ninep_wire::{Qid, QidType};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::error::Error;
use crate::file::File;
use crate::transfer::{Transfer, offsets_are_stable};

/// Pieces read ahead and not yet asked for.
const QUEUED: usize = 4;

/// Most bytes kept for reads that arrive after one further on (see
/// [`Skipped`]); a read further than this past the transfer stops it.
const SKIPPED_MAX: u64 = 16 << 20;

/// The unit a [`ReadAheadBudget`] is counted in.
const BUDGET_UNIT: u64 = 64 << 10;

/// How long a transfer sharing a budget waits for its reader to take a
/// piece before it gives its window back (see [`ReadAheadBudget::idle_after`]).
const IDLE_AFTER: Duration = Duration::from_secs(5);

/// The bytes that all the read-ahead sharing it may have in flight at once
/// (see the module's comment).
#[derive(Debug, Clone)]
pub struct ReadAheadBudget {
    units: Arc<Semaphore>,
    /// All of it, in units.
    total: u32,
    /// How long a reader may take nothing before its window goes back.
    idle_after: Duration,
}

impl ReadAheadBudget {
    /// A budget of `bytes`, counted in whole units of 64 KiB (less than
    /// one turns reading ahead off).
    pub fn new(bytes: u64) -> ReadAheadBudget {
        let most = u64::from(u32::MAX).min(Semaphore::MAX_PERMITS as u64);
        let total = (bytes / BUDGET_UNIT).min(most) as u32;
        ReadAheadBudget {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
            idle_after: IDLE_AFTER,
        }
    }

    /// This budget, a window going back once its reader has taken nothing
    /// for `idle` (5 s unless told).
    pub fn idle_after(self, idle: Duration) -> ReadAheadBudget {
        ReadAheadBudget {
            idle_after: idle,
            ..self
        }
    }

    /// A window of `want` bytes (at most the whole budget), held until the
    /// grant is dropped; `None` while the budget lacks it. A window is
    /// granted whole or not at all: a sliver of one would read ahead more
    /// slowly than the reader's own requests.
    fn take(&self, want: u64) -> Option<(u64, OwnedSemaphorePermit)> {
        let units = want.div_ceil(BUDGET_UNIT).min(u64::from(self.total)) as u32;
        if units == 0 {
            return None;
        }
        let grant = self.units.clone().try_acquire_many_owned(units).ok()?;
        Some((want.min(u64::from(units) * BUDGET_UNIT), grant))
    }
}

/// Bytes held within a [`ReadAheadBudget`] until they are dropped.
struct Granted {
    data: Bytes,
    _grant: OwnedSemaphorePermit,
}

impl AsRef<[u8]> for Granted {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// What holds an open file that may be read ahead: the transfer's task
/// keeps the holder, so the file stays open while it runs.
pub trait OpenFile: Send + Sync + 'static {
    /// The open file, if it is open.
    fn open_file(&self) -> Option<&File>;
}

impl OpenFile for File {
    fn open_file(&self) -> Option<&File> {
        Some(self)
    }
}

/// The read-ahead state of one open file.
#[derive(Debug)]
pub struct ReadAhead {
    /// Most bytes in flight for the transfer; 0 never reads ahead.
    max: u64,
    /// Where the transfer's window comes from, if shared.
    budget: Option<ReadAheadBudget>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Where the last read ended.
    last_end: Option<u64>,
    /// Where the last read asked for ends: the kernel's read-ahead sends
    /// several reads at once, each starting where the one before it ends,
    /// before any is answered.
    asked_end: Option<u64>,
    /// Whether the file may be read ahead, once known.
    eligible: Option<bool>,
    running: Option<Running>,
    /// What the transfer brought that a read further on skipped over.
    skipped: Skipped,
}

impl State {
    fn stop(&mut self) {
        self.running = None;
        self.skipped = Skipped::default();
    }
}

/// Pieces of the file passed over by a read ahead of them: concurrent
/// readers (the kernel's read-ahead sends several requests at once) may be
/// answered in any order, and each still finds its data here.
#[derive(Debug, Default)]
struct Skipped {
    /// Pieces by offset.
    pieces: BTreeMap<u64, Bytes>,
    /// Their bytes, at most [`SKIPPED_MAX`]: the oldest go first.
    bytes: u64,
}

impl Skipped {
    fn put(&mut self, offset: u64, data: Bytes) {
        self.bytes += data.len() as u64;
        self.pieces.insert(offset, data);
        while self.bytes > SKIPPED_MAX {
            let Some((_, oldest)) = self.pieces.pop_first() else {
                break;
            };
            self.bytes -= oldest.len() as u64;
        }
    }

    /// Up to `count` bytes at `offset`, if a piece holds them.
    fn take(&mut self, offset: u64, count: u32) -> Option<Bytes> {
        let (&start, piece) = self.pieces.range(..=offset).next_back()?;
        if offset >= start + piece.len() as u64 {
            return None;
        }
        let mut before = self.pieces.remove(&start)?;
        self.bytes -= before.len() as u64;
        let mut data = before.split_off((offset - start) as usize);
        let after = data.split_off(data.len().min(count as usize));
        let end = offset + data.len() as u64;
        for (at, rest) in [(start, before), (end, after)] {
            if !rest.is_empty() {
                self.bytes += rest.len() as u64;
                self.pieces.insert(at, rest);
            }
        }
        Some(data)
    }
}

/// A transfer under way, and what it brought that was not asked for yet.
#[derive(Debug)]
struct Running {
    /// Offset of `leftover`'s first byte.
    next: u64,
    leftover: Bytes,
    pieces: mpsc::Receiver<Result<Bytes, Error>>,
    /// Set when the transfer stopped for want of a reader, not at the end
    /// of the file: its last pieces end where it stopped.
    idled: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops the transfer and waits for its task to end: what it held (the
    /// file, its window) is let go when this returns.
    async fn end(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Dropping the transfer flushes what it has in flight.
        self.task.abort();
    }
}

impl ReadAhead {
    /// Read-ahead of at most `max` bytes in flight (0: none).
    pub fn new(max: u64) -> ReadAhead {
        ReadAhead {
            max,
            budget: None,
            state: Mutex::new(State::default()),
        }
    }

    /// This read-ahead, its window taken from `budget` while it runs.
    pub fn sharing(self, budget: &ReadAheadBudget) -> ReadAhead {
        ReadAhead {
            budget: Some(budget.clone()),
            ..self
        }
    }

    /// Read-ahead of at most `max` bytes for a file whose qid (as its open
    /// gave it) and type its opener knows: whether it may be read ahead is
    /// known at once, so the first read in order starts the transfer
    /// without a stat beside it, a round trip sooner.
    pub fn knowing(max: u64, qid: Qid, regular: bool) -> ReadAhead {
        let state = State {
            eligible: Some(regular && may_be_read_early(qid)),
            ..State::default()
        };
        ReadAhead {
            max,
            budget: None,
            state: Mutex::new(state),
        }
    }

    /// Keeps `head`, the file's first bytes as read with its open, for the
    /// reads that ask for them (kept as pieces a transfer skipped are, and
    /// gone with them once the file is written); a read that goes on from
    /// its end is in order. Only if `current` still holds once this
    /// read-ahead's state is locked (what would have made the head stale,
    /// a write since it was read, must show there), and, where a budget is
    /// shared, while it has room for the head, held until the head is read
    /// or dropped.
    pub async fn hold_head(&self, head: Bytes, current: impl FnOnce() -> bool) {
        let mut state = self.state.lock().await;
        if !current() {
            return;
        }
        let head = match &self.budget {
            Some(budget) => match budget.take(head.len() as u64) {
                Some((_, grant)) => Bytes::from_owner(Granted {
                    data: head,
                    _grant: grant,
                }),
                None => return,
            },
            None => head,
        };
        state.last_end = Some(head.len() as u64);
        state.skipped.put(0, head);
    }

    /// Reads up to `count` bytes at `offset` of `holder`'s open file; a
    /// `streaming` reader starts reading ahead at once. What comes back may
    /// be shorter than `count` without being the end of the file: the end
    /// is an empty read.
    pub async fn read<H: OpenFile>(
        &self,
        holder: &Arc<H>,
        offset: u64,
        count: u32,
        streaming: bool,
    ) -> Result<Bytes, Error> {
        let mut state = self.state.lock().await;
        if let Some(data) = state.skipped.take(offset, count) {
            return Ok(data);
        }
        let in_order =
            offset > 0 && (state.last_end == Some(offset) || state.asked_end == Some(offset));
        state.asked_end = offset.checked_add(u64::from(count));
        let behind = match &state.running {
            Some(running) if offset > running.next.saturating_add(SKIPPED_MAX) => {
                // Far ahead: the reader has moved on. Its window is back
                // before a transfer from here asks the budget for one.
                if let Some(old) = state.running.take() {
                    old.end().await;
                }
                state.stop();
                false
            }
            Some(running) => offset < running.next,
            None => false,
        };
        if state.running.is_none() && (in_order || streaming) && self.max > 0 {
            match state.eligible {
                Some(true) => state.running = self.start(holder.clone(), offset),
                Some(false) => {}
                None => {
                    // Whether the file may be read ahead is learnt beside a
                    // plain read of what was asked: one round trip for both,
                    // and the transfer starts right after it.
                    let file = holder.open_file().ok_or_else(closed)?;
                    let (eligible, data) =
                        tokio::join!(may_read_ahead(file), file.read_at(offset, count));
                    let (eligible, data) = (eligible?, data?);
                    let end = offset + data.len() as u64;
                    state.eligible = Some(eligible);
                    state.last_end = Some(end);
                    if eligible && !data.is_empty() {
                        state.running = self.start(holder.clone(), end);
                    }
                    return Ok(data);
                }
            }
        }
        if behind || state.running.is_none() {
            // Out of order: a plain read, without holding up other reads.
            drop(state);
            return self.read_as_asked(holder, offset, count).await;
        }
        // At the transfer's position, or a little past it: what lies
        // between is kept for the reads that will ask for it.
        loop {
            let State {
                running, skipped, ..
            } = &mut *state;
            let Some(running) = running.as_mut() else {
                return Ok(Bytes::new());
            };
            if running.leftover.is_empty() {
                match running.pieces.recv().await {
                    Some(Ok(piece)) => running.leftover = piece,
                    Some(Err(e)) => {
                        state.stop();
                        return Err(e);
                    }
                    None if running.idled.load(Ordering::Acquire) => {
                        // It stopped while nobody read: the rest is read
                        // as asked, and an in-order read starts anew.
                        state.running = None;
                        drop(state);
                        return self.read_as_asked(holder, offset, count).await;
                    }
                    None => {
                        // The end of the file, as far as the transfer saw it.
                        state.running = None;
                        return Ok(Bytes::new());
                    }
                }
                continue;
            }
            if running.next < offset {
                let n = running.leftover.len().min((offset - running.next) as usize);
                skipped.put(running.next, running.leftover.split_to(n));
                running.next += n as u64;
                continue;
            }
            let n = running.leftover.len().min(count as usize);
            let data = running.leftover.split_to(n);
            running.next += n as u64;
            state.last_end = Some(offset + n as u64);
            return Ok(data);
        }
    }

    /// A plain read of what was asked, without reading ahead.
    async fn read_as_asked<H: OpenFile>(
        &self,
        holder: &Arc<H>,
        offset: u64,
        count: u32,
    ) -> Result<Bytes, Error> {
        let file = holder.open_file().ok_or_else(closed)?;
        let data = file.read_at(offset, count).await?;
        self.state.lock().await.last_end = Some(offset + data.len() as u64);
        Ok(data)
    }

    /// Forgets what was read ahead, for a file just written or resized:
    /// reads from now on go to the server, and start reading ahead afresh.
    pub async fn forget(&self) {
        let mut state = self.state.lock().await;
        state.stop();
        state.last_end = None;
        state.asked_end = None;
    }

    /// Stops reading ahead, for a file about to be clunked. The transfer's
    /// task holds the file, so it is stopped and waited for: once this
    /// returns the file is no longer held, and a reader opening files one
    /// after another never finds the server's fids used up.
    pub async fn stop(&self) {
        let running = self.state.lock().await.running.take();
        if let Some(running) = running {
            running.end().await;
        }
    }

    /// Starts reading `holder`'s file from `offset` to its end, if the
    /// budget has room for a window.
    fn start<H: OpenFile>(&self, holder: Arc<H>, offset: u64) -> Option<Running> {
        let (window, grant, idle_after) = match &self.budget {
            Some(budget) => {
                let (bytes, grant) = budget.take(self.max)?;
                (bytes, Some(grant), Some(budget.idle_after))
            }
            None => (self.max, None, None),
        };
        let idled = Arc::new(AtomicBool::new(false));
        let idling = idled.clone();
        let (tx, pieces) = mpsc::channel(QUEUED);
        let how = Transfer {
            max_window: window,
            ..Transfer::default()
        };
        let task = tokio::spawn(async move {
            // The window goes back to the budget once the file is read to
            // its end or the transfer is stopped; the reader's queue holds
            // at most QUEUED pieces beyond it.
            let _grant = grant;
            let Some(file) = holder.open_file() else {
                return;
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
                let sent = match idle_after {
                    Some(idle) => match tokio::time::timeout(idle, tx.send(piece)).await {
                        Ok(sent) => sent,
                        Err(_) => {
                            // The piece not taken is dropped with the
                            // rest: the reader asks for it again.
                            idling.store(true, Ordering::Release);
                            return;
                        }
                    },
                    None => tx.send(piece).await,
                };
                if sent.is_err() || failed {
                    return;
                }
            }
        });
        Some(Running {
            next: offset,
            leftover: Bytes::new(),
            pieces,
            idled,
            task,
        })
    }
}

/// Whether `file` may be read ahead: reading early must not change what
/// the reader gets.
async fn may_read_ahead(file: &File) -> Result<bool, Error> {
    let info = file.stat().await?;
    let qid = file.qid();
    Ok(offsets_are_stable(qid, &info) && may_be_read_early(qid))
}

/// Whether a regular file of qid `qid` may be read ahead as far as its qid
/// tells: it has a version (not synthetic) and is neither append-only nor
/// exclusive-use.
pub fn may_be_read_early(qid: Qid) -> bool {
    qid.version != 0 && !qid.ty.contains(QidType::APPEND) && !qid.ty.contains(QidType::EXCL)
}

fn closed() -> Error {
    Error::Remote {
        errno: ninep_wire::Errno::EBADF,
        ename: "not open".into(),
    }
}
