//! Blocks and the queues that hold them, with flow control by water marks.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::hungup;
use crate::error::Result;

/// Data passed along a stream. The last block of a write carries the
/// delimiter, so a reader can keep the write's boundary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Block {
    /// The bytes.
    pub data: Bytes,
    /// This block ends a message.
    pub delim: bool,
}

impl Block {
    /// A block that ends a message.
    pub fn delimited(data: impl Into<Bytes>) -> Block {
        Block {
            data: data.into(),
            delim: true,
        }
    }
}

/// How much a queue holds before its writers wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes held at most; writers then wait until a reader has drained
    /// the queue below half of it.
    pub high_water: usize,
    /// Blocks held at most, so that many tiny writes cannot hold more
    /// memory in block headers than `high_water` allows in data.
    pub blocks: usize,
}

impl Default for Limits {
    /// 64 KiB and 1024 blocks: Plan 9's pipe limit is 32 KiB of data, and a
    /// 9P read of a full iounit should find a whole one waiting.
    fn default() -> Limits {
        Limits {
            high_water: 64 * 1024,
            blocks: 1024,
        }
    }
}

/// A queue of blocks between one writer and one reader at a time.
#[derive(Debug)]
pub struct Queue {
    state: Mutex<State>,
    limits: Limits,
    /// Data came, or the queue was hung up.
    readable: Notify,
    /// The queue drained below its low water mark, or was hung up.
    writable: Notify,
    /// One reader at a time, so the bytes a read returns are contiguous.
    reader: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    blocks: VecDeque<Block>,
    bytes: usize,
    /// Past the high water mark (Plan 9's QHIWAT): writers wait until a
    /// reader drains the queue below half of it.
    full: bool,
    hungup: bool,
    /// The most bytes ever held at once.
    peak: usize,
}

impl Queue {
    /// An empty queue.
    pub fn new(limits: Limits) -> Queue {
        let limits = Limits {
            high_water: limits.high_water.max(1),
            blocks: limits.blocks.max(1),
        };
        Queue {
            state: Mutex::new(State::default()),
            limits,
            readable: Notify::new(),
            writable: Notify::new(),
            reader: tokio::sync::Mutex::new(()),
        }
    }

    /// Appends `block`, waiting while the queue is past its high water mark.
    /// A block larger than the room left goes in pieces, the delimiter on the
    /// last, so the queue never holds more than its high water mark. Fails
    /// once the queue is hung up. If the future is dropped, the pieces
    /// already queued stay, without a delimiter.
    pub async fn put(&self, block: Block) -> Result<()> {
        let Block { mut data, delim } = block;
        loop {
            let drained = self.writable.notified();
            {
                let mut s = self.state.lock();
                if s.hungup {
                    return Err(hungup());
                }
                if !s.full {
                    let room = self.limits.high_water - s.bytes;
                    let piece = data.split_to(data.len().min(room));
                    let last = data.is_empty();
                    s.bytes += piece.len();
                    s.peak = s.peak.max(s.bytes);
                    s.blocks.push_back(Block {
                        data: piece,
                        delim: delim && last,
                    });
                    s.full =
                        s.bytes >= self.limits.high_water || s.blocks.len() >= self.limits.blocks;
                    drop(s);
                    self.readable.notify_waiters();
                    if last {
                        return Ok(());
                    }
                    continue;
                }
            }
            drained.await;
        }
    }

    /// Up to `count` bytes, ending at the first delimiter; waits while the
    /// queue is empty. Empty once the queue is hung up and drained. If the
    /// future is dropped (a flushed read) nothing has been taken.
    pub async fn read(&self, count: usize) -> Bytes {
        let _reader = self.reader.lock().await;
        loop {
            let arrived = self.readable.notified();
            {
                let mut s = self.state.lock();
                if !s.blocks.is_empty() && count > 0 {
                    let data = self.take(&mut s, count);
                    drop(s);
                    return data;
                }
                if s.hungup || count == 0 {
                    return Bytes::new();
                }
            }
            arrived.await;
        }
    }

    /// Takes up to `count` bytes from the front, stopping after a
    /// delimited block, and wakes writers if that drained the queue below
    /// its low water mark.
    fn take(&self, s: &mut State, count: usize) -> Bytes {
        let mut pieces = Vec::new();
        let mut n = 0;
        while n < count {
            let Some(front) = s.blocks.front_mut() else {
                break;
            };
            let (piece, ends) = if front.data.len() <= count - n {
                let block = s.blocks.pop_front().expect("front exists");
                (block.data, block.delim)
            } else {
                (front.data.split_to(count - n), false)
            };
            n += piece.len();
            pieces.push(piece);
            if ends {
                break;
            }
        }
        s.bytes -= n;
        if s.full
            && s.bytes < self.limits.high_water / 2
            && s.blocks.len() < self.limits.blocks.div_ceil(2)
        {
            s.full = false;
            self.writable.notify_waiters();
        }
        // One piece is handed out as it is; more are gathered.
        match pieces.len() {
            1 => pieces.pop().expect("one piece"),
            _ => {
                let mut out = BytesMut::with_capacity(n);
                pieces.iter().for_each(|p| out.extend_from_slice(p));
                out.freeze()
            }
        }
    }

    /// Ends the queue: writers fail, readers get what is left and then 0.
    pub fn hangup(&self) {
        self.state.lock().hungup = true;
        self.readable.notify_waiters();
        self.writable.notify_waiters();
    }

    /// True once the queue is hung up.
    pub fn is_hungup(&self) -> bool {
        self.state.lock().hungup
    }

    /// Bytes held now.
    pub fn len(&self) -> usize {
        self.state.lock().bytes
    }

    /// True if no bytes are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most bytes held at once so far: never more than the high water
    /// mark.
    pub fn peak(&self) -> usize {
        self.state.lock().peak
    }

    /// The queue's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }
}
