//! Who may attach to what we serve, as flags (`--auth`), and how we prove
//! who we are to a server that asks.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use ninep_export::users::UserDb;
use ninep_server::Policy;
use ninep_server::auth::munge::Munge;

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
        Ok(policy)
    }
}
