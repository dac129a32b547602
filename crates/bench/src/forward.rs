//! The least a hop can cost: a proxy that copies bytes between each client
//! and one server without reading a message. Beside the mux it shows what
//! one more pass through a socket pair and a process costs on this machine.

use std::io;

use ninep_transport::Addr;
use tokio::task::{JoinHandle, JoinSet};

/// A forwarder on loopback; dropping it closes it and its connections.
#[derive(Debug)]
pub struct Forwarder {
    addr: String,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// Listens on a free loopback port and forwards each connection to `to`.
    pub async fn start(to: &str) -> io::Result<Forwarder> {
        let to: Addr = to
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let here: Addr = "tcp!127.0.0.1!0"
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let listener = here.listen().await?;
        let addr = listener.local_addr()?.to_string();
        let task = tokio::spawn(async move {
            // Held here, so that aborting the task drops every connection.
            let mut conns = JoinSet::new();
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                };
                let Ok((mut client, _)) = accepted else {
                    return;
                };
                let to = to.clone();
                conns.spawn(async move {
                    if let Ok(mut server) = to.dial().await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        Ok(Forwarder { addr, task })
    }

    /// Its dial string.
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}
