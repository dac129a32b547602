//! Plan 9 stream queues (Presotto, "The Streams of Plan 9"): the plumbing
//! of devices whose files are `ctl` and `data` — pipes, network
//! conversations — for any synthetic server to use.
//!
//! A [`Queue`] holds [`Block`]s up to a high water mark: a writer waits when
//! the queue is past it and is woken when a reader drains it below half.
//! A [`Stream`] joins a user end (a file server's `data` and `ctl`) to a
//! device end through a stack of processing [`Module`]s; writes are atomic
//! and delimited, a read returns at most one delimited block.
//! [`Conversations`] numbers the streams of a multiplexed device, as its
//! `clone` file hands them out.

mod block;
mod conv;
mod fcall;
mod module;
mod stream;

pub use block::{Block, Limits, Queue};
pub use conv::Conversations;
pub use fcall::Fcall;
pub use module::{Module, Modules};
pub use stream::{Stream, unknown_ctl};

use ninep_wire::Errno;

use crate::error::Error;

/// The error of a write to a stream that was hung up.
pub fn hungup() -> Error {
    Error::with_errno(Errno::EPIPE, "i/o on hungup channel")
}
