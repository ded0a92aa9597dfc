//! Format, mount and unmount: building a new file system, finding the newest checkpoint and
//! replaying the journal written after it, and the clean checkpoint that ends a session.
//!
//! Replay runs every record through the same [`Fs::apply`](super::Fs) that live operations use;
//! this module only decides which records count (those of committed transactions). It must never
//! change RAM state by any other way than `apply`, and never write during a read-only mount.

use crate::checkpoint::{self, AnchorPos, Checkpoint, ANCHOR_AREA, CP_CLEAN};
use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, ROOT_INO, S_IFDIR};
use crate::format::codec::Reader;
use crate::format::extents::ExtentMap;
use crate::format::node::DataEnd;
use crate::format::node::NodeType;
use crate::format::params::NandSupport;
use crate::format::params::{Addr, FormatOptions, LogKind, Params, NODE_HEADER};
use crate::fs::checkpoint::CheckpointNeed;
use crate::fs::{Clock, Config, Fs, NoClock};
use crate::index::dir::{DirRoot, Dirs};
use crate::index::inode_map::{InodeMap, MapEntry};
use crate::journal::record::ERASED;
use crate::journal::tag_commits::{self, TagCommit, TagScan};
use crate::journal::{JournalScan, Record, ScanStart, Tid};
use crate::store::{decode_page, BlockInfo, BlockRecord, BlockState, Phase, Priority, Store};
use crate::vec_map::VecMap;
use alloc::boxed::Box;
use alloc::vec::Vec;
use dffs_flash::{Flash, FlashKind};

/// Default directory permissions of the root.
pub(crate) const ROOT_MODE: u32 = S_IFDIR | 0o755;

impl<F: Flash> Fs<F> {
    /// Formats `flash` with a new, empty file system and gives the device back.
    pub fn format(flash: F, opts: &FormatOptions) -> Result<F> {
        let g = flash.geometry();
        let mut p = Params::for_geometry(g, opts)?;
        if !crate::format::compress::supported(opts.compression) {
            return Err(Error::NotSupported);
        }
        let mut st = Box::new(Store::new(flash, p));
        // Bad blocks as the device marks them.
        for b in 0..g.blocks {
            if st.device_says_bad(b)? {
                st.set_block(b, BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0))?;
            }
        }
        // Erase the anchor area so no older file system's checkpoint can be mistaken for ours,
        // and pick the first two good blocks as anchors.
        let mut anchors = Vec::new();
        for b in 0..ANCHOR_AREA.min(g.blocks) {
            if st.block(b)?.state() == BlockState::Bad {
                continue;
            }
            match st.erase_raw(b) {
                Ok(()) => {
                    if anchors.len() < 2 {
                        anchors.push(b);
                        st.set_state(b, BlockState::Anchor)?;
                    } else {
                        st.set_state(b, BlockState::Erased)?;
                    }
                }
                Err(dffs_flash::FlashError::PowerLoss) => return Err(Error::PowerLoss),
                Err(_) => st.retire(b),
            }
        }
        if anchors.len() < 2 {
            return Err(Error::Io);
        }
        p.anchors = [anchors[0], anchors[1]];
        st.set_params(p);
        let root_attrs = Attrs {
            mode: ROOT_MODE,
            ..Attrs::default()
        };
        let mut fs = Fs::assemble(st, Config::default(), Box::new(NoClock));
        fs.map = InodeMap::new(&p, Addr::NONE, 0, 2, 2, 4);
        fs.dirs
            .create(DirRoot::new(&p, ROOT_INO, ROOT_INO, root_attrs, b""));
        fs.map
            .set(&mut fs.store, ROOT_INO, MapEntry::Dir(Addr::NONE))?;
        fs.counts.dirs = 1;
        fs.journal.reserve_next(&mut fs.store, Priority::Reserve)?;
        fs.cp.anchor = AnchorPos {
            anchor: 1,
            slot: 0,
            may_append: false,
        };
        fs.checkpoint_for(CheckpointNeed::Clean)?;
        Ok(fs.store.into_flash())
    }

    /// Mounts the file system on `flash` with the default clock (none).
    pub fn mount(flash: F, cfg: Config) -> Result<Fs<F>> {
        Self::mount_with_clock(flash, cfg, Box::new(NoClock)).map_err(|(e, _)| e)
    }

    /// Mounts the file system on `flash`; on failure the device is given back with the error.
    pub fn mount_with_clock(
        flash: F,
        cfg: Config,
        clock: Box<dyn Clock>,
    ) -> core::result::Result<Fs<F>, (Error, F)> {
        Self::mount_boxed(flash, cfg, clock).map(|fs| *fs)
    }

    /// [`Fs::mount_with_clock`], with the file system left on the heap: for callers that keep
    /// it there (the C API), so that no copy of it passes over a microcontroller's stack.
    pub fn mount_boxed(
        flash: F,
        cfg: Config,
        clock: Box<dyn Clock>,
    ) -> core::result::Result<Box<Fs<F>>, (Error, F)> {
        let g = flash.geometry();
        let p = match Params::for_geometry(g, &FormatOptions::default()) {
            Ok(p) => p,
            Err(e) => return Err((e, flash)),
        };
        let st = Box::new(Store::new(flash, p));
        let mut fs = Box::new(Fs::assemble(st, cfg, clock));
        // The totals alone: a copy of the counts by cause would sit on the stack under the
        // whole mount.
        let before = fs.store.totals();
        match fs.load() {
            Ok(()) => {
                fs.mount.mount_cost = fs.store.totals().since(&before);
                Ok(fs)
            }
            Err(e) => {
                let Fs { store, .. } = *fs;
                Err((e, store.into_flash()))
            }
        }
    }

    /// Reads the newest checkpoint, the block table, and replays the journal (device
    /// operations count as [`crate::Cause::Mount`]).
    pub(crate) fn load(&mut self) -> Result<()> {
        let prev = self.store.set_phase(Phase::Mount);
        let mut r = self.load_rereading();
        // A read-write mount whose one write, its checkpoint written again (see the end of
        // `load_inner`), found no block of the anchor area to take or the area worn out
        // mounts read-only instead: the files stay readable, every change is `EROFS`
        // (`Info::read_only_cause` says why), and nothing is written that a checkpoint cut
        // before it could hide.
        if let (Err(e), Some(_)) = (r, self.mount.restamp_failed.take()) {
            self.cfg.read_only = true;
            self.mount.read_only_cause = Some(e);
            r = self.load_rereading();
        }
        self.store.set_phase(prev);
        // The allocation floors follow what is dirty now (replay dirtied what it applied):
        // collection, a recovery checkpoint or an operation right after mount must not find
        // the floors of an empty store (a collection step after a remount copied into the
        // blocks the recovery checkpoint needed: `NoSpace`, 4 KiB NOR sectors).
        if r.is_ok() {
            self.refresh_floors();
        }
        r
    }

    /// [`Fs::load_inner`], again with less of the journal while replay's second pass ends
    /// short of its first.
    fn load_rereading(&mut self) -> Result<()> {
        self.mount.journal_cap = None;
        let r = loop {
            self.mount.journal_short = None;
            let r = self.load_inner();
            // Replay's second pass could not read a record its first pass had read (the
            // partly programmed bits of a torn NOR record read differently each time): load
            // again from the checkpoint, reading the journal only that far, as if it ended
            // there (nothing was written yet; what the first reading applied is forgotten
            // with the rest). Each try reads fewer records than the one before.
            match (r, self.mount.journal_short.take()) {
                (Err(Error::Io), Some(n)) if self.mount.journal_cap.is_none_or(|c| n < c) => {
                    self.mount.journal_cap = Some(n);
                    self.store.end_replay_counts();
                }
                (r, _) => break r,
            }
        };
        self.mount.journal_cap = None;
        r
    }

    fn load_inner(&mut self) -> Result<()> {
        // A reload (transaction abort) forgets the collection in progress: what it moved was
        // in RAM only, and the victim is whole again in the reloaded block table.
        self.gc.victim = None;
        self.gc.pos = 0;
        let (mut cp, pos, holding, home) = checkpoint::find_newest(&mut self.store)?;
        // A checkpoint cut while it was written after this one may read as valid at a later
        // mount and win over everything written from now on (a block it names, free in this
        // checkpoint, reused and erased: `read: Io` after the next cut). Before anything else
        // is written, the choice is written again with a higher number (at the end of the
        // load: an anchor that fails is replaced by a free block of the area, which only the
        // loaded block table can tell).
        let restamp = !self.cfg.read_only
            && checkpoint::cut_attempt_after(&mut self.store, pos, cp.cp_number, &home)?;
        let p = cp.params;
        self.store.set_params(p);
        self.store.set_seq(cp.next_seq);
        self.store.set_cp_number(cp.cp_number + 1);
        self.journal.resume(cp.journal_block, cp.journal_next);
        self.store.set_read_only(self.cfg.read_only);
        self.txn.next = cp.next_tid.max(1);
        self.counts.files = cp.files;
        self.counts.dirs = cp.dirs;
        self.cp.anchor = pos;
        self.cp.home = home;
        self.cp.home_owed = false;
        self.dirs = Dirs::new(p, self.cfg.dir_cache);
        self.map = InodeMap::new(
            &p,
            cp.map_root,
            cp.map_depth,
            cp.ino_hint,
            cp.ino_high,
            self.cfg.map_cache,
        );
        self.index_cache.clear();
        self.inodes.clear();
        self.data_cache.clear();
        // Block table, a page at a time (RAM keeps each record packed and the wear of a few
        // pages: see `BlockTable`).
        let per = p.bt_entries();
        let nblocks = p.geometry.blocks;
        // On devices whose checkpoint names directory nodes, the pages are listed there.
        let from_dirs;
        let listed: &[Addr] = if cp.bt_dirs.is_empty() {
            &cp.bt_pages
        } else {
            from_dirs = self.read_bt_dirs(&cp.bt_dirs)?;
            &from_dirs
        };
        if listed.len() != nblocks.div_ceil(per) as usize {
            return Err(Error::Corrupt);
        }
        self.store.begin_table_load();
        // Records that differ from their pages (they stay marked as differing, so the next
        // checkpoint carries them again or rewrites their pages). With records paged, they are
        // read first and each is loaded with its page, and each page's records are corrected
        // as it loads (`fix_loaded_record`), so that the mount reads each page once; with
        // records in RAM, the delta nodes are read after the pages and the corrections made in
        // a pass, as before (no buffer of every delta record).
        let paged = self.store.records_paged();
        let mut deltas: VecMap<u32, BlockRecord> = VecMap::new();
        if paged {
            for a in &cp.bt_deltas {
                self.read_bt_delta(*a, |b, e| {
                    deltas.insert(b, e);
                })?;
            }
        }
        for (i, a) in listed.iter().enumerate() {
            let i = i as u32;
            let (_h, bytes) = self.store.read_node(*a, NodeType::BlockTable, p.map_page)?;
            let mut recs = Vec::with_capacity(per as usize);
            decode_page(
                &bytes[NODE_HEADER as usize..],
                i,
                per,
                (nblocks, p.geometry.block_size()),
                |r| recs.push(r),
            )?;
            self.store.load_bt_page(i, *a, &recs);
            if paged {
                let blocks = i * per..((i + 1) * per).min(nblocks);
                for (&b, &e) in deltas.iter() {
                    if blocks.contains(&b) {
                        self.store.load_bt_delta(b, e);
                    }
                }
                for b in blocks {
                    self.fix_loaded_record(b, &cp)?;
                }
            }
        }
        if !paged {
            let mut loaded: Vec<(u32, BlockRecord)> = Vec::new();
            for a in &cp.bt_deltas {
                self.read_bt_delta(*a, |b, e| loaded.push((b, e)))?;
                for (b, e) in loaded.drain(..) {
                    self.store.load_bt_delta(b, e);
                }
            }
            for b in 0..nblocks {
                self.fix_loaded_record(b, &cp)?;
            }
        }
        // A restamp's table does not count the erase of the anchor it was written into.
        if cp.flags & checkpoint::CP_ANCHOR_UNCOUNTED != 0 && pos.slot == 0 && !home.holds_newest {
            self.store.bump_erase_count(p.anchors[pos.anchor]);
        }
        // The table was written after the journal head was opened (and its next block
        // reserved): a table that disagrees names the wrong pages (e.g. an older table's).
        let state_of = |st: &mut Store<F>, b: u32| -> Result<Option<(BlockState, LogKind)>> {
            if b >= nblocks {
                return Ok(None);
            }
            let e = st.block(b)?;
            Ok(Some((e.state(), e.kind())))
        };
        if cp.journal_block != u32::MAX
            && state_of(&mut self.store, cp.journal_block)?
                != Some((BlockState::Head, LogKind::Journal))
        {
            return Err(Error::Corrupt);
        }
        if cp.journal_next != u32::MAX
            && state_of(&mut self.store, cp.journal_next)?.map(|s| s.0)
                != Some(BlockState::Reserved)
        {
            return Err(Error::Corrupt);
        }
        // The records on flash do not count the block-table pages; RAM does. A page must sit
        // in a block the table says holds a log's nodes: a damaged checkpoint naming a stale
        // page left in a free block (an anchor that moved away, say) would credit live bytes
        // to a block the allocator hands out.
        for a in listed.iter().chain(&cp.bt_deltas).chain(&cp.bt_dirs) {
            let b = p.block_of(*a);
            if !matches!(
                self.store.block(b)?.state(),
                BlockState::Used | BlockState::Head
            ) {
                return Err(Error::Corrupt);
            }
            self.store.account_bt_page(*a, true)?;
        }
        // (find_newest set the checkpoint's remaps.)
        self.store.mark_remapped_spares_bad()?;
        self.cp.table_nodes = cp.bt_deltas.iter().chain(&cp.bt_dirs).copied().collect();
        // Heads as the checkpoint left them; any other block still marked as a head was closed
        // after the table was written.
        for (h, &(b, off)) in cp.heads.iter().enumerate() {
            // Only a block the table calls a head, and only once: a forged head in a free
            // block would get live bytes a free block must never have.
            let taken = cp.heads[..h].iter().any(|&(hb, _)| hb == b);
            if b != u32::MAX
                && h < p.head_count()
                && !taken
                && self.store.block(b)?.state() == BlockState::Head
            {
                self.store
                    .set_head(h, crate::store::Head::resumed(b, off, p.geometry.page_size));
            }
        }
        // Synced writes may commit by data page tags in the user-data head's block as the
        // checkpoint left it (and in blocks the journal names).
        let dh = self.store.head_at(p.head_of(LogKind::DataHot));
        let scanned = if dh.is_open() { dh.block() } else { u32::MAX };
        self.store.set_scanned_block(scanned);
        self.store.set_cp_seq(cp.next_seq);
        self.orphans_from_checkpoint(&cp)?;
        // Replay.
        let clean = cp.flags & CP_CLEAN != 0;
        let replayed = self.replay(&cp)?;
        if replayed || !clean {
            // Blocks believed erased may have been written after the checkpoint: so may the
            // journal's reserved next block (a session that crashed may have moved the journal
            // into it without a link replay could follow). Both are erased before any use.
            // (Only the block-table pages that hold such blocks are looked at.)
            let per = p.bt_entries();
            for i in 0..nblocks.div_ceil(per) {
                if !self.store.bt_page_holds_erased(i) {
                    continue;
                }
                for b in i * per..((i + 1) * per).min(nblocks) {
                    if matches!(
                        self.store.block(b)?.state(),
                        BlockState::Erased | BlockState::Reserved
                    ) {
                        self.store.set_state(b, BlockState::Free)?;
                    }
                }
            }
            self.journal.drop_reservation();
            self.mount.recovered = true;
            self.cp.anchor.may_append = false;
            // Heads continue after whatever was written since the checkpoint (the journal
            // restarts in a fresh block with the recovery checkpoint).
            let jh = p.head_of(LogKind::Journal);
            for h in 0..p.head_count() {
                if h == jh {
                    let b = self.store.head_at(h).block();
                    if b != u32::MAX && self.store.block(b)?.state() == BlockState::Head {
                        self.store.set_state(b, BlockState::Used)?;
                    }
                    self.store.set_head(h, crate::store::Head::empty());
                } else if !self.cfg.read_only {
                    self.store.recover_head(h)?;
                }
            }
            self.mount.need_recovery_cp = !self.cfg.read_only;
        } else {
            // Continue the heads at the next page boundary; the session's first program is
            // preceded by a session record.
            self.journal
                .expect_session(&mut self.store, !self.cfg.read_only);
            let ps = p.geometry.page_size;
            for h in 0..p.head_count() {
                let (b, off) = (self.store.head_at(h).block(), self.store.head_at(h).off());
                if b == u32::MAX {
                    continue;
                }
                let off = match p.geometry.flash_kind() {
                    FlashKind::Nand => off.div_ceil(ps) * ps,
                    FlashKind::Nor => off,
                };
                if off >= p.geometry.block_size() {
                    self.store.set_head(h, crate::store::Head::empty());
                    self.store.set_state(b, BlockState::Used)?;
                } else {
                    self.store
                        .set_head(h, crate::store::Head::resumed(b, off, ps));
                }
            }
        }
        // A checkpoint that moved an anchor into a free block of the area, cut (see
        // `checkpoint::level_anchors`), is the same danger as a cut attempt after the choice.
        let restamp = restamp
            || (!self.cfg.read_only
                && !self.cp.home.active()
                && checkpoint::moved_anchor_attempt(&mut self.store, pos, holding)?);
        // A recovery whose journal scan ended on a torn page writes where it ended into its
        // choice before it erases anything: the page may read longer at a later mount, and
        // records beyond this reading may name blocks the recovery takes as free and erases
        // before its own checkpoint is whole (DESIGN §15 item 22).
        let bind = self.mount.need_recovery_cp && self.mount.journal_bind.is_some();
        if bind {
            cp.journal_records = self.mount.journal_bind;
        }
        if restamp || bind {
            let may_append = self.cp.anchor.may_append;
            let home_active = self.cp.home.active();
            let mut at = checkpoint::restamp(&mut self.store, &mut cp, pos, &mut self.cp.home)
                .inspect_err(|&e| {
                    if matches!(e, Error::NoSpace | Error::Io) {
                        self.mount.restamp_failed = Some(e);
                    }
                })?;
            at.may_append = may_append && !home_active;
            self.cp.anchor = at;
            self.store.set_cp_number(cp.cp_number + 1);
        }
        Ok(())
    }

    /// The block-table page addresses the directory nodes `dirs` list (FORMAT §8.2): each
    /// names where its run of pages begins and how many it holds, and the runs must follow
    /// one another from page 0, every node but the last full.
    fn read_bt_dirs(&mut self, dirs: &[Addr]) -> Result<Vec<Addr>> {
        let p = self.store.p();
        let per = p.bt_dir_entries();
        let pages = p.geometry.blocks.div_ceil(p.bt_entries());
        let mut out = Vec::with_capacity(pages as usize);
        for a in dirs {
            let (_h, bytes) = self
                .store
                .read_node(*a, NodeType::BlockTableDir, p.map_page)?;
            let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
            let first = r.u32()?;
            let n = r.u32()?;
            let want = per.min(pages.saturating_sub(out.len() as u32));
            if first as usize != out.len() || n != want || n == 0 {
                return Err(Error::Corrupt);
            }
            for _ in 0..n {
                let x = Addr(r.u32()?);
                if !p.addr_valid(x) {
                    return Err(Error::Corrupt);
                }
                out.push(x);
            }
        }
        Ok(out)
    }

    /// Frees files that were unlinked while open when the checkpoint was taken.
    #[inline(never)]
    fn orphans_from_checkpoint(&mut self, cp: &Checkpoint) -> Result<()> {
        for &(ino, addr) in &cp.orphans {
            if self.cfg.read_only {
                break;
            }
            let node = self.read_inode(addr, ino)?;
            self.free_file_space(&node)?;
            self.map.set(&mut self.store, ino, MapEntry::Free)?;
            self.counts.files = self.counts.files.saturating_sub(1);
        }
        Ok(())
    }

    /// Reads the block-table delta node at `a`, passing each (block, record) it carries to `f`.
    fn read_bt_delta(&mut self, a: Addr, mut f: impl FnMut(u32, BlockRecord)) -> Result<()> {
        let p = self.store.p();
        let (_h, bytes) = self
            .store
            .read_node(a, NodeType::BlockTableDelta, p.map_page)?;
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let n = r.u32()?;
        r.u32()?;
        if n == 0 || n > p.bt_delta_entries() {
            return Err(Error::Corrupt);
        }
        for _ in 0..n {
            let b = r.u32()?;
            let e = BlockRecord::decode(&mut r, p.geometry.block_size())?;
            if b >= p.geometry.blocks {
                return Err(Error::Corrupt);
            }
            f(b, e);
        }
        Ok(())
    }

    /// Corrects block `b`'s record, just loaded with its block-table page, to what the mount
    /// must see. The table was written just before its checkpoint: what that checkpoint freed
    /// (blocks emptied by GC, journal blocks before the replay start) is free now (without a
    /// mark: a pending or dead journal block always reads as free, so its record may stay);
    /// an anchor that went bad was replaced after the table was written (the checkpoint's
    /// parameters say which blocks are the anchors now); and a block still marked as a head
    /// that is not one of the checkpoint's heads was closed after it. (Records corrected with
    /// a mark differ from their pages: the next checkpoint rewrites them.)
    fn fix_loaded_record(&mut self, b: u32, cp: &Checkpoint) -> Result<()> {
        let p = self.store.p();
        let e = self.store.block(b)?;
        let dead_journal = e.state() == BlockState::Used && e.kind() == LogKind::Journal;
        if e.state() == BlockState::PendingErase || dead_journal {
            let free = BlockInfo::new(BlockState::Free, LogKind::DataHot, 0);
            self.store.set_block_unchanged(b, free)?;
        }
        let anchor = p.anchors.contains(&b) || self.cp.home.blocks.contains(&b);
        let state = self.store.block(b)?.state();
        if anchor && state != BlockState::Anchor {
            self.store
                .set_block(b, BlockInfo::new(BlockState::Anchor, LogKind::Map, 0))?;
        } else if !anchor && state == BlockState::Anchor {
            self.store
                .set_block(b, BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0))?;
        }
        if self.store.block(b)?.state() == BlockState::Head
            && !cp.heads.iter().any(|&(hb, _)| hb == b)
        {
            self.store.set_state(b, BlockState::Used)?;
        }
        Ok(())
    }

    /// Scans the journal from the checkpoint's start and applies committed records.
    /// Returns whether there was anything after the checkpoint.
    #[inline(never)]
    fn replay(&mut self, cp: &Checkpoint) -> Result<bool> {
        let start = ScanStart {
            block: cp.journal_block,
            off: cp.journal_off,
            next: cp.journal_next,
            next_seq: cp.next_seq,
            clean: cp.flags & CP_CLEAN != 0,
        };
        // Pass 1: which transactions committed, where the journal ends. Bad-block swaps apply
        // as they are read: later records may address the swapped blocks.
        let mut committed: Vec<Tid> = Vec::new();
        let mut any = false;
        let mut max_tid = 0;
        // The user-data head's blocks since the checkpoint that may hold commit runs.
        let dh = self.store.p().head_of(LogKind::DataHot);
        let mut data_blocks: Vec<(u32, u32)> = Vec::new();
        let h = self.store.head_at(dh);
        if h.is_open() {
            data_blocks.push((h.block(), h.off()));
        }
        // Blocks announced for erasing since the checkpoint.
        let mut erasing: Vec<u32> = Vec::new();
        let mut scan = JournalScan::new(&mut self.store, start)?;
        let cap = self.mount.journal_cap.map(u64::from);
        if let Some(n) = cp
            .journal_records
            .map(u64::from)
            .into_iter()
            .chain(cap)
            .min()
        {
            scan.limit_to(n);
        }
        while let Some(rec) = scan.next(&mut self.store)? {
            any = true;
            match &rec {
                Record::TxCommit { tid } => committed.push(*tid),
                Record::Remap { .. } => self.apply(&rec)?,
                Record::DataBlock { block } => {
                    if !data_blocks.iter().any(|x| x.0 == *block) {
                        data_blocks.push((*block, 0));
                    }
                }
                Record::Erasing { blocks } => erasing.extend_from_slice(blocks),
                r => max_tid = max_tid.max(r.tid()),
            }
        }
        self.mount.journal_garbage = scan.ended_on_garbage();
        let records = scan.returned();
        // A reading that ended on a torn page (or short of the checkpoint's bound) binds the
        // mounts after this one once the recovery writes anything (see `load_inner`). One
        // that stopped at the bound is bound already (and recovers as after a cut program:
        // the journal may go on past it); one that stopped at this mount's own cap is not.
        let bound = cp.journal_records.map(u64::from);
        let torn = self.mount.journal_garbage && !scan.stopped_at_limit();
        self.mount.journal_bind = if torn || cap.is_some() || bound.is_some_and(|n| n != records) {
            Some(u32::try_from(records).map_err(|_| Error::Corrupt)?)
        } else {
            None
        };
        // Blocks erased since the checkpoint that replay enters nothing of: the journal block
        // the last link set aside, and the user-data head's blocks named by records (each
        // was erased when it was taken, if the checkpoint's table calls it free).
        self.store.count_replayed_erase(scan.named_next())?;
        for &(b, _) in &data_blocks {
            self.store.count_replayed_erase(b)?;
        }
        // The other free blocks taken since the checkpoint (their erase counts are advice:
        // a walk that cannot read on leaves them as they are).
        if any || !start.clean {
            if let Err(Error::PowerLoss) = self.store.count_taken_erases(cp.next_seq) {
                return Err(Error::PowerLoss);
            }
        }
        let last = scan.last_seq();
        self.store
            .set_seq(self.store.seq().max(last + 1).max(self.store.seen_seq()));
        // Synced writes may have left commits in data page tags (nothing is written after a
        // clean checkpoint before the journal's session marker).
        let mut tags = if self.store.p().commit_runs() && (any || !start.clean) {
            tag_commits::scan(&mut self.store, &data_blocks, cp.next_seq)?
        } else {
            TagScan::default()
        };
        self.store
            .set_seq(self.store.seq().max(tags.max_seq.saturating_add(1)));
        self.mount.tag_commits = tags.commits.len() as u32;
        self.mount.lost_commits = tags.lost;
        if !any && tags.commits.is_empty() {
            self.store.end_replay_counts();
            return Ok(self.mount.journal_garbage);
        }
        self.txn.next = self.txn.next.max(max_tid.saturating_add(1));
        crate::sort::sort(&mut committed);
        crate::sort::sort_by_key(&mut tags.commits, |c| c.seq);
        // Pass 2: apply.
        self.mount.replaying = true;
        self.store.set_replaying(true);
        let res = self.replay_committed(start, records, &committed, &tags.commits);
        self.mount.replaying = false;
        self.store.set_replaying(false);
        res?;
        // The announced blocks replay found nothing in: an erase since the checkpoint shows
        // in their first page (FORMAT.md §12). Each block once: an anchor named twice was
        // erased once.
        // (Blocks recorded as erased already count whatever their first page holds.)
        for &b in erasing.iter().filter(|&&b| b & ERASED != 0) {
            let b = b & !ERASED;
            if b < self.store.block_count() {
                self.store.count_replayed_erase(b)?;
            }
        }
        erasing.retain(|&b| b & ERASED == 0);
        crate::sort::sort(&mut erasing);
        erasing.dedup();
        self.store.count_announced_erases(&erasing, cp.next_seq)?;
        self.store
            .set_seq(self.store.seq().max(self.store.seen_seq()));
        // An anchor announced is one a checkpoint after this one started: erased, unless it
        // still holds its older checkpoints.
        let p = self.store.p();
        for &b in &erasing {
            if b < p.geometry.blocks
                && self.store.block(b)?.state() == BlockState::Anchor
                && !checkpoint::holds_checkpoint_of(
                    &mut self.store,
                    b,
                    p.fs_id,
                    p.cp_slot,
                    cp.cp_number,
                )?
            {
                self.store.bump_erase_count(b);
            }
        }
        self.store.end_replay_counts();
        Ok(true)
    }

    /// Applies every record of the journal whose transaction committed (`tid` 0 or listed),
    /// and the commits found in data page tags, in sequence-number order: the `records` the
    /// first pass read, no more and no fewer.
    fn replay_committed(
        &mut self,
        start: ScanStart,
        records: u64,
        committed: &[Tid],
        tags: &[TagCommit],
    ) -> Result<()> {
        let mut next_tag = 0;
        let mut scan = JournalScan::new(&mut self.store, start)?;
        scan.bound_to(records);
        loop {
            let rec = match scan.next(&mut self.store) {
                Ok(Some(rec)) => rec,
                Ok(None) => break,
                Err(e) => {
                    if scan.ended_short() {
                        self.mount.journal_short = u32::try_from(scan.returned()).ok();
                    }
                    return Err(e);
                }
            };
            let seq = scan.last_seq();
            while let Some(c) = tags.get(next_tag).filter(|c| c.seq < seq) {
                self.apply_tag_commit(c)?;
                next_tag += 1;
            }
            let tid = rec.tid();
            if tid != 0 && committed.binary_search(&tid).is_err() {
                continue;
            }
            self.apply(&rec).map_err(replay_error)?;
        }
        for c in &tags[next_tag..] {
            self.apply_tag_commit(c)?;
        }
        Ok(())
    }

    /// Applies a commit found in data page tags: the run's blocks, and the size its last tag
    /// gives (the times stay those of the file's last journaled change). A run of a file that
    /// does not exist at that point is counted lost.
    fn apply_tag_commit(&mut self, c: &TagCommit) -> Result<()> {
        let is_file = matches!(
            self.map.get(&mut self.store, c.ino),
            Ok(MapEntry::File { .. } | MapEntry::Linked(_))
        );
        let n = c.pages.len() as u32;
        if !is_file || c.first.checked_add(n).is_none() {
            self.mount.lost_commits += 1;
            return Ok(());
        }
        let node = self.load_file(c.ino)?.node.clone();
        let size = match c.end {
            DataEnd::CommitSize(s) => s,
            _ => node.size,
        };
        let stride = self.store.p().stride();
        let mut extents = ExtentMap::new();
        for (k, a) in c.pages.iter().enumerate() {
            extents.insert(c.first + k as u32, 1, *a, stride);
        }
        let rec = Record::Commit {
            tid: 0,
            ino: c.ino,
            size,
            mtime: node.attrs.mtime,
            ctime: node.attrs.ctime,
            trunc_to: None,
            inline: None,
            extents,
            map: None,
        };
        self.apply(&rec)
    }

    /// Commits open files, writes a clean checkpoint and gives the device back.
    pub fn unmount(self) -> Result<F> {
        self.try_unmount().map_err(|(e, _)| e)
    }

    /// Like [`Fs::unmount`], but gives the device back with the error when unmounting fails
    /// (e.g. on power loss), so the caller can power it up and mount again.
    pub fn try_unmount(mut self) -> core::result::Result<F, (Error, F)> {
        let r = self.finish();
        let flash = self.store.into_flash();
        match r {
            Ok(()) => Ok(flash),
            Err(e) => Err((e, flash)),
        }
    }

    /// [`Fs::try_unmount`] of a file system kept on the heap (see [`Fs::mount_boxed`]).
    pub fn try_unmount_boxed(mut self: Box<Self>) -> core::result::Result<F, (Error, F)> {
        let r = self.finish();
        let Fs { store, .. } = *self;
        let flash = store.into_flash();
        match r {
            Ok(()) => Ok(flash),
            Err(e) => Err((e, flash)),
        }
    }

    /// What unmounting writes: open files committed, a clean checkpoint (nothing when the file
    /// system is broken or read-only).
    fn finish(&mut self) -> Result<()> {
        if self.mount.broken.is_none() && !self.cfg.read_only {
            let r = self.guard(|fs| {
                if fs.txn.open.is_some() {
                    fs.abort()?;
                }
                fs.sync()?;
                // Nothing was programmed since a clean mount: its checkpoint still holds.
                if fs.journal.session_needed(&fs.store)
                    && fs.open.files.values().all(|o| o.overlay.is_none())
                {
                    return Ok(());
                }
                // Everything is durable now (in the journal). A device with no room left for
                // the clean checkpoint is given back as a power cut right here would leave
                // it: the next mount replays the journal.
                let r = fs
                    .ensure_writable()
                    .and_then(|()| fs.checkpoint_for(CheckpointNeed::Clean).map(|_| ()));
                match r {
                    Err(Error::NoSpace) => Ok(()),
                    r => r,
                }
            });
            r?;
        }
        Ok(())
    }

    /// Gives the device back without writing anything (as if power were cut).
    pub fn into_flash(self) -> F {
        self.store.into_flash()
    }
}

/// The mount's error for a journal record that does not apply: a record the file system
/// wrote always does, so one naming an inode or entry that is not there, or asking what the
/// tree refuses, is damage (`Corrupt`), not an answer about the caller's path (`ENOENT` from a
/// mount, a corruption run at seed 43). Device, memory and power errors stay as they are.
fn replay_error(e: Error) -> Error {
    match e {
        Error::NotFound
        | Error::Exists
        | Error::NotDir
        | Error::IsDir
        | Error::NotEmpty
        | Error::NameTooLong
        | Error::Invalid
        | Error::TooBig
        | Error::Loop
        | Error::TooManyLinks
        | Error::BadHandle => Error::Corrupt,
        e => e,
    }
}
