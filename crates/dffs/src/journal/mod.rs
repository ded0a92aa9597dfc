//! The journal: every change since the last checkpoint, as an ordered log of records.
//!
//! [`record`] is the only encoder and decoder of each record type; [`writer`] appends records,
//! makes them durable and moves the journal from block to block; [`reader`] walks the records
//! back after a mount; [`tag_commits`] finds the commits synced writes left in their data
//! pages' tags instead of in records. Replay applies them with the file system's own `apply`, the same code
//! that applied them live. The journal sits below the index: nothing here knows a directory,
//! an inode map or a file index.

pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod tag_commits;
pub(crate) mod writer;

pub(crate) use reader::{JournalScan, ScanStart};
pub(crate) use record::{apply_setattr, mask, max_commit_extents, Record, Tid};
pub(crate) use writer::JournalWriter;
