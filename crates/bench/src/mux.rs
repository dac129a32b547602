//! The mux's scaling, measured as Hickey measured his: the mean latency of
//! a message suite against the number of clients (one server), of servers
//! (one client) and of both at once; of a walk across 1 to 16 mount points;
//! of a read of a union directory of 1 to 64 members; and the cost of the
//! mux hop to a null operation, beside the same server reached directly and
//! through a forwarder that copies bytes and nothing more ([`Forwarder`]),
//! in the same run (with [`crate::rtt`]).
//!
//! Every server is a ramfs in this process on loopback; the mux too. A
//! point runs its clients at once for [`Config::duration`] (and at most
//! [`MAX_SUITES`] suites each) and reports the mean time of one message.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use ninep_client::{Client, Fsys, SetAttr};
use ninep_mux::{Config as MuxConfig, Mux, nsfile};
use ninep_ramfs::RamFs;
use ninep_server::{Filesystem, Limits, Server, Spawned};
use ninep_wire::consts::dotl::{O_DIRECTORY, O_RDONLY, O_RDWR};
use ninep_wire::{Name, Treaddir, split_path};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::forward::Forwarder;
use crate::hist::Histogram;
use crate::rtt;

/// Messages in one suite: walk, create, write, clunk; walk, open, read,
/// stat, wstat (Tsetattr), clunk; walk, remove. Every 9P request but
/// version, attach, auth and flush, as in Hickey's suite less the two that
/// start a session (a suite per session would measure the connection).
const SUITE: u32 = 12;

/// Most suites one client runs at one point.
pub const MAX_SUITES: u64 = 100_000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Client counts with one server.
    pub clients: Vec<usize>,
    /// Server counts with one client.
    pub servers: Vec<usize>,
    /// Counts of clients and servers together.
    pub both: Vec<usize>,
    /// Mount points a walk crosses (at most 16, one Twalk's names).
    pub mounts: Vec<usize>,
    /// Members of a union directory.
    pub members: Vec<usize>,
    /// How long each point runs.
    pub duration: Duration,
    /// Connection counts for the null-operation comparison.
    pub hop_conns: Vec<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            clients: vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2000],
            servers: vec![1, 2, 4, 8, 16, 32, 64, 128],
            both: vec![1, 2, 4, 8, 16, 32, 64, 128],
            mounts: (1..=16).collect(),
            members: vec![1, 2, 4, 8, 16, 32, 64],
            duration: Duration::from_secs(1),
            hop_conns: vec![1, 4, 16],
        }
    }
}

/// One curve: latency against a count.
#[derive(Debug, Clone)]
pub struct Series {
    /// What varies, as a heading.
    pub title: &'static str,
    /// The count on the x axis, e.g. `clients`.
    pub x: &'static str,
    /// File name of its plot, without extension.
    pub file: &'static str,
    /// Each count and the mean latency of one message at it.
    pub points: Vec<(usize, Duration)>,
}

/// Everything measured.
#[derive(Debug)]
pub struct Report {
    /// The scaling curves, one per plot.
    pub series: Vec<Series>,
    /// The null operation straight to ramfs.
    pub direct: rtt::Report,
    /// The null operation to the same ramfs through a [`Forwarder`].
    pub forwarded: rtt::Report,
    /// The null operation to the same ramfs through the mux.
    pub muxed: rtt::Report,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for s in &self.series {
            writeln!(f, "{} (mean latency of one message)", s.title)?;
            for (n, d) in &s.points {
                writeln!(f, "  {:>5} {}: {:>9.1} µs", n, s.x, d.as_secs_f64() * 1e6)?;
            }
        }
        hop_table(f, &self.direct, &self.forwarded, &self.muxed)
    }
}

impl Report {
    /// The figures as CSV with a header line: each scaling curve's points
    /// (figure = its plot's file name), then the null operation's p50 by
    /// connections direct (`hop-direct`), through the forwarder
    /// (`hop-forwarder`) and through the mux (`hop-mux`).
    pub fn csv(&self) -> String {
        let mut out = String::from("figure,x,us_per_message\n");
        let mut row = |figure: &str, x: usize, d: Duration| {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{figure},{x},{:.3}", d.as_secs_f64() * 1e6);
        };
        for s in &self.series {
            for &(n, d) in &s.points {
                row(s.file, n, d);
            }
        }
        let hops = [
            ("hop-direct", &self.direct),
            ("hop-forwarder", &self.forwarded),
            ("hop-mux", &self.muxed),
        ];
        for (figure, report) in hops {
            for r in &report.rows {
                row(figure, r.conns, r.ninep.p50);
            }
        }
        out
    }
}

/// The hop's figures: p50 latency of the null operation direct, through
/// the forwarder and through the mux, and what each hop adds.
pub fn hop_table(
    f: &mut dyn std::fmt::Write,
    direct: &rtt::Report,
    forwarded: &rtt::Report,
    muxed: &rtt::Report,
) -> std::fmt::Result {
    writeln!(
        f,
        "null operation ({}), p50 µs: direct, through a forwarder, through the mux",
        direct.op
    )?;
    writeln!(
        f,
        "conns | direct | forwarder | mux    | forwarder/direct | mux/direct | mux hop/forwarder hop"
    )?;
    let rows = direct.rows.iter().zip(&forwarded.rows).zip(&muxed.rows);
    for ((d, w), m) in rows {
        let p50 = |p: &rtt::Point| p.p50.as_secs_f64() * 1e6;
        let (d50, w50, m50) = (p50(&d.ninep), p50(&w.ninep), p50(&m.ninep));
        writeln!(
            f,
            "{:>5} | {:>6.1} | {:>9.1} | {:>6.1} | {:>16.2} | {:>10.2} | {:.2}",
            d.conns,
            d50,
            w50,
            m50,
            w50 / d50,
            m50 / d50,
            (m50 - d50) / (w50 - d50)
        )?;
    }
    Ok(())
}

/// A server of this process on loopback, stopped when dropped.
struct Served {
    addr: String,
    _server: Spawned,
}

async fn serve<F: Filesystem>(fs: F, limits: Limits) -> Result<Served> {
    let addr: ninep_transport::Addr = "tcp!127.0.0.1!0".parse().map_err(anyhow::Error::msg)?;
    let listener = addr.listen().await?;
    let addr = listener.local_addr()?.to_string();
    let server = Server::with_limits(fs, limits).spawn(listener);
    Ok(Served {
        addr,
        _server: server,
    })
}

/// A ramfs holding the directories `dirs`.
async fn ramfs(dirs: &[String]) -> Result<Served> {
    let served = serve(RamFs::new(), Limits::default()).await?;
    let fsys = attach(&served.addr).await?;
    for dir in dirs {
        fsys.mkdir(dir, 0o755).await?;
    }
    fsys.close().await;
    Ok(served)
}

/// A mux with name space `lines`, for as many clients as the bench has.
async fn mux(lines: &str) -> Result<Served> {
    let mux = Mux::new(MuxConfig::default());
    mux.apply(nsfile::parse(lines)?)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.ename()))?;
    let limits = Limits {
        connections: 8192,
        ..Limits::default()
    };
    serve(mux, limits).await
}

async fn attach(addr: &str) -> Result<Fsys> {
    let client = Client::connect(addr)
        .await
        .with_context(|| addr.to_owned())?;
    Ok(client.attach("bench", "").await?)
}

fn names(path: &str) -> Result<Vec<Name>> {
    split_path(path).with_context(|| format!("{path:?}"))
}

/// One message suite in directory `dir` on a file of its own.
async fn suite(fsys: &Fsys, dir: &[Name], name: &str) -> Result<()> {
    let d = fsys.root().walk(dir).await?;
    let file = d.create(name, 0o644, O_RDWR).await?;
    file.write_at(0, "sixteen bytes...".into()).await?;
    file.close().await?;
    let mut path = dir.to_vec();
    path.push(Name::new(name).map_err(anyhow::Error::msg)?);
    let file = fsys.root().walk(&path).await?.open(O_RDWR).await?;
    file.read_at(0, 16).await?;
    file.stat().await?;
    let mode = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    file.fid().setattr(&mode).await?;
    file.close().await?;
    fsys.root().walk(&path).await?.remove().await?;
    Ok(())
}

/// Runs `clients` at once, each over its list of directories in turn from
/// its own start, until `duration` is up; the mean time of one message.
async fn suites(
    addr: &str,
    clients: usize,
    dirs: &[Vec<Name>],
    duration: Duration,
) -> Result<Duration> {
    let mut fsyses = Vec::with_capacity(clients);
    for _ in 0..clients {
        fsyses.push(attach(addr).await?);
    }
    let start = Instant::now() + Duration::from_millis(50);
    let deadline = start + duration;
    let tasks: Vec<JoinHandle<Result<Histogram>>> = fsyses
        .into_iter()
        .enumerate()
        .map(|(i, fsys)| {
            let dirs = dirs.to_vec();
            tokio::spawn(async move {
                let mut hist = Histogram::new();
                tokio::time::sleep_until(start).await;
                let name = format!("c{i}");
                let mut n = 0;
                while Instant::now() < deadline && n < MAX_SUITES {
                    let dir = &dirs[(i + n as usize) % dirs.len()];
                    let t = Instant::now();
                    suite(&fsys, dir, &name).await?;
                    hist.record(t.elapsed());
                    n += 1;
                }
                fsys.close().await;
                Ok(hist)
            })
        })
        .collect();
    let mut all = Histogram::new();
    for task in tasks {
        let hist = tokio::time::timeout(duration + Duration::from_secs(60), task)
            .await
            .context("a client did not finish")???;
        all.merge(&hist);
    }
    Ok(all.mean() / SUITE)
}

/// `n` ramfs servers mounted at /n/s0 ... (with -c), and the mux.
async fn mounted(n: usize) -> Result<(Vec<Served>, Served, Vec<Vec<Name>>)> {
    let mut servers = Vec::new();
    let mut lines = String::new();
    let mut dirs = Vec::new();
    for k in 0..n {
        let s = ramfs(&[]).await?;
        writeln!(lines, "mount -c {} /n/s{k}", s.addr)?;
        dirs.push(names(&format!("n/s{k}"))?);
        servers.push(s);
    }
    Ok((servers, mux(&lines).await?, dirs))
}

/// Measures `config`, calling `progress` with a line after each point.
pub async fn run(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Report> {
    ensure!(
        config.mounts.iter().all(|&m| (1..=16).contains(&m)),
        "1 to 16 mount points"
    );
    let mut series = Vec::new();

    let mut points = Vec::new();
    let (_servers, m, dirs) = mounted(1).await?;
    for &n in &config.clients {
        let lat = suites(&m.addr, n, &dirs, config.duration).await?;
        progress(&format!(
            "clients {n:>5}, 1 server: {:.1} µs",
            lat.as_secs_f64() * 1e6
        ));
        points.push((n, lat));
    }
    series.push(Series {
        title: "Clients, one server",
        x: "clients",
        file: "mux-clients",
        points,
    });
    drop(m);

    let mut points = Vec::new();
    for &n in &config.servers {
        let (_servers, m, dirs) = mounted(n).await?;
        let lat = suites(&m.addr, 1, &dirs, config.duration).await?;
        progress(&format!(
            "servers {n:>5}, 1 client: {:.1} µs",
            lat.as_secs_f64() * 1e6
        ));
        points.push((n, lat));
    }
    series.push(Series {
        title: "Servers, one client",
        x: "servers",
        file: "mux-servers",
        points,
    });

    let mut points = Vec::new();
    for &n in &config.both {
        let (_servers, m, dirs) = mounted(n).await?;
        let lat = suites(&m.addr, n, &dirs, config.duration).await?;
        progress(&format!(
            "clients = servers {n:>5}: {:.1} µs",
            lat.as_secs_f64() * 1e6
        ));
        points.push((n, lat));
    }
    series.push(Series {
        title: "Clients = servers",
        x: "clients and servers",
        file: "mux-both",
        points,
    });

    series.push(walks(config, progress).await?);
    series.push(unions(config, progress).await?);

    let [direct, forwarded, muxed] = hop(config, progress).await?;
    Ok(Report {
        series,
        direct,
        forwarded,
        muxed,
    })
}

/// The hop: the same null operation straight to a ramfs, through a
/// forwarder (the least a hop can cost) and through a mux with that ramfs
/// on its root, one run of each in turn.
pub async fn hop(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<[rtt::Report; 3]> {
    let s = ramfs(&[]).await?;
    let forwarder = Forwarder::start(&s.addr).await?;
    let m = mux(&format!("mount {} /", s.addr)).await?;
    let rtt_config = |addr: &str| rtt::Config {
        addr: addr.to_owned(),
        conns: config.hop_conns.clone(),
        duration: config.duration,
        baseline: false,
        ..rtt::Config::default()
    };
    let configs = [
        rtt_config(&s.addr),
        rtt_config(forwarder.addr()),
        rtt_config(&m.addr),
    ];
    let reports = rtt::compare(&configs, progress).await?;
    reports
        .try_into()
        .map_err(|_| anyhow::anyhow!("a report per server"))
}

/// A Twalk from the root crossing 1 to 16 mount points: one ramfs holds
/// d1 ... d16, each with a directory a; d1 is bound on /c, d2 on /c/a, d3
/// on /c/a/a, and so on.
async fn walks(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Series> {
    let mut dirs = Vec::new();
    for k in 1..=16 {
        dirs.push(format!("d{k}"));
        dirs.push(format!("d{k}/a"));
    }
    let s = ramfs(&dirs).await?;
    let mut lines = format!("mount {} /n/s\nbind /n/s/d1 /c\n", s.addr);
    for k in 2..=16 {
        writeln!(lines, "bind /n/s/d{k} /c{}", "/a".repeat(k - 1))?;
    }
    let m = mux(&lines).await?;
    let fsys = attach(&m.addr).await?;
    let mut points = Vec::new();
    for &k in &config.mounts {
        let mut path = vec![Name::new("c").map_err(anyhow::Error::msg)?];
        path.extend(names(&"a/".repeat(k - 1))?);
        let mut hist = Histogram::new();
        let deadline = Instant::now() + config.duration;
        while Instant::now() < deadline && hist.count() < MAX_SUITES {
            let t = Instant::now();
            let (_, fid) = fsys.root().walk_some(&path).await?;
            hist.record(t.elapsed());
            ensure!(fid.is_some(), "walk across {k} mount points stopped short");
        }
        progress(&format!(
            "walk across {k:>2} mount points: {:.1} µs",
            hist.mean().as_secs_f64() * 1e6
        ));
        points.push((k, hist.mean()));
    }
    Ok(Series {
        title: "Walk across mount points",
        x: "mount points",
        file: "mux-walk",
        points,
    })
}

/// The first read of a union of an empty directory bound 1 to 64 times.
async fn unions(config: &Config, progress: &mut dyn FnMut(&str)) -> Result<Series> {
    let s = ramfs(&["empty".into()]).await?;
    let mut points = Vec::new();
    for &members in &config.members {
        let mut lines = format!("mount {} /n/s\nbind /n/s/empty /u\n", s.addr);
        for _ in 1..members {
            lines += "bind -a /n/s/empty /u\n";
        }
        let m = mux(&lines).await?;
        let fsys = attach(&m.addr).await?;
        let mut hist = Histogram::new();
        let deadline = Instant::now() + config.duration;
        while Instant::now() < deadline && hist.count() < MAX_SUITES {
            let dir = fsys.open("u", O_RDONLY | O_DIRECTORY).await?;
            let msg = Treaddir {
                fid: dir.fid().number(),
                offset: 0,
                count: 8192,
            };
            let t = Instant::now();
            fsys.client().call(msg).await?;
            hist.record(t.elapsed());
        }
        progress(&format!(
            "union of {members:>2}: {:.1} µs",
            hist.mean().as_secs_f64() * 1e6
        ));
        points.push((members, hist.mean()));
    }
    Ok(Series {
        title: "Union directory read",
        x: "members",
        file: "mux-union",
        points,
    })
}

/// Writes one SVG plot per series into `dir`; returns their paths.
pub fn plot(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    let mut written = Vec::new();
    for s in &report.series {
        let path = dir.join(format!("{}.svg", s.file));
        let us = s
            .points
            .iter()
            .map(|(n, d)| (*n as f64, d.as_secs_f64() * 1e6))
            .collect();
        let chart = crate::plot::Chart {
            title: s.title.into(),
            x: s.x.into(),
            y: "µs per message".into(),
            curves: vec![(String::new(), us)],
        };
        chart.svg(&path)?;
        written.push(path);
    }
    Ok(written)
}
