//! `dffs bench SUITE [--quick] [--json FILE] [--plot DIR]`: the seed experiments, DFFS beside
//! littlefs on the same simulated devices.
//!
//! Owns only the hand-over to the `dffs-bench` crate (which holds every suite, the peer, the
//! tables, the JSON and the plots, and is also its own `dffs-bench` binary). It must never hold
//! suite logic.

use std::io::Write;

use super::CliError;

/// Options of `dffs bench` (the same as the `dffs-bench` binary's).
pub type Args = dffs_bench::BenchArgs;

/// Runs the suite(s).
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    dffs_bench::run(args, out).map_err(CliError::msg)
}
