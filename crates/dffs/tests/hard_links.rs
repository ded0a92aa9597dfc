//! Hard links: a file with several names shares one inode (content, attributes, link count)
//! through all of them, in one directory or several; names go one by one (the file lives while
//! one is left, and while it is open); renames move one name; everything survives remounts,
//! power cuts after a sync, and garbage collection, and fsck stays clean.

use dffs::{Config, Error, FormatOptions, Fs, Ino, OpenFlags, SetAttr, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn fresh(name: &str, blocks: u32) -> Fs<SimFlash> {
    let p = preset(name).unwrap().with_blocks(blocks).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    Fs::mount(dev, Config::default()).unwrap()
}

fn remount(fs: Fs<SimFlash>) -> Fs<SimFlash> {
    Fs::mount(fs.unmount().unwrap(), Config::default()).unwrap()
}

/// Power cut (everything synced must survive), then mount.
fn cut(fs: Fs<SimFlash>) -> Fs<SimFlash> {
    let mut dev = fs.into_flash();
    dev.power_off();
    dev.power_up();
    Fs::mount(dev, Config::default()).unwrap()
}

fn write_all(fs: &mut Fs<SimFlash>, ino: Ino, off: u64, data: &[u8]) {
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    assert_eq!(fs.write(fh, off, data).unwrap(), data.len());
    fs.close(fh).unwrap();
}

fn read_all(fs: &mut Fs<SimFlash>, ino: Ino) -> Vec<u8> {
    let size = fs.stat(ino).unwrap().size as usize;
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; size];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), size);
    fs.close(fh).unwrap();
    buf
}

fn names(fs: &mut Fs<SimFlash>, dir: Ino) -> Vec<(Vec<u8>, Ino)> {
    let mut v = Vec::new();
    fs.readdir(dir, 0, &mut |e| {
        v.push((e.name.clone(), e.ino));
        true
    })
    .unwrap();
    v.sort();
    v
}

fn assert_clean(fs: &mut Fs<SimFlash>) {
    let r = fs.fsck().unwrap();
    assert!(r.is_clean(), "fsck: {:?}", r.errors);
}

#[test]
fn names_share_one_inode_across_remounts_and_cuts() {
    for dev in ["nand-slc-128m", "nor-qspi-16m"] {
        let mut fs = fresh(dev, 64);
        let d1 = fs.mkdir(ROOT_INO, b"d1", 0o755, 0, 0).unwrap().ino;
        let d2 = fs.mkdir(ROOT_INO, b"d2", 0o755, 0, 0).unwrap().ino;
        let ino = fs.create(d1, b"a", 0o644, 0, 0).unwrap().ino;
        let big: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        write_all(&mut fs, ino, 0, &big);
        let st = fs.link(ino, d2, b"b").unwrap();
        assert_eq!((st.ino, st.nlink), (ino, 2), "{dev}");
        let st = fs.link(ino, d1, b"c").unwrap();
        assert_eq!(st.nlink, 3);
        // Every name leads to the same inode, content and attributes.
        for (d, n) in [(d1, &b"a"[..]), (d2, b"b"), (d1, b"c")] {
            let st = fs.lookup(d, n).unwrap();
            assert_eq!((st.ino, st.nlink, st.size), (ino, 3, big.len() as u64));
        }
        assert_eq!(
            names(&mut fs, d1),
            vec![(b"a".to_vec(), ino), (b"c".to_vec(), ino)]
        );
        assert_eq!(names(&mut fs, d2), vec![(b"b".to_vec(), ino)]);
        // A write or chmod through one name is seen through the others.
        write_all(&mut fs, ino, 5, b"XYZ");
        let via_b = fs.lookup(d2, b"b").unwrap().ino;
        fs.setattr(
            via_b,
            SetAttr {
                mode: Some(0o600),
                ..Default::default()
            },
        )
        .unwrap();
        let mut want = big.clone();
        want[5..8].copy_from_slice(b"XYZ");
        assert_clean(&mut fs);
        fs = remount(fs);
        assert_clean(&mut fs);
        let st = fs.lookup(d1, b"c").unwrap();
        assert_eq!((st.ino, st.nlink, st.mode & 0o777), (ino, 3, 0o600));
        assert_eq!(read_all(&mut fs, ino), want);
        // Synced changes survive a power cut: a new link, a removed name, a rename.
        fs.link(ino, ROOT_INO, b"top").unwrap();
        fs.unlink(d1, b"a").unwrap();
        fs.rename(d2, b"b", d1, b"b2").unwrap();
        fs.sync().unwrap();
        fs = cut(fs);
        assert_clean(&mut fs);
        assert_eq!(fs.lookup(d1, b"a").unwrap_err(), Error::NotFound);
        assert_eq!(fs.lookup(d2, b"b").unwrap_err(), Error::NotFound);
        for (d, n) in [(d1, &b"c"[..]), (d1, b"b2"), (ROOT_INO, b"top")] {
            let st = fs.lookup(d, n).unwrap();
            assert_eq!((st.ino, st.nlink), (ino, 3), "{dev}");
        }
        assert_eq!(read_all(&mut fs, ino), want);
        // Names go one by one; the space is freed with the last.
        let free_before = fs.statfs().unwrap().blocks_free;
        fs.unlink(d1, b"c").unwrap();
        fs.unlink(ROOT_INO, b"top").unwrap();
        assert_eq!(fs.stat(ino).unwrap().nlink, 1);
        assert_eq!(read_all(&mut fs, ino), want);
        fs.unlink(d1, b"b2").unwrap();
        assert_eq!(fs.stat(ino).unwrap_err(), Error::NotFound);
        fs.checkpoint().unwrap();
        assert!(fs.statfs().unwrap().blocks_free > free_before);
        assert_clean(&mut fs);
        fs = remount(fs);
        assert_clean(&mut fs);
        assert!(names(&mut fs, d1).is_empty());
    }
}

#[test]
fn errors_and_renames_between_names() {
    let mut fs = fresh("nand-slc-128m", 32);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let g = fs.create(ROOT_INO, b"g", 0o644, 0, 0).unwrap().ino;
    assert_eq!(fs.link(d, ROOT_INO, b"x").unwrap_err(), Error::NotPermitted);
    assert_eq!(fs.link(f, ROOT_INO, b"g").unwrap_err(), Error::Exists);
    assert_eq!(fs.link(f, g, b"x").unwrap_err(), Error::NotDir);
    assert_eq!(fs.link(999, ROOT_INO, b"x").unwrap_err(), Error::NotFound);
    assert_eq!(
        fs.link(f, ROOT_INO, &[b'n'; 256]).unwrap_err(),
        Error::NameTooLong
    );
    fs.link(f, d, b"f2").unwrap();
    // Renaming one name onto another name of the same file does nothing (POSIX).
    fs.rename(ROOT_INO, b"f", d, b"f2").unwrap();
    assert_eq!(fs.lookup(ROOT_INO, b"f").unwrap().ino, f);
    assert_eq!(fs.stat(f).unwrap().nlink, 2);
    // Renaming another file over one name removes only that name.
    fs.rename(ROOT_INO, b"g", d, b"f2").unwrap();
    assert_eq!(fs.lookup(d, b"f2").unwrap().ino, g);
    assert_eq!(fs.stat(f).unwrap().nlink, 1);
    assert_eq!(fs.lookup(ROOT_INO, b"f").unwrap().ino, f);
    // A linked file can still be renamed over (and is then gone) and the names keep working
    // through many links, until the inode node is full.
    let mut n = 0;
    loop {
        let name = format!("link-{n:03}-{}", "x".repeat(40));
        match fs.link(f, ROOT_INO, name.as_bytes()) {
            Ok(st) => assert_eq!(st.nlink, n + 2),
            Err(e) => {
                assert_eq!(e, Error::TooManyLinks);
                break;
            }
        }
        n += 1;
    }
    assert!(n >= 10, "only {n} links fit");
    assert_clean(&mut fs);
    fs = remount(fs);
    assert_eq!(fs.stat(f).unwrap().nlink, n + 1);
    assert_clean(&mut fs);
    // rmdir of a directory holding a name of a linked file fails; unlinking it works.
    // (The node is full: a name must go first.)
    let e = fs.mkdir(ROOT_INO, b"e", 0o755, 0, 0).unwrap().ino;
    assert_eq!(fs.link(f, e, b"in-e").unwrap_err(), Error::TooManyLinks);
    let first = format!("link-000-{}", "x".repeat(40));
    fs.unlink(ROOT_INO, first.as_bytes()).unwrap();
    fs.link(f, e, b"in-e").unwrap();
    assert_eq!(fs.rmdir(ROOT_INO, b"e").unwrap_err(), Error::NotEmpty);
    fs.unlink(e, b"in-e").unwrap();
    fs.rmdir(ROOT_INO, b"e").unwrap();
    assert_eq!(fs.stat(f).unwrap().nlink, n);
    assert_clean(&mut fs);
}

#[test]
fn an_open_file_outlives_its_last_name_and_gc_moves_linked_inodes() {
    let mut fs = fresh("nand-slc-128m", 24);
    let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    fs.link(f, ROOT_INO, b"g").unwrap();
    write_all(&mut fs, f, 0, b"still here");
    let fh = fs.open(f, OpenFlags::READ).unwrap();
    fs.unlink(ROOT_INO, b"f").unwrap();
    fs.unlink(ROOT_INO, b"g").unwrap();
    let mut buf = [0u8; 10];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 10);
    assert_eq!(&buf, b"still here");
    fs.close(fh).unwrap();
    assert_eq!(fs.stat(f).unwrap_err(), Error::NotFound);
    // Churn on a small device: garbage collection relocates linked inodes many times.
    let keep = fs.create(ROOT_INO, b"keep", 0o644, 0, 0).unwrap().ino;
    fs.link(keep, ROOT_INO, b"keep2").unwrap();
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    fs.link(keep, d, b"keep3").unwrap();
    for round in 0..300u32 {
        let data = vec![round as u8; 4096 + (round as usize % 7) * 1000];
        write_all(&mut fs, keep, 0, &data);
        fs.setattr(
            keep,
            SetAttr {
                size: Some(data.len() as u64),
                ..Default::default()
            },
        )
        .unwrap();
        let other = format!("o{}", round % 5);
        let o = match fs.lookup(ROOT_INO, other.as_bytes()) {
            Ok(st) => st.ino,
            Err(_) => {
                fs.create(ROOT_INO, other.as_bytes(), 0o644, 0, 0)
                    .unwrap()
                    .ino
            }
        };
        write_all(&mut fs, o, 0, &vec![0x5A; 30_000]);
        if round % 50 == 49 {
            fs.sync().unwrap();
            assert_clean(&mut fs);
        }
    }
    let want = vec![299u32 as u8; 4096 + (299 % 7) * 1000];
    fs.sync().unwrap();
    fs = cut(fs);
    assert_clean(&mut fs);
    for (dir, n) in [
        (ROOT_INO, &b"keep"[..]),
        (ROOT_INO, b"keep2"),
        (d, b"keep3"),
    ] {
        let st = fs.lookup(dir, n).unwrap();
        assert_eq!((st.ino, st.nlink), (keep, 3));
    }
    assert_eq!(read_all(&mut fs, keep), want);
}

/// Names → (content, link count), for every name in `/`, `/d1` and `/d2`.
type Snapshot = std::collections::BTreeMap<String, (Vec<u8>, u32)>;

fn snapshot(fs: &mut Fs<SimFlash>) -> Snapshot {
    let mut out = Snapshot::new();
    for dir in ["", "/d1", "/d2"] {
        let Ok(d) = fs.resolve(if dir.is_empty() { b"/" } else { dir.as_bytes() }) else {
            continue;
        };
        for (name, ino) in names(fs, d) {
            let st = fs.stat(ino).unwrap();
            if st.kind == dffs::FileKind::File {
                let path = format!("{dir}/{}", String::from_utf8(name).unwrap());
                out.insert(path, (read_all(fs, ino), st.nlink));
            }
        }
    }
    out
}

/// The power-cut workload: each step is one operation on names of linked files, then a sync.
fn cut_step(fs: &mut Fs<SimFlash>, step: usize) -> Result<(), Error> {
    let d1 = fs.resolve(b"/d1")?;
    let d2 = fs.resolve(b"/d2")?;
    let write = |fs: &mut Fs<SimFlash>, ino: Ino, off: u64, data: &[u8]| -> Result<(), Error> {
        let fh = fs.open(ino, OpenFlags::RW)?;
        fs.write(fh, off, data)?;
        fs.close(fh)
    };
    match step {
        0 => {
            fs.create(d1, b"a", 0o644, 0, 0)?;
        }
        1 => {
            let a = fs.lookup(d1, b"a")?.ino;
            write(fs, a, 0, &[7u8; 3000])?;
        }
        2 => {
            let a = fs.lookup(d1, b"a")?.ino;
            fs.link(a, d2, b"b")?;
        }
        3 => {
            let a = fs.lookup(d1, b"a")?.ino;
            fs.link(a, ROOT_INO, b"c")?;
        }
        4 => {
            let b = fs.lookup(d2, b"b")?.ino;
            write(fs, b, 2500, &[9u8; 5000])?;
        }
        5 => fs.rename(d2, b"b", d1, b"b2")?,
        6 => fs.unlink(d1, b"a")?,
        7 => {
            fs.create(ROOT_INO, b"g", 0o644, 0, 0)?;
        }
        8 => {
            let g = fs.lookup(ROOT_INO, b"g")?.ino;
            write(fs, g, 0, b"replacement")?;
        }
        9 => fs.rename(ROOT_INO, b"g", ROOT_INO, b"c")?,
        10 => {
            let b2 = fs.lookup(d1, b"b2")?.ino;
            fs.link(b2, d2, b"again")?;
        }
        _ => fs.unlink(d1, b"b2")?,
    }
    fs.sync()
}

const CUT_STEPS: usize = 12;

fn cut_setup(dev: &str) -> Fs<SimFlash> {
    let mut fs = fresh(dev, 32);
    fs.mkdir(ROOT_INO, b"d1", 0o755, 0, 0).unwrap();
    fs.mkdir(ROOT_INO, b"d2", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    fs
}

#[test]
fn power_cut_at_every_program_and_erase_of_link_operations() {
    for dev in ["nand-slc-128m", "nor-qspi-16m"] {
        // Reference run: the state after each step.
        let mut fs = cut_setup(dev);
        let start = fs.flash().program_erase_ops();
        let mut states = vec![snapshot(&mut fs)];
        for step in 0..CUT_STEPS {
            cut_step(&mut fs, step).unwrap();
            states.push(snapshot(&mut fs));
        }
        let total = fs.flash().program_erase_ops() - start;
        assert_eq!(states[4]["/c"].1, 3, "{dev}: three names after two links");
        assert_eq!(states[CUT_STEPS]["/d2/again"].1, 1, "{dev}: one name left");
        for n in 1..=total {
            let mut fs = cut_setup(dev);
            fs.flash_mut().cut_power_after(n);
            let mut done = 0;
            while done < CUT_STEPS && cut_step(&mut fs, done).is_ok() {
                done += 1;
            }
            let mut flash = fs.into_flash();
            flash.power_up();
            let mut fs = Fs::mount(flash, Config::default())
                .unwrap_or_else(|e| panic!("{dev} cut {n}: mount: {e:?}"));
            let r = fs.fsck().unwrap();
            assert!(r.is_clean(), "{dev} cut {n}: fsck: {:?}", r.errors);
            let got = snapshot(&mut fs);
            // Every step synced before the cut is there; the step cut may or may not be.
            assert!(
                got == states[done] || (done < CUT_STEPS && got == states[done + 1]),
                "{dev} cut {n} (in step {done}): {got:?}\nwant {:?}",
                states[done]
            );
        }
        eprintln!("{dev}: {total} power cuts verified");
    }
}
