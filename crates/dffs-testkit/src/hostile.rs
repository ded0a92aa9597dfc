//! Shared by the hostile-input tests (`crates/dffs/tests/hostile.rs`,
//! `hostile_regressions.rs`) and the cargo-fuzz targets (`fuzz/`): small images on a
//! [`RamFlash`] with every kind of structure, a node scanner that can re-sign a
//! node after changing its body (so corruptions get past the CRC into the decoders), and a
//! bounded walk of a mounted file system.
//!
//! Everything here is deterministic: the same seed gives the same images and corruptions.

use std::collections::{BTreeMap, BTreeSet};

use dffs::format::codec::crc32c_parts;
use dffs::format::node::{NodeType, OobTag, NODE_MAGIC, OOB_TAG_LEN, TAG_DATA};
use dffs::{
    Config, Error, FileKind, Flash, FlashKind, FormatOptions, Fs, Geometry, OpenFlags, ROOT_INO,
};

pub use crate::ram_flash::*;
pub use dffs_sim::Rng;

/// Deterministic file content.
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed.wrapping_mul(0x1234_5678_9ABC_DEF1) ^ len as u64);
    let mut v = vec![0u8; len];
    r.fill(&mut v);
    // Mostly text-like bytes with runs, so some pages compress and some do not.
    for (i, b) in v.iter_mut().enumerate() {
        if (i / 512) % 3 == 1 {
            *b = b'a' + (*b % 26);
        }
    }
    v
}

// ----- images -------------------------------------------------------------------------------

/// A test image and what a full walk of it gives before any damage.
pub struct Image {
    /// Name, for messages.
    pub name: &'static str,
    /// The device.
    pub dev: RamFlash,
    /// What the walk of the undamaged image found.
    pub reference: Walk,
}

fn must<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("building image: {what}: {e:?}"))
}

fn put<F: Flash>(fs: &mut Fs<F>, parent: u32, name: &str, data: &[u8]) -> u32 {
    let st = must(fs.create(parent, name.as_bytes(), 0o644, 0, 0), name);
    let fh = must(fs.open(st.ino, OpenFlags::RW), name);
    let mut off = 0;
    for chunk in data.chunks(16 * 1024) {
        must(fs.write(fh, off, chunk), name);
        off += chunk.len() as u64;
    }
    must(fs.close(fh), name);
    st.ino
}

fn mkdir<F: Flash>(fs: &mut Fs<F>, parent: u32, name: &str) -> u32 {
    must(fs.mkdir(parent, name.as_bytes(), 0o755, 0, 0), name).ino
}

/// Sizes of the files in `/data`: empty, inline, one block, several blocks, a file with an index
/// node, and (per kind, if `big`) one whose index tree has two levels.
fn data_sizes(kind: FlashKind, big: bool) -> Vec<usize> {
    match kind {
        FlashKind::Nand if big => vec![0, 100, 2048, 9000, 70_000, 1_100_000],
        FlashKind::Nand => vec![0, 100, 2048, 9000, 70_000, 300_000],
        FlashKind::Nor => vec![0, 100, 256, 3000, 12_000, 40_000],
    }
}

/// Builds the base tree: nested directories, files of every size class, symlinks and a
/// directory with enough entries to need bucket pages.
fn base_tree<F: Flash>(fs: &mut Fs<F>, kind: FlashKind, many: usize) {
    let etc = mkdir(fs, ROOT_INO, "etc");
    put(fs, etc, "hostname", b"board\n");
    let sub = mkdir(fs, etc, "sub");
    let deep = mkdir(fs, sub, "deep");
    put(fs, deep, "file", &content(7, 3000));
    must(fs.symlink(etc, b"link", b"../data/f1", 0, 0), "symlink");
    must(
        fs.symlink(ROOT_INO, b"abs", b"/etc/hostname", 0, 0),
        "symlink",
    );
    let data = mkdir(fs, ROOT_INO, "data");
    // The two-level index on NAND only in the image with the large directory (it is the
    // costliest to read back in every case).
    for (i, n) in data_sizes(kind, many >= 100).into_iter().enumerate() {
        put(fs, data, &format!("f{i}"), &content(100 + i as u64, n));
    }
    let many_dir = mkdir(fs, ROOT_INO, "many");
    for i in 0..many {
        let name = format!("entry-with-a-longer-name-{i:04}");
        if i % 10 == 0 {
            mkdir(fs, many_dir, &name);
        } else {
            put(fs, many_dir, &name, &content(1000 + i as u64, i % 300));
        }
    }
    mkdir(fs, ROOT_INO, "empty");
}

/// Changes made after the base tree was checkpointed: they live in the journal.
fn journal_changes<F: Flash>(fs: &mut Fs<F>) {
    let data = must(fs.resolve(b"/data"), "resolve");
    let f3 = must(fs.resolve(b"/data/f3"), "resolve");
    let fh = must(fs.open(f3, OpenFlags::RW), "open");
    must(fs.write(fh, 1000, &content(55, 1500)), "write");
    must(fs.close(fh), "close");
    put(fs, data, "new", &content(56, 5000));
    must(fs.rename(data, b"f1", data, b"f1-renamed"), "rename");
    let many = must(fs.resolve(b"/many"), "resolve");
    must(fs.unlink(many, b"entry-with-a-longer-name-0003"), "unlink");
    must(fs.begin_transaction(), "tx");
    let d = mkdir(fs, ROOT_INO, "txdir");
    put(fs, d, "a", &content(57, 700));
    put(fs, d, "b", &content(58, 4000));
    must(fs.commit_transaction(), "commit");
    must(fs.sync(), "sync");
}

/// Formats and fills a device. `state`: 0 clean unmount, 1 synced journal tail (no checkpoint),
/// 2 a power cut in the middle of unsynced writes after a synced journal tail.
pub fn build(geo: Geometry, many: usize, state: u8) -> RamFlash {
    let dev = RamFlash::new(geo);
    let dev = must(Fs::format(dev, &FormatOptions::default()), "format");
    let mut fs = must(Fs::mount(dev, Config::smallest()), "mount");
    base_tree(&mut fs, geo.kind, many);
    if state == 0 {
        return must(fs.unmount(), "unmount");
    }
    let dev = must(fs.unmount(), "unmount");
    let mut fs = must(Fs::mount(dev, Config::smallest()), "mount");
    journal_changes(&mut fs);
    if state == 1 {
        return fs.into_flash();
    }
    fs.flash_mut().cut_at = Some(fs.flash().writes + 7);
    let r = (|| -> Result<(), Error> {
        let data = fs.resolve(b"/data")?;
        let st = fs.create(data, b"torn", 0o644, 0, 0)?;
        let fh = fs.open(st.ino, OpenFlags::RW)?;
        for i in 0..40 {
            fs.write(fh, i * 4096, &content(59 + i, 4096))?;
        }
        fs.fsync(fh)?;
        Ok(())
    })();
    assert!(r.is_err(), "the power cut did not happen");
    let mut dev = fs.into_flash();
    dev.off = false;
    dev.cut_at = None;
    dev
}

/// Builds the named test images (each walked before any damage to record the reference).
pub fn images() -> Vec<Image> {
    let mut v = Vec::new();
    for (name, geo, many, state) in [
        ("nand-clean", nand_geometry(32), 150, 0u8),
        ("nand-journal", nand_geometry(32), 40, 1),
        ("nand-cut", nand_geometry(32), 40, 2),
        ("nor-clean", nor_geometry(96), 150, 0),
        ("nor-journal", nor_geometry(96), 40, 1),
        ("nor-cut", nor_geometry(96), 40, 2),
        // 8 KiB blocks: a format of 4-byte address units (FORMAT §3).
        ("nor-large-journal", nor_large_geometry(48), 40, 1),
    ] {
        let dev = build(geo, many, state);
        let mut probe = dev.fresh_copy();
        probe.budget = 0;
        let mut fs = Fs::mount(probe, Config::smallest())
            .unwrap_or_else(|e| panic!("{name}: the undamaged image does not mount: {e:?}"));
        let reference = walk(&mut fs, &Limits::default());
        assert!(
            reference.errors.is_empty(),
            "{name}: the undamaged image has errors: {:?}",
            reference.errors
        );
        let rep = fs.fsck().unwrap_or_else(|e| panic!("{name}: fsck: {e:?}"));
        assert!(rep.is_clean(), "{name}: fsck: {:?}", rep.errors);
        v.push(Image {
            name,
            dev,
            reference,
        });
    }
    v
}

// ----- walking a mounted file system --------------------------------------------------------

/// Bounds of a walk, so that cycles and huge sizes cannot hang or exhaust it.
pub struct Limits {
    /// Entries read from one directory.
    pub dir_entries: usize,
    /// Operations (readdir entries, stats, reads) in all.
    pub ops: usize,
    /// Bytes read from one file.
    pub file_bytes: u64,
    /// Directory depth.
    pub depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            dir_entries: 4096,
            ops: 20_000,
            file_bytes: 4 << 20,
            depth: 64,
        }
    }
}

/// What a walk found: per path the inode and kind, file contents, link targets, errors.
#[derive(Default, Clone, Debug)]
pub struct Walk {
    /// path → (inode, kind).
    pub nodes: BTreeMap<String, (u32, FileKind)>,
    /// path → content of files read entirely.
    pub files: BTreeMap<String, Vec<u8>>,
    /// path → symlink target.
    pub links: BTreeMap<String, Vec<u8>>,
    /// (path, error) of every operation that failed.
    pub errors: Vec<(String, Error)>,
    /// The walk stopped at a limit.
    pub truncated: bool,
}

/// Reads everything reachable from the root: readdir, lookup, stat, read, readlink, with
/// bounds. Errors are recorded, never fatal.
pub fn walk<F: Flash>(fs: &mut Fs<F>, lim: &Limits) -> Walk {
    let mut w = Walk::default();
    let mut ops = 0usize;
    let mut seen = BTreeSet::new();
    seen.insert(ROOT_INO);
    let mut stack = vec![(String::new(), ROOT_INO, 0usize)];
    if let Err(e) = fs.stat(ROOT_INO) {
        w.errors.push(("/".into(), e));
    }
    while let Some((path, ino, depth)) = stack.pop() {
        let mut ents = Vec::new();
        let r = fs.readdir(ino, 0, &mut |e| {
            ents.push(e);
            ents.len() < lim.dir_entries
        });
        ops += ents.len() + 1;
        if let Err(e) = r {
            w.errors.push((format!("{path}/"), e));
        }
        if ents.len() >= lim.dir_entries {
            w.truncated = true;
        }
        for e in ents {
            if ops > lim.ops {
                w.truncated = true;
                return w;
            }
            ops += 1;
            let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
            match fs.lookup(ino, &e.name) {
                Ok(st) => {
                    if st.ino != e.ino || st.kind != e.kind {
                        w.errors.push((p.clone(), Error::Corrupt));
                    }
                }
                Err(err) => w.errors.push((p.clone(), err)),
            }
            if let Err(err) = fs.stat(e.ino) {
                w.errors.push((p.clone(), err));
            }
            w.nodes.insert(p.clone(), (e.ino, e.kind));
            match e.kind {
                FileKind::Dir => {
                    if depth + 1 < lim.depth && seen.insert(e.ino) {
                        stack.push((p, e.ino, depth + 1));
                    } else {
                        w.truncated = true;
                    }
                }
                FileKind::Symlink => match fs.readlink(e.ino) {
                    Ok(t) => {
                        w.links.insert(p, t);
                    }
                    Err(err) => w.errors.push((p, err)),
                },
                FileKind::File => {
                    let (content, err) = read_file(fs, e.ino, lim.file_bytes, &mut ops);
                    match err {
                        None => {
                            w.files.insert(p, content);
                        }
                        Some(err) => w.errors.push((p, err)),
                    }
                }
            }
        }
    }
    w
}

/// Reads a whole file (at most `max` bytes); the error of the first failing call, if any.
pub fn read_file<F: Flash>(
    fs: &mut Fs<F>,
    ino: u32,
    max: u64,
    ops: &mut usize,
) -> (Vec<u8>, Option<Error>) {
    let fh = match fs.open(ino, OpenFlags::READ) {
        Ok(fh) => fh,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut out = Vec::new();
    let mut err = None;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        *ops += 1;
        match fs.read(fh, out.len() as u64, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n.min(buf.len())]);
                if out.len() as u64 >= max {
                    break;
                }
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    if let Err(e) = fs.close(fh) {
        err.get_or_insert(e);
    }
    (out, err)
}

// ----- finding and damaging structures ------------------------------------------------------

/// A node found on the device (by its header and a matching CRC).
#[derive(Clone, Copy, Debug)]
pub struct FoundNode {
    /// Byte offset in the device's data areas.
    pub at: usize,
    /// Node type.
    pub typ: NodeType,
    /// Length of header and body.
    pub len: usize,
    /// Sequence number.
    pub seq: u64,
}

/// Whether bytes at `at` are a node with a valid CRC (not crossing `limit`).
fn node_at(data: &[u8], at: usize, limit: usize) -> Option<FoundNode> {
    let b = data.get(at..at + 24)?;
    if u16::from_le_bytes([b[0], b[1]]) != NODE_MAGIC {
        return None;
    }
    let typ = NodeType::from_u8(b[2])?;
    let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if len < 24 || at + len > limit {
        return None;
    }
    let crc = u32::from_le_bytes([b[20], b[21], b[22], b[23]]);
    if crc32c_parts(&[&data[at..at + 20], &data[at + 24..at + len]]) != crc {
        return None;
    }
    let seq = u64::from_le_bytes(b[8..16].try_into().unwrap());
    Some(FoundNode { at, typ, len, seq })
}

/// Every valid node on the device (at 4-byte steps: the smallest address unit, NOR's since
/// 2026-12-02, NAND's is 8; never crossing an erase block).
pub fn scan_nodes(dev: &RamFlash) -> Vec<FoundNode> {
    let bs = dev.geo.block_size() as usize;
    let mut v = Vec::new();
    let mut at = 0;
    while at + 24 <= dev.data.len() {
        let limit = (at / bs + 1) * bs;
        match node_at(&dev.data, at, limit) {
            Some(n) => {
                v.push(n);
                at += n.len.div_ceil(4) * 4;
            }
            None => at += 4,
        }
    }
    v
}

/// Recomputes the CRC of the node at `at` (its header's length decides the extent); false if
/// there is no plausible header there.
pub fn resign(data: &mut [u8], at: usize) -> bool {
    let Some(b) = data.get(at..at + 24) else {
        return false;
    };
    if u16::from_le_bytes([b[0], b[1]]) != NODE_MAGIC {
        return false;
    }
    let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    if len < 24 || at + len > data.len() {
        return false;
    }
    let crc = crc32c_parts(&[&data[at..at + 20], &data[at + 24..at + len]]);
    data[at + 20..at + 24].copy_from_slice(&crc.to_le_bytes());
    true
}

/// Re-signs every plausible node header at 4-byte alignment (the smallest address unit; what
/// the fuzz targets do so that mutations reach the decoders instead of dying at the CRC).
pub fn resign_all(dev: &mut RamFlash) {
    let mut at = 0;
    while at + 24 <= dev.data.len() {
        if dev.data[at] == (NODE_MAGIC & 0xFF) as u8
            && dev.data[at + 1] == (NODE_MAGIC >> 8) as u8
            && NodeType::from_u8(dev.data[at + 2]).is_some()
        {
            resign(&mut dev.data, at);
        }
        at += 4;
    }
}

/// Re-encodes the OOB tag check value of `page` after a change.
pub fn resign_tag(dev: &mut RamFlash, page: u32) {
    let o = dev.oob_mut(page);
    if o.len() >= OOB_TAG_LEN {
        let c = dffs::format::codec::crc32c(&o[..18]) as u16;
        o[18..20].copy_from_slice(&c.to_le_bytes());
    }
}

/// NAND pages holding raw file data, with their owner inode (from the OOB tag).
pub fn nand_data_pages(dev: &RamFlash) -> Vec<(u32, u32)> {
    if dev.geo.kind != FlashKind::Nand {
        return Vec::new();
    }
    (0..dev.geo.total_pages())
        .filter_map(|p| match OobTag::decode(dev.oob_of(p), dev.geo.page_size) {
            Ok(Some(t)) if t.kind == TAG_DATA => Some((p, t.ino)),
            _ => None,
        })
        .collect()
}

/// Mounts, walks and checks a possibly damaged device. Returns the mount error, or the walk and
/// whether fsck ran (its report is only required to come back).
pub fn exercise(dev: RamFlash, lim: &Limits) -> Result<(Walk, bool), Error> {
    let mut fs = Fs::mount(dev, Config::smallest())?;
    let w = walk(&mut fs, lim);
    let fsck_clean = match fs.fsck() {
        Ok(rep) => rep.is_clean(),
        Err(_) => false,
    };
    // Collecting and writing on a damaged file system must not panic either.
    for _ in 0..2 {
        if fs.gc_step(32).is_err() {
            break;
        }
    }
    let _ = fs.mkdir(ROOT_INO, b"after-damage", 0o755, 0, 0);
    let _ = fs.sync();
    let _ = fs.unmount();
    Ok((w, fsck_clean))
}

// ----- tiny images (fuzzing) ----------------------------------------------------------------

/// A small image on a tiny geometry: nested directories, an inline, a multi-block and an
/// indexed file, symlinks, a directory of 24 entries; `journal`: a synced journal tail after the
/// last checkpoint.
pub fn build_tiny(geo: Geometry, journal: bool) -> RamFlash {
    let dev = RamFlash::new(geo);
    let dev = must(Fs::format(dev, &FormatOptions::default()), "format");
    let mut fs = must(Fs::mount(dev, Config::smallest()), "mount");
    let bs = match geo.kind {
        FlashKind::Nand => geo.page_size as usize,
        FlashKind::Nor => geo.page_size as usize,
    };
    let d = mkdir(&mut fs, ROOT_INO, "d");
    let sub = mkdir(&mut fs, d, "sub");
    put(&mut fs, sub, "small", b"hello\n");
    put(&mut fs, d, "multi", &content(1, 3 * bs + 17));
    put(&mut fs, ROOT_INO, "indexed", &content(2, 20 * bs + 5));
    must(fs.symlink(d, b"ln", b"sub/small", 0, 0), "symlink");
    let many = mkdir(&mut fs, ROOT_INO, "many");
    for i in 0..24 {
        put(
            &mut fs,
            many,
            &format!("n{i:02}"),
            &content(10 + i, i as usize * 7),
        );
    }
    let mut dev = must(fs.unmount(), "unmount");
    if journal {
        let mut fs = must(Fs::mount(dev, Config::smallest()), "mount");
        let multi = must(fs.resolve(b"/d/multi"), "resolve");
        let fh = must(fs.open(multi, OpenFlags::RW), "open");
        must(fs.write(fh, 5, &content(3, bs)), "write");
        must(fs.close(fh), "close");
        must(fs.rename(d, b"multi", ROOT_INO, b"moved"), "rename");
        must(fs.unlink(many, b"n03"), "unlink");
        put(&mut fs, sub, "late", &content(4, 2 * bs));
        must(fs.sync(), "sync");
        dev = fs.into_flash();
    }
    dev
}

// ----- fuzz inputs (shared by the fuzz targets and the regression tests) --------------------

/// The four tiny base images: (NAND, NOR) × (clean, journal tail).
pub fn tiny_base(nor: bool, journal: bool) -> &'static RamFlash {
    static BASES: std::sync::OnceLock<Vec<RamFlash>> = std::sync::OnceLock::new();
    let v = BASES.get_or_init(|| {
        let mut v = Vec::new();
        for g in [tiny_nand_geometry(), tiny_nor_geometry()] {
            for j in [false, true] {
                v.push(build_tiny(g, j));
            }
        }
        v
    });
    &v[(nor as usize) * 2 + journal as usize]
}

/// The tiny NOR base images of 8 KiB erase blocks ([`tiny_nor_large_geometry`]), whose
/// format takes 4-byte address units: (clean, journal tail).
pub fn tiny_nor_large_base(journal: bool) -> &'static RamFlash {
    static BASES: std::sync::OnceLock<Vec<RamFlash>> = std::sync::OnceLock::new();
    let v = BASES.get_or_init(|| {
        [false, true]
            .into_iter()
            .map(|j| build_tiny(tiny_nor_large_geometry(), j))
            .collect()
    });
    &v[journal as usize]
}

/// Reads input bytes; past the end everything reads as zero.
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    /// Next byte.
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    /// Next little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    /// Next little-endian 24-bit number.
    pub fn u24(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), 0])
    }
    /// Whether anything is left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Applies one patch from the input to the device's raw image (data areas, then the free spare
/// bytes): 0 overwrite, 1 xor, 2 fill, 3 unreadable page, 4 bad block, 5 copy a page, 6 a
/// re-signed 32-bit field of the node found at or after the offset.
pub fn apply_patch(dev: &mut RamFlash, inp: &mut Input<'_>) {
    let op = inp.u8() % 7;
    let raw_len = dev.data.len() + dev.oob.len();
    let off = inp.u24() as usize % raw_len;
    let len = inp.u8() as usize;
    let pages = dev.geo.total_pages();
    let page = ((off % dev.data.len()) / dev.page_size()) as u32;
    match op {
        0 | 1 => {
            for i in 0..len {
                let b = inp.u8();
                let v = if op == 0 {
                    b
                } else {
                    b ^ dev.raw_byte(off + i)
                };
                dev.set_raw_byte(off + i, v);
            }
        }
        2 => {
            let b = inp.u8();
            for i in 0..len {
                dev.set_raw_byte(off + i, b);
            }
        }
        3 => {
            dev.uncorrectable.insert(page);
        }
        4 => {
            let b = dev.geo.block_of(page);
            dev.bad[b as usize] = true;
        }
        5 => {
            let to = inp.u24() % pages;
            let d = dev.page(page).to_vec();
            let o = dev.oob_of(page).to_vec();
            dev.page_mut(to).copy_from_slice(&d);
            dev.oob_mut(to).copy_from_slice(&o);
        }
        _ => {
            let value = u32::from_le_bytes([inp.u8(), inp.u8(), inp.u8(), inp.u8()]);
            let start = (off % dev.data.len()) & !3;
            let mut at = start;
            let mut found = None;
            while at + 24 <= dev.data.len() && at < start + 4096 {
                if dev.data[at..at + 2] == NODE_MAGIC.to_le_bytes() {
                    found = Some(at);
                    break;
                }
                at += 4;
            }
            if let Some(at) = found {
                let nlen =
                    u32::from_le_bytes(dev.data[at + 4..at + 8].try_into().unwrap()) as usize;
                if nlen > 28 && at + nlen <= dev.data.len() {
                    let f = at + 24 + (len * 4) % (nlen - 27);
                    dev.data[f..f + 4].copy_from_slice(&value.to_le_bytes());
                    resign(&mut dev.data, at);
                }
            }
        }
    }
}

/// The device a fuzz input describes. First byte: bit 0 NOR, bit 1 journal tail, bit 2 re-sign
/// every node afterwards, bit 3 start from an erased device, bit 4 the rest is a raw image
/// (data areas then spare bytes) laid over the start of the device, bit 5 (with bit 0) NOR of
/// 8 KiB blocks and 4-byte address units; otherwise the rest is patches (see
/// [`apply_patch`]), at most `max_patches`.
pub fn device_from(inp: &mut Input<'_>, max_patches: usize) -> RamFlash {
    let mode = inp.u8();
    let nor = mode & 1 != 0;
    let large = nor && mode & 32 != 0;
    let mut dev = match (mode & 8 != 0, large) {
        (true, true) => RamFlash::new(tiny_nor_large_geometry()),
        (true, false) if nor => RamFlash::new(tiny_nor_geometry()),
        (true, false) => RamFlash::new(tiny_nand_geometry()),
        (false, true) => tiny_nor_large_base(mode & 2 != 0).fresh_copy(),
        (false, false) => tiny_base(nor, mode & 2 != 0).fresh_copy(),
    };
    if mode & 16 != 0 {
        dev.load_raw(inp.0);
        inp.0 = &[];
    } else {
        let mut n = 0;
        while !inp.is_empty() && n < max_patches {
            apply_patch(&mut dev, inp);
            n += 1;
        }
    }
    if mode & 4 != 0 {
        resign_all(&mut dev);
    }
    dev
}

/// The `mount` fuzz target: a damaged or arbitrary tiny image is mounted, walked, fsck'd and
/// written to.
pub fn fuzz_mount(data: &[u8]) {
    let mut inp = Input(data);
    let mut dev = device_from(&mut inp, usize::MAX);
    dev.budget = 2_000_000;
    let _ = exercise(dev, &Limits::default());
}

const DIRS: [&[u8]; 5] = [b"/", b"/d", b"/d/sub", b"/many", b"/new"];
const NAMES: [&[u8]; 8] = [
    b"a", b"small", b"multi", b"n01", b"indexed", b"new", b"ln", b"sub",
];

fn pick_path(inp: &mut Input<'_>) -> Vec<u8> {
    let d = DIRS[inp.u8() as usize % DIRS.len()];
    let n = NAMES[inp.u8() as usize % NAMES.len()];
    let mut p = d.to_vec();
    if p.len() > 1 {
        p.push(b'/');
    }
    p.extend_from_slice(n);
    p
}

/// The `ops` fuzz target: a tiny image, up to 8 patches (first byte after the mode says how
/// many), then a sequence of operations; after each remount and at the end a walk and fsck.
pub fn fuzz_ops(data: &[u8]) {
    // Mode byte as for `mount` (never a raw image: the operations follow), then the number of
    // patches, the patches, the operations.
    let mode = data.first().copied().unwrap_or(0) & !16;
    let mut inp = Input(data.get(1..).unwrap_or(&[]));
    let npatch = inp.u8() as usize % 9;
    let mut dev = device_from(&mut Input(&[mode]), 0);
    for _ in 0..npatch {
        apply_patch(&mut dev, &mut inp);
    }
    if mode & 4 != 0 {
        resign_all(&mut dev);
    }
    dev.budget = 4_000_000;
    let Ok(mut fs) = Fs::mount(dev, Config::smallest()) else {
        return;
    };
    let inp = &mut inp;
    let mut fhs: Vec<dffs::Fh> = Vec::new();
    let mut steps = 0;
    while !inp.is_empty() && steps < 64 {
        steps += 1;
        let op = inp.u8() % 18;
        match op {
            0 | 1 => {
                let p = pick_path(inp);
                if let Ok((parent, name)) = fs.resolve_parent(&p).map(|(a, b)| (a, b.to_vec())) {
                    let _ = if op == 0 {
                        fs.create(parent, &name, 0o644, 0, 0).map(|_| ())
                    } else {
                        fs.mkdir(parent, &name, 0o755, 0, 0).map(|_| ())
                    };
                }
            }
            2 => {
                let p = pick_path(inp);
                let flags = if inp.u8() & 1 == 0 {
                    OpenFlags::RW
                } else {
                    OpenFlags::READ
                };
                if let Ok(ino) = fs.resolve(&p) {
                    if let Ok(fh) = fs.open(ino, flags) {
                        fhs.push(fh);
                    }
                }
            }
            3 | 4 => {
                if fhs.is_empty() {
                    continue;
                }
                let fh = fhs[inp.u8() as usize % fhs.len()];
                let off = inp.u16() as u64 * if inp.u8() & 1 == 0 { 1 } else { 61 };
                let len = inp.u16() as usize % 5000;
                if op == 3 {
                    let _ = fs.write(fh, off, &content(off, len));
                } else {
                    let mut buf = vec![0u8; len];
                    let _ = fs.read(fh, off, &mut buf);
                }
            }
            5 => {
                if fhs.is_empty() {
                    continue;
                }
                let fh = fhs[inp.u8() as usize % fhs.len()];
                let _ = fs.truncate(fh, inp.u16() as u64 * 7);
            }
            6 => {
                if let Some(fh) = fhs.pop() {
                    let _ = fs.close(fh);
                }
            }
            7 | 8 => {
                let p = pick_path(inp);
                if let Ok((parent, name)) = fs.resolve_parent(&p).map(|(a, b)| (a, b.to_vec())) {
                    let _ = if op == 7 {
                        fs.unlink(parent, &name)
                    } else {
                        fs.rmdir(parent, &name)
                    };
                }
            }
            9 => {
                let a = pick_path(inp);
                let b = pick_path(inp);
                let pa = fs.resolve_parent(&a).map(|(x, n)| (x, n.to_vec()));
                let pb = fs.resolve_parent(&b).map(|(x, n)| (x, n.to_vec()));
                if let (Ok((da, na)), Ok((db, nb))) = (pa, pb) {
                    let _ = fs.rename(da, &na, db, &nb);
                }
            }
            10 => {
                let p = pick_path(inp);
                if let Ok((parent, name)) = fs.resolve_parent(&p).map(|(a, b)| (a, b.to_vec())) {
                    let _ = fs.symlink(parent, &name, b"../target", 0, 0);
                }
            }
            11 => {
                let d = DIRS[inp.u8() as usize % DIRS.len()];
                if let Ok(ino) = fs.resolve(d) {
                    let mut n = 0;
                    let _ = fs.readdir(ino, 0, &mut |_| {
                        n += 1;
                        n < 4096
                    });
                }
            }
            12 => {
                let _ = fs.sync();
            }
            13 => {
                let _ = fs.gc_step(inp.u8() as u32);
            }
            14 => {
                let _ = fs.begin_transaction();
            }
            15 => {
                let _ = if inp.u8() & 1 == 0 {
                    fs.commit_transaction()
                } else {
                    fs.abort_transaction()
                };
            }
            16 => {
                let _ = fs.checkpoint();
            }
            _ => {
                // Remount: cleanly or as after a power cut.
                fhs.clear();
                let clean = inp.u8() & 1 == 0;
                let dev = if clean {
                    match fs.try_unmount() {
                        Ok(d) => d,
                        Err((_, d)) => d,
                    }
                } else {
                    fs.into_flash()
                };
                match Fs::mount(dev, Config::smallest()) {
                    Ok(f) => fs = f,
                    Err(_) => return,
                }
            }
        }
    }
    let _ = walk(&mut fs, &Limits::default());
    let _ = fs.fsck();
}
