//! Carrying 9P over byte streams, for tokio: Plan 9 dial strings, listening
//! and dialing (over TLS too), the reader that cuts a stream into whole
//! messages (with the codec that holds their size rules and encodes them),
//! and the writer that sends frames, at once or from a bounded queue.
//! It sits between the wire layer (which never does I/O) and the server and
//! client (which own connections).

#![warn(clippy::unwrap_used)]

mod dial;
mod exec;
mod framing;
mod reader;
mod splice;
mod sys;
mod tls;
mod writer;

pub use dial::{Addr, Conn, DEFAULT_PORT, Dialer, Established, Incoming, Listener, Peer, Stream};
pub use framing::{FrameCodec, FrameError};
pub use reader::FrameReader;
pub use splice::{PipedFile, SpliceTarget, in_memory, writes_in_memory};
pub use tls::{HANDSHAKE_TIMEOUT, TlsClient, TlsServer};
pub use writer::{Frame, Payload, Room, Writer};
