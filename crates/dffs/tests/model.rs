//! Model-based test: random sequences of every file-system operation, with syncs, clean
//! remounts and remounts after a simulated crash right after a sync, checked step by step
//! against an in-memory model. Small geometries make garbage collection, wear leveling and
//! ENOSPC frequent.
//!
//! Default run: a few seeds per device kind (sized for CI). Longer runs:
//! `DFFS_MODEL_SEEDS=200 DFFS_MODEL_OPS=3000 cargo test --release -p dffs --test model`.

// The model checks for an existing name, then expects the file system to refuse it.
#![allow(clippy::map_entry)]

use std::collections::BTreeMap;

use dffs::{Config, Error, FileKind, FormatOptions, Fs, OpenFlags, SetAttr, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash, SimOptions, Stats};
use dffs_testkit::model::{
    good_for_files, join, room_for_files, split, Model, Node, NOSPACE_FLOOR,
};
use dffs_testkit::Rng;

fn resolve<F: dffs::Flash>(fs: &mut Fs<F>, path: &str) -> Result<u32, Error> {
    fs.resolve(path.as_bytes())
}

/// Compares the whole file system with the model, and runs fsck.
fn check_all<F: dffs::Flash>(fs: &mut Fs<F>, m: &Model, ctx: &str) {
    let rep = fs.fsck().unwrap_or_else(|e| panic!("{ctx}: fsck: {e:?}"));
    assert!(rep.is_clean(), "{ctx}: fsck: {:#?}", rep.errors);
    let mut seen = BTreeMap::new();
    let mut file_inos: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut stack = vec![("/".to_string(), ROOT_INO)];
    while let Some((path, ino)) = stack.pop() {
        let mut ents = Vec::new();
        fs.readdir(ino, 0, &mut |e| {
            ents.push(e);
            true
        })
        .unwrap_or_else(|e| panic!("{ctx}: readdir {path}: {e:?}"));
        let mut names: Vec<_> = ents.iter().map(|e| e.name.clone()).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "{ctx}: duplicate names in {path}");
        for e in ents {
            let p = join(&path, std::str::from_utf8(&e.name).unwrap());
            let st = fs
                .lookup(ino, &e.name)
                .unwrap_or_else(|err| panic!("{ctx}: lookup {p}: {err:?}"));
            assert_eq!(st.ino, e.ino, "{ctx}: {p} ino");
            assert_eq!(st.kind, e.kind, "{ctx}: {p} kind");
            match e.kind {
                FileKind::Dir => {
                    seen.insert(p.clone(), Node::Dir);
                    stack.push((p, e.ino));
                }
                FileKind::Symlink => {
                    let t = fs
                        .readlink(e.ino)
                        .unwrap_or_else(|err| panic!("{ctx}: readlink {p}: {err:?}"));
                    seen.insert(p, Node::Link(t));
                }
                FileKind::File => {
                    let fh = fs
                        .open(e.ino, OpenFlags::READ)
                        .unwrap_or_else(|err| panic!("{ctx}: open {p}: {err:?}"));
                    let mut buf = vec![0u8; st.size as usize + 10];
                    let n = fs
                        .read(fh, 0, &mut buf)
                        .unwrap_or_else(|err| panic!("{ctx}: read {p}: {err:?}"));
                    fs.close(fh)
                        .unwrap_or_else(|err| panic!("{ctx}: close {p}: {err:?}"));
                    assert_eq!(n as u64, st.size, "{ctx}: {p} read length");
                    file_inos.insert(p.clone(), (st.ino, st.nlink));
                    buf.truncate(n);
                    seen.insert(p, Node::File(buf));
                }
            }
        }
    }
    if seen != m.nodes {
        for (k, v) in &m.nodes {
            match seen.get(k) {
                None => eprintln!("missing {k}"),
                Some(Node::File(a)) if matches!(v, Node::File(b) if b != a) => {
                    let Node::File(b) = v else { unreachable!() };
                    let i = a
                        .iter()
                        .zip(b.iter())
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len()));
                    eprintln!(
                        "differs {k}: first difference at byte {i} (fs {} bytes, model {} bytes)",
                        a.len(),
                        b.len()
                    );
                }
                Some(x) if x != v => eprintln!(
                    "differs {k}: fs {} bytes, model {} bytes",
                    match x {
                        Node::File(d) => d.len() as i64,
                        _ => -1,
                    },
                    match v {
                        Node::File(d) => d.len() as i64,
                        _ => -1,
                    }
                ),
                _ => {}
            }
        }
        for k in seen.keys() {
            if !m.nodes.contains_key(k) {
                eprintln!("extra {k}");
            }
        }
        panic!("{ctx}: file system differs from the model");
    }
    // Names of one file lead to one inode, whose link count is the number of names.
    let groups = m.link_groups();
    for (path, (ino, nlink)) in &file_inos {
        let group = groups.iter().find(|g| g.contains(path));
        let names = group.map_or(1, |g| g.len());
        assert_eq!(*nlink as usize, names, "{ctx}: {path} link count");
        for g in group.into_iter().flatten() {
            assert_eq!(file_inos[g].0, *ino, "{ctx}: {path} and {g} are one file");
        }
    }
}

fn name(rng: &mut Rng) -> String {
    const NAMES: [&str; 12] = [
        "a",
        "b",
        "c",
        "dd",
        "eee",
        "f.txt",
        "g.log",
        "hh",
        "i",
        "jjj",
        "k",
        "long-name-0123456789",
    ];
    NAMES[rng.below_mod(NAMES.len() as u64) as usize].to_string()
}

fn data(rng: &mut Rng, len: usize) -> Vec<u8> {
    let seed = rng.next_u64();
    (0..len)
        .map(|i| (seed.wrapping_mul(i as u64 + 1) >> 24) as u8)
        .collect()
}

/// About half-compressible data: text-like runs between random ones (for runs with
/// compression on, so files hold both compressed and raw blocks).
fn mixed_data(rng: &mut Rng, len: usize) -> Vec<u8> {
    let words: [&[u8]; 5] = [b"erase ", b"page ", b"block\n", b"spare ", b"0x7f "];
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        let end = (v.len() + 200 + rng.below_mod(3000) as usize).min(len);
        let text = rng.below_mod(2) == 0;
        while v.len() < end {
            if text {
                v.extend_from_slice(words[rng.below_mod(5) as usize]);
            } else {
                v.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
        }
        v.truncate(end);
    }
    v
}

fn max_len_for(kind: &str) -> u64 {
    if kind.starts_with("nor") {
        40_000
    } else {
        120_000
    }
}

/// Runs one random sequence; returns the number of ENOSPC seen.
fn run(kind: &str, blocks: u32, seed: u64, ops: usize) -> usize {
    run_z(kind, blocks, seed, ops, dffs::format::compress::NONE)
}

/// [`run`] on a device formatted with compression `algo`.
fn run_z(kind: &str, blocks: u32, seed: u64, ops: usize, algo: u8) -> usize {
    run_on(kind, blocks, seed, ops, algo, None).0
}

/// [`run_z`] on a simulator with the fault options `sim` (none: a fault-free device).
/// Returns the ENOSPC count and the device's statistics at the end.
fn run_on(
    kind: &str,
    blocks: u32,
    seed: u64,
    ops: usize,
    algo: u8,
    sim: Option<SimOptions>,
) -> (usize, Stats) {
    // `DFFS_MODEL_BLOCKS` runs any case on a device of that many blocks (e.g. 64 or more, where
    // the free pool of few large blocks keeps less idle: DESIGN §9.3).
    let blocks = env("DFFS_MODEL_BLOCKS", blocks as u64) as u32;
    // ("nor-4k": the NOR part erased in 4 KiB sectors.)
    let p = match kind {
        "nor-4k" => preset("nor-qspi-16m")
            .unwrap()
            .with_erase_size(4096)
            .unwrap(),
        _ => preset(kind).unwrap(),
    };
    let p = p.with_blocks(blocks).unwrap();
    let dev = match sim {
        Some(o) => SimFlash::with_options(p, o).unwrap(),
        None => SimFlash::new(p).unwrap(),
    };
    let opts = FormatOptions {
        compression: algo,
        ..FormatOptions::default()
    };
    let dev = Fs::format(dev, &opts).unwrap();
    let mut cfg = Config::smallest();
    if PAGED.with(|p| p.get()) || env("DFFS_MODEL_PAGED", 0) != 0 {
        cfg.records_ram = 0;
    }
    let mut fs = Fs::mount(dev, cfg).unwrap();
    assert_eq!(
        fs.records_paged(),
        cfg!(feature = "paged-records") && cfg.records_ram == 0
    );
    let mut m = Model::default();
    let mut rng = Rng::new(seed);
    let mut nospace = 0;
    let maxlen = max_len_for(kind);
    // ENOSPC is a failure below NOSPACE_FLOOR of the room for files, allowing for the largest
    // write refused.
    // (Blocks that went bad are not room: the bound counts good blocks.)
    let room_now = |fs: &Fs<SimFlash>| {
        let good = blocks as u64 - fs.flash().grown_bad_blocks().len() as u64;
        let good = good_for_files(good, fs.params().anchors, dffs::format::params::ANCHOR_AREA);
        room_for_files(good, p.geometry.block_size() as u64)
    };
    for step in 0..ops {
        let ctx = format!("{kind} seed {seed} step {step}");
        let nospace_before = nospace;
        let op = rng.below_mod(100);
        if trace() {
            eprintln!("{ctx}: op {op}");
        }
        match op {
            // create
            0..=9 => {
                let dir = rng.pick(&m.dirs()).unwrap().clone();
                let n = name(&mut rng);
                let path = join(&dir, &n);
                let pino = resolve(&mut fs, &dir)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                if trace() {
                    eprintln!("  create {path}");
                }
                let r = fs.create(pino, n.as_bytes(), 0o644, 0, 0);
                if m.nodes.contains_key(&path) {
                    assert_eq!(
                        r.err(),
                        Some(Error::Exists),
                        "{ctx}: create existing {path}"
                    );
                } else {
                    if or_nospace(r, &mut nospace, || format!("{ctx}: create {path}")).is_some() {
                        m.create(&path, Node::File(Vec::new())).unwrap();
                    }
                }
            }
            // hard link
            10..=13 => {
                let Some(src) = rng.pick(&m.files()).cloned() else {
                    continue;
                };
                let dir = rng.pick(&m.dirs()).unwrap().clone();
                let n = name(&mut rng);
                let path = join(&dir, &n);
                let ino = resolve(&mut fs, &src)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {src}: {e:?}"));
                let pino = resolve(&mut fs, &dir)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                if trace() {
                    eprintln!("  link {src} {path}");
                }
                let r = fs.link(ino, pino, n.as_bytes());
                if m.nodes.contains_key(&path) {
                    assert_eq!(
                        r.err(),
                        Some(Error::Exists),
                        "{ctx}: link to existing {path}"
                    );
                } else {
                    match r {
                        Ok(st) => {
                            assert_eq!(st.ino, ino, "{ctx}: link {path}");
                            m.link(&src, &path).unwrap();
                        }
                        Err(Error::NoSpace) => nospace += 1,
                        // The inode node holds as many names as fit.
                        Err(Error::TooManyLinks) => {}
                        Err(e) => panic!("{ctx}: link {src} {path}: {e:?}"),
                    }
                }
            }
            // mkdir
            14..=17 => {
                let dir = rng.pick(&m.dirs()).unwrap().clone();
                let n = name(&mut rng);
                let path = join(&dir, &n);
                let pino = resolve(&mut fs, &dir)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                if trace() {
                    eprintln!("  mkdir {path}");
                }
                let r = fs.mkdir(pino, n.as_bytes(), 0o755, 0, 0);
                if m.nodes.contains_key(&path) {
                    assert_eq!(r.err(), Some(Error::Exists), "{ctx}: mkdir existing {path}");
                } else {
                    if or_nospace(r, &mut nospace, || format!("{ctx}: mkdir {path}")).is_some() {
                        m.create(&path, Node::Dir).unwrap();
                    }
                }
            }
            // write somewhere (open, write, maybe fsync, close)
            18..=45 => {
                let Some(path) = rng.pick(&m.files()).cloned() else {
                    continue;
                };
                let ino = resolve(&mut fs, &path)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {path}: {e:?}"));
                let cur = match &m.nodes[&path] {
                    Node::File(d) => d.len() as u64,
                    _ => unreachable!(),
                };
                let off = match rng.below_mod(4) {
                    0 => 0,
                    1 => cur,
                    2 => rng.below_mod(cur + 1),
                    _ => rng.below_mod(maxlen),
                };
                let len = match rng.below_mod(4) {
                    0 => rng.below_mod(64),
                    1 => rng.below_mod(3000),
                    _ => rng.below_mod(maxlen / 3),
                } as usize;
                let d = if algo == dffs::format::compress::NONE {
                    data(&mut rng, len.max(1))
                } else {
                    mixed_data(&mut rng, len.max(1))
                };
                let flags = OpenFlags {
                    sync: rng.below_mod(8) == 0,
                    ..OpenFlags::RW
                };
                let fh = fs
                    .open(ino, flags)
                    .unwrap_or_else(|e| panic!("{ctx}: open for write: {e:?}"));
                if trace() {
                    eprintln!("  write {path} @{off}+{} sync {}", d.len(), flags.sync);
                }
                let r = fs.write(fh, off, &d);
                let fsync = rng.below_mod(3) == 0;
                match r {
                    // A short write: after failures the device refused the cache's blocks
                    // part-way; the bytes it took are the file's, unless the commit at close
                    // finds no room either (then the file keeps its committed content).
                    Ok(n) if n > 0 && n < d.len() && !flags.sync => {
                        nospace += 1;
                        match fs.close(fh) {
                            Ok(()) => m.write(&path, off, &d[..n]).unwrap(),
                            Err(Error::NoSpace) => {}
                            Err(e) => panic!("{ctx}: close after a short write: {e:?}"),
                        }
                        check_all(&mut fs, &m, &format!("{ctx} after a short write"));
                    }
                    Ok(n) => {
                        assert_eq!(n, d.len());
                        m.write(&path, off, &d).unwrap();
                        if fsync {
                            fs.fsync(fh)
                                .unwrap_or_else(|e| panic!("{ctx}: fsync: {e:?}"));
                        }
                        match fs.close(fh) {
                            Ok(()) => {}
                            Err(e) => panic!(
                                "{ctx}: close after write: {e:?} {}",
                                fs.debug_block_summary()
                            ),
                        }
                    }
                    Err(Error::NoSpace) => {
                        nospace += 1;
                        fs.close(fh)
                            .unwrap_or_else(|e| panic!("{ctx}: close after ENOSPC: {e:?}"));
                        // The failed write changed nothing: compare.
                        check_all(&mut fs, &m, &format!("{ctx} after ENOSPC write"));
                    }
                    Err(e) => panic!("{ctx}: write {path} @{off}+{len}: {e:?}"),
                }
            }
            // truncate
            46..=51 => {
                let Some(path) = rng.pick(&m.files()).cloned() else {
                    continue;
                };
                let ino = resolve(&mut fs, &path)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {path}: {e:?}"));
                let size = rng.below_mod(maxlen / 2);
                if trace() {
                    eprintln!("  truncate {path} {size}");
                }
                let r = fs.setattr(
                    ino,
                    SetAttr {
                        size: Some(size),
                        ..Default::default()
                    },
                );
                if let Some(st) = or_nospace(r, &mut nospace, || format!("{ctx}: truncate {path}"))
                {
                    assert_eq!(st.size, size, "{ctx}");
                    m.truncate(&path, size).unwrap();
                }
            }
            // unlink
            52..=59 => {
                let Some(path) = rng
                    .pick(&m.nodes.keys().cloned().collect::<Vec<_>>())
                    .cloned()
                else {
                    continue;
                };
                let (dir, n) = split(&path);
                let pino =
                    resolve(&mut fs, dir).unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                if trace() {
                    eprintln!("  unlink {path}");
                }
                let r = fs.unlink(pino, n.as_bytes());
                match &m.nodes[&path] {
                    Node::Dir => assert_eq!(r, Err(Error::IsDir), "{ctx}: unlink dir {path}"),
                    // Refused (ENOSPC) only when the recovery checkpoint a cut left owed finds
                    // no room (a device that lost most of its blocks to failures): held to
                    // the same floor as any other ENOSPC.
                    _ => {
                        if or_nospace(r, &mut nospace, || format!("{ctx}: unlink {path}")).is_some()
                        {
                            m.unlink(&path).unwrap();
                        }
                    }
                }
            }
            // rmdir
            60..=64 => {
                let dirs: Vec<String> = m.dirs().into_iter().filter(|d| d != "/").collect();
                let Some(path) = rng.pick(&dirs).cloned() else {
                    continue;
                };
                let (dir, n) = split(&path);
                let pino =
                    resolve(&mut fs, dir).unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                if trace() {
                    eprintln!("  rmdir {path}");
                }
                let r = fs.rmdir(pino, n.as_bytes());
                if m.children(&path).is_empty() {
                    // Refused as unlink is (above).
                    if or_nospace(r, &mut nospace, || format!("{ctx}: rmdir {path}")).is_some() {
                        m.rmdir(&path).unwrap();
                    }
                } else {
                    assert_eq!(r, Err(Error::NotEmpty), "{ctx}: rmdir non-empty {path}");
                }
            }
            // rename
            65..=74 => {
                let Some(src) = rng
                    .pick(&m.nodes.keys().cloned().collect::<Vec<_>>())
                    .cloned()
                else {
                    continue;
                };
                let dst_dir = rng.pick(&m.dirs()).unwrap().clone();
                let dst = join(&dst_dir, &name(&mut rng));
                let (sd, sn) = split(&src);
                let (dd, dn) = split(&dst);
                let sp = resolve(&mut fs, sd).unwrap();
                let dp = resolve(&mut fs, dd).unwrap();
                if trace() {
                    eprintln!("  rename {src} -> {dst}");
                }
                let r = fs.rename(sp, sn.as_bytes(), dp, dn.as_bytes());
                let src_is_dir = m.nodes[&src] == Node::Dir;
                let same_file =
                    m.files.contains_key(&src) && m.files.get(&src) == m.files.get(&dst);
                let expect: Result<(), Error> = if src == dst || same_file {
                    Ok(())
                } else if src_is_dir && (dst == src || dst.starts_with(&format!("{src}/"))) {
                    Err(Error::Invalid)
                } else {
                    match m.nodes.get(&dst) {
                        None => Ok(()),
                        Some(Node::Dir) if !src_is_dir => Err(Error::IsDir),
                        Some(Node::Dir) if !m.children(&dst).is_empty() => Err(Error::NotEmpty),
                        Some(Node::Dir) => Ok(()),
                        Some(_) if src_is_dir => Err(Error::NotDir),
                        Some(_) => Ok(()),
                    }
                };
                match (&r, &expect) {
                    (Err(Error::NoSpace), Ok(())) => nospace += 1,
                    _ => assert_eq!(r, expect, "{ctx}: rename {src} -> {dst}"),
                }
                if r.is_ok() {
                    m.rename(&src, &dst).unwrap();
                }
            }
            // symlink
            75..=77 => {
                let dir = rng.pick(&m.dirs()).unwrap().clone();
                let n = name(&mut rng);
                let path = join(&dir, &n);
                let pino = resolve(&mut fs, &dir)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {dir}: {e:?}"));
                let target = format!("/target/{}", rng.below_mod(1000));
                if trace() {
                    eprintln!("  symlink {path}");
                }
                let r = fs.symlink(pino, n.as_bytes(), target.as_bytes(), 0, 0);
                if m.nodes.contains_key(&path) {
                    assert_eq!(r.err(), Some(Error::Exists), "{ctx}");
                } else {
                    if or_nospace(r, &mut nospace, || format!("{ctx}: symlink")).is_some() {
                        m.create(&path, Node::Link(target.into_bytes())).unwrap();
                    }
                }
            }
            // chmod / read a random range
            78..=83 => {
                let Some(path) = rng.pick(&m.files()).cloned() else {
                    continue;
                };
                let ino = resolve(&mut fs, &path)
                    .unwrap_or_else(|e| panic!("{ctx}: resolve {path}: {e:?}"));
                if rng.below_mod(2) == 0 {
                    let mode = 0o600 | rng.below_mod(0o100) as u32;
                    let st = fs.setattr(
                        ino,
                        SetAttr {
                            mode: Some(mode),
                            ..Default::default()
                        },
                    );
                    if let Some(st) = or_nospace(st, &mut nospace, || format!("{ctx}: chmod")) {
                        assert_eq!(st.mode & 0o7777, mode, "{ctx}");
                    }
                } else {
                    let Node::File(c) = m.nodes[&path].clone() else {
                        unreachable!()
                    };
                    let off = rng.below_mod(c.len() as u64 + 10);
                    let len = rng.below_mod(5000) as usize;
                    let fh = fs
                        .open(ino, OpenFlags::READ)
                        .unwrap_or_else(|e| panic!("{ctx}: open: {e:?}"));
                    let mut buf = vec![0u8; len];
                    let n = fs
                        .read(fh, off, &mut buf)
                        .unwrap_or_else(|e| panic!("{ctx}: read: {e:?}"));
                    fs.close(fh)
                        .unwrap_or_else(|e| panic!("{ctx}: close: {e:?}"));
                    let want = if off as usize >= c.len() {
                        &[][..]
                    } else {
                        &c[off as usize..(off as usize + len).min(c.len())]
                    };
                    assert_eq!(&buf[..n], want, "{ctx}: read {path} @{off}+{len}");
                }
            }
            // sync, checkpoint, gc
            84..=87 => match rng.below_mod(3) {
                0 => fs.sync().unwrap_or_else(|e| panic!("{ctx}: sync: {e:?}")),
                // Refused (ENOSPC) when the free pool cannot hold this checkpoint and the next
                // (a device that lost a third of its blocks to failures): held to the same
                // floor as any other ENOSPC, which counts only the good blocks.
                1 => {
                    or_nospace(fs.checkpoint(), &mut nospace, || {
                        format!("{ctx}: checkpoint")
                    });
                }
                // Refused as the checkpoint is, when the recovery checkpoint a cut left owed
                // finds no room.
                _ => {
                    or_nospace(fs.gc_step(64), &mut nospace, || format!("{ctx}: gc_step"));
                }
            },
            // clean remount
            88..=92 => {
                let dev = fs
                    .unmount()
                    .unwrap_or_else(|e| panic!("{ctx}: unmount: {e:?}"));
                fs = Fs::mount(dev, cfg).unwrap_or_else(|e| panic!("{ctx}: mount: {e:?}"));
                check_all(&mut fs, &m, &format!("{ctx} after remount"));
            }
            // crash right after a sync: everything must be there
            93..=97 => {
                fs.sync().unwrap_or_else(|e| panic!("{ctx}: sync: {e:?}"));
                let dev = fs.into_flash();
                fs = Fs::mount(dev, cfg)
                    .unwrap_or_else(|e| panic!("{ctx}: mount after crash: {e:?}"));
                check_all(&mut fs, &m, &format!("{ctx} after crash"));
                // Once a checkpoint has rewritten what the recovery dirtied, no block is
                // credited with more than it holds (DESIGN.md §15 item 13).
                match fs.checkpoint() {
                    Ok(()) => {
                        let rep = fs.fsck().unwrap_or_else(|e| panic!("{ctx}: fsck: {e:?}"));
                        assert_eq!(rep.over_credited, 0, "{ctx}: {:?}", rep.warnings);
                    }
                    Err(Error::NoSpace) => {}
                    Err(e) => panic!("{ctx}: checkpoint after crash: {e:?}"),
                }
            }
            // full check
            _ => check_all(&mut fs, &m, &ctx),
        }
        if let Err(e) = fs.debug_check_blocks() {
            panic!("{ctx}: {e}");
        }
        if nospace > nospace_before {
            let room = room_now(&fs);
            let held = m.stored_bytes();
            assert!(
                (held + maxlen) as f64 >= room as f64 * NOSPACE_FLOOR,
                "{ctx}: ENOSPC with {held} bytes stored, {:.1}% of the {room} bytes of room\n{}",
                held as f64 * 100.0 / room as f64,
                fs.debug_block_summary()
            );
        }
        if std::env::var("DFFS_MODEL_CHECK_EACH").is_ok() {
            check_all(&mut fs, &m, &format!("{ctx} (each)"));
        }
    }
    check_all(&mut fs, &m, &format!("{kind} seed {seed} end"));
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    check_all(&mut fs, &m, &format!("{kind} seed {seed} final remount"));
    (nospace, fs.flash().stats())
}

/// `r`'s value; `None` after counting an ENOSPC (the step's end holds it to the ENOSPC floor);
/// any other error fails the test.
fn or_nospace<T>(
    r: Result<T, Error>,
    nospace: &mut usize,
    what: impl FnOnce() -> String,
) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(Error::NoSpace) => {
            *nospace += 1;
            None
        }
        Err(e) => panic!("{}: {e:?}", what()),
    }
}

fn trace() -> bool {
    std::env::var("DFFS_MODEL_TRACE").is_ok()
}

thread_local! {
    /// The test running on this thread pages the block table's records (`records_ram: 0`,
    /// as `DFFS_MODEL_PAGED=1` does for every case): RAM holds a few block-table pages of
    /// records, and records leave it and are read back from flash all through the run.
    static PAGED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the block table's records paged ([`PAGED`]).
#[cfg(feature = "paged-records")]
fn paged(f: impl FnOnce()) {
    PAGED.with(|p| p.set(true));
    f();
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[cfg(feature = "nand")]
fn model_nand_slc() {
    let seeds = env("DFFS_MODEL_SEEDS", 4);
    let ops = env("DFFS_MODEL_OPS", 600) as usize;
    let mut nospace = 0;
    for seed in env("DFFS_MODEL_FIRST", 0)..seeds {
        nospace += run("nand-slc-128m", 40, 1000 + seed, ops);
    }
    eprintln!("nand-slc: {nospace} ENOSPC seen");
}

/// A sequence that once failed: seed 3002 on NOR reaches a nearly full device where a write
/// back in the middle of a write ran garbage collection, which moved the file's blocks while
/// the write still read its partial last block through the inode as it was before (`Corrupt`).
/// It is also the run that holds the ENOSPC bound of [`run_z`] to account: it sees ENOSPC many
/// times, each checked against the room for files. Since roots of few entries are written
/// short (FORMAT §8.4) the sequence's directories take so much less room that 32 blocks see
/// no ENOSPC (158 before): it runs on 28 (92 ENOSPC; 30 blocks see 5, 26 see 169).
#[test]
fn model_nor_regression_stale_inode_during_write() {
    let nospace = run("nor-qspi-16m", 28, 3002, 3000);
    assert!(
        nospace > 20,
        "only {nospace} ENOSPC: the bound was hardly exercised"
    );
}

#[test]
#[cfg(feature = "nand")]
fn model_nand_mlc() {
    let seeds = env("DFFS_MODEL_SEEDS", 3);
    let ops = env("DFFS_MODEL_OPS", 500) as usize;
    for seed in env("DFFS_MODEL_FIRST", 0)..seeds {
        run("nand-mlc-1g", 24, 2000 + seed, ops);
    }
}

/// The model runs with the block table's records paged from flash (DESIGN §12.1): on 1 MiB
/// and 2 MiB of 4 KiB NOR sectors (4 and 7 block-table pages of 84 records, 3 cached, so that
/// records leave RAM and are read back all through the run), also with failing programs and
/// erases, and on SLC NAND (one page: paged, never evicted).
#[test]
#[cfg(feature = "paged-records")]
fn model_paged_records() {
    paged(|| {
        let ops = env("DFFS_MODEL_OPS", 600) as usize;
        for seed in env("DFFS_MODEL_FIRST", 0)..env("DFFS_MODEL_SEEDS", 2) {
            run("nor-4k", 256, 6000 + seed, ops);
            run("nor-4k", 512, 6100 + seed, ops);
            run_faults_seed("nor-4k", 256, 6200 + seed, ops as u64);
            #[cfg(feature = "nand")]
            run("nand-slc-128m", 40, 6300 + seed, ops);
        }
    });
}

#[test]
fn model_nor() {
    let seeds = env("DFFS_MODEL_SEEDS", 3);
    let ops = env("DFFS_MODEL_OPS", 500) as usize;
    for seed in env("DFFS_MODEL_FIRST", 0)..seeds {
        run("nor-qspi-16m", 32, 3000 + seed, ops);
    }
}

/// The model run on a device that misbehaves: transient bit flips (NAND; corrected, or
/// uncorrectable and retried), programs and erases that fail (the block is swapped out or
/// retired). None of it may show through the API: every result must equal the model's.
/// (Stuck flips beyond the ECC are left to torture: they are real data loss, EIO by design.)
fn run_faults(kind: &str, blocks: u32, base: u64, seeds: u64, ops: u64) -> Stats {
    let mut all = Stats::default();
    for seed in env("DFFS_MODEL_FIRST", 0)..env("DFFS_MODEL_SEEDS", seeds) {
        let st = run_faults_seed(kind, blocks, base + seed, env("DFFS_MODEL_OPS", ops));
        all.corrected_reads += st.corrected_reads;
        all.uncorrectable_reads += st.uncorrectable_reads;
        all.program_failures += st.program_failures;
        all.erase_failures += st.erase_failures;
    }
    eprintln!("{kind} with faults: {all:?}");
    all
}

/// One seed of [`run_faults`].
fn run_faults_seed(kind: &str, blocks: u32, seed: u64, ops: u64) -> Stats {
    let nand = kind.starts_with("nand");
    let sim = SimOptions {
        bitflip_rate: if nand { 3e-6 } else { 0.0 },
        // NOR programs are small (a 64 KiB block takes hundreds): per program, its rate is
        // lower, or the device dies within the run.
        program_fail_rate: if nand { 1e-3 } else { 5e-5 },
        erase_fail_rate: 2e-3,
        ..SimOptions::seeded(seed)
    };
    run_on(kind, blocks, seed, ops as usize, 0, Some(sim)).1
}

/// A sequence that once failed: SLC seed 4008 with faults, where a 17,568-byte write admitted
/// with one block above the application's floor was refused half-way (`ENOSPC`, its `close`
/// too): each of its write-backs asked for a new block though its pages fit the data head's
/// open block, and the collection, checkpoint and bad-block swap the second one ran took three
/// blocks (DESIGN.md §15 item 21).
#[test]
#[cfg(feature = "nand")]
fn model_nand_slc_faults_regression_write_back_room() {
    let st = run_faults_seed("nand-slc-128m", 40, 4008, 600);
    assert!(st.program_failures > 0, "{st:?}");
}

/// Sequences that once failed at 1,000 operations, on a device that lost more than half of
/// its 40 blocks to failures: SLC seed 4002, where `open` for writing ran the recovery
/// checkpoint a cut had left owed and said `ENOSPC`, and seed 4012, where a head whose block
/// had failed a program, with no spare to swap it out, was resumed after a clean remount at
/// the failed page and programmed over it (`EIO`). (DESIGN.md §8, §11.)
///
/// And three that ended once the anchor area had lost all but one block to failures: seeds
/// 4046 and 4054, where an anchor failing at the start of its block found no free block of
/// the area to replace it, the free pool too short to take the anchors out (`EIO` from
/// every later checkpoint), and seed 4057, where a home block failing at a mount's restamp
/// found the area's one remaining block holding data (the mount said `NoSpace`). The
/// checkpoint now goes after the used pairs of the pair's other block (DESIGN.md §11).
/// Seed 4057 left the list on 2026-11-30: once recoveries read only the tags of the pages
/// commit runs may hold, the simulator (which draws bit flips per ECC codeword read) took it
/// another course, to a `sync` refused with 22 of its 40 blocks bad (DESIGN.md §15 item 18).
/// Seed 4012 left it on 2026-11-30: with 64 direct block pointers in a NAND inode (FORMAT §3)
/// its files need no index nodes, and the run goes another way, to a `close` refused with
/// `ENOSPC` with 20 of its 40 blocks bad (the class of DESIGN.md §15 item 3). Over seeds
/// 4000–4099 that change took the real failures from 7 to 1 (this one). Seed 4002 left it on
/// 2026-12-01: with directory roots of few entries written short (FORMAT §8.4) the run goes
/// another way, to a write refused with `EIO` with 23 of its 40 blocks bad (the class of
/// DESIGN.md §15 item 3).
///
/// And seed 4037, where a roaming anchor that failed found no replacement with five blocks
/// free outside the area (the least worn free blocks of the device were in the area or
/// swapped): every checkpoint said `NoSpace`, the first at 24.9% of the room for files with
/// 11 blocks bad (`Store::pick_roaming_anchor`).
#[test]
#[cfg(feature = "nand")]
fn model_nand_slc_faults_regression_long() {
    for seed in [4037, 4046, 4054] {
        let st = run_faults_seed("nand-slc-128m", 40, seed, 1000);
        assert!(st.program_failures > 0, "{st:?}");
    }
}

#[test]
#[cfg(feature = "nand")]
fn model_nand_slc_faults() {
    let st = run_faults("nand-slc-128m", 40, 4000, 4, 600);
    assert!(st.corrected_reads > 0, "{st:?}");
    assert!(st.program_failures > 0 && st.erase_failures > 0, "{st:?}");
}

#[test]
fn model_nor_faults() {
    // 1,500 operations: NOR erases are rare enough (full data blocks since file data fills
    // each block) that 500 saw no erase failure (nor 1,000 once the journal announced
    // erases: the operations moved).
    let st = run_faults("nor-qspi-16m", 32, 5000, 3, 1500);
    assert!(st.program_failures > 0 && st.erase_failures > 0, "{st:?}");
}

/// Runs the default number of seeds (or `DFFS_MODEL_SEEDS`) of `kind` with compression
/// `algo`, seeds from `base`.
#[cfg(feature = "compression")]
fn run_seeds_z(kind: &str, blocks: u32, base: u64, seeds: u64, ops: u64, algo: u8) {
    let seeds = env("DFFS_MODEL_SEEDS", seeds);
    let ops = env("DFFS_MODEL_OPS", ops) as usize;
    for seed in env("DFFS_MODEL_FIRST", 0)..seeds {
        run_z(kind, blocks, base + seed, ops, algo);
    }
}

#[test]
#[cfg(all(feature = "nand", feature = "compression"))]
fn model_nand_slc_lz4() {
    run_seeds_z(
        "nand-slc-128m",
        40,
        4000,
        3,
        600,
        dffs::format::compress::LZ4,
    );
}

#[test]
#[cfg(all(feature = "nand", feature = "compression"))]
fn model_nand_mlc_deflate() {
    run_seeds_z(
        "nand-mlc-1g",
        24,
        5000,
        2,
        500,
        dffs::format::compress::DEFLATE,
    );
}

#[test]
#[cfg(feature = "compression")]
fn model_nor_lz4() {
    run_seeds_z(
        "nor-qspi-16m",
        32,
        6000,
        2,
        500,
        dffs::format::compress::LZ4,
    );
}
