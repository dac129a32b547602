//! A server on loopback behind a proxy whose connections can be cut for
//! real, for the tests of recovery.

// Each including test uses only part of this.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use ninep_server::{ResumeLimits, Server};
use ninep_transport::Addr;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// `server` with the resume extension turned off: a stock server, as far
/// as recovery goes.
pub fn stock<F: ninep_server::Filesystem>(server: Server<F>) -> Server<F> {
    server.set_resume_limits(ResumeLimits {
        sessions: 0,
        ..ResumeLimits::default()
    });
    server
}

/// A server on loopback behind a proxy whose connections can be cut, and
/// which can refuse new ones for a while, as a server that died and is
/// restarting does. A cut closes both sides: the server ends the session,
/// or keeps it for a take-over if it has a resume token.
pub struct Cuttable {
    pub addr: String,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    down: Arc<AtomicBool>,
    /// Connections served so far.
    pub served: Arc<AtomicUsize>,
    accepting: JoinHandle<()>,
    _server: ninep_server::Spawned,
}

impl Cuttable {
    pub async fn start<F: ninep_server::Filesystem>(server: Server<F>) -> Cuttable {
        let at: Addr = "tcp!127.0.0.1!0".parse().unwrap();
        let listener = at.listen().await.unwrap();
        let Addr::Tcp { port, .. } = listener.local_addr().unwrap() else {
            panic!("not tcp")
        };
        let upstream = format!("127.0.0.1:{port}");
        let spawned = server.spawn(listener);
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("tcp!127.0.0.1!{}", proxy.local_addr().unwrap().port());
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let down = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (held, refusing, count) = (connections.clone(), down.clone(), served.clone());
        let accepting = tokio::spawn(async move {
            loop {
                let (mut conn, _) = proxy.accept().await.unwrap();
                if refusing.load(SeqCst) {
                    drop(conn);
                    continue;
                }
                count.fetch_add(1, SeqCst);
                let mut up = TcpStream::connect(&upstream).await.unwrap();
                held.lock().push(tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                }));
            }
        });
        Cuttable {
            addr,
            connections,
            down,
            served,
            accepting,
            _server: spawned,
        }
    }

    /// Drops every connection, as a reset or a killed server does.
    pub fn cut(&self) {
        for task in self.connections.lock().drain(..) {
            task.abort();
        }
    }

    /// Refuses connections (hanging up at once) until `up`.
    pub fn down(&self) {
        self.down.store(true, SeqCst);
        self.cut();
    }

    pub fn up(&self) {
        self.down.store(false, SeqCst);
    }
}

impl Drop for Cuttable {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
