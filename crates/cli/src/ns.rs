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
use ninep_client::{Client, Options};

#[derive(clap::Args)]
pub struct Args {
    /// Namespace file; none means an empty private name space.
    file: Option<PathBuf>,
    /// User to attach as.
    #[arg(long, env = "USER", default_value = "none")]
    uname: String,
    /// The command and its arguments (default: $SHELL, else /bin/sh).
    #[arg(last = true)]
    command: Vec<String>,
}

/// One line of a namespace file.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    Mount {
        addr: String,
        old: PathBuf,
        aname: String,
    },
    Bind {
        new: PathBuf,
        old: PathBuf,
    },
}

/// Parses a namespace file.
pub fn parse(text: &str) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let verb = words.remove(0);
        let mut flags = String::new();
        while let Some(w) = words.first().filter(|w| w.starts_with('-')) {
            flags.push_str(&w[1..]);
            words.remove(0);
        }
        if let Some(bad) = flags.chars().find(|c| !"abc".contains(*c)) {
            bail!("line {}: unknown flag -{bad}", n + 1);
        }
        if flags.contains('a') || flags.contains('b') {
            bail!("line {}: union mounts (-a, -b) need the multiplexer", n + 1);
        }
        entries.push(match (verb, words.as_slice()) {
            ("mount", [addr, old]) => Entry::Mount {
                addr: addr.to_string(),
                old: old.into(),
                aname: String::new(),
            },
            ("mount", [addr, old, aname]) => Entry::Mount {
                addr: addr.to_string(),
                old: old.into(),
                aname: aname.to_string(),
            },
            ("bind", [new, old]) => Entry::Bind {
                new: new.into(),
                old: old.into(),
            },
            _ => bail!(
                "line {}: want 'mount [-c] ADDR OLD [ANAME]' or 'bind [-c] NEW OLD'",
                n + 1
            ),
        });
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
    let mut sessions = Vec::new();
    for entry in entries {
        match entry {
            Entry::Mount { addr, old, aname } => {
                let client = Client::connect_with(&addr, Options::default())
                    .await
                    .with_context(|| addr.clone())?;
                let n_uname = rustix::process::getuid().as_raw();
                let fsys = client.attach_as(&args.uname, n_uname, &aname).await?;
                let source = format!("ninep:{addr}");
                let session = ninep_fuse::mount(
                    fsys,
                    &old,
                    &ninep_fuse::Options {
                        source,
                        cache: ninep_fuse::Cache::Strict,
                        ..Default::default()
                    },
                )
                .with_context(|| format!("mount {addr} on {}", old.display()))?;
                sessions.push(session);
            }
            Entry::Bind { new, old } => bind(&new, &old)?,
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
    drop(sessions);
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
    fn namespace_files() {
        let entries = parse(
            "# a comment\n\
             mount tcp!fs!564 /n/home\n\
             mount -c unix!/tmp/s /n/tmp trees/tmp  # with aname\n\
             bind /n/home/bin /usr/local/bin\n",
        )
        .unwrap();
        assert_eq!(
            entries,
            [
                Entry::Mount {
                    addr: "tcp!fs!564".into(),
                    old: "/n/home".into(),
                    aname: String::new()
                },
                Entry::Mount {
                    addr: "unix!/tmp/s".into(),
                    old: "/n/tmp".into(),
                    aname: "trees/tmp".into()
                },
                Entry::Bind {
                    new: "/n/home/bin".into(),
                    old: "/usr/local/bin".into()
                },
            ]
        );
        assert!(parse("bind -a /x /y").is_err());
        assert!(parse("mount only-one").is_err());
        assert!(parse("unmount /x").is_err());
        assert!(parse("bind -z /x /y").is_err());
    }
}
