//! The network figures of the 9Back benchmark method, each beside a baseline
//! measured in the same run:
//!
//! - connection set-up and tear-down (its Fig. 13): a bare connect to the
//!   server's port and a close, beside connect, Tversion and Tattach, and
//!   the root's Tclunk and the close;
//! - reading whole files of growing size, one request at a time (its
//!   Fig. 17), beside moving the same bytes over a TCP connection on
//!   loopback ([`EchoServer`]); the largest size is its Fig. 12, peak TCP
//!   bandwidth;
//! - contention (its Fig. 18): the bandwidth of one reader, and of all of
//!   them, as 1 to 32 readers (a connection each) read random files of a
//!   directory in 4 KiB requests, beside the same reads of the same files
//!   on the local file system.
//!
//! The files are the caller's: a directory whose files are read by size,
//! and a directory of files to contend for, reached both through the server
//! and on the local disk.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use ninep_client::Fsys;
use ninep_transport::Addr;
use ninep_wire::consts::dotl::O_RDONLY;

use crate::io::{Op, Target, median, once};
use crate::pingpong::EchoServer;
use crate::rng::Rng;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server.
    pub target: Target,
    /// Connections made and torn down for the set-up figure.
    pub setups: usize,
    /// Directory, relative to the attach root, whose files are read whole,
    /// smallest first.
    pub sizes: String,
    /// Directory, relative to the attach root, of the files readers
    /// contend for.
    pub contend: String,
    /// The same directory on the local disk, for the contention baseline.
    pub local: PathBuf,
    /// Reader counts for the contention figure.
    pub readers: Vec<usize>,
    /// Bytes of one read request when contending.
    pub chunk: u32,
    /// How long each contention point, and at least each file size, runs.
    pub duration: Duration,
}

/// One measured point: the 9P figure and its baseline, in `unit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Which figure: `setup`, `teardown`, `read-size`, `contend-one` or
    /// `contend-all`.
    pub figure: &'static str,
    /// The x value: bytes for `read-size`, readers for contention, 0 for
    /// set-up and tear-down.
    pub x: u64,
    /// The 9P figure.
    pub ninep: f64,
    /// The baseline's.
    pub baseline: f64,
    /// What both are in.
    pub unit: &'static str,
}

/// Every point as CSV with a header line.
pub fn csv(points: &[Point]) -> String {
    let mut out = String::from("figure,x,ninep,baseline,unit\n");
    for p in points {
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.3},{}",
            p.figure, p.x, p.ninep, p.baseline, p.unit
        );
    }
    out
}

/// Measures everything in `config`, calling `progress` after each point.
pub async fn run(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>> {
    ensure!(config.chunk > 0, "read requests of no bytes");
    let mut points = setup(config).await?;
    for p in &points {
        progress(&format!(
            "{}: 9P {:.1} {}, TCP {:.1}",
            p.figure, p.ninep, p.unit, p.baseline
        ));
    }
    for p in sizes(config, progress).await? {
        points.push(p);
    }
    for p in contention(config, progress).await? {
        points.push(p);
    }
    Ok(points)
}

/// Mean microseconds of set-up and of tear-down, 9P against bare TCP.
async fn setup(config: &Config) -> Result<Vec<Point>> {
    ensure!(config.setups > 0, "no set-ups to time");
    let addr: Addr = config.target.addr.parse().map_err(anyhow::Error::msg)?;
    let (mut tcp_up, mut tcp_down, mut ninep_up, mut ninep_down) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..config.setups {
        let t = Instant::now();
        let stream = addr.dial().await.with_context(|| addr.to_string())?;
        tcp_up.push(t.elapsed());
        let t = Instant::now();
        drop(stream);
        tcp_down.push(t.elapsed());

        let t = Instant::now();
        let fsys = config.target.attach().await?;
        ninep_up.push(t.elapsed());
        let t = Instant::now();
        fsys.close().await;
        ninep_down.push(t.elapsed());
    }
    let mean_us =
        |v: &[Duration]| v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len() as f64 * 1e6;
    Ok(vec![
        Point {
            figure: "setup",
            x: 0,
            ninep: mean_us(&ninep_up),
            baseline: mean_us(&tcp_up),
            unit: "µs",
        },
        Point {
            figure: "teardown",
            x: 0,
            ninep: mean_us(&ninep_down),
            baseline: mean_us(&tcp_down),
            unit: "µs",
        },
    ])
}

/// The values of a point measured over and over: at least once, then
/// until a time is up, at most 10,000 times.
struct Repeats {
    start: Instant,
    duration: Duration,
    values: Vec<f64>,
}

impl Repeats {
    fn new(duration: Duration) -> Repeats {
        Repeats {
            start: Instant::now(),
            duration,
            values: Vec::new(),
        }
    }

    fn more(&self) -> bool {
        self.values.is_empty()
            || (self.start.elapsed() < self.duration && self.values.len() < 10_000)
    }

    fn median(&self) -> f64 {
        median(&self.values)
    }
}

/// MB/s of whole-file reads by size, 9P against TCP.
async fn sizes(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>> {
    let fsys = config.target.attach().await?;
    let mut files = Vec::new();
    for entry in fsys.read_dir(&config.sizes).await? {
        let path = format!("{}/{}", config.sizes, entry.name);
        files.push((fsys.stat(&path).await?.size, path));
    }
    ensure!(!files.is_empty(), "no files in {}", config.sizes);
    files.sort();
    let mut points = Vec::new();
    for (size, path) in files {
        let mb_per_s = |took: Duration| size as f64 / took.as_secs_f64() / 1e6;
        let op = Op::Read { path };
        let mut ninep = Repeats::new(config.duration / 4);
        while ninep.more() {
            let (run, _) = once(&fsys, &op).await?;
            ensure!(run.bytes == size, "read {} of {size} bytes", run.bytes);
            ninep.values.push(mb_per_s(run.elapsed));
        }
        let reply = usize::try_from(size.max(1)).context("file too large for memory")?;
        let server = EchoServer::start(1, reply)?;
        let mut conn = server.connect().await?;
        // The first round trip touches every page of both ends' buffers,
        // which a file's size of them makes slow; it is not timed.
        conn.round_trip().await?;
        let mut tcp = Repeats::new(config.duration / 4);
        while tcp.more() {
            let t = Instant::now();
            conn.round_trip().await?;
            tcp.values.push(mb_per_s(t.elapsed()));
        }
        let (ninep, baseline) = (ninep.median(), tcp.median());
        progress(&format!(
            "read {size} bytes: 9P {ninep:.1} MB/s, TCP {baseline:.1} MB/s"
        ));
        points.push(Point {
            figure: "read-size",
            x: size,
            ninep,
            baseline,
            unit: "MB/s",
        });
    }
    fsys.close().await;
    Ok(points)
}

/// MB/s of the first reader and of all, at each reader count.
async fn contention(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Vec<Point>> {
    let fsys = config.target.attach().await?;
    let mut names: Vec<String> = fsys
        .read_dir(&config.contend)
        .await?
        .into_iter()
        .map(|e| e.name)
        .collect();
    fsys.close().await;
    ensure!(!names.is_empty(), "no files in {}", config.contend);
    names.sort();
    let mut points = Vec::new();
    for &readers in &config.readers {
        ensure!(readers > 0, "no readers");
        let ninep = ninep_readers(config, &names, readers).await?;
        let local = local_readers(config, &names, readers).await?;
        let mb = |bytes: u64| bytes as f64 / config.duration.as_secs_f64() / 1e6;
        progress(&format!(
            "{readers} readers: the first {:.1} MB/s over 9P, {:.1} locally",
            mb(ninep[0]),
            mb(local[0])
        ));
        points.push(Point {
            figure: "contend-one",
            x: readers as u64,
            ninep: mb(ninep[0]),
            baseline: mb(local[0]),
            unit: "MB/s",
        });
        points.push(Point {
            figure: "contend-all",
            x: readers as u64,
            ninep: mb(ninep.iter().sum()),
            baseline: mb(local.iter().sum()),
            unit: "MB/s",
        });
    }
    Ok(points)
}

/// Bytes each of `readers` 9P readers read in the configured time.
async fn ninep_readers(config: &Config, names: &[String], readers: usize) -> Result<Vec<u64>> {
    let mut fsyses = Vec::new();
    for _ in 0..readers {
        fsyses.push(config.target.attach().await?);
    }
    let deadline = tokio::time::Instant::now() + config.duration;
    let tasks: Vec<_> = fsyses
        .into_iter()
        .enumerate()
        .map(|(i, fsys)| {
            let paths: Vec<String> = names
                .iter()
                .map(|n| format!("{}/{n}", config.contend))
                .collect();
            let chunk = config.chunk;
            tokio::spawn(async move {
                let bytes = ninep_reader(&fsys, &paths, chunk, i as u64, deadline).await;
                fsys.close().await;
                bytes
            })
        })
        .collect();
    let mut bytes = Vec::new();
    for task in tasks {
        bytes.push(task.await.context("a reader panicked")??);
    }
    Ok(bytes)
}

async fn ninep_reader(
    fsys: &Fsys,
    paths: &[String],
    chunk: u32,
    seed: u64,
    deadline: tokio::time::Instant,
) -> Result<u64> {
    let mut rng = Rng::new(seed);
    let mut total = 0;
    while tokio::time::Instant::now() < deadline {
        let path = &paths[rng.below(paths.len() as u64) as usize];
        let file = fsys.open(path, O_RDONLY).await?;
        let mut offset = 0;
        while tokio::time::Instant::now() < deadline {
            let n = file.read_at(offset, chunk).await?.len() as u64;
            if n == 0 {
                break;
            }
            offset += n;
        }
        total += offset;
        file.close().await?;
    }
    Ok(total)
}

/// Bytes each of `readers` local readers (a thread each) read in the
/// configured time.
async fn local_readers(config: &Config, names: &[String], readers: usize) -> Result<Vec<u64>> {
    let paths: Vec<PathBuf> = names.iter().map(|n| config.local.join(n)).collect();
    let deadline = Instant::now() + config.duration;
    let chunk = config.chunk as usize;
    let tasks: Vec<_> = (0..readers)
        .map(|i| {
            let paths = paths.clone();
            tokio::task::spawn_blocking(move || -> Result<u64> {
                let mut rng = Rng::new(i as u64);
                let mut buf = vec![0; chunk];
                let mut total = 0;
                while Instant::now() < deadline {
                    let path = &paths[rng.below(paths.len() as u64) as usize];
                    let mut file =
                        std::fs::File::open(path).with_context(|| path.display().to_string())?;
                    while Instant::now() < deadline {
                        let n = file.read(&mut buf)?;
                        if n == 0 {
                            break;
                        }
                        total += n as u64;
                    }
                }
                Ok(total)
            })
        })
        .collect();
    let mut bytes = Vec::new();
    for task in tasks {
        bytes.push(task.await.context("a reader panicked")??);
    }
    Ok(bytes)
}
