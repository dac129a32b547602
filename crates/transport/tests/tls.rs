//! TLS connections: the name in a client certificate reaches the server;
//! a missing, untrusted or expired certificate, plaintext, and a handshake
//! that stops half-way are each refused.

#[path = "support/certs.rs"]
mod certs;

use std::io::ErrorKind;
use std::time::Duration;

use certs::Certs;
use ninep_transport::{Addr, Dialer, Established, Listener, TlsClient, TlsServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn listen(certs: &Certs, timeout: Duration) -> (Listener, Addr) {
    let (cert, key) = certs.pair("server");
    let tls = TlsServer::from_files(&cert, &key, Some(&certs.ca()))
        .unwrap()
        .with_handshake_timeout(timeout);
    let addr: Addr = "tls!127.0.0.1!0".parse().unwrap();
    let listener = addr.listen_with(Some(tls)).await.unwrap();
    let bound = listener.local_addr().unwrap();
    (listener, bound)
}

fn dialer(certs: &Certs, who: Option<&str>) -> Dialer {
    let pair = who.map(|w| certs.pair(w));
    let identity = pair.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
    Dialer::with_tls(TlsClient::from_files(&certs.ca(), identity).unwrap())
}

/// Dials as `who` and says hello; the server's side of it.
async fn hello(certs: &Certs, who: Option<&str>) -> (std::io::Result<Established>, bool) {
    let (listener, addr) = listen(certs, Duration::from_secs(5)).await;
    let dialer = dialer(certs, who);
    let client = async {
        let mut stream = dialer.dial(&addr).await?;
        stream.write_all(b"hello").await?;
        let mut back = [0u8; 5];
        stream.read_exact(&mut back).await?;
        std::io::Result::Ok(back == *b"olleh")
    };
    let server = async {
        let established = listener.incoming().await.unwrap().establish().await;
        match established {
            Ok(Established::Ready(mut stream, peer)) => {
                let mut got = [0u8; 5];
                stream.read_exact(&mut got).await.unwrap();
                got.reverse();
                stream.write_all(&got).await.unwrap();
                stream.flush().await.unwrap();
                Ok(Established::Ready(stream, peer))
            }
            other => other,
        }
    };
    let (client, server) = tokio::join!(client, server);
    (server, client.unwrap_or(false))
}

#[tokio::test]
async fn the_client_certificates_name_reaches_the_server() {
    let certs = Certs::make("name", &["alice"]);
    let (server, echoed) = hello(&certs, Some("alice")).await;
    let Ok(Established::Ready(_, peer)) = server else {
        panic!("not established: {server:?}");
    };
    assert_eq!(peer.cert_name.as_deref(), Some("alice"));
    assert!(echoed);
}

#[tokio::test]
async fn missing_untrusted_and_expired_certificates_are_refused() {
    let certs = Certs::make("refused", &["alice"]);
    for who in [None, Some("stranger"), Some("expired")] {
        let (server, echoed) = hello(&certs, who).await;
        let err = server.expect_err(&format!("{who:?} was served"));
        assert_eq!(err.kind(), ErrorKind::InvalidData, "{who:?}: {err}");
        assert!(!echoed, "{who:?}");
        let why = err.to_string();
        let expected = match who {
            None => "peer sent no certificates",
            Some("stranger") => "UnknownIssuer",
            _ => "certificate expired",
        };
        assert!(why.contains(expected), "{who:?}: {why}");
    }
}

#[tokio::test]
async fn plaintext_to_a_tls_port_is_told_apart() {
    let certs = Certs::make("plain", &[]);
    let (listener, addr) = listen(&certs, Duration::from_secs(5)).await;
    let Addr::Tls { port, .. } = addr else {
        unreachable!()
    };
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // The start of a 9P Tversion.
    plain.write_all(&[19, 0, 0, 0, 100]).await.unwrap();
    let established = listener.incoming().await.unwrap().establish().await;
    assert!(
        matches!(established, Ok(Established::NotTls(..))),
        "{established:?}"
    );
}

#[tokio::test]
async fn a_handshake_that_stops_half_way_times_out() {
    let certs = Certs::make("half", &[]);
    let (listener, addr) = listen(&certs, Duration::from_millis(300)).await;
    let Addr::Tls { port, .. } = addr else {
        unreachable!()
    };
    let mut half = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // A TLS handshake record's header, promising more than ever comes.
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let err = listener
        .incoming()
        .await
        .unwrap()
        .establish()
        .await
        .expect_err("a half handshake");
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(3));
    // The server let go of the connection.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), half.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(_)) | Ok(Err(_))), "still open");
}
