//! `ninep serve pipe` and `ninep serve net`: Plan 9's devices served over
//! 9P, and their limits as flags.

use anyhow::{Result, anyhow};
use ninep_devices::net::{self, Allow, NetFs};
use ninep_devices::pipe::{self, PipeFs};
use ninep_server::queue::Limits;

/// The flags of the device servers.
#[derive(clap::Args)]
pub struct DeviceArgs {
    /// Bytes a stream queue holds before its writer waits (each way, per
    /// pipe or conversation); the writer wakes when it drains below half.
    #[arg(long, default_value_t = Limits::default().high_water)]
    queue_bytes: usize,
    /// Blocks (writes, socket reads) a stream queue holds at most.
    #[arg(long, default_value_t = Limits::default().blocks)]
    queue_blocks: usize,
    /// Pipes (distinct tree names) at once (serve pipe).
    #[arg(long, default_value_t = pipe::Options::default().pipes)]
    max_pipes: usize,
    /// Conversations at once (serve net).
    #[arg(long, default_value_t = net::Options::default().conversations)]
    max_conversations: usize,
    /// Addresses `connect` may reach (serve net): comma-separated
    /// HOST!PORT patterns, HOST an address, a network (10.0.0.0/24) or *,
    /// PORT a number or *.
    #[arg(long, default_value = "*!*", value_name = "PATTERNS")]
    dial_allow: String,
    /// Addresses `announce` may listen on (serve net); none by default.
    #[arg(long, default_value = "", value_name = "PATTERNS")]
    announce_allow: String,
}

impl DeviceArgs {
    fn queue(&self) -> Limits {
        Limits {
            high_water: self.queue_bytes,
            blocks: self.queue_blocks,
        }
    }

    /// The pipe server these flags ask for.
    pub fn pipe(&self) -> PipeFs {
        PipeFs::new(pipe::Options {
            queue: self.queue(),
            pipes: self.max_pipes,
        })
    }

    /// The network server these flags ask for.
    pub fn net(&self) -> Result<NetFs> {
        let allow = |flag, list| Allow::parse(list).map_err(|e| anyhow!("--{flag}: {e}"));
        Ok(NetFs::new(net::Options {
            conversations: self.max_conversations,
            queue: self.queue(),
            dial: allow("dial-allow", &self.dial_allow)?,
            announce: allow("announce-allow", &self.announce_allow)?,
        }))
    }
}
