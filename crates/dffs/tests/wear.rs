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
