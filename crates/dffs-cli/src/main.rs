//! The `dffs` command: entry point, argument parsing and error reporting.
//!
//! Owns the command-line surface: one `Command` variant per subcommand, each implemented in its
//! own file under `cmd/`. It must never panic on user input, and every failure is one line on
//! stderr with a non-zero exit status.
#![forbid(unsafe_code)]

mod cmd;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cmd::CliError;

/// DFFS, a direct flash file system for raw NAND and NOR flash.
#[derive(Parser, Debug)]
#[command(name = "dffs", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// List the simulated flash devices with their geometry and raw throughput limits.
    Presets(cmd::presets::Args),
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Presets(args) => cmd::presets::run(&args, out),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
                }
                _ => {
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or("invalid arguments");
                    let first = first.strip_prefix("error: ").unwrap_or(first);
                    eprintln!("dffs: {first} (see 'dffs --help')");
                    return ExitCode::from(2);
                }
            }
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = run(cli, &mut out).and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`dffs presets | head`) is not an error worth reporting.
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dffs: {e}");
            ExitCode::FAILURE
        }
    }
}
