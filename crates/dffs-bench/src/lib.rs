//! `dffs bench`: the seed experiments rerun on simulated flash, DFFS side by side with littlefs
//! (the real littlefs C library through the `littlefs2` crate) on the same simulated device with
//! the same timing.
//!
//! This crate owns the benchmark suites and their reporting; it must never change a file
//! system's behaviour to make a figure look better, never report a failure as a number, and
//! never count a failed access as a fast one. Every figure is simulated device time (from the
//! simulator, deterministic) with the page reads, programs and erases behind it and host time
//! beside it; every suite checks the data it wrote.
//!
//! Modules:
//! - [`suites`]: one module per suite (`mount`, `rootfs`, `throughput`, `space`, `nor`,
//!   `postmark`, `filebench`, `wear`).
//! - [`fsapi`]: the operations the suites run, one interface for both file systems;
//!   [`dffs_fs`] and [`littlefs`] implement it.
//! - [`devices`]: presets and partitions, the meter, raw device limits.
//! - [`content`]: deterministic file content and the verifier.
//! - [`report`]: rows, JSON, tables; [`plot`]: SVG figures shaped like the seeds'.
//!
//! The CLI calls [`run`] with [`BenchArgs`] (`dffs bench SUITE [--quick] [--json FILE]
//! [--plot DIR] [--tree DIR] [--preset NAME]`).

pub mod content;
pub mod devices;
pub mod dffs_fs;
pub mod fsapi;
#[cfg(feature = "littlefs")]
pub mod littlefs;
/// Stands in for the littlefs peer when it is not built (feature `littlefs`): a driver whose
/// every operation fails with a message saying how to build it, so each littlefs row is a
/// failure row and the DFFS rows are unchanged.
#[cfg(not(feature = "littlefs"))]
pub mod littlefs {
    use crate::fsapi::{Driver, End, FsError, FsResult, MountReport, Session};
    use dffs_sim::SharedSim;

    const WHY: &str = "littlefs not built (build with --features littlefs; needs libclang-dev)";

    struct NotBuilt(SharedSim);

    impl Driver for NotBuilt {
        fn name(&self) -> &'static str {
            "littlefs"
        }
        fn config(&self) -> String {
            WHY.to_string()
        }
        fn sim(&self) -> &SharedSim {
            &self.0
        }
        fn format(&mut self) -> FsResult<()> {
            Err(FsError::Other(WHY.into()))
        }
        fn session(
            &mut self,
            _end: End,
            _f: &mut dyn FnMut(&mut dyn Session) -> FsResult<()>,
        ) -> FsResult<MountReport> {
            Err(FsError::Other(WHY.into()))
        }
    }

    /// The stand-in driver.
    pub fn driver(sim: SharedSim) -> Result<Box<dyn Driver>, String> {
        Ok(Box::new(NotBuilt(sim)))
    }
}
pub mod plot;
pub mod report;
pub mod suites;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

pub use report::{Row, SuiteReport};

/// The suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// Mount time, page reads and RAM against file count, clean and after a power cut (seeds
    /// 001, 003).
    Mount,
    /// Write, mount, scan, read and remove a root file system tree (seeds 000, 004).
    Rootfs,
    /// Write and read speed by block size (seed 001).
    Throughput,
    /// Space used by the file system and by a 1 MiB file (seed 001).
    Space,
    /// Small synced accesses on NOR (seed 002).
    Nor,
    /// Postmark with O_SYNC (seed 003).
    Postmark,
    /// Postmark 1.51 as on a `--sync` mount of `nand-slc-128m`: files opened O_SYNC, 4 KiB
    /// writes, whole-file reads (issue 17).
    PostmarkSync,
    /// Filebench create, copy, create/delete (seed 003).
    Filebench,
    /// Erase-count spread after rewriting a hot file (wear leveling).
    Wear,
    /// Every suite in turn.
    All,
}

impl Suite {
    /// Every suite `all` runs, in order.
    pub const EACH: [Suite; 9] = [
        Suite::Mount,
        Suite::Rootfs,
        Suite::Throughput,
        Suite::Space,
        Suite::Nor,
        Suite::Postmark,
        Suite::PostmarkSync,
        Suite::Filebench,
        Suite::Wear,
    ];

    /// The suite's name as typed on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Mount => "mount",
            Suite::Rootfs => "rootfs",
            Suite::Throughput => "throughput",
            Suite::Space => "space",
            Suite::Nor => "nor",
            Suite::Postmark => "postmark",
            Suite::PostmarkSync => "postmark-sync",
            Suite::Filebench => "filebench",
            Suite::Wear => "wear",
            Suite::All => "all",
        }
    }
}

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// For the crate's tests: the same shape, as small as still meaningful (well under a
    /// second per suite).
    Tiny,
    /// `--quick`: the same shape at a size that runs in seconds (CI).
    Quick,
    /// The full sizes of the benchmark description.
    Full,
}

impl Scale {
    /// Picks the value for this scale.
    pub fn pick<T>(self, tiny: T, quick: T, full: T) -> T {
        match self {
            Scale::Tiny => tiny,
            Scale::Quick => quick,
            Scale::Full => full,
        }
    }
}

/// `dffs bench` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The suite to run.
    #[arg(value_enum)]
    pub suite: Suite,
    /// Same shape at a size that runs in seconds (what CI runs).
    #[arg(long)]
    pub quick: bool,
    /// Write every figure as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write SVG plots shaped like the seeds' figures into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// rootfs: run the steps on this directory tree instead of the synthetic one.
    #[arg(long, value_name = "DIR")]
    pub tree: Option<PathBuf>,
    /// rootfs --tree: the device preset to run on (default nand-slc-128m).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// nor: the erase size to run on (4KiB sectors by default, as littlefs's users configure
    /// SPI NOR; 32KiB or 64KiB blocks).
    #[arg(long, value_name = "SIZE")]
    pub erase_size: Option<String>,
}

/// What a suite runs with, beyond its name.
#[derive(Clone, Debug)]
pub struct Options {
    /// Size of the run.
    pub scale: Scale,
    /// rootfs: a user's directory tree instead of the synthetic one.
    pub tree: Option<PathBuf>,
    /// rootfs --tree: the device preset.
    pub preset: Option<String>,
    /// nor: the erase size (bytes) instead of 4 KiB sectors.
    pub erase_size: Option<u32>,
    /// Print progress lines on stderr (on when stderr is a terminal, or when the environment
    /// variable `DFFS_BENCH_PROGRESS` is `1`).
    pub progress: bool,
}

impl Options {
    /// Options for `scale`, no tree, no progress.
    pub fn new(scale: Scale) -> Options {
        Options {
            scale,
            tree: None,
            preset: None,
            erase_size: None,
            progress: false,
        }
    }
}

/// Runs one suite (not `all`) and returns its report.
pub fn run_suite(suite: Suite, opts: &Options) -> Result<SuiteReport, String> {
    match suite {
        Suite::Mount => suites::mount::run(opts),
        Suite::Rootfs => suites::rootfs::run(opts),
        Suite::Throughput => suites::throughput::run(opts),
        Suite::Space => suites::space::run(opts),
        Suite::Nor => suites::nor::run(opts),
        Suite::Postmark => suites::postmark::run(opts),
        Suite::PostmarkSync => suites::postmark::run_sync(opts),
        Suite::Filebench => suites::filebench::run(opts),
        Suite::Wear => suites::wear::run(opts),
        Suite::All => Err("`all` is not one suite".into()),
    }
}

/// Runs `dffs bench` as `args` says: the suite(s), a table per suite on `out`, and the JSON
/// file and plots if asked for.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<(), String> {
    if args.tree.is_some() && args.suite != Suite::Rootfs {
        return Err("--tree is for the rootfs suite".into());
    }
    if args.preset.is_some() && args.tree.is_none() {
        return Err("--preset goes with --tree (the other suites use the seeds' devices)".into());
    }
    let erase_size = match &args.erase_size {
        None => None,
        Some(text) => {
            if !matches!(args.suite, Suite::Nor | Suite::All) {
                return Err("--erase-size is for the nor suite".into());
            }
            let b = dffs_sim::preset::parse_size(text)
                .and_then(|b| u32::try_from(b).ok())
                .ok_or_else(|| {
                    format!("invalid erase size '{text}' (examples: 4KiB, 32KiB, 64KiB)")
                })?;
            Some(b)
        }
    };
    let opts = Options {
        erase_size,
        scale: if args.quick {
            Scale::Quick
        } else {
            Scale::Full
        },
        tree: args.tree.clone(),
        preset: args.preset.clone(),
        progress: std::io::stderr().is_terminal()
            || std::env::var_os("DFFS_BENCH_PROGRESS").is_some_and(|v| v == "1"),
    };
    let io = |e: std::io::Error| e.to_string();
    let list: Vec<Suite> = if args.suite == Suite::All {
        Suite::EACH.to_vec()
    } else {
        vec![args.suite]
    };
    let mut reports = Vec::new();
    for s in list {
        let rep = run_suite(s, &opts)?;
        suites::print(out, &rep).map_err(io)?;
        if let Some(dir) = &args.plot {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            for f in plot::plots(&rep, dir)? {
                writeln!(out, "  plot: {}", f.display()).map_err(io)?;
            }
        }
        reports.push(rep);
    }
    if let Some(path) = &args.json {
        let v = if args.suite == Suite::All {
            report::all_json(&reports, args.quick)
        } else {
            report::suite_json(&reports[0])
        };
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        writeln!(out, "\njson: {}", path.display()).map_err(io)?;
    }
    Ok(())
}
