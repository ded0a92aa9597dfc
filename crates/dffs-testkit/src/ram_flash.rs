//! A RAM flash device for hostile-input tests and fuzzing: data areas, free spare bytes,
//! bad-block marks and uncorrectable pages all open to the test, an operation budget that turns a
//! hang into a panic, and a power cut at the N-th program or erase. Plus the small geometries
//! those tests use.
//!
//! It must never refuse a program on non-erased bytes (it ANDs them in), so a damaged image
//! never turns into a device error that hides the file system's own handling; the device rules
//! are the simulator's (`dffs-sim`) job.

use std::collections::BTreeSet;

use dffs::{EccStatus, Flash, FlashError, FlashKind, Geometry};

// ----- device -------------------------------------------------------------------------------

/// Panic message of a device whose operation budget ran out (a hang, for the tests).
pub const BUDGET_PANIC: &str = "hostile: flash operation budget exhausted (hang?)";

/// A RAM flash device: data areas, the free spare bytes, bad-block marks and pages that read as
/// uncorrectable, all open to the tests. Programs AND bits in (never fail on non-erased bytes),
/// so a damaged image never turns into a device error that hides the file system's handling.
#[derive(Clone)]
pub struct RamFlash {
    /// Geometry.
    pub geo: Geometry,
    /// Data areas of all pages, page after page.
    pub data: Vec<u8>,
    /// Free spare bytes of all pages (`oob_free_len` per page; empty on NOR).
    pub oob: Vec<u8>,
    /// Bad-block marks.
    pub bad: Vec<bool>,
    /// Pages whose reads report an uncorrectable ECC error.
    pub uncorrectable: BTreeSet<u32>,
    /// Operations so far (reads, programs, erases).
    pub ops: u64,
    /// Operations allowed before the device panics with [`BUDGET_PANIC`] (0: no limit).
    pub budget: u64,
    /// Programs and erases so far.
    pub writes: u64,
    /// Cut power at this program/erase number (the operation is done in part).
    pub cut_at: Option<u64>,
    /// Power is off.
    pub off: bool,
}

impl RamFlash {
    /// An erased device.
    pub fn new(geo: Geometry) -> RamFlash {
        let pages = geo.total_pages() as usize;
        RamFlash {
            geo,
            data: vec![0xFF; pages * geo.page_size as usize],
            oob: vec![0xFF; pages * geo.oob_free_len as usize],
            bad: vec![false; geo.blocks as usize],
            uncorrectable: BTreeSet::new(),
            ops: 0,
            budget: 0,
            writes: 0,
            cut_at: None,
            off: false,
        }
    }

    /// A fresh copy of the contents, with counters reset and power on.
    pub fn fresh_copy(&self) -> RamFlash {
        let mut f = self.clone();
        f.ops = 0;
        f.writes = 0;
        f.cut_at = None;
        f.off = false;
        f
    }

    /// Bytes of one page's data area.
    pub fn page_size(&self) -> usize {
        self.geo.page_size as usize
    }

    /// Free spare bytes per page.
    pub fn oob_len(&self) -> usize {
        self.geo.oob_free_len as usize
    }

    /// The data area of `page`.
    pub fn page(&self, page: u32) -> &[u8] {
        let ps = self.page_size();
        &self.data[page as usize * ps..(page as usize + 1) * ps]
    }

    /// The data area of `page`, writable.
    pub fn page_mut(&mut self, page: u32) -> &mut [u8] {
        let ps = self.page_size();
        &mut self.data[page as usize * ps..(page as usize + 1) * ps]
    }

    /// The free spare bytes of `page`.
    pub fn oob_of(&self, page: u32) -> &[u8] {
        let n = self.oob_len();
        &self.oob[page as usize * n..(page as usize + 1) * n]
    }

    /// The free spare bytes of `page`, writable.
    pub fn oob_mut(&mut self, page: u32) -> &mut [u8] {
        let n = self.oob_len();
        &mut self.oob[page as usize * n..(page as usize + 1) * n]
    }

    /// Whether `page` was ever programmed (data or spare not all erased).
    pub fn page_used(&self, page: u32) -> bool {
        self.page(page).iter().any(|&b| b != 0xFF) || self.oob_of(page).iter().any(|&b| b != 0xFF)
    }

    /// Pages that hold something.
    pub fn used_pages(&self) -> Vec<u32> {
        (0..self.geo.total_pages())
            .filter(|&p| self.page_used(p))
            .collect()
    }

    /// Loads a raw image: data areas in page order, then (NAND) the free spare bytes of every
    /// page; short input is padded with erased bytes, extra input ignored.
    pub fn load_raw(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.data.len());
        self.data[..n].copy_from_slice(&bytes[..n]);
        let rest = &bytes[n..];
        let m = rest.len().min(self.oob.len());
        self.oob[..m].copy_from_slice(&rest[..m]);
    }

    /// The raw image [`RamFlash::load_raw`] reads.
    pub fn raw(&self) -> Vec<u8> {
        let mut v = self.data.clone();
        v.extend_from_slice(&self.oob);
        v
    }

    /// Byte `i` (modulo the size) of the raw image [`RamFlash::raw`] gives.
    pub fn raw_byte(&self, i: usize) -> u8 {
        let i = i % (self.data.len() + self.oob.len());
        if i < self.data.len() {
            self.data[i]
        } else {
            self.oob[i - self.data.len()]
        }
    }

    /// Sets byte `i` (modulo the size) of the raw image.
    pub fn set_raw_byte(&mut self, i: usize, v: u8) {
        let i = i % (self.data.len() + self.oob.len());
        if i < self.data.len() {
            self.data[i] = v;
        } else {
            let n = self.data.len();
            self.oob[i - n] = v;
        }
    }

    fn tick(&mut self) {
        self.ops += 1;
        if self.budget != 0 && self.ops > self.budget {
            panic!("{BUDGET_PANIC}");
        }
    }

    /// Counts a program or erase; true when power is cut at this one.
    fn write_op(&mut self) -> Result<bool, FlashError> {
        if self.off {
            return Err(FlashError::PowerLoss);
        }
        self.writes += 1;
        if self.cut_at == Some(self.writes) {
            self.off = true;
            return Ok(true);
        }
        Ok(false)
    }
}

impl Flash for RamFlash {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        self.tick();
        if self.off {
            return Err(FlashError::PowerLoss);
        }
        let g = self.geo;
        if page >= g.total_pages() || oob.len() > g.oob_free_len as usize {
            return Err(FlashError::OutOfRange);
        }
        let start = page as u64 * g.page_size as u64 + offset as u64;
        let end = start + data.len() as u64;
        let limit = match g.kind {
            FlashKind::Nand => (page as u64 + 1) * g.page_size as u64,
            FlashKind::Nor => self.data.len() as u64,
        };
        if offset > g.page_size || end > limit {
            return Err(FlashError::OutOfRange);
        }
        data.copy_from_slice(&self.data[start as usize..end as usize]);
        if !oob.is_empty() {
            let o = page as usize * g.oob_free_len as usize;
            oob.copy_from_slice(&self.oob[o..o + oob.len()]);
        }
        let last = if data.is_empty() {
            page
        } else {
            ((end - 1) / g.page_size as u64) as u32
        };
        if self.uncorrectable.range(page..=last).next().is_some() {
            return Ok(EccStatus::Uncorrectable);
        }
        Ok(EccStatus::Clean)
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        self.tick();
        let g = self.geo;
        if page >= g.total_pages()
            || oob.len() > g.oob_free_len as usize
            || offset as u64 + data.len() as u64 > g.page_size as u64
        {
            return Err(FlashError::OutOfRange);
        }
        let cut = self.write_op()?;
        let keep = if cut { data.len() / 2 } else { data.len() };
        let start = page as usize * g.page_size as usize + offset as usize;
        for (d, s) in self.data[start..start + keep].iter_mut().zip(data) {
            *d &= *s;
        }
        if !cut {
            let o = page as usize * g.oob_free_len as usize;
            for (d, s) in self.oob[o..o + oob.len()].iter_mut().zip(oob) {
                *d &= *s;
            }
            Ok(())
        } else {
            Err(FlashError::PowerLoss)
        }
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        self.tick();
        let g = self.geo;
        if block >= g.blocks {
            return Err(FlashError::OutOfRange);
        }
        let cut = self.write_op()?;
        let bs = g.block_size() as usize;
        let span = if cut { bs / 2 } else { bs };
        self.data[block as usize * bs..block as usize * bs + span].fill(0xFF);
        let ob = g.pages_per_block as usize * g.oob_free_len as usize;
        self.oob[block as usize * ob..(block as usize + 1) * ob].fill(0xFF);
        let first = g.first_page(block);
        let pages: Vec<u32> = self
            .uncorrectable
            .range(first..first + g.pages_per_block)
            .copied()
            .collect();
        for p in pages {
            self.uncorrectable.remove(&p);
        }
        if cut {
            Err(FlashError::PowerLoss)
        } else {
            Ok(())
        }
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        self.tick();
        if block >= self.geo.blocks {
            return Err(FlashError::OutOfRange);
        }
        Ok(self.geo.kind == FlashKind::Nand && self.bad[block as usize])
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        self.tick();
        if self.geo.kind == FlashKind::Nor {
            return Err(FlashError::Device);
        }
        if block >= self.geo.blocks {
            return Err(FlashError::OutOfRange);
        }
        self.bad[block as usize] = true;
        Ok(())
    }
}

// ----- geometries ---------------------------------------------------------------------------

/// SLC NAND as the `nand-slc-128m` preset (2 KiB pages, 64 pages per block), cut to `blocks`.
pub fn nand_geometry(blocks: u32) -> Geometry {
    Geometry {
        kind: FlashKind::Nand,
        page_size: 2048,
        oob_size: 64,
        oob_free_offset: 2,
        oob_free_len: 38,
        pages_per_block: 64,
        blocks,
        program_unit: 512,
        nop: 4,
        in_order: false,
        ecc_strength: 1,
        ecc_step: 512,
        pairing: dffs::PagePairing::None,
    }
}

/// Serial NOR as the `nor-qspi-16m` preset with 4 KiB erase sectors, cut to `blocks`.
pub fn nor_geometry(blocks: u32) -> Geometry {
    Geometry {
        kind: FlashKind::Nor,
        page_size: 256,
        oob_size: 0,
        oob_free_offset: 0,
        oob_free_len: 0,
        pages_per_block: 16,
        blocks,
        program_unit: 1,
        nop: 0,
        in_order: false,
        ecc_strength: 0,
        ecc_step: 256,
        pairing: dffs::PagePairing::None,
    }
}

/// The smallest NAND the fuzz targets use: 512-byte pages, 16 per block.
pub fn tiny_nand_geometry() -> Geometry {
    Geometry {
        kind: FlashKind::Nand,
        page_size: 512,
        oob_size: 32,
        oob_free_offset: 2,
        oob_free_len: 24,
        pages_per_block: 16,
        blocks: 20,
        program_unit: 512,
        nop: 1,
        in_order: false,
        ecc_strength: 1,
        ecc_step: 512,
        pairing: dffs::PagePairing::None,
    }
}

/// NOR of 256-byte program pages and 8 KiB erase blocks, `blocks` of them: the smallest
/// blocks that take 4-byte address units (FORMAT §3), which the 4 KiB sectors of
/// [`nor_geometry`] and [`tiny_nor_geometry`] do not.
pub fn nor_large_geometry(blocks: u32) -> Geometry {
    Geometry {
        pages_per_block: 32,
        blocks,
        ..nor_geometry(blocks)
    }
}

/// The fuzz targets' NOR of 8 KiB erase blocks (4-byte address units): 24 of them.
pub fn tiny_nor_large_geometry() -> Geometry {
    nor_large_geometry(24)
}

/// The smallest NOR the fuzz targets use: 256-byte program pages, 2 KiB erase blocks.
pub fn tiny_nor_geometry() -> Geometry {
    Geometry {
        pages_per_block: 8,
        blocks: 32,
        ..nor_geometry(32)
    }
}
