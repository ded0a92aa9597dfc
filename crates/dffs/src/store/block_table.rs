//! The block table: what every erase block holds, and how worn it is.
//!
//! Owns the per-block records and where they live. In RAM, every block's state, owner log and
//! live bytes ([`BlockInfo`]), packed into as few bits as the block size needs (19 on 4 KiB
//! sectors); on a device where that is too much, only those of a bounded cache of block-table
//! pages and the changed and kept ones, the others read with their pages when needed (paged
//! records, [`BlockTable::pages_records`]). A block's erase count and age ([`Wear`]) are in RAM only while they differ from
//! its block-table page on flash (and always for the anchor area) and in a bounded cache of
//! such pages: the rest is read back from the pages by the store, so that RAM does not hold
//! 8 bytes per block for values that wear leveling and victim choice read seldom; bounds on
//! each page's erase counts and ages ([`PageBounds`]) let those scans skip the pages that
//! cannot change their choice. Also the encoding of records in block-table pages
//! ([`BlockRecord`]), which pages and records changed since a checkpoint wrote them, the counts
//! the budget asks for, and the free blocks the allocator chooses among (dynamic wear
//! leveling: the least worn block for every log, the most worn for cold data). It must never
//! touch the device: the store reads, erases and programs.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::{Reader, Writer};
use crate::format::params::{Addr, LogKind, ANCHOR_AREA};
use crate::vec_map::VecMap;

/// Free blocks of the anchor area kept for anchors that fail: two, so that both anchors can
/// fail in a row (the second before collection has made a new spare) and a checkpoint is
/// still written.
pub const ANCHOR_SPARES: u32 = 2;

/// [`BlockTable::wl_partial`]: the largest erase count must be found again.
const WL_MAX_STALE: u8 = 1;
/// [`BlockTable::wl_partial`]: the coldest block must be found again.
const WL_COLD_STALE: u8 = 2;

/// Free-block candidates outside the anchor area the table remembers at each end of the wear
/// order (see [`BlockTable::candidate`]).
const CANDIDATES: usize = 8;

/// What an erase block is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockState {
    /// Not in use; contents unknown (erased before use).
    Free = 0,
    /// Not in use and known to be erased.
    Erased = 1,
    /// Holds nodes of one log; closed.
    Used = 2,
    /// The open block of a log head.
    Head = 3,
    /// Emptied by garbage collection (or a dead journal block); may still hold data the last
    /// checkpoint needs, so it becomes free only after the next checkpoint.
    PendingErase = 4,
    /// One of the two checkpoint blocks.
    Anchor = 5,
    /// Set aside for the journal's next block.
    Reserved = 6,
    /// Bad (factory or grown); never used.
    Bad = 7,
}

impl BlockState {
    fn from_u8(v: u8) -> Option<BlockState> {
        use BlockState::*;
        Some(match v {
            0 => Free,
            1 => Erased,
            2 => Used,
            3 => Head,
            4 => PendingErase,
            5 => Anchor,
            6 => Reserved,
            7 => Bad,
            _ => return None,
        })
    }

    /// Whether a block in this state is in the free pool.
    pub fn is_free(self) -> bool {
        matches!(self, BlockState::Free | BlockState::Erased)
    }
}

/// What a block holds, as RAM keeps it for every block: state, owner log and live bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Bytes of live nodes and data in the block.
    pub live: u32,
    /// State (low 3 bits) and owner log (next 3).
    bits: u8,
}

impl BlockInfo {
    /// A record with the given fields.
    pub fn new(state: BlockState, kind: LogKind, live: u32) -> Self {
        BlockInfo {
            live,
            bits: state as u8 | (kind as u8) << 3,
        }
    }
    /// The block's state.
    pub fn state(&self) -> BlockState {
        BlockState::from_u8(self.bits & 7).unwrap_or(BlockState::Bad)
    }
    /// The log the block belongs to (meaningful for Used/Head blocks).
    pub fn kind(&self) -> LogKind {
        LogKind::from_u8(self.bits >> 3).unwrap_or(LogKind::DataCold)
    }
    pub(crate) fn set(&mut self, state: BlockState, kind: LogKind) {
        *self = BlockInfo::new(state, kind, self.live);
    }
    pub(crate) fn set_state(&mut self, state: BlockState) {
        self.set(state, self.kind());
    }
    /// Whether the block counts for the wear spread (neither bad nor an anchor).
    pub fn in_circulation(self) -> bool {
        in_circulation(self)
    }
    /// Whether static wear leveling may move the block (used, not the journal's).
    pub fn wl_movable(self) -> bool {
        wl_movable(self)
    }
}

/// The closed (`Used`) blocks of one log: how many, their live bytes added up, and the least
/// live count among them ([`UsedSums::UNKNOWN`] once the block that may have held it changed,
/// until [`BlockTable::used_min_live`] counts it again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct UsedSums {
    n: u32,
    live: u64,
    min: u32,
}

impl UsedSums {
    const UNKNOWN: u32 = u32::MAX;
}

/// How worn a block is: its erase count, and the checkpoint number (low 24 bits) of the last
/// write into it (its age, for the choice of victims).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wear {
    /// Erase count.
    pub ec: u32,
    /// Checkpoint number (low 24 bits) of the last write into the block.
    pub age: u32,
}

/// Static wear leveling's figures (DESIGN §10): over the blocks in circulation (neither bad
/// nor anchors) the total, number and largest of their erase counts, and the least worn used
/// block outside the journal (the lower block among equals) as (erase count, block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WlFigures {
    /// Erase counts added up.
    pub sum: u64,
    /// Blocks counted.
    pub n: u64,
    /// The largest erase count.
    pub max: u32,
    /// The least worn used block outside the journal, if any.
    pub coldest: Option<(u32, u32)>,
}

impl WlFigures {
    /// Erase-count spread that triggers static wear leveling (DESIGN §10): a twentieth of the
    /// mean erase count, at least 4.
    pub fn threshold(&self) -> u32 {
        ((self.sum / (20 * self.n.max(1))).min(u32::MAX as u64) as u32).max(4)
    }

    /// Whether erase count `ec` is more than `margin` above the mean.
    pub fn above_mean(&self, ec: u32, margin: u32) -> bool {
        self.n > 0 && ec as u64 * self.n > self.sum + margin as u64 * self.n
    }

    /// Counts block `b` of record `e` and erase count `ec` (as a candidate for the coldest
    /// only if `candidate`).
    pub fn add(&mut self, b: u32, e: BlockInfo, ec: u32, candidate: bool) {
        if in_circulation(e) {
            self.sum += ec as u64;
            self.n += 1;
            self.max = self.max.max(ec);
        }
        if candidate && wl_movable(e) && self.coldest.is_none_or(|c| (ec, b) < c) {
            self.coldest = Some((ec, b));
        }
    }
}

/// Paged: whether RAM keeps a block of record `e` when its page leaves the cache, changed or
/// not: a head, the journal's next block and an anchor (looked up often, and by code that
/// cannot read a page), and a pending block or a dead journal block (the checkpoint that
/// frees them changes every such record RAM holds, and the sums follow).
fn kept_in_ram(e: BlockInfo) -> bool {
    matches!(
        e.state(),
        BlockState::Head | BlockState::Reserved | BlockState::Anchor
    ) || freed_by_checkpoint(e)
}

/// Whether a block of record `e` is free once the next checkpoint is on flash (a pending block,
/// a dead journal block): a record on flash that says so reads as free.
fn freed_by_checkpoint(e: BlockInfo) -> bool {
    e.state() == BlockState::PendingErase
        || (e.state() == BlockState::Used && e.kind() == LogKind::Journal)
}

/// Whether a block of record `e` is `Erased` or `Reserved` (erased, as far as RAM knows).
fn erased_or_reserved(e: BlockInfo) -> bool {
    matches!(e.state(), BlockState::Erased | BlockState::Reserved)
}

/// Whether a block of record `e` counts for the wear spread (neither bad nor an anchor).
fn in_circulation(e: BlockInfo) -> bool {
    !matches!(e.state(), BlockState::Bad | BlockState::Anchor)
}

/// Whether static wear leveling may move a block of record `e` (used, not the journal's).
fn wl_movable(e: BlockInfo) -> bool {
    e.state() == BlockState::Used && e.kind() != LogKind::Journal
}

/// One block's whole record, as a block-table page or delta node holds it: 12 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    /// State, owner log and live bytes.
    pub info: BlockInfo,
    /// Erase count and age.
    pub wear: Wear,
}

impl BlockRecord {
    /// Encodes the record.
    pub fn encode(&self, w: &mut Writer) {
        let i = &self.info;
        let info = i.state() as u32 | (i.kind() as u32) << 4 | (self.wear.age & 0xFF_FFFF) << 8;
        w.u32(self.wear.ec).u32(i.live).u32(info);
    }
    /// Decodes a record, rejecting impossible values.
    pub fn decode(r: &mut Reader<'_>, block_size: u32) -> Result<BlockRecord> {
        let (ec, live, info) = (r.u32()?, r.u32()?, r.u32()?);
        let state = BlockState::from_u8((info & 0xF) as u8).ok_or(Error::Corrupt)?;
        let kind = LogKind::from_u8(((info >> 4) & 0xF) as u8).ok_or(Error::Corrupt)?;
        // A free block holds nothing live, nor does the journal's erased next block (an
        // invariant every checkpoint keeps; a forged `Reserved` record with live bytes became
        // a free block with them after a recovery).
        let empty = state.is_free() || state == BlockState::Reserved;
        if live > block_size || (empty && live != 0) {
            return Err(Error::Corrupt);
        }
        Ok(BlockRecord {
            info: BlockInfo::new(state, kind, live),
            wear: Wear { ec, age: info >> 8 },
        })
    }
}

impl Wear {
    /// The same erase count, aged at checkpoint number `cp` (its low 24 bits, as on flash).
    pub fn aged(self, cp: u64) -> Wear {
        Wear {
            ec: self.ec,
            age: (cp & 0xFF_FFFF) as u32,
        }
    }
}

/// What RAM knows of a block-table page whose wear it may not hold: bounds on its blocks'
/// erase counts and ages, so that a scan for free-block candidates, for a victim or for static
/// wear leveling's figures reads from flash only the pages that could change its outcome
/// (with 64 cached pages of 1 KiB, a 128 MiB NOR chip of 4 KiB sectors has 410 pages, and at
/// 85% fill every victim choice and candidate search read some 350 of them). The bounds are
/// kept wide: a change RAM cannot see widens them, and a page read or loaded sets them exact
/// again. Erase counts saturate at `u16::MAX`, which as an upper bound means none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PageBounds {
    /// No free block of the page has an erase count below this.
    free_lo: u16,
    /// None has one above this.
    free_hi: u16,
    /// No block static wear leveling may move ([`wl_movable`]) has one below this.
    movable_lo: u16,
    /// No block in circulation ([`in_circulation`]) has one above this.
    circ_hi: u16,
    /// No block of the page was last written before this checkpoint number (low 24 bits;
    /// ages are compared on a ring, valid while they lie within 2^23 checkpoints).
    oldest: u32,
}

/// Paged records: what RAM knows of the records of a block-table page it may not hold
/// ([`BlockTable::pages_records`]), kept with every change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PageCounts {
    /// No closed (`Used`) block of the page outside the journal has fewer live bytes than
    /// this (`u32::MAX`: none): a bound, widened by changes, exact when the page is read.
    used_lo: u32,
    /// Free blocks (`Free` or `Erased`) in the page: exact.
    free_n: u16,
    /// `Erased` and `Reserved` blocks in the page: exact.
    erased_n: u16,
}

impl PageCounts {
    /// The counts of a page whose records are `recs`.
    fn exact(recs: impl Iterator<Item = BlockInfo>) -> PageCounts {
        let mut c = PageCounts {
            used_lo: u32::MAX,
            free_n: 0,
            erased_n: 0,
        };
        for e in recs {
            c.free_n += e.state().is_free() as u16;
            c.erased_n += erased_or_reserved(e) as u16;
            c.widen_live(e);
        }
        c
    }

    /// Follows a record's change from `old` to `new`.
    fn follow(&mut self, old: BlockInfo, new: BlockInfo) {
        self.free_n = (self.free_n + new.state().is_free() as u16)
            .saturating_sub(old.state().is_free() as u16);
        self.erased_n = (self.erased_n + erased_or_reserved(new) as u16)
            .saturating_sub(erased_or_reserved(old) as u16);
        self.widen_live(new);
    }

    /// Widens the least live count of closed blocks to hold record `e`.
    fn widen_live(&mut self, e: BlockInfo) {
        if e.state() == BlockState::Used && e.kind() != LogKind::Journal {
            self.used_lo = self.used_lo.min(e.live);
        }
    }
}

/// `ec` as a page bound holds it (`None`: unknown, the widest bound).
fn bound16(ec: Option<u32>, unknown: u16) -> u16 {
    ec.map_or(unknown, |e| e.min(u16::MAX as u32) as u16)
}

/// An upper bound as a `u32` (`u16::MAX`: none).
fn upper(hi: u16) -> u32 {
    match hi {
        u16::MAX => u32::MAX,
        h => h as u32,
    }
}

impl PageBounds {
    /// Bounds that hold nothing yet (every lower bound at its top, every upper one at 0).
    const EMPTY: PageBounds = PageBounds {
        free_lo: u16::MAX,
        free_hi: 0,
        movable_lo: u16::MAX,
        circ_hi: 0,
        oldest: 0,
    };

    /// The bounds of a page whose current wear is `v` and whose blocks' records are
    /// `info(k)` (the `k`-th of the page).
    fn exact(v: &[Wear], info: impl Fn(usize) -> BlockInfo) -> PageBounds {
        let mut pb = PageBounds {
            oldest: v.first().map_or(0, |w| w.age & 0xFF_FFFF),
            ..PageBounds::EMPTY
        };
        for (k, w) in v.iter().enumerate() {
            pb.widen(info(k), Some(w.ec));
            pb.widen_age(w.age);
        }
        pb
    }

    /// Widens the erase-count bounds that apply to a block of record `e` to hold `ec`
    /// (`None`: unknown).
    fn widen(&mut self, e: BlockInfo, ec: Option<u32>) {
        if e.state().is_free() {
            self.free_lo = self.free_lo.min(bound16(ec, 0));
            self.free_hi = self.free_hi.max(bound16(ec, u16::MAX));
        }
        if wl_movable(e) {
            self.movable_lo = self.movable_lo.min(bound16(ec, 0));
        }
        if in_circulation(e) {
            self.circ_hi = self.circ_hi.max(bound16(ec, u16::MAX));
        }
    }

    /// Bounds that hold what `self` and `o` hold.
    fn merge(mut self, o: PageBounds) -> PageBounds {
        self.free_lo = self.free_lo.min(o.free_lo);
        self.free_hi = self.free_hi.max(o.free_hi);
        self.movable_lo = self.movable_lo.min(o.movable_lo);
        self.circ_hi = self.circ_hi.max(o.circ_hi);
        self.widen_age(o.oldest);
        self
    }

    /// Widens the oldest age to hold `age`.
    fn widen_age(&mut self, age: u32) {
        let age = age & 0xFF_FFFF;
        // `age` is older if the oldest is less than half the ring ahead of it.
        let ahead = self.oldest.wrapping_sub(age) & 0xFF_FFFF;
        if ahead != 0 && ahead < 1 << 23 {
            self.oldest = age;
        }
    }
}

/// Decodes block-table page `i` (`bytes` after the node header): `per` records from block
/// `i * per` on, fewer in the last page of a table of `blocks` blocks; each is passed to `f`.
pub fn decode_page(
    bytes: &[u8],
    i: u32,
    per: u32,
    (blocks, block_size): (u32, u32),
    mut f: impl FnMut(BlockRecord),
) -> Result<()> {
    let mut r = Reader::new(bytes);
    let first = r.u32()?;
    let n = r.u32()?;
    if Some(first) != i.checked_mul(per) || first >= blocks || n != per.min(blocks - first) {
        return Err(Error::Corrupt);
    }
    for _ in 0..n {
        f(BlockRecord::decode(&mut r, block_size)?);
    }
    Ok(())
}

/// A cached block-table page: the current wear of its blocks.
struct Cached {
    i: u32,
    wear: Vec<Wear>,
}

/// Paged records: a cached page's records packed ([`pack`]) and which of them differ from the
/// page on flash (a bit each).
struct PagedRecs {
    i: u32,
    recs: Vec<u32>,
    changed: Vec<u32>,
}

/// What a table whose records are paged ([`BlockTable::pages_records`]) keeps, boxed apart so
/// that a table holding every record pays nothing for it.
#[derive(Default)]
struct Paged {
    /// The records of the cached pages (the pages of `BlockTable::cache`).
    pages: Vec<PagedRecs>,
    /// The changed records of pages not cached, packed.
    rec_over: VecMap<u32, u32>,
    /// The unchanged records of pages not cached that RAM keeps all the same
    /// ([`kept_in_ram`]: heads, the journal's next block, anchors, and the blocks the next
    /// checkpoint frees), packed.
    rec_keep: VecMap<u32, u32>,
    /// A page that may not leave the cache now (one being written), or `u32::MAX`.
    pinned: u32,
    /// Per group of block-table pages (`BlockTable::group_shift`), its counts
    /// ([`PageCounts`]).
    counts: Vec<PageCounts>,
    /// Block-table nodes (pages, delta and directory nodes) each block holds, whose bytes a
    /// record on flash does not count and RAM does (`Store::account_bt_page`).
    own: VecMap<u32, u32>,
    /// Bytes of provisional data the newest copy of each block's record on flash left out.
    prov: VecMap<u32, u32>,
    /// Debug builds: the unchanged records a page dropped, to check that the page read again
    /// gives the same records (`Store::load_record`'s view of flash).
    /// (A B-tree, not a sorted vector: on a large device a scan of every page evicts a
    /// record per block, and a vector's inserts made that quadratic: a debug build's
    /// `erase_counts` on 64 GiB of 2 KiB pages ran for an hour.)
    #[cfg(debug_assertions)]
    evicted: alloc::collections::BTreeMap<u32, u32>,
}

/// The [`Paged`] of a table whose records are all in RAM: empty.
static NOT_PAGED: Paged = Paged {
    pages: Vec::new(),
    rec_over: VecMap::new(),
    rec_keep: VecMap::new(),
    pinned: u32::MAX,
    counts: Vec::new(),
    own: VecMap::new(),
    prov: VecMap::new(),
    #[cfg(debug_assertions)]
    evicted: alloc::collections::BTreeMap::new(),
};

/// Paged records: how many block-table pages share one [`PageBounds`] and one [`PageCounts`]
/// (a power of two, at most 64): the fewest that keep those figures within an eighth of
/// `records_ram` (2 KiB pages of NAND put 168 records in a page: 64 GiB of 128 KiB blocks has
/// 3,121 pages, 62 KB of figures one per page), but no more than the cache holds beside the
/// anchor area's page, so that a scan reading a group's pages in order finds them all cached
/// at its last and makes the group's figures exact again.
pub fn figure_group(pages: u32, records_ram: usize, cache_pages: usize) -> u32 {
    let per = core::mem::size_of::<PageBounds>() + core::mem::size_of::<PageCounts>();
    let most = cache_pages.saturating_sub(1).clamp(1, 64);
    let mut g = 1usize;
    while g * 2 <= most && pages.div_ceil(g as u32) as usize * per > records_ram / 8 {
        g *= 2;
    }
    g as u32
}

/// Record `e` packed in a `u32` (live bytes above the state and log), as paged records are
/// cached.
fn pack(e: BlockInfo) -> u32 {
    e.live << 6 | (e.bits & 63) as u32
}

/// A record [`pack`] packed.
fn unpack(v: u32) -> BlockInfo {
    BlockInfo {
        live: v >> 6,
        bits: (v & 63) as u8,
    }
}

/// Whether bit `b` of bitmap `v` is set.
fn bit(v: &[u32], b: u32) -> bool {
    v.get((b / 32) as usize)
        .is_some_and(|w| w & (1 << (b % 32)) != 0)
}

/// Every logical block's record: what it holds, packed, for every block; how worn it is, where
/// RAM keeps that (see the module comment); which block-table pages (`per_page` records each)
/// and records changed since a checkpoint last wrote them; and free-block candidates.
pub(crate) struct BlockTable {
    /// Number of blocks.
    n: u32,
    /// Bits of one packed record: 3 for the state, 3 for the log, the rest for live bytes.
    width: u8,
    /// Largest live count (the block size).
    block_size: u32,
    /// The packed records, with 8 bytes of padding at the end (reads take 8 bytes).
    hot: Vec<u8>,
    /// Records per block-table page.
    per_page: u32,
    /// One bit per block-table page: the page must be written whole (no checkpoint has
    /// written it yet, or its copy on flash is about to be erased).
    forced: Vec<u32>,
    /// One bit per block: its record differs from the one in its page on flash (a checkpoint
    /// writes it again, in the page or in a delta node, until the page is rewritten).
    changed: Vec<u32>,
    /// Changed records per block-table page (empty when paged: counted from the cached
    /// pages' bits and `Paged::rec_over`, [`BlockTable::page_changed`]).
    changed_in: Vec<u16>,
    /// One bit per block: its wear differs from the one in its page on flash.
    wear_changed: Vec<u32>,
    /// Blocks in each state (indexed by `BlockState as usize`), kept with every change so the
    /// budget's counts cost nothing (they are asked for on every write).
    counts: [u32; 8],
    /// Live bytes of the blocks that are neither bad, anchors nor the journal's, and the
    /// closed (`Used`) blocks of each log ([`UsedSums`]): kept with every change, as `counts`,
    /// so that what the budget asks after every operation costs the same on 64 GiB as on
    /// 1 MiB (a pass over 131,072 records per write took 95% of the host's time).
    live_files: u64,
    used: [UsedSums; LogKind::ALL.len()],
    /// Where the newest copy of each block-table page is on flash (`Addr::NONE`: nowhere yet).
    page_addr: Vec<Addr>,
    /// Wear of blocks whose page is not cached and whose wear differs from the page's copy on
    /// flash (or whose page has no copy yet: without an entry their wear is zero), and the
    /// anchor area's always.
    over: VecMap<u32, Wear>,
    /// The current wear of the cached block-table pages (changes are made here; eviction keeps
    /// the changed ones in `over`), the page cached longest first.
    cache: Vec<Cached>,
    /// Records paged: RAM holds the records of the cached pages and the changed and kept
    /// records of the others only ([`Paged`]); `hot` is empty, and so are `changed` and
    /// `wear_changed` (each cached page has its own bits, and every record in
    /// `Paged::rec_over` has changed). `None` when every record is in RAM.
    paged: Option<Box<Paged>>,
    /// Most pages `cache` holds (at least one).
    cache_pages: u32,
    /// Per group of `1 << group_shift` block-table pages, what scans need to know without
    /// reading them ([`PageBounds`]).
    bounds: Vec<PageBounds>,
    /// Log2 of the block-table pages that share one [`PageBounds`] and, paged, one
    /// [`PageCounts`] ([`figure_group`]): 0 unless the records are paged on a device whose
    /// per-page figures would outgrow their share of `Config::records_ram`.
    group_shift: u8,
    /// Bumped whenever a block outside the anchor area joins the free pool (or a free one's
    /// wear changes), which may put it ahead of the candidates.
    free_gen: u64,
    /// Free blocks outside the anchor area in allocation order, as (erase count, block): least
    /// worn first, and most worn first (ties: lower block first), found when `free_gen` was
    /// `cand_gen`.
    young: Vec<(u32, u32)>,
    old: Vec<(u32, u32)>,
    cand_gen: u64,
    /// The candidates found were every free block outside the anchor area.
    cand_all: bool,
    /// Which of `wl`'s figures a change made stale ([`WL_MAX_STALE`], [`WL_COLD_STALE`]):
    /// the store finds them again, reading only the pages whose bounds could hold them.
    wl_stale: u8,
    /// Static wear leveling's figures, kept up to date with every change (`None`: a change
    /// whose effect needs blocks' wear RAM does not hold; the store counts them again).
    wl: Option<WlFigures>,
    /// Free blocks offered while candidates are found.
    offered: u32,
}

impl BlockTable {
    /// A table of `n` free blocks of `block_size` bytes, `per_page` records to a block-table
    /// page, at most `cache_pages` pages of wear cached; every page dirty (none has been
    /// written).
    pub fn new(n: u32, per_page: u32, block_size: u32, cache_pages: usize) -> BlockTable {
        let free = BlockInfo::new(BlockState::Free, LogKind::DataHot, 0);
        let mut t = Self::filled(n, per_page, block_size, cache_pages, free, false, 1);
        t.mark_all();
        t
    }

    /// A table for a mount to fill ([`BlockTable::load_page`]): every block bad until then,
    /// no page on flash, no page marked. Paged, `group` pages share their figures
    /// ([`figure_group`]; a power of two).
    pub fn for_load(
        n: u32,
        per_page: u32,
        block_size: u32,
        cache_pages: usize,
        paged: bool,
        group: u32,
    ) -> BlockTable {
        let bad = BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0);
        let mut t = Self::filled(n, per_page, block_size, cache_pages, bad, paged, group);
        // (Exact for blocks that are all bad; each page loaded adds its blocks.)
        t.wl = Some(WlFigures::default());
        t
    }

    fn filled(
        n: u32,
        per_page: u32,
        block_size: u32,
        cache_pages: usize,
        e: BlockInfo,
        paged: bool,
        group: u32,
    ) -> BlockTable {
        let per_page = per_page.max(1);
        let pages = n.div_ceil(per_page);
        let width = 6 + (32 - block_size.leading_zeros());
        let paged = paged && width <= 32;
        // (Pages share figures only when paged.)
        let group_shift = match paged {
            true => group.max(1).ilog2() as u8,
            false => 0,
        };
        let groups = pages.div_ceil(1 << group_shift);
        let per_block = |bytes: usize| if paged { 0 } else { bytes };
        let mut t = BlockTable {
            n,
            width: width as u8,
            block_size,
            hot: vec![0; per_block((n as usize * width as usize).div_ceil(8) + 8)],
            per_page,
            forced: vec![0; pages.div_ceil(32) as usize],
            changed: vec![0; per_block(n.div_ceil(32) as usize)],
            changed_in: vec![0; if paged { 0 } else { pages as usize }],
            wear_changed: vec![0; per_block(n.div_ceil(32) as usize)],
            counts: [0; 8],
            live_files: 0,
            used: [UsedSums::default(); LogKind::ALL.len()],
            page_addr: vec![Addr::NONE; pages as usize],
            over: VecMap::new(),
            cache: Vec::new(),
            // (Paged: the anchor area's page stays, and another must fit beside it.)
            cache_pages: cache_pages
                .max(1 + paged as usize * 2)
                .min(pages.max(1) as usize) as u32,
            paged: None,
            bounds: Vec::new(),
            group_shift,
            free_gen: 0,
            young: Vec::new(),
            old: Vec::new(),
            cand_gen: u64::MAX,
            cand_all: false,
            wl: None,
            wl_stale: 0,
            offered: 0,
        };
        if !paged {
            for b in 0..n {
                t.hot_put(b, e);
            }
        }
        t.counts[e.state() as usize] = n;
        // Only a table whose pages may not all be cached needs bounds to skip reads.
        if pages > t.cache_pages || paged {
            t.bounds = vec![PageBounds::exact(&[Wear::default()], |_| e); groups as usize];
        }
        if paged {
            let counts = (0..groups)
                .map(|g| PageCounts::exact(t.group_range(g).map(|_| e)))
                .collect();
            t.paged = Some(Box::new(Paged {
                pinned: u32::MAX,
                counts,
                ..Paged::default()
            }));
        }
        t
    }

    /// Whether the records are paged: RAM holds those of a bounded cache of block-table pages
    /// and the changed ones of the others, and a lookup of any other needs its page read
    /// ([`BlockTable::try_get`], [`BlockTable::cache_records`]).
    pub fn pages_records(&self) -> bool {
        self.is_paged()
    }

    /// Whether the records are paged (see [`BlockTable::pages_records`]).
    ///
    /// Always false without the `paged-records` feature, so that a build without it links none
    /// of the paging code.
    fn is_paged(&self) -> bool {
        cfg!(feature = "paged-records") && self.paged.is_some()
    }

    /// What RAM holds of paged records (empty when they are all in RAM).
    fn pg(&self) -> &Paged {
        if !cfg!(feature = "paged-records") {
            return &NOT_PAGED;
        }
        self.paged.as_deref().unwrap_or(&NOT_PAGED)
    }

    /// [`BlockTable::pg`] to change (only ever used when paged: every caller checks).
    fn pgm(&mut self) -> &mut Paged {
        self.paged.get_or_insert_with(|| {
            Box::new(Paged {
                pinned: u32::MAX,
                ..Paged::default()
            })
        })
    }

    /// Paged: page `i`'s records, if cached.
    fn page_recs(&self, i: u32) -> Option<&PagedRecs> {
        self.pg().pages.iter().find(|p| p.i == i)
    }

    /// Whether block `b`'s page holds the anchor area (paged: it never leaves the cache).
    fn holds_area(&self, i: u32) -> bool {
        i * self.per_page < ANCHOR_AREA
    }

    /// Bit position of block `b`'s packed record.
    fn bit(&self, b: u32) -> (usize, u32) {
        let bit = b as u64 * self.width as u64;
        ((bit / 8) as usize, (bit % 8) as u32)
    }

    fn word(&self, at: usize) -> u64 {
        let mut w = [0u8; 8];
        if let Some(s) = self.hot.get(at..at + 8) {
            w.copy_from_slice(s);
        }
        u64::from_le_bytes(w)
    }

    fn hot_get(&self, b: u32) -> BlockInfo {
        let (at, sh) = self.bit(b);
        let v = (self.word(at) >> sh) & ((1u64 << self.width) - 1);
        BlockInfo {
            live: (v >> 6) as u32,
            bits: (v & 63) as u8,
        }
    }

    fn hot_put(&mut self, b: u32, e: BlockInfo) {
        let old = self.hot_get(b);
        let (at, sh) = self.bit(b);
        let mask = ((1u64 << self.width) - 1) << sh;
        let live = e.live.min(self.block_size);
        let v = ((live as u64) << 6 | (e.bits & 63) as u64) << sh;
        let w = (self.word(at) & !mask) | v;
        if let Some(s) = self.hot.get_mut(at..at + 8) {
            s.copy_from_slice(&w.to_le_bytes());
            self.follow_sums(old, BlockInfo { live, bits: e.bits });
        }
    }

    /// Block `b`'s record, if RAM holds it (always unless paged).
    fn rec(&self, b: u32) -> Option<BlockInfo> {
        if b >= self.n {
            return None;
        }
        if !self.is_paged() {
            return Some(self.hot_get(b));
        }
        let i = b / self.per_page;
        if let Some(p) = self.page_recs(i) {
            return p
                .recs
                .get((b - i * self.per_page) as usize)
                .map(|&v| unpack(v));
        }
        let pg = self.pg();
        pg.rec_over
            .get(&b)
            .or_else(|| pg.rec_keep.get(&b))
            .map(|&v| unpack(v))
    }

    /// Stores `e` as block `b`'s record, following the sums and the page's bounds; false
    /// when RAM does not hold the record (paged: the store loads it first).
    fn rec_put(&mut self, b: u32, e: BlockInfo) -> bool {
        let Some(old) = self.rec(b) else {
            debug_assert!(false, "block {b}'s record changed while not in RAM");
            return false;
        };
        let new = BlockInfo {
            live: e.live.min(self.block_size),
            bits: e.bits,
        };
        if !self.is_paged() {
            self.hot_put(b, new);
            return true;
        }
        let i = b / self.per_page;
        let k = (b - i * self.per_page) as usize;
        let g = self.group_of(i);
        let pg = self.pgm();
        match pg.pages.iter_mut().find(|p| p.i == i) {
            Some(p) => {
                if let Some(x) = p.recs.get_mut(k) {
                    *x = pack(new);
                }
            }
            // (Not cached: the record is changed, or kept.)
            None => match pg.rec_over.get_mut(&b) {
                Some(x) => *x = pack(new),
                // A kept block freed by a checkpoint (not marked: its page's copy, read again,
                // gives it as free) leaves RAM; any other change stays in RAM (`mark` makes it
                // changed).
                None if freed_by_checkpoint(old) && new.state().is_free() => {
                    pg.rec_keep.remove(&b);
                    #[cfg(debug_assertions)]
                    pg.evicted.insert(b, pack(new));
                }
                None => {
                    pg.rec_keep.insert(b, pack(new));
                }
            },
        }
        if let Some(c) = pg.counts.get_mut(g) {
            c.follow(old, new);
        }
        self.follow_sums(old, new);
        true
    }

    /// Whether a record's live bytes count in [`BlockTable::live_outside_journal`].
    fn holds_files(e: BlockInfo) -> bool {
        !matches!(e.state(), BlockState::Bad | BlockState::Anchor) && e.kind() != LogKind::Journal
    }

    /// Keeps `live_files` and `used` with a record's change from `old` to `new`.
    fn follow_sums(&mut self, old: BlockInfo, new: BlockInfo) {
        if Self::holds_files(old) {
            self.live_files -= old.live as u64;
        }
        if Self::holds_files(new) {
            self.live_files += new.live as u64;
        }
        let (os, ns) = (
            old.state() == BlockState::Used,
            new.state() == BlockState::Used,
        );
        let (ok, nk) = (old.kind() as usize, new.kind() as usize);
        if os && ns && ok == nk && new.live <= old.live {
            // Live bytes killed in a closed block: the least can only fall.
            let u = &mut self.used[nk];
            u.live -= (old.live - new.live) as u64;
            if u.min != UsedSums::UNKNOWN {
                u.min = u.min.min(new.live);
            }
            return;
        }
        if os {
            let u = &mut self.used[ok];
            u.n -= 1;
            u.live -= old.live as u64;
            if old.live <= u.min || u.n == 0 {
                u.min = UsedSums::UNKNOWN;
            }
        }
        if ns {
            let u = &mut self.used[nk];
            u.n += 1;
            u.live += new.live as u64;
            if u.n == 1 {
                u.min = new.live;
            } else if u.min != UsedSums::UNKNOWN {
                u.min = u.min.min(new.live);
            }
        }
    }

    /// Replaces block `b`'s record by `e`, keeping the state counts; false outside the table.
    fn put(&mut self, b: u32, e: BlockInfo) -> bool {
        let Some(old) = self.rec(b) else {
            debug_assert!(b >= self.n, "block {b}'s record changed while not in RAM");
            return false;
        };
        self.rec_put(b, e);
        let (os, ns) = (old.state(), e.state());
        self.counts[os as usize] -= 1;
        self.counts[ns as usize] += 1;
        if old.bits != e.bits {
            // (The block's erase count, looked up once for the figures and the bounds.)
            let ec = match self.wl.is_some() || !self.bounds.is_empty() {
                true => self.wear(b).map(|w| w.ec),
                false => None,
            };
            self.wl_follow_record(b, old, e, ec);
            let g = self.group_of(b / self.per_page);
            if let Some(pb) = self.bounds.get_mut(g) {
                pb.widen(e, ec);
            }
            if ns.is_free() && !os.is_free() && b >= ANCHOR_AREA {
                self.free_gen += 1;
            }
            if os.is_free() && !ns.is_free() {
                // (Candidates are free blocks: a paged record may not be in RAM to say so.)
                self.young.retain(|x| x.1 != b);
                self.old.retain(|x| x.1 != b);
            }
        }
        true
    }

    /// Number of block-table pages.
    pub fn page_count(&self) -> u32 {
        self.n.div_ceil(self.per_page)
    }

    /// Records per block-table page.
    pub fn per_page(&self) -> u32 {
        self.per_page
    }

    /// Records in block-table page `i` (fewer in the last page).
    pub fn page_len(&self, i: u32) -> usize {
        self.page_range(i).len()
    }

    /// The blocks whose records page `i` holds.
    fn page_range(&self, i: u32) -> core::ops::Range<u32> {
        let first = i.saturating_mul(self.per_page).min(self.n);
        first..first.saturating_add(self.per_page).min(self.n)
    }

    /// Whether pages share figures (paged records only: a build without the `paged-records`
    /// feature links none of it).
    fn grouped(&self) -> bool {
        self.is_paged() && self.group_shift > 0
    }

    /// The group of pages that shares page `i`'s figures (its index in `bounds` and
    /// `Paged::counts`).
    fn group_of(&self, i: u32) -> usize {
        (i >> self.group_shift) as usize
    }

    /// The pages of group `g`.
    fn group_pages(&self, g: u32) -> core::ops::Range<u32> {
        let first = (g << self.group_shift).min(self.page_count());
        first..(first + (1 << self.group_shift)).min(self.page_count())
    }

    /// The blocks whose records the pages of group `g` hold.
    fn group_range(&self, g: u32) -> core::ops::Range<u32> {
        let p = self.group_pages(g);
        self.page_range(p.start).start..self.page_range(p.end.max(1) - 1).end
    }

    /// Marks block-table page `i` to be written whole by the next checkpoint.
    pub fn mark_page(&mut self, i: u32) {
        if let Some(w) = self.forced.get_mut((i / 32) as usize) {
            *w |= 1 << (i % 32);
        }
        // Paged: every record of a cached page counts as changed, so that none is dropped
        // with the page while RAM may differ from its copy (a copy whose write failed after
        // its records were marked written, or one about to be erased).
        if self.is_paged() {
            for b in self.page_range(i) {
                if self.cached_page(i).is_some() {
                    self.mark(b);
                }
            }
        }
    }

    /// `Erased` and `Reserved` blocks in page `i` (paged: in its group of pages,
    /// [`BlockTable::group_of`]).
    pub fn erased_in_page(&self, i: u32) -> u32 {
        match self.pg().counts.get(self.group_of(i)) {
            Some(c) => c.erased_n as u32,
            None => self
                .page_range(i)
                .filter(|&b| erased_or_reserved(self.get(b)))
                .count() as u32,
        }
    }

    /// Free blocks in page `i` (paged: kept with every change, for pages not cached, in its
    /// group of pages).
    pub fn free_in_page(&self, i: u32) -> u32 {
        match self.pg().counts.get(self.group_of(i)) {
            Some(c) => c.free_n as u32,
            None => self
                .page_range(i)
                .filter(|&b| self.get(b).state().is_free())
                .count() as u32,
        }
    }

    /// Marks every block-table page to be written whole.
    pub fn mark_all(&mut self) {
        for i in 0..self.page_count() {
            self.mark_page(i);
        }
    }

    /// Marks page `i` as written (its records as they are now are on flash): not forced, no
    /// record in it changed.
    pub fn clear_page(&mut self, i: u32) {
        if let Some(w) = self.forced.get_mut((i / 32) as usize) {
            *w &= !(1 << (i % 32));
        }
        if self.is_paged() {
            // (The page is cached while it is written: its records are all in RAM.)
            let r = self.page_range(i);
            let pg = self.pgm();
            if let Some(p) = pg.pages.iter_mut().find(|p| p.i == i) {
                p.changed.iter_mut().for_each(|w| *w = 0);
            }
            pg.rec_over.retain(|b, _| !r.contains(b));
        }
        for b in self.page_range(i) {
            if let Some(w) = self.changed.get_mut((b / 32) as usize) {
                *w &= !(1 << (b % 32));
            }
        }
        if let Some(c) = self.changed_in.get_mut(i as usize) {
            *c = 0;
        }
    }

    /// Whether page `i` must be written whole.
    pub fn page_forced(&self, i: u32) -> bool {
        self.forced
            .get((i / 32) as usize)
            .is_some_and(|w| w & (1 << (i % 32)) != 0)
    }

    /// Records of page `i` that differ from the page on flash.
    pub fn page_changed(&self, i: u32) -> u32 {
        if self.is_paged() {
            // (The changed records are the set bits of a cached page, or else the page's
            // entries in `rec_over`.)
            return match self.page_recs(i) {
                Some(p) => p.changed.iter().map(|w| w.count_ones()).sum(),
                None => {
                    let r = self.page_range(i);
                    self.pg().rec_over.range_len(&r.start, &r.end) as u32
                }
            };
        }
        self.changed_in.get(i as usize).map_or(0, |&c| c as u32)
    }

    /// Whether page `i` must be written whole or has changed records.
    pub fn page_dirty(&self, i: u32) -> bool {
        self.page_forced(i) || self.page_changed(i) > 0
    }

    /// Whether block `b`'s record differs from the one in its page on flash.
    pub fn block_changed(&self, b: u32) -> bool {
        if self.is_paged() {
            let i = b / self.per_page;
            return match self.page_recs(i) {
                Some(p) => bit(&p.changed, b - i * self.per_page),
                None => self.pg().rec_over.contains_key(&b),
            };
        }
        self.changed
            .get((b / 32) as usize)
            .is_some_and(|w| w & (1 << (b % 32)) != 0)
    }

    /// Blocks whose records differ from their pages on flash, in block order.
    pub fn changed_blocks(&self) -> Vec<u32> {
        if self.is_paged() {
            let pg = self.pg();
            let mut v: Vec<u32> = pg.rec_over.iter().map(|(&b, _)| b).collect();
            for p in &pg.pages {
                let first = p.i * self.per_page;
                v.extend(
                    (0..p.recs.len() as u32)
                        .filter(|&k| bit(&p.changed, k))
                        .map(|k| first + k),
                );
            }
            crate::sort::sort(&mut v);
            return v;
        }
        (0..self.len()).filter(|&b| self.block_changed(b)).collect()
    }

    /// Marks block `b`'s record as differing from its page on flash.
    pub fn mark(&mut self, b: u32) {
        if b >= self.len() {
            return;
        }
        let i = b / self.per_page;
        let newly = if self.is_paged() {
            let k = b - i * self.per_page;
            let pg = self.pgm();
            match pg.pages.iter_mut().find(|p| p.i == i) {
                Some(p) => match p.changed.get_mut((k / 32) as usize) {
                    Some(w) => {
                        let was = *w & (1 << (k % 32)) != 0;
                        *w |= 1 << (k % 32);
                        !was
                    }
                    None => false,
                },
                // (Paged, a record not cached is in RAM while changed, or kept.)
                None => match pg.rec_keep.remove(&b) {
                    Some(x) => {
                        pg.rec_over.insert(b, x);
                        true
                    }
                    None => false,
                },
            }
        } else {
            let Some(w) = self.changed.get_mut((b / 32) as usize) else {
                return;
            };
            let was = *w & (1 << (b % 32)) != 0;
            *w |= 1 << (b % 32);
            !was
        };
        if newly {
            if let Some(c) = self.changed_in.get_mut(i as usize) {
                *c += 1;
            }
        }
    }

    /// Number of blocks.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// Block `b`'s record (a bad block for a number outside the table, and for one whose
    /// paged record RAM does not hold: the store loads it first, [`BlockTable::try_get`]).
    pub fn get(&self, b: u32) -> BlockInfo {
        match self.rec(b) {
            Some(e) => e,
            None => {
                debug_assert!(b >= self.n, "block {b}'s record read while not in RAM");
                BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0)
            }
        }
    }

    /// Block `b`'s record if RAM holds it (`None` outside the table).
    pub fn try_get(&self, b: u32) -> Option<BlockInfo> {
        self.rec(b)
    }

    /// Changes block `b`'s record with `f` and marks its page (nothing outside the table).
    pub fn update(&mut self, b: u32, f: impl FnOnce(&mut BlockInfo)) {
        if let Some(mut e) = self.rec(b) {
            f(&mut e);
            self.put(b, e);
            self.mark(b);
        }
    }

    /// Replaces block `b`'s record.
    pub fn set(&mut self, b: u32, e: BlockInfo) {
        if self.rec(b).is_some_and(|x| x != e) && self.put(b, e) {
            self.mark(b);
        }
    }

    /// Replaces block `b`'s record without marking its page.
    pub fn set_unmarked(&mut self, b: u32, e: BlockInfo) {
        self.put(b, e);
    }

    /// Sets block `b`'s state (owner log unchanged).
    pub fn set_state(&mut self, b: u32, s: BlockState) {
        if let Some(mut e) = self.rec(b) {
            if e.state() != s {
                e.set_state(s);
                self.put(b, e);
                self.mark(b);
            }
        }
    }

    /// The number and record of every block whose record RAM holds (every block unless
    /// paged).
    pub fn iter(&self) -> impl Iterator<Item = (u32, BlockInfo)> + '_ {
        (0..self.n).filter_map(|b| self.rec(b).map(|e| (b, e)))
    }

    /// [`BlockTable::iter`]'s records, found without a lookup per block when paged (cached
    /// pages, then the changed records of the others).
    pub fn in_ram(&self) -> Vec<(u32, BlockInfo)> {
        if !self.is_paged() {
            return self.iter().collect();
        }
        let pg = self.pg();
        let mut v: Vec<(u32, BlockInfo)> = Vec::new();
        for p in &pg.pages {
            let first = p.i * self.per_page;
            v.extend(
                p.recs
                    .iter()
                    .enumerate()
                    .map(|(k, &x)| (first + k as u32, unpack(x))),
            );
        }
        v.extend(pg.rec_over.iter().map(|(&b, &x)| (b, unpack(x))));
        v.extend(pg.rec_keep.iter().map(|(&b, &x)| (b, unpack(x))));
        v
    }

    /// Blocks in state `s`.
    pub fn count(&self, s: BlockState) -> u32 {
        self.counts[s as usize]
    }

    /// Live bytes of the blocks that are neither bad, anchors nor the journal's.
    pub fn live_outside_journal(&self) -> u64 {
        self.live_files
    }

    /// The closed (`Used`) blocks of log `kind`: how many, and their live bytes added up.
    pub fn used_of(&self, kind: LogKind) -> (u32, u64) {
        let u = self.used[kind as usize];
        (u.n, u.live)
    }

    /// The least live count among the closed blocks of log `kind` (`None`: it has none). A
    /// pass over the records when the block that held it has changed since it was asked.
    pub fn used_min_live(&mut self, kind: LogKind) -> Option<u32> {
        if self.used[kind as usize].n == 0 {
            return None;
        }
        if self.is_paged() {
            // (The store finds it, reading pages: `Store::used_min_live`.)
            let m = self.used[kind as usize].min;
            return (m != UsedSums::UNKNOWN).then_some(m);
        }
        if self.used[kind as usize].min == UsedSums::UNKNOWN {
            let (_, counted) = self.recount_sums();
            for (u, c) in self.used.iter_mut().zip(counted) {
                if u.n > 0 {
                    u.min = c.min;
                }
            }
        }
        Some(self.used[kind as usize].min)
    }

    /// Whether log `kind` has closed blocks whose least live count is not known (paged: the
    /// store finds it, [`BlockTable::set_used_min`]).
    pub fn used_min_unknown(&self, kind: LogKind) -> bool {
        let u = self.used[kind as usize];
        u.n > 0 && u.min == UsedSums::UNKNOWN
    }

    /// The least live count of log `kind`'s closed blocks, found by the store.
    pub fn set_used_min(&mut self, kind: LogKind, m: u32) {
        self.used[kind as usize].min = m;
    }

    /// No closed block of page `i` outside the journal has fewer live bytes than this
    /// (`u32::MAX`: none has any, or the page has no bounds).
    pub fn used_lo(&self, i: u32) -> u32 {
        self.pg()
            .counts
            .get(self.group_of(i))
            .map_or(0, |c| c.used_lo)
    }

    /// `live_files` and `used` counted from the records, in one pass (every least count
    /// known; `UNKNOWN` for a log with no closed block).
    fn recount_sums(&self) -> (u64, [UsedSums; LogKind::ALL.len()]) {
        let mut live = 0u64;
        let mut used = [UsedSums {
            min: UsedSums::UNKNOWN,
            ..UsedSums::default()
        }; LogKind::ALL.len()];
        for (_, e) in self.iter() {
            if Self::holds_files(e) {
                live += e.live as u64;
            }
            if e.state() == BlockState::Used {
                let u = &mut used[e.kind() as usize];
                u.n += 1;
                u.live += e.live as u64;
                u.min = u.min.min(e.live);
            }
        }
        (live, used)
    }

    /// Counts `live_outside_journal`, `used_of` and `used_min_live` again from the records
    /// (for debug checks): `Err` names the first that differs.
    pub fn check_sums(&self) -> core::result::Result<(), &'static str> {
        if self.is_paged() {
            // (RAM does not hold every record: a page read again is checked instead.)
            return Ok(());
        }
        let (live, used) = self.recount_sums();
        if live != self.live_files {
            return Err("live bytes outside the journal");
        }
        for (have, want) in self.used.iter().zip(used) {
            if have.n != want.n || have.live != want.live {
                return Err("closed blocks or their live bytes");
            }
            if have.n > 0 && have.min != UsedSums::UNKNOWN && have.min != want.min {
                return Err("least live count of closed blocks");
            }
        }
        Ok(())
    }

    /// Checks every page bound RAM can check (pages whose wear it holds): `Err` when a free
    /// block's erase count or a block's age lies outside its page's bounds (for debug checks).
    pub fn check_bounds(&self) -> core::result::Result<(), &'static str> {
        for i in 0..self.page_count() {
            if let Some(v) = self.page_wear(i) {
                self.bounds_hold(i, &v)?;
            }
        }
        Ok(())
    }

    /// Whether page `i`'s bounds hold its blocks' current wear `v` (`Err` names what does
    /// not; debug checks, also of every page read from flash).
    pub fn bounds_hold(&self, i: u32, v: &[Wear]) -> core::result::Result<(), &'static str> {
        let Some(&pb) = self.bounds.get(self.group_of(i)) else {
            return Ok(());
        };
        let (flo, fhi) = self.free_ec_range(i);
        let (mlo, chi) = self.wl_ec_range(i);
        for (b, w) in self.page_range(i).zip(v) {
            let e = self.get(b);
            if e.state().is_free() && (w.ec < flo || w.ec > fhi) {
                return Err("a free block's erase count outside its page's bounds");
            }
            if (wl_movable(e) && w.ec < mlo) || (in_circulation(e) && w.ec > chi) {
                return Err("an erase count outside its page's wear-leveling bounds");
            }
            let mut o = pb;
            o.widen_age(w.age);
            if o.oldest != pb.oldest {
                return Err("a block older than its page's oldest age");
            }
        }
        Ok(())
    }

    /// Blocks in the free pool (`Free` or `Erased`).
    pub fn free_count(&self) -> u32 {
        self.count(BlockState::Free) + self.count(BlockState::Erased)
    }

    /// Adds `bytes` live bytes to block `b` (never beyond `block_size`).
    pub fn add_live(&mut self, b: u32, bytes: u32, block_size: u32) {
        self.add_live_quiet(b, bytes, block_size);
        self.mark(b);
    }

    /// [`BlockTable::add_live`] without marking the page: for block-table pages themselves,
    /// whose bytes the records on flash do not count (see the checkpoint).
    pub fn add_live_quiet(&mut self, b: u32, bytes: u32, block_size: u32) {
        if let Some(mut e) = self.rec(b) {
            e.live = e.live.saturating_add(bytes).min(block_size);
            self.rec_put(b, e);
        }
    }

    /// Takes `bytes` live bytes away from block `b`.
    pub fn kill(&mut self, b: u32, bytes: u32) {
        if bytes > 0 {
            self.mark(b);
        }
        self.kill_quiet(b, bytes);
    }

    /// [`BlockTable::kill`] without marking the page (block-table pages, as
    /// [`BlockTable::add_live_quiet`]).
    pub fn kill_quiet(&mut self, b: u32, bytes: u32) {
        if let Some(mut e) = self.rec(b) {
            e.live = e.live.saturating_sub(bytes);
            self.rec_put(b, e);
        }
    }

    // ----- wear ----------------------------------------------------------------------------

    /// Where the newest copy of block-table page `i` is on flash (`Addr::NONE`: nowhere).
    pub fn page_addr(&self, i: u32) -> Addr {
        self.page_addr
            .get(i as usize)
            .copied()
            .unwrap_or(Addr::NONE)
    }

    /// Where the newest copy of every block-table page is.
    pub fn page_addrs(&self) -> &[Addr] {
        &self.page_addr
    }

    /// Block `b`'s wear, if RAM has it (`None`: its page on flash has it, see
    /// [`BlockTable::cache_page`]). Zero outside the table.
    pub fn wear(&self, b: u32) -> Option<Wear> {
        if b >= self.n {
            return Some(Wear::default());
        }
        let i = b / self.per_page;
        let k = (b - i * self.per_page) as usize;
        if let Some(c) = self.cache.iter().find(|c| c.i == i) {
            return c.wear.get(k).copied();
        }
        if let Some(w) = self.over.get(&b) {
            return Some(*w);
        }
        self.page_addr(i).is_none().then_some(Wear::default())
    }

    /// The wear of page `i`'s blocks as it is now, if RAM has it.
    pub fn page_wear(&self, i: u32) -> Option<Vec<Wear>> {
        if let Some(c) = self.cache.iter().find(|c| c.i == i) {
            return Some(c.wear.clone());
        }
        if !self.page_addr(i).is_none() {
            return None;
        }
        let mut v = vec![Wear::default(); self.page_range(i).len()];
        self.apply_changes(i, &mut v);
        Some(v)
    }

    /// Applies to `v`, the wear of page `i`'s blocks as its copy on flash has it, what changed
    /// since (for a page not cached).
    pub fn apply_changes(&self, i: u32, v: &mut [Wear]) {
        let r = self.page_range(i);
        for (&b, w) in self.over.iter() {
            if r.contains(&b) {
                if let Some(x) = v.get_mut((b - r.start) as usize) {
                    *x = *w;
                }
            }
        }
    }

    /// Caches the wear of page `i`, read from its copy on flash: with what changed since
    /// applied, which then lives in the cache only. When the cache is full, the page cached
    /// longest goes, the wear of its changed records kept aside.
    pub fn cache_page(&mut self, i: u32, mut v: Vec<Wear>) {
        debug_assert!(
            !self.is_paged(),
            "a paged table caches records with their wear"
        );
        if self.cache.iter().any(|c| c.i == i) {
            return;
        }
        self.apply_changes(i, &mut v);
        self.insert_cached(Cached { i, wear: v }, None);
    }

    /// Paged: caches page `i`, read from its copy on flash as `recs` (the store's view of
    /// them: see `Store::load_record`) and `v`: with what changed since applied (the changed
    /// records in `rec_over` and `over` move into the cache, marked).
    pub fn cache_records(&mut self, i: u32, recs: &[BlockInfo], mut v: Vec<Wear>) {
        if !self.is_paged() || self.cache.iter().any(|c| c.i == i) {
            return;
        }
        let r = self.page_range(i);
        self.apply_changes(i, &mut v);
        let mut packed: Vec<u32> = recs.iter().take(r.len()).map(|&e| pack(e)).collect();
        packed.resize(
            r.len(),
            pack(BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0)),
        );
        let mut changed = vec![0u32; r.len().div_ceil(32)];
        let pg = self.pgm();
        for (&b, &x) in pg.rec_over.iter() {
            if r.contains(&b) {
                let k = (b - r.start) as usize;
                packed[k] = x;
                changed[k / 32] |= 1 << (k % 32);
            }
        }
        for (&b, &x) in pg.rec_keep.iter() {
            if r.contains(&b) {
                packed[(b - r.start) as usize] = x;
            }
        }
        pg.rec_keep.retain(|b, _| !r.contains(b));
        pg.rec_over.retain(|b, _| !r.contains(b));
        #[cfg(debug_assertions)]
        for (k, &x) in packed.iter().enumerate() {
            let b = r.start + k as u32;
            if let Some(was) = pg.evicted.remove(&b) {
                debug_assert!(
                    x == was || bit(&changed, k as u32),
                    "block {b}'s record read back as {:?}, evicted as {:?}",
                    unpack(x),
                    unpack(was)
                );
            }
        }
        let recs = PagedRecs {
            i,
            recs: packed,
            changed,
        };
        self.insert_cached(Cached { i, wear: v }, Some(recs));
    }

    /// Puts page `c` in the cache (see [`BlockTable::cache_page`]; paged, with its records
    /// `recs`), making room: the page cached longest goes (never the anchor area's when
    /// paged, nor a pinned one), the wear (and, paged, the record) of its changed records kept
    /// aside.
    fn insert_cached(&mut self, c: Cached, recs: Option<PagedRecs>) {
        if self.cache.len() >= self.cache_pages as usize {
            let pinned = self.pg().pinned;
            let paged = self.is_paged();
            let pos = self
                .cache
                .iter()
                .position(|x| !(paged && (self.holds_area(x.i) || x.i == pinned)));
            if let Some(pos) = pos {
                let old = self.cache.remove(pos);
                self.evict(old);
            }
        }
        let r = self.page_range(c.i);
        self.over.retain(|&b, _| !r.contains(&b) || b < ANCHOR_AREA);
        match recs {
            None => {
                self.page_seen(c.i, &c.wear);
                self.cache.push(c);
            }
            Some(recs) => {
                // (The bounds are made from the records: cached first.)
                self.pgm().pages.push(recs);
                let (i, wear) = (c.i, c.wear.clone());
                self.cache.push(c);
                self.page_seen(i, &wear);
            }
        }
    }

    /// Keeps what RAM must not lose of page `old`, leaving the cache: changed records differ
    /// from their page on flash (in wear or not), so their wear (and, paged, their records)
    /// stay in RAM.
    fn evict(&mut self, old: Cached) {
        let j = old.i;
        let recs = match self.is_paged() {
            true => {
                let pg = self.pgm();
                let at = pg.pages.iter().position(|p| p.i == j);
                at.map(|at| pg.pages.remove(at))
            }
            false => None,
        };
        for (k, (b, w)) in self.page_range(j).zip(old.wear).enumerate() {
            let changed = match &recs {
                Some(p) => bit(&p.changed, k as u32),
                None => bit(&self.wear_changed, b),
            };
            if changed || b < ANCHOR_AREA {
                self.over.insert(b, w);
            }
            let Some(&x) = recs.as_ref().and_then(|p| p.recs.get(k)) else {
                continue;
            };
            let pg = self.pgm();
            if changed {
                pg.rec_over.insert(b, x);
            } else if kept_in_ram(unpack(x)) {
                pg.rec_keep.insert(b, x);
                // (Its wear too: a lookup of the record finds its erase count in RAM.)
                self.over.insert(b, w);
            } else {
                #[cfg(debug_assertions)]
                pg.evicted.insert(b, x);
            }
        }
    }

    /// Paged: block-table nodes block `b` holds ([`Paged::own`]).
    pub fn own_of(&self, b: u32) -> u32 {
        self.pg().own.get(&b).copied().unwrap_or(0)
    }

    /// Paged: block `b` holds one block-table node more (`add`) or one fewer.
    pub fn own_change(&mut self, b: u32, add: bool) {
        if !self.is_paged() {
            return;
        }
        let own = &mut self.pgm().own;
        let c = own.get_or_default(b);
        *c = match add {
            true => *c + 1,
            false => c.saturating_sub(1),
        };
        if *c == 0 {
            own.remove(&b);
        }
    }

    /// Paged: provisional bytes the newest copy of block `b`'s record left out
    /// ([`Paged::prov`]).
    pub fn prov_of(&self, b: u32) -> u32 {
        self.pg().prov.get(&b).copied().unwrap_or(0)
    }

    /// Paged: the records of page `i` were just encoded without the provisional bytes `prov`
    /// names (block, bytes; other pages' blocks ignored).
    pub fn set_prov(&mut self, i: u32, prov: &[(u32, u32)]) {
        if !self.is_paged() {
            return;
        }
        let r = self.page_range(i);
        let pv = &mut self.pgm().prov;
        pv.retain(|b, _| !r.contains(b));
        for &(b, bytes) in prov {
            if r.contains(&b) && bytes > 0 {
                pv.insert(b, bytes);
            }
        }
    }

    /// Paged: keeps page `i` in the cache until another is pinned ([`BlockTable::unpin`]).
    pub fn pin(&mut self, i: u32) {
        if self.is_paged() {
            self.pgm().pinned = i;
        }
    }

    /// Paged: lets the pinned page leave the cache again.
    pub fn unpin(&mut self) {
        if self.is_paged() {
            self.pgm().pinned = u32::MAX;
        }
    }

    /// Sets block `b`'s wear and marks its record changed. `leaving`: the block is leaving the
    /// free pool (the erase of an allocation), so the free-block candidates stay what they
    /// are.
    pub fn set_wear(&mut self, b: u32, w: Wear, leaving: bool) {
        let old = self.wear(b);
        if b >= self.n || old == Some(w) {
            return;
        }
        let Some(e) = self.rec(b) else {
            debug_assert!(
                false,
                "block {b}'s wear changed while its record is not in RAM"
            );
            return;
        };
        self.wl_follow_wear(b, e, old, w.ec);
        let i = b / self.per_page;
        let k = (b - i * self.per_page) as usize;
        let g = self.group_of(i);
        if let Some(pb) = self.bounds.get_mut(g) {
            // (Also for a block `leaving` the free pool: replay counts an erase of a block
            // that stays free that way.)
            pb.widen(e, Some(w.ec));
            pb.widen_age(w.age);
        }
        match self.cache.iter_mut().find(|c| c.i == i) {
            Some(c) => {
                if let Some(x) = c.wear.get_mut(k) {
                    *x = w;
                }
                if b < ANCHOR_AREA {
                    self.over.insert(b, w);
                }
            }
            None => {
                self.over.insert(b, w);
            }
        }
        self.mark(b);
        if let Some(x) = self.wear_changed.get_mut((b / 32) as usize) {
            *x |= 1 << (b % 32);
        }
        if !leaving && b >= ANCHOR_AREA && e.state().is_free() {
            self.free_gen += 1;
        }
    }

    /// Whether RAM holds the wear of every block (every page with a copy is cached).
    #[cfg(debug_assertions)]
    pub fn all_wear_in_ram(&self) -> bool {
        (0..self.page_count()).all(|i| self.page_addr(i).is_none() || self.cached_page(i).is_some())
    }

    /// Static wear leveling's figures, if kept up to date (see [`WlFigures`]).
    pub fn wl_figures(&self) -> Option<WlFigures> {
        self.wl.filter(|_| self.wl_stale == 0)
    }

    /// The figures whose totals are up to date while the largest erase count (`.1`) or the
    /// coldest block (`.2`) must be found again (`None`: the totals must be counted too).
    pub fn wl_partial(&self) -> Option<(WlFigures, bool, bool)> {
        let st = self.wl_stale;
        self.wl
            .map(|f| (f, st & WL_MAX_STALE != 0, st & WL_COLD_STALE != 0))
    }

    /// Sets the figures, counted or found again by the store.
    pub fn set_wl_figures(&mut self, f: WlFigures) {
        self.wl = Some(f);
        self.wl_stale = 0;
    }

    /// Keeps the figures up to date when block `b`'s record changes from `old` to `new`.
    /// `ec`: the block's erase count, if RAM holds it.
    fn wl_follow_record(&mut self, b: u32, old: BlockInfo, new: BlockInfo, ec: Option<u32>) {
        let Some(mut f) = self.wl else {
            return;
        };
        if in_circulation(old) != in_circulation(new) {
            let Some(ec) = ec else {
                self.wl = None;
                return;
            };
            if in_circulation(new) {
                f.sum += ec as u64;
                f.n += 1;
                f.max = f.max.max(ec);
            } else {
                f.sum -= ec as u64;
                f.n -= 1;
                if ec == f.max {
                    self.wl_stale |= WL_MAX_STALE;
                }
            }
        }
        if wl_movable(old) != wl_movable(new) {
            match ec {
                Some(ec) if wl_movable(new) => {
                    if f.coldest.is_none_or(|x| (ec, b) < x) {
                        f.coldest = Some((ec, b));
                    }
                }
                None if wl_movable(new) => self.wl_stale |= WL_COLD_STALE,
                _ => {
                    if f.coldest.is_some_and(|x| x.1 == b) {
                        self.wl_stale |= WL_COLD_STALE;
                    }
                }
            }
        }
        self.wl = Some(f);
    }

    /// Keeps the figures up to date when block `b`'s erase count changes from `old` (`None`:
    /// not in RAM) to `ec`.
    fn wl_follow_wear(&mut self, b: u32, e: BlockInfo, old: Option<Wear>, ec: u32) {
        let Some(mut f) = self.wl else {
            return;
        };
        let Some(old) = old.map(|w| w.ec) else {
            if in_circulation(e) {
                self.wl = None;
            }
            return;
        };
        if in_circulation(e) {
            f.sum = f.sum + ec as u64 - old as u64;
            if ec < old && old == f.max {
                self.wl_stale |= WL_MAX_STALE;
            }
            f.max = f.max.max(ec);
        }
        if wl_movable(e) {
            match f.coldest {
                Some((_, x)) if x == b && ec > old => self.wl_stale |= WL_COLD_STALE,
                Some((_, x)) if x == b => f.coldest = Some((ec, b)),
                _ => {
                    if f.coldest.is_none_or(|x| (ec, b) < x) {
                        f.coldest = Some((ec, b));
                    }
                }
            }
        }
        self.wl = Some(f);
    }

    /// Wear entries kept besides the cache (changed records of pages not cached, and the
    /// anchor area's): a checkpoint writes them to their pages.
    pub fn wear_backlog(&self) -> usize {
        self.over.len()
    }

    /// Page `i`'s cached wear, if the cache holds it (current: changes are made there).
    pub fn cached_page(&self, i: u32) -> Option<&[Wear]> {
        self.cache.iter().find(|c| c.i == i).map(|c| &c.wear[..])
    }

    /// Page `i`'s new copy is at `a`, with the wear RAM has now: nothing in it differs from
    /// the page any more.
    pub fn page_written(&mut self, i: u32, a: Addr) {
        let r = self.page_range(i);
        // The anchor area's wear stays in RAM (it may still be the zero of a page that had no
        // copy).
        for b in r.start..r.end.min(ANCHOR_AREA) {
            if !self.over.contains_key(&b) {
                if let Some(w) = self.wear(b) {
                    self.over.insert(b, w);
                }
            }
        }
        if let Some(x) = self.page_addr.get_mut(i as usize) {
            *x = a;
        }
        for b in r.clone() {
            if let Some(x) = self.wear_changed.get_mut((b / 32) as usize) {
                *x &= !(1 << (b % 32));
            }
        }
        if self.cached_page(i).is_none() {
            self.over.retain(|&b, _| !r.contains(&b) || b < ANCHOR_AREA);
        }
        if self.over.heap_bytes() > 2 * self.over.len() * 12 + 256 {
            self.over.shrink();
        }
    }

    /// Loads block-table page `i`, read at `a` (mount): its records, and their wear while
    /// the cache has room (the anchor area's always).
    pub fn load_page(&mut self, i: u32, a: Addr, recs: &[BlockRecord]) {
        let r = self.page_range(i);
        if let Some(x) = self.page_addr.get_mut(i as usize) {
            *x = a;
        }
        let v: Vec<Wear> = recs.iter().take(r.len()).map(|x| x.wear).collect();
        if self.is_paged() {
            // Cached as bad blocks first, which the records then replace (every block is bad
            // until its page is loaded, and the sums follow each change).
            let bad = pack(BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0));
            let recs = PagedRecs {
                i,
                recs: vec![bad; r.len()],
                changed: vec![0; r.len().div_ceil(32)],
            };
            self.insert_cached(Cached { i, wear: v.clone() }, Some(recs));
        }
        // Wear leveling's figures count the page's blocks here: the records' changes cannot
        // (their wear is not in RAM yet).
        let mut wl = self.wl.take();
        for (b, rec) in r.clone().zip(recs) {
            self.put(b, rec.info);
            if b < ANCHOR_AREA {
                self.over.insert(b, rec.wear);
            }
            if let Some(f) = wl.as_mut() {
                f.add(b, rec.info, rec.wear.ec, true);
            }
        }
        self.wl = wl;
        // Pages load in order: a group's bounds start from its first page and take in each
        // page after it (one page to a group unless pages share figures); the counts followed
        // every record's change from the bad blocks the table started with.
        let first = r.start;
        let pb = PageBounds::exact(&v, |k| self.get(first + k as u32));
        let at_start = i & ((1 << self.group_shift) - 1) == 0;
        let g = self.group_of(i);
        if let Some(x) = self.bounds.get_mut(g) {
            *x = if at_start { pb } else { x.merge(pb) };
        }
        if !self.is_paged() && self.cache.len() < self.cache_pages as usize {
            self.cache.push(Cached { i, wear: v });
        }
    }

    /// Page `i`'s blocks have wear `v` now (read from flash, or loaded): its bounds become
    /// exact. (Pages that share their figures, [`figure_group`]: those of the group become
    /// exact when every page of it is cached, and stay as wide as they are until then.)
    pub fn page_seen(&mut self, i: u32, v: &[Wear]) {
        if self.is_paged() && self.cached_page(i).is_none() {
            // (Its records are not in RAM: the bounds stay as wide as they are.)
            return;
        }
        if self.grouped() {
            self.group_seen(self.group_of(i) as u32);
            return;
        }
        let first = self.page_range(i).start;
        if self.is_paged() {
            let c = PageCounts::exact(self.page_range(i).map(|b| self.get(b)));
            if let Some(x) = self.pgm().counts.get_mut(i as usize) {
                *x = c;
            }
        }
        let pb = PageBounds::exact(v, |k| self.get(first + k as u32));
        if let Some(x) = self.bounds.get_mut(i as usize) {
            *x = pb;
        }
    }

    /// Paged pages sharing figures: group `g`'s figures become exact if every page of it is
    /// cached (records and wear in RAM).
    fn group_seen(&mut self, g: u32) {
        let mut pb: Option<PageBounds> = None;
        for j in self.group_pages(g) {
            let Some(w) = self.cached_page(j) else {
                return;
            };
            let first = self.page_range(j).start;
            let e = PageBounds::exact(w, |k| self.get(first + k as u32));
            pb = Some(match pb {
                Some(x) => x.merge(e),
                None => e,
            });
        }
        let c = PageCounts::exact(self.group_range(g).map(|b| self.get(b)));
        if let Some(x) = self.pgm().counts.get_mut(g as usize) {
            *x = c;
        }
        if let (Some(pb), Some(x)) = (pb, self.bounds.get_mut(g as usize)) {
            *x = pb;
        }
    }

    /// Whether RAM holds the wear of page `i`'s blocks (it is cached, or has no copy on
    /// flash): a scan reads nothing for it.
    pub fn page_in_ram(&self, i: u32) -> bool {
        self.page_addr(i).is_none() || self.cached_page(i).is_some()
    }

    /// Bounds on the erase counts of page `i`'s free blocks: none lies outside them
    /// (`u32::MAX` above: no bound).
    pub fn free_ec_range(&self, i: u32) -> (u32, u32) {
        self.bounds
            .get(self.group_of(i))
            .map_or((0, u32::MAX), |pb| (pb.free_lo as u32, upper(pb.free_hi)))
    }

    /// The oldest age a block of page `i` may have ([`Wear::age`]; `None`: no bound).
    pub fn oldest_age(&self, i: u32) -> Option<u32> {
        self.bounds.get(self.group_of(i)).map(|pb| pb.oldest)
    }

    /// Bounds for static wear leveling's figures in page `i`: no block wear leveling may move
    /// has an erase count below the first, none in circulation one above the second
    /// (`u32::MAX`: no bound).
    pub fn wl_ec_range(&self, i: u32) -> (u32, u32) {
        self.bounds
            .get(self.group_of(i))
            .map_or((0, u32::MAX), |pb| {
                (pb.movable_lo as u32, upper(pb.circ_hi))
            })
    }

    /// Loads a record a delta node carried (mount, after the pages): it differs from its page.
    pub fn load_delta(&mut self, b: u32, rec: BlockRecord) {
        if self.put(b, rec.info) {
            self.set_wear(b, rec.wear, true);
            self.mark(b);
        }
    }

    /// The next free block outside the anchor area by wear (least worn, or most worn for
    /// `old`), as (erase count, block): `Some(None)` when there is none, `None` when the
    /// candidates must be found again ([`BlockTable::begin_candidates`]).
    pub fn candidate(&mut self, old: bool) -> Option<Option<(u32, u32)>> {
        if self.cand_gen != self.free_gen {
            return None;
        }
        loop {
            let list = if old { &self.old } else { &self.young };
            let Some(&(ec, b)) = list.first() else {
                break;
            };
            // (A paged record not in RAM has not changed since it was found free.)
            if self.rec(b).is_none_or(|e| e.state().is_free()) {
                return Some(Some((ec, b)));
            }
            // Taken since it was found.
            if old {
                self.old.remove(0);
            } else {
                self.young.remove(0);
            }
        }
        self.cand_all.then_some(None)
    }

    /// The least worn candidates that are still free, least worn first, as (erase count,
    /// block); `None` when the candidates must be found again (as [`BlockTable::candidate`]).
    pub fn young_candidates(&self) -> Option<Vec<(u32, u32)>> {
        if self.cand_gen != self.free_gen {
            return None;
        }
        let free = |b: u32| self.rec(b).is_none_or(|e| e.state().is_free());
        let left: Vec<(u32, u32)> = self
            .young
            .iter()
            .copied()
            .filter(|&(_, b)| free(b))
            .collect();
        (!left.is_empty() || self.cand_all).then_some(left)
    }

    /// The blocks of both candidate lists (some may have been taken since they were found).
    pub fn candidate_blocks(&self) -> Vec<u32> {
        self.young
            .iter()
            .chain(self.old.iter())
            .map(|&(_, b)| b)
            .collect()
    }

    /// The blocks of one candidate list, in the order the allocator takes them (least worn
    /// first, or most worn first for `old`), whether or not they are still free.
    pub fn candidate_list(&self, old: bool) -> Vec<u32> {
        let list = if old { &self.old } else { &self.young };
        list.iter().map(|&(_, b)| b).collect()
    }

    /// Makes the next allocation find the candidates again (they were found for another
    /// purpose).
    pub fn forget_candidates(&mut self) {
        self.cand_gen = self.free_gen.wrapping_sub(1);
    }

    /// Starts finding the free-block candidates again: the store offers every free block
    /// outside the anchor area ([`BlockTable::offer`]), then calls
    /// [`BlockTable::end_candidates`].
    pub fn begin_candidates(&mut self) {
        self.young.clear();
        self.old.clear();
        self.offered = 0;
    }

    /// Offers free block `b`, erase count `ec`, as a candidate.
    pub fn offer(&mut self, b: u32, ec: u32) {
        self.offered += 1;
        let at = self.young.partition_point(|&x| x < (ec, b));
        if at < CANDIDATES {
            self.young.insert(at, (ec, b));
            self.young.truncate(CANDIDATES);
        }
        let at = self
            .old
            .partition_point(|&(e, x)| e > ec || (e == ec && x < b));
        if at < CANDIDATES {
            self.old.insert(at, (ec, b));
            self.old.truncate(CANDIDATES);
        }
    }

    /// Whether a free block of page `i` could join either candidate list, judged by the
    /// page's bounds: false only when both lists are full and the page's erase counts cannot
    /// beat their last entries (the pages are offered in block order, so a later block loses
    /// a tie). Its free blocks (`free()` counts them) count as offered, as if they had been.
    pub fn could_offer(&mut self, i: u32, free: impl FnOnce(&Self) -> u32) -> bool {
        let (lo, hi) = self.free_ec_range(i);
        let young = self.young.len() < CANDIDATES || self.young.last().is_some_and(|y| lo < y.0);
        let old = self.old.len() < CANDIDATES || self.old.last().is_some_and(|o| hi > o.0);
        if !(young || old) {
            self.offered += free(self);
        }
        young || old
    }

    /// Ends [`BlockTable::begin_candidates`].
    pub fn end_candidates(&mut self) {
        self.cand_gen = self.free_gen;
        self.cand_all = self.offered as usize <= CANDIDATES;
    }

    /// RAM held by the packed records, by the cached pages of wear, and by the wear of
    /// changed records (entries too).
    pub fn ram_parts(&self) -> (usize, usize, usize, usize) {
        let cached = self
            .cache
            .iter()
            .map(|c| c.wear.capacity() * core::mem::size_of::<Wear>())
            .sum::<usize>()
            + self.paged_bytes();
        (
            self.hot.capacity(),
            cached,
            self.over.heap_bytes(),
            self.over.len(),
        )
    }

    /// RAM held for paged records ([`Paged`]; 0 when they are all in RAM).
    fn paged_bytes(&self) -> usize {
        let Some(pg) = self.paged.as_deref() else {
            return 0;
        };
        core::mem::size_of::<Paged>()
            + pg.pages.capacity() * core::mem::size_of::<PagedRecs>()
            + pg.pages
                .iter()
                .map(|p| (p.recs.capacity() + p.changed.capacity()) * 4)
                .sum::<usize>()
            + pg.rec_over.heap_bytes()
            + pg.rec_keep.heap_bytes()
            + pg.counts.capacity() * core::mem::size_of::<PageCounts>()
            + pg.own.heap_bytes()
            + pg.prov.heap_bytes()
    }

    /// RAM held by the table.
    pub fn ram_bytes(&self) -> usize {
        self.hot.capacity()
            + self.paged_bytes()
            + (self.forced.capacity() + self.changed.capacity() + self.wear_changed.capacity()) * 4
            + self.changed_in.capacity() * 2
            + self.page_addr.capacity() * core::mem::size_of::<Addr>()
            + self.over.heap_bytes()
            + self.cache.capacity() * core::mem::size_of::<Cached>()
            + self
                .cache
                .iter()
                .map(|c| c.wear.capacity() * core::mem::size_of::<Wear>())
                .sum::<usize>()
            + (self.young.capacity() + self.old.capacity()) * 8
            + self.bounds.capacity() * core::mem::size_of::<PageBounds>()
    }

    /// RAM a table of `n` blocks of `block_size` bytes, `per_page` records to a page and
    /// `cache_pages` pages of wear cached holds at most, besides the wear of records that
    /// changed since their pages were written (12 bytes each).
    pub fn ram_bound(
        n: u32,
        per_page: u32,
        block_size: u32,
        cache_pages: usize,
        records_ram: usize,
    ) -> usize {
        let per_page = per_page.max(1);
        let pages = n.div_ceil(per_page) as usize;
        let width = 6 + (32 - block_size.leading_zeros()) as usize;
        let packed = (n as usize * width).div_ceil(8);
        if cfg!(feature = "paged-records") && packed > records_ram && width <= 32 {
            // Paged records (as `Store::begin_table_load` sizes the cache): per page its
            // address, counts and bounds; the cached pages' records, wear and bits.
            let page = per_page as usize * 12 + 64;
            let cached = cache_pages.min((records_ram / 8 / page).max(4)).max(3);
            let groups = pages.div_ceil(figure_group(pages as u32, records_ram, cached) as usize);
            return pages.div_ceil(32) * 4
                + pages * core::mem::size_of::<Addr>()
                + groups
                    * (core::mem::size_of::<PageBounds>() + core::mem::size_of::<PageCounts>())
                + cached.min(pages) * (page + 32)
                + ANCHOR_AREA as usize * 12
                + 2 * CANDIDATES * 8;
        }
        packed
            + 8
            + n.div_ceil(32) as usize * 8
            + pages.div_ceil(32) * 4
            + pages * (2 + core::mem::size_of::<Addr>() + core::mem::size_of::<PageBounds>())
            + cache_pages.max(1).min(pages)
                * (per_page as usize * core::mem::size_of::<Wear>() + 32)
            + ANCHOR_AREA as usize * 12
            + 2 * CANDIDATES * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [BlockState; 8] = [
        BlockState::Free,
        BlockState::Erased,
        BlockState::Used,
        BlockState::Head,
        BlockState::PendingErase,
        BlockState::Anchor,
        BlockState::Reserved,
        BlockState::Bad,
    ];

    fn recount(t: &BlockTable, s: BlockState) -> u32 {
        t.iter().filter(|(_, e)| e.state() == s).count() as u32
    }

    struct Rng(u32);
    impl Rng {
        fn next(&mut self, m: u32) -> u32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 17;
            self.0 ^= self.0 << 5;
            self.0 % m
        }
    }

    /// The kept per-state counts equal a recount after every kind of change, including
    /// changes outside the table and changes that leave the state as it was.
    #[test]
    fn state_counts_follow_every_change() {
        let mut t = BlockTable::new(50, 7, 4096, 2);
        let mut rng = Rng(0x2545_f491);
        for step in 0..2_000 {
            let b = rng.next(53); // three numbers past the end
            let s = STATES[rng.next(8) as usize];
            match rng.next(5) {
                0 => t.set(b, BlockInfo::new(s, LogKind::DataHot, rng.next(9))),
                1 => t.set_unmarked(b, BlockInfo::new(s, LogKind::Index, 3)),
                2 => t.set_state(b, s),
                3 => t.update(b, |e| {
                    e.live += 1;
                    e.set_state(s);
                }),
                _ => t.update(b, |e| e.live = e.live.saturating_sub(1)),
            }
            for s in STATES {
                assert_eq!(t.count(s), recount(&t, s), "{s:?} after step {step}");
            }
            let free = recount(&t, BlockState::Free) + recount(&t, BlockState::Erased);
            assert_eq!(t.free_count(), free);
            // The changed-record count of every page equals its changed blocks; a page
            // written clears them (and only them).
            for i in 0..t.page_count() {
                let n = (i * 7..(i * 7 + 7).min(50))
                    .filter(|&b| t.block_changed(b))
                    .count() as u32;
                assert_eq!(t.page_changed(i), n, "page {i} after step {step}");
            }
            if step % 97 == 0 {
                let i = rng.next(8);
                t.clear_page(i);
                assert_eq!(t.page_changed(i), 0);
                assert!(!t.page_forced(i));
                assert!(t.changed_blocks().into_iter().all(|b| b / 7 != i));
            }
        }
    }

    /// The sums the budget asks for after every operation (live bytes outside the journal,
    /// and per log its closed blocks, their live bytes and the least of them) equal a recount
    /// after every kind of change: kills and additions of live bytes, quiet ones included,
    /// records replaced, states and logs changed, blocks going bad.
    #[test]
    fn budget_sums_follow_every_change() {
        const KINDS: [LogKind; 7] = LogKind::ALL;
        let bs = 4096;
        let mut t = BlockTable::new(40, 8, bs, 2);
        let mut rng = Rng(0x9e37_79b9);
        for step in 0..5_000 {
            let b = rng.next(42); // two numbers past the end
            let s = STATES[rng.next(8) as usize];
            let k = KINDS[rng.next(7) as usize];
            match rng.next(7) {
                0 => t.set(b, BlockInfo::new(s, k, rng.next(bs + 100))),
                1 => t.set_unmarked(b, BlockInfo::new(s, k, rng.next(bs))),
                2 => t.set_state(b, s),
                3 => t.add_live(b, rng.next(900), bs),
                4 => t.add_live_quiet(b, rng.next(900), bs),
                5 => t.kill(b, rng.next(900)),
                _ => t.kill_quiet(b, rng.next(900)),
            }
            // Asked for at some steps only, so that unknown least counts pile up.
            if step % 3 == 0 {
                for k in KINDS {
                    let want = t
                        .iter()
                        .filter(|(_, e)| e.state() == BlockState::Used && e.kind() == k)
                        .map(|(_, e)| e.live)
                        .min();
                    assert_eq!(t.used_min_live(k), want, "{k:?} after step {step}");
                }
            }
            assert_eq!(t.check_sums(), Ok(()), "after step {step}");
            let live: u64 = t
                .iter()
                .filter(|(_, e)| {
                    !matches!(e.state(), BlockState::Bad | BlockState::Anchor)
                        && e.kind() != LogKind::Journal
                })
                .map(|(_, e)| e.live as u64)
                .sum();
            assert_eq!(t.live_outside_journal(), live, "after step {step}");
            for k in KINDS {
                let used: Vec<u32> = t
                    .iter()
                    .filter(|(_, e)| e.state() == BlockState::Used && e.kind() == k)
                    .map(|(_, e)| e.live)
                    .collect();
                let want = (used.len() as u32, used.iter().map(|&l| l as u64).sum());
                assert_eq!(t.used_of(k), want, "{k:?} after step {step}");
            }
        }
    }

    /// Packed records give back every state, log and live count up to the block size, for
    /// block sizes whose records take 14 to 26 bits, and a change to one record leaves its
    /// neighbours as they were.
    #[test]
    fn packed_records_hold_every_value() {
        for bs in [256u32, 4096, 65536, 131072, 524288] {
            let n = 61;
            let mut t = BlockTable::new(n, 10, bs, 1);
            let mut want = vec![BlockInfo::new(BlockState::Free, LogKind::DataHot, 0); n as usize];
            let mut rng = Rng(bs ^ 0x9E37);
            for step in 0..3000 {
                let b = rng.next(n);
                let live = match rng.next(4) {
                    0 => 0,
                    1 => bs,
                    _ => rng.next(bs + 1),
                };
                let e = BlockInfo::new(
                    STATES[rng.next(8) as usize],
                    LogKind::ALL[rng.next(7) as usize],
                    live,
                );
                t.set(b, e);
                want[b as usize] = e;
                if step % 100 == 0 {
                    for (i, w) in want.iter().enumerate() {
                        assert_eq!(t.get(i as u32), *w, "block size {bs}, block {i}");
                    }
                }
            }
        }
    }

    /// Records encode and decode to themselves, and impossible ones are refused.
    #[test]
    fn records_round_trip_through_their_encoding() {
        let rec = BlockRecord {
            info: BlockInfo::new(BlockState::Used, LogKind::Index, 1234),
            wear: Wear {
                ec: 77,
                age: 0xAB_CDEF,
            },
        };
        let mut w = Writer::with_capacity(12);
        rec.encode(&mut w);
        assert_eq!(w.buf.len(), 12);
        let got = BlockRecord::decode(&mut Reader::new(&w.buf), 4096).unwrap();
        assert_eq!(got, rec);
        // Live beyond the block, or live bytes in a free block.
        assert_eq!(
            BlockRecord::decode(&mut Reader::new(&w.buf), 1000),
            Err(Error::Corrupt)
        );
        let free = BlockRecord {
            info: BlockInfo::new(BlockState::Free, LogKind::DataHot, 8),
            ..rec
        };
        let mut w = Writer::with_capacity(12);
        free.encode(&mut w);
        assert_eq!(
            BlockRecord::decode(&mut Reader::new(&w.buf), 4096),
            Err(Error::Corrupt)
        );
    }

    /// Wear read back through the table (RAM's changes, cached pages, pages "on flash")
    /// always equals a model that keeps every block's wear, with a one-page cache; a page
    /// written takes RAM's changes with it, and the anchor area's wear never needs a read.
    #[test]
    fn wear_reads_back_as_a_model_keeps_it() {
        let (n, per) = (100u32, 9u32);
        let mut t = BlockTable::new(n, per, 4096, 1);
        let mut model = vec![Wear::default(); n as usize];
        // "Flash": the wear each page's copy holds.
        let mut flash: Vec<Option<Vec<Wear>>> = vec![None; t.page_count() as usize];
        let mut rng = Rng(77);
        let read = |t: &mut BlockTable, flash: &[Option<Vec<Wear>>], b: u32| -> Wear {
            if let Some(w) = t.wear(b) {
                return w;
            }
            assert!(
                b >= ANCHOR_AREA,
                "block {b} of the anchor area needed a read"
            );
            let i = b / per;
            let v = flash[i as usize].clone().expect("a page with a copy");
            t.cache_page(i, v);
            t.wear(b).expect("cached")
        };
        for step in 0..5000u32 {
            match rng.next(4) {
                0 | 1 => {
                    let b = rng.next(n);
                    let w = read(&mut t, &flash, b);
                    let nw = Wear {
                        ec: w.ec + 1,
                        age: step,
                    };
                    t.set_wear(b, nw, false);
                    model[b as usize] = nw;
                }
                2 => {
                    // A checkpoint writes page i.
                    let i = rng.next(t.page_count());
                    let v = match t.page_wear(i) {
                        Some(v) => v,
                        None => {
                            let mut v = flash[i as usize].clone().unwrap();
                            t.apply_changes(i, &mut v);
                            v
                        }
                    };
                    flash[i as usize] = Some(v);
                    t.page_written(i, Addr(1000 + step));
                }
                _ => {
                    let b = rng.next(n);
                    assert_eq!(read(&mut t, &flash, b), model[b as usize], "step {step}");
                }
            }
        }
        for b in 0..n {
            assert_eq!(read(&mut t, &flash, b), model[b as usize], "block {b}");
        }
    }

    /// The candidates name the free block a search over every free block outside the anchor
    /// area finds, least or most worn (lower block first among equals), after allocations
    /// that take them and blocks that join the free pool.
    #[test]
    fn candidates_agree_with_a_search_of_every_block() {
        let n = 200u32;
        let mut t = BlockTable::new(n, 16, 4096, 4);
        let mut ec = vec![0u32; n as usize];
        let mut rng = Rng(5);
        for b in 0..n {
            ec[b as usize] = rng.next(12);
            t.set_wear(
                b,
                Wear {
                    ec: ec[b as usize],
                    age: 0,
                },
                false,
            );
        }
        let mut rescans = 0;
        for step in 0..3000 {
            let old = rng.next(3) == 0;
            let want = (ANCHOR_AREA..n)
                .filter(|&b| t.get(b).state().is_free())
                .map(|b| (ec[b as usize], b))
                .reduce(|a, x| {
                    let better = if old {
                        x.0 > a.0 || (x.0 == a.0 && x.1 < a.1)
                    } else {
                        x < a
                    };
                    if better {
                        x
                    } else {
                        a
                    }
                });
            let got = match t.candidate(old) {
                Some(c) => c,
                None => {
                    rescans += 1;
                    t.begin_candidates();
                    for b in ANCHOR_AREA..n {
                        if t.get(b).state().is_free() {
                            t.offer(b, ec[b as usize]);
                        }
                    }
                    t.end_candidates();
                    t.candidate(old).expect("just found")
                }
            };
            assert_eq!(got, want, "step {step}");
            if rng.next(10) == 0 {
                // A checkpoint frees a used block, after collection.
                let b = rng.next(n);
                if t.get(b).state() == BlockState::Used {
                    t.set_state(b, BlockState::Free);
                }
            } else if let Some((_, b)) = got {
                // The allocation erases the block and takes it.
                ec[b as usize] += 1;
                t.set_wear(
                    b,
                    Wear {
                        ec: ec[b as usize],
                        age: 1,
                    },
                    true,
                );
                t.set_state(b, BlockState::Used);
            } else {
                for b in 0..n {
                    if rng.next(2) == 0 {
                        t.set_state(b, BlockState::Free);
                    }
                }
            }
        }
        // Most allocations needed no search.
        assert!(rescans < 1000, "{rescans} searches");
    }

    /// Static wear leveling's figures, followed change by change, equal a count over every
    /// block whenever the table says it has them; after a change it could not follow (the
    /// coldest or the most worn block leaving) it says so, and a count starts it again.
    #[test]
    fn wear_leveling_figures_follow_every_change() {
        let n = 120u32;
        let mut t = BlockTable::new(n, 16, 4096, 8);
        let mut rng = Rng(99);
        let count = |t: &BlockTable| {
            let mut f = WlFigures::default();
            for b in 0..n {
                f.add(b, t.get(b), t.wear(b).unwrap().ec, true);
            }
            f
        };
        let (mut followed, mut partial) = (0, 0);
        for step in 0..20_000 {
            let b = rng.next(n);
            match rng.next(4) {
                0 => {
                    let s = STATES[rng.next(8) as usize];
                    t.set_state(b, s);
                }
                1 => {
                    let k = LogKind::ALL[rng.next(7) as usize];
                    t.set(b, BlockInfo::new(STATES[rng.next(8) as usize], k, 0));
                }
                _ => {
                    let w = t.wear(b).unwrap();
                    let ec = if rng.next(20) == 0 {
                        w.ec.saturating_sub(1)
                    } else {
                        w.ec + 1
                    };
                    t.set_wear(b, Wear { ec, age: step }, false);
                }
            }
            match t.wl_figures() {
                Some(f) => {
                    assert_eq!(f, count(&t), "step {step}");
                    followed += 1;
                }
                None => {
                    // What is not stale is right: the totals, and the largest count or the
                    // coldest block where only the other must be found again.
                    let c = count(&t);
                    if let Some((f, max, cold)) = t.wl_partial() {
                        assert_eq!((f.sum, f.n), (c.sum, c.n), "step {step}");
                        assert!(max || f.max == c.max, "step {step}");
                        assert!(cold || f.coldest == c.coldest, "step {step}");
                        partial += 1;
                    }
                    t.set_wl_figures(c);
                }
            }
        }
        // Most changes are followed without a count, and most of the others keep the totals.
        assert!(followed > 15_000, "{followed} of 20,000 followed");
        assert!(
            partial * 2 > 20_000 - followed,
            "{partial} of {}",
            20_000 - followed
        );
    }

    /// Ages compare on the ring of 24 bits: the oldest of a page moves back for an older age
    /// (also across the wrap), never forward.
    #[test]
    fn page_bounds_keep_the_oldest_age_on_the_ring() {
        let mut pb = PageBounds {
            oldest: 100,
            ..PageBounds::EMPTY
        };
        pb.widen_age(150);
        assert_eq!(pb.oldest, 100);
        pb.widen_age(40);
        assert_eq!(pb.oldest, 40);
        // 0xFF_FFF0 is 80 checkpoints before 40, across the wrap.
        pb.widen_age(0xFF_FFF0);
        assert_eq!(pb.oldest, 0xFF_FFF0);
        pb.widen_age(5);
        assert_eq!(pb.oldest, 0xFF_FFF0);
        // Bits above the 24 are not part of an age.
        pb.widen_age(0x0100_0000 | 0xFF_FFE0);
        assert_eq!(pb.oldest, 0xFF_FFE0);
    }

    /// Paged records share page figures only where one per page would outgrow an eighth of
    /// `records_ram`, and never more pages than the cache holds beside the anchor area's.
    #[test]
    fn pages_share_figures_only_past_their_share_of_records_ram() {
        let per = core::mem::size_of::<PageBounds>() + core::mem::size_of::<PageCounts>();
        // 64 GiB of 2 KiB-page NAND (524,288 blocks, 168 records a page), default config:
        // 3,121 pages, 7 cached.
        let g = figure_group(3121, 128 << 10, 7);
        assert_eq!(g, 4);
        assert!(3121usize.div_ceil(4) * per <= 16 << 10);
        assert!(3121usize.div_ceil(2) * per > 16 << 10);
        // 64 GiB of 4 KiB pages (387 pages): one per page fits.
        assert_eq!(figure_group(387, 128 << 10, 4), 1);
        // No budget at all: as many as the cache allows beside the anchor area's page.
        assert_eq!(figure_group(7, 0, 3), 2);
        assert_eq!(figure_group(1000, 0, 7), 4);
        assert_eq!(figure_group(100_000, 0, 1000), 64);
        assert_eq!(figure_group(1000, 0, 1), 1);
    }

    /// With one cached page of 12, whatever happens to records and wear (states, logs, erase
    /// counts up and down, ages, pages cached and written), every page's bounds hold the wear
    /// a model keeps for its blocks, for pages RAM holds and for those only flash holds.
    #[test]
    fn page_bounds_hold_every_page_through_random_changes() {
        let (n, per) = (108u32, 9u32);
        let mut t = BlockTable::new(n, per, 4096, 1);
        assert_eq!(t.bounds.len(), 12);
        let mut model = vec![Wear::default(); n as usize];
        let mut flash: Vec<Option<Vec<Wear>>> = vec![None; t.page_count() as usize];
        let mut rng = Rng(4242);
        let mut narrowed = 0;
        for step in 1..20_000u32 {
            let b = rng.next(n);
            let i = b / per;
            match rng.next(6) {
                0 => t.set_state(b, STATES[rng.next(8) as usize]),
                1 => {
                    let k = LogKind::ALL[rng.next(7) as usize];
                    t.set(b, BlockInfo::new(STATES[rng.next(8) as usize], k, 0));
                }
                2 | 3 => {
                    if t.wear(b).is_none() {
                        t.cache_page(i, flash[i as usize].clone().expect("a copy"));
                    }
                    let w = model[b as usize];
                    let ec = match rng.next(10) {
                        0 => w.ec.saturating_sub(1),
                        _ => w.ec + 1,
                    };
                    let nw = Wear {
                        ec,
                        age: step.wrapping_sub(rng.next(50)),
                    };
                    t.set_wear(b, nw, rng.next(2) == 0);
                    model[b as usize] = nw;
                }
                4 => {
                    // A checkpoint writes page i: its copy on flash is the model's.
                    let r = (i * per) as usize..((i + 1) * per).min(n) as usize;
                    flash[i as usize] = Some(model[r].to_vec());
                    t.page_written(i, Addr(1000 + step));
                }
                _ => {
                    // A scan reads page i (or finds it in RAM): its bounds become exact.
                    if let Some(v) = &flash[i as usize] {
                        if t.cached_page(i).is_none() {
                            let mut v = v.clone();
                            t.apply_changes(i, &mut v);
                            t.page_seen(i, &v);
                            narrowed += 1;
                        }
                    }
                }
            }
            for i in 0..t.page_count() {
                let r = (i * per) as usize..((i + 1) * per).min(n) as usize;
                if let Err(e) = t.bounds_hold(i, &model[r]) {
                    panic!("step {step}, page {i}: {e}");
                }
            }
        }
        assert!(narrowed > 1000, "{narrowed} pages read");
    }
}
