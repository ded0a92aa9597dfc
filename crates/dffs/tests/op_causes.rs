//! Device operations counted by cause (`OpCounts::by_cause`): every read, program, erase and
//! programmed byte is counted under exactly one cause, and each phase lands where it should — synced file data
//! under `data` and `journal`, a checkpoint's records under `checkpoint`, garbage collection
//! under `gc_read`/`gc_copy`, everything a mount does under `mount`.

use dffs::{Cause, Config, FormatOptions, Fs, OpCounts, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn sum(v: &[u64; Cause::COUNT]) -> u64 {
    v.iter().sum()
}

fn assert_complete(c: &OpCounts) {
    assert_eq!(sum(&c.by_cause.reads), c.reads, "{c:?}");
    assert_eq!(sum(&c.by_cause.programs), c.programs, "{c:?}");
    assert_eq!(sum(&c.by_cause.erases), c.erases, "{c:?}");
}

/// The bytes counted by cause are the bytes the device was asked to move: on NOR exactly
/// what the simulator counts; on NAND that less the spare-area bytes it counts for each page
/// operation that touches its OOB (at most one spare area per operation).
fn assert_bytes(fs: &Fs<SimFlash>, c: &OpCounts, dev: &dffs_sim::Stats) {
    let g = fs.params().geometry;
    for (what, counted, ops, moved) in [
        (
            "programs",
            sum(&c.by_cause.program_bytes),
            c.programs,
            dev.bytes_programmed,
        ),
        (
            "reads",
            sum(&c.by_cause.read_bytes),
            c.reads,
            dev.bytes_read,
        ),
    ] {
        if g.oob_size == 0 {
            assert_eq!(counted, moved, "{what}: {c:?}");
        } else {
            assert!(counted <= moved, "{what}: {counted}: {c:?} {dev:?}");
            assert!(
                moved - counted <= ops * g.oob_size as u64,
                "{what}: {counted}: {c:?} {dev:?}"
            );
        }
    }
}

fn fresh(name: &str, blocks: u32) -> Fs<SimFlash> {
    let dev = SimFlash::new(preset(name).unwrap().with_blocks(blocks).unwrap()).unwrap();
    let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
    Fs::mount(dev, Config::default()).unwrap()
}

fn causes_on(name: &str) {
    let mut fs = fresh(name, 64);
    let page = fs.params().geometry.page_size as usize;
    let before = fs.op_counts();
    let dev_before = fs.flash().stats();
    let st = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
    let data = vec![0x5Au8; 8 * page];
    fs.write(fh, 0, &data).unwrap();
    fs.fsync(fh).unwrap();
    let w = fs.op_counts().since(&before);
    assert_complete(&w);
    assert_bytes(&fs, &w, &fs.flash().stats().since(&dev_before));
    // The file's bytes are programmed once, with what each block carries beside them: a
    // NAND page each (the tag is in the OOB), or on NOR a 256-byte slot with its CRC, in
    // nodes with a header each.
    let data_b = w.by_cause.program_bytes[Cause::Data as usize];
    assert!(data_b >= data.len() as u64, "{name}: {data_b}: {w:?}");
    assert!(
        data_b <= data.len() as u64 * 9 / 8,
        "{name}: {data_b}: {w:?}"
    );
    let (data_p, journal_p) = (
        w.by_cause.programs[Cause::Data as usize],
        w.by_cause.programs[Cause::Journal as usize],
    );
    assert!(data_p >= 8, "{name}: data programs {data_p}: {w:?}");
    assert!(
        journal_p >= 1,
        "{name}: journal programs {journal_p}: {w:?}"
    );
    assert_eq!(
        w.by_cause.programs[Cause::GcCopy as usize],
        0,
        "{name}: {w:?}"
    );

    let before = fs.op_counts();
    fs.checkpoint().unwrap();
    let c = fs.op_counts().since(&before);
    assert_complete(&c);
    assert!(
        c.by_cause.programs[Cause::Checkpoint as usize] >= 1,
        "{name}: {c:?}"
    );
    assert_eq!(
        c.by_cause.programs[Cause::Data as usize],
        0,
        "{name}: {c:?}"
    );

    // A second file written in between, so the blocks hold live data when `f` is
    // overwritten: collection must read its victims and copy what is live.
    let k = fs.create(ROOT_INO, b"k", 0o644, 0, 0).unwrap();
    let kh = fs.open(k.ino, OpenFlags::RW).unwrap();
    for round in 0..40u8 {
        let data = vec![round; 8 * page];
        fs.write(fh, 0, &data).unwrap();
        fs.fsync(fh).unwrap();
        fs.write(kh, round as u64 * page as u64, &vec![!round; page])
            .unwrap();
        fs.fsync(kh).unwrap();
    }
    fs.close(fh).unwrap();
    fs.close(kh).unwrap();
    let before = fs.op_counts();
    let dev_before = fs.flash().stats();
    let mut any = false;
    for _ in 0..200 {
        let r = fs.gc_step(64).unwrap();
        any |= r.pages > 0;
        if !r.more {
            break;
        }
    }
    let g = fs.op_counts().since(&before);
    assert_complete(&g);
    assert_bytes(&fs, &g, &fs.flash().stats().since(&dev_before));
    assert!(
        g.by_cause.program_bytes[Cause::GcCopy as usize] > 0,
        "{name}: {g:?}"
    );
    assert!(any, "{name}: garbage collection found nothing to do");
    assert!(
        g.by_cause.reads[Cause::GcRead as usize] > 0,
        "{name}: {g:?}"
    );
    assert!(
        g.by_cause.programs[Cause::GcCopy as usize] > 0,
        "{name}: {g:?}"
    );
    assert_eq!(g.by_cause.reads[Cause::Data as usize], 0, "{name}: {g:?}");

    let dev = fs.unmount().unwrap();
    let dev_before = dev.stats();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    // The counts start at zero with the mount: right after it they are the mount's cost,
    // which `Info::mount_cost` keeps the totals of.
    let m = fs.op_counts();
    assert_complete(&m);
    assert_bytes(&fs, &m, &fs.flash().stats().since(&dev_before));
    assert!(m.reads > 0);
    assert_eq!(
        m.by_cause.reads[Cause::Mount as usize],
        m.reads,
        "{name}: {m:?}"
    );
    assert_eq!(fs.info().mount_cost, m.totals());
    assert_complete(&fs.op_counts());
}

#[test]
fn every_operation_has_one_cause_on_nand() {
    causes_on("nand-slc-128m");
}

#[test]
fn every_operation_has_one_cause_on_nor() {
    causes_on("nor-qspi-16m");
}

/// Collection of NAND blocks whose every page is dead (files deleted) reads nothing: a block
/// credited with no live bytes is erased without examining it. Blocks with live data are still
/// read and copied (`causes_on` above), and a file kept beside the deleted ones survives the
/// collection and a remount.
#[test]
fn dead_nand_blocks_are_collected_without_reads() {
    let mut fs = fresh("nand-slc-128m", 64);
    let g = fs.params().geometry;
    let block = g.block_size() as usize;
    let keep = fs.create(ROOT_INO, b"keep", 0o644, 0, 0).unwrap();
    let kh = fs.open(keep.ino, OpenFlags::RW).unwrap();
    let kept: Vec<u8> = (0..3 * g.page_size as usize)
        .map(|i| (i % 251) as u8)
        .collect();
    fs.write(kh, 0, &kept).unwrap();
    fs.close(kh).unwrap();
    // Ten whole blocks of file data, then all of it deleted.
    for i in 0..10u8 {
        let name = [b'f', b'0' + i];
        let st = fs.create(ROOT_INO, &name, 0o644, 0, 0).unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &vec![i; block]).unwrap();
        fs.close(fh).unwrap();
    }
    fs.checkpoint().unwrap();
    for i in 0..10u8 {
        fs.unlink(ROOT_INO, &[b'f', b'0' + i]).unwrap();
    }
    fs.checkpoint().unwrap();
    let before = fs.op_counts();
    let collected = fs.activity().gc_blocks;
    for _ in 0..100 {
        if !fs.gc_step(64).unwrap().more {
            break;
        }
    }
    let c = fs.op_counts().since(&before);
    let blocks = fs.activity().gc_blocks - collected;
    let gc_reads = c.by_cause.reads[Cause::GcRead as usize];
    assert!(blocks >= 9, "only {blocks} blocks collected: {c:?}");
    // Reading them would take a read per page: 64 per block, 640 for the ten. (One block
    // with live bytes, the kept file's or a metadata block, may be examined.)
    assert!(
        gc_reads <= g.pages_per_block as u64,
        "{gc_reads} collection reads for {blocks} blocks: {c:?}"
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let rep = fs.fsck().unwrap();
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    let ino = fs.lookup(ROOT_INO, b"keep").unwrap().ino;
    let fh = fs.open(ino, OpenFlags::READ).unwrap();
    let mut back = vec![0u8; kept.len() + 10];
    let n = fs.read(fh, 0, &mut back).unwrap();
    assert_eq!(&back[..n], &kept[..]);
}

/// Listing a directory and then looking up each name (what `du` and `ls -l` do) costs at most
/// one inode read per entry: names are in the files' inodes, which are packed several to a
/// page (read once each while listing, in address order), and the first entries' inodes stay
/// cached for the lookups that follow. (Each entry cost two inode page reads before.)
#[test]
fn a_listing_and_its_lookups_read_each_inode_once_at_most() {
    let mut fs = fresh("nand-slc-128m", 64);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    let n = 40u32;
    for i in 0..n {
        let st = fs
            .create(d, format!("file-{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &vec![i as u8; 3000]).unwrap();
        fs.close(fh).unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let before = fs.op_counts();
    let mut names = Vec::new();
    fs.readdir(d, 0, &mut |e| {
        names.push((e.name, e.ino));
        true
    })
    .unwrap();
    assert_eq!(names.len(), n as usize);
    for (name, ino) in &names {
        let st = fs.lookup(d, name).unwrap();
        assert_eq!(st.ino, *ino);
        assert_eq!(st.size, 3000);
        let i: u32 = std::str::from_utf8(&name[5..]).unwrap().parse().unwrap();
        let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
        let mut b = [0u8; 10];
        fs.read(fh, 0, &mut b).unwrap();
        assert_eq!(b, [i as u8; 10]);
        fs.close(fh).unwrap();
    }
    let c = fs.op_counts().since(&before);
    let inode_reads = c.by_cause.reads[Cause::Inode as usize];
    assert!(
        inode_reads <= n as u64,
        "{inode_reads} inode reads for {n} entries: {c:?}"
    );
}

/// The page the store keeps from its last inode read is dropped when the device is handed out
/// mutably: damage done to the device through `flash_mut` is seen by the next read (here an
/// inode in the same page as one read just before gives `EIO`, not the copy in RAM).
#[test]
fn damage_through_flash_mut_is_read_not_the_cached_page() {
    let mut fs = fresh("nand-slc-128m", 32);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    for name in [&b"a"[..], b"b"] {
        let st = fs.create(d, name, 0o644, 0, 0).unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &[7u8; 3000]).unwrap();
        fs.close(fh).unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    assert_eq!(fs.lookup(d, b"a").unwrap().size, 3000);
    let reads = fs.op_counts().reads;
    let pages = fs.params().geometry.total_pages();
    for page in 0..pages {
        fs.flash_mut().inject_uncorrectable(page).unwrap();
    }
    assert_eq!(fs.lookup(d, b"b").unwrap_err(), dffs::Error::Io);
    assert!(fs.op_counts().reads > reads);
}

/// A node whose page has an uncorrectable ECC codeword past the node (the damaged end of the
/// page, or another node's bytes) is still read: a node read reaches the page's end, and when
/// that fails the next try reads the header alone and then the node's own bytes. The failed
/// read counts as a failed try, as a retry's would: uncorrectable, then recovered, and the
/// block a scrub candidate. (Before, the inode gave EIO for ever, and the page kept for the
/// next small node counted nothing when its read failed and the node's alone did not.)
#[test]
fn a_node_is_read_past_an_uncorrectable_codeword_of_its_page() {
    let mut fs = fresh("nand-slc-128m", 32);
    let d = fs.mkdir(ROOT_INO, b"d", 0o755, 0, 0).unwrap().ino;
    for name in [&b"a"[..], b"b"] {
        let st = fs.create(d, name, 0o644, 0, 0).unwrap();
        let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
        fs.write(fh, 0, &[5u8; 100]).unwrap();
        fs.close(fh).unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let g = fs.params().geometry;
    let inode_blocks: Vec<u32> = (0..g.blocks)
        .filter(|&b| fs.debug_block(b).contains("/Inode "))
        .collect();
    assert!(!inode_blocks.is_empty());
    // The last ECC codeword of every page of the inode blocks: far past two small inodes.
    for &b in &inode_blocks {
        for p in 0..g.pages_per_block {
            fs.flash_mut()
                .inject_uncorrectable_at(b * g.pages_per_block + p, g.page_size - 1)
                .unwrap();
        }
    }
    let before = fs.op_counts();
    let st = fs.lookup(d, b"a").unwrap();
    assert_eq!(st.size, 100);
    let c = fs.op_counts().since(&before);
    assert!(c.uncorrectable >= 1, "{c:?}");
    assert!(c.recovered >= 1, "{c:?}");
    let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
    let mut buf = [0u8; 200];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 100);
    assert_eq!(&buf[..100], &[5u8; 100][..]);
    fs.close(fh).unwrap();
}
