//! Writing into the logs: nodes appended to a head (buffered per NAND page, programmed once),
//! compressed data nodes that run on over pages, raw NAND data pages with their OOB tag, NOR
//! data nodes, and the flushes that make a head's buffered page durable.
//!
//! Owns where in a head's block the next bytes go (`make_room`: page boundaries, paired upper
//! pages to skip, a new block when the head is full) and the order of programs (a journal page
//! is programmed only after the data pages it may point at). It must never decide what is
//! written or when: callers pass finished nodes.

use alloc::vec;
use alloc::vec::Vec;

use super::heads::Head;
use super::{BlockState, CommitRun, Priority, Store, DATA_HEADER};
use crate::error::{Error, Result};
use crate::format::codec::crc32c;
use crate::format::node::{
    self, DataEnd, NodeBuilder, OobTag, Probe, OOB_TAG_LEN, TAG_DATA, TAG_FIRST,
};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind};
use dffs_flash::{Flash, FlashKind, PagePairing};

impl<F: Flash> Store<F> {
    /// Opens a new block for head `h` (journal heads continue in their reserved block and
    /// begin it with a link record).
    fn open_block(&mut self, h: usize, kind: LogKind, prio: Priority) -> Result<()> {
        if kind == LogKind::Journal {
            // The journal writer moves the journal into its reserved block itself (the new
            // block must begin with a link record): it never lets the store run out of room.
            return Err(Error::Internal);
        }
        let b = match self.heads.preopened[h].pop() {
            Some(b) => b,
            // The user-data head's next block, named in the journal already: recovery scans
            // it, so synced writes there commit by their tags from the first page.
            None if kind == LogKind::DataHot && self.data_next != u32::MAX => {
                let b = core::mem::replace(&mut self.data_next, u32::MAX);
                self.table.update(b, |e| {
                    e.live = 0;
                    e.set(BlockState::Head, kind);
                });
                self.scanned_block = b;
                b
            }
            None => self.alloc_block(kind, prio)?,
        };
        self.heads[h] = Head {
            block: b,
            ..Head::empty()
        };
        Ok(())
    }

    /// Where head `h` would put `len` bytes without allocating: the offset in its block, after
    /// leaving a started page when the bytes must stay in one page (`span` false) and skipping
    /// upper pages whose lower page is protected (paired-page NAND); `None` when its block
    /// cannot take them (or the head has none).
    fn placement(&self, h: usize, len: u32, span: bool) -> Option<u32> {
        let g = self.p.geometry;
        let ps = g.page_size;
        let hd = &self.heads[h];
        if !hd.is_open() {
            return None;
        }
        let mut off = hd.off;
        loop {
            if off + len > g.block_size() {
                return None;
            }
            if g.flash_kind() == FlashKind::Nor {
                return Some(off);
            }
            if !span && off % ps + len > ps {
                off = (off / ps + 1) * ps;
                continue;
            }
            if g.page_pairing() != PagePairing::None {
                let first_new = off.div_ceil(ps);
                let last = (off + len.max(1) - 1) / ps;
                let upper = (first_new..=last).find(|&pg| {
                    g.page_pairing()
                        .lower_of(pg)
                        .is_some_and(|l| l < hd.protected)
                });
                if let Some(u) = upper {
                    off = (u + 1) * ps;
                    continue;
                }
            }
            return Some(off);
        }
    }

    /// Whether log `kind`'s head needs a new block for a node of `len` bytes (the journal
    /// writer moves the journal itself; see [`Store::open_head_in`]).
    pub fn needs_new_block(&self, kind: LogKind, len: u32) -> bool {
        let h = self.head_index(kind);
        self.placement(h, self.p.align(len), false).is_none()
    }

    /// Makes head `h` (of log `kind`) ready to take `len` bytes at its offset (see
    /// [`Store::placement`]): a started page the bytes cannot use is programmed and left, pages
    /// that must not be programmed are skipped, and a head whose block cannot take them moves
    /// to a new block.
    fn make_room(
        &mut self,
        h: usize,
        kind: LogKind,
        prio: Priority,
        len: u32,
        span: bool,
    ) -> Result<()> {
        for _ in 0..2 {
            match self.placement(h, len, span) {
                Some(off) => {
                    let cur = self.heads[h].off;
                    if off != cur {
                        if cur % self.p.geometry.page_size != 0 {
                            self.finish_page(h)?;
                        }
                        self.heads[h].off = off;
                    }
                    return Ok(());
                }
                None => {
                    if self.heads[h].is_open() {
                        self.close_head(h)?;
                    }
                    self.open_block(h, kind, prio)?;
                }
            }
        }
        Err(Error::Internal)
    }

    /// Opens log `kind`'s head in block `b` (the journal's reserved next block), closing the
    /// block it had.
    pub fn open_head_in(&mut self, kind: LogKind, b: u32) -> Result<()> {
        let h = self.head_index(kind);
        if self.heads[h].is_open() {
            self.close_head(h)?;
        }
        let w = self.wear(b)?.aged(self.cp_number);
        self.table.set_wear(b, w, false);
        self.table.update(b, |e| {
            e.live = 0;
            e.set(BlockState::Head, kind);
        });
        self.heads[h] = Head {
            block: b,
            ..Head::empty()
        };
        Ok(())
    }

    /// Leaves the rest of log `kind`'s current page (NOR: program page) and the whole next one
    /// unused: the session marker's place (see the journal writer). Closes the head when that
    /// leaves its block.
    pub fn skip_past_next_page(&mut self, kind: LogKind) -> Result<()> {
        let h = self.head_index(kind);
        if !self.heads[h].is_open() {
            return Ok(());
        }
        let g = self.p.geometry;
        let ps = g.page_size;
        let skip = (self.heads[h].off.div_ceil(ps) + 1) * ps;
        self.heads[h].buf = Vec::new();
        if skip >= g.block_size() {
            self.close_head(h)?;
        } else {
            self.heads[h].off = skip;
        }
        Ok(())
    }

    /// NAND: where in the buffered page of `kind`'s head the node at `a` lies, when it is the
    /// last node appended there, none of it is programmed yet and its CRC holds: (offset in
    /// the buffer, node length). Only such a node can still be replaced: it becomes durable
    /// with whatever is appended after it, and nothing is.
    fn unprogrammed_last_at(&self, kind: LogKind, a: Addr) -> Option<(usize, usize)> {
        let g = self.p.geometry;
        let head = &self.heads[self.head_index(kind)];
        if g.flash_kind() != FlashKind::Nand || head.buf.is_empty() || a.is_none() {
            return None;
        }
        let byte = self.p.byte_of(a);
        let bs = g.block_size() as u64;
        if byte / bs != head.block as u64 {
            return None;
        }
        let off = (byte % bs) as u32;
        if off < head.buf_page + head.buf_prog || off >= head.off {
            return None;
        }
        let o = (off - head.buf_page) as usize;
        let rest = &head.buf[o..(head.off - head.buf_page) as usize];
        match node::probe(rest, rest.len() as u32) {
            Probe::Header(h) if off + self.p.align(h.len) == head.off => {
                node::verify(rest, &h).ok()?;
                Some((o, h.len as usize))
            }
            _ => None,
        }
    }

    /// The bytes of the node at `a` if it can still be replaced ([`Store::replace_last`]).
    pub fn unprogrammed_last(&self, kind: LogKind, a: Addr) -> Option<&[u8]> {
        let (o, len) = self.unprogrammed_last_at(kind, a)?;
        Some(&self.heads[self.head_index(kind)].buf[o..o + len])
    }

    /// Replaces the node at `a`, the last one appended to `kind`'s head and not programmed
    /// yet, by `nb` of the same length (it keeps the sequence number). Returns false, with
    /// nothing changed, when the node can no longer be replaced or the lengths differ.
    pub fn replace_last(&mut self, kind: LogKind, a: Addr, nb: NodeBuilder) -> bool {
        let Some((o, len)) = self.unprogrammed_last_at(kind, a) else {
            return false;
        };
        if nb.w.len() != len {
            return false;
        }
        let h = self.head_index(kind);
        let buf = &mut self.heads[h].buf;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&buf[o + 8..o + 16]);
        let bytes = nb.finish(u64::from_le_bytes(seq), 1);
        buf[o..o + len].copy_from_slice(&bytes);
        true
    }

    /// Appends a node to log `kind`. The node must fit in one page on NAND (fixed-size page
    /// nodes are placed at a page boundary). Returns its address.
    pub fn write_node(&mut self, kind: LogKind, nb: NodeBuilder, prio: Priority) -> Result<Addr> {
        let len = self.p.align(nb.w.len() as u32);
        let a = self.write_node_uncredited(kind, nb, prio)?;
        self.add_live(a, len)?;
        Ok(a)
    }

    /// [`Store::write_node`] without crediting the block with the node's bytes (block-table
    /// pages: see [`Store::account_bt_page`]).
    pub fn write_node_uncredited(
        &mut self,
        kind: LogKind,
        nb: NodeBuilder,
        prio: Priority,
    ) -> Result<Addr> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.program_first()?;
        let h = self.head_index(kind);
        let len = self.p.align(nb.w.len() as u32);
        let g = self.p.geometry;
        if g.flash_kind() == FlashKind::Nand && len > g.page_size {
            return Err(Error::Invalid);
        }
        self.make_room(h, kind, prio, len, false)?;
        self.append_bytes_in_block(h, kind, nb)
    }

    /// Appends a compressed data node to data log `kind` and credits its block with `credit`
    /// live bytes. Unlike [`Store::write_node`], on NAND the node may run on over the following
    /// pages (it never leaves its erase block), so pages stay full however the compressed
    /// sizes fall. Returns its address.
    pub fn write_spanning_node(
        &mut self,
        kind: LogKind,
        nb: NodeBuilder,
        credit: u32,
        prio: Priority,
    ) -> Result<Addr> {
        let g = self.p.geometry;
        if g.flash_kind() == FlashKind::Nor || !kind.is_data() {
            let len = self.p.align(nb.w.len() as u32);
            let a = self.write_node(kind, nb, prio)?;
            self.kill(a, len)?;
            self.add_live(a, credit)?;
            return Ok(a);
        }
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.program_first()?;
        let h = self.head_index(kind);
        let len = self.p.align(nb.w.len() as u32);
        if len > g.block_size() {
            return Err(Error::Invalid);
        }
        self.make_room(h, kind, prio, len, true)?;
        let seq = self.next_seq();
        let bytes = nb.finish(seq, self.p.unit());
        let bs = g.block_size() as u64;
        let block = self.heads[h].block;
        let a = self.p.addr_of(block as u64 * bs + self.heads[h].off as u64);
        let mut done = 0usize;
        while done < bytes.len() {
            let off = self.heads[h].off;
            let page_off = off - off % g.page_size;
            let head = &mut self.heads[h];
            if head.buf.is_empty() || head.buf_page != page_off {
                head.buf = vec![0u8; g.page_size as usize];
                head.buf_page = page_off;
                head.buf_prog = 0;
            }
            let o = (off - page_off) as usize;
            let n = (g.page_size as usize - o).min(bytes.len() - done);
            head.buf[o..o + n].copy_from_slice(&bytes[done..done + n]);
            head.off += n as u32;
            done += n;
            if head.off - page_off == g.page_size {
                self.finish_page(h)?;
            }
        }
        self.add_live(a, credit)?;
        if self.heads[h].is_open() && self.heads[h].off >= g.block_size() {
            self.close_head(h)?;
        }
        Ok(a)
    }

    /// Places a finished node into head `h` at its current offset (room already checked).
    fn append_bytes_in_block(&mut self, h: usize, _kind: LogKind, nb: NodeBuilder) -> Result<Addr> {
        let seq = self.next_seq();
        let bytes = nb.finish(seq, self.p.unit());
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let head_block = self.heads[h].block;
        let off = self.heads[h].off;
        let a = self.p.addr_of(head_block as u64 * bs + off as u64);
        match g.flash_kind() {
            FlashKind::Nor => {
                let pos = self.phys_pos(head_block as u64 * bs + off as u64);
                self.program_with_recovery(h, pos, &bytes, &[])?;
                self.heads[h].off += bytes.len() as u32;
            }
            FlashKind::Nand => {
                let page_off = off - off % g.page_size;
                let head = &mut self.heads[h];
                if head.buf.is_empty() || head.buf_page != page_off {
                    head.buf = vec![0u8; g.page_size as usize];
                    head.buf_page = page_off;
                    head.buf_prog = 0;
                }
                let o = (off - page_off) as usize;
                head.buf[o..o + bytes.len()].copy_from_slice(&bytes);
                head.off += bytes.len() as u32;
                if head.off - page_off == g.page_size {
                    self.finish_page(h)?;
                }
            }
        }
        Ok(a)
    }

    /// NAND: programs whatever of the buffered page is not yet programmed, pads the rest of
    /// the page, and moves the head to the next page.
    fn finish_page(&mut self, h: usize) -> Result<()> {
        let g = self.p.geometry;
        if g.flash_kind() == FlashKind::Nor || self.heads[h].buf.is_empty() {
            return Ok(());
        }
        let fill = self.heads[h].off - self.heads[h].buf_page;
        if fill > self.heads[h].buf_prog {
            let end = fill.div_ceil(g.program_unit) * g.program_unit;
            self.program_buffered(h, end)?;
        }
        let head = &mut self.heads[h];
        head.off = head.buf_page + g.page_size;
        head.buf = Vec::new();
        Ok(())
    }

    /// Programs the buffered page from `buf_prog` up to `end` (a program-unit multiple).
    ///
    /// Before a journal page is programmed, the data heads' buffered pages are: compressed data
    /// nodes share pages and wait in those buffers, and a journal record must never become
    /// durable before the data it points at.
    fn program_buffered(&mut self, h: usize, end: u32) -> Result<()> {
        let journal = h == self.head_index(LogKind::Journal);
        let paired = self.p.geometry.page_pairing() != PagePairing::None;
        if journal {
            // On paired-page NAND a journal program is a barrier (see `Store::barrier`): no
            // other head may hold a started page then. Elsewhere only the data heads matter.
            for oh in 0..self.p.head_count() {
                let data = oh == self.head_index(LogKind::DataHot)
                    || oh == self.head_index(LogKind::DataCold);
                let hd = &self.heads[oh];
                if oh != h && (data || paired) && hd.unprogrammed() {
                    self.flush_head(oh)?;
                }
            }
        }
        let g = self.p.geometry;
        let (block, page_off, start) = {
            let hd = &self.heads[h];
            (hd.block, hd.buf_page, hd.buf_prog)
        };
        if end <= start {
            return Ok(());
        }
        let bs = g.block_size() as u64;
        let pos = block as u64 * bs + page_off as u64 + start as u64;
        let data = self.heads[h].buf[start as usize..end as usize].to_vec();
        let tag;
        let oob: &[u8] = if start == 0 {
            tag = OobTag::nodes(self.seq).encode();
            &tag[..OOB_TAG_LEN.min(g.oob_free_len as usize)]
        } else {
            &[]
        };
        let ppos = self.phys_pos(pos);
        self.program_with_recovery(h, ppos, &data, oob)?;
        let hd = &mut self.heads[h];
        hd.buf_prog = end;
        if journal {
            self.barrier();
        }
        Ok(())
    }

    /// Makes everything written to log `kind` durable (NAND: programs the partly filled page;
    /// later nodes continue after it in the same page while the NOP limit allows).
    pub fn flush(&mut self, kind: LogKind) -> Result<()> {
        let h = self.head_index(kind);
        self.flush_head(h)
    }
    pub(super) fn flush_head(&mut self, h: usize) -> Result<()> {
        let g = self.p.geometry;
        if g.flash_kind() == FlashKind::Nor
            || !self.heads[h].is_open()
            || self.heads[h].buf.is_empty()
        {
            return Ok(());
        }
        let fill = self.heads[h].off - self.heads[h].buf_page;
        if fill <= self.heads[h].buf_prog {
            return Ok(());
        }
        let end = fill.div_ceil(g.program_unit) * g.program_unit;
        self.program_buffered(h, end)?;
        let hd = &mut self.heads[h];
        // A page that holds durable data is never programmed again: a program cut by power
        // loss can disturb the whole page, not only the bytes it was writing. The rest of the
        // page stays unused.
        if g.flash_kind() == FlashKind::Nand || end >= g.page_size {
            hd.off = hd.buf_page + g.page_size;
            hd.buf = Vec::new();
            if hd.off >= g.block_size() {
                let b = hd.block;
                self.heads[h] = Head::empty();
                if self.block(b)?.state() == BlockState::Head {
                    self.table.set_state(b, BlockState::Used);
                }
            }
        } else {
            hd.off = hd.buf_page + end;
        }
        Ok(())
    }

    /// Flushes every head.
    pub fn flush_all(&mut self) -> Result<()> {
        for h in 0..self.p.head_count() {
            self.flush_head(h)?;
        }
        Ok(())
    }

    /// NAND: writes one raw data page (file block `block` of inode `ino`) to log `kind`, with
    /// its OOB tag. Returns its address.
    pub fn write_data_page(
        &mut self,
        kind: LogKind,
        ino: u32,
        block: u32,
        data: &[u8],
        prio: Priority,
    ) -> Result<Addr> {
        self.write_run_page(kind, ino, block, data, prio, DataEnd::No)
            .map(|(a, _)| a)
    }

    /// Starts a commit run of `ino` from file block `first` in the user-data head (see
    /// [`Store::write_run_page`]). One sequence number is skipped, so the page before the run
    /// can never look like part of it.
    pub fn begin_commit_run(&mut self, ino: u32, first: u32) {
        self.next_seq();
        self.run = Some(CommitRun {
            ino,
            next_block: first,
            next_seq: self.seq,
            block: u32::MAX,
            pages: 0,
            ok: true,
        });
    }

    /// Ends the commit run (whether its last page committed it or not).
    pub fn end_commit_run(&mut self) {
        self.run = None;
    }

    /// The user-data head's block recovery scans for commit runs (`u32::MAX`: none).
    pub fn scanned_block(&self) -> u32 {
        self.scanned_block
    }

    /// Sets the block recovery scans for commit runs: the user-data head's block when a
    /// checkpoint records it, or the block a journal record names.
    pub fn set_scanned_block(&mut self, b: u32) {
        self.scanned_block = b;
    }

    /// NAND: takes an erased block for the user-data head to open next (the least worn, as
    /// that head's allocations are), `Reserved` until it does. The caller names it in a
    /// journal record and, once that record is programmed, hands it to [`Store::set_data_next`]
    /// (or back with [`Store::drop_data_next`]). `NoSpace` below the application's floor.
    pub fn reserve_data_block(&mut self) -> Result<u32> {
        let b = self.alloc_block(LogKind::DataHot, Priority::User)?;
        self.table.set_state(b, BlockState::Reserved);
        Ok(b)
    }

    /// Makes `b` (from [`Store::reserve_data_block`], named by a programmed journal record)
    /// the block the user-data head opens next.
    pub fn set_data_next(&mut self, b: u32) {
        self.data_next = b;
    }

    /// The block the user-data head opens next, if one is named (see [`Store::set_data_next`]).
    pub fn data_next(&self) -> Option<u32> {
        (self.data_next != u32::MAX).then_some(self.data_next)
    }

    /// Gives a reserved user-data block back to the free pool as `Erased` (it was erased and
    /// nothing was written to it): before a checkpoint, whose journal no longer names it, or
    /// when the record naming it could not be programmed.
    pub fn drop_data_next(&mut self, b: u32) -> Result<()> {
        if self.data_next == b {
            self.data_next = u32::MAX;
        }
        if self.block(b)?.state() == BlockState::Reserved {
            self.table.update(b, |e| {
                e.live = 0;
                e.set(BlockState::Erased, LogKind::DataHot);
            });
        }
        Ok(())
    }

    /// NAND: whether the journal head holds a started page not yet programmed with room for
    /// a record of `len` bytes, so that the record costs no program of its own.
    pub fn journal_page_fits(&self, len: u32) -> bool {
        let g = self.p.geometry;
        let h = self.head_index(LogKind::Journal);
        let hd = &self.heads[h];
        g.flash_kind() == FlashKind::Nand
            && hd.unprogrammed()
            && hd.off % g.page_size != 0
            && self.placement(h, self.p.align(len), false) == Some(hd.off)
    }

    /// Records the sequence number a checkpoint was written at.
    pub fn set_cp_seq(&mut self, seq: u64) {
        self.cp_seq = seq;
    }

    /// Whether the journal has records that are not yet durable (NAND: a started journal
    /// page), or bad-block swaps not yet recorded: until they are, no commit may rely on
    /// anything but the journal.
    fn journal_settled(&self) -> bool {
        !self.heads[self.head_index(LogKind::Journal)].unprogrammed()
            && self.new_remaps.is_empty()
            && !self.journal_swapped
            && self.first_program.is_none()
    }

    /// NAND: writes one raw data page (file block `block` of inode `ino`) to log `kind`, with
    /// its OOB tag; inside a commit run of `ino` (user-data head) the page is tagged as part of
    /// it, and `end` (for the run's last page) asks for the tag that commits the run. Returns
    /// the page's address and whether the run is committed: only when every page of the run
    /// went to consecutive pages of the block recovery scans with consecutive sequence
    /// numbers, the journal holds nothing that is not yet durable, and no block was swapped
    /// for a failed program meanwhile. Otherwise the page gets an ordinary tag and the caller
    /// commits through the journal.
    pub fn write_run_page(
        &mut self,
        kind: LogKind,
        ino: u32,
        block: u32,
        data: &[u8],
        prio: Priority,
        end: DataEnd,
    ) -> Result<(Addr, bool)> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.program_first()?;
        let g = self.p.geometry;
        debug_assert_eq!(g.flash_kind(), FlashKind::Nand);
        if data.len() != g.page_size as usize {
            return Err(Error::Invalid);
        }
        let h = self.head_index(kind);
        self.make_room(h, kind, prio, g.page_size, false)?;
        let seq = self.next_seq();
        let hb = self.heads[h].block;
        let in_run = kind == LogKind::DataHot && self.run.is_some_and(|r| r.ino == ino);
        let mut flags = 0;
        let mut tag_end = DataEnd::No;
        if in_run {
            let full_tag = self.p.commit_runs();
            let sb = self.scanned_block;
            let cp_seq = self.cp_seq;
            let settled = self.journal_settled();
            let Some(r) = self.run.as_mut() else {
                return Err(Error::Internal);
            };
            if r.pages == 0 {
                r.block = hb;
                flags = TAG_FIRST;
            }
            r.ok &= full_tag
                && hb == sb
                && hb == r.block
                && block == r.next_block
                && seq == r.next_seq
                && seq.checked_sub(cp_seq).is_some_and(|d| d < 1 << 31);
            r.pages += 1;
            r.next_block = block.wrapping_add(1);
            r.next_seq = seq + 1;
            if end != DataEnd::No && r.ok && settled {
                tag_end = end;
            }
        }
        let tag = OobTag {
            kind: TAG_DATA,
            flags,
            ino,
            block,
            seq: seq as u32,
            data_crc: crc32c(data),
            end: tag_end,
        }
        .encode();
        let bs = g.block_size() as u64;
        let pos = self.heads[h].block as u64 * bs + self.heads[h].off as u64;
        let ppos = self.phys_pos(pos);
        let swaps = self.new_remaps.len();
        self.program_with_recovery(
            h,
            ppos,
            data,
            &tag[..OOB_TAG_LEN.min(g.oob_free_len as usize)],
        )?;
        // A swap during the program moved the page to a block recovery cannot find before a
        // journal record names the swap: the journal commits the run.
        let committed = tag_end != DataEnd::No && self.new_remaps.len() == swaps;
        let pos = self.heads[h].block as u64 * bs + self.heads[h].off as u64;
        self.heads[h].off += g.page_size;
        let a = self.p.addr_of(pos);
        self.add_live(a, g.page_size)?;
        if self.heads[h].off >= g.block_size() {
            self.close_head(h)?;
        }
        Ok((a, committed))
    }

    /// NOR: how many data slots a data node may hold in the open block of log `kind`'s head
    /// (0 when it has none, or no room for one). A writer that sizes its node to this fills
    /// the block instead of leaving its tail unused (a node never spans two blocks).
    pub fn data_slots_room(&self, kind: LogKind) -> u32 {
        let h = self.head_index(kind);
        let g = self.p.geometry;
        if g.flash_kind() != FlashKind::Nor || !self.heads[h].is_open() {
            return 0;
        }
        let room = g.block_size().saturating_sub(self.heads[h].off);
        room.saturating_sub(self.p.data_header()) / self.p.data_slot()
    }

    /// NOR: writes a data node, its header followed by its payload (file blocks in slots,
    /// each with its CRC), contiguous in one block, and credits the payload as live. Returns
    /// the address of the header; the payload starts `Params::data_header` bytes later (the
    /// node padded to the address unit).
    pub fn write_data_node(
        &mut self,
        kind: LogKind,
        nb: NodeBuilder,
        payload: &[u8],
        prio: Priority,
    ) -> Result<Addr> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.program_first()?;
        let g = self.p.geometry;
        if g.flash_kind() != FlashKind::Nor {
            return Err(Error::Invalid);
        }
        let h = self.head_index(kind);
        let total = self.p.align(self.p.data_header() + payload.len() as u32);
        if total > g.block_size() {
            return Err(Error::Invalid);
        }
        if !self.heads[h].is_open() || self.heads[h].off + total > g.block_size() {
            if self.heads[h].is_open() {
                self.close_head(h)?;
            }
            self.open_block(h, kind, prio)?;
        }
        let seq = self.next_seq();
        let mut bytes = nb.finish(seq, 1);
        if bytes.len() != DATA_HEADER as usize {
            return Err(Error::Invalid);
        }
        bytes.resize(self.p.data_header() as usize, 0);
        bytes.extend_from_slice(payload);
        let unit = self.p.unit() as usize;
        let padded = bytes.len().div_ceil(unit) * unit;
        bytes.resize(padded, 0);
        let bs = g.block_size() as u64;
        let start = self.heads[h].block as u64 * bs + self.heads[h].off as u64;
        let ppos = self.phys_pos(start);
        self.program_with_recovery(h, ppos, &bytes, &[])?;
        self.heads[h].off += bytes.len() as u32;
        let a = self.p.addr_of(start);
        self.add_live(a, payload.len() as u32)?;
        if self.heads[h].off >= g.block_size() {
            self.close_head(h)?;
        }
        Ok(a)
    }
}
