//! `dffs-bench`: runs the benchmark suites on their own (the `dffs bench` subcommand of the CLI
//! calls the same library function). It owns only argument parsing and must never hold suite
//! logic.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "dffs-bench",
    about = "DFFS vs littlefs on simulated flash (the seed experiments)"
)]
struct Cli {
    #[command(flatten)]
    args: dffs_bench::BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if let Err(e) = dffs_bench::run(&cli.args, &mut out) {
        eprintln!("dffs-bench: {e}");
        std::process::exit(1);
    }
}
