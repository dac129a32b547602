//! The client layer of ninep: an async 9P client.
//!
//! One [`Client`] is one connection, on which any number of requests may be
//! in flight at once; replies are matched to requests by tag. Fids are
//! handles ([`Fid`]) that clunk themselves when dropped. Dropping a request
//! before its reply comes sends Tflush, and the tag is reused only after the
//! Rflush.
//!
//! ```no_run
//! # async fn run() -> Result<(), ninep_client::Error> {
//! let fsys = ninep_client::Client::connect("tcp!localhost!564").await?.attach("glenda", "").await?;
//! let motd = fsys.read_to_string("lib/motd").await?;
//! # Ok(()) }
//! ```
//!
//! Cancel safety: dropping any future of this crate is safe; the request it
//! sent is flushed, and a fid it was creating is clunked if the server made it.

#![warn(clippy::unwrap_used)]

mod ahead;
mod attrs;
mod auth;
mod behind;
mod conn;
mod error;
mod file;
mod fsys;
mod info;
mod names;
mod recover;
mod reply;
mod stream;
mod transfer;
mod version;
mod window;
mod xattr;

pub use ahead::{OpenFile, ReadAhead, ReadAheadBudget, may_be_read_early};
pub use attrs::{FsStats, SetAttr, SetTime};
pub use auth::{AuthFid, BoxFuture, Munge, Prover};
pub use behind::WriteBehind;
pub use conn::{Client, Options};
pub use error::Error;
pub use file::File;
pub use fsys::{Fid, Fsys};
pub use info::{DirEntry, FileInfo};
pub use names::Node;
pub use ninep_transport::{Dialer, TlsClient};
pub use recover::Recovery;
pub use transfer::{Mode, RangeRead, RangeWrite, Transfer};
