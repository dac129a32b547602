//! `ninep dial`: standard input and output joined to a connection made
//! directly or through any /net a 9P server offers (Plan 9's con, or
//! netcat), so that `ssh -o ProxyCommand='ninep dial GW:/tcp!%h!%p'` works.

use std::process::ExitCode;

use anyhow::{Context, Result};
use ninep_client::{Options, Prover};
use ninep_devices::dial::{Gateways, dial_as};
use tokio::io::AsyncWriteExt;

#[derive(clap::Args)]
pub struct Args {
    /// Where to connect: tcp!host!port, or through a gateway's /net as
    /// GW:/DIR/tcp!host!port (GW a 9P server's address, DIR its network
    /// directory: / for `ninep serve net`).
    addr: String,
    /// User name to attach to gateways as.
    #[arg(long, env = "USER", default_value = "none")]
    uname: String,
    /// msize to ask gateways for.
    #[arg(long, default_value_t = Options::default().msize)]
    msize: u32,
    /// How to reach the first gateway (its TLS) and prove ourselves to
    /// gateways that ask (MUNGE).
    #[command(flatten)]
    client: crate::auth::ClientArgs,
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let options = Options {
        msize: args.msize,
        ..Options::default()
    };
    let prover = args.client.prover();
    let gateways = Gateways {
        uname: &args.uname,
        prover: prover.as_ref().map(|p| p as &dyn Prover),
    };
    let conn = dial_as(&args.addr, &args.client.dialer()?, &options, gateways)
        .await
        .with_context(|| args.addr.clone())?;
    let (mut rx, mut tx) = tokio::io::split(conn);
    let sending = async {
        tokio::io::copy(&mut tokio::io::stdin(), &mut tx).await?;
        tx.shutdown().await
    };
    let receiving = async {
        let mut stdout = tokio::io::stdout();
        tokio::io::copy(&mut rx, &mut stdout).await?;
        stdout.flush().await
    };
    tokio::pin!(sending, receiving);
    // The call is over when the far end is done; our input may end first.
    tokio::select! {
        received = &mut receiving => received.context("receiving")?,
        sent = &mut sending => {
            sent.context("sending")?;
            receiving.await.context("receiving")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
