//! The replies of a stream (docs/streams.md), from the connection's reader
//! that takes them in to the transfer that started the stream.
//!
//! What the server sends on a stream's tag waits in the stream's [`Inbox`]
//! until the transfer takes it, and what waits is bounded by what the
//! client allowed, whatever the server sends:
//!
//! - A read stream's server may send only the credit granted: the Tsread's,
//!   plus every Tscredit's. The reader checks each Rsread as it comes; one
//!   past the credit ends the stream with a protocol error, and the stream
//!   is flushed while the connection serves on (as a server ends a write
//!   stream whose Tsdata go past its credit). So the data held never
//!   exceeds the credit granted less what the transfer took. Nor does the
//!   number of pieces held grow with the number of Rsread: a piece is never
//!   empty (an empty Rsread ends the stream), and short ones are copied
//!   together as they come.
//! - A write stream's Rscredit are added up as they come.
//!
//! Lock order: the connection's state, then an inbox. A transfer takes an
//! inbox's lock alone.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ninep_wire::*;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::conn::Inner;
use crate::error::Error;
use crate::reply::{StreamTag, remote_error};

/// True for the replies that end a stream: its end, or an error. The
/// stream's tag is free once one has come.
pub(crate) fn ends_stream(msg: &Msg) -> bool {
    match msg {
        Msg::Rsread(r) => r.data.is_empty(),
        Msg::Rscredit(_) => false,
        _ => true,
    }
}

/// Where the replies of one stream wait for its transfer.
pub(crate) struct Inbox {
    state: Mutex<State>,
    /// Wakes the transfer (the only one to wait) when a reply has come.
    arrived: Notify,
}

struct State {
    flow: Flow,
    /// How the stream ended, once it has: the count of its Rswrite (0 for
    /// the empty Rsread that ends a read stream), or the error that ended
    /// it. Taking it leaves [`Error::Closed`].
    end: Option<Result<u64, Error>>,
}

enum Flow {
    Read(ReadQueue),
    /// Credit granted by Rscredit and not yet spent.
    Write(u64),
}

impl Flow {
    fn kind(&self) -> &'static str {
        match self {
            Flow::Read(_) => "read",
            Flow::Write(_) => "write",
        }
    }
}

impl Inbox {
    fn new(flow: Flow) -> Arc<Inbox> {
        Arc::new(Inbox {
            state: Mutex::new(State { flow, end: None }),
            arrived: Notify::new(),
        })
    }

    /// Takes in a reply on the stream's tag. False if it broke the rules of
    /// the stream: the stream has then ended with a protocol error, and the
    /// server must be made to stop it too.
    pub(crate) fn deliver(&self, msg: Msg) -> bool {
        let mut state = self.state.lock();
        if state.end.is_some() {
            // Its tag is free or being flushed: only a server that breaks
            // the rules sends more.
            return false;
        }
        let end = match (&mut state.flow, msg) {
            (Flow::Read(queue), Msg::Rsread(r)) if !r.data.is_empty() => match queue.push(r.data) {
                Ok(()) => None,
                Err(breach) => Some(Err(breach)),
            },
            (Flow::Read(_), Msg::Rsread(_)) => Some(Ok(0)),
            (Flow::Write(credit), Msg::Rscredit(r)) => {
                *credit = credit.saturating_add(r.credit.into());
                None
            }
            (Flow::Write(_), Msg::Rswrite(r)) => Some(Ok(r.count)),
            (flow, msg) => Some(match remote_error(msg) {
                Err(e) => Err(e),
                Ok(m) => Err(Error::protocol(format!(
                    "{} in a {} stream",
                    m.name(),
                    flow.kind()
                ))),
            }),
        };
        // A protocol error here is the server's breach of the stream.
        let within_rules = !matches!(end, Some(Err(Error::Protocol(_))));
        if end.is_some() {
            state.end = end;
        }
        drop(state);
        self.arrived.notify_one();
        within_rules
    }

    /// The connection is gone: the stream ends, if it had not.
    pub(crate) fn close(&self) {
        self.end_with(Error::Closed);
    }

    /// Ends the stream with `error`, unless it has ended already.
    pub(crate) fn end_with(&self, error: Error) {
        self.state.lock().end.get_or_insert(Err(error));
        self.arrived.notify_one();
    }

    /// Waits until `take` finds what it wants.
    async fn wait<T>(&self, mut take: impl FnMut(&mut State) -> Option<T>) -> T {
        loop {
            let taken = take(&mut self.state.lock());
            if let Some(taken) = taken {
                return taken;
            }
            // A reply that came since the lock was let go left a permit,
            // so this returns at once.
            self.arrived.notified().await;
        }
    }

    /// The next piece of a read stream if one is here: `Ok(None)` at its
    /// end. The pieces held go before an error that came after them.
    fn try_piece(&self) -> Option<Result<Option<Bytes>, Error>> {
        take_piece(&mut self.state.lock())
    }

    async fn piece(&self) -> Result<Option<Bytes>, Error> {
        self.wait(take_piece).await
    }

    /// Counts `credit` more bytes of Rsread as granted.
    fn grant(&self, credit: u32) {
        if let Flow::Read(queue) = &mut self.state.lock().flow {
            queue.grant(credit.into());
        }
    }

    /// Waits for write credit and spends up to `want` bytes of it. The
    /// stream's end, come before the transfer ended it, is an error.
    async fn spend(&self, want: u64) -> Result<u64, Error> {
        self.wait(|state| {
            if let Some(end) = take_end(state) {
                return Some(
                    end.and_then(|_| Err(Error::protocol("Rswrite before the write stream ended"))),
                );
            }
            match &mut state.flow {
                Flow::Write(credit) if *credit > 0 => {
                    let spent = want.min(*credit);
                    *credit -= spent;
                    Some(Ok(spent))
                }
                _ => None,
            }
        })
        .await
    }

    /// Waits for the end of the stream.
    async fn end(&self) -> Result<u64, Error> {
        self.wait(take_end).await
    }
}

/// The stream's end, if it has come (see [`State::end`]).
fn take_end(state: &mut State) -> Option<Result<u64, Error>> {
    let end = state.end.as_mut()?;
    Some(std::mem::replace(end, Err(Error::Closed)))
}

/// The next piece of a read stream, or its end, if either has come.
fn take_piece(state: &mut State) -> Option<Result<Option<Bytes>, Error>> {
    if let Flow::Read(queue) = &mut state.flow
        && let Some(piece) = queue.take()
    {
        return Some(Ok(Some(piece)));
    }
    take_end(state).map(|end| end.map(|_| None))
}

/// A read stream started: its replies, and its tag to grant credit on.
/// Dropping it before the stream's end flushes the stream.
pub(crate) struct ReadReplies {
    inbox: Arc<Inbox>,
    tag: StreamTag,
}

impl ReadReplies {
    /// Sends `msg` on `inner`, and holds what comes back to the credit
    /// `msg` grants and what [`ReadReplies::grant`] adds.
    pub fn start(inner: &Arc<Inner>, msg: Tsread) -> Result<ReadReplies, Error> {
        // Half the largest Rsread: a piece this long is held as it came,
        // a shorter one is copied. A piece shares the buffer its frame was
        // read into, perhaps with much larger frames, so holding a short
        // one as it came could hold far more memory than its length.
        let whole = inner.msize().saturating_sub(IOHDRSZ) / 2;
        let queue = ReadQueue::new(msg.credit.into(), whole as usize);
        let inbox = Inbox::new(Flow::Read(queue));
        let tag = inner.start_stream(msg.into(), inbox.clone())?;
        Ok(ReadReplies { inbox, tag })
    }

    /// The next piece if one has come; `Ok(None)` at the end of the stream.
    pub fn try_next(&self) -> Option<Result<Option<Bytes>, Error>> {
        self.inbox.try_piece()
    }

    /// The next piece; `Ok(None)` at the end of the stream.
    pub async fn next(&self) -> Result<Option<Bytes>, Error> {
        self.inbox.piece().await
    }

    /// Grants the server `credit` more bytes. It counts before the Tscredit
    /// goes, so that no piece it pays for can come before it is counted.
    pub fn grant(&self, credit: u32) -> Result<(), Error> {
        self.inbox.grant(credit);
        self.tag.send(Tscredit { credit }.into())
    }
}

/// A write stream started: its tag to send data on, and the credit and
/// end that come back. Dropping it before the stream's end flushes it.
pub(crate) struct WriteReplies {
    inbox: Arc<Inbox>,
    tag: StreamTag,
}

impl WriteReplies {
    /// Sends `msg` on `inner`.
    pub fn start(inner: &Arc<Inner>, msg: Tswrite) -> Result<WriteReplies, Error> {
        let inbox = Inbox::new(Flow::Write(0));
        let tag = inner.start_stream(msg.into(), inbox.clone())?;
        Ok(WriteReplies { inbox, tag })
    }

    /// Sends `data` in Tsdata of at most `piece` bytes, each when the
    /// server's credit allows. An error that ended the stream ends this.
    pub async fn write(&self, mut data: Bytes, piece: usize) -> Result<(), Error> {
        while !data.is_empty() {
            let n = self.inbox.spend(data.len().min(piece) as u64).await?;
            let data = data.split_to(n as usize);
            self.tag.send(Tsdata { data }.into())?;
        }
        Ok(())
    }

    /// Ends the stream and waits for the count of bytes written.
    pub async fn finish(self) -> Result<u64, Error> {
        self.tag.send(Tsdata { data: Bytes::new() }.into())?;
        self.inbox.end().await
    }
}

/// The data of a read stream taken in and not yet taken out, and the
/// credit that bounds it.
#[derive(Debug)]
struct ReadQueue {
    /// Bytes of Rsread granted: the Tsread's credit and every Tscredit's.
    granted: u64,
    /// Bytes of Rsread received.
    received: u64,
    /// Pieces held, in order: long ones as they came, and short ones
    /// copied together.
    pieces: VecDeque<Bytes>,
    /// Short pieces received since the last of `pieces`, copied together.
    gathering: BytesMut,
    /// Pieces at least this long are held as they came; a run of short
    /// ones is closed once it is this long.
    whole: usize,
}

impl ReadQueue {
    fn new(credit: u64, whole: usize) -> ReadQueue {
        ReadQueue {
            granted: credit,
            received: 0,
            pieces: VecDeque::new(),
            gathering: BytesMut::new(),
            whole: whole.max(1),
        }
    }

    fn grant(&mut self, credit: u64) {
        self.granted += credit;
    }

    /// Holds `data`, unless it goes past the credit granted. Every piece
    /// held is at least `whole` long, but for the run being gathered and
    /// the runs a long piece cut short (no more of those than long ones):
    /// so the count of pieces is bounded by the credit too.
    fn push(&mut self, data: Bytes) -> Result<(), Error> {
        let len = data.len() as u64;
        let left = self.granted - self.received;
        if len > left {
            return Err(Error::protocol(format!(
                "read stream past its credit: an Rsread of {len} bytes with {left} of \
                 the {} granted left",
                self.granted
            )));
        }
        self.received += len;
        if data.len() >= self.whole {
            self.close_run();
            self.pieces.push_back(data);
        } else {
            if self.gathering.is_empty() {
                self.gathering.reserve(self.whole);
            }
            self.gathering.extend_from_slice(&data);
            if self.gathering.len() >= self.whole {
                self.close_run();
            }
        }
        Ok(())
    }

    /// Moves the run of short pieces being gathered, if any, to the end of
    /// the pieces held.
    fn close_run(&mut self) {
        if !self.gathering.is_empty() {
            self.pieces.push_back(self.gathering.split().freeze());
        }
    }

    /// The next piece held, if any.
    fn take(&mut self) -> Option<Bytes> {
        if self.pieces.is_empty() {
            self.close_run();
        }
        self.pieces.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    fn take_all(queue: &mut ReadQueue) -> Vec<Bytes> {
        std::iter::from_fn(|| queue.take()).collect()
    }

    #[test]
    fn a_piece_past_the_credit_is_refused_and_not_held() {
        let mut queue = ReadQueue::new(100, 10);
        queue.push(bytes(60, 1)).unwrap();
        queue.push(bytes(40, 2)).unwrap();
        let err = queue.push(bytes(1, 3)).unwrap_err();
        assert!(err.to_string().contains("credit"), "{err}");
        assert_eq!(
            take_all(&mut queue).concat(),
            [bytes(60, 1), bytes(40, 2)].concat()
        );
        // Credit granted again makes room again.
        queue.grant(50);
        queue.push(bytes(50, 4)).unwrap();
        assert!(queue.push(bytes(1, 5)).is_err());
    }

    #[test]
    fn short_pieces_are_copied_together_and_long_ones_held_as_they_came() {
        let mut queue = ReadQueue::new(1000, 10);
        let long = bytes(12, 9);
        for piece in [&b"abc"[..], b"def", b"gh"] {
            queue.push(Bytes::copy_from_slice(piece)).unwrap();
        }
        queue.push(long.clone()).unwrap();
        queue.push(Bytes::from_static(b"ij")).unwrap();
        let pieces = take_all(&mut queue);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[0], &b"abcdefgh"[..]);
        assert_eq!(pieces[1].as_ptr(), long.as_ptr(), "a long piece was copied");
        assert_eq!(pieces[2], &b"ij"[..]);
    }

    #[test]
    fn one_byte_pieces_are_held_as_few() {
        let (credit, whole) = (1 << 20, 1000);
        let mut queue = ReadQueue::new(credit as u64, whole);
        for i in 0..credit {
            queue.push(Bytes::copy_from_slice(&[i as u8])).unwrap();
        }
        assert!(queue.pieces.len() <= credit / whole + 1);
        let data = take_all(&mut queue).concat();
        assert_eq!(data.len(), credit);
        assert!(data.iter().enumerate().all(|(i, &b)| b == i as u8));
    }

    #[tokio::test]
    async fn write_credit_is_added_up_as_it_comes() {
        let inbox = Inbox::new(Flow::Write(0));
        for _ in 0..100_000 {
            assert!(inbox.deliver(Rscredit { credit: 0 }.into()));
            assert!(inbox.deliver(Rscredit { credit: 3 }.into()));
        }
        assert_eq!(inbox.spend(u64::MAX).await.unwrap(), 300_000);
        assert!(inbox.deliver(Rscredit { credit: 7 }.into()));
        assert_eq!(inbox.spend(5).await.unwrap(), 5);
        assert_eq!(inbox.spend(5).await.unwrap(), 2);
    }

    #[tokio::test]
    async fn a_breach_ends_the_stream_after_the_pieces_held() {
        let inbox = Inbox::new(Flow::Read(ReadQueue::new(10, 4)));
        assert!(inbox.deliver(Rsread { data: bytes(8, 1) }.into()));
        assert!(!inbox.deliver(Rsread { data: bytes(8, 2) }.into()));
        assert_eq!(inbox.piece().await.unwrap(), Some(bytes(8, 1)));
        let err = inbox.piece().await.unwrap_err();
        assert!(err.to_string().contains("credit"), "{err}");
        // Credit on a read stream breaks it too.
        let inbox = Inbox::new(Flow::Read(ReadQueue::new(10, 4)));
        assert!(!inbox.deliver(Rscredit { credit: 1 }.into()));
        assert!(matches!(inbox.piece().await, Err(Error::Protocol(_))));
    }
}
