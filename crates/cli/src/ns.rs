//! `ninep ns`: a command run in a private mount name space arranged by a
//! Plan 9 style namespace file, as Plan 9 gives each process its own.
//!
//! ```text
//! # mount [-c] ADDR OLD [ANAME]: a 9P server's tree at OLD
//! mount tcp!fileserver!564 /n/home
//! # bind NEW OLD: NEW also appears at OLD
//! bind /n/home/bin /usr/local/bin
//! ```
//!
//! The mounts exist only inside the name space, which goes away with the
//! command. Linux has no union directories, so `-a` and `-b` are refused
//! (the multiplexer serves unions); `-c` is accepted and means nothing here.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use ninep_client::Options;
use ninep_devices::dial::{Route, route};
use ninep_mux::nsfile::{self, Entry};
use ninep_wire::NONUNAME;

use crate::args::{Who, attach};
use crate::auth::ClientArgs;

#[derive(clap::Args)]
pub struct Args {
    /// Namespace file; none means an empty private name space.
    file: Option<PathBuf>,
    /// User to attach as.
    #[arg(long, env = "USER", default_value = "none")]
    uname: String,
    #[command(flatten)]
    client: ClientArgs,
    /// The command and its arguments (default: $SHELL, else /bin/sh).
    #[arg(last = true)]
    command: Vec<String>,
}

/// The entries of a namespace file that Linux mounts can carry out.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    let entries = nsfile::parse(text)?;
    for entry in &entries {
        match entry {
            Entry::Mount { flags, .. } | Entry::Bind { flags, .. } if flags.is_union() => {
                bail!("{entry}: union mounts (-a, -b) need the multiplexer (ninep mux)")
            }
            Entry::Unmount { .. } => bail!("{entry}: nothing is mounted yet"),
            _ => {}
        }
    }
    Ok(entries)
}

/// Enters a private mount name space, inside a new user name space when
/// not root (where this process holds the rights to mount that root would,
/// over this name space only, and everyone keeps their own ids). Must run
/// before any other thread exists: a name space belongs to the threads that
/// unshare it.
pub fn enter() -> Result<()> {
    use rustix::thread::UnshareFlags;
    let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
    let flags = if uid.is_root() {
        UnshareFlags::NEWNS
    } else {
        UnshareFlags::NEWUSER | UnshareFlags::NEWNS
    };
    // The process is still single-threaded here (no runtime has started),
    // which is what makes unsharing sound.
    #[allow(deprecated)]
    rustix::thread::unshare(flags).context("unshare the mount name space")?;
    if !uid.is_root() {
        // The user is themselves inside; no group may be dropped to gain access.
        let write = |file: &str, text: String| {
            std::fs::write(format!("/proc/self/{file}"), text)
                .with_context(|| format!("writing /proc/self/{file}"))
        };
        write("setgroups", "deny".into())?;
        write("uid_map", format!("{0} {0} 1\n", uid.as_raw()))?;
        write("gid_map", format!("{0} {0} 1\n", gid.as_raw()))?;
    }
    // Nothing done here may propagate back out.
    use rustix::mount::{MountPropagationFlags, mount_change};
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .context("make mounts private")?;
    Ok(())
}

pub async fn run(args: Args) -> Result<ExitCode> {
    let entries = match &args.file {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
            parse(&text).with_context(|| path.display().to_string())?
        }
        None => Vec::new(),
    };
    let mut mounts = Vec::new();
    for entry in entries {
        match entry {
            Entry::Mount {
                addr, old, aname, ..
            } => {
                // The address may go through a gateway's /net.
                // The caller's uid, for servers that number users (9P2000.u,
                // .L); where a certificate names the user to the server, the
                // server's own users give it.
                let certified = args.client.presents_certificate()
                    && matches!(route(&addr), Route::Direct(a) if a.starts_with("tls!"));
                let who = Who {
                    uname: &args.uname,
                    n_uname: match certified {
                        true => NONUNAME,
                        false => rustix::process::getuid().as_raw(),
                    },
                    aname: &aname,
                };
                let fsys = attach(&args.client, &addr, &who, Options::default(), None).await?;
                let source = format!("ninep:{addr}");
                let mount = ninep_fuse::mount(
                    fsys,
                    Path::new(&old),
                    &ninep_fuse::Options {
                        source,
                        cache: ninep_fuse::Cache::Strict,
                        ..Default::default()
                    },
                )
                .with_context(|| format!("mount {addr} on {old}"))?;
                mounts.push(mount);
            }
            Entry::Bind { new, old, .. } => bind(Path::new(&new), Path::new(&old))?,
            Entry::Unmount { .. } => unreachable!("refused by parse"),
        }
    }
    let command = if args.command.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        args.command
    };
    let status = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .status()
        .await
        .with_context(|| command[0].clone())?;
    // Unmount before the name space goes.
    for mount in mounts {
        mount.unmount().await;
    }
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    })
}

fn bind(new: &Path, old: &Path) -> Result<()> {
    rustix::mount::mount_bind_recursive(new, old)
        .with_context(|| format!("bind {} {}", new.display(), old.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_linux_mounts_can_do() {
        let entries = parse("mount -c unix!/tmp/s /n/tmp trees/tmp\nbind /n/tmp /tmp\n").unwrap();
        assert_eq!(entries.len(), 2);
        assert!(parse("bind -a /x /y").is_err());
        assert!(parse("mount -b tcp!h!1 /y").is_err());
        assert!(parse("unmount /x").is_err());
        assert!(parse("mount only-one").is_err());
    }
}
