//! The file system: the API applications call, and the orchestration of everything below.
//!
//! Owns the mounted state: caches with their RAM budget, open files and their uncommitted
//! overlays, the write-back data cache, the journal position, transactions, checkpoints, mount
//! and replay, garbage collection scheduling. Every change is first expressed as a journal
//! record and then applied by one function (`Fs::apply`) that replay after a power cut uses
//! too. It must never touch the device except through the store.

mod apply;
mod budget;
mod checkpoint;
mod config;
mod files;
mod fsck;
mod gc;
mod inodes;
mod log;
mod lookup;
mod mount;
mod names;
mod report;

use crate::checkpoint::AnchorPos;
use crate::error::{Error, Result};
use crate::format::attrs::{Ino, Time};
use crate::format::params::Addr;
use crate::fs::files::data_cache::DataCache;
use crate::fs::files::handles::{Handle, OpenInode};
use crate::fs::inodes::InodeCache;
use crate::index::dir::Dirs;
use crate::index::file::{IndexCache, IndexTree};
use crate::index::inode_map::InodeMap;
use crate::journal::{JournalWriter, Tid};
use crate::store::{OpTotals, Store};
use crate::vec_map::VecMap;
use alloc::boxed::Box;
use alloc::vec::Vec;
use dffs_flash::Flash;

#[cfg(feature = "std")]
pub use config::SystemClock;
pub use config::{Clock, Config, NoClock};
pub use files::handles::{Fh, OpenFlags};
pub use fsck::FsckReport;
pub use gc::GcReport;
pub use lookup::{DirEntry, FileKind, Stat};
pub use names::SetAttr;
pub use report::{Activity, Info, StatFs};

/// A mounted DFFS file system on flash device `F`.
pub struct Fs<F: Flash> {
    /// The device below: blocks, heads, node reads and programs (boxed: the file system is
    /// moved on mount, and a small `Fs` keeps those moves off a microcontroller's stack).
    store: Box<Store<F>>,
    /// Directory inode numbers to their pages (the DirInode map).
    map: InodeMap,
    /// Directory pages and their cache.
    dirs: Dirs,
    /// Cached index nodes of file index trees.
    index_cache: IndexCache,
    /// Cached file inodes.
    inodes: InodeCache,
    /// Open files and handles.
    open: OpenFiles,
    /// Write-back file data.
    data_cache: DataCache,
    /// Where the next journal record goes.
    journal: JournalWriter,
    /// Transaction ids.
    txn: Txn,
    /// Where the last checkpoint is.
    cp: CheckpointPos,
    /// What mount found and what recovery still owes.
    mount: MountState,
    /// Object counts and statistics.
    counts: Counts,
    /// Garbage collection state.
    gc: gc::GcState,
    cfg: Config,
    clock: Box<dyn Clock>,
}

/// Open files (one per inode with any handle) and the handle table.
struct OpenFiles {
    files: VecMap<Ino, Box<OpenInode>>,
    handles: Vec<Option<Handle>>,
    /// The file and the block just past the last read's end: a read that starts there is
    /// sequential, and reads its index through the node cache (`Fs::unchecked_run`).
    read_end: Option<(Ino, u32)>,
}

impl OpenFiles {
    /// Open inodes that match `f`, by number.
    fn inos_where(&self, f: impl Fn(&OpenInode) -> bool) -> Vec<Ino> {
        self.files
            .iter()
            .filter(|(_, o)| f(o))
            .map(|(i, _)| *i)
            .collect()
    }

    /// Whether `ino` is open with uncommitted changes.
    fn has_overlay(&self, ino: Ino) -> bool {
        self.files.get(&ino).is_some_and(|o| o.overlay.is_some())
    }

    /// Whether `ino` is open and has lost its last name.
    fn is_orphan(&self, ino: Ino) -> bool {
        self.files.get(&ino).is_some_and(|o| o.orphan.is_some())
    }

    /// Open inodes with uncommitted changes.
    fn with_overlay(&self) -> Vec<Ino> {
        self.inos_where(|o| o.overlay.is_some())
    }

    /// Open inodes that lost their last name (orphans, freed at their last close).
    fn orphans(&self) -> Vec<Ino> {
        self.inos_where(|o| o.orphan.is_some())
    }
}

/// Transaction ids: the next to hand out and the one open, if any.
struct Txn {
    next: Tid,
    open: Option<Tid>,
    /// The open transaction is being committed (its records may take the journal's last
    /// block).
    committing: bool,
}

/// The position of the last checkpoint: its anchor slot and its block-table delta nodes (the
/// store knows where the block-table pages are).
struct CheckpointPos {
    anchor: AnchorPos,
    /// The home pair, once the anchors have left the anchor area (see [`checkpoint::Home`]).
    home: crate::checkpoint::Home,
    /// The anchors moved since the last home checkpoint: the next checkpoint goes home.
    home_owed: bool,
    /// Block-table delta nodes the last checkpoint named (records that differ from their
    /// pages; every checkpoint writes the ones it needs afresh), then its block-table
    /// directory nodes (the last `Params::bt_dir_nodes`, none on most devices; also written
    /// afresh by every checkpoint).
    table_nodes: Vec<Addr>,
    /// Block-table pages last written with provisional data subtracted (page, CRC of the
    /// records written): their records on flash differ from RAM until written again without
    /// it; a checkpoint that would write one with the same records skips it.
    provisional_pages: Vec<(u32, u32)>,
    /// Blocks `JDataBlock` records named since: a recovery reads each whole (the next
    /// checkpoint is due at [`data_scan_blocks`]).
    data_blocks: u32,
    /// The last synced commit was one tags could carry (a run of new blocks): only then is
    /// the user-data head's next block named ahead (`Fs::name_next_data_block`).
    synced_runs: bool,
}

/// Pages of commit runs (FORMAT.md §8.7) a recovery may have to read before a checkpoint is
/// due: the blocks `JDataBlock` records name hold at most this many pages (at least one
/// block), besides the block the checkpoint recorded. The scan reads their tags only, and a
/// page's data only for a commit page that ends its block's writes.
pub(crate) const DATA_SCAN_PAGES: u32 = 1024;

/// Blocks of commit runs a recovery may have to read (see [`DATA_SCAN_PAGES`]): on devices
/// under 512 blocks at most 8, as before the scan read tags only, since checkpoints also
/// release the blocks collection emptied and a small device has little room to hold them (kept
/// as it was, not measured).
pub(crate) fn data_scan_blocks(p: &crate::format::params::Params) -> u32 {
    let g = p.geometry;
    (DATA_SCAN_PAGES / g.pages_per_block.max(1))
        .min((g.blocks / 64).max(8))
        .max(1)
}

/// Mount and recovery state.
#[derive(Default)]
struct MountState {
    /// Mount replayed journal records after the checkpoint.
    recovered: bool,
    /// Recovery is complete only once a checkpoint is written.
    need_recovery_cp: bool,
    /// A fatal condition (power loss): everything fails until remount.
    broken: Option<Error>,
    /// Journal replay is running.
    replaying: bool,
    /// Device operations the mount cost.
    mount_cost: OpTotals,
    /// The last journal scan ended on bytes that were programmed but are not a valid record
    /// (a program cut by power loss).
    journal_garbage: bool,
    /// The records replay read, where a later mount must read no more of this journal: the
    /// scan ended on a torn page, which may read longer at a later mount (or shorter than
    /// the checkpoint's own bound). Written into the checkpoint again before the recovery
    /// erases anything (DESIGN §15 item 22).
    journal_bind: Option<u32>,
    /// The records a load reads of the journal at most, set when replay's second pass could
    /// not read again what its first pass had read (a torn record that passed its check once):
    /// the mount loads again, as if the journal had ended there (see `Fs::load_rereading`).
    journal_cap: Option<u32>,
    /// Where the second pass of the last replay ended short of the first ([`JournalScan`]
    /// `ended_short`), for `Fs::load_rereading` to load again.
    ///
    /// [`JournalScan`]: crate::journal::reader::JournalScan
    journal_short: Option<u32>,
    /// The checkpoint the mount writes again before anything else failed for lack of an
    /// anchor block (`NoSpace`) or a worn-out anchor area (`EIO`): [`Fs::load`] mounts
    /// read-only instead.
    restamp_failed: Option<Error>,
    /// Why a read-write mount came up read-only ([`Info::read_only_cause`]).
    read_only_cause: Option<Error>,
    /// Commits found in data page tags and applied by the last replay.
    tag_commits: u32,
    /// Commit pages the last replay found whose run could not be read whole.
    lost_commits: u32,
}

/// Object counts kept for statfs and reports.
#[derive(Default)]
struct Counts {
    files: u32,
    dirs: u32,
    checkpoints: u64,
}

impl<F: Flash> Fs<F> {
    /// The store below (unit tests of the layers under the file system).
    #[cfg(test)]
    pub(crate) fn store_mut(&mut self) -> &mut Store<F> {
        &mut self.store
    }

    fn assemble(mut store: Box<Store<F>>, cfg: Config, clock: Box<dyn Clock>) -> Fs<F> {
        let p = store.p();
        store.set_table_cache(cfg.table_cache);
        store.set_records_ram(cfg.records_ram);
        let mut handles = Vec::new();
        handles.resize_with(cfg.max_open, || None);
        Fs {
            map: InodeMap::new(&p, Addr::NONE, 0, 2, 2, cfg.map_cache),
            dirs: Dirs::new(p, cfg.dir_cache),
            index_cache: IndexCache::new(cfg.index_cache),
            inodes: InodeCache::default(),
            open: OpenFiles {
                files: VecMap::new(),
                handles,
                read_end: None,
            },
            data_cache: DataCache::new(cfg.data_cache),
            cfg,
            clock,
            cp: CheckpointPos {
                anchor: AnchorPos {
                    anchor: 0,
                    slot: 0,
                    may_append: false,
                },
                home: crate::checkpoint::Home::NONE,
                home_owed: false,
                table_nodes: Vec::new(),
                provisional_pages: Vec::new(),
                data_blocks: 0,
                synced_runs: false,
            },
            journal: JournalWriter::default(),
            txn: Txn {
                next: 1,
                open: None,
                committing: false,
            },
            mount: MountState::default(),
            counts: Counts::default(),
            gc: gc::GcState::default(),
            store,
        }
    }

    /// Records a fatal condition (power loss): everything fails until remount.
    fn fail<T>(&mut self, e: Error) -> Result<T> {
        if e == Error::PowerLoss {
            self.mount.broken = Some(e);
        }
        Err(e)
    }

    /// Runs `f`; a power loss inside breaks the file system for good.
    pub(crate) fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Some(e) = self.mount.broken {
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
    fn trim_caches(&mut self) {
        self.dirs.trim();
        self.inodes.trim(self.cfg.inode_cache);
    }

    /// `ino`'s index tree, borrowed for one operation.
    pub(crate) fn tree(&mut self, ino: Ino) -> IndexTree<'_, F> {
        IndexTree {
            st: &mut self.store,
            cache: &mut self.index_cache,
            ino,
            undo: None,
        }
    }

    /// The current time from the clock.
    pub(crate) fn now(&self) -> Time {
        self.clock.now()
    }
}
