//! The device under a mount session: a simulated device written through to its image file, or
//! a real MTD device.
//!
//! Owns [`SessionFlash`] (one [`Flash`](dffs::Flash) for both, with the two things a session asks of it:
//! make what is synced durable, and say what the flash paid) and the translation of an MTD
//! device's counters into the [`Stats`] every front end reports. It must never buffer writes
//! to an MTD device: each program reaches the kernel when the library issues it.

use std::io;

use dffs_mtd::{Counters, MtdFlash};
use dffs_sim::Stats;

use crate::image::ImageFlash;

/// The device of a mount session.
pub enum SessionFlash {
    /// A simulated device whose synced state reaches its image file at each persist.
    Image(Box<ImageFlash>),
    /// A Linux MTD device (`/dev/mtdN`): every operation is a kernel call.
    Mtd(Box<MtdFlash>),
}

impl SessionFlash {
    /// Makes everything the library has written durable: the image through its WAL; nothing
    /// to do on MTD, where every program is already on the chip when it returns.
    pub fn persist(&mut self) -> io::Result<()> {
        match self {
            SessionFlash::Image(f) => f.persist(),
            SessionFlash::Mtd(_) => Ok(()),
        }
    }

    /// What the flash paid since the device was opened (simulated time for an image, host
    /// time measured around the kernel calls for MTD).
    pub fn stats(&self) -> Stats {
        match self {
            SessionFlash::Image(f) => f.sim().stats(),
            SessionFlash::Mtd(m) => mtd_stats(&m.counters()),
        }
    }
}

/// An MTD device's counters as [`Stats`]; the times are host nanoseconds spent in the kernel
/// calls (the chip's time plus the driver's), in the picosecond fields.
pub fn mtd_stats(c: &Counters) -> Stats {
    let ps = |ns: u64| ns.saturating_mul(1000);
    Stats {
        reads: c.reads,
        programs: c.programs,
        erases: c.erases,
        bytes_read: c.bytes_read,
        bytes_programmed: c.bytes_programmed,
        read_ps: ps(c.read_ns),
        program_ps: ps(c.program_ns),
        erase_ps: ps(c.erase_ns),
        sim_ps: ps(c.read_ns + c.program_ns + c.erase_ns),
        corrected_reads: c.corrected_reads,
        uncorrectable_reads: c.uncorrectable_reads,
        program_failures: c.program_failures,
        erase_failures: c.erase_failures,
        power_cuts: 0,
        paired_page_damage: 0,
    }
}

dffs::flash_enum!(SessionFlash { Image, Mtd });
