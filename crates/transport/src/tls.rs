//! TLS for 9P connections (`tls!host!port`), with rustls.
//!
//! A server presents its certificate and, given a CA, requires each client
//! to present a certificate that CA signed; the client certificate's name
//! (its subject's common name) is then the peer's [`cert_name`], for the
//! server's policy to map to a user. A client checks the server's
//! certificate against its own CA (the name checked is the host dialed)
//! and may present a certificate of its own.
//!
//! A handshake must finish within the server's handshake timeout, or the
//! connection is dropped with all it held.
//!
//! [`cert_name`]: crate::Peer::cert_name

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The socket under TLS, read through a buffer of [`SOCKET_BUFFER`] bytes:
/// rustls reads at most 4 KiB at a time from what it is given (growing to
/// one record, 16 KiB), so reading the socket directly would cost a system
/// call per few KiB of a bulk transfer.
pub(crate) type Socket = BufReader<TcpStream>;

/// Bytes read from the socket at a time under TLS: four records. Each
/// connection holds this from its handshake on, so it is kept small.
const SOCKET_BUFFER: usize = 64 * 1024;

fn buffered(tcp: TcpStream) -> Socket {
    BufReader::with_capacity(SOCKET_BUFFER, tcp)
}

/// The most bytes rustls takes from a write before the socket has taken
/// what it encrypted: a whole frame of the default msize (1 MiB and a
/// header). Under its default (64 KiB) a large Rread is encrypted and
/// written in sixteen rounds; whole, it costs both ends about a tenth
/// less CPU per byte read (docs/auth.md). It bounds what a connection
/// holds for a peer that does not read, as the default did.
const SEND_BUFFER: usize = (1 << 20) + 64 * 1024;

/// How long a server waits for a handshake to finish unless told.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first byte of a TLS handshake record: a connection that opens with
/// anything else does not speak TLS.
const HANDSHAKE_RECORD: u8 = 0x16;

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.into())
}

/// ring's suites, AES-128-GCM first (the first of TLS 1.3's, and the
/// cheapest per byte where the CPU does AES: four fewer rounds than
/// AES-256's), then the rest in ring's order. A server picks by its own
/// order.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|suite| *suite != TLS13_AES_128_GCM_SHA256);
    Arc::new(provider)
}

fn certificates(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format!("{}: no certificate", path.display())));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| invalid(format!("{}: {e}", path.display())))
}

fn roots(ca: &Path) -> io::Result<Arc<RootCertStore>> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("{}: {e}", ca.display())))?;
    }
    Ok(Arc::new(roots))
}

fn tls_error(e: rustls::Error) -> io::Error {
    invalid(e.to_string())
}

/// A server's side of TLS: its certificate, and whose client certificates
/// it takes.
#[derive(Clone)]
pub struct TlsServer {
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("handshake_timeout", &self.handshake_timeout)
            .finish()
    }
}

impl TlsServer {
    /// The certificate chain in `cert` and its key in `key` (PEM files);
    /// with `client_ca`, a client must present a certificate it signed.
    pub fn from_files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> io::Result<TlsServer> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?;
        let builder = match client_ca {
            Some(ca) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca)?, provider())
                    .build()
                    .map_err(|e| invalid(format!("{}: {e}", ca.display())))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certificates(cert)?, private_key(key)?)
            .map_err(tls_error)?;
        Ok(TlsServer {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            handshake_timeout: HANDSHAKE_TIMEOUT,
        })
    }

    /// The same, giving up on a handshake after `timeout`.
    pub fn with_handshake_timeout(mut self, timeout: Duration) -> TlsServer {
        self.handshake_timeout = timeout;
        self
    }

    /// Runs the server's side of the handshake on `tcp`, within the
    /// timeout: the stream, and the name in the client's certificate if it
    /// presented one; or `tcp` back as it came, if the peer opened with
    /// something other than TLS.
    pub(crate) async fn accept(&self, tcp: TcpStream) -> io::Result<Accepted> {
        let handshake = async {
            let mut first = [0u8; 1];
            if tcp.peek(&mut first).await? == 1 && first[0] != HANDSHAKE_RECORD {
                return Ok(Accepted::NotTls(tcp));
            }
            let mut stream = self.acceptor.accept(buffered(tcp)).await?;
            stream.get_mut().1.set_buffer_limit(Some(SEND_BUFFER));
            let name = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(common_name);
            Ok(Accepted::Tls(Box::new(stream), name))
        };
        tokio::time::timeout(self.handshake_timeout, handshake)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))?
    }
}

/// What came of a server's handshake.
pub(crate) enum Accepted {
    /// TLS, and the name in the client's certificate.
    Tls(Box<tokio_rustls::server::TlsStream<Socket>>, Option<String>),
    /// Not TLS at all.
    NotTls(TcpStream),
}

/// The subject common name of a certificate.
fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert).ok()?;
    let name = cert.subject().iter_common_name().next()?.as_str().ok()?;
    Some(name.to_owned())
}

/// A client's side of TLS: whose server certificates it trusts, and the
/// certificate it presents, if any.
#[derive(Clone)]
pub struct TlsClient {
    connector: TlsConnector,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").finish_non_exhaustive()
    }
}

impl TlsClient {
    /// Trusts servers whose certificates `ca` signed (a PEM file);
    /// presents the certificate chain and key in `identity`, if given.
    pub fn from_files(ca: &Path, identity: Option<(&Path, &Path)>) -> io::Result<TlsClient> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_root_certificates(roots(ca)?);
        let config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                .map_err(tls_error)?,
            None => builder.with_no_client_auth(),
        };
        Ok(TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Runs the client's side of the handshake with `host` on `tcp`.
    pub(crate) async fn connect(
        &self,
        host: &str,
        tcp: TcpStream,
    ) -> io::Result<tokio_rustls::client::TlsStream<Socket>> {
        let name =
            ServerName::try_from(host.to_owned()).map_err(|e| invalid(format!("{host}: {e}")))?;
        let mut stream = self.connector.connect(name, buffered(tcp)).await?;
        stream.get_mut().1.set_buffer_limit(Some(SEND_BUFFER));
        Ok(stream)
    }
}
