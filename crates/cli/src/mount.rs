//! `ninep mount`: a 9P tree mounted through FUSE, until SIGINT, SIGTERM or
//! `fusermount3 -u`; in the background if asked.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use ninep_fuse::{Access, Cache, Permissions};

use crate::args::{RecoverArgs, ServerArgs};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    recover: RecoverArgs,
    /// What the kernel may cache: none, strict (file pages while the file's
    /// qid.version is unchanged) or loose (also attributes and entries for
    /// 20 seconds, and writes until writeback, fsync or close).
    #[arg(long, default_value = "strict", value_parser = parse_cache)]
    cache: Cache,
    /// Whose identity requests carry: single (the mount's own attach) or
    /// user (an attach per calling user; the mount is open to all users).
    #[arg(long, default_value = "single", value_parser = ["single", "user"])]
    access: String,
    /// Who checks callers' permissions: kernel (against the attributes the
    /// server gives, asked for again on every path under none and strict)
    /// or server (the server alone, as the mount's user, as sshfs's mounts
    /// do by default; with --access single only).
    #[arg(long, default_value = "kernel", value_parser = parse_permissions)]
    permissions: Permissions,
    /// Most bytes read ahead of a program that reads a file in order, per
    /// open file (0: none).
    #[arg(long, default_value_t = ninep_fuse::Options::READ_AHEAD)]
    read_ahead: u64,
    /// Most bytes read ahead for all open files together; a file read in
    /// order while they are in use is read without reading ahead.
    #[arg(long, default_value_t = ninep_fuse::Options::READ_AHEAD_TOTAL)]
    read_ahead_total: u64,
    /// Most files kept open at the server after their close under --cache
    /// loose, for as long as entries are trusted, so that opening one again
    /// needs no round trip (0: none).
    #[arg(long, default_value_t = ninep_fuse::Options::KEEP_OPEN)]
    keep_open: usize,
    /// Return once mounted, leaving the mount served in the background.
    #[arg(long)]
    background: bool,
    /// Print "mounted" on stdout once mounted, then let go of the terminal.
    #[arg(long, hide = true)]
    detached: bool,
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

fn parse_permissions(s: &str) -> Result<Permissions, String> {
    match s {
        "kernel" => Ok(Permissions::Kernel),
        "server" => Ok(Permissions::Server),
        _ => Err(format!("unknown checker {s:?} (kernel or server)")),
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
    if args.background {
        return background();
    }
    if args.detached {
        // Out of the terminal's session, so its hang-up does not reach us.
        rustix::process::setsid().context("setsid")?;
    }
    let mountpoint = args
        .mountpoint
        .canonicalize()
        .with_context(|| args.mountpoint.display().to_string())?;
    let (fsys, access) = if args.access == "user" {
        let uid = args
            .server
            .n_uname
            .unwrap_or_else(|| rustix::process::getuid().as_raw());
        let fsys = args
            .server
            .attach_recovering(&args.server.addr, uid, args.recover.recovery())
            .await?;
        let aname = args.server.aname.clone();
        (fsys, Access::User { aname, uid })
    } else {
        let n_uname = args.server.n_uname();
        let recovery = args.recover.recovery();
        let fsys = args
            .server
            .attach_recovering(&args.server.addr, n_uname, recovery)
            .await?;
        (fsys, Access::Single)
    };
    let options = ninep_fuse::Options {
        source: format!("ninep:{}", args.server.addr),
        cache: args.cache,
        access,
        read_ahead: args.read_ahead,
        read_ahead_total: args.read_ahead_total,
        permissions: args.permissions,
        keep_open: args.keep_open,
    };
    let mount = ninep_fuse::mount(fsys, &mountpoint, &options)
        .with_context(|| format!("mount on {}", args.mountpoint.display()))?;
    if args.detached {
        println!("mounted");
        std::io::stdout().flush()?;
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        rustix::stdio::dup2_stdout(&null)?;
        rustix::stdio::dup2_stderr(&null)?;
    } else {
        eprintln!(
            "ninep: {} mounted on {}",
            args.server.addr,
            args.mountpoint.display()
        );
    }
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
    // Unmounts, if fusermount3 -u has not already, and sends what the
    // kernel left with the mount.
    mount.unmount().await;
    Ok(ExitCode::SUCCESS)
}

/// Runs this same command again, detached, and returns once it has mounted
/// (or with its error if it could not).
fn background() -> Result<ExitCode> {
    let exe = std::env::current_exe().context("finding the ninep binary")?;
    let mut argv: Vec<OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--background")
        .collect();
    argv.push("--detached".into());
    let mut child = std::process::Command::new(exe)
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the mount")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    if line.trim() == "mounted" {
        eprintln!("ninep: mounted (pid {})", child.id());
        return Ok(ExitCode::SUCCESS);
    }
    let mut why = String::new();
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut why)?;
    }
    let status = child.wait()?;
    eprint!("{why}");
    if status.success() {
        bail!("the mount ended before it was made");
    }
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(1, 255) as u8
    ))
}
