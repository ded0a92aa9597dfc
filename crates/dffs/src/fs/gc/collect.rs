//! Collecting a victim block: walking its pages (NAND) or nodes (NOR), deciding each item's
//! liveness by the mutual pointers, copying or re-dirtying what is live, and ending the victim
//! (erase, or keep it when something possibly live could not be read).
//!
//! It must never erase a block that still holds an item it could not read and cannot prove dead.

use crate::error::{Error, Result};
use crate::format::codec::{crc32c, Reader};
use crate::format::node::{self, NodeType, Probe, OOB_TAG_LEN, TAG_DATA};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, NODE_HEADER};
use crate::fs::checkpoint::{CheckpointDone, CheckpointNeed};
use crate::fs::gc::data::data_node_span;
use crate::fs::gc::{GcState, INDEX_BATCH, KEPT_MAX};
use crate::fs::Fs;
use crate::index::inode_map::MapEntry;
use crate::store::medium::READ_RETRIES;
use crate::store::{BlockState, Phase};
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{EccStatus, Flash, FlashKind};

impl<F: Flash> Fs<F> {
    /// Runs collection until one block is finished. Returns whether anything was collected:
    /// a block finished, or something copied or left for the next checkpoint to rewrite.
    /// Walking a victim that is then dropped for want of room for its next live item, having
    /// programmed and dirtied nothing, is no progress: a caller that took it for progress
    /// picked the same victim again for as long as it was allowed to try (2,064 rounds on 2 MiB
    /// of 4 KiB NOR sectors at 80% fill, with 6 blocks waiting for a checkpoint, then
    /// `ENOSPC`).
    pub(crate) fn collect(&mut self, urgent: bool) -> Result<bool> {
        let bs = self.store.p().geometry.block_size();
        let before = self.gc.blocks_collected;
        let changes = |fs: &Self| (fs.store.counts().programs, fs.dirty_items());
        let changed_before = changes(self);
        if urgent {
            self.reconsider_victim()?;
        }
        // A victim chosen earlier may need room for copies that is gone now: it is dropped
        // and one that copies nothing is chosen instead (second round).
        for _ in 0..2 {
            if self.gc.victim.is_none() && !self.pick_victim(urgent)? {
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
            if progress && self.gc.victim.is_none() && changes(self) == changed_before {
                progress = false;
            }
            if progress || self.gc.blocks_collected > before || self.gc.victim.is_some() {
                return Ok(progress || self.gc.blocks_collected > before);
            }
        }
        Ok(false)
    }

    /// Examines up to `budget` pages of the current victim. Returns pages examined. Its device
    /// operations count as [`crate::Cause::GcRead`] and [`crate::Cause::GcCopy`].
    pub(crate) fn gc_work(&mut self, budget: u32) -> Result<u32> {
        self.announce_erases()?;
        let prev = self.store.set_phase(Phase::Gc);
        let r = self.gc_pages(budget);
        // No batch outlives the step: what the file system does between steps may move the
        // file's tree, and a victim left with nodes it still counts as moving could be ended.
        let r = match r {
            Ok(n) if self.gc.victim.is_some() => self.end_index_batch().map(|()| n),
            Ok(n) => {
                self.gc.index_batch.clear();
                Ok(n)
            }
            Err(e) => {
                // A batch may have been passed and not moved: the walk starts again when the
                // block is chosen again.
                self.gc.index_batch.clear();
                self.gc.victim = None;
                Err(e)
            }
        };
        self.store.set_phase(prev);
        r
    }

    /// Moves the index nodes batched so far ([`GcState::index_batch`]), all of one file:
    /// every node above them is written once for the batch.
    /// Without room for them all, they move one at a time until one does not fit (what moved
    /// stays moved, as when each node moved alone).
    fn move_index_batch(&mut self) -> Result<()> {
        let batch = core::mem::take(&mut self.gc.index_batch);
        let Some(&(ino, ..)) = batch.first() else {
            return Ok(());
        };
        let nodes: Vec<(Addr, u8, u32)> = batch.iter().map(|&(_, a, l, f)| (a, l, f)).collect();
        match self.move_index_nodes(ino, &nodes) {
            Err(Error::NoSpace) if nodes.len() > 1 => {
                for n in nodes {
                    self.move_index_nodes(ino, &[n])?;
                }
                Ok(())
            }
            r => r,
        }
    }

    /// Most index nodes moved together now: up to a quarter of a block of them, at most
    /// [`INDEX_BATCH`], on NOR. None on NAND: an index node is a whole page there and a
    /// file's tree at most a few levels deep (fan-out 504 on 2 KiB pages), no NAND suite
    /// gained from batches, and on the 4 MiB partition of the tiny rootfs run (CI's
    /// `rootfs_rows`) they changed collection's course until a file no longer fit. None where
    /// a quarter of a block holds fewer than four nodes (4 KiB NOR sectors: batches of three
    /// gained nothing measurable in `dffs bench nor`), nor with four free blocks or fewer
    /// above the log floor: a batch's copies are written after one check of the room, and a
    /// batch that finds none is written in vain (on the 32-block quick device of `dffs bench
    /// nor --erase-size 64KiB`, batching down to the floor made the random 16 KiB row say
    /// ENOSPC on 10 of 16 accesses against 2, and every row after it on all of them).
    fn index_batch_max(&self) -> usize {
        let p = self.store.p();
        let n = (p.geometry.block_size() / 4 / p.align(p.index_node)) as usize;
        if p.geometry.flash_kind() != FlashKind::Nor
            || n < 4
            || self.store.free_blocks() <= self.store.log_floor() + 4
        {
            return 1;
        }
        n.min(INDEX_BATCH)
    }

    /// Moves `nodes` of file `ino`'s tree that are still in it, with the nodes above them.
    fn move_index_nodes(&mut self, ino: u32, nodes: &[(Addr, u8, u32)]) -> Result<()> {
        if !self.map.get(&mut self.store, ino)?.is_file() {
            return Ok(());
        }
        let mut content = match self.load_file(ino) {
            Ok(c) => c.node.content.clone(),
            Err(Error::NotFound) => return Ok(()),
            Err(e) => return Err(e),
        };
        let moved = {
            let mut ix = self.tree(ino);
            ix.relocate(&mut content, nodes)?
        };
        if moved > 0 {
            self.make_dirty(ino)?;
            if let Some(c) = self.inodes.get_mut(ino) {
                c.node.content.root = content.root;
            }
        }
        Ok(())
    }

    /// Moves the batched index nodes before the victim is ended or left for a later step.
    /// Without room for the copies the victim is dropped (its walk starts again when it is
    /// chosen again: the nodes not moved are still live in it); a node or path that cannot be
    /// read makes the victim's liveness unknown, as for a single item; any other failure drops
    /// the victim too and is returned.
    fn end_index_batch(&mut self) -> Result<()> {
        match self.move_index_batch() {
            Err(Error::NoSpace) => {
                self.gc.victim = None;
                Ok(())
            }
            r @ (Ok(()) | Err(Error::Io) | Err(Error::Corrupt)) => self.gc_item(r),
            Err(e) => {
                self.gc.victim = None;
                Err(e)
            }
        }
    }

    fn gc_pages(&mut self, budget: u32) -> Result<u32> {
        let Some(victim) = self.gc.victim else {
            return Ok(0);
        };
        let p = self.store.p();
        let g = p.geometry;
        let bs = g.block_size();
        if self.store.block(victim)?.state() != BlockState::Used {
            self.gc.victim = None;
            return Ok(0);
        }
        // A NAND block credited with nothing live is finished without reading it: there is
        // nothing to copy or re-dirty. The accounting never credits a block with less than it
        // holds (fsck reports that as an error, and the power-cut tests run fsck after every
        // cut); `end_victim` trusts a zero credit the same way. Most victims of a workload
        // that deletes files are like this: reading their pages to learn it was 47% of the
        // page reads of Postmark on a `--sync` mount. (NOR reads cost little next to its
        // erases, and its collection's pace is set by the nodes it walks: it reads.)
        if g.flash_kind() == FlashKind::Nand
            && self.gc.pos == 0
            && self.store.block(victim)?.live == 0
        {
            self.end_victim(victim)?;
            return Ok(1);
        }
        let mut pages = 0;
        while pages < budget {
            // Copies must leave what a checkpoint needs (it releases what was collected), and
            // a checkpoint writes what collection dirtied before the next checkpoint cannot.
            // (Metadata victims copy nothing now: the checkpoint rewrites their live nodes.)
            let e = self.store.block(victim)?;
            let needs_room = e.live > 0 && self.copies_now(e.kind());
            if needs_room && !self.copy_room() {
                if self.checkpoint_for(CheckpointNeed::CopyRoom)? == CheckpointDone::Taken {
                    self.refresh_floors();
                    if self.copy_room() {
                        continue;
                    }
                }
                // Leave this victim for later (a block whose collection copies nothing can be
                // taken meanwhile: the next choice knows there is no room), unless it was
                // chosen as the last resort whose copies fit where copies go.
                if !(self.gc.stretch && self.copy_room_for(e)) {
                    self.gc.victim = None;
                    break;
                }
            }
            if e.live > 0 && !self.copies_now(e.kind()) && !self.rewrite_fits() {
                self.gc.victim = None;
                break;
            }
            match self.checkpoint_for(CheckpointNeed::GcDirty)? {
                CheckpointDone::Refused => break,
                CheckpointDone::Taken if self.store.block(victim)?.state() != BlockState::Used => {
                    break
                }
                _ => {}
            }
            if self.gc.pos >= bs {
                self.end_victim(victim)?;
                break;
            }
            let ended = match g.flash_kind() {
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
            if g.flash_kind() == FlashKind::Nand {
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
        self.end_index_batch()?;
        if self.gc.victim != Some(victim) {
            return Ok(());
        }
        // Block-table pages in the victim are live until the next checkpoint writes them
        // elsewhere: it does, because they are marked changed (whether or not the collection
        // could read them).
        let p = self.store.p();
        for i in 0..self.store.bt_page_count() {
            let a = self.store.bt_page_addr(i);
            if !a.is_none() && p.block_of(a) == victim {
                self.store.mark_bt_page(i);
            }
        }
        let mut keep = self.gc.unreadable;
        if !keep && self.gc.unknown {
            // What could be read has moved (data) or is dirty (metadata); a checkpoint
            // rewrites the metadata, killing its bytes here. Whatever the block is still
            // credited with is what could not be read.
            keep = match self.checkpoint_for(CheckpointNeed::SettleVictim)? {
                CheckpointDone::Taken => {
                    self.store.block(victim)?.state() != BlockState::Used
                        || self.store.block(victim)?.live > 0
                }
                _ => true,
            };
        }
        // A block credited with nothing live holds nothing to protect, whatever could not be
        // read in it (a block kept at 0 live would never be retried: leaked for good).
        if self.store.block(victim)?.state() == BlockState::Used
            && self.store.block(victim)?.live == 0
        {
            keep = false;
        }
        self.gc.victim = None;
        self.gc.pos = 0;
        self.gc.carry = 0;
        self.gc.unreadable = false;
        self.gc.unknown = false;
        if keep {
            if self.store.block(victim)?.state() == BlockState::Used {
                let live = self.store.block(victim)?.live;
                if self.gc.kept.len() >= KEPT_MAX {
                    self.gc.kept.remove(0);
                }
                self.gc.kept.push((victim, live));
            }
            self.gc.blocks_kept += 1;
            return Ok(());
        }
        let mut e = self.store.block(victim)?;
        e.live = 0;
        e.set_state(BlockState::PendingErase);
        self.store.set_block(victim, e)?;
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
        let p = self.store.p();
        let g = p.geometry;
        let page = victim * g.pages_per_block + page_in_block;
        let mut data = vec![0u8; g.page_size as usize];
        let (st, tag) = self.store.read_tagged_page(page, &mut data)?;
        let carry = core::mem::take(&mut self.gc.carry) as usize;
        let tag = match tag {
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
            // `read_tagged_page` read it again while the CRC failed on a good read; an
            // uncorrectable one is tried again here (the tag, with its own check, was read).
            let mut good = st != EccStatus::Uncorrectable && tag.data_crc == crc32c(&data);
            let mut oob = [0xFFu8; OOB_TAG_LEN];
            let n = OOB_TAG_LEN.min(g.oob_free_len as usize);
            for _ in 0..READ_RETRIES {
                if good {
                    break;
                }
                let st = self.store.read_page(page, &mut data, &mut oob[..n])?;
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
                if room < hb.len() || self.store.read(at, &mut hb).is_err() {
                    break;
                }
                &hb
            };
            if let Probe::Header(h) = node::probe(head, room as u32) {
                if h.typ == NodeType::DataZ && i + h.len as usize > data.len() {
                    let a = Addr(base.0 + (i >> p.addr_shift) as u32);
                    let mut bytes = vec![0u8; h.len as usize];
                    let ok = self
                        .store
                        .read_checked(p.byte_of(a), &mut bytes, &mut |b| {
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
        let p = self.store.p();
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
        if !self.store.read_checked(pos, &mut head, &mut { probe })? {
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
                    .store
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
                match self.map.get(&mut self.store, ino)? {
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
                    .open
                    .files
                    .get(&ino)
                    .and_then(|o| o.overlay.as_ref())
                    .and_then(|ov| ov.spilled.clone());
                if let Some(mut sp) = spilled {
                    let moved = {
                        let mut ix = self.tree(ino);
                        ix.relocate(&mut sp, &[(a, level, first)])? > 0
                    };
                    if moved {
                        if let Some(ov) = self
                            .open
                            .files
                            .get_mut(&ino)
                            .and_then(|o| o.overlay.as_mut())
                        {
                            ov.spilled = Some(sp);
                        }
                        return Ok(());
                    }
                }
                let orphan = self.open.is_orphan(ino);
                if orphan {
                    let mut node = match self.open.files.get(&ino).and_then(|o| o.orphan.clone()) {
                        Some(n) => n,
                        None => return Ok(()),
                    };
                    let mut ix = self.tree(ino);
                    if ix.relocate(&mut node.content, &[(a, level, first)])? > 0 {
                        if let Some(o) = self.open.files.get_mut(&ino) {
                            o.orphan = Some(node);
                        }
                    }
                    return Ok(());
                }
                if !self.map.get(&mut self.store, ino)?.is_file() {
                    return Ok(());
                }
                // Moved with the file's other nodes met in this step, so that each node above
                // them is written once ([`Fs::move_index_batch`]).
                if self.gc.index_batch.first().is_some_and(|&(i, ..)| i != ino) {
                    self.move_index_batch()?;
                }
                self.gc.index_batch.push((ino, a, level, first));
                if self.gc.index_batch.len() >= self.index_batch_max() {
                    self.move_index_batch()?;
                }
            }
            NodeType::DirRoot | NodeType::DirBucket | NodeType::DirTable => {
                let (index, pos) = match h.typ {
                    NodeType::DirBucket => (r.u32()?, r.u32()?),
                    NodeType::DirTable => (r.u32()?, 0),
                    _ => (0, 0),
                };
                match self.dirs.relocate(
                    &mut self.store,
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
                self.map.relocate_page(&mut self.store, a, level, index)?;
            }
            // Block-table pages are rewritten by every checkpoint; journal records in a
            // non-journal block and stray checkpoints are dead.
            _ => {}
        }
        Ok(())
    }
}
