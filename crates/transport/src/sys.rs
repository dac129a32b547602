//! The system calls made here that rustix does not wrap: one socket option,
//! and cachestat. The project's only unsafe code.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Lets the kernel take about `bytes` of a TCP connection that its reader
/// has not read yet, without fixing the connection's receive buffer.
///
/// A connection starts with room for tcp_rmem's default (128 KiB), and
/// TCP's tuning grows it only as the reader keeps up, a round trip at a
/// time. A reply of a MiB (an Rread at the default msize) then crosses in
/// pieces, the sender waiting for room after each; on loopback that halves
/// a one-at-a-time read. SO_RCVBUF would make the room but fix the buffer
/// (at twice net.core.rmem_max at most, 416 KiB by default), which a long
/// link outgrows. Raising SO_RCVLOWAT raises the buffer to hold the mark
/// (the mark capped at half of tcp_rmem's maximum) and leaves it to TCP's
/// tuning from there; the mark then goes back to one byte.
pub(crate) fn make_receive_room(socket: impl AsFd, bytes: usize) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // The room only speeds bulk transfers: a stack that refuses it (not
    // Linux's) leaves the default.
    let _ = set_receive_low_water(socket.as_fd(), bytes);
    // This one must hold: a mark left high would keep every smaller message
    // from waking its reader, and the connection would hang.
    set_receive_low_water(socket.as_fd(), 1)
}

fn set_receive_low_water(socket: BorrowedFd<'_>, bytes: libc::c_int) -> io::Result<()> {
    // SAFETY: the descriptor is open for the call (it is borrowed), and the
    // value is a c_int that outlives the call, passed with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw const bytes).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// cachestat(2)'s number (Linux 6.5) in the syscall table most
/// architectures share; elsewhere (MIPS) the call fails, and nothing is
/// taken to be in memory.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// How many pages of `file` from byte `offset` for `len` bytes are in the
/// page cache (for tmpfs: in memory, not swapped out). Fails where the
/// kernel has no cachestat (before 6.5) or the file no page cache.
pub(crate) fn pages_cached(file: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<u64> {
    let range = CachestatRange { off: offset, len };
    let mut stat = Cachestat::default();
    // SAFETY: the descriptor is open for the call (it is borrowed); the
    // range and the result are live, properly laid out (repr(C), as the
    // kernel's struct cachestat_range and struct cachestat) and the result
    // is writable; flags must be 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &raw const range,
            &raw mut stat,
            0 as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(stat.nr_cache)
    } else {
        Err(io::Error::last_os_error())
    }
}
