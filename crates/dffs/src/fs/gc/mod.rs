//! Garbage collection, static wear leveling and scrubbing.
//!
//! A victim block is chosen by cost-benefit (free space times age over the cost of copying),
//! or because its erase count lags far behind (static wear leveling: its cold data moves to a
//! worn block so the young block rejoins the free pool), or because its reads needed ECC
//! correction (scrubbing). Each node in the victim is checked for liveness by the mutual
//! pointers of the design: a directory page is live when the inode map (or its root's bucket
//! table) points at it, a file inode when its parent's slot points at it, an index node when its
//! file's tree does, a data block when its owner's index maps its tag's block number to it. Live
//! data is copied at once (to the cold data log); live index nodes too, with the nodes above
//! them, a step's nodes of one file together so that each node above them is written once;
//! other live metadata is marked dirty and rewritten by the next checkpoint, after which the
//! victim is erased. Work is done in bounded steps. A
//! NAND victim credited with no live bytes is finished without reading it.
//!
//! It must never erase what it could not read. An item that cannot be read (after the retries
//! of the medium and the store) is either known to be live (a data page whose tag names a block
//! its file still maps there) — then the victim is kept whole, the file reads `EIO` for that
//! block only, and a later collection tries again — or of unknown liveness (a torn page left by
//! a power cut looks the same as a corrupted live one). For those the block's live-byte count
//! decides: once what could be read has been moved and a checkpoint has rewritten the live
//! metadata, a block still credited with live bytes is kept. Kept blocks are not chosen again
//! until something in them dies.

mod collect;
mod data;
mod victim;

use super::Fs;
use crate::error::Result;
use crate::fs::checkpoint::CheckpointNeed;
use alloc::vec::Vec;
use dffs_flash::Flash;

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
    /// The victim was chosen because nothing else qualified and its copies fit in the open
    /// copy block ([`Fs::copy_room_for`]): it is collected without free blocks for copies.
    pub stretch: bool,
    /// The choice is background collection's in the window above the urgent level of a small
    /// device that keeps the wider margins: no data block more than three-quarters live
    /// qualifies ([`Fs::gc_background`]).
    pub picky: bool,
    /// Live index nodes of the victim met in this step and not moved yet (file, address,
    /// level, first block), all of one file: moved together before the step ends or the victim
    /// is ended, so that each node above them is written once.
    pub index_batch: Vec<(u32, crate::format::params::Addr, u8, u32)>,
    /// Blocks kept because of unreadable items, with their live bytes then: not chosen again
    /// while nothing in them dies.
    pub kept: Vec<(u32, u32)>,
    /// Making room for the application last gave up with this much dead in its operations
    /// (`Store::op_kills`), at most this room won (free and releasable blocks above its
    /// floor), and asked for this (`Fs::make_room_for_app`): until something dies or the room
    /// grows, another try for as much gets only `STALL_ROUNDS_FULL` rounds that win nothing
    /// (`fs/budget.rs`).
    pub full: Option<(u64, i64, (u8, u64))>,
    /// Totals for reports.
    pub moved_bytes: u64,
    pub blocks_collected: u64,
    pub wl_moves: u64,
    /// Victims kept (not erased) because of unreadable items.
    pub blocks_kept: u64,
}

/// Most blocks remembered in [`GcState::kept`] (an older one forgotten is only examined again).
const KEPT_MAX: usize = 16;

/// Most index nodes moved together ([`GcState::index_batch`]): the copies of one batch are
/// written after a single check of the room for copies.
const INDEX_BATCH: usize = 32;

/// Free-block levels of the pool ([`Fs::pool_levels`]; background collection's is
/// [`Fs::background_low`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolLevels {
    /// At or below it, background collection releases every block it collects at once.
    pub urgent: u32,
    /// Above it, static wear leveling may move a cold block.
    pub leveling: u32,
}

/// The window above the urgent level on a device of few large blocks
/// ([`Params::few_large_blocks`](crate::format::params::Params::few_large_blocks)).
fn few_large_window(blocks: u32) -> u32 {
    (blocks / 128).max(2)
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

impl<F: Flash> Fs<F> {
    /// Does up to `budget` pages of garbage-collection work (for idle time).
    pub fn gc_step(&mut self, budget: u32) -> Result<GcReport> {
        self.guard(|fs| {
            fs.ensure_writable()?;
            let mut rep = GcReport::default();
            while rep.pages < budget {
                if fs.gc.victim.is_none() && !fs.pick_victim(false)? {
                    break;
                }
                let before = fs.gc.blocks_collected;
                let n = fs.gc_work(budget - rep.pages)?;
                rep.blocks_done += (fs.gc.blocks_collected - before) as u32;
                if n == 0 && fs.gc.blocks_collected == before {
                    // Blocked on free space or dirty metadata: a checkpoint releases both.
                    fs.checkpoint_for(CheckpointNeed::GcBlocked)?;
                    break;
                }
                rep.pages += n;
            }
            fs.checkpoint_for(CheckpointNeed::GcFinished)?;
            rep.more = fs.gc.victim.is_some() || fs.best_victim(false)?.is_some();
            Ok(rep)
        })
    }

    /// The free-pool levels that make background collection release every block it collects
    /// and that allow static wear leveling; [`Fs::background_low`] adds the window above the
    /// urgent level. Both are asked after every operation; only the window, on devices of 512
    /// blocks or more, passes over what is dirty (`cp_needs`).
    ///
    /// Above the reserve (`Store::reserve_blocks`, which holds the next checkpoints' need) the
    /// pool keeps a margin: one block per head and two (the urgent level), then a window of a
    /// thirty-second of the device (at least 4), so that bounded steps keep up with writes.
    /// The window holds two big batches of collected blocks waiting for their checkpoint and
    /// the second checkpoint's need (`release_batches`, `cp_need_two`), up to a sixteenth of
    /// the device, on devices of 512 blocks or more: below `two` above the urgent level a
    /// checkpoint is taken for every small batch. (With a thirty-second alone, `dffs bench nor
    /// --quick`'s synced random writes on 2 MiB of 4 KiB sectors kept the pool there and
    /// checkpointed every four writes: 4 KiB at 43% of raw, 53% with the batches' window.
    /// Uncapped, collection started earlier, with less dead data in its victims; on 128 blocks
    /// the window left the torture's full devices wedged more often.)
    ///
    /// Devices of few large blocks (32 to 511 blocks of 32 KiB or more on NOR, 64 to 511 on
    /// NAND; `Params::few_large_blocks`) keep two blocks above the reserve and a window of a
    /// hundred-and-twenty-eighth of the device (at least 2): every free block idle is room
    /// collection cannot use, and there the margin above took 17 of 256 blocks of 64 KiB NOR,
    /// half of what synced random writes at 80% fill have beyond the file (4 KiB at 23.4 KB/s,
    /// 30.6 with the smaller margin; DESIGN §9.3), and on 32 blocks of 64 KiB NOR 15 of 32,
    /// where a file of 30% took synced random writes at 7% of raw (46% with the smaller one).
    /// Smaller NAND keeps the margin above: with the smaller one, chained cuts on 24 SLC
    /// blocks wedged with the pool below the reserve.
    /// Static wear leveling runs while the pool is above its level: four blocks below the
    /// background level (a sixty-fourth of the device on the others), and never within four
    /// of the floor of copies.
    pub(crate) fn pool_levels(&self) -> PoolLevels {
        let p = self.store.p();
        let blocks = p.geometry.blocks;
        let reserve = self.store.reserve_blocks();
        let floor = self.store.log_floor() + 4;
        if p.few_large_blocks() {
            let urgent = reserve + 2;
            let background = urgent + few_large_window(blocks);
            return PoolLevels {
                urgent,
                leveling: background.saturating_sub(4).max(floor),
            };
        }
        let urgent = reserve + p.head_count() as u32 + 2;
        PoolLevels {
            urgent,
            leveling: (urgent + (blocks / 64).max(4)).max(floor),
        }
    }

    /// Free blocks below which background collection runs: the urgent level and the window
    /// (see [`Fs::pool_levels`]).
    pub(crate) fn background_low(&self) -> u32 {
        let p = self.store.p();
        let blocks = p.geometry.blocks;
        let window = if p.few_large_blocks() {
            few_large_window(blocks)
        } else if blocks < 512 {
            (blocks / 32).max(4)
        } else {
            let (k, two) = self.cp_needs();
            let batches = (2 * self.release_batches(k).1 + two).min(blocks / 16);
            (blocks / 32).max(4).max(batches)
        };
        self.pool_levels().urgent + window
    }

    /// Background collection after an operation: a bounded step when free blocks run low.
    pub(crate) fn gc_background(&mut self) -> Result<()> {
        // Start early enough that bounded steps keep up with the writes.
        let low = self.background_low();
        if self.store.free_blocks() > low
            && self.gc.victim.is_none()
            && self.anchor_spare_victim().is_none()
            && !self.wl_due()?
        {
            return Ok(());
        }
        if self.gc.victim.is_none() {
            // Devices of fewer than 64 blocks that keep the wider margins hold a large share of
            // their blocks in the window above the urgent level: there a data block nearly all
            // live costs a block of copies for little room (on 4 MiB of SLC with a file at 30%,
            // 256 synced 4 KiB writes erased 175 blocks; DESIGN §9.3).
            let p = self.store.p();
            self.gc.picky = p.geometry.blocks < 64
                && !p.few_large_blocks()
                && self.store.free_blocks() > self.pool_levels().urgent;
            let picked = self.pick_victim(false);
            self.gc.picky = false;
            if !picked? {
                return Ok(());
            }
        }
        let step = self.cfg.gc_step;
        self.gc_work(step)?;
        // Collected blocks come back with the next checkpoint.
        self.checkpoint_for(CheckpointNeed::GcBackground)?;
        Ok(())
    }
}
