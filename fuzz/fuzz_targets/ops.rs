//! A valid tiny image, a list of corruptions, then a sequence of operations (creates, writes,
//! reads, truncates, renames, deletes, transactions, GC, checkpoints, clean and crash remounts),
//! then a walk and fsck. Input format: see `fuzz_ops` in
//! crates/dffs/tests/hostile_common/mod.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/dffs/tests/hostile_common/mod.rs"]
mod hostile_common;

fuzz_target!(|data: &[u8]| hostile_common::fuzz_ops(data));
