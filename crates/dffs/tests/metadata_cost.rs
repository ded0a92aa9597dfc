//! What metadata costs between checkpoints when many small files are made (a copied tree):
//! small dirty inodes and directory items share counts of `Config::max_dirty` on devices large
//! enough (`Config::dirty_shares`), so such a copy checkpoints less often; and on NAND the
//! `chown`, `chmod` and `utimes` of one file fold into one journal record while its page is in
//! RAM. Both must leave exactly what was done after a remount or a cut.

use dffs::{Config, FormatOptions, Fs, OpenFlags, SetAttr, Time, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn fresh(blocks: u32, cfg: Config) -> Fs<SimFlash> {
    let p = preset("nand-slc-128m").unwrap();
    let p = if blocks == 0 {
        p
    } else {
        p.with_blocks(blocks).unwrap()
    };
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    Fs::mount(dev, cfg).unwrap()
}

fn content(i: u32) -> Vec<u8> {
    (0..100 + i).map(|k| (k * 7 + i) as u8).collect()
}

/// Makes `/d` and `n` small files in it (written and closed, never synced); returns the
/// checkpoints taken meanwhile.
fn make_small_files(fs: &mut Fs<SimFlash>, n: u32) -> u64 {
    let before = fs.activity().checkpoints;
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    for i in 0..n {
        let ino = fs
            .create(d, format!("f{i}").as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        let fh = fs.open(ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &content(i)).unwrap();
        fs.close(fh).unwrap();
    }
    fs.activity().checkpoints - before
}

fn check_small_files(fs: &mut Fs<SimFlash>, n: u32) {
    let d = fs.lookup(ROOT_INO, b"d").unwrap().ino;
    for i in 0..n {
        let ino = fs.lookup(d, format!("f{i}").as_bytes()).unwrap().ino;
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; 400];
        let got = fs.read(fh, 0, &mut buf).unwrap();
        assert_eq!(&buf[..got], &content(i)[..], "f{i}");
        fs.close(fh).unwrap();
    }
    assert!(fs.fsck().unwrap().is_clean());
}

/// On 128 MiB, the default configuration counts a small inode or directory item as a quarter
/// of an item: 80 small files in one directory fit between two checkpoints, where counting
/// each whole takes a checkpoint every 24. Small devices count every item whole.
#[test]
fn small_dirty_items_share_counts_on_a_large_device() {
    let cfg = Config::default();
    let large = fresh(0, cfg);
    assert_eq!(cfg.shares_on(&large.params()), 4);
    let small = fresh(32, cfg);
    assert_eq!(cfg.shares_on(&small.params()), 1);
    drop(small);

    let whole = Config {
        dirty_shares: 1,
        ..cfg
    };
    let n = 80;
    let mut counts = Vec::new();
    for (c, fs) in [(cfg, large), (whole, fresh(0, whole))] {
        let mut fs = fs;
        counts.push(make_small_files(&mut fs, n));
        // Unmounted and mounted again, and cut without an unmount: the same files.
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, c).unwrap();
        check_small_files(&mut fs, n);
        make_small_files_more(&mut fs);
        let dev = fs.into_flash();
        let mut fs = Fs::mount(dev, c).unwrap();
        check_small_files(&mut fs, n);
    }
    let (shared, each) = (counts[0], counts[1]);
    assert!(shared <= 1, "{shared} checkpoints with shares");
    assert!(each >= 3, "{each} checkpoints counting items whole");
}

/// More dirty items after a remount (a second directory), synced, so a cut keeps them.
fn make_small_files_more(fs: &mut Fs<SimFlash>) {
    let e = fs.mkdir(ROOT_INO, b"e", 0o755, 0, 0).unwrap().ino;
    for i in 0..30u32 {
        fs.create(e, format!("g{i}").as_bytes(), 0o600, 0, 0)
            .unwrap();
    }
    fs.sync().unwrap();
}

/// `chown`, `chmod` and `utimes` of a file, as `cp -a` does them, then an fsync and a cut: the
/// folded record replays to all three changes.
#[test]
fn folded_attribute_changes_replay_after_a_cut() {
    let cfg = Config::default();
    let mut fs = fresh(64, cfg);
    let ino = fs.create(ROOT_INO, b"f", 0o600, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    fs.write(fh, 0, b"hello").unwrap();
    fs.fsync(fh).unwrap();
    let t = Time {
        secs: 1_600_000_000,
        nsec: 5,
    };
    let set = |fs: &mut Fs<SimFlash>, a: SetAttr| {
        fs.setattr(ino, a).unwrap();
    };
    set(
        &mut fs,
        SetAttr {
            uid: Some(1000),
            gid: Some(100),
            ..Default::default()
        },
    );
    set(
        &mut fs,
        SetAttr {
            mode: Some(0o751),
            ..Default::default()
        },
    );
    set(
        &mut fs,
        SetAttr {
            atime: Some(t),
            mtime: Some(t),
            ..Default::default()
        },
    );
    let live = fs.stat(ino).unwrap();
    fs.fsync(fh).unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let st = fs.stat(ino).unwrap();
    assert_eq!((st.uid, st.gid, st.mode & 0o7777), (1000, 100, 0o751));
    assert_eq!((st.atime, st.mtime), (t, t));
    assert_eq!(st.ctime, live.ctime);
    assert_eq!(st.mode, live.mode);
    assert!(fs.fsck().unwrap().is_clean());
}
