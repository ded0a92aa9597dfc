//! How a mounted file system is configured: its RAM budget and work trade-offs ([`Config`]),
//! and where it gets the time from ([`Clock`]).
//!
//! Owns the configuration presets and the RAM estimate of a configuration. It must never
//! depend on mounted state: everything here is decided before mount.

use crate::format::params::NandSupport;
use dffs_flash::FlashKind;

use crate::format::attrs::Time;
use crate::format::params::Params;
use crate::store::BlockTable;

/// How much RAM the mounted file system may use, and how it trades work for latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Directory pages kept in RAM.
    pub dir_cache: usize,
    /// Inode map pages kept in RAM.
    pub map_cache: usize,
    /// File index nodes kept in RAM.
    pub index_cache: usize,
    /// Clean file inodes kept in RAM.
    pub inode_cache: usize,
    /// File data blocks kept in RAM (dirty ones are written back when this fills).
    pub data_cache: usize,
    /// Dirty metadata items (inodes, directory pages, map pages) before a checkpoint.
    pub max_dirty: usize,
    /// Small dirty items that may share one count of `max_dirty` (at least 1), on devices
    /// large enough ([`Config::shares_on`]). A dirty inode or directory item of a few names
    /// holds a few hundred bytes of RAM where a full directory page holds a page: with `n`,
    /// each counts `1/n` of an item, or its RAM's share of a page when that is more. Fewer
    /// checkpoints when many small files and directories are created (a copied tree). 1 counts
    /// every dirty item whole.
    pub dirty_shares: usize,
    /// Open file handles.
    pub max_open: usize,
    /// Journal bytes written since the last checkpoint before a new checkpoint (bounds the
    /// replay after a power cut). On NAND a flush closes its page, so a synced record counts
    /// the whole page it takes: the replay reads that page.
    pub journal_limit: u32,
    /// Garbage-collection work (pages examined) one operation may do.
    pub gc_step: u32,
    /// Mount read-only.
    pub read_only: bool,
    /// Every write is synchronous (as `mount -o sync`).
    pub sync: bool,
    /// Extents an uncommitted file update may touch before it is committed in parts.
    pub overlay_extents: usize,
    /// Block-table pages whose erase counts and ages are kept in RAM (at least one; those of
    /// blocks that changed since their page was written are kept besides). The state and live
    /// bytes of every block are in RAM unless the records are paged (`records_ram`); erase
    /// counts and ages of the other pages are read from flash when allocation, wear leveling
    /// or the choice of a victim needs them.
    pub table_cache: usize,
    /// Most bytes the packed records of every block (state, log and live bytes: 19 to 26
    /// bits each) may take in RAM. On a larger device a mount pages them as it does erase
    /// counts: RAM holds the records of a few block-table pages (at most `table_cache`, and
    /// no more than an eighth of this in all) and those changed since their page was
    /// written, and reads the others when needed (DESIGN §12.2). `0` pages them on any
    /// device. Without the `paged-records` cargo feature the records are never paged and
    /// this is not used.
    pub records_ram: usize,
    /// Bytes of consecutive file blocks compressed together into one node (rounded down to
    /// whole blocks, at most a quarter of an erase block and 64 KiB). Larger groups compress
    /// better; reading one block decompresses its whole group, and the group is transient RAM
    /// when writing. A write-time choice only: any group size reads back.
    pub compress_group: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dir_cache: 8,
            map_cache: 4,
            index_cache: 8,
            inode_cache: 16,
            data_cache: 8,
            max_dirty: 24,
            dirty_shares: 4,
            max_open: 16,
            journal_limit: 128 * 1024,
            gc_step: 32,
            read_only: false,
            sync: false,
            overlay_extents: 256,
            table_cache: 64,
            records_ram: 128 * 1024,
            compress_group: 16 * 1024,
        }
    }
}

impl Config {
    /// The smallest configuration: a few pages of cache, for microcontrollers.
    pub fn smallest() -> Config {
        Config {
            dir_cache: 3,
            map_cache: 3,
            index_cache: 2,
            inode_cache: 2,
            data_cache: 2,
            max_dirty: 8,
            dirty_shares: 1,
            max_open: 4,
            journal_limit: 64 * 1024,
            gc_step: 16,
            read_only: false,
            sync: false,
            overlay_extents: 32,
            table_cache: 1,
            records_ram: 16 * 1024,
            compress_group: 4 * 1024,
        }
    }

    /// A configuration that spends more RAM for speed.
    pub fn fast() -> Config {
        Config {
            dir_cache: 32,
            map_cache: 16,
            index_cache: 64,
            inode_cache: 128,
            data_cache: 64,
            max_dirty: 128,
            dirty_shares: 4,
            max_open: 64,
            journal_limit: 512 * 1024,
            gc_step: 64,
            read_only: false,
            sync: false,
            overlay_extents: 1024,
            table_cache: 1024,
            records_ram: 1024 * 1024,
            compress_group: 32 * 1024,
        }
    }

    /// The shares of [`Config::dirty_shares`] on a device formatted with `p`: at most as many
    /// as keep the directory pages `n * max_dirty` dirty items may write at a checkpoint
    /// within 1/256 of the device (a checkpoint's need is what the free pool keeps back for
    /// it: on small devices every item counts whole).
    pub fn shares_on(&self, p: &Params) -> usize {
        let per = (self.max_dirty.max(1) as u64 * p.dir_page as u64 * 256).max(1);
        (p.geometry.capacity() / per).clamp(1, self.dirty_shares.max(1) as u64) as usize
    }

    /// RAM this configuration needs on a device formatted with `p` (an upper bound of what
    /// the caches, buffers and tables hold; dirty metadata beyond the caches counts against
    /// `max_dirty`).
    pub fn ram_estimate(&self, p: &Params) -> usize {
        let g = p.geometry;
        let page = p.dir_page as usize;
        let heads = p.head_count()
            * if g.flash_kind() == FlashKind::Nand {
                g.page_size as usize
            } else {
                0
            };
        // The packed records, the changed-record bits, the pages' counts and addresses, the
        // wear cache, and the wear of records changed since their pages were written (as many
        // as a checkpoint's delta nodes carry).
        let blocks = BlockTable::ram_bound(
            g.blocks,
            p.bt_entries(),
            g.block_size(),
            self.table_cache,
            self.records_ram,
        ) + (p.bt_delta_nodes() * p.bt_delta_entries()) as usize * 12;
        let dirs = (self.dir_cache + self.max_dirty / 2) * (page + 96);
        let map = (self.map_cache + 2) * (p.map_page as usize + 64);
        let index = self.index_cache * (p.index_node as usize + 48);
        // Dirty inodes: with shares, up to `n` per item, their nodes (inline content
        // included) at most a page per item. (Dirty directory items: their RAM is at most a
        // page per item either way.)
        let n = self.shares_on(p);
        let content = if n > 1 { self.max_dirty / 2 * page } else { 0 };
        // (A cached inode holds up to `direct_ptrs` block addresses: 64 on NAND.)
        let ptrs = 4 * p.direct_ptrs as usize;
        let inodes = (self.inode_cache + self.max_dirty / 2 * n) * (160 + ptrs) + content;
        let data = self.data_cache * (p.data_block as usize + 48);
        let open = self.max_open * (64 + 12 * 8);
        let fixed = 2048;
        // Compression: a group in, its compressed form out, and a group to read into.
        let zbuf = if p.compression != 0 {
            3 * crate::format::compress::group_blocks(p, self.compress_group) as usize
                * p.data_block as usize
        } else {
            0
        };
        heads + blocks + dirs + map + index + inodes + data + open + fixed + zbuf
    }
}

/// Where the file system gets the current time from.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Time;
}

/// A clock that always says the epoch (for systems without a clock, and deterministic tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> Time {
        Time::default()
    }
}

/// The system clock (with the `std` feature).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now(&self) -> Time {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Time {
                secs: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(_) => Time::default(),
        }
    }
}
