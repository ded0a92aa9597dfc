//! Space budgeting: whether an operation may go ahead, and the free blocks kept back so that
//! the file system can always take its next checkpoint.
//!
//! Blocks emptied by garbage collection, and the journal blocks before the replay start, come
//! back to the free pool only when a checkpoint has been written; and a checkpoint needs free
//! blocks itself (the metadata it rewrites, the block table, the journal's next block). So the
//! free pool is kept in layers, enforced by the store's allocation floors:
//!
//! ```text
//!   free: | cp need K | next cp K2 | spares | recovery cp K2 | GC headroom | application data ... |
//!           ^                                 ^                              ^
//!           |                                 |                              application data:
//!           |                                 |                              floor = the reserve
//!           |                                 journal appends, GC copies: floor = K + K2 + spares
//!           checkpoints: floor 0
//! ```
//!
//! `K` is computed from what is dirty now (inodes, directory pages, map pages, the index nodes
//! their pending changes will fold into, the block table, one block per metadata head that may
//! be left half used, the journal's next block); it is refreshed before each operation, after
//! each checkpoint and at mount. `K2` is what a second checkpoint right after it needs (capped:
//! see [`Fs::cp_need_two`]), so that whatever the next checkpoint writes leaves room for one
//! more; on devices of 128 blocks or more the application's floor keeps `K2` once more, for
//! the recovery checkpoint a power cut makes owed (the first write after the mount takes it
//! whatever the pool holds). An operation that needs room first makes it (write-back is the
//! caller's, then collection, then a checkpoint to release what was collected) and fails with
//! `NoSpace` only when that cannot help.
//!
//! It owns the decisions "may this operation proceed" and "is a checkpoint due"; it must never
//! write anything itself except by asking garbage collection to collect or the checkpoint code
//! to run.

use super::Fs;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::params::LogKind;
use crate::format::params::NandSupport;
use crate::index::file::tree::fold_bound;
use crate::store::{BlockState, Priority};
use dffs_flash::Flash;

/// Rounds of [`Fs::make_room`] in a row that may win no room before it gives up. (With 32, a
/// 256-byte write refused on a full 2 MiB partition of 4 KiB NOR sectors was admitted by the
/// next try: the copies of those rounds compact the index blocks slowly, and the room shows
/// only later.)
const STALL_ROUNDS: u32 = 128;

/// [`STALL_ROUNDS`] for the application's next try on a device found full, while nothing has
/// died in its operations and the room is no larger than the last try won (`GcState::full`):
/// another 128 rounds would repeat the last try's copies. (A write retried on a full 2 MiB
/// partition of 4 KiB NOR sectors erased 124 blocks every time.)
const STALL_ROUNDS_FULL: u32 = 8;

impl<F: Flash> Fs<F> {
    /// Blocks a checkpoint may have to allocate if it were taken now: for each metadata head,
    /// the bytes the checkpoint would write there beyond the room left in its open block; plus
    /// the journal's next block and one block of slack (nodes do not fill blocks exactly).
    pub(crate) fn cp_need_blocks(&self) -> u32 {
        self.cp_need().0
    }

    /// Whether `extra` more bytes of nodes in the head index nodes go to (copies now, or
    /// nodes the next checkpoint rewrites) still fit in the open blocks of the metadata heads
    /// together with what the next checkpoint writes: no block would have to be allocated.
    pub(crate) fn fits_in_meta_heads(&self, extra: u64) -> bool {
        self.cp_need_with(extra).0 == self.cp_need_with(0).0
    }

    /// [`Fs::cp_need_blocks`], and the bytes of nodes the checkpoint would write.
    fn cp_need(&self) -> (u32, u64) {
        self.cp_need_with(0)
    }

    /// Blocks two checkpoints in a row may have to allocate: the next one
    /// ([`Fs::cp_need_blocks`]) and one after it with nothing dirtied in between (the map's
    /// root path, every block-table page and the journal's next block again). Whatever the
    /// next checkpoint leaves free must hold the second, or no checkpoint could follow it.
    ///
    /// The second checkpoint's share is capped (at most a sixteenth of the device, none on a
    /// device of fewer than 32 blocks, whose blocks are large and whose checkpoints fit in
    /// the open blocks: one block more made a 16-block NOR device of 64 KiB refuse its first
    /// file, a 24-block NAND one fail an anchor test). The floors and every check against
    /// free blocks use this one figure, so none demands room the floors never keep.
    pub(crate) fn cp_need_two(&self) -> u32 {
        self.cp_needs().1
    }

    /// [`Fs::cp_need_blocks`] and [`Fs::cp_need_two`] from one pass over what is dirty.
    pub(crate) fn cp_needs(&self) -> (u32, u32) {
        let (k, two, _) = self.cp_need_parts(0);
        (k, self.capped_two(k, two))
    }

    /// [`Fs::cp_need_two`] from the next checkpoint's need `k` and the uncapped need `two` of
    /// both.
    fn capped_two(&self, k: u32, two: u32) -> u32 {
        let blocks = self.store.block_count();
        let cap = if blocks < 32 { 0 } else { blocks / 16 };
        k + two.saturating_sub(k).min(cap)
    }

    /// [`Fs::cp_need`] with `extra` more bytes of index nodes to write.
    fn cp_need_with(&self, extra: u64) -> (u32, u64) {
        let (k, _, bytes) = self.cp_need_parts(extra);
        (k, bytes)
    }

    /// In one pass over what is dirty: the blocks [`Fs::cp_need_with`] counts, the blocks it
    /// and a clean checkpoint right after it may allocate (uncapped), and the bytes of nodes
    /// the first writes.
    fn cp_need_parts(&self, extra: u64) -> (u32, u32, u64) {
        let p = self.store.p();
        let fanout = p.index_fanout();
        let mut inodes = 0u64;
        let mut index_nodes = 0u64;
        for c in self.inodes.iter().filter(|c| c.dirty) {
            inodes += 1;
            index_nodes += fold_bound(&c.node.content, fanout);
        }
        for o in self.open.files.values() {
            if let Some(n) = &o.orphan {
                inodes += 1;
                index_nodes += fold_bound(&n.content, fanout);
            }
            // An update too large for extents folds its own tree at its commit: those nodes
            // come out of the same room (uncounted, a 4 KiB write admitted into a full
            // device left its `fsync` no block for them).
            if let Some(sp) = o.overlay.as_ref().and_then(|ov| ov.spilled.as_ref()) {
                index_nodes += fold_bound(sp, fanout);
            }
        }
        // Every block-table page: one operation may change a record in each (a write
        // allocates blocks all over the table), and the checkpoint's own writes change more.
        // (A checkpoint writes only the changed ones; this is the room it may need.)
        // (Delta nodes replace pages: a checkpoint writes no more nodes for the table than it
        // has pages, see `Fs::plan_block_table`.)
        let bt_pages = self.store.bt_page_count() as u64;
        let root_and_table = self.map.depth as u64 + 1 + bt_pages + p.bt_dir_nodes() as u64;
        // Bytes per log: (kind, bytes, node size); `two`: the second checkpoint's too.
        let logs = |two: bool| {
            [
                (LogKind::Inode, inodes * p.dir_page as u64, p.dir_page),
                // A dirty directory item counts a whole page though a root of few entries
                // is written shorter (FORMAT §8.4): counted at its length, 1 MiB of 4 KiB
                // NOR sectors refused 95 of 591 synced overwrites on a full device instead
                // of 7 (`overwrites_go_on_on_a_nearly_full_device`), the slack gone.
                (
                    LogKind::Dir,
                    self.dirs.dirty_count() as u64 * p.dir_page as u64,
                    p.dir_page,
                ),
                (
                    LogKind::Map,
                    (self.map.dirty_pages() as u64 + root_and_table * (1 + two as u64))
                        * p.map_page as u64,
                    p.map_page,
                ),
                (
                    LogKind::Index,
                    index_nodes * p.index_node as u64 + extra,
                    p.index_node,
                ),
            ]
        };
        let one = logs(false);
        let total: u64 = one.iter().map(|l| l.1).sum();
        // The journal's next block and one block of slack. The second checkpoint of `two`
        // may restart the journal too: on NOR, whose small sectors fill between two
        // checkpoints, always; on NAND when the journal's block is three-quarters used (a
        // whole large block held back for it cost a small MLC device a tenth of its files).
        let bs = p.geometry.block_size();
        let second_journal = p.geometry.flash_kind() == dffs_flash::FlashKind::Nor
            || self.store.head_room(LogKind::Journal) < bs / 4;
        (
            self.head_blocks(&one) + 2,
            self.head_blocks(&logs(true)) + 2 + second_journal as u32,
            total,
        )
    }

    /// Blocks the inode and index heads would have to open for `inode_bytes` and
    /// `index_bytes` more of their nodes (beyond the room left in their open blocks).
    pub(crate) fn meta_blocks(&self, inode_bytes: u64, index_bytes: u64) -> u32 {
        let p = self.store.p();
        self.head_blocks(&[
            (LogKind::Inode, inode_bytes, p.dir_page),
            (LogKind::Index, index_bytes, p.index_node),
        ])
    }

    /// Blocks the index head would have to open to fold `c`'s pending changes: the share of
    /// the checkpoint need (and so of the copy floor) a fold outside a checkpoint may take.
    pub(crate) fn fold_blocks(&self, c: &crate::index::file::Content) -> u32 {
        let p = self.store.p();
        let bytes = fold_bound(c, p.index_fanout()) * p.index_node as u64;
        self.head_blocks(&[(LogKind::Index, bytes, p.index_node)])
    }

    /// Blocks the heads of `logs` (log, bytes of nodes to write, node size) would have to
    /// open beyond the room left in their open blocks. Logs that share a head add up. A block
    /// takes whole nodes up to its last page (NAND) or program unit (NOR): 4 KiB NOR sectors
    /// hold three 1 KiB nodes, not four.
    fn head_blocks(&self, logs: &[(LogKind, u64, u32)]) -> u32 {
        let p = self.store.p();
        let bs = p.geometry.block_size() as u64;
        let tail = match p.geometry.flash_kind() {
            dffs_flash::FlashKind::Nand => p.geometry.page_size as u64,
            dffs_flash::FlashKind::Nor => p.unit() as u64,
        };
        let mut per_head = [(0u64, 1u64); crate::format::params::MAX_HEADS];
        for &(kind, bytes, node) in logs {
            let h = &mut per_head[p.head_of(kind)];
            h.0 += bytes;
            h.1 = h.1.max(p.align(node) as u64);
        }
        let mut blocks = 0u64;
        for &(kind, _, _) in logs {
            let (need, node) = core::mem::take(&mut per_head[p.head_of(kind)]);
            let node = node.max(1);
            let usable = ((bs.saturating_sub(tail) / node) * node).max(1);
            let room = self.store.head_room(kind) as u64 / node * node;
            if need > room {
                blocks += (need - room).div_ceil(usable);
            }
        }
        blocks as u32
    }

    /// Sets the store's allocation floors from the checkpoint's current need (see the module
    /// comment).
    pub(crate) fn refresh_floors(&mut self) {
        let (k, two, cp_bytes) = self.cp_need_parts(0);
        // The copy floor also keeps back what the checkpoint after the next needs: a
        // checkpoint that left less took the last free blocks and none could be written again
        // (4 KiB NOR sectors). The share is capped ([`Fs::cp_need_two`]).
        let spares = self.store.p().bad_reserve;
        let second = self.capped_two(k, two) - k;
        let log = k + second + spares;
        // The user floor keeps that share once more, for the recovery checkpoint a power cut
        // makes owed before the next write: it writes a fresh journal block, reserves the next
        // and rewrites what replay dirtied, whatever the pool holds. Without it, application
        // data filled the device to one block above the copy floor, each recovery took two or
        // three blocks below it, collection could then copy nothing, and a chain of cuts on
        // 4 KiB NOR sectors ended with no block free (26 of 480 chains; 3 with it). Only on
        // devices of 128 blocks or more, whose checkpoints span several blocks: on fewer,
        // larger blocks the room is dear and was not needed (64 blocks of 128 KiB NAND took
        // eight times as long to write a tree that did not fit, at its ENOSPC edge).
        let recovery = if self.store.block_count() >= 128 {
            second
        } else {
            0
        };
        let user = (self.store.p().gc_reserve + spares)
            .max(log + 1 + recovery + self.gc_headroom(cp_bytes));
        self.store.set_floors(k, log, user);
    }

    /// Free blocks above the copy floor that garbage collection needs to gain more than a
    /// checkpoint costs: collected blocks come back only at a checkpoint, which writes `C`
    /// bytes (`cp_bytes`, at most, and a journal page), and collecting a victim that is `u`
    /// live gains `1 − u` block for `u` block of copies. So between two checkpoints the copies
    /// need room for `C · u / (1 − u)` bytes, `u` being the least-live closed block's among
    /// those whose collection copies (metadata blocks are rewritten by the checkpoint).
    /// (Without it a small-block device stalled with its free pool at the copy floor: every
    /// checkpoint released what it cost and collection could copy nothing: `ENOSPC` with 40%
    /// of the device dead, 4 KiB NOR sectors.) At most an eighth of the device.
    fn gc_headroom(&mut self, cp_bytes: u64) -> u32 {
        let bs = self.store.p().geometry.block_size() as u64;
        let (mut min_live, mut dead) = (bs, 0u64);
        for kind in LogKind::ALL {
            if kind != LogKind::Journal && self.copies_now(kind) {
                let (n, live) = self.store.used_of(kind);
                dead += n as u64 * bs - live;
                if let Some(m) = self.store.used_min_live(kind) {
                    min_live = min_live.min(m as u64);
                }
            }
        }
        let p = self.store.p();
        let min_live = min_live.min(bs - bs / 32);
        // What a checkpoint writes, and the journal page it starts.
        let cost = cp_bytes + p.geometry.page_size as u64;
        let h = (cost * min_live).div_ceil((bs - min_live) * bs);
        // Never more than the dead space collection could win back (a device full of live
        // data gains nothing from the room), nor an eighth of the device.
        (h.min(dead / bs) as u32).min(self.store.block_count() / 8)
    }

    /// (usable bytes, bytes that can still be written).
    pub(crate) fn space(&self) -> (u64, u64) {
        let p = self.store.p();
        let bsz = p.geometry.block_size() as u64;
        let good = (self.store.block_count()
            - self.store.count(BlockState::Bad)
            - self.store.count(BlockState::Anchor)) as u64;
        // Reserve: GC and bad-block spares, the journal (live + next), and one open block per
        // head that may be half-used.
        let reserve = (self.store.reserve_blocks() as u64 + 2 + p.head_count() as u64) * bsz;
        let usable = (good * bsz).saturating_sub(reserve);
        let live = self.store.live_outside_journal();
        let cached = self.data_cache.dirty_count() as u64 * p.data_slot() as u64;
        // What the dirty metadata may write at the next checkpoint: a page per item, `n`
        // pages where small items share one count (`Config::dirty_shares`).
        let per_item = self.cfg.shares_on(&p) as u64;
        let meta_margin = (self.cfg.max_dirty as u64 * per_item + 4) * p.dir_page as u64;
        (usable, usable.saturating_sub(live + cached + meta_margin))
    }

    /// Refuses metadata growth when the device is nearly full. Any other error of the
    /// collection or checkpoint this runs (`EIO`, a power cut) is the operation's error, not
    /// `ENOSPC`.
    pub(crate) fn meta_space(&mut self) -> Result<()> {
        let need = self.store.p().dir_page as u64 * 2;
        self.ensure_space(need)
    }

    /// Makes sure `bytes` more can be written, collecting garbage (and checkpointing to free
    /// what it collected) as needed; `NoSpace` when the device is full.
    pub(crate) fn ensure_space(&mut self, bytes: u64) -> Result<()> {
        self.ensure_space_credited(bytes, None)
    }

    /// [`Fs::ensure_space`] for a write of blocks `first..=last` of `ino` (`replaces`): when
    /// the byte budget is short, the bytes of those blocks already on flash, whose old copies
    /// die at the write's commit, come off what it asks. The credit is only computed then (it
    /// may read index nodes); the first check is the one `make_room` begins with.
    pub(crate) fn ensure_space_credited(
        &mut self,
        bytes: u64,
        replaces: Option<(Ino, u64, u64)>,
    ) -> Result<()> {
        self.announce_erases()?;
        let check = |fs: &Self, bytes: u64| {
            let (_, free) = fs.space();
            let enough = free >= bytes && fs.store.free_blocks() > fs.store.reserve_blocks();
            (enough, free < bytes && !fs.gc_could_help(bytes))
        };
        self.refresh_floors();
        if check(self, bytes).0 {
            self.gc.full = None;
            return Ok(());
        }
        let mut bytes = bytes;
        if let Some((ino, first, last)) = replaces {
            if self.space().1 < bytes {
                let on_flash = self.blocks_on_flash(ino, first, last)?;
                bytes -= (on_flash * self.store.p().data_block as u64).min(bytes);
            }
        }
        self.make_room_for_app((0, bytes), |fs| check(fs, bytes))
    }

    /// Makes sure `n` blocks beyond the floor of `prio` are free, collecting and checkpointing
    /// as needed. Admitting new data asks at [`Priority::User`]; writing back data that was
    /// admitted asks at [`Priority::Log`] (its room was counted when it was admitted).
    pub(crate) fn ensure_blocks(&mut self, n: u32, prio: Priority) -> Result<()> {
        if prio == Priority::Log {
            self.keep_copy_room(n)?;
        }
        self.ensure_blocks_now(n, prio)
    }

    /// Write-back first tries to keep `n` blocks free above the user floor, which leaves
    /// collection its room to copy (see `gc_headroom`): write-back that took that room
    /// (admitted writes that needed more than estimated) left a small-block device where
    /// collection could copy nothing and every checkpoint cost what it released (a 64 KiB
    /// write on 4 KiB NOR sectors failed with 40% of the device dead). When a few rounds
    /// cannot make the room, the admitted data may take it: only other errors are returned.
    pub(crate) fn keep_copy_room(&mut self, n: u32) -> Result<()> {
        let soft = self.make_room_rounds(
            |fs| {
                let floor = fs.store.reserve_blocks();
                (fs.store.free_blocks() >= floor + n.max(1), false)
            },
            8,
            None,
        );
        match soft {
            Ok(()) | Err(Error::NoSpace) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// [`Fs::ensure_blocks`] without the write-back's first try ([`Fs::keep_copy_room`]).
    pub(crate) fn ensure_blocks_now(&mut self, n: u32, prio: Priority) -> Result<()> {
        let check = |fs: &Self| {
            let floor = match prio {
                Priority::User => fs.store.reserve_blocks(),
                Priority::Log | Priority::Spare | Priority::Reserve => fs.store.log_floor(),
            };
            (fs.store.free_blocks() >= floor + n.max(1), false)
        };
        match prio {
            Priority::User => self.make_room_for_app((1, n as u64), check),
            _ => self.make_room(check),
        }
    }

    /// Blocks the next checkpoint gives back: those emptied by GC and the journal blocks
    /// before the replay start.
    pub(crate) fn releasable_blocks(&self) -> u32 {
        self.store.pending_blocks() + self.store.used_of(LogKind::Journal).0
    }

    /// Whether a checkpoint now leaves free what the checkpoint after it needs
    /// ([`Fs::cp_need_two`]; what it writes comes out of the free blocks, what it gives back
    /// ([`Fs::releasable_blocks`]) goes in).
    pub(crate) fn checkpoint_leaves_room(&self) -> bool {
        self.store.free_blocks() + self.releasable_blocks() >= self.cp_need_two()
    }

    /// Whether a checkpoint now gives back more blocks than it writes.
    pub(crate) fn checkpoint_pays(&self) -> bool {
        // `cp_need_blocks` counts the journal's next block and one of slack; what a
        // checkpoint consumes is the rest.
        let cost = self.cp_need_blocks().saturating_sub(2);
        self.releasable_blocks() > cost
    }

    /// Collects and checkpoints until `check` says there is room (`.0`) or that collection
    /// cannot help (`.1`: `NoSpace` at once). A checkpoint is taken when it gives back more
    /// blocks than it costs, or when collection cannot go on without one.
    fn make_room(&mut self, check: impl Fn(&Self) -> (bool, bool)) -> Result<()> {
        self.make_room_rounds(check, 4 * self.store.p().geometry.blocks + 16, None)
    }

    /// [`Fs::make_room`] for admitting the application's new data or metadata, `want` of it
    /// (0 and bytes for [`Fs::ensure_space`], 1 and blocks for [`Fs::ensure_blocks`]): a try
    /// for at least what the last such try was refused, on a device with nothing dead since
    /// and no more room, gets only [`STALL_ROUNDS_FULL`] rounds that win nothing. (A smaller
    /// one gets them all: given 8, a 256-byte write refused after a 4 KiB one was refused
    /// where 128 rounds admitted it. Write-back of what was admitted is never cut short so.)
    fn make_room_for_app(
        &mut self,
        want: (u8, u64),
        check: impl Fn(&Self) -> (bool, bool),
    ) -> Result<()> {
        self.make_room_rounds(check, 4 * self.store.p().geometry.blocks + 16, Some(want))
    }

    /// Free and releasable blocks above the application's floor: what making room wins.
    fn room_won(&self) -> i64 {
        (self.store.free_blocks() + self.releasable_blocks()) as i64
            - self.store.reserve_blocks() as i64
    }

    /// [`Fs::make_room`] giving up (`NoSpace`) after `max_rounds` rounds, or after
    /// [`STALL_ROUNDS`] rounds in a row that won no room: the free and releasable blocks above
    /// the application's floor never rose above their best. (A round collects one victim or
    /// takes a checkpoint. Without the stall bound a write refused on a full device of many
    /// small blocks collected until the round limit, `4 · blocks + 16`: the victims left were
    /// index blocks about half live, whose copies rewrite the paths above them, so each took
    /// a fresh block for the one it gave back and the room never grew. One refused 256-byte
    /// write on 2 MiB of 4 KiB NOR sectors erased 1,858 blocks.)
    ///
    /// `app`: a try to admit the application's new data or metadata, and what it asks for
    /// ([`Fs::make_room_for_app`], [`GcState::full`]).
    ///
    /// [`GcState::full`]: super::gc::GcState::full
    fn make_room_rounds(
        &mut self,
        check: impl Fn(&Self) -> (bool, bool),
        max_rounds: u32,
        app: Option<(u8, u64)>,
    ) -> Result<()> {
        let mut rounds = 0u32;
        let (mut best, mut stalled) = (i64::MIN, 0u32);
        let mut stall_limit = STALL_ROUNDS;
        let mut tried_cp = false;
        let mut byte_cp: Option<u64> = None;
        loop {
            self.refresh_floors();
            let (enough, hopeless) = check(self);
            if enough {
                if app.is_some() {
                    self.gc.full = None;
                }
                return Ok(());
            }
            let room = self.room_won();
            // (Decided once room is short, so that a call that finds room at once scans no
            // more than before.)
            if rounds == 0 {
                if let (Some((k, won, (kind, amount))), Some((want_kind, want))) =
                    (self.gc.full, app)
                {
                    if k == self.store.op_kills()
                        && room <= won
                        && kind == want_kind
                        && want >= amount
                    {
                        stall_limit = STALL_ROUNDS_FULL;
                    }
                }
            }
            if room > best {
                (best, stalled) = (room, 0);
            } else {
                stalled += 1;
            }
            rounds += 1;
            if stalled > stall_limit || rounds > max_rounds {
                if let Some(want) = app {
                    self.gc.full = Some((self.store.op_kills(), best, want));
                }
                return Err(Error::NoSpace);
            }
            let can_cp = self.txn.open.is_none() && !self.mount.replaying;
            if can_cp && self.checkpoint_pays() {
                self.checkpoint_inner(false)?;
                continue;
            }
            if hopeless {
                return Err(Error::NoSpace);
            }
            // A try for bytes the budget has not got: collection moves live bytes and frees
            // next to none (the floors it refreshes can only rise), so only checkpoints are
            // tried, by lowering what the floors keep for the next one, for as long as each
            // raises the budget. (Collecting for such a try on 4 MiB of 64 KiB NOR blocks
            // filled with files to `ENOSPC` copied some 4,000 pages and erased 10 blocks for
            // every file refused; the fills of `usable_space_for_one_file` held 0.1 to 0.5
            // points more with it, what folding index nodes as they were copied saved.)
            if let Some((0, want)) = app {
                let have = self.space().1;
                if have < want {
                    if can_cp && byte_cp.is_none_or(|b| have > b) && self.checkpoint_leaves_room() {
                        byte_cp = Some(have);
                        self.checkpoint_inner(false)?;
                        continue;
                    }
                    return Err(Error::NoSpace);
                }
            }
            // Inside a transaction no checkpoint can be taken, so a collected block stays
            // pending until the commit: collection would only spend free blocks on copies.
            // (`begin_transaction` made the room the transaction may use.)
            if self.txn.open.is_some() {
                return Err(Error::NoSpace);
            }
            if !self.collect(true)? {
                // With nothing to release, one checkpoint per call may still make the room:
                // it writes the dirty metadata and moves the metadata heads on, and the floors
                // count a whole block for a head whose open block is nearly full. (4 KiB
                // synced overwrites on a 4 MiB SLC partition filled to ENOSPC and then cut by
                // 64 KiB were refused 1,575 times in 1,632 without it: the copy floor stayed
                // one block too high for any copy, and no block was ever collected.) Not when
                // it would leave the checkpoint after it too little (`maybe_checkpoint`).
                let may_lower = !tried_cp && self.checkpoint_leaves_room();
                if can_cp && (self.releasable_blocks() > 0 || may_lower) {
                    tried_cp = true;
                    self.checkpoint_inner(false)?;
                    continue;
                }
                return Err(Error::NoSpace);
            }
        }
    }

    /// Makes the room an explicit checkpoint needs ([`Fs::checkpoint_leaves_room`]),
    /// collecting and checkpointing as [`Fs::ensure_space`] does; `NoSpace` when it cannot.
    pub(crate) fn make_checkpoint_room(&mut self) -> Result<()> {
        self.make_room(|fs| (fs.checkpoint_leaves_room(), false))
    }

    /// Makes room for a transaction about to begin: collects (and checkpoints to release
    /// what it collected) until an eighth of the blocks above the reserve (4 to 64 blocks),
    /// and the next checkpoint's need once more, are free, in a bounded number of rounds.
    /// Nothing collected during the transaction comes back before its commit, so this is the
    /// room it may use beyond the free blocks above the reserve; a device too full to make it
    /// still begins (its writes may then fail with `NoSpace`).
    pub(crate) fn make_transaction_room(&mut self) -> Result<()> {
        let above = self
            .store
            .p()
            .geometry
            .blocks
            .saturating_sub(self.store.reserve_blocks());
        // And what the next checkpoint needs now, once more: the reserve rises while the
        // transaction's own metadata (its inodes, the index its writes fold into) stays dirty,
        // and what it may write is what stays above the reserve. (Without it, a 48 KiB
        // transaction on 512 KiB of 4 KiB NOR sectors found the reserve two blocks higher at
        // its twelfth write and said ENOSPC.)
        let want = (above / 8).clamp(4, 64) + self.cp_need_blocks();
        let short = |fs: &Self| fs.store.free_blocks() < fs.store.reserve_blocks() + want;
        if !short(self) {
            return Ok(());
        }
        match self.make_room_rounds(|fs| (!short(fs), false), 2 * want + 8, None) {
            Ok(()) | Err(Error::NoSpace) => {}
            Err(e) => return Err(e),
        }
        // What the rounds collected is of use to the transaction only once released (when
        // that gives back more blocks than the checkpoint writes).
        if short(self) && self.checkpoint_pays() {
            match self.checkpoint_inner(false) {
                Ok(()) | Err(Error::NoSpace) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Before a transaction begins: the journal must be able to leave its current block (a
    /// block set aside and named by it), so that the commit has a whole block to go to
    /// whatever the transaction's own records take (they never take that block:
    /// [`crate::journal::JournalWriter::set_keep_next`]). A journal whose chain ends at its
    /// current block needs a checkpoint to start it afresh. `NoSpace` when neither can be had.
    pub(crate) fn make_commit_room(&mut self) -> Result<()> {
        // (Without a block set aside, the checkpoint starts the journal afresh and sets one
        // aside if it can.)
        if !self.journal.holds_next(&self.store) {
            self.checkpoint_inner(false)?;
        }
        if self.journal.holds_next(&self.store) {
            Ok(())
        } else {
            Err(Error::NoSpace)
        }
    }

    /// Work done after every modifying operation: a bounded step of garbage collection when
    /// free blocks run low, and a checkpoint when the journal or dirty metadata is large.
    /// `NoSpace` from either is not the operation's failure (it has been applied).
    pub(crate) fn after_op(&mut self) -> Result<()> {
        if self.cfg.read_only {
            return Ok(());
        }
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("before after_op: {e}");
        }
        self.refresh_floors();
        // A journal block swapped out by this operation: nothing it wrote is durable before a
        // checkpoint records the swap.
        self.checkpoint_for(super::checkpoint::CheckpointNeed::JournalSwapped)?;
        // The operation itself is done: collection and checkpoints that find no room now, or
        // a device that fails them (`EIO`: no good block left for an anchor), are tried again
        // by the next operation, which fails itself if it needs them. Reported here, the
        // error said that an operation had failed which had taken effect, or that a read had.
        match self.gc_background() {
            Ok(()) | Err(Error::NoSpace | Error::Io) => {}
            Err(e) => return Err(e),
        }
        #[cfg(debug_assertions)]
        if let Err(e) = self.debug_check_blocks() {
            panic!("after gc_background: {e}");
        }
        match self.maybe_checkpoint() {
            Ok(()) | Err(Error::NoSpace | Error::Io) => {}
            Err(e) => return Err(e),
        }
        if self.cfg.sync && self.txn.open.is_none() {
            self.journal_flush()?;
        }
        Ok(())
    }
}
