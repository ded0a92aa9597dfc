//! The suites of BENCHMARKS.md, one module each, and what they share: a fresh pair of file
//! systems on identical devices, progress lines, and printing a suite's tables.
//!
//! Each suite owns its workload, sizes (tiny, `--quick`, full) and tables. No suite may give one
//! file system an easier workload than the other, skip verification, or turn a failure into a
//! figure.

pub mod filebench;
pub mod mount;
pub mod nor;
pub mod postmark;
pub mod rootfs;
pub mod space;
pub mod throughput;
pub mod tree;
pub mod wear;

use std::io::Write;

use dffs_sim::Preset;

use crate::devices::new_device;
use crate::dffs_fs::DffsDriver;
use crate::fsapi::Driver;
use crate::report::{self, SuiteReport};
use crate::{littlefs, Options};

/// DFFS and littlefs, each on its own fresh device made from `p`.
pub fn pair(p: Preset) -> Result<Vec<Box<dyn Driver>>, String> {
    Ok(vec![
        Box::new(DffsDriver::new(new_device(p)?)),
        littlefs::driver(new_device(p)?)?,
    ])
}

/// A driver and the name of the compression its file system is formatted with.
pub type CompressedDriver = (Box<dyn Driver>, &'static str);

/// [`pair`] plus DFFS with LZ4 compression, each with the name of its compression (the
/// `compress` row parameter of the suites that compare compression on and off).
pub fn pair_and_compressed(p: Preset) -> Result<Vec<CompressedDriver>, String> {
    Ok(vec![
        (
            Box::new(DffsDriver::new(new_device(p)?)) as Box<dyn Driver>,
            "none",
        ),
        (
            Box::new(DffsDriver::new(new_device(p)?).with_compression(dffs::format::compress::LZ4)),
            "lz4",
        ),
        (littlefs::driver(new_device(p)?)?, "none"),
    ])
}

/// A progress line on stderr (only when asked: interactive runs).
pub fn progress(opts: &Options, msg: impl AsRef<str>) {
    if opts.progress {
        eprintln!("  [{}] {}", time_of_day(), msg.as_ref());
    }
}

fn time_of_day() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{:02}:{:02}:{:02}", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

/// Prints a suite: header, its tables, failures and notes.
pub fn print(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    report::header(out, rep)?;
    match rep.suite.as_str() {
        "mount" => mount::tables(out, rep)?,
        "rootfs" => rootfs::tables(out, rep)?,
        "throughput" => throughput::tables(out, rep)?,
        "space" => space::tables(out, rep)?,
        "nor" => nor::tables(out, rep)?,
        "postmark" | "postmark-sync" => postmark::tables(out, rep)?,
        "filebench" => filebench::tables(out, rep)?,
        "wear" => wear::tables(out, rep)?,
        _ => {}
    }
    report::footer(out, rep)
}
