//! Writing encoded frames to a stream, as both ends of a connection do.
//!
//! A frame sent with `send` goes out from the task that made it, at once,
//! when nothing is queued and the stream takes it whole: no hand-off to
//! another task and no wait for one to run. That is the quickest way for a
//! frame alone. Otherwise (and for frames sent with `queue`, when more are
//! coming) it joins a queue that a flusher task writes in batches: frames
//! queued together go out in one write, and a large payload goes out from
//! its own buffer beside its header, uncopied.
//!
//! The queue is bounded for a peer that does not read: [`Writer::room`]
//! waits while `limit` frames are queued (or promised), so a writer never
//! holds more than `limit` frames, and whoever makes them waits instead.

use std::collections::VecDeque;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::splice::{PipedFile, SpliceTarget};

/// An encoded frame: everything but a trailing payload, and the payload
/// (as `ninep_wire::Fcall::encode_head` splits them).
#[derive(Debug, Clone)]
pub struct Frame {
    /// The frame up to its payload (all of it, for messages without one).
    pub head: Bytes,
    /// What follows the head, written without a copy.
    pub payload: Payload,
}

/// The end of a frame that is written from where it lies.
#[derive(Debug, Clone, Default)]
pub enum Payload {
    /// The head is the whole frame.
    #[default]
    None,
    /// A read or write payload, written after the head from its own buffer.
    Bytes(Bytes),
    /// File data in a pipe, spliced into the socket (read into memory for a
    /// stream that is no socket); `left` bytes of it still to go. A frame
    /// carrying it can be written once: its clones share the pipe.
    Piped {
        /// The pipe holding the data.
        pipe: Arc<PipedFile>,
        /// What is still in it for this frame.
        left: usize,
    },
}

impl From<Option<Bytes>> for Payload {
    fn from(payload: Option<Bytes>) -> Payload {
        payload.map_or(Payload::None, Payload::Bytes)
    }
}

impl From<PipedFile> for Payload {
    fn from(piped: PipedFile) -> Payload {
        Payload::Piped {
            left: piped.len(),
            pipe: Arc::new(piped),
        }
    }
}

impl Payload {
    fn len(&self) -> usize {
        match self {
            Payload::None => 0,
            Payload::Bytes(bytes) => bytes.len(),
            Payload::Piped { left, .. } => *left,
        }
    }

    /// The bytes to write beside a head, for payloads in memory.
    fn in_memory(&self) -> &[u8] {
        match self {
            Payload::Bytes(bytes) => bytes,
            Payload::None | Payload::Piped { .. } => &[],
        }
    }

    /// What is left once the first `n` bytes are written.
    fn after(&self, n: usize) -> Payload {
        match self {
            Payload::None => Payload::None,
            Payload::Bytes(bytes) => Payload::Bytes(bytes.slice(n..)),
            Payload::Piped { pipe, left } => Payload::Piped {
                pipe: pipe.clone(),
                left: left - n,
            },
        }
    }
}

impl Frame {
    fn len(&self) -> usize {
        self.head.len() + self.payload.len()
    }

    /// What is left once the first `n` bytes are written.
    fn after(&self, n: usize) -> Frame {
        let head = self.head.len();
        if n < head {
            return Frame {
                head: self.head.slice(n..),
                payload: self.payload.clone(),
            };
        }
        Frame {
            head: Bytes::new(),
            payload: self.payload.after(n - head),
        }
    }

    /// The frame with its piped data read into memory: for a stream that
    /// is no socket, or to be kept and sent again.
    /// Reading the pipe empties it: on failure the frame is lost.
    pub fn unpiped(&self) -> std::io::Result<Frame> {
        let Payload::Piped { pipe, left } = &self.payload else {
            return Ok(self.clone());
        };
        let data = pipe.read_out(*left)?;
        if data.len() != *left {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(Frame {
            head: self.head.clone(),
            payload: Payload::Bytes(Bytes::from(data)),
        })
    }
}

/// Payloads at least this large are written in place, not copied.
const COPY_LIMIT: usize = 16 * 1024;

/// Batches are written once they reach this size.
const BATCH: usize = 64 * 1024;

type Out = Box<dyn AsyncWrite + Send + Unpin>;

/// The sending end of a stream. Dropping it lets the flusher write what is
/// queued and shut the stream down.
pub struct Writer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("limit", &self.shared.limit)
            .finish()
    }
}

struct Shared {
    state: Mutex<State>,
    limit: usize,
    /// The socket under the stream, for splicing piped payloads into it:
    /// whoever holds the stream (`State::out`) may write to it.
    socket: Option<SpliceTarget>,
    /// Wakes the flusher: frames queued, or the writer dropped.
    work: Notify,
    /// Wakes those waiting in [`Writer::room`].
    room: Notify,
}

struct State {
    /// The stream, while nobody is writing to it: the flusher takes it out
    /// while it writes a batch.
    out: Option<Out>,
    queue: VecDeque<Frame>,
    /// Frames queued, promised by a [`Room`], or in the flusher's batch.
    held: usize,
    /// A write made at once still has to be flushed.
    unflushed: bool,
    /// The stream failed: frames are dropped from now on.
    failed: bool,
    /// The [`Writer`] is gone: write what is queued, then shut down.
    ending: bool,
}

/// A place in a writer's queue, taken by [`Writer::room`]; dropping it
/// unused gives it back.
#[must_use]
#[derive(Debug)]
pub struct Room<'a> {
    writer: &'a Writer,
    used: bool,
}

impl Room<'_> {
    /// Sends `frame` in the place taken, at once if the stream is free.
    pub fn send(mut self, frame: Frame) {
        self.used = true;
        self.writer.put(frame, true);
    }

    /// Queues `frame` in the place taken, to go out with others.
    pub fn queue(mut self, frame: Frame) {
        self.used = true;
        self.writer.put(frame, false);
    }
}

impl Drop for Room<'_> {
    fn drop(&mut self) {
        if !self.used {
            let mut state = self.writer.lock();
            self.writer.release(&mut state, 1);
        }
    }
}

impl Writer {
    /// A writer to `out` that holds at most `limit` frames, and its
    /// flusher, which ends once the writer is dropped and all is written
    /// (or the stream fails).
    pub fn spawn(
        out: impl AsyncWrite + Send + Unpin + 'static,
        limit: usize,
    ) -> (Writer, JoinHandle<()>) {
        Writer::spawn_on_socket(out, None, limit)
    }

    /// As [`Writer::spawn`], for a stream that writes straight to `socket`
    /// (see [`crate::Stream::splice_target`]): piped payloads are spliced
    /// into it.
    pub fn spawn_on_socket(
        out: impl AsyncWrite + Send + Unpin + 'static,
        socket: Option<SpliceTarget>,
        limit: usize,
    ) -> (Writer, JoinHandle<()>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                out: Some(Box::new(out)),
                queue: VecDeque::new(),
                held: 0,
                unflushed: false,
                failed: false,
                ending: false,
            }),
            limit: limit.max(1),
            socket,
            work: Notify::new(),
            room: Notify::new(),
        });
        let flusher = tokio::spawn(flush(shared.clone()));
        (Writer { shared }, flusher)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// Whether piped payloads go into the socket without a copy.
    pub fn splices(&self) -> bool {
        self.shared.socket.is_some()
    }

    /// Waits for a place in the queue: while `limit` frames are held, until
    /// one is written. Once the stream has failed there is always room (and
    /// what is sent is dropped).
    pub async fn room(&self) -> Room<'_> {
        loop {
            let freed = self.shared.room.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.lock();
                if state.failed || state.held < self.shared.limit {
                    state.held += 1;
                    return Room {
                        writer: self,
                        used: false,
                    };
                }
            }
            freed.await;
        }
    }

    /// Sends `frame` without waiting for room, past the limit if need be:
    /// for frames bounded by other means (a client's requests, by its
    /// tags). It is written at once if the stream is free.
    pub fn send(&self, frame: Frame) {
        self.lock().held += 1;
        self.put(frame, true);
    }

    /// As [`Writer::send`], but queued, to go out with others.
    pub fn queue(&self, frame: Frame) {
        self.lock().held += 1;
        self.put(frame, false);
    }

    /// Writes `frame` now if asked to, nothing is queued and the stream
    /// takes it, else queues it for the flusher. Its place is already
    /// counted in `held`.
    fn put(&self, frame: Frame, at_once: bool) {
        let mut state = self.lock();
        if state.failed {
            self.release(&mut state, 1);
            return;
        }
        let mut frame = frame;
        if self.shared.socket.is_none() && matches!(frame.payload, Payload::Piped { .. }) {
            match frame.unpiped() {
                Ok(whole) => frame = whole,
                Err(_) => {
                    self.release(&mut state, 1);
                    self.shared.fail(&mut state);
                    return;
                }
            }
        }
        if at_once
            && state.queue.is_empty()
            && let Some(out) = state.out.as_mut()
        {
            match write_now(out, self.shared.socket.as_ref(), &frame) {
                Now::Written { flushed } => {
                    state.unflushed |= !flushed;
                    self.release(&mut state, 1);
                    if !flushed {
                        self.shared.work.notify_one();
                    }
                    return;
                }
                Now::Partly(n) => frame = frame.after(n),
                Now::Failed => {
                    self.release(&mut state, 1);
                    self.shared.fail(&mut state);
                    return;
                }
            }
        }
        state.queue.push_back(frame);
        self.shared.work.notify_one();
    }

    /// Gives back `n` places, waking those waiting for room if it was full.
    fn release(&self, state: &mut State, n: usize) {
        self.shared.release(state, n);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.lock().ending = true;
        self.shared.work.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    fn release(&self, state: &mut State, n: usize) {
        let was_full = state.held >= self.limit;
        state.held -= n;
        if was_full && state.held < self.limit {
            self.room.notify_waiters();
        }
    }

    /// The stream failed: drops what is queued and lets every sender on.
    fn fail(&self, state: &mut State) {
        state.failed = true;
        let queued = state.queue.len();
        state.queue.clear();
        state.held -= queued;
        self.room.notify_waiters();
    }
}

/// How far a write made at once got.
enum Now {
    Written {
        flushed: bool,
    },
    /// The stream took this many bytes and would block on the rest.
    Partly(usize),
    Failed,
}

/// Writes `frame` to `out` (its piped data to `socket`) as far as it goes
/// without waiting. Polling with a waker that does nothing is safe here:
/// whoever writes next (the flusher, if this stops short) polls again with
/// its own.
fn write_now(out: &mut Out, socket: Option<&SpliceTarget>, frame: &Frame) -> Now {
    let mut cx = Context::from_waker(Waker::noop());
    let (len, mut done) = (frame.len(), 0);
    while done < len {
        let rest = frame.after(done);
        if let (true, Payload::Piped { pipe, left }) = (rest.head.is_empty(), &rest.payload) {
            let Some(socket) = socket else {
                return Now::Failed;
            };
            match socket.try_splice(pipe, *left) {
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Now::Partly(done),
                Err(_) => return Now::Failed,
            }
            continue;
        }
        let bufs = [
            IoSlice::new(&rest.head),
            IoSlice::new(rest.payload.in_memory()),
        ];
        match Pin::new(&mut *out).poll_write_vectored(&mut cx, &bufs) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Now::Failed,
            Poll::Ready(Ok(n)) => done += n,
            Poll::Pending => return Now::Partly(done),
        }
    }
    match Pin::new(&mut *out).poll_flush(&mut cx) {
        Poll::Ready(Ok(())) => Now::Written { flushed: true },
        Poll::Ready(Err(_)) => Now::Failed,
        Poll::Pending => Now::Written { flushed: false },
    }
}

/// The flusher: writes what is queued, a batch at a time, until the writer
/// is dropped and nothing is left, or the stream fails.
async fn flush(shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(BATCH);
    loop {
        let step = {
            let mut state = shared.lock();
            if state.failed {
                return;
            }
            if !state.queue.is_empty() || state.unflushed {
                // Only the flusher takes the stream out, and it puts it back.
                let Some(out) = state.out.take() else { return };
                state.unflushed = false;
                let mut batch = Vec::new();
                let mut size = 0;
                while size < BATCH
                    && let Some(frame) = state.queue.pop_front()
                {
                    size += frame.len();
                    batch.push(frame);
                }
                Step::Write(out, batch)
            } else if state.ending {
                Step::End(state.out.take())
            } else {
                Step::Wait
            }
        };
        let (mut out, batch) = match step {
            Step::Write(out, batch) => (out, batch),
            Step::End(out) => {
                if let Some(mut out) = out {
                    let _ = out.shutdown().await;
                }
                return;
            }
            Step::Wait => {
                shared.work.notified().await;
                continue;
            }
        };
        let written = write_batch(&mut out, shared.socket.as_ref(), &batch, &mut buf).await;
        let flushed = match written {
            Ok(()) => out.flush().await,
            Err(e) => Err(e),
        };
        let mut state = shared.lock();
        state.out = Some(out);
        shared.release(&mut state, batch.len());
        if flushed.is_err() {
            shared.fail(&mut state);
            return;
        }
    }
}

/// What the flusher does next.
enum Step {
    Write(Out, Vec<Frame>),
    /// Nothing left and the writer gone: shut the stream down.
    End(Option<Out>),
    Wait,
}

/// Writes `frames` in order: small ones gathered in `buf`, large payloads
/// from their own buffers, piped ones spliced into `socket`.
async fn write_batch(
    out: &mut Out,
    socket: Option<&SpliceTarget>,
    frames: &[Frame],
    buf: &mut BytesMut,
) -> std::io::Result<()> {
    buf.clear();
    for frame in frames {
        buf.extend_from_slice(&frame.head);
        match &frame.payload {
            Payload::Bytes(payload) if payload.len() >= COPY_LIMIT => {
                write_both(out, buf, payload).await?;
                buf.clear();
            }
            Payload::Bytes(payload) => buf.extend_from_slice(payload),
            Payload::Piped { pipe, left } => {
                out.write_all(buf).await?;
                out.flush().await?;
                buf.clear();
                // Frames with piped data are only queued with a socket.
                let socket = socket.ok_or(std::io::ErrorKind::Unsupported)?;
                let mut left = *left;
                while left > 0 {
                    left -= socket.splice(pipe, left).await?;
                }
            }
            Payload::None => {}
        }
    }
    out.write_all(buf).await
}

/// Writes `head` then `payload` with as few system calls as the kernel allows.
async fn write_both(out: &mut Out, head: &[u8], payload: &[u8]) -> std::io::Result<()> {
    let (mut head, mut payload) = (head, payload);
    while !head.is_empty() {
        let n = out
            .write_vectored(&[IoSlice::new(head), IoSlice::new(payload)])
            .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_head = n.min(head.len());
        head = &head[from_head..];
        payload = &payload[n - from_head..];
    }
    out.write_all(payload).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use tokio::io::AsyncReadExt;

    fn frame(i: u8, payload: Option<Bytes>) -> Frame {
        Frame {
            head: Bytes::from(vec![i; 7]),
            payload: payload.into(),
        }
    }

    #[tokio::test]
    async fn frames_arrive_whole_and_in_order() {
        let (a, mut b) = tokio::io::duplex(4096);
        let (writer, flusher) = Writer::spawn(a, 8);
        let big = Bytes::from(vec![9u8; 100_000]);
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            b.read_to_end(&mut got).await.map(|_| got)
        });
        let mut want = Vec::new();
        for i in 0..50u8 {
            let payload = match i % 3 {
                0 => None,
                1 => Some(Bytes::from(vec![i; 10])),
                _ => Some(big.clone()),
            };
            let f = frame(i, payload);
            want.extend_from_slice(&f.head);
            want.extend_from_slice(f.payload.in_memory());
            writer.room().await.send(f);
        }
        drop(writer);
        flusher.await.unwrap();
        assert_eq!(reading.await.unwrap().unwrap(), want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn piped_frames_are_spliced_whole_and_in_order() {
        use std::os::fd::AsFd;
        let path = std::env::temp_dir().join(format!("ninep-writer-{}", std::process::id()));
        let file_data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &file_data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dialled = tokio::net::TcpStream::connect(listener.local_addr().unwrap());
        let (dialled, accepted) = tokio::join!(dialled, listener.accept());
        let (ours, mut theirs) = (dialled.unwrap(), accepted.unwrap().0);
        let target = crate::Stream::splice_target(&ours);
        assert!(target.is_some(), "a TCP stream can be spliced into");
        let (writer, flusher) = Writer::spawn_on_socket(ours, target, 8);
        // A late reader: the socket fills first.
        let reading = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).await.map(|_| got)
        });

        // Piped frames among others, more than the socket holds, some sent
        // at once and some queued.
        let mut want = Vec::new();
        for i in 0..24u8 {
            let offset = usize::from(i) * 100_003;
            let f = match i % 3 {
                0 => {
                    let piped =
                        PipedFile::from_file(file.as_fd(), offset as u64, 256 * 1024).unwrap();
                    want.extend_from_slice(&[i; 7]);
                    want.extend_from_slice(&file_data[offset..offset + piped.len()]);
                    Frame {
                        head: Bytes::from(vec![i; 7]),
                        payload: piped.into(),
                    }
                }
                1 => frame(i, Some(Bytes::from(vec![i; 10]))),
                _ => frame(i, Some(Bytes::from(vec![i; 40_000]))),
            };
            if !matches!(f.payload, Payload::Piped { .. }) {
                want.extend_from_slice(&f.head);
                want.extend_from_slice(f.payload.in_memory());
            }
            if i % 2 == 0 {
                writer.room().await.send(f);
            } else {
                writer.room().await.queue(f);
            }
        }
        drop(writer);
        flusher.await.unwrap();
        let got = reading.await.unwrap().unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the stream differs");
    }

    #[tokio::test]
    async fn a_peer_that_does_not_read_holds_up_senders_at_the_limit() {
        // Room for one frame in the pipe; nothing reads the other end.
        let (a, b) = tokio::io::duplex(16);
        let (writer, _flusher) = Writer::spawn(a, 3);
        let mut sent = 0;
        // A bounded number of tries: the fourth place never comes.
        while sent < 100 {
            let Some(room) = writer.room().now_or_never() else {
                break;
            };
            room.send(frame(sent as u8, Some(Bytes::from(vec![0u8; 100]))));
            sent += 1;
            tokio::task::yield_now().await;
        }
        // Three held, and what the pipe took (the first frame went at once).
        assert_eq!(writer.lock().held, 3);
        assert!(sent <= 4, "{sent} frames accepted");
        // Once the peer goes, the stream fails and senders are let on.
        drop(b);
        let room = tokio::time::timeout(std::time::Duration::from_secs(10), writer.room()).await;
        room.expect("room once the peer is gone")
            .send(frame(0, None));
        assert!(writer.lock().failed);
    }

    #[tokio::test]
    async fn unused_room_is_given_back() {
        let (a, _b) = tokio::io::duplex(16);
        let (writer, _flusher) = Writer::spawn(a, 1);
        drop(writer.room().await);
        assert_eq!(writer.lock().held, 0);
        assert!(writer.room().now_or_never().is_some());
    }
}
