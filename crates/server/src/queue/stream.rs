//! A stream: a user end (`data`, `ctl`) joined to a device end through a
//! stack of processing modules (Presotto §2.1, §3.2).

use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use super::{Block, Limits, Module, Modules, Queue, hungup};
use crate::error::{Error, Result};

/// A full-duplex stream. Its user end is what a file server's `data` and
/// `ctl` files read and write; its device end is a queue a device drains
/// and fills ([`Stream::new`]) or another stream ([`Stream::pipe`]).
#[derive(Debug)]
pub struct Stream {
    /// Blocks on their way to the user, read from `data`.
    up: Queue,
    device: Device,
    /// The pushed modules, the most recent (nearest the user) first.
    modules: Mutex<Vec<(String, Box<dyn Module>)>>,
    known: Modules,
    /// One writer at a time at each end, so that writes are atomic.
    user_writer: tokio::sync::Mutex<()>,
    device_writer: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
enum Device {
    /// A device task drains it with [`Stream::device_read`].
    Queue(Queue),
    /// Two streams joined at the device end: what goes down one goes up
    /// the other.
    Joined(Weak<Stream>),
}

/// Which way blocks go through the modules.
#[derive(Clone, Copy)]
enum Way {
    Down,
    Up,
}

impl Stream {
    /// A stream whose device end is a queue: the device takes what users
    /// write with [`Stream::device_read`] and gives what they read with
    /// [`Stream::device_write`]. Both queues are held to `limits`; `known`
    /// are the modules `push` may name.
    pub fn new(limits: Limits, known: Modules) -> Arc<Stream> {
        Arc::new(Stream::with_device(
            limits,
            known,
            Device::Queue(Queue::new(limits)),
        ))
    }

    /// Two streams joined at the device end, a pipe's two ends: what is
    /// written on one is read from the other.
    pub fn pipe(limits: Limits, known: Modules) -> (Arc<Stream>, Arc<Stream>) {
        let mut other = None;
        let one = Arc::new_cyclic(|one: &Weak<Stream>| {
            let two = Arc::new(Stream::with_device(
                limits,
                known.clone(),
                Device::Joined(one.clone()),
            ));
            let joined = Device::Joined(Arc::downgrade(&two));
            other = Some(two);
            Stream::with_device(limits, known, joined)
        });
        (one, other.expect("made with the first"))
    }

    fn with_device(limits: Limits, known: Modules, device: Device) -> Stream {
        Stream {
            up: Queue::new(limits),
            device,
            modules: Mutex::new(Vec::new()),
            known,
            user_writer: tokio::sync::Mutex::new(()),
            device_writer: tokio::sync::Mutex::new(()),
        }
    }

    /// A read of `data`: up to `count` bytes, at most one delimited block;
    /// waits for data, and returns none once the stream is hung up and
    /// drained. Safe to drop (flush) while waiting.
    pub async fn read(&self, count: usize) -> Bytes {
        self.up.read(count).await
    }

    /// A write of `data`: atomic (no other write interleaves) and
    /// delimited; waits while the next queue is past its high water mark.
    pub async fn write(&self, data: Bytes) -> Result<usize> {
        let len = data.len();
        let _writer = self.user_writer.lock().await;
        let blocks = self.through_modules(Way::Down, Block::delimited(data))?;
        for block in blocks {
            match &self.device {
                Device::Queue(q) => q.put(block).await?,
                Device::Joined(other) => {
                    let other = other.upgrade().ok_or_else(hungup)?;
                    other.device_write(block).await?;
                }
            }
        }
        Ok(len)
    }

    /// The device end's read: what users wrote, up to `count` bytes and at
    /// most one write; none once hung up and drained (or for a pipe, whose
    /// device end is the other stream).
    pub async fn device_read(&self, count: usize) -> Bytes {
        match &self.device {
            Device::Queue(q) => q.read(count).await,
            Device::Joined(_) => Bytes::new(),
        }
    }

    /// The device end's write: `block` goes up through the modules to the
    /// reader of `data`, waiting while that queue is past its high water
    /// mark. A module's refusal hangs the stream up.
    pub async fn device_write(&self, block: Block) -> Result<()> {
        let _writer = self.device_writer.lock().await;
        let blocks = self.through_modules(Way::Up, block).inspect_err(|_| {
            self.hangup();
        })?;
        for block in blocks {
            self.up.put(block).await?;
        }
        Ok(())
    }

    fn through_modules(&self, way: Way, block: Block) -> Result<Vec<Block>> {
        let mut modules = self.modules.lock();
        let mut blocks = vec![block];
        let mut pass = |m: &mut Box<dyn Module>| -> Result<()> {
            let mut out = Vec::with_capacity(blocks.len());
            for block in blocks.drain(..) {
                match way {
                    Way::Down => m.down(block, &mut out)?,
                    Way::Up => m.up(block, &mut out)?,
                }
            }
            blocks = out;
            Ok(())
        };
        match way {
            Way::Down => modules.iter_mut().try_for_each(|(_, m)| pass(m))?,
            Way::Up => modules.iter_mut().rev().try_for_each(|(_, m)| pass(m))?,
        }
        Ok(blocks)
    }

    /// A write of `ctl`: `hangup`, `push NAME`, `pop`, or a message for a
    /// pushed module; anything else is refused.
    pub async fn ctl(&self, msg: &str) -> Result<()> {
        let words: Vec<&str> = msg.split_whitespace().collect();
        match words[..] {
            ["hangup"] => {
                self.hangup();
                Ok(())
            }
            ["push", name] => {
                let module = self
                    .known
                    .make(name)
                    .ok_or_else(|| Error::new(format!("push: no module {name:?}")))?;
                self.modules.lock().insert(0, (name.to_owned(), module));
                Ok(())
            }
            ["pop"] => {
                let held = {
                    let mut modules = self.modules.lock();
                    if modules.is_empty() {
                        return Err(Error::new("pop: no module pushed"));
                    }
                    modules.remove(0).1.drain()
                };
                match held {
                    Some(block) => self.up.put(block).await,
                    None => Ok(()),
                }
            }
            _ => {
                let mut modules = self.modules.lock();
                modules
                    .iter_mut()
                    .find_map(|(_, m)| m.ctl(msg))
                    .unwrap_or_else(|| Err(unknown_ctl(msg)))
            }
        }
    }

    /// Ends the stream both ways: readers here get what is queued and then
    /// end of file, writers at either end fail.
    pub fn hangup(&self) {
        self.up.hangup();
        match &self.device {
            Device::Queue(q) => q.hangup(),
            Device::Joined(other) => {
                if let Some(other) = other.upgrade() {
                    other.up.hangup();
                }
            }
        }
    }

    /// True once the stream is hung up.
    pub fn is_hungup(&self) -> bool {
        self.up.is_hungup()
    }

    /// The names of the pushed modules, the most recent first.
    pub fn modules(&self) -> Vec<String> {
        self.modules.lock().iter().map(|(n, _)| n.clone()).collect()
    }

    /// Bytes waiting for the reader of `data`, and for the device.
    pub fn queued(&self) -> (usize, usize) {
        let down = match &self.device {
            Device::Queue(q) => q.len(),
            Device::Joined(_) => 0,
        };
        (self.up.len(), down)
    }

    /// The queue read from `data`, for its figures.
    pub fn up_queue(&self) -> &Queue {
        &self.up
    }
}

impl Drop for Stream {
    /// The last close destroys the stream, which hangs it up.
    fn drop(&mut self) {
        self.hangup();
    }
}

/// The refusal of a ctl message nobody understood.
pub fn unknown_ctl(msg: &str) -> Error {
    let msg = msg.trim();
    let shown: String = msg.chars().take(64).collect();
    Error::new(format!("unknown ctl message {shown:?}"))
}
