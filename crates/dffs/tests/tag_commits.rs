//! Synced writes committed by their data pages' OOB tags (FORMAT.md §8.7): on NAND a synced
//! append or overwrite of consecutive blocks needs no journal page, what it wrote is there after
//! a power cut at any program, and anything the tags cannot express still goes through the
//! journal.

use dffs::{Cause, Config, Error, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

const SYNC: OpenFlags = OpenFlags {
    sync: true,
    ..OpenFlags::RW
};

fn device(name: &str, blocks: u32) -> SimFlash {
    let dev = SimFlash::new(preset(name).unwrap().with_blocks(blocks).unwrap()).unwrap();
    Fs::format(dev, &FormatOptions::default()).unwrap()
}

/// Byte `i` of the test pattern of write `k`.
fn pattern(k: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(k as u32 * 7) as u8)
        .collect()
}

fn read_all(fs: &mut Fs<SimFlash>, name: &[u8]) -> Vec<u8> {
    let ino = fs.lookup(ROOT_INO, name).unwrap().ino;
    let size = fs.stat(ino).unwrap().size as usize;
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut out = vec![0u8; size];
    let n = fs.read(fh, 0, &mut out).unwrap();
    assert_eq!(n, size);
    fs.close(fh).unwrap();
    out
}

#[test]
fn synced_appends_cost_their_data_pages_only() {
    let mut fs = Fs::mount(device("nand-slc-128m", 64), Config::default()).unwrap();
    let page = fs.params().geometry.page_size as usize;
    let ino = fs.create(ROOT_INO, b"log", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, SYNC).unwrap();
    // The first write carries the file's creation through the journal.
    fs.write(fh, 0, &pattern(0, 1000)).unwrap();
    let mut expect = pattern(0, 1000);
    let before = fs.op_counts();
    let n = 60;
    for k in 1..=n {
        // 2 KiB appends: each spans the page the last one ended in and the next.
        let piece = pattern(k, page);
        fs.write(fh, expect.len() as u64, &piece).unwrap();
        expect.extend_from_slice(&piece);
    }
    let w = fs.op_counts().since(&before);
    let data = w.by_cause.programs[Cause::Data as usize];
    let journal = w.by_cause.programs[Cause::Journal as usize];
    // Two pages per append (the partial page rewritten and the new one) and, at most, a
    // journal page when the data head moves to a block recovery does not scan yet.
    assert_eq!(data, 2 * n as u64, "{w:?}");
    assert!(
        journal <= 2,
        "journal programs {journal} for {n} synced appends: {w:?}"
    );
    // Power cut right after the last write returned: all of it is there.
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert!(
        fs.info().tag_commits as usize >= n - 2,
        "{:?}",
        fs.info().tag_commits
    );
    assert_eq!(read_all(&mut fs, b"log"), expect);
    let r = fs.fsck().unwrap();
    assert!(r.is_clean(), "{r:?}");
}

#[test]
fn synced_overwrites_in_place_keep_the_size_and_survive_a_cut() {
    let mut fs = Fs::mount(device("nand-slc-128m", 64), Config::default()).unwrap();
    let page = fs.params().geometry.page_size as usize;
    let ino = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let mut expect = pattern(0, 10 * page + 300);
    fs.write(fh, 0, &expect).unwrap();
    fs.close(fh).unwrap();
    fs.sync().unwrap();
    let fh = fs.open(ino, SYNC).unwrap();
    let before = fs.op_counts();
    for k in 1..=8usize {
        let off = (k * 3 % 9) * page + 100;
        let piece = pattern(k, page + 50);
        fs.write(fh, off as u64, &piece).unwrap();
        expect[off..off + piece.len()].copy_from_slice(&piece);
    }
    let w = fs.op_counts().since(&before);
    assert!(w.by_cause.programs[Cause::Journal as usize] <= 1, "{w:?}");
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(read_all(&mut fs, b"f"), expect);
    let r = fs.fsck().unwrap();
    assert!(r.is_clean(), "{r:?}");
}

#[test]
fn fdatasync_commits_by_tags_and_fsync_through_the_journal() {
    let mut fs = Fs::mount(device("nand-slc-128m", 64), Config::default()).unwrap();
    let page = fs.params().geometry.page_size as usize;
    let ino = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    fs.write(fh, 0, &pattern(0, page)).unwrap();
    fs.fsync(fh).unwrap();
    let mut expect = pattern(0, page);
    let mut journal = |fs: &mut Fs<SimFlash>, k: usize, data: bool| {
        let before = fs.op_counts();
        let piece = pattern(k, page);
        fs.write(fh, expect.len() as u64, &piece).unwrap();
        expect.extend_from_slice(&piece);
        if data {
            fs.fdatasync(fh).unwrap();
        } else {
            fs.fsync(fh).unwrap();
        }
        fs.op_counts().since(&before).by_cause.programs[Cause::Journal as usize]
    };
    let by_data: u64 = (1..=10).map(|k| journal(&mut fs, k, true)).sum();
    let by_fsync: u64 = (11..=20).map(|k| journal(&mut fs, k, false)).sum();
    assert!(
        by_data <= 1,
        "fdatasync: {by_data} journal programs for 10 appends"
    );
    assert_eq!(by_fsync, 10, "fsync: one journal page per append");
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(read_all(&mut fs, b"f"), expect);
}

#[test]
fn what_tags_cannot_say_goes_through_the_journal() {
    let mut fs = Fs::mount(device("nand-slc-128m", 64), Config::default()).unwrap();
    let page = fs.params().geometry.page_size as usize;
    let ino = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, SYNC).unwrap();
    fs.write(fh, 0, &pattern(0, 4 * page)).unwrap();
    // A write that leaves a hole before it and ends past the file's end in a later block: the
    // size is in the last page, fine; then a truncate (the tags carry no truncation).
    fs.write(fh, 6 * page as u64, &pattern(1, 100)).unwrap();
    let before = fs.op_counts();
    fs.setattr(
        ino,
        dffs::SetAttr {
            size: Some(page as u64 + 7),
            ..Default::default()
        },
    )
    .unwrap();
    fs.fsync(fh).unwrap();
    let w = fs.op_counts().since(&before);
    assert!(w.by_cause.programs[Cause::Journal as usize] >= 1, "{w:?}");
    let mut expect = pattern(0, 4 * page);
    expect.truncate(page + 7);
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(read_all(&mut fs, b"f"), expect);
}

/// Cuts the power at every program and erase of a run of synced appends (from a device with a
/// checkpoint and a file on it): after each cut the file holds every write that returned and
/// at most the one in flight, fsck is clean, and the file system takes more writes.
#[test]
fn a_cut_at_any_program_of_synced_appends_loses_nothing_synced() {
    let mut fs = Fs::mount(device("nand-slc-128m", 24), Config::smallest()).unwrap();
    let page = fs.params().geometry.page_size as usize;
    let ino = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    fs.write(fh, 0, &pattern(0, 700)).unwrap();
    fs.close(fh).unwrap();
    let base = fs.unmount().unwrap();
    let sizes = [page, 300, page + 900, 2 * page, 17, page];
    let pieces: Vec<Vec<u8>> = (0..40)
        .map(|k| pattern(k + 1, sizes[k % sizes.len()]))
        .collect();
    // How many device operations the whole run takes, uncut.
    let total = {
        let mut fs = Fs::mount(base.clone(), Config::smallest()).unwrap();
        let before = fs.flash().stats();
        let fh = fs.open(ino, SYNC).unwrap();
        for p in &pieces {
            let size = fs.stat(ino).unwrap().size;
            fs.write(fh, size, p).unwrap();
        }
        let s = fs.flash().stats().since(&before);
        s.programs + s.erases
    };
    assert!(total > 40, "{total}");
    let mut states = vec![pattern(0, 700)];
    for p in &pieces {
        let mut next = states.last().unwrap().clone();
        next.extend_from_slice(p);
        states.push(next);
    }
    let mut recovered = 0;
    for cut in 1..=total {
        let mut dev = base.clone();
        dev.cut_power_after(0);
        let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
        fs.flash_mut().cut_power_after(cut);
        let mut done = 0;
        let fh = fs.open(ino, SYNC).unwrap();
        for p in &pieces {
            let size = fs.stat(ino).unwrap().size;
            match fs.write(fh, size, p) {
                Ok(_) => done += 1,
                Err(Error::PowerLoss) => break,
                Err(e) => panic!("cut {cut}: write {done}: {e:?}"),
            }
        }
        let mut dev = fs.into_flash();
        dev.power_up();
        dev.cut_power_after(0);
        let mut fs = Fs::mount(dev, Config::smallest())
            .unwrap_or_else(|e| panic!("cut {cut}: mount: {e:?}"));
        let info = fs.info();
        assert_eq!(info.lost_commits, 0, "cut {cut}");
        recovered += info.tag_commits;
        let got = read_all(&mut fs, b"a");
        assert!(
            got == states[done] || (done < pieces.len() && got == states[done + 1]),
            "cut {cut}: {done} writes returned, file has {} bytes (want {} or {})",
            got.len(),
            states[done].len(),
            states.get(done + 1).map_or(0, |s| s.len())
        );
        let report = fs.fsck().unwrap();
        assert!(report.is_clean(), "cut {cut}: {report:?}");
        // And it goes on.
        let fh = fs.open(ino, SYNC).unwrap();
        let size = fs.stat(ino).unwrap().size;
        fs.write(fh, size, b"more").unwrap();
        fs.close(fh).unwrap();
        let dev = fs.into_flash();
        let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
        let mut want = got.clone();
        want.extend_from_slice(b"more");
        assert_eq!(
            read_all(&mut fs, b"a"),
            want,
            "cut {cut}: after the recovery"
        );
    }
    // The recoveries found the writes in the data pages' tags (not only in the journal).
    assert!(
        recovered as u64 > total / 2,
        "{recovered} writes recovered from tags"
    );
}

/// A 64-block SLC device mounted with `cfg` holding one file, `first`, whose synced writes
/// filled exactly one flash block (the user-data head's block is full); with the bytes of a
/// flash block and of a 4 KiB write (two pages).
fn one_full_block_synced(cfg: Config) -> (Fs<SimFlash>, usize, usize) {
    let mut fs = Fs::mount(device("nand-slc-128m", 64), cfg).unwrap();
    let g = fs.params().geometry;
    let block = (g.page_size * g.pages_per_block) as usize;
    let piece = 2 * g.page_size as usize;
    let ino = fs.create(ROOT_INO, b"first", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, SYNC).unwrap();
    fs.write(fh, 0, &pattern(99, block)).unwrap();
    fs.close(fh).unwrap();
    (fs, block, piece)
}

/// Postmark on a `--sync` mount, in small: each file is created (a journal page of its own, as
/// every operation is synced) and written with synced 4 KiB writes that fill exactly one flash
/// block, so every file's first write starts a block. The create's journal page names the block
/// the user-data head opens next, so the first write commits by its tags there like the rest:
/// one journal page per file, not two (the create's, then `JCommit` and `JDataBlock` for the
/// first write, as before). A `truncate` at open of a new file truncates nothing and keeps
/// its writes from committing by tags no longer. Everything is there after a power cut.
#[test]
fn a_new_files_first_synced_write_commits_by_tags_in_a_block_named_ahead() {
    let cfg = Config {
        sync: true,
        ..Config::default()
    };
    let (mut fs, block, piece) = one_full_block_synced(cfg);
    let g = fs.params().geometry;
    // The user-data head's block is one a checkpoint recorded.
    fs.checkpoint().unwrap();
    let files = 6;
    let before = fs.op_counts();
    for k in 0..files {
        let name = format!("f{k}");
        let ino = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        let fh = fs
            .open(
                ino,
                OpenFlags {
                    truncate: true,
                    ..SYNC
                },
            )
            .unwrap();
        let data = pattern(k, block);
        for off in (0..block).step_by(piece) {
            fs.write(fh, off as u64, &data[off..off + piece]).unwrap();
        }
        fs.close(fh).unwrap();
    }
    let w = fs.op_counts().since(&before);
    let journal = w.by_cause.programs[Cause::Journal as usize];
    let data = w.by_cause.programs[Cause::Data as usize];
    assert_eq!(data, (files * g.pages_per_block as usize) as u64, "{w:?}");
    assert!(
        journal <= files as u64 + 1,
        "{journal} journal programs for {files} created files: {w:?}"
    );
    // Power cut after the last write returned: every file is whole.
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    assert_eq!(fs.info().lost_commits, 0);
    assert!(fs.info().tag_commits as usize >= files * (block / piece) - 2);
    for k in 0..files {
        assert_eq!(
            read_all(&mut fs, format!("f{k}").as_bytes()),
            pattern(k, block)
        );
    }
    let r = fs.fsck().unwrap();
    assert!(r.is_clean(), "{r:?}");
}

/// The workload above cut at every program and erase: every file holds what its writes that
/// returned wrote (the one in flight may be there or not), files whose create returned
/// exist, no commit is lost, fsck is clean, and the file system takes more writes.
#[test]
fn a_cut_at_any_program_of_synced_files_in_blocks_named_ahead_loses_nothing_synced() {
    let cfg = Config {
        sync: true,
        ..Config::smallest()
    };
    let (fs, block, piece) = one_full_block_synced(cfg);
    let g = fs.params().geometry;
    let base = fs.unmount().unwrap();
    let files = 3usize;
    // One pass of the workload (the caller sets the power cut). Returns, per file, the bytes
    // its returned writes wrote (`None`: its create did not return).
    let run = |fs: &mut Fs<SimFlash>| -> Vec<Option<usize>> {
        let mut done = vec![None; files];
        for (k, d) in done.iter_mut().enumerate() {
            let ino = match fs.create(ROOT_INO, format!("f{k}").as_bytes(), 0o644, 0, 0) {
                Ok(e) => e.ino,
                Err(Error::PowerLoss) => return done,
                Err(e) => panic!("create f{k}: {e:?}"),
            };
            *d = Some(0);
            let fh = match fs.open(ino, SYNC) {
                Ok(fh) => fh,
                Err(Error::PowerLoss) => return done,
                Err(e) => panic!("open f{k}: {e:?}"),
            };
            let data = pattern(k, block);
            for off in (0..data.len()).step_by(piece) {
                match fs.write(fh, off as u64, &data[off..off + piece]) {
                    Ok(_) => *d = Some(off + piece),
                    Err(Error::PowerLoss) => return done,
                    Err(e) => panic!("write f{k} at {off}: {e:?}"),
                }
            }
        }
        done
    };
    let total = {
        let mut fs = Fs::mount(base.clone(), cfg).unwrap();
        let before = fs.flash().stats();
        let ops = fs.op_counts();
        run(&mut fs);
        let w = fs.op_counts().since(&ops);
        // Each create's journal page names the block the next file's writes go to, but the
        // session's first (no synced write has committed by tags in it yet).
        let journal = w.by_cause.programs[Cause::Journal as usize];
        assert!(
            journal <= files as u64 + 2,
            "{journal} journal programs: {w:?}"
        );
        let s = fs.flash().stats().since(&before);
        s.programs + s.erases
    };
    assert!(
        total > (files * g.pages_per_block as usize) as u64,
        "{total}"
    );
    for cut in 1..=total {
        let mut dev = base.clone();
        dev.cut_power_after(0);
        let mut fs = Fs::mount(dev, cfg).unwrap();
        fs.flash_mut().cut_power_after(cut);
        let done = run(&mut fs);
        let mut dev = fs.into_flash();
        dev.power_up();
        dev.cut_power_after(0);
        let mut fs = Fs::mount(dev, cfg).unwrap_or_else(|e| panic!("cut {cut}: mount: {e:?}"));
        assert_eq!(fs.info().lost_commits, 0, "cut {cut}");
        for (k, d) in done.iter().enumerate() {
            let name = format!("f{k}");
            let Some(n) = *d else {
                // Not created before the cut, or created with the cut in its own program.
                continue;
            };
            let got = read_all(&mut fs, name.as_bytes());
            let data = pattern(k, block);
            let ok = got == data[..n] || (n < data.len() && got == data[..n + piece]);
            assert!(ok, "cut {cut}: f{k} has {} bytes, {n} synced", got.len());
        }
        let report = fs.fsck().unwrap();
        assert!(report.is_clean(), "cut {cut}: {report:?}");
        let ino = fs.create(ROOT_INO, b"after", 0o644, 0, 0).unwrap().ino;
        let fh = fs.open(ino, SYNC).unwrap();
        fs.write(fh, 0, b"more").unwrap();
        fs.close(fh).unwrap();
        let dev = fs.into_flash();
        let mut fs = Fs::mount(dev, cfg).unwrap();
        assert_eq!(read_all(&mut fs, b"after"), b"more", "cut {cut}");
    }
}
