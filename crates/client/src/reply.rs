//! A request's side of the wait for its reply: the future of one reply, a
//! stream's hold on its tag, and the flush of either when it is dropped.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use ninep_wire::{Errno, Msg};
use tokio::sync::oneshot;

use crate::conn::Inner;
use crate::error::Error;

/// Flushes a request whose future was dropped before the reply came.
pub(crate) struct FlushOnDrop {
    pub inner: Arc<Inner>,
    pub tag: u16,
    pub request: u64,
    pub armed: bool,
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.inner.flush(self.tag, self.request);
        }
    }
}

/// The reply to a request already sent: a future of the reply, as the
/// request's reply type, with error replies as [`Error::Remote`].
pub(crate) struct Reply<T> {
    pub rx: oneshot::Receiver<Result<Msg, Error>>,
    /// Turns the reply message into what the caller awaits.
    pub accept: fn(Msg) -> Result<T, Error>,
    pub guard: FlushOnDrop,
}

impl<T> Future for Reply<T> {
    type Output = Result<T, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let reply = ready!(Pin::new(&mut self.rx).poll(cx)).map_err(|_| Error::Closed);
        self.guard.armed = false;
        Poll::Ready(remote_error(reply??).and_then(self.accept))
    }
}

/// A stream's hold on its tag (docs/streams.md), to send the stream more
/// (Tscredit, Tsdata) on it. Dropping it before the stream's last reply
/// flushes the stream; after, the flush finds nothing to do.
pub(crate) struct StreamTag {
    pub guard: FlushOnDrop,
}

impl StreamTag {
    /// Sends `msg` on the stream's tag, unless the stream is over.
    pub fn send(&self, msg: Msg) -> Result<(), Error> {
        let FlushOnDrop {
            inner,
            tag,
            request,
            ..
        } = &self.guard;
        inner.send_in_stream(*tag, *request, msg)
    }
}

/// An error reply as [`Error::Remote`]; any other reply as it is.
pub(crate) fn remote_error(reply: Msg) -> Result<Msg, Error> {
    match reply {
        Msg::Rerror(e) => Err(Error::Remote {
            errno: if e.errno != 0 {
                Errno(e.errno)
            } else {
                Errno::from_ename(&e.ename)
            },
            ename: e.ename,
        }),
        Msg::Rlerror(e) => Err(Error::Remote {
            errno: Errno(e.ecode),
            ename: Errno(e.ecode).ename().to_owned(),
        }),
        r => Ok(r),
    }
}
