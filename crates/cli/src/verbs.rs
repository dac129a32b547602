//! Client verbs in the manner of plan9port's 9p(1): `ninep ls`, `cat`,
//! `write`, `stat`, `create`, `rm`, `mkdir` against any 9P server.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use bytes::Bytes;
use ninep_client::{FileInfo, Fsys};
use ninep_wire::consts::dotl::{O_RDWR, O_TRUNC, O_WRONLY};
use tokio::io::AsyncReadExt;

use crate::args::ServerArgs;

#[derive(clap::Args)]
pub struct PathArgs {
    #[command(flatten)]
    conn: ServerArgs,
    path: String,
}

#[derive(clap::Args)]
pub struct LsArgs {
    #[command(flatten)]
    conn: ServerArgs,
    /// Long listing: mode, owner, group, size, name.
    #[arg(short)]
    l: bool,
    #[arg(default_value = "/")]
    path: String,
}

#[derive(clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    conn: ServerArgs,
    /// Permissions, in octal (default 644 for files, 755 for directories).
    #[arg(short, long, value_parser = parse_octal)]
    mode: Option<u32>,
    path: String,
}

/// Lets the server answer every clunk before the process exits.
async fn done(fsys: Fsys) -> Result<ExitCode> {
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), fsys.close()).await;
    Ok(ExitCode::SUCCESS)
}

fn parse_octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|e| e.to_string())
}

/// A file name as safe to print on a terminal.
fn printable(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn mode_string(info: &FileInfo) -> String {
    use ninep_wire::consts::unix::*;
    let ty = match info.mode & S_IFMT {
        S_IFDIR => 'd',
        S_IFLNK => 'l',
        S_IFCHR => 'c',
        S_IFBLK => 'b',
        S_IFIFO => 'p',
        S_IFSOCK => 's',
        _ if info.plan9_mode & ninep_wire::consts::mode::DMAPPEND != 0 => 'a',
        _ => '-',
    };
    let mut s = String::from(ty);
    for shift in [6, 3, 0] {
        let bits = (info.mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

pub async fn ls(args: LsArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    let info = fsys
        .stat(&args.path)
        .await
        .with_context(|| args.path.clone())?;
    let mut entries = if info.is_dir() {
        fsys.read_dir(&args.path)
            .await
            .with_context(|| args.path.clone())?
    } else {
        vec![ninep_client::DirEntry {
            name: args.path.clone(),
            qid: info.qid,
            info: Some(info),
        }]
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = std::io::stdout().lock();
    for entry in entries {
        if !args.l {
            writeln!(out, "{}", printable(&entry.name))?;
            continue;
        }
        let info = match entry.info {
            Some(info) => info,
            None => fsys
                .stat(&format!("{}/{}", args.path, entry.name))
                .await
                .with_context(|| entry.name.clone())?,
        };
        writeln!(
            out,
            "{} {} {} {:>10} {}",
            mode_string(&info),
            printable(&info.uid),
            printable(&info.gid),
            info.size,
            printable(&entry.name)
        )?;
    }
    done(fsys).await
}

pub async fn cat(args: PathArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    let file = fsys
        .open(&args.path, ninep_wire::consts::dotl::O_RDONLY)
        .await
        .with_context(|| args.path.clone())?;
    let mut out = std::io::stdout().lock();
    let mut offset = 0;
    loop {
        let data = file.read_at(offset, file.iounit()).await?;
        if data.is_empty() {
            break;
        }
        offset += data.len() as u64;
        out.write_all(&data)?;
    }
    out.flush()?;
    drop(file);
    done(fsys).await
}

async fn stdin_bytes() -> Result<Bytes> {
    let mut data = Vec::new();
    tokio::io::stdin().read_to_end(&mut data).await?;
    Ok(data.into())
}

pub async fn write(args: PathArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    let file = fsys
        .open(&args.path, O_WRONLY | O_TRUNC)
        .await
        .with_context(|| args.path.clone())?;
    file.write_all_at(0, stdin_bytes().await?).await?;
    file.close().await?;
    done(fsys).await
}

pub async fn stat(args: PathArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    let info = fsys
        .stat(&args.path)
        .await
        .with_context(|| args.path.clone())?;
    println!(
        "'{}' '{}' '{}' '{}' q {} m {} at {} mt {} l {}",
        printable(&info.name),
        printable(&info.uid),
        printable(&info.gid),
        printable(&info.muid),
        info.qid,
        mode_string(&info),
        info.atime,
        info.mtime,
        info.size
    );
    done(fsys).await
}

pub async fn create(args: CreateArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    let data = stdin_bytes().await?;
    let file = fsys
        .create(&args.path, args.mode.unwrap_or(0o644), O_RDWR)
        .await
        .with_context(|| args.path.clone())?;
    file.write_all_at(0, data).await?;
    file.close().await?;
    done(fsys).await
}

pub async fn rm(args: PathArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    fsys.remove(&args.path)
        .await
        .with_context(|| args.path.clone())?;
    done(fsys).await
}

pub async fn mkdir(args: CreateArgs) -> Result<ExitCode> {
    let fsys = args.conn.attach().await?;
    fsys.mkdir(&args.path, args.mode.unwrap_or(0o755))
        .await
        .with_context(|| args.path.clone())?;
    done(fsys).await
}
