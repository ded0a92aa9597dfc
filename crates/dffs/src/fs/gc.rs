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
//!
//! It must never erase what it could not read. An item that cannot be read (after the retries
//! of the medium and the store) is either known to be live (a data page whose tag names a block
//! its file still maps there) — then the victim is kept whole, the file reads `EIO` for that
//! block only, and a later collection tries again — or of unknown liveness (a torn page left by
//! a power cut looks the same as a corrupted live one). For those the block's live-byte count
//! decides: once what could be read has been moved and a checkpoint has rewritten the live
//! metadata, a block still credited with live bytes is kept. Kept blocks are not chosen again
//! until something in them dies.

use alloc::vec;
use alloc::vec::Vec;

use super::Fs;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::{crc32c, Reader};
use crate::format::compress;
use crate::format::node::{self, NodeType, OobTag, Probe, OOB_TAG_LEN, TAG_DATA};
use crate::format::params::{Addr, LogKind, DATA_CRC_LEN, NODE_HEADER};
use crate::index::inode_map::MapEntry;
use crate::store::medium::READ_RETRIES;
use crate::store::{BlockState, Priority, DATA_HEADER};
use dffs_flash::{EccStatus, Flash, FlashKind};

/// State of the collector between steps.
#[derive(Clone, Debug, Default)]
pub(crate) struct GcState {
    /// Block being collected.
    pub victim: Option<u32>,
    /// Next byte offset to examine in it.
    pub pos: u32,
    /// NAND: bytes at the start of the page at `pos` that belong to a compressed data node
    /// begun in the page before (nodes start after them).
    pub carry: u32,
    /// The victim holds a live item that could not be read: it must not be erased.
    pub unreadable: bool,
    /// The victim holds an item that could not be read and whose liveness is unknown: its
    /// live-byte count decides (see the module comment).
    pub unknown: bool,
    /// Blocks kept because of unreadable items, with their live bytes then: not chosen again
    /// while nothing in them dies.
    pub kept: Vec<(u32, u32)>,
    /// Totals for reports.
    pub moved_bytes: u64,
    pub blocks_collected: u64,
    pub wl_moves: u64,
    /// Victims kept (not erased) because of unreadable items.
    pub blocks_kept: u64,
}

/// Most blocks remembered in [`GcState::kept`] (an older one forgotten is only examined again).
const KEPT_MAX: usize = 16;

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
            + self.st.p().head_count() as u32
            + 2
            + (self.st.p().geometry.blocks / 32).max(4);
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
        let urgent_low = self.st.reserve_blocks() + self.st.p().head_count() as u32 + 2;
        let pending = self.st.pending_blocks();
        if pending > 0
            && (self.st.free_blocks() <= urgent_low
                || pending >= (self.st.p().geometry.blocks / 64).max(2))
            && self.checkpoint_pays()
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
        let low = self.st.reserve_blocks() + self.st.p().head_count() as u32 + 2;
        self.st.free_blocks() > low && self.wl_candidate().is_some()
    }

    /// The coldest used block, when static wear leveling should move it: the erase-count
    /// spread of the blocks in circulation (anchors and bad blocks aside) passes the
    /// threshold, and no free block is young enough for dynamic leveling to catch up alone.
    fn wl_candidate(&self) -> Option<u32> {
        let (mut mn, mut mx, mut sum, mut n) = (u32::MAX, 0u32, 0u64, 0u64);
        let mut young_free = u32::MAX;
        let mut cand = None;
        for (i, e) in self.st.blocks() {
            match e.state() {
                BlockState::Bad | BlockState::Anchor => continue,
                BlockState::Free | BlockState::Erased => young_free = young_free.min(e.ec),
                _ => {}
            }
            mx = mx.max(e.ec);
            sum += e.ec as u64;
            n += 1;
            if e.state() == BlockState::Used
                && e.kind() != LogKind::Journal
                && e.ec < mn
                && !self.is_kept(i)
            {
                mn = e.ec;
                cand = Some(i);
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
        let bs = self.st.p().geometry.block_size() as u64;
        let dead: u64 = self
            .st
            .blocks()
            .filter(|(i, e)| {
                e.state() == BlockState::Used && e.kind() != LogKind::Journal && !self.is_kept(*i)
            })
            .map(|(_, e)| bs - e.live as u64)
            .sum();
        dead + self.st.pending_blocks() as u64 * bs >= bytes.min(bs)
    }

    /// Whether collection may copy live data now (copies must leave what a checkpoint needs).
    fn copy_room(&self) -> bool {
        self.st.free_blocks() > self.st.log_floor() + 1
    }

    /// Whether collecting a block of log `kind` writes copies at once: data is copied, and so
    /// are index nodes (with the path above them); directory, map and inode nodes are only
    /// marked dirty for the next checkpoint. A block of a head that also takes index nodes
    /// may hold some.
    fn copies_now(&self, kind: LogKind) -> bool {
        let p = &self.st.p();
        kind.is_data() || p.head_of(kind) == p.head_of(LogKind::Index)
    }

    /// Cost-benefit score of collecting block `i` now (higher is better), or `None` when it
    /// does not qualify: not a closed non-journal block, kept, completely live, more than 97%
    /// live (unless `urgent`), or a data block with live data while there is no room to copy.
    fn victim_score(&self, i: u32, urgent: bool, room: bool) -> Option<f64> {
        if i >= self.st.block_count() {
            return None;
        }
        let e = self.st.block(i);
        if e.state() != BlockState::Used
            || e.kind() == LogKind::Journal
            || self.is_kept(i)
            || (!room && self.copies_now(e.kind()) && e.live > 0)
        {
            return None;
        }
        let p = &self.st.p();
        let bs = p.geometry.block_size() as f64;
        let u = e.live as f64 / bs;
        if (u > 0.97 && !urgent) || e.live as f64 >= bs {
            return None;
        }
        let now = self.st.cp_number() as u32 & 0xFF_FFFF;
        let age = (now.wrapping_sub(e.age()) & 0xFF_FFFF) as f64 + 1.0;
        // Moving a live file inode rewrites the directory page that points to it as well: an
        // inode's bytes cost about a directory page each (at least 8 times their own size).
        let c = if e.kind() == LogKind::Inode {
            (p.dir_page as f64 / 160.0).max(8.0)
        } else {
            1.0
        };
        Some(if urgent {
            (1.0 - u) / (1.0 + u * (c - 1.0))
        } else {
            (1.0 - u) * age / (1.0 + u * c)
        })
    }

    /// Cost-benefit choice among closed blocks with dead space. Without room for copies only
    /// blocks whose collection copies nothing now qualify (metadata, whose live nodes the next
    /// checkpoint rewrites, and data blocks with nothing live).
    fn best_victim(&self, urgent: bool) -> Option<u32> {
        let room = self.copy_room();
        let mut best: Option<(f64, u32)> = None;
        for i in 0..self.st.block_count() {
            if let Some(score) = self.victim_score(i, urgent, room) {
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, i));
                }
            }
        }
        best.map(|x| x.1)
    }

    /// When space is needed now: drops a victim chosen earlier (in the background, by age)
    /// if another block gives back space far more cheaply. What was already moved stays moved.
    fn reconsider_victim(&mut self) {
        let Some(v) = self.gc.victim else {
            return;
        };
        if self.gc.unreadable || self.gc.unknown {
            return;
        }
        let room = self.copy_room();
        let cur = self.victim_score(v, true, room).unwrap_or(0.0);
        if let Some(b) = self.best_victim(true) {
            let best = self.victim_score(b, true, room).unwrap_or(0.0);
            if b != v && best > 2.0 * cur {
                self.gc.victim = None;
            }
        }
    }

    /// Whether `b` was kept for an unreadable item and nothing in it has died since.
    fn is_kept(&self, b: u32) -> bool {
        self.gc.kept.iter().any(|&(k, live)| {
            k == b
                && b < self.st.block_count()
                && self.st.block(b).state() == BlockState::Used
                && self.st.block(b).live >= live
        })
    }

    /// Makes `b` the victim.
    fn start_victim(&mut self, b: u32) {
        self.gc.kept.retain(|&(k, _)| k != b);
        self.gc.victim = Some(b);
        self.gc.pos = 0;
        self.gc.carry = 0;
        self.gc.unreadable = false;
        self.gc.unknown = false;
    }

    /// Chooses the next victim (scrub, wear leveling, then cost-benefit). False if none.
    fn pick_victim(&mut self, urgent: bool) -> bool {
        while let Some(b) = self.st.take_scrub_candidate() {
            if b < self.st.block_count() {
                let e = self.st.block(b);
                // A block still open as a log head is closed first (as if it had filled up), so
                // that it can be moved and erased like any other.
                if e.state() == BlockState::Head && e.kind() != LogKind::Journal {
                    if let Some(h) = self.st.heads().holding(b) {
                        if self.st.close_head(h).is_err() {
                            continue;
                        }
                    }
                }
                let e = self.st.block(b);
                if e.state() == BlockState::Used && e.kind() != LogKind::Journal && !self.is_kept(b)
                {
                    self.start_victim(b);
                    return true;
                }
            }
        }
        if !urgent && self.wl_due() {
            if let Some(b) = self.wl_candidate() {
                self.start_victim(b);
                self.gc.wl_moves += 1;
                return true;
            }
        }
        match self.best_victim(urgent) {
            Some(b) => {
                self.start_victim(b);
                true
            }
            None => false,
        }
    }

    /// Runs collection until one block is finished. Returns whether anything was collected.
    pub(crate) fn collect(&mut self, urgent: bool) -> Result<bool> {
        let bs = self.st.p().geometry.block_size();
        let before = self.gc.blocks_collected;
        if urgent {
            self.reconsider_victim();
        }
        // A victim chosen earlier may need room for copies that is gone now: it is dropped
        // and one that copies nothing is chosen instead (second round).
        for _ in 0..2 {
            if self.gc.victim.is_none() && !self.pick_victim(urgent) {
                return Ok(false);
            }
            let mut progress = false;
            while self.gc.victim.is_some() {
                let n = self.gc_work(bs)?;
                // Finishing a victim examined to its end by an earlier step takes no page.
                if n == 0 && self.gc.blocks_collected == before {
                    break;
                }
                progress = true;
            }
            if progress || self.gc.blocks_collected > before || self.gc.victim.is_some() {
                return Ok(progress || self.gc.blocks_collected > before);
            }
        }
        Ok(false)
    }

    /// Examines up to `budget` pages of the current victim. Returns pages examined.
    fn gc_work(&mut self, budget: u32) -> Result<u32> {
        let Some(victim) = self.gc.victim else {
            return Ok(0);
        };
        let p = self.st.p();
        let g = p.geometry;
        let bs = g.block_size();
        if self.st.block(victim).state() != BlockState::Used {
            self.gc.victim = None;
            return Ok(0);
        }
        let mut pages = 0;
        while pages < budget {
            // Copies must leave what a checkpoint needs (it releases what was collected), and
            // a checkpoint writes what collection dirtied before the next checkpoint cannot.
            // (Metadata victims copy nothing now: the checkpoint rewrites their live nodes.)
            let e = self.st.block(victim);
            let needs_room = e.live > 0 && self.copies_now(e.kind());
            if needs_room && !self.copy_room() {
                if self.checkpoint_pays() && self.tx.is_none() && !self.replaying {
                    self.checkpoint_inner(false)?;
                    self.refresh_floors();
                    if self.copy_room() {
                        continue;
                    }
                }
                // Leave this victim for later: a block whose collection copies nothing can
                // be taken meanwhile (the next choice knows there is no room).
                self.gc.victim = None;
                break;
            }
            if self.dirty_items() > 2 * self.cfg.max_dirty {
                if self.tx.is_some() || self.replaying {
                    break;
                }
                self.checkpoint_inner(false)?;
                if self.st.block(victim).state() != BlockState::Used {
                    break;
                }
            }
            if self.gc.pos >= bs {
                self.end_victim(victim)?;
                break;
            }
            let ended = match g.kind {
                FlashKind::Nand => self.gc_nand_page(victim, self.gc.pos / g.page_size),
                FlashKind::Nor => self.gc_nor_chunk(victim),
            };
            let ended = match ended {
                Ok(e) => e,
                // No room for a copy after all: this victim waits (what moved stays moved;
                // the item that did not move is examined again next time).
                Err(Error::NoSpace) => {
                    self.gc.victim = None;
                    break;
                }
                Err(e) => return Err(e),
            };
            pages += 1;
            if g.kind == FlashKind::Nand {
                self.gc.pos += g.page_size;
            }
            if ended {
                self.end_victim(victim)?;
                break;
            }
        }
        Ok(pages)
    }

    /// The victim has been examined to its end: it waits for the next checkpoint to be
    /// erased, unless it holds something live that could not be read.
    fn end_victim(&mut self, victim: u32) -> Result<()> {
        let mut keep = self.gc.unreadable;
        if !keep && self.gc.unknown {
            // What could be read has moved (data) or is dirty (metadata); a checkpoint
            // rewrites the metadata, killing its bytes here. Whatever the block is still
            // credited with is what could not be read.
            if self.tx.is_some() || self.replaying {
                keep = true;
            } else {
                self.checkpoint_inner(false)?;
                keep = self.st.block(victim).state() != BlockState::Used
                    || self.st.block(victim).live > 0;
            }
        }
        self.gc.victim = None;
        self.gc.pos = 0;
        self.gc.carry = 0;
        self.gc.unreadable = false;
        self.gc.unknown = false;
        if keep {
            if self.st.block(victim).state() == BlockState::Used {
                let live = self.st.block(victim).live;
                if self.gc.kept.len() >= KEPT_MAX {
                    self.gc.kept.remove(0);
                }
                self.gc.kept.push((victim, live));
            }
            self.gc.blocks_kept += 1;
            return Ok(());
        }
        let mut e = self.st.block(victim);
        e.live = 0;
        e.set_state(BlockState::PendingErase);
        self.st.set_block(victim, e);
        self.gc.blocks_collected += 1;
        Ok(())
    }

    /// Runs one item's collection; an item that cannot be read or whose owner cannot be read
    /// (`Io`, `Corrupt`) makes the victim's liveness unknown instead of failing the operation
    /// that triggered collection.
    fn gc_item(&mut self, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(Error::Io) | Err(Error::Corrupt) => {
                self.gc.unknown = true;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Collects one NAND page. Returns true when the rest of the block is unwritten.
    fn gc_nand_page(&mut self, victim: u32, page_in_block: u32) -> Result<bool> {
        let p = self.st.p();
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
            Ok(None) if st != EccStatus::Uncorrectable => return Ok(false),
            // Unreadable, or a tag that fails its check: a torn page or a damaged one.
            _ => {
                self.gc.unknown = true;
                return Ok(false);
            }
        };
        let base = p.addr_of(page as u64 * g.page_size as u64);
        if tag.kind == TAG_DATA {
            let mut good = st != EccStatus::Uncorrectable && tag.data_crc == crc32c(&data);
            for _ in 0..READ_RETRIES {
                if good {
                    break;
                }
                let st = self.st.read_page(page, &mut data, &mut oob[..n])?;
                good = st != EccStatus::Uncorrectable && tag.data_crc == crc32c(&data);
            }
            let r = if good {
                self.gc_data_block(tag.ino, tag.block, base, &data)
            } else {
                // The tag (it has its own check) says whose block this is: if the file still
                // maps it here, it is live and unreadable.
                match self.data_refs(tag.ino, tag.block, base) {
                    Ok((false, false)) => Ok(()),
                    Ok(_) => {
                        self.gc.unreadable = true;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            self.gc_item(r)?;
            return Ok(false);
        }
        if st == EccStatus::Uncorrectable {
            self.gc.unknown = true;
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
                    let ok = self.st.read_checked(p.byte_of(a), &mut bytes, &mut |b| {
                        node::verify(b, &h).is_ok()
                    })?;
                    if !ok {
                        self.gc.unknown = true;
                        break;
                    }
                    let r = self.gc_dataz_node(a, &h, &bytes);
                    self.gc_item(r)?;
                    self.gc.carry = (i + p.align(h.len) as usize - data.len()) as u32;
                    break;
                }
            }
            match node::probe(&data[i..], (data.len() - i) as u32) {
                Probe::Erased => break,
                Probe::Padding => i += unit,
                // A node page is programmed once, from a buffer of whole nodes and padding:
                // anything else in it is damage (or a torn program).
                Probe::Garbage => {
                    self.gc.unknown = true;
                    break;
                }
                Probe::Header(h) => {
                    let len = h.len as usize;
                    if node::verify(&data[i..], &h).is_err() {
                        self.gc.unknown = true;
                        break;
                    }
                    let a = Addr(base.0 + (i >> p.addr_shift) as u32);
                    let bytes = data[i..i + len].to_vec();
                    // (Raw `Data` nodes exist only on NOR: on NAND one is dead.)
                    let r = match h.typ {
                        NodeType::Data => Ok(()),
                        NodeType::DataZ => self.gc_dataz_node(a, &h, &bytes),
                        _ => self.gc_node(a, &h, &bytes),
                    };
                    self.gc_item(r)?;
                    i += p.align(h.len) as usize;
                }
            }
        }
        Ok(false)
    }

    /// Collects the next NOR node of the victim. Returns true at the end of its log.
    fn gc_nor_chunk(&mut self, victim: u32) -> Result<bool> {
        let p = self.st.p();
        let bs = p.geometry.block_size();
        let pos = victim as u64 * bs as u64 + self.gc.pos as u64;
        let room = bs - self.gc.pos;
        let ps = p.geometry.page_size;
        // Skips to the next program page: nodes written after a recovery start on one.
        let skip_page = |gc: &mut GcState| {
            gc.pos = (gc.pos / ps + 1) * ps;
            gc.pos >= bs
        };
        let mut head = vec![0u8; (NODE_HEADER.min(room)) as usize];
        let probe = |b: &[u8]| !matches!(node::probe(b, room), Probe::Garbage);
        if !self.st.read_checked(pos, &mut head, &mut { probe })? {
            // Neither erased nor a node header, however often it is read: a torn program or
            // a damaged header.
            self.gc.unknown = true;
            return Ok(skip_page(&mut self.gc));
        }
        match node::probe(&head, room) {
            // End of what was written, or a gap left by recovery after a power cut.
            Probe::Erased | Probe::Garbage => Ok(skip_page(&mut self.gc)),
            Probe::Padding => {
                self.gc.pos += p.unit();
                Ok(false)
            }
            Probe::Header(h) => {
                let mut bytes = vec![0u8; h.len as usize];
                if !self
                    .st
                    .read_checked(pos, &mut bytes, &mut |b| node::verify(b, &h).is_ok())?
                {
                    self.gc.unknown = true;
                    return Ok(skip_page(&mut self.gc));
                }
                let a = p.addr_of(pos);
                let mut adv = p.align(h.len);
                let r = match h.typ {
                    NodeType::Data => match self.gc_data_node(a, &bytes) {
                        Ok(n) => {
                            adv = n;
                            Ok(())
                        }
                        Err(e) => Err(e),
                    },
                    NodeType::DataZ => self.gc_dataz_node(a, &h, &bytes),
                    _ => self.gc_node(a, &h, &bytes),
                };
                if r.is_err() && h.typ == NodeType::Data {
                    // Skip the payload too (its length is in the verified header).
                    adv = data_node_span(&p, &bytes);
                }
                self.gc_item(r)?;
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
                            Err(Error::NotFound) => return Ok(()),
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
                        let mut ix = self.tree(ino);
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
                    let mut ix = self.tree(ino);
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
                    Err(Error::NotFound) => return Ok(()),
                    Err(e) => return Err(e),
                };
                let moved = {
                    let mut ix = self.tree(ino);
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
                    crate::index::dir::DirPageId {
                        typ: h.typ,
                        ino: h.ino,
                        index,
                        pos,
                    },
                ) {
                    Ok(_) | Err(Error::NotFound) => {}
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
        let stride = self.st.p().stride();
        let (ov_extents, spilled) = match self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
            Some(ov) => (ov.extents.get(b, stride) == Some(a), ov.spilled.clone()),
            None => (false, None),
        };
        let ov = match spilled {
            Some(sp) => {
                let mut ix = self.tree(ino);
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
                    Err(Error::NotFound) => return Ok((false, ov)),
                    Err(e) => return Err(e),
                }
            }
        };
        if content.inline.is_some() {
            return Ok((false, ov));
        }
        let mut ix = self.tree(ino);
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
        let stride = self.st.p().stride();
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
            .write_data_page(LogKind::DataCold, ino, b, data, Priority::Log)?;
        self.retarget(ino, b, 1, committed, overlay, new)?;
        self.kill_data(a);
        self.gc.moved_bytes += data.len() as u64;
        Ok(())
    }

    /// Liveness and relocation of a compressed data node: a live one is copied as it is (no
    /// recompression) and the block pointer follows it.
    fn gc_dataz_node(&mut self, a: Addr, h: &node::NodeHeader, bytes: &[u8]) -> Result<()> {
        let p = self.st.p();
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
            Priority::Log,
        )?;
        for &(b, c, o) in &live {
            self.retarget(h.ino, b, 1, c, o, Addr::packed(na))?;
        }
        self.st.kill(a, share * live.len() as u32);
        self.gc.moved_bytes += len as u64;
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
        let p = self.st.p();
        let bs = p.data_block as usize;
        let mut all = vec![0u8; z.raw_len as usize];
        if compress::decompress(z.algo, z.payload, &mut all).is_err() {
            // Its CRC held but it does not decompress: live blocks nobody can read. They stay
            // where they are (reads give EIO), and so does the victim.
            self.gc.unreadable = true;
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
                        Priority::Log,
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
                                Priority::Log,
                            )?,
                            FlashKind::Nor => {
                                let hdr = self.write_data_node(
                                    LogKind::DataCold,
                                    h.ino,
                                    b,
                                    1,
                                    blk,
                                    Priority::Log,
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
                self.retarget(h.ino, b, 1, c, o, ptrs[k])?;
                self.st.kill(a, share);
            }
            i = j;
        }
        Ok(())
    }

    /// Liveness and relocation of a NOR data node (header plus payload); returns the bytes it
    /// spans. Each live block is checked against its CRC before it is copied; a live block
    /// that fails it (however often it is read) is not copied, and keeps the victim.
    fn gc_data_node(&mut self, a: Addr, bytes: &[u8]) -> Result<u32> {
        let p = self.st.p();
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let first = r.u32()?;
        let count = r.u32()?;
        let plen = r.u32()?;
        let ino = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        let bs = p.data_block as usize;
        let slot = p.data_slot();
        if count == 0
            || count > 4096
            || plen != count.saturating_mul(slot)
            || first.checked_add(count).is_none()
        {
            return Ok(p.align(DATA_HEADER));
        }
        let total = data_node_span(&p, bytes);
        let stride = p.stride();
        let payload_addr = Addr(a.0 + (DATA_HEADER >> p.addr_shift));
        // Liveness of every block, then the live ones read and checked.
        let mut good: Vec<(u32, bool, bool, Vec<u8>)> = Vec::new();
        let mut buf = vec![0u8; bs + DATA_CRC_LEN as usize];
        for k in 0..count {
            let at = Addr(payload_addr.0 + k * stride);
            let (c, o) = self.data_refs(ino, first + k, at)?;
            if !c && !o {
                continue;
            }
            let ok = self.st.read_checked(p.byte_of(at), &mut buf, &mut |s| {
                node::data_slot_ok(ino, first + k, s, bs)
            })?;
            if ok {
                good.push((k, c, o, buf[..bs].to_vec()));
            } else {
                self.gc.unreadable = true;
            }
        }
        // Runs of consecutive good blocks with the same owners move as one node each.
        let mut i = 0usize;
        while i < good.len() {
            let (k0, c, o, _) = good[i];
            let mut j = i + 1;
            while j < good.len()
                && good[j].0 == good[j - 1].0 + 1
                && good[j].1 == c
                && good[j].2 == o
            {
                j += 1;
            }
            let n = (j - i) as u32;
            let mut data = Vec::with_capacity(n as usize * bs);
            for g in &good[i..j] {
                data.extend_from_slice(&g.3);
            }
            let na =
                self.write_data_node(LogKind::DataCold, ino, first + k0, n, &data, Priority::Log)?;
            let new_payload = Addr(na.0 + (DATA_HEADER >> p.addr_shift));
            self.retarget(ino, first + k0, n, c, o, new_payload)?;
            for g in &good[i..j] {
                self.kill_data(Addr(payload_addr.0 + g.0 * stride));
            }
            self.gc.moved_bytes += n as u64 * bs as u64;
            i = j;
        }
        Ok(total)
    }
}

/// Bytes a NOR data node spans (header, payload and padding), from its verified header.
fn data_node_span(p: &crate::format::params::Params, bytes: &[u8]) -> u32 {
    let plen = bytes
        .get(32..36)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    p.align(
        DATA_HEADER
            .saturating_add(plen)
            .min(p.geometry.block_size()),
    )
}
