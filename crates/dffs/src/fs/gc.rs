//! Garbage collection, static wear leveling and scrubbing.
//!
//! A victim block is chosen by cost-benefit (free space times age over the cost of copying),
//! or because its erase count lags far behind (static wear leveling: its cold data moves to a
//! worn block so the young block rejoins the free pool), or because its reads needed ECC
//! correction (scrubbing). Each node in the victim is checked for liveness by the mutual
//! pointers of the design: a directory page is live when the inode map (or its root's bucket
//! table) points at it, a file inode when its parent's slot points at it, an index node when its
//! file's tree does, a data block when its owner's index maps its tag's block number to it. Live
//! data is copied at once (to the cold data log); live metadata is marked dirty and rewritten
//! by the next checkpoint, after which the victim is erased. Work is done in bounded steps.

use alloc::vec;
use alloc::vec::Vec;

use super::Fs;
use crate::codec::Reader;
use crate::compress;
use crate::error::{Error, Result};
use crate::file::Index;
use crate::flash::{EccStatus, Flash, FlashKind};
use crate::layout::{Addr, LogKind, NODE_HEADER};
use crate::map::MapEntry;
use crate::node::{self, NodeType, OobTag, Probe, OOB_TAG_LEN, TAG_DATA, TAG_NODES};
use crate::store::{BlockState, Priority, DATA_HEADER};
use crate::types::Ino;

/// State of the collector between steps.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GcState {
    /// Block being collected.
    pub victim: Option<u32>,
    /// Next byte offset to examine in it.
    pub pos: u32,
    /// NAND: bytes at the start of the page at `pos` that belong to a compressed data node
    /// begun in the page before (nodes start after them).
    pub carry: u32,
    /// Totals for reports.
    pub moved_bytes: u64,
    pub blocks_collected: u64,
    pub wl_moves: u64,
}

/// What [`Fs::gc_step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Pages (NAND) or page-sized chunks (NOR) examined.
    pub pages: u32,
    /// Blocks finished (now waiting for the next checkpoint to be erased).
    pub blocks_done: u32,
    /// Whether there is more garbage to collect.
    pub more: bool,
}

/// Erase-count spread that triggers static wear leveling.
fn wl_threshold(mean: f64) -> u32 {
    (mean / 20.0).max(4.0) as u32
}

impl<F: Flash> Fs<F> {
    /// Does up to `budget` pages of garbage-collection work (for idle time).
    pub fn gc_step(&mut self, budget: u32) -> Result<GcReport> {
        self.guard(|fs| {
            fs.writable()?;
            let mut rep = GcReport::default();
            while rep.pages < budget {
                if fs.gc.victim.is_none() && !fs.pick_victim(false) {
                    break;
                }
                let before = fs.gc.blocks_collected;
                let n = fs.gc_work(budget - rep.pages)?;
                rep.blocks_done += (fs.gc.blocks_collected - before) as u32;
                if n == 0 && fs.gc.blocks_collected == before {
                    // Blocked on free space or dirty metadata: a checkpoint releases both.
                    if fs.tx.is_none() {
                        fs.checkpoint_inner(false)?;
                    }
                    break;
                }
                rep.pages += n;
            }
            if fs.st.pending_blocks() > 0 && fs.tx.is_none() {
                fs.checkpoint_inner(false)?;
            }
            rep.more = fs.gc.victim.is_some() || fs.best_victim(false).is_some();
            Ok(rep)
        })
    }

    /// Background collection after an operation: a bounded step when free blocks run low.
    pub(crate) fn gc_background(&mut self) -> Result<()> {
        // Start early enough that bounded steps keep up with the writes.
        let low = self.st.reserve_blocks()
            + self.st.p.head_count() as u32
            + 2
            + (self.st.p.geometry.blocks / 32).max(4);
        if self.st.free_blocks() > low && self.gc.victim.is_none() && !self.wl_due() {
            return Ok(());
        }
        if self.gc.victim.is_none() && !self.pick_victim(false) {
            return Ok(());
        }
        let step = self.cfg.gc_step;
        self.gc_work(step)?;
        // Collected blocks come back with the next checkpoint: take one when they are many
        // or when the free pool runs dry.
        let urgent_low = self.st.reserve_blocks() + self.st.p.head_count() as u32 + 2;
        let pending = self.st.pending_blocks();
        if pending > 0
            && (self.st.free_blocks() <= urgent_low
                || pending >= (self.st.p.geometry.blocks / 64).max(2))
            && self.tx.is_none()
            && !self.replaying
        {
            self.checkpoint_inner(false)?;
        }
        Ok(())
    }

    /// Whether static wear leveling should move a cold block now (only with free blocks to
    /// spare: leveling is never urgent).
    fn wl_due(&self) -> bool {
        let low = self.st.reserve_blocks() + self.st.p.head_count() as u32 + 2;
        self.st.free_blocks() > low && self.wl_candidate().is_some()
    }

    /// The coldest used block, when static wear leveling should move it: the erase-count
    /// spread of the blocks in circulation (anchors and bad blocks aside) passes the
    /// threshold, and no free block is young enough for dynamic leveling to catch up alone.
    fn wl_candidate(&self) -> Option<u32> {
        let (mut mn, mut mx, mut sum, mut n) = (u32::MAX, 0u32, 0u64, 0u64);
        let mut young_free = u32::MAX;
        let mut cand = None;
        for (i, e) in self.st.blocks.iter().enumerate() {
            match e.state() {
                BlockState::Bad | BlockState::Anchor => continue,
                BlockState::Free | BlockState::Erased => young_free = young_free.min(e.ec),
                _ => {}
            }
            mx = mx.max(e.ec);
            sum += e.ec as u64;
            n += 1;
            if e.state() == BlockState::Used && e.kind() != LogKind::Journal && e.ec < mn {
                mn = e.ec;
                cand = Some(i as u32);
            }
        }
        if n == 0 {
            return None;
        }
        let th = wl_threshold(sum as f64 / n as f64);
        if mx.saturating_sub(mn) > th && young_free.saturating_sub(mn) > th / 2 {
            cand
        } else {
            None
        }
    }

    /// Whether collecting could free `bytes` (there is dead space or pending blocks).
    pub(crate) fn gc_could_help(&self, bytes: u64) -> bool {
        let bs = self.st.p.geometry.block_size() as u64;
        let dead: u64 = self
            .st
            .blocks
            .iter()
            .filter(|e| e.state() == BlockState::Used && e.kind() != LogKind::Journal)
            .map(|e| bs - e.live as u64)
            .sum();
        dead + self.st.pending_blocks() as u64 * bs >= bytes.min(bs)
    }

    /// Cost-benefit choice among closed blocks with dead space.
    fn best_victim(&self, urgent: bool) -> Option<u32> {
        let bs = self.st.p.geometry.block_size() as f64;
        let now = self.st.cp_number as u32 & 0xFF_FFFF;
        let mut best: Option<(f64, u32)> = None;
        for (i, e) in self.st.blocks.iter().enumerate() {
            if e.state() != BlockState::Used || e.kind() == LogKind::Journal {
                continue;
            }
            let u = e.live as f64 / bs;
            if u > 0.97 && !urgent {
                continue;
            }
            if e.live as f64 >= bs {
                continue;
            }
            let age = (now.wrapping_sub(e.age()) & 0xFF_FFFF) as f64 + 1.0;
            // Moving a live file inode rewrites the directory page that points to it as well:
            // inode blocks are worth collecting only when little of them is live.
            let c = if e.kind() == LogKind::Inode { 8.0 } else { 1.0 };
            let score = if urgent {
                (1.0 - u) / (1.0 + u * (c - 1.0))
            } else {
                (1.0 - u) * age / (1.0 + u * c)
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, i as u32));
            }
        }
        best.map(|x| x.1)
    }

    /// Chooses the next victim (scrub, wear leveling, then cost-benefit). False if none.
    fn pick_victim(&mut self, urgent: bool) -> bool {
        while let Some(b) = self.st.m.scrub.first().copied() {
            self.st.m.scrub.remove(0);
            let e = self.st.blocks.get(b as usize).copied();
            if let Some(e) = e {
                // A block still open as a log head is closed first (as if it had filled up), so
                // that it can be moved and erased like any other.
                if e.state() == BlockState::Head && e.kind() != LogKind::Journal {
                    if let Some(h) = self.st.heads.iter().position(|h| h.block == b) {
                        if self.st.close_head(h).is_err() {
                            continue;
                        }
                    }
                }
                let e = self.st.blocks[b as usize];
                if e.state() == BlockState::Used && e.kind() != LogKind::Journal {
                    self.gc.victim = Some(b);
                    self.gc.pos = 0;
                    self.gc.carry = 0;
                    return true;
                }
            }
        }
        if !urgent && self.wl_due() {
            if let Some(b) = self.wl_candidate() {
                self.gc.victim = Some(b);
                self.gc.pos = 0;
                self.gc.carry = 0;
                self.gc.wl_moves += 1;
                return true;
            }
        }
        match self.best_victim(urgent) {
            Some(b) => {
                self.gc.victim = Some(b);
                self.gc.pos = 0;
                self.gc.carry = 0;
                true
            }
            None => false,
        }
    }

    /// Runs collection until one block is finished. Returns whether anything was collected.
    pub(crate) fn collect(&mut self, urgent: bool) -> Result<bool> {
        if self.gc.victim.is_none() && !self.pick_victim(urgent) {
            return Ok(false);
        }
        let bs = self.st.p.geometry.block_size();
        let before = self.gc.blocks_collected;
        let mut progress = false;
        while self.gc.victim.is_some() {
            let n = self.gc_work(bs)?;
            // Finishing a victim examined to its end by an earlier step takes no page.
            if n == 0 && self.gc.blocks_collected == before {
                break;
            }
            progress = true;
        }
        Ok(progress || self.gc.blocks_collected > before)
    }

    /// Examines up to `budget` pages of the current victim. Returns pages examined.
    fn gc_work(&mut self, budget: u32) -> Result<u32> {
        let Some(victim) = self.gc.victim else {
            return Ok(0);
        };
        let p = self.st.p;
        let g = p.geometry;
        let bs = g.block_size();
        if self.st.blocks[victim as usize].state() != BlockState::Used {
            self.gc.victim = None;
            return Ok(0);
        }
        let mut pages = 0;
        while pages < budget {
            // Never take the last free block (a checkpoint needs it to release what was
            // collected), and let a checkpoint write what collection dirtied before going on.
            // (A victim with nothing live needs no room at all.)
            let needs_room = self.st.blocks[victim as usize].live > 0;
            if needs_room && self.st.free_blocks() < 2 {
                break;
            }
            if self.dirty_items() > 2 * self.cfg.max_dirty {
                if self.tx.is_some() || self.replaying {
                    break;
                }
                self.checkpoint_inner(false)?;
                if self.st.blocks[victim as usize].state() != BlockState::Used {
                    break;
                }
            }
            if self.gc.pos >= bs {
                self.finish_victim(victim);
                break;
            }
            let ended = match g.kind {
                FlashKind::Nand => self.gc_nand_page(victim, self.gc.pos / g.page_size)?,
                FlashKind::Nor => self.gc_nor_chunk(victim)?,
            };
            pages += 1;
            if g.kind == FlashKind::Nand {
                self.gc.pos += g.page_size;
            }
            if ended {
                self.finish_victim(victim);
                break;
            }
        }
        Ok(pages)
    }

    fn finish_victim(&mut self, victim: u32) {
        let e = &mut self.st.blocks[victim as usize];
        e.live = 0;
        self.st.set_state(victim, BlockState::PendingErase);
        self.gc.victim = None;
        self.gc.pos = 0;
        self.gc.carry = 0;
        self.gc.blocks_collected += 1;
    }

    /// Collects one NAND page. Returns true when the rest of the block is unwritten.
    fn gc_nand_page(&mut self, victim: u32, page_in_block: u32) -> Result<bool> {
        let p = self.st.p;
        let g = p.geometry;
        let page = victim * g.pages_per_block + page_in_block;
        let mut data = vec![0u8; g.page_size as usize];
        let mut oob = [0xFFu8; OOB_TAG_LEN];
        let n = OOB_TAG_LEN.min(g.oob_free_len as usize);
        let st = self.st.read_page(page, &mut data, &mut oob[..n])?;
        let carry = core::mem::take(&mut self.gc.carry) as usize;
        let tag = match OobTag::decode(&oob) {
            Ok(Some(t)) => t,
            // Never programmed, or skipped by recovery after a power cut: later pages may still
            // hold nodes.
            Ok(None) => return Ok(false),
            Err(_) => return Ok(false),
        };
        let base = p.addr_of(page as u64 * g.page_size as u64);
        if tag.kind == TAG_DATA {
            if st == EccStatus::Uncorrectable || tag.data_crc != crate::codec::crc32c(&data) {
                return Ok(false);
            }
            self.gc_data_block(tag.ino, tag.block, base, &data)?;
            return Ok(false);
        }
        if tag.kind != TAG_NODES || st == EccStatus::Uncorrectable {
            return Ok(false);
        }
        if carry >= data.len() {
            // The whole page belongs to a node begun before it.
            self.gc.carry = (carry - data.len()) as u32;
            return Ok(false);
        }
        let mut i = carry;
        let unit = p.unit() as usize;
        while i + 2 <= data.len() {
            // A compressed data node may run on into the next page (the rest of the block).
            let room = (p.geometry.block_size() - page_in_block * g.page_size) as usize - i;
            let mut hb = [0u8; NODE_HEADER as usize];
            let head: &[u8] = if data.len() - i >= hb.len() {
                &data[i..]
            } else {
                // Even the header may run on into the next page.
                let at = p.byte_of(base) + i as u64;
                if room < hb.len() || self.st.read(at, &mut hb).is_err() {
                    break;
                }
                &hb
            };
            if let Probe::Header(h) = node::probe(head, room as u32) {
                if h.typ == NodeType::DataZ && i + h.len as usize > data.len() {
                    let a = Addr(base.0 + (i >> p.addr_shift) as u32);
                    let mut bytes = vec![0u8; h.len as usize];
                    if self.st.read(p.byte_of(a), &mut bytes).is_err()
                        || node::verify(&bytes, &h).is_err()
                    {
                        break;
                    }
                    self.gc_dataz_node(a, &h, &bytes)?;
                    self.gc.carry = (i + p.align(h.len) as usize - data.len()) as u32;
                    break;
                }
            }
            match node::probe(&data[i..], (data.len() - i) as u32) {
                Probe::Erased => break,
                Probe::Padding => i += unit,
                Probe::Garbage => break,
                Probe::Header(h) => {
                    let len = h.len as usize;
                    if node::verify(&data[i..], &h).is_err() {
                        break;
                    }
                    let a = Addr(base.0 + (i >> p.addr_shift) as u32);
                    if h.typ == NodeType::Data {
                        // A data node starting in this page runs on into following pages.
                        self.gc_data_node(a, &data[i..i + len])?;
                    } else if h.typ == NodeType::DataZ {
                        let bytes = data[i..i + len].to_vec();
                        self.gc_dataz_node(a, &h, &bytes)?;
                    } else {
                        let bytes = data[i..i + len].to_vec();
                        self.gc_node(a, &h, &bytes)?;
                    }
                    i += p.align(h.len) as usize;
                }
            }
        }
        Ok(false)
    }

    /// Collects the next NOR node of the victim. Returns true at the end of its log.
    fn gc_nor_chunk(&mut self, victim: u32) -> Result<bool> {
        let p = self.st.p;
        let bs = p.geometry.block_size();
        let pos = victim as u64 * bs as u64 + self.gc.pos as u64;
        let room = bs - self.gc.pos;
        let mut head = vec![0u8; (NODE_HEADER.min(room)) as usize];
        self.st.read(pos, &mut head)?;
        match node::probe(&head, room) {
            Probe::Erased | Probe::Garbage => {
                // End of what was written, or a gap left by recovery after a power cut: nodes
                // written after recovery start on a later program-page boundary.
                let ps = p.geometry.page_size;
                self.gc.pos = (self.gc.pos / ps + 1) * ps;
                Ok(self.gc.pos >= bs)
            }
            Probe::Padding => {
                self.gc.pos += p.unit();
                Ok(false)
            }
            Probe::Header(h) => {
                let mut bytes = vec![0u8; h.len as usize];
                self.st.read(pos, &mut bytes)?;
                if node::verify(&bytes, &h).is_err() {
                    let ps = p.geometry.page_size;
                    self.gc.pos = (self.gc.pos / ps + 1) * ps;
                    return Ok(self.gc.pos >= bs);
                }
                let a = p.addr_of(pos);
                let mut adv = p.align(h.len);
                if h.typ == NodeType::Data {
                    adv = self.gc_data_node(a, &bytes)?;
                } else if h.typ == NodeType::DataZ {
                    self.gc_dataz_node(a, &h, &bytes)?;
                } else {
                    self.gc_node(a, &h, &bytes)?;
                }
                self.gc.pos += adv.max(p.unit());
                Ok(false)
            }
        }
    }

    /// Liveness and relocation of a metadata node.
    fn gc_node(&mut self, a: Addr, h: &node::NodeHeader, bytes: &[u8]) -> Result<()> {
        let body = &bytes[NODE_HEADER as usize..];
        let mut r = Reader::new(body);
        match h.typ {
            NodeType::Inode => {
                let ino = h.ino;
                match self.map.get(&mut self.st, ino)? {
                    MapEntry::File { .. } | MapEntry::Linked(_) => {
                        let c = match self.load_file(ino) {
                            Ok(c) => c,
                            Err(Error::Corrupt) | Err(Error::NotFound) => return Ok(()),
                            Err(e) => return Err(e),
                        };
                        if !c.dirty && c.node.node_addr == a {
                            self.make_dirty(ino)?;
                        }
                    }
                    MapEntry::Orphan => {} // rewritten by every checkpoint
                    _ => {}
                }
            }
            NodeType::Index => {
                let level = r.u8()?;
                r.take(3)?;
                let first = r.u32()?;
                let ino = h.ino;
                // A spilled update has an index tree of its own.
                let spilled = self
                    .inos
                    .get(&ino)
                    .and_then(|o| o.overlay.as_ref())
                    .and_then(|ov| ov.spilled.clone());
                if let Some(mut sp) = spilled {
                    let moved = {
                        let mut ix = Index {
                            st: &mut self.st,
                            cache: &mut self.icache,
                            ino,
                        };
                        ix.relocate(&mut sp, a, level, first)?
                    };
                    if moved {
                        if let Some(ov) = self.inos.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
                            ov.spilled = Some(sp);
                        }
                        return Ok(());
                    }
                }
                let orphan = self
                    .inos
                    .get(&ino)
                    .map(|o| o.orphan.is_some())
                    .unwrap_or(false);
                if orphan {
                    let mut node = match self.inos.get(&ino).and_then(|o| o.orphan.clone()) {
                        Some(n) => n,
                        None => return Ok(()),
                    };
                    let mut ix = Index {
                        st: &mut self.st,
                        cache: &mut self.icache,
                        ino,
                    };
                    if ix.relocate(&mut node.content, a, level, first)? {
                        if let Some(o) = self.inos.get_mut(&ino) {
                            o.orphan = Some(node);
                        }
                    }
                    return Ok(());
                }
                if !self.map.get(&mut self.st, ino)?.is_file() {
                    return Ok(());
                }
                let mut content = match self.load_file(ino) {
                    Ok(c) => c.node.content.clone(),
                    Err(Error::Corrupt) | Err(Error::NotFound) => return Ok(()),
                    Err(e) => return Err(e),
                };
                let moved = {
                    let mut ix = Index {
                        st: &mut self.st,
                        cache: &mut self.icache,
                        ino,
                    };
                    ix.relocate(&mut content, a, level, first)?
                };
                if moved {
                    self.make_dirty(ino)?;
                    if let Some(c) = self.files.get_mut(&ino) {
                        c.node.content.root = content.root;
                    }
                }
            }
            NodeType::DirRoot | NodeType::DirBucket | NodeType::DirTable => {
                let (index, pos) = match h.typ {
                    NodeType::DirBucket => (r.u32()?, r.u32()?),
                    NodeType::DirTable => (r.u32()?, 0),
                    _ => (0, 0),
                };
                match self.dirs.relocate(
                    &mut self.st,
                    &mut self.map,
                    a,
                    crate::dir::DirPageId {
                        typ: h.typ,
                        ino: h.ino,
                        index,
                        pos,
                    },
                ) {
                    Ok(_) | Err(Error::Corrupt) | Err(Error::NotFound) => {}
                    Err(e) => return Err(e),
                }
            }
            NodeType::MapLeaf | NodeType::MapInterior => {
                let level = r.u8()?;
                r.take(3)?;
                let index = r.u32()?;
                self.map.relocate_page(&mut self.st, a, level, index)?;
            }
            // Block-table pages are rewritten by every checkpoint; journal records in a
            // non-journal block and stray checkpoints are dead.
            _ => {}
        }
        Ok(())
    }

    /// Whether (`ino`, block `b`) currently maps to `a` in its committed state or its overlay.
    fn data_refs(&mut self, ino: Ino, b: u32, a: Addr) -> Result<(bool, bool)> {
        let stride = Index::<F>::stride(&self.st.p);
        let (ov_extents, spilled) = match self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
            Some(ov) => (ov.extents.get(b, stride) == Some(a), ov.spilled.clone()),
            None => (false, None),
        };
        let ov = match spilled {
            Some(sp) => {
                let mut ix = Index {
                    st: &mut self.st,
                    cache: &mut self.icache,
                    ino,
                };
                ix.lookup(&sp, b)? == a
            }
            None => ov_extents,
        };
        let orphan = self.inos.get(&ino).and_then(|o| o.orphan.clone());
        let content = match orphan {
            Some(n) => n.content,
            None => {
                if !self.map.get(&mut self.st, ino)?.is_file() {
                    return Ok((false, ov));
                }
                match self.load_file(ino) {
                    Ok(c) => c.node.content.clone(),
                    Err(Error::Corrupt) | Err(Error::NotFound) => return Ok((false, ov)),
                    Err(e) => return Err(e),
                }
            }
        };
        if content.inline.is_some() {
            return Ok((false, ov));
        }
        let mut ix = Index {
            st: &mut self.st,
            cache: &mut self.icache,
            ino,
        };
        let committed = ix.lookup(&content, b)? == a;
        Ok((committed, ov))
    }

    /// Points (`ino`, `b`) at `new` wherever it pointed at the old copy.
    fn retarget(
        &mut self,
        ino: Ino,
        b: u32,
        count: u32,
        committed: bool,
        overlay: bool,
        new: Addr,
    ) -> Result<()> {
        let stride = Index::<F>::stride(&self.st.p);
        if overlay {
            if let Some(ov) = self.inos.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
                match ov.spilled.as_mut() {
                    Some(sp) => sp.pending.insert(b, count, new, stride),
                    None => ov.extents.insert(b, count, new, stride),
                }
            }
        }
        if committed {
            if let Some(n) = self.inos.get_mut(&ino).and_then(|o| o.orphan.as_mut()) {
                n.content.pending.insert(b, count, new, stride);
            } else {
                self.make_dirty(ino)?;
                if let Some(c) = self.files.get_mut(&ino) {
                    c.node.content.pending.insert(b, count, new, stride);
                }
            }
        }
        Ok(())
    }

    /// Liveness and relocation of one NAND data page.
    fn gc_data_block(&mut self, ino: Ino, b: u32, a: Addr, data: &[u8]) -> Result<()> {
        let (committed, overlay) = self.data_refs(ino, b, a)?;
        if !committed && !overlay {
            return Ok(());
        }
        let new = self
            .st
            .write_data_page(LogKind::DataCold, ino, b, data, Priority::Reserve)?;
        self.kill_data(a);
        self.gc.moved_bytes += data.len() as u64;
        self.retarget(ino, b, 1, committed, overlay, new)
    }

    /// Liveness and relocation of a compressed data node: a live one is copied as it is (no
    /// recompression) and the block pointer follows it.
    fn gc_dataz_node(&mut self, a: Addr, h: &node::NodeHeader, bytes: &[u8]) -> Result<()> {
        let p = self.st.p;
        let z = match compress::parse_dataz(h.flags, &bytes[NODE_HEADER as usize..]) {
            Ok(z) => z,
            Err(_) => return Ok(()),
        };
        let Some(count) = z.blocks(p.data_block) else {
            return Ok(());
        };
        let ptr = Addr::packed(a);
        let mut live: Vec<(u32, bool, bool)> = Vec::new();
        for k in 0..count {
            let b = z.block.saturating_add(k);
            let (c, o) = self.data_refs(h.ino, b, ptr)?;
            if c || o {
                live.push((b, c, o));
            }
        }
        if live.is_empty() {
            return Ok(());
        }
        let len = p.align(h.len);
        let share = compress::share(len, count);
        if live.len() < count as usize {
            // Some blocks were overwritten since: moving the node whole would copy dead data
            // (and need more room than the shares credited say). Recompress what is live.
            return self.gc_dataz_split(a, h, &z, share, &live);
        }
        // The node moves whole, as it is.
        let nb = compress::dataz_node(h.ino, z.block, z.algo, z.raw_len, z.payload);
        let na = self.st.write_spanning_node(
            LogKind::DataCold,
            nb,
            share * live.len() as u32,
            Priority::Reserve,
        )?;
        self.st.kill(a, share * live.len() as u32);
        self.gc.moved_bytes += len as u64;
        for (b, c, o) in live {
            self.retarget(h.ino, b, 1, c, o, Addr::packed(na))?;
        }
        Ok(())
    }

    /// Moves the live blocks of a compressed node some of whose blocks are dead: runs of
    /// consecutive live blocks are compressed again (or written raw if they no longer shrink).
    fn gc_dataz_split(
        &mut self,
        a: Addr,
        h: &node::NodeHeader,
        z: &compress::DataZ<'_>,
        share: u32,
        live: &[(u32, bool, bool)],
    ) -> Result<()> {
        let p = self.st.p;
        let bs = p.data_block as usize;
        let mut all = vec![0u8; z.raw_len as usize];
        if compress::decompress(z.algo, z.payload, &mut all).is_err() {
            // Unreadable: the blocks read as EIO wherever they are; leave them.
            return Ok(());
        }
        let mut i = 0;
        while i < live.len() {
            let mut j = i + 1;
            while j < live.len() && live[j].0 == live[j - 1].0 + 1 {
                j += 1;
            }
            let first = live[i].0;
            let n = j - i;
            let off = (first - z.block) as usize * bs;
            let raw = &all[off..off + n * bs];
            let max = (n * bs - n * bs / 8).saturating_sub(compress::DATAZ_HEADER as usize);
            let mut ptrs: Vec<Addr> = Vec::with_capacity(n);
            match compress::compress(z.algo, raw, max) {
                Some(c) => {
                    let nb = compress::dataz_node(h.ino, first, z.algo, (n * bs) as u32, &c);
                    let l = p.align(nb.w.len() as u32);
                    let credit = n as u32 * compress::share(l, n as u32);
                    let na = self.st.write_spanning_node(
                        LogKind::DataCold,
                        nb,
                        credit,
                        Priority::Reserve,
                    )?;
                    ptrs.resize(n, Addr::packed(na));
                    self.gc.moved_bytes += l as u64;
                }
                None => {
                    for k in 0..n {
                        let blk = &raw[k * bs..(k + 1) * bs];
                        let b = first + k as u32;
                        let na = match p.geometry.kind {
                            FlashKind::Nand => self.st.write_data_page(
                                LogKind::DataCold,
                                h.ino,
                                b,
                                blk,
                                Priority::Reserve,
                            )?,
                            FlashKind::Nor => {
                                let hdr = self.write_data_node(
                                    LogKind::DataCold,
                                    h.ino,
                                    b,
                                    1,
                                    blk,
                                    Priority::Reserve,
                                )?;
                                Addr(hdr.0 + (DATA_HEADER >> p.addr_shift))
                            }
                        };
                        ptrs.push(na);
                        self.gc.moved_bytes += bs as u64;
                    }
                }
            }
            for (k, &(b, c, o)) in live[i..j].iter().enumerate() {
                self.st.kill(a, share);
                self.retarget(h.ino, b, 1, c, o, ptrs[k])?;
            }
            i = j;
        }
        Ok(())
    }

    /// Liveness and relocation of a data node (header plus payload); returns its length.
    fn gc_data_node(&mut self, a: Addr, bytes: &[u8]) -> Result<u32> {
        let p = self.st.p;
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let first = r.u32()?;
        let count = r.u32()?;
        let plen = r.u32()?;
        let ino = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        let bs = p.data_block;
        if count == 0 || count > 4096 || plen != count * bs || first.checked_add(count).is_none() {
            return Ok(p.align(DATA_HEADER));
        }
        let total = p.align(DATA_HEADER + plen);
        let stride = Index::<F>::stride(&p);
        let payload_addr = Addr(a.0 + (DATA_HEADER >> p.addr_shift));
        // Check each block; copy live runs.
        let mut live: Vec<(u32, bool, bool)> = Vec::with_capacity(count as usize);
        for k in 0..count {
            let (c, o) = self.data_refs(ino, first + k, Addr(payload_addr.0 + k * stride))?;
            live.push((k, c, o));
        }
        let mut k = 0usize;
        while k < live.len() {
            let (_, c, o) = live[k];
            if !c && !o {
                k += 1;
                continue;
            }
            let mut j = k + 1;
            while j < live.len() && live[j].1 == c && live[j].2 == o {
                j += 1;
            }
            let n = (j - k) as u32;
            let mut payload = vec![0u8; (n * bs) as usize];
            let src = p.byte_of(payload_addr) + k as u64 * bs as u64;
            self.st.read(src, &mut payload)?;
            let na = self.write_data_node(
                LogKind::DataCold,
                ino,
                first + k as u32,
                n,
                &payload,
                Priority::Reserve,
            )?;
            let new_payload = Addr(na.0 + (DATA_HEADER >> p.addr_shift));
            for m in 0..n {
                self.kill_data(Addr(payload_addr.0 + (k as u32 + m) * stride));
            }
            self.gc.moved_bytes += (n * bs) as u64;
            self.retarget(ino, first + k as u32, n, c, o, new_payload)?;
            k = j;
        }
        Ok(total)
    }
}
