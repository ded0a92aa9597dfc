//! The simulated device: contents, device rules, timing, counters and fault injection.
//!
//! Owns [`SimFlash`] and its [`dffs_flash::Flash`] implementation. Every rule a real part imposes is
//! checked and reported as a [`FlashError`]; it must never silently accept a violation, never
//! hide a fault it injected (an uncorrectable read says so, except where real hardware would not
//! know either: an unstable page after a power cut, or NOR without ECC), and never panic on any
//! argument.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use dffs_flash::{EccStatus, Flash, FlashError, FlashKind, Geometry};
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::preset::Preset;
use crate::rng::Rng;
use crate::stats::Stats;

/// Probability that a read of an unstable NAND page (after a power cut) reports `Uncorrectable`.
pub const UNSTABLE_UNCORRECTABLE_RATE: f64 = 0.4;

/// Fault and behaviour options of a simulated device.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimOptions {
    /// Seed of every random choice the simulator makes (factory bad blocks, bit flips, failures,
    /// partial programs and erases at a power cut).
    pub seed: u64,
    /// Number of factory bad blocks (NAND only; at most 2% of the blocks; never block 0).
    pub factory_bad_blocks: u32,
    /// Probability that any one bit read is flipped (transient, per read).
    pub bitflip_rate: f64,
    /// Probability that a program operation fails (the block goes bad).
    pub program_fail_rate: f64,
    /// Probability that an erase operation fails (the block goes bad).
    pub erase_fail_rate: f64,
    /// When set, a block's erase fails (and the block goes bad) once its erase count exceeds the
    /// preset's endurance.
    pub wear_out: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 0,
            factory_bad_blocks: 0,
            bitflip_rate: 0.0,
            program_fail_rate: 0.0,
            erase_fail_rate: 0.0,
            wear_out: false,
        }
    }
}

impl SimOptions {
    /// Default options with the given seed.
    pub fn seeded(seed: u64) -> Self {
        SimOptions {
            seed,
            ..SimOptions::default()
        }
    }

    /// Checks the options against a geometry.
    pub fn validate(&self, geometry: &Geometry) -> Result<(), SimError> {
        for (name, rate) in [
            ("bitflip_rate", self.bitflip_rate),
            ("program_fail_rate", self.program_fail_rate),
            ("erase_fail_rate", self.erase_fail_rate),
        ] {
            check_rate(name, rate)?;
        }
        let max_bad = max_factory_bad(geometry);
        if self.factory_bad_blocks > max_bad {
            return Err(SimError::Options(match geometry.kind {
                FlashKind::Nor => "NOR devices have no factory bad blocks".to_string(),
                FlashKind::Nand => format!(
                    "{} factory bad blocks requested; at most {max_bad} (2% of {} blocks)",
                    self.factory_bad_blocks, geometry.blocks
                ),
            }));
        }
        Ok(())
    }
}

fn check_rate(name: &str, rate: f64) -> Result<(), SimError> {
    if rate.is_finite() && (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(SimError::Options(format!(
            "{name} must be a probability between 0 and 1, not {rate}"
        )))
    }
}

/// Largest raw page (data plus OOB) the simulator accepts.
const MAX_RAW_PAGE: u32 = 1 << 20;
/// Most pages the simulator accepts (64 GiB of 2 KiB pages).
pub(crate) const MAX_PAGES: u32 = 1 << 25;

/// Checks that a geometry is usable by the simulator, without any arithmetic that could
/// overflow on hostile numbers (a sidecar may hold anything).
pub(crate) fn check_geometry(g: &Geometry) -> Result<(), &'static str> {
    let raw = g
        .page_size
        .checked_add(g.oob_size)
        .ok_or("page too large")?;
    if raw > MAX_RAW_PAGE {
        return Err("page too large");
    }
    g.page_size
        .checked_mul(g.pages_per_block)
        .ok_or("erase block too large")?;
    let pages = g
        .pages_per_block
        .checked_mul(g.blocks)
        .ok_or("too many pages")?;
    if pages > MAX_PAGES {
        return Err("too many pages");
    }
    g.validate()?;
    if g.kind == FlashKind::Nand {
        if g.oob_size < 2 || g.oob_free_offset < 2 {
            return Err("NAND OOB needs the bad-block marker in bytes 0-1 outside the free area");
        }
        if g.ecc_strength > 0 && (g.ecc_step == 0 || g.page_size % g.ecc_step != 0) {
            return Err("the ECC step must divide the page size");
        }
    }
    Ok(())
}

/// Most factory bad blocks a device may have: 2% of its blocks on NAND, none on NOR.
pub fn max_factory_bad(geometry: &Geometry) -> u32 {
    match geometry.kind {
        FlashKind::Nand => (geometry.blocks as u64 * 2 / 100) as u32,
        FlashKind::Nor => 0,
    }
}

/// A simulated raw NAND or NOR flash device.
///
/// Contents are allocated per page on first program, so a large device costs little until it
/// is written. See the crate documentation for the rules and faults it models.
///
/// A clone is an independent device with the same contents, fault state and random stream
/// (tests use it to look at what a power cut would leave without disturbing the original).
#[derive(Clone)]
pub struct SimFlash {
    pub(crate) preset: Preset,
    pub(crate) geo: Geometry,
    pub(crate) options: SimOptions,
    pub(crate) rng: Rng,
    /// Raw pages (data then the whole OOB area); `None` is an erased page.
    pub(crate) pages: Vec<Option<Box<[u8]>>>,
    /// Program operations per page since its block's last erase.
    pub(crate) prog_count: Vec<u16>,
    /// Per block: one more than the highest page index programmed since the last erase (0: none).
    pub(crate) highest: Vec<u32>,
    pub(crate) erase_counts: Vec<u32>,
    pub(crate) factory_bad: BTreeSet<u32>,
    /// Grown bad blocks: every program and erase of them fails.
    pub(crate) failing: BTreeSet<u32>,
    pub(crate) fail_next_program: BTreeSet<u32>,
    /// Pages whose next program fails (their block goes bad).
    pub(crate) fail_next_program_page: BTreeSet<u32>,
    pub(crate) fail_next_erase: BTreeSet<u32>,
    /// Unstable pages (after a power cut) with their mask of weak bits (raw page layout).
    pub(crate) unstable: BTreeMap<u32, Box<[u8]>>,
    /// Persistent injected bit flips: bit positions in the raw page.
    pub(crate) injected: BTreeMap<u32, Vec<u32>>,
    pub(crate) stats: Stats,
    /// Program and erase operations so far (what power cuts count).
    pub(crate) ops: u64,
    /// The operation number (`ops` value) at which power is cut.
    pub(crate) cut_at: Option<u64>,
    pub(crate) powered: bool,
    /// An erased raw page, to read from unallocated pages.
    erased: Box<[u8]>,
    /// Per ECC step: the OOB byte indices holding its ECC bytes.
    ecc_slots: Vec<Vec<usize>>,
}

impl fmt::Debug for SimFlash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFlash")
            .field("preset", &self.preset.name)
            .field("geometry", &self.geo)
            .field("options", &self.options)
            .field("powered", &self.powered)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A read's output buffers, addressed by raw-page byte position.
struct View<'a> {
    /// Raw-page position of `data[0]` (NOR: device byte address of `data[0]`).
    data_at: usize,
    data: &'a mut [u8],
    /// Raw-page position of `oob[0]`.
    oob_at: usize,
    oob: &'a mut [u8],
}

impl View<'_> {
    /// Flips the bit at raw bit position `bit` if it lies in a returned range.
    fn flip(&mut self, bit: usize) {
        let byte = bit / 8;
        let m = 1u8 << (bit % 8);
        if byte >= self.data_at && byte < self.data_at + self.data.len() {
            self.data[byte - self.data_at] ^= m;
        } else if byte >= self.oob_at && byte < self.oob_at + self.oob.len() {
            self.oob[byte - self.oob_at] ^= m;
        }
    }

    /// Raw byte ranges returned.
    fn ranges(&self) -> [(usize, usize); 2] {
        [
            (self.data_at, self.data.len()),
            (self.oob_at, self.oob.len()),
        ]
    }
}

impl SimFlash {
    /// A fresh device: all erased, no bad blocks, no faults (seed 0).
    pub fn new(preset: Preset) -> Result<SimFlash, SimError> {
        SimFlash::with_options(preset, SimOptions::default())
    }

    /// A fresh, erased device with the given fault options. Factory bad blocks are chosen from
    /// the seed and marked the way NAND marks them.
    pub fn with_options(preset: Preset, options: SimOptions) -> Result<SimFlash, SimError> {
        let mut sim = SimFlash::blank(preset, options)?;
        let g = sim.geo;
        let mut pick = Rng::new(options.seed ^ 0xFAC7_0B4D_B10C_5EED);
        let mut bad = BTreeSet::new();
        while (bad.len() as u32) < options.factory_bad_blocks {
            bad.insert(1 + pick.below(g.blocks as u64 - 1) as u32);
        }
        for &b in &bad {
            sim.write_marker(b);
        }
        sim.factory_bad = bad;
        Ok(sim)
    }

    /// An erased device with no factory bad blocks chosen yet.
    pub(crate) fn blank(preset: Preset, options: SimOptions) -> Result<SimFlash, SimError> {
        let g = preset.geometry;
        check_geometry(&g)
            .map_err(|why| SimError::Options(format!("preset {}: {why}", preset.name)))?;
        options.validate(&g)?;
        let pages = g.total_pages() as usize;
        let raw = (g.page_size + g.oob_size) as usize;
        Ok(SimFlash {
            preset,
            geo: g,
            options,
            rng: Rng::new(options.seed ^ 0x0DFF_5000_0000_0001),
            pages: vec![None; pages],
            prog_count: vec![0; pages],
            highest: vec![0; g.blocks as usize],
            erase_counts: vec![0; g.blocks as usize],
            factory_bad: BTreeSet::new(),
            failing: BTreeSet::new(),
            fail_next_program: BTreeSet::new(),
            fail_next_program_page: BTreeSet::new(),
            fail_next_erase: BTreeSet::new(),
            unstable: BTreeMap::new(),
            injected: BTreeMap::new(),
            stats: Stats::default(),
            ops: 0,
            cut_at: None,
            powered: true,
            erased: vec![0xFF; raw].into_boxed_slice(),
            ecc_slots: ecc_slots(&g),
        })
    }

    // ----- inspection -------------------------------------------------------------------------

    /// The preset this device was made from (with its partition cut and erase size).
    pub fn preset(&self) -> &Preset {
        &self.preset
    }

    /// The fault options.
    pub fn options(&self) -> &SimOptions {
        &self.options
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Sets all counters back to zero (erase counters are not counters of this kind and stay).
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }

    /// Erase operations per block since the device was made (failed and cut erases included).
    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_counts
    }

    /// Factory bad blocks, ascending.
    pub fn factory_bad_blocks(&self) -> Vec<u32> {
        self.factory_bad.iter().copied().collect()
    }

    /// Grown bad blocks (every program and erase of them fails), ascending.
    pub fn grown_bad_blocks(&self) -> Vec<u32> {
        self.failing.iter().copied().collect()
    }

    /// Pages left unstable by a power cut or failure, ascending.
    pub fn unstable_pages(&self) -> Vec<u32> {
        self.unstable.keys().copied().collect()
    }

    /// The stored bytes of `page` without any read fault: the data area then the whole OOB area
    /// (bad-block marker, free bytes, ECC bytes). Charges nothing.
    pub fn raw_page(&self, page: u32) -> Result<Vec<u8>, FlashError> {
        if page >= self.geo.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        Ok(self.page_raw(page).to_vec())
    }

    /// Program operations on `page` since its block was last erased.
    pub fn program_count(&self, page: u32) -> Result<u32, FlashError> {
        self.prog_count
            .get(page as usize)
            .map(|&c| c as u32)
            .ok_or(FlashError::OutOfRange)
    }

    /// Pages that hold memory (have been programmed since their last erase, or were loaded so).
    pub fn allocated_pages(&self) -> usize {
        self.pages.iter().filter(|p| p.is_some()).count()
    }

    /// Program and erase operations so far (what [`SimFlash::cut_power_after`] counts). Bad-block
    /// marking counts as one program per marked page (two per block).
    pub fn program_erase_ops(&self) -> u64 {
        self.ops
    }

    /// Whether the device has power.
    pub fn is_powered(&self) -> bool {
        self.powered
    }

    // ----- fault control ----------------------------------------------------------------------

    /// Arms a power cut at the `n`-th program or erase operation from now (`1`: the next one).
    /// The cut operation is done partially and returns [`FlashError::PowerLoss`]; after it every
    /// operation returns `PowerLoss` until [`SimFlash::power_up`]. `n == 0` disarms.
    pub fn cut_power_after(&mut self, n: u64) {
        self.cut_at = if n == 0 {
            None
        } else {
            Some(self.ops.saturating_add(n))
        };
    }

    /// Disarms a pending power cut.
    pub fn cancel_power_cut(&mut self) {
        self.cut_at = None;
    }

    /// Cuts power now, between operations (nothing is left partial).
    pub fn power_off(&mut self) {
        if self.powered {
            self.powered = false;
            self.stats.power_cuts += 1;
        }
    }

    /// Restores power. Unstable pages stay unstable until their block is erased.
    pub fn power_up(&mut self) {
        self.powered = true;
    }

    /// Sets the transient bit-flip probability per bit read.
    pub fn set_bitflip_rate(&mut self, rate: f64) -> Result<(), SimError> {
        check_rate("bitflip_rate", rate)?;
        self.options.bitflip_rate = rate;
        Ok(())
    }

    /// Sets the probability that a program fails (the block goes bad).
    pub fn set_program_fail_rate(&mut self, rate: f64) -> Result<(), SimError> {
        check_rate("program_fail_rate", rate)?;
        self.options.program_fail_rate = rate;
        Ok(())
    }

    /// Sets the probability that an erase fails (the block goes bad).
    pub fn set_erase_fail_rate(&mut self, rate: f64) -> Result<(), SimError> {
        check_rate("erase_fail_rate", rate)?;
        self.options.erase_fail_rate = rate;
        Ok(())
    }

    /// Turns wear-out (erases beyond the endurance fail) on or off.
    pub fn set_wear_out(&mut self, on: bool) {
        self.options.wear_out = on;
    }

    /// Flips `nbits` distinct bits of `page` persistently (until its block is erased).
    ///
    /// NAND: `nbits` flips land in *every* ECC codeword of the page (each 512 B step and the free
    /// OOB bytes), so any read of the page sees them and reports them per the ECC rule:
    /// up to the ECC strength `Corrected(n)` with correct data, beyond it `Uncorrectable` with
    /// the flips in the data. NOR (no ECC): `nbits` flips in the page, returned silently.
    pub fn inject_bitflips(&mut self, page: u32, nbits: u32) -> Result<(), FlashError> {
        if page >= self.geo.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        let words = self.codewords_of_page();
        if words.iter().any(|&(_, len)| nbits as usize > len * 8) {
            return Err(FlashError::OutOfRange);
        }
        for (start, len) in words {
            self.flip_bits_in_codeword(page, start, len, nbits);
        }
        Ok(())
    }

    /// Persistent flipped bits injected into `page` (all codewords together; 0 after its block
    /// was erased).
    pub fn injected_bitflips(&self, page: u32) -> usize {
        self.injected.get(&page).map_or(0, Vec::len)
    }

    /// Takes back the bit flips injected into `page`: a weak page that reads right again, as
    /// a page a power cut left half programmed may read uncorrectable at one mount and clean
    /// at the next (tests of what one mount decides binding the mounts after it).
    pub fn clear_injected(&mut self, page: u32) {
        self.injected.remove(&page);
    }

    /// NAND: makes the ECC codeword of `page` that holds data byte `byte` uncorrectable (one
    /// more flipped bit than the ECC strength, until the block is erased): a read of the page
    /// that covers that byte fails, one that stays in other codewords reads right. (The end
    /// of a page damaged past the node a read wants.)
    pub fn inject_uncorrectable_at(&mut self, page: u32, byte: u32) -> Result<(), FlashError> {
        if page >= self.geo.total_pages()
            || byte >= self.geo.page_size
            || self.geo.kind != FlashKind::Nand
        {
            return Err(FlashError::OutOfRange);
        }
        let step = self.ecc_step();
        let start = byte as usize / step * step;
        let n = self.geo.ecc_strength + 1;
        self.flip_bits_in_codeword(page, start, step, n);
        Ok(())
    }

    /// Makes every read of `page` uncorrectable (NAND: one more flipped bit than the ECC
    /// strength in every codeword) until its block is erased. NOR has no ECC: one bit flips
    /// silently.
    pub fn inject_uncorrectable(&mut self, page: u32) -> Result<(), FlashError> {
        let n = self.geo.ecc_strength + 1;
        self.inject_bitflips(page, n)
    }

    /// The next program of any page in `block` fails; the block is bad from then on.
    pub fn fail_next_program_in(&mut self, block: u32) -> Result<(), FlashError> {
        self.check_block(block)?;
        self.fail_next_program.insert(block);
        Ok(())
    }

    /// The next program of `page` fails (earlier pages of its block program normally); its
    /// block is bad from then on.
    pub fn fail_next_program_of(&mut self, page: u32) -> Result<(), FlashError> {
        if page >= self.geo.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        self.fail_next_program_page.insert(page);
        Ok(())
    }

    /// The next erase of `block` fails; the block is bad from then on.
    pub fn fail_next_erase_of(&mut self, block: u32) -> Result<(), FlashError> {
        self.check_block(block)?;
        self.fail_next_erase.insert(block);
        Ok(())
    }

    /// Makes `block` a grown bad block now: every later program and erase of it fails.
    pub fn fail_block(&mut self, block: u32) -> Result<(), FlashError> {
        self.check_block(block)?;
        if !self.factory_bad.contains(&block) {
            self.failing.insert(block);
        }
        Ok(())
    }

    // ----- internals --------------------------------------------------------------------------

    /// Adds `n` persistent flipped bits at distinct random positions of the codeword of
    /// `page` that spans bytes `start..start + len` (fewer if the codeword has no room left).
    fn flip_bits_in_codeword(&mut self, page: u32, start: usize, len: usize, n: u32) {
        let list = self.injected.entry(page).or_default();
        let bits = (len * 8) as u64;
        let mut added = 0;
        let mut tries = 0u64;
        while added < n && tries < bits * 64 {
            tries += 1;
            let pos = (start * 8) as u32 + self.rng.below(bits) as u32;
            if !list.contains(&pos) {
                list.push(pos);
                added += 1;
            }
        }
        list.sort_unstable();
    }

    fn check_block(&self, block: u32) -> Result<(), FlashError> {
        if block >= self.geo.blocks {
            Err(FlashError::OutOfRange)
        } else {
            Ok(())
        }
    }

    fn raw_size(&self) -> usize {
        (self.geo.page_size + self.geo.oob_size) as usize
    }

    pub(crate) fn page_raw(&self, page: u32) -> &[u8] {
        match self.pages.get(page as usize) {
            Some(Some(p)) => p,
            _ => &self.erased,
        }
    }

    fn page_mut(&mut self, page: u32) -> &mut [u8] {
        let raw = self.raw_size();
        self.pages[page as usize].get_or_insert_with(|| vec![0xFF; raw].into_boxed_slice())
    }

    /// Byte position of the first free OOB byte in the raw page.
    fn oob_free_at(&self) -> usize {
        (self.geo.page_size + self.geo.oob_free_offset) as usize
    }

    /// Writes the bad-block marker (bytes 0-1 of the OOB of pages 0 and 1) without any checks.
    pub(crate) fn write_marker(&mut self, block: u32) {
        let first = self.geo.first_page(block);
        let at = self.geo.page_size as usize;
        for p in first..first + 2 {
            let raw = self.page_mut(p);
            raw[at] = 0;
            raw[at + 1] = 0;
        }
    }

    /// Whether `block` carries a bad-block marker (no charge).
    pub(crate) fn has_marker(&self, block: u32) -> bool {
        let first = self.geo.first_page(block);
        let at = self.geo.page_size as usize;
        (first..first + 2).any(|p| {
            let raw = self.page_raw(p);
            raw[at] != 0xFF || raw[at + 1] != 0xFF
        })
    }

    /// ECC codewords of a whole page as (raw start, length): NAND data steps and the free OOB;
    /// NOR: the whole page.
    fn codewords_of_page(&self) -> Vec<(usize, usize)> {
        let g = &self.geo;
        match g.kind {
            FlashKind::Nor => vec![(0, g.page_size as usize)],
            FlashKind::Nand => {
                let step = self.ecc_step();
                let mut v: Vec<(usize, usize)> = (0..g.page_size as usize / step)
                    .map(|s| (s * step, step))
                    .collect();
                if g.oob_free_len > 0 {
                    v.push((self.oob_free_at(), g.oob_free_len as usize));
                }
                v
            }
        }
    }

    /// Bytes a NAND operation moves over the bus: the data bytes, plus the whole OOB area when
    /// the operation touches the OOB at all (controllers move the spare area as one piece, so a
    /// full-page operation costs exactly the preset's full-page time).
    fn nand_transfer_bytes(&self, data: usize, oob: usize) -> u64 {
        let oob = if oob == 0 {
            0
        } else {
            self.geo.oob_size as usize
        };
        (data + oob) as u64
    }

    fn ecc_step(&self) -> usize {
        let s = self.geo.ecc_step as usize;
        if s == 0 || s > self.geo.page_size as usize {
            self.geo.page_size as usize
        } else {
            s
        }
    }

    /// Counts one program or erase operation; true if power is cut at this one.
    fn start_op(&mut self) -> bool {
        self.ops += 1;
        if self.cut_at == Some(self.ops) {
            self.cut_at = None;
            true
        } else {
            false
        }
    }

    fn lose_power(&mut self) -> FlashError {
        self.powered = false;
        self.stats.power_cuts += 1;
        FlashError::PowerLoss
    }

    fn weak_mask(&mut self, page: u32) -> &mut [u8] {
        let raw = self.raw_size();
        self.unstable
            .entry(page)
            .or_insert_with(|| vec![0u8; raw].into_boxed_slice())
    }

    /// Programs `segments` (raw position, bytes) into `page` partially, as an interrupted or
    /// failed program leaves it: each byte is fully programmed, partly programmed (a random
    /// subset of the bits it should clear) or untouched. Marks the page unstable.
    fn partial_program(&mut self, page: u32, segments: &[(usize, &[u8])]) {
        let progress = self.rng.unit();
        let mut weak = vec![0u8; self.raw_size()];
        let mut raw = self.page_raw(page).to_vec();
        for &(at, bytes) in segments {
            for (i, &v) in bytes.iter().enumerate() {
                let old = raw[at + i];
                let target = old & v;
                let to_clear = old & !target;
                if to_clear == 0 {
                    continue;
                }
                let r = self.rng.unit();
                if r < progress {
                    raw[at + i] = target;
                } else if r < progress + (1.0 - progress) / 2.0 {
                    raw[at + i] = old & !(self.rng.byte() & to_clear);
                    weak[at + i] |= to_clear;
                }
            }
        }
        self.page_mut(page).copy_from_slice(&raw);
        let mask = self.weak_mask(page);
        for (m, w) in mask.iter_mut().zip(weak) {
            *m |= w;
        }
    }

    /// An interrupted or failed program of an upper page of paired-page MLC leaves the cells of
    /// its word line between levels: the lower page sharing them (which may hold data written
    /// long before) reads back damaged. Every programmed byte of the lower page has a one in
    /// four chance of a random subset of its bits turned over; the page is unstable (its ECC
    /// usually gives up, and retries do not bring the data back). Nothing happens on devices
    /// without paired pages, to lower pages, or when the lower page is erased.
    fn damage_paired_lower(&mut self, page: u32) {
        let g = self.geo;
        let block = g.block_of(page);
        let first = g.first_page(block);
        let Some(lower) = g.pairing.lower_of(page - first) else {
            return;
        };
        let lower = first + lower;
        if self.pages[lower as usize].is_none() {
            return;
        }
        let mut raw = self.page_raw(lower).to_vec();
        let mut weak = vec![0u8; raw.len()];
        // The bad-block marker is not part of the word line's data.
        let marker = g.page_size as usize..g.page_size as usize + 2;
        for (i, b) in raw.iter_mut().enumerate() {
            if marker.contains(&i) || *b == 0xFF || self.rng.below(4) != 0 {
                continue;
            }
            let m = self.rng.byte() | 1;
            *b ^= m;
            weak[i] = m;
        }
        self.page_mut(lower).copy_from_slice(&raw);
        let mask = self.weak_mask(lower);
        for (m, w) in mask.iter_mut().zip(weak) {
            *m |= w;
        }
        self.stats.paired_page_damage += 1;
    }

    /// Leaves `block` as an interrupted or failed erase does: each page erased, untouched, or
    /// with a random subset of its 0 bits set back to 1; all pages unstable. Bad-block markers
    /// are left as they are.
    fn partial_erase(&mut self, block: u32) {
        let g = self.geo;
        let first = g.first_page(block);
        let marker_at = g.page_size as usize;
        let nand = g.kind == FlashKind::Nand;
        for p in first..first + g.pages_per_block {
            let choice = self.rng.below(3);
            let mut weak = vec![0u8; self.raw_size()];
            match choice {
                0 => {
                    let marker = nand.then(|| {
                        let r = self.page_raw(p);
                        [r[marker_at], r[marker_at + 1]]
                    });
                    self.pages[p as usize] = None;
                    self.prog_count[p as usize] = 0;
                    self.injected.remove(&p);
                    if let Some(m) = marker.filter(|m| m != &[0xFF, 0xFF]) {
                        let raw = self.page_mut(p);
                        raw[marker_at] = m[0];
                        raw[marker_at + 1] = m[1];
                    }
                }
                1 => {}
                _ => {
                    if self.pages[p as usize].is_some() {
                        let mut raw = self.page_raw(p).to_vec();
                        for (i, b) in raw.iter_mut().enumerate() {
                            if nand && (i == marker_at || i == marker_at + 1) {
                                continue;
                            }
                            let zeros = !*b;
                            if zeros != 0 {
                                *b |= self.rng.byte() & zeros;
                                weak[i] = zeros;
                            }
                        }
                        self.page_mut(p).copy_from_slice(&raw);
                    }
                }
            }
            let mask = self.weak_mask(p);
            for (m, w) in mask.iter_mut().zip(weak) {
                *m |= w;
            }
        }
        self.recompute_highest_of(block);
    }

    pub(crate) fn recompute_highest_of(&mut self, block: u32) {
        let first = self.geo.first_page(block) as usize;
        let ppb = self.geo.pages_per_block as usize;
        self.highest[block as usize] = (0..ppb)
            .rev()
            .find(|&i| self.prog_count[first + i] > 0)
            .map_or(0, |i| i as u32 + 1);
    }

    fn remove_block_state(&mut self, block: u32) {
        let first = self.geo.first_page(block);
        let end = first + self.geo.pages_per_block;
        let keys: Vec<u32> = self.unstable.range(first..end).map(|(k, _)| *k).collect();
        for k in keys {
            self.unstable.remove(&k);
        }
        let keys: Vec<u32> = self.injected.range(first..end).map(|(k, _)| *k).collect();
        for k in keys {
            self.injected.remove(&k);
        }
    }

    /// Writes ECC bytes for every ECC step that `[offset, offset+len)` covers: a checksum of the
    /// step's data (deterministic; nothing reads it back).
    fn write_ecc(&mut self, page: u32, offset: usize, len: usize) {
        if self.ecc_slots.is_empty() || len == 0 {
            return;
        }
        let step = self.ecc_step();
        let ps = self.geo.page_size as usize;
        let first = offset.div_ceil(step);
        let last = (offset + len) / step;
        let slots = std::mem::take(&mut self.ecc_slots);
        let raw = self.page_mut(page);
        for (s, slot) in slots.iter().enumerate().take(last).skip(first) {
            let h = fnv1a(&raw[s * step..(s + 1) * step]);
            for (i, &pos) in slot.iter().enumerate() {
                let word = mix(h.wrapping_add((i / 8) as u64));
                raw[ps + pos] &= (word >> (8 * (i % 8))) as u8;
            }
        }
        self.ecc_slots = slots;
    }

    // ----- operations -------------------------------------------------------------------------

    fn read_nand(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        let g = self.geo;
        if page >= g.total_pages()
            || offset as u64 + data.len() as u64 > g.page_size as u64
            || oob.len() as u64 > g.oob_free_len as u64
        {
            return Err(FlashError::OutOfRange);
        }
        let bytes = self.nand_transfer_bytes(data.len(), oob.len());
        self.stats
            .charge_read(bytes, self.preset.timing.read_cost_ps(bytes));
        let off = offset as usize;
        let oob_at = self.oob_free_at();
        {
            let raw = self.page_raw(page);
            data.copy_from_slice(&raw[off..off + data.len()]);
            oob.copy_from_slice(&raw[oob_at..oob_at + oob.len()]);
        }
        let mut view = View {
            data_at: off,
            data,
            oob_at,
            oob,
        };
        let mut status = EccStatus::Clean;

        // An unstable page: sometimes the ECC gives up, otherwise it "succeeds" on data that
        // is partial and has a few more weak bits wrong.
        if let Some(mask) = self.unstable.get(&page) {
            let weak = weak_bits(mask, &view.ranges());
            if self.rng.chance(UNSTABLE_UNCORRECTABLE_RATE) {
                for &b in &weak {
                    if self.rng.below(2) == 1 {
                        view.flip(b);
                    }
                }
                status = EccStatus::Uncorrectable;
            } else if !weak.is_empty() {
                for _ in 0..self.rng.below(3) {
                    let b = weak[self.rng.below(weak.len() as u64) as usize];
                    view.flip(b);
                }
            }
        }

        // ECC codewords touched by this read.
        let step = self.ecc_step();
        let mut words: Vec<(usize, usize)> = Vec::new();
        if !view.data.is_empty() {
            let first = off / step;
            let last = (off + view.data.len() - 1) / step;
            words.extend((first..=last).map(|s| (s * step, step)));
        }
        if !view.oob.is_empty() {
            words.push((oob_at, g.oob_free_len as usize));
        }
        let strength = g.ecc_strength as u64;
        let rate = self.options.bitflip_rate;
        let injected = self.injected.get(&page);
        for (start, len) in words {
            let bits = (len * 8) as u64;
            let n_rand = self.rng.binomial(bits, rate);
            let lo = (start * 8) as u32;
            let hi = ((start + len) * 8) as u32;
            let inj: Vec<u32> = injected
                .map(|v| v.iter().copied().filter(|&b| b >= lo && b < hi).collect())
                .unwrap_or_default();
            let n = n_rand + inj.len() as u64;
            if n == 0 {
                continue;
            }
            if strength > 0 && n <= strength {
                status = status.worst(EccStatus::Corrected(n as u32));
            } else {
                for b in inj {
                    view.flip(b as usize);
                }
                for _ in 0..n_rand {
                    let b = start * 8 + self.rng.below(bits) as usize;
                    view.flip(b);
                }
                if strength > 0 {
                    status = EccStatus::Uncorrectable;
                }
            }
        }
        match status {
            EccStatus::Clean => {}
            EccStatus::Corrected(_) => self.stats.corrected_reads += 1,
            EccStatus::Uncorrectable => self.stats.uncorrectable_reads += 1,
        }
        Ok(status)
    }

    fn read_nor(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        let g = self.geo;
        let ps = g.page_size as u64;
        let start = page as u64 * ps + offset as u64;
        if !oob.is_empty() || page >= g.total_pages() || start + data.len() as u64 > g.capacity() {
            return Err(FlashError::OutOfRange);
        }
        let bytes = data.len() as u64;
        self.stats
            .charge_read(bytes, self.preset.timing.read_cost_ps(bytes));
        if data.is_empty() {
            return Ok(EccStatus::Clean);
        }
        let end = start + bytes;
        let (first, last) = ((start / ps) as u32, ((end - 1) / ps) as u32);
        for p in first..=last {
            let pbase = p as u64 * ps;
            let lo = start.max(pbase);
            let hi = end.min(pbase + ps);
            let src = &self.page_raw(p)[(lo - pbase) as usize..(hi - pbase) as usize];
            data[(lo - start) as usize..(hi - start) as usize].copy_from_slice(src);
        }
        // Unstable bits read randomly; injected flips are silent (no ECC).
        let mut oob_none: [u8; 0] = [];
        let mut view = View {
            data_at: start as usize,
            data,
            oob_at: usize::MAX,
            oob: &mut oob_none,
        };
        let from = self.unstable.range(first..=last);
        let mut weak_positions = Vec::new();
        for (&p, mask) in from {
            let pbase = p as usize * ps as usize;
            for b in weak_bits(mask, &[(0, ps as usize)]) {
                let abs = pbase * 8 + b;
                if abs / 8 >= start as usize && abs / 8 < end as usize {
                    weak_positions.push(abs);
                }
            }
        }
        for b in weak_positions {
            if self.rng.below(2) == 1 {
                view.flip(b);
            }
        }
        for (&p, bits) in self.injected.range(first..=last) {
            for &b in bits {
                view.flip(p as usize * ps as usize * 8 + b as usize);
            }
        }
        let n = self.rng.binomial(bytes * 8, self.options.bitflip_rate);
        for _ in 0..n {
            let b = start as usize * 8 + self.rng.below(bytes * 8) as usize;
            view.flip(b);
        }
        Ok(EccStatus::Clean)
    }

    fn program_nand(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let g = self.geo;
        if page >= g.total_pages()
            || offset as u64 + data.len() as u64 > g.page_size as u64
            || oob.len() as u64 > g.oob_free_len as u64
        {
            return Err(FlashError::OutOfRange);
        }
        if data.is_empty() && oob.is_empty() {
            return Ok(());
        }
        if !data.is_empty()
            && (offset % g.program_unit != 0 || data.len() as u32 % g.program_unit != 0)
        {
            return Err(FlashError::Misaligned);
        }
        if g.nop > 0 && self.prog_count[page as usize] as u32 >= g.nop {
            return Err(FlashError::NopExceeded);
        }
        let block = g.block_of(page);
        let index = page - g.first_page(block);
        if g.in_order && self.highest[block as usize] > index + 1 {
            return Err(FlashError::OutOfOrder);
        }
        let off = offset as usize;
        let oob_at = self.oob_free_at();
        {
            let raw = self.page_raw(page);
            let erased = |r: &[u8]| r.iter().all(|&b| b == 0xFF);
            if !erased(&raw[off..off + data.len()]) || !erased(&raw[oob_at..oob_at + oob.len()]) {
                return Err(FlashError::NotErased);
            }
        }
        let bytes = self.nand_transfer_bytes(data.len(), oob.len());
        let cut = self.start_op();
        self.stats
            .charge_program(bytes, self.preset.timing.program_cost_ps(bytes));
        let c = &mut self.prog_count[page as usize];
        *c = c.saturating_add(1);
        let h = &mut self.highest[block as usize];
        *h = (*h).max(index + 1);
        let segments = [(off, data), (oob_at, oob)];
        if cut {
            self.partial_program(page, &segments);
            self.damage_paired_lower(page);
            return Err(self.lose_power());
        }
        if self.program_fails(block, page) {
            self.partial_program(page, &segments);
            self.damage_paired_lower(page);
            return Err(FlashError::ProgramFailed);
        }
        let raw = self.page_mut(page);
        for (at, src) in segments {
            for (d, s) in raw[at..at + src.len()].iter_mut().zip(src) {
                *d &= *s;
            }
        }
        self.write_ecc(page, off, data.len());
        Ok(())
    }

    fn program_nor(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let g = self.geo;
        if !oob.is_empty() || page >= g.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        if offset as u64 + data.len() as u64 > g.page_size as u64 {
            return Err(FlashError::CrossesPage);
        }
        if data.is_empty() {
            return Ok(());
        }
        if offset % g.program_unit != 0 || data.len() as u32 % g.program_unit != 0 {
            return Err(FlashError::Misaligned);
        }
        let off = offset as usize;
        if self.page_raw(page)[off..off + data.len()]
            .iter()
            .zip(data)
            .any(|(&old, &new)| new & !old != 0)
        {
            return Err(FlashError::NotErased);
        }
        let bytes = data.len() as u64;
        let cut = self.start_op();
        self.stats
            .charge_program(bytes, self.preset.timing.program_cost_ps(bytes));
        let c = &mut self.prog_count[page as usize];
        *c = c.saturating_add(1);
        let block = g.block_of(page);
        let segments = [(off, data)];
        if cut {
            self.partial_program(page, &segments);
            return Err(self.lose_power());
        }
        if self.program_fails(block, page) {
            self.partial_program(page, &segments);
            return Err(FlashError::ProgramFailed);
        }
        let raw = self.page_mut(page);
        for (d, s) in raw[off..off + data.len()].iter_mut().zip(data) {
            *d &= *s;
        }
        Ok(())
    }

    /// Decides whether a program in `block` fails, and makes the block bad if so.
    fn program_fails(&mut self, block: u32, page: u32) -> bool {
        let fails = self.factory_bad.contains(&block)
            || self.failing.contains(&block)
            || self.fail_next_program.remove(&block)
            || self.fail_next_program_page.remove(&page)
            || self.rng.chance(self.options.program_fail_rate);
        if fails {
            self.stats.program_failures += 1;
            if !self.factory_bad.contains(&block) {
                self.failing.insert(block);
            }
        }
        fails
    }

    fn erase_block(&mut self, block: u32) -> Result<(), FlashError> {
        self.check_block(block)?;
        let cut = self.start_op();
        self.stats.charge_erase(self.preset.timing.erase_ps);
        let count = &mut self.erase_counts[block as usize];
        *count = count.saturating_add(1);
        let count = *count;
        if cut {
            self.partial_erase(block);
            return Err(self.lose_power());
        }
        if self.factory_bad.contains(&block) {
            self.stats.erase_failures += 1;
            return Err(FlashError::EraseFailed);
        }
        let fails = self.failing.contains(&block)
            || self.fail_next_erase.remove(&block)
            || self.rng.chance(self.options.erase_fail_rate)
            || (self.options.wear_out && count > self.preset.endurance);
        if fails {
            self.stats.erase_failures += 1;
            self.failing.insert(block);
            self.partial_erase(block);
            return Err(FlashError::EraseFailed);
        }
        let first = self.geo.first_page(block) as usize;
        let ppb = self.geo.pages_per_block as usize;
        for p in first..first + ppb {
            self.pages[p] = None;
            self.prog_count[p] = 0;
        }
        self.highest[block as usize] = 0;
        self.remove_block_state(block);
        Ok(())
    }

    fn is_bad_block(&mut self, block: u32) -> Result<bool, FlashError> {
        self.check_block(block)?;
        if self.geo.kind == FlashKind::Nor {
            return Ok(false);
        }
        let first = self.geo.first_page(block);
        let at = self.geo.page_size as usize;
        let bytes = self.nand_transfer_bytes(0, 2);
        let cost = self.preset.timing.read_cost_ps(bytes);
        for p in first..first + 2 {
            self.stats.charge_read(bytes, cost);
            let raw = self.page_raw(p);
            if raw[at] != 0xFF || raw[at + 1] != 0xFF {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn mark_bad_block(&mut self, block: u32) -> Result<(), FlashError> {
        self.check_block(block)?;
        if self.geo.kind == FlashKind::Nor {
            return Err(FlashError::Device);
        }
        let first = self.geo.first_page(block);
        let at = self.geo.page_size as usize;
        let bytes = self.nand_transfer_bytes(0, 2);
        let cost = self.preset.timing.program_cost_ps(bytes);
        for p in first..first + 2 {
            let cut = self.start_op();
            self.stats.charge_program(bytes, cost);
            if cut {
                let (a, b) = (self.rng.byte(), self.rng.byte());
                let raw = self.page_mut(p);
                raw[at] &= a;
                raw[at + 1] &= b;
                return Err(self.lose_power());
            }
            let raw = self.page_mut(p);
            raw[at] = 0;
            raw[at + 1] = 0;
        }
        Ok(())
    }

    fn powered(&self) -> Result<(), FlashError> {
        if self.powered {
            Ok(())
        } else {
            Err(FlashError::PowerLoss)
        }
    }
}

impl Flash for SimFlash {
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
        self.powered()?;
        match self.geo.kind {
            FlashKind::Nand => self.read_nand(page, offset, data, oob),
            FlashKind::Nor => self.read_nor(page, offset, data, oob),
        }
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        self.powered()?;
        match self.geo.kind {
            FlashKind::Nand => self.program_nand(page, offset, data, oob),
            FlashKind::Nor => self.program_nor(page, offset, data, oob),
        }
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        self.powered()?;
        self.erase_block(block)
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        self.powered()?;
        self.is_bad_block(block)
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        self.powered()?;
        self.mark_bad_block(block)
    }
}

/// Raw bit positions set in `mask` within the byte ranges `ranges` (start, len).
fn weak_bits(mask: &[u8], ranges: &[(usize, usize)]) -> Vec<usize> {
    let mut out = Vec::new();
    for &(start, len) in ranges {
        for (i, &m) in mask.iter().enumerate().skip(start).take(len) {
            if m != 0 {
                out.extend((0..8).filter(|b| m & (1 << b) != 0).map(|b| i * 8 + b));
            }
        }
    }
    out
}

/// Per ECC step, the OOB byte indices of its ECC bytes: the OOB bytes that are neither the
/// bad-block marker (0-1) nor free, shared out evenly between the steps.
fn ecc_slots(g: &Geometry) -> Vec<Vec<usize>> {
    if g.kind != FlashKind::Nand || g.ecc_strength == 0 || g.ecc_step == 0 {
        return Vec::new();
    }
    let free = g.oob_free_offset as usize..(g.oob_free_offset + g.oob_free_len) as usize;
    let ecc: Vec<usize> = (2..g.oob_size as usize)
        .filter(|i| !free.contains(i))
        .collect();
    let steps = (g.page_size / g.ecc_step.min(g.page_size)) as usize;
    let per = ecc.len() / steps.max(1);
    if per == 0 {
        return Vec::new();
    }
    ecc.chunks(per).take(steps).map(|c| c.to_vec()).collect()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    z ^ (z >> 33)
}
