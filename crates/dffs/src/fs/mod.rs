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
use crate::fs::inodes::CachedFile;
use crate::index::dir::Dirs;
use crate::index::file::{IndexCache, IndexTree};
use crate::index::inode_map::InodeMap;
use crate::journal::{JournalWriter, Tid};
use crate::store::{OpCounts, Store};
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
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
    pub(crate) checkpoints: u64,
    pub(crate) st: Store<F>,
    pub(crate) map: InodeMap,
    pub(crate) dirs: Dirs,
    pub(crate) icache: IndexCache,
    pub(crate) files: BTreeMap<Ino, Box<CachedFile>>,
    pub(crate) inos: BTreeMap<Ino, Box<OpenInode>>,
    pub(crate) handles: Vec<Option<Handle>>,
    pub(crate) dcache: DataCache,
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

impl<F: Flash> Fs<F> {
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
            dcache: DataCache::new(cfg.data_cache),
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

    /// Records a fatal condition (power loss): everything fails until remount.
    fn fail<T>(&mut self, e: Error) -> Result<T> {
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
    fn trim_caches(&mut self) {
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

    /// `ino`'s index tree, borrowed for one operation.
    pub(crate) fn tree(&mut self, ino: Ino) -> IndexTree<'_, F> {
        IndexTree {
            st: &mut self.st,
            cache: &mut self.icache,
            ino,
        }
    }

    /// The current time from the clock.
    pub(crate) fn now(&self) -> Time {
        self.clock.now()
    }
}
