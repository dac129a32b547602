//! Benchmarks of ninep against a live 9P server, as a library so that the
//! `ninep bench` command stays a thin layer over it.
//!
//! [`rtt`] measures the rate and latency of null operations (one small
//! request, a tiny reply, no data touched) over one and many connections,
//! next to a raw TCP ping-pong of the same sizes ([`pingpong`]) that shows the
//! physical limit of the machine. They and [`mux`] share a latency histogram
//! (`hist`).
//!
//! [`mux`] reproduces the multiplexer's scaling figures, with plots drawn
//! by [`plot`], and measures its hop beside [`forward`]'s, the least a hop
//! can cost.
//!
//! [`io`] measures bulk transfers through a file server (a whole file read or
//! written sequentially, a directory listed), one request at a time, and
//! [`postmark`] a PostMark-style small-file workload; a seeded generator
//! (`rng`) makes their workloads repeatable. [`remote`] measures connection
//! set-up, reads by file size and contending readers, each beside its TCP
//! or local baseline.

#![warn(clippy::unwrap_used)]

pub mod forward;
mod hist;
pub mod io;
pub mod mux;
pub mod pingpong;
pub mod plot;
pub mod postmark;
mod raw;
pub mod remote;
mod rng;
pub mod rtt;
