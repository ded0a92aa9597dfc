//! Device shapes the format must serve or refuse cleanly, and NOR data integrity:
//!
//! - NAND with fewer free OOB bytes than the data-page tag needs is refused at format with
//!   `NotSupported` (it used to format, write and sync, then fail every read after a remount);
//! - `embedded-storage` NOR drivers with 16- and 32-byte write units work through
//!   `NorFlashDevice` (they used to fail format with a bare `Io`): a strict mock driver refuses
//!   unaligned writes and writes that would set a bit;
//! - a bit of NOR file data that changes on flash is an error on read and in fsck, never
//!   silently wrong data (NOR data CRCs used to be unchecked);
//! - NOR blocks larger than 4 KiB take 4-byte address units and 256-byte index nodes, 4 KiB
//!   sectors keep 8-byte units (FORMAT §3).

use dffs::format::codec::{Reader, Writer};
use dffs::format::params::{HeadLayout, LogKind, Params};
use dffs::Geometry;
use dffs::{Config, Error, FormatOptions, Fs, NorFlashDevice, OpenFlags, ROOT_INO};
use dffs_testkit::ram_flash::{nand_geometry, nor_geometry, RamFlash};
use embedded_storage::nor_flash::{
    ErrorType, NorFlash, NorFlashError, NorFlashErrorKind, ReadNorFlash,
};

fn put<F: dffs::Flash>(fs: &mut Fs<F>, name: &str, data: &[u8]) {
    let st = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0).unwrap();
    let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
    assert_eq!(fs.write(fh, 0, data).unwrap(), data.len());
    fs.fsync(fh).unwrap();
    fs.close(fh).unwrap();
}

fn get<F: dffs::Flash>(fs: &mut Fs<F>, name: &str) -> Result<Vec<u8>, Error> {
    let ino = fs.lookup(ROOT_INO, name.as_bytes())?.ino;
    let size = fs.stat(ino)?.size as usize;
    let fh = fs.open(ino, OpenFlags::READ)?;
    let mut buf = vec![0u8; size];
    let r = fs.read(fh, 0, &mut buf);
    fs.close(fh)?;
    let n = r?;
    buf.truncate(n);
    Ok(buf)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

#[test]
fn nand_with_too_few_free_oob_bytes_is_refused_at_format() {
    for free in [0u32, 4, 8, 12, 16, 19] {
        let mut geo = nand_geometry(64);
        geo.oob_free_len = free;
        let dev = RamFlash::new(geo);
        match Fs::format(dev, &FormatOptions::default()) {
            Ok(_) => panic!("{free} free OOB bytes: format succeeded"),
            Err(e) => assert_eq!(e, Error::NotSupported, "{free} free OOB bytes"),
        }
    }
    // And enough free bytes format, write, remount and read back.
    let mut geo = nand_geometry(64);
    geo.oob_free_len = 20;
    let dev = Fs::format(RamFlash::new(geo), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    let data = pattern(7, 10_000);
    put(&mut fs, "f", &data);
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    assert_eq!(get(&mut fs, "f").unwrap(), data);
}

/// A strict RAM NOR driver with a `W`-byte write unit and 4 KiB erase sectors.
struct StrictNor<const W: usize> {
    mem: Vec<u8>,
    writes: u64,
}

#[derive(Debug)]
struct MockError(NorFlashErrorKind);

impl NorFlashError for MockError {
    fn kind(&self) -> NorFlashErrorKind {
        self.0
    }
}

impl<const W: usize> ErrorType for StrictNor<W> {
    type Error = MockError;
}

impl<const W: usize> ReadNorFlash for StrictNor<W> {
    const READ_SIZE: usize = 1;
    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), MockError> {
        let o = offset as usize;
        if o + bytes.len() > self.mem.len() {
            return Err(MockError(NorFlashErrorKind::OutOfBounds));
        }
        bytes.copy_from_slice(&self.mem[o..o + bytes.len()]);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.mem.len()
    }
}

impl<const W: usize> NorFlash for StrictNor<W> {
    const WRITE_SIZE: usize = W;
    const ERASE_SIZE: usize = 4096;
    fn erase(&mut self, from: u32, to: u32) -> Result<(), MockError> {
        let (f, t) = (from as usize, to as usize);
        if f % 4096 != 0 || t % 4096 != 0 {
            return Err(MockError(NorFlashErrorKind::NotAligned));
        }
        if t > self.mem.len() || f > t {
            return Err(MockError(NorFlashErrorKind::OutOfBounds));
        }
        self.mem[f..t].fill(0xFF);
        Ok(())
    }
    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), MockError> {
        let o = offset as usize;
        if o % W != 0 || bytes.len() % W != 0 {
            return Err(MockError(NorFlashErrorKind::NotAligned));
        }
        if o + bytes.len() > self.mem.len() {
            return Err(MockError(NorFlashErrorKind::OutOfBounds));
        }
        // A write unit is programmed once between erases (ECC'd NOR): every byte of it must
        // still be erased.
        if self.mem[o..o + bytes.len()].iter().any(|&b| b != 0xFF) {
            return Err(MockError(NorFlashErrorKind::Other));
        }
        self.mem[o..o + bytes.len()].copy_from_slice(bytes);
        self.writes += 1;
        Ok(())
    }
}

fn nor_with_write_unit<const W: usize>() {
    let drv = StrictNor::<W> {
        mem: vec![0xFF; 1 << 20],
        writes: 0,
    };
    let dev = NorFlashDevice::new(drv, 256).unwrap();
    assert_eq!(dev.geometry_unit(), W as u32);
    let dev = Fs::format(dev, &FormatOptions::default())
        .unwrap_or_else(|e| panic!("{W}-byte write unit: format: {e:?}"));
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| (format!("f{i}"), pattern(i as u8, 100 + 997 * i)))
        .collect();
    for (n, d) in &files {
        put(&mut fs, n, d);
    }
    for (n, d) in &files {
        assert_eq!(
            &get(&mut fs, n).unwrap(),
            d,
            "{W}-byte unit: {n} before remount"
        );
    }
    // Enough data to fill and collect blocks: overwrite every file a few times.
    for round in 0..4u8 {
        for (n, d) in &files {
            let ino = fs.lookup(ROOT_INO, n.as_bytes()).unwrap().ino;
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            let v: Vec<u8> = d.iter().map(|b| b ^ round ^ 0x5A).collect();
            fs.write(fh, 0, &v).unwrap();
            fs.write(fh, 0, d).unwrap();
            fs.close(fh).unwrap();
        }
        fs.gc_step(1000).unwrap();
    }
    // Overwrite the middle of one and append to another.
    let ino = fs.lookup(ROOT_INO, b"f3").unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    fs.write(fh, 500, &[0x42; 333]).unwrap();
    fs.close(fh).unwrap();
    let mut expect = files.clone();
    expect[3].1[500..833].fill(0x42);
    let ino = fs.lookup(ROOT_INO, b"f5").unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let end = expect[5].1.len() as u64;
    fs.write(fh, end, b"tail").unwrap();
    fs.close(fh).unwrap();
    expect[5].1.extend_from_slice(b"tail");
    let dev = fs.unmount().unwrap();
    let drv = dev.into_inner();
    assert!(drv.writes > 0);
    let dev = NorFlashDevice::new(drv, 256).unwrap();
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    for (n, d) in &expect {
        assert_eq!(&get(&mut fs, n).unwrap(), d, "{W}-byte unit: {n}");
    }
    assert!(fs.fsck().unwrap().is_clean());
}

trait Unit {
    fn geometry_unit(&self) -> u32;
}

impl<F: NorFlash> Unit for NorFlashDevice<F> {
    fn geometry_unit(&self) -> u32 {
        dffs::Flash::geometry(self).program_unit
    }
}

#[test]
fn nor_drivers_with_16_byte_write_units_work() {
    nor_with_write_unit::<16>();
}

#[test]
fn nor_drivers_with_32_byte_write_units_work() {
    nor_with_write_unit::<32>();
}

/// Every position where `needle` starts in `hay`.
fn find_all(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    hay.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn a_changed_bit_of_nor_file_data_is_an_error_not_wrong_data() {
    let geo = nor_geometry(64);
    let dev = Fs::format(RamFlash::new(geo), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    let data = pattern(3, 8192);
    put(&mut fs, "victim", &data);
    put(&mut fs, "other", &pattern(9, 3000));
    let mut dev = fs.unmount().unwrap();
    // The file's bytes are on flash as written (no compression): find a 64-byte run of them and
    // clear one bit in it, as a NOR cell that lost charge would.
    let probe = &data[4000..4064];
    let at = find_all(&dev.data, probe);
    assert_eq!(at.len(), 1, "the probe is found once on flash");
    let byte = at[0] + 17;
    let bit = (0..8).find(|b| dev.data[byte] & (1 << b) != 0).unwrap();
    dev.data[byte] &= !(1 << bit);
    let mut fs = Fs::mount(dev, Config::smallest()).unwrap();
    match get(&mut fs, "victim") {
        Ok(d) => {
            assert_ne!(
                d, data,
                "the read returned the damaged bytes as if they were good"
            );
            panic!("read of a damaged NOR data block succeeded");
        }
        Err(e) => assert!(matches!(e, Error::Io | Error::Corrupt), "{e:?}"),
    }
    // The other file is intact and fsck reports the damage.
    assert_eq!(get(&mut fs, "other").unwrap(), pattern(9, 3000));
    let rep = fs.fsck().unwrap();
    assert!(!rep.is_clean(), "fsck must report the damaged data block");
}

/// `nor_geometry`'s chip with erase blocks of `pages` 256-byte pages.
fn nor(pages: u32, blocks: u32) -> Geometry {
    Geometry {
        pages_per_block: pages,
        ..nor_geometry(blocks)
    }
}

/// NOR blocks larger than 4 KiB take 4-byte units (a 260-byte slot per 256-byte block) and
/// 256-byte index nodes; 4 KiB sectors keep 8-byte units (15 slots per sector either way) and
/// their fan-outs; a write unit of 8 bytes raises the unit to it; NAND images with 4-byte units
/// are corrupt, NOR ones are read.
#[test]
fn nor_units_and_index_nodes_by_block_size() {
    let f = |g: Geometry| Params::for_geometry(g, &FormatOptions::default()).unwrap();
    let big = f(nor(256, 256)); // 64 KiB blocks
    assert_eq!(
        (
            big.addr_shift,
            big.data_slot(),
            big.index_node,
            big.index_fanout()
        ),
        (2, 260, 256, 56)
    );
    assert_eq!((65536 - big.data_header()) / big.data_slot(), 251);
    let mid = f(nor(128, 512)); // 32 KiB blocks
    assert_eq!(
        (mid.addr_shift, mid.data_slot(), mid.index_node),
        (2, 260, 256)
    );
    let small = f(nor(16, 4096)); // 4 KiB sectors, 16 MiB
    assert_eq!(
        (small.addr_shift, small.data_slot(), small.index_fanout()),
        (3, 264, 32)
    );
    assert_eq!((4096 - small.data_header()) / small.data_slot(), 15);
    assert_eq!(f(nor(16, 256)).index_fanout(), 64); // 1 MiB of 4 KiB sectors
    let mut g = nor(256, 256);
    g.program_unit = 8;
    assert_eq!(f(g).addr_shift, 3);
    // Read back: a NOR image of 4-byte units decodes; the same shift on NAND is corrupt.
    let mut p = big;
    p.anchors = [0, 1];
    let mut w = Writer::default();
    p.encode(&mut w);
    assert_eq!(Params::decode(&mut Reader::new(&w.buf)), Ok(p));
    let mut q = f(nand_geometry(1024));
    q.anchors = [0, 1];
    q.addr_shift = 2;
    assert_eq!(q.check(), Err(Error::Corrupt));
}

/// Head layouts by device size (FORMAT §6.3): NOR of fewer than 128 blocks takes `Compact`
/// (journal, metadata, hot data, cold data), 128 to 255 blocks `Merged` (five heads), and so
/// does NAND of fewer than 256; 256 and more take `Separate` (seven). Each layout is encoded
/// and read back from a checkpoint, and a `Compact` device keeps inodes in the metadata
/// head's blocks and hot and cold data in blocks of their own.
#[test]
fn head_layouts_by_device_size() {
    for (blocks, layout, heads) in [
        (24, HeadLayout::Compact, 4),
        (127, HeadLayout::Compact, 4),
        (128, HeadLayout::Merged, 5),
        (255, HeadLayout::Merged, 5),
        (256, HeadLayout::Separate, 7),
    ] {
        let dev = Fs::format(RamFlash::new(nor(256, blocks)), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        assert_eq!(
            (fs.params().heads, fs.params().head_count()),
            (layout, heads),
            "{blocks} blocks"
        );
        put(&mut fs, "a", &pattern(1, 70_000));
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        assert_eq!(fs.params().heads, layout, "{blocks} blocks, read back");
        assert_eq!(get(&mut fs, "a").unwrap(), pattern(1, 70_000));
        assert!(fs.fsck().unwrap().is_clean(), "{blocks} blocks: fsck");
    }
    for (blocks, layout) in [
        (32, HeadLayout::Merged),
        (127, HeadLayout::Merged),
        (256, HeadLayout::Separate),
    ] {
        let p = Params::for_geometry(nand_geometry(blocks), &FormatOptions::default()).unwrap();
        assert_eq!(p.heads, layout, "NAND of {blocks} blocks");
    }
    let p = Params::for_geometry(nor(256, 32), &FormatOptions::default()).unwrap();
    let meta = p.head_of(LogKind::Index);
    for kind in [LogKind::Map, LogKind::Dir, LogKind::Inode] {
        assert_eq!(p.head_of(kind), meta, "{kind:?}");
    }
    let heads = [
        LogKind::Journal,
        LogKind::Index,
        LogKind::DataHot,
        LogKind::DataCold,
    ]
    .map(|k| p.head_of(k));
    assert_eq!(heads, [0, 1, 2, 3]);
    // The layout's code (2) decodes; a code past the last is corrupt.
    let mut p = p;
    p.anchors = [0, 1];
    let mut w = Writer::default();
    p.encode(&mut w);
    assert_eq!(Params::decode(&mut Reader::new(&w.buf)), Ok(p));
    let mut merged = Writer::default();
    Params {
        heads: HeadLayout::Merged,
        ..p
    }
    .encode(&mut merged);
    let at: Vec<usize> = (0..w.buf.len())
        .filter(|&i| w.buf[i] != merged.buf[i])
        .collect();
    assert_eq!(at.len(), 1, "the layout is one byte");
    assert_eq!((w.buf[at[0]], merged.buf[at[0]]), (2, 1));
    let mut bad = w.buf.clone();
    bad[at[0]] = 3;
    assert_eq!(Params::decode(&mut Reader::new(&bad)), Err(Error::Corrupt));
}
