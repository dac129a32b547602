//! Response bodies: whole ones, and file data piped from a transfer with
//! backpressure.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

/// Every response's body.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

/// A body of `data`, sent whole.
pub fn full(data: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(data.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body of nothing.
pub fn empty() -> Body {
    full(Bytes::new())
}

/// Pieces of file data on their way from the task reading them to the
/// connection sending them. The channel holds a few pieces; once it is full
/// the reading task waits, and so asks the server for nothing more than
/// the transfer's window, however slow the HTTP client.
pub struct Piped {
    pieces: mpsc::Receiver<io::Result<Bytes>>,
}

/// Pieces a [`Piped`] body holds at most, besides the transfer's window.
pub const PIPED_PIECES: usize = 4;

impl Piped {
    /// A body fed by the sender returned with it.
    pub fn channel() -> (mpsc::Sender<io::Result<Bytes>>, Body) {
        let (tx, pieces) = mpsc::channel(PIPED_PIECES);
        (tx, Piped { pieces }.boxed_unsync())
    }
}

impl http_body::Body for Piped {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.pieces
            .poll_recv(cx)
            .map(|piece| piece.map(|r| r.map(Frame::data)))
    }
}
