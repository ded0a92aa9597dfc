//! DFFS, a direct flash file system for raw NAND and NOR flash.
//!
//! Layers, from the device up (data flows one way, each layer only calls the ones below;
//! docs/DESIGN.md §2 draws them):
//! - `dffs-flash` (its own crate, re-exported here): the device model (NAND and NOR behind one
//!   trait), geometry, page pairing, and the `embedded-storage` adapter.
//! - [`format`](mod@format): the byte layouts, pure (node framing and CRCs, format parameters, attributes,
//!   extents, compression); imports no store.
//! - `store`: the block manager: byte-addressed access with counters and ECC bookkeeping
//!   (`medium`), the block table (state, live bytes, wear), the log heads, allocation and
//!   dynamic wear leveling, bad-block swaps, node reads checked by CRC. It never names a
//!   journal record.
//! - `journal` (records, writer, reader) and `checkpoint` (anchors and checkpoint records):
//!   the logs over the store. The journal never imports the index.
//! - `index`: the inode map (DirInode map), directory pages with their embedded hash tables
//!   and linear-hashing growth, the file index (inode layout, content map, copy-on-write
//!   index tree), and the one LRU their caches run on.
//! - `fs`: the [`Fs`] API and the orchestration: mount and replay, one `apply` for every
//!   record kind, checkpoints and the space budget (the only two modules that decide to
//!   checkpoint or collect), inodes, names, files (handles, overlays, data cache, read, write,
//!   truncate, commit), garbage collection, fsck and reports.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub(crate) mod checkpoint;
mod error;
pub mod format;
mod fs;
pub(crate) mod index;
pub(crate) mod journal;
mod sort;
pub(crate) mod store;
mod vec_map;

pub use dffs_flash::{
    flash_enum, EccStatus, Flash, FlashError, FlashKind, Geometry, NorFlashDevice, PagePairing,
};
pub use error::{Error, Result};
pub use format::attrs::{Attrs, Ino, Time, ROOT_INO};
pub use format::params::{Addr, FormatOptions, Params};
pub use fs::Fh;
#[cfg(feature = "std")]
pub use fs::SystemClock;
pub use fs::{
    Activity, Config, DirEntry, FileKind, Fs, FsckReport, GcReport, Info, OpenFlags, SetAttr, Stat,
    StatFs,
};
pub use fs::{Clock, NoClock};
pub use store::{Cause, CauseCounts, OpCounts, OpTotals};
