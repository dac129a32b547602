//! `ninep`: one binary for the whole toolkit. Each subcommand is a thin layer
//! over a library crate.

mod decode;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ninep", version, about = "9P servers, clients and tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print 9P frames from a file or stdin as Plan 9 text, one line each.
    Decode(decode::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(args) => decode::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ninep: {e:#}");
            ExitCode::FAILURE
        }
    }
}
