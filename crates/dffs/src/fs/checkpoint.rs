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
use crate::format::codec::crc32c;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind, MAX_HEADS};
use crate::fs::Fs;
use crate::index::inode_map::MapEntry;
use crate::store::{BlockInfo, BlockRecord, BlockState, Phase, Priority, Wear};
use crate::vec_map::VecMap;
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{Flash, FlashKind};

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

/// Erase counts and ages RAM may keep for blocks of block-table pages it does not cache
/// (12 bytes each), per dirty metadata item allowed (`Config::max_dirty`), before a checkpoint
/// writes them to their pages: with a small cache of pages, allocations between two
/// checkpoints would otherwise keep a record for every block they take.
pub(crate) const WEAR_BACKLOG: usize = 16;

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
                let urgent_low = self.pool_levels().urgent;
                let pending = self.store.pending_blocks();
                // Collected blocks wait for a checkpoint that gives back four times what it
                // writes (`cp_need_blocks` less the journal's next block and the slack): on
                // 4 KiB NOR sectors a checkpoint writes four or five blocks, and releasing the
                // eight a 512-block device used to wait for spent half of what collection won
                // (synced random 256 B writes at 22% of raw, 27% with the batch). Within the
                // next two checkpoints' need of the urgent level the old batch (a sixty-fourth
                // of the device) holds, so that waiting blocks never leave the free pool short.
                let due = pending > 0 && {
                    let (k, two) = self.cp_needs();
                    let free = self.store.free_blocks();
                    let (small, big) = self.release_batches(k);
                    let batch = if free <= urgent_low + two { small } else { big };
                    (free <= urgent_low || pending >= batch) && self.checkpoint_pays()
                };
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

    /// Collected blocks a background checkpoint waits for (see `CheckpointNeed::GcBackground`),
    /// with `k` the next checkpoint's need: near the urgent level a sixty-fourth of the
    /// device (at least 2), above it four times what the checkpoint writes (at least that).
    pub(crate) fn release_batches(&self, k: u32) -> (u32, u32) {
        let small = (self.store.p().geometry.blocks / 64).max(2);
        (small, small.max(4 * k.saturating_sub(2)))
    }

    /// Whether a change may be made at all (`ReadOnly`, or the error that broke the
    /// session), without writing anything. Operations check this first, then their
    /// arguments against the tree (`EEXIST`, `ENOENT`, `ENOTEMPTY` …), and only then call
    /// [`Fs::ensure_writable`], whose recovery checkpoint may need space: a name that exists
    /// is `EEXIST` even on a full device.
    pub(crate) fn writable_now(&self) -> Result<()> {
        if let Some(e) = self.mount.broken {
            return Err(e);
        }
        if self.cfg.read_only {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }

    /// Fails when the file system cannot be modified now.
    pub(crate) fn ensure_writable(&mut self) -> Result<()> {
        self.writable_now()?;
        if self.mount.need_recovery_cp && !self.mount.replaying {
            self.mount.need_recovery_cp = false;
            // A fresh start: new journal block, new heads, new anchor block. The old reserved
            // journal block goes back to the pool (erased before any reuse).
            let old = self.journal.next();
            if old != u32::MAX && self.store.block(old)?.state() == BlockState::Reserved {
                self.store
                    .set_block(old, BlockInfo::new(BlockState::Free, LogKind::DataHot, 0))?;
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
    ///
    /// `NoSpace`, before the checkpoint begins, when the free blocks cannot hold it and the
    /// one after it and collection cannot make them: what was synced stays safe in the
    /// journal. (A checkpoint begun without that room could fail half way, having taken the
    /// last free blocks, and none could be written again.)
    pub fn checkpoint(&mut self) -> Result<()> {
        self.guard(|fs| {
            fs.ensure_writable()?;
            if fs.txn.open.is_some() {
                return Ok(());
            }
            if !fs.checkpoint_leaves_room() {
                fs.make_checkpoint_room()?;
            }
            fs.checkpoint_inner(false)
        })
    }

    pub(crate) fn checkpoint_inner(&mut self, clean: bool) -> Result<()> {
        self.store.set_checkpointing(true);
        let prev = self.store.set_phase(Phase::Checkpoint);
        let r = self.write_checkpoint(clean);
        self.store.set_phase(prev);
        self.store.set_checkpointing(false);
        self.refresh_floors();
        r
    }

    /// After the anchors moved out of the area or outside it (two free blocks taken and
    /// erased, to be started only by the checkpoint after this one): on NOR, a journal record
    /// says they were erased, so that a mount after a cut before this checkpoint is complete
    /// counts those erases (their erased first pages prove none; FORMAT §11). (Few cuts fall
    /// there: in the 4 KiB NOR chained-cut torture, `--blocks 512 --seeds 28 --seed 2000`,
    /// 112 erase counts were lost with it and 115 without, before the home block's erase was
    /// counted ahead.)
    fn record_anchor_erases(&mut self) -> Result<()> {
        if self.store.p().geometry.flash_kind() != FlashKind::Nor {
            return Ok(());
        }
        let anchors = self.store.p().anchors;
        self.journal
            .record_erased(&mut self.store, &anchors, Priority::Log)
    }

    /// Writes a checkpoint (see [`Fs::checkpoint_inner`]).
    fn write_checkpoint(&mut self, clean: bool) -> Result<()> {
        // The blocks this checkpoint may take are announced in the journal it ends: a power
        // cut before it is complete mounts from the one before.
        self.announce_erases()?;
        // The user-data block the journal named for the head to open next: the new journal
        // will not name it, so it goes back to the pool, erased.
        if let Some(b) = self.store.data_next() {
            self.store.drop_data_next(b)?;
        }
        // A checkpoint is a program of this session: the session marker goes first, before
        // the journal position is recorded.
        self.store.program_first()?;
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("at checkpoint start: {e}");
        }
        // 0. A worn anchor that this checkpoint would erase gives its place to a younger free
        //    block of the anchor area (the table written in step 5 records the move). The move
        //    takes a free block until the checkpoint is written: only when free blocks are
        //    not scarce (as for static leveling; with only the next two checkpoints' room
        //    beyond it, a 4 KiB NOR chain of cuts ended in `checkpoint: NoSpace`).
        let spare = self.rewrite_fits() && self.store.free_blocks() > self.background_low();
        let mut moved = false;
        if !self.cp.home.active() && spare {
            moved = checkpoint::level_anchors(&mut self.store, self.cp.anchor)?;
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
        // 3b. An anchor area worn out but for one block (bad or swapped out: blocks that failed
        //    holding data, not only anchors) sends the anchors out of it now, while the free
        //    pool holds two blocks beyond what the application may take (data admitted but not
        //    yet written back may take the blocks down to the copy floor), before a failing
        //    anchor finds no block to replace it (FORMAT §6.1). So does an area that wears
        //    faster than the device (many checkpoints, little data: DESIGN §10), when free
        //    blocks were not scarce as the checkpoint began (step 0's test; tested again here,
        //    after the metadata took its blocks, a most worn block of the metadata churn of
        //    `dffs bench wear` had 41 erases against 35). (3b and 3c come after the metadata is
        //    written: the blocks they take are erased at once but programmed only by the next
        //    checkpoint, so a cut before this one is complete loses their erase counts, and
        //    the shorter that window the fewer such cuts.)
        if !self.cp.home.active()
            && !self.cfg.read_only
            && !moved
            && self.store.free_blocks() >= self.store.reserve_blocks() + 3
            && (checkpoint::area_spares(&self.store) <= 1
                || (spare && checkpoint::area_worn(&mut self.store, self.cp.anchor)?))
        {
            let newest = self.cp.anchor;
            if checkpoint::leave_area(&mut self.store, &mut self.cp.home, newest)? {
                self.cp.home_owed = true;
                self.record_anchor_erases()?;
            }
        } else if self.cp.home.active()
            && !self.cp.home_owed
            && !self.cfg.read_only
            && spare
            && checkpoint::level_roaming_anchor(&mut self.store, self.cp.anchor, &self.cp.home)?
        {
            // 3c. Anchors outside the area are leveled over the whole device: worn ones give
            //    their places to the least worn free blocks, named by this checkpoint, home.
            self.cp.home_owed = true;
            self.record_anchor_erases()?;
        }
        let to_home = self.cp.home_owed;
        // A checkpoint that starts the other anchor erases it: counted in the table it writes,
        // and on NOR announced in the journal this checkpoint ends (a mount after a cut before
        // it is complete counts the erase if the anchor holds no older checkpoint), even on a
        // device at its reserve (without it there, `dffs bench nor --quick --erase-size 64KiB`
        // refused random 16–64 KiB writes). On NAND the record would take a journal page: with
        // it a full 4 MiB SLC partition refused 88 of 1,632 overwrites, 14 without. The same
        // for a checkpoint written home that starts a home block (without it, each such erase
        // went uncounted in any cut before the next checkpoint: in the 4 KiB NOR chained-cut
        // torture, `--blocks 512 --seeds 28 --seed 2000`, 112 erase counts lost against 25
        // before the anchors moved for wear).
        let p = self.store.p();
        let started = if to_home {
            checkpoint::home_block_started(&p, &self.cp.home)
        } else if checkpoint::starts_block(&p, self.cp.anchor) {
            Some(p.anchors[self.cp.anchor.anchor ^ 1])
        } else {
            None
        };
        if let Some(b) = started.filter(|_| !self.cfg.read_only) {
            if b < p.geometry.blocks {
                if p.geometry.flash_kind() == FlashKind::Nor {
                    self.journal
                        .announce_blocks(&mut self.store, &[b], Priority::Log)?;
                }
                self.store.precount_anchor_erase(b);
            }
        }
        // 4. Journal position: replay of the next session starts where the journal head is.
        // The journal head must keep room for two more pages, so that flushing cannot close
        // it before its position is recorded (and the next session's marker fits after it).
        let g = self.store.p().geometry;
        // (On paired-page NAND the marker may also have to skip an upper page: four pages.)
        let room_pages = if g.page_pairing() == dffs_flash::PagePairing::None {
            2
        } else {
            4
        };
        let jhead = self.store.head(LogKind::Journal);
        let low_room = jhead.is_open() && jhead.off() + room_pages * g.page_size > g.block_size();
        if !jhead.is_open() || self.journal.next() == u32::MAX || low_room {
            self.journal.restart(&mut self.store)?;
        }
        // 5. Block table: the pages whose records changed since they were last written
        //    (and any page no checkpoint has written yet). The records on flash count neither
        //    the provisional data of uncommitted overlays (after a power cut it is garbage) nor
        //    the block-table pages themselves (`account_bt_page`): so a record does not change
        //    when a block-table page moves into or out of its block, and writing the table
        //    does not make it dirty again. A page with provisional data stays dirty: its
        //    records on flash differ from the ones in RAM.
        self.write_block_table()?;
        let p = self.store.p();
        let nblocks = p.geometry.blocks;
        // 6. Everything referenced must be on flash.
        self.store.flush_all()?;
        let jhead = self.store.head(LogKind::Journal);
        let (jb, joff) = (jhead.block(), jhead.off());
        let mut heads = [(u32::MAX, 0u32); MAX_HEADS];
        for (h, slot) in heads.iter_mut().enumerate().take(p.head_count()) {
            let hd = self.store.head_at(h);
            // A log head whose block failed a program, with no spare to swap it out then, is
            // recorded full: its next offset may hold the failed program's bytes, and a mount
            // that resumed there programmed over them (`NotErased`, `EIO` in the model test
            // with faults, SLC seed 4012 at 1,000 operations, after a clean remount). (The
            // journal's position is also where replay starts; its head is left as it is.)
            if hd.is_open() {
                let off = if hd.failed() && h != p.head_of(LogKind::Journal) {
                    p.geometry.block_size()
                } else {
                    hd.off()
                };
                *slot = (hd.block(), off);
            }
        }
        // The delta nodes, then the directory nodes (see `CheckpointPos::table_nodes`).
        let n_dirs = p.bt_dir_nodes() as usize;
        let split = self.cp.table_nodes.len().saturating_sub(n_dirs);
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
            bt_pages: if n_dirs > 0 {
                Vec::new()
            } else {
                self.store.bt_page_addrs().to_vec()
            },
            bt_dirs: self.cp.table_nodes[split..].to_vec(),
            journal_block: jb,
            journal_off: joff,
            journal_next: self.journal.next(),
            heads,
            remaps: self.store.remaps().to_vec(),
            orphans,
            bt_deltas: self.cp.table_nodes[..split].to_vec(),
            home: self.cp.home.blocks,
            journal_records: None,
        };
        let at = Some(self.cp.anchor);
        self.cp.anchor =
            match checkpoint::write(&mut self.store, &cp, at, &mut self.cp.home, to_home, true) {
                Ok(pos) => pos,
                Err(e) => {
                    // The anchor holding the last checkpoint may have a failed copy after it: the
                    // next attempt starts the other anchor (which never holds the last one). The
                    // same for the home pair; and anchors that moved (a failed one replaced) are
                    // named by the next checkpoint home.
                    self.cp.anchor.may_append = false;
                    self.cp.home.pos.may_append = false;
                    self.cp.home_owed |= self.cp.home.active();
                    return Err(e);
                }
            };
        self.cp.home_owed = false;
        // Recovery scans the user-data head from where this checkpoint leaves it.
        self.store
            .set_scanned_block(heads[p.head_of(LogKind::DataHot)].0);
        self.store.set_cp_seq(cp.next_seq);
        // A mount reads the announced erases of this checkpoint's journal only.
        self.store.clear_announced();
        self.cp.data_blocks = 0;
        // Everything programmed so far is what this checkpoint needs after a power cut.
        self.store.barrier();
        self.store.set_cp_number(self.store.cp_number() + 1);
        self.counts.checkpoints += 1;
        // 7. What the previous checkpoint needed is free now. (Its record need not be
        //    rewritten: a mount reads a pending block or a dead journal block as free, and so
        //    does a paged table reading a page again: only the records in RAM are looked at.)
        let paged = self.store.records_paged();
        let in_ram: Vec<u32> = match paged {
            true => self.store.blocks_in_ram().map(|(b, _)| b).collect(),
            false => Vec::new(),
        };
        let n = if paged { in_ram.len() as u32 } else { nblocks };
        for k in 0..n {
            let b = if paged { in_ram[k as usize] } else { k };
            let e = self.store.block(b)?;
            let state = e.state();
            let dead_journal = state == BlockState::Used && e.kind() == LogKind::Journal;
            if state == BlockState::PendingErase || dead_journal {
                self.store.set_block_unchanged(
                    b,
                    BlockInfo::new(BlockState::Free, LogKind::DataHot, 0),
                )?;
                self.index_cache.forget_block(&p, b);
            }
        }
        self.store.clear_new_remaps();
        // After a checkpoint that is not clean the next mount recovers the heads anyway.
        self.journal.checkpointed(&mut self.store, clean);
        Ok(())
    }

    /// Bytes of provisional data per block, sorted by block: what open updates own beyond
    /// their files' committed content (`Fs::overlay_owned`: the blocks they wrote, and a
    /// spilled update's own index nodes). After a power cut it is garbage; a commit replayed
    /// counts it again.
    #[inline(never)]
    fn provisional_bytes(&mut self) -> Result<Vec<(u32, u32)>> {
        let p = self.store.p();
        let node_len = p.align(p.index_node);
        let open: Vec<Ino> = self.open.files.keys().copied().collect();
        let mut per_block: VecMap<u32, u32> = VecMap::new();
        for ino in open {
            let Some(o) = self.open.files.get(&ino) else {
                continue;
            };
            let Some(ov) = &o.overlay else {
                continue;
            };
            let (blocks, nodes) = if ov.spilled.is_none() {
                let blocks = ov.extents.iter_blocks(p.stride()).map(|x| x.1);
                (blocks.filter(|a| !a.is_none()).collect(), Vec::new())
            } else {
                let ov = ov.clone();
                let committed = self.committed(ino)?;
                self.overlay_owned(ino, &ov, &committed)?
            };
            let extents = blocks.into_iter().filter_map(|a| self.data_extent(a));
            let nodes = nodes.into_iter().map(|a| (a, node_len));
            for (at, len) in extents.collect::<Vec<_>>().into_iter().chain(nodes) {
                let e = per_block.get_or_default(p.block_of(at));
                *e = e.saturating_add(len);
            }
        }
        Ok(per_block.into_vec())
    }

    /// Which block-table pages the checkpoint writes whole, and how many changed records it
    /// carries in delta nodes instead. Pages without an address, pages marked to be written
    /// whole and pages with provisional data (now or at the last checkpoint) are written;
    /// of the others with changed records, those with the most are written until the rest
    /// fit the delta nodes the format allows (`Params::bt_delta_nodes`; none on a table of
    /// fewer than 4 pages, where every changed page is written, as before deltas) and
    /// need no more nodes than the pages they stand for: so the table never costs a
    /// checkpoint more nodes than it has pages (the budget counts that).
    fn plan_block_table(&self, prov_pages: &[u32], last_prov: &[(u32, u32)]) -> (Vec<u32>, u32) {
        let p = self.store.p();
        let count = self.store.bt_page_count();
        let limit = p.bt_delta_nodes() * p.bt_delta_entries();
        let per_delta = p.bt_delta_entries();
        let whole = |i: u32| {
            self.store.bt_page_forced(i)
                || self.store.bt_page_addr(i).is_none()
                || prov_pages.binary_search(&i).is_ok()
                || last_prov.iter().any(|x| x.0 == i)
        };
        // Candidates by their number of changed records (no sort: a count never exceeds the
        // records of a page), taken from the most changed down, lower page numbers first.
        let mut by_count = vec![0u32; p.bt_entries() as usize + 1];
        let top = by_count.len() - 1;
        let mut carried = 0u32;
        let mut left = 0u32;
        for i in (0..count).filter(|&i| !whole(i)) {
            let c = self.store.bt_page_changed(i);
            if c > 0 {
                by_count[(c as usize).min(top)] += 1;
                carried += c;
                left += 1;
            }
        }
        // Every candidate with more than `at` changed records is written, and the first
        // `at_taken` with exactly `at`.
        let (mut at, mut at_taken) = (u32::MAX, 0u32);
        'levels: for c in (1..by_count.len() as u32).rev() {
            for _ in 0..by_count[c as usize] {
                if carried <= limit && carried.div_ceil(per_delta) <= left {
                    break 'levels;
                }
                if at != c {
                    (at, at_taken) = (c, 0);
                }
                at_taken += 1;
                carried -= c;
                left -= 1;
            }
        }
        let mut pages = Vec::new();
        // The pages not written whose erase counts RAM does not cache: their changed records
        // stay in RAM's backlog after the checkpoint.
        let mut kept: Vec<(u32, u32)> = Vec::new();
        for i in 0..count {
            if whole(i) {
                pages.push(i);
                continue;
            }
            let c = self.store.bt_page_changed(i);
            if c > 0 && at != u32::MAX && (c > at || (c == at && at_taken > 0)) {
                if c == at {
                    at_taken -= 1;
                }
                pages.push(i);
            } else if c > 0 && !self.store.bt_page_cached(i) {
                kept.push((c, i));
            }
        }
        // What a checkpoint leaves in that backlog must stay well below the level that calls
        // for one (`maybe_checkpoint`): the pages with the most such records are written until
        // at most half of it is left. (Delta nodes carried up to their own limit, more than
        // that level with a cache of one page: on 16 MiB of 4 KiB NOR sectors in the smallest
        // configuration, every operation after such a checkpoint called for the next, more
        // than three checkpoints for each file created, synced and removed.)
        let cap = (WEAR_BACKLOG * self.cfg.max_dirty / 2) as u32;
        let mut backlog: u32 = kept.iter().map(|k| k.0).sum();
        if backlog > cap {
            crate::sort::sort(&mut kept);
            while backlog > cap {
                let Some((c, i)) = kept.pop() else { break };
                pages.push(i);
                carried -= c;
                backlog -= c;
            }
            crate::sort::sort(&mut pages);
        }
        (pages, carried)
    }

    /// Writes the block-table pages and delta nodes a checkpoint needs (see step 5 of
    /// `write_checkpoint`), then the directory nodes that list the pages on devices that need
    /// them (`Params::bt_dir_nodes`), and updates `cp.table_pages` and `cp.table_nodes`.
    /// Allocates no
    /// block after its first page is written: the blocks the pages go to are opened first, so
    /// every record written is final.
    fn write_block_table(&mut self) -> Result<()> {
        let p = self.store.p();
        let per = p.bt_entries();
        let nblocks = p.geometry.blocks;
        let len = p.align(p.map_page);
        let per_delta = p.bt_delta_entries();
        let prov = self.provisional_bytes()?;
        // `prov` is in block order, so its pages are too.
        let mut prov_pages: Vec<u32> = prov.iter().map(|&(b, _)| b / per).collect();
        prov_pages.dedup();
        let last_prov = core::mem::take(&mut self.cp.provisional_pages);
        let n_dirs = p.bt_dir_nodes();
        let nodes =
            |plan: &(Vec<u32>, u32)| plan.0.len() as u32 + plan.1.div_ceil(per_delta) + n_dirs;
        // Opening blocks for the pages changes records (maybe of pages not in the plan yet).
        let mut plan = self.plan_block_table(&prov_pages, &last_prov);
        let mut room = nodes(&plan);
        loop {
            let r = self
                .store
                .ensure_room(LogKind::Map, room, p.map_page, Priority::Reserve);
            if let Err(e) = r {
                self.cp.provisional_pages = last_prov;
                return Err(e);
            }
            let again = self.plan_block_table(&prov_pages, &last_prov);
            let n = nodes(&again);
            plan = again;
            if n <= room {
                break;
            }
            room = n;
        }
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("before serializing the block table: {e}");
        }
        // Block-table pages and delta nodes per block (the ones named now, updated as they
        // are replaced): the records on flash do not count their bytes.
        let mut bt_in: VecMap<u32, u32> = VecMap::new();
        let named = self
            .store
            .bt_page_addrs()
            .iter()
            .chain(self.cp.table_nodes.iter());
        for a in named.filter(|a| !a.is_none()) {
            *bt_in.get_or_default(p.block_of(*a)) += 1;
        }
        let record = |mut info: BlockInfo, bt_in: &VecMap<u32, u32>, b: u32, wear: Wear| {
            let own = bt_in.get(&b).copied().unwrap_or(0) * len;
            let pv = prov
                .binary_search_by_key(&b, |x| x.0)
                .map(|k| prov[k].1)
                .unwrap_or(0);
            info.live = info.live.saturating_sub(own).saturating_sub(pv);
            BlockRecord { info, wear }
        };
        // The records carried in delta nodes: the changed ones of the pages not written, as
        // planned. (A record the writes below change reads the same as before — a head
        // leaving a full block, which the mount reads as `Used` — and stays marked for the
        // next checkpoint.)
        let carried: Vec<u32> = self
            .store
            .bt_changed_blocks()
            .into_iter()
            .filter(|b| plan.0.binary_search(&(b / per)).is_err())
            .collect();
        let mut now_prov: Vec<(u32, u32)> = Vec::new();
        for i in plan.0 {
            let was_dirty = self.store.bt_page_dirty(i);
            // The blocks' wear: RAM's cached page, or the page on flash with RAM's changes.
            // (Paged records: the page stays cached while it is written, its records with it.)
            let read = match self
                .store
                .uncached_bt_page_wear(i)
                .and_then(|r| self.store.pin_bt_page(i).map(|()| r))
            {
                Ok(r) => r,
                Err(e) => {
                    // As for a page not written (below).
                    for &(k, _) in last_prov.iter().chain(now_prov.iter()) {
                        self.store.mark_bt_page(k);
                    }
                    return Err(e);
                }
            };
            self.store.clear_bt_page(i);
            let first = i * per;
            let n = per.min(nblocks - first);
            let mut nb = NodeBuilder::new(NodeType::BlockTable, 0, 0, p.map_page as usize);
            nb.w.u32(first).u32(n);
            let wear = self.store.page_wear_in(i, &read);
            if wear.len() != n as usize {
                self.store.mark_bt_page(i);
                return Err(Error::Corrupt);
            }
            // (The page's records are in RAM with its wear.)
            let mut missing = false;
            for (b, w) in (first..first + n).zip(wear.iter()) {
                match self.store.block_in_ram(b) {
                    Some(info) => record(info, &bt_in, b, *w).encode(&mut nb.w),
                    None => missing = true,
                }
            }
            if missing {
                self.store.mark_bt_page(i);
                return Err(Error::Corrupt);
            }
            let cur = nb.w.len() as u32;
            nb.w.fill(0, (p.map_page - cur) as usize);
            self.store.set_bt_prov(i, &prov);
            if prov_pages.contains(&i) {
                let crc = crc32c(&nb.w.buf);
                now_prov.push((i, crc));
                // Written last time with the same records (an update that stays open across
                // checkpoints): nothing to write.
                if !was_dirty && last_prov.contains(&(i, crc)) {
                    continue;
                }
            }
            let a = match self
                .store
                .write_node_uncredited(LogKind::Map, nb, Priority::Reserve)
            {
                Ok(a) => a,
                Err(e) => {
                    // Not written: its records still differ from the page on flash (and
                    // every page written with provisional data may differ too).
                    self.store.mark_bt_page(i);
                    for &(k, _) in last_prov.iter().chain(now_prov.iter()) {
                        self.store.mark_bt_page(k);
                    }
                    return Err(e);
                }
            };
            self.store.account_bt_page(a, true)?;
            *bt_in.get_or_default(p.block_of(a)) += 1;
            let old = self.store.bt_page_addr(i);
            self.store.bt_page_written(i, a);
            if !old.is_none() {
                self.store.account_bt_page(old, false)?;
                if let Some(c) = bt_in.get_mut(&p.block_of(old)) {
                    *c = c.saturating_sub(1);
                }
            }
        }
        self.store.unpin_bt_page();
        self.cp.provisional_pages = now_prov;
        // The carried records, in delta nodes written afresh (the last checkpoint's stop being
        // live once this one names the new ones).
        let mut nodes: Vec<Addr> = Vec::new();
        for chunk in carried.chunks(per_delta.max(1) as usize) {
            let mut nb = NodeBuilder::new(NodeType::BlockTableDelta, 0, 0, p.map_page as usize);
            nb.w.u32(chunk.len() as u32).u32(0);
            for &b in chunk {
                let (w, info) = match self
                    .store
                    .wear(b)
                    .and_then(|w| Ok((w, self.store.block(b)?)))
                {
                    Ok(x) => x,
                    Err(e) => {
                        self.uncount_table_nodes(&nodes);
                        return Err(e);
                    }
                };
                nb.w.u32(b);
                record(info, &bt_in, b, w).encode(&mut nb.w);
            }
            let a = self.write_table_node(nb, &mut nodes)?;
            *bt_in.get_or_default(p.block_of(a)) += 1;
        }
        // The directory nodes, listing every page as written now.
        if n_dirs > 0 {
            let addrs = self.store.bt_page_addrs().to_vec();
            let per_dir = p.bt_dir_entries().max(1) as usize;
            for (k, chunk) in addrs.chunks(per_dir).enumerate() {
                let mut nb = NodeBuilder::new(NodeType::BlockTableDir, 0, 0, p.map_page as usize);
                nb.w.u32((k * per_dir) as u32).u32(chunk.len() as u32);
                for a in chunk {
                    nb.w.u32(a.0);
                }
                self.write_table_node(nb, &mut nodes)?;
            }
        }
        let old = core::mem::replace(&mut self.cp.table_nodes, nodes);
        self.uncount_table_nodes(&old);
        Ok(())
    }

    /// Writes a checkpoint's own delta or directory node `nb`, zero-filled to a map page, to
    /// the map log and counts it live in RAM (records on flash do not count it: FORMAT §8.2),
    /// adding it to `written`. When the write fails, every node of `written` is uncounted and
    /// the error returned.
    fn write_table_node(&mut self, mut nb: NodeBuilder, written: &mut Vec<Addr>) -> Result<Addr> {
        let len = self.store.p().map_page;
        let cur = nb.w.len() as u32;
        nb.w.fill(0, len.saturating_sub(cur) as usize);
        match self
            .store
            .write_node_uncredited(LogKind::Map, nb, Priority::Reserve)
        {
            Ok(a) => {
                written.push(a);
                self.store.account_bt_page(a, true)?;
                Ok(a)
            }
            Err(e) => {
                self.uncount_table_nodes(written);
                Err(e)
            }
        }
    }

    /// Takes the live bytes of the table nodes `nodes` away again (nodes no checkpoint names
    /// any more, or that one failed to name).
    fn uncount_table_nodes(&mut self, nodes: &[Addr]) {
        for &a in nodes {
            // (Paged records: a page that cannot be read leaves its block's count as it is.)
            let _ = self.store.account_bt_page(a, false);
        }
    }

    /// Dirty metadata items (inodes, directory pages, map pages) waiting for a checkpoint.
    /// (Block-table records count apart: see [`WEAR_BACKLOG`].)
    pub(crate) fn dirty_items(&self) -> usize {
        self.dirty_inode_items() + self.dirty_dir_items() + self.map.dirty_pages()
    }

    /// Items of `max_dirty` the dirty directory items count for: with `n =
    /// Config::shares_on` this device, each counts `max(1/n, ram / page)` of an item (the RAM
    /// it holds against a page: a directory of a few names holds a few hundred bytes), rounded
    /// up in all. (What the checkpoint writes for them, a page each, is the budget's to count:
    /// `Fs::cp_need`.)
    pub(crate) fn dirty_dir_items(&self) -> usize {
        let n = self.cfg.shares_on(&self.store.p());
        if n == 1 {
            return self.dirs.dirty_count();
        }
        let page = self.store.p().dir_page as usize;
        self.dirs.dirty_shares(n, page).div_ceil(n)
    }

    /// Items of `max_dirty` the dirty inodes count for: as directory items
    /// ([`Fs::dirty_dir_items`]), each `max(1/n, node / page)` of an item (an inode in RAM is
    /// about its node's size, inline content included), rounded up in all.
    pub(crate) fn dirty_inode_items(&self) -> usize {
        let dirty = self.inodes.iter().filter(|c| c.dirty);
        let p = self.store.p();
        let n = self.cfg.shares_on(&p) as u64;
        if n == 1 {
            return dirty.count();
        }
        let page = p.dir_page as u64;
        let units: u64 = dirty
            .map(|c| {
                let len = p.align(c.node.worst_len(&p, c.node.names_len())) as u64;
                (n * len).div_ceil(page).max(1)
            })
            .sum();
        units.div_ceil(n) as usize
    }

    /// Checkpoints if the journal or the dirty metadata grew past their limits, or if the
    /// free pool is down to what a checkpoint needs while collected blocks wait for one.
    pub(crate) fn maybe_checkpoint(&mut self) -> Result<()> {
        if self.txn.open.is_some() || self.mount.replaying {
            return Ok(());
        }
        let dirty = self.dirty_items();
        let short = self.checkpoint_short() && self.checkpoint_pays();
        // A checkpoint that would leave less than the one after it needs is not taken for
        // the journal's or the dirty metadata's size: with nothing released, such checkpoints
        // spent the last free blocks rewriting metadata and none could be written again
        // (4 KiB NOR sectors, unlinks on a full device). Collection has to make blocks
        // releasable first; an operation that needs room asks `make_room`, which
        // checkpoints when that gives back more than it costs.
        if !self.checkpoint_leaves_room() {
            self.refresh_floors();
            return Ok(());
        }
        if self.journal.bytes() >= self.cfg.journal_limit as u64
            || self.cp.data_blocks >= super::data_scan_blocks(&self.store.p())
            || dirty >= self.cfg.max_dirty
            || self.store.wear_backlog() >= WEAR_BACKLOG * self.cfg.max_dirty
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
