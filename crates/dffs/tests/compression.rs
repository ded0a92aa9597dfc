//! Transparent compression end to end: compressible and incompressible data, overwrite in the
//! middle, truncate (shrink and grow), sparse files, remounts (clean and after a cut), files
//! written under different settings, garbage collection of compressed nodes, fsck, and ENOSPC
//! honesty on a small device, on NAND and NOR.

use dffs::format::compress::{DEFLATE, LZ4, NONE};
use dffs::{Config, Error, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};
use dffs_testkit::Rng;

const NAND: &str = "nand-slc-128m";
const NOR: &str = "nor-qspi-16m";

fn dev(name: &str, blocks: u32) -> SimFlash {
    let p = preset(name).unwrap().with_blocks(blocks).unwrap();
    SimFlash::new(p).unwrap()
}

fn fresh(name: &str, blocks: u32, algo: u8) -> Fs<SimFlash> {
    let opts = FormatOptions {
        compression: algo,
        ..FormatOptions::default()
    };
    let d = Fs::format(dev(name, blocks), &opts).unwrap();
    Fs::mount(d, Config::default()).unwrap()
}

fn remount(fs: Fs<SimFlash>) -> Fs<SimFlash> {
    let d = fs.unmount().unwrap();
    Fs::mount(d, Config::default()).unwrap()
}

/// Text-like bytes: compress well.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let words: [&[u8]; 8] = [
        b"erase ", b"block ", b"page ", b"spare ", b"flash ", b"node ", b"index\n", b"0x1f ",
    ];
    let mut r = Rng::new(seed);
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        v.extend_from_slice(words[(r.next_u64() % 8) as usize]);
    }
    v.truncate(n);
    v
}

/// Random bytes: do not compress.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| r.next_u64() as u8).collect()
}

fn put(fs: &mut Fs<SimFlash>, name: &str, data: &[u8]) -> u32 {
    let st = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0).unwrap();
    let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
    fs.write(fh, 0, data).unwrap();
    fs.close(fh).unwrap();
    st.ino
}

fn get(fs: &mut Fs<SimFlash>, name: &str) -> Vec<u8> {
    let st = fs.lookup(ROOT_INO, name.as_bytes()).unwrap();
    let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; st.size as usize];
    let n = fs.read(fh, 0, &mut buf).unwrap();
    assert_eq!(n as u64, st.size);
    fs.close(fh).unwrap();
    buf
}

fn used(fs: &mut Fs<SimFlash>) -> u64 {
    fs.info().used_bytes
}

fn assert_clean(fs: &mut Fs<SimFlash>) {
    let rep = fs.fsck().unwrap();
    assert!(rep.is_clean(), "fsck: {rep:?}");
}

#[test]
fn round_trip_compressible_and_incompressible() {
    for name in [NAND, NOR] {
        for algo in [LZ4, DEFLATE] {
            let mut fs = fresh(name, 128, algo);
            let t = text(300_000, 1);
            let n = noise(100_000, 2);
            let before = used(&mut fs);
            put(&mut fs, "text", &t);
            let after_text = used(&mut fs);
            put(&mut fs, "noise", &n);
            let after_noise = used(&mut fs);
            // Text takes well under its size (NOR compresses 256-byte program pages one by
            // one, so less); noise at least its size.
            let limit = if name == NOR { 8 } else { 6 };
            assert!(
                after_text - before < t.len() as u64 * limit / 10,
                "{name} {algo}: text took {}",
                after_text - before
            );
            assert!(after_noise - after_text >= n.len() as u64);
            assert_eq!(get(&mut fs, "text"), t);
            assert_eq!(get(&mut fs, "noise"), n);
            let mut fs = remount(fs);
            assert_eq!(get(&mut fs, "text"), t);
            assert_eq!(get(&mut fs, "noise"), n);
            assert_clean(&mut fs);
        }
    }
}

#[test]
fn overwrite_truncate_and_sparse() {
    for name in [NAND, NOR] {
        let mut fs = fresh(name, 128, LZ4);
        let mut model = text(50_000, 3);
        let ino = put(&mut fs, "f", &model);
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        // Overwrite in the middle, across block boundaries, with both kinds of data.
        let patch = noise(5_000, 4);
        fs.write(fh, 10_001, &patch).unwrap();
        model[10_001..15_001].copy_from_slice(&patch);
        let patch = text(777, 5);
        fs.write(fh, 30_500, &patch).unwrap();
        model[30_500..31_277].copy_from_slice(&patch);
        // Shrink into the middle of a block, then grow (the new bytes read as zeros).
        fs.truncate(fh, 20_123).unwrap();
        model.truncate(20_123);
        fs.truncate(fh, 40_000).unwrap();
        model.resize(40_000, 0);
        // A sparse write far beyond the end.
        let far = text(3_000, 6);
        fs.write(fh, 1_000_000, &far).unwrap();
        model.resize(1_000_000, 0);
        model.extend_from_slice(&far);
        fs.fsync(fh).unwrap();
        fs.close(fh).unwrap();
        assert_eq!(get(&mut fs, "f"), model, "{name}");
        let mut fs = remount(fs);
        assert_eq!(get(&mut fs, "f"), model, "{name} after remount");
        // The hole costs nothing: far less than a megabyte is used.
        assert!(used(&mut fs) < 200_000, "{name}: {}", used(&mut fs));
        assert_clean(&mut fs);
    }
}

#[test]
fn mixed_settings_read_back() {
    for name in [NAND, NOR] {
        let mut fs = fresh(name, 128, NONE);
        let a = text(40_000, 7);
        let ia = put(&mut fs, "plain", &a);
        assert_eq!(fs.compression(ia).unwrap(), NONE);
        // Per file: switch a file to deflate and rewrite half of it, then to LZ4 for another
        // part: its blocks are now raw, deflate and LZ4.
        fs.set_compression(ia, DEFLATE).unwrap();
        let mut model = a.clone();
        let fh = fs.open(ia, OpenFlags::RW).unwrap();
        let p1 = text(12_000, 8);
        fs.write(fh, 4_096, &p1).unwrap();
        model[4_096..16_096].copy_from_slice(&p1);
        fs.close(fh).unwrap();
        fs.set_compression(ia, LZ4).unwrap();
        let fh = fs.open(ia, OpenFlags::RW).unwrap();
        let p2 = text(9_000, 9);
        fs.write(fh, 24_000, &p2).unwrap();
        model[24_000..33_000].copy_from_slice(&p2);
        fs.close(fh).unwrap();
        let mut fs = remount(fs);
        let ia = fs.lookup(ROOT_INO, b"plain").unwrap().ino;
        assert_eq!(fs.compression(ia).unwrap(), LZ4);
        assert_eq!(get(&mut fs, "plain"), model);
        // A new file takes the file-system default (none here).
        let ib = put(&mut fs, "new", &a);
        assert_eq!(fs.compression(ib).unwrap(), NONE);
        assert!(fs.set_compression(ROOT_INO, LZ4).is_err());
        assert!(fs.set_compression(ib, 9).is_err());
        assert_clean(&mut fs);
        // A volume formatted with compression read back with different file settings.
        let mut fs = fresh(name, 128, DEFLATE);
        let i = put(&mut fs, "z", &a);
        assert_eq!(fs.compression(i).unwrap(), DEFLATE);
        fs.set_compression(i, NONE).unwrap();
        let mut fs = remount(fs);
        assert_eq!(get(&mut fs, "z"), a);
        assert_eq!(fs.params().compression, DEFLATE);
    }
}

#[test]
fn compressed_nodes_survive_garbage_collection() {
    for name in [NAND, NOR] {
        let mut fs = fresh(name, 48, LZ4);
        let keep = text(60_000, 10);
        put(&mut fs, "keep", &keep);
        // Churn: rewrite other files until the device has been filled several times over.
        let cap = fs.params().geometry.capacity();
        let mut written = 0u64;
        let mut k = 0u64;
        while written < cap * 3 {
            let d = if k % 3 == 0 {
                noise(20_000, k)
            } else {
                text(40_000, k)
            };
            let nm = format!("churn{}", k % 5);
            let _ = fs.unlink(ROOT_INO, nm.as_bytes());
            put(&mut fs, &nm, &d);
            written += d.len() as u64;
            k += 1;
        }
        assert!(fs.activity().gc_blocks > 0, "{name}: no GC happened");
        assert_eq!(get(&mut fs, "keep"), keep);
        let mut fs = remount(fs);
        assert_eq!(get(&mut fs, "keep"), keep);
        assert_clean(&mut fs);
    }
}

#[test]
fn synced_compressed_data_survives_a_cut() {
    for name in [NAND, NOR] {
        let mut fs = fresh(name, 64, LZ4);
        // Several small synced files: their compressed nodes share pages with the next ones.
        let mut files = Vec::new();
        for i in 0..12u64 {
            let d = text(1_500 + 700 * i as usize, 20 + i);
            let nm = format!("s{i}");
            let st = fs.create(ROOT_INO, nm.as_bytes(), 0o644, 0, 0).unwrap();
            let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
            fs.write(fh, 0, &d).unwrap();
            fs.fsync(fh).unwrap();
            fs.close(fh).unwrap();
            files.push((nm, d));
        }
        // Unsynced data after the last sync, then the power goes.
        let st = fs.create(ROOT_INO, b"late", 0o644, 0, 0).unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &text(9_000, 99)).unwrap();
        let d = fs.into_flash();
        let mut fs = Fs::mount(d, Config::default()).unwrap();
        for (nm, d) in &files {
            assert_eq!(&get(&mut fs, nm), d, "{name} {nm}");
        }
        assert_clean(&mut fs);
    }
}

#[test]
fn enospc_is_honest_on_a_small_compressed_device() {
    for name in [NAND, NOR] {
        for (algo, pattern) in [(LZ4, 0), (LZ4, 1), (DEFLATE, 0)] {
            let mut fs = fresh(name, 24, algo);
            let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
            let mut k = 0u64;
            let mut hit = false;
            while k < 10_000 {
                let d = if pattern == 0 {
                    text(16_384, k)
                } else {
                    noise(16_384, k)
                };
                let nm = format!("f{k}");
                let st = match fs.create(ROOT_INO, nm.as_bytes(), 0o644, 0, 0) {
                    Ok(s) => s,
                    Err(Error::NoSpace) => {
                        hit = true;
                        break;
                    }
                    Err(e) => panic!("{e:?}"),
                };
                let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
                let r = fs.write(fh, 0, &d);
                let r2 = fs.close(fh);
                match (r, r2) {
                    (Ok(_), Ok(())) => stored.push((nm, d)),
                    (Err(Error::NoSpace), _) | (_, Err(Error::NoSpace)) => {
                        hit = true;
                        let _ = fs.unlink(ROOT_INO, nm.as_bytes());
                        break;
                    }
                    (a, b) => panic!("{a:?} {b:?}"),
                }
                k += 1;
            }
            assert!(hit, "{name}: never full");
            // Everything accepted is there, also after a remount.
            for (nm, d) in &stored {
                assert_eq!(&get(&mut fs, nm), d);
            }
            let mut fs = remount(fs);
            for (nm, d) in &stored {
                assert_eq!(&get(&mut fs, nm), d);
            }
            assert_clean(&mut fs);
            // Compressible data fits more than the raw capacity would suggest... and deletes
            // make room again.
            let sf = fs.statfs().unwrap();
            let free_before = sf.blocks_free;
            for (nm, _) in stored.iter().take(stored.len() / 2) {
                fs.unlink(ROOT_INO, nm.as_bytes()).unwrap();
            }
            let sf = fs.statfs().unwrap();
            assert!(
                sf.blocks_free > free_before,
                "{name}: deletes freed nothing"
            );
            put(&mut fs, "again", &text(16_384, 12_345));
            assert_eq!(get(&mut fs, "again"), text(16_384, 12_345));
            assert_clean(&mut fs);
            let _ = stored;
        }
    }
}

#[test]
fn partly_overwritten_groups_survive_garbage_collection() {
    for name in [NAND, NOR] {
        let mut fs = fresh(name, 48, LZ4);
        let mut model = text(200_000, 40);
        let ino = put(&mut fs, "big", &model);
        let mut r = Rng::new(41);
        let cap = fs.params().geometry.capacity();
        let mut written = 0u64;
        let mut k = 0u64;
        // Small overwrites leave groups partly dead; churn makes GC move what is left of them.
        while written < cap * 2 {
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            for _ in 0..4 {
                let off = (r.next_u64() % (model.len() as u64 - 300)) as usize;
                let patch = if r.next_u64() % 2 == 0 {
                    text(1 + (r.next_u64() % 300) as usize, r.next_u64())
                } else {
                    noise(1 + (r.next_u64() % 300) as usize, r.next_u64())
                };
                fs.write(fh, off as u64, &patch).unwrap();
                model[off..off + patch.len()].copy_from_slice(&patch);
            }
            fs.close(fh).unwrap();
            let d = text(30_000, 1000 + k);
            let nm = format!("churn{}", k % 4);
            let _ = fs.unlink(ROOT_INO, nm.as_bytes());
            put(&mut fs, &nm, &d);
            written += d.len() as u64;
            k += 1;
        }
        assert!(fs.activity().gc_blocks > 0, "{name}: no GC happened");
        assert_eq!(get(&mut fs, "big"), model, "{name}");
        assert_clean(&mut fs);
        let mut fs = remount(fs);
        assert_eq!(get(&mut fs, "big"), model, "{name} after remount");
        assert_clean(&mut fs);
    }
}

#[test]
fn corrupt_compressed_node_is_eio_and_the_rest_stays_readable() {
    // NOR: no ECC, so flipped bits reach the node and only its CRC can tell.
    let mut fs = fresh(NOR, 64, DEFLATE);
    let victim = text(20_000, 50);
    let other = text(20_000, 51);
    put(&mut fs, "victim", &victim);
    let mut d = fs.unmount().unwrap();
    // The program pages holding the victim's compressed nodes (written first, so found first).
    let g = d.preset().geometry;
    let mut hit = None;
    for page in 0..g.total_pages() {
        let raw = d.raw_page(page).unwrap();
        if raw[..g.page_size as usize]
            .windows(3)
            .any(|w| w == [0x44, 0x46, 0x51])
        {
            hit = Some(page);
            break;
        }
    }
    let page = hit.expect("a compressed node on flash");
    d.inject_bitflips(page + 1, 4).unwrap();
    let mut fs = Fs::mount(d, Config::default()).unwrap();
    put(&mut fs, "other", &other);
    let st = fs.lookup(ROOT_INO, b"victim").unwrap();
    let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; victim.len()];
    let mut eio = false;
    let mut off = 0;
    while off < victim.len() {
        match fs.read(fh, off as u64, &mut buf[off..(off + 256).min(victim.len())]) {
            Ok(n) => {
                assert_eq!(
                    &buf[off..off + n],
                    &victim[off..off + n],
                    "wrong bytes, no error"
                );
                off += n;
            }
            Err(Error::Io) => {
                eio = true;
                off += 256;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    fs.close(fh).unwrap();
    assert!(eio, "the corrupted node was read without an error");
    assert_eq!(get(&mut fs, "other"), other);
    let rep = fs.fsck().unwrap();
    assert!(!rep.is_clean(), "fsck missed the corrupt node");
}
