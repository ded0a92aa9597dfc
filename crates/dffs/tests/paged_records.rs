//! Block-table records paged from flash (`Config::records_ram`, DESIGN §12.1) against the same
//! workload with every record in RAM: the two must agree on what a file system holds and on
//! its space figures after every step, through remounts and power cuts. Paging is forced on
//! small devices here (`records_ram: 0`), with a cache of four block-table pages, so that
//! records leave RAM and are read back again and again. (A build without the
//! `paged-records` feature never pages: nothing to compare.)
#![cfg(feature = "paged-records")]

use dffs::{Config, FormatOptions, Fs, Ino, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, Preset, Rng, SimFlash};

fn paged() -> Config {
    Config {
        records_ram: 0,
        ..Config::smallest()
    }
}

fn in_ram() -> Config {
    Config {
        records_ram: usize::MAX,
        ..Config::smallest()
    }
}

/// `blocks` blocks of preset `name` (erased in `erase` bytes on NOR), formatted.
fn device(name: &str, erase: Option<u32>, blocks: u32) -> SimFlash {
    let mut p: Preset = preset(name).unwrap();
    if let Some(e) = erase {
        p = p.with_erase_size(e).unwrap();
    }
    let p = p.with_blocks(blocks).unwrap();
    Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap()
}

/// What the two file systems are compared on: free space (data blocks), and every file's
/// content (checked against its model).
fn state(fs: &mut Fs<SimFlash>, files: &[(Ino, Vec<u8>)]) -> (u64, Vec<Vec<u8>>) {
    let st = fs.statfs().unwrap();
    let mut contents = Vec::new();
    for (ino, model) in files {
        let fh = fs.open(*ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; model.len()];
        let n = fs.read(fh, 0, &mut buf).unwrap();
        fs.close(fh).unwrap();
        assert_eq!(n, model.len());
        assert!(buf == *model, "file {ino} differs from its model");
        contents.push(buf);
    }
    (st.blocks_free, contents)
}

/// Runs the same synced random writes over six files on both file systems, remounting both
/// every 97 rounds (fsck clean and no block credited with more than it holds after each), and
/// compares them every 31 rounds.
fn compare(name: &str, erase: Option<u32>, blocks: u32, rounds: u32, seed: u64) {
    let mut fss = vec![
        Fs::mount(device(name, erase, blocks), paged()).unwrap(),
        Fs::mount(device(name, erase, blocks), in_ram()).unwrap(),
    ];
    let bs = fss[0].statfs().unwrap().block_size as u64;
    let room = fss[0].statfs().unwrap().blocks_free * bs;
    let nfiles = 6;
    let len = (room * 5 / 10 / nfiles / 4096 * 4096).max(4096) as usize;
    let mut models: Vec<(Ino, Vec<u8>)> = Vec::new();
    for k in 0..nfiles {
        let mut ino = 0;
        for fs in fss.iter_mut() {
            ino = fs
                .create(ROOT_INO, format!("f{k}").as_bytes(), 0o644, 0, 0)
                .unwrap()
                .ino;
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + k as usize) as u8).collect();
            fs.write(fh, 0, &data).unwrap();
            fs.fsync(fh).unwrap();
            fs.close(fh).unwrap();
        }
        models.push((ino, (0..len).map(|i| (i * 7 + k as usize) as u8).collect()));
    }
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        let (f, at, n) = (
            rng.below(nfiles) as usize,
            rng.below(len as u64 / 256) * 256,
            [256u64, 4096, 16384][rng.below(3) as usize],
        );
        let n = n.min(len as u64 - at) as usize;
        let byte = (round % 251) as u8;
        models[f].1[at as usize..at as usize + n].fill(byte);
        for fs in fss.iter_mut() {
            let fh = fs.open(models[f].0, OpenFlags::RW).unwrap();
            fs.write(fh, at, &vec![byte; n])
                .unwrap_or_else(|e| panic!("{name}: round {round}: {e:?}"));
            fs.fsync(fh).unwrap();
            fs.close(fh).unwrap();
        }
        if round % 97 == 96 {
            fss = std::mem::take(&mut fss)
                .into_iter()
                .zip([paged(), in_ram()])
                .map(|(fs, cfg)| Fs::mount(fs.unmount().unwrap(), cfg).unwrap())
                .collect();
            for fs in fss.iter_mut() {
                // Every block's live bytes are what the tree references (a recount).
                let r = fs.fsck().unwrap();
                assert!(r.errors.is_empty(), "{name}: fsck: {:?}", r.errors);
                assert_eq!(r.over_credited, 0, "{name}: {:?}", r.warnings);
            }
        }
        if round % 31 == 0 || round + 1 == rounds {
            let a = state(&mut fss[0], &models);
            let b = state(&mut fss[1], &models);
            // (Not equal: the paged table's checkpoints come at other times, its changed
            // records kept apart counting towards them, and the heads' blocks differ.)
            let (lo, hi) = (a.0.min(b.0), a.0.max(b.0));
            assert!(
                hi - lo <= hi / 50 + 8,
                "{name}: free space {} paged, {} in RAM, after round {round}",
                a.0,
                b.0
            );
        }
    }
    for fs in fss.iter_mut() {
        let r = fs.fsck().unwrap();
        assert!(r.errors.is_empty(), "{name}: fsck: {:?}", r.errors);
    }
    assert!(fss[0].records_paged(), "{name}: the records were not paged");
    assert!(!fss[1].records_paged(), "{name}: the records were paged");
}

#[test]
fn paged_records_agree_with_records_in_ram_on_nor_4k_sectors() {
    compare("nor-qspi-16m", Some(4096), 1024, 600, 1);
}

#[test]
fn paged_records_agree_with_records_in_ram_on_slc_nand() {
    compare("nand-slc-128m", None, 256, 600, 2);
}
