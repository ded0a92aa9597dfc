//! Reading the journal back after a mount: the records written since the checkpoint, in order,
//! up to the first one that is not there (erased), not whole (a cut program), or not the next
//! in sequence.
//!
//! The journal is a chain of blocks. Each block begins with a link record naming the block
//! before it and the block the journal continues in (reserved and erased before the link was
//! written); records follow in order, sequence numbers strictly increasing. The scan starts at
//! the position the checkpoint recorded and follows the chain only into a block that begins
//! with a link pointing back at the block the scan is leaving: a block reserved but never
//! reached, or reused since, is not part of the chain.
//!
//! It owns that walk ([`JournalScan`]) and nothing else: it never applies a record (the file
//! system does, record by record, with the same code it uses live) and never writes.

use alloc::vec;
use alloc::vec::Vec;

use super::record::Record;
use crate::error::{Error, Result};
use crate::format::node::{self, NodeType, Probe};
use crate::format::params::NandSupport;
use crate::format::params::{LogKind, NODE_HEADER};
use crate::store::{BlockInfo, BlockState, Store};
use dffs_flash::{Flash, FlashKind};

/// Where a scan starts: what the checkpoint recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanStart {
    /// Block of the first record.
    pub block: u32,
    /// Offset of the first record in it.
    pub off: u32,
    /// The block the journal was set to continue in.
    pub next: u32,
    /// The checkpoint's next sequence number: every record must have a greater one.
    pub next_seq: u64,
    /// The checkpoint was written by a clean unmount: the page at `off` stays unused (the
    /// session marker goes one page later), so anything programmed there is a cut program.
    pub clean: bool,
}

/// A walk over the journal's records.
pub(crate) struct JournalScan {
    at: Cursor,
    /// Ended on bytes that were programmed but are not a valid record (a cut program).
    garbage: bool,
    done: bool,
    rd: PageReader,
    /// Records returned so far.
    returned: u64,
    /// Replay's second pass: the records the first pass read, which this scan must return
    /// too and never more (see [`JournalScan::bound_to`]); or, with `exact` false, the most
    /// a checkpoint lets replay read (see [`JournalScan::limit_to`]).
    bound: Option<u64>,
    /// Whether a scan that ends before `bound` fails (`EIO`) rather than ends.
    exact: bool,
    /// An `exact` scan failed for ending before its bound (see [`JournalScan::ended_short`]).
    short: bool,
}

/// Where a journal scan is: what a read again from the same record starts from.
#[derive(Clone, Copy)]
struct Cursor {
    block: u32,
    pos: u32,
    next: u32,
    last_seq: u64,
    chain_len: u32,
    first_in_block: bool,
}

/// Times replay's second pass reads the journal again where it ended before the first pass
/// did. A page a power cut left unstable reads uncorrectable at random (the simulator: two
/// reads in five, each with its own retries); 16 more tries make a wrong ending
/// vanishingly rare on NAND, and one that still fails says `EIO` instead of applying less
/// than the first pass decided; the mount then loads again, reading no further than where it
/// failed ([`JournalScan::ended_short`]). (NOR: the partly programmed bits of a torn record
/// read differently each time, and a record that passed its CRC once may never again.)
const REREADS: u32 = 16;

impl JournalScan {
    /// Starts a scan at `start` (checks the unused page of a clean checkpoint).
    pub fn new<F: Flash>(st: &mut Store<F>, start: ScanStart) -> Result<JournalScan> {
        let g = st.p().geometry;
        let bs = g.block_size();
        let mut s = JournalScan {
            at: Cursor {
                block: start.block,
                pos: start.off,
                next: start.next,
                last_seq: start.next_seq.saturating_sub(1),
                chain_len: 0,
                first_in_block: start.off == 0,
            },
            garbage: false,
            done: false,
            rd: PageReader::new(g.page_size),
            returned: 0,
            bound: None,
            exact: false,
            short: false,
        };
        if start.clean {
            // After a clean checkpoint the next session's marker is one page later, and the
            // page at the recorded position stays unused: anything there is a cut program.
            let ps = g.page_size;
            let skip = ((s.at.pos.div_ceil(ps) + 1) * ps).min(bs);
            if !erased_between(st, s.at.block, s.at.pos, skip)? {
                s.garbage = true;
            }
            s.at.pos = skip;
            s.at.first_in_block = false;
        }
        Ok(s)
    }

    /// Records returned so far.
    pub fn returned(&self) -> u64 {
        self.returned
    }

    /// Makes this scan read exactly the `n` records an earlier scan of the same journal in
    /// this mount read: no more, and, where it ends sooner (a page a power cut left unstable,
    /// read uncorrectable or garbled this time), it reads again from that record. Replay's
    /// two passes then see one journal: the first decides which transactions committed and
    /// where the journal ends, and the second applied less than that when a torn last page
    /// read clean once and not the second time (a transaction's data block then went to the
    /// recovery as free; DESIGN §15 item 22).
    pub fn bound_to(&mut self, n: u64) {
        self.bound = Some(n);
        self.exact = true;
    }

    /// Makes this scan read at most `n` records: what a recovery read of the journal before
    /// it erased anything, recorded in the checkpoint it wrote again (`CP_JOURNAL_BOUND`).
    /// Records after those may name blocks that recovery erased. Where the scan ends sooner,
    /// it reads again from that record as [`JournalScan::bound_to`] does, and then ends there
    /// (fewer records name fewer blocks: what the recovery kept stays kept).
    pub fn limit_to(&mut self, n: u64) {
        self.bound = Some(n);
        self.exact = false;
    }

    /// The sequence number of the last record returned (or the checkpoint's last).
    pub fn last_seq(&self) -> u64 {
        self.at.last_seq
    }

    /// Whether the scan ended on programmed bytes that are not a valid record, or at the
    /// bound of [`JournalScan::limit_to`] (the journal may go on past it, torn: the mount
    /// recovers as after a cut program).
    pub fn ended_on_garbage(&self) -> bool {
        self.garbage
    }

    /// Whether the scan stopped at the bound of [`JournalScan::limit_to`] (what follows was
    /// not read).
    pub fn stopped_at_limit(&self) -> bool {
        !self.exact && self.bound.is_some_and(|n| self.returned >= n)
    }

    /// Whether this scan's `EIO` was its ending before the bound of
    /// [`JournalScan::bound_to`] however often it read the journal again there: a torn page
    /// that read whole once and not since. [`JournalScan::returned`] says where.
    pub fn ended_short(&self) -> bool {
        self.short
    }

    /// The block the last link read names as the journal's next, set aside (and erased)
    /// before that link was written; `u32::MAX` for none.
    pub fn named_next(&self) -> u32 {
        self.at.next
    }

    /// Ends the scan on a cut program.
    fn stop_garbage(&mut self) -> Result<Option<Record>> {
        self.garbage = true;
        self.done = true;
        Ok(None)
    }

    /// The next record, or `None` at the end of the journal. Link records are returned too
    /// (the caller's `apply` ignores them); the scan follows them itself.
    pub fn next<F: Flash>(&mut self, st: &mut Store<F>) -> Result<Option<Record>> {
        let Some(n) = self.bound else {
            let r = self.next_record(st)?;
            self.returned += r.is_some() as u64;
            return Ok(r);
        };
        if self.returned >= n {
            self.done = true;
            // Past a checkpoint's bound the journal may go on, torn: recover as after one.
            self.garbage |= !self.exact;
            return Ok(None);
        }
        let at = self.at;
        for _ in 0..=REREADS {
            if let Some(rec) = self.next_record(st)? {
                self.returned += 1;
                return Ok(Some(rec));
            }
            // Read it again from the device (not from the page this attempt kept).
            self.at = at;
            self.garbage = false;
            self.done = false;
            self.rd = PageReader::new(self.rd.page_size);
        }
        if !self.exact {
            return self.stop_garbage();
        }
        self.short = true;
        Err(Error::Io)
    }

    fn next_record<F: Flash>(&mut self, st: &mut Store<F>) -> Result<Option<Record>> {
        if self.done {
            return Ok(None);
        }
        let p = st.p();
        let g = p.geometry;
        let bs = g.block_size();
        let unit = p.unit();
        loop {
            // Records of this block.
            while self.at.pos + 2 <= bs {
                let room = match g.flash_kind() {
                    FlashKind::Nand => g.page_size - self.at.pos % g.page_size,
                    FlashKind::Nor => bs - self.at.pos,
                };
                let base = self.at.block as u64 * bs as u64 + self.at.pos as u64;
                let head = match self.rd.read(st, base, room.min(NODE_HEADER)) {
                    Ok(h) => h,
                    Err(Error::Io) | Err(Error::Corrupt) => return self.stop_garbage(),
                    Err(e) => return Err(e),
                };
                match node::probe(head, room) {
                    Probe::Erased => {
                        // Erased means the whole rest of the program unit is: a cut program
                        // may leave its first bytes erased and later ones programmed.
                        // NAND: the page is in the reader's buffer, whole. NOR: the rest of
                        // this program page and the next one.
                        let erased = match g.flash_kind() {
                            FlashKind::Nand => self.rd.rest_erased(base),
                            FlashKind::Nor => {
                                let end = ((self.at.pos / g.page_size + 2) * g.page_size).min(bs);
                                erased_between(st, self.at.block, self.at.pos, end)?
                            }
                        };
                        if !erased {
                            return self.stop_garbage();
                        }
                        if g.flash_kind() == FlashKind::Nand && self.at.pos % g.page_size != 0 {
                            self.at.pos += room;
                            continue;
                        }
                        // On paired-page NAND the journal leaves upper pages of durable lower
                        // pages unprogrammed and goes on after them.
                        if g.flash_kind() == FlashKind::Nand
                            && g.page_pairing()
                                .lower_of(self.at.pos / g.page_size)
                                .is_some()
                            && self.at.pos + g.page_size < bs
                        {
                            self.at.pos += g.page_size;
                            continue;
                        }
                        break;
                    }
                    Probe::Padding => {
                        self.at.pos += unit;
                        continue;
                    }
                    Probe::Garbage => return self.stop_garbage(),
                    Probe::Header(h) => {
                        let bytes = match self.rd.read(st, base, h.len) {
                            Ok(b) => b,
                            Err(Error::Io) | Err(Error::Corrupt) => return self.stop_garbage(),
                            Err(e) => return Err(e),
                        };
                        let Ok(body) = node::verify(bytes, &h) else {
                            return self.stop_garbage();
                        };
                        if !h.typ.is_journal() || h.seq <= self.at.last_seq {
                            return self.stop_garbage();
                        }
                        let Ok(rec) = Record::decode(&h, body) else {
                            return self.stop_garbage();
                        };
                        self.at.last_seq = h.seq;
                        self.at.pos += p.align(h.len);
                        if let Record::Link { next, .. } = rec {
                            if self.at.first_in_block {
                                self.at.next = next;
                            }
                        }
                        self.at.first_in_block = false;
                        return Ok(Some(rec));
                    }
                }
            }
            // Continue in the next block if it starts with a link back to this one.
            if !self.enter_next_block(st)? {
                self.done = true;
                return Ok(None);
            }
        }
    }

    /// Moves into the block named by the current block's link, if it is part of the chain
    /// (begins with a link back to this block, later in sequence). Marks it a journal block
    /// so that nothing allocates it before the next checkpoint.
    fn enter_next_block<F: Flash>(&mut self, st: &mut Store<F>) -> Result<bool> {
        let p = st.p();
        let g = p.geometry;
        let bs = g.block_size();
        if self.at.next >= g.blocks || self.at.chain_len > g.blocks {
            return Ok(false);
        }
        let base = self.at.next as u64 * bs as u64;
        let head = match self.rd.read(st, base, NODE_HEADER) {
            Ok(h) => h,
            Err(Error::Io) | Err(Error::Corrupt) => return Ok(false),
            Err(e) => return Err(e),
        };
        let h = match node::probe(head, bs) {
            Probe::Header(h) => h,
            Probe::Erased => return Ok(false),
            _ => {
                // A half-written link: the journal was moving into this block.
                self.garbage = true;
                return Ok(false);
            }
        };
        if h.typ != NodeType::JLink || h.seq <= self.at.last_seq {
            return Ok(false);
        }
        let bytes = match self.rd.read(st, base, h.len) {
            Ok(b) => b,
            Err(Error::Io) | Err(Error::Corrupt) => return Ok(false),
            Err(e) => return Err(e),
        };
        let Ok(body) = node::verify(bytes, &h) else {
            self.garbage = true;
            return Ok(false);
        };
        match Record::decode(&h, body) {
            Ok(Record::Link { prev, next }) if prev == self.at.block => {
                // The chain block holds records the state depends on: keep it from the
                // allocator until the next checkpoint.
                st.count_replayed_erase(self.at.next)?;
                st.set_block(
                    self.at.next,
                    BlockInfo::new(BlockState::Used, LogKind::Journal, 0),
                )?;
                self.at.block = self.at.next;
                self.at.next = next;
                self.at.pos = p.align(h.len);
                self.at.last_seq = h.seq;
                self.at.chain_len += 1;
                self.at.first_in_block = false;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// Whether bytes `[from, to)` of logical block `block` all read as erased.
pub(crate) fn erased_between<F: Flash>(
    st: &mut Store<F>,
    block: u32,
    from: u32,
    to: u32,
) -> Result<bool> {
    let bs = st.p().geometry.block_size() as u64;
    let mut buf = vec![0u8; 1024];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(buf.len());
        match st.read(block as u64 * bs + at as u64, &mut buf[..n]) {
            Ok(()) => {
                if buf[..n].iter().any(|&b| b != 0xFF) {
                    return Ok(false);
                }
            }
            Err(Error::Io) | Err(Error::Corrupt) => return Ok(false),
            Err(e) => return Err(e),
        }
        at += n as u32;
    }
    Ok(true)
}

/// Reads journal bytes a NAND page at a time (records never cross a page), or straight from
/// NOR.
struct PageReader {
    page: u64,
    buf: Vec<u8>,
    page_size: u32,
}

impl PageReader {
    fn new(page_size: u32) -> PageReader {
        PageReader {
            page: u64::MAX,
            buf: Vec::new(),
            page_size,
        }
    }

    /// NAND: whether the page last read is erased from `pos` (in it) to its end.
    fn rest_erased(&self, pos: u64) -> bool {
        let ps = self.page_size as u64;
        pos / ps == self.page && self.buf[(pos % ps) as usize..].iter().all(|&b| b == 0xFF)
    }

    fn read<F: Flash>(&mut self, st: &mut Store<F>, pos: u64, len: u32) -> Result<&[u8]> {
        match st.p().geometry.flash_kind() {
            FlashKind::Nand => {
                let ps = self.page_size as u64;
                let page = pos / ps;
                let off = (pos % ps) as usize;
                if off + len as usize > ps as usize {
                    return Err(Error::Corrupt);
                }
                if page != self.page {
                    self.buf.resize(ps as usize, 0);
                    self.page = u64::MAX;
                    st.read(page * ps, &mut self.buf)?;
                    self.page = page;
                }
                Ok(&self.buf[off..off + len as usize])
            }
            FlashKind::Nor => {
                self.buf.resize(len as usize, 0);
                st.read(pos, &mut self.buf)?;
                Ok(&self.buf)
            }
        }
    }
}
