//! The process a kernel request is made for, and whether it is being
//! killed. fuser does not pass the kernel's FUSE_INTERRUPT on, and once a
//! request has reached the mount the kernel waits for its answer even for
//! a process killed meanwhile: a read of a pipe that never gets data, a
//! lock that is never released or a call waiting for the server's return
//! would hold the process (Ctrl-C, even SIGKILL, would not end it). So a
//! request that waits has its caller checked now and then, and is given up
//! on (its 9P request flushed) once the caller is being killed.

use std::time::Duration;

/// How long a request waits before its caller is first checked, and then
/// between checks.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// SIGKILL's bit in a mask of pending signals (signal 9, bit 8).
const SIGKILL_BIT: u64 = 1 << 8;

/// Who waits for a request's answer.
#[derive(Clone, Copy)]
pub(crate) enum Caller {
    /// The thread, by id, that made the request.
    Thread(u32),
    /// Nobody waits for it to end (the kernel's release after the last
    /// close), or nobody this process can see: it runs its course.
    Nobody,
}

impl Caller {
    /// The caller of `req`, if this process can see it (the kernel gives 0
    /// for a caller in a process-id name space of its own).
    pub(crate) fn of(req: &fuser::Request) -> Caller {
        match req.pid() {
            0 => Caller::Nobody,
            tid => Caller::Thread(tid),
        }
    }

    /// Resolves once the caller is being killed; never, for nobody.
    pub(crate) async fn killed(self) {
        let Caller::Thread(tid) = self else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(CHECK_EVERY).await;
            if being_killed(tid) {
                return;
            }
        }
    }
}

/// Whether thread `tid` has SIGKILL pending. The kernel marks every thread
/// of a process it is killing so, for SIGKILL and for any signal whose
/// default action ends the process (Ctrl-C's SIGINT, SIGTERM) that the
/// process does not handle. A status that cannot be read says nothing: a
/// thread waiting for an answer cannot have gone.
fn being_killed(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return false;
    };
    status
        .lines()
        .filter_map(|line| {
            line.strip_prefix("SigPnd:")
                .or_else(|| line.strip_prefix("ShdPnd:"))
        })
        .any(|mask| u64::from_str_radix(mask.trim(), 16).is_ok_and(|m| m & SIGKILL_BIT != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process nobody is killing is not taken for one being killed (the
    /// other way is tested through a mount, in tests/mount.rs).
    #[test]
    fn a_live_thread_is_not_being_killed() {
        assert!(!being_killed(std::process::id()));
    }
}
