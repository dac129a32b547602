//! A PostMark-style workload (Katcher, 1997): the small-file traffic of mail
//! and news servers, through a 9P server.
//!
//! Three phases, each timed on its own:
//!
//! 1. Creation: [`Config::files`] files, each of a random size in
//!    [`Config::min`]..=[`Config::max`] bytes, written whole.
//! 2. Transactions: [`Config::transactions`] of them, each a pair: read a
//!    whole random file *or* append to one (by [`Config::read_bias`]), then
//!    create a new file *or* delete a random one (by [`Config::create_bias`]).
//!    An append adds a random 1 to `max - size` bytes (1 when the file has
//!    already reached `max`), as PostMark keeps files near their range.
//! 3. Deletion of every file left.
//!
//! Every file operation is what a program would send through the client:
//! a walk from the directory, an open or create, reads or writes of at most
//! iounit bytes, and a clunk (or Tremove for a deletion), one request at a
//! time. The rate reported is PostMark's: transactions per second over the
//! transaction phase. A seeded generator makes the workload identical from
//! run to run and server to server.
//!
//! [`bound`] runs the same workload on a host directory through a socket
//! with no 9P: the limit of any 9P client and server that answer one
//! request at a time; [`bound::round_trips`] runs its requests with no
//! file system at all: the limit of the round trips alone.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use ninep_client::{Fid, Fsys};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Errno};

use crate::io::{Target, per_sec};
use crate::rng::Rng;

pub mod bound;

/// The workload, and the server to run it against.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server, and how to attach to it.
    pub target: Target,
    /// Directory to work in, relative to the attach root. Made (and removed
    /// at the end) if it does not exist.
    pub dir: String,
    /// Files created before the transactions.
    pub files: usize,
    /// Smallest size of a new file, in bytes.
    pub min: u64,
    /// Largest size of a new file, in bytes; appends fill a file up to it,
    /// then add a byte at a time.
    pub max: u64,
    /// Transactions in the transaction phase.
    pub transactions: u64,
    /// Seed of every random choice and of the data written.
    pub seed: u64,
    /// Percent of transactions whose first half reads (the rest append).
    pub read_bias: u32,
    /// Percent of transactions whose second half creates (the rest delete).
    pub create_bias: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            target: Target::default(),
            dir: "postmark".into(),
            files: 500,
            min: 512,
            max: 16 * 1024,
            transactions: 5000,
            seed: 42,
            read_bias: 50,
            create_bias: 50,
        }
    }
}

/// Most files in the initial set.
pub const MAX_FILES: usize = 1_000_000;
/// Largest file size.
pub const MAX_SIZE: u64 = 64 * 1024 * 1024;
/// Most transactions in a run.
pub const MAX_TRANSACTIONS: u64 = 100_000_000;

impl Config {
    fn check(&self) -> Result<()> {
        ensure!(
            self.files <= MAX_FILES,
            "{} files: want at most {MAX_FILES}",
            self.files
        );
        ensure!(
            self.min <= self.max,
            "sizes {} to {}: min above max",
            self.min,
            self.max
        );
        ensure!(
            (1..=MAX_SIZE).contains(&self.max),
            "largest size {}: want 1 to {MAX_SIZE}",
            self.max
        );
        ensure!(
            self.transactions <= MAX_TRANSACTIONS,
            "{} transactions: want at most {MAX_TRANSACTIONS}",
            self.transactions
        );
        ensure!(
            self.read_bias <= 100 && self.create_bias <= 100,
            "biases are percentages"
        );
        ensure!(
            !self.dir.split('/').all(|e| e.is_empty() || e == "."),
            "--dir must name a directory below the root"
        );
        Ok(())
    }
}

/// What was done to files, as PostMark counts it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Files created in the creation phase.
    pub created_alone: u64,
    /// Files created by transactions.
    pub created_mixed: u64,
    /// Files read whole, by transactions.
    pub read: u64,
    /// Files appended to, by transactions.
    pub appended: u64,
    /// Files deleted by transactions.
    pub deleted_mixed: u64,
    /// Files deleted in the deletion phase.
    pub deleted_alone: u64,
    /// Bytes read, all by transactions.
    pub bytes_read: u64,
    /// Bytes written, by creations and appends.
    pub bytes_written: u64,
}

impl Counts {
    /// Files created in all.
    pub fn created(&self) -> u64 {
        self.created_alone + self.created_mixed
    }

    /// Files deleted in all.
    pub fn deleted(&self) -> u64 {
        self.deleted_alone + self.deleted_mixed
    }
}

/// What answered the workload's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// A 9P server.
    NineP {
        /// The dialect it and the client settled on.
        dialect: Dialect,
        /// The msize it granted.
        msize: u32,
    },
    /// A host directory through a socket with no 9P ([`bound`]).
    Bound,
    /// The same socket, with no file system call ([`bound::round_trips`]).
    RoundTrips,
}

impl fmt::Display for Served {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Served::NineP { dialect, msize } => write!(f, "{dialect} msize {msize}"),
            Served::Bound => f.write_str("through a socket with no 9P (the bound)"),
            Served::RoundTrips => f.write_str("through a socket with no 9P and no file system"),
        }
    }
}

/// The outcome of one run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The workload run.
    pub config: Config,
    /// What answered the requests.
    pub served: Served,
    /// Requests sent in the three phases.
    pub requests: u64,
    /// Requests sent in the transaction phase.
    pub transaction_requests: u64,
    /// What was done to files.
    pub counts: Counts,
    /// Time of the creation phase.
    pub creation: Duration,
    /// Time of the transaction phase.
    pub transaction: Duration,
    /// Time of the deletion phase.
    pub deletion: Duration,
}

impl Report {
    /// PostMark's figure of merit.
    pub fn transactions_per_sec(&self) -> f64 {
        per_sec(self.config.transactions, self.transaction)
    }

    /// Time of the three phases together.
    fn total(&self) -> Duration {
        self.creation + self.transaction + self.deletion
    }

    /// One line of `key=value` pairs for scripts.
    pub fn kv(&self) -> String {
        let c = &self.counts;
        format!(
            "{} requests={} tx_requests={} transactions={} tx_seconds={:.6} tx_per_sec={:.1} \
             creation_seconds={:.6} deletion_seconds={:.6} total_seconds={:.6} \
             created={} created_alone={} created_mixed={} read={} appended={} \
             deleted={} deleted_alone={} deleted_mixed={} bytes_read={} bytes_written={}",
            match self.served {
                Served::NineP { dialect, msize } => {
                    format!("served=9p dialect={dialect} msize={msize}")
                }
                Served::Bound => "served=bound".to_owned(),
                Served::RoundTrips => "served=round-trips".to_owned(),
            },
            self.requests,
            self.transaction_requests,
            self.config.transactions,
            self.transaction.as_secs_f64(),
            self.transactions_per_sec(),
            self.creation.as_secs_f64(),
            self.deletion.as_secs_f64(),
            self.total().as_secs_f64(),
            c.created(),
            c.created_alone,
            c.created_mixed,
            c.read,
            c.appended,
            c.deleted(),
            c.deleted_alone,
            c.deleted_mixed,
            c.bytes_read,
            c.bytes_written,
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cfg = &self.config;
        let c = &self.counts;
        writeln!(
            f,
            "PostMark on {} {}, in {}: {} files of {} to {} bytes, {} transactions \
             ({}% read, {}% create), seed {}",
            match self.served {
                Served::NineP { .. } => &cfg.target.addr,
                Served::Bound => "a host directory",
                Served::RoundTrips => "no file system",
            },
            self.served,
            cfg.dir,
            cfg.files,
            cfg.min,
            cfg.max,
            cfg.transactions,
            cfg.read_bias,
            cfg.create_bias,
            cfg.seed
        )?;
        writeln!(
            f,
            "creation:     {:>8} files in {:>8.3} s: {:>9.1} files/s",
            c.created_alone,
            self.creation.as_secs_f64(),
            per_sec(c.created_alone, self.creation)
        )?;
        writeln!(
            f,
            "transactions: {:>8}       in {:>8.3} s: {:>9.1} transactions/s, {:.2} requests each",
            cfg.transactions,
            self.transaction.as_secs_f64(),
            self.transactions_per_sec(),
            self.transaction_requests as f64 / cfg.transactions as f64
        )?;
        writeln!(
            f,
            "deletion:     {:>8} files in {:>8.3} s: {:>9.1} files/s",
            c.deleted_alone,
            self.deletion.as_secs_f64(),
            per_sec(c.deleted_alone, self.deletion)
        )?;
        writeln!(
            f,
            "total:        {:.3} s, {} requests",
            self.total().as_secs_f64(),
            self.requests
        )?;
        writeln!(
            f,
            "files: {} created ({} alone, {} in transactions), {} read, {} appended, \
             {} deleted ({} alone, {} in transactions)",
            c.created(),
            c.created_alone,
            c.created_mixed,
            c.read,
            c.appended,
            c.deleted(),
            c.deleted_alone,
            c.deleted_mixed
        )?;
        writeln!(
            f,
            "data: {} bytes read, {} bytes written",
            c.bytes_read, c.bytes_written
        )
    }
}

/// Runs the workload once against the 9P server of `config.target`.
pub async fn run(config: &Config) -> Result<Report> {
    config.check()?;
    let fsys = config.target.attach().await?;
    let made_dir = prepare(&fsys, &config.dir).await?;
    let dir = fsys
        .walk(&config.dir)
        .await
        .with_context(|| format!("walk to {}", config.dir))?;
    let phases = drive(config, NineP { dir }).await?;
    if made_dir {
        fsys.remove(&config.dir)
            .await
            .with_context(|| format!("remove {}", config.dir))?;
    }
    let client = fsys.client().clone();
    fsys.close().await;
    Ok(phases.report(
        config,
        Served::NineP {
            dialect: client.dialect(),
            msize: client.msize(),
        },
    ))
}

/// What one run did and how long each phase took.
pub(crate) struct Phases {
    requests: u64,
    transaction_requests: u64,
    counts: Counts,
    creation: Duration,
    transaction: Duration,
    deletion: Duration,
}

impl Phases {
    pub(crate) fn report(self, config: &Config, served: Served) -> Report {
        Report {
            config: config.clone(),
            served,
            requests: self.requests,
            transaction_requests: self.transaction_requests,
            counts: self.counts,
            creation: self.creation,
            transaction: self.transaction,
            deletion: self.deletion,
        }
    }
}

/// Runs the three phases on `store`.
pub(crate) async fn drive<S: Store>(config: &Config, store: S) -> Result<Phases> {
    let mut work = Work {
        config,
        rng: Rng::new(config.seed),
        noise: Rng::new(config.seed ^ 0x6e6f_6973_6521).bytes(config.max as usize),
        pool: Vec::with_capacity(config.files),
        next_id: 0,
        counts: Counts::default(),
        store,
    };
    let requests = work.store.requests();

    let start = Instant::now();
    for _ in 0..config.files {
        work.create().await?;
        work.counts.created_alone += 1;
    }
    let creation = start.elapsed();

    let start = Instant::now();
    let before = work.store.requests();
    for _ in 0..config.transactions {
        work.transaction().await?;
    }
    let transaction = start.elapsed();
    let transaction_requests = work.store.requests() - before;

    let start = Instant::now();
    while let Some(entry) = work.pool.pop() {
        work.remove(entry).await?;
        work.counts.deleted_alone += 1;
    }
    let deletion = start.elapsed();

    Ok(Phases {
        requests: work.store.requests() - requests,
        transaction_requests,
        counts: work.counts,
        creation,
        transaction,
        deletion,
    })
}

/// Makes `dir` if it is missing; true if it did.
async fn prepare(fsys: &Fsys, dir: &str) -> Result<bool> {
    match fsys.walk(dir).await {
        Ok(fid) => {
            ensure!(fid.qid().ty.is_dir(), "{dir}: not a directory");
            Ok(false)
        }
        Err(e) if e.errno() == Errno::ENOENT => {
            fsys.mkdir(dir, 0o755)
                .await
                .with_context(|| format!("make {dir}"))?;
            Ok(true)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("walk to {dir}"))),
    }
}

/// Where the workload's files are made, read, appended to and removed:
/// each call a whole file operation, in the requests a program sends for
/// it one at a time.
pub(crate) trait Store {
    /// Makes file `name` and writes `data` into it.
    async fn create(&mut self, name: &str, data: Bytes) -> Result<()>;
    /// Reads file `name`, `size` bytes long, whole; returns the bytes read.
    async fn read(&mut self, name: &str, size: u64) -> Result<u64>;
    /// Writes `data` into file `name` at `offset`, its end.
    async fn append(&mut self, name: &str, offset: u64, data: Bytes) -> Result<()>;
    /// Removes file `name`.
    async fn remove(&mut self, name: &str) -> Result<()>;
    /// Requests sent so far.
    fn requests(&self) -> u64;
}

/// The files in a directory of a 9P server: a walk from the directory, an
/// open or create, reads or writes of at most iounit bytes, and a clunk
/// (or Tremove for a deletion).
struct NineP {
    dir: Fid,
}

impl Store for NineP {
    async fn create(&mut self, name: &str, data: Bytes) -> Result<()> {
        let file = self
            .dir
            .clone_fid()
            .await?
            .create(name, 0o644, dotl::O_WRONLY)
            .await
            .with_context(|| format!("create {name}"))?;
        if !data.is_empty() {
            file.write_all_at(0, data)
                .await
                .with_context(|| format!("write {name}"))?;
        }
        Ok(file.close().await?)
    }

    async fn read(&mut self, name: &str, size: u64) -> Result<u64> {
        let file = self
            .dir
            .walk_path(name)
            .await?
            .open(dotl::O_RDONLY)
            .await
            .with_context(|| format!("open {name}"))?;
        let mut got = 0;
        while got < size {
            let data = file.read_at(got, file.iounit()).await?;
            if data.is_empty() {
                break;
            }
            got += data.len() as u64;
        }
        file.close().await?;
        Ok(got)
    }

    async fn append(&mut self, name: &str, offset: u64, data: Bytes) -> Result<()> {
        let file = self
            .dir
            .walk_path(name)
            .await?
            .open(dotl::O_WRONLY)
            .await
            .with_context(|| format!("open {name}"))?;
        file.write_all_at(offset, data)
            .await
            .with_context(|| format!("append to {name}"))?;
        Ok(file.close().await?)
    }

    async fn remove(&mut self, name: &str) -> Result<()> {
        self.dir
            .walk_path(name)
            .await?
            .remove()
            .await
            .with_context(|| format!("remove {name}"))
    }

    fn requests(&self) -> u64 {
        self.dir.client().requests()
    }
}

/// A file the workload made, and how big it now is.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    size: u64,
}

struct Work<'a, S> {
    config: &'a Config,
    rng: Rng,
    /// Bytes to write: slices of it, `max` bytes long.
    noise: Bytes,
    pool: Vec<Entry>,
    next_id: u64,
    counts: Counts,
    store: S,
}

fn name(id: u64) -> String {
    format!("pm{id:07}")
}

impl<S: Store> Work<'_, S> {
    async fn transaction(&mut self) -> Result<()> {
        // With no file to read or append to, the first half is skipped.
        if !self.pool.is_empty() {
            if self.rng.below(100) < u64::from(self.config.read_bias) {
                self.read().await?;
            } else {
                self.append().await?;
            }
        }
        if self.pool.is_empty() || self.rng.below(100) < u64::from(self.config.create_bias) {
            self.create().await?;
            self.counts.created_mixed += 1;
        } else {
            let i = self.pick();
            let entry = self.pool.swap_remove(i);
            self.remove(entry).await?;
            self.counts.deleted_mixed += 1;
        }
        Ok(())
    }

    fn pick(&mut self) -> usize {
        self.rng.below(self.pool.len() as u64) as usize
    }

    async fn create(&mut self) -> Result<()> {
        let size = self.rng.between(self.config.min, self.config.max);
        let id = self.next_id;
        self.next_id += 1;
        let data = self.noise.slice(..size as usize);
        self.store.create(&name(id), data).await?;
        self.pool.push(Entry { id, size });
        self.counts.bytes_written += size;
        Ok(())
    }

    async fn read(&mut self) -> Result<()> {
        let i = self.pick();
        let Entry { id, size } = self.pool[i];
        let name = name(id);
        let got = self.store.read(&name, size).await?;
        ensure!(got == size, "{name}: read {got} bytes of {size}");
        self.counts.read += 1;
        self.counts.bytes_read += got;
        Ok(())
    }

    async fn append(&mut self) -> Result<()> {
        let i = self.pick();
        let Entry { id, size } = self.pool[i];
        let room = self.config.max.saturating_sub(size).max(1);
        let n = self.rng.between(1, room);
        let data = self.noise.slice(..n as usize);
        self.store.append(&name(id), size, data).await?;
        self.pool[i].size += n;
        self.counts.appended += 1;
        self.counts.bytes_written += n;
        Ok(())
    }

    async fn remove(&mut self, entry: Entry) -> Result<()> {
        self.store.remove(&name(entry.id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_configs() {
        let bad = [
            Config {
                min: 10,
                max: 9,
                ..Config::default()
            },
            Config {
                max: 0,
                min: 0,
                ..Config::default()
            },
            Config {
                read_bias: 101,
                ..Config::default()
            },
            Config {
                dir: "/./".into(),
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(c.check().is_err(), "{c:?}");
        }
        assert!(Config::default().check().is_ok());
    }

    #[test]
    fn names_sort_in_creation_order() {
        assert_eq!(name(7), "pm0000007");
        assert!(name(99) < name(100));
    }
}
