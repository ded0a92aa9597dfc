//! A build without the `nand` feature (NOR-only firmware, which leaves out OOB tags, page
//! buffers, MLC pairing and bad-block swaps) refuses NAND devices with `NotSupported`
//! (EOPNOTSUPP) before it programs or erases anything, and still runs NOR. The NOR model test
//! (`model_nor*` in `model.rs`) runs in the same build.
//!
//! Runs only without the feature: `cargo test -p dffs --no-default-features --features std
//! --test without_nand --test model` (CI does; the default test run has the feature on).
#![cfg(not(feature = "nand"))]

use dffs::format::params::check_geometry;
use dffs::{Config, Error, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

#[test]
fn nand_devices_are_refused_before_any_program_or_erase() {
    for name in ["nand-slc-128m", "nand-mlc-1g"] {
        let pre = preset(name).unwrap().with_blocks(64).unwrap();
        assert!(check_geometry(&pre.geometry).is_err(), "{name}");
        let dev = SimFlash::new(pre).unwrap();
        let Err(e) = Fs::format(dev, &FormatOptions::default()) else {
            panic!("{name}: formatted without NAND support");
        };
        assert_eq!(e, Error::NotSupported, "{name}");
        let dev = SimFlash::new(pre).unwrap();
        let (e, dev) = match Fs::mount_with_clock(dev, Config::smallest(), Box::new(dffs::NoClock))
        {
            Err(x) => x,
            Ok(_) => panic!("{name}: mounted without NAND support"),
        };
        assert_eq!(e, Error::NotSupported, "{name}");
        let s = dev.stats();
        assert_eq!((s.programs, s.erases), (0, 0), "{name}");
    }
}

#[test]
fn nor_works_with_the_nand_paths_left_out() {
    for erase in [4096u32, 65536] {
        let pre = preset("nor-qspi-16m")
            .unwrap()
            .with_erase_size(erase)
            .unwrap();
        let pre = pre
            .with_blocks(if erase == 4096 { 256 } else { 32 })
            .unwrap();
        let d = Fs::format(SimFlash::new(pre).unwrap(), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(d, Config::smallest()).unwrap();
        let dir = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap();
        let st = fs.create(dir.ino, b"f", 0o644, 0, 0).unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        // Written twice over, so the second pass replaces the first and collection runs.
        for _ in 0..2 {
            for (i, c) in data.chunks(4096).enumerate() {
                fs.write(fh, (i * 4096) as u64, c).unwrap();
                fs.fsync(fh).unwrap();
            }
        }
        fs.close(fh).unwrap();
        let d = fs.unmount().unwrap();
        let mut fs = Fs::mount(d, Config::smallest()).unwrap();
        assert!(fs.fsck().unwrap().is_clean(), "{erase}");
        let ino = fs.lookup(dir.ino, b"f").unwrap().ino;
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut back = vec![0u8; data.len()];
        assert_eq!(fs.read(fh, 0, &mut back).unwrap(), data.len(), "{erase}");
        assert!(back == data, "{erase}: data differ after remount");
    }
}
