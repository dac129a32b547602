//! The physical limit: a raw TCP ping-pong over loopback. An echo-style
//! server reads a request of N bytes and answers M bytes; a client writes N
//! and reads M, one round trip at a time. With N and M the sizes of a 9P
//! request and its reply, no 9P client and server pair can beat it on the same
//! machine.
//!
//! The server runs on a tokio runtime of its own, on its own threads, as a
//! 9P server in another process has its own; the clients run on the caller's.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A ping-pong server on `127.0.0.1:0`. Dropping it stops it.
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    request: usize,
    reply: usize,
    stop: Option<oneshot::Sender<()>>,
}

impl EchoServer {
    /// Starts a server that answers every `request` bytes with `reply` bytes,
    /// on as many threads as the machine has cores.
    pub fn start(request: usize, reply: usize) -> io::Result<EchoServer> {
        if request == 0 || reply == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ping-pong sizes must be positive",
            ));
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("pingpong-server")
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("pingpong-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        () = accept_loop(listener, request, reply) => {}
                        _ = stopped => {}
                    }
                });
                // Connections still open are dropped with the runtime.
                runtime.shutdown_background();
            })?;
        Ok(EchoServer {
            addr,
            request,
            reply,
            stop: Some(stop),
        })
    }

    /// Connects a client to this server.
    pub async fn connect(&self) -> io::Result<PingPong> {
        let stream = TcpStream::connect(self.addr).await?;
        stream.set_nodelay(true)?;
        Ok(PingPong {
            stream,
            request: vec![0x9b; self.request],
            reply: vec![0; self.reply],
        })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn accept_loop(listener: TcpListener, request: usize, reply: usize) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: let some connections end.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let _ = echo(stream, request, reply).await;
        });
    }
}

async fn echo(mut stream: TcpStream, request: usize, reply: usize) -> io::Result<()> {
    let mut buf = vec![0; request];
    let answer = vec![0x9b; reply];
    loop {
        match stream.read_exact(&mut buf).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        stream.write_all(&answer).await?;
    }
}

/// One client connection of the ping-pong.
#[derive(Debug)]
pub struct PingPong {
    stream: TcpStream,
    request: Vec<u8>,
    reply: Vec<u8>,
}

impl PingPong {
    /// One round trip: writes the request, reads the whole reply.
    pub async fn round_trip(&mut self) -> io::Result<()> {
        self.stream.write_all(&self.request).await?;
        self.stream.read_exact(&mut self.reply).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trips() {
        let server = EchoServer::start(19, 160).unwrap();
        let mut a = server.connect().await.unwrap();
        let mut b = server.connect().await.unwrap();
        for _ in 0..100 {
            a.round_trip().await.unwrap();
            b.round_trip().await.unwrap();
        }
        assert!(EchoServer::start(0, 1).is_err());
    }
}
