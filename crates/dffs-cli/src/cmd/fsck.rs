//! `dffs fsck IMAGE [--json]`: the library's consistency check of an image, reported.
//!
//! Owns the report's presentation and the exit status: 0 when the file system is consistent
//! (warnings allowed), 4 when it is not (the checker found errors, or the image does not
//! mount), 1 when the check could not run at all (no image, unreadable sidecar). It must never
//! change the image (read-only mount; the checker itself never writes) and never judge
//! consistency itself: every finding comes from `Fs::fsck`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use serde::Serialize;

use super::image::{open_device, Access, Caches, RawArgs, Session};
use super::{human_bytes, round3, sig3, CliError};

/// Exit status when the file system is not consistent.
pub const INCONSISTENT: u8 = 4;

/// Options of `dffs fsck`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub raw: RawArgs,
}

#[derive(Serialize)]
struct Cost {
    sim_us: f64,
    page_reads: u64,
}

#[derive(Serialize)]
struct Report {
    image: String,
    /// No errors (warnings allowed).
    clean: bool,
    /// Whether the file system mounted; when not, `errors` says why.
    mounted: bool,
    /// Whether the mount replayed a journal (the last session did not end cleanly).
    recovered: bool,
    errors: Vec<String>,
    /// Errors found beyond the ones listed.
    more_errors: usize,
    warnings: Vec<String>,
    dirs: u64,
    files: u64,
    data_blocks: u64,
    bytes: u64,
    /// What the check itself cost on the device (the mount not included).
    check: Cost,
}

fn report_for(image: String) -> Report {
    Report {
        image,
        clean: false,
        mounted: false,
        recovered: false,
        errors: Vec::new(),
        more_errors: 0,
        warnings: Vec::new(),
        dirs: 0,
        files: 0,
        data_blocks: 0,
        bytes: 0,
        check: Cost {
            sim_us: 0.0,
            page_reads: 0,
        },
    }
}

/// Runs `dffs fsck`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let name = args.image.display().to_string();
    let mut r = report_for(name.clone());
    // Failing to read the image is an error of the command; failing to mount is a finding.
    let (sim, _) = open_device(&args.image, &args.raw, Access::ReadOnly)?;
    let time_kind = if sim.simulated() {
        "simulated device time"
    } else {
        "time in MTD calls"
    };
    match Session::mount(sim, &args.image, Access::ReadOnly, Caches::Bulk) {
        Err(e) => {
            let why = e.to_string();
            let why = why.strip_prefix(&format!("{name}: ")).unwrap_or(&why);
            r.errors.push(why.to_string());
        }
        Ok(mut s) => {
            r.mounted = true;
            r.recovered = s.fs().info().recovered;
            let before = s.device().stats();
            let rep = s
                .fs()
                .fsck()
                .map_err(|e| CliError::msg(format!("{name}: the check failed: {e}")))?;
            let cost = s.device().stats().since(&before);
            r.clean = rep.is_clean();
            r.errors = rep.errors;
            r.more_errors = rep.more_errors;
            r.warnings = rep.warnings;
            r.dirs = rep.dirs;
            r.files = rep.files;
            r.data_blocks = rep.data_blocks;
            r.bytes = rep.bytes;
            r.check = Cost {
                sim_us: round3(cost.sim_us()),
                page_reads: cost.reads,
            };
            s.finish()?;
        }
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &r)?;
        writeln!(out)?;
    } else {
        if r.mounted {
            writeln!(
                out,
                "{name}: checked {} directories, {} files and symlinks, {} data blocks ({}); \
                 {} page reads, {} s of {time_kind}{}",
                r.dirs,
                r.files,
                r.data_blocks,
                human_bytes(r.bytes),
                r.check.page_reads,
                sig3(r.check.sim_us / 1e6),
                if r.recovered {
                    " (the mount recovered from an unclean shutdown)"
                } else {
                    ""
                }
            )?;
        }
        for e in &r.errors {
            writeln!(out, "error: {e}")?;
        }
        if r.more_errors > 0 {
            writeln!(out, "error: ... and {} more", r.more_errors)?;
        }
        for w in &r.warnings {
            writeln!(out, "warning: {w}")?;
        }
        if r.clean {
            writeln!(
                out,
                "{name}: clean{}",
                match r.warnings.len() {
                    0 => String::new(),
                    1 => " (1 warning)".to_string(),
                    n => format!(" ({n} warnings)"),
                }
            )?;
        }
    }
    if r.clean {
        return Ok(());
    }
    out.flush()?;
    let message = if r.mounted {
        let n = r.errors.len() + r.more_errors;
        format!(
            "{name}: the file system is inconsistent ({n} error{})",
            if n == 1 { "" } else { "s" }
        )
    } else {
        format!("{name}: {}", r.errors[0])
    };
    Err(CliError::Status {
        code: INCONSISTENT,
        message,
    })
}
