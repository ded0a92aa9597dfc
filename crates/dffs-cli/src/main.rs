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
    /// Create (or reformat) an image with an empty file system.
    Format(cmd::format::Args),
    /// Build an image from a directory tree (files, directories, symlinks, modes, owners, times).
    Pack(cmd::pack::Args),
    /// Extract an image's tree into a directory.
    Unpack(cmd::unpack::Args),
    /// List a directory of an image.
    Ls(cmd::ls::Args),
    /// Print a file of an image.
    Cat(cmd::cat::Args),
    /// Copy a local file into an image.
    Put(cmd::put::Args),
    /// Copy a file out of an image.
    Get(cmd::get::Args),
    /// Remove a file, symlink or (with -r) directory tree from an image.
    Rm(cmd::rm::Args),
    /// Create a directory in an image.
    Mkdir(cmd::mkdir::Args),
    /// Rename or move an entry inside an image.
    Mv(cmd::mv::Args),
    /// Show what an image's device and file system are and hold, and what mounting costs.
    Info(cmd::info::Args),
    /// Check an image's file system for consistency (read-only).
    Fsck(cmd::fsck::Args),
    /// List the simulated flash devices with their geometry and raw throughput limits.
    Presets(cmd::presets::Args),
    /// Mount an image's file system over FUSE (until unmounted; prints its flash cost).
    Mount(cmd::mount::Args),
    /// Cut the power at many points of random workloads and check every guarantee after each.
    Torture(cmd::torture::Args),
    /// Run the seed experiments, DFFS beside littlefs on the same simulated device.
    Bench(cmd::bench::Args),
}

fn run(cli: Cli, out: &mut dyn Write) -> Result<(), CliError> {
    match cli.command {
        Command::Format(args) => cmd::format::run(&args, out),
        Command::Pack(args) => cmd::pack::run(&args, out),
        Command::Unpack(args) => cmd::unpack::run(&args, out),
        Command::Ls(args) => cmd::ls::run(&args, out),
        Command::Cat(args) => cmd::cat::run(&args, out),
        Command::Put(args) => cmd::put::run(&args, out),
        Command::Get(args) => cmd::get::run(&args, out),
        Command::Rm(args) => cmd::rm::run(&args, out),
        Command::Mkdir(args) => cmd::mkdir::run(&args, out),
        Command::Mv(args) => cmd::mv::run(&args, out),
        Command::Info(args) => cmd::info::run(&args, out),
        Command::Fsck(args) => cmd::fsck::run(&args, out),
        Command::Presets(args) => cmd::presets::run(&args, out),
        Command::Mount(args) => cmd::mount::run(&args, out),
        Command::Torture(args) => cmd::torture::run(&args, out),
        Command::Bench(args) => cmd::bench::run(&args, out),
    }
}

/// Reports a panic (a bug, in the CLI or the library) as one line, without a backtrace.
fn one_line_panics() {
    std::panic::set_hook(Box::new(|p| {
        let what = p
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".to_string());
        let what = what.lines().next().unwrap_or("").to_string();
        let at = p
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("dffs: internal error (a bug, please report it): {what}{at}");
    }));
}

fn main() -> ExitCode {
    one_line_panics();
    // Started by mount(8) (as /sbin/mount.fuse.dffs, or by mount.fuse3 as `dffs SOURCE DIR -o
    // OPTIONS`): translate and mount, or remount.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let subcommands: Vec<String> = <Cli as clap::CommandFactory>::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .chain(["help".to_string()])
        .collect();
    if let Some(call) = cmd::mount_helper::detect(&argv, &subcommands) {
        let stdout = io::stdout();
        let mut out = stdout.lock();
        let result = call
            .map_err(CliError::msg)
            .and_then(|call| cmd::mount_helper::run(&call, &mut out))
            .and_then(|()| out.flush().map_err(CliError::from));
        return report(result);
    }
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
                    // clap words some errors over several lines (the missing arguments
                    // follow on the next lines); keep everything before the usage, on one line.
                    let text = e.to_string();
                    let words: Vec<&str> = text
                        .lines()
                        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .collect();
                    let line = words.join(" ");
                    let line = line.strip_prefix("error: ").unwrap_or(&line);
                    let line = if line.is_empty() {
                        "invalid arguments"
                    } else {
                        line
                    };
                    eprintln!("dffs: {line} (see 'dffs --help')");
                    return ExitCode::from(2);
                }
            }
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let result = run(cli, &mut out).and_then(|()| out.flush().map_err(CliError::from));
    report(result)
}

/// The exit status of a command, and its one error line on stderr.
fn report(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`dffs presets | head`) is not an error worth reporting.
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(CliError::Status { code, message }) => {
            eprintln!("dffs: {message}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("dffs: {e}");
            ExitCode::FAILURE
        }
    }
}
