//! How a fid ends. Tclunk and Tremove end the fid they name, Tversion and
//! a hang-up every fid left; each end waits for the requests still using
//! the fid, lets go of its exclusive-use claim, removes the file if asked
//! (Tremove, ORCLOSE), sets an extended attribute written through it, and
//! tells the file server.
//!
//! An end runs to its end: if the request that started it is flushed or
//! its session reset, it goes on as a task of its own, and a reset waits
//! for it. Otherwise a flushed Tclunk would leave its file claimed and
//! unclunked for good.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ninep_wire::Dialect;
use tokio_util::task::TaskTracker;

use crate::dispatch::unknown_fid;
use crate::error::Result;
use crate::fids::{FidState, Slot};
use crate::fs::{Cx, Filesystem};
use crate::server::Shared;

/// What ends a fid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Clunk,
    /// Tremove: the file goes too, and the answer is whether it did.
    Remove,
}

/// Ends the fid in `slot`, which has left the table. `tasks` are the
/// connection's, which a reset waits for.
pub(crate) fn end<F: Filesystem>(
    tasks: &TaskTracker,
    shared: &Arc<Shared<F>>,
    slot: Arc<Slot<F::File>>,
    dialect: Dialect,
    how: Ending,
) -> RunToEnd<Result<()>> {
    RunToEnd::new(tasks, end_fid(shared.clone(), slot, dialect, how))
}

async fn end_fid<F: Filesystem>(
    shared: Arc<Shared<F>>,
    slot: Arc<Slot<F::File>>,
    dialect: Dialect,
    how: Ending,
) -> Result<()> {
    // Requests still using the fid end first.
    let state = slot.write().await.take().ok_or_else(unknown_fid)?;
    let FidState {
        file,
        user,
        rclose,
        exclusive,
        xattr,
        ..
    } = state;
    // Others may open the file from here on, even while it is removed.
    drop(exclusive);
    let fs = &shared.fs;
    let cx = Cx {
        user,
        dialect,
        streaming: false,
    };
    let result = match how {
        Ending::Remove => fs.remove(&cx, &file).await,
        Ending::Clunk => {
            if rclose {
                let _ = fs.remove(&cx, &file).await;
            }
            match xattr {
                Some(xattr) => xattr.set_at_clunk(fs, &cx, &file).await,
                None => Ok(()),
            }
        }
    };
    let clunked = fs.clunk(&cx, file).await;
    match how {
        // The fid is clunked whether or not the remove succeeded.
        Ending::Remove => result,
        Ending::Clunk => result.and(clunked),
    }
}

/// A future that runs to its end even if the one awaiting it is dropped:
/// dropped unfinished, it goes on as a task of its own. It is counted by a
/// [`TaskTracker`] from start to end, wherever it runs.
pub(crate) struct RunToEnd<T: 'static> {
    rest: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T> RunToEnd<T> {
    fn new(tasks: &TaskTracker, future: impl Future<Output = T> + Send + 'static) -> Self {
        RunToEnd {
            rest: Some(Box::pin(tasks.track_future(future))),
        }
    }
}

impl<T> Future for RunToEnd<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(rest) = self.rest.as_mut() else {
            panic!("RunToEnd polled after it ended");
        };
        let out = std::task::ready!(rest.as_mut().poll(cx));
        self.rest = None;
        Poll::Ready(out)
    }
}

impl<T: 'static> Drop for RunToEnd<T> {
    fn drop(&mut self) {
        // Without a runtime (it is shutting down) the rest is dropped; the
        // exclusive-use claim lets go all the same.
        if let Some(rest) = self.rest.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                rest.await;
            });
        }
    }
}
