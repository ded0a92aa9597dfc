//! The flash device model of DFFS: what the file system needs from raw NAND or NOR flash.
//!
//! This crate is the bottom layer, shared by the file system (`dffs`), the simulator
//! (`dffs-sim`) and the device backends; it depends on nothing of theirs. It owns the device abstraction ([`Flash`]), its [`Geometry`] (all sizes are data,
//! never constants baked into the file system), the per-read ECC status and the device error
//! type, plus an adapter that turns any `embedded_storage::nor_flash::NorFlash` driver into a DFFS
//! NOR device. It must never contain file-system policy: no allocation, no retries, no caching.
//!
//! # Addressing
//! Both kinds are addressed by *page* and *byte offset within the page*:
//! - NAND: a page is the read/program unit (data area plus a spare/OOB area). An operation stays
//!   inside one page. Pages are numbered across the device: `page = block * pages_per_block + n`.
//! - NOR: a page is the device's *program page* (the largest window one program operation may
//!   touch, e.g. 256 B). Reads may cross page boundaries (NOR is byte addressable); programs may
//!   not. There is no OOB area.
//!
//! An erase block (`block`) is the erase unit the file system uses: a NAND block, or a NOR erase
//! sector/block (which one is part of the geometry).

#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use core::fmt;

/// The two families of raw flash DFFS runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlashKind {
    /// Page-programmed NAND with a spare (OOB) area, bad blocks and ECC.
    Nand,
    /// Byte-addressable NOR: program anywhere 1→0, erase per sector/block, no OOB, no ECC.
    Nor,
}

/// Sizes and rules of a flash device. Everything the file system needs to know about a device
/// is here; the file system records it at format time and checks it at mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// NAND or NOR.
    pub kind: FlashKind,
    /// NAND: data bytes per page. NOR: bytes per program page (largest single program window).
    pub page_size: u32,
    /// NAND: total spare bytes per page. NOR: 0.
    pub oob_size: u32,
    /// Offset of the spare bytes the file system may use (not bad-block marker, not ECC).
    pub oob_free_offset: u32,
    /// Number of spare bytes the file system may use.
    pub oob_free_len: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Erase blocks on the device (or partition).
    pub blocks: u32,
    /// Smallest programmable unit in bytes, and the alignment of program offsets and lengths.
    /// NAND: the subpage size (`page_size / nop` when the device allows partial programs).
    /// NOR: the driver's write granularity (1 for most serial NOR).
    pub program_unit: u32,
    /// Maximum number of program operations on one page between two erases (NAND "NOP").
    /// `0` means unlimited (NOR).
    pub nop: u32,
    /// Pages of a block must be programmed in ascending order (MLC NAND).
    pub in_order: bool,
    /// Bits the ECC corrects per `ecc_step` bytes (0: no ECC, as on NOR).
    pub ecc_strength: u32,
    /// Bytes covered by one ECC codeword.
    pub ecc_step: u32,
    /// Which pages share their cells (MLC NAND): a power cut while an upper page is programmed
    /// can corrupt the lower page it shares a word line with, although that page was
    /// programmed (and perhaps synced) long before.
    pub pairing: PagePairing,
}

/// How the pages of a block share memory cells.
///
/// On multi-level-cell NAND two pages (a *lower* and an *upper* page) are stored in the same
/// cells of one word line. Programming the upper page changes the cells' levels, so a program
/// cut by power loss can destroy the lower page's data too. A file system that must keep synced
/// data must therefore never program an upper page while its lower page holds data that is
/// durable and not stored elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PagePairing {
    /// Every page has cells of its own (SLC NAND, NOR).
    #[default]
    None,
    /// 2-bit MLC with shared pages in the common interleaved order: pages 0 and 1 are lower
    /// pages, and from page 2 on the even pages are upper pages: upper page `u` shares its word
    /// line with lower page `u - 3` (page 2 with page 0). Odd pages are lower pages.
    Mlc2,
}

impl PagePairing {
    /// The lower page (index within the block) that upper page `page` (index within the
    /// block) shares its cells with, or `None` when `page` is not an upper page.
    pub const fn lower_of(self, page: u32) -> Option<u32> {
        match self {
            PagePairing::None => None,
            PagePairing::Mlc2 => {
                if page < 2 || page % 2 == 1 {
                    None
                } else if page == 2 {
                    Some(0)
                } else {
                    Some(page - 3)
                }
            }
        }
    }

    /// The upper page (index within a block of `pages_per_block` pages) that shares its cells
    /// with lower page `page`, if there is one in the block.
    pub const fn upper_of(self, page: u32, pages_per_block: u32) -> Option<u32> {
        let u = match self {
            PagePairing::None => return None,
            PagePairing::Mlc2 => {
                if page == 0 {
                    2
                } else if page % 2 == 1 {
                    page + 3
                } else {
                    return None;
                }
            }
        };
        if u < pages_per_block {
            Some(u)
        } else {
            None
        }
    }

    /// Encoding in the format parameters.
    pub const fn code(self) -> u8 {
        match self {
            PagePairing::None => 0,
            PagePairing::Mlc2 => 1,
        }
    }

    /// Decodes [`PagePairing::code`].
    pub const fn from_code(c: u8) -> Option<PagePairing> {
        match c {
            0 => Some(PagePairing::None),
            1 => Some(PagePairing::Mlc2),
            _ => None,
        }
    }
}

impl Geometry {
    /// Bytes of data per erase block.
    pub const fn block_size(&self) -> u32 {
        self.page_size * self.pages_per_block
    }

    /// Total pages on the device.
    pub const fn total_pages(&self) -> u32 {
        self.pages_per_block * self.blocks
    }

    /// Total data bytes on the device.
    pub const fn capacity(&self) -> u64 {
        self.block_size() as u64 * self.blocks as u64
    }

    /// The erase block that holds `page`.
    pub const fn block_of(&self, page: u32) -> u32 {
        page / self.pages_per_block
    }

    /// The first page of `block`.
    pub const fn first_page(&self, block: u32) -> u32 {
        block * self.pages_per_block
    }

    /// Whether a file system laid out for `self` can be used on a device of geometry `other`:
    /// every size and rule the layout depends on is the same. The ECC strength and step are
    /// not compared: they say how the device protects its pages (the same chip behind two
    /// controllers, or an image made by the simulator and the chip's own driver, may report
    /// different steps), not where anything lies.
    pub fn same_layout(&self, other: &Geometry) -> bool {
        Geometry {
            ecc_strength: other.ecc_strength,
            ecc_step: other.ecc_step,
            ..*self
        } == *other
    }

    /// Checks that the numbers describe a device DFFS can use; returns a static reason if not.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.page_size == 0 || !self.page_size.is_power_of_two() {
            return Err("page size must be a non-zero power of two");
        }
        if self.pages_per_block < 2 || !self.pages_per_block.is_power_of_two() {
            return Err("pages per block must be a power of two of at least 2");
        }
        if self.blocks < 4 {
            return Err("a device needs at least 4 erase blocks");
        }
        if self.program_unit == 0
            || !self.program_unit.is_power_of_two()
            || self.program_unit > self.page_size
        {
            return Err("program unit must be a power of two no larger than a page");
        }
        if self.oob_free_offset.saturating_add(self.oob_free_len) > self.oob_size {
            return Err("free OOB region lies outside the OOB area");
        }
        if self.page_size as u64 * self.pages_per_block as u64 > u32::MAX as u64 {
            return Err("erase blocks larger than 4 GiB are not supported");
        }
        if self.capacity() > (1u64 << 36) {
            return Err("devices larger than 64 GiB are not supported");
        }
        match self.kind {
            FlashKind::Nand => {
                if self.oob_size == 0 {
                    return Err("NAND needs an OOB area");
                }
            }
            FlashKind::Nor => {
                if self.oob_size != 0 {
                    return Err("NOR has no OOB area");
                }
                if self.pairing != PagePairing::None {
                    return Err("NOR has no paired pages");
                }
            }
        }
        Ok(())
    }
}

/// What the ECC engine reported for a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EccStatus {
    /// No bit errors.
    Clean,
    /// Bit errors were found and corrected; the data returned is correct. The number is the
    /// largest count of corrected bits in any one ECC step. A block that reports this should be
    /// scrubbed (rewritten elsewhere and erased) before the errors grow beyond the ECC strength.
    Corrected(u32),
    /// More bit errors than the ECC can correct: the data returned is wrong.
    Uncorrectable,
}

impl EccStatus {
    /// Combines two statuses, keeping the worse one.
    pub fn worst(self, other: EccStatus) -> EccStatus {
        use EccStatus::*;
        match (self, other) {
            (Uncorrectable, _) | (_, Uncorrectable) => Uncorrectable,
            (Corrected(a), Corrected(b)) => Corrected(a.max(b)),
            (Corrected(a), Clean) | (Clean, Corrected(a)) => Corrected(a),
            (Clean, Clean) => Clean,
        }
    }
}

/// Why a device operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlashError {
    /// The address or length lies outside the device, a page, or the OOB area.
    OutOfRange,
    /// Offset or length is not aligned to the program unit (or the driver's read unit).
    Misaligned,
    /// A program touched bytes that are not erased (NAND), or would turn a 0 bit into 1 (NOR).
    NotErased,
    /// More partial programs of one page than the device's NOP limit.
    NopExceeded,
    /// A page was programmed after a higher page of the same block (in-order devices).
    OutOfOrder,
    /// A NOR program crossed a program-page boundary.
    CrossesPage,
    /// The program operation failed: the block has gone bad and must be retired.
    ProgramFailed,
    /// The erase operation failed: the block has gone bad and must be retired.
    EraseFailed,
    /// The block is marked bad.
    BadBlock,
    /// Power was lost; the device does nothing until it is powered up again.
    PowerLoss,
    /// Any other driver-specific failure.
    Device,
}

impl fmt::Display for FlashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            FlashError::OutOfRange => "address out of range",
            FlashError::Misaligned => "misaligned access",
            FlashError::NotErased => "program of a location that is not erased",
            FlashError::NopExceeded => "too many partial programs of one page",
            FlashError::OutOfOrder => "out-of-order page program",
            FlashError::CrossesPage => "program crosses a program-page boundary",
            FlashError::ProgramFailed => "program failed (block went bad)",
            FlashError::EraseFailed => "erase failed (block went bad)",
            FlashError::BadBlock => "block is bad",
            FlashError::PowerLoss => "power lost",
            FlashError::Device => "device error",
        };
        f.write_str(s)
    }
}

/// A raw flash device.
///
/// Implementations must report, never hide: an ECC failure is [`EccStatus::Uncorrectable`], a
/// failed program or erase is an error, a violated device rule is an error.
pub trait Flash {
    /// The device's geometry. It must not change while the device is in use.
    fn geometry(&self) -> Geometry;

    /// Reads `data.len()` bytes of the data area of `page` starting at `offset`, and
    /// `oob.len()` bytes of the *free* OOB bytes of `page` (NAND only; pass an empty slice
    /// otherwise). On NAND the data range must lie inside the page; on NOR it may run on into
    /// the following pages. The buffers are filled even when the status is `Uncorrectable`.
    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError>;

    /// Programs `data` into the data area of `page` at `offset`, and (NAND) `oob` into the free
    /// OOB bytes of the page, in one program operation. Offsets and lengths are multiples of the
    /// program unit; the range stays inside one page.
    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError>;

    /// Erases `block` (all its pages become all-ones, OOB included).
    fn erase(&mut self, block: u32) -> Result<(), FlashError>;

    /// Whether `block` carries a bad-block mark (factory or grown). Always false on NOR.
    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError>;

    /// Marks `block` bad the way the device's bad blocks are marked, so that it is never used
    /// again, even by another program reading the device. On NOR this is not supported
    /// ([`FlashError::Device`]); the file system records bad NOR blocks itself.
    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError>;
}

/// Implements [`Flash`] for a pointer type by forwarding every method to the device it points
/// at.
macro_rules! forward_flash {
    ($($ty:ty),*) => {$(
        impl<T: Flash + ?Sized> Flash for $ty {
            fn geometry(&self) -> Geometry {
                (**self).geometry()
            }
            fn read(
                &mut self,
                page: u32,
                offset: u32,
                data: &mut [u8],
                oob: &mut [u8],
            ) -> Result<EccStatus, FlashError> {
                (**self).read(page, offset, data, oob)
            }
            fn program(
                &mut self,
                page: u32,
                offset: u32,
                data: &[u8],
                oob: &[u8],
            ) -> Result<(), FlashError> {
                (**self).program(page, offset, data, oob)
            }
            fn erase(&mut self, block: u32) -> Result<(), FlashError> {
                (**self).erase(block)
            }
            fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
                (**self).is_bad(block)
            }
            fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
                (**self).mark_bad(block)
            }
        }
    )*};
}

forward_flash!(&mut T);
#[cfg(feature = "std")]
forward_flash!(std::boxed::Box<T>);

/// Implements [`Flash`] for an enum whose every variant holds one device, by forwarding each
/// method to the variant's device: `flash_enum!(Device { Image, Mtd });` for
/// `enum Device { Image(Box<SimFlash>), Mtd(Box<MtdFlash>) }`. For front ends that open one
/// of several kinds of device at run time.
#[macro_export]
macro_rules! flash_enum {
    ($name:ident { $($variant:ident),+ $(,)? }) => {
        impl $crate::Flash for $name {
            fn geometry(&self) -> $crate::Geometry {
                match self { $($name::$variant(f) => f.geometry(),)+ }
            }
            fn read(
                &mut self,
                page: u32,
                offset: u32,
                data: &mut [u8],
                oob: &mut [u8],
            ) -> ::core::result::Result<$crate::EccStatus, $crate::FlashError> {
                match self { $($name::$variant(f) => f.read(page, offset, data, oob),)+ }
            }
            fn program(
                &mut self,
                page: u32,
                offset: u32,
                data: &[u8],
                oob: &[u8],
            ) -> ::core::result::Result<(), $crate::FlashError> {
                match self { $($name::$variant(f) => f.program(page, offset, data, oob),)+ }
            }
            fn erase(&mut self, block: u32) -> ::core::result::Result<(), $crate::FlashError> {
                match self { $($name::$variant(f) => f.erase(block),)+ }
            }
            fn is_bad(&mut self, block: u32) -> ::core::result::Result<bool, $crate::FlashError> {
                match self { $($name::$variant(f) => f.is_bad(block),)+ }
            }
            fn mark_bad(&mut self, block: u32) -> ::core::result::Result<(), $crate::FlashError> {
                match self { $($name::$variant(f) => f.mark_bad(block),)+ }
            }
        }
    };
}

pub use nor_adapter::NorFlashDevice;

mod nor_adapter {
    use super::*;
    use embedded_storage::nor_flash::{NorFlash, NorFlashErrorKind};

    /// Makes any `embedded_storage::nor_flash::NorFlash` driver a DFFS NOR device.
    ///
    /// The driver's `ERASE_SIZE` is the erase block, `WRITE_SIZE` the program unit, and
    /// `page_size` (given here, typically 256 for serial NOR) the program page. Reads that are not
    /// aligned to the driver's `READ_SIZE` are served through a small bounce buffer.
    pub struct NorFlashDevice<F: NorFlash> {
        flash: F,
        geometry: Geometry,
    }

    const BOUNCE: usize = 64;

    impl<F: NorFlash> NorFlashDevice<F> {
        /// Wraps `flash`, using `page_size` as the program page (a power of two, at least the
        /// driver's write size, dividing its erase size). Fails when the driver's sizes do not
        /// fit these rules.
        pub fn new(flash: F, page_size: u32) -> Result<Self, &'static str> {
            let erase = F::ERASE_SIZE as u32;
            let write = F::WRITE_SIZE as u32;
            if F::READ_SIZE > BOUNCE || !F::READ_SIZE.is_power_of_two() {
                return Err("driver read size must be a power of two of at most 64 bytes");
            }
            if page_size == 0 || erase % page_size != 0 || page_size < write {
                return Err("page size must divide the erase size and hold one write unit");
            }
            let blocks = (flash.capacity() as u64 / erase as u64) as u32;
            let geometry = Geometry {
                kind: FlashKind::Nor,
                page_size,
                oob_size: 0,
                oob_free_offset: 0,
                oob_free_len: 0,
                pages_per_block: erase / page_size,
                blocks,
                program_unit: write,
                nop: 0,
                in_order: false,
                ecc_strength: 0,
                ecc_step: page_size,
                pairing: PagePairing::None,
            };
            geometry.validate()?;
            Ok(NorFlashDevice { flash, geometry })
        }

        /// Gives the driver back.
        pub fn into_inner(self) -> F {
            self.flash
        }

        /// The wrapped driver.
        pub fn inner_mut(&mut self) -> &mut F {
            &mut self.flash
        }

        fn map_err(kind: NorFlashErrorKind) -> FlashError {
            match kind {
                NorFlashErrorKind::NotAligned => FlashError::Misaligned,
                NorFlashErrorKind::OutOfBounds => FlashError::OutOfRange,
                _ => FlashError::Device,
            }
        }
    }

    impl<F: NorFlash> Flash for NorFlashDevice<F> {
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
            use embedded_storage::nor_flash::NorFlashError;
            if !oob.is_empty() {
                return Err(FlashError::OutOfRange);
            }
            let start = page as u64 * self.geometry.page_size as u64 + offset as u64;
            if start + data.len() as u64 > self.geometry.capacity() {
                return Err(FlashError::OutOfRange);
            }
            let unit = F::READ_SIZE as u64;
            if unit == 1 || (start % unit == 0 && data.len() as u64 % unit == 0) {
                return self
                    .flash
                    .read(start as u32, data)
                    .map(|_| EccStatus::Clean)
                    .map_err(|e| Self::map_err(e.kind()));
            }
            // Unaligned: read through an aligned bounce buffer, one unit-aligned window at a time.
            let mut done = 0usize;
            let mut bounce = [0u8; BOUNCE];
            while done < data.len() {
                let pos = start + done as u64;
                let aligned = pos - pos % unit;
                let skip = (pos - aligned) as usize;
                let window = (BOUNCE as u64).min(self.geometry.capacity() - aligned) as usize;
                let window = window - window % unit as usize;
                self.flash
                    .read(aligned as u32, &mut bounce[..window])
                    .map_err(|e| Self::map_err(e.kind()))?;
                let n = (window - skip).min(data.len() - done);
                data[done..done + n].copy_from_slice(&bounce[skip..skip + n]);
                done += n;
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
            use embedded_storage::nor_flash::NorFlashError;
            let g = self.geometry;
            if !oob.is_empty() || page >= g.total_pages() {
                return Err(FlashError::OutOfRange);
            }
            if offset as u64 + data.len() as u64 > g.page_size as u64 {
                return Err(FlashError::CrossesPage);
            }
            if offset % g.program_unit != 0 || data.len() as u32 % g.program_unit != 0 {
                return Err(FlashError::Misaligned);
            }
            let start = page * g.page_size + offset;
            self.flash
                .write(start, data)
                .map_err(|e| Self::map_err(e.kind()))
        }

        fn erase(&mut self, block: u32) -> Result<(), FlashError> {
            use embedded_storage::nor_flash::NorFlashError;
            if block >= self.geometry.blocks {
                return Err(FlashError::OutOfRange);
            }
            let size = self.geometry.block_size();
            self.flash
                .erase(block * size, (block + 1) * size)
                .map_err(|e| Self::map_err(e.kind()))
        }

        fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
            if block >= self.geometry.blocks {
                return Err(FlashError::OutOfRange);
            }
            Ok(false)
        }

        fn mark_bad(&mut self, _block: u32) -> Result<(), FlashError> {
            Err(FlashError::Device)
        }
    }
}
