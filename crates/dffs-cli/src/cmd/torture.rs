//! `dffs torture`: power-cut campaigns on a simulated device.
//!
//! Owns the command line of the campaign (which preset, workloads, how many cuts, which seed),
//! how the cuts are shared among workloads, the summary and the JSON report. The workloads, the
//! cuts and the verification of the guarantees all live in the `dffs-torture` crate; this file
//! must never judge a recovery itself.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args as ClapArgs;
use dffs::Config;
use dffs_torture::{Failure, Faults, Options, Workload};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use super::info::RamConfig;
use super::CliError;

/// Exit status when a guarantee did not hold after some cut.
pub const FAILED: u8 = 3;

/// Options of `dffs torture`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Simulated device (see `dffs presets`); cut to --blocks erase blocks so that garbage
    /// collection, wear leveling and a full device are reached quickly.
    #[arg(long, default_value = dffs_sim::preset::DEFAULT_PRESET)]
    pub preset: String,
    /// Erase block size for a preset that offers several (NOR: 4KiB, 32KiB, 64KiB), applied
    /// before --blocks.
    #[arg(long, value_name = "SIZE")]
    pub erase_size: Option<String>,
    /// Erase blocks of the device the workloads run on (0: the preset's whole device; more
    /// than the chip has: a larger chip of its geometry).
    #[arg(long, default_value_t = 24)]
    pub blocks: u32,
    /// Workload: mixed, churn, log (seed 002's log archive, in transactions), full, large, links
    /// (hard links), or all (each in turn, sharing the cuts).
    #[arg(long, default_value = "all")]
    pub workload: String,
    /// Power cuts to verify in total; each workload gets its share, spread evenly over its
    /// program and erase operations (every point when the share covers them all; 0: every
    /// point of every workload).
    #[arg(long, default_value_t = 200)]
    pub cuts: u64,
    /// Seed of the workloads and of the simulator's choices at each cut.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of seeds to run, from --seed upwards (a longer campaign).
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// Operations in each workload.
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// Chained cuts: run ONE device through this many power cuts in a row per workload and
    /// seed (cuts also during recoveries and the first checkpoint after them), comparing the
    /// tree with the allowed states after every recovery; never reformatted. Replaces the
    /// campaign of independent cuts (--cuts).
    #[arg(long, value_name = "N")]
    pub chain: Option<u64>,
    /// Reproduce one failure: cut at this program/erase operation only (needs one workload).
    #[arg(long)]
    pub cut: Option<u64>,
    /// Mount configuration: smallest, default or fast (small caches reach more write-back
    /// paths).
    #[arg(long, default_value = "smallest")]
    pub config: String,
    /// Page the block table's records from flash whatever the device's size (the mount
    /// configuration's `records_ram` set to 0; large devices page them anyway).
    #[arg(long)]
    pub paged_records: bool,
    /// Compression of the data the workloads write: none, lz4 or deflate.
    #[arg(long, default_value = "none")]
    pub compress: String,
    /// Device faults during the workloads and the recoveries: none, standard (NAND: transient
    /// bit flips at 3e-6 per bit, stuck flips at the ECC limit every 5 steps, failing programs
    /// and erases; NOR: failing programs and erases), or a comma list of the standard mix's
    /// parts: flips, stuck, program, erase.
    #[arg(long, default_value = "none")]
    pub faults: String,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Serialize)]
struct WorkloadRow {
    workload: &'static str,
    seed: u64,
    workload_ops: u64,
    cuts: u64,
    failures: usize,
    commits: u64,
    nospace: u64,
    /// Least share of the good blocks' capacity held in files at an ENOSPC.
    nospace_min_fill: Option<f64>,
    /// Faults the uncut run met.
    faults: dffs_torture::FaultCounts,
    /// Cuts after which a second cut landed during recovery or the work after it.
    second_cuts: u64,
    /// Cut runs in which a cut upper page damaged its lower page (paired-page MLC).
    paired_page_damage: u64,
}

#[derive(Serialize)]
struct FailureRow {
    workload: &'static str,
    seed: u64,
    cut: u64,
    message: String,
    /// The command that reruns exactly this cut.
    reproduce: String,
}

#[derive(Serialize)]
struct JsonReport {
    preset: String,
    blocks: u32,
    config: String,
    steps: usize,
    /// Cuts verified.
    cuts: u64,
    /// Cuts after which a guarantee did not hold (and uncut runs that failed).
    failures: usize,
    workloads: Vec<WorkloadRow>,
    failure_list: Vec<FailureRow>,
    host_seconds: f64,
}

fn config_named(name: &str) -> Result<Config, CliError> {
    use clap::ValueEnum;
    RamConfig::from_str(name, false)
        .map(RamConfig::config)
        .map_err(|_| {
            CliError::msg(format!(
                "unknown configuration '{name}' (smallest, default, fast)"
            ))
        })
}

/// Runs the campaign.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let base = dffs_sim::preset::preset(&args.preset).ok_or_else(|| {
        CliError::msg(format!(
            "unknown preset '{}' (see 'dffs presets')",
            args.preset
        ))
    })?;
    let base = super::image::with_erase_size(base, args.erase_size.as_deref())?;
    let preset = if args.blocks == 0 {
        base
    } else {
        base.with_size_bytes(args.blocks as u64 * base.geometry.block_size() as u64)?
    };
    let mut config = config_named(&args.config)?;
    if args.paged_records {
        config.records_ram = 0;
    }
    let workloads: Vec<Workload> = if args.workload == "all" {
        Workload::ALL.to_vec()
    } else {
        vec![Workload::from_name(&args.workload).ok_or_else(|| {
            CliError::msg(format!(
                "unknown workload '{}' (mixed, churn, log, full, large, links, all)",
                args.workload
            ))
        })?]
    };
    if args.steps == 0 {
        return Err(CliError::msg("--steps must be at least 1"));
    }
    let compression = dffs::format::compress::parse(&args.compress).ok_or_else(|| {
        CliError::msg(format!(
            "unknown compression '{}' (none, lz4, deflate)",
            args.compress
        ))
    })?;
    let std_faults = Faults::standard(preset.geometry.kind);
    let faults = match args.faults.as_str() {
        "none" => Faults::NONE,
        "standard" => std_faults,
        list => {
            let mut f = Faults::NONE;
            for part in list.split(',') {
                match part {
                    "flips" => f.bitflip_rate = std_faults.bitflip_rate,
                    "stuck" => f.stuck_every = std_faults.stuck_every,
                    "program" => f.program_fail_rate = std_faults.program_fail_rate,
                    "erase" => f.erase_fail_rate = std_faults.erase_fail_rate,
                    _ => {
                        return Err(CliError::msg(format!(
                            "unknown fault mix '{list}' (none, standard, or a list of flips, stuck, program, erase)"
                        )))
                    }
                }
            }
            f
        }
    };
    let seeds = args.seeds.max(1);
    let options = |workload: Workload, seed: u64, cuts: u64| Options {
        preset,
        workload,
        steps: args.steps,
        seed,
        cuts,
        config,
        compression,
        faults,
    };

    if let Some(cut) = args.cut {
        if workloads.len() != 1 {
            return Err(CliError::msg("--cut needs one --workload"));
        }
        let opts = options(workloads[0], args.seed, 0);
        return match dffs_torture::run_one(&opts, cut) {
            Ok(()) => {
                writeln!(out, "cut {cut}: every guarantee holds")?;
                Ok(())
            }
            Err(m) => Err(CliError::Status {
                code: FAILED,
                message: format!("cut {cut}: {m}"),
            }),
        };
    }

    if let Some(n) = args.chain {
        return run_chains(args, &workloads, seeds, n, &options, out);
    }

    let runs = workloads.len() as u64 * seeds;
    let started = Instant::now();
    let bar = progress_bar(args.quiet, runs);
    let mut rows = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    let mut total_cuts = 0;
    writeln!(
        out,
        "torture: {} ({} blocks), {} workload(s) x {} seed(s), {} steps, config {}",
        preset.name,
        preset.geometry.blocks,
        workloads.len(),
        seeds,
        args.steps,
        args.config
    )?;
    let mut runs_left = runs;
    for seed in args.seed..args.seed.saturating_add(seeds) {
        for &w in &workloads {
            // Share the cuts: each run gets an equal part of what is left, so the cuts a short
            // workload cannot use go to the next ones (0 keeps "every point").
            let share = if args.cuts == 0 {
                0
            } else {
                args.cuts
                    .saturating_sub(total_cuts)
                    .div_ceil(runs_left)
                    .max(1)
            };
            runs_left -= 1;
            bar.set_message(format!("{} seed {seed}", w.name()));
            let rep = dffs_torture::run(&options(w, seed, share), &mut |done, total| {
                bar.set_message(format!("{} seed {seed}: cut {done}/{total}", w.name()));
            });
            bar.inc(1);
            total_cuts += rep.cuts;
            let line = format!(
                "  {:<6} seed {:<4} {:>6} ops  {:>6} cuts  {:>4} commits  {:>3} ENOSPC  {}",
                w.name(),
                seed,
                rep.workload_ops,
                rep.cuts,
                rep.commits,
                rep.nospace,
                if rep.failures.is_empty() {
                    "ok".to_string()
                } else {
                    format!("{} FAILED", rep.failures.len())
                }
            );
            bar.suspend(|| writeln!(out, "{line}"))?;
            rows.push(WorkloadRow {
                workload: w.name(),
                seed,
                workload_ops: rep.workload_ops,
                cuts: rep.cuts,
                failures: rep.failures.len(),
                commits: rep.commits,
                nospace: rep.nospace,
                nospace_min_fill: rep.nospace_min_fill,
                faults: rep.faults,
                second_cuts: rep.second_cuts,
                paired_page_damage: rep.paired_page_damage,
            });
            failures.extend(rep.failures);
        }
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    for f in failures.iter().take(20) {
        writeln!(
            out,
            "FAIL {} seed {} cut {}: {}",
            f.workload,
            f.seed,
            f.cut,
            f.message.lines().next().unwrap_or("")
        )?;
        writeln!(out, "     reproduce: {}", reproduce(args, f))?;
    }
    if failures.len() > 20 {
        writeln!(out, "... and {} more failures", failures.len() - 20)?;
    }
    writeln!(
        out,
        "torture: {total_cuts} cuts verified, {} failures ({secs:.1} s)",
        failures.len()
    )?;
    if let Some(path) = &args.json {
        let report = JsonReport {
            preset: preset.name.to_string(),
            blocks: preset.geometry.blocks,
            config: args.config.clone(),
            steps: args.steps,
            cuts: total_cuts,
            failures: failures.len(),
            workloads: rows,
            failure_list: failures
                .iter()
                .map(|f| FailureRow {
                    workload: f.workload,
                    seed: f.seed,
                    cut: f.cut,
                    message: f.message.clone(),
                    reproduce: reproduce(args, f),
                })
                .collect(),
            host_seconds: (secs * 1000.0).round() / 1000.0,
        };
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").map_err(|e| CliError::local(path, &e))?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Status {
            code: FAILED,
            message: format!(
                "{} of {total_cuts} cuts broke a guarantee (see above)",
                failures.len()
            ),
        })
    }
}

/// `--chain N`: a chained-cut run per workload and seed; one line each, a summary, and exit
/// status [`FAILED`] when any chain failed.
fn run_chains(
    args: &Args,
    workloads: &[Workload],
    seeds: u64,
    n: u64,
    options: &dyn Fn(Workload, u64, u64) -> Options,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let started = Instant::now();
    let mut failed = Vec::new();
    let (mut cuts, mut rec, mut lost) = (0u64, 0u64, 0u64);
    let (mut uncounted, mut over) = (0u64, 0u64);
    let mut reports = Vec::new();
    for seed in args.seed..args.seed.saturating_add(seeds) {
        for &w in workloads {
            let opts = options(w, seed, 0);
            let r = dffs_torture::run_chain(&opts, n, &mut |_, _| {});
            writeln!(
                out,
                "  {:<6} seed {seed:<4} {:>6} chained cuts ({} in recoveries) {:>6} recoveries {:>7} commits {:>5} ENOSPC {:>5} erase counts lost {:>5} erases uncounted {:>3} overcounted  {}",
                w.name(),
                r.cuts,
                r.recovery_cuts,
                r.recoveries,
                r.commits,
                r.nospace,
                r.erase_counts_lost,
                r.erases_uncounted,
                r.erases_overcounted,
                match &r.failure {
                    None => "ok".to_string(),
                    Some(m) => format!("FAILED: {m}"),
                }
            )?;
            cuts += r.cuts;
            rec += r.recovery_cuts;
            lost += r.erase_counts_lost;
            uncounted += r.erases_uncounted;
            over += r.erases_overcounted;
            if let Some(m) = &r.failure {
                failed.push(format!("{} seed {seed}: {m}", w.name()));
            }
            reports.push(serde_json::json!({
                "workload": w.name(), "seed": seed, "report": r,
            }));
        }
    }
    if let Some(path) = &args.json {
        let v = serde_json::json!({ "chain": n, "runs": reports });
        std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap_or_default())
            .map_err(|e| CliError::msg(format!("{}: {e}", path.display())))?;
    }
    writeln!(
        out,
        "torture --chain: {cuts} chained cuts ({rec} in recoveries), {} failures, {lost} erase counts lost, {uncounted} erases uncounted, {over} overcounted ({:.1} s)",
        failed.len(),
        started.elapsed().as_secs_f64()
    )?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Status {
            code: FAILED,
            message: failed.join("\n"),
        })
    }
}

fn reproduce(args: &Args, f: &Failure) -> String {
    let erase = match &args.erase_size {
        Some(e) => format!(" --erase-size {e}"),
        None => String::new(),
    };
    let paged = if args.paged_records {
        " --paged-records"
    } else {
        ""
    };
    format!(
        "dffs torture --preset {}{erase} --blocks {} --workload {} --steps {} --config {}{paged} --compress {} --faults {} --seed {} --cut {}",
        args.preset, args.blocks, f.workload, args.steps, args.config, args.compress, args.faults, f.seed, f.cut
    )
}

fn progress_bar(quiet: bool, runs: u64) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(runs), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("[{elapsed_precise}] {wide_bar} {pos}/{len} runs {msg}")
    {
        bar.set_style(style);
    }
    bar
}
