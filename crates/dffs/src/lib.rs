//! DFFS, a direct flash file system for raw NAND and NOR flash.
//!
//! Layers, from the device up (data flows one way, each layer only calls the ones below):
//! - `dffs-flash` (its own crate, re-exported here): the device model (NAND and NOR behind one
//!   trait) and the `embedded-storage` adapter.
//! - [`medium`]: byte-addressed access with counters and ECC bookkeeping.
//! - [`store`]: the block manager (allocation, wear, bad blocks) and the log heads.
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
pub(crate) mod store;

pub use dffs_flash::{
    EccStatus, Flash, FlashError, FlashKind, Geometry, NorFlashDevice, PagePairing,
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
