//! The open blocks ("heads") of the logs: where the next node of each log goes, the NAND page
//! each one is filling in RAM, and what each head has programmed.
//!
//! Owns [`Head`] and the set of heads ([`Heads`]), their recovery after a power cut (finding
//! where a head really ends), room reservations ahead of a checkpoint, and the paired-page
//! barrier. It must never decide what goes into a log: the writers in `write.rs` place nodes,
//! and the file system decides when a head is flushed.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::{BlockState, Priority, Store};
use crate::error::{Error, Result};
use crate::format::node::{self, NodeType, Probe};
use crate::format::params::NandSupport;
use crate::format::params::{LogKind, MAX_HEADS, NODE_HEADER};
use dffs_flash::{Flash, FlashKind, PagePairing};

/// Paired-page NAND: pages a recovery probes past the first erased page it finds before it
/// takes that page for the end of a head's run ([`Store::recover_head`]). A node is never
/// placed over an upper page whose lower page holds durable data, so the pages from the
/// protected mark `P` to the next one that takes data run up to `P + 2` (the even pages up
/// to `P + 2` are upper pages of protected lower ones): three pages, and four after a
/// recovery's own one-page gap. One more for margin.
const GAP_PROBE_PAIRED: u32 = 5;

/// An open block of a log, with the NAND write buffer of its current page.
#[derive(Clone, Debug)]
pub struct Head {
    /// Logical block, or `u32::MAX` when the head has no block.
    pub(super) block: u32,
    /// Byte offset in the block where the next node goes.
    pub(super) off: u32,
    /// NAND: the page being filled (empty when no page is buffered).
    pub(super) buf: Vec<u8>,
    /// Byte offset in the block of the buffered page.
    pub(super) buf_page: u32,
    /// Bytes of the buffered page already programmed.
    pub(super) buf_prog: u32,
    /// Pages of the block (from its start) that may have been programmed.
    pub(super) programmed: u32,
    /// Pages of the block programmed before the last durability barrier (see
    /// [`Store::barrier`]): on paired-page NAND their upper pages are never programmed.
    pub(super) protected: u32,
    /// What a head needs only after a program failed or on paired-page NAND (boxed: a head
    /// on NOR or SLC that never failed carries a pointer, not the fields).
    pub(super) fault: Option<Box<HeadFaultState>>,
}

/// Per-head state for program failures (see [`Head::fault`]).
#[derive(Clone, Debug, Default)]
pub(super) struct HeadFaultState {
    /// A program at this offset of the block failed and the block could not be swapped out
    /// then (no spare): the next program through this head swaps it out first, copying what
    /// lies before this offset. Nothing is ever programmed into the failed block again.
    pub(super) failed_at: Option<u32>,
    /// Paired-page NAND: the last pages programmed in the block, as programmed. A failing
    /// program of an upper page can destroy its lower page, programmed a few pages earlier and
    /// not yet durable (durable lower pages never get their upper page programmed); the
    /// bad-block swap copies these instead of reading back what may be damaged.
    pub(super) recent: Vec<RecentPage>,
}

impl Head {
    /// The offset of a failed program not yet swapped out.
    pub(super) fn failed_at(&self) -> Option<u32> {
        self.fault.as_ref().and_then(|f| f.failed_at)
    }

    /// The pages remembered on paired-page NAND.
    pub(super) fn recent(&self) -> &[RecentPage] {
        self.fault.as_ref().map_or(&[], |f| &f.recent)
    }

    /// The fault state, created on first use.
    pub(super) fn fault_mut(&mut self) -> &mut HeadFaultState {
        self.fault.get_or_insert_with(Default::default)
    }
}

/// A page of a head's block as it was programmed (data area and free OOB bytes).
#[derive(Clone, Debug)]
pub(super) struct RecentPage {
    /// Page index in the block.
    pub(super) page: u32,
    pub(super) data: Vec<u8>,
    pub(super) oob: Vec<u8>,
}

/// Pages a head remembers on paired-page NAND: the pairing reaches back three pages.
pub(super) const RECENT_PAGES: usize = 4;

impl Head {
    /// A head without a block.
    pub fn empty() -> Head {
        Head {
            block: u32::MAX,
            off: 0,
            buf: Vec::new(),
            buf_page: 0,
            buf_prog: 0,
            programmed: 0,
            protected: 0,
            fault: None,
        }
    }

    /// A head continuing in `block` at `off`, everything before `off` taken as programmed and
    /// durable (after a mount or a recovery).
    pub fn resumed(block: u32, off: u32, page_size: u32) -> Head {
        let pages = off.div_ceil(page_size);
        Head {
            block,
            off,
            programmed: pages,
            protected: pages,
            ..Head::empty()
        }
    }

    /// Whether the head has an open block.
    pub fn is_open(&self) -> bool {
        self.block != u32::MAX
    }

    /// Whether bytes appended to the head's page buffer are not yet programmed (NAND).
    pub(super) fn unprogrammed(&self) -> bool {
        self.is_open() && !self.buf.is_empty() && self.off - self.buf_page > self.buf_prog
    }

    /// Its block (`u32::MAX` when it has none).
    pub fn block(&self) -> u32 {
        self.block
    }

    /// The offset in its block where the next node goes.
    pub fn off(&self) -> u32 {
        self.off
    }

    /// Whether a program in its block failed and the block is not swapped out yet: nothing
    /// may be programmed there again, in this session or after a mount.
    pub fn failed(&self) -> bool {
        self.failed_at().is_some()
    }
}

/// Every log's head, by head number, and the blocks allocated ahead for each.
pub(crate) struct Heads {
    heads: [Head; MAX_HEADS],
    /// Blocks allocated ahead of time for each head (see [`Store::ensure_room`]): a head that
    /// fills takes its next block from here before it allocates.
    pub(super) preopened: [Vec<u32>; MAX_HEADS],
}

impl Heads {
    /// No head open.
    pub fn new() -> Heads {
        Heads {
            heads: core::array::from_fn(|_| Head::empty()),
            preopened: core::array::from_fn(|_| Vec::new()),
        }
    }

    /// Every head.
    pub fn iter(&self) -> impl Iterator<Item = &Head> {
        self.heads.iter()
    }

    /// The number of the head whose block is `b`, if one is.
    pub fn holding(&self, b: u32) -> Option<usize> {
        self.heads.iter().position(|h| h.block == b)
    }

    /// RAM held by the heads' page buffers.
    pub fn ram_bytes(&self) -> usize {
        self.heads
            .iter()
            .map(|h| {
                h.buf.capacity()
                    + h.fault.as_ref().map_or(0, |f| {
                        core::mem::size_of::<HeadFaultState>()
                            + f.recent
                                .iter()
                                .map(|r| r.data.capacity() + r.oob.capacity())
                                .sum::<usize>()
                    })
            })
            .sum()
    }
}

impl core::ops::Index<usize> for Heads {
    type Output = Head;
    fn index(&self, h: usize) -> &Head {
        &self.heads[h]
    }
}

impl core::ops::IndexMut<usize> for Heads {
    fn index_mut(&mut self, h: usize) -> &mut Head {
        &mut self.heads[h]
    }
}

impl<F: Flash> Store<F> {
    /// Closes head `h`'s block (its remaining space is left unused).
    pub fn close_head(&mut self, h: usize) -> Result<()> {
        self.flush_head(h)?;
        let b = self.heads[h].block;
        if b != u32::MAX && self.block(b)?.state() == BlockState::Head {
            self.table.set_state(b, BlockState::Used);
        }
        self.heads[h] = Head::empty();
        Ok(())
    }

    /// Forgets every head and its buffer, without writing or changing block states (the
    /// caller reloads the block table afterwards).
    pub fn reset_heads(&mut self) {
        self.heads = Heads::new();
        self.data_next = u32::MAX;
    }

    /// After a power cut: finds where head `h` really ends (nodes may have been written after
    /// the checkpoint that recorded its position), skips one more page (NAND) or program page
    /// (NOR) because the last program may have been cut and left an unstable page that reads
    /// as erased, and continues there. A head with no room left is closed. Costs a binary
    /// search of page reads on NAND, a walk over the nodes written since the checkpoint on NOR.
    pub fn recover_head(&mut self, h: usize) -> Result<()> {
        let b = self.heads[h].block;
        if b == u32::MAX {
            return Ok(());
        }
        let g = self.p.geometry;
        let bs = g.block_size();
        let ps = g.page_size;
        let off = self.heads[h].off.min(bs);
        let new_off = match g.flash_kind() {
            FlashKind::Nand => {
                let mut data = vec![0u8; ps as usize];
                let mut oob = vec![0u8; g.oob_free_len as usize];
                let ppb = g.pages_per_block;
                let mut erased = |st: &mut Self, i: u32| -> Result<bool> {
                    match st.read_page(b * ppb + i, &mut data, &mut oob) {
                        Ok(_) => {
                            Ok(data.iter().all(|&x| x == 0xFF) && oob.iter().all(|&x| x == 0xFF))
                        }
                        Err(Error::PowerLoss) => Err(Error::PowerLoss),
                        Err(_) => Ok(false),
                    }
                };
                // Pages programmed since the checkpoint form a run, except that every earlier
                // recovery without a checkpoint after it left one page unwritten (and a cut
                // program may read as erased): binary search for the first erased page, and
                // when one of the pages after it is programmed, it was such a gap: search
                // again beyond it. Two pages cover those gaps; paired-page NAND leaves longer
                // ones (`GAP_PROBE_PAIRED`). With two there, a recovery took such a gap for the
                // end of the run and programmed a page a second time (`NopExceeded`, then
                // `EIO` from every write; `dffs torture --preset nand-mlc-1g --chain 30
                // --config default --compress lz4 --workload log --seed 31002`).
                let window = match g.page_pairing() {
                    PagePairing::None => 2,
                    _ => GAP_PROBE_PAIRED,
                };
                let mut lo = off.div_ceil(ps);
                loop {
                    let mut hi = ppb;
                    while lo < hi {
                        let mid = (lo + hi) / 2;
                        if erased(self, mid)? {
                            hi = mid;
                        } else {
                            lo = mid + 1;
                        }
                    }
                    let mut gap = false;
                    for next in lo + 1..=lo + window {
                        if next < ppb && !erased(self, next)? {
                            lo = next + 1;
                            gap = true;
                            break;
                        }
                    }
                    if !gap {
                        break;
                    }
                }
                (lo + 1) * ps
            }
            FlashKind::Nor => {
                let mut pos = off;
                let mut torn_end: Option<u32> = None;
                let unit = self.p.unit();
                let mut head = [0u8; NODE_HEADER as usize];
                while pos + NODE_HEADER <= bs {
                    let at = b as u64 * bs as u64 + pos as u64;
                    if self.read(at, &mut head).is_err() {
                        break;
                    }
                    match node::probe(&head, bs - pos) {
                        Probe::Padding => pos += unit,
                        Probe::Header(hd) => {
                            let mut whole = vec![0u8; hd.len as usize];
                            let read = self.read(at, &mut whole).is_ok();
                            let mut len = hd.len;
                            if read
                                && hd.typ == NodeType::Data
                                && whole.len() >= (NODE_HEADER + 12) as usize
                            {
                                let plen = u32::from_le_bytes([
                                    whole[32], whole[33], whole[34], whole[35],
                                ]);
                                len = len.saturating_add(plen);
                            }
                            if !read || node::verify(&whole, &hd).is_err() || len > bs - pos {
                                // A node the cut tore, or a damaged length (a node never
                                // runs past its block). A torn node's lengths read at least
                                // what was programmed (a cut program leaves bits set, never
                                // clears more): the cut program lies before `pos + len`.
                                if read && len <= bs - pos {
                                    torn_end = Some(pos + self.p.align(len));
                                }
                                break;
                            }
                            pos = pos.saturating_add(self.p.align(len));
                        }
                        Probe::Erased | Probe::Garbage => break,
                    }
                }
                // A node cut half way may have programmed pages beyond where valid nodes end:
                // continue after the last byte that is not erased.
                let mut end = pos;
                let mut chunk = vec![0u8; 4096];
                let mut at = pos;
                while at < bs {
                    let n = (bs - at).min(chunk.len() as u32) as usize;
                    match self.read(b as u64 * bs as u64 + at as u64, &mut chunk[..n]) {
                        Ok(()) => {
                            if let Some(i) = chunk[..n].iter().rposition(|&x| x != 0xFF) {
                                end = at + i as u32 + 1;
                            }
                        }
                        Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                        Err(_) => end = at + n as u32,
                    }
                    at += n as u32;
                }
                // Bytes programmed past the last valid node are a node the cut tore. The cut
                // program may lie anywhere in it, not only in the page after the last byte
                // that reads programmed: the node's content may end in 0xFF bytes, and the cut
                // page's weak bits may read erased now and refuse a program later (`dffs
                // torture` on 4 KiB NOR, chained cuts, log seed 102 with background
                // checkpoints batched: the recovery checkpoint's node hit `NotErased` three
                // pages past the last programmed byte, every later write failed with EIO, and
                // a remount found the same head). So the head continues a page after the end
                // its header claims; with no readable header, nothing more goes into this
                // block. With nothing programmed past the last valid node, the cut can only
                // have reached the first page of the next one: a page further on.
                let new_off = match torn_end {
                    _ if end <= pos => (end.div_ceil(ps) + 1) * ps,
                    Some(t) => (t.max(end).div_ceil(ps) + 1) * ps,
                    None => bs,
                };
                // Fence: the bytes between the last valid node and where the head continues
                // are programmed to zeros (padding every walk steps over a unit at a time). A
                // node header cut half way can read as erased now and as a valid header later
                // (weak bits), and its length would then carry the collection walk, fsck and
                // the next recovery over the nodes written after it: a live data node written
                // at the continued position was never seen by collection, which released its
                // block (`dffs torture` on 4 KiB NOR sectors, chained cuts, mixed seed 119:
                // fsck "data block ... lies in block 73, which is Free"). Programming zeros
                // over programmed or weak bits is allowed on NOR; it settles them.
                if new_off < bs && pos < new_off {
                    let zeros = vec![0u8; (new_off - pos) as usize];
                    let at = self.phys_pos(b as u64 * bs as u64 + pos as u64);
                    self.medium.cause = crate::store::medium::Cause::Mount;
                    match self.medium.program(at, &zeros, &[]) {
                        Ok(()) => new_off,
                        Err(dffs_flash::FlashError::PowerLoss) => return Err(Error::PowerLoss),
                        // A fence that did not take: nothing more goes into this block.
                        Err(_) => bs,
                    }
                } else {
                    new_off
                }
            }
        };
        if new_off >= bs {
            if self.block(b)?.state() == BlockState::Head {
                self.table.set_state(b, BlockState::Used);
            }
            self.heads[h] = Head::empty();
        } else {
            self.heads[h] = Head::resumed(b, new_off, ps);
            self.table.set_state(b, BlockState::Head);
        }
        Ok(())
    }

    /// Makes sure log `kind` can take `nodes` more nodes of `node_len` bytes without
    /// allocating: blocks the current head cannot hold are allocated now and wait in
    /// `preopened`, so that a caller can snapshot the block table first (the block-table
    /// pages of a checkpoint describe the blocks they are written to).
    pub fn ensure_room(
        &mut self,
        kind: LogKind,
        nodes: u32,
        node_len: u32,
        prio: Priority,
    ) -> Result<()> {
        let h = self.head_index(kind);
        let g = self.p.geometry;
        let len = self.p.align(node_len);
        let bs = g.block_size();
        // Nodes that fit between offset `off` and the end of a block, keeping one page (NOR:
        // one program unit) free so that a final flush never has to open a block.
        let fits = |off: u32| -> u32 {
            match g.flash_kind() {
                FlashKind::Nand => {
                    let start = off.div_ceil(g.page_size) * g.page_size;
                    let pages = (bs.saturating_sub(start) / g.page_size).saturating_sub(1);
                    pages * (g.page_size / len.max(1))
                }
                FlashKind::Nor => bs.saturating_sub(off + self.p.unit()) / len.max(1),
            }
        };
        let per_block = fits(0);
        if per_block == 0 {
            return Err(Error::NoSpace);
        }
        let here = if self.heads[h].is_open() {
            fits(self.heads[h].off)
        } else {
            0
        };
        let ready = self.heads.preopened[h].len() as u32;
        let need = nodes.saturating_sub(here).div_ceil(per_block);
        if need > ready {
            let more = need - ready;
            let mut fresh = Vec::with_capacity(more as usize);
            for _ in 0..more {
                fresh.push(self.alloc_block(kind, prio)?);
            }
            // `open_block` pops from the end: keep the earliest allocated first in line.
            fresh.reverse();
            let mut rest = core::mem::take(&mut self.heads.preopened[h]);
            fresh.append(&mut rest);
            self.heads.preopened[h] = fresh;
        }
        Ok(())
    }

    /// A durability barrier: everything programmed so far may now be needed after a power cut
    /// (a journal page or a checkpoint was just programmed). On paired-page NAND the upper
    /// pages of what every head has programmed are off limits from now on: a program cut there
    /// could destroy the lower page's durable data. No head holds a buffered page at a barrier
    /// (see [`Store::program_buffered`] and the checkpoint), so every page a head starts later
    /// is checked against this.
    pub fn barrier(&mut self) {
        if self.p.geometry.page_pairing() == PagePairing::None {
            return;
        }
        for h in 0..MAX_HEADS {
            let hd = &mut self.heads[h];
            hd.protected = hd.programmed;
        }
    }

    /// Bytes head `kind` can still take in its open block without allocating (0 when it has
    /// none), keeping one page (NOR: one unit) free as [`Store::ensure_room`] does.
    pub fn head_room(&self, kind: LogKind) -> u32 {
        let hd = &self.heads[self.head_index(kind)];
        if !hd.is_open() {
            return 0;
        }
        let g = self.p.geometry;
        let bs = g.block_size();
        match g.flash_kind() {
            FlashKind::Nand => {
                let start = hd.off.div_ceil(g.page_size) * g.page_size;
                bs.saturating_sub(start).saturating_sub(g.page_size)
            }
            FlashKind::Nor => bs.saturating_sub(hd.off + self.p.unit()),
        }
    }

    /// Closes the head of log `kind` (see [`Store::close_head`]).
    pub fn close_head_of(&mut self, kind: LogKind) -> Result<()> {
        let h = self.head_index(kind);
        self.close_head(h)
    }

    /// The head a log kind writes to, for callers that inspect heads.
    pub fn head(&self, kind: LogKind) -> &Head {
        &self.heads[self.head_index(kind)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::node::{self, NodeBuilder};
    use crate::format::params::{FormatOptions, Params};
    use crate::store::DATA_HEADER;
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

    /// A NOR head recovered after a cut continues past a fence of padding. A node header cut
    /// half way can read erased at recovery and settle into a valid header later (weak bits;
    /// emulated here by programming a valid data-node header over those bytes, which on NOR
    /// can only clear bits): its length must never carry a walk over the nodes written after
    /// the recovery. Without the fence the settled header is valid and claims the bytes the
    /// recovered head writes into (collection, walking by it, released a block holding a
    /// live data node: `dffs torture` chained cuts on 4 KiB NOR, mixed seed 119).
    #[test]
    fn a_torn_header_never_hides_the_nodes_after_it() {
        let g = nor_geometry(64);
        let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
        let mut st = Store::new(RamFlash::new(g), p);
        let bs = g.block_size();
        let kind = LogKind::Inode;
        let h = st.head_index(kind);
        let small = |st: &mut Store<RamFlash>, ino: u32| {
            let mut nb = NodeBuilder::new(NodeType::Inode, 0, ino, 64);
            nb.w.u32(ino).u32(0x5a5a_5a5a);
            let a = st.write_node(kind, nb, Priority::Reserve).unwrap();
            st.flush(kind).unwrap();
            a
        };
        small(&mut st, 1);
        let b = st.head_at(h).block();
        let w = st.head_at(h).off();
        // The checkpoint recorded the head at `w`; a cut then tore the next node's header, so
        // nothing reads programmed beyond `w`.
        st.recover_head(h).unwrap();
        let resumed = st.head_at(h).off();
        assert!(
            resumed > w && resumed < bs,
            "resumed at {resumed} after {w}"
        );
        // The torn header settles: a valid data-node header claiming 8 blocks from `w`.
        let mut data = vec![0u8; 8 * p.data_block as usize];
        data.iter_mut().enumerate().for_each(|(i, x)| *x = i as u8);
        let mut payload = Vec::new();
        let slot = p.data_slot() as usize;
        node::put_data_slots(&mut payload, 9, 0, &data, p.data_block as usize, slot);
        let mut nb = NodeBuilder::new(NodeType::Data, 0, 9, DATA_HEADER as usize);
        nb.w.u32(0).u32(8).u32(payload.len() as u32).u32(0);
        let other = st
            .write_data_node(LogKind::DataHot, nb, &payload, Priority::Reserve)
            .unwrap();
        let hdr_len = p.data_header() as usize;
        let mut hdr = vec![0u8; hdr_len];
        st.read(p.byte_of(other), &mut hdr).unwrap();
        let at = b as u64 * bs as u64 + w as u64;
        let claimed = hdr_len as u32 + payload.len() as u32;
        assert!(w + claimed > resumed && w + claimed <= bs);
        let mut old = vec![0u8; hdr_len];
        st.read(at, &mut old).unwrap();
        let settled: Vec<u8> = old.iter().zip(&hdr).map(|(o, n)| o & n).collect();
        let pp = st.phys_pos(at);
        st.medium.program(pp, &settled, &[]).unwrap();
        // What a walk from `w` finds there (collection, fsck and recovery step from node to
        // node by header lengths): never a valid header.
        let mut now = vec![0u8; hdr_len];
        st.read(at, &mut now).unwrap();
        let valid = match node::probe(&now, bs - w) {
            Probe::Header(hd) => hd.len as usize <= now.len() && node::verify(&now, &hd).is_ok(),
            _ => false,
        };
        assert!(
            !valid,
            "a valid header at {w} claims {claimed} bytes over the head"
        );
        // A node written after the recovery, inside what the settled header claims.
        let after = small(&mut st, 2);
        let after_off = (p.byte_of(after) % bs as u64) as u32;
        assert!(p.block_of(after) == b && after_off >= resumed && after_off < w + claimed);
        // A later recovery from a checkpoint that recorded `w` walks over the fence to the
        // node written after it, and continues beyond it.
        st.set_head(h, Head::resumed(b, w, g.page_size));
        st.recover_head(h).unwrap();
        let again = st.head_at(h);
        assert!(
            again.block() == b && again.off() > after_off,
            "the walk from {w} did not reach the node at {after_off}: head {:?}",
            (again.block(), again.off())
        );
    }

    /// A NOR head whose block holds a node torn by the cut (bytes programmed past the last
    /// valid node) continues after the end that node's header claims, and is closed when its
    /// header cannot be read: the cut program may lie in any page of that node, beyond its
    /// last byte that reads programmed when its content ends in 0xFF bytes, and a program
    /// there fails (`NotErased` on the simulator: the recovery checkpoint's writes failed with
    /// EIO after every remount). Emulated by a node of four pages whose last two hold 0xFF
    /// bytes and whose CRC no longer matches.
    #[test]
    fn recovery_continues_past_a_torn_node() {
        for header_readable in [true, false] {
            let g = nor_geometry(64);
            let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
            let mut st = Store::new(RamFlash::new(g), p);
            let bs = g.block_size();
            let ps = g.page_size;
            let kind = LogKind::Inode;
            let h = st.head_index(kind);
            let mut nb = NodeBuilder::new(NodeType::Inode, 0, 1, 64);
            nb.w.u32(1).u32(0x5a5a_5a5a);
            st.write_node(kind, nb, Priority::Reserve).unwrap();
            st.flush(kind).unwrap();
            let b = st.head_at(h).block();
            let w = st.head_at(h).off();
            // After the checkpoint that recorded `w`: a node of four pages, its last two pages
            // 0xFF bytes, its CRC broken (the cut tore it), and with it its magic.
            let len = 4 * ps as usize;
            let mut nb = NodeBuilder::new(NodeType::Inode, 0, 2, len);
            nb.w.u32(2);
            let fill = len - NODE_HEADER as usize - 4 - 2 * ps as usize;
            nb.w.fill(0x11, fill);
            nb.w.fill(0xFF, 2 * ps as usize);
            let a = st.write_node(kind, nb, Priority::Reserve).unwrap();
            st.flush(kind).unwrap();
            assert_eq!(p.block_of(a), b);
            let node_at = b as u64 * bs as u64 + w as u64;
            let broken = if header_readable {
                NODE_HEADER as u64 + 8
            } else {
                0
            };
            let at = st.phys_pos(node_at + broken);
            st.medium.program(at, &[0u8; 4], &[]).unwrap();
            st.set_head(h, Head::resumed(b, w, ps));
            st.recover_head(h).unwrap();
            let head = st.head_at(h);
            if header_readable {
                let node_end = w + p.align(len as u32);
                assert!(
                    head.block() == b && head.off() > node_end,
                    "the head goes on at {:?}, inside the torn node ({w}..{node_end})",
                    (head.block(), head.off())
                );
            } else {
                assert_eq!(head.block(), u32::MAX, "the head goes on at {}", head.off());
                assert_eq!(st.block(b).unwrap().state(), BlockState::Used);
            }
        }
    }
}
