//! A ramfs with faults and delays on demand, for the transfer tests: short
//! reads and writes, an error from some offset on, a delay per read or
//! write, and counts of what it was asked (bytes read, reads running at
//! once).

// Each including test uses only part of this.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use bytes::Bytes;
use ninep_ramfs::RamFs;
use ninep_ramfs::ramfs::RamFile;
use ninep_server::{Attr, Cx, Error, Filesystem, Opened, Result, User};
use ninep_wire::{Errno, Name, Qid};

/// What the faults are and what was seen; shared with the test.
#[derive(Debug, Default)]
pub struct Knobs {
    /// Reads return fewer bytes than asked (a varying amount).
    pub short_reads: AtomicBool,
    /// Writes take only half of what they are given.
    pub short_writes: AtomicBool,
    /// Reads at or past this offset fail with EIO; reads across it stop at it.
    pub fail_at: AtomicU64,
    /// Microseconds each read and write takes.
    pub delay_us: AtomicU64,
    pub bytes_read: AtomicU64,
    /// The first reads asked for (offset, count), up to [`READS_KEPT`].
    pub reads: std::sync::Mutex<Vec<(u64, u32)>>,
    running: AtomicU64,
    /// Most reads or writes running at once.
    pub most_at_once: AtomicU64,
}

impl Knobs {
    pub fn new() -> Arc<Knobs> {
        let knobs = Knobs::default();
        knobs.fail_at.store(u64::MAX, SeqCst);
        Arc::new(knobs)
    }
}

/// How many reads [`Knobs::reads`] keeps.
pub const READS_KEPT: usize = 8;

#[derive(Debug, Clone)]
pub struct Flaky {
    pub ram: Arc<RamFs>,
    pub knobs: Arc<Knobs>,
}

impl Flaky {
    pub fn new() -> Flaky {
        Flaky {
            ram: Arc::new(RamFs::new()),
            knobs: Knobs::new(),
        }
    }

    /// Counts one operation running until the guard drops, after the delay.
    async fn busy(&self) -> Running<'_> {
        let now = self.knobs.running.fetch_add(1, SeqCst) + 1;
        self.knobs.most_at_once.fetch_max(now, SeqCst);
        let guard = Running(&self.knobs);
        let delay = self.knobs.delay_us.load(SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_micros(delay)).await;
        }
        guard
    }
}

struct Running<'a>(&'a Knobs);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, SeqCst);
    }
}

impl Filesystem for Flaky {
    type File = RamFile;

    async fn attach(&self, user: &User) -> Result<(RamFile, Qid)> {
        self.ram.attach(user).await
    }

    async fn walk(&self, cx: &Cx, dir: &RamFile, name: &Name) -> Result<(RamFile, Qid)> {
        self.ram.walk(cx, dir, name).await
    }

    async fn getattr(&self, cx: &Cx, file: &RamFile) -> Result<Attr> {
        self.ram.getattr(cx, file).await
    }

    async fn open(&self, cx: &Cx, file: &mut RamFile, flags: u32) -> Result<Opened> {
        self.ram.open(cx, file, flags).await
    }

    async fn create(
        &self,
        cx: &Cx,
        dir: &RamFile,
        name: &Name,
        mode: u32,
        flags: u32,
        gid: u32,
    ) -> Result<(RamFile, Opened)> {
        self.ram.create(cx, dir, name, mode, flags, gid).await
    }

    async fn read(&self, cx: &Cx, file: &RamFile, offset: u64, count: u32) -> Result<Bytes> {
        {
            let mut reads = self.knobs.reads.lock().unwrap();
            if reads.len() < READS_KEPT {
                reads.push((offset, count));
            }
        }
        let _running = self.busy().await;
        let fail_at = self.knobs.fail_at.load(SeqCst);
        if offset >= fail_at {
            return Err(Error::from_errno(Errno::EIO));
        }
        let mut count = count.min((fail_at - offset).min(u32::MAX as u64) as u32);
        if self.knobs.short_reads.load(SeqCst) && count > 1 {
            count = count.min(1000 + (offset % 7919) as u32);
        }
        let data = self.ram.read(cx, file, offset, count).await?;
        self.knobs.bytes_read.fetch_add(data.len() as u64, SeqCst);
        Ok(data)
    }

    async fn write(&self, cx: &Cx, file: &RamFile, offset: u64, data: Bytes) -> Result<u32> {
        let _running = self.busy().await;
        let data = if self.knobs.short_writes.load(SeqCst) && data.len() > 1 {
            data.slice(..data.len() / 2)
        } else {
            data
        };
        self.ram.write(cx, file, offset, data).await
    }

    async fn remove(&self, cx: &Cx, file: &RamFile) -> Result<()> {
        self.ram.remove(cx, file).await
    }

    async fn clunk(&self, cx: &Cx, file: RamFile) -> Result<()> {
        self.ram.clunk(cx, file).await
    }

    async fn renameat(
        &self,
        cx: &Cx,
        olddir: &RamFile,
        oldname: &Name,
        newdir: &RamFile,
        newname: &Name,
    ) -> Result<()> {
        self.ram
            .renameat(cx, olddir, oldname, newdir, newname)
            .await
    }
}
