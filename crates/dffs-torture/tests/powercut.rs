//! Cut the power at every program and erase of short workloads, on NAND and on NOR, and check
//! the guarantees after each cut (mount, fsck, synced data, all-or-nothing commits and
//! transactions). Longer campaigns: `dffs torture` (see the README).

use dffs::Config;
use dffs_sim::preset::preset;
use dffs_torture::{run, Faults, Options, Report, Workload, NOSPACE_FLOOR};

fn check(name: &str, blocks: u32, workload: Workload, steps: usize, seed: u64) {
    check_z(name, blocks, workload, steps, seed, 0)
}

fn check_z(name: &str, blocks: u32, workload: Workload, steps: usize, seed: u64, compression: u8) {
    check_opts(&Options {
        compression,
        ..options(name, blocks, workload, steps, seed)
    });
}

/// Every cut of `workload` on `blocks` blocks of preset `name`, smallest configuration, no
/// compression, no faults.
fn options(name: &str, blocks: u32, workload: Workload, steps: usize, seed: u64) -> Options {
    Options {
        preset: sized(preset(name).unwrap(), blocks),
        workload,
        steps,
        seed,
        cuts: 0,
        config: Config::smallest(),
        compression: 0,
        faults: Faults::NONE,
    }
}

/// `p` with `blocks` erase blocks: a partition of the chip, or a larger chip of its geometry.
fn sized(p: dffs_sim::Preset, blocks: u32) -> dffs_sim::Preset {
    let bytes = blocks as u64 * p.geometry.block_size() as u64;
    p.with_size_bytes(bytes).unwrap()
}

/// `nor-qspi-16m` with 4 KiB erase sectors, `blocks` of them.
fn nor_4k_sectors(blocks: u32) -> dffs_sim::Preset {
    sized(
        preset("nor-qspi-16m")
            .unwrap()
            .with_erase_size(4096)
            .unwrap(),
        blocks,
    )
}

/// Runs every cut of `opts` (or its `cuts`) and asserts every guarantee held after each, and
/// that the second cut (during or right after recovery) landed in most of them.
fn check_opts(opts: &Options) -> Report {
    let name = opts.preset.name;
    let workload = opts.workload;
    let rep = run(opts, &mut |_, _| {});
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
    if opts.cuts == 0 && !opts.faults.any() {
        assert_eq!(
            rep.cuts, rep.workload_ops,
            "every program and erase was a cut point"
        );
    }
    // The second cut is armed at one of the first 16 program/erase operations after power-up:
    // recovery, its checkpoint and the steps after it issue more than that in most runs.
    assert!(
        rep.second_cuts * 2 > rep.cuts,
        "a second cut landed after only {} of {} cuts",
        rep.second_cuts,
        rep.cuts
    );
    eprintln!(
        "{name} {}: {} cuts ({} with a second cut), {} commits, {} ENOSPC (least fill {:?}), faults {:?}, paired-page damage in {} runs",
        workload.name(),
        rep.cuts,
        rep.second_cuts,
        rep.commits,
        rep.nospace,
        rep.nospace_min_fill,
        rep.faults,
        rep.paired_page_damage
    );
    rep
}

/// Faults often enough that a short workload meets every kind.
fn heavy_faults(kind: dffs::FlashKind) -> Faults {
    Faults {
        program_fail_rate: 2e-3,
        erase_fail_rate: 1e-2,
        ..Faults::standard(kind)
    }
}

#[test]
fn every_cut_nand_mixed() {
    check("nand-slc-128m", 24, Workload::Mixed, 40, 7);
}

#[test]
fn every_cut_nor_mixed() {
    check("nor-qspi-16m", 24, Workload::Mixed, 30, 8);
}

/// Every cut with the block table's records paged from flash (`records_ram: 0`; DESIGN
/// §12.1): 1 MiB of 4 KiB NOR sectors, whose 4 block-table pages do not all fit the 3 cached,
/// so that records leave RAM and are read back, also in the recoveries. And a chain of cuts on
/// 2 MiB of them (7 pages).
#[test]
fn every_cut_nor_4k_paged_records() {
    let config = Config {
        records_ram: 0,
        ..Config::smallest()
    };
    check_opts(&Options {
        preset: nor_4k_sectors(256),
        config,
        ..options("nor-qspi-16m", 256, Workload::Mixed, 30, 9)
    });
    let opts = Options {
        preset: nor_4k_sectors(512),
        config,
        ..options("nor-qspi-16m", 512, Workload::Churn, 60, 11)
    };
    let r = dffs_torture::run_chain(&opts, 30, &mut |_, _| {});
    assert!(r.failure.is_none(), "{r:?}");
    assert!(r.cuts >= 30 && r.recoveries > 0, "{r:?}");
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

/// The simulator damages the lower page when a cut hits the program of its upper page
/// (paired-page MLC); the file system must never have synced data there.
#[test]
fn every_cut_mlc_paired_pages() {
    let rep = check_opts(&options("nand-mlc-1g", 16, Workload::Mixed, 40, 14));
    assert!(
        rep.paired_page_damage * 10 > rep.cuts,
        "lower pages damaged in only {} of {} cut runs",
        rep.paired_page_damage,
        rep.cuts
    );
}

/// Transient flips (3e-6 per bit) and stuck flips at the ECC limit during the workload and the
/// recoveries, so that some reads of weak pages fail and are retried: weak blocks are
/// scrubbed, and every synced byte survives.
#[test]
fn every_cut_nand_mixed_bit_flips() {
    let rep = check_opts(&Options {
        faults: Faults {
            program_fail_rate: 0.0,
            erase_fail_rate: 0.0,
            ..Faults::standard(dffs::FlashKind::Nand)
        },
        ..options("nand-slc-128m", 24, Workload::Mixed, 40, 7)
    });
    let f = rep.faults;
    assert!(f.corrected_reads > 0 && f.stuck_pages > 0, "{f:?}");
    let all = rep.faults_all_runs;
    assert!(all.uncorrectable_reads > 0, "{all:?}");
}

/// Every fault at once, failing programs and erases often, on NAND.
#[test]
fn every_cut_nand_mixed_faults() {
    let rep = check_opts(&Options {
        faults: heavy_faults(dffs::FlashKind::Nand),
        ..options("nand-slc-128m", 24, Workload::Mixed, 40, 7)
    });
    let f = rep.faults;
    assert!(f.corrected_reads > 0 && f.stuck_pages > 0, "{f:?}");
    assert!(f.program_failures + f.erase_failures > 0, "{f:?}");
}

/// Failing programs and erases on NOR (no ECC: flips are lost data, so none are injected).
#[test]
fn every_cut_nor_mixed_faults() {
    let rep = check_opts(&Options {
        faults: heavy_faults(dffs::FlashKind::Nor),
        ..options("nor-qspi-16m", 24, Workload::Mixed, 30, 8)
    });
    let f = rep.faults;
    assert!(f.program_failures + f.erase_failures > 0, "{f:?}");
}

/// A device filled until it refuses: ENOSPC comes, and not before half the room for files
/// holds file content (the bound is checked at every ENOSPC, in the uncut run and after every
/// cut).
#[test]
fn cuts_of_a_full_device_enospc_bounded() {
    let rep = check_opts(&Options {
        cuts: 60,
        ..options("nand-slc-128m", 16, Workload::Full, 120, 3)
    });
    assert!(rep.nospace > 0, "the workload never filled the device");
    let fill = rep.nospace_min_fill.expect("an ENOSPC was measured");
    assert!(fill >= NOSPACE_FLOOR, "{fill}");
}

/// Single cuts at which fault torture (`dffs torture --faults standard`, 100 steps, smallest
/// configuration) once failed, each a bug fixed since; every one fails on the code before its
/// fix:
/// - SLC log seed 2 cut 587: a recovery checkpoint whose second copy failed left a valid copy
///   in the retired anchor with the number its replacement got; the mount took it and ignored
///   every later checkpoint (stale file pointers after a remount).
/// - NOR full seed 2 cut 12206 and 18309: a program failed when no spare block was left, and
///   the next node was programmed over the half-programmed bytes (`EIO` on close).
/// - NOR full seed 2 cut 27187: an anchor replaced by a block whose data had been swapped to
///   another physical block; the mount, reading the anchor area before it knows the swaps,
///   missed every checkpoint written there (data CRC failures after a remount).
/// - MLC (`--faults program`, 20 blocks) churn seed 1 cut 56, log seed 1 cut 651, full seed 1
///   cut 1882: a failed upper-page program damaged its lower page, programmed a few pages
///   earlier and not yet durable, and the bad-block swap copied the damage (`Corrupt`, `EIO`,
///   corrupt tags); the head now keeps its last pages as programmed and the swap copies those.
/// - MLC (16 blocks, standard faults) full seed 9600 cut 1657: bad blocks had left no room for
///   files, and the harness took the file system's ENOSPC for one said too early (the
///   harness's fault, not the file system's).
#[test]
fn fault_torture_regression_cuts() {
    let program_only = Faults {
        program_fail_rate: Faults::standard(dffs::FlashKind::Nand).program_fail_rate,
        ..Faults::NONE
    };
    // (preset, blocks, workload, seed, cut, faults other than the standard mix)
    type Case<'a> = (&'a str, u32, Workload, u64, u64, Option<Faults>);
    let cases: [Case; 8] = [
        ("nand-slc-128m", 24, Workload::Log, 2, 587, None),
        // Bad blocks left no room for files: the harness took its ENOSPC for one said too
        // early (0 bytes held of 0).
        ("nand-mlc-1g", 16, Workload::Full, 9600, 1657, None),
        ("nor-qspi-16m", 32, Workload::Full, 2, 12206, None),
        ("nor-qspi-16m", 32, Workload::Full, 2, 18309, None),
        ("nor-qspi-16m", 32, Workload::Full, 2, 27187, None),
        (
            "nand-mlc-1g",
            20,
            Workload::Churn,
            1,
            56,
            Some(program_only),
        ),
        ("nand-mlc-1g", 20, Workload::Log, 1, 651, Some(program_only)),
        (
            "nand-mlc-1g",
            20,
            Workload::Full,
            1,
            1882,
            Some(program_only),
        ),
    ];
    for (name, blocks, workload, seed, cut, faults) in cases {
        let kind = preset(name).unwrap().geometry.kind;
        let opts = Options {
            faults: faults.unwrap_or(Faults::standard(kind)),
            ..options(name, blocks, workload, 100, seed)
        };
        if let Err(m) = dffs_torture::run_one(&opts, cut) {
            panic!("{name} {} seed {seed} cut {cut}: {m}", workload.name());
        }
    }
}

#[test]
#[ignore = "debug helper: DFFS_CUT=n DFFS_WL=log [DFFS_FAULTS=heavy] cargo test -p dffs-torture one_cut -- --ignored"]
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
    let kind = preset(&name).unwrap().geometry.kind;
    // `DFFS_FAULTS=standard|heavy` turns device faults on.
    let faults = match std::env::var("DFFS_FAULTS").as_deref() {
        Ok("standard") => Faults::standard(kind),
        Ok("heavy") => heavy_faults(kind),
        _ => Faults::NONE,
    };
    let opts = Options {
        compression: env_compress(),
        faults,
        ..options(&name, blocks, wl, steps, seed)
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
                    cuts,
                    compression: env_compress(),
                    ..options(name, blocks, wl, steps, 100 + seed)
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
        let opts = options(name, blocks, Workload::from_name(wl).unwrap(), steps, seed);
        let r = dffs_torture::run_one(&opts, cut);
        assert!(
            r.is_ok(),
            "{name} {wl} seed {seed} cut {cut} ({why}): {r:?}"
        );
    }
}

/// A spilled update (a large write not yet synced, whose map moved into index nodes of its
/// own) folds its map outside a checkpoint, and those index nodes are allocated at the log
/// floor. The fold now makes room first, as data write-back does: on 8 MiB of 4 KiB NOR
/// sectors a recovery session's spill found the free pool at that floor and said ENOSPC with
/// 9.6% of the room for files stored and the device 90% dead (`dffs torture --preset
/// nor-qspi-16m --erase-size 4KiB --blocks 2048 --workload full --steps 200 --cut 48315`).
#[test]
fn a_spilled_update_makes_room_before_it_folds() {
    let opts = Options {
        preset: nor_4k_sectors(2048),
        ..options("nor-qspi-16m", 256, Workload::Full, 200, 1)
    };
    let r = dffs_torture::run_one(&opts, 48315);
    assert!(r.is_ok(), "{r:?}");
}

/// A torn last journal page read differently by replay's two passes (DESIGN.md §15 item 22):
/// the first pass read a transaction's commit in it, the second read the page uncorrectable
/// and stopped before it, the recovery erased the commit's data block for the journal, and the
/// mount after the next cut read the page clean and pointed `/log/current` into the journal
/// (`EIO` at cut 22). `dffs torture --preset nand-slc-128m --blocks 32 --workload log --chain
/// 30 --seed 3004`; fails without `JournalScan::bound_to`.
#[test]
fn replay_reads_one_journal_when_its_torn_last_page_reads_differently() {
    let opts = options("nand-slc-128m", 32, Workload::Log, 100, 3004);
    let r = dffs_torture::run_chain(&opts, 30, &mut |_, _| {});
    assert!(r.failure.is_none(), "{r:?}");
    assert!(r.cuts >= 30 && r.recoveries > 0, "{r:?}");
}

/// On paired-page NAND a head may leave several unwritten pages before its next node (no node
/// goes over an upper page whose lower page holds durable data), and a recovery that probed
/// only two pages past the first erased one took such a gap for the end of the head's run,
/// continued inside it and programmed a written page again (`NopExceeded`, then `EIO` from
/// every `fsync`: cut 13). Compressed data fills pages partly and flushes them at every
/// journal program, which is where those gaps come from. `dffs torture --preset nand-mlc-1g
/// --chain 30 --config default --compress lz4 --workload log --seed 31002`; fails without
/// `GAP_PROBE_PAIRED` (`store/heads.rs`).
#[test]
fn recovery_finds_a_head_past_the_pages_paired_pages_skip() {
    let opts = Options {
        config: Config::default(),
        compression: dffs::format::compress::LZ4,
        ..options("nand-mlc-1g", 24, Workload::Log, 100, 31002)
    };
    let r = dffs_torture::run_chain(&opts, 30, &mut |_, _| {});
    assert!(r.failure.is_none(), "{r:?}");
    assert!(r.cuts >= 30 && r.recoveries > 0, "{r:?}");
}

/// A session a cut ends may leave nodes no replay reads (unsynced data in a block it took)
/// with sequence numbers above everything the journal holds. The mount after the cut counted
/// such a block's erase (a `JErasing` named it and its first node was newer than the
/// checkpoint) and went on handing out numbers from the journal's last one, so the recovery's
/// checkpoint was older than that node and every later mount counted the same erase again:
/// this chain ended with 8 erase counts above the simulator's count of the erases made.
/// The mount now hands out numbers above the first nodes it reads (`Store::seen_seq`).
/// `dffs torture --preset nor-qspi-16m --erase-size 4KiB --blocks 512 --workload full --chain
/// 30 --seed 2000`.
#[test]
fn a_mount_numbers_past_the_nodes_a_cut_session_left() {
    let opts = Options {
        preset: nor_4k_sectors(512),
        ..options("nor-qspi-16m", 512, Workload::Full, 100, 2000)
    };
    let r = dffs_torture::run_chain(&opts, 30, &mut |_, _| {});
    assert!(r.failure.is_none(), "{r:?}");
    assert_eq!(r.erases_overcounted, 0, "{r:?}");
    assert!(r.cuts >= 30 && r.recoveries > 0, "{r:?}");
}

/// A chained-cut case: preset, erase size, blocks, workload, cuts, seed.
type ChainCase<'a> = (&'a str, Option<u32>, u32, Workload, u64, u64);

/// Runs a chain of `cuts` cuts for each case and asserts it held.
fn chain_cases(cases: &[ChainCase]) {
    for &(name, erase, blocks, workload, cuts, seed) in cases {
        let mut p = preset(name).unwrap();
        if let Some(e) = erase {
            p = p.with_erase_size(e).unwrap();
        }
        let opts = Options {
            preset: sized(p, blocks),
            ..options(name, blocks, workload, 60, seed)
        };
        let r = dffs_torture::run_chain(&opts, cuts, &mut |_, _| {});
        eprintln!("{name} {workload:?}: {r:?}");
        assert!(r.failure.is_none(), "{name} {workload:?}: {:?}", r.failure);
        assert!(r.cuts >= cuts, "{name}: {} cuts", r.cuts);
        assert!(r.recoveries > 0 && r.recovery_cuts > 0, "{name}: {r:?}");
    }
}

/// Chained cuts: one device through many power cuts in a row (cuts during recoveries and the
/// first checkpoint after them too), the tree checked after every recovery, never reformatted;
/// `dffs torture --chain N` runs longer chains. Erase counts lost in cuts are counted, not
/// failed (DESIGN.md §15 item 6).
#[test]
fn chained_cuts_on_one_device() {
    chain_cases(&[
        // 512 KiB of 4 KiB sectors, full from about cut 20 on: unmount said ENOSPC at cut 26
        // when the clean checkpoint found no room, though everything was synced.
        ("nor-qspi-16m", Some(4096), 128, Workload::Links, 30, 7),
        // Same device, mixed: `gc_step` said ENOSPC at cut 27 until the copy floor kept
        // a second checkpoint's room (`dffs torture ... --workload mixed --chain 40 --seed 7`).
        ("nor-qspi-16m", Some(4096), 128, Workload::Mixed, 40, 7),
        // 1 MiB of 4 KiB sectors, churn: wedged at cut 87, every operation refused, until the
        // application's floor kept the recovery checkpoint's room (DESIGN.md §9.3). 100-cut
        // churn chains on this device still wedge at 3 or 4 of seeds 1-12 (DESIGN.md §15
        // item 19), and which ones moves with any change to where the cuts land: seed 7
        // wedged at cut 68 once a mount wrote again a choice whose second copy it cannot read
        // (seed 11 then), and passes again, seed 11 wedging at cut 89, since checkpoints
        // subtract a spilled update's blocks (seeds 8, 10, 11 and 12 wedge).
        ("nor-qspi-16m", Some(4096), 256, Workload::Churn, 100, 7),
        // 2 MiB of 32 KiB blocks (the part's third erase size: 64 blocks of 128 pages).
        ("nor-qspi-16m", Some(32768), 64, Workload::Mixed, 30, 7),
        ("nand-slc-128m", None, 24, Workload::Mixed, 120, 7),
        ("nand-slc-128m", None, 24, Workload::Log, 80, 7),
        ("nand-mlc-1g", None, 24, Workload::Churn, 80, 7),
        // Known failures until transactions made their room before they began and collection
        // stopped making more metadata dirty than a checkpoint could write (MLC mixed said
        // ENOSPC at 45.8% of the room at cut 43); both pass 300 cuts (`--ignored` below).
        ("nand-mlc-1g", None, 24, Workload::Mixed, 150, 7),
        ("nand-slc-128m", None, 24, Workload::Churn, 150, 7),
    ]);
}

/// Chained cuts on a chip larger than its preset (`--size` / `--blocks` beyond the chip):
/// 1 GiB of the 128 MiB SLC part's geometry, 8,192 blocks, whose block table spans 49 pages
/// and whose checkpoints carry delta nodes, and 48 MiB of 4 KiB NOR sectors; the budget's sums (DESIGN.md §12.1) are compared
/// with a recount after every operation in debug builds. `dffs torture --preset nand-mlc-1g
/// --blocks 131072 --chain 30` runs 64 GiB.
#[test]
fn chained_cuts_on_a_chip_larger_than_its_preset() {
    chain_cases(&[
        // (Seed 26, 3 of its 12 cuts in recoveries: with seed 7, then 9, 11, 14 and 24, none
        // of them fell in a recovery once the cuts moved, last when directory roots of few
        // entries came to be written short (FORMAT §8.4). `dffs torture --preset
        // nand-slc-128m --blocks 8192 --workload mixed --chain 12 --steps 60 --seeds 12 --seed
        // 20` shows how many do for seeds 20-31: 0 to 3.)
        ("nand-slc-128m", None, 8_192, Workload::Mixed, 12, 26),
        // 48 MiB of 4 KiB NOR sectors: checkpoints name block-table directory nodes
        // (FORMAT §8.2), written afresh by each of them, recoveries' included.
        ("nor-qspi-16m", Some(4096), 12_288, Workload::Mixed, 12, 7),
    ]);
}

/// Longer chains (`--ignored`: a few minutes). The 4 KiB NOR mixed chain (512 KiB) ended at
/// cut 60 in `checkpoint: NoSpace` until the application's floor kept the recovery
/// checkpoint's room (DESIGN.md §9.3, §15 item 19) and an explicit checkpoint made its room
/// before it began, as did the churn chain on 1 MiB at cut 85 (now in the CI set above) —
/// `dffs torture --preset nor-qspi-16m --erase-size 4KiB --blocks 128 --workload mixed
/// --chain 120 --seed 7` and `--blocks 256 --workload churn --chain 100 --seed 7`. (Before
/// the floors kept a second checkpoint's room they ended at cuts 27 and 45; before the
/// transaction and collection fixes the mixed chain failed at its first cut, ENOSPC at 33.5%
/// of the room.) The MLC and SLC chains are the CI ones run longer.
#[test]
#[ignore = "long: a few minutes in a release build"]
fn chained_cuts_long() {
    chain_cases(&[
        ("nor-qspi-16m", Some(4096), 128, Workload::Mixed, 120, 7),
        ("nand-mlc-1g", None, 24, Workload::Mixed, 300, 7),
        ("nand-slc-128m", None, 24, Workload::Churn, 300, 7),
    ]);
}
