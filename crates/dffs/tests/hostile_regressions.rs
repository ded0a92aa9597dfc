//! Damaged images that once panicked, hung or ran away, kept as regression cases. Each is
//! rebuilt in code (a forged field of a re-signed node) or replayed from a small fuzz input
//! (see docs/FUZZING.md for the input format).

use std::time::{Duration, Instant};

use dffs::format::node::NodeType;
use dffs_testkit::hostile::*;

/// Sets `width` bytes at body offset `off` of every copy of the newest checkpoint, re-signed.
fn forge_checkpoint(dev: &mut RamFlash, off: usize, width: usize, value: u64) {
    let nodes = scan_nodes(dev);
    let newest = nodes
        .iter()
        .filter(|n| n.typ == NodeType::Checkpoint)
        .map(|n| n.seq)
        .max()
        .expect("a checkpoint");
    let mut n = 0;
    for c in nodes
        .iter()
        .filter(|c| c.typ == NodeType::Checkpoint && c.seq == newest)
    {
        let at = c.at + 24 + off;
        dev.data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
        resign(&mut dev.data, c.at);
        n += 1;
    }
    assert!(n >= 2, "both copies of the checkpoint");
}

/// Mounts, walks, fsck's and writes; must come back (Ok or a clean error) within `limit`.
fn survives(dev: RamFlash, limit: Duration) {
    let mut dev = dev;
    dev.budget = 2_000_000;
    let t = Instant::now();
    let _ = exercise(dev, &Limits::default());
    assert!(t.elapsed() < limit, "took {:?}", t.elapsed());
}

// Body offsets of checkpoint fields (after the 104-byte format parameters).
const CP_ADDR_SHIFT: usize = 3;
const CP_GC_RESERVE: usize = 84;
const CP_BAD_RESERVE: usize = 88;
const CP_INO_HINT: usize = 140;
const CP_INO_HIGH: usize = 144;
const CP_FILES: usize = 148;
const CP_DIRS: usize = 152;

#[test]
fn checkpoint_with_hostile_addr_shift() {
    for value in [127u64, 255, 31, 32] {
        for nor in [false, true] {
            let mut dev = tiny_base(nor, false).fresh_copy();
            forge_checkpoint(&mut dev, CP_ADDR_SHIFT, 1, value);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn checkpoint_with_huge_reserves() {
    for off in [CP_GC_RESERVE, CP_BAD_RESERVE] {
        for value in [0xFFFF_FFFFu64, 0xFFFF_FFFE, 0x8000_0000] {
            let mut dev = tiny_base(true, true).fresh_copy();
            forge_checkpoint(&mut dev, off, 4, value);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn checkpoint_with_huge_file_and_dir_counts() {
    // Replaying a create after the checkpoint bumped a count of u32::MAX past its range.
    for off in [CP_FILES, CP_DIRS] {
        for journal in [false, true] {
            let mut dev = tiny_base(false, journal).fresh_copy();
            forge_checkpoint(&mut dev, off, 4, 0xFFFF_FFFF);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn checkpoint_with_huge_ino_high_does_not_stall_fsck() {
    // fsck used to look up every inode number below ino_high: minutes for 2^31.
    for value in [0x7FFF_FFFFu64, 0xFFFF_FFFE, 0x0100_0000] {
        for nor in [false, true] {
            let mut dev = tiny_base(nor, true).fresh_copy();
            forge_checkpoint(&mut dev, CP_INO_HIGH, 4, value);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn checkpoint_with_an_inode_hint_above_ino_high() {
    // The hint was taken as is: the next create got inode number 0xFFFF_7815, the map grew to
    // six levels for it, and fsck then looked up every number below it (found by the `ops`
    // fuzzer: hostile_inputs/ops-fsck-map-scan-runaway.bin). Everything from ino_high up is
    // free, so the hint is clamped there.
    for value in [0xFFFF_7815u64, 0xFFFF_FFFF, 0x0001_0000] {
        for nor in [false, true] {
            let mut dev = tiny_base(nor, false).fresh_copy();
            forge_checkpoint(&mut dev, CP_INO_HINT, 4, value);
            let mut fs = dffs::Fs::mount(dev, dffs::Config::smallest()).expect("mounts");
            let st = fs
                .create(dffs::ROOT_INO, b"new", 0o644, 0, 0)
                .expect("create");
            assert!(
                st.ino < 64,
                "hint {value:#x}: new file got inode {}",
                st.ino
            );
            let dev = fs.unmount().expect("unmount");
            let mut fs = dffs::Fs::mount(dev, dffs::Config::smallest()).expect("remounts");
            let report = fs.fsck().expect("fsck");
            assert!(report.errors.is_empty(), "{:?}", report.errors);
            assert_eq!(
                fs.lookup(dffs::ROOT_INO, b"new").expect("lookup").ino,
                st.ino
            );
        }
    }
}

/// Replays every checked-in fuzz input (crates/dffs/tests/hostile_inputs/TARGET-*.bin).
fn replay(target: &str, run: fn(&[u8])) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hostile_inputs");
    let mut n = 0;
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{target}-")) && n.ends_with(".bin"))
        })
        .collect();
    names.sort();
    for p in names {
        eprintln!("replaying {}", p.display());
        // In a thread, so that an input that runs away fails the test instead of hanging it.
        let data = std::fs::read(&p).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            run(&data);
            let _ = tx.send(());
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("{}: still running after 20 s", p.display())
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("{}: panicked", p.display())
            }
        }
        n += 1;
    }
    assert!(n > 0, "no {target} inputs in {dir}");
}

#[test]
fn fuzz_mount_inputs() {
    replay("mount", fuzz_mount);
}

#[test]
fn gc_of_a_data_node_with_a_hostile_first_block() {
    // A NOR data node whose first block number is near u32::MAX: collecting its erase block
    // added the block offset to it and overflowed.
    let base = tiny_base(true, false);
    let nodes = scan_nodes(base);
    let data: Vec<_> = nodes.iter().filter(|n| n.typ == NodeType::Data).collect();
    assert!(!data.is_empty());
    for n in data.iter().take(6) {
        let mut dev = base.fresh_copy();
        dev.data[n.at + 24..n.at + 28].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        resign(&mut dev.data, n.at);
        dev.budget = 2_000_000;
        let Ok(mut fs) = dffs::Fs::mount(dev, dffs::Config::smallest()) else {
            continue;
        };
        for _ in 0..64 {
            if fs.gc_step(4096).is_err() {
                break;
            }
        }
        let _ = walk(&mut fs, &Limits::default());
        let _ = fs.fsck();
    }
}

#[test]
fn fuzz_ops_inputs() {
    replay("ops", fuzz_ops);
}

// Checkpoint fields of the format parameters and the heads.
const CP_PAGE_SIZE: usize = 4;
const CP_PAGES_PER_BLOCK: usize = 20;
const CP_HEADS: usize = 168;

#[test]
fn checkpoint_with_a_geometry_whose_block_size_overflows() {
    // Geometry::validate multiplied page size by pages per block in u32 before any bound.
    for (off, value) in [
        (CP_PAGE_SIZE, 0x8000_0000u64),
        (CP_PAGES_PER_BLOCK, 0x8000_0000),
        (CP_PAGES_PER_BLOCK, 0x0100_0000),
    ] {
        for nor in [false, true] {
            let mut dev = tiny_base(nor, false).fresh_copy();
            forge_checkpoint(&mut dev, off, 4, value);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn checkpoint_naming_a_free_block_as_a_head() {
    // Mount took any block the checkpoint named as an open head; writing there gave a free
    // block live bytes, and the next checkpoint's accounting check panicked.
    for nor in [false, true] {
        let base = tiny_base(nor, false);
        for h in 0..7 {
            for b in 0..base.geo.blocks {
                let mut dev = base.fresh_copy();
                forge_checkpoint(&mut dev, CP_HEADS + 8 * h, 4, b as u64);
                survives(dev, Duration::from_secs(10));
            }
        }
    }
}

#[test]
fn file_pointers_near_u32_max_in_inodes_and_index_nodes() {
    // A NOR read run added the block stride to a data address taken from an inode or index
    // node without checking it, and overflowed for 0xFFFFFFFE.
    let base = tiny_base(true, true);
    for n in scan_nodes(base)
        .iter()
        .filter(|n| matches!(n.typ, NodeType::Inode | NodeType::Index))
    {
        for off in (0..n.len - 24).step_by(4) {
            let mut dev = base.fresh_copy();
            let at = n.at + 24 + off;
            dev.data[at..at + 4].copy_from_slice(&0xFFFF_FFFEu32.to_le_bytes());
            resign(&mut dev.data, n.at);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn directory_with_a_huge_subdirectory_count() {
    // stat computed nlink as 2 + subdirs and mkdir added one to it, both overflowing for a
    // re-signed directory page with subdirs = u32::MAX (body offsets 52 and 56: subdirs,
    // entries).
    for nor in [false, true] {
        let base = tiny_base(nor, true);
        for n in scan_nodes(base)
            .iter()
            .filter(|n| n.typ == NodeType::DirRoot)
        {
            for off in [52, 56] {
                let mut dev = base.fresh_copy();
                let at = n.at + 24 + off;
                dev.data[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
                resign(&mut dev.data, n.at);
                survives(dev, Duration::from_secs(10));
            }
        }
    }
}

#[test]
fn listed_directory_roots_with_every_word_forged() {
    // A root of few entries lists its used slots (FORMAT §8.4, `paged` = 2): positions, their
    // zero pads, pointers and keys, re-signed with 0 and with 0xFFFF_FFFE in turn, and the
    // count and `paged` fields before them. Mounting and using such an image gives errors,
    // never a panic or a hang.
    let mut listed = 0;
    for nor in [false, true] {
        let base = tiny_base(nor, true);
        for n in scan_nodes(base)
            .iter()
            .filter(|n| n.typ == NodeType::DirRoot && base.data[n.at + 24 + 62] == 2)
        {
            listed += 1;
            for off in (52..n.len - 24).step_by(4) {
                for v in [0u32, 0xFFFF_FFFE] {
                    let mut dev = base.fresh_copy();
                    let at = n.at + 24 + off;
                    dev.data[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    resign(&mut dev.data, n.at);
                    survives(dev, Duration::from_secs(10));
                }
            }
        }
    }
    assert!(listed >= 2, "{listed} listed roots in the base images");
}

/// Body offset of the first block-table page address in a checkpoint.
const CP_BT_PAGE0: usize = 228;

#[test]
fn checkpoint_pointing_at_another_block_table_page() {
    // Found by an 81,446-case run of the corruption test (seed 23, case 56170).
    for nor in [false, true] {
        let base = tiny_base(nor, true);
        let tables: Vec<u64> = scan_nodes(base)
            .iter()
            .filter(|n| n.typ == NodeType::BlockTable)
            .map(|n| (n.at >> 3) as u64)
            .collect();
        assert!(!tables.is_empty());
        for addr in tables {
            let mut dev = base.fresh_copy();
            forge_checkpoint(&mut dev, CP_BT_PAGE0, 4, addr);
            survives(dev, Duration::from_secs(10));
        }
    }
}

#[test]
fn block_table_record_of_a_written_block_forged_to_reserved() {
    // Found by a 40,305-case run of the corruption test (seed 41, case 30247, the NOR image
    // with a journal tail): a re-signed block-table page said `Reserved` (the journal's
    // erased next block) for the user-data head's block and kept its live bytes; a recovery
    // turns reserved blocks free, and the first operation's accounting check found a free
    // block with 2,376 live bytes (one the allocator would have erased). Every record of a
    // written block (`Used` or `Head`) forged so, in every tiny image: a clean error or a
    // mount that works, never a panic.
    let mut forged = 0;
    for nor in [false, true] {
        for journal in [false, true] {
            let base = tiny_base(nor, journal);
            for n in scan_nodes(base)
                .iter()
                .filter(|n| n.typ == NodeType::BlockTable)
            {
                // Records of 12 bytes after `first` and `n`: ec, live, info (state in bits
                // 0-3).
                let count = u32::from_le_bytes(base.data[n.at + 28..n.at + 32].try_into().unwrap())
                    as usize;
                for r in 0..count {
                    let at = n.at + 24 + 8 + 12 * r;
                    let live = u32::from_le_bytes(base.data[at + 4..at + 8].try_into().unwrap());
                    let info = u32::from_le_bytes(base.data[at + 8..at + 12].try_into().unwrap());
                    if !matches!(info & 0xF, 2 | 3) || live == 0 {
                        continue;
                    }
                    let mut dev = base.fresh_copy();
                    dev.data[at + 8..at + 12].copy_from_slice(&((info & !0xF) | 6).to_le_bytes());
                    resign(&mut dev.data, n.at);
                    survives(dev, Duration::from_secs(10));
                    forged += 1;
                }
            }
        }
    }
    assert!(forged >= 8, "{forged} records forged");
}

#[test]
fn journal_records_naming_missing_inodes_make_the_mount_say_corrupt() {
    // The corruption run at seed 43 forged two fields of one journal record of the "nor-cut"
    // image (re-signed); replaying it failed the mount with NotFound (ENOENT, as if the
    // caller's path were missing). A record the file system wrote always applies: one that
    // does not is damage.
    let imgs = images();
    let img = imgs
        .iter()
        .find(|i| i.name == "nor-cut")
        .expect("nor-cut image");
    // The record was node 347 of the image then; the image's layout moves with the format's
    // parameters, so every journal record is forged the same two ways (its inode number at
    // body offset 8): each mount must work (a record from before the checkpoint is never
    // replayed) or say Corrupt, and the replayed ones must be among them.
    let nodes = scan_nodes(&img.dev);
    let mut corrupt = 0;
    for n in nodes.iter().filter(|n| n.typ.is_journal()) {
        for (off, width, value) in [(11usize, 1usize, 4699u64), (8, 4, 0xFFFF_FFFE)] {
            let mut dev = img.dev.fresh_copy();
            let at = n.at + 24 + off;
            dev.data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            resign(&mut dev.data, n.at);
            dev.budget = 2_000_000;
            if let Err(e) = dffs::Fs::mount(dev, dffs::Config::smallest()) {
                let typ = n.typ;
                assert_eq!(
                    e,
                    dffs::Error::Corrupt,
                    "{typ:?} at {} forged at {off}",
                    n.at
                );
                corrupt += 1;
            }
        }
    }
    assert!(corrupt >= 2, "{corrupt} forged records refused");
}
