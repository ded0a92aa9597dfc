//! Writing checkpoints: every dirty inode, directory page, inode-map page and index node, the
//! block table, and the checkpoint record that makes them the new starting point of a mount.
//!
//! It also runs the recovery checkpoint a mount that replayed a journal owes before its first
//! write. Whether a checkpoint is *due* is decided here and in the budget: other modules say
//! what they need ([`CheckpointNeed`]) and [`Fs::checkpoint_for`] decides whether one runs now.
//! It must never run inside a transaction, a split commit or journal replay.

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

/// Why a module other than the budget asks for a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckpointNeed {
    /// A clean checkpoint ends the format or the session (unmount).
    Clean,
    /// The journal has no room for a record; `own_op` when the record is not part of a
    /// transaction or split commit (only then may a checkpoint come between).
    JournalFull { own_op: bool },
    /// Idle-time collection made no progress (blocked on free space or dirty metadata).
    GcBlocked,
    /// Idle-time collection finished blocks that wait for a checkpoint to be erased.
    GcFinished,
    /// Background collection after an operation finished blocks: release them when they
    /// are many or when the free pool runs dry.
    GcBackground,
    /// A victim's copies need room only a checkpoint gives back.
    CopyRoom,
    /// Collection dirtied more metadata than the next checkpoint may carry.
    GcDirty,
    /// A victim holds items of unknown liveness; a checkpoint rewrites what is dirty.
    SettleVictim,
    /// A program failure swapped a journal block out: until a checkpoint records the swap,
    /// recovery would read the old block and miss every record written since.
    JournalSwapped,
}

/// What [`Fs::checkpoint_for`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckpointDone {
    /// A checkpoint was written.
    Taken,
    /// One was needed but may not run now (transaction, split commit or replay).
    Refused,
    /// None was needed.
    NotNeeded,
}

impl<F: Flash> Fs<F> {
    /// The one place that decides whether a checkpoint asked for by another module runs now.
    pub(crate) fn checkpoint_for(&mut self, need: CheckpointNeed) -> Result<CheckpointDone> {
        use CheckpointDone::*;
        let idle = self.txn.open.is_none() && !self.mount.replaying;
        let (needed, allowed) = match need {
            CheckpointNeed::Clean => (true, true),
            CheckpointNeed::JournalFull { own_op } => {
                (self.releasable_blocks() > 0, own_op && idle)
            }
            CheckpointNeed::GcBlocked => (true, self.txn.open.is_none()),
            CheckpointNeed::GcFinished => {
                (self.store.pending_blocks() > 0, self.txn.open.is_none())
            }
            CheckpointNeed::GcBackground => {
                let p = self.store.p();
                let urgent_low = self.store.reserve_blocks() + p.head_count() as u32 + 2;
                let pending = self.store.pending_blocks();
                let due = pending > 0
                    && (self.store.free_blocks() <= urgent_low
                        || pending >= (p.geometry.blocks / 64).max(2))
                    && self.checkpoint_pays();
                (due, idle)
            }
            CheckpointNeed::CopyRoom => (self.checkpoint_pays(), idle),
            CheckpointNeed::GcDirty => (self.dirty_items() > 2 * self.cfg.max_dirty, idle),
            CheckpointNeed::SettleVictim => (true, idle),
            CheckpointNeed::JournalSwapped => (self.store.journal_swapped(), idle),
        };
        if !needed {
            return Ok(NotNeeded);
        }
        if !allowed {
            return Ok(Refused);
        }
        self.checkpoint_inner(need == CheckpointNeed::Clean)?;
        Ok(Taken)
    }

    /// Fails when the file system cannot be modified now.
    pub(crate) fn ensure_writable(&mut self) -> Result<()> {
        if let Some(e) = self.mount.broken {
            return Err(e);
        }
        if self.cfg.read_only {
            return Err(Error::ReadOnly);
        }
        if self.mount.need_recovery_cp && !self.mount.replaying {
            self.mount.need_recovery_cp = false;
            // A fresh start: new journal block, new heads, new anchor block. The old reserved
            // journal block goes back to the pool (erased before any reuse).
            let old = self.journal.next();
            if old != u32::MAX && self.store.block(old).state() == BlockState::Reserved {
                let e = self.store.block(old);
                self.store.set_block(
                    old,
                    BlockInfo::new(BlockState::Free, LogKind::DataHot, e.ec, 0, e.age()),
                );
            }
            self.journal.drop_reservation();
            // Until it is written nothing else may be: records journaled without it land in
            // a journal no checkpoint leads to (a failed recovery checkpoint used to let the
            // session go on, and everything it synced was lost at the next power cut).
            if let Err(e) = self.checkpoint_inner(false) {
                self.mount.need_recovery_cp = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes a checkpoint if no transaction is open: every dirty structure, the block
    /// table, and the checkpoint record. Afterwards blocks emptied by GC and old journal
    /// blocks become free.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.guard(|fs| {
            fs.ensure_writable()?;
            if fs.txn.open.is_some() {
                return Ok(());
            }
            fs.checkpoint_inner(false)
        })
    }

    pub(crate) fn checkpoint_inner(&mut self, clean: bool) -> Result<()> {
        self.store.set_checkpointing(true);
        let r = self.write_checkpoint(clean);
        self.store.set_checkpointing(false);
        self.refresh_floors();
        r
    }

    /// Writes a checkpoint (see [`Fs::checkpoint_inner`]).
    fn write_checkpoint(&mut self, clean: bool) -> Result<()> {
        // A checkpoint is a program of this session: the session marker goes first, before
        // the journal position is recorded.
        self.store.program_first()?;
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("at checkpoint start: {e}");
        }
        // 1. Dirty inodes (so directory slots get real addresses), orphans included.
        let dirty: Vec<Ino> = self
            .inodes
            .iter()
            .filter(|c| c.dirty)
            .map(|c| c.node.ino)
            .collect();
        for ino in dirty {
            self.write_inode(ino)?;
        }
        let orphan_inos: Vec<Ino> = self.open.orphans();
        let mut orphans = Vec::new();
        for ino in orphan_inos {
            let a = self.write_orphan_inode(ino)?;
            orphans.push((ino, a));
        }
        // 2. Directories. A placeholder left is a logical pointer: a file with hard links.
        for d in self.dirs.dirty_dirs() {
            for ino in self.dirs.placeholders(d) {
                if !matches!(self.map.get(&mut self.store, ino)?, MapEntry::Linked(_)) {
                    return Err(Error::Corrupt);
                }
            }
            self.dirs.flush_dir(&mut self.store, &mut self.map, d)?;
        }
        // 3. Inode map.
        self.map.write_dirty(&mut self.store)?;
        // 4. Journal position: replay of the next session starts where the journal head is.
        // The journal head must keep room for two more pages, so that flushing cannot close
        // it before its position is recorded (and the next session's marker fits after it).
        let g = self.store.p().geometry;
        // (On paired-page NAND the marker may also have to skip an upper page: four pages.)
        let room_pages = if g.pairing == dffs_flash::PagePairing::None {
            2
        } else {
            4
        };
        let jhead = self.store.head(LogKind::Journal);
        let low_room = jhead.is_open() && jhead.off() + room_pages * g.page_size > g.block_size();
        if !jhead.is_open() || self.journal.next() == u32::MAX || low_room {
            self.journal.restart(&mut self.store)?;
        }
        // 5. Block table (provisional data of uncommitted overlays does not count as live in
        //    the durable table: after a power cut it is garbage).
        let p = self.store.p();
        // The block-table pages must not allocate a block after the table is copied.
        let bt_count = p.geometry.blocks.div_ceil(p.bt_entries());
        self.store
            .ensure_room(LogKind::Map, bt_count, p.map_page, Priority::Reserve)?;
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("before serializing the block table: {e}");
        }
        let mut table: Vec<BlockInfo> = self.store.table_snapshot();
        self.subtract_provisional(&mut table);
        // Blocks emptied by GC stay pending in the durable table: a power cut before this
        // checkpoint completes still needs them. Once written, they become free.
        let per = p.bt_entries();
        let old_pages = core::mem::take(&mut self.cp.table_pages);
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
            let a = self.store.write_node(LogKind::Map, nb, Priority::Reserve)?;
            // Block-table pages are not counted live: each checkpoint rewrites them.
            self.store.kill(a, p.align(p.map_page));
            new_pages.push(a);
            first += n;
        }
        self.cp.table_pages = new_pages;
        let _ = old_pages;
        // 6. Everything referenced must be on flash.
        self.store.flush_all()?;
        let jhead = self.store.head(LogKind::Journal);
        let (jb, joff) = (jhead.block(), jhead.off());
        let mut heads = [(u32::MAX, 0u32); MAX_HEADS];
        for (h, slot) in heads.iter_mut().enumerate().take(p.head_count()) {
            let hd = self.store.head_at(h);
            if hd.is_open() {
                *slot = (hd.block(), hd.off());
            }
        }
        let cp = Checkpoint {
            params: p,
            flags: if clean { CP_CLEAN } else { 0 },
            cp_number: self.store.cp_number(),
            next_seq: self.store.seq() + 1,
            next_tid: self.txn.next,
            map_root: self.map.root,
            map_depth: self.map.depth,
            ino_hint: self.map.hint,
            ino_high: self.map.high,
            files: self.counts.files,
            dirs: self.counts.dirs,
            bt_pages: self.cp.table_pages.clone(),
            journal_block: jb,
            journal_off: joff,
            journal_next: self.journal.next(),
            heads,
            remaps: self.store.remaps().to_vec(),
            orphans,
        };
        self.cp.anchor = checkpoint::write(&mut self.store, &cp, Some(self.cp.anchor))?;
        // Everything programmed so far is what this checkpoint needs after a power cut.
        self.store.barrier();
        self.store.set_cp_number(self.store.cp_number() + 1);
        self.counts.checkpoints += 1;
        // 7. What the previous checkpoint needed is free now.
        for b in 0..nblocks {
            let e = self.store.block(b);
            let state = e.state();
            let dead_journal = state == BlockState::Used && e.kind() == LogKind::Journal;
            if state == BlockState::PendingErase || dead_journal {
                self.store.set_block(
                    b,
                    BlockInfo::new(BlockState::Free, LogKind::DataHot, e.ec, 0, e.age()),
                );
                self.index_cache.forget_block(&p, b);
            }
        }
        self.store.clear_new_remaps();
        // After a checkpoint that is not clean the next mount recovers the heads anyway.
        self.journal.checkpointed(&mut self.store, clean);
        Ok(())
    }

    fn subtract_provisional(&mut self, table: &mut [BlockInfo]) {
        let p = self.store.p();
        let stride = p.stride();
        let mut provisional: Vec<Addr> = Vec::new();
        for oi in self.open.files.values() {
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
        self.inodes.iter().filter(|c| c.dirty).count()
            + self.dirs.dirty_count()
            + self.map.dirty_pages()
    }

    /// Checkpoints if the journal or the dirty metadata grew past their limits, or if the
    /// free pool is down to what a checkpoint needs while collected blocks wait for one.
    pub(crate) fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.txn.open.is_some() || self.mount.replaying {
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
        self.store.free_blocks() <= self.store.log_floor() + 1
    }
}
