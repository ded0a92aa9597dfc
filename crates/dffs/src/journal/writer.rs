//! Writing the journal: appending records, making them durable, and moving the journal from
//! block to block.
//!
//! The journal is a chain of blocks in the journal log. A block's first record is a link
//! naming the block before it and the block the journal will continue in; that next block is
//! allocated, erased and set aside (`Reserved`) *before* the link naming it is written, so the
//! move into it can never fail half way and a reader can always tell the chain's next block
//! from a stray one. When no block can be set aside after the one the journal moves into, the
//! move still happens (with its link) and the link names no next block: the chain ends there,
//! and the journal is full when that block is, until a checkpoint restarts it. Records are buffered in the journal head's page (NAND) and programmed when
//! the page fills or when the file system makes them durable (fsync, sync, a commit, a
//! checkpoint); on NOR each record is programmed as it is appended. While a record is the last
//! node of that page in RAM, a `Setattr` of the same inode may be folded into it
//! ([`JournalWriter::fold_into_last`]).
//!
//! After a mount from a clean checkpoint, the session's first program is a session marker
//! placed one page after the journal position the checkpoint recorded (that page stays unused,
//! so a marker cut in mid-program can never be mistaken for the recorded position): a later
//! mount that finds any record after a clean checkpoint knows the heads may hold more than
//! the checkpoint says and recovers them.
//!
//! It owns the journal's position (current and reserved next block), the session marker, the
//! bytes written since the last checkpoint, and the recording of bad-block swaps the store
//! made. It must never apply a record (the file system does) nor decide when to checkpoint.

use alloc::vec::Vec;

use super::record::{Record, ERASED, MAX_ERASING};
use crate::error::{Error, Result};
use crate::format::node::{self, NodeBuilder, Probe};
use crate::format::params::{Addr, LogKind};
use crate::store::{BlockState, Priority, Store};
use dffs_flash::Flash;

/// The journal's position and what is owed to it.
#[derive(Clone, Debug)]
pub(crate) struct JournalWriter {
    /// Block set aside (erased, `Reserved`) for the journal to continue in, or `u32::MAX`.
    next: u32,
    /// The journal's current (or last) block: the `prev` of the next block's link record, so
    /// replay can follow the chain even when the head closed itself at a block end.
    last: u32,
    /// Journal bytes since the last checkpoint: records appended, and the rest of each page a
    /// flush closed (NAND never programs a page twice, so a synced record spends its page, and
    /// a replay after a power cut reads it).
    bytes: u64,
    /// The current block's link names no next block: the journal cannot leave it before a
    /// checkpoint restarts the chain.
    chain_ends: bool,
    /// A checkpoint restarted the journal in a block the chain does not name and has not been
    /// written yet (it failed): no record may be appended before one is, since replay would
    /// never reach it.
    unlinked: bool,
    /// Moves keep the block after the next one (a transaction is open and not committing):
    /// a move happens only when the block after its target can be set aside first, so the
    /// target stays whole for the commit.
    keep_next: bool,
    /// Where the last record went (a hint for [`JournalWriter::fold_into_last`], which checks
    /// that the node there is still the head's last and only in RAM).
    last_record: Addr,
}

impl Default for JournalWriter {
    fn default() -> Self {
        JournalWriter {
            next: u32::MAX,
            last: u32::MAX,
            bytes: 0,
            chain_ends: false,
            unlinked: false,
            keep_next: false,
            last_record: Addr::NONE,
        }
    }
}

impl JournalWriter {
    /// While `on`, the journal moves into its reserved block only when the block after it can
    /// be set aside first (`NoSpace` with nothing changed otherwise): records of an open
    /// transaction must leave its commit a whole block to go to.
    pub fn set_keep_next(&mut self, on: bool) {
        self.keep_next = on;
    }

    /// Whether the journal can leave its current block: a block is set aside for it and the
    /// current block's link names it.
    pub fn holds_next<F: Flash>(&self, st: &Store<F>) -> bool {
        !self.chain_ends
            && !self.unlinked
            && self.next != u32::MAX
            && st
                .block_in_ram(self.next)
                .is_some_and(|e| e.state() == BlockState::Reserved)
    }

    /// The reserved next block (`u32::MAX` when there is none).
    pub fn next(&self) -> u32 {
        self.next
    }

    /// Continues a journal whose current block is `last` and whose reserved next block is
    /// `next` (mount, or a reload after a transaction abort: the bytes count on).
    pub fn resume(&mut self, last: u32, next: u32) {
        self.last = last;
        self.next = next;
        self.chain_ends = next == u32::MAX;
    }

    /// Forgets the reserved next block (after a power cut it may have been written: it goes
    /// back to the pool, to be erased before any use).
    pub fn drop_reservation(&mut self) {
        self.next = u32::MAX;
    }

    /// Journal bytes since the last checkpoint: records and the pages' ends flushes skipped.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A checkpoint was written: the journal since it is empty; after a clean one the next
    /// session must mark itself (`session`).
    pub fn checkpointed<F: Flash>(&mut self, st: &mut Store<F>, session: bool) {
        self.bytes = 0;
        self.unlinked = false;
        self.expect_session(st, session);
    }

    /// Whether the session has not programmed anything yet after a clean mount.
    pub fn session_needed<F: Flash>(&self, st: &Store<F>) -> bool {
        st.first_program_pending()
    }

    /// After a mount from a clean checkpoint (`needed`): the session marker goes one page
    /// after the recorded journal position, before the session's first program of any kind.
    /// The store writes it at that moment (the checkpoint left the journal head room for
    /// it).
    pub fn expect_session<F: Flash>(&mut self, st: &mut Store<F>, needed: bool) {
        let marker = needed.then(|| (LogKind::Journal, Record::Session.encode()));
        st.set_first_program(marker);
    }

    /// Appends record node `nb` to the journal, moving the journal into its reserved block
    /// first when the current one cannot take it. Returns its address.
    pub fn append<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        nb: NodeBuilder,
        prio: Priority,
    ) -> Result<Addr> {
        let len = nb.w.len() as u32;
        if self.unlinked && !st.checkpointing() {
            return Err(Error::NoSpace);
        }
        // The session marker goes first (a write of any kind programs it): the checkpoint left
        // room for it in the journal's block, not for it and this record, so whether the
        // record needs the next block is known only after it.
        st.program_first()?;
        if st.needs_new_block(LogKind::Journal, len) {
            self.switch_block(st, prio, false)?;
        }
        let a = st.write_node(LogKind::Journal, nb, prio)?;
        self.bytes += len as u64;
        self.last_record = a;
        Ok(a)
    }

    /// NAND: folds `rec` into the last record appended, when that record is still the last
    /// node of the journal head's page in RAM (nothing of it programmed) and the two make one
    /// of the same size ([`Record::merged`]). Returns whether it did; then `rec` needs no
    /// record of its own. Replay sees the same changes in the same order, and the page
    /// becomes durable with both or neither, as it would have with two records.
    pub fn fold_into_last<F: Flash>(&mut self, st: &mut Store<F>, rec: &Record) -> bool {
        let a = self.last_record;
        let Some(bytes) = st.unprogrammed_last(LogKind::Journal, a) else {
            return false;
        };
        let Probe::Header(h) = node::probe(bytes, bytes.len() as u32) else {
            return false;
        };
        let merged = node::verify(bytes, &h)
            .and_then(|body| Record::decode(&h, body))
            .ok()
            .and_then(|prev| prev.merged(rec));
        match merged {
            Some(m) => st.replace_last(LogKind::Journal, a, m.encode()),
            None => false,
        }
    }

    /// Appends `rec`.
    pub fn append_record<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        rec: &Record,
        prio: Priority,
    ) -> Result<Addr> {
        self.append(st, rec.encode(), prio)
    }

    /// Makes every appended record durable (NAND: programs the journal head's partly filled
    /// page).
    pub fn flush<F: Flash>(&mut self, st: &mut Store<F>) -> Result<()> {
        let before = st.head(LogKind::Journal);
        let (open, block, off) = (before.is_open(), before.block(), before.off());
        st.flush(LogKind::Journal)?;
        let after = st.head(LogKind::Journal);
        if open {
            let end = if after.is_open() && after.block() == block {
                after.off()
            } else {
                st.p().geometry.block_size()
            };
            self.bytes += end.saturating_sub(off) as u64;
        }
        Ok(())
    }

    /// Records the bad-block swaps the store made since the last call, oldest first, each
    /// made durable at once (later records may address the swapped blocks).
    pub fn record_remaps<F: Flash>(&mut self, st: &mut Store<F>, prio: Priority) -> Result<()> {
        let remaps: Vec<_> = st.take_new_remaps();
        for r in remaps {
            let rec = Record::Remap {
                logical: r.logical,
                physical: r.physical,
            };
            self.append_record(st, &rec, prio)?;
            self.flush(st)?;
        }
        Ok(())
    }

    /// Announces the free blocks the allocator may erase next that no record announced since
    /// the last checkpoint (`Erasing` records, made durable before any of them is erased), so
    /// that a mount after a power cut can count their erases. A journal without room for the
    /// record announces nothing (the erases are then counted only by the next checkpoint).
    pub fn announce_erases<F: Flash>(&mut self, st: &mut Store<F>, prio: Priority) -> Result<()> {
        let blocks = st.erase_announcement()?;
        self.announce_blocks(st, &blocks, prio)
    }

    /// Announces `blocks` for erasing (see [`JournalWriter::announce_erases`]).
    pub fn announce_blocks<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        blocks: &[u32],
        prio: Priority,
    ) -> Result<()> {
        for chunk in blocks.chunks(MAX_ERASING) {
            let rec = Record::Erasing {
                blocks: chunk.to_vec(),
            };
            if !self.append_flushed(st, &rec, prio)? {
                return Ok(());
            }
            st.announce(chunk);
        }
        Ok(())
    }

    /// Appends `rec` and makes it durable; false (nothing written) when the journal has no
    /// room for it.
    fn append_flushed<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        rec: &Record,
        prio: Priority,
    ) -> Result<bool> {
        match self.append_record(st, rec, prio) {
            Ok(_) => {}
            Err(Error::NoSpace) => return Ok(false),
            Err(e) => return Err(e),
        }
        self.flush(st)?;
        Ok(true)
    }

    /// Records that `blocks` were erased (entries with [`ERASED`]), so that a mount after a
    /// power cut before the next checkpoint counts their erases. Nothing when the journal has
    /// no room for the record.
    pub fn record_erased<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        blocks: &[u32],
        prio: Priority,
    ) -> Result<()> {
        let rec = Record::Erasing {
            blocks: blocks.iter().map(|&b| b | ERASED).collect(),
        };
        self.append_flushed(st, &rec, prio).map(|_| ())
    }

    /// Starts the journal for a checkpoint (after format, a recovery, or when the current
    /// block is nearly full): a fresh block whose first records are the link and a session
    /// record.
    pub fn restart<F: Flash>(&mut self, st: &mut Store<F>) -> Result<()> {
        if st.head(LogKind::Journal).is_open() {
            st.close_head_of(LogKind::Journal)?;
        }
        self.switch_block(st, Priority::Reserve, true)?;
        self.append_record(st, &Record::Session, Priority::Reserve)?;
        Ok(())
    }

    /// Allocates, erases and sets aside the journal's next block, unless one is set aside.
    pub fn reserve_next<F: Flash>(&mut self, st: &mut Store<F>, prio: Priority) -> Result<()> {
        // A reservation is only good while its block is still set aside: after a power cut,
        // replay may have followed the journal into it (it holds records now).
        if self.next != u32::MAX && st.block(self.next)?.state() == BlockState::Reserved {
            return Ok(());
        }
        self.next = u32::MAX;
        let n = st.alloc_block(LogKind::Journal, prio)?;
        st.set_state(n, BlockState::Reserved)?;
        self.next = n;
        Ok(())
    }

    /// Moves the journal into its reserved next block (erased when it was reserved, so the
    /// move itself cannot fail), reserves and erases the one after it, and begins the new
    /// block with the link record that names both neighbours. `NoSpace` with nothing changed
    /// when the current block's link names no next block (or none can be reserved for a
    /// chain that starts here). `fresh`: a checkpoint starts a chain of its own, which may
    /// begin in any block (until it is written, nothing else may be appended there unless the
    /// old chain names the block).
    fn switch_block<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        prio: Priority,
        fresh: bool,
    ) -> Result<()> {
        if self.chain_ends && !fresh {
            return Err(Error::NoSpace);
        }
        let named = !self.chain_ends
            && self.next != u32::MAX
            && st.block(self.next)?.state() == BlockState::Reserved;
        let head = st.head(LogKind::Journal);
        let prev = if head.is_open() {
            head.block()
        } else {
            self.last
        };
        self.reserve_next(st, prio)?;
        let b = self.next;
        // Keeping the block after it: that one is set aside before anything moves.
        let after = if self.keep_next && !fresh {
            let n = st.alloc_block(LogKind::Journal, prio)?;
            st.set_state(n, BlockState::Reserved)?;
            Some(n)
        } else {
            None
        };
        self.next = u32::MAX;
        st.open_head_in(LogKind::Journal, b)?;
        self.last = b;
        self.chain_ends = false;
        self.unlinked = !named;
        // No block for the one after it: the move goes on (the link is what makes the new
        // block's records part of the journal; a move that stopped here, without one, lost
        // a transaction's commit record written next: 4 KiB NOR chained cuts, links seed 119)
        // and the link names no next block.
        match after {
            Some(n) => self.next = n,
            None => match self.reserve_next(st, prio) {
                Ok(()) => {}
                Err(Error::NoSpace) => self.chain_ends = true,
                Err(e) => return Err(e),
            },
        }
        let link = Record::Link {
            prev,
            next: self.next,
        };
        st.write_node(LogKind::Journal, link.encode(), prio)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::params::{FormatOptions, Params};
    use crate::journal::{JournalScan, ScanStart};
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

    /// A store on a fresh RAM device of geometry `g` and a journal started on it (its next
    /// block set aside), with the journal's first block and the one set aside.
    fn started(g: dffs_flash::Geometry) -> (Store<RamFlash>, JournalWriter, u32, u32) {
        let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
        let mut st = Store::new(RamFlash::new(g), p);
        let mut jw = JournalWriter::default();
        jw.reserve_next(&mut st, Priority::Reserve).unwrap();
        jw.restart(&mut st).unwrap();
        let (first, next) = (st.head(LogKind::Journal).block(), jw.next());
        (st, jw, first, next)
    }

    /// The `JTxCommit` ids replay finds in a journal that starts at `first` with `next` set
    /// aside.
    fn replayed_commits(st: &mut Store<RamFlash>, first: u32, next: u32) -> Vec<u64> {
        replayed(st, first, next)
            .into_iter()
            .filter_map(|rec| match rec {
                Record::TxCommit { tid } => Some(tid),
                _ => None,
            })
            .collect()
    }

    /// Every record replay finds in a journal that starts in `first` (links and session
    /// markers left out).
    fn replayed(st: &mut Store<RamFlash>, first: u32, next: u32) -> Vec<Record> {
        let start = ScanStart {
            block: first,
            off: 0,
            next,
            next_seq: 0,
            clean: false,
        };
        let mut scan = JournalScan::new(st, start).unwrap();
        let mut recs = Vec::new();
        while let Some(rec) = scan.next(st).unwrap() {
            if !matches!(rec, Record::Link { .. } | Record::Session) {
                recs.push(rec);
            }
        }
        recs
    }

    /// Two swaps of the same logical block between two journal writes (the spare the first
    /// gave it fails as well) are journaled oldest first, so replay, which applies each as
    /// the newest mapping of both blocks, ends with the second. (They were once journaled
    /// newest first, from a stack, and replay after a cut restored the failed spare.)
    #[test]
    fn two_swaps_of_one_block_replay_to_the_newest() {
        use crate::store::Remap;
        let (mut st, mut jw, first, next) = started(nor_geometry(32));
        let (l, s1, s2) = (20, 25, 27);
        for physical in [s1, s2] {
            st.queue_new_remap(Remap {
                logical: l,
                physical,
            });
        }
        jw.record_remaps(&mut st, Priority::Log).unwrap();
        let (mut replay, _, _, _) = started(nor_geometry(32));
        for rec in replayed(&mut st, first, next) {
            if let Record::Remap { logical, physical } = rec {
                replay.apply_remap(logical, physical).unwrap();
            }
        }
        assert_eq!(
            replay.remaps(),
            &[Remap {
                logical: l,
                physical: s2
            }]
        );
    }

    fn setattr(ino: u32, mask: u32, uid: u32) -> Record {
        let attrs = crate::format::attrs::Attrs {
            uid,
            mode: 0o600,
            ..Default::default()
        };
        Record::Setattr {
            tid: 0,
            ino,
            mask,
            attrs,
        }
    }

    /// NAND: a `Setattr` folds into the one before it while that one is the last node of the
    /// journal head's page in RAM, and replay finds the merged record; once the page is
    /// programmed, or another record follows, nothing folds. On NOR (every record programmed
    /// as it is appended) nothing ever folds.
    #[test]
    fn setattrs_fold_only_into_the_last_record_still_in_ram() {
        use crate::journal::mask;
        use dffs_testkit::ram_flash::nand_geometry;
        let (mut st, mut jw, first, next) = started(nand_geometry(32));
        jw.append_record(&mut st, &setattr(5, mask::UID, 7), Priority::Log)
            .unwrap();
        let bytes = jw.bytes();
        assert!(jw.fold_into_last(&mut st, &setattr(5, mask::MODE, 0)));
        assert_eq!(jw.bytes(), bytes, "a folded record took journal bytes");
        // Another inode's record does not fold; it is appended, and the first no longer
        // takes folds.
        assert!(!jw.fold_into_last(&mut st, &setattr(6, mask::UID, 8)));
        jw.append_record(&mut st, &setattr(6, mask::UID, 8), Priority::Log)
            .unwrap();
        assert!(!jw.fold_into_last(&mut st, &setattr(5, mask::GID, 0)));
        jw.append_record(&mut st, &setattr(5, mask::GID, 0), Priority::Log)
            .unwrap();
        // Programmed (a flush), it takes no fold either.
        jw.flush(&mut st).unwrap();
        assert!(!jw.fold_into_last(&mut st, &setattr(5, mask::ATIME, 0)));
        let got = replayed(&mut st, first, next);
        let want = vec![
            setattr(5, mask::UID | mask::MODE, 7),
            setattr(6, mask::UID, 8),
            setattr(5, mask::GID, 0),
        ];
        assert_eq!(got, want);

        let (mut st, mut jw, _, _) = started(nor_geometry(48));
        jw.append_record(&mut st, &setattr(5, mask::UID, 7), Priority::Log)
            .unwrap();
        assert!(!jw.fold_into_last(&mut st, &setattr(5, mask::MODE, 0)));
    }

    /// Every record the writer accepts is found by the reader, also when the journal moves
    /// into its reserved block while no block can be set aside after it (a move that stopped
    /// half way left the new block without its link, and the commit record appended to it
    /// next was invisible to replay: a committed transaction lost at the next mount).
    #[test]
    fn records_accepted_after_a_move_without_a_next_block_are_replayed() {
        let (mut st, mut jw, first, next) = started(nor_geometry(48));
        // From now on no block may be allocated for the journal.
        let free = st.free_blocks();
        st.set_floors(free, free, free);
        let mut accepted = 0u64;
        let mut refused = 0;
        for tid in 1..10_000u64 {
            match jw.append_record(&mut st, &Record::TxCommit { tid }, Priority::Log) {
                Ok(_) => accepted += 1,
                Err(Error::NoSpace) => {
                    refused += 1;
                    if refused == 3 {
                        break;
                    }
                }
                Err(e) => panic!("append: {e:?}"),
            }
        }
        assert_eq!(refused, 3, "the journal never filled");
        let moved = st.head(LogKind::Journal).block();
        assert_eq!(
            moved, next,
            "the journal did not move into its reserved block"
        );
        assert_eq!(jw.next(), u32::MAX);
        let commits = replayed_commits(&mut st, first, next);
        let want: Vec<u64> = (1..=accepted).collect();
        assert_eq!(commits, want);
    }

    /// While a transaction's records keep the next block (`set_keep_next`), they never move
    /// the journal into its reserved block unless the block after it is set aside first: they
    /// are refused with the reserved block still whole, and the commit (no longer keeping it)
    /// moves there and is found by the reader. Before, the records took the reserved block and
    /// the commit found the journal full with no block to move to.
    #[test]
    fn a_transaction_leaves_its_commit_the_reserved_block() {
        let (mut st, mut jw, first, next) = started(nor_geometry(48));
        let free = st.free_blocks();
        st.set_floors(free, free, free);
        jw.set_keep_next(true);
        let mut accepted = 0u64;
        loop {
            match jw.append_record(
                &mut st,
                &Record::TxCommit { tid: accepted + 1 },
                Priority::Log,
            ) {
                Ok(_) => accepted += 1,
                Err(Error::NoSpace) => break,
                Err(e) => panic!("append: {e:?}"),
            }
            assert!(accepted < 10_000, "the journal never filled");
        }
        assert_eq!(
            st.head(LogKind::Journal).block(),
            first,
            "a record took the reserved block"
        );
        assert!(jw.holds_next(&st));
        jw.set_keep_next(false);
        let commit = accepted + 1;
        jw.append_record(&mut st, &Record::TxCommit { tid: commit }, Priority::Log)
            .expect("the commit found no room");
        assert_eq!(st.head(LogKind::Journal).block(), next);
        let commits = replayed_commits(&mut st, first, next);
        let want: Vec<u64> = (1..=commit).collect();
        assert_eq!(commits, want);
    }
}
