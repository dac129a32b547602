//! File servers built on the server framework: an in-memory tree (`ramfs`)
//! and the v9fs paper's task bag (`taskbag`).

#![warn(clippy::unwrap_used)]

pub mod ramfs;
pub mod taskbag;

pub use ramfs::RamFs;
pub use taskbag::Taskbag;
