//! Bulk I/O through a 9P server, the way a simple program does it: one
//! request in flight at a time, each as large as the file's iounit allows.
//!
//! - [`Op::Read`] opens a file and reads it from offset 0 to the end.
//! - [`Op::Write`] creates a file (or truncates it) and writes a given number
//!   of bytes of noise from offset 0.
//! - [`Op::List`] opens a directory and reads every entry of it (Treaddir in
//!   9P2000.L, directory Tread in 9P2000 and .u).
//!
//! Each run is timed from the request that opens the file to the reply that
//! clunks it; connecting and attaching are not timed. Each run has a
//! connection of its own.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use ninep_client::{Client, File, Fsys, Options};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Dirent, Errno, NONUNAME, Stat, Treaddir};

use crate::rng::Rng;

/// A server and how to attach to it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's dial string, e.g. `tcp!127.0.0.1!564`.
    pub addr: String,
    /// The dialect to insist on, or `None` for the best the server offers.
    pub dialect: Option<Dialect>,
    /// The msize to ask for; the server may grant less.
    pub msize: u32,
    /// The user name to attach as.
    pub uname: String,
    /// Numeric user id for 9P2000.u and .L attaches; [`NONUNAME`] for none.
    pub n_uname: u32,
    /// The tree to attach to; empty for the server's default.
    pub aname: String,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            addr: "tcp!127.0.0.1!564".into(),
            dialect: None,
            msize: Options::default().msize,
            uname: "none".into(),
            n_uname: NONUNAME,
            aname: String::new(),
        }
    }
}

impl Target {
    /// Connects and attaches.
    pub async fn attach(&self) -> Result<Fsys> {
        let options = Options {
            msize: self.msize,
            dialect: self.dialect,
        };
        let client = Client::connect_with(&self.addr, options)
            .await
            .with_context(|| format!("connect to {}", self.addr))?;
        client
            .attach_as(&self.uname, self.n_uname, &self.aname)
            .await
            .with_context(|| {
                format!(
                    "attach to {:?} as {} ({})",
                    self.aname, self.uname, self.n_uname as i32
                )
            })
    }
}

/// What to do to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read a whole file sequentially.
    Read {
        /// The file, relative to the attach root.
        path: String,
    },
    /// Create (or truncate) a file and write `size` bytes sequentially;
    /// with `remove`, remove it after each run, untimed.
    Write {
        /// The file, relative to the attach root.
        path: String,
        /// Bytes to write.
        size: u64,
        /// Remove the file after each run.
        remove: bool,
    },
    /// List a directory.
    List {
        /// The directory, relative to the attach root.
        path: String,
    },
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "read",
            Op::Write { .. } => "write",
            Op::List { .. } => "list",
        }
    }

    fn path(&self) -> &str {
        match self {
            Op::Read { path } | Op::Write { path, .. } | Op::List { path } => path,
        }
    }

    /// True if the rate is in entries per second rather than bytes.
    fn counts_entries(&self) -> bool {
        matches!(self, Op::List { .. })
    }
}

/// One run of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Bytes read or written (for a listing, bytes of directory data).
    pub bytes: u64,
    /// Directory entries listed, `.` and `..` left out.
    pub entries: u64,
    /// Data requests sent: Tread, Twrite or Treaddir.
    pub requests: u64,
    /// From the request that opens the file or directory to the reply that
    /// clunks it.
    pub elapsed: Duration,
}

impl Run {
    fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.elapsed)
    }

    fn entries_per_sec(&self) -> f64 {
        per_sec(self.entries, self.elapsed)
    }
}

/// `n` per second of `elapsed`; 0 for no time at all.
pub(crate) fn per_sec(n: u64, elapsed: Duration) -> f64 {
    if elapsed.is_zero() {
        return 0.0;
    }
    n as f64 / elapsed.as_secs_f64()
}

/// The median of `values`; 0 for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Every run of an operation, and where it ran.
#[derive(Debug, Clone)]
pub struct Report {
    /// The server's dial string.
    pub addr: String,
    /// The operation run.
    pub op: Op,
    /// The dialect the server and client settled on.
    pub dialect: Dialect,
    /// The msize the server granted.
    pub msize: u32,
    /// The most bytes one request carried.
    pub iounit: u32,
    /// Each run, in the order run.
    pub runs: Vec<Run>,
}

impl Report {
    /// The median time of a run.
    pub fn seconds(&self) -> f64 {
        let v: Vec<f64> = self.runs.iter().map(|r| r.elapsed.as_secs_f64()).collect();
        median(&v)
    }

    /// The median rate: bytes per second, or entries per second for a
    /// listing.
    pub fn rate(&self) -> f64 {
        let v: Vec<f64> = self
            .runs
            .iter()
            .map(|r| {
                if self.op.counts_entries() {
                    r.entries_per_sec()
                } else {
                    r.bytes_per_sec()
                }
            })
            .collect();
        median(&v)
    }

    /// One line of `key=value` pairs for scripts: the medians, and the sizes
    /// of the last run.
    pub fn kv(&self) -> String {
        let last = self.runs.last();
        format!(
            "op={} path={} dialect={} msize={} iounit={} runs={} bytes={} entries={} requests={} seconds={:.6} rate={:.1}",
            self.op.name(),
            self.op.path(),
            self.dialect,
            self.msize,
            self.iounit,
            self.runs.len(),
            last.map_or(0, |r| r.bytes),
            last.map_or(0, |r| r.entries),
            last.map_or(0, |r| r.requests),
            self.seconds(),
            self.rate(),
        )
    }
}

fn describe(op: &Op, run: &Run) -> String {
    let secs = run.elapsed.as_secs_f64();
    if op.counts_entries() {
        format!(
            "{} entries ({} bytes) in {} requests, {:.4} s: {:.0} entries/s",
            run.entries,
            run.bytes,
            run.requests,
            secs,
            run.entries_per_sec()
        )
    } else {
        format!(
            "{} bytes in {} requests, {:.4} s: {:.1} MB/s",
            run.bytes,
            run.requests,
            secs,
            run.bytes_per_sec() / 1e6
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {} on {}, {} msize {} iounit {}; {} run(s), one request at a time",
            self.op.name(),
            self.op.path(),
            self.addr,
            self.dialect,
            self.msize,
            self.iounit,
            self.runs.len()
        )?;
        for (i, run) in self.runs.iter().enumerate() {
            writeln!(f, "  run {}: {}", i + 1, describe(&self.op, run))?;
        }
        if self.op.counts_entries() {
            writeln!(
                f,
                "median: {:.0} entries/s, {:.4} s",
                self.rate(),
                self.seconds()
            )
        } else {
            writeln!(
                f,
                "median: {:.1} MB/s, {:.4} s",
                self.rate() / 1e6,
                self.seconds()
            )
        }
    }
}

/// Most runs of one operation.
pub const MAX_REPEATS: usize = 1000;

/// Runs `op` `repeats` times, each on a connection of its own, calling
/// `progress` with a line after each run.
pub async fn run(
    target: &Target,
    op: &Op,
    repeats: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<Report> {
    ensure!(
        (1..=MAX_REPEATS).contains(&repeats),
        "{repeats} runs: want 1 to {MAX_REPEATS}"
    );
    let mut report = None;
    for i in 1..=repeats {
        let fsys = target.attach().await?;
        let (run, iounit) = once(&fsys, op)
            .await
            .with_context(|| format!("{} {}", op.name(), op.path()))?;
        progress(&format!("run {i}/{repeats}: {}", describe(op, &run)));
        let client = fsys.client().clone();
        fsys.close().await;
        let report = report.get_or_insert_with(|| Report {
            addr: target.addr.clone(),
            op: op.clone(),
            dialect: client.dialect(),
            msize: client.msize(),
            iounit,
            runs: Vec::new(),
        });
        report.runs.push(run);
    }
    report.context("no runs")
}

/// One run of `op` on an attached tree; returns it and the iounit used.
pub async fn once(fsys: &Fsys, op: &Op) -> Result<(Run, u32)> {
    match op {
        Op::Read { path } => read(fsys, path).await,
        Op::Write { path, size, remove } => {
            let done = write(fsys, path, *size).await?;
            if *remove {
                fsys.remove(path)
                    .await
                    .with_context(|| format!("remove {path}"))?;
            }
            Ok(done)
        }
        Op::List { path } => list(fsys, path).await,
    }
}

async fn read(fsys: &Fsys, path: &str) -> Result<(Run, u32)> {
    let start = Instant::now();
    let file = fsys.open(path, dotl::O_RDONLY).await?;
    let iounit = file.iounit();
    let (mut bytes, mut requests) = (0u64, 0u64);
    loop {
        let data = file.read_at(bytes, iounit).await?;
        requests += 1;
        if data.is_empty() {
            break;
        }
        bytes += data.len() as u64;
    }
    file.close().await?;
    let run = Run {
        bytes,
        entries: 0,
        requests,
        elapsed: start.elapsed(),
    };
    Ok((run, iounit))
}

/// Creates `path`, or opens and truncates it if it exists.
async fn create(fsys: &Fsys, path: &str) -> Result<File> {
    let flags = dotl::O_WRONLY | dotl::O_TRUNC;
    match fsys.create(path, 0o644, flags).await {
        Ok(file) => Ok(file),
        Err(e) if e.errno() == Errno::EEXIST => Ok(fsys.open(path, flags).await?),
        Err(e) => Err(e.into()),
    }
}

async fn write(fsys: &Fsys, path: &str, size: u64) -> Result<(Run, u32)> {
    // The noise is made before the clock starts, one iounit of it at most;
    // the client's msize bounds the iounit of any file.
    let most = fsys.client().msize().saturating_sub(ninep_wire::IOHDRSZ);
    let noise = Rng::new(0x5eed).bytes(most.max(1) as usize);
    let start = Instant::now();
    let file = create(fsys, path).await?;
    let iounit = file.iounit().min(most);
    let (mut bytes, mut requests) = (0u64, 0u64);
    while bytes < size {
        let n = (size - bytes).min(u64::from(iounit)) as usize;
        let wrote = file.write_at(bytes, noise.slice(..n)).await?;
        requests += 1;
        if wrote == 0 {
            bail!("the server wrote nothing at offset {bytes}");
        }
        bytes += u64::from(wrote);
    }
    file.close().await?;
    let run = Run {
        bytes,
        entries: 0,
        requests,
        elapsed: start.elapsed(),
    };
    Ok((run, iounit))
}

async fn list(fsys: &Fsys, path: &str) -> Result<(Run, u32)> {
    let client = fsys.client().clone();
    let dialect = client.dialect();
    let flags = match dialect {
        Dialect::L => dotl::O_RDONLY | dotl::O_DIRECTORY,
        _ => dotl::O_RDONLY,
    };
    let start = Instant::now();
    let dir = fsys.open(path, flags).await?;
    let iounit = dir.iounit();
    let (mut bytes, mut entries, mut requests) = (0u64, 0u64, 0u64);
    let mut offset = 0;
    loop {
        let data = if dialect == Dialect::L {
            let msg = Treaddir {
                fid: dir.fid().number(),
                offset,
                count: iounit,
            };
            client.call(msg).await?.data
        } else {
            dir.read_at(offset, iounit).await?
        };
        requests += 1;
        if data.is_empty() {
            break;
        }
        bytes += data.len() as u64;
        if dialect == Dialect::L {
            for d in Dirent::entries(&data) {
                let d = d.context("bad Rreaddir data")?;
                offset = d.offset;
                if !d.name.is_dot_or_dotdot() {
                    entries += 1;
                }
            }
        } else {
            offset += data.len() as u64;
            for s in Stat::entries(&data, dialect) {
                s.context("bad directory data")?;
                entries += 1;
            }
        }
    }
    dir.close().await?;
    let run = Run {
        bytes,
        entries,
        requests,
        elapsed: start.elapsed(),
    };
    Ok((run, iounit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn report_medians_and_kv() {
        let run = |bytes, ms| Run {
            bytes,
            entries: bytes / 10,
            requests: 2,
            elapsed: Duration::from_millis(ms),
        };
        let mut report = Report {
            addr: "tcp!x!1".into(),
            op: Op::Read { path: "f".into() },
            dialect: Dialect::L,
            msize: 8216,
            iounit: 8192,
            runs: vec![run(1000, 1000), run(1000, 500), run(1000, 250)],
        };
        assert_eq!(report.seconds(), 0.5);
        assert_eq!(report.rate(), 2000.0);
        let kv = report.kv();
        assert!(kv.starts_with("op=read path=f dialect=9P2000.L "), "{kv}");
        assert!(kv.contains(" seconds=0.500000 rate=2000.0"), "{kv}");
        report.op = Op::List { path: "d".into() };
        assert_eq!(report.rate(), 200.0);
        assert!(report.to_string().contains("entries/s"));
    }
}
