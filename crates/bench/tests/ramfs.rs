//! The round-trip benchmark end to end, briefly, against ramfs served in
//! this process on a loopback port: every dialect, both clients.

use std::time::Duration;

use ninep_bench::rtt::{self, ClientKind, Config};
use ninep_ramfs::RamFs;
use ninep_server::Server;
use ninep_wire::Dialect;

async fn serve_ramfs() -> String {
    let addr: ninep_transport::Addr = "tcp!127.0.0.1!0".parse().unwrap();
    let listener = addr.listen().await.unwrap();
    let bound = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let server = Server::new(RamFs::new());
        server
            .serve_listener(listener, std::future::pending())
            .await
            .unwrap();
    });
    bound.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measures_every_dialect_with_both_clients() {
    let addr = serve_ramfs().await;
    for dialect in Dialect::ALL {
        for client in [ClientKind::Ninep, ClientKind::Raw] {
            let config = Config {
                addr: addr.clone(),
                dialect: Some(dialect),
                duration: Duration::from_millis(50),
                conns: vec![3],
                repeats: 2,
                client,
                ..Config::default()
            };
            let mut lines = 0;
            let report = rtt::run(&config, &mut |_| lines += 1).await.unwrap();
            assert_eq!(lines, 4, "one line per run");
            assert_eq!(report.dialect, dialect);
            let (op, request) = match dialect {
                Dialect::L => ("Tgetattr", 7 + 4 + 8),
                _ => ("Tstat", 7 + 4),
            };
            assert_eq!((report.op, report.request_bytes), (op, request));
            assert!(report.reply_bytes > request, "{report}");
            let conns: Vec<usize> = report.rows.iter().map(|r| r.conns).collect();
            assert_eq!(conns, [1, 3]);
            for row in &report.rows {
                assert!(row.ninep.rate > 0.0, "{report}");
                assert_eq!(row.ninep.rates.len(), 2);
                assert!(row.ninep.p50 > Duration::ZERO && row.ninep.p50 <= row.ninep.p99);
                assert!(row.ratio().is_some_and(|r| r > 0.0), "{report}");
            }
            let table = report.to_string();
            assert!(table.contains("9P ops/s") && table.contains("TCP round trips/s"));
        }
    }
}

#[tokio::test]
async fn op_count_bounds_a_run() {
    let addr = serve_ramfs().await;
    let config = Config {
        addr,
        duration: Duration::from_secs(30),
        conns: vec![2],
        repeats: 1,
        max_ops: 50,
        baseline: false,
        ..Config::default()
    };
    let started = std::time::Instant::now();
    let report = rtt::run(&config, &mut |_| {}).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        report
            .rows
            .iter()
            .all(|r| r.tcp.is_none() && r.ratio().is_none())
    );
}

#[tokio::test]
async fn unreachable_server_fails() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = Config {
        addr: format!("tcp!127.0.0.1!{port}"),
        ..Config::default()
    };
    assert!(rtt::run(&config, &mut |_| {}).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hop_is_measured_direct_forwarded_and_muxed() {
    let config = ninep_bench::mux::Config {
        duration: Duration::from_millis(50),
        hop_conns: vec![2],
        ..Default::default()
    };
    let mut lines = 0;
    let [direct, forwarded, muxed] = ninep_bench::mux::hop(&config, &mut |_| lines += 1)
        .await
        .unwrap();
    assert_eq!(lines, 6, "one line per repeat and count");
    for report in [&direct, &forwarded, &muxed] {
        let conns: Vec<usize> = report.rows.iter().map(|r| r.conns).collect();
        assert_eq!(conns, [1, 2]);
        assert!(report.rows.iter().all(|r| r.ninep.rate > 0.0), "{report}");
    }
    // Three servers, three addresses: the runs did not all go to one.
    assert_ne!(direct.addr, forwarded.addr);
    assert_ne!(direct.addr, muxed.addr);
    let mut table = String::new();
    ninep_bench::mux::hop_table(&mut table, &direct, &forwarded, &muxed).unwrap();
    assert_eq!(table.lines().count(), 4, "{table}");
}
