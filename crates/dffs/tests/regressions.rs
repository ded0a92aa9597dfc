//! Reproductions of library bugs found from the front ends (CLI, bench), kept next to the
//! library they test. A reproduction of a bug that is not fixed yet is ignored with the bug in
//! its reason (run those with `cargo test -p dffs --test regressions -- --ignored`). They call
//! the library directly, on a simulated device, to stay minimal. Bugs that show only through a
//! front end stay with it: `dffs-cli/tests/corrupt.rs` (`cat` of a destroyed inode) and
//! `dffs-bench/tests/dffs_bugs.rs` (through the bench's file-system driver).

use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset, SimFlash};

/// Creates `n` files of 150 bytes in one directory; returns the device programs, erases and
/// page reads the last 1000 creates cost.
fn create_in_one_dir(cfg: Config, n: u32) -> (u64, u64, u64) {
    let p = preset::preset("nand-slc-128m")
        .unwrap()
        .with_size_bytes(32 << 20)
        .unwrap();
    let sim = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(sim, cfg).unwrap();
    let dir = fs.mkdir(ROOT_INO, b"flat", 0o755, 0, 0).unwrap().ino;
    let data = [0x5a; 150];
    let mut mark = fs.flash().stats();
    for i in 0..n {
        if i == n - 1000 {
            mark = fs.flash().stats();
        }
        let st = fs
            .create(dir, format!("f{i:06}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &data).unwrap();
        fs.close(fh).unwrap();
    }
    let d = fs.flash().stats().since(&mark);
    (d.programs, d.erases, d.reads)
}

/// Found by `dffs pack` of a tree with 10,000 files in one directory: 161 s of simulated time
/// for 1.5 MB of data, and a mean erase count of 24 on a 32 MiB partition. Up to ~3,000 files
/// a create costs about 1.5 page programs and no reads; from ~4,000 files on (with
/// `Config::default()`; from ~20,000 with `Config::fast()`) each create costs ~60 page
/// programs, ~120 page reads and about one block erase, for as long as the directory grows.
#[test]
#[ignore = "library bug: creating files in a directory of more than ~4,000 entries costs ~60 \
            page programs, ~120 page reads and ~1 block erase per create (default config)"]
fn creates_in_a_large_directory_stay_cheap() {
    let (programs, erases, reads) = create_in_one_dir(Config::default(), 5000);
    println!("last 1000 creates: {programs} programs, {erases} erases, {reads} reads");
    // 1000 creates of one data page each: a few pages of metadata per create at most.
    assert!(programs < 5000, "{programs} page programs for 1000 creates");
    assert!(erases < 100, "{erases} block erases for 1000 creates");
}
