//! What the mounted file system reports about itself: `statfs`, `info`, activity counters,
//! RAM held, and the debugging views and self-checks the tests use.
//!
//! It must never change anything (every function takes `&self` or only reads).

use crate::error::{Error, Result};
use crate::format::params::{Addr, Params};
use crate::fs::files::handles::Handle;
use crate::fs::inodes::CachedFile;
use crate::fs::Fs;
use crate::store::{BlockState, OpCounts, OpTotals};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use dffs_flash::Flash;

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
    /// Operations the last mount cost (by cause: [`Fs::op_counts`] right after the mount,
    /// since the counts start at zero when the device is mounted).
    pub mount_cost: OpTotals,
    /// RAM held by the mounted file system.
    pub ram_bytes: usize,
    /// Whether the last mount had to replay a journal (the previous session did not end
    /// cleanly).
    pub recovered: bool,
    /// Synced writes that mount recovered from their data pages' tags (FORMAT.md §8.7).
    pub tag_commits: u32,
    /// Commit tags the mount found whose write could not be read whole (their writes are
    /// lost; only an unreadable page does this).
    pub lost_commits: u32,
    /// Set when a read-write mount came up read-only, with the error that made it: its one
    /// write, the checkpoint it chose written again (after a power cut, before anything
    /// else), found no block of the anchor area to take (`NoSpace`) or the area worn out
    /// (`Io`). Files read as usual; every change is [`Error::ReadOnly`] (`EROFS`).
    pub read_only_cause: Option<Error>,
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

impl<F: Flash> Fs<F> {
    /// The device (for inspection: counters, simulated time).
    pub fn flash(&self) -> &F {
        self.store.flash()
    }

    /// The device, mutably.
    pub fn flash_mut(&mut self) -> &mut F {
        self.store.flash_mut()
    }

    /// Device operations issued since mount started.
    pub fn op_counts(&self) -> OpCounts {
        self.store.counts()
    }

    /// Work done since mount: checkpoints, garbage collection, device operations.
    pub fn activity(&self) -> Activity {
        Activity {
            checkpoints: self.counts.checkpoints,
            gc_blocks: self.gc.blocks_collected,
            gc_moved_bytes: self.gc.moved_bytes,
            wl_moves: self.gc.wl_moves,
            gc_kept_blocks: self.gc.blocks_kept,
            ops: self.op_counts(),
        }
    }

    /// Format parameters.
    pub fn params(&self) -> Params {
        self.store.p()
    }

    /// RAM held by the mounted file system (every structure it allocated).
    pub fn ram_bytes(&self) -> usize {
        let files: usize = self
            .inodes
            .iter()
            .map(|c| {
                core::mem::size_of::<CachedFile>()
                    + c.node.name.capacity()
                    + c.node.content.ram_bytes()
            })
            .sum::<usize>()
            + self.inodes.map_bytes();
        let inos: usize = self
            .open
            .files
            .values()
            .map(|o| o.ram_bytes())
            .sum::<usize>()
            + self.open.files.heap_bytes();
        core::mem::size_of::<Self>()
            + self.store.ram_bytes()
            + self.map.ram_bytes()
            + self.dirs.ram_bytes()
            + self.index_cache.ram_bytes()
            + files
            + inos
            + self.open.handles.capacity() * core::mem::size_of::<Option<Handle>>()
            + self.data_cache.ram_bytes()
            + self.cp.table_nodes.capacity() * 4
            + self.gc.index_batch.capacity() * core::mem::size_of::<(u32, Addr, u8, u32)>()
    }

    /// Where the RAM is (for diagnostics; the format of the string is not stable).
    #[doc(hidden)]
    pub fn debug_ram_summary(&self) -> alloc::string::String {
        alloc::format!(
            "store {} (table {:?}) map {} dirs {} ({} items, {} dirty) index {} files {} ({} cached, {} dirty) inos {} ({}) dcache {}",
            self.store.ram_bytes(),
            self.store.table_ram_parts(),
            self.map.ram_bytes(),
            self.dirs.ram_bytes(),
            self.dirs.len(),
            self.dirs.dirty_count(),
            self.index_cache.ram_bytes(),
            self.inodes.iter().map(|c| core::mem::size_of::<CachedFile>() + c.node.name.capacity() + c.node.content.ram_bytes() + 32).sum::<usize>(),
            self.inodes.len(),
            self.inodes.iter().filter(|c| c.dirty).count(),
            self.open.files.values().map(|o| o.ram_bytes()).sum::<usize>(),
            self.open.files.len(),
            self.data_cache.ram_bytes(),
        )
    }

    /// Makes scans of the block table (free-block candidates, the victim by age) read every
    /// page RAM does not hold, not only those whose bounds say they could change the choice:
    /// tests compare the choices both ways make.
    #[doc(hidden)]
    pub fn debug_full_scans(&mut self, on: bool) {
        self.store.set_full_scans(on);
    }

    /// One block's table entry (for diagnostics; the format is not stable).
    #[doc(hidden)]
    pub fn debug_block(&self, b: u32) -> alloc::string::String {
        match (b < self.store.block_count())
            .then(|| self.store.block_in_ram(b))
            .flatten()
        {
            Some(e) => {
                // (`None`: only its block-table page on flash has it.)
                let w = self.store.wear_in_ram(b);
                alloc::format!(
                    "block {b}: {:?}/{:?} live {} wear {:?}; heads {:?}; journal_next {}",
                    e.state(),
                    e.kind(),
                    e.live,
                    w,
                    self.store
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

    /// The erase count the block table records for every logical block (what wear leveling
    /// sees; torture checks that a recovery does not lose them). Reads the block-table pages
    /// whose wear RAM does not hold.
    pub fn erase_counts(&mut self) -> Result<Vec<u32>> {
        let mut v = Vec::with_capacity(self.store.block_count() as usize);
        self.store.scan_wear(|_, _, w| v.push(w.ec))?;
        Ok(v)
    }

    /// Erases of blocks that no `Erasing` journal record had announced, in this session: a
    /// power cut before the next checkpoint loses their counts (DESIGN.md §15 item 6).
    pub fn unannounced_erases(&self) -> u64 {
        self.store.unannounced_erases()
    }

    /// Byte offsets on the device of the newest copy of every block-table page (for tests
    /// that damage them; `None`: no copy yet).
    #[doc(hidden)]
    pub fn debug_table_pages(&self) -> Vec<Option<u64>> {
        let p = self.store.p();
        self.store
            .bt_page_addrs()
            .iter()
            .map(|&a| {
                p.addr_valid(a)
                    .then(|| self.store.phys_offset(p.byte_of(a)))
            })
            .collect()
    }

    /// Block states and live bytes per log (for diagnostics; the format is not stable).
    #[doc(hidden)]
    pub fn debug_block_summary(&self) -> alloc::string::String {
        use core::fmt::Write;
        let mut counts = BTreeMap::new();
        for (_, e) in self.store.blocks_in_ram() {
            let k = alloc::format!("{:?}/{:?}", e.state(), e.kind());
            let v = counts.entry(k).or_insert((0u32, 0u64));
            v.0 += 1;
            v.1 += e.live as u64;
        }
        let mut out = alloc::string::String::new();
        for (k, (n, live)) in counts {
            let _ = write!(out, "{k}: {n} blocks, {live} B live; ");
        }
        let _ = write!(
            out,
            "reserve {} (cp {} two {} log {}) free {} pending {} kept {:?} victim {:?}",
            self.store.reserve_blocks(),
            self.cp_need_blocks(),
            self.cp_need_two(),
            self.store.log_floor(),
            self.store.free_blocks(),
            self.store.pending_blocks(),
            self.gc.kept,
            self.gc.victim
        );
        out
    }

    /// Whether the block table's records are paged from flash (`Config::records_ram`).
    pub fn records_paged(&self) -> bool {
        self.store.records_paged()
    }

    /// Space figures.
    pub fn statfs(&mut self) -> Result<StatFs> {
        let (usable, free) = self.space();
        let bs = self.store.p().data_block as u64;
        let entries = self.map.high as u64;
        Ok(StatFs {
            block_size: self.store.p().data_block,
            blocks: usable / bs,
            blocks_free: free / bs,
            files: self.counts.files as u64 + self.counts.dirs as u64,
            files_free: (u32::MAX as u64).saturating_sub(entries).min(free / 64),
            name_max: crate::format::params::NAME_MAX as u32,
        })
    }

    /// A summary of the file system.
    pub fn info(&mut self) -> Info {
        let (_usable, free) = self.space();
        // (Block states and erase counts: empty when a block-table page could not be read.)
        let mut used = 0u64;
        let mut states = Vec::new();
        let scan = self.store.scan_wear(|_, e, _| {
            if e.state() != BlockState::Bad {
                used += e.live as u64;
            }
            states.push(e.state());
        });
        if scan.is_err() {
            used = self.store.live_outside_journal();
            states.clear();
        }
        let erase_counts = self.erase_counts().unwrap_or_default();
        let (mut mn, mut mx, mut sum, mut good) = (u32::MAX, 0u32, 0u64, 0u64);
        for (&ec, s) in erase_counts.iter().zip(&states) {
            if *s != BlockState::Bad {
                mn = mn.min(ec);
                mx = mx.max(ec);
                sum += ec as u64;
                good += 1;
            }
        }
        let mean = if good == 0 {
            0.0
        } else {
            sum as f64 / good as f64
        };
        Info {
            params: self.store.p(),
            used_bytes: used,
            free_bytes: free,
            files: self.counts.files,
            dirs: self.counts.dirs,
            bad_blocks: self.store.count(BlockState::Bad),
            erase_count: (if good == 0 { 0 } else { mn }, mean, mx),
            erase_counts,
            mount_cost: self.mount.mount_cost,
            ram_bytes: self.ram_bytes(),
            recovered: self.mount.recovered,
            tag_commits: self.mount.tag_commits,
            lost_commits: self.mount.lost_commits,
            read_only_cause: self.mount.read_only_cause,
        }
    }

    /// Checks the block-table invariant that must hold after every operation (no free block
    /// is credited with live data). For tests; fsck checks this and more.
    #[doc(hidden)]
    pub fn debug_check_blocks(&self) -> core::result::Result<(), alloc::string::String> {
        use crate::store::BlockState;
        for (i, b) in self.store.blocks_in_ram() {
            if matches!(b.state(), BlockState::Free | BlockState::Erased) && b.live != 0 {
                return Err(alloc::format!(
                    "block {i} is {:?} but has {} live bytes",
                    b.state(),
                    b.live
                ));
            }
        }
        self.store.check_sums().map_err(|what| {
            alloc::format!("the block table's sums or page bounds are wrong: {what}")
        })
    }
}
