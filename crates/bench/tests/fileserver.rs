//! The file-server benchmarks end to end, on small sizes: `io` (read, write,
//! list) and PostMark against ramfs and against a host directory exported
//! in this process, in every dialect, with an msize small enough that every
//! file takes several requests.

use std::path::PathBuf;

use ninep_bench::io::{self, Op, Target};
use ninep_bench::{postmark, remote};
use ninep_export::{Export, Options as ExportOptions};
use ninep_ramfs::RamFs;
use ninep_server::{Filesystem, Server};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Errno, IOHDRSZ};

/// A host directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("ninep-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn serve<F: Filesystem>(fs: F) -> String {
    let addr: ninep_transport::Addr = "tcp!127.0.0.1!0".parse().unwrap();
    let listener = addr.listen().await.unwrap();
    let bound = listener.local_addr().unwrap();
    tokio::spawn(async move {
        Server::new(fs)
            .serve_listener(listener, std::future::pending())
            .await
            .unwrap();
    });
    bound.to_string()
}

/// Room for 1000 bytes of data per request.
const MSIZE: u32 = 1000 + IOHDRSZ;

fn target(addr: &str, dialect: Dialect) -> Target {
    Target {
        addr: addr.to_owned(),
        dialect: Some(dialect),
        msize: MSIZE,
        uname: "root".into(),
        n_uname: 0,
        ..Target::default()
    }
}

async fn io_round_trip(addr: &str, dialect: Dialect) {
    let target = target(addr, dialect);
    let quiet = &mut |_: &str| {};
    let write = Op::Write {
        path: "f".into(),
        size: 10_500,
        remove: false,
    };
    let report = io::run(&target, &write, 2, quiet).await.unwrap();
    assert_eq!(
        (report.dialect, report.msize, report.iounit),
        (dialect, MSIZE, 1000)
    );
    assert_eq!(report.runs.len(), 2, "the second run truncates the first");
    for run in &report.runs {
        assert_eq!((run.bytes, run.requests), (10_500, 11));
    }
    let read = Op::Read { path: "f".into() };
    let report = io::run(&target, &read, 1, quiet).await.unwrap();
    let run = &report.runs[0];
    // Ten full reads, a short one, and the empty one that ends the file.
    assert_eq!((run.bytes, run.requests), (10_500, 12), "{dialect}");
    assert!(report.rate() > 0.0 && report.seconds() > 0.0);
    assert!(report.kv().contains(" bytes=10500 "), "{}", report.kv());

    // A shorter write leaves a shorter file; --remove leaves none.
    let shorter = Op::Write {
        path: "f".into(),
        size: 999,
        remove: false,
    };
    io::run(&target, &shorter, 1, quiet).await.unwrap();
    let report = io::run(&target, &read, 1, quiet).await.unwrap();
    assert_eq!(report.runs[0].bytes, 999);
    let gone = Op::Write {
        path: "g".into(),
        size: 1,
        remove: true,
    };
    io::run(&target, &gone, 1, quiet).await.unwrap();
    assert!(
        io::run(&target, &Op::Read { path: "g".into() }, 1, quiet)
            .await
            .is_err()
    );

    // A directory of 120 files with long names takes several reads.
    let fsys = target.attach().await.unwrap();
    fsys.mkdir("d", 0o755).await.unwrap();
    for i in 0..120 {
        let name = format!("d/a-rather-long-file-name-{i:04}");
        let file = fsys.create(&name, 0o644, dotl::O_WRONLY).await.unwrap();
        file.close().await.unwrap();
    }
    fsys.close().await;
    let report = io::run(&target, &Op::List { path: "d".into() }, 1, quiet)
        .await
        .unwrap();
    let run = &report.runs[0];
    assert_eq!(run.entries, 120, "{dialect}");
    assert!(run.requests > 3, "{dialect}: {} requests", run.requests);
    assert!(report.to_string().contains("entries/s"));
    assert!(
        io::run(
            &target,
            &Op::List {
                path: "nope".into()
            },
            1,
            quiet
        )
        .await
        .is_err()
    );
    assert!(io::run(&target, &read, 0, quiet).await.is_err());
}

async fn postmark_runs(addr: &str, dialect: Dialect) {
    let config = postmark::Config {
        target: target(addr, dialect),
        dir: "pm".into(),
        files: 20,
        min: 1,
        max: 2500,
        transactions: 200,
        seed: 9,
        ..postmark::Config::default()
    };
    let report = postmark::run(&config).await.unwrap();
    let c = &report.counts;
    assert!(matches!(report.served, postmark::Served::NineP { dialect: d, .. } if d == dialect));
    assert_eq!(c.created_alone, 20);
    assert_eq!(c.created_mixed + c.deleted_mixed, 200);
    assert!(c.read + c.appended <= 200 && c.read + c.appended >= 190);
    assert!(c.read > 0 && c.appended > 0, "{c:?}");
    assert_eq!(c.created(), c.deleted(), "every file is deleted at the end");
    assert!(c.bytes_read > 0 && c.bytes_written >= c.bytes_read / 4);
    assert!(report.transactions_per_sec() > 0.0);
    assert!(report.to_string().contains("transactions/s"));
    assert!(report.kv().contains(" tx_per_sec="));

    // The directory it made is gone; the same seed does the same again.
    let fsys = config.target.attach().await.unwrap();
    let err = fsys.walk("pm").await.unwrap_err();
    assert_eq!(err.errno(), Errno::ENOENT);
    fsys.close().await;
    let again = postmark::run(&config).await.unwrap();
    assert_eq!(again.counts, report.counts);

    // In a directory that exists, it leaves the directory empty.
    let fsys = config.target.attach().await.unwrap();
    fsys.mkdir("kept", 0o755).await.unwrap();
    fsys.close().await;
    let kept = postmark::Config {
        dir: "kept".into(),
        transactions: 20,
        ..config.clone()
    };
    postmark::run(&kept).await.unwrap();
    let fsys = config.target.attach().await.unwrap();
    assert!(fsys.read_dir("kept").await.unwrap().is_empty());
    fsys.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_and_postmark_on_ramfs() {
    for dialect in Dialect::ALL {
        let addr = serve(RamFs::new()).await;
        io_round_trip(&addr, dialect).await;
        postmark_runs(&addr, dialect).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_and_postmark_on_a_host_directory() {
    for dialect in Dialect::ALL {
        let dir = TempDir::new(&format!("{dialect}"));
        let export = Export::new(&dir.0, ExportOptions::default()).unwrap();
        let addr = serve(export).await;
        io_round_trip(&addr, dialect).await;
        let size = std::fs::metadata(dir.0.join("f")).unwrap().len();
        assert_eq!(size, 999, "the host sees what was written");
        postmark_runs(&addr, dialect).await;
        assert!(
            std::fs::read_dir(dir.0.join("kept"))
                .unwrap()
                .next()
                .is_none()
        );
    }
}

/// The bound makes the same files as the 9P workload, in as many round
/// trips as 9P takes requests (several pieces for the larger files), and
/// leaves nothing behind; the round trips alone are the same requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postmark_bound_runs_the_same_workload_on_the_host() {
    let dir = TempDir::new("bound");
    let addr = serve(Export::new(&dir.0, ExportOptions::default()).unwrap()).await;
    let config = postmark::Config {
        target: target(&addr, Dialect::L),
        dir: "pm".into(),
        files: 20,
        min: 1,
        max: 12_000,
        transactions: 300,
        seed: 5,
        ..postmark::Config::default()
    };
    let through_9p = postmark::run(&config).await.unwrap();
    let bound = postmark::bound::run(&config, &dir.0).await.unwrap();
    assert_eq!(bound.served, postmark::Served::Bound);
    assert_eq!(bound.counts, through_9p.counts);
    assert!(bound.counts.bytes_read > 0 && bound.counts.appended > 0);
    assert_eq!(bound.requests, through_9p.requests);
    assert_eq!(bound.transaction_requests, through_9p.transaction_requests);
    let trips = postmark::bound::round_trips(&config).await.unwrap();
    assert_eq!(trips.served, postmark::Served::RoundTrips);
    assert_eq!(trips.counts, through_9p.counts);
    assert_eq!(trips.requests, through_9p.requests);
    assert_eq!(trips.transaction_requests, through_9p.transaction_requests);
    assert!(
        trips.transaction_requests >= 2 * config.transactions,
        "{} requests in {} transactions",
        trips.transaction_requests,
        config.transactions
    );
    // A walk, open, read and clunk for a read is the least; larger files
    // take more reads and writes.
    let c = &bound.counts;
    let least = 4 * (c.created() + c.read + c.appended) + 2 * c.deleted();
    assert!(
        bound.requests > least,
        "{} requests, {least} at least",
        bound.requests
    );
    assert!(bound.kv().contains("served=bound"), "{}", bound.kv());
    assert!(
        std::fs::read_dir(&dir.0).unwrap().next().is_none(),
        "the directory it made is gone"
    );

    // A name the workload is about to create is taken: the create fails,
    // and so does the run, with the file system's reason.
    std::fs::create_dir(dir.0.join("pm")).unwrap();
    std::fs::write(dir.0.join("pm/pm0000000"), b"taken").unwrap();
    let err = postmark::bound::run(&config, &dir.0).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("Create of pm0000000"),
        "{err:#}"
    );
    for outside in ["/tmp/pm", "../pm"] {
        let outside = postmark::Config {
            dir: outside.into(),
            ..config.clone()
        };
        assert!(postmark::bound::run(&outside, &dir.0).await.is_err());
    }
}

#[tokio::test]
async fn postmark_refuses_bad_configs_and_unreachable_servers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = postmark::Config {
        target: Target {
            addr: format!("tcp!127.0.0.1!{port}"),
            ..Target::default()
        },
        ..postmark::Config::default()
    };
    assert!(postmark::run(&config).await.is_err());
    let bad = postmark::Config {
        min: 2,
        max: 1,
        ..config
    };
    let err = postmark::run(&bad).await.unwrap_err();
    assert!(err.to_string().contains("min above max"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_measures_every_figure_beside_its_baseline() {
    let dir = TempDir::new("remote");
    std::fs::create_dir(dir.0.join("sizes")).unwrap();
    std::fs::create_dir(dir.0.join("contend")).unwrap();
    for size in [1000, 5000] {
        std::fs::write(dir.0.join("sizes").join(size.to_string()), vec![1; size]).unwrap();
    }
    for i in 0..3 {
        std::fs::write(dir.0.join("contend").join(i.to_string()), vec![2; 10_000]).unwrap();
    }
    let addr = serve(Export::new(&dir.0, ExportOptions::default()).unwrap()).await;
    let config = remote::Config {
        target: target(&addr, Dialect::L),
        setups: 3,
        sizes: "sizes".into(),
        contend: "contend".into(),
        local: dir.0.join("contend"),
        readers: vec![1, 2],
        chunk: 4096,
        duration: std::time::Duration::from_millis(100),
    };
    let points = remote::run(&config, &mut |_| {}).await.unwrap();
    let figures: Vec<(&str, u64)> = points.iter().map(|p| (p.figure, p.x)).collect();
    assert_eq!(
        figures,
        [
            ("setup", 0),
            ("teardown", 0),
            ("read-size", 1000),
            ("read-size", 5000),
            ("contend-one", 1),
            ("contend-all", 1),
            ("contend-one", 2),
            ("contend-all", 2),
        ]
    );
    for p in &points {
        assert!(p.ninep > 0.0 && p.baseline > 0.0, "{p:?}");
    }
    let csv = remote::csv(&points);
    assert!(csv.starts_with("figure,x,ninep,baseline,unit\nsetup,0,"));
    assert_eq!(csv.lines().count(), 1 + points.len());

    let missing = remote::Config {
        sizes: "nowhere".into(),
        ..config
    };
    assert!(remote::run(&missing, &mut |_| {}).await.is_err());
}
