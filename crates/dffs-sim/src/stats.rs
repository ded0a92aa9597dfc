//! Operation counters and simulated device time.
//!
//! Owns the [`Stats`] snapshot type and its arithmetic. It must never measure host time: every
//! number here is simulated and deterministic.

use serde::{Deserialize, Serialize};

/// A snapshot of a simulated device's counters. Times are in picoseconds of simulated device time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stats {
    /// Read operations (NAND: one per page read, including bad-block marker checks; NOR: one per
    /// access).
    pub reads: u64,
    /// Program operations (including failed and power-cut ones, and bad-block marker writes).
    pub programs: u64,
    /// Erase operations (including failed and power-cut ones).
    pub erases: u64,
    /// Bytes transferred by reads (data, plus the whole OOB area for NAND reads that read OOB).
    pub bytes_read: u64,
    /// Bytes transferred by programs (data, plus the whole OOB area for NAND programs with OOB).
    pub bytes_programmed: u64,
    /// Simulated time spent reading.
    pub read_ps: u64,
    /// Simulated time spent programming.
    pub program_ps: u64,
    /// Simulated time spent erasing.
    pub erase_ps: u64,
    /// Total simulated device time (`read_ps + program_ps + erase_ps`).
    pub sim_ps: u64,
    /// Reads whose ECC status was `Corrected`.
    pub corrected_reads: u64,
    /// Reads whose ECC status was `Uncorrectable`.
    pub uncorrectable_reads: u64,
    /// Programs that returned `ProgramFailed`.
    pub program_failures: u64,
    /// Erases that returned `EraseFailed`.
    pub erase_failures: u64,
    /// Power cuts that happened.
    pub power_cuts: u64,
    /// Lower pages of paired-page MLC damaged by a cut or failed program of their upper page.
    #[serde(default)]
    pub paired_page_damage: u64,
}

impl Stats {
    /// What happened between `earlier` and `self` (field-wise difference, never negative).
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            reads: self.reads.saturating_sub(earlier.reads),
            programs: self.programs.saturating_sub(earlier.programs),
            erases: self.erases.saturating_sub(earlier.erases),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_programmed: self
                .bytes_programmed
                .saturating_sub(earlier.bytes_programmed),
            read_ps: self.read_ps.saturating_sub(earlier.read_ps),
            program_ps: self.program_ps.saturating_sub(earlier.program_ps),
            erase_ps: self.erase_ps.saturating_sub(earlier.erase_ps),
            sim_ps: self.sim_ps.saturating_sub(earlier.sim_ps),
            corrected_reads: self.corrected_reads.saturating_sub(earlier.corrected_reads),
            uncorrectable_reads: self
                .uncorrectable_reads
                .saturating_sub(earlier.uncorrectable_reads),
            program_failures: self
                .program_failures
                .saturating_sub(earlier.program_failures),
            erase_failures: self.erase_failures.saturating_sub(earlier.erase_failures),
            power_cuts: self.power_cuts.saturating_sub(earlier.power_cuts),
            paired_page_damage: self
                .paired_page_damage
                .saturating_sub(earlier.paired_page_damage),
        }
    }

    /// Total simulated time in microseconds.
    pub fn sim_us(&self) -> f64 {
        ps_to_us(self.sim_ps)
    }

    /// Total simulated time in seconds.
    pub fn sim_secs(&self) -> f64 {
        self.sim_ps as f64 / 1e12
    }

    /// Simulated read time in microseconds.
    pub fn read_us(&self) -> f64 {
        ps_to_us(self.read_ps)
    }

    /// Simulated program time in microseconds.
    pub fn program_us(&self) -> f64 {
        ps_to_us(self.program_ps)
    }

    /// Simulated erase time in microseconds.
    pub fn erase_us(&self) -> f64 {
        ps_to_us(self.erase_ps)
    }

    // Saturating: timing comes from presets or sidecars and must not be able to overflow.
    pub(crate) fn charge_read(&mut self, bytes: u64, ps: u64) {
        self.reads = self.reads.saturating_add(1);
        self.bytes_read = self.bytes_read.saturating_add(bytes);
        self.read_ps = self.read_ps.saturating_add(ps);
        self.sim_ps = self.sim_ps.saturating_add(ps);
    }

    pub(crate) fn charge_program(&mut self, bytes: u64, ps: u64) {
        self.programs = self.programs.saturating_add(1);
        self.bytes_programmed = self.bytes_programmed.saturating_add(bytes);
        self.program_ps = self.program_ps.saturating_add(ps);
        self.sim_ps = self.sim_ps.saturating_add(ps);
    }

    pub(crate) fn charge_erase(&mut self, ps: u64) {
        self.erases = self.erases.saturating_add(1);
        self.erase_ps = self.erase_ps.saturating_add(ps);
        self.sim_ps = self.sim_ps.saturating_add(ps);
    }
}

/// Picoseconds to microseconds.
pub fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}
