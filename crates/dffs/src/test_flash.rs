//! A NOR device in RAM for unit tests of the layers that sit on the store (the integration
//! tests use `dffs-testkit`'s devices). Test code only.

use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{EccStatus, Flash, FlashError, FlashKind, Geometry, PagePairing};

/// NOR geometry of `blocks` 4 KiB sectors (256 B pages, byte-programmable).
pub(crate) fn nor_4k(blocks: u32) -> Geometry {
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
        pairing: PagePairing::None,
    }
}

/// A NOR device in RAM (programs AND bits in, erases set them).
pub(crate) struct Nor {
    g: Geometry,
    data: Vec<u8>,
}

impl Flash for Nor {
    fn geometry(&self) -> Geometry {
        self.g
    }
    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        _oob: &mut [u8],
    ) -> core::result::Result<EccStatus, FlashError> {
        let at = page as usize * self.g.page_size as usize + offset as usize;
        let src = self
            .data
            .get(at..at + data.len())
            .ok_or(FlashError::OutOfRange)?;
        data.copy_from_slice(src);
        Ok(EccStatus::Clean)
    }
    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        _oob: &[u8],
    ) -> core::result::Result<(), FlashError> {
        let at = page as usize * self.g.page_size as usize + offset as usize;
        let dst = self
            .data
            .get_mut(at..at + data.len())
            .ok_or(FlashError::OutOfRange)?;
        for (d, s) in dst.iter_mut().zip(data) {
            *d &= *s;
        }
        Ok(())
    }
    fn erase(&mut self, block: u32) -> core::result::Result<(), FlashError> {
        let bs = self.g.block_size() as usize;
        let b = block as usize * bs;
        self.data
            .get_mut(b..b + bs)
            .ok_or(FlashError::OutOfRange)?
            .fill(0xFF);
        Ok(())
    }
    fn is_bad(&mut self, _block: u32) -> core::result::Result<bool, FlashError> {
        Ok(false)
    }
    fn mark_bad(&mut self, _block: u32) -> core::result::Result<(), FlashError> {
        Err(FlashError::Device)
    }
}

impl Nor {
    /// An erased device.
    pub(crate) fn new(g: Geometry) -> Nor {
        Nor {
            g,
            data: vec![0xFF; (g.blocks * g.block_size()) as usize],
        }
    }
}
