//! Format-time parameters of a file system and the addresses that point into it.
//!
//! Owns [`Params`] (every size the on-flash format depends on, chosen at format time from the
//! device geometry and recorded in each checkpoint) and [`Addr`] (a 31-bit pointer to a node or
//! data block). It must never read or write flash; it only computes.

use crate::error::{Error, Result};
use crate::format::codec::{Reader, Writer};
use dffs_flash::{FlashKind, Geometry, PagePairing};

/// On-flash format version written by this code.
pub const FORMAT_VERSION: u16 = 5;

/// Bytes of the CRC that follows every file data block in a NOR data node (§9.2 of FORMAT.md).
pub const DATA_CRC_LEN: u32 = 4;

/// The smallest address unit a NOR format takes (`1 << 2` = 4 bytes; `Params::addr_shift`):
/// chosen for blocks larger than 4 KiB.
pub const MIN_ADDR_SHIFT_NOR: u8 = 2;
/// The smallest address unit a NAND format takes (8 bytes), and NOR on 4 KiB sectors.
pub const MIN_ADDR_SHIFT_NAND: u8 = 3;

/// Why DFFS cannot use a device of geometry `g`, or `Ok` when it can: the geometry rules of
/// [`Geometry::validate`] plus what the format needs (the NAND OOB tag must fit the free OOB
/// bytes). Front ends show the reason before they write anything.
pub fn check_geometry(g: &Geometry) -> core::result::Result<(), &'static str> {
    g.validate()?;
    if !cfg!(feature = "nand") && g.kind == FlashKind::Nand {
        return Err("this build of DFFS has no NAND support (cargo feature `nand`)");
    }
    if g.kind == FlashKind::Nand && (g.oob_free_len as usize) < crate::format::node::OOB_TAG_LEN {
        return Err("NAND needs at least 20 free OOB bytes per page for DFFS's page tag");
    }
    if g.kind == FlashKind::Nor && g.program_unit > 256 {
        return Err("NOR write units larger than 256 bytes are not supported");
    }
    Ok(())
}

/// The device's kind and page pairing as this build handles them. Without the `nand` cargo
/// feature [`check_geometry`] refuses NAND (so format and mount say `NotSupported`) and
/// [`Params::decode`] refuses a NAND format: every device that gets further is NOR. The answers
/// are then constants, and the compiler leaves out every NAND-only path (OOB tags, page
/// buffers, MLC pairing, bad-block swaps, commit runs). Code outside `check_geometry` and the
/// format's own encoding asks these, never the raw `Geometry` fields.
pub(crate) trait NandSupport {
    /// `kind`, or NOR in a build without NAND support.
    fn flash_kind(&self) -> FlashKind;
    /// `pairing`, or none in a build without NAND support.
    fn page_pairing(&self) -> PagePairing;
}

impl NandSupport for Geometry {
    #[inline(always)]
    fn flash_kind(&self) -> FlashKind {
        if cfg!(feature = "nand") {
            self.kind
        } else {
            FlashKind::Nor
        }
    }

    #[inline(always)]
    fn page_pairing(&self) -> PagePairing {
        if cfg!(feature = "nand") {
            self.pairing
        } else {
            PagePairing::None
        }
    }
}

/// Longest file name in bytes.
pub const NAME_MAX: usize = 255;

/// Blocks at the start of the device where anchors may live (mount looks only there). The
/// allocator keeps one of them free while it can, for replacing an anchor that fails.
pub const ANCHOR_AREA: u32 = 8;

/// Longest symlink target in bytes.
pub const SYMLINK_MAX: usize = 1023;

/// Deepest index tree.
pub const MAX_DEPTH: u8 = 4;

/// A pointer to a node or a data block: the byte offset on the device shifted right by
/// `Params::addr_shift` (so every node starts on a `1 << addr_shift` boundary). 31 bits are
/// used; bit 31 is a flag in the structures that need one (see FORMAT.md), and `u32::MAX` is
/// "no address".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr(pub u32);

impl Default for Addr {
    /// The default address is [`Addr::NONE`], never the start of the device.
    fn default() -> Self {
        Addr::NONE
    }
}

impl Addr {
    /// "No address": a hole in a file, an empty slot, an unset pointer.
    pub const NONE: Addr = Addr(u32::MAX);
    /// Largest valid address value.
    pub const MAX: u32 = 0x7FFF_FFFF;

    /// Whether this is [`Addr::NONE`].
    pub const fn is_none(self) -> bool {
        self.0 == u32::MAX
    }
    /// Whether this is a real address.
    pub const fn is_some(self) -> bool {
        self.0 <= Self::MAX
    }

    /// A file block pointer to the compressed data node (`DataZ`) whose header is at `node`:
    /// the node's address with [`PACKED`] set.
    pub const fn packed(node: Addr) -> Addr {
        Addr(node.0 | PACKED)
    }

    /// Whether this file block pointer points at a compressed data node.
    pub const fn is_packed(self) -> bool {
        !self.is_none() && self.0 & PACKED != 0
    }

    /// The node address of a file block pointer (the pointer itself when it is not packed).
    pub const fn node(self) -> Addr {
        if self.is_none() {
            self
        } else {
            Addr(self.0 & Self::MAX)
        }
    }
}

/// Bit 31 of a file block pointer (direct pointers, index node entries, extents in commit
/// records): set when the block is stored as a compressed data node, whose header is at the
/// address in bits 0..30; clear when the pointer addresses the block's raw bytes.
pub const PACKED: u32 = 0x8000_0000;

impl core::fmt::Debug for Addr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.is_none() {
            f.write_str("Addr(NONE)")
        } else {
            write!(f, "Addr({:#x})", self.0)
        }
    }
}

/// How the log areas map onto open blocks ("heads").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadLayout {
    /// Every log area has its own head: journal, map, directories, inodes, index, hot data,
    /// cold data. Best hot/cold separation; used on devices with many blocks.
    Separate,
    /// Map, directories and index share one metadata head; file inodes, the journal and the
    /// data logs keep theirs. Leaves fewer half-filled blocks on small partitions. Inodes stay
    /// apart because moving a live inode also rewrites its parent's directory page: mixed
    /// with short-lived directory and map pages they would make every metadata block look
    /// cheap to collect and be expensive to collect.
    Merged,
    /// Four heads: the journal; every metadata log (map, directories, inodes, index)
    /// together; hot data; cold data. For NOR devices of fewer than 128 blocks, where each open
    /// block is a large share of the device: on 32 blocks of 64 KiB the blocks held open
    /// left a file half the device's size in data blocks 88% live, and collection copied
    /// most of each block it freed (`dffs bench nor --quick --erase-size 64KiB`: random
    /// 4 KiB writes 14.5 KB/s with `Merged`, 27.0 with this; sequential 64 KiB 19.3 →
    /// 149.6). Inodes share the metadata head: on such a device the block an inode head
    /// keeps open costs more than mixing inodes with short-lived metadata. Hot and cold data
    /// stay apart, as static wear leveling needs (with one data head the erase counts of a
    /// 64-block device spread 24..54 around a mean of 39).
    Compact,
}

impl HeadLayout {
    /// Number of heads (open blocks) of the layout.
    pub fn head_count(self) -> usize {
        match self {
            HeadLayout::Separate => 7,
            HeadLayout::Merged => 5,
            HeadLayout::Compact => 4,
        }
    }
}

/// The log areas of the paper (plus the journal and the split of data into hot and cold).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LogKind {
    /// Records of operations since the last checkpoint (replayed at mount).
    Journal = 0,
    /// Inode map pages and block table pages.
    Map = 1,
    /// Directory pages (DirRoot, DirBucket, DirTable).
    Dir = 2,
    /// File inode nodes.
    Inode = 3,
    /// File index nodes.
    Index = 4,
    /// File data written by applications.
    DataHot = 5,
    /// File data moved by garbage collection or wear leveling.
    DataCold = 6,
}

impl LogKind {
    /// All log kinds, in head-index order.
    pub const ALL: [LogKind; 7] = [
        LogKind::Journal,
        LogKind::Map,
        LogKind::Dir,
        LogKind::Inode,
        LogKind::Index,
        LogKind::DataHot,
        LogKind::DataCold,
    ];

    /// Decodes a log kind from its on-flash number.
    pub fn from_u8(v: u8) -> Option<LogKind> {
        Self::ALL.get(v as usize).copied()
    }

    /// Whether the log holds file data.
    pub fn is_data(self) -> bool {
        matches!(self, LogKind::DataHot | LogKind::DataCold)
    }
}

/// Number of heads (open blocks) a layout can use at most.
pub const MAX_HEADS: usize = 7;

/// Everything the on-flash format depends on. Chosen by [`Params::for_geometry`] at format
/// time, stored in every checkpoint, checked against the device at mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// The device geometry the file system was formatted for.
    pub geometry: Geometry,
    /// `Addr` unit: addresses count `1 << addr_shift` byte units.
    pub addr_shift: u8,
    /// Bytes per file data block (NAND: the page size; NOR: the program page).
    pub data_block: u32,
    /// Bytes of a directory page node (DirRoot, DirBucket, DirTable).
    pub dir_page: u32,
    /// Bytes of an inode-map page node and of a block-table page node.
    pub map_page: u32,
    /// Bytes of a file index node.
    pub index_node: u32,
    /// Bytes of one checkpoint slot in an anchor block.
    pub cp_slot: u32,
    /// Largest file kept entirely inside its inode node.
    pub inline_max: u32,
    /// Block pointers an inode node holds directly (files of at most this many blocks need no
    /// index node).
    pub direct_ptrs: u32,
    /// Heads layout.
    pub heads: HeadLayout,
    /// The two anchor blocks (checkpoint area).
    pub anchors: [u32; 2],
    /// Blocks kept free for garbage collection and checkpoints.
    pub gc_reserve: u32,
    /// Blocks kept in reserve to replace blocks that go bad.
    pub bad_reserve: u32,
    /// Random identifier chosen at format time.
    pub fs_id: u64,
    /// Default compression for new files (0 none, 1 LZ4, 2 deflate).
    pub compression: u8,
}

/// Size of the common node header in bytes.
pub const NODE_HEADER: u32 = 24;

/// Most block-table delta nodes a checkpoint names (FORMAT.md §8.2).
pub const MAX_BT_DELTAS: u32 = 4;

/// Options for [`Params::for_geometry`].
#[derive(Clone, Copy, Debug)]
pub struct FormatOptions {
    /// Random identifier for the new file system (callers pass entropy; tests pass constants).
    pub fs_id: u64,
    /// Force a heads layout (default: `Separate` on devices of 256 blocks or more).
    pub heads: Option<HeadLayout>,
    /// Default compression for files (0 none, 1 LZ4, 2 deflate).
    pub compression: u8,
}

impl Default for FormatOptions {
    fn default() -> Self {
        FormatOptions {
            fs_id: 0x0DFF_5EED_0DFF_5EED,
            heads: None,
            compression: 0,
        }
    }
}

impl Params {
    /// Chooses format parameters for a device.
    pub fn for_geometry(g: Geometry, opts: &FormatOptions) -> Result<Params> {
        check_geometry(&g).map_err(|_| Error::NotSupported)?;
        let cap = g.capacity();
        // Smallest unit (8 bytes; on NOR at least the write unit, so every node starts and
        // ends on a programmable boundary) such that 31 bits address the device. On NOR the
        // unit pads every data block and its 4-byte CRC to a slot: with 256-byte blocks 264
        // bytes in 8-byte units, 260 in 4-byte units, so NOR blocks larger than 4 KiB take
        // 4-byte units (since 2026-12-02; images formatted before keep theirs, the unit being
        // a format parameter): a 64 KiB block holds 251 data blocks, not 248, and a 32 KiB
        // block 125, not 123 (`dffs bench nor --erase-size 64KiB`: random 4 KiB writes at
        // 80% fill +22%). A 4 KiB sector holds 15 either way.
        let mut shift = MIN_ADDR_SHIFT_NAND;
        if g.flash_kind() == FlashKind::Nor {
            if g.block_size() > 4096 {
                shift = MIN_ADDR_SHIFT_NOR;
            }
            while (1u32 << shift) < g.program_unit {
                shift += 1;
            }
        }
        while ((cap - 1) >> shift) > Addr::MAX as u64 {
            shift += 1;
        }
        let (data_block, dir_page, map_page, index_node, cp_slot, inline_max) = match g.flash_kind()
        {
            FlashKind::Nand => {
                let p = g.page_size;
                (p, p, p, p, p, (p / 2).min(1536))
            }
            FlashKind::Nor => {
                let pp = g.page_size;
                // NOR is byte addressable: nodes need not match the program page. Directory
                // pages are as large as a small NAND page so the paper's embedding pays off;
                // index nodes are small so a random overwrite rewrites little index.
                let dir = 2048u32.min(g.block_size() / 4).max(512);
                let map = 1024u32.min(g.block_size() / 4).max(256);
                // On 512 or more sectors of 4 KiB (or less), a node of 64 pointers (288 B) is
                // 7% of a sector, and collection, which moves a fragmented file's blocks one
                // by one, rewrites a leaf for nearly every block it moves: 32 pointers (160 B)
                // nearly halve that. Smaller devices of such sectors (whose files are small: a
                // file of 8-16 KiB needs a second level at 32) keep 64. Larger blocks take 56:
                // a node of 256 bytes, one program page of the usual SPI NOR, where 64 pointers
                // (288 B, before 2026-12-02) took a second program for 32 bytes and 11% more
                // bytes for each leaf a checkpoint folds (`dffs bench nor --erase-size 64KiB`:
                // random 4 KiB writes +6%).
                let fanout = if g.block_size() > 4096 {
                    56
                } else if g.blocks >= 512 {
                    32
                } else {
                    64
                };
                let index = NODE_HEADER + 8 + fanout * 4;
                let slot = 1024u32.min(g.block_size() / 4);
                (pp, dir, map, index, slot, 192u32.min(pp))
            }
        };
        // (NAND of fewer than 128 blocks keeps `Merged`: with `Compact` the quick rootfs case
        // on 8 MiB of SLC, filled to `ENOSPC`, held 151 files for 8,045 programs where 147
        // took 3,483, and reading the full tree back collected 49 blocks; DESIGN §7.)
        let heads = opts.heads.unwrap_or(if g.blocks >= 256 {
            HeadLayout::Separate
        } else if g.blocks >= 128 || g.flash_kind() == FlashKind::Nand {
            HeadLayout::Merged
        } else {
            HeadLayout::Compact
        });
        // Reserve: enough free blocks for GC to always make progress while every head is
        // open, plus a spare pool for bad blocks (1% of blocks, at least one on NAND).
        let gc_reserve = 2 + heads.head_count() as u32 / 2 + g.blocks / 200;
        let bad_reserve = match g.flash_kind() {
            FlashKind::Nand => (g.blocks / 100).max(1),
            FlashKind::Nor => 0,
        };
        let p = Params {
            geometry: g,
            addr_shift: shift,
            data_block,
            dir_page,
            map_page,
            index_node,
            cp_slot,
            inline_max,
            // NAND: a file of up to 64 pages (128 KiB on 2 KiB pages: Postmark's files, most
            // of a rootfs) is mapped by its inode alone, with no index node to write and read
            // (the `--sync` Postmark mount: 1,623 index programs and 1,583 reads less, 31.1 →
            // 30.5 s). NOR's small index nodes already make a file's index cheap.
            direct_ptrs: if g.flash_kind() == FlashKind::Nand {
                64
            } else {
                16
            },
            heads,
            anchors: [u32::MAX, u32::MAX],
            gc_reserve,
            bad_reserve,
            fs_id: opts.fs_id,
            compression: opts.compression,
        };
        p.check()?;
        Ok(p)
    }

    /// Checks internal consistency (used on parameters read from flash, which may be hostile).
    pub fn check(&self) -> Result<()> {
        let g = &self.geometry;
        check_geometry(g).map_err(|_| Error::Corrupt)?;
        // The range check below short-circuits before `unit` is used; a hostile shift must not
        // overflow here first.
        let unit = 1u32 << self.addr_shift.min(8);
        let min_shift = match g.flash_kind() {
            FlashKind::Nor => MIN_ADDR_SHIFT_NOR,
            FlashKind::Nand => MIN_ADDR_SHIFT_NAND,
        };
        let ok = self.addr_shift >= min_shift
            && self.addr_shift <= 8
            && ((g.capacity() - 1) >> self.addr_shift) <= Addr::MAX as u64
            && self.data_block.is_power_of_two()
            && self.data_block >= 64
            && self.data_block <= g.block_size()
            && self.dir_page >= 512
            && self.dir_page <= 65536
            && self.dir_page % unit == 0
            && self.map_page >= 256
            && self.map_page <= 65536
            && self.map_page % unit == 0
            && self.index_node >= NODE_HEADER + 8 + 16
            && self.index_node <= 65536
            && self.cp_slot >= 512
            && self.cp_slot <= g.block_size()
            && g.block_size() % self.cp_slot == 0
            && self.inline_max < self.dir_page
            && self.direct_ptrs >= 1
            && self.direct_ptrs <= 64
            && self.compression <= 2
            && self.gc_reserve >= 2
            && self.gc_reserve as u64 + self.bad_reserve as u64 + 4 <= g.blocks as u64
            // NOR nodes start on write-unit boundaries.
            && (g.flash_kind() == FlashKind::Nand || unit >= g.program_unit)
            && self.data_block % unit == 0;
        if !ok {
            return Err(Error::Corrupt);
        }
        if g.flash_kind() == FlashKind::Nand
            && (self.dir_page != g.page_size
                || self.map_page != g.page_size
                || self.index_node != g.page_size
                || self.cp_slot != g.page_size)
        {
            return Err(Error::Corrupt);
        }
        Ok(())
    }

    /// Bytes in one `Addr` unit.
    pub const fn unit(&self) -> u32 {
        1 << self.addr_shift
    }

    /// The byte offset an address points to.
    pub const fn byte_of(&self, a: Addr) -> u64 {
        (a.0 as u64) << self.addr_shift
    }

    /// The address of a byte offset (which must be unit aligned).
    pub const fn addr_of(&self, byte: u64) -> Addr {
        Addr((byte >> self.addr_shift) as u32)
    }

    /// The erase block an address lies in.
    pub const fn block_of(&self, a: Addr) -> u32 {
        (self.byte_of(a) / self.geometry.block_size() as u64) as u32
    }

    /// Whether `a` points inside the device.
    pub fn addr_valid(&self, a: Addr) -> bool {
        a.is_some() && self.byte_of(a) < self.geometry.capacity()
    }

    /// Bytes one file data block takes on flash: NAND, the raw page; NOR, the block followed
    /// by its CRC ([`DATA_CRC_LEN`]), padded to the address unit. Consecutive blocks of one data
    /// node lie this far apart.
    pub fn data_slot(&self) -> u32 {
        match self.geometry.flash_kind() {
            FlashKind::Nand => self.data_block,
            FlashKind::Nor => self.align(self.data_block + DATA_CRC_LEN),
        }
    }

    /// NOR: bytes from a data node's header to its first slot: the node (header and its
    /// 16-byte body of first block, count, payload length, reserved) padded to the address
    /// unit, so every slot is addressable on devices whose write unit is 16 or 32 bytes.
    pub const fn data_header(&self) -> u32 {
        self.align(NODE_HEADER + 16)
    }

    /// Address units between consecutive blocks of one contiguous write (a data slot).
    pub fn stride(&self) -> u32 {
        self.data_slot() >> self.addr_shift
    }

    /// Rounds `n` up to the address unit (`u32::MAX` for a length no unit multiple can hold:
    /// only a damaged length is that large, and callers bound what they use).
    pub const fn align(&self, n: u32) -> u32 {
        let u = self.unit();
        n.div_ceil(u).saturating_mul(u)
    }

    /// Pointers in one index node.
    pub const fn index_fanout(&self) -> u32 {
        (self.index_node - NODE_HEADER - 8) / 4
    }

    /// Levels of the index tree of a file as large as the device (1 to [`MAX_DEPTH`]): how
    /// many nodes a live index node's move rewrites, itself and those above it.
    pub fn index_depth(&self) -> u32 {
        let cap = self.geometry.capacity();
        let mut span = self.data_block as u64 * self.index_fanout() as u64;
        let mut depth = 1;
        while depth < MAX_DEPTH as u32 && span < cap {
            span = span.saturating_mul(self.index_fanout() as u64);
            depth += 1;
        }
        depth
    }

    /// Entries in one inode-map leaf page.
    pub const fn map_leaf_entries(&self) -> u32 {
        (self.map_page - NODE_HEADER - 8) / 8
    }

    /// Children of one inode-map interior page.
    pub const fn map_fanout(&self) -> u32 {
        (self.map_page - NODE_HEADER - 8) / 8
    }

    /// Entries (block records) in one block-table page.
    pub const fn bt_entries(&self) -> u32 {
        (self.map_page - NODE_HEADER - 8) / 12
    }

    /// Entries (block number and record, 16 bytes) in one block-table delta node.
    pub const fn bt_delta_entries(&self) -> u32 {
        (self.map_page - NODE_HEADER - 8) / 16
    }

    /// Block-table page addresses one block-table directory node holds.
    pub const fn bt_dir_entries(&self) -> u32 {
        (self.map_page - NODE_HEADER - 8) / 4
    }

    /// Block-table directory nodes every checkpoint writes and names instead of listing the
    /// block-table pages itself (FORMAT §8.2): none while the list takes at most half of a
    /// checkpoint slot; beyond that (about 10,000 blocks on 1 KiB slots, 40 MiB of 4 KiB NOR
    /// sectors or 640 MiB of 64 KiB blocks; 43,000 on 2 KiB-page NAND, 5 GiB) as many as
    /// the addresses need.
    pub const fn bt_dir_nodes(&self) -> u32 {
        let pages = self.geometry.blocks.div_ceil(self.bt_entries());
        if pages * 4 <= self.cp_slot / 2 {
            0
        } else {
            pages.div_ceil(self.bt_dir_entries())
        }
    }

    /// Block-table delta nodes a checkpoint may name: an eighth of the block-table pages, at
    /// most [`MAX_BT_DELTAS`]; one on a table of 4 to 15 pages, none below 4 (there a delta
    /// node saves at most a page or two, and pages written at different checkpoints leave
    /// the map log's blocks partly live, which a device that small cannot spare). On 2 MiB
    /// of 4 KiB NOR sectors (7 pages) the one node made synced random 4 KiB writes 20%
    /// faster: every checkpoint rewrote six or seven pages.
    pub const fn bt_delta_nodes(&self) -> u32 {
        let pages = self.geometry.blocks.div_ceil(self.bt_entries());
        let n = if pages < 4 {
            0
        } else if pages < 16 {
            1
        } else {
            pages / 8
        };
        if n < MAX_BT_DELTAS {
            n
        } else {
            MAX_BT_DELTAS
        }
    }

    /// Whether synced writes may commit by their data pages' OOB tags (FORMAT.md §8.7): NAND
    /// without page pairing whose free OOB bytes hold the whole tag.
    pub fn commit_runs(&self) -> bool {
        let g = &self.geometry;
        g.flash_kind() == FlashKind::Nand
            && g.page_pairing() == PagePairing::None
            && g.oob_free_len as usize >= crate::format::node::OOB_TAG_LEN
    }

    /// Largest file size in bytes (what the index tree can address, capped at 2^40).
    pub fn max_file_size(&self) -> u64 {
        let f = self.index_fanout() as u64;
        let blocks = f.saturating_mul(f).saturating_mul(f).saturating_mul(f);
        blocks
            .saturating_mul(self.data_block as u64)
            .min(1u64 << 40)
    }

    /// Heads used by this layout.
    pub fn head_count(&self) -> usize {
        self.heads.head_count()
    }

    /// Whether the device has few large blocks (erase blocks of 32 KiB or more, 32 to 511 of
    /// them on NOR, 64 to 511 on NAND), where every free block the pool keeps idle is a large
    /// share of the room collection works with (see `Fs::pool_levels`). Other devices keep the
    /// wider margins (with the smaller ones, chained cuts on 24 SLC blocks wedged and the model
    /// test with faults on 40 SLC blocks failed more seeds; DESIGN §9.3).
    pub fn few_large_blocks(&self) -> bool {
        let low = match self.geometry.flash_kind() {
            FlashKind::Nor => 32,
            FlashKind::Nand => 64,
        };
        (low..512).contains(&self.geometry.blocks) && self.geometry.block_size() >= 32 * 1024
    }

    /// The head a log kind writes to.
    pub fn head_of(&self, kind: LogKind) -> usize {
        match self.heads {
            HeadLayout::Separate => kind as usize,
            HeadLayout::Merged => match kind {
                LogKind::Journal => 0,
                LogKind::Map | LogKind::Dir | LogKind::Index => 1,
                LogKind::Inode => 2,
                LogKind::DataHot => 3,
                LogKind::DataCold => 4,
            },
            HeadLayout::Compact => match kind {
                LogKind::Journal => 0,
                LogKind::Map | LogKind::Dir | LogKind::Inode | LogKind::Index => 1,
                LogKind::DataHot => 2,
                LogKind::DataCold => 3,
            },
        }
    }

    /// Encodes the parameters (part of every checkpoint).
    pub fn encode(&self, w: &mut Writer) {
        let g = &self.geometry;
        w.u16(FORMAT_VERSION);
        w.u8(match g.kind {
            FlashKind::Nand => 0,
            FlashKind::Nor => 1,
        });
        w.u8(self.addr_shift);
        for v in [
            g.page_size,
            g.oob_size,
            g.oob_free_offset,
            g.oob_free_len,
            g.pages_per_block,
            g.blocks,
            g.program_unit,
            g.nop,
            g.in_order as u32,
            g.ecc_strength,
            g.ecc_step,
            self.data_block,
            self.dir_page,
            self.map_page,
            self.index_node,
            self.cp_slot,
            self.inline_max,
            self.direct_ptrs,
            self.anchors[0],
            self.anchors[1],
            self.gc_reserve,
            self.bad_reserve,
        ] {
            w.u32(v);
        }
        w.u8(match self.heads {
            HeadLayout::Separate => 0,
            HeadLayout::Merged => 1,
            HeadLayout::Compact => 2,
        });
        w.u8(self.compression);
        w.u8(g.pairing.code());
        w.u8(0);
        w.u64(self.fs_id);
    }

    /// Decodes and checks parameters.
    pub fn decode(r: &mut Reader<'_>) -> Result<Params> {
        let version = r.u16()?;
        if version != FORMAT_VERSION {
            return Err(Error::NoFileSystem);
        }
        let kind = match r.u8()? {
            0 if !cfg!(feature = "nand") => return Err(Error::NotSupported),
            0 => FlashKind::Nand,
            1 => FlashKind::Nor,
            _ => return Err(Error::Corrupt),
        };
        let addr_shift = r.u8()?;
        let mut v = [0u32; 22];
        for x in v.iter_mut() {
            *x = r.u32()?;
        }
        let heads = match r.u8()? {
            0 => HeadLayout::Separate,
            1 => HeadLayout::Merged,
            2 => HeadLayout::Compact,
            _ => return Err(Error::Corrupt),
        };
        let compression = r.u8()?;
        let pairing = PagePairing::from_code(r.u8()?).ok_or(Error::Corrupt)?;
        r.u8()?;
        let fs_id = r.u64()?;
        let geometry = Geometry {
            kind,
            page_size: v[0],
            oob_size: v[1],
            oob_free_offset: v[2],
            oob_free_len: v[3],
            pages_per_block: v[4],
            blocks: v[5],
            program_unit: v[6],
            nop: v[7],
            in_order: v[8] != 0,
            ecc_strength: v[9],
            ecc_step: v[10],
            pairing,
        };
        let p = Params {
            geometry,
            addr_shift,
            data_block: v[11],
            dir_page: v[12],
            map_page: v[13],
            index_node: v[14],
            cp_slot: v[15],
            inline_max: v[16],
            direct_ptrs: v[17],
            anchors: [v[18], v[19]],
            heads,
            gc_reserve: v[20],
            bad_reserve: v[21],
            fs_id,
            compression,
        };
        p.check()?;
        if p.anchors[0] >= geometry.blocks
            || p.anchors[1] >= geometry.blocks
            || p.anchors[0] == p.anchors[1]
        {
            return Err(Error::Corrupt);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn slc() -> Geometry {
        Geometry {
            kind: FlashKind::Nand,
            page_size: 2048,
            oob_size: 64,
            oob_free_offset: 2,
            oob_free_len: 38,
            pages_per_block: 64,
            blocks: 1024,
            program_unit: 512,
            nop: 4,
            in_order: false,
            ecc_strength: 1,
            ecc_step: 512,
            pairing: PagePairing::None,
        }
    }

    #[test]
    fn params_roundtrip_and_derived_sizes() {
        let mut p = Params::for_geometry(slc(), &FormatOptions::default()).unwrap();
        p.anchors = [0, 1];
        assert_eq!(p.addr_shift, 3);
        assert_eq!(p.index_fanout(), 504);
        assert_eq!(p.map_leaf_entries(), 252);
        let mut w = Writer::default();
        p.encode(&mut w);
        let q = Params::decode(&mut Reader::new(&w.buf)).unwrap();
        assert_eq!(p, q);
    }

    /// The index depth is the tree height a file as large as the device needs: up to 504
    /// leaves of 504 pages of 2 KiB (496 MiB) under one root, three levels beyond.
    #[test]
    fn index_depth_covers_the_device() {
        let p = Params::for_geometry(slc(), &FormatOptions::default()).unwrap();
        assert_eq!(p.index_depth(), 2);
        let depth = |g: Geometry| {
            Params::for_geometry(g, &FormatOptions::default())
                .unwrap()
                .index_depth()
        };
        let mut g = slc();
        g.blocks = 3968; // 253,952 pages, under 504 · 504 = 254,016
        assert_eq!(depth(g), 2);
        g.blocks = 3970; // 254,080 pages
        assert_eq!(depth(g), 3);
        g.page_size = 4096;
        g.pages_per_block = 128;
        g.blocks = 131072; // 64 GiB: 4 GiB under a node of two levels, 4 TiB of three
        assert_eq!(depth(g), 3);
    }

    #[test]
    fn large_devices_get_a_larger_address_unit() {
        let mut g = slc();
        g.page_size = 4096;
        g.pages_per_block = 128;
        g.blocks = 131072; // 64 GiB
        let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
        assert_eq!(p.addr_shift, 5);
        assert!(p.byte_of(Addr(Addr::MAX)) >= g.capacity() - 32);
    }

    #[test]
    fn corrupt_params_are_rejected() {
        let mut p = Params::for_geometry(slc(), &FormatOptions::default()).unwrap();
        p.anchors = [0, 1];
        let mut w = Writer::default();
        p.encode(&mut w);
        // Flip the data block size to something absurd.
        let mut bytes = w.buf.clone();
        let pos = 4 + 11 * 4;
        bytes[pos..pos + 4].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            Params::decode(&mut Reader::new(&bytes)),
            Err(Error::Corrupt)
        );
        assert!(Params::decode(&mut Reader::new(&w.buf[..10])).is_err());
    }
}
