//! `ninep mount`: a 9P2000.L tree mounted through FUSE, until SIGINT,
//! SIGTERM or `fusermount3 -u`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use ninep_fuse::Cache;

use crate::args::ServerArgs;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// What the kernel may cache: none, strict (file pages while the file's
    /// qid.version is unchanged) or loose (also attributes, for a second).
    #[arg(long, default_value = "strict", value_parser = parse_cache)]
    cache: Cache,
    /// Directory to mount on.
    mountpoint: PathBuf,
}

fn parse_cache(s: &str) -> Result<Cache, String> {
    match s {
        "none" => Ok(Cache::None),
        "strict" => Ok(Cache::Strict),
        "loose" => Ok(Cache::Loose),
        _ => Err(format!(
            "unknown cache policy {s:?} (none, strict or loose)"
        )),
    }
}

/// True while `dir` is a mount point.
fn mounted(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let dir = dir.to_string_lossy();
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(dir.as_ref()))
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let fsys = args.server.attach().await?;
    let source = format!("ninep:{}", args.server.addr);
    let mountpoint = args
        .mountpoint
        .canonicalize()
        .with_context(|| args.mountpoint.display().to_string())?;
    let session = ninep_fuse::mount(fsys, &mountpoint, &source, args.cache)
        .with_context(|| format!("mount on {}", args.mountpoint.display()))?;
    eprintln!(
        "ninep: {} mounted on {}",
        args.server.addr,
        args.mountpoint.display()
    );
    let signal = crate::shutdown_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            () = &mut signal => break,
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                if !mounted(&mountpoint) {
                    break;
                }
            }
        }
    }
    // Dropping the session unmounts, if fusermount3 -u has not already.
    drop(session);
    Ok(ExitCode::SUCCESS)
}
