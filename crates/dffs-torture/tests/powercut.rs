//! Cut the power at every program and erase of short workloads, on NAND and on NOR, and check
//! the guarantees after each cut (mount, fsck, synced data, all-or-nothing commits and
//! transactions). Longer campaigns: `dffs torture` (see the README).

use dffs::Config;
use dffs_sim::preset::preset;
use dffs_torture::{run, Options, Workload};

fn check(name: &str, blocks: u32, workload: Workload, steps: usize, seed: u64) {
    check_z(name, blocks, workload, steps, seed, 0)
}

fn check_z(name: &str, blocks: u32, workload: Workload, steps: usize, seed: u64, compression: u8) {
    let opts = Options {
        preset: preset(name).unwrap().with_blocks(blocks).unwrap(),
        workload,
        steps,
        seed,
        cuts: 0,
        config: Config::smallest(),
        compression,
    };
    let rep = run(&opts, &mut |_, _| {});
    for f in rep.failures.iter().take(5) {
        eprintln!(
            "{name} {} seed {} cut {}: {}",
            f.workload, f.seed, f.cut, f.message
        );
    }
    assert!(
        rep.failures.is_empty(),
        "{} failures out of {} cuts",
        rep.failures.len(),
        rep.cuts
    );
    assert!(
        rep.workload_ops > 20,
        "workload too small: {} ops",
        rep.workload_ops
    );
    assert_eq!(
        rep.cuts, rep.workload_ops,
        "every program and erase was a cut point"
    );
    eprintln!(
        "{name} {}: {} cuts, {} commits, {} ENOSPC",
        workload.name(),
        rep.cuts,
        rep.commits,
        rep.nospace
    );
}

#[test]
fn every_cut_nand_mixed() {
    check("nand-slc-128m", 24, Workload::Mixed, 40, 7);
}

#[test]
fn every_cut_nor_mixed() {
    check("nor-qspi-16m", 24, Workload::Mixed, 30, 8);
}

#[test]
fn every_cut_nand_links() {
    check("nand-slc-128m", 24, Workload::Links, 40, 21);
}

#[test]
fn every_cut_nor_links() {
    check("nor-qspi-16m", 24, Workload::Links, 30, 22);
}

#[test]
fn every_cut_nand_mixed_lz4() {
    check_z(
        "nand-slc-128m",
        24,
        Workload::Mixed,
        40,
        11,
        dffs::format::compress::LZ4,
    );
}

#[test]
fn every_cut_nor_mixed_deflate() {
    check_z(
        "nor-qspi-16m",
        24,
        Workload::Mixed,
        30,
        12,
        dffs::format::compress::DEFLATE,
    );
}

#[test]
fn every_cut_mlc_churn_lz4() {
    check_z(
        "nand-mlc-1g",
        16,
        Workload::Churn,
        30,
        13,
        dffs::format::compress::LZ4,
    );
}

#[test]
fn every_cut_nand_log_seed002() {
    check("nand-slc-128m", 24, Workload::Log, 30, 9);
}

#[test]
fn every_cut_mlc_churn() {
    check("nand-mlc-1g", 16, Workload::Churn, 30, 10);
}

#[test]
#[ignore = "debug helper: DFFS_CUT=n DFFS_WL=log cargo test -p dffs-torture one_cut -- --ignored"]
fn one_cut() {
    let cut: u64 = std::env::var("DFFS_CUT").unwrap().parse().unwrap();
    let wl = Workload::from_name(&std::env::var("DFFS_WL").unwrap_or("mixed".into())).unwrap();
    let name = std::env::var("DFFS_PRESET").unwrap_or("nand-slc-128m".into());
    let blocks: u32 = std::env::var("DFFS_BLOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let steps: usize = std::env::var("DFFS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("DFFS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let opts = Options {
        preset: preset(&name).unwrap().with_blocks(blocks).unwrap(),
        workload: wl,
        steps,
        seed,
        cuts: 0,
        config: Config::smallest(),
        compression: env_compress(),
    };
    let r = dffs_torture::run_one(&opts, cut);
    eprintln!("result: {r:?}");
}

/// `DFFS_COMPRESS=lz4|deflate` runs the campaign and single cuts on a compressed file system.
fn env_compress() -> u8 {
    std::env::var("DFFS_COMPRESS")
        .ok()
        .and_then(|v| dffs::format::compress::parse(&v))
        .unwrap_or(dffs::format::compress::NONE)
}

#[test]
#[ignore = "campaign: DFFS_SEEDS=20 DFFS_STEPS=60 cargo test --release -p dffs-torture campaign -- --ignored --nocapture"]
fn campaign() {
    let seeds: u64 = std::env::var("DFFS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let steps: usize = std::env::var("DFFS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let cuts: u64 = std::env::var("DFFS_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut total = 0;
    let mut failures = 0;
    for (name, blocks) in [
        ("nand-slc-128m", 24u32),
        ("nor-qspi-16m", 24),
        ("nand-mlc-1g", 16),
    ] {
        for wl in Workload::ALL {
            for seed in 0..seeds {
                let opts = Options {
                    preset: preset(name).unwrap().with_blocks(blocks).unwrap(),
                    workload: wl,
                    steps,
                    seed: 100 + seed,
                    cuts,
                    config: Config::smallest(),
                    compression: env_compress(),
                };
                let rep = run(&opts, &mut |_, _| {});
                total += rep.cuts;
                failures += rep.failures.len();
                for f in rep.failures.iter().take(2) {
                    eprintln!(
                        "FAIL {name} {} seed {} cut {}: {}",
                        f.workload,
                        f.seed,
                        f.cut,
                        f.message.chars().take(300).collect::<String>()
                    );
                }
            }
        }
    }
    eprintln!("campaign: {total} cuts, {failures} failures");
    assert_eq!(failures, 0);
}

/// Runs that once failed (found by campaigns), replayed exactly: preset, blocks, workload,
/// steps, seed, and the cut (0: no cut, the whole run and a final remount).
#[test]
fn campaign_regressions() {
    let cases: &[(&str, u32, &str, usize, u64, u64, &str)] = &[
        // A transaction abort reloaded the file system while garbage collection was half-way
        // through a victim; collection went on from the middle, so blocks it had moved before
        // the reload (moves the reload forgot) were erased with the victim.
        (
            "nand-mlc-1g",
            16,
            "mixed",
            100,
            102,
            0,
            "gc state survived a reload",
        ),
        (
            "nand-mlc-1g",
            16,
            "mixed",
            100,
            114,
            0,
            "gc state survived a reload",
        ),
        // A second cut before any checkpoint: the NAND head search took the page an earlier
        // recovery had skipped for the end of the head, and programmed over written pages.
        (
            "nand-slc-128m",
            24,
            "churn",
            120,
            101,
            308,
            "head recovery stopped at an earlier recovery's gap",
        ),
        // Replay followed the journal into its reserved next block; the recovered session
        // reopened that block as if it were still erased.
        (
            "nand-slc-128m",
            24,
            "large",
            120,
            102,
            1893,
            "journal reopened a reserved block replay had used",
        ),
        (
            "nand-slc-128m",
            24,
            "mixed",
            120,
            105,
            450,
            "journal reopened a reserved block replay had used",
        ),
        (
            "nor-qspi-16m",
            24,
            "churn",
            120,
            101,
            2016,
            "journal reopened a reserved block replay had used",
        ),
        // The recovery session moved the journal into the reserved block and was cut before
        // its checkpoint; the next recovery reopened that block as erased (MLC: NOP exceeded).
        (
            "nand-mlc-1g",
            16,
            "churn",
            120,
            101,
            299,
            "journal reopened a reserved block a crashed session had written",
        ),
    ];
    for &(name, blocks, wl, steps, seed, cut, why) in cases {
        let opts = Options {
            preset: preset(name).unwrap().with_blocks(blocks).unwrap(),
            workload: Workload::from_name(wl).unwrap(),
            steps,
            seed,
            cuts: 0,
            config: Config::smallest(),
            compression: 0,
        };
        let r = dffs_torture::run_one(&opts, cut);
        assert!(
            r.is_ok(),
            "{name} {wl} seed {seed} cut {cut} ({why}): {r:?}"
        );
    }
}
