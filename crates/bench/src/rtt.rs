//! Null-operation round trips against a live 9P server, beside the raw TCP
//! ping-pong of the same sizes.
//!
//! The null operation is one small request with a tiny reply that touches no
//! data: Tgetattr of the root fid in 9P2000.L, Tstat of it in 9P2000 and
//! 9P2000.u. Each connection attaches once, then sends one request at a time
//! (one outstanding per connection) until the run's time or its count of
//! operations is spent. A run at N connections drives N connections at once,
//! each its own client and TCP connection; each connection count is run
//! [`Config::repeats`] times, alternating with the ping-pong
//! ([`crate::pingpong`]) at the same count so that noise from the rest of the
//! machine falls on both, and the medians are reported.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use ninep_client::{Client, Fsys, Options};
use ninep_wire::consts::dotl::GETATTR_BASIC;
use ninep_wire::{Dialect, Fcall, Fid, Msg, NONUNAME, Tgetattr, Tstat};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::hist::Histogram;
use crate::io::{median, per_sec};
use crate::pingpong::{EchoServer, PingPong};
use crate::raw::RawConn;

/// Which 9P client drives the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientKind {
    /// ninep-client, as applications use it: a writer and a reader task per
    /// connection, tags matched to waiters.
    #[default]
    Ninep,
    /// A bare loop over the socket that writes a prepared frame and reads
    /// the reply, with no tasks or tag table: what is left is the server's
    /// cost. A diagnostic, not a client.
    Raw,
}

impl ClientKind {
    fn name(self) -> &'static str {
        match self {
            ClientKind::Ninep => "ninep",
            ClientKind::Raw => "raw",
        }
    }
}

impl fmt::Display for ClientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClientKind {
    type Err = String;

    fn from_str(s: &str) -> Result<ClientKind, String> {
        match s {
            "ninep" => Ok(ClientKind::Ninep),
            "raw" => Ok(ClientKind::Raw),
            _ => Err(format!("unknown client {s:?}: want ninep or raw")),
        }
    }
}

/// What to measure, and against what.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's dial string, e.g. `tcp!127.0.0.1!564`.
    pub addr: String,
    /// The dialect to insist on, or `None` for the best the server offers.
    pub dialect: Option<Dialect>,
    /// The user name to attach as.
    pub uname: String,
    /// Numeric user id for 9P2000.u and .L attaches; [`NONUNAME`] for none.
    pub n_uname: u32,
    /// The tree to attach to; empty for the server's default.
    pub aname: String,
    /// How long each run lasts.
    pub duration: Duration,
    /// Connection counts to measure, after one connection.
    pub conns: Vec<usize>,
    /// Runs per connection count; the median is reported.
    pub repeats: usize,
    /// Most operations in one run, across its connections.
    pub max_ops: u64,
    /// The client that sends the null operations.
    pub client: ClientKind,
    /// Also run the TCP ping-pong baseline.
    pub baseline: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: "tcp!127.0.0.1!564".into(),
            dialect: None,
            uname: "none".into(),
            n_uname: NONUNAME,
            aname: String::new(),
            duration: Duration::from_secs(2),
            conns: vec![1, 4, 16, 64],
            repeats: 3,
            max_ops: 50_000_000,
            client: ClientKind::Ninep,
            baseline: true,
        }
    }
}

/// Most connections in one run.
pub const MAX_CONNS: usize = 4096;

impl Config {
    /// The connection counts measured, in order: 1, then each of
    /// [`Config::conns`] not yet measured.
    pub fn counts(&self) -> Vec<usize> {
        let mut counts = vec![1];
        for &n in &self.conns {
            if !counts.contains(&n) {
                counts.push(n);
            }
        }
        counts
    }

    fn check(&self) -> Result<()> {
        ensure!(!self.duration.is_zero(), "a run must last some time");
        ensure!(self.repeats > 0, "at least one run per point");
        ensure!(self.max_ops > 0, "at least one operation per run");
        for &n in &self.conns {
            ensure!(
                (1..=MAX_CONNS).contains(&n),
                "{n} connections: want 1 to {MAX_CONNS}"
            );
        }
        Ok(())
    }
}

/// One run: how many operations completed in how long, and their latencies.
#[derive(Debug, Clone)]
struct Run {
    ops: u64,
    /// From the common start to the last connection's last reply.
    elapsed: Duration,
    latency: Histogram,
}

impl Run {
    /// Operations per second, across all connections.
    fn rate(&self) -> f64 {
        per_sec(self.ops, self.elapsed)
    }
}

/// The runs at one connection count, and their medians.
#[derive(Debug, Clone)]
pub struct Point {
    /// Median operations per second.
    pub rate: f64,
    /// Median of the runs' median latencies.
    pub p50: Duration,
    /// Median of the runs' 99th-percentile latencies.
    pub p99: Duration,
    /// Each run's operations per second, in the order run.
    pub rates: Vec<f64>,
}

impl Point {
    fn of(runs: &[Run]) -> Point {
        let rates: Vec<f64> = runs.iter().map(Run::rate).collect();
        let secs = |q: f64| {
            let v: Vec<f64> = runs
                .iter()
                .map(|r| r.latency.quantile(q).as_secs_f64())
                .collect();
            Duration::from_secs_f64(median(&v))
        };
        Point {
            rate: median(&rates),
            p50: secs(0.5),
            p99: secs(0.99),
            rates,
        }
    }
}

/// One connection count: the 9P runs and the ping-pong runs beside them.
#[derive(Debug, Clone)]
pub struct Row {
    /// Connections driven at once.
    pub conns: usize,
    /// The 9P null operations.
    pub ninep: Point,
    /// The TCP ping-pong of the same sizes, if it was run.
    pub tcp: Option<Point>,
}

impl Row {
    /// 9P operations per TCP round trip: how close to the limit 9P comes.
    pub fn ratio(&self) -> Option<f64> {
        self.tcp
            .as_ref()
            .filter(|t| t.rate > 0.0)
            .map(|t| self.ninep.rate / t.rate)
    }
}

/// Everything measured, printable as a table.
#[derive(Debug, Clone)]
pub struct Report {
    /// The server's dial string.
    pub addr: String,
    /// The dialect the server and client settled on.
    pub dialect: Dialect,
    /// The null operation's request, e.g. `Tgetattr`.
    pub op: &'static str,
    /// Bytes on the wire of one null request.
    pub request_bytes: usize,
    /// Bytes on the wire of its reply.
    pub reply_bytes: usize,
    /// The time each run was given.
    pub duration: Duration,
    /// Runs per connection count.
    pub repeats: usize,
    /// The client that sent the null operations.
    pub client: ClientKind,
    /// One row per connection count, in the order measured.
    pub rows: Vec<Row>,
}

impl Report {
    /// The rows as CSV with a header line; the TCP columns are empty where
    /// the baseline was not run.
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "conns,ninep_ops_per_s,ninep_p50_us,ninep_p99_us,tcp_round_trips_per_s,tcp_p50_us\n",
        );
        let us = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1e6);
        for row in &self.rows {
            let (tcp_rate, tcp_p50) = row.tcp.as_ref().map_or_else(
                || (String::new(), String::new()),
                |t| (format!("{:.0}", t.rate), us(t.p50)),
            );
            out += &format!(
                "{},{:.0},{},{},{tcp_rate},{tcp_p50}\n",
                row.conns,
                row.ninep.rate,
                us(row.ninep.p50),
                us(row.ninep.p99)
            );
        }
        out
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {}: {} ({}-byte request, {}-byte reply), client {}; median of {} runs of {:.1} s",
            self.addr,
            self.dialect,
            self.op,
            self.request_bytes,
            self.reply_bytes,
            self.client,
            self.repeats,
            self.duration.as_secs_f64()
        )?;
        writeln!(
            f,
            "conns |  9P ops/s | p50 µs | p99 µs | TCP round trips/s | 9P/TCP"
        )?;
        writeln!(
            f,
            "------+-----------+--------+--------+-------------------+-------"
        )?;
        for row in &self.rows {
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            let tcp = row
                .tcp
                .as_ref()
                .map_or_else(|| "-".to_owned(), |t| format!("{:.0}", t.rate));
            let ratio = row
                .ratio()
                .map_or_else(|| "-".to_owned(), |r| format!("{r:.3}"));
            writeln!(
                f,
                "{:>5} | {:>9.0} | {:>6.1} | {:>6.1} | {:>17} | {:>6}",
                row.conns,
                row.ninep.rate,
                us(row.ninep.p50),
                us(row.ninep.p99),
                tcp,
                ratio
            )?;
        }
        Ok(())
    }
}

/// The null operation as the server speaks it.
#[derive(Debug, Clone)]
pub(crate) struct Null {
    pub dialect: Dialect,
    request_bytes: usize,
    reply_bytes: usize,
}

impl Null {
    pub fn request(&self, fid: Fid) -> Msg {
        match self.dialect {
            Dialect::L => Tgetattr {
                fid,
                request_mask: GETATTR_BASIC,
            }
            .into(),
            Dialect::U | Dialect::Base => Tstat { fid }.into(),
        }
    }
}

/// Measures `config`, calling `progress` with a line after each run.
pub async fn run(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Report> {
    let mut reports = compare(std::slice::from_ref(config), progress).await?;
    reports.pop().context("no report")
}

/// Measures several servers at the same connection counts, one run of each
/// in turn (then the TCP ping-pong, if the first config asks for it), so
/// that noise from the rest of the machine falls on all of them alike. The
/// first config gives the counts, duration, repeats and operation limit.
pub async fn compare(configs: &[Config], progress: &mut dyn FnMut(&str)) -> Result<Vec<Report>> {
    let first = configs.first().context("nothing to measure")?;
    first.check()?;
    let mut nulls = Vec::with_capacity(configs.len());
    for config in configs {
        nulls.push(probe(config).await?);
    }
    let echo = if first.baseline {
        Some(
            EchoServer::start(nulls[0].request_bytes, nulls[0].reply_bytes)
                .context("start the ping-pong server")?,
        )
    } else {
        None
    };
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); configs.len()];
    for conns in first.counts() {
        let mut ninep_runs: Vec<Vec<Run>> = vec![Vec::new(); configs.len()];
        let mut tcp_runs = Vec::new();
        for i in 1..=first.repeats {
            let mut line = format!("conns {conns:>4} run {i}/{}:", first.repeats);
            for (k, (config, null)) in configs.iter().zip(&nulls).enumerate() {
                let mut pingers = Vec::with_capacity(conns);
                for _ in 0..conns {
                    pingers.push(connect(config, null).await?);
                }
                let run = measure(pingers, first.duration, first.max_ops)
                    .await
                    .with_context(|| format!("9P run at {conns} connections to {}", config.addr))?;
                line += &format!(
                    " 9P {:>8.0} ops/s p50 {:>7.1} µs p99 {:>7.1} µs mean {:>7.1} µs",
                    run.rate(),
                    run.latency.quantile(0.5).as_secs_f64() * 1e6,
                    run.latency.quantile(0.99).as_secs_f64() * 1e6,
                    run.latency.mean().as_secs_f64() * 1e6,
                );
                ninep_runs[k].push(run);
            }
            if let Some(echo) = &echo {
                let mut pingers = Vec::with_capacity(conns);
                for _ in 0..conns {
                    pingers.push(Pinger::Tcp(
                        echo.connect()
                            .await
                            .context("connect to the ping-pong server")?,
                    ));
                }
                let run = measure(pingers, first.duration, first.max_ops)
                    .await
                    .with_context(|| format!("TCP run at {conns} connections"))?;
                line += &format!(
                    " | TCP {:>8.0} round trips/s p50 {:>7.1} µs mean {:>7.1} µs",
                    run.rate(),
                    run.latency.quantile(0.5).as_secs_f64() * 1e6,
                    run.latency.mean().as_secs_f64() * 1e6,
                );
                tcp_runs.push(run);
            }
            progress(&line);
        }
        let tcp = echo.as_ref().map(|_| Point::of(&tcp_runs));
        for (k, runs) in ninep_runs.iter().enumerate() {
            rows[k].push(Row {
                conns,
                ninep: Point::of(runs),
                tcp: tcp.clone(),
            });
        }
    }
    Ok(configs
        .iter()
        .zip(nulls)
        .zip(rows)
        .map(|((config, null), rows)| Report {
            addr: config.addr.clone(),
            dialect: null.dialect,
            op: null.request(Fid(0)).name(),
            request_bytes: null.request_bytes,
            reply_bytes: null.reply_bytes,
            duration: first.duration,
            repeats: first.repeats,
            client: config.client,
            rows,
        })
        .collect())
}

/// Settles the dialect and sends one null operation, to learn its sizes on
/// the wire and that the server answers it.
async fn probe(config: &Config) -> Result<Null> {
    let options = Options {
        dialect: config.dialect,
        ..Options::default()
    };
    let client = Client::connect_with(&config.addr, options)
        .await
        .with_context(|| format!("connect to {}", config.addr))?;
    let fsys = attach(&client, config).await?;
    let mut null = Null {
        dialect: client.dialect(),
        request_bytes: 0,
        reply_bytes: 0,
    };
    let request = null.request(fsys.root().number());
    let reply = client
        .rpc(request.clone())
        .await
        .with_context(|| format!("{} of the root", request.name()))?;
    null.request_bytes = Fcall::new(0, request).to_bytes(null.dialect)?.len();
    null.reply_bytes = Fcall::new(0, reply).to_bytes(null.dialect)?.len();
    Ok(null)
}

async fn attach(client: &Client, config: &Config) -> Result<Fsys> {
    client
        .attach_as(&config.uname, config.n_uname, &config.aname)
        .await
        .with_context(|| {
            format!(
                "attach to {:?} as {} ({})",
                config.aname, config.uname, config.n_uname as i32
            )
        })
}

/// One connection, ready to send null operations.
enum Pinger {
    Ninep {
        client: Client,
        /// Held for its root fid, which dropping it clunks.
        _fsys: Fsys,
        request: Msg,
    },
    Raw(RawConn),
    Tcp(PingPong),
}

impl Pinger {
    async fn once(&mut self) -> Result<()> {
        match self {
            Pinger::Ninep {
                client, request, ..
            } => {
                client.rpc(request.clone()).await?;
            }
            Pinger::Raw(raw) => raw.once().await?,
            Pinger::Tcp(pp) => pp.round_trip().await?,
        }
        Ok(())
    }
}

async fn connect(config: &Config, null: &Null) -> Result<Pinger> {
    match config.client {
        ClientKind::Ninep => {
            let options = Options {
                dialect: Some(null.dialect),
                ..Options::default()
            };
            let client = Client::connect_with(&config.addr, options)
                .await
                .with_context(|| format!("connect to {}", config.addr))?;
            let fsys = attach(&client, config).await?;
            let request = null.request(fsys.root().number());
            Ok(Pinger::Ninep {
                client,
                _fsys: fsys,
                request,
            })
        }
        ClientKind::Raw => Ok(Pinger::Raw(RawConn::connect(config, null).await?)),
    }
}

/// What one connection did in a run.
struct Part {
    ops: u64,
    end: Instant,
    latency: Histogram,
    /// Kept until every connection is done, so that none hangs up early.
    _pinger: Pinger,
}

/// Runs `pingers` at once from a common start for `duration` or until
/// `max_ops` operations are done between them.
async fn measure(pingers: Vec<Pinger>, duration: Duration, max_ops: u64) -> Result<Run> {
    let n = pingers.len().max(1) as u64;
    let cap = (max_ops / n).max(1);
    // Every task is spawned and waiting before the start.
    let start = Instant::now() + Duration::from_millis(20);
    let deadline = start + duration;
    let mut tasks: Vec<JoinHandle<Result<Part>>> = pingers
        .into_iter()
        .map(|p| tokio::spawn(drive(p, start, deadline, cap)))
        .collect();
    // A server that stops answering fails the run instead of hanging it.
    let limit = deadline + Duration::from_secs(10);
    let mut parts = Vec::with_capacity(tasks.len());
    let mut failure = None;
    for task in &mut tasks {
        match tokio::time::timeout_at(limit, task).await {
            Ok(Ok(Ok(part))) => parts.push(part),
            Ok(Ok(Err(e))) => failure = Some(e),
            Ok(Err(e)) => failure = Some(anyhow::Error::new(e)),
            Err(_) => failure = Some(anyhow::anyhow!("no reply within 10 s of the end")),
        }
        if failure.is_some() {
            break;
        }
    }
    if let Some(e) = failure {
        for task in &tasks {
            task.abort();
        }
        return Err(e);
    }
    let mut run = Run {
        ops: 0,
        elapsed: Duration::ZERO,
        latency: Histogram::new(),
    };
    let mut end = start;
    for part in &parts {
        run.ops += part.ops;
        run.latency.merge(&part.latency);
        end = end.max(part.end);
    }
    run.elapsed = end - start;
    drop(parts);
    // Let the connections' clunks and hang-ups finish before the next run.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(run)
}

async fn drive(mut pinger: Pinger, start: Instant, deadline: Instant, cap: u64) -> Result<Part> {
    let mut latency = Histogram::new();
    tokio::time::sleep_until(start).await;
    let mut ops = 0;
    let mut now = Instant::now();
    while now < deadline && ops < cap {
        let sent = now;
        pinger.once().await?;
        now = Instant::now();
        latency.record(now - sent);
        ops += 1;
    }
    Ok(Part {
        ops,
        end: now,
        latency,
        _pinger: pinger,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_start_with_one() {
        let mut c = Config::default();
        assert_eq!(c.counts(), [1, 4, 16, 64]);
        c.conns = vec![8, 1, 8, 2];
        assert_eq!(c.counts(), [1, 8, 2]);
        c.conns = vec![];
        assert_eq!(c.counts(), [1]);
    }

    #[test]
    fn bad_configs() {
        let bad = [
            Config {
                repeats: 0,
                ..Config::default()
            },
            Config {
                duration: Duration::ZERO,
                ..Config::default()
            },
            Config {
                conns: vec![0],
                ..Config::default()
            },
        ];
        for c in bad {
            assert!(c.check().is_err(), "{c:?}");
        }
        assert!(Config::default().check().is_ok());
    }
}
