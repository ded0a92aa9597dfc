//! Writing files: blocks into the data cache, write-back of dirty blocks into data nodes
//! (grouped and compressed where the file asks for it), and spilling a large overlay's block
//! list to flash.
//!
//! It must never make a write visible: only a commit does that.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::compress::{self, DATAZ_HEADER};
use crate::format::extents::ExtentMap;
use crate::format::node::DataEnd;
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind};
use crate::fs::files::handles::Fh;
use crate::fs::files::read::Src;
use crate::fs::Fs;
use crate::index::file::tree::fold_bound;
use crate::index::file::{blocks_for, inline_limit, Content};
use crate::store::Priority;
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{Flash, FlashKind};

impl<F: Flash> Fs<F> {
    /// Writes `data` at `off` (at the end for append handles); returns the bytes written:
    /// fewer than `data.len()` only when the device refused (`ENOSPC`, `EIO`) to take the
    /// cache's blocks after some of `data` was already in it (those bytes are the file's).
    pub fn write(&mut self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if !h.flags.write {
                return Err(Error::BadHandle);
            }
            fs.ensure_writable()?;
            let off = if h.flags.append {
                fs.cur_size(h.ino)?
            } else {
                off
            };
            let n = fs.write_ino(h.ino, off, data)?;
            if h.flags.sync || fs.cfg.sync {
                fs.commit_ino_synced(h.ino)?;
                if fs.txn.open.is_none() {
                    fs.journal_flush()?;
                }
            }
            fs.after_op()?;
            Ok(n)
        })
    }

    fn write_ino(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let p = self.store.p();
        let end = off.checked_add(data.len() as u64).ok_or(Error::TooBig)?;
        if end > p.max_file_size() {
            return Err(Error::TooBig);
        }
        let name_len = self.committed(ino)?.names_len();
        let limit = inline_limit(&p, name_len) as u64;
        let now = self.now();
        let bs = p.data_block as u64;
        // Space: every block written takes a new block until the old one dies at commit.
        let first_b = off / bs;
        let last_b = (end - 1) / bs;
        let need = (last_b - first_b + 1) * bs;
        // On a device whose byte budget is spent, the blocks of the range already on flash
        // are credited: their old copies die at the commit, so once done the write adds
        // nothing live. The room it takes until then is physical, and the block check below
        // (free blocks above the application's floor) makes it. (Without the credit, 4 KiB
        // synced overwrites on 2 MiB of 64 KiB NOR blocks, filled to ENOSPC and cut by
        // 64 KiB, were refused 752 times in 777: the fill had ended with more live than the
        // budget counts usable.)
        self.ensure_space_credited(need, Some((ino, first_b, last_b)))?;
        // Room for writing it all back, so a write either happens whole or not at all: the
        // blocks as flush_blocks will write them (each with its data node header on NOR). A
        // write that stays inline writes no block (only its inode, counted below).
        let inline = end <= limit && self.overlay(ino)?.inline.is_some();
        let blocks = if inline { 0 } else { need / bs } + self.data_cache.dirty_count() as u64;
        // Plus the blocks what the write adds to the next checkpoint may open (that checkpoint
        // must still fit above the floors once the data is written): the index nodes its
        // blocks fold into (a leaf per `fanout` blocks and a path above) and the inode.
        // (Without it a large write on a small-block device left the free pool below what
        // the next checkpoint needed, and that checkpoint ran out.)
        let fanout = p.index_fanout() as u64;
        let index_bytes = match blocks {
            0 => 0,
            _ => (blocks.div_ceil(fanout) + 4) * p.index_node as u64,
        };
        let meta = self.meta_blocks(p.dir_page as u64, index_bytes);
        let bytes = blocks * (p.data_slot() as u64 + p.data_header() as u64);
        self.ensure_blocks(
            bytes.div_ceil(p.geometry.block_size() as u64) as u32 + meta,
            Priority::User,
        )?;
        let ov = self.overlay(ino)?;
        ov.mtime = now;
        ov.ctime = now;
        if let Some(d) = ov.inline.as_mut() {
            if end <= limit {
                if d.len() < end as usize {
                    d.resize(end as usize, 0);
                }
                d[off as usize..end as usize].copy_from_slice(data);
                ov.size = ov.size.max(end);
                return Ok(data.len());
            }
            // Outgrows its inode: the inline bytes become ordinary blocks.
            let d = ov.inline.take().unwrap_or_default();
            ov.trunc_to = Some(0);
            let nblocks = blocks_for(d.len() as u64, p.data_block);
            for b in 0..nblocks {
                let mut blk = vec![0u8; bs as usize];
                let s = (b * bs) as usize;
                let e = (s + bs as usize).min(d.len());
                blk[..e - s].copy_from_slice(&d[s..e]);
                self.data_cache.put(ino, b as u32, blk, true);
            }
        }
        // A cache left over its budget by a short write (below) is written back first: a
        // device that still refuses refuses this write whole, and the cache never grows by
        // more than a block.
        self.writeback_if_full()?;
        let mut pos = off;
        let mut i = 0usize;
        while i < data.len() {
            let b = (pos / bs) as u32;
            let in_b = (pos % bs) as usize;
            let take = (bs as usize - in_b).min(data.len() - i);
            let blk = if take == bs as usize {
                Ok(vec![0u8; bs as usize])
            } else {
                // The committed inode as it is now: writing back earlier blocks of this write
                // may have run garbage collection, which moves the file's blocks and index.
                self.committed(ino)
                    .and_then(|node| self.get_block(ino, &node, b))
            };
            let r = blk.and_then(|mut blk| {
                blk[in_b..in_b + take].copy_from_slice(&data[i..i + take]);
                self.data_cache.put(ino, b, blk, true);
                i += take;
                pos += take as u64;
                self.writeback_if_full()
            });
            match r {
                Ok(()) => {}
                // What is in the cache stays there (a refused write-back keeps its blocks
                // dirty) and a later commit writes it: the write says how much that is, as a
                // short write. (Only a device that refuses what admission made room for, after
                // failures, gets here.)
                Err(Error::NoSpace | Error::Io) if i > 0 => {
                    let ov = self.overlay(ino)?;
                    ov.size = ov.size.max(pos);
                    return Ok(i);
                }
                Err(e) => return Err(e),
            }
        }
        let ov = self.overlay(ino)?;
        ov.size = ov.size.max(end);
        Ok(data.len())
    }

    /// How many of blocks `first..=last` of `ino` are on flash (not holes, not past the end):
    /// what rewriting them kills at the commit. None for a file that compresses (a block of a
    /// compressed group frees only its share of the group).
    pub(crate) fn blocks_on_flash(&mut self, ino: Ino, first: u64, last: u64) -> Result<u64> {
        let node = self.committed(ino)?;
        let blocks = blocks_for(self.cur_size(ino)?, self.store.p().data_block);
        if node.compression != 0 || first >= blocks {
            return Ok(0);
        }
        let mut n = 0;
        for b in first..=last.min(blocks - 1) {
            if let Src::At(_) = self.block_src(ino, &node, b as u32)? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Writes back dirty blocks while the data cache is over budget.
    fn writeback_if_full(&mut self) -> Result<()> {
        while let Some(ino) = self.data_cache.over_budget_victim() {
            self.flush_blocks(ino)?;
            self.data_cache.trim_clean();
        }
        Ok(())
    }

    /// Writes the dirty cached blocks of `ino` to flash (provisionally: they join its overlay).
    pub(crate) fn flush_blocks(&mut self, ino: Ino) -> Result<()> {
        self.flush_blocks_as(ino, None).map(|_| ())
    }

    /// As [`Fs::flush_blocks`], for dirty blocks that are consecutive from file block `first`
    /// (see `run_end` in the commit module): they are written as a commit run whose last
    /// page's tag carries `end`. Returns whether that tag committed the update (the caller
    /// then needs no journal record).
    pub(crate) fn flush_run(&mut self, ino: Ino, first: u32, end: DataEnd) -> Result<bool> {
        self.flush_blocks_as(ino, Some((first, end)))
    }

    fn flush_blocks_as(&mut self, ino: Ino, run: Option<(u32, DataEnd)>) -> Result<bool> {
        let dirty = self.data_cache.take_dirty(ino);
        if dirty.is_empty() {
            return Ok(false);
        }
        let p = self.store.p();
        let stride = p.stride();
        let mut written: Vec<(u32, u32, Addr)> = Vec::new();
        let by_tags = match self.write_back_blocks(ino, &dirty, run, &mut written) {
            Ok(t) => t,
            Err(e) => {
                // Nothing of it counts: what it wrote is dead, and its blocks stay dirty for
                // the next write-back to try (dropped, a later fsync of the file committed
                // without them and said the data was safe).
                for &(_, count, a) in &written {
                    for k in 0..count {
                        self.kill_data(Addr(a.0 + k * stride))?;
                    }
                }
                for (b, d) in dirty {
                    self.data_cache.put(ino, b, d, true);
                }
                return Err(e);
            }
        };
        crate::sort::sort_by_key(&mut written, |w| w.0);
        let spilled = self.overlay(ino)?.spilled.is_some();
        if spilled {
            return self.record_spilled_writes(ino, &written).map(|_| false);
        }
        let ov = self.overlay(ino)?;
        let mut dead = Vec::new();
        for &(first, count, a) in &written {
            for k in 0..count {
                if let Some(old) = ov.extents.get(first + k, stride) {
                    if !old.is_none() {
                        dead.push(old);
                    }
                }
            }
            ov.extents.insert(first, count, a, stride);
        }
        for a in dead {
            self.kill_data(a)?;
        }
        // Too many separate extents to keep in RAM: switch the update to a block map of its own.
        let n = self
            .open
            .files
            .get(&ino)
            .and_then(|o| o.overlay.as_ref())
            .map(|o| o.extents.len())
            .unwrap_or(0);
        if n > self.cfg.overlay_extents {
            self.spill(ino)?;
            return Ok(false);
        }
        Ok(by_tags)
    }

    /// Writes `dirty` (blocks of `ino`, ascending) to flash for [`Fs::flush_blocks_as`],
    /// listing in `written` each data node as it is written (first block, blocks, address);
    /// returns whether a commit run's tag committed the update.
    fn write_back_blocks(
        &mut self,
        ino: Ino,
        dirty: &[(u32, Vec<u8>)],
        run: Option<(u32, DataEnd)>,
        written: &mut Vec<(u32, u32, Addr)>,
    ) -> Result<bool> {
        let p = self.store.p();
        let bs = p.data_block as usize;
        let bytes = dirty.len() as u64 * (p.data_slot() as u64 + p.data_header() as u64);
        let bsz = p.geometry.block_size() as u64;
        // Admitted when it was written (see `write_ino`): written back at the journal's level,
        // which it must find only for what the data head's open block cannot take. (Asking
        // for whole new blocks even when the pages fit the open block, a write's third
        // write-back was refused half-way through the admitted write: the collection,
        // checkpoint and bad-block swap the second one's first try ran had taken three
        // blocks; SLC seed 4008 of the model test with faults.)
        let mut room = self.keep_copy_room(bytes.div_ceil(bsz) as u32);
        if room.is_ok() {
            let open = self.store.head_room(LogKind::DataHot) as u64;
            room = match bytes.saturating_sub(open).div_ceil(bsz) as u32 {
                0 => Ok(()),
                n => self.ensure_blocks_now(n, Priority::Log),
            };
        }
        room?;
        // A compressed file's dirty blocks go in groups of consecutive blocks (at most
        // `group_blocks`, never across a multiple of it); a group that shrinks by at least an
        // eighth becomes one compressed data node, the rest (and every block of other files)
        // are written raw.
        let algo = self.committed(ino)?.compression;
        let mut packed: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let dirty: Vec<&(u32, Vec<u8>)> = if algo == compress::NONE {
            dirty.iter().collect()
        } else {
            let group = compress::group_blocks(&p, self.cfg.compress_group);
            let mut raw = Vec::with_capacity(dirty.len());
            let mut i = 0;
            while i < dirty.len() {
                let mut j = i + 1;
                while j < dirty.len() && dirty[j].0 == dirty[j - 1].0 + 1 && dirty[j].0 % group != 0
                {
                    j += 1;
                }
                let n = j - i;
                let mut input = Vec::with_capacity(n * bs);
                for d in &dirty[i..j] {
                    input.extend_from_slice(&d.1);
                }
                let max = (n * bs - n * bs / 8).saturating_sub(DATAZ_HEADER as usize);
                match compress::compress(algo, &input, max) {
                    Some(z) => packed.push((dirty[i].0, n as u32, z)),
                    None => raw.extend(dirty[i..j].iter()),
                }
                i = j;
            }
            raw
        };
        let mut by_tags = false;
        match p.geometry.flash_kind() {
            FlashKind::Nand => {
                let run =
                    run.filter(|r| packed.is_empty() && dirty.first().map(|d| d.0) == Some(r.0));
                if let Some((first, _)) = run {
                    self.store.begin_commit_run(ino, first);
                }
                let n = dirty.len();
                for (i, (b, data)) in dirty.iter().enumerate() {
                    let end = match run {
                        Some((_, end)) if i + 1 == n => end,
                        _ => DataEnd::No,
                    };
                    let r = self.store.write_run_page(
                        LogKind::DataHot,
                        ino,
                        *b,
                        data,
                        Priority::Log,
                        end,
                    );
                    let (a, c) = match r {
                        Ok(x) => x,
                        Err(e) => {
                            self.store.end_commit_run();
                            return Err(e);
                        }
                    };
                    by_tags = c;
                    written.push((*b, 1, a));
                }
                self.store.end_commit_run();
            }
            FlashKind::Nor => {
                // Contiguous runs become one data node each.
                let max_run = ((p.geometry.block_size() - p.data_header()) / p.data_slot())
                    .clamp(1, 64) as usize;
                let mut i = 0;
                while i < dirty.len() {
                    // A run larger than the room left in the head's block is split there (the
                    // rest goes to the next block), so blocks fill up.
                    let room = self.store.data_slots_room(LogKind::DataHot) as usize;
                    let lim = if room > 0 { room.min(max_run) } else { max_run };
                    let mut j = i + 1;
                    while j < dirty.len() && dirty[j].0 == dirty[j - 1].0 + 1 && j - i < lim {
                        j += 1;
                    }
                    let first = dirty[i].0;
                    let count = (j - i) as u32;
                    let mut payload = Vec::with_capacity(count as usize * bs);
                    for d in &dirty[i..j] {
                        payload.extend_from_slice(&d.1);
                    }
                    let a = self.write_data_node(
                        LogKind::DataHot,
                        ino,
                        first,
                        count,
                        &payload,
                        Priority::Log,
                    )?;
                    written.push((first, count, Addr(a.0 + (p.data_header() >> p.addr_shift))));
                    i = j;
                }
            }
        }
        // Compressed nodes last, so the page they leave partly filled is continued by the next
        // write-back (on NAND they share pages; the journal programs them before any record
        // that points at them, see `Store::program_buffered`).
        for (b, n, z) in &packed {
            let nb = compress::dataz_node(ino, *b, algo, n * bs as u32, z);
            let len = p.align(nb.w.len() as u32);
            let credit = n * compress::share(len, *n);
            let a = self
                .store
                .write_spanning_node(LogKind::DataHot, nb, credit, Priority::Log)?;
            for k in 0..*n {
                written.push((b + k, 1, Addr::packed(a)));
            }
        }
        Ok(by_tags)
    }

    /// Whether `a` is where the committed content of `ino` keeps block `b` (so the overlay
    /// shares it rather than owning it).
    pub(crate) fn is_committed_block(&mut self, ino: Ino, b: u32, a: Addr) -> Result<bool> {
        let c = self.committed(ino)?;
        if c.content.inline.is_some() {
            return Ok(false);
        }
        let mut ix = self.tree(ino);
        Ok(ix.lookup(&c.content, b)? == a)
    }

    /// Records blocks just written into a spilled overlay's own map (folding it when its
    /// pending list grows).
    fn record_spilled_writes(&mut self, ino: Ino, written: &[(u32, u32, Addr)]) -> Result<()> {
        let p = self.store.p();
        let stride = p.stride();
        let mut sp = match self
            .open
            .files
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
            .and_then(|o| o.spilled.take())
        {
            Some(c) => c,
            None => return Err(Error::Corrupt),
        };
        let mut dead = Vec::new();
        for &(first, count, a) in written {
            for k in 0..count {
                let b = first + k;
                let old = {
                    let mut ix = self.tree(ino);
                    ix.lookup(&sp, b)?
                };
                // The update's own earlier copy dies now; a committed block dies at commit.
                if !old.is_none() && !self.is_committed_block(ino, b, old)? {
                    dead.push(old);
                }
            }
            sp.pending.insert(first, count, a, stride);
        }
        for a in dead {
            self.kill_data(a)?;
        }
        let fold = sp.pending.len() > self.cfg.overlay_extents;
        let put_back = |fs: &mut Self, sp: Content| {
            if let Some(ov) = fs.open.files.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
                ov.spilled = Some(sp);
            }
        };
        if !fold {
            put_back(self, sp);
            return Ok(());
        }
        // Collection may run while room is made: the update's map must be where it looks
        // for the blocks and index nodes the update owns.
        let blocks = self.fold_room_blocks(&sp);
        put_back(self, sp);
        self.ensure_blocks(blocks, Priority::Log)?;
        let Some(mut sp) = self
            .open
            .files
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
            .and_then(|o| o.spilled.take())
        else {
            return Err(Error::Corrupt);
        };
        let r = {
            let mut ix = self.tree(ino);
            ix.fold(&mut sp)
        };
        put_back(self, sp);
        r
    }

    /// Makes room (collecting, as data write-back does) for the index nodes a fold of `c`
    /// outside a checkpoint writes: they are allocated at the log floor, which write-back
    /// must not reach without collection having run. (A spilled update on 8 MiB of 4 KiB NOR
    /// sectors found the free pool at that floor and said ENOSPC with the device 90% dead:
    /// `dffs torture --blocks 2048 --workload full`, seed 1, cut 48315.)
    fn make_fold_room(&mut self, c: &Content) -> Result<()> {
        let blocks = self.fold_room_blocks(c);
        self.ensure_blocks(blocks, Priority::Log)
    }

    /// Blocks [`Fs::make_fold_room`] asks for: the index nodes a fold of `c` may write, and
    /// one block more.
    fn fold_room_blocks(&self, c: &Content) -> u32 {
        let p = self.store.p();
        let bytes = fold_bound(c, p.index_fanout()) * p.align(p.index_node) as u64;
        bytes.div_ceil(p.geometry.block_size() as u64) as u32 + 1
    }

    /// The complete block map a spill of `ino`'s update folds (`None` when it has spilled
    /// already or is inline): the committed map, cut at the update's truncation point, with
    /// the update's extents on top.
    fn spill_map(&mut self, ino: Ino) -> Result<Option<Content>> {
        let p = self.store.p();
        let stride = p.stride();
        let committed = self.committed(ino)?;
        let (trunc_to, extents) = match self.open.files.get(&ino).and_then(|o| o.overlay.as_ref()) {
            Some(ov) if ov.spilled.is_none() && ov.inline.is_none() => {
                (ov.trunc_to, ov.extents.clone())
            }
            _ => return Ok(None),
        };
        let keep = trunc_to.map(|t| blocks_for(t, p.data_block).min(u32::MAX as u64) as u32);
        let mut full = ExtentMap::new();
        if committed.content.inline.is_none() {
            let c = &committed.content;
            let mut blocks: Vec<(u32, Addr)> = Vec::new();
            {
                let mut ix = self.tree(ino);
                ix.walk(
                    c,
                    &mut |b, a| {
                        if c.pending.get(b, stride).is_none() && c.trunc.is_none_or(|t| b < t) {
                            blocks.push((b, a))
                        }
                    },
                    &mut |_, _, _| {},
                )?;
            }
            blocks.extend(c.pending.iter_blocks(stride).filter(|(_, a)| !a.is_none()));
            for (b, a) in blocks {
                if keep.is_none_or(|k| b < k) {
                    full.insert(b, 1, a, stride);
                }
            }
        }
        for e in extents.extents() {
            full.insert(e.first, e.count, e.addr, stride);
        }
        Ok(Some(Content {
            pending: full,
            ..Content::default()
        }))
    }

    /// Switches an overlay from extents to a complete block map of its own: the committed
    /// map, cut at the update's truncation point, with the update's extents on top, folded
    /// into new index nodes (none shared with the committed tree, so either can be dropped
    /// without touching the other).
    fn spill(&mut self, ino: Ino) -> Result<()> {
        let Some(sp) = self.spill_map(ino)? else {
            return Ok(());
        };
        // Collection may run while room is made and move blocks of the file (updating the
        // overlay and the committed tree): the map is built again afterwards from them.
        self.make_fold_room(&sp)?;
        let Some(mut sp) = self.spill_map(ino)? else {
            return Ok(());
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut sp)?;
        }
        if let Some(ov) = self
            .open
            .files
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
        {
            ov.spilled = Some(sp);
            ov.extents = ExtentMap::new();
            ov.trunc_to = None;
        }
        Ok(())
    }
}
