//! Small random reads on NOR: the index entries they need are read alone, not whole index
//! nodes (`IndexTree::lookup_run_unchecked`), and what is read through them is checked by the
//! data slot's CRC, which names the file and the block: a damaged entry never hands out another
//! block's data.

use dffs::format::node::NodeType;
use dffs::{Config, Error, FormatOptions, Fs, Ino, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};
use dffs_testkit::hostile::scan_nodes;
use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

/// Bytes of one file data block on NOR (`Params::data_block`).
const BLOCK: usize = 256;

/// Block `b` of the test file: its number in every byte pair, so that blocks differ.
fn block_bytes(b: usize) -> Vec<u8> {
    (0..BLOCK).map(|i| ((b * 7 + i / 2) % 251) as u8).collect()
}

/// A file `/f` of `blocks` blocks written in 64 KiB pieces and synced; the device unmounted.
fn write_file<F: dffs::Flash>(fs: &mut Fs<F>, blocks: usize) -> Ino {
    let ino = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap().ino;
    let fh = fs.open(ino, OpenFlags::RW).unwrap();
    let data: Vec<u8> = (0..blocks).flat_map(block_bytes).collect();
    for (i, piece) in data.chunks(65536).enumerate() {
        fs.write(fh, (i * 65536) as u64, piece).unwrap();
    }
    fs.fsync(fh).unwrap();
    fs.close(fh).unwrap();
    ino
}

/// A fixed sequence of block numbers below `n` (a linear congruential generator).
fn random_blocks(n: usize, count: usize) -> Vec<usize> {
    let mut x = 12345u64;
    (0..count)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % n as u64) as usize
        })
        .collect()
}

/// Random reads of one 256-byte block of a 2 MiB file on 64 KiB NOR blocks, on a cold cache:
/// each reads the block's slot (256 bytes and its CRC) and a few bytes of index entries. (With
/// whole index nodes, 288 bytes per level the cache did not hold, each read took at least 548
/// bytes.) A sequential pass then reads each leaf once, through the node cache.
#[test]
fn a_small_random_read_reads_its_index_entries_alone() {
    let p = preset("nor-qspi-16m").unwrap().with_blocks(64).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let blocks = 8192;
    let ino = write_file(&mut fs, blocks);
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; BLOCK];
    let reads = 256;
    let before = fs.flash().stats();
    for b in random_blocks(blocks, reads) {
        assert_eq!(fs.read(fh, (b * BLOCK) as u64, &mut buf).unwrap(), BLOCK);
        assert_eq!(buf, block_bytes(b), "block {b}");
    }
    let s = fs.flash().stats().since(&before);
    let per_read = s.bytes_read / reads as u64;
    eprintln!(
        "random 256 B reads: {per_read} bytes read each, {} reads",
        s.reads
    );
    assert!(per_read <= 300, "{per_read} bytes read per 256-byte read");

    // Sequential: the first read of the pass goes on from nowhere, the rest from the last.
    let before = fs.flash().stats();
    for b in 0..blocks {
        assert_eq!(fs.read(fh, (b * BLOCK) as u64, &mut buf).unwrap(), BLOCK);
        assert_eq!(buf, block_bytes(b), "block {b}");
    }
    let s = fs.flash().stats().since(&before);
    let slots = (blocks * (BLOCK + 4)) as u64;
    let index_node = fs.params().index_node as u64;
    let fanout = fs.params().index_fanout() as u64;
    let leaves = (blocks as u64).div_ceil(fanout);
    eprintln!(
        "sequential 256 B reads: {} bytes beyond the slots, {leaves} leaves of {index_node} B",
        s.bytes_read - slots
    );
    // Each leaf once and the nodes above it (one per `fanout` leaves, and the root, and one of
    // slack): not 12 bytes of entries per read.
    assert!(
        s.bytes_read <= slots + (leaves + leaves.div_ceil(fanout) + 2) * index_node,
        "{} bytes read for {slots} of slots",
        s.bytes_read
    );
}

/// An index entry damaged to name another block's slot (the leaf's CRC now wrong, or signed
/// again as a hostile image would be) is never followed to that block's data: the slot's CRC
/// names the block, so the read says the data is damaged, and no other block's read gives
/// anything but its own data.
#[test]
fn a_damaged_index_entry_never_reads_another_block() {
    for resign in [false, true] {
        let dev = Fs::format(RamFlash::new(nor_geometry(256)), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let blocks = 2048;
        let ino = write_file(&mut fs, blocks);
        let mut dev = fs.unmount().unwrap();
        // A leaf of the file: its entry 0 set to entry 1's address.
        let leaf = scan_nodes(&dev)
            .into_iter()
            .find(|n| {
                let h = &dev.data[n.at..n.at + 32];
                n.typ == NodeType::Index
                    && u32::from_le_bytes(h[16..20].try_into().unwrap()) == ino
                    && h[24] == 1
            })
            .expect("a leaf of the file");
        let first = u32::from_le_bytes(dev.data[leaf.at + 28..leaf.at + 32].try_into().unwrap());
        let e = leaf.at + 32;
        let second: [u8; 4] = dev.data[e + 4..e + 8].try_into().unwrap();
        dev.data[e..e + 4].copy_from_slice(&second);
        if resign {
            assert!(dffs_testkit::hostile::resign(&mut dev.data, leaf.at));
        }
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let fh = fs.open(ino, OpenFlags::READ).unwrap();
        let mut buf = vec![0u8; BLOCK];
        let b = first as usize;
        let r = fs.read(fh, (b * BLOCK) as u64, &mut buf);
        assert!(
            matches!(r, Err(Error::Io | Error::Corrupt)),
            "resigned {resign}: block {b} read as {r:?}, same as block {}: {}",
            b + 1,
            buf == block_bytes(b + 1)
        );
        // The other blocks of the leaf: their own data, or (the leaf's CRC failing, read
        // through the verified path) an error; a block outside the leaf: its own data.
        for k in [b + 2, b + 1, (b + 100) % blocks] {
            match fs.read(fh, (k * BLOCK) as u64, &mut buf) {
                Ok(n) => {
                    assert_eq!(n, BLOCK);
                    assert_eq!(buf, block_bytes(k), "resigned {resign}: block {k}");
                }
                Err(e) => assert!(
                    !resign && k < b + 64 && matches!(e, Error::Io | Error::Corrupt),
                    "resigned {resign}: block {k}: {e:?}"
                ),
            }
        }
    }
}
