//! The block layer on small erase blocks (4 KiB NOR sectors, the usual SPI NOR setup):
//!
//! - synced writes of every size succeed on a half-full partition and random 4 KiB writes at
//!   80% fill (they said ENOSPC with 40% of the device dead: collection had no room to copy
//!   and every checkpoint cost what it released; and a NOR data node larger than the room left
//!   in its head's block left that room unused, so a sequential file filled its blocks to 58%);
//! - a checkpoint writes only the block-table pages that changed (it wrote the whole table:
//!   50 pages of 1 KiB on a 16 MiB chip of 4 KiB sectors, for one changed file);
//! - the table survives many checkpoints that each rewrote a few pages, remounts and a power
//!   cut: contents equal the model and fsck is clean.

use dffs::format::params::HeadLayout;
use dffs::{Cause, Config, FormatOptions, Fs, Ino, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, Preset, SimFlash, Stats};

fn nor_4k(bytes: u64) -> SimFlash {
    nor_with(4096, bytes)
}

/// `bytes` of `nor-qspi-16m` erased in blocks of `erase` bytes.
fn nor_preset(erase: u32, bytes: u64) -> Preset {
    preset("nor-qspi-16m")
        .unwrap()
        .with_erase_size(erase)
        .unwrap()
        .with_size_bytes(bytes)
        .unwrap()
}

/// `bytes` of `nor-qspi-16m` erased in blocks of `erase` bytes, formatted.
fn nor_with(erase: u32, bytes: u64) -> SimFlash {
    let p = nor_preset(erase, bytes);
    Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Creates `/t` with `len` bytes (64 KiB writes, one sync) and returns it with its model.
fn fill(fs: &mut Fs<SimFlash>, len: u64) -> (Ino, Vec<u8>) {
    let ino = fs.create(ROOT_INO, b"t", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let model: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
    for (k, chunk) in model.chunks(65536).enumerate() {
        fs.write(fh, k as u64 * 65536, chunk)
            .unwrap_or_else(|e| panic!("fill at {} of {len}: {e:?}", k * 65536));
    }
    fs.fsync(fh).unwrap();
    fs.close(fh).unwrap();
    (ino, model)
}

/// `n` synced random writes of `size` bytes into the file, applied to the model.
fn random_writes(
    fs: &mut Fs<SimFlash>,
    ino: Ino,
    model: &mut [u8],
    size: usize,
    n: u32,
    rng: &mut Rng,
) {
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    for k in 0..n {
        let off = rng.below((model.len() / size) as u64) as usize * size;
        let data: Vec<u8> = (0..size).map(|i| (i as u32 ^ k ^ 0x5a) as u8).collect();
        fs.write(fh, off as u64, &data)
            .and_then(|_| fs.fsync(fh))
            .unwrap_or_else(|e| {
                panic!(
                    "{size} B write {k} at {off}: {e:?} {}",
                    fs.debug_block_summary()
                )
            });
        model[off..off + size].copy_from_slice(&data);
    }
    fs.close(fh).unwrap();
}

/// A power cut (everything not yet programmed is lost) and a mount with the default
/// configuration.
fn cut_and_mount(fs: Fs<SimFlash>) -> Fs<SimFlash> {
    let mut dev = fs.into_flash();
    dev.power_off();
    dev.power_up();
    Fs::mount(dev, Config::default()).unwrap()
}

fn check(fs: &mut Fs<SimFlash>, ino: Ino, model: &[u8]) {
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; model.len()];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), model.len());
    fs.close(fh).unwrap();
    assert!(buf == model, "file contents differ from the model");
    let r = fs.fsck().unwrap();
    assert!(r.is_clean(), "{:?}", r.errors);
}

#[test]
fn nor_4k_sectors_take_synced_writes_of_every_size() {
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 1 << 20);
    let mut rng = Rng(0x2002);
    // As much again as the free space in 4 KiB writes (collection running), then each size.
    random_writes(&mut fs, ino, &mut model, 4096, 256, &mut rng);
    for size in [1024usize, 4096, 16384, 32768, 65536] {
        random_writes(
            &mut fs,
            ino,
            &mut model,
            size,
            (256 * 1024 / size) as u32,
            &mut rng,
        );
    }
    check(&mut fs, ino, &model);
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

#[test]
fn nor_4k_sectors_take_random_writes_at_80_percent_fill() {
    let size = 2u64 << 20;
    let mut fs = Fs::mount(nor_4k(size), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, size * 8 / 10 / 4096 * 4096);
    let mut rng = Rng(0x2002 + 80);
    random_writes(&mut fs, ino, &mut model, 4096, 300, &mut rng);
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// Random 4 KiB synced writes into a file that 256 B writes scattered over 4 KiB NOR sectors:
/// collection moves the file's blocks one by one, and nearly every block it moves changes a
/// leaf of the file's index tree, so the index written per write follows the leaf's size.
/// With 32 pointers (160 B nodes) on 512 sectors or more (FORMAT §3) the index log here
/// erases 28 sectors for 192 writes, against 35 with 64 pointers (288 B); on the full-size
/// device of `dffs bench nor` 111 against 163 per 2 MiB. The file reads back and fsck is clean.
#[test]
fn writes_into_a_fragmented_file_rewrite_small_index_nodes() {
    use dffs::Cause;
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    assert_eq!(fs.params().index_fanout(), 32);
    let (ino, mut model) = fill(&mut fs, 1 << 20);
    let mut rng = Rng(0x2002);
    // Scatter the file: 256 B writes, as much as the free space.
    random_writes(&mut fs, ino, &mut model, 256, 2048, &mut rng);
    let before = fs.op_counts();
    let writes = 192u32;
    random_writes(&mut fs, ino, &mut model, 4096, writes, &mut rng);
    fs.checkpoint().unwrap();
    let w = fs.op_counts().since(&before);
    let data = w.by_cause.programs[Cause::Data as usize];
    let index_erases = w.by_cause.erases[Cause::Index as usize];
    assert!(data >= 16 * writes as u64, "{w:?}");
    assert!(
        index_erases <= writes as u64 / 6,
        "{index_erases} index sectors erased for {writes} writes: {w:?}"
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// A transaction on a device whose room is mostly dead data: nothing collected inside a
/// transaction comes back before its commit, so `begin_transaction` makes the room first.
/// (The transaction's writes said ENOSPC with the device 30% full: collection inside it
/// moved live data into the last free blocks and left 67 of 128 blocks waiting for a
/// checkpoint — `dffs torture` on 4 KiB sectors, mixed workload, seed 7.)
#[test]
fn a_transaction_on_a_device_full_of_dead_data_has_room() {
    let mut fs = Fs::mount(nor_4k(512 << 10), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 128 << 10);
    let mut rng = Rng(7);
    // Synced random rewrites leave dead data in most blocks; collection makes room only as
    // writes need it.
    random_writes(&mut fs, ino, &mut model, 4096, 300, &mut rng);
    let data: Vec<u8> = (0..48u32 << 10).map(|i| (i * 13 + i / 512) as u8).collect();
    // The transaction writes more than the free blocks above the reserve hold (a 4 KiB
    // sector holds less than 4 KiB of data: node headers).
    let summary = fs.debug_block_summary();
    let num = |key: &str| -> usize {
        let at = summary.find(key).unwrap() + key.len();
        summary[at..].split(' ').next().unwrap().parse().unwrap()
    };
    assert!(
        (num(" free ") - num("reserve ")) * 4096 <= data.len(),
        "the rewrites left more room than the transaction needs: {summary}"
    );
    fs.begin_transaction().unwrap();
    let t = fs.create(ROOT_INO, b"txn", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(t, OpenFlags::RW).unwrap();
    for (k, chunk) in data.chunks(4096).enumerate() {
        fs.write(fh, k as u64 * 4096, chunk)
            .unwrap_or_else(|e| panic!("transaction write {k}: {e:?}"));
    }
    fs.close(fh).unwrap();
    fs.commit_transaction().unwrap();
    let mut fs = cut_and_mount(fs);
    check(&mut fs, ino, &model);
    let fh = fs.open(t, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; data.len() + 1];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), data.len());
    assert!(
        buf[..data.len()] == data[..],
        "the transaction's file differs"
    );
}

/// Takes a checkpoint and returns the bytes it programmed.
fn checkpoint_bytes(fs: &mut Fs<SimFlash>) -> u64 {
    let before = fs.flash().stats().bytes_programmed;
    fs.checkpoint().unwrap();
    fs.flash().stats().bytes_programmed - before
}

#[test]
fn a_checkpoint_writes_only_the_block_table_pages_that_changed() {
    // 16 MiB of 4 KiB sectors: 4,096 blocks, 50 block-table pages of 1 KiB.
    let mut fs = Fs::mount(nor_4k(16 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 64 << 10);
    fs.checkpoint().unwrap();
    let mut rng = Rng(7);
    let mut worst = 0u64;
    for round in 0..20 {
        random_writes(&mut fs, ino, &mut model, 256, 4, &mut rng);
        worst = worst.max(checkpoint_bytes(&mut fs));
        if round % 5 == 4 {
            // Pages written by different checkpoints make one table after a remount.
            let dev = fs.unmount().unwrap();
            fs = Fs::mount(dev, Config::default()).unwrap();
            check(&mut fs, ino, &model);
        }
    }
    // The inode, index and map pages, the checkpoint record twice, and a few table pages:
    // far below the 50 KiB of the whole table.
    assert!(worst < 16 << 10, "a checkpoint programmed {worst} bytes");
}

#[test]
fn a_power_cut_after_incremental_checkpoints_loses_nothing_synced() {
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 512 << 10);
    let mut rng = Rng(11);
    for _ in 0..6 {
        random_writes(&mut fs, ino, &mut model, 4096, 40, &mut rng);
        fs.checkpoint().unwrap();
    }
    random_writes(&mut fs, ino, &mut model, 4096, 20, &mut rng);
    let mut fs = cut_and_mount(fs);
    check(&mut fs, ino, &model);
}

/// Creates `/big` and writes `byte` to it until `ENOSPC`: 64 KiB writes, then 4 KiB and
/// 256-byte ones into what is left (a write that does not fit is refused whole). Returns the
/// inode, the open handle and the length admitted.
fn fill_to_nospace(fs: &mut Fs<SimFlash>, byte: u8) -> (Ino, dffs::Fh, u64) {
    let ino = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let chunk = vec![byte; 65536];
    let mut len = 0u64;
    for size in [65536usize, 4096, 256] {
        loop {
            match fs.write(fh, len, &chunk[..size]) {
                Ok(n) => len += n as u64,
                Err(dffs::Error::NoSpace) => break,
                Err(e) => panic!("write at {len}: {e:?}"),
            }
        }
    }
    (ino, fh, len)
}

/// How much of a fresh partition one file can take ([`fill_to_nospace`], then a sync and a
/// remount): bytes of the file over the partition's bytes.
fn usable_fraction(dev: SimFlash) -> f64 {
    let cap = dev.preset().geometry.capacity();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    // What was admitted must still be written back by the sync.
    let (ino, fh, len) = fill_to_nospace(&mut fs, 0xA5);
    fs.fsync(fh)
        .unwrap_or_else(|e| panic!("sync at {len}: {e:?} {}", fs.debug_block_summary()));
    fs.close(fh).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(fs.stat(ino).unwrap().size, len);
    len as f64 / cap as f64
}

/// The share of a partition that holds file data (issue 16's goals: at least 85% of a 4 MiB
/// NAND partition and of a 1 MiB NOR partition of 4 KiB sectors, at least 95% of 128 MiB
/// NAND). Prints the figures (`cargo test --release -p dffs --test block_layer usable --
/// --nocapture`); the bounds are today's, so that a change that loses room fails here.
#[test]
fn usable_space_for_one_file() {
    let nand = |bytes: u64| {
        let p = preset("nand-slc-128m")
            .unwrap()
            .with_size_bytes(bytes)
            .unwrap();
        Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
    };
    let cases: [(&str, SimFlash, f64); 7] = [
        ("1 MiB NOR, 4 KiB sectors", nor_4k(1 << 20), 0.82),
        ("2 MiB NOR, 4 KiB sectors", nor_4k(2 << 20), 0.85),
        ("4 MiB SLC NAND", nand(4 << 20), 0.50),
        ("128 MiB SLC NAND", nand(128 << 20), 0.95),
        // (90.4% before the user floor kept room for the recovery checkpoint a power cut
        // makes owed: 90.0% since.)
        ("16 MiB NOR, 4 KiB sectors", nor_4k(16 << 20), 0.895),
        // The 32 KiB block erase (71.9% and 89.9% on 2026-12-01: 64 blocks keep the same
        // whole-block reserves as 512 do; 16 MiB 91.0% since 2026-12-02's 4-byte units, whose
        // 260-byte slots put 125 data blocks in a block, not 123; 2 MiB 73.6% since 2026-12-03,
        // when NOR of fewer than 128 blocks took four heads, not five).
        ("2 MiB NOR, 32 KiB blocks", nor_with(32768, 2 << 20), 0.73),
        (
            "16 MiB NOR, 32 KiB blocks",
            nor_with(32768, 16 << 20),
            0.905,
        ),
    ];
    for (name, dev, bound) in cases {
        let f = usable_fraction(dev);
        eprintln!("usable for one file: {name}: {:.1}%", f * 100.0);
        assert!(
            f >= bound,
            "{name}: {:.1}% < {:.0}%",
            f * 100.0,
            bound * 100.0
        );
    }
}

/// A write refused on a full device does a bounded amount of work: collection stops once 128
/// rounds in a row win no room. (On 2 MiB of 4 KiB NOR sectors filled by one file, a refused
/// 256-byte write collected index blocks for the make-room loop's whole round limit, 2,064
/// rounds, and erased 1,858 blocks: their copies rewrote the paths above them, took a fresh
/// block each and gave one back, so the free blocks never rose.) Every try is refused, so
/// giving up early does not refuse what more rounds would admit. A try again, with nothing
/// freed since, gets 8 rounds that win nothing; once a truncation frees room, the write is
/// admitted.
#[test]
fn a_write_refused_on_a_full_device_erases_little() {
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    let (ino, fh, len) = fill_to_nospace(&mut fs, 0x3C);
    let (mut most, mut retries) = (0, 0);
    for i in 0..8u64 {
        let before = fs.flash().stats();
        let r = fs.write(fh, len + i * 4096, &[0x5A; 256]);
        assert!(matches!(r, Err(dffs::Error::NoSpace)), "{r:?}");
        let erases = fs.flash().stats().since(&before).erases;
        eprintln!("refused write {i}: {erases} erases");
        most = most.max(erases);
        if i > 0 {
            retries = retries.max(erases);
        }
    }
    // A make-room call gives up after 128 rounds that win nothing, one victim each; a try
    // after it, with nothing freed since, after 8.
    assert!(most <= 160, "a refused write erased {most} blocks");
    assert!(
        retries <= 16,
        "a refused write tried again erased {retries} blocks"
    );
    // Once something is freed, a write gets its full rounds again: after a truncation of
    // 64 KiB the same write is admitted.
    fs.setattr(
        ino,
        dffs::SetAttr {
            size: Some(len - 65536),
            ..Default::default()
        },
    )
    .unwrap();
    let len = len - 65536;
    assert_eq!(fs.write(fh, len, &[0x5A; 256]).unwrap(), 256);
    let len = len + 256;
    fs.fsync(fh).unwrap();
    fs.close(fh).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(fs.stat(ino).unwrap().size, len);
    assert!(fs.fsck().unwrap().is_clean());
}

/// What a write admitted is written back by the sync that follows, however full the device:
/// a file filled to ENOSPC in 64 KiB, 4 KiB and 256-byte writes on 4 KiB NOR sectors syncs.
/// (It said ENOSPC at `fsync` on many sizes from 1 to 10 MiB, 1.25, 1.5 and 1.75 MiB among
/// them: a file rewritten past what extents track folds its own index tree at its commit,
/// and neither the checkpoint need nor the copy floor counted those nodes, so the fold found
/// no block above the floor.)
#[test]
fn writes_admitted_on_a_full_device_are_synced() {
    for kib in [1280u64, 1536, 1792] {
        let mut fs = Fs::mount(nor_4k(kib << 10), Config::default()).unwrap();
        let (ino, fh, len) = fill_to_nospace(&mut fs, 0x5A);
        assert!(len > kib << 9, "{kib} KiB: only {len} bytes admitted");
        fs.fsync(fh)
            .unwrap_or_else(|e| panic!("{kib} KiB: sync of {len} bytes: {e:?}"));
        let mut fs = cut_and_mount(fs);
        assert_eq!(fs.stat(ino).unwrap().size, len, "{kib} KiB");
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; 65536];
        let at = len - 256;
        assert_eq!(fs.read(fh, at, &mut buf).unwrap(), 256);
        assert!(
            buf[..256].iter().all(|&b| b == 0x5A),
            "{kib} KiB: tail differs"
        );
    }
}

/// On a table of many pages, a checkpoint after writes spread over the whole device carries
/// the changed records in a few delta nodes instead of rewriting every page they fall in (a
/// checkpoint of `dffs bench nor`'s random 4 KiB writes rewrote about 45 of the 50 pages of
/// 16 MiB of 4 KiB sectors); the records survive remounts and a power cut, and fsck's recount
/// of every block's live bytes agrees with them.
#[test]
fn a_checkpoint_carries_scattered_changes_in_delta_nodes() {
    // A file over half the device: its blocks' records are in every table page. Each rewrite
    // kills bytes in the block the old copy was in: 24 of them fall in about 20 of the 50
    // pages.
    let worst = worst_checkpoint_of_scattered_writes(16 << 20, 8 << 20, 23, 24);
    // Delta nodes, the pages with the most changes, the inode, index and map pages and the
    // checkpoint record twice: 15–22 KB a checkpoint here, where rewriting every page with a
    // changed record took 30–39 KB.
    assert!(worst < 24 << 10, "a checkpoint programmed {worst} bytes");
}

/// Twelve rounds of `per_round` synced random 4 KiB writes into a file of `file` bytes on
/// `dev` bytes of 4 KiB sectors, each round ending with a checkpoint (every fourth with a
/// remount, the file checked and fsck's recount clean), then more writes, a power cut and the
/// file checked again. Returns the most bytes one of the rounds' checkpoints programmed.
fn worst_checkpoint_of_scattered_writes(dev: u64, file: u64, seed: u64, per_round: u32) -> u64 {
    let mut fs = Fs::mount(nor_4k(dev), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, file);
    fs.checkpoint().unwrap();
    let mut rng = Rng(seed);
    let mut worst = 0u64;
    for round in 0..12 {
        random_writes(&mut fs, ino, &mut model, 4096, per_round, &mut rng);
        worst = worst.max(checkpoint_bytes(&mut fs));
        if round % 4 == 3 {
            let dev = fs.unmount().unwrap();
            fs = Fs::mount(dev, Config::default()).unwrap();
            check(&mut fs, ino, &model);
            let r = fs.fsck().unwrap();
            assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        }
    }
    random_writes(&mut fs, ino, &mut model, 4096, 10, &mut rng);
    let mut fs = cut_and_mount(fs);
    check(&mut fs, ino, &model);
    worst
}

/// A power cut at every program and erase of a checkpoint that writes block-table delta
/// nodes: the mount finds the checkpoint before it (or the new one, once its record is
/// written) with a table that agrees with the blocks (fsck clean) and every synced write.
#[test]
fn a_cut_anywhere_in_a_checkpoint_with_delta_nodes_loses_nothing() {
    // 6 MiB of 4 KiB sectors: 19 table pages, up to two delta nodes.
    let mut fs = Fs::mount(nor_4k(6 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 3 << 20);
    let mut rng = Rng(31);
    for _ in 0..3 {
        random_writes(&mut fs, ino, &mut model, 4096, 30, &mut rng);
        fs.checkpoint().unwrap();
    }
    random_writes(&mut fs, ino, &mut model, 4096, 30, &mut rng);
    let dev = fs.into_flash();
    // How many programs and erases the checkpoint takes, on a copy.
    let ops = {
        let mut fs = Fs::mount(dev.clone(), Config::default()).unwrap();
        let before = fs.flash().program_erase_ops();
        fs.checkpoint().unwrap();
        fs.flash().program_erase_ops() - before
    };
    assert!(ops > 4, "the checkpoint took {ops} operations");
    for cut in 1..=ops {
        let mut fs = Fs::mount(dev.clone(), Config::default()).unwrap();
        fs.flash_mut().cut_power_after(cut);
        let r = fs.checkpoint();
        let mut d = fs.into_flash();
        assert!(
            cut == ops || r.is_err(),
            "cut {cut} of {ops}: the checkpoint succeeded"
        );
        d.power_off();
        d.power_up();
        let mut fs = Fs::mount(d, Config::default())
            .unwrap_or_else(|e| panic!("cut {cut} of {ops}: mount: {e:?}"));
        check(&mut fs, ino, &model);
    }
}

/// With a single block-table page's erase counts and ages cached in RAM (the rest read back
/// from flash when allocation, wear leveling or the choice of a victim needs them), the file
/// system writes exactly what it writes with every page cached: the same workload, across a
/// remount and a power cut, programs and erases the same, leaves the same erase counts (in the
/// table and on the device), and only reads more (while fewer blocks are taken between two
/// checkpoints than the bound on the erase counts RAM keeps apart from its cache). And RAM holds the packed records and one
/// page of wear, not 12 bytes per block.
#[test]
fn a_one_page_wear_cache_writes_what_a_full_cache_writes() {
    let run = |table_cache: usize| {
        let cfg = Config {
            table_cache,
            ..Config::default()
        };
        let mut fs = Fs::mount(nor_4k(4 << 20), cfg).unwrap();
        // (Under `WEAR_BACKLOG` allocations between checkpoints: more would make the
        // one-page run checkpoint early, to write the erase counts RAM keeps for them.)
        let (ino, mut model) = fill(&mut fs, 1 << 20);
        let mut rng = Rng(0x5eed);
        let mut ram = 0;
        for round in 0..6 {
            for _ in 0..4 {
                random_writes(&mut fs, ino, &mut model, 4096, 40, &mut rng);
                fs.checkpoint().unwrap();
            }
            ram = ram.max(fs.ram_bytes());
            let mut dev = match round % 3 {
                0 => fs.unmount().unwrap(),
                _ => fs.into_flash(),
            };
            if round % 3 == 2 {
                dev.power_off();
                dev.power_up();
            }
            fs = Fs::mount(dev, cfg).unwrap();
        }
        check(&mut fs, ino, &model);
        let counts = fs.erase_counts().unwrap();
        let dev = fs.unmount().unwrap();
        let st = dev.stats();
        (
            counts,
            dev.erase_counts().to_vec(),
            (st.programs, st.erases),
            st.reads,
            ram,
        )
    };
    let (full, one) = (run(64), run(1));
    assert_eq!(one.2, full.2, "programs and erases");
    assert_eq!(one.1, full.1, "the device's erase counts");
    assert_eq!(one.0, full.0, "the table's erase counts");
    assert!(
        one.3 > full.3,
        "reads: {} with one page, {} with all",
        one.3,
        full.3
    );
    // 1,024 blocks: 12 bytes each were 12 KiB; the packed records are 2.4 KiB, a page of
    // wear 0.6 KiB, all pages 8 KiB.
    assert!(full.4 - one.4 > 6 << 10, "RAM {} vs {}", one.4, full.4);
    // Static wear leveling ran (the workload is uneven enough), so its choices were compared.
    assert!(full.0.iter().max() > full.0.iter().min());
}

/// A power cut after synced writes into blocks taken since the last checkpoint loses none of
/// their erase counts: replay finds something in each (the data, the journal), and a block
/// free at the checkpoint that holds something was erased exactly once since.
#[test]
fn replay_counts_the_erases_of_blocks_written_since_the_checkpoint() {
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 512 << 10);
    let mut rng = Rng(0xEC);
    // Every block wears a little, so that counts differ from block to block.
    random_writes(&mut fs, ino, &mut model, 4096, 300, &mut rng);
    fs.checkpoint().unwrap();
    let at_checkpoint = fs.erase_counts().unwrap();
    random_writes(&mut fs, ino, &mut model, 4096, 12, &mut rng);
    let before = fs.erase_counts().unwrap();
    let erased = before
        .iter()
        .zip(&at_checkpoint)
        .filter(|(b, c)| b > c)
        .count();
    assert!(erased >= 3, "{erased} blocks erased since the checkpoint");
    let mut fs = cut_and_mount(fs);
    // (Compared before the reads: a file closed may start background collection.)
    assert_eq!(fs.erase_counts().unwrap(), before);
    check(&mut fs, ino, &model);
}

/// Erase counts survive a power cut anywhere. On NOR, before the allocator erases a free
/// block, an `Erasing` journal record announces it, and the mount after the cut counts the
/// erase of each announced block whose first bytes were written since the checkpoint; an
/// anchor erase is counted in the table of the checkpoint that makes it (FORMAT
/// §11, §12). NAND announces no erases (`Store::erase_announcement` says why): the mount walks
/// the allocator's two orders over the checkpoint's free blocks and counts each block whose
/// first page was written since the checkpoint (`Store::count_taken_erases`, DESIGN §10). For
/// cut points spread over a few hundred synced writes (blocks of every log taken, collection
/// and checkpoints running, anchors switching), no block's count after the mount is below what
/// it was after the last operation that completed before the cut, and the erases the device
/// made that the records miss (the simulator counts every erase, cut ones included) stay at
/// the few whose block was cut before or in its first program: 25 on NOR, 3 on NAND, summed
/// over the cuts. (6 on NOR until 2026-12-03, when a block whose first bytes are torn stopped
/// counting as erased, `a_torn_free_block_is_not_counted_as_erased`: an erase this session
/// made and a cut in its first program leave the same torn start as one from a session
/// before, which a mount counted again and again. Before the announcements these cut points
/// lowered 116 counts on the NOR device; before the walk, the NAND device's 170 cut points,
/// 13 operations apart, lowered 93 and missed 119 erases, and NOR missed 12.)
#[test]
fn erase_counts_survive_cuts_anywhere() {
    let nand = {
        let p = preset("nand-slc-128m")
            .unwrap()
            .with_size_bytes(4 << 20)
            .unwrap();
        Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
    };
    for (name, dev, file, writes, step, max_lost, max_uncounted) in [
        (
            "1 MiB NOR, 4 KiB sectors",
            nor_4k(1 << 20),
            512u64 << 10,
            240u32,
            37u64,
            0usize,
            25u64,
        ),
        ("4 MiB SLC NAND", nand, 1 << 20, 240, 13, 0, 3),
    ] {
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let (ino, mut model) = fill(&mut fs, file);
        let mut rng = Rng(0xEC5);
        random_writes(&mut fs, ino, &mut model, 4096, 64, &mut rng);
        let base = fs.unmount().unwrap();
        let (mut lost, mut cuts, mut uncounted) = (0usize, 0u32, 0u64);
        for k in (1..).map(|i| i * step) {
            let mut fs = Fs::mount(base.clone(), Config::default()).unwrap();
            let mut counts = fs.erase_counts().unwrap();
            // Each block's erases the device made (cut ones included) beyond its record.
            let behind = |rec: &[u32], made: &[u32]| -> Vec<i64> {
                made.iter()
                    .zip(rec)
                    .map(|(&m, &r)| i64::from(m) - i64::from(r))
                    .collect()
            };
            let behind0 = behind(&counts, fs.flash().erase_counts());
            fs.flash_mut().cut_power_after(k);
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            let mut rng = Rng(0xEC6);
            let mut cut = false;
            for i in 0..writes {
                let off = rng.below(file / 4096) * 4096;
                let r = fs
                    .write(fh, off, &[i as u8; 4096])
                    .and_then(|_| fs.fsync(fh));
                match r {
                    Ok(()) => counts = fs.erase_counts().unwrap(),
                    Err(dffs::Error::PowerLoss) => {
                        cut = true;
                        break;
                    }
                    Err(e) => panic!("{name}: write {i} with a cut after {k}: {e:?}"),
                }
            }
            if !cut {
                break;
            }
            cuts += 1;
            let mut dev = fs.into_flash();
            dev.power_up();
            let mut fs = Fs::mount(dev, Config::default()).unwrap();
            let now = fs.erase_counts().unwrap();
            let low: Vec<(usize, u32, u32)> = now
                .iter()
                .zip(&counts)
                .enumerate()
                .filter(|(_, (a, b))| a < b)
                .map(|(i, (a, b))| (i, *b, *a))
                .collect();
            if !low.is_empty() {
                eprintln!("{name}: cut after {k}: (block, before, after) {low:?}");
            }
            lost += low.len();
            let now_behind = behind(&now, fs.flash().erase_counts());
            uncounted += now_behind
                .iter()
                .zip(&behind0)
                .map(|(a, b)| (a - b).max(0) as u64)
                .sum::<u64>();
            assert!(fs.fsck().unwrap().is_clean());
        }
        eprintln!("{name}: {cuts} cuts, {lost} erase counts lowered, {uncounted} erases uncounted");
        assert!(cuts >= 20, "{name}: {cuts} cuts");
        assert!(
            lost <= max_lost,
            "{name}: {lost} erase counts lowered by cuts"
        );
        assert!(
            uncounted <= max_uncounted,
            "{name}: {uncounted} erases the records missed"
        );
    }
}

/// A free block that begins torn (what a cut in its erase or its first program leaves, in an
/// earlier session) is not counted as erased by a mount after a cut unless something shows
/// the erase: every session names such a block in its `JErasing` records while it is among
/// the allocator's candidates, and a torn start reads differently at every mount. (Counted,
/// it was at every mount after a cut: on 64 blocks of 64 KiB NOR, 1,080 chained cuts of
/// `dffs torture --chain` counted 240 erases that never happened, one block 3 ahead after
/// three recoveries in a row; with the torn starts below, every one of this test's 40 cut
/// points counted such erases, of 7 or 8 blocks.)
#[test]
fn a_torn_free_block_is_not_counted_as_erased() {
    let mut fs = Fs::mount(nor_with(65536, 4 << 20), Config::default()).unwrap();
    let (ino, _) = fill(&mut fs, 1 << 20);
    // Every free block that reads erased gets a torn start: a node header's magic, then
    // bytes of a program cut half-way.
    let free: Vec<u32> = (0..64u32)
        .filter(|&b| fs.debug_block(b).starts_with(&format!("block {b}: Free/")))
        .collect();
    let mut dev = fs.unmount().unwrap();
    let torn: [u8; 24] = [
        0x44, 0x46, 0xff, 0xff, 0xff, 0xe4, 0, 0, 0x94, 0xff, 0xff, 0, 0, 0xdf, 0, 0xff, 0xf5,
        0xff, 0x26, 0xa3, 0xff, 0x5c, 0xff, 0xae,
    ];
    let mut marked = 0;
    for &b in &free {
        let page = b * (65536 / 256);
        let mut head = [0u8; 24];
        dffs::Flash::read(&mut dev, page, 0, &mut head, &mut []).unwrap();
        if head.iter().all(|&x| x == 0xFF) {
            dffs::Flash::program(&mut dev, page, 0, &torn, &[]).unwrap();
            marked += 1;
        }
    }
    assert!(marked >= 8, "{marked} free blocks marked");
    let base = dev;
    let (mut cuts, mut over_at) = (0u32, Vec::new());
    for k in (1..=40u64).map(|i| i * 23) {
        let mut fs = Fs::mount(base.clone(), Config::default()).unwrap();
        let rec0 = fs.erase_counts().unwrap();
        let made0 = fs.flash().erase_counts().to_vec();
        fs.flash_mut().cut_power_after(k);
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        let mut rng = Rng(0x70E5 + k);
        let mut cut = false;
        for i in 0..400u32 {
            let off = rng.below((1 << 20) / 4096) * 4096;
            match fs
                .write(fh, off, &[i as u8; 4096])
                .and_then(|_| fs.fsync(fh))
            {
                Ok(_) => {}
                Err(dffs::Error::PowerLoss) => {
                    cut = true;
                    break;
                }
                Err(e) => panic!("write {i} with a cut after {k}: {e:?}"),
            }
        }
        assert!(cut, "no cut after {k} operations");
        cuts += 1;
        let mut dev = fs.into_flash();
        dev.power_up();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let rec = fs.erase_counts().unwrap();
        let made = fs.flash().erase_counts();
        // Each block's record may fall behind what the device made (a cut erase), never run
        // ahead of it.
        let ahead: Vec<u32> = (0..rec.len())
            .filter(|&b| {
                i64::from(rec[b]) - i64::from(rec0[b]) > i64::from(made[b]) - i64::from(made0[b])
            })
            .map(|b| b as u32)
            .collect();
        if !ahead.is_empty() {
            over_at.push((k, ahead));
        }
        assert!(fs.fsck().unwrap().is_clean(), "fsck after a cut after {k}");
    }
    assert_eq!(cuts, 40);
    assert!(
        over_at.is_empty(),
        "erases counted that the device never made (cut point, blocks): {over_at:?}"
    );
}

/// A table of 4 to 15 pages (2 MiB of 4 KiB sectors: 7 pages) carries a checkpoint's
/// scattered changes in one delta node instead of rewriting each page they fall in: each
/// checkpoint of synced random writes rewrote six or seven 1 KiB pages, a fifth of the
/// device's erases in `dffs bench nor --quick`. The records survive remounts, a power cut
/// and fsck's recount.
#[test]
fn a_small_table_carries_scattered_changes_in_a_delta_node() {
    let worst = worst_checkpoint_of_scattered_writes(2 << 20, 1 << 20, 29, 12);
    // 8.2–9.6 KB a checkpoint here; rewriting each page with a changed record took
    // 10.3–12.6 KB.
    assert!(worst < 10_000, "a checkpoint programmed {worst} bytes");
}

/// Synced random writes on a 512-block device (2 MiB of 4 KiB sectors, half of it the file)
/// release what collection empties in batches: background collection keeps a window above
/// the urgent level that holds two batches (DESIGN §9.3). With a window of a thirty-second of
/// the device the free pool sat where a few collected blocks took a checkpoint: 24
/// checkpoints for 256 blocks collected here (16 for 64 random 4 KiB writes in `dffs bench
/// nor --quick`'s sweep); 13 for 238 before roots of few entries were written short (FORMAT
/// §8.4), 16 for 235 since: the root directory's short page leaves the shared metadata
/// head's block more room, so the next checkpoint's need `K`, which sizes the batch (four
/// times `K` less two), is 5–6 blocks where it was 6–7 (seeds 0x2000–0x2007: 16–17
/// checkpoints against 13–14, 233–240 blocks collected).
#[test]
fn synced_random_writes_release_collected_blocks_in_batches() {
    let mut fs = Fs::mount(nor_4k(2 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 1 << 20);
    let mut rng = Rng(0x2002);
    // As much again as the free space, so that collection runs throughout.
    random_writes(&mut fs, ino, &mut model, 4096, 256, &mut rng);
    let before = fs.activity();
    random_writes(&mut fs, ino, &mut model, 4096, 192, &mut rng);
    let after = fs.activity();
    let (cps, collected) = (
        after.checkpoints - before.checkpoints,
        after.gc_blocks - before.gc_blocks,
    );
    assert!(collected >= 150, "collection emptied {collected} blocks");
    assert!(
        collected >= 14 * cps,
        "{cps} checkpoints for {collected} collected blocks"
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// Collection weighs dead space against age with the age capped (DESIGN §9.1): after synced
/// random writes of 256 B and 1 KiB have scattered a file's blocks over 16 MiB of 4 KiB NOR
/// sectors, half of it the file, synced random 4 KiB writes copy about half their data. With
/// ages uncapped, collection chose blocks many checkpoints old and half live over younger
/// ones with more dead space, and copied 62%.
#[test]
fn collection_after_scattering_writes_copies_little() {
    let mut fs = Fs::mount(nor_4k(16 << 20), Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, 8 << 20);
    let mut rng = Rng(0x2004);
    for size in [256, 1024] {
        random_writes(
            &mut fs,
            ino,
            &mut model,
            size,
            (4 << 20) / size as u32,
            &mut rng,
        );
    }
    let before = fs.op_counts();
    random_writes(&mut fs, ino, &mut model, 4096, 512, &mut rng);
    let d = fs.op_counts().since(&before);
    let (data, copies) = (
        d.by_cause.programs[Cause::Data as usize],
        d.by_cause.programs[Cause::GcCopy as usize],
    );
    // 4,955 copy programs for 9,694 of data (51%); 5,973 (62%) with ages uncapped, 6,162
    // (64%) with index blocks weighed as data blocks too.
    eprintln!(
        "data programs {data}, copy programs {copies}, erases {}",
        d.erases
    );
    assert!(
        copies * 100 < 57 * data,
        "{copies} copy programs for {data} of data"
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// Small synced overwrites go on on a small partition filled to `ENOSPC` and then cut by
/// 64 KiB (three times the file's size in 4 KiB writes at random places). Each write and its
/// `fsync` either both succeed or the write is refused (`ENOSPC`) with nothing changed; the
/// file reads back as the model after a remount, and fsck is clean. Refusals are bounded by
/// today's figures (`cargo test --release -p dffs --test block_layer overwrites --
/// --nocapture` prints them; DESIGN §9.3): 14 of 1,632 on 4 MiB SLC NAND, 129 of 4,704 on
/// 8 MiB, none of 837 on 2 MiB of 64 KiB NOR blocks, none of 591 on 1 MiB of 4 KiB NOR
/// sectors (6 before a try for bytes the budget has not got stopped collecting).
/// (Before a refused write could take a checkpoint with nothing to release and an overwrite
/// was credited the blocks it replaces: 1,575, 4,610, 752 and 51. Before NOR devices of
/// fewer than 128 blocks took four heads, FORMAT §6.3, the 2 MiB NOR fill held a block less:
/// none of 777.) 4 MiB of 64 KiB NOR blocks still refuses 2,256 of 2,271 (2,189 of 2,232
/// with five heads; DESIGN §15 item 20), so only its data is checked.
#[test]
fn overwrites_go_on_on_a_nearly_full_device() {
    let nor64 = |bytes: u64| {
        let p = preset("nor-qspi-16m")
            .unwrap()
            .with_size_bytes(bytes)
            .unwrap();
        Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
    };
    let nand = |bytes: u64| {
        let p = preset("nand-slc-128m")
            .unwrap()
            .with_size_bytes(bytes)
            .unwrap();
        Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
    };
    let cases: [(&str, SimFlash, usize); 5] = [
        ("4 MiB SLC NAND", nand(4 << 20), 40),
        ("8 MiB SLC NAND", nand(8 << 20), 300),
        ("2 MiB NOR, 64 KiB blocks", nor64(2 << 20), 20),
        ("4 MiB NOR, 64 KiB blocks", nor64(4 << 20), usize::MAX),
        ("1 MiB NOR, 4 KiB sectors", nor_4k(1 << 20), 80),
    ];
    for (name, dev, bound) in cases {
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let (ino, fh, full) = fill_to_nospace(&mut fs, 0x5A);
        fs.fsync(fh).unwrap();
        let len = full - 65536;
        fs.truncate(fh, len).unwrap();
        fs.fsync(fh).unwrap();
        let mut model = vec![0x5Au8; len as usize];
        let mut rng = Rng(77);
        let (n, mut refused) = ((len / 4096) * 3, 0usize);
        for i in 0..n {
            let off = rng.below(len / 4096) * 4096;
            let buf = vec![(i % 251) as u8; 4096];
            match fs.write(fh, off, &buf) {
                Ok(k) => {
                    assert_eq!(k, 4096);
                    fs.fsync(fh)
                        .unwrap_or_else(|e| panic!("{name}: sync of write {i}: {e:?}"));
                    model[off as usize..off as usize + 4096].copy_from_slice(&buf);
                }
                Err(dffs::Error::NoSpace) => refused += 1,
                Err(e) => panic!("{name}: write {i}: {e:?}"),
            }
        }
        eprintln!("{name}: {n} overwrites of 4 KiB, {refused} refused");
        assert!(refused <= bound, "{name}: {refused} of {n} refused");
        fs.close(fh).unwrap();
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        // (Reads it back against the model and runs fsck.)
        check(&mut fs, ino, &model);
    }
}

/// On a device of few large blocks the free pool keeps two blocks above the reserve, not one
/// per head as well, and a small window (DESIGN §9.3): the blocks it no longer holds idle are
/// room collection uses. 16 MiB of 64 KiB NOR blocks, a file at 80% of it, as many synced
/// random 4 KiB writes as a fifth of the device, then 256 more, measured: the free pool stays
/// between the reserve and 8 blocks above it (6 and 8 to 12 blocks; 15 to 20 with the margin),
/// and the measured writes erase at most 150 blocks (134; 174 with the margin;
/// `dffs bench nor --erase-size 64KiB` runs the workload at full length). Everything reads
/// back after a remount (and fsck is clean).
#[test]
fn a_pool_of_few_large_blocks_keeps_little_idle() {
    let p = preset("nor-qspi-16m")
        .unwrap()
        .with_erase_size(65536)
        .unwrap();
    let cap = p.geometry.capacity();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, cap * 8 / 10 / 4096 * 4096);
    let mut rng = Rng(0x80F);
    random_writes(
        &mut fs,
        ino,
        &mut model,
        4096,
        ((cap / 5) / 4096) as u32,
        &mut rng,
    );
    let before = fs.flash().stats();
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let (mut most_free, mut least_free) = (0, u32::MAX);
    for k in 0..256u32 {
        let off = rng.below(model.len() as u64 / 4096) as usize * 4096;
        let data = vec![k as u8; 4096];
        fs.write(fh, off as u64, &data).unwrap();
        fs.fsync(fh).unwrap();
        model[off..off + 4096].copy_from_slice(&data);
        let (free, reserve) = pool(&fs);
        most_free = most_free.max(free);
        least_free = least_free.min(free);
        assert!(
            free >= reserve && free <= reserve + 8,
            "write {k}: {free} blocks free, reserve {reserve}"
        );
    }
    fs.close(fh).unwrap();
    let erases = fs.flash().stats().since(&before).erases;
    assert!(erases <= 150, "{erases} erases");
    eprintln!(
        "256 synced 4 KiB writes at 80% fill: {erases} erases, free blocks {least_free}..{most_free} (reserve {})",
        pool(&fs).1
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// Formats `p`, fills a file to `pct`% of the device, makes 128 synced random 4 KiB writes
/// into it, then `n` more: the file system, the file and its model, with the device operations
/// of the last `n` writes.
fn random_writes_at_fill(p: Preset, pct: u64, n: u32) -> (Fs<SimFlash>, Ino, Vec<u8>, Stats) {
    let cap = p.geometry.capacity();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let (ino, mut model) = fill(&mut fs, cap * pct / 100 / 4096 * 4096);
    let mut rng = Rng(0x30F);
    random_writes(&mut fs, ino, &mut model, 4096, 128, &mut rng);
    let before = fs.flash().stats();
    random_writes(&mut fs, ino, &mut model, 4096, n, &mut rng);
    let st = fs.flash().stats().since(&before);
    (fs, ino, model, st)
}

/// The same holds for NOR of 32 to 63 large blocks (DESIGN §9.3): 2 MiB of 64 KiB blocks,
/// the quick size of `dffs bench nor --erase-size 64KiB`, with a file of 30% of it. With the
/// wider margins of small devices the pool was kept 11 to 15 blocks free, nearly half the
/// device, and collection moved blocks 85-95% live: 64 synced random 4 KiB writes erased 57
/// blocks (`rand_write_fill` at 30%: 18 KB/s, 7% of raw). Now at most 20 (7, 6 since four heads;
/// 118 KB/s, 150.5 since).
#[test]
fn a_small_device_of_large_nor_blocks_keeps_little_idle() {
    let p = nor_preset(65536, 2 << 20);
    writes_at_30_percent_erase_at_most(p, 64, 20, "32 blocks of 64 KiB NOR");
}

/// Small devices that keep the wider margins (4 MiB of SLC NAND: 32 blocks of 128 KiB) keep
/// their urgent level, but in the window above it background collection takes no data block
/// more than three-quarters live (DESIGN §9.3): with the file at 30% of the device it moved
/// blocks nearly all live whenever fewer than 16 of the 32 were free, and 256 synced random
/// 4 KiB writes erased 175 blocks. Now at most 80 (43).
#[test]
fn a_small_nand_collects_in_its_window_only_what_pays() {
    let p = preset("nand-slc-128m")
        .unwrap()
        .with_size_bytes(4 << 20)
        .unwrap();
    writes_at_30_percent_erase_at_most(p, 256, 80, "4 MiB SLC");
}

/// `writes` synced random 4 KiB writes to a file of 30% of a device of preset `p` erase at
/// most `max_erases` blocks, leave the free pool at its reserve or above, and read back after
/// a remount.
fn writes_at_30_percent_erase_at_most(p: Preset, writes: u32, max_erases: u64, what: &str) {
    let (fs, ino, model, st) = random_writes_at_fill(p, 30, writes);
    let erases = st.erases;
    let (free, reserve) = pool(&fs);
    eprintln!("{writes} synced 4 KiB writes at 30% fill of {what}: {erases} erases, {free} free");
    assert!(erases <= max_erases, "{erases} erases");
    assert!(free >= reserve, "{free} blocks free, reserve {reserve}");
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    check(&mut fs, ino, &model);
}

/// Synced random 4 KiB writes on small devices of large blocks, by fill: a file of 10, 30 or
/// 50% of the device, 128 writes, then 256 whose erases and programs are printed with the
/// free pool at their end. NAND of 32 to 63 blocks keeps the wider margins (DESIGN §9.3).
/// Run with
/// `cargo test --release -p dffs --test block_layer small_devices_by_fill -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn small_devices_by_fill() {
    for (name, erase, size) in [
        ("nand-slc-128m", 0u32, 4u64 << 20),
        ("nand-slc-128m", 0, 6 << 20),
        ("nand-slc-128m", 0, 8 << 20),
        ("nor-qspi-16m", 65536, 2 << 20),
        ("nor-qspi-16m", 65536, 3 << 20),
    ] {
        for pct in [10u64, 30, 50] {
            let mut p = preset(name).unwrap();
            if erase > 0 {
                p = p.with_erase_size(erase).unwrap();
            }
            let (fs, _, _, st) = random_writes_at_fill(p.with_size_bytes(size).unwrap(), pct, 256);
            let (free, reserve) = pool(&fs);
            eprintln!(
                "{name} {} MiB, file at {pct}%: {} erases, {} programs; {free} blocks free, \
                 reserve {reserve}",
                size >> 20,
                st.erases,
                st.programs
            );
        }
    }
}

/// (Free blocks, reserve) as `Fs::debug_block_summary` gives them.
fn pool(fs: &Fs<SimFlash>) -> (u32, u32) {
    let s = fs.debug_block_summary();
    let num = |key: &str| -> u32 {
        let at = s.find(key).unwrap_or_else(|| panic!("no {key:?} in {s}")) + key.len();
        s[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (num(" free "), num("reserve "))
}

/// NOR chips of 4 KiB sectors whose block table has more pages than half a checkpoint slot
/// can list (about 10,000 sectors and up: 48 and 128 MiB here; 128 MiB is a common part)
/// name directory nodes that list the pages instead (FORMAT §8.2). They format (above about
/// 60 MiB they said `NoMemory` before), keep what was written across checkpoints and
/// remounts, and pass fsck with no block credited more than it holds; 32 MiB still lists its
/// pages in the checkpoint.
#[test]
fn large_nor_chips_list_their_table_in_directory_nodes() {
    let dev = nor_4k(32 << 20);
    let fs = Fs::mount(dev, Config::smallest()).unwrap();
    assert_eq!(
        fs.params().bt_dir_nodes(),
        0,
        "32 MiB lists its pages itself"
    );
    fs.unmount().unwrap();
    for mib in [48u64, 128] {
        let dev = nor_4k(mib << 20);
        let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
        let dirs = fs.params().bt_dir_nodes();
        assert!(dirs > 0, "{mib} MiB: directory nodes");
        let mut model = Vec::new();
        for d in 0..4u32 {
            let dir = fs
                .mkdir(ROOT_INO, format!("d{d}").as_bytes(), 0o755, 0, 0)
                .unwrap()
                .ino;
            for f in 0..5u32 {
                let data: Vec<u8> = (0..3000 + 700 * f)
                    .map(|i| (i * 7 + d * 13 + f) as u8)
                    .collect();
                let ino = fs
                    .create(dir, format!("f{f}").as_bytes(), 0o644, 0, 0)
                    .unwrap()
                    .ino;
                let fh = fs.open(ino, OpenFlags::RW).unwrap();
                fs.write(fh, 0, &data).unwrap();
                fs.fsync(fh).unwrap();
                fs.close(fh).unwrap();
                model.push((ino, data));
            }
            // A checkpoint per directory: every one writes the directory nodes afresh.
            fs.checkpoint().unwrap();
        }
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
        for (ino, data) in &model {
            let fh = fs.open(*ino, OpenFlags::READ).unwrap();
            let mut buf = vec![0u8; data.len() + 10];
            assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), data.len(), "{mib} MiB");
            assert_eq!(&buf[..data.len()], &data[..], "{mib} MiB: inode {ino}");
            fs.close(fh).unwrap();
        }
        let rep = fs.fsck().unwrap();
        assert!(rep.is_clean(), "{mib} MiB: {:?}", rep.errors);
        assert_eq!(rep.over_credited, 0, "{mib} MiB: {:?}", rep.warnings);
        fs.unmount().unwrap();
    }
}

/// The same 48 MiB of 4 KiB NOR sectors nearly full (a file of 80% of the room `statfs`
/// gives) and then churned until collection has emptied more than a hundred blocks, with a
/// checkpoint writing the directory nodes afresh every few operations: synced random
/// overwrites and small files created and removed, with remounts; the file's content stays
/// the model's, and fsck finds no error and no block credited more than it holds.
#[test]
fn a_full_large_nor_chip_keeps_its_table_through_collection() {
    let mut fs = Fs::mount(nor_4k(48 << 20), Config::smallest()).unwrap();
    assert!(fs.params().bt_dir_nodes() > 0);
    let room = fs.statfs().unwrap();
    let room = room.blocks_free * room.block_size as u64;
    let (ino, mut model) = fill(&mut fs, room * 8 / 10 / 65536 * 65536);
    let mut rng = Rng(48);
    let mut collected = 0u64;
    for round in 0..6 {
        for _ in 0..400 {
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            let at = rng.below(model.len() as u64 / 4096) * 4096;
            let data: Vec<u8> = (0..4096).map(|i| (i as u64 ^ at ^ round) as u8).collect();
            fs.write(fh, at, &data).unwrap();
            fs.fsync(fh).unwrap();
            fs.close(fh).unwrap();
            model[at as usize..at as usize + 4096].copy_from_slice(&data);
            let name = format!("s{}", rng.below(20));
            match fs.lookup(ROOT_INO, name.as_bytes()) {
                Ok(_) => fs.unlink(ROOT_INO, name.as_bytes()).unwrap(),
                Err(_) => {
                    fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0).unwrap();
                }
            }
        }
        collected += fs.activity().gc_blocks;
        let dev = fs.unmount().unwrap();
        fs = Fs::mount(dev, Config::smallest()).unwrap();
    }
    assert!(collected > 100, "collection ran: {collected} blocks");
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; model.len()];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), model.len());
    assert!(buf == model, "the file differs from the model");
    fs.close(fh).unwrap();
    let rep = fs.fsck().unwrap();
    assert!(rep.is_clean(), "{:?}", rep.errors);
    assert_eq!(rep.over_credited, 0, "{:?}", rep.warnings);
}

/// Scans of the block table (free-block candidates for the allocator, the victim by age for
/// collection) read from flash only the pages whose bounds say they could change the choice
/// (DESIGN §12.1). On a nearly full device that collects all the time, with one page of wear
/// cached, the same workload with full scans and with bounded ones makes the same choices
/// (every program and erase, the erase counts on the device and in the table), and the
/// bounded scans read a small part of the block-table pages the full ones read.
#[test]
fn scans_by_page_bounds_choose_as_a_pass_over_every_page() {
    let run = |full: bool| {
        let cfg = Config {
            table_cache: 1,
            ..Config::default()
        };
        let mut fs = Fs::mount(nor_4k(32 << 20), cfg).unwrap();
        fs.debug_full_scans(full);
        let room = fs.statfs().unwrap();
        let room = room.blocks_free * room.block_size as u64;
        let (ino, mut model) = fill(&mut fs, room * 8 / 10 / 65536 * 65536);
        let mut rng = Rng(0xb0);
        let (mut gc, mut map_reads) = (0, 0);
        for _ in 0..3 {
            let before = fs.op_counts();
            random_writes(&mut fs, ino, &mut model, 4096, 400, &mut rng);
            map_reads += fs.op_counts().since(&before).by_cause.reads[5];
            gc += fs.activity().gc_blocks;
            let dev = fs.unmount().unwrap();
            fs = Fs::mount(dev, cfg).unwrap();
            fs.debug_full_scans(full);
        }
        check(&mut fs, ino, &model);
        let counts = fs.erase_counts().unwrap();
        let dev = fs.unmount().unwrap();
        let st = dev.stats();
        let ops = (st.programs, st.erases);
        (ops, dev.erase_counts().to_vec(), counts, gc, map_reads)
    };
    let (full, bounded) = (run(true), run(false));
    assert_eq!(bounded.0, full.0, "programs and erases");
    assert_eq!(bounded.1, full.1, "the device's erase counts");
    assert_eq!(bounded.2, full.2, "the table's erase counts");
    assert!(full.3 > 500, "collection ran: {} blocks", full.3);
    eprintln!("map reads: full {}, bounded {}", full.4, bounded.4);
    assert!(
        bounded.4 * 4 < full.4,
        "block-table reads: {} bounded, {} full",
        bounded.4,
        full.4
    );
}

/// What the block table's scans read on larger chips, with full scans (what they read before
/// the page bounds) and with bounded ones: the figures DESIGN §12.1 publishes. Each case fills
/// one file (64 KiB writes of one byte value), then makes 3,000 synced random 4 KiB writes of
/// it, counted after the fill. Long (about a minute in release):
/// `cargo test --release -p dffs --test block_layer scan_reads -- --ignored --nocapture`.
#[test]
#[ignore]
fn scan_reads_on_larger_chips() {
    // (chip bytes, configuration, file bytes: `None` for 85% of the room)
    let cases = [
        (128u64 << 20, Config::default(), None),
        (
            16 << 20,
            Config {
                table_cache: 1,
                ..Config::smallest()
            },
            Some(8u64 << 20),
        ),
    ];
    for (bytes, cfg, file) in cases {
        let mut seen = Vec::new();
        for full in [true, false] {
            let mut fs = Fs::mount(nor_4k(bytes), cfg).unwrap();
            fs.debug_full_scans(full);
            let st = fs.statfs().unwrap();
            let room = st.blocks_free * st.block_size as u64;
            let len = file.unwrap_or(room * 85 / 100 / 65536 * 65536);
            let ino = fs.create(ROOT_INO, b"t", 0o644, 0, 0).unwrap().ino;
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            let chunk = vec![7u8; 65536];
            for k in 0..len / 65536 {
                fs.write(fh, k * 65536, &chunk).unwrap();
            }
            fs.fsync(fh).unwrap();
            let (c0, t0, gc0) = (fs.op_counts(), fs.flash().stats(), fs.activity().gc_blocks);
            let mut rng = Rng(12345);
            let n = 3000;
            // The longest write's reads: the pause a scan adds.
            let mut worst_reads = 0f64;
            for _ in 0..n {
                let at = rng.below(len / 4096) * 4096;
                let before = fs.flash().stats();
                fs.write(fh, at, &chunk[..4096]).unwrap();
                fs.fsync(fh).unwrap();
                worst_reads = worst_reads.max(fs.flash().stats().since(&before).read_us());
            }
            let c = fs.op_counts().since(&c0);
            let s = fs.flash().stats().since(&t0);
            eprintln!(
                "{} MiB, table cache {}, {} scans: {} collected blocks, {} reads ({} of the \
                 block table), {} programs, {} erases; per write {:.0} reads, {:.2} ms of \
                 reads (at most {:.1} ms), {:.1} ms of device time",
                bytes >> 20,
                cfg.table_cache,
                if full { "full" } else { "bounded" },
                fs.activity().gc_blocks - gc0,
                c.reads,
                c.by_cause.reads[5],
                c.programs,
                c.erases,
                c.reads as f64 / n as f64,
                s.read_us() / 1000.0 / n as f64,
                worst_reads / 1000.0,
                s.sim_us() / 1000.0 / n as f64,
            );
            seen.push((c.programs, c.erases, c.reads));
        }
        assert_eq!(seen[0].0, seen[1].0, "programs");
        assert_eq!(seen[0].1, seen[1].1, "erases");
        assert!(seen[1].2 < seen[0].2, "reads");
    }
}

fn names_in(fs: &mut Fs<SimFlash>, dir: Ino) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        v.push(e.name);
        true
    })
    .unwrap();
    v.sort();
    v
}

/// A directory of a few entries is written as a short root page (its used slots listed,
/// FORMAT §8.4), not a whole 1 KiB page: 40 directories of three empty files each take less
/// on 4 KiB sectors than their 40 pages alone did. A directory grown past two-thirds of its
/// slots (written as the whole array) and shrunk back keeps every name across remounts.
#[test]
fn directories_of_few_entries_take_short_root_pages() {
    let mut fs = Fs::mount(nor_4k(1 << 20), Config::smallest()).unwrap();
    let page = fs.params().dir_page as u64;
    fs.checkpoint().unwrap();
    let before = fs.info().used_bytes;
    let mut dirs = Vec::new();
    for d in 0..40u32 {
        let name = format!("d{d}");
        let ino = fs
            .mkdir(ROOT_INO, name.as_bytes(), 0o755, 0, 0)
            .unwrap()
            .ino;
        for f in 0..3u32 {
            fs.create(ino, format!("f{f}").as_bytes(), 0o644, 0, 0)
                .unwrap();
        }
        dirs.push(ino);
    }
    fs.checkpoint().unwrap();
    let used = fs.info().used_bytes - before;
    // Besides the roots: 120 inode nodes, the root directory's page, map and table pages.
    assert!(
        used < 40 * page,
        "40 directories of 3 files took {used} B, their pages alone were {} B",
        40 * page
    );
    assert!(fs.fsck().unwrap().is_clean());

    // One directory through every form: listed, the whole array, bucketed, and back.
    let big = fs.mkdir(ROOT_INO, b"big", 0o755, 0, 0).unwrap().ino;
    let mut want: Vec<Vec<u8>> = Vec::new();
    for n in 0..100u32 {
        let name = format!("entry-{n:03}").into_bytes();
        fs.create(big, &name, 0o644, 0, 0).unwrap();
        want.push(name);
        want.sort();
        if n % 7 == 0 || (70..85).contains(&n) {
            let dev = fs.unmount().unwrap();
            fs = Fs::mount(dev, Config::smallest()).unwrap();
            assert_eq!(names_in(&mut fs, big), want, "after {} creates", n + 1);
        }
    }
    for n in (0..100u32).rev() {
        let name = format!("entry-{n:03}").into_bytes();
        fs.unlink(big, &name).unwrap();
        want.retain(|w| *w != name);
        if n % 7 == 0 || (70..85).contains(&n) {
            let dev = fs.unmount().unwrap();
            fs = Fs::mount(dev, Config::smallest()).unwrap();
            assert_eq!(names_in(&mut fs, big), want, "{n} left");
            assert!(fs.fsck().unwrap().is_clean(), "{n} left");
        }
    }
    for (d, ino) in dirs.iter().enumerate() {
        let want: Vec<Vec<u8>> = (0..3).map(|f| format!("f{f}").into_bytes()).collect();
        assert_eq!(names_in(&mut fs, *ino), want, "d{d}");
    }
}

/// On a device of few large blocks, each block a head holds open is room collection lacks:
/// 2 MiB of 64 KiB NOR blocks (32), a file of half of it, synced random 4 KiB writes after a
/// warm-up as large as the free space, then synced sequential 4 KiB overwrites from its
/// start. The four heads such a device takes (`Compact`, FORMAT §6.3) take less simulated
/// device time for both than the five of `Merged` did: 21.7 s and 39.7 s against 22.7 s and
/// 44.2 s (printed by `cargo test --release -p dffs --test block_layer four_heads --
/// --nocapture`; the quick NOR bench on this device, whose rows follow a sweep of smaller
/// writes that scattered the file, gains more: DESIGN §7).
#[test]
fn four_heads_on_few_large_blocks_write_faster() {
    let run = |heads: Option<HeadLayout>| {
        let p = nor_preset(65536, 2 << 20);
        let opts = FormatOptions {
            heads,
            ..FormatOptions::default()
        };
        let dev = Fs::format(SimFlash::new(p).unwrap(), &opts).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let layout = fs.params().heads;
        let (ino, mut model) = fill(&mut fs, 1 << 20);
        let mut rng = Rng(0x4ead);
        random_writes(&mut fs, ino, &mut model, 4096, 256, &mut rng);
        let t0 = fs.flash().stats().sim_ps;
        random_writes(&mut fs, ino, &mut model, 4096, 128, &mut rng);
        let t1 = fs.flash().stats().sim_ps;
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        for k in 0..256usize {
            let data = vec![k as u8; 4096];
            fs.write(fh, k as u64 * 4096, &data).unwrap();
            fs.fsync(fh).unwrap();
            model[k * 4096..(k + 1) * 4096].copy_from_slice(&data);
        }
        fs.close(fh).unwrap();
        let t2 = fs.flash().stats().sim_ps;
        let (random_ms, seq_ms) = ((t1 - t0) / 1_000_000_000, (t2 - t1) / 1_000_000_000);
        eprintln!("{layout:?}: 128 random 4 KiB writes {random_ms} ms, 256 sequential {seq_ms} ms");
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        check(&mut fs, ino, &model);
        (layout, random_ms, seq_ms)
    };
    let (layout, random_ms, seq_ms) = run(None);
    assert_eq!(layout, HeadLayout::Compact);
    let (_, merged_random, merged_seq) = run(Some(HeadLayout::Merged));
    assert!(
        random_ms < merged_random && seq_ms * 100 < merged_seq * 95,
        "four heads: {random_ms} and {seq_ms} ms; five: {merged_random} and {merged_seq} ms"
    );
}

/// A device filled with files refuses the files that do not fit without collecting for them:
/// 4 MiB of 64 KiB NOR blocks, files of 100 B to 140 KB created and synced until 30 are
/// refused (each refused one unlinked, as a failed extraction leaves it). The refusals cost
/// 1,368 programs in all and the device holds 207 files (`cargo test --release -p dffs --test
/// block_layer full_of_files -- --nocapture`); before a try for bytes the budget has not got
/// stopped collecting (DESIGN §9.3) they cost 375,113 programs, for 209 files held. Every
/// file held reads back after a remount, and fsck is clean.
#[test]
fn a_device_full_of_files_refuses_without_collecting() {
    let mut fs = Fs::mount(nor_with(65536, 4 << 20), Config::default()).unwrap();
    let mut rng = Rng(12345);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let (mut held, mut refused, mut refused_programs) = (Vec::new(), 0, 0u64);
    for i in 0..3000u32 {
        let len = if rng.below(8) == 0 {
            20_000 + rng.below(120_000)
        } else {
            100 + rng.below(8000)
        };
        let before = fs.flash().stats();
        let name = format!("f{i}");
        let ino = match fs.create(d, name.as_bytes(), 0o644, 0, 0) {
            Ok(st) => st.ino,
            Err(dffs::Error::NoSpace) => {
                refused += 1;
                refused_programs += fs.flash().stats().since(&before).programs;
                if refused == 30 {
                    break;
                }
                continue;
            }
            Err(e) => panic!("create {i}: {e:?}"),
        };
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        let r = fs
            .write(fh, 0, &vec![i as u8; len as usize])
            .and_then(|_| fs.fsync(fh));
        fs.close(fh).unwrap();
        match r {
            Ok(()) => held.push((ino, i, len)),
            Err(dffs::Error::NoSpace) => {
                fs.unlink(d, name.as_bytes()).unwrap();
                refused += 1;
                refused_programs += fs.flash().stats().since(&before).programs;
                if refused == 30 {
                    break;
                }
            }
            Err(e) => panic!("write {i}: {e:?}"),
        }
    }
    eprintln!(
        "{} files held, {refused} refused for {refused_programs} programs",
        held.len()
    );
    assert_eq!(refused, 30);
    assert!(held.len() >= 200, "{} files held", held.len());
    assert!(
        refused_programs <= 3000,
        "30 refused files cost {refused_programs} programs"
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for (ino, i, len) in held {
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; len as usize + 1];
        assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), len as usize, "f{i}");
        assert!(buf[..len as usize].iter().all(|&b| b == i as u8), "f{i}");
        fs.close(fh).unwrap();
    }
    assert!(fs.fsck().unwrap().is_clean());
}
