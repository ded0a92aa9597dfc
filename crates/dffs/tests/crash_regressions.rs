use dffs::{Config, FormatOptions, Fs, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

#[test]
/// Regression: a recovery checkpoint after a crash must be newer than the checkpoint it recovers
/// from (it once reused its number and lost to it at the next mount).
fn crash_remount_twice_keeps_both_sessions() {
    let p = preset("nand-mlc-1g").unwrap().with_blocks(24).unwrap();
    let dev = SimFlash::new(p).unwrap();
    let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
    let cfg = Config::smallest();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.mkdir(ROOT_INO, b"c", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.lookup(ROOT_INO, b"c").unwrap();
    fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.lookup(ROOT_INO, b"c").unwrap();
    fs.lookup(ROOT_INO, b"x").unwrap();
}

/// Regression (found by the wear benchmark): rewriting one file again and again (truncate at
/// open, write 1 MiB, close) must never run out of space: each rewrite frees the last one.
#[test]
fn rewriting_a_file_reclaims_its_old_versions() {
    use dffs::OpenFlags;
    let p = preset("nand-slc-128m").unwrap().with_blocks(128).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let ino = fs.create(ROOT_INO, b"hot", 0o644, 0, 0).unwrap().ino;
    for k in 0..64u32 {
        let data: Vec<u8> = (0..1 << 20)
            .map(|i: u32| (i.wrapping_mul(k + 7) >> 8) as u8)
            .collect();
        let fh = fs
            .open(
                ino,
                OpenFlags {
                    truncate: true,
                    ..OpenFlags::RW
                },
            )
            .unwrap_or_else(|e| panic!("open {k}: {e:?}"));
        for c in data.chunks(65536).enumerate() {
            fs.write(fh, (c.0 * 65536) as u64, c.1)
                .unwrap_or_else(|e| panic!("rewrite {k}: {e:?} (statfs {:?})", fs.statfs()));
        }
        fs.close(fh).unwrap();
    }
    let st = fs.statfs().unwrap();
    assert!(st.blocks_free * st.block_size as u64 > 8 << 20, "{st:?}");
}

/// Regression (found by the mount benchmark): files created and fsynced before a power cut
/// must be there after it, on a device that already holds thousands of files.
#[test]
fn fsynced_files_survive_a_cut_on_a_full_directory_tree() {
    use dffs::OpenFlags;
    let p = preset("nand-mlc-1g")
        .unwrap()
        .with_size_bytes(128 << 20)
        .unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let mut dirs = Vec::new();
    for k in 0..100 {
        dirs.push(
            fs.mkdir(ROOT_INO, format!("d{k:03}").as_bytes(), 0o755, 0, 0)
                .unwrap()
                .ino,
        );
    }
    let block = |i: u64| -> Vec<u8> {
        (0..4096u64)
            .map(|j| (i.wrapping_mul(31) ^ j) as u8)
            .collect()
    };
    for i in 0..2500u64 {
        let ino = fs
            .create(
                dirs[(i % 100) as usize],
                format!("f{i:06}").as_bytes(),
                0o644,
                0,
                0,
            )
            .unwrap()
            .ino;
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &block(i)).unwrap();
        fs.close(fh).unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for k in 0..8u64 {
        let ino = fs
            .create(ROOT_INO, format!("small{k}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &block(100 + k)).unwrap();
        fs.fsync(fh).unwrap();
        fs.close(fh).unwrap();
    }
    fs.flash_mut().cut_power_after(64);
    let ino = fs.create(ROOT_INO, b"big", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let big = vec![0x5Au8; 65536];
    let mut cut = false;
    for k in 0..16u64 {
        if fs.write(fh, k * 65536, &big).is_err() {
            cut = true;
            break;
        }
    }
    assert!(cut || fs.close(fh).is_err(), "the power cut did not happen");
    let mut dev = fs.into_flash();
    dev.power_up();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for k in 0..8u64 {
        let st = fs
            .lookup(ROOT_INO, format!("small{k}").as_bytes())
            .unwrap_or_else(|e| panic!("small{k}: {e:?}"));
        let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; 4096];
        assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 4096);
        assert_eq!(buf, block(100 + k), "small{k}");
    }
    let rep = fs.fsck().unwrap();
    assert!(rep.is_clean(), "{:?}", rep.errors);
}

/// Regression (found by the NOR benchmark): with 4 KiB erase sectors the block table of a
/// checkpoint spans many erase blocks (2 MiB = 512 sectors); format, checkpoints and a mount
/// after a power cut must all work, and synced files must survive.
#[test]
fn nor_with_4k_sectors_spans_the_block_table_over_many_blocks() {
    use dffs::OpenFlags;
    let p = preset("nor-qspi-16m")
        .unwrap()
        .with_size_bytes(2 << 20)
        .unwrap()
        .with_erase_size(4096)
        .unwrap();
    assert_eq!(p.geometry.blocks, 512);
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let content = |i: u32| -> Vec<u8> {
        (0..3000u32)
            .map(|j| (j ^ i.wrapping_mul(97)) as u8)
            .collect()
    };
    for round in 0..3u32 {
        for i in 0..40u32 {
            let name = format!("r{round}f{i}");
            let ino = fs
                .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            fs.write(fh, 0, &content(round * 100 + i)).unwrap();
            fs.close(fh).unwrap();
        }
        fs.sync().unwrap();
        // Power cut right after the sync; the next mount replays the journal.
        fs.flash_mut().cut_power_after(1);
        let _ = fs.create(ROOT_INO, b"lost", 0o644, 0, 0);
        let _ = fs.sync();
        assert!(!fs.flash_mut().is_powered());
        let mut dev = fs.into_flash();
        dev.power_up();
        fs = Fs::mount(dev, Config::default()).unwrap();
        fs.fsck().unwrap();
        for r in 0..=round {
            for i in 0..40u32 {
                let st = fs.lookup(ROOT_INO, format!("r{r}f{i}").as_bytes()).unwrap();
                let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
                let mut buf = vec![0u8; 3000];
                assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 3000);
                assert_eq!(buf, content(r * 100 + i), "r{r}f{i}");
                fs.close(fh).unwrap();
            }
        }
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(fs.fsck().unwrap().files, 120);
}

/// Regression (found reading the code, then at 84,044 entries in one directory on 2 KiB pages):
/// a directory root page counted room for one bucket address too many (it forgot the 4-byte
/// count before the addresses), so while a directory had exactly that many buckets every
/// checkpoint failed with `Corrupt`. Small pages reach that bucket count after a few thousand
/// entries; checkpoint often across it.
#[test]
fn a_directory_root_full_of_bucket_addresses_still_fits_its_page() {
    let mut p = preset("nand-slc-128m").unwrap().with_blocks(256).unwrap();
    p.geometry.page_size = 512;
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for i in 0..5200u32 {
        fs.create(ROOT_INO, format!("f{i:05}").as_bytes(), 0o644, 0, 0)
            .unwrap_or_else(|e| panic!("create {i}: {e:?}"));
        if i >= 3000 && i % 8 == 0 {
            fs.checkpoint()
                .unwrap_or_else(|e| panic!("checkpoint after {} entries: {e:?}", i + 1));
        }
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for i in (0..5200u32).step_by(97) {
        fs.lookup(ROOT_INO, format!("f{i:05}").as_bytes()).unwrap();
    }
    assert!(fs.fsck().unwrap().is_clean());
}

/// Regression (found by the chained-cut torture): after a mount that recovered from a cut, the
/// first change writes the recovery checkpoint. A change whose arguments the tree refuses must
/// say why (`EEXIST`, `ENOTEMPTY`, `ENOENT`) without writing anything: the torture saw ENOSPC
/// instead on a full device, where that checkpoint found no room. Here the device loses power
/// at its next program, so any write attempt shows.
#[test]
fn refused_names_need_no_recovery_checkpoint() {
    use dffs::Error;
    let p = preset("nand-slc-128m").unwrap().with_blocks(32).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let f = fs.create(d, b"f", 0o644, 0, 0).unwrap().ino;
    fs.mkdir(ROOT_INO, b"e", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert!(fs.info().recovered, "the mount must have recovered");
    let ops = fs.flash().program_erase_ops();
    fs.flash_mut().cut_power_after(1);
    assert_eq!(
        fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap_err(),
        Error::Exists
    );
    assert_eq!(fs.create(d, b"f", 0o644, 0, 0).unwrap_err(), Error::Exists);
    assert_eq!(fs.link(f, d, b"f").unwrap_err(), Error::Exists);
    assert_eq!(fs.rmdir(ROOT_INO, b"d").unwrap_err(), Error::NotEmpty);
    assert_eq!(
        fs.rename(ROOT_INO, b"e", ROOT_INO, b"d").unwrap_err(),
        Error::NotEmpty
    );
    assert_eq!(fs.unlink(ROOT_INO, b"nope").unwrap_err(), Error::NotFound);
    assert_eq!(fs.rmdir(ROOT_INO, b"nope").unwrap_err(), Error::NotFound);
    assert_eq!(fs.unlink(ROOT_INO, b"d").unwrap_err(), Error::IsDir);
    assert_eq!(fs.flash().program_erase_ops(), ops, "nothing was written");
    assert!(fs.flash().is_powered());
    // A change the tree accepts does need the checkpoint, and the cut stops it.
    assert!(fs.mkdir(ROOT_INO, b"new", 0o755, 0, 0).is_err());
    assert!(!fs.flash().is_powered());
    let mut dev = fs.into_flash();
    dev.power_up();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    fs.lookup(d, b"f").unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"new").unwrap_err(), Error::NotFound);
    assert!(fs.fsck().unwrap().is_clean());
}

/// The whole of file `name` in the root (panics on any error).
fn read_root_file<F: dffs::Flash>(fs: &mut Fs<F>, name: &[u8]) -> Vec<u8> {
    let ino = fs.lookup(ROOT_INO, name).unwrap().ino;
    let fh = fs.open(ino, dffs::OpenFlags::READ).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match fs.read(fh, out.len() as u64, &mut buf).unwrap() {
            0 => break,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
    fs.close(fh).unwrap();
    out
}

/// Writes `data` to a new file `name` in the root and syncs it.
fn put_synced<F: dffs::Flash>(fs: &mut Fs<F>, name: &[u8], data: &[u8]) {
    let ino = fs.create(ROOT_INO, name, 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, dffs::OpenFlags::RW).unwrap();
    assert_eq!(fs.write(fh, 0, data).unwrap(), data.len());
    fs.close(fh).unwrap();
    fs.sync().unwrap();
}

/// Regression (4 KiB NOR chained cuts: `read /log.txt: Io`): a checkpoint cut while its anchor
/// slots were programmed reads as invalid at one mount and may read as valid at a later one
/// (partly programmed NOR bits vary from read to read). The mount that chose the checkpoint
/// before it must make that choice durable before it writes anything, or the cut checkpoint,
/// read as valid later, wins over everything the session after it synced (here: it ties with
/// the recovery checkpoint's number and, in the first anchor, wins the tie).
#[test]
fn a_cut_checkpoint_read_as_valid_later_never_wins() {
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};
    // 16 KiB blocks: the checkpoint to be cut is appended to the block of the one before it
    // (a cut switch to the other anchor is erased by the recovery checkpoint anyway).
    let mut geo = nor_geometry(32);
    geo.pages_per_block = 64;
    let dev = Fs::format(RamFlash::new(geo), &FormatOptions::default()).unwrap();
    let cfg = Config::smallest();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    put_synced(&mut fs, b"a", &[1u8; 700]);
    fs.checkpoint().unwrap();
    put_synced(&mut fs, b"a2", &[2u8; 700]);
    // The next checkpoint's anchor slots: what it changes in the two anchors (blocks 0 and 1
    // of a device without bad blocks).
    let anchors = 2 * geo.block_size() as usize;
    let before = fs.flash().raw()[..anchors].to_vec();
    fs.checkpoint().unwrap();
    let written = fs.flash().raw()[..anchors].to_vec();
    let changed: Vec<usize> = (0..anchors).filter(|&i| before[i] != written[i]).collect();
    assert!(!changed.is_empty(), "the checkpoint wrote no anchor slot");
    // Tear it: every byte it programmed reads wrong (both copies fail their CRC, the slots
    // still read as programmed); power is cut (no unmount).
    let mut dev = fs.into_flash();
    for &i in &changed {
        dev.set_raw_byte(i, written[i] ^ 0x01);
    }
    let torn: Vec<u8> = changed.iter().map(|&i| dev.raw_byte(i)).collect();
    // The next session recovers from the checkpoint before, syncs a file, and loses power.
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.lookup(ROOT_INO, b"a2").unwrap();
    put_synced(&mut fs, b"b", &[3u8; 700]);
    let mut dev = fs.into_flash();
    // Now the cut slots read as written, if they are still there.
    if changed
        .iter()
        .zip(&torn)
        .all(|(&i, &t)| dev.raw_byte(i) == t)
    {
        for &i in &changed {
            dev.set_raw_byte(i, written[i]);
        }
    }
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let ino = fs
        .lookup(ROOT_INO, b"b")
        .expect("a file synced after the recovery is lost");
    let fh = fs.open(ino.ino, dffs::OpenFlags::READ).unwrap();
    let mut buf = [0u8; 800];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 700);
    assert!(buf[..700].iter().all(|&x| x == 3));
    assert!(fs.fsck().unwrap().is_clean());
}

/// A checkpoint that moves a worn anchor to a younger free block of the anchor area (wear
/// leveling) and is cut while it writes that block's first slot: the mount after it chooses the
/// checkpoint before, whose block table calls the new block free. That slot may read as valid at
/// a later mount, numbered like the next checkpoint and naming the block as an anchor. The mount
/// must write its choice again with a higher number before anything else (as for a cut attempt
/// in the anchors themselves), or the cut move, read as valid later, wins over what the
/// session after the recovery synced.
#[test]
fn a_cut_anchor_move_read_as_valid_later_never_wins() {
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};
    // 4 KiB blocks of 1 KiB slots: an anchor fills in two checkpoints, so the anchors wear far
    // ahead of the other blocks and move within a few dozen checkpoints.
    let geo = nor_geometry(64);
    let bs = geo.block_size() as usize;
    let dev = Fs::format(RamFlash::new(geo), &FormatOptions::default()).unwrap();
    let cfg = Config::smallest();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let mut moved = None;
    for i in 0..200u32 {
        put_synced(&mut fs, format!("f{i}").as_bytes(), &[i as u8; 300]);
        let anchors = fs.params().anchors;
        let before = fs.flash().raw()[..8 * bs].to_vec();
        fs.checkpoint().unwrap();
        let now = fs.params().anchors;
        if now != anchors {
            let new = *now.iter().find(|b| !anchors.contains(b)).unwrap() as usize;
            moved = Some((i, new, before));
            break;
        }
    }
    let (last, new, before) = moved.expect("no anchor moved in 200 checkpoints");
    // Tear the move: every byte the checkpoint programmed in the new anchor reads wrong (its
    // first slot fails its CRC but reads as programmed); power is cut.
    let written = fs.flash().raw()[new * bs..(new + 1) * bs].to_vec();
    let changed: Vec<usize> = (0..bs)
        .filter(|&i| written[i] != before[new * bs + i] && written[i] != 0xFF)
        .collect();
    assert!(!changed.is_empty(), "the move wrote nothing in block {new}");
    let mut dev = fs.into_flash();
    for &i in &changed {
        dev.set_raw_byte(new * bs + i, written[i] ^ 0x01);
    }
    let torn: Vec<u8> = changed
        .iter()
        .map(|&i| dev.raw_byte(new * bs + i))
        .collect();
    // The next session recovers from the checkpoint before the move: before anything else, it
    // writes that checkpoint again (numbered past the cut one). Without this, the recovery
    // checkpoint usually erases the block again (it moves the same anchor to the same block),
    // but not always: with no room for a move it goes to the old anchor, with the cut one's
    // number, and the tie goes to the lower block. Then it syncs a file and loses power.
    let area = dev.raw()[..8 * bs].to_vec();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    assert!(
        fs.flash().raw()[..8 * bs] != area[..],
        "the mount did not write its choice again"
    );
    fs.lookup(ROOT_INO, format!("f{last}").as_bytes()).unwrap();
    put_synced(&mut fs, b"b", &[0xB7u8; 700]);
    let mut dev = fs.into_flash();
    // Now the cut slot reads as written, if it is still there.
    if changed
        .iter()
        .zip(&torn)
        .all(|(&i, &t)| dev.raw_byte(new * bs + i) == t)
    {
        for &i in &changed {
            dev.set_raw_byte(new * bs + i, written[i]);
        }
    }
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let ino = fs
        .lookup(ROOT_INO, b"b")
        .expect("a file synced after the recovery is lost");
    let fh = fs.open(ino.ino, dffs::OpenFlags::READ).unwrap();
    let mut buf = [0u8; 800];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 700);
    assert!(buf[..700].iter().all(|&x| x == 0xB7));
    fs.close(fh).unwrap();
    for i in 0..=last {
        fs.lookup(ROOT_INO, format!("f{i}").as_bytes())
            .unwrap_or_else(|e| panic!("f{i} lost: {e:?}"));
    }
    assert!(fs.fsck().unwrap().is_clean());
}

/// Regression (found by the chained-cut torture with a space check, 64 KiB NOR): an update too
/// large for extents (spilled to a block map of its own) that is open across a checkpoint must
/// leave no block credited with its data after a power cut, whether the cut abandons it or
/// comes after its commit (whose replay counts its blocks). The checkpoint counted them live:
/// a cut left blocks credited with up to 64 KiB that held nothing, never reclaimed by GC.
#[test]
fn a_spilled_update_open_across_a_checkpoint_leaves_no_credit_after_a_cut() {
    use dffs::OpenFlags;
    const LEN: usize = 1 << 20;
    for commit in [false, true] {
        let p = preset("nor-qspi-16m")
            .unwrap()
            .with_size_bytes(4 << 20)
            .unwrap();
        let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let ino = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
        let old: Vec<u8> = (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &old).unwrap();
        fs.close(fh).unwrap();
        fs.sync().unwrap();
        // 600 writes 8 KiB apart: more separate extents than the overlay keeps (256).
        let mut new = old.clone();
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        for k in 0..600usize {
            let at = (k * 37 % (LEN / 8192)) * 8192 + k % 7 * 512;
            let chunk = [k as u8 ^ 0x5A; 512];
            fs.write(fh, at as u64, &chunk).unwrap();
            new[at..at + 512].copy_from_slice(&chunk);
        }
        fs.checkpoint().unwrap();
        if commit {
            fs.fsync(fh).unwrap();
        }
        let mut dev = fs.into_flash();
        dev.power_off();
        dev.power_up();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        fs.checkpoint().unwrap();
        let r = fs.fsck().unwrap();
        assert!(r.is_clean(), "commit {commit}: {:?}", r.errors);
        assert_eq!(r.over_credited, 0, "commit {commit}: {:?}", r.warnings);
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; LEN];
        assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), LEN);
        assert!(
            buf == if commit { new.clone() } else { old.clone() },
            "commit {commit}"
        );
    }
}

/// Regression: the journal limit counted record bytes, but on NAND every synced record takes a
/// page of its own (pages are never programmed twice; on paired-page MLC the upper page after
/// it is skipped too). Synced 4 KiB writes on MLC (which has no tag commits) then went ~1,300
/// records without a checkpoint, and a mount after a cut read 18,000 pages (2 s of simulated
/// time). The limit now counts the pages flushes close, and the replay checks the rest of a
/// page from the page it read: a mount after a cut anywhere in such writes takes less than the
/// brief's 50 ms of simulated time, and finds every synced write. (On SLC the writes commit by
/// their tags, whose scan reads the tags alone: more reads, each a quarter of a page's time.)
#[test]
fn a_mount_after_synced_writes_replays_a_bounded_journal() {
    const SYNC: dffs::OpenFlags = dffs::OpenFlags {
        sync: true,
        ..dffs::OpenFlags::RW
    };
    for (name, max_reads) in [("nand-mlc-1g", 300), ("nand-slc-128m", 1000)] {
        let p = preset(name).unwrap().with_blocks(64).unwrap();
        let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let bs = fs.params().geometry.block_size() as usize;
        let ino = fs.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
        let fh = fs.open(ino, SYNC).unwrap();
        let piece = |k: usize| -> Vec<u8> { (0..4096).map(|i| (i * 7 + k * 13) as u8).collect() };
        let (mut reads, mut ms, mut mounts) = (0, 0.0f64, 0);
        let writes = (3 * bs / 4096).max(384);
        for k in 0..writes {
            fs.write(fh, (k * 4096) as u64, &piece(k)).unwrap();
            if k % 24 != 23 {
                continue;
            }
            // A cut right after this write returned: mount a copy of the device.
            let mut dev = fs.flash_mut().clone();
            dev.reset_stats();
            let mut copy = Fs::mount(dev, Config::default()).unwrap();
            reads = reads.max(copy.info().mount_cost.reads);
            ms = ms.max(copy.flash().stats().sim_us() / 1000.0);
            mounts += 1;
            let c = copy.lookup(ROOT_INO, b"log").unwrap().ino;
            assert_eq!(
                copy.stat(c).unwrap().size,
                ((k + 1) * 4096) as u64,
                "{name}"
            );
            let h = copy.open(c, dffs::OpenFlags::READ).unwrap();
            let mut got = vec![0u8; 4096];
            copy.read(h, (k * 4096) as u64, &mut got).unwrap();
            assert!(
                got == piece(k),
                "{name}: the last synced write after a cut at write {k}"
            );
        }
        eprintln!(
            "{name}: {writes} synced 4 KiB writes, {mounts} cuts, mounts of at most {reads} \
             reads and {ms:.1} ms"
        );
        assert!(ms < 50.0, "{name}: a mount after a cut took {ms:.1} ms");
        assert!(
            reads <= max_reads,
            "{name}: a mount after a cut read {reads} pages (at most {max_reads})"
        );
    }
}

/// The worst mount after a cut in synced writes, printed (DESIGN §8): on full-size SLC and MLC,
/// 24 blocks of synced writes of 4 KiB and 512 bytes to one file (a copy of the device mounted
/// after every 16th write), and 4 KiB writes on a synced mount with a file created after every
/// first, second, fourth or 16th write (a copy mounted after every 8th). Each copy must read
/// back the size synced. `cargo test --release -p dffs --test crash_regressions
/// worst_mount_after_synced_writes -- --ignored --nocapture`
#[test]
#[ignore]
fn worst_mount_after_synced_writes() {
    const SYNC: dffs::OpenFlags = dffs::OpenFlags {
        sync: true,
        ..dffs::OpenFlags::RW
    };
    let cases: [(usize, usize, usize); 6] = [
        (4096, 0, 16),
        (512, 0, 16),
        (4096, 1, 8),
        (4096, 2, 8),
        (4096, 4, 8),
        (4096, 16, 8),
    ];
    for name in ["nand-slc-128m", "nand-mlc-1g"] {
        for (piece, create_every, cut_every) in cases {
            let cfg = Config {
                sync: create_every > 0,
                ..Config::default()
            };
            let dev = SimFlash::new(preset(name).unwrap()).unwrap();
            let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
            let mut fs = Fs::mount(dev, cfg).unwrap();
            let bs = fs.params().geometry.block_size() as usize;
            let ino = fs.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
            let fh = fs.open(ino, SYNC).unwrap();
            let (mut worst_us, mut worst_reads, mut at) = (0.0f64, 0, 0);
            let mut k = 0;
            while k * piece < 24 * bs {
                let data: Vec<u8> = (0..piece).map(|i| (i + k) as u8).collect();
                fs.write(fh, (k * piece) as u64, &data).unwrap();
                k += 1;
                if create_every > 0 && k % create_every == 0 {
                    let f = format!("f{k}");
                    fs.create(ROOT_INO, f.as_bytes(), 0o644, 0, 0).unwrap();
                }
                if k % cut_every != 0 {
                    continue;
                }
                let mut copy = fs.flash_mut().clone();
                copy.reset_stats();
                let mut m = Fs::mount(copy, cfg).unwrap();
                let c = m.lookup(ROOT_INO, b"log").unwrap().ino;
                assert_eq!(m.stat(c).unwrap().size, (k * piece) as u64);
                let s = m.flash().stats();
                if s.sim_us() > worst_us {
                    (worst_us, worst_reads, at) = (s.sim_us(), s.reads, k * piece);
                }
            }
            eprintln!(
                "{name}: {piece} B writes, a create every {create_every} (0: none): worst mount \
                 {:.1} ms, {worst_reads} reads, after {} KiB",
                worst_us / 1000.0,
                at / 1024
            );
        }
    }
}

/// DESIGN §15 item 22: the last journal page a power cut tore can read uncorrectable at one
/// mount and clean at the next. A recovery that read it short (here: a transaction's commit
/// lost with it) takes the transaction's blocks as free and may erase them for its own
/// checkpoint; if power goes before that checkpoint is whole, a mount that reads the page in
/// full must not replay the commit into blocks that now hold something else. The recovery
/// writes where it ended the journal into its choice of checkpoint before it erases anything,
/// and the mounts after it read no further. Cut at every program and erase of the recovery's
/// first write, the page read in full after each cut: the transaction is either all there
/// (read back equal) or not at all, and fsck is clean.
#[test]
fn a_recovery_that_read_the_journal_short_binds_the_mounts_after_it() {
    use dffs::OpenFlags;
    let p = preset("nand-slc-128m").unwrap().with_blocks(32).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let cfg = Config::default();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let pattern = |seed: u32, n: usize| -> Vec<u8> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).rotate_left(seed) >> 13) as u8)
            .collect()
    };
    // Fill most of the device, so that the recovery has few free blocks to choose from and
    // the transaction's blocks are among them.
    let bs = fs.params().geometry.block_size() as u64;
    let free = fs.statfs().unwrap().blocks_free * fs.statfs().unwrap().block_size as u64;
    let fill = pattern(3, (free - 8 * bs) as usize);
    put_synced(&mut fs, b"a", &fill);
    fs.checkpoint().unwrap();
    let txn = pattern(5, 3 * bs as usize);
    fs.begin_transaction().unwrap();
    let b = fs.create(ROOT_INO, b"b", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(b, OpenFlags::RW).unwrap();
    assert_eq!(fs.write(fh, 0, &txn).unwrap(), txn.len());
    fs.close(fh).unwrap();
    let pages = fs.params().geometry.total_pages();
    let counts =
        |d: &SimFlash| -> Vec<u32> { (0..pages).map(|q| d.program_count(q).unwrap()).collect() };
    let before = counts(fs.flash());
    fs.commit_transaction().unwrap();
    // Power goes with the transaction committed.
    let dev = fs.into_flash();
    let after = counts(&dev);
    let read_all = |fs: &mut Fs<SimFlash>, name: &[u8], len: usize| -> dffs::Result<Vec<u8>> {
        let ino = fs.lookup(ROOT_INO, name)?.ino;
        let fh = fs.open(ino, OpenFlags::READ)?;
        let mut buf = vec![0u8; len + 1];
        let mut at = 0;
        while at < buf.len() {
            match fs.read(fh, at as u64, &mut buf[at..])? {
                0 => break,
                n => at += n,
            }
        }
        fs.close(fh)?;
        buf.truncate(at);
        Ok(buf)
    };
    // The page whose loss loses the commit: one the commit programmed.
    let commit_page = (0..pages)
        .filter(|&q| after[q as usize] != before[q as usize])
        .find(|&q| {
            let mut d = dev.clone();
            d.inject_uncorrectable(q).unwrap();
            let mut fs = Fs::mount(d, cfg).unwrap();
            fs.lookup(ROOT_INO, b"b").is_err()
        })
        .expect("no page the commit wrote holds it");
    let (mut cuts, mut present) = (0, 0);
    for n in 1.. {
        // The first mount reads the commit's page uncorrectable: the transaction is lost.
        // Cut at the n-th program or erase from the mount on (the mount writes the bound).
        let mut d = dev.clone();
        d.inject_uncorrectable(commit_page).unwrap();
        d.cut_power_after(n);
        let mut d = match Fs::mount_with_clock(d, cfg, Box::new(dffs::NoClock)) {
            Ok(mut fs) => {
                assert!(fs.lookup(ROOT_INO, b"b").is_err());
                let fits = fs
                    .create(ROOT_INO, b"c", 0o644, 0, 0)
                    .and_then(|_| fs.sync());
                match fits {
                    Ok(()) => break,
                    Err(e) => assert!(!fs.flash().is_powered(), "cut {n}: create: {e:?}"),
                }
                fs.into_flash()
            }
            Err((e, d)) => {
                assert!(!d.is_powered(), "cut {n}: first mount: {e:?}");
                d
            }
        };
        cuts += 1;
        // The next mount reads the page clean.
        d.power_up();
        d.clear_injected(commit_page);
        let mut fs = Fs::mount(d, cfg).unwrap_or_else(|e| panic!("cut {n}: mount: {e:?}"));
        assert!(
            read_all(&mut fs, b"a", fill.len()) == Ok(fill.clone()),
            "cut {n}: /a"
        );
        if fs.lookup(ROOT_INO, b"b").is_ok() {
            // Cut before the bound was written: the first mount erased nothing yet.
            present += 1;
            let got = read_all(&mut fs, b"b", txn.len());
            assert!(
                got == Ok(txn.clone()),
                "cut {n}: /b reads {:?}",
                got.map(|v| v.len())
            );
        }
        let report = fs.fsck().unwrap();
        assert!(report.is_clean(), "cut {n}: {report:?}");
    }
    // Both windows were cut: while the bound was written, and after it, in the recovery.
    assert!(
        present > 0 && cuts - present >= 5,
        "{cuts} cuts, {present} with /b"
    );
}

/// A device whose bytes `torn` (offsets into the data area, with the values they read as)
/// read as programmed the first time a read touches them and as `torn` says ever after: the
/// partly programmed bits of a record a power cut tore on NOR, which vary from read to read.
struct ReadsWholeOnce {
    dev: dffs_testkit::ram_flash::RamFlash,
    torn: Vec<(usize, u8)>,
    reads: u32,
}

impl dffs::Flash for ReadsWholeOnce {
    fn geometry(&self) -> dffs::Geometry {
        self.dev.geometry()
    }
    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<dffs::EccStatus, dffs::FlashError> {
        let status = self.dev.read(page, offset, data, oob)?;
        let start = page as usize * self.dev.geo.page_size as usize + offset as usize;
        let range = start..start + data.len();
        if self.torn.iter().any(|(i, _)| range.contains(i)) {
            self.reads += 1;
            if self.reads > 1 {
                for &(i, v) in self.torn.iter().filter(|(i, _)| range.contains(i)) {
                    data[i - start] = v;
                }
            }
        }
        Ok(status)
    }
    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), dffs::FlashError> {
        self.dev.program(page, offset, data, oob)
    }
    fn erase(&mut self, block: u32) -> Result<(), dffs::FlashError> {
        // An erase ends the instability of the block's bytes.
        let bs = self.dev.geo.block_size() as usize;
        self.torn.retain(|(i, _)| i / bs != block as usize);
        self.dev.erase(block)
    }
    fn is_bad(&mut self, block: u32) -> Result<bool, dffs::FlashError> {
        self.dev.is_bad(block)
    }
    fn mark_bad(&mut self, block: u32) -> Result<(), dffs::FlashError> {
        self.dev.mark_bad(block)
    }
}

/// Regression (`dffs torture --preset nor-qspi-16m --erase-size 4KiB --blocks 128 --workload
/// large --chain 30 --seeds 1 --seed 508`, cut 9: `mount after the cut failed: Io`): the last
/// journal record, torn by a power cut, passed its check when replay's first pass read it and
/// failed it at every read of the second pass, which must apply what the first decided. The
/// mount said `EIO`, and every mount after it. Now it loads again, reading the journal only as
/// far as the second pass could, as if the journal ended there. Each run of bytes the last
/// synced create programmed is torn in turn (its second half reads as before the program
/// after the first read): every mount succeeds, the file synced before is whole, fsck is
/// clean, and where the torn record was the create's, the create is gone, also at a mount
/// after the recovery that reads the record whole.
#[test]
fn a_torn_record_that_read_whole_once_does_not_fail_the_mount() {
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};
    let dev = Fs::format(RamFlash::new(nor_geometry(64)), &FormatOptions::default()).unwrap();
    let cfg = Config::smallest();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let a: Vec<u8> = (0..3000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    put_synced(&mut fs, b"a", &a);
    let data_len = fs.flash().data.len();
    let before = fs.flash().data.clone();
    fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    // The runs of bytes the synced mkdir's programs changed.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in (0..data_len).filter(|&i| dev.data[i] != before[i]) {
        match runs.last_mut() {
            Some(r) if r.1 == i => r.1 = i + 1,
            _ => runs.push((i, i + 1)),
        }
    }
    assert!(!runs.is_empty());
    let mut lost = 0;
    for &(s, end) in &runs {
        let half = s + (end - s) / 2;
        let torn = (half..end).map(|i| (i, before[i])).collect();
        let shaky = ReadsWholeOnce {
            dev: dev.fresh_copy(),
            torn,
            reads: 0,
        };
        let mut fs =
            Fs::mount(shaky, cfg).unwrap_or_else(|e| panic!("bytes {s}..{end} torn: mount: {e:?}"));
        assert_eq!(
            read_root_file(&mut fs, b"a"),
            a,
            "bytes {s}..{end} torn: /a"
        );
        assert!(fs.fsck().unwrap().is_clean(), "bytes {s}..{end} torn");
        if fs.lookup(ROOT_INO, b"d").is_ok() {
            continue;
        }
        lost += 1;
        // The recovery's checkpoint; then the record reads whole again: still no create.
        fs.checkpoint().unwrap();
        let mut fs = Fs::mount(fs.into_flash().dev, cfg).unwrap();
        assert_eq!(
            fs.lookup(ROOT_INO, b"d").unwrap_err(),
            dffs::Error::NotFound
        );
        assert_eq!(read_root_file(&mut fs, b"a"), a);
        assert!(fs.fsck().unwrap().is_clean());
    }
    assert!(lost > 0, "no torn run lost the mkdir: {runs:?}");
}

/// A mount after a checkpoint attempt that power cut writes its choice of checkpoint again
/// before anything else (FORMAT §12). Where that write finds no anchor block to take (here
/// every block of the anchor area fails its programs and erases, as a worn-out area does), the
/// mount failed (`dffs torture --preset nand-slc-128m --blocks 32 --workload links --chain 30
/// --seeds 1 --seed 3305 --faults standard`, cut 30: `NoSpace`) and the files were out of
/// reach. Now it comes up read-only: cut at each program and erase of a checkpoint, every
/// mount succeeds and reads the synced files back; where the mount had to write and could not,
/// `Info::read_only_cause` says why and a change is `ReadOnly`.
#[test]
fn a_mount_that_cannot_write_its_checkpoint_again_comes_up_read_only() {
    use dffs::Error;
    let p = preset("nand-slc-128m").unwrap().with_blocks(32).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let cfg = Config::default();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let a: Vec<u8> = (0..5000u32).map(|i| (i * 13 + i / 199) as u8).collect();
    put_synced(&mut fs, b"a", &a);
    fs.checkpoint().unwrap();
    put_synced(&mut fs, b"b", &[7u8; 300]);
    let base = fs.into_flash();
    let mut read_only = 0;
    for n in 1.. {
        let mut fs = Fs::mount(base.clone(), cfg).unwrap();
        fs.flash_mut().cut_power_after(n);
        match fs.checkpoint() {
            Ok(()) => break,
            Err(e) => assert_eq!(e, Error::PowerLoss, "cut {n}"),
        }
        let mut dev = fs.into_flash();
        dev.power_up();
        for b in 0..8 {
            dev.fail_block(b).unwrap();
        }
        let mut fs = Fs::mount(dev, cfg).unwrap_or_else(|e| panic!("cut {n}: mount: {e:?}"));
        assert_eq!(read_root_file(&mut fs, b"a"), a, "cut {n}");
        assert_eq!(read_root_file(&mut fs, b"b"), [7u8; 300], "cut {n}");
        if let Some(e) = fs.info().read_only_cause {
            read_only += 1;
            assert!(matches!(e, Error::NoSpace | Error::Io), "cut {n}: {e:?}");
            assert_eq!(
                fs.create(ROOT_INO, b"c", 0o644, 0, 0).unwrap_err(),
                Error::ReadOnly,
                "cut {n}"
            );
            assert!(fs.fsck().unwrap().is_clean(), "cut {n}");
        }
    }
    assert!(
        read_only > 0,
        "no cut made the mount write its checkpoint again"
    );
}
