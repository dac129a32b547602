//! Throughput and latency of the devices beside their baselines
//! (scripts/bench-devices runs it, built for release):
//!
//! - Presotto's Table 1: 64 KiB writes through a pipe, and a 1-byte
//!   ping-pong, for a Unix pipe, a socketpair, a ninep pipe in process (the
//!   stream queues alone) and a ninep pipe over loopback 9P.
//! - A ninep pipe over 9P at several high water marks.
//! - TCP through `ninep serve net` (dialled through its /net) beside
//!   direct TCP on loopback: bulk throughput both ways, and connect time
//!   in 9P round trips.
//!
//! `devbench [MIB]` moves MIB MiB (default 256) in each throughput run.
//! With `DEVBENCH_GATEWAY` set to the address of a `ninep serve net` of
//! its own (another process, as a gateway is), the TCP runs go through it
//! rather than through one served in this process.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ninep_client::{Client, Dialer, File, Options};
use ninep_devices::dial;
use ninep_devices::net::{NetFs, Options as NetOptions};
use ninep_devices::pipe::{Options as PipeOptions, PipeFs};
use ninep_server::queue::{Limits, Modules, Stream};
use ninep_server::{Filesystem, Server, Spawned};
use ninep_transport::Addr;
use ninep_wire::consts::dotl::O_RDWR;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WRITE: usize = 64 * 1024;
const PINGS: usize = 5000;

/// A Unix pipe's read and write ends.
fn pipe() -> (std::fs::File, std::fs::File) {
    let (r, w) = rustix::pipe::pipe().unwrap();
    (r.into(), w.into())
}

fn mb_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64() / 1e6
}

fn row(what: &str, throughput: f64, latency: Duration) {
    println!(
        "{what:<34} {throughput:>9.0} MB/s {:>9.1} µs",
        latency.as_secs_f64() * 1e6
    );
}

/// Writes `total` bytes in 64 KiB writes on one thread, reads on another.
fn os_throughput(mut w: impl Write + Send + 'static, mut r: impl Read, total: usize) -> f64 {
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        let buf = vec![7u8; WRITE];
        for _ in 0..total / WRITE {
            w.write_all(&buf).unwrap();
        }
    });
    let mut buf = vec![0u8; WRITE];
    let mut got = 0;
    while got < total {
        got += r.read(&mut buf).unwrap();
    }
    writer.join().unwrap();
    mb_per_s(total, start.elapsed())
}

/// A byte there and back `PINGS` times; the echo runs on another thread.
fn os_latency(
    mut out: impl Write,
    mut back: impl Read,
    mut echo_in: impl Read + Send + 'static,
    mut echo_out: impl Write + Send + 'static,
) -> Duration {
    let echo = std::thread::spawn(move || {
        let mut c = [0u8];
        for _ in 0..PINGS {
            echo_in.read_exact(&mut c).unwrap();
            echo_out.write_all(&c).unwrap();
        }
    });
    let mut c = [1u8];
    let start = Instant::now();
    for _ in 0..PINGS {
        out.write_all(&c).unwrap();
        back.read_exact(&mut c).unwrap();
    }
    echo.join().unwrap();
    start.elapsed() / PINGS as u32
}

/// As [`os_throughput`], the data copied in at the write and out at the
/// read as a system call copies it.
async fn stream_throughput(one: &Stream, two: &Stream, total: usize) -> f64 {
    let start = Instant::now();
    let write = async {
        let buf = vec![7u8; WRITE];
        for _ in 0..total / WRITE {
            one.write(Bytes::copy_from_slice(&buf)).await.unwrap();
        }
    };
    let read = async {
        let mut buf = vec![0u8; WRITE];
        let mut got = 0;
        while got < total {
            let data = two.read(WRITE).await;
            buf[..data.len()].copy_from_slice(&data);
            got += data.len();
        }
    };
    tokio::join!(write, read);
    mb_per_s(total, start.elapsed())
}

async fn stream_latency(one: &Stream, two: &Stream) -> Duration {
    let ping = async {
        let start = Instant::now();
        for _ in 0..PINGS {
            one.write(Bytes::from_static(b"x")).await.unwrap();
            one.read(1).await;
        }
        start.elapsed() / PINGS as u32
    };
    let echo = async {
        for _ in 0..PINGS {
            let c = two.read(1).await;
            two.write(c).await.unwrap();
        }
    };
    tokio::join!(ping, echo).0
}

async fn start<F: Filesystem>(fs: F) -> (Spawned, String) {
    let addr: Addr = "tcp!127.0.0.1!0".parse().unwrap();
    let listener = addr.listen().await.unwrap();
    let bound = listener.local_addr().unwrap().to_string();
    (Server::new(fs).spawn(listener), bound)
}

/// The two ends of a pipe served over loopback 9P, on two connections.
async fn pipe_ends(high_water: usize) -> (Spawned, File, File) {
    let options = PipeOptions {
        queue: Limits {
            high_water,
            ..Limits::default()
        },
        ..PipeOptions::default()
    };
    let (server, addr) = start(PipeFs::new(options)).await;
    let open = async |name| {
        let fsys = Client::connect(&addr).await.unwrap();
        let fsys = fsys.attach("bench", "").await.unwrap();
        fsys.open(name, O_RDWR).await.unwrap()
    };
    (server, open("data").await, open("data1").await)
}

async fn file_throughput(one: &File, two: &File, total: usize) -> f64 {
    let block = Bytes::from(vec![7u8; WRITE]);
    let start = Instant::now();
    let write = async {
        for _ in 0..total / WRITE {
            one.write_all_at(0, block.clone()).await.unwrap();
        }
    };
    let read = async {
        let mut got = 0;
        while got < total {
            got += two.read_at(0, WRITE as u32).await.unwrap().len();
        }
    };
    tokio::join!(write, read);
    mb_per_s(total, start.elapsed())
}

async fn file_latency(one: &File, two: &File) -> Duration {
    let ping = async {
        let start = Instant::now();
        for _ in 0..PINGS {
            one.write_at(0, Bytes::from_static(b"x")).await.unwrap();
            one.read_at(0, 1).await.unwrap();
        }
        start.elapsed() / PINGS as u32
    };
    let echo = async {
        for _ in 0..PINGS {
            let c = two.read_at(0, 1).await.unwrap();
            two.write_at(0, c).await.unwrap();
        }
    };
    tokio::join!(ping, echo).0
}

/// A loopback TCP server that swallows `total` bytes from each connection
/// and then sends `total` bytes back; its port.
async fn sink_and_source(total: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let mut got = 0;
                while got < total {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got += n,
                    }
                }
                let block = vec![7u8; 256 * 1024];
                let mut sent = 0;
                while sent < total {
                    if tcp.write_all(&block).await.is_err() {
                        return;
                    }
                    sent += block.len();
                }
                // Wait for the far end to finish reading before closing.
                let _ = tcp.read(&mut buf).await;
            });
        }
    });
    port
}

/// What one bulk run measured: MB/s each way, as the sender sees it, and
/// the CPU time this process spent per MiB moved (both ways), which the
/// machine's other load disturbs less than the rates.
#[derive(Debug, Clone, Copy)]
struct Bulk {
    send: f64,
    receive: f64,
    cpu_ms_per_mib: f64,
}

/// Runs in each median.
const RUNS: usize = 3;

/// CPU seconds process `pid` (none: this one) has used, all its threads.
fn cpu_seconds(pid: Option<u32>) -> f64 {
    let path = pid.map_or("/proc/self/stat".to_owned(), |pid| {
        format!("/proc/{pid}/stat")
    });
    let stat = std::fs::read_to_string(path).unwrap();
    // Fields after the command's closing parenthesis, from the third on:
    // utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}

/// Sends `total` bytes in 64 KiB writes then reads `total` back (the send
/// ends when the server starts answering).
async fn bulk(conn: &mut (impl AsyncReadExt + AsyncWriteExt + Unpin), total: usize) -> Bulk {
    let block = vec![7u8; WRITE];
    let cpu = cpu_seconds(None);
    let start = Instant::now();
    for _ in 0..total / WRITE {
        conn.write_all(&block).await.unwrap();
    }
    let mut buf = vec![0u8; 1024 * 1024];
    let mut got = conn.read(&mut buf).await.unwrap();
    let send = mb_per_s(total, start.elapsed());
    let start = Instant::now();
    while got < total {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "the source ended early");
        got += n;
    }
    let receive = mb_per_s(total, start.elapsed());
    let cpu_ms_per_mib = (cpu_seconds(None) - cpu) * 1e3 / (2 * (total >> 20)) as f64;
    conn.write_all(b"done").await.unwrap();
    Bulk {
        send,
        receive,
        cpu_ms_per_mib,
    }
}

/// The median of each figure of `runs`.
fn median(runs: &[Bulk]) -> Bulk {
    let of = |figure: fn(&Bulk) -> f64| {
        let mut all: Vec<f64> = runs.iter().map(figure).collect();
        all.sort_by(f64::total_cmp);
        all[all.len() / 2]
    };
    Bulk {
        send: of(|b| b.send),
        receive: of(|b| b.receive),
        cpu_ms_per_mib: of(|b| b.cpu_ms_per_mib),
    }
}

/// The same bulk runs through socat relaying to `port` from a process of
/// its own with 256 KiB buffers: a byte relay with no protocol, the bound
/// for any gateway that adds a hop and a process. Skipped without socat.
async fn relayed(port: u16, total: usize, direct: &Bulk) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_port = listener.local_addr().unwrap().port();
    drop(listener);
    let Ok(mut socat) = std::process::Command::new("socat")
        .args([
            "-b",
            "262144",
            &format!("TCP-LISTEN:{relay_port},bind=127.0.0.1,reuseaddr,fork"),
            &format!("TCP:127.0.0.1:{port}"),
        ])
        .spawn()
    else {
        println!("  through socat: skipped (no socat)");
        return;
    };
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut relay = loop {
            match TcpStream::connect(("127.0.0.1", relay_port)).await {
                Ok(tcp) => break tcp,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        runs.push(bulk(&mut relay, total).await);
    }
    let _ = socat.kill();
    let _ = socat.wait();
    let n = median(&runs);
    println!(
        "  through socat (a byte relay, its own process), median of {RUNS}: send {:.0} MB/s ({:.2}x direct), receive {:.0} MB/s ({:.2}x direct)",
        n.send,
        n.send / direct.send,
        n.receive,
        n.receive / direct.receive
    );
}

#[tokio::main]
async fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .map_or(256, |a| a.parse().expect("MiB to move"));
    let total = mib << 20;

    println!("Table 1 (Presotto): {mib} MiB in 64 KiB writes; 1-byte ping-pong");
    println!("{:<34} {:>14} {:>12}", "", "throughput", "latency");
    let (r, w) = pipe();
    let tp = os_throughput(w, r, total);
    let ((r1, w1), (r2, w2)) = (pipe(), pipe());
    row("Unix pipe", tp, os_latency(w1, r2, r1, w2));
    let (a, b) = UnixStream::pair().unwrap();
    let tp = os_throughput(a, b, total);
    let (a, b) = UnixStream::pair().unwrap();
    let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
    row("socketpair", tp, os_latency(a, a2, b, b2));
    let (one, two) = Stream::pipe(Limits::default(), Modules::default());
    let tp = stream_throughput(&one, &two, total).await;
    row(
        "ninep pipe, in process",
        tp,
        stream_latency(&one, &two).await,
    );
    let (_server, one, two) = pipe_ends(Limits::default().high_water).await;
    let tp = file_throughput(&one, &two, total).await;
    row(
        "ninep pipe, loopback 9P",
        tp,
        file_latency(&one, &two).await,
    );

    println!("\nninep pipe over loopback 9P by high water mark ({mib} MiB, 64 KiB writes)");
    for high_water in [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20] {
        let (_server, one, two) = pipe_ends(high_water).await;
        let tp = file_throughput(&one, &two, total).await;
        println!("  high water {:>5} KiB {tp:>9.0} MB/s", high_water >> 10);
    }

    println!("\nTCP on loopback, {mib} MiB each way");
    let port = sink_and_source(total).await;
    let target = format!("127.0.0.1!{port}");
    let mut runs = Vec::new();
    for _ in 0..RUNS {
        let mut direct = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        runs.push(bulk(&mut direct, total).await);
    }
    let direct = median(&runs);
    println!(
        "  direct (median of {RUNS}): send {:.0} MB/s, receive {:.0} MB/s, cpu {:.2} ms/MiB",
        direct.send, direct.receive, direct.cpu_ms_per_mib
    );
    relayed(port, total, &direct).await;
    let gateways = match std::env::var("DEVBENCH_GATEWAY") {
        Ok(gw) => vec![(format!("{gw} (its own process)"), None, gw)],
        Err(_) => {
            let mut in_process = Vec::new();
            for high_water in [64 << 10, 1 << 20] {
                let options = NetOptions {
                    queue: Limits {
                        high_water,
                        ..Limits::default()
                    },
                    ..NetOptions::default()
                };
                let (server, gw) = start(NetFs::new(options)).await;
                let what = format!("in process, high water {} KiB", high_water >> 10);
                in_process.push((what, Some(server), gw));
            }
            in_process
        }
    };
    // The gateway's own process, whose CPU time is then shown too.
    let gateway_pid: Option<u32> = std::env::var("DEVBENCH_GATEWAY_PID")
        .ok()
        .map(|pid| pid.parse().expect("a pid"));
    for (what, _server, gw) in &gateways {
        let through = format!("{gw}:/tcp!{target}");
        let gateway_cpu = gateway_pid.map(|pid| cpu_seconds(Some(pid)));
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            let mut call = dial::dial(&through, &Dialer::default(), &Options::default(), "bench")
                .await
                .unwrap();
            runs.push(bulk(&mut call, total).await);
        }
        let n = median(&runs);
        println!("  through /net ({what}), median of {RUNS}:");
        println!(
            "    send {:>6.0} MB/s ({:.2}x direct), receive {:>6.0} MB/s ({:.2}x direct), cpu {:.2} ms/MiB ({:.1}x direct)",
            n.send,
            n.send / direct.send,
            n.receive,
            n.receive / direct.receive,
            n.cpu_ms_per_mib,
            n.cpu_ms_per_mib / direct.cpu_ms_per_mib
        );
        if let (Some(pid), Some(before)) = (gateway_pid, gateway_cpu) {
            let moved = (RUNS * 2 * (total >> 20)) as f64;
            println!(
                "    the gateway's process: cpu {:.2} ms/MiB (all runs, both ways)",
                (cpu_seconds(Some(pid)) - before) * 1e3 / moved
            );
        }
    }

    // Connect time: a call through an attached gateway, beside one 9P
    // round trip on that session and a direct TCP connect.
    let gw = &gateways[0].2;
    let fsys = Client::connect(gw).await.unwrap();
    let fsys = fsys.attach("bench", "").await.unwrap();
    const CALLS: u32 = 200;
    let start = Instant::now();
    for _ in 0..CALLS {
        fsys.root().stat().await.unwrap();
    }
    let rtt = start.elapsed() / CALLS;
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    let direct = start.elapsed() / CALLS;
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(
            dial::call(&fsys, "/", &format!("tcp!{target}"))
                .await
                .unwrap(),
        );
    }
    let through = start.elapsed() / CALLS;
    println!(
        "  connect: direct {:.1} µs, through /net {:.1} µs = {:.1} round trips of {:.1} µs (a Tstat)",
        direct.as_secs_f64() * 1e6,
        through.as_secs_f64() * 1e6,
        through.as_secs_f64() / rtt.as_secs_f64(),
        rtt.as_secs_f64() * 1e6
    );
}
