//! Who may attach to what we serve, as flags (`--auth`), and the TLS a
//! server listens with and a client dials with.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ninep_client::Munge as MungeProver;
use ninep_export::users::UserDb;
use ninep_server::Policy;
use ninep_server::auth::CertNames;
use ninep_server::auth::munge::Munge;
use ninep_transport::{Dialer, HANDSHAKE_TIMEOUT, TlsClient, TlsServer};

/// What may prove the user an attach names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Proof {
    /// Nothing: anyone is served as whoever they name.
    None,
    /// A MUNGE credential written to an afid, as diod takes it.
    Munge,
    /// The client certificate of a tls! connection.
    Tls,
    /// The uid of the process at the other end of a unix! socket.
    Peercred,
}

/// The flags of a server's policy.
#[derive(clap::Args)]
pub struct PolicyArgs {
    /// What proves an attach's user: none, munge, tls or peercred (several
    /// separated by commas). Attaches none of them proves are refused.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none")]
    auth: Vec<Proof>,
    /// munged's socket, if not MUNGE's default one.
    #[arg(long, value_name = "PATH")]
    munge_socket: Option<PathBuf>,
    /// The server's certificate chain (PEM), for a tls! address.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The key of the server's certificate (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM); with --auth
    /// tls, the name in one is its user.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Map certificate names to users by this file's rules (a line each:
    /// the name in a certificate, then the user's as the last word); by
    /// default a
    /// certificate's name is its user's (CN=uname).
    #[arg(long, value_name = "FILE", requires = "tls_client_ca")]
    tls_names: Option<PathBuf>,
    /// Seconds a TLS handshake may take before the connection is dropped.
    #[arg(long, value_name = "SECS", default_value_t = HANDSHAKE_TIMEOUT.as_secs_f64())]
    tls_handshake_timeout: f64,
}

impl PolicyArgs {
    /// True if `proof` is among those allowed.
    pub fn allows(&self, proof: Proof) -> bool {
        self.auth.contains(&proof)
    }

    /// The policy the flags say.
    pub fn policy(&self) -> Result<Policy> {
        if self.allows(Proof::None) {
            if self.auth.len() > 1 {
                bail!("--auth none cannot go with other proofs: it lets anyone in");
            }
            return Ok(Policy::open());
        }
        let mut policy = Policy::required(Arc::new(UserDb::default()));
        if self.allows(Proof::Munge) {
            policy = policy.with_scheme(Arc::new(Munge {
                socket: self.munge_socket.clone(),
            }));
        }
        if self.allows(Proof::Peercred) {
            policy = policy.with_peercred();
        }
        if self.allows(Proof::Tls) {
            if self.tls_client_ca.is_none() {
                bail!("--auth tls needs --tls-client-ca: whose certificates prove users");
            }
            let names = match &self.tls_names {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| path.display().to_string())?;
                    CertNames::parse(&text)
                        .map_err(anyhow::Error::msg)
                        .with_context(|| path.display().to_string())?
                }
                None => CertNames::same(),
            };
            policy = policy.with_tls(names);
        }
        Ok(policy)
    }

    /// The server's side of TLS, if it has a certificate.
    pub fn tls(&self) -> Result<Option<TlsServer>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let timeout = Duration::try_from_secs_f64(self.tls_handshake_timeout)
            .context("--tls-handshake-timeout")?;
        let tls = TlsServer::from_files(cert, key, self.tls_client_ca.as_deref())?;
        Ok(Some(tls.with_handshake_timeout(timeout)))
    }
}

/// How a client reaches a server and proves itself: TLS (for tls!
/// addresses) and MUNGE.
#[derive(clap::Args, Clone)]
pub struct ClientArgs {
    /// How to prove who we are through Tauth: none, or munge (a MUNGE
    /// credential, as diod's tools send).
    #[arg(long, value_enum, default_value = "none")]
    pub auth: ClientProof,
    /// munged's socket, if not MUNGE's default one.
    #[arg(long, value_name = "PATH")]
    pub munge_socket: Option<PathBuf>,
    /// Trust servers whose certificates this CA signed (PEM), for tls!
    /// addresses.
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<PathBuf>,
    /// Present this certificate chain (PEM) to a tls! server.
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// The key of our certificate (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

/// What we prove ourselves with through Tauth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientProof {
    /// Nothing: attach as whoever we name.
    None,
    /// A MUNGE credential.
    Munge,
}

/// How a mux reaches its servers and proves itself: TLS for their tls!
/// addresses, and MUNGE.
#[derive(clap::Args)]
pub struct UpstreamArgs {
    /// How the mux proves its --uname to servers and gateways that ask
    /// through Tauth: none, or munge (a MUNGE credential of the user the
    /// mux runs as).
    #[arg(long, value_enum, default_value = "none")]
    upstream_auth: ClientProof,
    /// munged's socket for --upstream-auth munge, if not MUNGE's default.
    #[arg(long, value_name = "PATH")]
    upstream_munge_socket: Option<PathBuf>,
    /// Trust servers whose certificates this CA signed (PEM), for tls!
    /// addresses in mount lines.
    #[arg(long, value_name = "PEM")]
    upstream_tls_ca: Option<PathBuf>,
    /// Present this certificate chain (PEM) to tls! servers.
    #[arg(long, value_name = "PEM", requires_all = ["upstream_tls_key", "upstream_tls_ca"])]
    upstream_tls_cert: Option<PathBuf>,
    /// The key of that certificate (PEM).
    #[arg(long, value_name = "PEM", requires = "upstream_tls_cert")]
    upstream_tls_key: Option<PathBuf>,
}

impl UpstreamArgs {
    /// What proves the mux's user to servers, if anything.
    pub fn prover(&self) -> Option<MungeProver> {
        prover(self.upstream_auth, &self.upstream_munge_socket)
    }

    /// How to dial servers.
    pub fn dialer(&self) -> Result<Dialer> {
        dialer(
            self.upstream_tls_ca.as_ref(),
            self.upstream_tls_cert.as_ref(),
            self.upstream_tls_key.as_ref(),
        )
    }
}

/// A dialer with TLS if a CA is given, presenting the certificate and key
/// if those are.
fn dialer(ca: Option<&PathBuf>, cert: Option<&PathBuf>, key: Option<&PathBuf>) -> Result<Dialer> {
    let Some(ca) = ca else {
        return Ok(Dialer::default());
    };
    let identity = cert.map(PathBuf::as_path).zip(key.map(PathBuf::as_path));
    Ok(Dialer::with_tls(TlsClient::from_files(ca, identity)?))
}

impl ClientArgs {
    /// Whether a certificate names the user to tls! servers.
    pub fn presents_certificate(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// How to dial: with TLS if a CA was given.
    pub fn dialer(&self) -> Result<Dialer> {
        dialer(
            self.tls_ca.as_ref(),
            self.tls_cert.as_ref(),
            self.tls_key.as_ref(),
        )
    }

    /// What proves us through Tauth, if anything.
    pub fn prover(&self) -> Option<MungeProver> {
        prover(self.auth, &self.munge_socket)
    }
}

/// The prover of `proof`, asking munged at `socket` (MUNGE's default one
/// if none).
fn prover(proof: ClientProof, socket: &Option<PathBuf>) -> Option<MungeProver> {
    match proof {
        ClientProof::None => None,
        ClientProof::Munge => Some(MungeProver {
            socket: socket.clone(),
        }),
    }
}
