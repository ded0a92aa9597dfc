//! The block manager and the log heads: where every byte DFFS writes goes, and what each erase
//! block holds.
//!
//! [`Store`] owns the device (through [`medium::Medium`]), the block table
//! ([`block_table::BlockTable`]: state, owner log, live bytes, erase count and age of every
//! block; allocation with dynamic wear leveling; reading a page of records back when RAM does
//! not hold them), the heads of every log ([`heads::Heads`]),
//! bad-block swaps ([`bad_blocks`]), the global sequence number, and reading nodes back with
//! CRC checks ([`read`]) and writing them ([`write`]). It must never know what a node means: it
//! stores bytes, counts live space and hands out addresses; no journal record, directory page
//! or inode is named here.

pub(crate) mod bad_blocks;
pub(crate) mod block_table;
pub(crate) mod heads;
pub(crate) mod medium;
mod read;
mod write;

use alloc::vec::Vec;

pub(crate) use bad_blocks::Remap;
pub(crate) use block_table::{
    decode_page, BlockInfo, BlockRecord, BlockState, BlockTable, Wear, WlFigures, ANCHOR_SPARES,
};
pub(crate) use heads::{Head, Heads};
use medium::Medium;
pub use medium::{Cause, CauseCounts, OpCounts, OpTotals};

use crate::error::{Error, Result};
use crate::format::node::{self, NodeBuilder, NodeType, Probe};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind, Params, ANCHOR_AREA, NODE_HEADER};
use dffs_flash::{EccStatus, Flash, FlashError, FlashKind};

/// Who is asking for a block. Each level has a floor of free blocks it must leave (set by the
/// file system's budget, see [`Store::set_floors`]): application data leaves the reserve,
/// journal appends and GC copies leave what a checkpoint needs, and a checkpoint (which is what
/// gives blocks back) may take the last ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Writes on behalf of the application.
    User,
    /// Journal appends, garbage-collection copies.
    Log,
    /// A spare for a block that failed a program (may use the bad-block spares).
    Spare,
    /// Checkpoints (may use every block). Outside a checkpoint (see
    /// [`Store::set_checkpointing`]) it counts as [`Priority::Log`]: only a checkpoint gives
    /// blocks back, so only a checkpoint may take the last ones.
    Reserve,
}

/// Bytes of a data node header (type `Data`) before its payload.
pub const DATA_HEADER: u32 = NODE_HEADER + 16;

/// Blocks a mount walks at most in each order of the free pool, looking for those taken
/// since the checkpoint ([`Store::count_taken_erases`]): a bound on the reads a mount after a
/// cut spends on erase counts (a block each).
const TAKEN_WALK: u32 = 32;

/// What a block begins with, against a sequence number ([`Store::first_write`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstWrite {
    /// Nothing: its first page (NOR: its first bytes) is erased.
    Nothing,
    /// Something written before the number.
    Before,
    /// Something written since.
    Since,
    /// Unreadable or garbage: a torn program or erase, since the checkpoint or before it.
    Torn,
}

/// Blocks, heads and the device.
pub(crate) struct Store<F: Flash> {
    /// The device.
    medium: Medium<F>,
    /// Format parameters.
    p: Params,
    /// Per logical block records.
    table: BlockTable,
    /// Swapped-out bad blocks.
    remaps: Vec<Remap>,
    /// Swaps not yet recorded in the journal, oldest first.
    new_remaps: Vec<Remap>,
    /// A journal block was swapped out since the last checkpoint: recovery reads the journal
    /// before it can replay the swap's record, so only a checkpoint makes the swap (and every
    /// record after it) reachable.
    journal_swapped: bool,
    /// Open blocks, indexed by head number.
    heads: Heads,
    /// Next sequence number to hand out.
    seq: u64,
    /// Checkpoint counter (ages blocks).
    cp_number: u64,
    /// No writes allowed.
    read_only: bool,
    /// Set while the journal is replayed: replay must never write (a write would land on
    /// blocks the rest of the journal may still reference).
    replaying: bool,
    /// Free blocks [`Priority::Log`] allocations must leave.
    floor_log: u32,
    /// Free blocks [`Priority::User`] allocations must leave.
    floor_user: u32,
    /// Free blocks [`Priority::Spare`] allocations must leave.
    floor_spare: u32,
    /// A checkpoint is being written: [`Priority::Reserve`] may take the last blocks.
    checkpointing: bool,
    /// A node to write (and make durable) into a log, one page after where its head stands,
    /// before the session's first program (the journal's session marker; see
    /// [`Store::set_first_program`]).
    first_program: Option<(LogKind, NodeBuilder)>,
    /// What the file system is doing (for [`OpCounts::by_cause`]).
    phase: Phase,
    /// Bytes that died in [`Phase::Op`] (the application's unlinks, truncations, rewrites), in
    /// all: whether anything was freed since a time the device was found full.
    op_kills: u64,
    /// The commit run being written into the user-data head, if any (see
    /// [`Store::begin_commit_run`]).
    run: Option<CommitRun>,
    /// The user-data head's block that recovery scans for commit runs: the block the last
    /// checkpoint recorded for that head, or one a journal record named since
    /// (`u32::MAX`: none).
    scanned_block: u32,
    /// NAND: the block the user-data head opens next, erased and named by a journal record
    /// already programmed (`u32::MAX`: none; see [`Store::set_data_next`]).
    data_next: u32,
    /// Sequence number of the last checkpoint (a commit tag carries 32 bits of it).
    cp_seq: u64,
    /// Block-table pages whose wear the table caches (see [`BlockTable`]).
    table_cache: u16,
    /// `Free` blocks that an `Erasing` journal record on flash announced since the last
    /// checkpoint: the allocator may erase them, and a mount after a power cut reads their
    /// first page to count an erase it finds (FORMAT.md §11).
    announced: Vec<u32>,
    /// Erases of `Free` blocks no record had announced: a power cut before the next
    /// checkpoint loses their counts (DESIGN.md §15 item 6).
    unannounced_erases: u64,
    /// An anchor whose coming erase was counted already, by the checkpoint that will erase it
    /// (so that the table that checkpoint writes holds the count): [`Store::erase_raw`] does
    /// not count it again.
    anchor_precounted: Option<u32>,
    /// Blocks whose erase replay has counted (see [`Store::count_replayed_erase`]).
    replay_counted: Vec<u32>,
    /// During a mount, one past the highest sequence number found at the start of a block
    /// written since the checkpoint ([`Store::first_write`]): what the session the cut ended
    /// wrote there may be newer than anything replay reads.
    seen_seq: u64,
    /// Scans read every block-table page RAM does not hold, whatever its bounds say (tests
    /// compare the choices).
    full_scans: bool,
    /// Most bytes the packed records of every block may take in RAM: above it, a mount pages
    /// them ([`BlockTable::pages_records`]).
    /// (In bytes, `u32::MAX` at most.)
    records_ram: u32,
}

/// A commit run in progress: consecutive file blocks of one inode written as consecutive pages
/// of the user-data head's block, with consecutive sequence numbers (FORMAT.md §8.7).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CommitRun {
    /// The file.
    pub ino: u32,
    /// File block the next page must hold.
    pub next_block: u32,
    /// Sequence number the next page must get.
    pub next_seq: u64,
    /// The head's block the pages must be in.
    pub block: u32,
    /// Pages written so far.
    pub pages: u32,
    /// Still a valid run.
    pub ok: bool,
}

/// What the file system is doing, as far as the accounting of device operations by [`Cause`]
/// is concerned: the phase decides the cause of reads (and of GC's programs and erases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// An operation of the API (reads count under what they read).
    Op,
    /// Writing a checkpoint.
    Checkpoint,
    /// Garbage collection or wear leveling.
    Gc,
    /// Mounting (and reloading after a transaction abort).
    Mount,
}

impl<F: Flash> Store<F> {
    /// A store over `flash` with parameters `p` and an all-free block table.
    pub fn new(flash: F, p: Params) -> Store<F> {
        let g = p.geometry;
        Store {
            medium: Medium::new(flash),
            p,
            table: BlockTable::new(g.blocks, p.bt_entries(), g.block_size(), 1),
            remaps: Vec::new(),
            new_remaps: Vec::new(),
            journal_swapped: false,
            heads: Heads::new(),
            seq: 1,
            cp_number: 1,
            read_only: false,
            replaying: false,
            floor_log: 0,
            floor_user: p.gc_reserve + p.bad_reserve,
            floor_spare: 0,
            checkpointing: false,
            first_program: None,
            phase: Phase::Op,
            op_kills: 0,
            run: None,
            scanned_block: u32::MAX,
            data_next: u32::MAX,
            cp_seq: 0,
            table_cache: 1,
            announced: Vec::new(),
            unannounced_erases: 0,
            anchor_precounted: None,
            replay_counted: Vec::new(),
            seen_seq: 0,
            full_scans: false,
            records_ram: u32::MAX,
        }
    }

    /// Sets the most bytes the packed records of every block may take in RAM before a
    /// mount pages them (from the next [`Store::begin_table_load`]).
    pub fn set_records_ram(&mut self, bytes: usize) {
        self.records_ram = bytes.min(u32::MAX as usize) as u32;
    }

    /// Makes scans of the block table read every page RAM does not hold (`true`) or only
    /// those whose bounds say they could change the choice (`false`, the default).
    pub fn set_full_scans(&mut self, on: bool) {
        self.full_scans = on;
    }

    /// Sets how many block-table pages of wear the table may cache (at most 65,535; from the next
    /// [`Store::begin_table_load`]).
    pub fn set_table_cache(&mut self, pages: usize) {
        self.table_cache = pages.clamp(1, u16::MAX as usize) as u16;
    }

    /// Enters `phase`; returns the phase to go back to.
    pub fn set_phase(&mut self, phase: Phase) -> Phase {
        core::mem::replace(&mut self.phase, phase)
    }

    /// What a program or erase for log `kind` counts as in the current phase.
    fn write_cause(&self, kind: LogKind) -> Cause {
        match self.phase {
            Phase::Gc => Cause::GcCopy,
            Phase::Mount => Cause::Mount,
            Phase::Op | Phase::Checkpoint => Cause::of_log(kind),
        }
    }

    /// Sets the allocation floors of [`Priority::Spare`], [`Priority::Log`] and
    /// [`Priority::User`] (`spare <= log <= user`).
    pub fn set_floors(&mut self, spare: u32, log: u32, user: u32) {
        self.floor_spare = spare;
        self.floor_log = log.max(spare);
        self.floor_user = user.max(self.floor_log);
    }

    /// While a commit folds a spilled update's tree (nodes the checkpoint need, and so the
    /// copy floor, counts already), lets [`Priority::Log`] and [`Priority::Reserve`]
    /// allocations go `blocks` below the copy floor. Returns the floor to give back to
    /// [`Store::restore_copy_floor`] when the fold ends.
    pub fn lower_copy_floor(&mut self, blocks: u32) -> u32 {
        let was = self.floor_log;
        self.floor_log = was.saturating_sub(blocks);
        was
    }

    /// Ends [`Store::lower_copy_floor`].
    pub fn restore_copy_floor(&mut self, was: u32) {
        self.floor_log = was;
    }

    /// Marks the start (`true`) and end of a checkpoint: while it is written,
    /// [`Priority::Reserve`] allocations may take every free block.
    pub fn set_checkpointing(&mut self, on: bool) {
        self.checkpointing = on;
    }

    /// Whether a checkpoint is being written ([`Store::set_checkpointing`]).
    pub fn checkpointing(&self) -> bool {
        self.checkpointing
    }

    /// Free blocks journal appends and GC copies must leave.
    pub fn log_floor(&self) -> u32 {
        self.floor_log
    }

    /// RAM held by the store (itself, as the file system keeps it boxed; block table, heads'
    /// buffers).
    pub fn ram_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.table.ram_bytes()
            + self.remaps.capacity() * 8
            + (self.announced.capacity() + self.replay_counted.capacity()) * 4
            + self.heads.ram_bytes()
            + self.medium.cached_bytes()
    }

    /// RAM of the block table: packed records, cached wear, changed wear (and its entries).
    pub fn table_ram_parts(&self) -> (usize, usize, usize, usize) {
        self.table.ram_parts()
    }

    /// Physical block of a logical block.
    pub fn phys(&self, logical: u32) -> u32 {
        for r in &self.remaps {
            if r.logical == logical {
                return r.physical;
            }
            if r.physical == logical {
                return r.logical;
            }
        }
        logical
    }

    /// Physical byte offset of a logical byte offset (for diagnostics).
    pub fn phys_offset(&self, pos: u64) -> u64 {
        self.phys_pos(pos)
    }

    /// Physical byte offset of a logical byte offset.
    fn phys_pos(&self, pos: u64) -> u64 {
        let bs = self.p.geometry.block_size() as u64;
        let b = (pos / bs) as u32;
        let pb = self.phys(b);
        pb as u64 * bs + pos % bs
    }

    /// Takes the next sequence number.
    pub fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    /// Blocks in the free pool.
    pub fn free_blocks(&self) -> u32 {
        self.table.free_count()
    }

    /// Erase count of the free block the next allocation for a hot log would take (the anchor
    /// area's held-back spares are not in circulation and do not count), or `None` when no
    /// block is free.
    pub fn next_free_ec(&mut self) -> Result<Option<u32>> {
        match self.pick_free(false)? {
            Some(b) => Ok(Some(self.wear(b)?.ec)),
            None => Ok(None),
        }
    }

    /// A free block outside the anchor area, not swapped, to be an anchor there (the least
    /// worn such block among the allocator's candidates), erased, if there is one: mount reads
    /// its slots before it knows the swaps or what a journal wrote after the checkpoint, so
    /// its number must be its place and old contents must not look like a checkpoint
    /// attempt. A block whose erase fails is retired, and the next one tried. Only a block
    /// erased fewer than `below` times is taken. (It took the least worn free block of the
    /// device, and none when that one was in the area or swapped: a roaming anchor that
    /// failed then found no replacement with five blocks free outside the area, and every
    /// checkpoint said `NoSpace`; the model test with faults, SLC seed 4037 at 1,000
    /// operations, at 24.9% of the room for files.)
    pub fn pick_roaming_anchor(&mut self, below: u32) -> Result<Option<u32>> {
        let area = ANCHOR_AREA.min(self.table.len());
        for _ in 0..3 {
            let young = match self.table.young_candidates() {
                Some(y) => y,
                None => {
                    self.find_candidates()?;
                    self.table.young_candidates().unwrap_or_default()
                }
            };
            let unswapped = young.into_iter().find(|&(_, b)| self.phys(b) == b);
            let Some((_, b)) = unswapped else {
                return Ok(None);
            };
            if b < area || self.wear(b)?.ec >= below {
                return Ok(None);
            }
            if self.block(b)?.state() == BlockState::Erased || self.erase_block(b)? {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// Blocks waiting for the next checkpoint to become free.
    pub fn pending_blocks(&self) -> u32 {
        self.table.count(BlockState::PendingErase)
    }

    /// Blocks the application may not take (GC and bad-block reserve, and what a checkpoint
    /// needs).
    pub fn reserve_blocks(&self) -> u32 {
        self.floor_user.max(self.p.gc_reserve + self.p.bad_reserve)
    }

    /// Takes a block from the free pool for log `kind` and erases it. Hot logs get the least
    /// worn block, cold data the most worn one (dynamic wear leveling).
    pub fn alloc_block(&mut self, kind: LogKind, prio: Priority) -> Result<u32> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        if self.replaying {
            debug_assert!(false, "allocation during replay");
            return Err(Error::Corrupt);
        }
        loop {
            let free = self.free_blocks();
            let floor = match prio {
                Priority::User => self.reserve_blocks(),
                Priority::Log => self.floor_log,
                // A spare for a block that failed inside a checkpoint is part of the
                // checkpoint: it may take the last blocks, as the checkpoint may.
                Priority::Spare if self.checkpointing => 0,
                Priority::Spare => self.floor_spare,
                Priority::Reserve if self.checkpointing => 0,
                Priority::Reserve => self.floor_log,
            };
            if free <= floor {
                return Err(Error::NoSpace);
            }
            let b = self
                .pick_free(kind == LogKind::DataCold)?
                .ok_or(Error::NoSpace)?;
            debug_assert_eq!(
                self.block(b)?.live,
                0,
                "allocating block {b} that holds live data: {:?} {:?}",
                self.block(b)?.state(),
                self.block(b)?.kind()
            );
            self.medium.cause = self.write_cause(kind);
            if self.block(b)?.state() == BlockState::Free {
                if !self.announced.contains(&b) {
                    self.unannounced_erases += 1;
                }
                if !self.erase_block(b)? {
                    continue;
                }
            }
            let w = self.wear(b)?.aged(self.cp_number);
            self.table.set_wear(b, w, true);
            self.table.update(b, |e| {
                e.live = 0;
                e.set(BlockState::Head, kind);
            });
            return Ok(b);
        }
    }

    /// Sets a block's state (used by GC, checkpoints and mount).
    pub fn set_state(&mut self, b: u32, s: BlockState) -> Result<()> {
        self.load_record(b)?;
        self.table.set_state(b, s);
        Ok(())
    }

    /// Adds live bytes to the block holding `a`.
    pub fn add_live(&mut self, a: Addr, bytes: u32) -> Result<()> {
        let bs = self.p.geometry.block_size();
        let b = self.p.block_of(a);
        self.load_record(b)?;
        self.table.add_live(b, bytes, bs);
        Ok(())
    }

    /// Records that `bytes` at `a` are no longer live.
    pub fn kill(&mut self, a: Addr, bytes: u32) -> Result<()> {
        if !self.p.addr_valid(a) {
            return Ok(());
        }
        let b = self.p.block_of(a);
        self.load_record(b)?;
        if self.phase == Phase::Op {
            self.op_kills += bytes as u64;
        }
        self.table.kill(b, bytes);
        Ok(())
    }

    /// Bytes that died in the application's operations so far ([`Phase::Op`]).
    pub fn op_kills(&self) -> u64 {
        self.op_kills
    }
    fn head_index(&self, kind: LogKind) -> usize {
        self.p.head_of(kind)
    }

    // ----- state the layers above read and set ------------------------------------------

    /// The format parameters.
    pub fn p(&self) -> Params {
        self.p
    }

    /// Replaces the format parameters (mount, after reading them from a checkpoint; a new
    /// anchor).
    pub fn set_params(&mut self, p: Params) {
        self.p = p;
    }

    /// The next sequence number to hand out.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Sets the next sequence number (mount, replay).
    pub fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The checkpoint counter.
    pub fn cp_number(&self) -> u64 {
        self.cp_number
    }

    /// Sets the checkpoint counter.
    pub fn set_cp_number(&mut self, n: u64) {
        self.cp_number = n;
    }

    /// Refuses (or allows) writes.
    pub fn set_read_only(&mut self, ro: bool) {
        self.read_only = ro;
    }

    /// Marks the start (`true`) and end of a replay.
    pub fn set_replaying(&mut self, on: bool) {
        self.replaying = on;
    }

    /// Device operations issued so far.
    pub fn counts(&self) -> OpCounts {
        self.medium.counts
    }

    /// Their totals (without copying the counts by cause).
    pub fn totals(&self) -> OpTotals {
        self.medium.counts.totals()
    }

    /// The device.
    pub fn flash(&self) -> &F {
        self.medium.flash()
    }

    /// The device, mutably (for inspection: simulated time, counters).
    pub fn flash_mut(&mut self) -> &mut F {
        self.medium.flash_mut()
    }

    /// Gives the device back.
    pub fn into_flash(self) -> F {
        self.medium.into_flash()
    }

    /// The oldest block (logical) on the scrub list, left there.
    pub fn peek_scrub_candidate(&self) -> Option<u32> {
        self.medium.scrub.first().map(|&pb| self.phys(pb))
    }

    /// The oldest block (logical) whose reads needed ECC correction or a retry, taken off the
    /// scrub list.
    pub fn take_scrub_candidate(&mut self) -> Option<u32> {
        if self.medium.scrub.is_empty() {
            return None;
        }
        let pb = self.medium.scrub.remove(0);
        // The list holds physical blocks: a swapped block's logical number is its partner's.
        Some(self.phys(pb))
    }

    /// Block `b`'s record (a bad block outside the table), read from its block-table page
    /// when RAM does not hold it.
    pub fn block(&mut self, b: u32) -> Result<BlockInfo> {
        self.load_record(b)?;
        Ok(self.table.get(b))
    }

    /// Block `b`'s record if RAM holds it.
    pub fn block_in_ram(&self, b: u32) -> Option<BlockInfo> {
        self.table.try_get(b)
    }

    /// The record of block `b` of the anchor area (`b < ANCHOR_AREA`), which RAM always
    /// holds (a bad block outside the area).
    pub fn area_block(&self, b: u32) -> BlockInfo {
        match b < ANCHOR_AREA {
            true => self.table.get(b),
            false => BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0),
        }
    }

    /// Makes RAM hold block `b`'s record (reading its block-table page), so that the
    /// table's lookups and changes of it need no read.
    fn load_record(&mut self, b: u32) -> Result<()> {
        // (Records in RAM, the usual case: nothing to look up twice.)
        if !self.table.pages_records() || b >= self.table.len() || self.table.try_get(b).is_some() {
            return Ok(());
        }
        self.load_bt_records(b / self.table.per_page())
    }

    /// Paged records: caches block-table page `i` (records and wear) from its copy on flash,
    /// as RAM must see them: a pending block and a dead journal block (which the checkpoint
    /// after the copy freed) read as free, and a used block's live bytes gain what the record
    /// on flash leaves out (the block-table nodes in the block, and the provisional data the
    /// copy was written without). A page that cannot be read is an error: unlike wear, the
    /// records are not advice.
    fn load_bt_records(&mut self, i: u32) -> Result<()> {
        if !self.table.pages_records() || self.table.cached_page(i).is_some() {
            return Ok(());
        }
        let recs = self.read_bt_page(i)?;
        let per = self.table.per_page();
        let (len, bs) = (self.p.align(self.p.map_page), self.p.geometry.block_size());
        let mut infos = Vec::with_capacity(recs.len());
        let mut wear = Vec::with_capacity(recs.len());
        for (k, r) in recs.iter().enumerate() {
            let b = i * per + k as u32;
            let mut e = r.info;
            let dead_journal = e.state() == BlockState::Used && e.kind() == LogKind::Journal;
            if e.state() == BlockState::PendingErase || dead_journal {
                e = BlockInfo::new(BlockState::Free, LogKind::DataHot, 0);
            } else if matches!(e.state(), BlockState::Used | BlockState::Head) {
                let (own, prov) = (self.table.own_of(b) * len, self.table.prov_of(b));
                e.live = e.live.saturating_add(own).saturating_add(prov).min(bs);
            }
            infos.push(e);
            wear.push(r.wear);
        }
        self.table.cache_records(i, &infos, wear);
        Ok(())
    }

    /// The records block-table page `i`'s copy on flash holds.
    fn read_bt_page(&mut self, i: u32) -> Result<Vec<BlockRecord>> {
        let a = self.table.page_addr(i);
        if a.is_none() {
            return Err(Error::Corrupt);
        }
        let (_h, bytes) = self.read_node(a, NodeType::BlockTable, self.p.map_page)?;
        let g = self.p.geometry;
        let mut v = Vec::with_capacity(self.p.bt_entries() as usize);
        decode_page(
            bytes.get(NODE_HEADER as usize..).unwrap_or(&[]),
            i,
            self.p.bt_entries(),
            (g.blocks, g.block_size()),
            |r| v.push(r),
        )?;
        Ok(v)
    }

    /// Paged records: the blocks of block-table page `i` whose records a checkpoint just
    /// encoded without the provisional bytes `prov` (block, bytes; sorted) names.
    pub fn set_bt_prov(&mut self, i: u32, prov: &[(u32, u32)]) {
        if !self.table.pages_records() {
            return;
        }
        self.table.set_prov(i, prov);
    }

    /// No closed block of block-table page `i` outside the journal has fewer live bytes than
    /// this (`u32::MAX`: none).
    pub fn bt_page_used_lo(&self, i: u32) -> u32 {
        self.table.used_lo(i)
    }

    /// Whether block-table page `i` may hold an `Erased` or `Reserved` block.
    pub fn bt_page_holds_erased(&self, i: u32) -> bool {
        self.table.erased_in_page(i) > 0
    }

    /// Whether the block table's records are paged ([`BlockTable::pages_records`]).
    pub fn records_paged(&self) -> bool {
        self.table.pages_records()
    }

    /// Keeps block-table page `i` cached (paged records) until [`Store::unpin_bt_page`]: a
    /// checkpoint writing it must not lose the records it marked as written.
    pub fn pin_bt_page(&mut self, i: u32) -> Result<()> {
        self.load_bt_records(i)?;
        self.table.pin(i);
        Ok(())
    }

    /// Ends [`Store::pin_bt_page`].
    pub fn unpin_bt_page(&mut self) {
        self.table.unpin();
    }

    /// Replaces block `b`'s record.
    pub fn set_block(&mut self, b: u32, e: BlockInfo) -> Result<()> {
        self.load_record(b)?;
        self.table.set(b, e);
        Ok(())
    }

    /// Replaces block `b`'s record without marking its block-table page: for a change the
    /// record on flash already implies (a pending block becoming free; see the checkpoint).
    pub fn set_block_unchanged(&mut self, b: u32, e: BlockInfo) -> Result<()> {
        self.load_record(b)?;
        self.table.set_unmarked(b, e);
        Ok(())
    }

    /// Counts the block table's sums again from its records, and checks its page bounds
    /// where RAM holds the wear (debug checks).
    pub fn check_sums(&self) -> core::result::Result<(), &'static str> {
        self.table.check_sums()?;
        self.table.check_bounds()
    }

    /// Blocks in state `s`.
    pub fn count(&self, s: BlockState) -> u32 {
        self.table.count(s)
    }

    /// Live bytes of the blocks that are neither bad, anchors nor the journal's.
    pub fn live_outside_journal(&self) -> u64 {
        self.table.live_outside_journal()
    }

    /// The closed (`Used`) blocks of log `kind`: how many, and their live bytes added up.
    pub fn used_of(&self, kind: LogKind) -> (u32, u64) {
        self.table.used_of(kind)
    }

    /// The least live count among the closed blocks of log `kind` (`None`: none).
    pub fn used_min_live(&mut self, kind: LogKind) -> Option<u32> {
        if self.table.pages_records() && self.table.used_min_unknown(kind) {
            // Paged: the pages whose bound could hold a lower count than found so far are
            // read, the lowest bound first.
            let mut pages: Vec<(u32, u32)> = (0..self.table.page_count())
                .map(|i| (self.table.used_lo(i), i))
                .filter(|x| x.0 != u32::MAX)
                .collect();
            crate::sort::sort(&mut pages);
            let per = self.table.per_page();
            let mut best = u32::MAX;
            for (lo, i) in pages {
                if lo >= best {
                    break;
                }
                // (A page that cannot be read leaves the count unknown: no bound then.)
                if self.load_bt_records(i).is_err() {
                    return Some(0);
                }
                for b in i * per..((i + 1) * per).min(self.table.len()) {
                    let e = self.table.get(b);
                    if e.state() == BlockState::Used && e.kind() == kind {
                        best = best.min(e.live);
                    }
                }
            }
            self.table.set_used_min(kind, best);
        }
        self.table.used_min_live(kind)
    }

    /// The number and record of every block whose record RAM holds (for diagnostics: a scan
    /// of every block is [`Store::scan_wear`]).
    pub fn blocks_in_ram(&self) -> impl Iterator<Item = (u32, BlockInfo)> + '_ {
        // (Every block when none is paged, without a vector of them.)
        let paged = self.table.pages_records();
        let some = if paged {
            self.table.in_ram()
        } else {
            Vec::new()
        };
        let all = if paged { 0 } else { self.table.len() };
        some.into_iter()
            .chain((0..all).map(move |b| (b, self.table.get(b))))
    }

    /// Number of blocks.
    pub fn block_count(&self) -> u32 {
        self.table.len()
    }

    /// Empties the block table for a mount to load it page by page
    /// ([`Store::load_bt_page`], [`Store::load_bt_delta`]): every block reads as bad until
    /// its page is loaded.
    pub fn begin_table_load(&mut self) {
        // The old table goes first: a mount holds one table, not two.
        self.table = BlockTable::for_load(0, 1, 1, 1, false, 1);
        let g = self.p.geometry;
        let width = 6 + (32 - g.block_size().leading_zeros()) as usize;
        let packed = (g.blocks as usize * width).div_ceil(8);
        let records_ram = self.records_ram as usize;
        // (Without the `paged-records` feature every record stays in RAM.)
        let paged = cfg!(feature = "paged-records") && packed > records_ram;
        // (Paged records: the cached pages, records and wear, take at most an eighth of the records'
        // RAM, but four pages at least.)
        let cache = match paged {
            true => {
                let page = self.p.bt_entries() as usize * 12 + 64;
                (self.table_cache as usize).min((records_ram / 8 / page).max(4))
            }
            false => self.table_cache as usize,
        };
        let pages = g.blocks.div_ceil(self.p.bt_entries().max(1));
        // (A table that pages caches three pages at least, `BlockTable::for_load`.)
        let group = match paged {
            true => block_table::figure_group(pages, records_ram, cache.max(3)),
            false => 1,
        };
        self.table = BlockTable::for_load(
            g.blocks,
            self.p.bt_entries(),
            g.block_size(),
            cache,
            paged,
            group,
        );
    }

    /// Loads block-table page `i`, read at `a`.
    pub fn load_bt_page(&mut self, i: u32, a: Addr, recs: &[BlockRecord]) {
        self.table.load_page(i, a, recs);
    }

    /// Loads a record a delta node carried (it differs from its page).
    pub fn load_bt_delta(&mut self, b: u32, rec: BlockRecord) {
        self.table.load_delta(b, rec);
    }

    /// Where the newest copy of block-table page `i` is on flash (`Addr::NONE`: nowhere).
    pub fn bt_page_addr(&self, i: u32) -> Addr {
        self.table.page_addr(i)
    }

    /// Where the newest copy of every block-table page is.
    pub fn bt_page_addrs(&self) -> &[Addr] {
        self.table.page_addrs()
    }

    /// Block-table page `i` was written at `a`, with the wear RAM has now.
    pub fn bt_page_written(&mut self, i: u32, a: Addr) {
        self.table.page_written(i, a);
    }

    /// Block-table page `i`'s wear when RAM does not cache the page (read from flash,
    /// [`Store::bt_page_wear`]); `None` when it does. With [`Store::page_wear_in`], a caller
    /// gets the page's wear without copying a cached page.
    pub fn uncached_bt_page_wear(&mut self, i: u32) -> Result<Option<Vec<Wear>>> {
        // (Paged records: the page is cached, records and wear, for the caller to use both.)
        self.load_bt_records(i)?;
        match self.table.cached_page(i) {
            Some(_) => Ok(None),
            None => self.bt_page_wear(i).map(Some),
        }
    }

    /// Page `i`'s wear: `read` ([`Store::uncached_bt_page_wear`]) or the cached page.
    pub fn page_wear_in<'a>(&'a self, i: u32, read: &'a Option<Vec<Wear>>) -> &'a [Wear] {
        read.as_deref()
            .or_else(|| self.table.cached_page(i))
            .unwrap_or(&[])
    }

    /// Wear entries RAM keeps besides its cache of block-table pages (see
    /// [`BlockTable::wear_backlog`]).
    pub fn wear_backlog(&self) -> usize {
        self.table.wear_backlog()
    }

    /// During replay: block `b`, which the checkpoint's table calls `Free`, was erased since
    /// that checkpoint (replay found something written after it there, a record names it as
    /// taken, or its announced erase shows): its erase count says so, once (a block freed
    /// comes back only with a checkpoint, so it is allocated, and erased, at most once
    /// between two). (An `Erased` block is allocated without an erase.)
    pub fn count_replayed_erase(&mut self, b: u32) -> Result<()> {
        if b >= self.table.len() {
            return Ok(());
        }
        if self.block(b)?.state() == BlockState::Free && !self.replay_counted.contains(&b) {
            self.replay_counted.push(b);
            // (Wear only: a page that cannot be read leaves the count as it was.)
            if let Ok(w) = self.wear(b) {
                let w = Wear {
                    ec: w.ec.saturating_add(1),
                    ..w
                };
                self.table.set_wear(b, w, true);
            }
        }
        Ok(())
    }

    /// Block `b`'s erase count and age if RAM holds them.
    pub fn wear_in_ram(&self, b: u32) -> Option<Wear> {
        self.table.wear(b)
    }

    /// Block `b`'s erase count and age, read from its block-table page when RAM does not
    /// hold them.
    pub fn wear(&mut self, b: u32) -> Result<Wear> {
        if let Some(w) = self.table.wear(b) {
            return Ok(w);
        }
        let i = b / self.table.per_page();
        if self.table.pages_records() {
            self.load_bt_records(i)?;
            return self.table.wear(b).ok_or(Error::Corrupt);
        }
        let v = self.read_bt_wear(i)?;
        self.table.cache_page(i, v);
        self.table.wear(b).ok_or(Error::Corrupt)
    }

    /// The erase count and age of every block of block-table page `i`, as they are now
    /// (read from the page when RAM does not hold it; not cached: scans go through every
    /// page).
    pub fn bt_page_wear(&mut self, i: u32) -> Result<Vec<Wear>> {
        self.load_bt_records(i)?;
        if let Some(v) = self.table.page_wear(i) {
            return Ok(v);
        }
        let mut v = self.read_bt_wear(i)?;
        self.table.apply_changes(i, &mut v);
        #[cfg(debug_assertions)]
        if let Err(e) = self.table.bounds_hold(i, &v) {
            panic!("block-table page {i} read from flash: {e}");
        }
        self.table.page_seen(i, &v);
        Ok(v)
    }

    /// The wear block-table page `i`'s copy on flash records.
    ///
    /// Wear is advice (which free block to take, which used one to move), not data: a page
    /// that cannot be read (an uncorrectable read, a bad CRC) gives its blocks the mean erase
    /// count of the blocks in circulation (0 when not known) and the current checkpoint as
    /// their age, is cached as if read, and is written whole by the next checkpoint. Those
    /// blocks' erase counts are lost; writing goes on. (Only a power loss is an error.)
    fn read_bt_wear(&mut self, i: u32) -> Result<Vec<Wear>> {
        match self.read_bt_wear_copy(i) {
            Err(Error::PowerLoss) => Err(Error::PowerLoss),
            Ok(v) => Ok(v),
            Err(_) => {
                let mean = self
                    .table
                    .wl_figures()
                    .filter(|f| f.n > 0)
                    .map_or(0, |f| (f.sum / f.n) as u32);
                let v = alloc::vec![Wear { ec: mean, age: 0 }.aged(self.cp_number); self.table.page_len(i)];
                self.table.mark_page(i);
                self.table.cache_page(i, v.clone());
                Ok(v)
            }
        }
    }

    /// [`Store::read_bt_wear`], failing when the page cannot be read.
    fn read_bt_wear_copy(&mut self, i: u32) -> Result<Vec<Wear>> {
        Ok(self.read_bt_page(i)?.iter().map(|r| r.wear).collect())
    }

    /// Calls `f` with every block's number, record and wear, a block-table page at a time
    /// (reading the pages RAM does not hold).
    pub fn scan_wear(&mut self, mut f: impl FnMut(u32, BlockInfo, Wear)) -> Result<()> {
        let per = self.table.per_page();
        for i in 0..self.table.page_count() {
            let read = self.uncached_bt_page_wear(i)?;
            for (k, w) in self.page_wear_in(i, &read).iter().enumerate() {
                let b = i * per + k as u32;
                f(b, self.table.get(b), *w);
            }
        }
        Ok(())
    }

    /// Static wear leveling's figures ([`WlFigures`]): kept up to date by the table; after a
    /// change it could not follow, the largest erase count or the coldest block found again
    /// (reading only the pages RAM does not hold whose bounds could hold them), or, when the
    /// totals were lost too, everything counted again over every block.
    pub fn wl_figures(&mut self) -> Result<WlFigures> {
        if let Some(f) = self.table.wl_figures() {
            return Ok(f);
        }
        let f = match self.table.wl_partial() {
            Some((f, max, cold)) => self.find_wl_figures(f, max, cold)?,
            None => self.count_wl_figures(|_| false)?,
        };
        self.table.set_wl_figures(f);
        Ok(f)
    }

    /// Finds the largest erase count (`max`) and the coldest block (`cold`) of `f` again:
    /// from the pages RAM holds, then from each other page whose bounds say it could change
    /// them ([`BlockTable::wl_ec_range`]).
    fn find_wl_figures(&mut self, mut f: WlFigures, max: bool, cold: bool) -> Result<WlFigures> {
        if max {
            f.max = 0;
        }
        if cold {
            f.coldest = None;
        }
        let per = self.table.per_page();
        for in_ram in [true, false] {
            for i in 0..self.table.page_count() {
                if self.table.page_in_ram(i) != in_ram {
                    continue;
                }
                let blocks = i * per..((i + 1) * per).min(self.table.len());
                if !in_ram && !self.full_scans {
                    let (lo, hi) = self.table.wl_ec_range(i);
                    let first = blocks.start;
                    let colder = f
                        .coldest
                        .is_none_or(|(ec, b)| lo < ec || (lo == ec && first < b));
                    // (Paged, the bounds alone say it: an empty page's are empty.)
                    let paged = self.table.pages_records();
                    let any = |want: fn(BlockInfo) -> bool| {
                        paged || blocks.clone().any(|b| want(self.table.get(b)))
                    };
                    let for_max = max && hi > f.max && any(BlockInfo::in_circulation);
                    let for_cold = cold && colder && any(BlockInfo::wl_movable);
                    if !for_max && !for_cold {
                        continue;
                    }
                }
                let read = self.uncached_bt_page_wear(i)?;
                for (b, w) in blocks.zip(self.page_wear_in(i, &read)) {
                    let e = self.table.get(b);
                    if max && e.in_circulation() {
                        f.max = f.max.max(w.ec);
                    }
                    if cold && e.wl_movable() && f.coldest.is_none_or(|c| (w.ec, b) < c) {
                        f.coldest = Some((w.ec, b));
                    }
                }
            }
        }
        Ok(f)
    }

    /// [`WlFigures`] counted over every block, the blocks `skip` names left out of the
    /// coldest.
    pub fn count_wl_figures(&mut self, skip: impl Fn(u32) -> bool) -> Result<WlFigures> {
        let mut f = WlFigures::default();
        self.scan_wear(|b, e, w| f.add(b, e, w.ec, !skip(b)))?;
        Ok(f)
    }

    /// Whether RAM holds every block's erase count and age.
    #[cfg(debug_assertions)]
    pub fn all_wear_in_ram(&self) -> bool {
        self.table.all_wear_in_ram()
    }

    /// The free block to allocate next: the least worn one, or the most worn one for data
    /// that is likely to stay put (`want_old`); the lower block among equals.
    ///
    /// The last `ANCHOR_SPARES` free blocks of the anchor area that can be anchors (not
    /// remapped) are taken only when no other is free: a failing anchor is replaced by such a
    /// block, and with none the file system could not write a checkpoint again.
    fn pick_free(&mut self, want_old: bool) -> Result<Option<u32>> {
        let area = ANCHOR_AREA.min(self.table.len());
        let free = |st: &Self, b: u32| st.table.get(b).state().is_free();
        let spare_only = (0..area)
            .filter(|&b| free(self, b) && self.phys(b) == b)
            .count()
            <= ANCHOR_SPARES as usize;
        // Outside the anchor area: the table's candidates, found again when they may be stale.
        let outside = match self.table.candidate(want_old) {
            Some(c) => c,
            None => {
                self.find_candidates()?;
                self.table.candidate(want_old).flatten()
            }
        };
        let better = |a: (u32, u32), b: (u32, u32)| {
            if want_old {
                a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
            } else {
                a < b
            }
        };
        let passes: &[bool] = if spare_only { &[true, false] } else { &[false] };
        for &skip_area in passes {
            let mut best: Option<(u32, u32)> = None;
            for b in 0..area {
                if !free(self, b) || (skip_area && self.phys(b) == b) {
                    continue;
                }
                let c = (self.wear(b)?.ec, b);
                if best.is_none_or(|x| better(c, x)) {
                    best = Some(c);
                }
            }
            if let Some(c) = outside {
                if best.is_none_or(|x| better(c, x)) {
                    best = Some(c);
                }
            }
            if let Some((_, b)) = best {
                return Ok(Some(b));
            }
        }
        Ok(None)
    }

    /// The blocks the allocator may erase next that no `Erasing` record announced since the
    /// last checkpoint: the `Free` blocks (contents unknown, erased when taken) among its
    /// candidates by wear and in the anchor area. Empty while replaying or read-only, on a
    /// device at its reserve (the records would take journal room that the checkpoints which
    /// give blocks back need), and on NAND: there a record is durable only once the journal
    /// head's page is programmed, and a page programmed for each record took the room that a
    /// 24-block SLC device with failing programs needed after cuts
    /// (`every_cut_nand_mixed_faults`: 3 of 946 cuts ended in ENOSPC below half the room for
    /// files or at unmount; with the page programmed only before an erase, 7 of 885, one in
    /// `EIO`). NAND keeps the erases replay finds evidence of (DESIGN §15 item 6).
    pub fn erase_announcement(&mut self) -> Result<Vec<u32>> {
        if self.read_only
            || self.replaying
            || self.free_blocks() <= self.reserve_blocks()
            || self.p.geometry.flash_kind() == FlashKind::Nand
        {
            return Ok(Vec::new());
        }
        if self.table.candidate(false).is_none() || self.table.candidate(true).is_none() {
            self.find_candidates()?;
        }
        let area = ANCHOR_AREA.min(self.table.len());
        let mut out = Vec::new();
        for b in (0..area).chain(self.table.candidate_blocks()) {
            if self.block(b)?.state() == BlockState::Free
                && !self.announced.contains(&b)
                && !out.contains(&b)
            {
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Blocks an `Erasing` record now on flash announced.
    pub fn announce(&mut self, blocks: &[u32]) {
        self.announced.extend_from_slice(blocks);
    }

    /// The end of a mount's replay: forgets which blocks it counted erases of.
    pub fn end_replay_counts(&mut self) {
        self.replay_counted = Vec::new();
    }

    /// A checkpoint is on flash: a mount reads the announcements of its journal only, so
    /// every erase from here on needs one there.
    pub fn clear_announced(&mut self) {
        self.announced.clear();
    }

    /// Erases of `Free` blocks that no record had announced (see [`Store::announce`]).
    pub fn unannounced_erases(&self) -> u64 {
        self.unannounced_erases
    }

    /// During mount, after replay: counts an erase of each block an `Erasing` record of the
    /// journal announced that the checkpoint's table calls `Free` and whose first page was
    /// written since the checkpoint (a node or page tag whose sequence number is at least
    /// `next_seq`, the checkpoint's). One that begins with something written before, or with
    /// nothing, shows no erase (a free block may never have been written, so an erased first
    /// page proves nothing: the erase of a block cut before its first program stays
    /// uncounted). A torn first page is passed over, as [`Store::count_taken_erases`] passes
    /// it: the cut may have come before the checkpoint, and a block torn in an erase or a
    /// program reads differently at every mount and stays free, so each later mount that
    /// finds it announced again would count it again. (Counted, they were: a free block
    /// torn in an erase is a candidate of every session, and on 64 blocks of 64 KiB NOR
    /// 1,080 chained cuts counted 240 erases too many, one block 3 erases ahead after
    /// three recoveries in a row.) Blocks replay found something in were counted already
    /// and are no longer `Free`; a block named twice is counted once
    /// ([`Store::count_replayed_erase`]).
    pub fn count_announced_erases(&mut self, blocks: &[u32], next_seq: u64) -> Result<()> {
        for &b in blocks {
            if b < self.table.len()
                && self.block(b)?.state() == BlockState::Free
                && self.first_write(b, next_seq)? == FirstWrite::Since
            {
                self.count_replayed_erase(b)?;
            }
        }
        Ok(())
    }

    /// Notes sequence number `seq` found at the start of a block written since the checkpoint.
    fn saw_seq(&mut self, seq: u64) {
        self.seen_seq = self.seen_seq.max(seq.saturating_add(1));
    }

    /// One past the highest sequence number this mount found at the start of a block written
    /// since the checkpoint (0: none). The session a cut ended may have written nodes that
    /// nothing replay reads names (unsynced data in a block it took); the numbers handed out
    /// after the mount must be above them, or the next mount would take those blocks for
    /// written since its checkpoint and count their erases again.
    pub fn seen_seq(&self) -> u64 {
        self.seen_seq
    }

    /// What block `b` begins with, against sequence number `seq` (a checkpoint's next one).
    /// NAND reads the first page's tag alone (the tag holds 32 bits of the number: before
    /// `seq` within half the range), NOR the first node header.
    fn first_write(&mut self, b: u32, seq: u64) -> Result<FirstWrite> {
        let g = self.p.geometry;
        let pos = b as u64 * g.block_size() as u64;
        match g.flash_kind() {
            FlashKind::Nand => {
                let page = (pos / g.page_size as u64) as u32;
                Ok(match self.read_tagged_page(page, &mut []) {
                    Ok((st, Ok(Some(t)))) if st != EccStatus::Uncorrectable => {
                        if (seq as u32).wrapping_sub(t.seq).wrapping_sub(1) < 1 << 31 {
                            FirstWrite::Before
                        } else {
                            let ahead = t.seq.wrapping_sub(seq as u32);
                            self.saw_seq(seq + u64::from(ahead));
                            FirstWrite::Since
                        }
                    }
                    Ok((_, Ok(None))) => FirstWrite::Nothing,
                    Ok(_) | Err(Error::Io) | Err(Error::Corrupt) => FirstWrite::Torn,
                    Err(e) => return Err(e),
                })
            }
            FlashKind::Nor => {
                let mut buf = [0u8; NODE_HEADER as usize];
                match self.read(pos, &mut buf) {
                    Ok(()) => {}
                    Err(Error::Io) | Err(Error::Corrupt) => return Ok(FirstWrite::Torn),
                    Err(e) => return Err(e),
                }
                Ok(match node::probe(&buf, g.block_size()) {
                    Probe::Header(h) if h.seq < seq => FirstWrite::Before,
                    Probe::Header(h) if h.seq - seq < 1 << 31 => {
                        self.saw_seq(h.seq);
                        FirstWrite::Since
                    }
                    // The header has no CRC of its own: one cut in its program may hold any
                    // number, and one no session could have handed out since the checkpoint
                    // is torn, as a NAND tag whose check fails is (taken for written since,
                    // every later mount would count the same block's erase again).
                    Probe::Header(_) => FirstWrite::Torn,
                    Probe::Garbage => FirstWrite::Torn,
                    Probe::Padding => FirstWrite::Before,
                    Probe::Erased => FirstWrite::Nothing,
                })
            }
        }
    }

    /// During a mount after a power cut, after replay's first pass (bad-block swaps applied)
    /// and before its second (the table still the checkpoint's): counts the erase of every
    /// free block the allocator took since the checkpoint that shows it, whether or not
    /// anything replay applies is in it (unsynced data a cut lost, a journal block the cut
    /// left unnamed). Between two checkpoints the free pool only shrinks (collected blocks
    /// come back with a checkpoint), and [`Store::pick_free`] takes the least worn free
    /// block, or the most worn one for cold data, lower blocks first among equals: the
    /// blocks taken since are the first ones of those two orders over the checkpoint's free
    /// blocks outside the anchor area (the allocation changes no other free block's count).
    /// Each order is walked from its start up to the first block written before the
    /// checkpoint or reading erased (not taken, or the last one taken and cut before its
    /// first program, whose erase is still lost: DESIGN.md §15 item 6), or [`TAKEN_WALK`]
    /// blocks, counting the blocks written since; the anchor area's free blocks are each
    /// looked at. A block whose first page is torn (cut in its first program or its erase,
    /// since the checkpoint or before it: each later mount would count it again) is passed
    /// over uncounted. `Erased` blocks are taken without an erase: the walk passes those
    /// written since, counting nothing.
    pub fn count_taken_erases(&mut self, next_seq: u64) -> Result<()> {
        let n = self.table.len();
        for b in 0..ANCHOR_AREA.min(n) {
            if self.block(b)?.state() == BlockState::Free
                && !self.replay_counted.contains(&b)
                && self.first_write(b, next_seq)? == FirstWrite::Since
            {
                self.count_replayed_erase(b)?;
            }
        }
        // Sorted, so that the candidate search skips them by a binary search.
        let mut seen: Vec<u32> = Vec::new();
        for old in [false, true] {
            let mut walked = 0;
            'walk: while walked < TAKEN_WALK {
                self.find_candidates_skipping(&seen)?;
                let list = self.table.candidate_list(old);
                if list.is_empty() {
                    break;
                }
                for b in list {
                    if let Err(i) = seen.binary_search(&b) {
                        seen.insert(i, b);
                    }
                    walked += 1;
                    let first = if self.replay_counted.contains(&b) {
                        FirstWrite::Since
                    } else {
                        self.first_write(b, next_seq)?
                    };
                    match first {
                        // Not taken in this order, or the last one taken, cut before its
                        // first program: nothing after it was taken in this order (blocks
                        // the other order took are found by its own walk).
                        FirstWrite::Before | FirstWrite::Nothing => break 'walk,
                        // A torn first page may be older than the checkpoint (a block cut
                        // in its first program stays free, and each mount would count it
                        // again): passed over, uncounted.
                        FirstWrite::Torn => {}
                        FirstWrite::Since => self.count_replayed_erase(b)?,
                    }
                    if walked == TAKEN_WALK {
                        break 'walk;
                    }
                }
            }
        }
        // The lists were found without the blocks walked: find them again when next asked.
        self.table.forget_candidates();
        Ok(())
    }

    /// Offers the table every free block outside the anchor area as a candidate, reading the
    /// wear of the block-table pages that have one and whose bounds say one could be chosen.
    fn find_candidates(&mut self) -> Result<()> {
        self.find_candidates_skipping(&[])
    }

    /// [`Store::find_candidates`], leaving out the blocks in `skip`, sorted (a mount's walk of
    /// the blocks taken since the checkpoint, [`Store::count_taken_erases`]).
    fn find_candidates_skipping(&mut self, skip: &[u32]) -> Result<()> {
        let (n, per) = (self.table.len(), self.table.per_page());
        self.table.begin_candidates();
        for i in 0..self.table.page_count() {
            let first = (i * per).max(ANCHOR_AREA);
            let end = ((i + 1) * per).min(n);
            let is_free = |t: &BlockTable, b: u32| {
                t.get(b).state().is_free() && skip.binary_search(&b).is_err()
            };
            if self.table.pages_records() && !self.table.page_in_ram(i) {
                // Paged: the page's count of free blocks and its bounds decide whether to
                // read it (the blocks to skip are few, and counted as offered).
                let n_free = self.table.free_in_page(i);
                if n_free == 0 || (!self.full_scans && !self.table.could_offer(i, |_| n_free)) {
                    continue;
                }
            } else if !(first..end).any(|b| is_free(&self.table, b))
                || (!self.table.page_in_ram(i)
                    && !self.full_scans
                    && !self.table.could_offer(i, |t| {
                        (first..end).filter(|&b| is_free(t, b)).count() as u32
                    }))
            {
                continue;
            }
            let read = self.uncached_bt_page_wear(i)?;
            let v = self.page_wear_in(i, &read);
            let offers: Vec<(u32, u32)> = (first..end)
                .filter(|&b| is_free(&self.table, b))
                .map(|b| (b, v.get((b - i * per) as usize).map_or(0, |w| w.ec)))
                .collect();
            for (b, ec) in offers {
                self.table.offer(b, ec);
            }
        }
        self.table.end_candidates();
        Ok(())
    }

    /// Block-table pages: how many there are, and which changed since last written.
    pub fn bt_page_count(&self) -> u32 {
        self.table.page_count()
    }

    /// Whether block-table page `i` changed since it was last written.
    pub fn bt_page_dirty(&self, i: u32) -> bool {
        self.table.page_dirty(i)
    }

    /// Whether block-table page `i` must be written whole by the next checkpoint.
    pub fn bt_page_forced(&self, i: u32) -> bool {
        self.table.page_forced(i)
    }

    /// Whether RAM caches the wear of block-table page `i` (the changed erase counts of a page
    /// it does not cache are kept apart: [`Store::wear_backlog`]).
    pub fn bt_page_cached(&self, i: u32) -> bool {
        self.table.cached_page(i).is_some()
    }

    /// Whether RAM holds the wear of block-table page `i`'s blocks: reading it costs
    /// nothing.
    pub fn bt_page_in_ram(&self, i: u32) -> bool {
        self.table.page_in_ram(i)
    }

    /// Whether a scan must read block-table page `i` whatever its bounds say (it is not in
    /// RAM, and [`Store::set_full_scans`] is on).
    pub fn bt_page_read_anyway(&self, i: u32) -> bool {
        self.full_scans && !self.table.page_in_ram(i)
    }

    /// The oldest age a block of block-table page `i` may have: a bound RAM keeps for every
    /// page, so that victim choice reads only pages that may hold a better victim.
    pub fn bt_page_oldest(&self, i: u32) -> Option<u32> {
        self.table.oldest_age(i)
    }

    /// Records of block-table page `i` that differ from the page on flash.
    pub fn bt_page_changed(&self, i: u32) -> u32 {
        self.table.page_changed(i)
    }

    /// Blocks whose records differ from their block-table pages on flash, in block order.
    pub fn bt_changed_blocks(&self) -> Vec<u32> {
        self.table.changed_blocks()
    }

    /// Marks block-table page `i` to be written whole by the next checkpoint.
    pub fn mark_bt_page(&mut self, i: u32) {
        // (Paged: a page marked while cached keeps its records in RAM as changed ones.)
        self.table.mark_page(i);
    }

    /// Marks block-table page `i` as written.
    pub fn clear_bt_page(&mut self, i: u32) {
        self.table.clear_page(i);
    }

    /// Credits (`add`) or debits the block holding the block-table page at `a` with its
    /// bytes, without marking a record as changed: the records on flash do not count
    /// block-table pages (the checkpoint subtracts them, the mount adds them back).
    pub fn account_bt_page(&mut self, a: Addr, add: bool) -> Result<()> {
        if !self.p.addr_valid(a) {
            return Ok(());
        }
        let (b, len) = (self.p.block_of(a), self.p.align(self.p.map_page));
        // (First the record as flash and the nodes counted so far give it, then the change.)
        self.load_record(b)?;
        self.table.own_change(b, add);
        if add {
            self.table
                .add_live_quiet(b, len, self.p.geometry.block_size());
        } else {
            self.table.kill_quiet(b, len);
        }
        Ok(())
    }

    /// The heads.
    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    /// Head number `h`.
    pub fn head_at(&self, h: usize) -> &Head {
        &self.heads[h]
    }

    /// Sets head number `h` (mount: continue where a checkpoint left it).
    pub fn set_head(&mut self, h: usize, head: Head) {
        self.heads[h] = head;
    }

    /// The remap table (bad-block swaps).
    pub fn remaps(&self) -> &[Remap] {
        &self.remaps
    }

    /// Replaces the remap table (mount: a checkpoint's list).
    pub fn set_remaps(&mut self, r: Vec<Remap>) {
        self.remaps = r;
    }

    /// Swaps made since the last call, oldest first (for the journal to record).
    pub fn take_new_remaps(&mut self) -> Vec<Remap> {
        core::mem::take(&mut self.new_remaps)
    }

    /// Queues a swap for the journal as `swap_out_bad_block` does (tests: two swaps of one
    /// block between journal writes take a device that fails twice in a row).
    #[cfg(test)]
    pub(crate) fn queue_new_remap(&mut self, r: Remap) {
        self.new_remaps.push(r);
    }

    /// Forgets the swaps not yet journaled (a checkpoint records the whole table).
    pub fn clear_new_remaps(&mut self) {
        self.new_remaps.clear();
        self.journal_swapped = false;
    }

    /// Whether a journal block was swapped out since the last checkpoint (see
    /// [`Store::clear_new_remaps`]): nothing written since may be called durable before a
    /// checkpoint records the swap.
    pub fn journal_swapped(&self) -> bool {
        self.journal_swapped
    }

    /// Applies a swap found in the journal: logical `logical` lives on `physical`, and the
    /// logical block `physical` is bad.
    pub fn apply_remap(&mut self, logical: u32, physical: u32) -> Result<()> {
        let blocks = self.p.geometry.blocks;
        if logical >= blocks
            || physical >= blocks
            || self
                .remaps
                .iter()
                .any(|r| r.logical == logical && r.physical == physical)
        {
            return Ok(());
        }
        self.remaps.retain(|r| {
            r.logical != logical
                && r.physical != logical
                && r.logical != physical
                && r.physical != physical
        });
        if logical != physical {
            self.remaps.push(Remap { logical, physical });
        }
        self.mark_swapped_spare_bad(physical)
    }

    /// The logical block numbered `physical` of a swap lives on the failed physical block: bad,
    /// whatever the table said (erase count kept).
    fn mark_swapped_spare_bad(&mut self, physical: u32) -> Result<()> {
        if self.block(physical)?.state() != BlockState::Bad {
            self.table.set(
                physical,
                BlockInfo::new(BlockState::Bad, LogKind::DataHot, 0),
            );
        }
        Ok(())
    }

    /// After loading a checkpoint's table: every swap in the remap list makes its spare's
    /// logical number bad, also a swap made while that checkpoint was written (after its table
    /// was copied), which the table does not show.
    pub fn mark_remapped_spares_bad(&mut self) -> Result<()> {
        let spares: Vec<u32> = self
            .remaps
            .iter()
            .filter(|r| r.logical != r.physical)
            .map(|r| r.physical)
            .collect();
        for p in spares {
            self.mark_swapped_spare_bad(p)?;
        }
        Ok(())
    }

    /// Before the next program of any kind, node `nb` goes into log `kind`, one page after
    /// where its head stands (the page in between stays unused), and is made durable (`None`:
    /// nothing). The journal's session marker: the store writes it without knowing what it
    /// is.
    pub fn set_first_program(&mut self, first: Option<(LogKind, NodeBuilder)>) {
        self.first_program = first;
    }

    /// Whether a first-program node is still waiting (nothing has been programmed since it
    /// was set).
    pub fn first_program_pending(&self) -> bool {
        self.first_program.is_some()
    }

    /// Writes the first-program node if one is waiting (every writer calls this first).
    pub fn program_first(&mut self) -> Result<()> {
        if self.replaying {
            return Ok(());
        }
        if let Some((kind, nb)) = self.first_program.take() {
            self.skip_past_next_page(kind)?;
            self.write_node(kind, nb, Priority::Reserve)?;
            self.flush(kind)?;
        }
        Ok(())
    }

    // ----- raw access for the anchors (checkpoint slots) ----------------------------------

    /// Reads `buf.len()` bytes at logical byte offset `pos` straight from flash (no head
    /// buffers), returning the ECC status.
    pub fn read_raw(&mut self, pos: u64, buf: &mut [u8]) -> Result<EccStatus> {
        let pp = self.phys_pos(pos);
        self.medium.cause = match self.phase {
            Phase::Mount => Cause::Mount,
            _ => Cause::Checkpoint,
        };
        self.medium.read_status(pp, buf)
    }

    /// Programs `data` (and `oob` on NAND) at logical byte offset `pos`, outside any head.
    pub fn program_raw(
        &mut self,
        pos: u64,
        data: &[u8],
        oob: &[u8],
    ) -> core::result::Result<(), FlashError> {
        let pp = self.phys_pos(pos);
        self.medium.cause = Cause::Checkpoint;
        self.medium.program(pp, data, oob)
    }

    /// Erases logical block `b` outside the allocator (an anchor), counting the erase unless
    /// [`Store::precount_anchor_erase`] did.
    pub fn erase_raw(&mut self, b: u32) -> core::result::Result<(), FlashError> {
        let pb = self.phys(b);
        if self.anchor_precounted == Some(b) {
            self.anchor_precounted = None;
        } else {
            self.bump_erase_count(b);
        }
        self.medium.cause = Cause::Checkpoint;
        self.medium.erase(pb)
    }

    /// Counts the erase of anchor `b` that the checkpoint being written will make when it
    /// starts that block, before the checkpoint's table is written (once: a checkpoint that
    /// failed before its erase leaves the count for the next one).
    pub fn precount_anchor_erase(&mut self, b: u32) {
        if self.anchor_precounted != Some(b) {
            self.bump_erase_count(b);
            self.anchor_precounted = Some(b);
        }
    }

    /// Adds one to block `b`'s erase count (an anchor's; one outside the anchor area may need
    /// its block-table page read: a page that cannot be read leaves the count as it was).
    pub fn bump_erase_count(&mut self, b: u32) {
        let Ok(w) = self.wear(b) else {
            return;
        };
        self.table.set_wear(
            b,
            Wear {
                ec: w.ec.saturating_add(1),
                ..w
            },
            false,
        );
    }

    /// Whether the device marks block `b` bad (format).
    pub fn device_says_bad(&mut self, b: u32) -> Result<bool> {
        let pb = self.phys(b);
        self.medium.flash_mut().is_bad(pb).map_err(Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::params::FormatOptions;
    use crate::fs::Fs;
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

    /// A roaming anchor's replacement is the least worn free block outside the anchor area
    /// whose number is its place, whatever is less worn in the area or swapped. (It was the
    /// least worn free block of the device, and none when that one did not qualify: with a
    /// roaming anchor failed and free blocks outside the area, every checkpoint said
    /// `NoSpace`; the model test with faults, SLC seed 4037.)
    #[test]
    fn a_roaming_anchor_is_found_outside_the_area_past_swapped_blocks() {
        let dev = Fs::format(RamFlash::new(nor_geometry(32)), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, crate::fs::Config::default()).unwrap();
        let st = fs.store_mut();
        let area = ANCHOR_AREA;
        let free_outside = |st: &mut Store<RamFlash>| -> Vec<(u32, u32)> {
            let free: Vec<u32> = (area..st.p().geometry.blocks)
                .filter(|&b| st.block(b).unwrap().state().is_free())
                .collect();
            let mut v: Vec<(u32, u32)> = free
                .into_iter()
                .map(|b| (st.wear(b).unwrap().ec, b))
                .collect();
            v.sort();
            v
        };
        // Free blocks in the area less worn than any outside: the outside ones erased two to
        // four times more.
        for (_, b) in free_outside(st) {
            for _ in 0..2 + b % 3 {
                assert!(st.erase_block(b).unwrap());
            }
        }
        let outside = free_outside(st);
        let in_area: Vec<u32> = (0..area)
            .filter(|&b| st.block(b).unwrap().state().is_free())
            .collect();
        assert!(in_area
            .into_iter()
            .any(|b| st.wear(b).unwrap().ec < outside[0].0));
        let least = outside[0].1;
        // The least worn block outside the area is swapped: its data lives elsewhere.
        st.apply_remap(least, 2).unwrap();
        assert_ne!(st.phys(least), least);
        let want = free_outside(st)
            .into_iter()
            .find(|&(_, b)| b != least && st.phys(b) == b)
            .unwrap();
        assert_eq!(st.pick_roaming_anchor(u32::MAX).unwrap(), Some(want.1));
        // None is taken whose erase count (now one more) is not below the bound.
        assert_eq!(st.pick_roaming_anchor(want.0 - 1).unwrap(), None);
    }
}
