//! The block manager and the log heads: where every byte DFFS writes goes, and what each erase
//! block holds.
//!
//! Owns the block table (state, owner log, live bytes, erase count and age of every erase
//! block), block allocation with dynamic wear leveling, bad-block retirement (a block that fails
//! a program is copied to a spare and swapped in, so addresses already handed out stay valid),
//! the open blocks ("heads") of every log with their NAND write buffers, the global sequence
//! number, and reading nodes back with CRC checks. It must never know what a node means: it
//! stores bytes, counts live space and hands out addresses.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::{crc32c, Reader, Writer};
use crate::format::node::{
    self, NodeBuilder, NodeHeader, NodeType, OobTag, Probe, OOB_TAG_LEN, TAG_DATA,
};
use crate::format::params::{Addr, LogKind, Params, MAX_HEADS, NODE_HEADER};
use crate::medium::{Medium, READ_RETRIES};
use dffs_flash::{EccStatus, Flash, FlashError, FlashKind, PagePairing};

/// What an erase block is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockState {
    /// Not in use; contents unknown (erased before use).
    Free = 0,
    /// Not in use and known to be erased.
    Erased = 1,
    /// Holds nodes of one log; closed.
    Used = 2,
    /// The open block of a log head.
    Head = 3,
    /// Emptied by garbage collection (or a dead journal block); may still hold data the last
    /// checkpoint needs, so it becomes free only after the next checkpoint.
    PendingErase = 4,
    /// One of the two checkpoint blocks.
    Anchor = 5,
    /// Set aside for the journal's next block.
    Reserved = 6,
    /// Bad (factory or grown); never used.
    Bad = 7,
}

impl BlockState {
    fn from_u8(v: u8) -> Option<BlockState> {
        use BlockState::*;
        Some(match v {
            0 => Free,
            1 => Erased,
            2 => Used,
            3 => Head,
            4 => PendingErase,
            5 => Anchor,
            6 => Reserved,
            7 => Bad,
            _ => return None,
        })
    }
}

/// One erase block's record: 12 bytes in RAM and on flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    /// Erase count.
    pub ec: u32,
    /// Bytes of live nodes and data in the block.
    pub live: u32,
    info: u32,
}

impl BlockInfo {
    /// A record with the given fields.
    pub fn new(state: BlockState, kind: LogKind, ec: u32, live: u32, age: u32) -> Self {
        BlockInfo {
            ec,
            live,
            info: state as u32 | (kind as u32) << 4 | (age & 0xFF_FFFF) << 8,
        }
    }
    /// The block's state.
    pub fn state(&self) -> BlockState {
        BlockState::from_u8((self.info & 0xF) as u8).unwrap_or(BlockState::Bad)
    }
    /// The log the block belongs to (meaningful for Used/Head blocks).
    pub fn kind(&self) -> LogKind {
        LogKind::from_u8(((self.info >> 4) & 0xF) as u8).unwrap_or(LogKind::DataCold)
    }
    /// Checkpoint number (low 24 bits) of the last write into the block.
    pub fn age(&self) -> u32 {
        self.info >> 8
    }
    fn set(&mut self, state: BlockState, kind: LogKind, age: u32) {
        *self = BlockInfo::new(state, kind, self.ec, self.live, age);
    }
    fn set_state(&mut self, state: BlockState) {
        let (k, a) = (self.kind(), self.age());
        self.set(state, k, a);
    }
    /// Encodes the record.
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.ec).u32(self.live).u32(self.info);
    }
    /// Decodes a record, rejecting impossible values.
    pub fn decode(r: &mut Reader<'_>, block_size: u32) -> Result<BlockInfo> {
        let (ec, live, info) = (r.u32()?, r.u32()?, r.u32()?);
        let b = BlockInfo { ec, live, info };
        let state = BlockState::from_u8((info & 0xF) as u8);
        if state.is_none()
            || LogKind::from_u8(((info >> 4) & 0xF) as u8).is_none()
            || live > block_size
            // A free block holds nothing live (an invariant every checkpoint keeps).
            || (matches!(state, Some(BlockState::Free | BlockState::Erased)) && live != 0)
        {
            return Err(Error::Corrupt);
        }
        Ok(b)
    }
}

/// An open block of a log, with the NAND write buffer of its current page.
#[derive(Clone, Debug)]
pub struct Head {
    /// Logical block, or `u32::MAX` when the head has no block.
    pub block: u32,
    /// Byte offset in the block where the next node goes.
    pub off: u32,
    /// NAND: the page being filled (empty when no page is buffered).
    buf: Vec<u8>,
    /// Byte offset in the block of the buffered page.
    buf_page: u32,
    /// Bytes of the buffered page already programmed.
    buf_prog: u32,
    /// Pages of the block (from its start) that may have been programmed.
    programmed: u32,
    /// Pages of the block programmed before the last durability barrier (see
    /// [`Store::barrier`]): on paired-page NAND their upper pages are never programmed.
    protected: u32,
}

impl Head {
    fn empty() -> Head {
        Head {
            block: u32::MAX,
            off: 0,
            buf: Vec::new(),
            buf_page: 0,
            buf_prog: 0,
            programmed: 0,
            protected: 0,
        }
    }

    /// A head continuing in `block` at `off`, everything before `off` taken as programmed and
    /// durable (after a mount or a recovery).
    pub fn resumed(block: u32, off: u32, page_size: u32) -> Head {
        let pages = off.div_ceil(page_size);
        Head {
            block,
            off,
            programmed: pages,
            protected: pages,
            ..Head::empty()
        }
    }

    /// Whether the head has an open block.
    pub fn is_open(&self) -> bool {
        self.block != u32::MAX
    }
}

/// A bad block swapped out: logical block `logical` now lives on physical block `physical`
/// (and the logical block numbered `physical` is bad).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remap {
    /// The logical block whose data moved.
    pub logical: u32,
    /// The physical block now holding it.
    pub physical: u32,
}

/// Who is asking for a block. Each level has a floor of free blocks it must leave (set by the
/// file system's budget, see [`Store::set_floors`]): application data leaves the reserve,
/// journal appends and GC copies leave what a checkpoint needs, and a checkpoint (which is what
/// gives blocks back) may take the last ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// Writes on behalf of the application.
    User,
    /// Journal appends, garbage-collection copies.
    Log,
    /// A spare for a block that failed a program (may use the bad-block spares).
    Spare,
    /// Checkpoints (may use every block). Outside a checkpoint (see
    /// [`Store::set_checkpointing`]) it counts as [`Priority::Log`]: only a checkpoint gives
    /// blocks back, so only a checkpoint may take the last ones.
    Reserve,
}

/// Bytes of a data node header (type `Data`) before its payload.
pub const DATA_HEADER: u32 = NODE_HEADER + 16;

/// Blocks, heads and the device.
pub struct Store<F: Flash> {
    /// The device.
    pub m: Medium<F>,
    /// Format parameters.
    pub p: Params,
    /// Per logical block records.
    pub blocks: Vec<BlockInfo>,
    /// Swapped-out bad blocks.
    pub remaps: Vec<Remap>,
    /// Swaps not yet recorded in the journal (the journal layer writes them).
    pub unjournaled_remaps: Vec<Remap>,
    /// Open blocks, indexed by head number.
    pub heads: [Head; MAX_HEADS],
    /// Next sequence number to hand out.
    pub seq: u64,
    /// Checkpoint counter (ages blocks).
    pub cp_number: u64,
    /// Block set aside for the journal to continue in.
    pub journal_next: u32,
    /// The journal's current (or last) block: the `prev` of the next block's link record, so
    /// replay can follow the chain even when the head closed itself at a block end.
    pub journal_last: u32,
    /// No writes allowed.
    pub read_only: bool,
    /// Blocks allocated ahead of time for each head (see [`Store::ensure_room`]): a head that
    /// fills takes its next block from here before it allocates.
    pub preopened: [Vec<u32>; MAX_HEADS],
    /// Set while the journal is replayed: replay must never write (a write would land on
    /// blocks the rest of the journal may still reference).
    pub replaying: bool,
    /// After a clean mount the heads continue where the checkpoint left them; before the first
    /// program of the session a `JSession` record goes to the journal, so that a later mount
    /// knows the heads may hold more than the checkpoint says.
    pub session_needed: bool,
    /// Free blocks [`Priority::Log`] allocations must leave.
    floor_log: u32,
    /// Free blocks [`Priority::User`] allocations must leave.
    floor_user: u32,
    /// Free blocks [`Priority::Spare`] allocations must leave.
    floor_spare: u32,
    /// A checkpoint is being written: [`Priority::Reserve`] may take the last blocks.
    checkpointing: bool,
}

impl<F: Flash> Store<F> {
    /// A store over `flash` with parameters `p` and an all-free block table.
    pub fn new(flash: F, p: Params) -> Store<F> {
        let g = p.geometry;
        Store {
            m: Medium::new(flash),
            p,
            blocks: vec![
                BlockInfo::new(BlockState::Free, LogKind::DataHot, 0, 0, 0);
                g.blocks as usize
            ],
            remaps: Vec::new(),
            unjournaled_remaps: Vec::new(),
            heads: core::array::from_fn(|_| Head::empty()),
            seq: 1,
            cp_number: 1,
            journal_next: u32::MAX,
            journal_last: u32::MAX,
            read_only: false,
            preopened: core::array::from_fn(|_| Vec::new()),
            replaying: false,
            session_needed: false,
            floor_log: 0,
            floor_user: p.gc_reserve + p.bad_reserve,
            floor_spare: 0,
            checkpointing: false,
        }
    }

    /// Sets the allocation floors of [`Priority::Spare`], [`Priority::Log`] and
    /// [`Priority::User`] (`spare <= log <= user`).
    pub fn set_floors(&mut self, spare: u32, log: u32, user: u32) {
        self.floor_spare = spare;
        self.floor_log = log.max(spare);
        self.floor_user = user.max(self.floor_log);
    }

    /// Marks the start (`true`) and end of a checkpoint: while it is written,
    /// [`Priority::Reserve`] allocations may take every free block.
    pub fn set_checkpointing(&mut self, on: bool) {
        self.checkpointing = on;
    }

    /// Free blocks journal appends and GC copies must leave.
    pub fn log_floor(&self) -> u32 {
        self.floor_log
    }

    /// RAM held by the store (block table, heads' buffers).
    pub fn ram_bytes(&self) -> usize {
        self.blocks.capacity() * core::mem::size_of::<BlockInfo>()
            + self.remaps.capacity() * 8
            + self.heads.iter().map(|h| h.buf.capacity()).sum::<usize>()
    }

    // ----- addressing -------------------------------------------------------------------

    /// Physical block of a logical block.
    pub fn phys(&self, logical: u32) -> u32 {
        for r in &self.remaps {
            if r.logical == logical {
                return r.physical;
            }
            if r.physical == logical {
                return r.logical;
            }
        }
        logical
    }

    /// Physical byte offset of a logical byte offset.
    fn phys_pos(&self, pos: u64) -> u64 {
        let bs = self.p.geometry.block_size() as u64;
        let b = (pos / bs) as u32;
        let pb = self.phys(b);
        pb as u64 * bs + pos % bs
    }

    /// Takes the next sequence number.
    pub fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    // ----- reading ----------------------------------------------------------------------

    /// If `[pos, pos+len)` lies in a head's buffered page, copies it from RAM.
    fn read_from_buffers(&self, pos: u64, buf: &mut [u8]) -> bool {
        let bs = self.p.geometry.block_size() as u64;
        for h in &self.heads {
            if !h.is_open() || h.buf.is_empty() {
                continue;
            }
            let start = h.block as u64 * bs + h.buf_page as u64;
            let end = start + h.buf.len() as u64;
            if pos >= start && pos + buf.len() as u64 <= end {
                let o = (pos - start) as usize;
                buf.copy_from_slice(&h.buf[o..o + buf.len()]);
                return true;
            }
        }
        false
    }

    /// Reads `buf.len()` bytes at logical byte offset `pos`; uncorrectable data is `Io`.
    pub fn read(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        if self.read_from_buffers(pos, buf) {
            return Ok(());
        }
        let g = self.p.geometry;
        let ps = g.page_size as u64;
        let end = pos + buf.len() as u64;
        if g.kind == FlashKind::Nand && pos / ps != (end.max(1) - 1) / ps {
            // A node that runs from a programmed page into a buffered one (a compressed data
            // node): read page by page so each part comes from where it is.
            let bsz = g.block_size() as u64;
            let buffered = self.heads.iter().any(|h| {
                let start = h.block as u64 * bsz + h.buf_page as u64;
                h.is_open() && !h.buf.is_empty() && start < end && start + ps > pos
            });
            if buffered {
                let split = (pos / ps + 1) * ps;
                let (a, b) = buf.split_at_mut((split - pos) as usize);
                self.read(pos, a)?;
                return self.read(split, b);
            }
        }
        let bs = self.p.geometry.block_size() as u64;
        if pos / bs != (pos + buf.len().max(1) as u64 - 1) / bs {
            // Crosses a block boundary: read block by block (remaps differ).
            let split = ((pos / bs) + 1) * bs;
            let n = (split - pos) as usize;
            let (a, b) = buf.split_at_mut(n);
            self.read(pos, a)?;
            return self.read(split, b);
        }
        let pp = self.phys_pos(pos);
        self.m.read(pp, buf)
    }

    /// Reads `buf.len()` bytes at `pos` until `ok` accepts them, at most
    /// `1 + READ_RETRIES` times: a CRC that fails may be a transient read error (NOR has no
    /// ECC to tell). Returns whether the bytes were accepted; an uncorrectable read counts as
    /// not accepted.
    pub fn read_checked(
        &mut self,
        pos: u64,
        buf: &mut [u8],
        ok: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        for _ in 0..=READ_RETRIES {
            match self.read(pos, buf) {
                Ok(()) if ok(buf) => return Ok(true),
                Ok(()) | Err(Error::Io) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Reads a NAND page's data and free OOB bytes (logical page number) from flash (not from
    /// write buffers: flush first); returns the ECC status.
    pub fn read_page(&mut self, page: u32, data: &mut [u8], oob: &mut [u8]) -> Result<EccStatus> {
        let g = self.p.geometry;
        let pos = page as u64 * g.page_size as u64;
        let ppage = (self.phys_pos(pos) / g.page_size as u64) as u32;
        self.m.read_page(ppage, 0, data, oob)
    }

    /// Reads a complete node at `a` (at most `max_len` bytes long), checks its CRC and type,
    /// and returns its bytes (header included, padding excluded). A node that fails its checks
    /// is read again (at most [`READ_RETRIES`] times) before it is reported `Corrupt`: the error
    /// may have been a transient one.
    pub fn read_node(
        &mut self,
        a: Addr,
        typ: NodeType,
        max_len: u32,
    ) -> Result<(NodeHeader, Vec<u8>)> {
        if !self.p.addr_valid(a) {
            return Err(Error::Corrupt);
        }
        let pos = self.p.byte_of(a);
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let room = (bs - pos % bs) as u32;
        let max_len = max_len.min(room);
        if max_len < NODE_HEADER {
            return Err(Error::Corrupt);
        }
        let first = match g.kind {
            // One operation for the whole node (nodes never cross NAND pages unless they are
            // larger than a page).
            FlashKind::Nand => {
                let to_page_end = g.page_size - (pos % g.page_size as u64) as u32;
                max_len.min(to_page_end.max(NODE_HEADER))
            }
            FlashKind::Nor => max_len.min(256),
        };
        let mut err = Error::Corrupt;
        for _ in 0..=READ_RETRIES {
            let mut buf = vec![0u8; first as usize];
            match self.read(pos, &mut buf) {
                Ok(()) => {}
                Err(Error::Io) => {
                    err = Error::Io;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let hdr = match node::probe(&buf, max_len) {
                Probe::Header(h) if h.typ == typ => h,
                // Nothing was ever written there: no second read will find a node.
                Probe::Erased => return Err(Error::Corrupt),
                _ => {
                    err = Error::Corrupt;
                    continue;
                }
            };
            if hdr.len as usize > buf.len() {
                let have = buf.len();
                buf.resize(hdr.len as usize, 0);
                match self.read(pos + have as u64, &mut buf[have..]) {
                    Ok(()) => {}
                    Err(Error::Io) => {
                        err = Error::Io;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            buf.truncate(hdr.len as usize);
            if node::verify(&buf, &hdr).is_ok() {
                return Ok((hdr, buf));
            }
            err = Error::Corrupt;
        }
        Err(err)
    }

    // ----- block allocation -------------------------------------------------------------

    /// Blocks in the free pool.
    pub fn free_blocks(&self) -> u32 {
        self.blocks
            .iter()
            .filter(|b| matches!(b.state(), BlockState::Free | BlockState::Erased))
            .count() as u32
    }

    /// Blocks waiting for the next checkpoint to become free.
    pub fn pending_blocks(&self) -> u32 {
        self.blocks
            .iter()
            .filter(|b| b.state() == BlockState::PendingErase)
            .count() as u32
    }

    /// Blocks the application may not take (GC and bad-block reserve, and what a checkpoint
    /// needs).
    pub fn reserve_blocks(&self) -> u32 {
        self.floor_user.max(self.p.gc_reserve + self.p.bad_reserve)
    }

    /// Erases a logical block, retiring it if the erase fails. Returns false if it went bad.
    fn erase_block(&mut self, b: u32) -> Result<bool> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let pb = self.phys(b);
        self.blocks[b as usize].ec = self.blocks[b as usize].ec.saturating_add(1);
        match self.m.erase(pb) {
            Ok(()) => Ok(true),
            Err(FlashError::PowerLoss) => Err(Error::PowerLoss),
            Err(_) => {
                self.retire(b);
                Ok(false)
            }
        }
    }

    /// Marks a logical block bad, on flash where the device supports it, and in the table.
    pub fn retire(&mut self, b: u32) {
        let pb = self.phys(b);
        let _ = self.m.flash.mark_bad(pb);
        let e = &mut self.blocks[b as usize];
        e.live = 0;
        e.set_state(BlockState::Bad);
    }

    /// Takes a block from the free pool for log `kind` and erases it. Hot logs get the least
    /// worn block, cold data the most worn one (dynamic wear leveling).
    pub fn alloc_block(&mut self, kind: LogKind, prio: Priority) -> Result<u32> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        if self.replaying {
            debug_assert!(false, "allocation during replay");
            return Err(Error::Corrupt);
        }
        loop {
            let free = self.free_blocks();
            let floor = match prio {
                Priority::User => self.reserve_blocks(),
                Priority::Log => self.floor_log,
                Priority::Spare => self.floor_spare,
                Priority::Reserve if self.checkpointing => 0,
                Priority::Reserve => self.floor_log,
            };
            if free <= floor {
                return Err(Error::NoSpace);
            }
            let want_old = kind == LogKind::DataCold;
            let mut best: Option<u32> = None;
            for (i, e) in self.blocks.iter().enumerate() {
                if !matches!(e.state(), BlockState::Free | BlockState::Erased) {
                    continue;
                }
                best = match best {
                    None => Some(i as u32),
                    Some(j) => {
                        let ej = self.blocks[j as usize].ec;
                        let better = if want_old { e.ec > ej } else { e.ec < ej };
                        if better {
                            Some(i as u32)
                        } else {
                            Some(j)
                        }
                    }
                };
            }
            let b = best.ok_or(Error::NoSpace)?;
            debug_assert_eq!(
                self.blocks[b as usize].live,
                0,
                "allocating block {b} that holds live data: {:?} {:?}",
                self.blocks[b as usize].state(),
                self.blocks[b as usize].kind()
            );
            if self.blocks[b as usize].state() == BlockState::Free && !self.erase_block(b)? {
                continue;
            }
            let age = self.cp_number as u32;
            let e = &mut self.blocks[b as usize];
            e.live = 0;
            e.set(BlockState::Head, kind, age);
            return Ok(b);
        }
    }

    /// Sets a block's state (used by GC, checkpoints and mount).
    pub fn set_state(&mut self, b: u32, s: BlockState) {
        self.blocks[b as usize].set_state(s);
    }

    /// Adds live bytes to the block holding `a`.
    pub fn add_live(&mut self, a: Addr, bytes: u32) {
        let b = self.p.block_of(a) as usize;
        if let Some(e) = self.blocks.get_mut(b) {
            e.live = e
                .live
                .saturating_add(bytes)
                .min(self.p.geometry.block_size());
        }
    }

    /// Records that `bytes` at `a` are no longer live.
    pub fn kill(&mut self, a: Addr, bytes: u32) {
        if !self.p.addr_valid(a) {
            return;
        }
        let b = self.p.block_of(a) as usize;
        if let Some(e) = self.blocks.get_mut(b) {
            e.live = e.live.saturating_sub(bytes);
        }
    }

    // ----- writing ----------------------------------------------------------------------

    fn head_index(&self, kind: LogKind) -> usize {
        self.p.head_of(kind)
    }

    /// Opens a new block for head `h` (journal heads continue in their reserved block and
    /// begin it with a link record).
    fn open_block(&mut self, h: usize, kind: LogKind, prio: Priority) -> Result<()> {
        if kind == LogKind::Journal {
            return self.open_journal_block(prio);
        }
        let b = match self.preopened[h].pop() {
            Some(b) => b,
            None => self.alloc_block(kind, prio)?,
        };
        self.heads[h] = Head {
            block: b,
            ..Head::empty()
        };
        Ok(())
    }

    /// Moves the journal into its reserved next block (erased when it was reserved, so the
    /// switch itself cannot fail) and reserves and erases the one after it, before the link
    /// record that names it is written.
    fn open_journal_block(&mut self, prio: Priority) -> Result<()> {
        let h = self.head_index(LogKind::Journal);
        let prev = if self.heads[h].is_open() {
            self.heads[h].block
        } else {
            self.journal_last
        };
        self.reserve_journal_next_for(prio)?;
        let b = self.journal_next;
        self.journal_next = u32::MAX;
        let age = self.cp_number as u32;
        self.blocks[b as usize].live = 0;
        self.blocks[b as usize].set(BlockState::Head, LogKind::Journal, age);
        if prev != u32::MAX && self.blocks[prev as usize].state() == BlockState::Head {
            self.blocks[prev as usize].set_state(BlockState::Used);
        }
        self.reserve_journal_next_for(prio)?;
        self.heads[h] = Head {
            block: b,
            ..Head::empty()
        };
        self.journal_last = b;
        let mut nb = NodeBuilder::new(NodeType::JLink, 0, 0, 40);
        nb.w.u32(prev).u32(self.journal_next);
        let a = self.append_bytes_in_block(h, LogKind::Journal, nb)?;
        let len = self.p.align(NODE_HEADER + 8);
        self.add_live(a, len);
        Ok(())
    }

    /// Allocates, erases and sets aside the journal's next block (for a checkpoint).
    pub fn reserve_journal_next(&mut self) -> Result<()> {
        self.reserve_journal_next_for(Priority::Reserve)
    }

    /// Allocates, erases and sets aside the journal's next block at priority `prio`.
    fn reserve_journal_next_for(&mut self, prio: Priority) -> Result<()> {
        // A reservation is only good while its block is still set aside: after a power cut,
        // replay may have followed the journal into it (it holds records now).
        let jn = self.journal_next;
        if jn != u32::MAX
            && self.blocks.get(jn as usize).map(|e| e.state()) == Some(BlockState::Reserved)
        {
            return Ok(());
        }
        self.journal_next = u32::MAX;
        let n = self.alloc_block(LogKind::Journal, prio)?;
        self.blocks[n as usize].set_state(BlockState::Reserved);
        self.journal_next = n;
        Ok(())
    }

    /// Closes head `h`'s block (its remaining space is left unused).
    pub fn close_head(&mut self, h: usize) -> Result<()> {
        self.flush_head(h)?;
        let b = self.heads[h].block;
        if b != u32::MAX && self.blocks[b as usize].state() == BlockState::Head {
            self.blocks[b as usize].set_state(BlockState::Used);
        }
        self.heads[h] = Head::empty();
        Ok(())
    }

    /// Forgets every head and its buffer, without writing or changing block states (the
    /// caller reloads the block table afterwards).
    pub fn reset_heads(&mut self) {
        self.heads = core::array::from_fn(|_| Head::empty());
        self.preopened = core::array::from_fn(|_| Vec::new());
    }

    /// Forgets every head without writing (after a power cut their blocks may end in a
    /// half-programmed page, so they are never written again before an erase).
    pub fn abandon_heads(&mut self) {
        for h in 0..MAX_HEADS {
            let b = self.heads[h].block;
            if b != u32::MAX && self.blocks[b as usize].state() == BlockState::Head {
                self.blocks[b as usize].set_state(BlockState::Used);
            }
            self.heads[h] = Head::empty();
        }
    }

    /// After a power cut: finds where head `h` really ends (nodes may have been written after
    /// the checkpoint that recorded its position), skips one more page (NAND) or program page
    /// (NOR) because the last program may have been cut and left an unstable page that reads
    /// as erased, and continues there. A head with no room left is closed. Costs a binary
    /// search of page reads on NAND, a walk over the nodes written since the checkpoint on NOR.
    pub fn recover_head(&mut self, h: usize) -> Result<()> {
        let b = self.heads[h].block;
        if b == u32::MAX {
            return Ok(());
        }
        let g = self.p.geometry;
        let bs = g.block_size();
        let ps = g.page_size;
        let off = self.heads[h].off.min(bs);
        let new_off = match g.kind {
            FlashKind::Nand => {
                let mut data = vec![0u8; ps as usize];
                let mut oob = vec![0u8; g.oob_free_len as usize];
                let ppb = g.pages_per_block;
                let mut erased = |st: &mut Self, i: u32| -> Result<bool> {
                    match st.read_page(b * ppb + i, &mut data, &mut oob) {
                        Ok(_) => {
                            Ok(data.iter().all(|&x| x == 0xFF) && oob.iter().all(|&x| x == 0xFF))
                        }
                        Err(Error::PowerLoss) => Err(Error::PowerLoss),
                        Err(_) => Ok(false),
                    }
                };
                // Pages programmed since the checkpoint form a run, except that every earlier
                // recovery without a checkpoint after it left one page unwritten (and a cut
                // program may read as erased): binary search for the first erased page, and
                // when one of the two pages after it is programmed, it was such a gap: search
                // again beyond it.
                let mut lo = off.div_ceil(ps);
                loop {
                    let mut hi = ppb;
                    while lo < hi {
                        let mid = (lo + hi) / 2;
                        if erased(self, mid)? {
                            hi = mid;
                        } else {
                            lo = mid + 1;
                        }
                    }
                    let mut gap = false;
                    for next in [lo + 1, lo + 2] {
                        if next < ppb && !erased(self, next)? {
                            lo = next + 1;
                            gap = true;
                            break;
                        }
                    }
                    if !gap {
                        break;
                    }
                }
                (lo + 1) * ps
            }
            FlashKind::Nor => {
                let mut pos = off;
                let unit = self.p.unit();
                let mut head = [0u8; NODE_HEADER as usize];
                while pos + NODE_HEADER <= bs {
                    let at = b as u64 * bs as u64 + pos as u64;
                    if self.read(at, &mut head).is_err() {
                        break;
                    }
                    match node::probe(&head, bs - pos) {
                        Probe::Padding => pos += unit,
                        Probe::Header(hd) => {
                            let mut whole = vec![0u8; hd.len as usize];
                            if self.read(at, &mut whole).is_err()
                                || node::verify(&whole, &hd).is_err()
                            {
                                break;
                            }
                            let mut len = hd.len;
                            if hd.typ == NodeType::Data
                                && whole.len() >= (NODE_HEADER + 12) as usize
                            {
                                let plen = u32::from_le_bytes([
                                    whole[32], whole[33], whole[34], whole[35],
                                ]);
                                len = len.saturating_add(plen);
                            }
                            pos = pos.saturating_add(self.p.align(len));
                        }
                        Probe::Erased | Probe::Garbage => break,
                    }
                }
                // A node cut half way may have programmed pages beyond where valid nodes end:
                // continue after the last byte that is not erased.
                let mut end = pos;
                let mut chunk = vec![0u8; 4096];
                let mut at = pos;
                while at < bs {
                    let n = (bs - at).min(chunk.len() as u32) as usize;
                    match self.read(b as u64 * bs as u64 + at as u64, &mut chunk[..n]) {
                        Ok(()) => {
                            if let Some(i) = chunk[..n].iter().rposition(|&x| x != 0xFF) {
                                end = at + i as u32 + 1;
                            }
                        }
                        Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                        Err(_) => end = at + n as u32,
                    }
                    at += n as u32;
                }
                (end.div_ceil(ps) + 1) * ps
            }
        };
        if new_off >= bs {
            if self.blocks[b as usize].state() == BlockState::Head {
                self.blocks[b as usize].set_state(BlockState::Used);
            }
            self.heads[h] = Head::empty();
        } else {
            self.heads[h] = Head::resumed(b, new_off, ps);
            self.blocks[b as usize].set_state(BlockState::Head);
        }
        Ok(())
    }

    /// Makes sure log `kind` can take `nodes` more nodes of `node_len` bytes without
    /// allocating: blocks the current head cannot hold are allocated now and wait in
    /// `preopened`, so that a caller can snapshot the block table first (the block-table
    /// pages of a checkpoint describe the blocks they are written to).
    pub fn ensure_room(
        &mut self,
        kind: LogKind,
        nodes: u32,
        node_len: u32,
        prio: Priority,
    ) -> Result<()> {
        let h = self.head_index(kind);
        let g = self.p.geometry;
        let len = self.p.align(node_len);
        let bs = g.block_size();
        // Nodes that fit between offset `off` and the end of a block, keeping one page (NOR:
        // one program unit) free so that a final flush never has to open a block.
        let fits = |off: u32| -> u32 {
            match g.kind {
                FlashKind::Nand => {
                    let start = off.div_ceil(g.page_size) * g.page_size;
                    let pages = (bs.saturating_sub(start) / g.page_size).saturating_sub(1);
                    pages * (g.page_size / len.max(1))
                }
                FlashKind::Nor => bs.saturating_sub(off + self.p.unit()) / len.max(1),
            }
        };
        let per_block = fits(0);
        if per_block == 0 {
            return Err(Error::NoSpace);
        }
        let here = if self.heads[h].is_open() {
            fits(self.heads[h].off)
        } else {
            0
        };
        let ready = self.preopened[h].len() as u32;
        let need = nodes.saturating_sub(here).div_ceil(per_block);
        if need > ready {
            let more = need - ready;
            let mut fresh = Vec::with_capacity(more as usize);
            for _ in 0..more {
                fresh.push(self.alloc_block(kind, prio)?);
            }
            // `open_block` pops from the end: keep the earliest allocated first in line.
            fresh.reverse();
            let mut rest = core::mem::take(&mut self.preopened[h]);
            fresh.append(&mut rest);
            self.preopened[h] = fresh;
        }
        Ok(())
    }

    /// Writes (and makes durable) the session record if this is the session's first program.
    ///
    /// The marker goes one page (NOR: one program page) after the journal position the
    /// checkpoint recorded, leaving that page unused: if power is cut while the marker itself
    /// is programmed, the half-programmed page may read as erased, and nothing is ever
    /// programmed there again (mount looks for the marker in both places).
    pub fn mark_session(&mut self) -> Result<()> {
        if self.session_needed && !self.replaying {
            self.session_needed = false;
            let h = self.head_index(LogKind::Journal);
            if self.heads[h].is_open() {
                let g = self.p.geometry;
                let ps = g.page_size;
                let skip = (self.heads[h].off.div_ceil(ps) + 1) * ps;
                self.heads[h].buf = Vec::new();
                if skip >= g.block_size() {
                    self.close_head(h)?;
                } else {
                    self.heads[h].off = skip;
                }
            }
            let nb = NodeBuilder::new(NodeType::JSession, 0, 0, NODE_HEADER as usize);
            self.write_node(LogKind::Journal, nb, Priority::Reserve)?;
            self.flush(LogKind::Journal)?;
        }
        Ok(())
    }

    /// A durability barrier: everything programmed so far may now be needed after a power cut
    /// (a journal page or a checkpoint was just programmed). On paired-page NAND the upper
    /// pages of what every head has programmed are off limits from now on: a program cut there
    /// could destroy the lower page's durable data. No head holds a buffered page at a barrier
    /// (see [`Store::program_buffered`] and the checkpoint), so every page a head starts later
    /// is checked against this.
    pub fn barrier(&mut self) {
        if self.p.geometry.pairing == PagePairing::None {
            return;
        }
        for hd in self.heads.iter_mut() {
            hd.protected = hd.programmed;
        }
    }

    /// Makes head `h` (of log `kind`) ready to take `len` bytes at its offset: an open block
    /// with room for them; on NAND, a node that must stay in one page (`span` false) does not
    /// cross a page boundary, and no page the bytes would start is an upper page whose lower
    /// page is protected (paired-page NAND: the head moves past it, leaving it unprogrammed).
    fn make_room(
        &mut self,
        h: usize,
        kind: LogKind,
        prio: Priority,
        len: u32,
        span: bool,
    ) -> Result<()> {
        let g = self.p.geometry;
        let ps = g.page_size;
        // Each round opens a block, finishes a page or skips a page: bounded.
        for _ in 0..2 * g.pages_per_block + 4 {
            if !self.heads[h].is_open() || self.heads[h].off + len > g.block_size() {
                if self.heads[h].is_open() {
                    self.close_head(h)?;
                }
                self.open_block(h, kind, prio)?;
                continue;
            }
            if g.kind == FlashKind::Nor {
                return Ok(());
            }
            let off = self.heads[h].off;
            if !span && off % ps + len > ps {
                self.finish_page(h)?;
                continue;
            }
            if g.pairing != PagePairing::None {
                let protected = self.heads[h].protected;
                let first_new = off.div_ceil(ps);
                let last = (off + len.max(1) - 1) / ps;
                let upper = (first_new..=last)
                    .find(|&pg| g.pairing.lower_of(pg).is_some_and(|l| l < protected));
                if let Some(u) = upper {
                    if off % ps != 0 {
                        self.finish_page(h)?;
                    }
                    self.heads[h].off = (u + 1) * ps;
                    if self.heads[h].off >= g.block_size() {
                        self.close_head(h)?;
                    }
                    continue;
                }
            }
            return Ok(());
        }
        Err(Error::NoSpace)
    }

    /// Appends a node to log `kind`. The node must fit in one page on NAND (fixed-size page
    /// nodes are placed at a page boundary). Returns its address.
    pub fn write_node(&mut self, kind: LogKind, nb: NodeBuilder, prio: Priority) -> Result<Addr> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.mark_session()?;
        let h = self.head_index(kind);
        let len = self.p.align(nb.w.len() as u32);
        let g = self.p.geometry;
        if g.kind == FlashKind::Nand && len > g.page_size {
            return Err(Error::Invalid);
        }
        self.make_room(h, kind, prio, len, false)?;
        let a = self.append_bytes_in_block(h, kind, nb)?;
        self.add_live(a, len);
        Ok(a)
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
        if g.kind == FlashKind::Nor || !kind.is_data() {
            let len = self.p.align(nb.w.len() as u32);
            let a = self.write_node(kind, nb, prio)?;
            self.kill(a, len);
            self.add_live(a, credit);
            return Ok(a);
        }
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.mark_session()?;
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
        self.add_live(a, credit);
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
        match g.kind {
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
        if g.kind == FlashKind::Nor || self.heads[h].buf.is_empty() {
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
        let paired = self.p.geometry.pairing != PagePairing::None;
        if journal {
            // On paired-page NAND a journal program is a barrier (see `Store::barrier`): no
            // other head may hold a started page then. Elsewhere only the data heads matter.
            for oh in 0..self.p.head_count() {
                let data = oh == self.head_index(LogKind::DataHot)
                    || oh == self.head_index(LogKind::DataCold);
                let hd = &self.heads[oh];
                if oh != h
                    && (data || paired)
                    && hd.is_open()
                    && !hd.buf.is_empty()
                    && hd.off - hd.buf_page > hd.buf_prog
                {
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

    fn flush_head(&mut self, h: usize) -> Result<()> {
        let g = self.p.geometry;
        if g.kind == FlashKind::Nor || !self.heads[h].is_open() || self.heads[h].buf.is_empty() {
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
        if g.kind == FlashKind::Nand || end >= g.page_size {
            hd.off = hd.buf_page + g.page_size;
            hd.buf = Vec::new();
            if hd.off >= g.block_size() {
                let b = hd.block;
                self.heads[h] = Head::empty();
                if self.blocks[b as usize].state() == BlockState::Head {
                    self.blocks[b as usize].set_state(BlockState::Used);
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
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        self.mark_session()?;
        let g = self.p.geometry;
        debug_assert_eq!(g.kind, FlashKind::Nand);
        if data.len() != g.page_size as usize {
            return Err(Error::Invalid);
        }
        let h = self.head_index(kind);
        self.make_room(h, kind, prio, g.page_size, false)?;
        let seq = self.next_seq();
        let tag = OobTag {
            kind: TAG_DATA,
            flags: 0,
            ino,
            block,
            seq: seq as u32,
            data_crc: crc32c(data),
        }
        .encode();
        let bs = g.block_size() as u64;
        let pos = self.heads[h].block as u64 * bs + self.heads[h].off as u64;
        let ppos = self.phys_pos(pos);
        self.program_with_recovery(
            h,
            ppos,
            data,
            &tag[..OOB_TAG_LEN.min(g.oob_free_len as usize)],
        )?;
        let pos = self.heads[h].block as u64 * bs + self.heads[h].off as u64;
        self.heads[h].off += g.page_size;
        let a = self.p.addr_of(pos);
        self.add_live(a, g.page_size);
        if self.heads[h].off >= g.block_size() {
            self.close_head(h)?;
        }
        Ok(a)
    }

    /// NOR: writes a data node, its header followed by its payload (file blocks in slots,
    /// each with its CRC), contiguous in one block, and credits the payload as live. Returns
    /// the address of the header; the payload starts [`DATA_HEADER`] bytes later.
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
        let g = self.p.geometry;
        if g.kind != FlashKind::Nor {
            return Err(Error::Invalid);
        }
        self.mark_session()?;
        let h = self.head_index(kind);
        let total = self.p.align(DATA_HEADER + payload.len() as u32);
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
        self.add_live(a, payload.len() as u32);
        if self.heads[h].off >= g.block_size() {
            self.close_head(h)?;
        }
        Ok(a)
    }

    /// Programs at a physical position on behalf of head `h`; if the block has gone bad, its
    /// content is moved to a spare block (same logical block number) and the program retried
    /// there.
    fn program_with_recovery(
        &mut self,
        h: usize,
        ppos: u64,
        data: &[u8],
        oob: &[u8],
    ) -> Result<()> {
        let mut ppos = ppos;
        let g = self.p.geometry;
        let last_page =
            ((ppos % g.block_size() as u64) + data.len().max(1) as u64 - 1) / g.page_size as u64;
        let hd = &mut self.heads[h];
        hd.programmed = hd.programmed.max(last_page as u32 + 1);
        for _attempt in 0..4 {
            match self.m.program(ppos, data, oob) {
                Ok(()) => return Ok(()),
                Err(FlashError::PowerLoss) => return Err(Error::PowerLoss),
                Err(FlashError::ProgramFailed) => {
                    let bs = self.p.geometry.block_size() as u64;
                    let logical = self.heads[h].block;
                    let in_block = ppos % bs;
                    self.swap_out_bad_block(logical, in_block)?;
                    let np = self.phys(logical);
                    ppos = np as u64 * bs + in_block;
                }
                Err(_) => return Err(Error::Io),
            }
        }
        Err(Error::Io)
    }

    /// Copies the programmed part (`[0, upto)`) of logical block `logical` to a spare block,
    /// swaps the two in the remap table, and retires the old physical block.
    fn swap_out_bad_block(&mut self, logical: u32, upto: u64) -> Result<()> {
        let g = self.p.geometry;
        let old_phys = self.phys(logical);
        for _ in 0..4 {
            let spare = self.alloc_block(LogKind::DataCold, Priority::Spare)?;
            let spare_phys = self.phys(spare);
            let ok = self.copy_block_prefix(old_phys, spare_phys, upto)?;
            if !ok {
                // The spare failed too: retire it and try another.
                self.retire(spare);
                continue;
            }
            let _ = self.m.flash.mark_bad(old_phys);
            // Swap: logical `logical` → spare_phys; logical `spare` → old_phys (bad).
            let mut remaps: Vec<Remap> = self
                .remaps
                .iter()
                .copied()
                .filter(|r| {
                    r.logical != logical
                        && r.physical != logical
                        && r.logical != spare
                        && r.physical != spare
                })
                .collect();
            // Compose with existing mappings: whatever physical `logical` had is now bad.
            if spare_phys != logical {
                remaps.push(Remap {
                    logical,
                    physical: spare_phys,
                });
            }
            self.remaps = remaps;
            let r = Remap {
                logical,
                physical: spare_phys,
            };
            self.unjournaled_remaps.push(r);
            let e = &mut self.blocks[spare as usize];
            e.live = 0;
            e.set_state(BlockState::Bad);
            let _ = g;
            return Ok(());
        }
        Err(Error::Io)
    }

    /// Copies the first `upto` bytes of physical block `from` to physical block `to`: whole
    /// pages with their OOB before the page holding `upto`, then (NAND) the programmed prefix of
    /// that page with its tag, never the part whose program failed. Returns false if
    /// programming `to` failed.
    fn copy_block_prefix(&mut self, from: u32, to: u32, upto: u64) -> Result<bool> {
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let program = |m: &mut Medium<F>, pos: u64, d: &[u8], o: &[u8]| -> Result<bool> {
            match m.program(pos, d, o) {
                Ok(()) => Ok(true),
                Err(FlashError::PowerLoss) => Err(Error::PowerLoss),
                Err(_) => Ok(false),
            }
        };
        match g.kind {
            FlashKind::Nand => {
                let ps = g.page_size as u64;
                let full_pages = (upto / ps) as u32;
                let tail = (upto % ps) as usize;
                let mut data = vec![0u8; g.page_size as usize];
                let mut oob = vec![0u8; g.oob_free_len as usize];
                for i in 0..full_pages + (tail > 0) as u32 {
                    self.m
                        .read_page(from * g.pages_per_block + i, 0, &mut data, &mut oob)?;
                    let len = if i == full_pages { tail } else { data.len() };
                    if data[..len].iter().all(|&b| b == 0xFF) && oob.iter().all(|&b| b == 0xFF) {
                        continue;
                    }
                    let len = len.div_ceil(g.program_unit as usize) * g.program_unit as usize;
                    if !program(
                        &mut self.m,
                        to as u64 * bs + i as u64 * ps,
                        &data[..len],
                        &oob,
                    )? {
                        return Ok(false);
                    }
                }
            }
            FlashKind::Nor => {
                let mut buf = vec![0u8; 256];
                let mut done = 0u64;
                while done < upto {
                    let n = (upto - done).min(256) as usize;
                    self.m.read(from as u64 * bs + done, &mut buf[..n])?;
                    if !program(&mut self.m, to as u64 * bs + done, &buf[..n], &[])? {
                        return Ok(false);
                    }
                    done += n as u64;
                }
            }
        }
        Ok(true)
    }

    /// Bytes head `kind` can still take in its open block without allocating (0 when it has
    /// none), keeping one page (NOR: one unit) free as [`Store::ensure_room`] does.
    pub fn head_room(&self, kind: LogKind) -> u32 {
        let hd = &self.heads[self.head_index(kind)];
        if !hd.is_open() {
            return 0;
        }
        let g = self.p.geometry;
        let bs = g.block_size();
        match g.kind {
            FlashKind::Nand => {
                let start = hd.off.div_ceil(g.page_size) * g.page_size;
                bs.saturating_sub(start).saturating_sub(g.page_size)
            }
            FlashKind::Nor => bs.saturating_sub(hd.off + self.p.unit()),
        }
    }

    /// The head a log kind writes to, for callers that inspect heads.
    pub fn head(&self, kind: LogKind) -> &Head {
        &self.heads[self.head_index(kind)]
    }

    /// Encodes the block table into pages of at most `per` records.
    pub fn encode_block_table_page(&self, first: u32, per: u32, w: &mut Writer) {
        let end = (first + per).min(self.blocks.len() as u32);
        w.u32(first).u32(end - first);
        for b in first..end {
            self.blocks[b as usize].encode(w);
        }
    }
}
