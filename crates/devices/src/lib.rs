//! Plan 9's devices served over 9P, built on the stream queues of
//! [`ninep_server::queue`]: a pipe ([`pipe::PipeFs`], Plan 9's pipe(3)),
//! the host's network as Plan 9's `/net` ([`net::NetFs`], ip(3) and cs),
//! and [`dial`], which makes a call through any such `/net` a 9P server
//! offers, as Plan 9 does through an imported gateway's.

#![warn(clippy::unwrap_used)]

pub mod dial;
mod files;
pub mod net;
pub mod pipe;
