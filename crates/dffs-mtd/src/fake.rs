//! An MTD device in memory that answers as the kernel's MTD layer does, for tests.
//!
//! Owns [`RamMtd`]: NAND pages with a raw OOB area whose free bytes sit at one offset (auto
//! placement packs them there), programs that AND into the page as the chip does (the kernel
//! pads a partial-page program with ones), sub-page alignment (`-EINVAL`), bad-block marks, and
//! injected faults: a read that the ECC corrected (`-EUCLEAN`) or could not correct
//! (`-EBADMSG`), a program or erase that fails (`-EIO`). An `MTD_RAM` device stores bytes as
//! given (as mtdram and block2mtd do). It must never be used for anything but tests and
//! examples: nothing here is persistent.

use std::collections::{BTreeMap, BTreeSet};

use crate::{MtdInfo, MtdIo, MtdType, ReadEcc, MTD_WRITEABLE};

/// An in-memory MTD device.
pub struct RamMtd {
    info: MtdInfo,
    data: Vec<u8>,
    oob: Vec<u8>,
    bad: BTreeSet<u64>,
    read_faults: BTreeMap<u64, ReadEcc>,
    oob_flips: BTreeSet<u64>,
    fail_programs: BTreeSet<u64>,
    fail_erases: BTreeSet<u64>,
    /// Kernel calls served.
    pub calls: u64,
}

impl RamMtd {
    /// A NAND device like nandsim's 128 MiB chip cut to `blocks` blocks: 2 KiB pages, 64 B
    /// OOB with 38 free bytes at offset 2, 512 B sub-pages, 1-bit ECC per 256 B.
    pub fn nand(blocks: u32) -> RamMtd {
        RamMtd::new(MtdInfo {
            kind: MtdType::Nand,
            flags: MTD_WRITEABLE,
            size: blocks as u64 * 128 * 1024,
            erasesize: 128 * 1024,
            writesize: 2048,
            oobsize: 64,
            oobavail: Some(38),
            oob_free_offset: 2,
            subpagesize: Some(512),
            ecc_strength: 1,
            ecc_step: 256,
            name: "fake nand".into(),
        })
    }

    /// A RAM-backed MTD (as mtdram or block2mtd) of `blocks` erase blocks of `erasesize`.
    pub fn ram(blocks: u32, erasesize: u32) -> RamMtd {
        RamMtd::new(MtdInfo {
            kind: MtdType::Ram,
            flags: MTD_WRITEABLE | 0x800 | 0x1000,
            size: blocks as u64 * erasesize as u64,
            erasesize,
            writesize: 1,
            oobsize: 0,
            oobavail: Some(0),
            oob_free_offset: 0,
            subpagesize: None,
            ecc_strength: 0,
            ecc_step: 0,
            name: "fake ram".into(),
        })
    }

    /// A device as `info` describes it, erased.
    pub fn new(info: MtdInfo) -> RamMtd {
        let pages = if info.writesize > 0 {
            info.size / info.writesize as u64
        } else {
            0
        };
        RamMtd {
            data: vec![0xFF; info.size as usize],
            oob: vec![0xFF; (pages * info.oobsize as u64) as usize],
            info,
            bad: BTreeSet::new(),
            read_faults: BTreeMap::new(),
            oob_flips: BTreeSet::new(),
            fail_programs: BTreeSet::new(),
            fail_erases: BTreeSet::new(),
            calls: 0,
        }
    }

    /// What the device reports (`MEMGETINFO` and sysfs).
    pub fn device_info(&self) -> &MtdInfo {
        &self.info
    }

    /// What the device reports, to change before use (a device with other properties).
    pub fn info_mut(&mut self) -> &mut MtdInfo {
        &mut self.info
    }

    /// The next read of the page holding `addr` reports `ecc` (the data itself is intact for
    /// a corrected read and garbled for an uncorrectable one).
    pub fn inject_read(&mut self, addr: u64, ecc: ReadEcc) {
        self.read_faults.insert(self.page_of(addr), ecc);
    }

    /// The next read of the page holding `addr` returns its free OOB bytes with one bit
    /// flipped and no ECC report: the software ECC Linux uses on many controllers covers the
    /// data area only (nandsim's `bitflips=` does this).
    pub fn flip_free_oob_next_read(&mut self, addr: u64) {
        self.oob_flips.insert(self.page_of(addr));
    }

    /// The next program of the page holding `addr` fails with `-EIO`.
    pub fn fail_program(&mut self, addr: u64) {
        self.fail_programs.insert(self.page_of(addr));
    }

    /// The next erase of the block at `addr` fails with `-EIO`.
    pub fn fail_erase(&mut self, addr: u64) {
        self.fail_erases
            .insert(addr - addr % self.info.erasesize as u64);
    }

    /// Whether the block holding `addr` is marked bad.
    pub fn marked_bad(&self, addr: u64) -> bool {
        self.bad
            .contains(&(addr - addr % self.info.erasesize as u64))
    }

    /// The raw OOB area of the page holding `addr`.
    pub fn raw_oob(&self, addr: u64) -> &[u8] {
        let o = (self.page_of(addr) * self.info.oobsize as u64) as usize;
        &self.oob[o..o + self.info.oobsize as usize]
    }

    /// Stores one page as a raw dump holds it (data, then the whole OOB area), the way
    /// `nandwrite --oob` puts an image onto an erased chip.
    pub fn load_raw_page(&mut self, page: u64, raw: &[u8]) {
        let w = self.info.writesize as usize;
        let o = self.info.oobsize as usize;
        let d = page as usize * w;
        self.data[d..d + w].copy_from_slice(&raw[..w]);
        self.oob[page as usize * o..(page as usize + 1) * o].copy_from_slice(&raw[w..w + o]);
    }

    fn page_of(&self, addr: u64) -> u64 {
        addr / self.info.writesize.max(1) as u64
    }

    fn is_nand(&self) -> bool {
        matches!(self.info.kind, MtdType::Nand | MtdType::MlcNand)
    }

    fn free_range(&self, page: u64, len: usize) -> Result<std::ops::Range<usize>, i32> {
        if len > self.info.oobavail.unwrap_or(0) as usize {
            return Err(libc::EINVAL);
        }
        let o = (page * self.info.oobsize as u64) as usize + self.info.oob_free_offset as usize;
        Ok(o..o + len)
    }
}

impl MtdIo for RamMtd {
    fn info(&self) -> &MtdInfo {
        &self.info
    }

    fn read(&mut self, start: u64, data: &mut [u8], oob: &mut [u8]) -> Result<ReadEcc, i32> {
        self.calls += 1;
        let end = start + data.len() as u64;
        if end > self.info.size {
            return Err(libc::EINVAL);
        }
        data.copy_from_slice(&self.data[start as usize..end as usize]);
        if !oob.is_empty() {
            let r = self.free_range(self.page_of(start), oob.len())?;
            oob.copy_from_slice(&self.oob[r]);
            if self.oob_flips.remove(&self.page_of(start)) {
                oob[oob.len() / 2] ^= 0x10;
            }
        }
        match self.read_faults.remove(&self.page_of(start)) {
            Some(ecc) => {
                if ecc.uncorrectable > 0 {
                    for b in data.iter_mut().step_by(97) {
                        *b ^= 0x5A;
                    }
                }
                Ok(ecc)
            }
            None => Ok(ReadEcc::default()),
        }
    }

    fn write(&mut self, start: u64, data: &[u8], oob: &[u8]) -> Result<(), i32> {
        self.calls += 1;
        let end = start + data.len() as u64;
        if end > self.info.size {
            return Err(libc::EINVAL);
        }
        if self.is_nand() {
            let sub = self.info.subpagesize.unwrap_or(self.info.writesize) as u64;
            if start % sub != 0 || data.len() as u64 % sub != 0 {
                return Err(libc::EINVAL);
            }
            let page = self.page_of(start);
            if (end.max(start + 1) - 1) / self.info.writesize as u64 != page {
                return Err(libc::EINVAL);
            }
            if self.fail_programs.remove(&page) {
                return Err(libc::EIO);
            }
            for (d, s) in self.data[start as usize..end as usize].iter_mut().zip(data) {
                *d &= *s;
            }
            if !oob.is_empty() {
                let r = self.free_range(page, oob.len())?;
                for (d, s) in self.oob[r].iter_mut().zip(oob) {
                    *d &= *s;
                }
            }
        } else {
            self.data[start as usize..end as usize].copy_from_slice(data);
        }
        Ok(())
    }

    fn erase(&mut self, start: u64, len: u64) -> Result<(), i32> {
        self.calls += 1;
        let es = self.info.erasesize as u64;
        if start % es != 0 || len % es != 0 || start + len > self.info.size {
            return Err(libc::EINVAL);
        }
        if self.bad.contains(&start) {
            return Err(libc::EIO);
        }
        if self.fail_erases.remove(&start) {
            return Err(libc::EIO);
        }
        self.data[start as usize..(start + len) as usize].fill(0xFF);
        if self.is_nand() {
            let p0 = self.page_of(start) as usize * self.info.oobsize as usize;
            let n = (len / self.info.writesize as u64) as usize * self.info.oobsize as usize;
            self.oob[p0..p0 + n].fill(0xFF);
        }
        Ok(())
    }

    fn is_bad(&mut self, start: u64) -> Result<bool, i32> {
        self.calls += 1;
        Ok(self.is_nand() && self.bad.contains(&start))
    }

    fn mark_bad(&mut self, start: u64) -> Result<(), i32> {
        self.calls += 1;
        if !self.is_nand() {
            return Err(libc::EOPNOTSUPP);
        }
        self.bad.insert(start);
        Ok(())
    }
}
