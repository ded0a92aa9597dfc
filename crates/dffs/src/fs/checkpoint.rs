//! Writing checkpoints: every dirty inode, directory page, inode-map page and index node, the
//! block table, and the checkpoint record that makes them the new starting point of a mount.
//!
//! It also runs the recovery checkpoint a mount that replayed a journal owes before its first
//! write. Whether a checkpoint is *due* is decided here ([`Fs::maybe_checkpoint`]) and in the
//! budget; no other module starts one. It must never run inside a transaction or a split commit.

use crate::checkpoint::{self, Checkpoint, CP_CLEAN};
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, LogKind, MAX_HEADS};
use crate::fs::Fs;
use crate::index::inode_map::MapEntry;
use crate::store::{BlockInfo, BlockState, Priority};
use alloc::vec::Vec;
use dffs_flash::Flash;

impl<F: Flash> Fs<F> {
    /// Fails when the file system cannot be modified now.
    pub(crate) fn writable(&mut self) -> Result<()> {
        if let Some(e) = self.broken {
            return Err(e);
        }
        if self.cfg.read_only {
            return Err(Error::ReadOnly);
        }
        if self.need_recovery_cp && !self.replaying {
            self.need_recovery_cp = false;
            // A fresh start: new journal block, new heads, new anchor block. The old reserved
            // journal block goes back to the pool (erased before any reuse).
            let old = self.journal.next();
            if old != u32::MAX && self.st.block(old).state() == BlockState::Reserved {
                let e = self.st.block(old);
                self.st.set_block(
                    old,
                    BlockInfo::new(BlockState::Free, LogKind::DataHot, e.ec, 0, e.age()),
                );
            }
            self.journal.drop_reservation();
            self.checkpoint_inner(false)?;
        }
        Ok(())
    }

    /// Writes a checkpoint if no transaction is open: every dirty structure, the block
    /// table, and the checkpoint record. Afterwards blocks emptied by GC and old journal
    /// blocks become free.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            if fs.tx.is_some() {
                return Ok(());
            }
            fs.checkpoint_inner(false)
        })
    }

    pub(crate) fn checkpoint_inner(&mut self, clean: bool) -> Result<()> {
        self.st.set_checkpointing(true);
        let r = self.write_checkpoint(clean);
        self.st.set_checkpointing(false);
        self.refresh_floors();
        r
    }

    /// Writes a checkpoint (see [`Fs::checkpoint_inner`]).
    fn write_checkpoint(&mut self, clean: bool) -> Result<()> {
        // A checkpoint is a program of this session: the session marker goes first, before
        // the journal position is recorded.
        self.st.program_first()?;
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("at checkpoint start: {e}");
        }
        // 1. Dirty inodes (so directory slots get real addresses), orphans included.
        let dirty: Vec<Ino> = self
            .files
            .iter()
            .filter(|(_, c)| c.dirty)
            .map(|(i, _)| *i)
            .collect();
        for ino in dirty {
            self.write_inode(ino)?;
        }
        let orphan_inos: Vec<Ino> = self
            .inos
            .iter()
            .filter(|(_, o)| o.orphan.is_some())
            .map(|(i, _)| *i)
            .collect();
        let mut orphans = Vec::new();
        for ino in orphan_inos {
            let a = self.write_orphan_inode(ino)?;
            orphans.push((ino, a));
        }
        // 2. Directories. A placeholder left is a logical pointer: a file with hard links.
        for d in self.dirs.dirty_dirs() {
            for ino in self.dirs.placeholders(d) {
                if !matches!(self.map.get(&mut self.st, ino)?, MapEntry::Linked(_)) {
                    return Err(Error::Corrupt);
                }
            }
            self.dirs.flush_dir(&mut self.st, &mut self.map, d)?;
        }
        // 3. Inode map.
        self.map.write_dirty(&mut self.st)?;
        // 4. Journal position: replay of the next session starts where the journal head is.
        // The journal head must keep room for two more pages, so that flushing cannot close
        // it before its position is recorded (and the next session's marker fits after it).
        let g = self.st.p().geometry;
        // (On paired-page NAND the marker may also have to skip an upper page: four pages.)
        let room_pages = if g.pairing == dffs_flash::PagePairing::None {
            2
        } else {
            4
        };
        let jhead = self.st.head(LogKind::Journal);
        let low_room = jhead.is_open() && jhead.off() + room_pages * g.page_size > g.block_size();
        if !jhead.is_open() || self.journal.next() == u32::MAX || low_room {
            self.journal.restart(&mut self.st)?;
        }
        // 5. Block table (provisional data of uncommitted overlays does not count as live in
        //    the durable table: after a power cut it is garbage).
        let p = self.st.p();
        // The block-table pages must not allocate a block after the table is copied.
        let bt_count = p.geometry.blocks.div_ceil(p.bt_entries());
        self.st
            .ensure_room(LogKind::Map, bt_count, p.map_page, Priority::Reserve)?;
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("before serializing the block table: {e}");
        }
        let mut table: Vec<BlockInfo> = self.st.table_snapshot();
        self.subtract_provisional(&mut table);
        // Blocks emptied by GC stay pending in the durable table: a power cut before this
        // checkpoint completes still needs them. Once written, they become free.
        let per = p.bt_entries();
        let old_pages = core::mem::take(&mut self.bt_pages);
        let mut new_pages = Vec::new();
        let nblocks = p.geometry.blocks;
        let mut first = 0;
        while first < nblocks {
            let n = per.min(nblocks - first);
            let mut nb = NodeBuilder::new(NodeType::BlockTable, 0, 0, p.map_page as usize);
            nb.w.u32(first).u32(n);
            for b in first..first + n {
                table[b as usize].encode(&mut nb.w);
            }
            let cur = nb.w.len() as u32;
            nb.w.fill(0, (p.map_page - cur) as usize);
            let a = self.st.write_node(LogKind::Map, nb, Priority::Reserve)?;
            // Block-table pages are not counted live: each checkpoint rewrites them.
            self.st.kill(a, p.align(p.map_page));
            new_pages.push(a);
            first += n;
        }
        self.bt_pages = new_pages;
        let _ = old_pages;
        // 6. Everything referenced must be on flash.
        self.st.flush_all()?;
        let jhead = self.st.head(LogKind::Journal);
        let (jb, joff) = (jhead.block(), jhead.off());
        let mut heads = [(u32::MAX, 0u32); MAX_HEADS];
        for (h, slot) in heads.iter_mut().enumerate().take(p.head_count()) {
            let hd = self.st.head_at(h);
            if hd.is_open() {
                *slot = (hd.block(), hd.off());
            }
        }
        let cp = Checkpoint {
            params: p,
            flags: if clean { CP_CLEAN } else { 0 },
            cp_number: self.st.cp_number(),
            next_seq: self.st.seq() + 1,
            next_tid: self.next_tid,
            map_root: self.map.root,
            map_depth: self.map.depth,
            ino_hint: self.map.hint,
            ino_high: self.map.high,
            files: self.nfiles,
            dirs: self.ndirs,
            bt_pages: self.bt_pages.clone(),
            journal_block: jb,
            journal_off: joff,
            journal_next: self.journal.next(),
            heads,
            remaps: self.st.remaps().to_vec(),
            orphans,
        };
        self.anchor = checkpoint::write(&mut self.st, &cp, Some(self.anchor))?;
        // Everything programmed so far is what this checkpoint needs after a power cut.
        self.st.barrier();
        self.st.set_cp_number(self.st.cp_number() + 1);
        self.checkpoints += 1;
        // 7. What the previous checkpoint needed is free now.
        for b in 0..nblocks {
            let e = self.st.block(b);
            let state = e.state();
            let dead_journal = state == BlockState::Used && e.kind() == LogKind::Journal;
            if state == BlockState::PendingErase || dead_journal {
                self.st.set_block(
                    b,
                    BlockInfo::new(BlockState::Free, LogKind::DataHot, e.ec, 0, e.age()),
                );
                self.icache.forget_block(&p, b);
            }
        }
        self.st.clear_new_remaps();
        // After a checkpoint that is not clean the next mount recovers the heads anyway.
        self.journal.checkpointed(&mut self.st, clean);
        Ok(())
    }

    fn subtract_provisional(&mut self, table: &mut [BlockInfo]) {
        let p = self.st.p();
        let stride = p.stride();
        let mut provisional: Vec<Addr> = Vec::new();
        for oi in self.inos.values() {
            if let Some(ov) = &oi.overlay {
                for (_b, a) in ov.extents.iter_blocks(stride) {
                    if !a.is_none() {
                        provisional.push(a);
                    }
                }
            }
        }
        for a in provisional {
            if let Some((at, len)) = self.data_extent(a) {
                let blk = p.block_of(at) as usize;
                if let Some(e) = table.get_mut(blk) {
                    e.live = e.live.saturating_sub(len);
                }
            }
        }
    }

    /// Dirty metadata items (inodes, directory pages, map pages) waiting for a checkpoint.
    pub(crate) fn dirty_items(&self) -> usize {
        self.files.values().filter(|c| c.dirty).count()
            + self.dirs.dirty_count()
            + self.map.dirty_pages()
    }

    /// Checkpoints if the journal or the dirty metadata grew past their limits, or if the
    /// free pool is down to what a checkpoint needs while collected blocks wait for one.
    pub(crate) fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.tx.is_some() || self.replaying {
            return Ok(());
        }
        let dirty = self.dirty_items();
        let short = self.checkpoint_short() && self.checkpoint_pays();
        if self.journal.bytes() >= self.cfg.journal_limit as u64
            || dirty >= self.cfg.max_dirty
            || short
        {
            self.checkpoint_inner(false)?;
        }
        self.refresh_floors();
        Ok(())
    }

    /// Whether the free pool is down to what a checkpoint needs (with blocks to release).
    fn checkpoint_short(&self) -> bool {
        self.st.free_blocks() <= self.st.log_floor() + 1
    }
}
