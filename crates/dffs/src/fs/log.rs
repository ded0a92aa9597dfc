//! Appending records to the journal: the one way a change reaches flash between checkpoints.
//!
//! A record is appended (after any bad-block remaps the store made since the last record, so
//! replay sees a swap before records that address the new block) and applied by the caller.
//! When the journal has no room the budget decides whether a checkpoint can make some. It must
//! never apply a record itself.

use crate::error::{Error, Result};
use crate::fs::checkpoint::{CheckpointDone, CheckpointNeed};
use crate::fs::Fs;
use crate::journal::Record;
use crate::store::Priority;
use dffs_flash::Flash;

impl<F: Flash> Fs<F> {
    /// Appends a record to the journal (after a recovery checkpoint if one is due).
    pub(crate) fn journal(&mut self, rec: &Record) -> Result<()> {
        self.ensure_writable()?;
        // An open transaction's own records leave its commit a whole block: without one, a
        // commit found the journal full at its block's end with no block to move to, after
        // every operation of the transaction had succeeded (4 KiB NOR chained cuts, churn
        // seed 109: `commit_transaction: ENOSPC`). Such a record is refused instead.
        self.journal
            .set_keep_next(self.txn.open.is_some() && !self.txn.committing);
        self.journal.record_remaps(&mut self.store, Priority::Log)?;
        self.announce_erases()?;
        if self.journal.fold_into_last(&mut self.store, rec) {
            return Ok(());
        }
        match self
            .journal
            .append_record(&mut self.store, rec, Priority::Log)
        {
            Ok(_) => Ok(()),
            // Out of journal room: a checkpoint starts the journal afresh and gives back the
            // blocks collected so far. Only between operations of their own (a record of a
            // transaction or of a split commit must not see a checkpoint before its end).
            Err(Error::NoSpace) => {
                let own_op = rec.tid() == 0;
                match self.checkpoint_for(CheckpointNeed::JournalFull { own_op })? {
                    CheckpointDone::Taken => self
                        .journal
                        .append_record(&mut self.store, rec, Priority::Log)
                        .map(|_| ()),
                    _ => Err(Error::NoSpace),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Announces the free blocks the allocator may erase next, before an operation that may
    /// take blocks ([`crate::journal::JournalWriter::announce_erases`]): writes, collection
    /// steps and checkpoints call it, as every journaled change does.
    pub(crate) fn announce_erases(&mut self) -> Result<()> {
        if self.cfg.read_only {
            return Ok(());
        }
        // As for any record: inside an open transaction the journal keeps its commit a block.
        self.journal
            .set_keep_next(self.txn.open.is_some() && !self.txn.committing);
        self.journal.announce_erases(&mut self.store, Priority::Log)
    }

    /// Makes the journal durable. After a journal block was swapped out for a failed program
    /// only a checkpoint does (the records since the swap sit where recovery cannot find them
    /// until the checkpoint's remap table says so); inside a transaction or replay the
    /// checkpoint comes at the end of the operation ([`Fs::after_op`]).
    pub(crate) fn journal_flush(&mut self) -> Result<()> {
        self.journal.record_remaps(&mut self.store, Priority::Log)?;
        let named = self.name_next_data_block()?;
        let r = self.journal.flush(&mut self.store);
        if let Some(b) = named {
            match r {
                Ok(()) => self.store.set_data_next(b),
                // (The flush's error is the one returned.)
                Err(_) => {
                    let _ = self.store.drop_data_next(b);
                }
            }
        }
        r?;
        self.checkpoint_for(CheckpointNeed::JournalSwapped)?;
        Ok(())
    }
}
