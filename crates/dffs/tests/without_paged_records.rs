//! A build without the `paged-records` feature (firmware for a chip of a few thousand blocks,
//! which leaves the paging code out) keeps every block-table record in RAM whatever
//! `Config::records_ram` says, and images a paging build wrote mount and read the same.
//!
//! Runs only without the feature: `cargo test -p dffs --no-default-features --features std
//! --test without_paged_records` (CI does; the default test run has the feature on, and
//! `paged_records.rs` there checks paging against records in RAM).
#![cfg(not(feature = "paged-records"))]

use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

#[test]
fn records_stay_in_ram_when_records_ram_would_page_them() {
    // 1 MiB of 4 KiB sectors: 256 records of 19 bits (608 B), above a `records_ram` of 0.
    let pre = preset("nor-qspi-16m")
        .unwrap()
        .with_erase_size(4096)
        .unwrap()
        .with_blocks(256)
        .unwrap();
    let cfg = Config {
        records_ram: 0,
        ..Config::smallest()
    };
    let in_ram = Config {
        records_ram: usize::MAX,
        ..Config::smallest()
    };
    let d = Fs::format(SimFlash::new(pre).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(d, cfg).unwrap();
    assert!(!fs.records_paged(), "paged without the feature");
    let data: Vec<u8> = (0..120_000u32).map(|i| (i * 13 + i / 509) as u8).collect();
    let mut inos = Vec::new();
    for k in 0..4u8 {
        let st = fs.create(ROOT_INO, &[b'f', b'0' + k], 0o644, 0, 0).unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        // Written twice over, so that collection runs and records change on every page.
        for _ in 0..2 {
            for (i, c) in data.chunks(4096).enumerate() {
                fs.write(fh, (i * 4096) as u64, c).unwrap();
                fs.fsync(fh).unwrap();
            }
        }
        fs.close(fh).unwrap();
        inos.push(st.ino);
    }
    let free_zero = fs.statfs().unwrap().blocks_free;
    let d = fs.unmount().unwrap();
    // The same RAM as a configuration that never asks for paging: every record is in it.
    let mut fs = Fs::mount(d, in_ram).unwrap();
    assert!(!fs.records_paged());
    assert_eq!(fs.statfs().unwrap().blocks_free, free_zero);
    let ram_in = fs.ram_bytes();
    let d = fs.unmount().unwrap();
    let mut fs = Fs::mount(d, cfg).unwrap();
    assert_eq!(
        fs.ram_bytes(),
        ram_in,
        "RAM after mount with records_ram 0 and unbounded"
    );
    for ino in inos {
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut back = vec![0; data.len()];
        assert_eq!(fs.read(fh, 0, &mut back).unwrap(), data.len());
        assert!(back == data, "file {ino} read back differs");
        fs.close(fh).unwrap();
    }
    let report = fs.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
}
