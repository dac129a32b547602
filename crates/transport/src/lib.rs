//! Carrying 9P over byte streams: the framing codec that cuts a stream into
//! whole messages, for tokio. It sits between the wire layer (which never does
//! I/O) and the server and client (which own sockets).

mod framing;

pub use framing::{FrameCodec, FrameError};
