//! What proving users costs (run by scripts/bench-auth): reading a whole
//! file, the latency of a null operation (Tgetattr of the root, one at a
//! time), and the time an authenticated attach takes, connection and
//! handshake included.
//!
//! auth_bench ADDR [--tls-ca CA --tls-cert CERT --tls-key KEY]
//!            [--munge SOCKET] [--uname NAME] [--file PATH] [--nulls N]
//!            [--attaches N]
//!
//! Prints one line per figure: `read_mib_s`, `null_us` (median) and
//! `attach_ms` (median).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ninep_client::{Client, Dialer, Fsys, Mode, Munge, Options, TlsClient, Transfer};
use ninep_wire::NONUNAME;
use ninep_wire::consts::dotl::O_RDONLY;

#[derive(Default)]
struct Args {
    addr: String,
    tls: Option<(PathBuf, PathBuf, PathBuf)>,
    munge: Option<PathBuf>,
    uname: String,
    file: Option<String>,
    nulls: usize,
    attaches: usize,
}

fn parse() -> Args {
    let mut args = Args {
        uname: "root".into(),
        nulls: 10_000,
        attaches: 50,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    let (mut ca, mut cert, mut key) = (None, None, None);
    while let Some(arg) = it.next() {
        let mut value = || it.next().expect("a value after each flag");
        match arg.as_str() {
            "--tls-ca" => ca = Some(PathBuf::from(value())),
            "--tls-cert" => cert = Some(PathBuf::from(value())),
            "--tls-key" => key = Some(PathBuf::from(value())),
            "--munge" => args.munge = Some(PathBuf::from(value())),
            "--uname" => args.uname = value(),
            "--file" => args.file = Some(value()),
            "--nulls" => args.nulls = value().parse().expect("a count"),
            "--attaches" => args.attaches = value().parse().expect("a count"),
            addr => args.addr = addr.to_owned(),
        }
    }
    if let (Some(ca), Some(cert), Some(key)) = (ca, cert, key) {
        args.tls = Some((ca, cert, key));
    }
    args
}

async fn attach(args: &Args, dialer: &Dialer) -> Fsys {
    let client = Client::dial(&args.addr, dialer, Options::default())
        .await
        .expect("connect");
    let fsys = match &args.munge {
        Some(socket) => {
            let munge = Munge {
                socket: Some(socket.clone()),
            };
            client
                .attach_proven(&args.uname, NONUNAME, "", &munge)
                .await
        }
        None => client.attach(&args.uname, "").await,
    };
    fsys.expect("attach")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let args = parse();
    let dialer = match &args.tls {
        Some((ca, cert, key)) => Dialer::with_tls(
            TlsClient::from_files(ca, Some((cert.as_path(), key.as_path()))).expect("TLS"),
        ),
        None => Dialer::default(),
    };
    let fsys = attach(&args, &dialer).await;
    if let Some(path) = &args.file {
        let file = fsys.open(path, O_RDONLY).await.expect("open");
        let started = Instant::now();
        let mut read = file
            .read_range(0, None, Transfer::new(Mode::Auto))
            .await
            .expect("read");
        let mut total = 0u64;
        while let Some(piece) = read.next().await.expect("read") {
            total += piece.len() as u64;
        }
        let secs = started.elapsed().as_secs_f64();
        println!("read_mib_s {:.0}", total as f64 / secs / (1 << 20) as f64);
    }
    if args.nulls > 0 {
        let root = fsys.root();
        let mut samples = Vec::with_capacity(args.nulls);
        for _ in 0..args.nulls {
            let started = Instant::now();
            root.stat().await.expect("stat");
            samples.push(started.elapsed());
        }
        println!("null_us {:.1}", median(samples).as_secs_f64() * 1e6);
    }
    if args.attaches > 0 {
        let mut samples = Vec::with_capacity(args.attaches);
        for _ in 0..args.attaches {
            let started = Instant::now();
            let fsys = attach(&args, &dialer).await;
            samples.push(started.elapsed());
            fsys.close().await;
        }
        println!("attach_ms {:.2}", median(samples).as_secs_f64() * 1e3);
    }
}
