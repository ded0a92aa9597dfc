//! A build without the `compression` feature (firmware that leaves out LZ4 and deflate) says
//! so instead of silently storing data uncompressed: formatting with a compression and setting
//! one on a file are `NotSupported` (EOPNOTSUPP), and files written without compression work.
//!
//! Runs only without the feature: `cargo test -p dffs --no-default-features --features std
//! --test without_compression` (CI does; the default test run has the feature on).
#![cfg(not(feature = "compression"))]

use dffs::format::compress::{supported, DEFLATE, LZ4, NONE};
use dffs::{Config, Error, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn dev() -> SimFlash {
    SimFlash::new(preset("nor-qspi-16m").unwrap().with_blocks(32).unwrap()).unwrap()
}

#[test]
fn compression_is_refused_and_plain_files_work() {
    assert!(supported(NONE) && !supported(LZ4) && !supported(DEFLATE));
    for algo in [LZ4, DEFLATE] {
        let opts = FormatOptions {
            compression: algo,
            ..FormatOptions::default()
        };
        assert_eq!(Fs::format(dev(), &opts).err(), Some(Error::NotSupported));
    }
    let d = Fs::format(dev(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(d, Config::smallest()).unwrap();
    let st = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    assert_eq!(fs.set_compression(st.ino, LZ4), Err(Error::NotSupported));
    assert_eq!(
        fs.set_compression(st.ino, DEFLATE),
        Err(Error::NotSupported)
    );
    fs.set_compression(st.ino, NONE).unwrap();
    let data: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
    let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
    fs.write(fh, 0, &data).unwrap();
    fs.close(fh).unwrap();
    let d = fs.unmount().unwrap();
    let mut fs = Fs::mount(d, Config::smallest()).unwrap();
    let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
    let mut back = vec![0u8; data.len()];
    assert_eq!(fs.read(fh, 0, &mut back).unwrap(), data.len());
    assert_eq!(back, data);
}
