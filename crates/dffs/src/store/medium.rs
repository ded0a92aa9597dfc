//! Byte-addressed access to the flash device, with operation counters and ECC bookkeeping.
//!
//! Owns the translation from device byte offsets to (page, offset) operations, the splitting of
//! NOR programs at program-page boundaries and of NAND reads at page boundaries, the counters of
//! reads/programs/erases the file system caused, and the list of blocks whose reads needed ECC
//! correction (scrub candidates). One rule is applied here because every reader needs it: a read
//! the ECC cannot correct is tried again a few times ([`READ_RETRIES`]), since bit errors are
//! often transient (read disturb, noise) and go away when the page is read again. Beyond that it
//! must never decide what to do about a failure: it reports.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::params::LogKind;
use crate::format::params::NandSupport;
use dffs_flash::{EccStatus, Flash, FlashError, FlashKind, Geometry};

/// What a device operation was for: the accounting that says where the reads, programs and
/// erases of a workload go. Programs count under the log they write (GC copies apart),
/// erases under the log the block is erased for, reads under what they read (node type, or
/// file data) or under the phase they belong to (GC, checkpoint, mount).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// File data: its pages written by applications, read back for them.
    Data = 0,
    /// Journal records.
    Journal = 1,
    /// File index nodes.
    Index = 2,
    /// File inode nodes.
    Inode = 3,
    /// Directory pages.
    Dir = 4,
    /// Inode map and block-table pages.
    Map = 5,
    /// Checkpoint records and anchors; reads while a checkpoint is written.
    Checkpoint = 6,
    /// Programs and erases of garbage collection and wear leveling (copies).
    GcCopy = 7,
    /// Reads of garbage collection (finding what is live).
    GcRead = 8,
    /// Mount: finding the checkpoint, loading, replaying the journal.
    Mount = 9,
    /// Anything else (raw reads outside the phases above).
    Other = 10,
}

impl Cause {
    /// How many causes there are (the length of [`CauseCounts`]' arrays).
    pub const COUNT: usize = 11;

    /// Every cause, in index order.
    pub const ALL: [Cause; Cause::COUNT] = [
        Cause::Data,
        Cause::Journal,
        Cause::Index,
        Cause::Inode,
        Cause::Dir,
        Cause::Map,
        Cause::Checkpoint,
        Cause::GcCopy,
        Cause::GcRead,
        Cause::Mount,
        Cause::Other,
    ];

    /// A short name (reports, JSON keys).
    pub const fn name(self) -> &'static str {
        match self {
            Cause::Data => "data",
            Cause::Journal => "journal",
            Cause::Index => "index",
            Cause::Inode => "inode",
            Cause::Dir => "directory",
            Cause::Map => "map",
            Cause::Checkpoint => "checkpoint",
            Cause::GcCopy => "gc_copy",
            Cause::GcRead => "gc_read",
            Cause::Mount => "mount",
            Cause::Other => "other",
        }
    }

    /// The cause of writing to log `kind`.
    pub const fn of_log(kind: LogKind) -> Cause {
        match kind {
            LogKind::Journal => Cause::Journal,
            LogKind::Map => Cause::Map,
            LogKind::Dir => Cause::Dir,
            LogKind::Inode => Cause::Inode,
            LogKind::Index => Cause::Index,
            LogKind::DataHot | LogKind::DataCold => Cause::Data,
        }
    }
}

/// Device operations by [`Cause`] (indexed by `Cause as usize`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CauseCounts {
    /// Read operations.
    pub reads: [u64; Cause::COUNT],
    /// Program operations.
    pub programs: [u64; Cause::COUNT],
    /// Erase operations.
    pub erases: [u64; Cause::COUNT],
    /// Bytes programmed (data only: NAND OOB bytes are not counted). On NOR, where a
    /// program's time is mostly per byte, this says more than the count of programs.
    pub program_bytes: [u64; Cause::COUNT],
    /// Bytes read (data only, as for `program_bytes`).
    pub read_bytes: [u64; Cause::COUNT],
}

impl CauseCounts {
    fn since(&self, earlier: &CauseCounts) -> CauseCounts {
        let d = |a: &[u64; Cause::COUNT], b: &[u64; Cause::COUNT]| {
            core::array::from_fn(|i| a[i] - b[i])
        };
        CauseCounts {
            reads: d(&self.reads, &earlier.reads),
            programs: d(&self.programs, &earlier.programs),
            erases: d(&self.erases, &earlier.erases),
            program_bytes: d(&self.program_bytes, &earlier.program_bytes),
            read_bytes: d(&self.read_bytes, &earlier.read_bytes),
        }
    }
}

/// Counts of device operations, as the file system issued them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpCounts {
    /// Read operations (one per NAND page touched, one per NOR access).
    pub reads: u64,
    /// Program operations.
    pub programs: u64,
    /// Erase operations.
    pub erases: u64,
    /// Reads that came back corrected by ECC.
    pub corrected: u64,
    /// Reads that came back uncorrectable (every attempt counts).
    pub uncorrectable: u64,
    /// Uncorrectable reads that a retry read correctly.
    pub recovered: u64,
    /// The reads, programs and erases above by what they were for.
    pub by_cause: CauseCounts,
}

impl OpCounts {
    /// The difference `self - earlier`.
    pub fn since(&self, earlier: &OpCounts) -> OpCounts {
        OpCounts {
            reads: self.reads - earlier.reads,
            programs: self.programs - earlier.programs,
            erases: self.erases - earlier.erases,
            corrected: self.corrected - earlier.corrected,
            uncorrectable: self.uncorrectable - earlier.uncorrectable,
            recovered: self.recovered - earlier.recovered,
            by_cause: self.by_cause.since(&earlier.by_cause),
        }
    }
}

/// The totals of [`OpCounts`] without the counts by cause: what the file system keeps of the
/// last mount's cost (a copy of the counts by cause would hold 440 bytes of RAM for as long
/// as the file system is mounted; [`OpCounts`] read right after the mount gives them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTotals {
    /// Read operations (one per NAND page touched, one per NOR access).
    pub reads: u64,
    /// Program operations.
    pub programs: u64,
    /// Erase operations.
    pub erases: u64,
    /// Reads that came back corrected by ECC.
    pub corrected: u64,
    /// Reads that came back uncorrectable (every attempt counts).
    pub uncorrectable: u64,
    /// Uncorrectable reads that a retry read correctly.
    pub recovered: u64,
}

impl OpTotals {
    /// The difference `self - earlier`.
    pub fn since(&self, earlier: &OpTotals) -> OpTotals {
        OpTotals {
            reads: self.reads - earlier.reads,
            programs: self.programs - earlier.programs,
            erases: self.erases - earlier.erases,
            corrected: self.corrected - earlier.corrected,
            uncorrectable: self.uncorrectable - earlier.uncorrectable,
            recovered: self.recovered - earlier.recovered,
        }
    }
}

impl OpCounts {
    /// The totals alone.
    pub fn totals(&self) -> OpTotals {
        OpTotals {
            reads: self.reads,
            programs: self.programs,
            erases: self.erases,
            corrected: self.corrected,
            uncorrectable: self.uncorrectable,
            recovered: self.recovered,
        }
    }
}

/// Times an uncorrectable read is tried again before it is reported.
pub const READ_RETRIES: u32 = 4;

/// Most blocks remembered as scrub candidates at once.
const SCRUB_MAX: usize = 32;

/// The device plus counters.
pub struct Medium<F: Flash> {
    /// The device.
    flash: F,
    /// Its geometry (cached).
    pub g: Geometry,
    /// Operations issued so far.
    pub counts: OpCounts,
    /// Blocks whose reads needed correction, oldest first (deduplicated, bounded).
    pub scrub: Vec<u32>,
    /// What the operations issued now are for (set by the store, counted in
    /// [`OpCounts::by_cause`]).
    pub cause: Cause,
    /// NAND: the bytes of one page read by [`Medium::read_cached`], from an offset to the
    /// page's end (physical page, offset, bytes). Any program or erase drops it, and so does
    /// handing out the device mutably (bad-block marks, tests that damage pages).
    cached: Option<(u32, u32, Vec<u8>)>,
}

impl<F: Flash> Medium<F> {
    /// Wraps a device.
    pub fn new(flash: F) -> Self {
        let g = flash.geometry();
        Medium {
            flash,
            g,
            counts: OpCounts::default(),
            scrub: Vec::new(),
            cause: Cause::Other,
            cached: None,
        }
    }

    /// The device (private, so that no change to it can bypass the cached page).
    pub fn flash(&self) -> &F {
        &self.flash
    }

    /// Gives the device back.
    pub fn into_flash(self) -> F {
        self.flash
    }

    /// The device, mutably: whatever it holds may change, so the cached page is dropped.
    pub fn flash_mut(&mut self) -> &mut F {
        self.cached = None;
        &mut self.flash
    }

    /// Drops the cached page (a node read from it failed its check: the next read must come
    /// from the device).
    pub fn drop_cached(&mut self) {
        self.cached = None;
    }

    /// Bytes of RAM the cached page holds.
    pub fn cached_bytes(&self) -> usize {
        self.cached.as_ref().map_or(0, |c| c.2.capacity())
    }

    /// NAND: reads `buf.len()` bytes at `pos`, which lie in one page, from the page cached by
    /// the last call when it holds them; otherwise reads from `pos` to the page's end (what a
    /// read of a node there costs anyway), keeps that, and copies the start. Small nodes
    /// packed into one page (file inodes, journal records) are then read with one page read:
    /// listing a directory reads each child's inode for its name, and the inodes of files
    /// created together share pages. An uncorrectable read is `Io` and is not kept.
    pub fn read_cached(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        let ps = self.g.page_size as u64;
        let page = (pos / ps) as u32;
        let off = (pos % ps) as u32;
        if self.g.flash_kind() != FlashKind::Nand || off as u64 + buf.len() as u64 > ps {
            return self.read(pos, buf);
        }
        if let Some((p, o, bytes)) = &self.cached {
            if *p == page && *o <= off && (off - *o) as usize + buf.len() <= bytes.len() {
                let at = (off - *o) as usize;
                buf.copy_from_slice(&bytes[at..at + buf.len()]);
                return Ok(());
            }
        }
        let mut bytes = match self.cached.take() {
            Some((_, _, mut v)) => {
                v.clear();
                v
            }
            None => Vec::new(),
        };
        bytes.resize((ps - off as u64) as usize, 0);
        self.count_read(bytes.len());
        let st = self
            .flash
            .read(page, off, &mut bytes, &mut [])
            .map_err(Error::from)?;
        if st == EccStatus::Uncorrectable {
            // Maybe past the bytes asked for (the torn or damaged end of a page): they are
            // read alone, as without the cache, with the retries of every read. The failed
            // read counts as a failed try of that read: uncorrectable, and the block a scrub
            // candidate when the bytes then read right (a retry that succeeds makes it one).
            self.note_status(page, st);
            let failed_before = self.counts.uncorrectable;
            let r = self.read(pos, buf);
            if r.is_ok() {
                // (A fallback that needed retries of its own counted itself.)
                if self.counts.uncorrectable == failed_before {
                    self.counts.recovered += 1;
                }
                self.scrub_candidate(self.g.block_of(page));
            }
            return r;
        }
        self.note_status(page, st);
        buf.copy_from_slice(&bytes[..buf.len()]);
        self.cached = Some((page, off, bytes));
        Ok(())
    }

    /// Counts a read that a retry got right after a check above the ECC failed (a bit error
    /// in bytes the ECC does not cover). The block is not made a scrub candidate: the error
    /// is outside the ECC's reach, so moving the data would not make it safer.
    pub(super) fn note_recovered(&mut self) {
        self.counts.recovered += 1;
    }

    fn count_read(&mut self, bytes: usize) {
        self.counts.reads += 1;
        self.counts.by_cause.reads[self.cause as usize] += 1;
        self.counts.by_cause.read_bytes[self.cause as usize] += bytes as u64;
    }

    fn count_program(&mut self, bytes: usize) {
        self.counts.programs += 1;
        self.counts.by_cause.programs[self.cause as usize] += 1;
        self.counts.by_cause.program_bytes[self.cause as usize] += bytes as u64;
    }

    fn count_erase(&mut self) {
        self.counts.erases += 1;
        self.counts.by_cause.erases[self.cause as usize] += 1;
    }

    /// Remembers `block` (physical) for scrubbing.
    fn scrub_candidate(&mut self, block: u32) {
        if !self.scrub.contains(&block) && self.scrub.len() < SCRUB_MAX {
            self.scrub.push(block);
        }
    }

    fn note_status(&mut self, page: u32, st: EccStatus) {
        match st {
            EccStatus::Clean => {}
            EccStatus::Corrected(_) => {
                self.counts.corrected += 1;
                self.scrub_candidate(self.g.block_of(page));
            }
            EccStatus::Uncorrectable => self.counts.uncorrectable += 1,
        }
    }

    /// Reads one page's data range and free OOB bytes; returns the ECC status. An
    /// uncorrectable read is retried up to [`READ_RETRIES`] times; the block of a page that
    /// needed a retry is a scrub candidate like one that needed correction.
    pub fn read_page(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus> {
        let mut tries = 0;
        loop {
            self.count_read(data.len());
            let st = self
                .flash
                .read(page, offset, data, oob)
                .map_err(Error::from)?;
            self.note_status(page, st);
            if st != EccStatus::Uncorrectable || tries == READ_RETRIES {
                if tries > 0 && st != EccStatus::Uncorrectable {
                    self.counts.recovered += 1;
                    self.scrub_candidate(self.g.block_of(page));
                }
                return Ok(st);
            }
            tries += 1;
        }
    }

    /// Reads `buf.len()` bytes at device byte offset `pos`, across pages if needed. Returns the
    /// worst ECC status seen after retries (the caller decides whether `Uncorrectable` is
    /// fatal). NOR has no ECC: its reads are always `Clean`, and the CRCs of what is read are
    /// the only check (callers retry a read whose CRC fails: see `Store::read_checked`).
    pub fn read_status(&mut self, pos: u64, buf: &mut [u8]) -> Result<EccStatus> {
        let ps = self.g.page_size as u64;
        if pos + buf.len() as u64 > self.g.capacity() {
            return Err(Error::Corrupt);
        }
        match self.g.flash_kind() {
            FlashKind::Nor => {
                if buf.is_empty() {
                    return Ok(EccStatus::Clean);
                }
                self.count_read(buf.len());
                let st = self
                    .flash
                    .read((pos / ps) as u32, (pos % ps) as u32, buf, &mut [])
                    .map_err(Error::from)?;
                Ok(st)
            }
            FlashKind::Nand => {
                let mut worst = EccStatus::Clean;
                let mut done = 0usize;
                while done < buf.len() {
                    let p = pos + done as u64;
                    let page = (p / ps) as u32;
                    let off = (p % ps) as u32;
                    let n = ((ps - off as u64) as usize).min(buf.len() - done);
                    let st = self.read_page(page, off, &mut buf[done..done + n], &mut [])?;
                    worst = worst.worst(st);
                    done += n;
                }
                Ok(worst)
            }
        }
    }

    /// Reads `buf.len()` bytes at `pos`; uncorrectable data is an `Io` error.
    pub fn read(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        match self.read_status(pos, buf)? {
            EccStatus::Uncorrectable => Err(Error::Io),
            _ => Ok(()),
        }
    }

    /// Programs `data` at device byte offset `pos` (and `oob` into the page's free OOB bytes,
    /// NAND). NAND: the range stays in one page. NOR: split at program-page boundaries.
    pub fn program(
        &mut self,
        pos: u64,
        data: &[u8],
        oob: &[u8],
    ) -> core::result::Result<(), FlashError> {
        let ps = self.g.page_size as u64;
        match self.g.flash_kind() {
            FlashKind::Nand => {
                self.count_program(data.len());
                self.cached = None;
                self.flash
                    .program((pos / ps) as u32, (pos % ps) as u32, data, oob)
            }
            FlashKind::Nor => {
                let mut done = 0usize;
                while done < data.len() {
                    let p = pos + done as u64;
                    let off = (p % ps) as u32;
                    let n = ((ps - off as u64) as usize).min(data.len() - done);
                    self.count_program(n);
                    self.flash
                        .program((p / ps) as u32, off, &data[done..done + n], &[])?;
                    done += n;
                }
                Ok(())
            }
        }
    }

    /// Erases a block.
    pub fn erase(&mut self, block: u32) -> core::result::Result<(), FlashError> {
        self.count_erase();
        self.cached = None;
        self.scrub.retain(|&b| b != block);
        self.flash.erase(block)
    }
}
