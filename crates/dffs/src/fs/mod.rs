//! The file system: the API applications call, and the orchestration of everything below.
//!
//! Owns the mounted state: caches with their RAM budget, open files and their uncommitted
//! overlays, the write-back data cache, the journal position, transactions, checkpoints, mount
//! and replay, garbage collection scheduling. Every change is first expressed as a journal
//! record and then applied by one function (`Fs::apply`) that replay after a power cut uses
//! too. It must never touch the device except through the store.

mod budget;
mod config;
mod fsck;
mod gc;
mod io;
mod ns;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;

use alloc::vec::Vec;

use crate::checkpoint::{self, AnchorPos, Checkpoint, ANCHOR_AREA, CP_CLEAN};
use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino, Time, ROOT_INO, S_IFDIR};
use crate::format::codec::Reader;
use crate::format::node::{self, NodeBuilder, NodeType, OobTag, Probe};
use crate::format::params::{Addr, FormatOptions, LogKind, Params, MAX_HEADS, NODE_HEADER};
use crate::index::dir::name_key;
use crate::index::dir::{DirRoot, Dirs, Slot, PLACEHOLDER};
use crate::index::file::{FileNode, IndexCache, IndexTree};
use crate::index::inode_map::{InodeMap, MapEntry};
use crate::journal::{JournalScan, JournalWriter, Record, ScanStart, Tid};
use crate::store::OpCounts;
use crate::store::{BlockInfo, BlockState, Priority, Store};
use dffs_flash::{Flash, FlashKind};

#[cfg(feature = "std")]
pub use config::SystemClock;
pub use config::{Clock, Config, NoClock};
pub use fsck::FsckReport;
pub use gc::GcReport;
pub use io::OpenFlags;
/// Handle types (re-exported at the crate root).
pub mod io_types {
    pub use super::io::Fh;
}
pub use ns::{DirEntry, FileKind, SetAttr, Stat};

/// A file inode in the inode cache.
#[derive(Clone, Debug)]
pub(crate) struct CachedFile {
    pub node: FileNode,
    pub dirty: bool,
    pub used: u64,
}

/// Space figures, as `statfs` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per reported block.
    pub block_size: u32,
    /// Blocks the file system can hold (after reserves).
    pub blocks: u64,
    /// Blocks free for new data (garbage included: collection will reclaim it).
    pub blocks_free: u64,
    /// Files and directories.
    pub files: u64,
    /// Inode numbers still available.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
}

/// A snapshot of what the mounted file system is and holds (for `dffs info`).
#[derive(Clone, Debug)]
pub struct Info {
    /// Format parameters.
    pub params: Params,
    /// Bytes of live data and metadata.
    pub used_bytes: u64,
    /// Bytes that can still be written.
    pub free_bytes: u64,
    /// Regular files and symlinks.
    pub files: u32,
    /// Directories (the root included).
    pub dirs: u32,
    /// Blocks marked bad.
    pub bad_blocks: u32,
    /// Erase counts: min, mean, max (good blocks).
    pub erase_count: (u32, f64, u32),
    /// Erase count of every block.
    pub erase_counts: Vec<u32>,
    /// Operations the last mount cost.
    pub mount_cost: OpCounts,
    /// RAM held by the mounted file system.
    pub ram_bytes: usize,
    /// Whether the last mount had to replay a journal (the previous session did not end
    /// cleanly).
    pub recovered: bool,
}

/// Work the file system has done since it was mounted (for benchmarks and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Blocks garbage collection finished.
    pub gc_blocks: u64,
    /// Bytes garbage collection copied.
    pub gc_moved_bytes: u64,
    /// Blocks moved by static wear leveling.
    pub wl_moves: u64,
    /// Victims garbage collection examined but kept, because something in them that may be
    /// live could not be read.
    pub gc_kept_blocks: u64,
    /// Device operations issued.
    pub ops: OpCounts,
}

/// A mounted DFFS file system on flash device `F`.
pub struct Fs<F: Flash> {
    pub(crate) checkpoints: u64,
    pub(crate) st: Store<F>,
    pub(crate) map: InodeMap,
    pub(crate) dirs: Dirs,
    pub(crate) icache: IndexCache,
    pub(crate) files: BTreeMap<Ino, Box<CachedFile>>,
    pub(crate) inos: BTreeMap<Ino, Box<io::OpenInode>>,
    pub(crate) handles: Vec<Option<io::Handle>>,
    pub(crate) dcache: io::DataCache,
    pub(crate) cfg: Config,
    pub(crate) clock: Box<dyn Clock>,
    pub(crate) anchor: AnchorPos,
    pub(crate) journal: JournalWriter,
    pub(crate) next_tid: Tid,
    pub(crate) tx: Option<Tid>,
    pub(crate) need_recovery_cp: bool,
    pub(crate) nfiles: u32,
    pub(crate) ndirs: u32,
    pub(crate) gc: gc::GcState,
    pub(crate) mount_cost: OpCounts,
    pub(crate) recovered: bool,
    pub(crate) broken: Option<Error>,
    pub(crate) bt_pages: Vec<Addr>,
    pub(crate) tick: u64,
    pub(crate) replaying: bool,
    /// The last journal scan ended on bytes that were programmed but are not a valid record
    /// (a program cut by power loss).
    pub(crate) journal_garbage: bool,
}

/// Default directory permissions of the root.
const ROOT_MODE: u32 = S_IFDIR | 0o755;

impl<F: Flash> Fs<F> {
    // ----- format and mount -------------------------------------------------------------

    /// Formats `flash` with a new, empty file system and gives the device back.
    pub fn format(flash: F, opts: &FormatOptions) -> Result<F> {
        let g = flash.geometry();
        let mut p = Params::for_geometry(g, opts)?;
        let mut st = Store::new(flash, p);
        // Bad blocks as the device marks them.
        for b in 0..g.blocks {
            if st.device_says_bad(b)? {
                st.set_block(
                    b,
                    BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0, 0, 0),
                );
            }
        }
        // Erase the anchor area so no older file system's checkpoint can be mistaken for ours,
        // and pick the first two good blocks as anchors.
        let mut anchors = Vec::new();
        for b in 0..ANCHOR_AREA.min(g.blocks) {
            if st.block(b).state() == BlockState::Bad {
                continue;
            }
            match st.erase_raw(b) {
                Ok(()) => {
                    if anchors.len() < 2 {
                        anchors.push(b);
                        st.set_state(b, BlockState::Anchor);
                    } else {
                        st.set_state(b, BlockState::Erased);
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
            .set(&mut fs.st, ROOT_INO, MapEntry::Dir(Addr::NONE))?;
        fs.ndirs = 1;
        fs.journal.reserve_next(&mut fs.st, Priority::Reserve)?;
        fs.anchor = AnchorPos {
            anchor: 1,
            slot: 0,
            may_append: false,
        };
        fs.checkpoint_inner(true)?;
        Ok(fs.st.into_flash())
    }

    fn assemble(st: Store<F>, cfg: Config, clock: Box<dyn Clock>) -> Fs<F> {
        let p = st.p();
        let mut handles = Vec::new();
        handles.resize_with(cfg.max_open, || None);
        Fs {
            map: InodeMap::new(&p, Addr::NONE, 0, 2, 2, cfg.map_cache),
            dirs: Dirs::new(p, cfg.dir_cache),
            icache: IndexCache::new(cfg.index_cache),
            files: BTreeMap::new(),
            inos: BTreeMap::new(),
            handles,
            dcache: io::DataCache::new(cfg.data_cache),
            cfg,
            clock,
            anchor: AnchorPos {
                anchor: 0,
                slot: 0,
                may_append: false,
            },
            journal: JournalWriter::default(),
            next_tid: 1,
            tx: None,
            need_recovery_cp: false,
            nfiles: 0,
            ndirs: 0,
            gc: gc::GcState::default(),
            mount_cost: OpCounts::default(),
            recovered: false,
            broken: None,
            bt_pages: Vec::new(),
            checkpoints: 0,
            tick: 0,
            replaying: false,
            journal_garbage: false,
            st,
        }
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
        let g = flash.geometry();
        let p = match Params::for_geometry(g, &FormatOptions::default()) {
            Ok(p) => p,
            Err(e) => return Err((e, flash)),
        };
        let st = Store::new(flash, p);
        let mut fs = Fs::assemble(st, cfg, clock);
        let before = fs.st.counts();
        match fs.load() {
            Ok(()) => {
                fs.mount_cost = fs.st.counts().since(&before);
                Ok(fs)
            }
            Err(e) => Err((e, fs.st.into_flash())),
        }
    }

    /// Reads the newest checkpoint, the block table, and replays the journal.
    fn load(&mut self) -> Result<()> {
        // A reload (transaction abort) forgets the collection in progress: what it moved was
        // in RAM only, and the victim is whole again in the reloaded block table.
        self.gc.victim = None;
        self.gc.pos = 0;
        let (cp, pos) = checkpoint::find_newest(&mut self.st)?;
        let p = cp.params;
        self.st.set_params(p);
        self.st.set_seq(cp.next_seq);
        self.st.set_cp_number(cp.cp_number + 1);
        self.journal.resume(cp.journal_block, cp.journal_next);
        self.st.set_read_only(self.cfg.read_only);
        self.next_tid = cp.next_tid.max(1);
        self.nfiles = cp.files;
        self.ndirs = cp.dirs;
        self.anchor = pos;
        self.dirs = Dirs::new(p, self.cfg.dir_cache);
        self.map = InodeMap::new(
            &p,
            cp.map_root,
            cp.map_depth,
            cp.ino_hint,
            cp.ino_high,
            self.cfg.map_cache,
        );
        self.icache.clear();
        self.files.clear();
        self.dcache.clear();
        // Block table.
        let per = p.bt_entries();
        let nblocks = p.geometry.blocks;
        let mut blocks = Vec::with_capacity(nblocks as usize);
        for (i, a) in cp.bt_pages.iter().enumerate() {
            let (_h, bytes) = self.st.read_node(*a, NodeType::BlockTable, p.map_page)?;
            let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
            let first = r.u32()?;
            let n = r.u32()?;
            if first != i as u32 * per || n != per.min(nblocks - first) {
                return Err(Error::Corrupt);
            }
            for _ in 0..n {
                blocks.push(BlockInfo::decode(&mut r, p.geometry.block_size())?);
            }
        }
        if blocks.len() != nblocks as usize {
            return Err(Error::Corrupt);
        }
        // The table was written after the journal head was opened (and its next block
        // reserved): a table that disagrees names the wrong pages (e.g. an older table's).
        let state_of = |b: u32| blocks.get(b as usize).map(|e| (e.state(), e.kind()));
        if cp.journal_block != u32::MAX
            && state_of(cp.journal_block) != Some((BlockState::Head, LogKind::Journal))
        {
            return Err(Error::Corrupt);
        }
        if cp.journal_next != u32::MAX
            && state_of(cp.journal_next).map(|s| s.0) != Some(BlockState::Reserved)
        {
            return Err(Error::Corrupt);
        }
        // The table was written just before its checkpoint; what that checkpoint freed (blocks
        // emptied by GC, journal blocks before the replay start) is free now.
        for b in blocks.iter_mut() {
            let dead_journal = b.state() == BlockState::Used && b.kind() == LogKind::Journal;
            if b.state() == BlockState::PendingErase || dead_journal {
                *b = BlockInfo::new(BlockState::Free, LogKind::DataHot, b.ec, 0, b.age());
            }
        }
        // An anchor that went bad is replaced after the table of its checkpoint was written:
        // the checkpoint's parameters say which blocks are the anchors now.
        for (i, b) in blocks.iter_mut().enumerate() {
            let anchor = p.anchors.contains(&(i as u32));
            if anchor && b.state() != BlockState::Anchor {
                *b = BlockInfo::new(BlockState::Anchor, LogKind::Map, b.ec, 0, b.age());
            } else if !anchor && b.state() == BlockState::Anchor {
                *b = BlockInfo::new(BlockState::Bad, LogKind::DataHot, b.ec, 0, b.age());
            }
        }
        self.st.load_table(blocks);
        self.bt_pages = cp.bt_pages.clone();
        // Heads as the checkpoint left them; any other block still marked as a head was closed
        // after the table was written.
        for (h, &(b, off)) in cp.heads.iter().enumerate() {
            // Only a block the table calls a head, and only once: a forged head in a free
            // block would get live bytes a free block must never have.
            let taken = cp.heads[..h].iter().any(|&(hb, _)| hb == b);
            if b != u32::MAX
                && h < p.head_count()
                && !taken
                && self.st.block(b).state() == BlockState::Head
            {
                self.st
                    .set_head(h, crate::store::Head::resumed(b, off, p.geometry.page_size));
            }
        }
        for b in 0..nblocks {
            if self.st.block(b).state() == BlockState::Head
                && !cp.heads.iter().any(|&(hb, _)| hb == b)
            {
                self.st.set_state(b, BlockState::Used);
            }
        }
        self.orphans_from_checkpoint(&cp)?;
        // Replay.
        let clean = cp.flags & CP_CLEAN != 0;
        let replayed = self.replay(&cp)?;
        if replayed || !clean {
            // Blocks believed erased may have been written after the checkpoint: so may the
            // journal's reserved next block (a session that crashed may have moved the journal
            // into it without a link replay could follow). Both are erased before any use.
            for b in 0..nblocks {
                if matches!(
                    self.st.block(b).state(),
                    BlockState::Erased | BlockState::Reserved
                ) {
                    self.st.set_state(b, BlockState::Free);
                }
            }
            self.journal.drop_reservation();
            self.recovered = true;
            self.anchor.may_append = false;
            // Heads continue after whatever was written since the checkpoint (the journal
            // restarts in a fresh block with the recovery checkpoint).
            let jh = p.head_of(LogKind::Journal);
            for h in 0..p.head_count() {
                if h == jh {
                    let b = self.st.head_at(h).block();
                    if b != u32::MAX && self.st.block(b).state() == BlockState::Head {
                        self.st.set_state(b, BlockState::Used);
                    }
                    self.st.set_head(h, crate::store::Head::empty());
                } else if !self.cfg.read_only {
                    self.st.recover_head(h)?;
                }
            }
            self.need_recovery_cp = !self.cfg.read_only;
        } else {
            // Continue the heads at the next page boundary; the session's first program is
            // preceded by a session record.
            self.journal
                .expect_session(&mut self.st, !self.cfg.read_only);
            let ps = p.geometry.page_size;
            for h in 0..p.head_count() {
                let (b, off) = (self.st.head_at(h).block(), self.st.head_at(h).off());
                if b == u32::MAX {
                    continue;
                }
                let off = match p.geometry.kind {
                    FlashKind::Nand => off.div_ceil(ps) * ps,
                    FlashKind::Nor => off,
                };
                if off >= p.geometry.block_size() {
                    self.st.set_head(h, crate::store::Head::empty());
                    self.st.set_state(b, BlockState::Used);
                } else {
                    self.st.set_head(h, crate::store::Head::resumed(b, off, ps));
                }
            }
        }
        Ok(())
    }

    /// Frees files that were unlinked while open when the checkpoint was taken.
    fn orphans_from_checkpoint(&mut self, cp: &Checkpoint) -> Result<()> {
        for &(ino, addr) in &cp.orphans {
            if self.cfg.read_only {
                break;
            }
            let node = self.read_inode(addr, ino)?;
            self.free_file_space(&node)?;
            self.map.set(&mut self.st, ino, MapEntry::Free)?;
            self.nfiles = self.nfiles.saturating_sub(1);
        }
        Ok(())
    }

    // ----- journal ----------------------------------------------------------------------

    /// Scans the journal from the checkpoint's start and applies committed records.
    /// Returns whether there was anything after the checkpoint.
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
        let mut scan = JournalScan::new(&mut self.st, start)?;
        while let Some(rec) = scan.next(&mut self.st)? {
            any = true;
            match &rec {
                Record::TxCommit { tid } => committed.push(*tid),
                Record::Remap { .. } => self.apply(&rec)?,
                r => max_tid = max_tid.max(r.tid()),
            }
        }
        self.journal_garbage = scan.ended_on_garbage();
        let last = scan.last_seq();
        self.st.set_seq(self.st.seq().max(last + 1));
        if !any {
            return Ok(self.journal_garbage);
        }
        self.next_tid = self.next_tid.max(max_tid.saturating_add(1));
        committed.sort_unstable();
        // Pass 2: apply.
        self.replaying = true;
        self.st.set_replaying(true);
        let res = self.replay_committed(start, &committed);
        self.replaying = false;
        self.st.set_replaying(false);
        res?;
        Ok(true)
    }

    /// Applies every record of the journal whose transaction committed (`tid` 0 or listed).
    fn replay_committed(&mut self, start: ScanStart, committed: &[Tid]) -> Result<()> {
        let mut scan = JournalScan::new(&mut self.st, start)?;
        while let Some(rec) = scan.next(&mut self.st)? {
            let tid = rec.tid();
            if tid != 0 && committed.binary_search(&tid).is_err() {
                continue;
            }
            self.apply(&rec)?;
        }
        Ok(())
    }

    /// Appends a record to the journal (after a recovery checkpoint if one is due).
    pub(crate) fn journal(&mut self, rec: &Record) -> Result<()> {
        self.writable()?;
        self.journal.record_remaps(&mut self.st, Priority::Log)?;
        match self.journal.append_record(&mut self.st, rec, Priority::Log) {
            Ok(_) => Ok(()),
            // Out of journal room: a checkpoint starts the journal afresh and gives back the
            // blocks collected so far. Only between operations of their own (a record of a
            // transaction or of a split commit must not see a checkpoint before its end).
            Err(Error::NoSpace)
                if rec.tid() == 0
                    && self.tx.is_none()
                    && !self.replaying
                    && self.releasable_blocks() > 0 =>
            {
                self.checkpoint_inner(false)?;
                self.journal
                    .append_record(&mut self.st, rec, Priority::Log)
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Makes the journal durable.
    pub(crate) fn journal_flush(&mut self) -> Result<()> {
        self.journal.record_remaps(&mut self.st, Priority::Log)?;
        self.journal.flush(&mut self.st)
    }

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

    /// Records a fatal condition (power loss): everything fails until remount.
    pub(crate) fn fail<T>(&mut self, e: Error) -> Result<T> {
        if e == Error::PowerLoss {
            self.broken = Some(e);
        }
        Err(e)
    }

    /// Runs `f`; a power loss inside breaks the file system for good.
    pub(crate) fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Some(e) = self.broken {
            return Err(e);
        }
        let r = match f(self) {
            Err(Error::PowerLoss) => self.fail(Error::PowerLoss),
            r => r,
        };
        self.trim_caches();
        r
    }

    /// Evicts clean cached items beyond the configured budgets (between operations, when no
    /// operation holds a position in a cache).
    pub(crate) fn trim_caches(&mut self) {
        self.dirs.trim();
        let mut clean = self.files.values().filter(|c| !c.dirty).count();
        while clean > self.cfg.inode_cache {
            let Some((&victim, _)) = self
                .files
                .iter()
                .filter(|(_, c)| !c.dirty)
                .min_by_key(|(_, c)| c.used)
            else {
                break;
            };
            self.files.remove(&victim);
            clean -= 1;
        }
    }

    // ----- checkpoint -------------------------------------------------------------------

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

    // ----- unmount ----------------------------------------------------------------------

    /// Commits open files, writes a clean checkpoint and gives the device back.
    pub fn unmount(self) -> Result<F> {
        self.try_unmount().map_err(|(e, _)| e)
    }

    /// Like [`Fs::unmount`], but gives the device back with the error when unmounting fails
    /// (e.g. on power loss), so the caller can power it up and mount again.
    pub fn try_unmount(mut self) -> core::result::Result<F, (Error, F)> {
        if self.broken.is_none() && !self.cfg.read_only {
            let r = self.guard(|fs| {
                if fs.tx.is_some() {
                    fs.abort()?;
                }
                fs.sync()?;
                // Nothing was programmed since a clean mount: its checkpoint still holds.
                if fs.journal.session_needed(&fs.st)
                    && fs.inos.values().all(|o| o.overlay.is_none())
                {
                    return Ok(());
                }
                fs.writable()?;
                fs.checkpoint_inner(true)
            });
            if let Err(e) = r {
                return Err((e, self.st.into_flash()));
            }
        }
        Ok(self.st.into_flash())
    }

    /// Gives the device back without writing anything (as if power were cut).
    pub fn into_flash(self) -> F {
        self.st.into_flash()
    }

    /// The device (for inspection: counters, simulated time).
    pub fn flash(&self) -> &F {
        self.st.flash()
    }

    /// The device, mutably.
    pub fn flash_mut(&mut self) -> &mut F {
        self.st.flash_mut()
    }

    /// Device operations issued since mount started.
    pub fn op_counts(&self) -> OpCounts {
        self.st.counts()
    }

    /// Work done since mount: checkpoints, garbage collection, device operations.
    pub fn activity(&self) -> Activity {
        Activity {
            checkpoints: self.checkpoints,
            gc_blocks: self.gc.blocks_collected,
            gc_moved_bytes: self.gc.moved_bytes,
            wl_moves: self.gc.wl_moves,
            gc_kept_blocks: self.gc.blocks_kept,
            ops: self.op_counts(),
        }
    }

    /// Format parameters.
    pub fn params(&self) -> Params {
        self.st.p()
    }

    // ----- inodes -----------------------------------------------------------------------

    /// `ino`'s index tree, borrowed for one operation.
    pub(crate) fn tree(&mut self, ino: Ino) -> IndexTree<'_, F> {
        IndexTree {
            st: &mut self.st,
            cache: &mut self.icache,
            ino,
        }
    }

    /// Reads and decodes the inode node at `a`, checking it belongs to `ino`.
    pub(crate) fn read_inode(&mut self, a: Addr, ino: Ino) -> Result<FileNode> {
        let p = self.st.p();
        let (h, bytes) = self.st.read_node(a, NodeType::Inode, p.dir_page)?;
        if ino != 0 && h.ino != ino {
            return Err(Error::Corrupt);
        }
        let len = p.align(h.len);
        FileNode::decode(&p, h.ino, a, len, &bytes[NODE_HEADER as usize..])
    }

    pub(crate) fn touch(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// Puts a file inode into the cache (evicting clean ones over budget).
    pub(crate) fn cache_file(&mut self, node: FileNode, dirty: bool) {
        let t = self.touch();
        let ino = node.ino;
        // Boxed: the map's nodes then hold pointers, not whole inodes (a B-tree node has room
        // for eleven entries however few are used).
        self.files.insert(
            ino,
            Box::new(CachedFile {
                node,
                dirty,
                used: t,
            }),
        );
        let clean = self.files.values().filter(|c| !c.dirty).count();
        if clean > self.cfg.inode_cache {
            if let Some((&victim, _)) = self
                .files
                .iter()
                .filter(|(i, c)| !c.dirty && **i != ino)
                .min_by_key(|(_, c)| c.used)
            {
                self.files.remove(&victim);
            }
        }
    }

    /// The committed inode of file `ino` (from the cache, or found through the inode map and
    /// its parent's slot).
    pub(crate) fn load_file(&mut self, ino: Ino) -> Result<&mut CachedFile> {
        if self.files.contains_key(&ino) {
            let t = self.touch();
            let c = self.files.get_mut(&ino).ok_or(Error::Corrupt)?;
            c.used = t;
            return Ok(c);
        }
        let node = match self.map.get(&mut self.st, ino)? {
            MapEntry::File { parent, hash } => self.find_file_in_parent(parent, hash, ino)?,
            MapEntry::Linked(a) => {
                if a.is_none() {
                    return Err(Error::Corrupt);
                }
                let node = self.read_inode(a, 0)?;
                if node.ino != ino || !node.linked {
                    return Err(Error::Corrupt);
                }
                node
            }
            MapEntry::Dir(_) => return Err(Error::IsDir),
            _ => return Err(Error::NotFound),
        };
        self.cache_file(node, false);
        self.files
            .get_mut(&ino)
            .map(|b| &mut **b)
            .ok_or(Error::Corrupt)
    }

    /// Finds the inode node of `ino` among the slots of `parent` whose hash matches.
    fn find_file_in_parent(&mut self, parent: Ino, hash30: u32, ino: Ino) -> Result<FileNode> {
        let slots = self.slots_with_hash30(parent, hash30)?;
        for s in slots {
            if s.is_dir() {
                continue;
            }
            if s.is_placeholder() {
                if s.ptr & !PLACEHOLDER == ino {
                    return Err(Error::Corrupt);
                }
                continue;
            }
            let node = match self.read_inode(Addr(s.ptr), 0) {
                Ok(n) => n,
                Err(Error::Corrupt) | Err(Error::Io) => continue,
                Err(e) => return Err(e),
            };
            if node.ino == ino {
                return Ok(node);
            }
        }
        Err(Error::Corrupt)
    }

    /// Slots of `parent` whose hash has these low 30 bits (the map keeps 30 bits).
    fn slots_with_hash30(&mut self, parent: Ino, hash30: u32) -> Result<Vec<Slot>> {
        let mut out = Vec::new();
        for top in [0u32, 1] {
            let h = hash30 | top << 30;
            out.extend(
                self.dirs
                    .candidates(&mut self.st, &mut self.map, parent, h)?,
            );
        }
        Ok(out)
    }

    /// The slot of file `ino` (name `name`) in `parent`.
    pub(crate) fn file_slot(&mut self, parent: Ino, name: &[u8], ino: Ino) -> Result<Slot> {
        let key = name_key(name, false);
        let cands = self
            .dirs
            .candidates(&mut self.st, &mut self.map, parent, key & 0x7FFF_FFFF)?;
        let node_addr = self.files.get(&ino).map(|c| c.node.node_addr);
        for s in cands {
            if s.is_dir() {
                continue;
            }
            if s.is_placeholder() {
                if s.ptr & !PLACEHOLDER == ino {
                    return Ok(s);
                }
                continue;
            }
            if Some(Addr(s.ptr)) == node_addr {
                return Ok(s);
            }
            match self.read_inode(Addr(s.ptr), 0) {
                Ok(n) if n.ino == ino => return Ok(s),
                Ok(_) | Err(Error::Corrupt) | Err(Error::Io) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::Corrupt)
    }

    /// Marks a cached file inode dirty: its slot becomes a placeholder until it is written
    /// (a linked file's slots are logical already; its map entry moves when it is written).
    pub(crate) fn make_dirty(&mut self, ino: Ino) -> Result<()> {
        let (dirty, parent, name, linked) = {
            let c = self.load_file(ino)?;
            (c.dirty, c.node.parent, c.node.name.clone(), c.node.linked)
        };
        if dirty {
            return Ok(());
        }
        if linked {
            if let Some(c) = self.files.get_mut(&ino) {
                c.dirty = true;
            }
            return Ok(());
        }
        let slot = self.file_slot(parent, &name, ino)?;
        self.dirs
            .replace_ptr(&mut self.st, &mut self.map, parent, slot, PLACEHOLDER | ino)?;
        if let Some(c) = self.files.get_mut(&ino) {
            c.dirty = true;
        }
        Ok(())
    }

    /// Writes a dirty file inode (folding its pending block changes first) and points its
    /// slot at the new node.
    pub(crate) fn write_inode(&mut self, ino: Ino) -> Result<()> {
        let mut node = match self.files.get(&ino) {
            Some(c) if c.dirty => c.node.clone(),
            _ => return Ok(()),
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        let nb = node.encode()?;
        let len = self.st.p().align(nb.w.len() as u32);
        let a = self.st.write_node(LogKind::Inode, nb, Priority::Reserve)?;
        if node.node_addr.is_some() {
            self.st.kill(node.node_addr, node.node_len);
        }
        node.node_addr = a;
        node.node_len = len;
        if node.linked {
            self.map.set(&mut self.st, ino, MapEntry::Linked(a))?;
            if let Some(c) = self.files.get_mut(&ino) {
                c.node = node;
                c.dirty = false;
            }
            return Ok(());
        }
        let key = name_key(&node.name, false);
        let parent = node.parent;
        self.dirs.replace_ptr(
            &mut self.st,
            &mut self.map,
            parent,
            Slot {
                ptr: PLACEHOLDER | ino,
                key,
            },
            a.0,
        )?;
        if let Some(c) = self.files.get_mut(&ino) {
            c.node = node;
            c.dirty = false;
        }
        Ok(())
    }

    /// Writes the inode node of an open, unlinked file (for the checkpoint's orphan list).
    fn write_orphan_inode(&mut self, ino: Ino) -> Result<Addr> {
        let mut node = match self.inos.get(&ino).and_then(|o| o.orphan.clone()) {
            Some(n) => n,
            None => return Err(Error::Corrupt),
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        let nb = node.encode()?;
        let len = self.st.p().align(nb.w.len() as u32);
        let a = self.st.write_node(LogKind::Inode, nb, Priority::Reserve)?;
        if node.node_addr.is_some() {
            self.st.kill(node.node_addr, node.node_len);
        }
        node.node_addr = a;
        node.node_len = len;
        if let Some(o) = self.inos.get_mut(&ino) {
            o.orphan = Some(node);
        }
        Ok(a)
    }

    /// Counts every block and node of a file dead (unlink, truncate of orphans).
    pub(crate) fn free_file_space(&mut self, node: &FileNode) -> Result<()> {
        let p = self.st.p();
        let stride = p.stride();
        let mut dead_data: Vec<Addr> = node
            .content
            .pending
            .iter_blocks(stride)
            .map(|x| x.1)
            .filter(|a| !a.is_none())
            .collect();
        let mut dead_nodes: Vec<Addr> = Vec::new();
        {
            let mut ix = self.tree(node.ino);
            let pending = &node.content.pending;
            let trunc = node.content.trunc;
            ix.walk(
                &node.content,
                &mut |b, a| {
                    if pending.get(b, stride).is_none() && trunc.is_none_or(|t| b < t) {
                        dead_data.push(a)
                    }
                },
                &mut |a, _, _| dead_nodes.push(a),
            )?;
        }
        for a in dead_data {
            self.kill_data(a);
        }
        for a in dead_nodes {
            self.st.kill(a, p.align(p.index_node));
        }
        if node.node_addr.is_some() {
            self.st.kill(node.node_addr, node.node_len);
        }
        Ok(())
    }

    /// Counts one data block dead (a compressed one: its whole node).
    pub(crate) fn kill_data(&mut self, a: Addr) {
        if let Some((at, len)) = self.data_extent(a) {
            self.st.kill(at, len);
        }
    }

    /// The aligned length of the compressed data node at `at` (for fsck).
    pub(crate) fn dataz_len(&mut self, at: Addr) -> Option<u32> {
        let p = self.st.p();
        let mut h = [0u8; NODE_HEADER as usize];
        self.st.read(p.byte_of(at), &mut h).ok()?;
        let max = crate::format::compress::DATAZ_HEADER + crate::format::compress::MAX_RAW;
        match node::probe(&h, max) {
            Probe::Header(hd) if hd.typ == NodeType::DataZ => Some(p.align(hd.len)),
            _ => None,
        }
    }

    /// Where the flash bytes of file block pointer `a` start and how many bytes they count
    /// live: a raw block is one data block at `a`; a packed pointer is one share of its
    /// compressed data node (see [`crate::format::compress::share`]), read from the node header (`None` when it cannot be read:
    /// the block then stays counted live until garbage collection recounts it).
    pub(crate) fn data_extent(&mut self, a: Addr) -> Option<(Addr, u32)> {
        let p = self.st.p();
        if a.is_none() {
            return None;
        }
        if !a.is_packed() {
            return Some((a, p.data_slot()));
        }
        let at = a.node();
        if !p.addr_valid(at) {
            return None;
        }
        let mut h = [0u8; crate::format::compress::DATAZ_HEADER as usize];
        self.st.read(p.byte_of(at), &mut h).ok()?;
        let max = crate::format::compress::DATAZ_HEADER + crate::format::compress::MAX_RAW;
        match node::probe(&h, max) {
            Probe::Header(hd) if hd.typ == NodeType::DataZ => {
                let raw_len = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
                if raw_len == 0 || raw_len % p.data_block != 0 {
                    return None;
                }
                let count = raw_len / p.data_block;
                Some((at, crate::format::compress::share(p.align(hd.len), count)))
            }
            _ => None,
        }
    }

    // ----- reporting --------------------------------------------------------------------

    /// RAM held by the mounted file system (every structure it allocated).
    pub fn ram_bytes(&self) -> usize {
        let files: usize = self
            .files
            .values()
            .map(|c| {
                core::mem::size_of::<CachedFile>()
                    + c.node.name.capacity()
                    + c.node.content.ram_bytes()
                    + 32
            })
            .sum();
        let inos: usize = self.inos.values().map(|o| o.ram_bytes()).sum();
        core::mem::size_of::<Self>()
            + self.st.ram_bytes()
            + self.map.ram_bytes()
            + self.dirs.ram_bytes()
            + self.icache.ram_bytes()
            + files
            + inos
            + self.handles.capacity() * core::mem::size_of::<Option<io::Handle>>()
            + self.dcache.ram_bytes()
            + self.bt_pages.capacity() * 4
    }

    /// Where the RAM is (for diagnostics; the format of the string is not stable).
    #[doc(hidden)]
    pub fn debug_ram_summary(&self) -> alloc::string::String {
        alloc::format!(
            "store {} map {} dirs {} ({} items, {} dirty) index {} files {} ({} cached, {} dirty) inos {} ({}) dcache {}",
            self.st.ram_bytes(),
            self.map.ram_bytes(),
            self.dirs.ram_bytes(),
            self.dirs.len(),
            self.dirs.dirty_count(),
            self.icache.ram_bytes(),
            self.files.values().map(|c| core::mem::size_of::<CachedFile>() + c.node.name.capacity() + c.node.content.ram_bytes() + 32).sum::<usize>(),
            self.files.len(),
            self.files.values().filter(|c| c.dirty).count(),
            self.inos.values().map(|o| o.ram_bytes()).sum::<usize>(),
            self.inos.len(),
            self.dcache.ram_bytes(),
        )
    }

    /// One block's table entry (for diagnostics; the format is not stable).
    #[doc(hidden)]
    pub fn debug_block(&self, b: u32) -> alloc::string::String {
        match (b < self.st.block_count()).then(|| self.st.block(b)) {
            Some(e) => {
                alloc::format!(
                    "block {b}: {:?}/{:?} live {} ec {} age {}; heads {:?}; journal_next {}",
                    e.state(),
                    e.kind(),
                    e.live,
                    e.ec,
                    e.age(),
                    self.st
                        .heads()
                        .iter()
                        .map(|h| (h.block(), h.off()))
                        .collect::<Vec<_>>(),
                    self.journal.next()
                )
            }
            None => alloc::format!("block {b}: out of range"),
        }
    }

    /// Block states and live bytes per log (for diagnostics; the format is not stable).
    #[doc(hidden)]
    pub fn debug_block_summary(&self) -> alloc::string::String {
        use core::fmt::Write;
        let mut counts = BTreeMap::new();
        for (_, e) in self.st.blocks() {
            let k = alloc::format!("{:?}/{:?}", e.state(), e.kind());
            let v = counts.entry(k).or_insert((0u32, 0u64));
            v.0 += 1;
            v.1 += e.live as u64;
        }
        let mut out = alloc::string::String::new();
        for (k, (n, live)) in counts {
            let _ = write!(out, "{k}: {n} blocks, {} KiB live; ", live >> 10);
        }
        let _ = write!(
            out,
            "reserve {} free {} pending {}",
            self.st.reserve_blocks(),
            self.st.free_blocks(),
            self.st.pending_blocks()
        );
        out
    }

    /// Space figures.
    pub fn statfs(&mut self) -> Result<StatFs> {
        let (usable, free) = self.space();
        let bs = self.st.p().data_block as u64;
        let entries = self.map.high as u64;
        Ok(StatFs {
            block_size: self.st.p().data_block,
            blocks: usable / bs,
            blocks_free: free / bs,
            files: self.nfiles as u64 + self.ndirs as u64,
            files_free: (u32::MAX as u64).saturating_sub(entries).min(free / 64),
            name_max: crate::format::params::NAME_MAX as u32,
        })
    }

    /// A summary of the file system.
    pub fn info(&mut self) -> Info {
        let (_usable, free) = self.space();
        let used: u64 = self
            .st
            .blocks()
            .map(|(_, e)| e)
            .filter(|b| b.state() != BlockState::Bad)
            .map(|b| b.live as u64)
            .sum();
        let good: Vec<BlockInfo> = self
            .st
            .blocks()
            .map(|(_, e)| e)
            .filter(|b| b.state() != BlockState::Bad)
            .collect();
        let (mut mn, mut mx, mut sum) = (u32::MAX, 0u32, 0u64);
        for b in &good {
            mn = mn.min(b.ec);
            mx = mx.max(b.ec);
            sum += b.ec as u64;
        }
        let mean = if good.is_empty() {
            0.0
        } else {
            sum as f64 / good.len() as f64
        };
        Info {
            params: self.st.p(),
            used_bytes: used,
            free_bytes: free,
            files: self.nfiles,
            dirs: self.ndirs,
            bad_blocks: self
                .st
                .blocks()
                .map(|(_, e)| e)
                .filter(|b| b.state() == BlockState::Bad)
                .count() as u32,
            erase_count: (if good.is_empty() { 0 } else { mn }, mean, mx),
            erase_counts: self.st.blocks().map(|(_, b)| b.ec).collect(),
            mount_cost: self.mount_cost,
            ram_bytes: self.ram_bytes(),
            recovered: self.recovered,
        }
    }

    /// The current time from the clock.
    pub(crate) fn now(&self) -> Time {
        self.clock.now()
    }

    /// Whether an OOB tag read from a data page matches what is expected (fsck, GC).
    pub(crate) fn tag_matches(tag: &OobTag, ino: Ino, block: u32) -> bool {
        tag.kind == crate::format::node::TAG_DATA && tag.ino == ino && tag.block == block
    }
}
