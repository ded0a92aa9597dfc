//! Directory scale, mount cost and RAM, counted in flash operations (never timed):
//! - 100,000 entries in one directory: name lookups stay at a few page reads;
//! - 10,000 files in 100 directories: the same;
//! - mount reads and RAM after mount are the same on an empty device and with those files.
//!
//! Longer runs: `cargo run --release -p dffs --example scale -- PRESET FILES DIRS SIZE`.

use dffs::{Config, FormatOptions, Fs, Ino, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn fresh(name: &str) -> Fs<SimFlash> {
    let dev = SimFlash::new(preset(name).unwrap()).unwrap();
    let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
    Fs::mount(dev, Config::default()).unwrap()
}

/// Unmounts, mounts again and returns the file system with the mount's page reads and RAM.
fn remount(fs: Fs<SimFlash>) -> (Fs<SimFlash>, u64, usize) {
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let info = fs.info();
    assert!(!info.recovered);
    (fs, info.mount_cost.reads, info.ram_bytes)
}

/// Cold lookups of `names` (every one must be found): (mean reads, most reads of one lookup).
fn lookups(fs: &mut Fs<SimFlash>, names: &[(Ino, String)]) -> (f64, u64) {
    let mut total = 0;
    let mut most = 0;
    for (dir, name) in names {
        let before = fs.op_counts().reads;
        fs.lookup(*dir, name.as_bytes())
            .unwrap_or_else(|e| panic!("lookup {name}: {e:?}"));
        let n = fs.op_counts().reads - before;
        total += n;
        most = most.max(n);
    }
    (total as f64 / names.len() as f64, most)
}

/// Mount of an empty device: (reads, RAM). With `roaming`, of one whose anchors have left the
/// anchor area (a file created and removed, with a checkpoint after each, until they do: the
/// area wears faster than the device, DESIGN §10). A mount then also searches the home pair
/// the area keeps, whatever the files.
fn empty_mount(name: &str, roaming: bool) -> (u64, usize) {
    let mut fs = fresh(name);
    let area = dffs::format::params::ANCHOR_AREA;
    let mut rounds = 0;
    while roaming && fs.params().anchors.iter().any(|&a| a < area) {
        rounds += 1;
        assert!(rounds < 100_000, "the anchors never left the area");
        fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
        fs.checkpoint().unwrap();
        fs.unlink(ROOT_INO, b"f").unwrap();
        fs.checkpoint().unwrap();
    }
    let (_, reads, ram) = remount(fs);
    (reads, ram)
}

/// Whether the anchors of `fs` have left the anchor area.
fn roaming(fs: &Fs<SimFlash>) -> bool {
    let area = dffs::format::params::ANCHOR_AREA;
    fs.params().anchors.iter().all(|&a| a >= area)
}

#[test]
fn a_directory_of_100000_entries_answers_lookups_in_a_few_page_reads() {
    const N: u32 = 100_000;
    let mut fs = fresh("nand-slc-128m");
    for i in 0..N {
        fs.create(ROOT_INO, format!("file{i:07}").as_bytes(), 0o644, 0, 0)
            .unwrap_or_else(|e| panic!("create {i}: {e:?}"));
    }
    let (mut fs, reads, ram) = remount(fs);
    // (So many creates, a checkpoint every few dozen, wear the anchor area faster than the
    // device: the anchors leave it.)
    let (empty_reads, empty_ram) = empty_mount("nand-slc-128m", roaming(&fs));
    let names: Vec<(Ino, String)> = (0..500)
        .map(|k| (ROOT_INO, format!("file{:07}", k * (N / 500) + 7)))
        .collect();
    let (mean, most) = lookups(&mut fs, &names);
    eprintln!(
        "100,000 in one directory: lookup {mean:.2} reads (most {most}); mount {reads} reads \
         (empty {empty_reads}), RAM {ram} B (empty {empty_ram} B)"
    );
    // A lookup reads the bucket-table page, the bucket page and the file's inode (which it
    // returns); the root page is read once and cached.
    assert!(mean <= 3.5, "mean lookup cost {mean} reads");
    // The first lookup also reads the root page and its inode-map page.
    assert!(most <= 7, "worst lookup {most} reads");
    // A name that is not there costs no inode read.
    let before = fs.op_counts().reads;
    assert_eq!(
        fs.lookup(ROOT_INO, b"file9999999").unwrap_err(),
        dffs::Error::NotFound
    );
    assert!(fs.op_counts().reads - before <= 3);
    assert!(
        reads <= empty_reads + 4,
        "mount reads grew with the files: {reads} vs {empty_reads}"
    );
    assert!(
        ram <= empty_ram + 4096,
        "RAM after mount grew with the files: {ram} vs {empty_ram}"
    );
    assert_eq!(fs.statfs().unwrap().files, N as u64 + 1);
}

#[test]
fn ten_thousand_files_in_100_directories_mount_like_an_empty_device() {
    for name in ["nand-slc-128m", "nor-qspi-16m"] {
        let mut fs = fresh(name);
        let mut dirs = Vec::new();
        for d in 0..100 {
            dirs.push(
                fs.mkdir(ROOT_INO, format!("d{d:03}").as_bytes(), 0o755, 0, 0)
                    .unwrap()
                    .ino,
            );
        }
        for i in 0..10_000usize {
            fs.create(dirs[i % 100], format!("f{i:05}").as_bytes(), 0o644, 0, 0)
                .unwrap_or_else(|e| panic!("{name} create {i}: {e:?}"));
        }
        let (mut fs, reads, ram) = remount(fs);
        let (empty_reads, empty_ram) = empty_mount(name, roaming(&fs));
        let names: Vec<(Ino, String)> = (0..300)
            .map(|k| {
                let i = k * 33 + 5;
                (dirs[i % 100], format!("f{i:05}"))
            })
            .collect();
        let (mean, most) = lookups(&mut fs, &names);
        eprintln!(
            "{name}: 10,000 files in 100 directories: lookup {mean:.2} reads (most {most}); \
             mount {reads} reads (empty {empty_reads}), RAM {ram} B (empty {empty_ram} B)"
        );
        // The parent's directory page (first time), the bucket, the inode. NOR has no pages: a
        // node is read with one command for its first 256 bytes and one for the rest, so a
        // lookup costs about one command more there.
        let (mean_max, most_max) = if name.starts_with("nor") {
            (4.5, 8)
        } else {
            (3.5, 6)
        };
        assert!(mean <= mean_max, "{name}: mean lookup cost {mean} reads");
        assert!(most <= most_max, "{name}: worst lookup {most} reads");
        assert!(
            reads <= empty_reads + 4,
            "{name}: mount reads grew with the files: {reads} vs {empty_reads}"
        );
        assert!(
            ram <= empty_ram + 4096,
            "{name}: RAM after mount grew with the files: {ram} vs {empty_ram}"
        );
        assert!(fs.fsck().unwrap().is_clean());
    }
}
