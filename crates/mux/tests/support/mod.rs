//! Servers for the mux's tests, each on a free loopback port and stopped
//! when its handle is dropped (or by `stop`).

// Each test file uses part of this.
#![allow(dead_code)]

use ninep_client::{Client, Fsys, Options};
use ninep_mux::{Config, Mux, nsfile};
use ninep_ramfs::RamFs;
use ninep_server::{Filesystem, Limits, Server, Spawned};
use ninep_wire::Dialect;

/// A server listening on loopback; dropping it stops the server.
pub struct Running {
    pub addr: String,
    server: Spawned,
}

impl Running {
    /// Stops the server: every connection ends, and with it every request.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

/// Serves `fs` on a free loopback port.
pub async fn serve<F: Filesystem>(fs: F, limits: Limits) -> Running {
    serve_on("tcp!127.0.0.1!0", fs, limits).await
}

/// Serves `fs` at `addr` (a dial string; port 0 for a free one).
pub async fn serve_on<F: Filesystem>(addr: &str, fs: F, limits: Limits) -> Running {
    let addr: ninep_transport::Addr = addr.parse().unwrap();
    let listener = addr.listen().await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = Server::with_limits(fs, limits).spawn(listener);
    Running { addr, server }
}

pub async fn ramfs() -> Running {
    serve(RamFs::new(), Limits::default()).await
}

/// A mux with the base name space `lines`.
pub async fn mux(lines: &str) -> Mux {
    mux_with(Config::default(), lines).await
}

/// A mux configured as `config` with the base name space `lines`.
pub async fn mux_with(config: Config, lines: &str) -> Mux {
    let mux = Mux::new(config);
    mux.apply(nsfile::parse(lines).unwrap()).await.unwrap();
    mux
}

/// A mux with the base name space `lines`, serving on loopback.
pub async fn serve_mux(lines: &str) -> Running {
    serve(mux(lines).await, Limits::default()).await
}

/// Connects to `addr` in `dialect` and attaches.
pub async fn attach(addr: &str, dialect: Dialect) -> Fsys {
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    let client = Client::connect_with(addr, options).await.unwrap();
    assert_eq!(client.dialect(), dialect);
    client.attach("glenda", "").await.unwrap()
}

/// The sorted names in a directory.
pub async fn names(fsys: &Fsys, path: &str) -> Vec<String> {
    let mut names: Vec<String> = fsys
        .read_dir(path)
        .await
        .unwrap_or_else(|e| panic!("read_dir {path}: {e}"))
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    names
}

/// A ramfs holding `paths`: directories end in `/`, files hold their name.
pub async fn ramfs_with(paths: &[&str]) -> Running {
    let ram = ramfs().await;
    let fsys = Client::connect(&ram.addr)
        .await
        .unwrap()
        .attach("glenda", "")
        .await
        .unwrap();
    for path in paths {
        match path.strip_suffix('/') {
            Some(dir) => {
                fsys.mkdir(dir, 0o755).await.unwrap();
            }
            None => {
                let file = fsys
                    .create(path, 0o644, ninep_wire::consts::dotl::O_WRONLY)
                    .await
                    .unwrap();
                file.write_all_at(0, path.to_string().into()).await.unwrap();
            }
        }
    }
    fsys.close().await;
    ram
}
