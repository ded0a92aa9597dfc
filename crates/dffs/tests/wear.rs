//! Wear leveling, judged by the device's own erase counters (not the file system's table):
//! half of a small NAND device holds cold files, one hot file is rewritten until many times the
//! device's capacity has been written, and every block must end near the mean erase count.
//!
//! Before static leveling counted only the free blocks the allocator hands out, the anchor
//! area's two held-back spares (erased once at format) made it believe a young free block was
//! waiting, so it never moved the cold files: on `nand-slc-128m` (`dffs bench wear`) half of
//! the blocks ended at 5-9 erases and the other half at 35.

use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

/// Blocks of the anchor area (the format's `ANCHOR_AREA`).
const AREA: usize = 8;

fn write_file(fs: &mut Fs<SimFlash>, name: &[u8], len: usize, seed: u8) {
    let ino = match fs.lookup(ROOT_INO, name) {
        Ok(a) => a.ino,
        Err(_) => fs.create(ROOT_INO, name, 0o644, 0, 0).unwrap().ino,
    };
    let fh = fs
        .open(
            ino,
            OpenFlags {
                truncate: true,
                ..OpenFlags::RW
            },
        )
        .unwrap();
    let chunk: Vec<u8> = (0..65536u32)
        .map(|i| (i as u8) ^ seed ^ (i >> 11) as u8)
        .collect();
    for off in (0..len).step_by(65536) {
        fs.write(fh, off as u64, &chunk[..65536.min(len - off)])
            .unwrap();
    }
    fs.fsync(fh).unwrap();
    fs.close(fh).unwrap();
}

/// Erase counts of every block after cold files fill half of an 8 MiB SLC NAND and a `hot`-byte
/// file is rewritten until 20 times the capacity has been written (with a checkpoint after
/// every rewrite when `checkpoints`).
fn hot_rewrite_erase_counts(hot: usize, checkpoints: bool) -> Vec<u32> {
    let p = preset("nand-slc-128m")
        .unwrap()
        .with_size_bytes(8 << 20)
        .unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    for i in 0..4u8 {
        write_file(&mut fs, &[b'c', b'0' + i], 1 << 20, i);
    }
    let rewrites = 20 * (8 << 20) / hot;
    for k in 0..rewrites {
        write_file(&mut fs, b"hot", hot, 0x80 ^ k as u8);
        if checkpoints {
            fs.checkpoint().unwrap();
        }
    }
    // The cold files are still there.
    for i in 0..4u8 {
        let ino = fs.lookup(ROOT_INO, &[b'c', b'0' + i]).unwrap().ino;
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; 65536];
        for off in (0..1 << 20).step_by(65536) {
            assert_eq!(fs.read(fh, off as u64, &mut buf).unwrap(), 65536);
            assert!(
                buf.iter()
                    .enumerate()
                    .all(|(j, &b)| b == (j as u8) ^ i ^ (j >> 11) as u8),
                "cold file {i} at {off}"
            );
        }
        fs.close(fh).unwrap();
    }
    fs.unmount().unwrap().erase_counts().to_vec()
}

#[test]
fn cold_blocks_take_their_share_of_the_erases() {
    let ec = hot_rewrite_erase_counts(256 << 10, false);
    // Outside the anchor area (whose anchors are leveled separately).
    let rest = &ec[AREA..];
    let mean = rest.iter().map(|&e| e as f64).sum::<f64>() / rest.len() as f64;
    let (min, max) = (*rest.iter().min().unwrap(), *rest.iter().max().unwrap());
    assert!(mean > 15.0, "the workload erased too little: mean {mean}");
    // Static leveling moves a cold block once the spread passes its threshold (4 erases at
    // these counts) and the allocator's next block is young enough: no block may lag or lead
    // the mean by much more than that.
    assert!(
        min as f64 >= mean - 6.0 && max as f64 <= mean + 6.0,
        "erase counts outside the anchor area spread {min}..{max} around a mean of {mean:.2}: \
         {rest:?}"
    );
}

/// Statistics of erase counts: (mean, max).
fn mean_max(ec: &[u32]) -> (f64, u32) {
    let mean = ec.iter().map(|&e| e as f64).sum::<f64>() / ec.len() as f64;
    (mean, *ec.iter().max().unwrap())
}

/// A checkpoint after every rewrite of a 128 KiB file: about 1,300 checkpoints, 40 erases of
/// each anchor if they stayed in place (32 checkpoints fill one), against a mean near 22. A
/// worn anchor gives its place to a younger free block of the anchor area when the checkpoint
/// would erase it, so the area's blocks share the checkpoints' erases.
#[test]
fn anchors_move_to_younger_blocks_of_their_area() {
    let ec = hot_rewrite_erase_counts(128 << 10, true);
    let (mean, max) = mean_max(&ec);
    let area_max = *ec[..AREA].iter().max().unwrap();
    assert!(mean > 15.0, "the workload erased too little: mean {mean}");
    assert!(
        area_max as f64 <= mean + 3.0 && max as f64 <= mean + 6.0,
        "anchor area erased up to {area_max} times, any block up to {max}, mean {mean:.2}: {ec:?}"
    );
}

/// A fresh `mib` MiB NOR partition of 4 KiB sectors, mounted in the smallest RAM
/// configuration.
fn small_config_nor(mib: u64) -> Fs<SimFlash> {
    let p = preset("nor-qspi-16m")
        .unwrap()
        .with_erase_size(4096)
        .unwrap()
        .with_size_bytes(mib << 20)
        .unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    Fs::mount(dev, Config::smallest()).unwrap()
}

/// `rounds` rounds of a workload of many checkpoints and little data on `fs`: a file of 100
/// bytes created in one of ten directories, synced, and (once forty are there) an older one
/// removed; `each` runs after every round with its number.
fn metadata_churn(
    fs: &mut Fs<SimFlash>,
    rounds: usize,
    mut each: impl FnMut(&Fs<SimFlash>, usize),
) {
    let dirs: Vec<_> = (0..10)
        .map(|d| {
            let name = format!("d{d}");
            fs.mkdir(ROOT_INO, name.as_bytes(), 0o755, 0, 0)
                .unwrap()
                .ino
        })
        .collect();
    let mut x = 12345u64;
    let mut live = Vec::new();
    for i in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let dir = dirs[(x % 10) as usize];
        let name = format!("f{i}");
        let ino = fs.create(dir, name.as_bytes(), 0o644, 0, 0).unwrap().ino;
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &[i as u8; 100]).unwrap();
        fs.fsync(fh).unwrap();
        fs.close(fh).unwrap();
        live.push((dir, name));
        if live.len() > 40 {
            let (dir, name) = live.remove((x as usize / 16) % live.len());
            fs.unlink(dir, name.as_bytes()).unwrap();
        }
        each(fs, i);
    }
}

/// Erase counts of every block of a `mib` MiB NOR partition of 4 KiB sectors (the smallest RAM
/// configuration) after `ops` rounds of [`metadata_churn`], and whether the anchors ended
/// outside the anchor area.
fn metadata_churn_erase_counts(mib: u64, ops: usize) -> (Vec<u32>, bool) {
    let mut fs = small_config_nor(mib);
    metadata_churn(&mut fs, ops, |_, _| {});
    let outside = fs.params().anchors.iter().all(|&a| a as usize >= AREA);
    let dev = fs.unmount().unwrap();
    // Whatever moved, a remount finds it.
    let fs = Fs::mount(dev, Config::smallest()).unwrap();
    (fs.flash().erase_counts().to_vec(), outside)
}

/// A checkpoint leaves at most half of the erase counts RAM may keep apart (those of
/// block-table pages it does not cache) before one is called for. On 16 MiB of 4 KiB NOR
/// sectors in the smallest configuration (one page of 50 cached), checkpoints carried more than
/// that in delta nodes, so the backlog stayed above the level that calls for a checkpoint, and
/// [`metadata_churn`] cost ever more: the device erased 3,242, 2,943, 3,009, 7,062 and 7,991
/// blocks in its five windows of 2,000 rounds, 4.4 per round by round 18,000 (mean erase count
/// 23 there, against 6.3 now). The erases of the last window must be no more than a quarter
/// above those of the first.
#[test]
fn checkpoints_leave_room_before_the_next() {
    let mut fs = small_config_nor(16);
    let mut at = vec![0];
    metadata_churn(&mut fs, 10_000, |fs, i| {
        if (i + 1) % 2_000 == 0 {
            at.push(fs.flash().stats().erases);
        }
    });
    let windows: Vec<u64> = at.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("metadata churn on 16 MiB: erases per 2,000 rounds {windows:?}");
    let (first, last) = (windows[0], windows[windows.len() - 1]);
    assert!(
        last * 4 <= first * 5,
        "erases: {first} in the first 2,000 rounds, {last} in the last"
    );
}

/// Many checkpoints and little data wear the anchor area faster than the device: on 4 KiB NOR
/// sectors a checkpoint's two copies take half of an anchor sector, so every second checkpoint
/// erased one of the area's 8 blocks. After 20,000 rounds of creating, syncing and removing
/// small files the area's blocks had 585 erases each against a mean of 87 (6.7 times; 2,000
/// rounds of the same on 16 MiB, 24 times). The anchors now leave an area worn more than
/// static leveling's threshold above the mean and move over the whole device, both at once,
/// each time the one a checkpoint would erase is worn so: every block ends near the mean, the
/// two home blocks the area keeps (written once per move) included.
///
/// Other sizes and lengths: `DFFS_CHURN_MIB=16 DFFS_CHURN_ROUNDS=200000 cargo test --release
/// -p dffs --test wear anchors_leave -- --nocapture` (the bound on the most worn block holds
/// on 1 MiB only: on larger devices the home pair wears faster than the mean, DESIGN §15
/// item 3).
#[test]
fn anchors_leave_an_area_that_wears_faster_than_the_device() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let mib = env("DFFS_CHURN_MIB", 1);
    let rounds = env("DFFS_CHURN_ROUNDS", 20_000) as usize;
    let (ec, outside) = metadata_churn_erase_counts(mib, rounds);
    let (mean, max) = mean_max(&ec);
    let area_max = *ec[..AREA].iter().max().unwrap();
    eprintln!(
        "metadata churn, {rounds} rounds, {mib} MiB of 4 KiB NOR sectors: mean {mean:.2}, max \
         {max} ({:.2}), anchor area {:?}",
        max as f64 / mean,
        &ec[..AREA]
    );
    assert!(outside, "the anchors stayed in the area");
    if mib == 1 {
        assert!(mean > 50.0, "the workload erased too little: mean {mean}");
        assert!(
            max as f64 <= mean * 1.35,
            "a block erased {max} times (the area up to {area_max}), mean {mean:.2}"
        );
    }
}
