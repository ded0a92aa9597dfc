//! DFFS on Linux MTD: a [`Flash`] device over an MTD character device (`/dev/mtdN`).
//!
//! Owns the translation between DFFS's device model (pages, free OOB bytes, per-read ECC
//! status, bad-block marks) and the kernel's MTD interface: the geometry the kernel reports
//! (`MEMGETINFO` plus sysfs: sub-page size, free OOB bytes, ECC strength), page programs with
//! their free OOB bytes in one operation (`MEMWRITE`, auto OOB placement), reads with the ECC
//! result of that read (`MEMREAD`: `-EUCLEAN` corrected, `-EBADMSG` uncorrectable), erases
//! (`MEMERASE64`), bad-block marks (`MEMGETBADBLOCK`/`MEMSETBADBLOCK`), and errno → [`FlashError`].
//! It also counts what it did (operations, bytes, ECC events, host time in the kernel).
//!
//! The kernel calls live behind [`MtdIo`] ([`CharDev`] for a real device; [`fake::RamMtd`]
//! gives the same answers from memory, for tests), so every rule here is tested without a
//! device. This crate must never make file-system decisions (no retries, no caching, no
//! scrubbing: those belong to the block manager above it) and must never write to a device
//! whose geometry it could not describe exactly: [`MtdFlash::open`] refuses first.

#![warn(missing_docs)]

use std::time::Instant;

pub use dffs_flash::{EccStatus, Flash, FlashError, FlashKind, Geometry, PagePairing};

pub mod chardev;
pub mod fake;

pub use chardev::CharDev;

/// The MTD device types DFFS can tell apart (`mtd_info_user.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtdType {
    /// `MTD_RAM` (mtdram, block2mtd): bytes are overwritten, not ANDed; erase fills with ones.
    Ram,
    /// `MTD_ROM`: read-only.
    Rom,
    /// `MTD_NORFLASH`.
    Nor,
    /// `MTD_NANDFLASH` (SLC NAND).
    Nand,
    /// `MTD_DATAFLASH`.
    DataFlash,
    /// `MTD_UBIVOLUME`: a UBI volume emulated as MTD (gluebi); not raw flash.
    UbiVolume,
    /// `MTD_MLCNANDFLASH`.
    MlcNand,
    /// Anything else (the number the kernel gave).
    Other(u8),
}

impl MtdType {
    /// Decodes `mtd_info_user.type`.
    pub fn from_code(c: u8) -> MtdType {
        match c {
            1 => MtdType::Ram,
            2 => MtdType::Rom,
            3 => MtdType::Nor,
            4 => MtdType::Nand,
            6 => MtdType::DataFlash,
            7 => MtdType::UbiVolume,
            8 => MtdType::MlcNand,
            other => MtdType::Other(other),
        }
    }

    /// The name the kernel's sysfs `type` attribute uses.
    pub fn name(self) -> &'static str {
        match self {
            MtdType::Ram => "ram",
            MtdType::Rom => "rom",
            MtdType::Nor => "nor",
            MtdType::Nand => "nand",
            MtdType::DataFlash => "dataflash",
            MtdType::UbiVolume => "ubi",
            MtdType::MlcNand => "mlc-nand",
            MtdType::Other(_) => "unknown",
        }
    }
}

/// `MTD_WRITEABLE`: the device (partition) may be written.
pub const MTD_WRITEABLE: u32 = 0x400;

/// What the kernel says about an MTD device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtdInfo {
    /// The device type.
    pub kind: MtdType,
    /// `MTD_*` capability flags.
    pub flags: u32,
    /// Bytes on the device (partition).
    pub size: u64,
    /// Erase block size.
    pub erasesize: u32,
    /// Minimal write unit: the NAND page, or the NOR write granularity (often 1).
    pub writesize: u32,
    /// Bytes of OOB per page (0 on NOR).
    pub oobsize: u32,
    /// Free OOB bytes per page (what auto placement can carry), `None` when the kernel did not
    /// say.
    pub oobavail: Option<u32>,
    /// Offset of the first free OOB region in the raw OOB area.
    pub oob_free_offset: u32,
    /// Smallest NAND partial-page program (`subpagesize`), `None` when unknown.
    pub subpagesize: Option<u32>,
    /// ECC bits corrected per step (sysfs `ecc_strength`).
    pub ecc_strength: u32,
    /// Bytes per ECC step (sysfs `ecc_step_size`).
    pub ecc_step: u32,
    /// The device's name (sysfs `name`, e.g. `NAND simulator partition 0`).
    pub name: String,
}

/// The program page DFFS uses on NOR MTD devices (the usual serial NOR page; MTD does not
/// report it, and the kernel splits longer writes itself).
pub const NOR_PAGE: u32 = 256;

/// The geometry DFFS sees on the MTD device `info`, or why DFFS cannot use it.
pub fn geometry_for(info: &MtdInfo) -> Result<Geometry, String> {
    if info.erasesize == 0 || info.size % info.erasesize as u64 != 0 {
        return Err(format!(
            "size {} is not a whole number of {} B erase blocks",
            info.size, info.erasesize
        ));
    }
    let blocks = u32::try_from(info.size / info.erasesize as u64)
        .map_err(|_| "too many erase blocks".to_string())?;
    let g = match info.kind {
        MtdType::Nand | MtdType::MlcNand => {
            let page = info.writesize;
            if page == 0 || info.erasesize % page != 0 {
                return Err(format!(
                    "unknown write size ({page} B) for {} B erase blocks",
                    info.erasesize
                ));
            }
            let free = info.oobavail.ok_or_else(|| {
                "the kernel does not say how many OOB bytes are free (no ECCGETLAYOUT, no sysfs \
                 oobavail)"
                    .to_string()
            })?;
            let sub = info.subpagesize.unwrap_or(page);
            if sub == 0 || page % sub != 0 {
                return Err(format!(
                    "sub-page size {sub} does not divide the {page} B page"
                ));
            }
            let mlc = info.kind == MtdType::MlcNand;
            Geometry {
                kind: FlashKind::Nand,
                page_size: page,
                oob_size: info.oobsize,
                oob_free_offset: info.oob_free_offset.min(info.oobsize),
                oob_free_len: free.min(info.oobsize - info.oob_free_offset.min(info.oobsize)),
                pages_per_block: info.erasesize / page,
                blocks,
                program_unit: sub,
                nop: page / sub,
                in_order: mlc,
                ecc_strength: info.ecc_strength,
                ecc_step: if info.ecc_step == 0 {
                    page
                } else {
                    info.ecc_step
                },
                pairing: if mlc {
                    PagePairing::Mlc2
                } else {
                    PagePairing::None
                },
            }
        }
        MtdType::Nor | MtdType::Ram | MtdType::DataFlash => {
            let write = info.writesize.max(1);
            let page = NOR_PAGE.max(write);
            if info.erasesize % page != 0 {
                return Err(format!(
                    "{} B erase blocks are not a whole number of {page} B program pages",
                    info.erasesize
                ));
            }
            Geometry {
                kind: FlashKind::Nor,
                page_size: page,
                oob_size: 0,
                oob_free_offset: 0,
                oob_free_len: 0,
                pages_per_block: info.erasesize / page,
                blocks,
                program_unit: write,
                nop: 0,
                in_order: false,
                ecc_strength: 0,
                ecc_step: 256,
                pairing: PagePairing::None,
            }
        }
        MtdType::Rom => return Err("a ROM device cannot hold a writable file system".into()),
        MtdType::UbiVolume => {
            return Err("a UBI volume is not raw flash (use the MTD device under UBI)".into())
        }
        MtdType::Other(c) => return Err(format!("unknown MTD device type {c}")),
    };
    g.validate().map_err(str::to_string)?;
    Ok(g)
}

/// What one read's ECC found (the kernel's `mtd_read_req_ecc_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadEcc {
    /// ECC steps that could not be corrected.
    pub uncorrectable: u32,
    /// Bit flips corrected, all steps together.
    pub corrected_bitflips: u32,
    /// Most bit flips corrected in one step.
    pub max_bitflips: u32,
}

impl ReadEcc {
    /// The status DFFS's block manager acts on.
    pub fn status(self) -> EccStatus {
        if self.uncorrectable > 0 {
            EccStatus::Uncorrectable
        } else if self.max_bitflips > 0 || self.corrected_bitflips > 0 {
            EccStatus::Corrected(self.max_bitflips.max(1))
        } else {
            EccStatus::Clean
        }
    }
}

/// The kernel calls an [`MtdFlash`] makes, by byte address on the device. Errors are errno
/// values. A read that the ECC corrected or could not correct is `Ok` with the counts (the
/// data is filled either way), as `MEMREAD` does.
pub trait MtdIo {
    /// What the kernel reports about the device.
    fn info(&self) -> &MtdInfo;
    /// Reads `data` from `start`, and the free OOB bytes of that page into `oob` (NAND).
    fn read(&mut self, start: u64, data: &mut [u8], oob: &mut [u8]) -> Result<ReadEcc, i32>;
    /// Programs `data` at `start` and the free OOB bytes of that page from `oob`, in one
    /// operation.
    fn write(&mut self, start: u64, data: &[u8], oob: &[u8]) -> Result<(), i32>;
    /// Erases the erase block at `start`.
    fn erase(&mut self, start: u64, len: u64) -> Result<(), i32>;
    /// Whether the erase block at `start` is marked bad.
    fn is_bad(&mut self, start: u64) -> Result<bool, i32>;
    /// Marks the erase block at `start` bad.
    fn mark_bad(&mut self, start: u64) -> Result<(), i32>;
}

/// What an [`MtdFlash`] did since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Read operations.
    pub reads: u64,
    /// Program operations (including failed ones).
    pub programs: u64,
    /// Erase operations (including failed ones).
    pub erases: u64,
    /// Data and free OOB bytes read.
    pub bytes_read: u64,
    /// Data and free OOB bytes programmed.
    pub bytes_programmed: u64,
    /// Host time spent in read calls, in nanoseconds (the real device's time plus the
    /// kernel's).
    pub read_ns: u64,
    /// Host time spent in program calls, in nanoseconds.
    pub program_ns: u64,
    /// Host time spent in erase calls, in nanoseconds.
    pub erase_ns: u64,
    /// Reads the ECC corrected.
    pub corrected_reads: u64,
    /// Reads the ECC could not correct.
    pub uncorrectable_reads: u64,
    /// Programs that failed (`-EIO`: the block went bad).
    pub program_failures: u64,
    /// Erases that failed.
    pub erase_failures: u64,
}

/// An MTD device as a DFFS [`Flash`].
pub struct MtdFlash<D: MtdIo = CharDev> {
    dev: D,
    geometry: Geometry,
    writable: bool,
    counters: Counters,
    /// `MTD_RAM` devices overwrite bytes; programs are made to AND as flash does.
    emulate_and: bool,
}

const EIO: i32 = libc::EIO;
const EINVAL: i32 = libc::EINVAL;

impl MtdFlash<CharDev> {
    /// Opens the MTD character device at `path` (read-write with `writable`) and checks that
    /// DFFS can describe it; nothing is written.
    pub fn open(path: &std::path::Path, writable: bool) -> Result<MtdFlash<CharDev>, String> {
        let dev = CharDev::open(path, writable)?;
        MtdFlash::new(dev, writable)
    }
}

impl<D: MtdIo> MtdFlash<D> {
    /// Wraps `dev`; fails (before any write) when DFFS cannot use it.
    pub fn new(dev: D, writable: bool) -> Result<MtdFlash<D>, String> {
        let info = dev.info();
        let geometry = geometry_for(info)?;
        if writable && info.flags & MTD_WRITEABLE == 0 {
            return Err("the MTD device is read-only (MTD_WRITEABLE is not set)".into());
        }
        let emulate_and = info.kind == MtdType::Ram;
        Ok(MtdFlash {
            dev,
            geometry,
            writable,
            counters: Counters::default(),
            emulate_and,
        })
    }

    /// What the kernel reports about the device.
    pub fn info(&self) -> &MtdInfo {
        self.dev.info()
    }

    /// The kernel-facing device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The kernel-facing device, mutably (tests inject faults through it).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Operation counts and host time since the device was opened.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Whether the device was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    fn addr(&self, page: u32, offset: u32) -> u64 {
        page as u64 * self.geometry.page_size as u64 + offset as u64
    }

    fn check_range(&self, page: u32, offset: u32, len: usize) -> Result<(), FlashError> {
        let g = &self.geometry;
        if page >= g.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        let end = self.addr(page, offset) + len as u64;
        let limit = match g.kind {
            FlashKind::Nand => self.addr(page, 0) + g.page_size as u64,
            FlashKind::Nor => g.capacity(),
        };
        if end > limit {
            return Err(FlashError::OutOfRange);
        }
        Ok(())
    }
}

fn elapsed_ns(t: Instant) -> u64 {
    t.elapsed().as_nanos().min(u64::MAX as u128) as u64
}

impl<D: MtdIo> Flash for MtdFlash<D> {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        self.check_range(page, offset, data.len())?;
        if oob.len() as u32 > self.geometry.oob_free_len {
            return Err(FlashError::OutOfRange);
        }
        let t = Instant::now();
        let r = self.dev.read(self.addr(page, offset), data, oob);
        self.counters.read_ns += elapsed_ns(t);
        self.counters.reads += 1;
        self.counters.bytes_read += (data.len() + oob.len()) as u64;
        match r {
            Ok(ecc) => {
                let s = ecc.status();
                match s {
                    EccStatus::Corrected(_) => self.counters.corrected_reads += 1,
                    EccStatus::Uncorrectable => self.counters.uncorrectable_reads += 1,
                    EccStatus::Clean => {}
                }
                Ok(s)
            }
            Err(EINVAL) => Err(FlashError::OutOfRange),
            Err(_) => Err(FlashError::Device),
        }
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let g = self.geometry;
        if page >= g.total_pages() {
            return Err(FlashError::OutOfRange);
        }
        if offset as u64 + data.len() as u64 > g.page_size as u64 {
            return Err(match g.kind {
                FlashKind::Nor => FlashError::CrossesPage,
                FlashKind::Nand => FlashError::OutOfRange,
            });
        }
        if oob.len() as u32 > g.oob_free_len {
            return Err(FlashError::OutOfRange);
        }
        if offset % g.program_unit != 0 || data.len() as u32 % g.program_unit != 0 {
            return Err(FlashError::Misaligned);
        }
        if !self.writable {
            return Err(FlashError::Device);
        }
        let start = self.addr(page, offset);
        let mut anded;
        let bytes: &[u8] = if self.emulate_and && !data.is_empty() {
            // A RAM-backed MTD stores what it is given; flash can only clear bits.
            anded = vec![0u8; data.len()];
            self.dev
                .read(start, &mut anded, &mut [])
                .map_err(|_| FlashError::Device)?;
            for (a, d) in anded.iter_mut().zip(data) {
                *a &= *d;
            }
            &anded
        } else {
            data
        };
        let t = Instant::now();
        let r = self.dev.write(start, bytes, oob);
        self.counters.program_ns += elapsed_ns(t);
        self.counters.programs += 1;
        self.counters.bytes_programmed += (data.len() + oob.len()) as u64;
        match r {
            Ok(()) => Ok(()),
            Err(EIO) => {
                self.counters.program_failures += 1;
                Err(FlashError::ProgramFailed)
            }
            Err(EINVAL) => Err(FlashError::Misaligned),
            Err(_) => Err(FlashError::Device),
        }
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        let g = self.geometry;
        if block >= g.blocks {
            return Err(FlashError::OutOfRange);
        }
        if !self.writable {
            return Err(FlashError::Device);
        }
        let size = g.block_size() as u64;
        let t = Instant::now();
        let r = self.dev.erase(block as u64 * size, size);
        self.counters.erase_ns += elapsed_ns(t);
        self.counters.erases += 1;
        match r {
            Ok(()) => Ok(()),
            Err(EIO) => {
                self.counters.erase_failures += 1;
                Err(FlashError::EraseFailed)
            }
            Err(_) => Err(FlashError::Device),
        }
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        let g = self.geometry;
        if block >= g.blocks {
            return Err(FlashError::OutOfRange);
        }
        if g.kind == FlashKind::Nor {
            return Ok(false);
        }
        self.counters.reads += 1;
        self.dev
            .is_bad(block as u64 * g.block_size() as u64)
            .map_err(|_| FlashError::Device)
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        let g = self.geometry;
        if block >= g.blocks {
            return Err(FlashError::OutOfRange);
        }
        if g.kind == FlashKind::Nor || !self.writable {
            return Err(FlashError::Device);
        }
        self.counters.programs += 1;
        self.dev
            .mark_bad(block as u64 * g.block_size() as u64)
            .map_err(|_| FlashError::Device)
    }
}
