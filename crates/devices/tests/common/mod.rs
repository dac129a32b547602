//! Starting device servers on loopback for the tests.

use ninep_client::{Client, Fsys, Options};
use ninep_server::{Filesystem, Server, Spawned};
use ninep_transport::Addr;
use ninep_wire::Dialect;

/// `fs` served on a fresh loopback port: the server and its address.
pub async fn start<F: Filesystem>(fs: F) -> (Spawned, String) {
    let addr: Addr = "tcp!127.0.0.1!0".parse().unwrap();
    let listener = addr.listen().await.unwrap();
    let bound = listener.local_addr().unwrap().to_string();
    (Server::new(fs).spawn(listener), bound)
}

/// A session with the server at `addr`, attached as `uname` to `aname`,
/// in 9P2000.u so that errors carry their strings.
pub async fn attach(addr: &str, uname: &str, aname: &str) -> Fsys {
    let options = Options {
        dialect: Some(Dialect::U),
        ..Options::default()
    };
    let client = Client::connect_with(addr, options).await.unwrap();
    client.attach(uname, aname).await.unwrap()
}

/// The names in directory `path`, sorted.
pub async fn names(fsys: &Fsys, path: &str) -> Vec<String> {
    let mut names: Vec<String> = fsys
        .read_dir(path)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    names
}
