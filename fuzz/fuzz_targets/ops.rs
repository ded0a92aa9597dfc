//! A valid tiny image, a list of corruptions, then a sequence of operations (creates, writes,
//! reads, truncates, renames, deletes, transactions, GC, checkpoints, clean and crash remounts),
//! then a walk and fsck. Input format: see `fuzz_ops` in
//! crates/dffs-testkit/src/hostile.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dffs_testkit::hostile::fuzz_ops(data));
