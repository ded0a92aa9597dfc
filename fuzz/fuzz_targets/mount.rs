//! Mount of a damaged or arbitrary tiny image (NAND or NOR), then a bounded walk, fsck and a
//! write. Input format: see `device_from` in crates/dffs/tests/hostile_common/mod.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/dffs/tests/hostile_common/mod.rs"]
mod hostile_common;

fuzz_target!(|data: &[u8]| hostile_common::fuzz_mount(data));
