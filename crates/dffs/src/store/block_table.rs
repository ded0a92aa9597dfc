//! The block table: what every erase block holds, and how worn it is.
//!
//! Owns the per-block record ([`BlockInfo`]: state, owner log, live bytes, erase count, age),
//! its encoding in block-table pages, the counts the budget asks for, and the choice of a free
//! block by wear (dynamic wear leveling: the least worn block for every log, the most worn for
//! cold data). It must never touch the device: the store erases and programs.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::{Reader, Writer};
use crate::format::params::{LogKind, ANCHOR_AREA};

/// Free blocks of the anchor area kept for anchors that fail: two, so that both anchors can
/// fail in a row (the second before collection has made a new spare) and a checkpoint is
/// still written.
pub const ANCHOR_SPARES: u32 = 2;

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
}

/// One erase block's record: 12 bytes in RAM and on flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Erase count.
    pub ec: u32,
    /// Bytes of live nodes and data in the block.
    pub live: u32,
    info: u32,
}

impl BlockInfo {
    /// A record with the given fields.
    pub fn new(state: BlockState, kind: LogKind, ec: u32, live: u32, age: u32) -> Self {
        BlockInfo {
            ec,
            live,
            info: state as u32 | (kind as u32) << 4 | (age & 0xFF_FFFF) << 8,
        }
    }
    /// The block's state.
    pub fn state(&self) -> BlockState {
        BlockState::from_u8((self.info & 0xF) as u8).unwrap_or(BlockState::Bad)
    }
    /// The log the block belongs to (meaningful for Used/Head blocks).
    pub fn kind(&self) -> LogKind {
        LogKind::from_u8(((self.info >> 4) & 0xF) as u8).unwrap_or(LogKind::DataCold)
    }
    /// Checkpoint number (low 24 bits) of the last write into the block.
    pub fn age(&self) -> u32 {
        self.info >> 8
    }
    pub(crate) fn set(&mut self, state: BlockState, kind: LogKind, age: u32) {
        *self = BlockInfo::new(state, kind, self.ec, self.live, age);
    }
    pub(crate) fn set_state(&mut self, state: BlockState) {
        let (k, a) = (self.kind(), self.age());
        self.set(state, k, a);
    }
    /// Encodes the record.
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.ec).u32(self.live).u32(self.info);
    }
    /// Decodes a record, rejecting impossible values.
    pub fn decode(r: &mut Reader<'_>, block_size: u32) -> Result<BlockInfo> {
        let (ec, live, info) = (r.u32()?, r.u32()?, r.u32()?);
        let b = BlockInfo { ec, live, info };
        let state = BlockState::from_u8((info & 0xF) as u8);
        if state.is_none()
            || LogKind::from_u8(((info >> 4) & 0xF) as u8).is_none()
            || live > block_size
            // A free block holds nothing live (an invariant every checkpoint keeps).
            || (matches!(state, Some(BlockState::Free | BlockState::Erased)) && live != 0)
        {
            return Err(Error::Corrupt);
        }
        Ok(b)
    }
}

/// Every logical block's record, in RAM, and which block-table pages (`per_page` records
/// each) changed since a checkpoint last wrote them.
pub(crate) struct BlockTable {
    blocks: Vec<BlockInfo>,
    /// Records per block-table page.
    per_page: u32,
    /// One bit per block-table page: the page must be written whole (no checkpoint has
    /// written it yet, or its copy on flash is about to be erased).
    forced: Vec<u32>,
    /// One bit per block: its record differs from the one in its page on flash (a checkpoint
    /// writes it again, in the page or in a delta node, until the page is rewritten).
    changed: Vec<u32>,
    /// Changed records per block-table page.
    changed_in: Vec<u16>,
    /// Blocks in each state (indexed by `BlockState as usize`), kept with every change so the
    /// budget's counts cost nothing (they are asked for on every write).
    counts: [u32; 8],
}

impl BlockTable {
    /// A table of `n` free blocks, `per_page` records to a block-table page; every page dirty
    /// (none has been written).
    pub fn new(n: u32, per_page: u32) -> BlockTable {
        let blocks = vec![BlockInfo::new(BlockState::Free, LogKind::DataHot, 0, 0, 0); n as usize];
        let mut t = Self::from_records(blocks, per_page);
        t.mark_all();
        t
    }

    /// A table of the given records (loaded at mount: every page clean, as written).
    pub fn from_records(blocks: Vec<BlockInfo>, per_page: u32) -> BlockTable {
        let per_page = per_page.max(1);
        let pages = (blocks.len() as u32).div_ceil(per_page);
        let mut counts = [0u32; 8];
        for e in &blocks {
            counts[e.state() as usize] += 1;
        }
        let n = blocks.len() as u32;
        BlockTable {
            blocks,
            per_page,
            forced: vec![0; pages.div_ceil(32) as usize],
            changed: vec![0; n.div_ceil(32) as usize],
            changed_in: vec![0; pages as usize],
            counts,
        }
    }

    /// Empties the table and gives back its records' memory (for a reload to refill).
    pub fn take_records(&mut self) -> Vec<BlockInfo> {
        self.forced = Vec::new();
        self.changed = Vec::new();
        self.changed_in = Vec::new();
        self.counts = [0; 8];
        core::mem::take(&mut self.blocks)
    }

    /// Replaces block `b`'s record by `e`, keeping the state counts; false outside the table.
    fn put(&mut self, b: u32, e: BlockInfo) -> bool {
        let Some(x) = self.blocks.get_mut(b as usize) else {
            return false;
        };
        let (old, new) = (x.state() as usize, e.state() as usize);
        *x = e;
        self.counts[old] -= 1;
        self.counts[new] += 1;
        true
    }

    /// Number of block-table pages.
    pub fn page_count(&self) -> u32 {
        (self.blocks.len() as u32).div_ceil(self.per_page)
    }

    /// Marks block-table page `i` to be written whole by the next checkpoint.
    pub fn mark_page(&mut self, i: u32) {
        if let Some(w) = self.forced.get_mut((i / 32) as usize) {
            *w |= 1 << (i % 32);
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
        let first = i.saturating_mul(self.per_page);
        let end = first.saturating_add(self.per_page).min(self.len());
        for b in first..end {
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
        self.changed_in.get(i as usize).map_or(0, |&c| c as u32)
    }

    /// Whether page `i` must be written whole or has changed records.
    pub fn page_dirty(&self, i: u32) -> bool {
        self.page_forced(i) || self.page_changed(i) > 0
    }

    /// Whether block `b`'s record differs from the one in its page on flash.
    pub fn block_changed(&self, b: u32) -> bool {
        self.changed
            .get((b / 32) as usize)
            .is_some_and(|w| w & (1 << (b % 32)) != 0)
    }

    /// Blocks whose records differ from their pages on flash, in block order.
    pub fn changed_blocks(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len()).filter(|&b| self.block_changed(b))
    }

    /// Marks block `b`'s record as differing from its page on flash.
    pub fn mark(&mut self, b: u32) {
        if b >= self.len() {
            return;
        }
        let Some(w) = self.changed.get_mut((b / 32) as usize) else {
            return;
        };
        if *w & (1 << (b % 32)) == 0 {
            *w |= 1 << (b % 32);
            if let Some(c) = self.changed_in.get_mut((b / self.per_page) as usize) {
                *c += 1;
            }
        }
    }

    /// Number of blocks.
    pub fn len(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// Block `b`'s record (a bad block for a number outside the table).
    pub fn get(&self, b: u32) -> BlockInfo {
        self.blocks
            .get(b as usize)
            .copied()
            .unwrap_or(BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0, 0, 0))
    }

    /// Changes block `b`'s record with `f` and marks its page (nothing outside the table).
    pub fn update(&mut self, b: u32, f: impl FnOnce(&mut BlockInfo)) {
        if let Some(x) = self.blocks.get(b as usize) {
            let mut e = *x;
            f(&mut e);
            self.put(b, e);
            self.mark(b);
        }
    }

    /// Replaces block `b`'s record.
    pub fn set(&mut self, b: u32, e: BlockInfo) {
        if self.blocks.get(b as usize).is_some_and(|x| *x != e) && self.put(b, e) {
            self.mark(b);
        }
    }

    /// Replaces block `b`'s record without marking its page.
    pub fn set_unmarked(&mut self, b: u32, e: BlockInfo) {
        self.put(b, e);
    }

    /// Sets block `b`'s state (owner log and age unchanged).
    pub fn set_state(&mut self, b: u32, s: BlockState) {
        if let Some(x) = self.blocks.get(b as usize) {
            if x.state() != s {
                let mut e = *x;
                e.set_state(s);
                self.put(b, e);
                self.mark(b);
            }
        }
    }

    /// Every block's number and record.
    pub fn iter(&self) -> impl Iterator<Item = (u32, BlockInfo)> + '_ {
        self.blocks.iter().enumerate().map(|(i, e)| (i as u32, *e))
    }

    /// Blocks in state `s`.
    pub fn count(&self, s: BlockState) -> u32 {
        self.counts[s as usize]
    }

    /// Blocks in the free pool (`Free` or `Erased`).
    pub fn free_count(&self) -> u32 {
        self.count(BlockState::Free) + self.count(BlockState::Erased)
    }

    /// The free block to allocate next: the least worn one, or the most worn one for data
    /// that is likely to stay put (`want_old`).
    pub fn pick_free(&self, want_old: bool, can_anchor: impl Fn(u32) -> bool) -> Option<u32> {
        let free = |e: &BlockInfo| matches!(e.state(), BlockState::Free | BlockState::Erased);
        // The last `ANCHOR_SPARES` free blocks of the anchor area that can be anchors
        // (`can_anchor`: not remapped) are taken only when no other is free: a failing anchor
        // is replaced by such a block, and with none the file system could not write a
        // checkpoint again.
        let area = (ANCHOR_AREA as usize).min(self.blocks.len());
        let spare_only = self.blocks[..area]
            .iter()
            .enumerate()
            .filter(|&(i, e)| free(e) && can_anchor(i as u32))
            .count()
            <= ANCHOR_SPARES as usize;
        let pick = |skip_area: bool| {
            let mut best: Option<(u32, u32)> = None;
            for (i, e) in self.blocks.iter().enumerate() {
                if !free(e) || (skip_area && i < area && can_anchor(i as u32)) {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some((_, ec)) => {
                        if want_old {
                            e.ec > ec
                        } else {
                            e.ec < ec
                        }
                    }
                };
                if better {
                    best = Some((i as u32, e.ec));
                }
            }
            best.map(|x| x.0)
        };
        if spare_only {
            pick(true).or_else(|| pick(false))
        } else {
            pick(false)
        }
    }

    /// Adds `bytes` live bytes to block `b` (never beyond `block_size`).
    pub fn add_live(&mut self, b: u32, bytes: u32, block_size: u32) {
        self.add_live_quiet(b, bytes, block_size);
        self.mark(b);
    }

    /// [`BlockTable::add_live`] without marking the page: for block-table pages themselves,
    /// whose bytes the records on flash do not count (see the checkpoint).
    pub fn add_live_quiet(&mut self, b: u32, bytes: u32, block_size: u32) {
        if let Some(e) = self.blocks.get_mut(b as usize) {
            e.live = e.live.saturating_add(bytes).min(block_size);
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
        if let Some(e) = self.blocks.get_mut(b as usize) {
            e.live = e.live.saturating_sub(bytes);
        }
    }

    /// RAM held by the table.
    pub fn ram_bytes(&self) -> usize {
        self.blocks.capacity() * core::mem::size_of::<BlockInfo>()
            + (self.forced.capacity() + self.changed.capacity()) * 4
            + self.changed_in.capacity() * 2
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

    /// The kept per-state counts equal a recount after every kind of change, including
    /// changes outside the table and changes that leave the state as it was.
    #[test]
    fn state_counts_follow_every_change() {
        let mut t = BlockTable::new(50, 7);
        let mut x = 0x2545_f491_u32;
        let mut next = |m: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % m
        };
        for step in 0..2_000 {
            let b = next(53); // three numbers past the end
            let s = STATES[next(8) as usize];
            match next(5) {
                0 => t.set(b, BlockInfo::new(s, LogKind::DataHot, next(9), 0, step)),
                1 => t.set_unmarked(b, BlockInfo::new(s, LogKind::Index, 3, 0, step)),
                2 => t.set_state(b, s),
                3 => t.update(b, |e| {
                    e.ec += 1;
                    e.set_state(s);
                }),
                _ => t.update(b, |e| e.ec += 1),
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
                let i = next(8);
                t.clear_page(i);
                assert_eq!(t.page_changed(i), 0);
                assert!(!t.page_forced(i));
                assert!(t.changed_blocks().all(|b| b / 7 != i));
            }
        }
        // A reload counts the records it is given.
        let records = t.take_records();
        assert_eq!(t.free_count(), 0);
        let u = BlockTable::from_records(records, 7);
        for s in STATES {
            assert_eq!(u.count(s), recount(&u, s));
        }
        assert_eq!(u.len(), 50);
    }
}
