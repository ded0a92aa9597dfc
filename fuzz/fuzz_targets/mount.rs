//! Mount of a damaged or arbitrary tiny image (NAND or NOR), then a bounded walk, fsck and a
//! write. Input format: see `device_from` in crates/dffs-testkit/src/hostile.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dffs_testkit::hostile::fuzz_mount(data));
