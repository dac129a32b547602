//! `ninep`: one binary for the whole toolkit. Each subcommand is a thin layer
//! over a library crate.

#![warn(clippy::unwrap_used)]

mod args;
mod auth;
mod bench;
mod cp;
mod decode;
mod devices;
mod dial;
mod docs;
mod http;
mod mount;
mod mux;
mod ns;
mod serve;
mod trace;
mod verbs;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// The version and the commit built from (build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("NINEP_COMMIT"), ")");

#[derive(Parser)]
#[command(
    name = "ninep",
    version = VERSION,
    propagate_version = true,
    about = "9P servers, clients and tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a file tree over 9P: a directory, ramfs, taskbag, pipe or net.
    Serve(serve::Args),
    /// List a directory.
    Ls(verbs::LsArgs),
    /// Print a file.
    Cat(verbs::PathArgs),
    /// Print a file (as 9p(1) read).
    Read(verbs::PathArgs),
    /// Replace the contents of an existing file with standard input.
    Write(verbs::PathArgs),
    /// Print a file's attributes.
    Stat(verbs::PathArgs),
    /// Create a file and write standard input to it.
    Create(verbs::CreateArgs),
    /// Remove a file or empty directory.
    Rm(verbs::PathArgs),
    /// Copy a file to, from or between 9P servers (ADDR:/PATH).
    Cp(cp::Args),
    /// Make a directory.
    Mkdir(verbs::CreateArgs),
    /// Mount a 9P tree through FUSE.
    Mount(mount::Args),
    /// Serve a name space built from other 9P servers: mount, bind, unions.
    Mux(mux::Args),
    /// Serve a 9P tree over HTTP (and WebDAV): files, listings, uploads.
    Http(http::Args),
    /// Run a command in a private name space built from a namespace file.
    Ns(ns::Args),
    /// Interpose between a client and a server and print every message.
    Trace(trace::Args),
    /// Print 9P frames from a file or stdin as Plan 9 text, one line each.
    Decode(decode::Args),
    /// Measure round trips and throughput
    Bench(bench::Args),
    /// Join standard input and output to a connection, made directly or
    /// through a 9P server's /net (GW:/tcp!host!port).
    Dial(dial::Args),
    /// Install manual pages and shell completions under a prefix.
    InstallDocs(docs::Args),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NINEP_LOG")
                // fuser warns of its second try at unmounting what
                // `fusermount3 -u` already unmounted.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,fuser::mnt=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Ns(_))
        && let Err(e) = ns::enter()
    {
        eprintln!("ninep: {e:#}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Decode(args) => decode::run(args),
        Command::InstallDocs(args) => docs::run(args, Cli::command()),
        command => runtime(&command).and_then(|rt| {
            rt.block_on(async move {
                match command {
                    Command::Serve(args) => serve::run(args).await,
                    Command::Ls(args) => verbs::ls(args).await,
                    Command::Cat(args) | Command::Read(args) => verbs::cat(args).await,
                    Command::Write(args) => verbs::write(args).await,
                    Command::Stat(args) => verbs::stat(args).await,
                    Command::Create(args) => verbs::create(args).await,
                    Command::Rm(args) => verbs::rm(args).await,
                    Command::Cp(args) => cp::run(args).await,
                    Command::Mkdir(args) => verbs::mkdir(args).await,
                    Command::Mount(args) => mount::run(args).await,
                    Command::Mux(args) => mux::run(args).await,
                    Command::Http(args) => http::run(args).await,
                    Command::Ns(args) => ns::run(args).await,
                    Command::Trace(args) => trace::run(args).await,
                    Command::Bench(args) => bench::run(args).await,
                    Command::Dial(args) => dial::run(args).await,
                    Command::Decode(_) | Command::InstallDocs(_) => {
                        unreachable!("handled above")
                    }
                }
            })
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ninep: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(command: &Command) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // A mount answers each kernel request, and the HTTP door each HTTP
    // request, with a task that waits on the server: with one worker,
    // handing requests and replies between tasks wakes no other threads,
    // which costs more than the work itself.
    if matches!(command, Command::Mount(_) | Command::Http(_)) {
        builder.worker_threads(1);
    }
    Ok(builder.enable_all().build()?)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
