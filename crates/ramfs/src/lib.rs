//! File servers held in memory, built on the server framework: a tree of
//! files (`ramfs`) and, on it, the v9fs paper's task bag (`taskbag`).

#![warn(clippy::unwrap_used)]

mod nodes;
pub mod ramfs;
mod space;
pub mod taskbag;

pub use ramfs::RamFs;
pub use space::{Limits, MAX_FILE_SIZE};
pub use taskbag::Taskbag;
