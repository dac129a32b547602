//! The mux layer of ninep: a 9P server whose files come from other 9P
//! servers, arranged with Plan 9's mount and bind into name spaces.
//!
//! [`Mux`] implements the server framework's [`Filesystem`] over client
//! fids, so the framework does the protocol: each client's fids and tags
//! are its own, a flushed request's handler is dropped (and with it the
//! upstream request, which the client flushes), and a client that hangs up
//! has its fids clunked, which clunks the upstream fids behind them. Every
//! mounted server is one connection ([`upstream`]) shared by all clients.
//!
//! Each attach gets its own name space, a copy of the mux's base one
//! ([`namespace`]), through which its fids walk ([`node`]); its control
//! file `#ns`, walked to from its root, reads back the name space in
//! namespace-file syntax ([`nsfile`]) and takes new lines.
//!
//! [`Filesystem`]: ninep_server::Filesystem

#![warn(clippy::unwrap_used)]

mod attr;
mod fs;
mod namespace;
mod node;
pub mod nsfile;
mod upstream;

pub use fs::{Config, Mux};
pub use node::Node;
