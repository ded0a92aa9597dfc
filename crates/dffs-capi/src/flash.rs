//! The C flash driver seen as a DFFS device: the `Flash` implementation over the callbacks of a
//! `dffs_config`, the clock over its `now` callback, and the translation of the config's RAM
//! fields into a core `Config`.
//!
//! It must never cache, retry or interpret flash contents: each trait call is exactly one
//! callback, and a driver's answer is passed on unchanged.

use core::ffi::{c_int, c_void};
use core::ptr;

use dffs::{Clock, Config, EccStatus, Error, Flash, FlashError, FlashKind, Geometry, Time};

use crate::types::*;

/// A device reached through the callbacks of a C `dffs_config`.
pub(crate) struct CFlash {
    cfg: *const dffs_config,
    geometry: Geometry,
}

/// Converts the C geometry (no validation beyond the kind).
fn geometry_of(g: &dffs_geometry) -> Result<Geometry, Error> {
    let kind = match g.kind {
        DFFS_FLASH_NAND => FlashKind::Nand,
        DFFS_FLASH_NOR => FlashKind::Nor,
        _ => return Err(Error::Invalid),
    };
    Ok(Geometry {
        kind,
        page_size: g.page_size,
        oob_size: g.oob_size,
        oob_free_offset: g.oob_free_offset,
        oob_free_len: g.oob_free_len,
        pages_per_block: g.pages_per_block,
        blocks: g.block_count,
        program_unit: g.program_unit,
        nop: g.nop,
        in_order: g.in_order != 0,
        ecc_strength: g.ecc_strength,
        ecc_step: g.ecc_step,
        pairing: match g.pairing {
            DFFS_PAIRING_NONE => dffs::PagePairing::None,
            DFFS_PAIRING_MLC2 => dffs::PagePairing::Mlc2,
            _ => return Err(Error::Invalid),
        },
    })
}

/// The validated geometry of a config.
pub(crate) fn config_geometry(cfg: &dffs_config) -> Result<Geometry, Error> {
    let g = geometry_of(&cfg.geometry)?;
    g.validate().map_err(|_| Error::Invalid)?;
    Ok(g)
}

impl CFlash {
    /// Wraps `cfg` (which must stay valid while the device is in use). Fails with `Invalid`
    /// when a required callback is missing or the geometry is not usable.
    ///
    /// # Safety
    /// `cfg` must be NULL or point to a valid `dffs_config` that outlives the device.
    pub(crate) unsafe fn new(cfg: *const dffs_config) -> Result<CFlash, Error> {
        // SAFETY: the caller guarantees `cfg` is NULL or valid.
        let c = unsafe { cfg.as_ref() }.ok_or(Error::Invalid)?;
        if c.read.is_none() || c.prog.is_none() || c.erase.is_none() {
            return Err(Error::Invalid);
        }
        let geometry = config_geometry(c)?;
        Ok(CFlash { cfg, geometry })
    }

    fn cfg(&self) -> &dffs_config {
        // SAFETY: `new` checked the pointer, and the API contract keeps the config alive while
        // the device is in use.
        unsafe { &*self.cfg }
    }
}

/// Maps a negative driver result to the core's device error.
fn flash_error(code: c_int) -> FlashError {
    match code {
        DFFS_FLASH_ERR_RANGE => FlashError::OutOfRange,
        DFFS_FLASH_ERR_ALIGN => FlashError::Misaligned,
        DFFS_FLASH_ERR_NOT_ERASED => FlashError::NotErased,
        DFFS_FLASH_ERR_PROG => FlashError::ProgramFailed,
        DFFS_FLASH_ERR_ERASE => FlashError::EraseFailed,
        DFFS_FLASH_ERR_BAD_BLOCK => FlashError::BadBlock,
        DFFS_FLASH_ERR_POWER => FlashError::PowerLoss,
        DFFS_FLASH_ERR_NOP => FlashError::NopExceeded,
        DFFS_FLASH_ERR_ORDER => FlashError::OutOfOrder,
        DFFS_FLASH_ERR_CROSSES_PAGE => FlashError::CrossesPage,
        _ => FlashError::Device,
    }
}

fn status(code: c_int) -> Result<(), FlashError> {
    if code >= 0 {
        Ok(())
    } else {
        Err(flash_error(code))
    }
}

/// A C buffer pointer for a slice (NULL for an empty one, so drivers may test either).
fn buf_mut(b: &mut [u8]) -> *mut c_void {
    if b.is_empty() {
        ptr::null_mut()
    } else {
        b.as_mut_ptr().cast()
    }
}

fn buf(b: &[u8]) -> *const c_void {
    if b.is_empty() {
        ptr::null()
    } else {
        b.as_ptr().cast()
    }
}

impl Flash for CFlash {
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
        let c = self.cfg();
        let f = c.read.ok_or(FlashError::Device)?;
        // SAFETY: the buffers are valid for the lengths passed; the callback is the driver's.
        let r = unsafe {
            f(
                self.cfg,
                page,
                offset,
                buf_mut(data),
                data.len() as u32,
                buf_mut(oob),
                oob.len() as u32,
            )
        };
        match r {
            0 => Ok(EccStatus::Clean),
            n if n > 0 => Ok(EccStatus::Corrected(n as u32)),
            DFFS_FLASH_ECC_FAILED => Ok(EccStatus::Uncorrectable),
            e => Err(flash_error(e)),
        }
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let c = self.cfg();
        let f = c.prog.ok_or(FlashError::Device)?;
        // SAFETY: as in `read`.
        status(unsafe {
            f(
                self.cfg,
                page,
                offset,
                buf(data),
                data.len() as u32,
                buf(oob),
                oob.len() as u32,
            )
        })
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        let f = self.cfg().erase.ok_or(FlashError::Device)?;
        // SAFETY: the driver's callback with its own config.
        status(unsafe { f(self.cfg, block) })
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        if block >= self.geometry.blocks {
            return Err(FlashError::OutOfRange);
        }
        match self.cfg().is_bad {
            None => Ok(false),
            // SAFETY: the driver's callback with its own config.
            Some(f) => match unsafe { f(self.cfg, block) } {
                0 => Ok(false),
                n if n > 0 => Ok(true),
                e => Err(flash_error(e)),
            },
        }
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        match self.cfg().mark_bad {
            None => Err(FlashError::Device),
            // SAFETY: the driver's callback with its own config.
            Some(f) => status(unsafe { f(self.cfg, block) }),
        }
    }
}

/// File times from the config's `now` callback.
pub(crate) struct CClock {
    cfg: *const dffs_config,
    now: unsafe extern "C" fn(*const dffs_config) -> i64,
}

impl CClock {
    /// The config's clock, if it has one.
    ///
    /// # Safety
    /// `cfg` must point to a valid `dffs_config` that outlives the clock.
    pub(crate) unsafe fn of(cfg: *const dffs_config) -> Option<CClock> {
        // SAFETY: the caller guarantees `cfg` is valid.
        let now = unsafe { (*cfg).now }?;
        Some(CClock { cfg, now })
    }
}

impl Clock for CClock {
    fn now(&self) -> Time {
        Time {
            // SAFETY: the driver's callback with its own config, valid while mounted.
            secs: unsafe { (self.now)(self.cfg) },
            nsec: 0,
        }
    }
}

/// The core configuration the C config asks for: the preset, adjusted by every non-zero field.
pub(crate) fn core_config(c: &dffs_config) -> Result<Config, Error> {
    let mut cfg = match c.ram_preset {
        DFFS_RAM_DEFAULT => Config::default(),
        DFFS_RAM_SMALLEST => Config::smallest(),
        DFFS_RAM_FAST => Config::fast(),
        _ => return Err(Error::Invalid),
    };
    let set = |field: &mut usize, v: u32| {
        if v != 0 {
            *field = v as usize;
        }
    };
    set(&mut cfg.dir_cache, c.dir_cache);
    set(&mut cfg.map_cache, c.map_cache);
    set(&mut cfg.index_cache, c.index_cache);
    set(&mut cfg.inode_cache, c.inode_cache);
    set(&mut cfg.data_cache, c.data_cache);
    set(&mut cfg.max_dirty, c.max_dirty);
    set(&mut cfg.max_open, c.max_open);
    set(&mut cfg.overlay_extents, c.overlay_extents);
    if c.journal_limit != 0 {
        cfg.journal_limit = c.journal_limit;
    }
    if c.gc_step != 0 {
        cfg.gc_step = c.gc_step;
    }
    if c.mount_flags & !(DFFS_MOUNT_READ_ONLY | DFFS_MOUNT_SYNC) != 0 {
        return Err(Error::Invalid);
    }
    cfg.read_only = c.mount_flags & DFFS_MOUNT_READ_ONLY != 0;
    cfg.sync = c.mount_flags & DFFS_MOUNT_SYNC != 0;
    Ok(cfg)
}
