//! Commits: making a file's overlay its committed content in one journal record (fsync, close,
//! O_SYNC writes), sync of every open file, and transactions across files.
//!
//! It must never let a checkpoint see half a commit or half a transaction.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::compress;
use crate::format::extents::{BlockMap, ExtentMap};
use crate::format::node::{DataEnd, TAG_MAX_SIZE};
use crate::format::params::LogKind;
use crate::fs::files::handles::Fh;
use crate::fs::files::overlay::Overlay;
use crate::fs::Fs;
use crate::journal::{max_commit_extents, Record, Tid};
use crate::store::Priority;
use alloc::vec::Vec;
use dffs_flash::Flash;

impl<F: Flash> Fs<F> {
    /// Commits the uncommitted changes of `ino` as one journal record (or, for very large
    /// updates, as a transaction of several).
    pub(crate) fn commit_ino(&mut self, ino: Ino) -> Result<()> {
        self.commit_ino_as(ino, false)
    }

    /// Commits `ino` for a synced write: when the update is a run of new consecutive blocks
    /// the tag of its last data page commits it (no journal record, FORMAT.md §8.7); otherwise
    /// as [`Fs::commit_ino`]. The caller makes the journal durable.
    pub(crate) fn commit_ino_synced(&mut self, ino: Ino) -> Result<()> {
        self.commit_ino_as(ino, true)
    }

    fn commit_ino_as(&mut self, ino: Ino, synced: bool) -> Result<()> {
        if !self.open.has_overlay(ino) {
            return Ok(());
        }
        let run = self.run_end(ino, synced)?;
        if synced {
            self.cp.synced_runs = run.is_some();
        }
        let by_tags = match run {
            Some((first, end)) => self.flush_run(ino, first, end)?,
            None => {
                self.flush_blocks(ino)?;
                false
            }
        };
        if !by_tags && synced {
            self.name_data_block()?;
        }
        let Some(mut ov) = self.open.files.get_mut(&ino).and_then(|o| o.overlay.take()) else {
            return Ok(());
        };
        if by_tags {
            let rec = self.commit_record(0, ino, &ov, ov.extents.clone());
            return self.apply(&rec);
        }
        // A record the journal refuses (`NoSpace`) leaves the update uncommitted, as it was:
        // the file keeps its committed content, and the update its blocks in the data cache,
        // which a later commit tries again or a release discards. (Dropped here, its blocks
        // stayed in the cache as if committed: a truncation refused so read zeros past the
        // new size in a file that kept its old one, model seed 4020.)
        let restore = |fs: &mut Self, ov: Overlay| {
            if let Some(o) = fs.open.files.get_mut(&ino) {
                o.overlay = Some(ov);
            }
        };
        // A spilled update commits its whole block map at once.
        let map = match ov.spilled.take() {
            Some(mut sp) => {
                let credit = self.fold_blocks(&sp);
                let floor = self.store.lower_copy_floor(credit);
                let r = self.tree(ino).fold(&mut sp);
                self.store.restore_copy_floor(floor);
                let map = BlockMap {
                    depth: sp.depth,
                    root: sp.root,
                    direct: sp.direct.clone(),
                };
                ov.spilled = Some(sp);
                if let Err(e) = r {
                    restore(self, ov);
                    return Err(e);
                }
                Some(map)
            }
            None => None,
        };
        if let Some(m) = map {
            let mut rec =
                self.commit_record(self.txn.open.unwrap_or(0), ino, &ov, ExtentMap::new());
            if let Record::Commit { map, trunc_to, .. } = &mut rec {
                *map = Some(m);
                *trunc_to = None;
            }
            if !self.open.is_orphan(ino) {
                if let Err(e) = self.journal(&rec) {
                    restore(self, ov);
                    return Err(e);
                }
            }
            return self.apply(&rec);
        }
        // An unlinked file's changes never need to survive a power cut.
        if self.open.is_orphan(ino) {
            let rec = self.commit_record(0, ino, &ov, ov.extents.clone());
            return self.apply(&rec);
        }
        let per = max_commit_extents(
            self.store
                .p()
                .dir_page
                .min(self.store.p().geometry.page_size.max(512)),
        )
        .max(1);
        if ov.extents.len() <= per {
            let rec = self.commit_record(self.txn.open.unwrap_or(0), ino, &ov, ov.extents.clone());
            if let Err(e) = self.journal(&rec) {
                restore(self, ov);
                return Err(e);
            }
            return self.apply(&rec);
        }
        // Split across records of one transaction.
        let (tid, own) = match self.txn.open {
            Some(t) => (t, false),
            None => {
                let t = self.txn.next;
                self.txn.next += 1;
                (t, true)
            }
        };
        let all: Vec<_> = ov.extents.extents().to_vec();
        let mut recs = Vec::new();
        for (i, chunk) in all.chunks(per).enumerate() {
            let mut e = ExtentMap::new();
            let stride = self.store.p().stride();
            for x in chunk {
                e.insert(x.first, x.count, x.addr, stride);
            }
            let mut part = ov.clone();
            if i > 0 {
                part.trunc_to = None;
            }
            recs.push(self.commit_record(tid, ino, &part, e));
        }
        // (Records of a transaction of its own that the journal took before one it refused
        // are never applied: replay applies a transaction only with its `JTxCommit`.)
        let journaled = recs
            .iter()
            .try_for_each(|r| self.journal(r))
            .and_then(|()| {
                if own {
                    self.journal(&Record::TxCommit { tid })
                } else {
                    Ok(())
                }
            });
        if let Err(e) = journaled {
            restore(self, ov);
            return Err(e);
        }
        for r in &recs {
            self.apply(r)?;
        }
        Ok(())
    }

    /// Whether the uncommitted update of `ino` can be committed by its data pages' tags (a
    /// synced write on NAND, outside a transaction, of an open, uncompressed file whose update
    /// is nothing but consecutive dirty blocks not yet written, ending at the file's end or
    /// leaving its size): the run's first block and the end its last page's tag carries.
    fn run_end(&mut self, ino: Ino, synced: bool) -> Result<Option<(u32, DataEnd)>> {
        let p = self.store.p();
        if !synced || !p.commit_runs() || self.txn.open.is_some() || self.open.is_orphan(ino) {
            return Ok(None);
        }
        let committed = self.committed(ino)?;
        if committed.compression != compress::NONE {
            return Ok(None);
        }
        let Some(ov) = self.open.files.get(&ino).and_then(|o| o.overlay.as_ref()) else {
            return Ok(None);
        };
        if ov.spilled.is_some()
            || ov.trunc_to.is_some_and(|t| t < committed.size)
            || ov.inline.is_some()
            || !ov.extents.is_empty()
        {
            return Ok(None);
        }
        let blocks = self.data_cache.dirty_blocks(ino);
        let (Some(&first), Some(&last)) = (blocks.first(), blocks.last()) else {
            return Ok(None);
        };
        if (last - first) as usize + 1 != blocks.len() {
            return Ok(None);
        }
        let db = p.data_block as u64;
        let end = if ov.size == committed.size && ov.size > last as u64 * db {
            DataEnd::Commit
        } else if ov.size > last as u64 * db
            && ov.size <= (last as u64 + 1) * db
            && ov.size <= TAG_MAX_SIZE
        {
            DataEnd::CommitSize(ov.size)
        } else {
            return Ok(None);
        };
        Ok(Some((first, end)))
    }

    /// A synced commit that went through the journal although it could have been carried by
    /// tags because the user-data head had moved to a block recovery does not scan: the
    /// journal names that block now, so the next synced writes there need no record.
    fn name_data_block(&mut self) -> Result<()> {
        if !self.store.p().commit_runs()
            || self.txn.open.is_some()
            || self.cp.data_blocks >= crate::fs::data_scan_blocks(&self.store.p())
        {
            return Ok(());
        }
        let head = self.store.head(LogKind::DataHot);
        if !head.is_open() || head.block() == self.store.scanned_block() {
            return Ok(());
        }
        let block = head.block();
        self.journal(&Record::DataBlock { block })?;
        self.store.set_scanned_block(block);
        self.cp.data_blocks += 1;
        Ok(())
    }

    /// NAND, before the journal's started page is programmed: when the user-data head's
    /// current block is one recovery scans and three-quarters full (or the head has none),
    /// names in that page the block the head opens next, reserved and erased now
    /// ([`Store::reserve_data_block`]), so that a synced write reaching it commits by its tags
    /// instead of a journal page of its own. Only when the record fits in the started page (it
    /// costs no program), the free pool is above the level background collection keeps and
    /// the last synced commit was one tags could carry (without it, the `sync` that ends a run
    /// of plain writes took and erased a block no synced write would use). Returns the block,
    /// which the caller hands to the store once the page is programmed.
    ///
    /// (On a `--sync` mount every create and unlink programs a journal page, and Postmark's
    /// 128 KiB files each start a block: without this, each file's first write took one more
    /// journal page for `JCommit` and `JDataBlock`.)
    ///
    /// [`Store::reserve_data_block`]: crate::store::Store::reserve_data_block
    pub(crate) fn name_next_data_block(&mut self) -> Result<Option<u32>> {
        let p = self.store.p();
        if !p.commit_runs()
            || !self.cp.synced_runs
            || self.cfg.read_only
            || self.txn.open.is_some()
            || self.mount.replaying
            || self.store.checkpointing()
            || self.store.data_next().is_some()
            || self.cp.data_blocks + 1 >= crate::fs::data_scan_blocks(&p)
        {
            return Ok(None);
        }
        // Not before the head's block is three-quarters full: a checkpoint gives a named block
        // back (as `Erased`, a little more worn than the pool's least worn block, so the
        // allocator passes it over for a while), and one named at the start of a block was
        // given back so often that `dffs bench postmark-sync` erased 44 blocks more.
        let head = self.store.head(LogKind::DataHot);
        if head.is_open()
            && (head.block() != self.store.scanned_block()
                || self.store.head_room(LogKind::DataHot) > p.geometry.block_size() / 4)
        {
            return Ok(None);
        }
        let rec = Record::DataBlock { block: 0 };
        if !self.store.journal_page_fits(rec.encode().w.len() as u32)
            || self.store.free_blocks() <= self.background_low()
        {
            return Ok(None);
        }
        let block = match self.store.reserve_data_block() {
            Ok(b) => b,
            Err(Error::NoSpace) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Err(e) =
            self.journal
                .append_record(&mut self.store, &Record::DataBlock { block }, Priority::Log)
        {
            self.store.drop_data_next(block)?;
            return Err(e);
        }
        self.cp.data_blocks += 1;
        Ok(Some(block))
    }

    fn commit_record(&self, tid: Tid, ino: Ino, ov: &Overlay, extents: ExtentMap) -> Record {
        Record::Commit {
            tid,
            ino,
            size: ov.size,
            mtime: ov.mtime,
            ctime: ov.ctime,
            trunc_to: ov.trunc_to,
            inline: ov.inline.clone(),
            extents,
            map: None,
        }
    }

    /// Commits `fh`'s file and makes it durable (inside a transaction: commits it into the
    /// transaction, durable when the transaction commits).
    pub fn fsync(&mut self, fh: Fh) -> Result<()> {
        self.sync_handle(fh, false)
    }

    /// Makes `fh`'s file's data and size durable, as [`Fs::fsync`], but a write of new
    /// consecutive blocks may be committed by its last data page's tag (FORMAT.md §8.7): then
    /// no journal page is programmed, and after a power cut the file has the times of its last
    /// journaled change (`fdatasync` semantics).
    pub fn fdatasync(&mut self, fh: Fh) -> Result<()> {
        self.sync_handle(fh, true)
    }

    /// [`Fs::fsync`] (`data_only` false) or [`Fs::fdatasync`].
    fn sync_handle(&mut self, fh: Fh, data_only: bool) -> Result<()> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if h.flags.write {
                fs.ensure_writable()?;
                fs.commit_ino_as(h.ino, data_only)?;
            }
            if fs.txn.open.is_none() && !fs.cfg.read_only {
                fs.journal_flush()?;
            }
            fs.after_op()
        })
    }

    /// Commits every open file and makes everything durable.
    pub fn sync(&mut self) -> Result<()> {
        self.guard(|fs| {
            if fs.cfg.read_only {
                return Ok(());
            }
            let inos: Vec<Ino> = fs.open.with_overlay();
            for ino in inos {
                fs.commit_ino(ino)?;
            }
            if fs.txn.open.is_none() {
                fs.journal_flush()?;
            }
            Ok(())
        })
    }

    /// Starts a transaction: from now until [`Fs::commit_transaction`], every change (to any
    /// file or directory) becomes durable all together or not at all. Everything before is
    /// synced first, and room is made for the transaction's writes (blocks collected during it
    /// come back only after its commit).
    pub fn begin_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            fs.ensure_writable()?;
            if fs.txn.open.is_some() {
                return Err(Error::Busy);
            }
            fs.sync()?;
            fs.make_transaction_room()?;
            fs.make_commit_room()?;
            let t = fs.txn.next;
            fs.txn.next += 1;
            fs.txn.open = Some(t);
            Ok(())
        })
    }

    /// Commits the open transaction: all its changes become durable at once.
    pub fn commit_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            let tid = fs.txn.open.ok_or(Error::Invalid)?;
            let inos: Vec<Ino> = fs.open.with_overlay();
            fs.txn.committing = true;
            let r = inos
                .into_iter()
                .try_for_each(|ino| fs.commit_ino(ino))
                .and_then(|()| fs.journal(&Record::TxCommit { tid }))
                .and_then(|()| fs.journal_flush());
            fs.txn.committing = false;
            r?;
            fs.txn.open = None;
            fs.journal.set_keep_next(false);
            fs.after_op()
        })
    }

    /// Abandons the open transaction: the file system returns to its state when the
    /// transaction began (open handles stay open; files created in it are gone).
    pub fn abort_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            if fs.txn.open.is_none() {
                return Err(Error::Invalid);
            }
            fs.abort()
        })
    }

    /// Drops all RAM state and reloads from flash (what a power cut and remount would do).
    pub(crate) fn abort(&mut self) -> Result<()> {
        self.txn.open = None;
        self.journal.set_keep_next(false);
        for o in self.open.files.values_mut() {
            o.overlay = None;
        }
        self.data_cache.clear();
        self.inodes.clear();
        self.dirs.clear();
        self.map.clear_cache();
        self.index_cache.clear();
        self.store.reset_heads();
        // Sequence numbers handed out since the checkpoint stay used: pages written in the
        // transaction keep theirs on flash.
        let seq = self.store.seq();
        // A reload that fails leaves no consistent state in RAM (the block table, the caches):
        // only a new mount may go on.
        if let Err(e) = self.load() {
            self.mount.broken = Some(e);
            return Err(e);
        }
        self.store.set_seq(self.store.seq().max(seq));
        // Orphans and handles to inodes that no longer exist are left dangling; their
        // operations report NotFound.
        let stale: Vec<Ino> = self
            .open
            .files
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .into_iter()
            .filter(|&i| !matches!(self.map.get(&mut self.store, i), Ok(e) if e.is_file()))
            .collect();
        for i in stale {
            if let Some(o) = self.open.files.get_mut(&i) {
                o.orphan = None;
            }
        }
        Ok(())
    }
}
