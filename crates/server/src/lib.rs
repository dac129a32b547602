//! The server layer of ninep: an async 9P server framework.
//!
//! The framework owns the protocol, as Plan 9's lib9p does: version
//! negotiation in all three dialects, msize and iounit, the fid table, tags,
//! open modes, directory offsets and flush. A file server supplies only
//! semantics, through the [`Filesystem`] trait (one async method per
//! operation, each with a canonical refusal) or, for a small synthetic tree,
//! through the ready-made [`tree`].
//!
//! Who may attach is the server's [`Policy`] ([`auth`]): by default anyone,
//! as whoever they name; or only users proven by a Tauth scheme such as
//! MUNGE, or by what the connection itself proves.
//!
//! The stream extension (docs/streams.md) is offered to clients that ask
//! for it at Tversion, within [`StreamLimits`]; so is the resume extension
//! (docs/resume.md), which keeps a session whose connection was lost for a
//! new connection to take over, within [`ResumeLimits`].
//!
//! [`queue`] has Plan 9's stream queues, for devices served as files:
//! pipes, network conversations.
//!
//! Requests on one connection run concurrently and their replies go out as
//! they finish; a flushed request's future is dropped and its reply never
//! sent. See [`fs::Filesystem`] for what that means for cancel safety.

#![warn(clippy::unwrap_used)]

pub mod auth;
mod clunk;
mod create;
mod dirread;
mod dispatch;
mod error;
mod fids;
mod server;
mod session;
mod stat;
mod stream;
mod translate;
mod xattr;

pub mod fs;
pub mod queue;
pub mod tree;

pub use auth::Policy;
pub use error::{Error, Result};
pub use fs::{
    Attr, Cx, DirEntry, Filesystem, Opened, PipeLeave, PipeShare, SetAttr, SetTime, Time, User,
};
pub use ninep_transport::Peer;
pub use server::{Limits, Server, Spawned, StreamLimits};
pub use session::MIN_MSIZE;
pub use session::resume::{ResumableSessions, ResumeLimits};
