//! Flags shared by the subcommands that talk to a server.

use std::time::Duration;

use anyhow::{Context, Result};
use ninep_client::{Client, Fsys, Options, Prover, Recovery};
use ninep_devices::dial::{Gateways, Route, connect_as, route};

use crate::auth::ClientArgs;
use ninep_wire::{Dialect, NONUNAME};

/// The server to talk to and how to attach to it.
#[derive(clap::Args)]
pub struct ServerArgs {
    /// Server address: tcp!host!port, tls!host!port, unix!/path or
    /// host:port, or through a gateway's /net: GW:/DIR/tcp!host!port.
    #[arg(
        short = 'a',
        long = "addr",
        env = "NINEP_ADDR",
        default_value = "tcp!127.0.0.1!564"
    )]
    pub addr: String,
    /// User name to attach as.
    #[arg(long, env = "USER", default_value = "none")]
    pub uname: String,
    /// Numeric user id to attach as (9P2000.u and .L).
    #[arg(long)]
    pub n_uname: Option<u32>,
    /// Tree to attach to.
    #[arg(long, default_value = "")]
    pub aname: String,
    /// Dialect to insist on (9P2000, 9P2000.u, 9P2000.L); else the best offered.
    #[arg(long, value_parser = parse_dialect)]
    pub dialect: Option<Dialect>,
    /// msize to ask for (the server may grant less).
    #[arg(long, default_value_t = Options::default().msize)]
    pub msize: u32,
    #[command(flatten)]
    pub client: ClientArgs,
}

impl ServerArgs {
    pub fn n_uname(&self) -> u32 {
        self.n_uname.unwrap_or(NONUNAME)
    }

    /// Connects and attaches.
    pub async fn attach(&self) -> Result<Fsys> {
        self.attach_to(&self.addr, self.n_uname()).await
    }

    /// Connects to `addr` rather than the address given, and attaches with
    /// the numeric user id `n_uname`.
    pub async fn attach_to(&self, addr: &str, n_uname: u32) -> Result<Fsys> {
        self.attach_recovering(addr, n_uname, None).await
    }

    /// As [`ServerArgs::attach_to`], recovering a lost connection as
    /// `recovery` says, where `addr` is dialled directly.
    pub async fn attach_recovering(
        &self,
        addr: &str,
        n_uname: u32,
        recovery: Option<Recovery>,
    ) -> Result<Fsys> {
        let options = Options {
            dialect: self.dialect,
            msize: self.msize,
        };
        let who = Who {
            uname: &self.uname,
            n_uname,
            aname: &self.aname,
        };
        attach(&self.client, addr, &who, options, recovery).await
    }
}

/// Who attaches to a server, and to which tree.
pub struct Who<'a> {
    pub uname: &'a str,
    pub n_uname: u32,
    pub aname: &'a str,
}

/// Connects to `addr` as `options` say, through the gateways the address
/// names if any, recovering a lost connection as `recovery` says where
/// `addr` is dialled directly; and attaches as `who`, proving the user as
/// `client` says (to the gateways as to the server).
pub async fn attach(
    client: &ClientArgs,
    addr: &str,
    who: &Who<'_>,
    options: Options,
    recovery: Option<Recovery>,
) -> Result<Fsys> {
    let dialer = client.dialer()?;
    let prover = client.prover();
    let connected = match (route(addr), recovery) {
        (Route::Direct(addr), Some(recovery)) => {
            Client::dial_recovering(addr, &dialer, options, recovery).await
        }
        _ => {
            let gateways = Gateways {
                uname: who.uname,
                prover: prover.as_ref().map(|p| p as &dyn Prover),
            };
            connect_as(addr, &dialer, options, gateways).await
        }
    };
    let connected = connected.with_context(|| addr.to_owned())?;
    let fsys = match prover {
        None => {
            connected
                .attach_as(who.uname, who.n_uname, who.aname)
                .await?
        }
        Some(prover) => {
            connected
                .attach_proven(who.uname, who.n_uname, who.aname, &prover)
                .await?
        }
    };
    Ok(fsys)
}

/// How long to keep dialling a server again once its connection is lost.
#[derive(clap::Args)]
pub struct RecoverArgs {
    /// Seconds to keep dialling again after the connection to the server is
    /// lost, making open files and requests in flight carry on (0: fail
    /// at once).
    #[arg(long = "recover", value_name = "SECONDS", default_value_t = 60.0)]
    pub seconds: f64,
}

impl RecoverArgs {
    /// The recovery asked for, if any.
    pub fn recovery(&self) -> Option<Recovery> {
        (self.seconds > 0.0).then(|| Recovery {
            deadline: Duration::from_secs_f64(self.seconds),
            ..Recovery::default()
        })
    }
}

/// A dialect by its version string.
pub fn parse_dialect(s: &str) -> Result<Dialect, String> {
    Dialect::ALL
        .into_iter()
        .find(|d| d.version() == s)
        .ok_or_else(|| format!("unknown dialect {s:?} (9P2000, 9P2000.u or 9P2000.L)"))
}

/// A file named on the command line: `ADDR:/PATH` on a 9P server (the
/// dial string up to the last `:/`, so that ADDR may itself go through a
/// gateway), or anything else, a local path.
pub enum Place<'a> {
    Remote { addr: &'a str, path: &'a str },
    Local(&'a str),
}

pub fn place(arg: &str) -> Place<'_> {
    match arg.rfind(":/") {
        Some(at) if at > 0 => Place::Remote {
            addr: &arg[..at],
            path: &arg[at + 1..],
        },
        _ => Place::Local(arg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places() {
        for (arg, addr, path) in [
            ("tcp!127.0.0.1!5640:/big", "tcp!127.0.0.1!5640", "/big"),
            ("localhost:564:/a/b", "localhost:564", "/a/b"),
            ("unix!/tmp/9p.sock:/x", "unix!/tmp/9p.sock", "/x"),
            (
                "tcp!gw!564:/tcp!10.0.0.2!564:/x",
                "tcp!gw!564:/tcp!10.0.0.2!564",
                "/x",
            ),
        ] {
            match place(arg) {
                Place::Remote { addr: a, path: p } => assert_eq!((a, p), (addr, path), "{arg}"),
                Place::Local(_) => panic!("{arg} is remote"),
            }
        }
        for arg in ["big", "/tmp/big", "-", ":/x"] {
            assert!(matches!(place(arg), Place::Local(_)), "{arg}");
        }
    }
}
