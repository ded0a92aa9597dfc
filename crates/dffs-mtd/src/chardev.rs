//! The kernel side: an MTD character device (`/dev/mtdN`, major 90) driven through its ioctls.
//!
//! Owns the `mtd-abi.h` structures and request numbers DFFS uses, the sysfs attributes that
//! `MEMGETINFO` leaves out (sub-page size, free OOB bytes, ECC strength and step), and the
//! mapping of each [`MtdIo`] call to one kernel call. It must never interpret results beyond
//! errno and the ECC counts (that is [`crate::MtdFlash`]'s job) and never write on its own.
//!
//! Request numbers use the generic Linux `_IOC` encoding (x86, Arm, RISC-V); the structures
//! are laid out as the kernel's UAPI header lays them out on those targets.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::{MtdInfo, MtdIo, MtdType, ReadEcc};

/// The character-device major number of MTD devices.
pub const MTD_CHAR_MAJOR: u32 = 90;

const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | ((b'M' as u64) << 8) | nr
}
const W: u64 = 1;
const R: u64 = 2;

#[repr(C)]
#[derive(Default)]
struct InfoUser {
    kind: u8,
    flags: u32,
    size: u32,
    erasesize: u32,
    writesize: u32,
    oobsize: u32,
    padding: u64,
}

#[repr(C)]
struct EraseUser64 {
    start: u64,
    length: u64,
}

#[repr(C)]
struct WriteReq {
    start: u64,
    len: u64,
    ooblen: u64,
    usr_data: u64,
    usr_oob: u64,
    mode: u8,
    padding: [u8; 7],
}

#[repr(C)]
#[derive(Default)]
struct ReadReqEccStats {
    uncorrectable_errors: u32,
    corrected_bitflips: u32,
    max_bitflips: u32,
}

#[repr(C)]
struct ReadReq {
    start: u64,
    len: u64,
    ooblen: u64,
    usr_data: u64,
    usr_oob: u64,
    mode: u8,
    padding: [u8; 7],
    ecc_stats: ReadReqEccStats,
}

#[repr(C)]
#[derive(Default)]
struct EccStats {
    corrected: u32,
    failed: u32,
    badblocks: u32,
    bbtblocks: u32,
}

#[repr(C)]
struct OobBuf64 {
    start: u64,
    pad: u32,
    length: u32,
    usr_ptr: u64,
}

#[repr(C)]
struct EccLayoutUser {
    eccbytes: u32,
    eccpos: [u32; 64],
    oobavail: u32,
    oobfree: [[u32; 2]; 8],
}

/// A buffer's address (`ptr`, `len` bytes) as the kernel's `__u64` user pointer; an empty
/// buffer is a null pointer (the kernel then skips that part). Callers pass `as_mut_ptr()`
/// for buffers the kernel fills, so the pointer may be written through.
fn user_ptr(ptr: *const u8, len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ptr as u64
    }
}

const MEMGETINFO: u64 = ioc(R, 1, std::mem::size_of::<InfoUser>() as u64);
const MEMGETBADBLOCK: u64 = ioc(W, 11, 8);
const MEMSETBADBLOCK: u64 = ioc(W, 12, 8);
const ECCGETLAYOUT: u64 = ioc(R, 17, std::mem::size_of::<EccLayoutUser>() as u64);
const ECCGETSTATS: u64 = ioc(R, 18, std::mem::size_of::<EccStats>() as u64);
const MEMERASE64: u64 = ioc(W, 20, std::mem::size_of::<EraseUser64>() as u64);
const MEMREADOOB64: u64 = ioc(R | W, 22, std::mem::size_of::<OobBuf64>() as u64);
const MEMWRITE: u64 = ioc(R | W, 24, std::mem::size_of::<WriteReq>() as u64);
const MEMREAD: u64 = ioc(R | W, 26, std::mem::size_of::<ReadReq>() as u64);

/// `MTD_OPS_AUTO_OOB`: OOB bytes go to (come from) the free OOB bytes, packed.
const MTD_OPS_AUTO_OOB: u8 = 1;

/// The kernel's ECC counters for the whole device (`ECCGETSTATS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceEccStats {
    /// Bit flips corrected since the device appeared.
    pub corrected: u32,
    /// Uncorrectable ECC failures.
    pub failed: u32,
    /// Blocks marked bad.
    pub badblocks: u32,
    /// Blocks holding bad-block tables.
    pub bbtblocks: u32,
}

/// An open MTD character device.
pub struct CharDev {
    file: File,
    path: PathBuf,
    info: MtdInfo,
    /// `MEMREAD` is missing (kernels before 5.18): reads use `pread`, ECC counters and
    /// `MEMREADOOB64`.
    no_memread: bool,
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One ioctl with a pointer argument; `Ok(return value)` or `Err(errno)`.
fn ioctl_ptr<T>(file: &File, req: u64, arg: &mut T) -> Result<i32, i32> {
    // SAFETY: `arg` is a live, exclusively borrowed value of the #[repr(C)] type the request
    // number encodes (its size is part of `req`); the kernel reads/writes only that much.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), req as _, arg as *mut T) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

fn sysfs_u32(dir: &Path, name: &str) -> Option<u32> {
    std::fs::read_to_string(dir.join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl CharDev {
    /// Opens the MTD character device at `path` and reads what the kernel says about it.
    pub fn open(path: &Path, writable: bool) -> Result<CharDev, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
        if !meta.file_type().is_char_device() {
            return Err(format!("{shown}: not a character device"));
        }
        let rdev = meta.rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        if major != MTD_CHAR_MAJOR {
            return Err(format!(
                "{shown}: not an MTD device (character device {major}:{minor}; MTD is major \
                 {MTD_CHAR_MAJOR})"
            ));
        }
        if writable && minor % 2 == 1 {
            return Err(format!(
                "{shown}: is the read-only node of an MTD device (use /dev/mtd{})",
                minor / 2
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| format!("{shown}: {e}"))?;
        let mut iu = InfoUser::default();
        ioctl_ptr(&file, MEMGETINFO, &mut iu).map_err(|e| {
            format!(
                "{shown}: MEMGETINFO: {}",
                std::io::Error::from_raw_os_error(e)
            )
        })?;
        let sys = PathBuf::from(format!("/sys/dev/char/{major}:{}", minor & !1));
        let kind = MtdType::from_code(iu.kind);
        let nand = matches!(kind, MtdType::Nand | MtdType::MlcNand);
        let mut oobavail = None;
        let mut oob_free_offset = 0;
        if nand {
            // SAFETY: all-zero is a valid value of this plain-integer struct.
            let mut lay: EccLayoutUser = unsafe { std::mem::zeroed() };
            if ioctl_ptr(&file, ECCGETLAYOUT, &mut lay).is_ok() {
                oobavail = Some(lay.oobavail);
                if let Some(f) = lay.oobfree.iter().find(|f| f[1] > 0) {
                    oob_free_offset = f[0];
                }
            }
            if oobavail.is_none() {
                oobavail = sysfs_u32(&sys, "oobavail");
            }
        } else {
            oobavail = Some(0);
        }
        let name = std::fs::read_to_string(sys.join("name"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let info = MtdInfo {
            kind,
            flags: iu.flags,
            size: iu.size as u64,
            erasesize: iu.erasesize,
            writesize: iu.writesize,
            oobsize: iu.oobsize,
            oobavail,
            oob_free_offset,
            subpagesize: if nand {
                sysfs_u32(&sys, "subpagesize")
            } else {
                None
            },
            ecc_strength: sysfs_u32(&sys, "ecc_strength").unwrap_or(0),
            ecc_step: sysfs_u32(&sys, "ecc_step_size").unwrap_or(0),
            name,
        };
        Ok(CharDev {
            file,
            path: path.to_path_buf(),
            info,
            no_memread: false,
        })
    }

    /// The device node.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The kernel's ECC and bad-block counters for the device (`ECCGETSTATS`).
    pub fn ecc_stats(&self) -> Result<DeviceEccStats, i32> {
        let mut s = EccStats::default();
        ioctl_ptr(&self.file, ECCGETSTATS, &mut s)?;
        Ok(DeviceEccStats {
            corrected: s.corrected,
            failed: s.failed,
            badblocks: s.badblocks,
            bbtblocks: s.bbtblocks,
        })
    }

    /// Before `MEMREAD`: `pread` for data, the device's ECC counters before and after for
    /// the status, `MEMREADOOB64` for the free OOB bytes (contiguous after the offset).
    fn read_old(&mut self, start: u64, data: &mut [u8], oob: &mut [u8]) -> Result<ReadEcc, i32> {
        let before = self.ecc_stats().unwrap_or_default();
        if !data.is_empty() {
            self.file
                .read_exact_at(data, start)
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        }
        if !oob.is_empty() {
            let page = start - start % self.info.writesize.max(1) as u64;
            let mut req = OobBuf64 {
                start: page + self.info.oob_free_offset as u64,
                pad: 0,
                length: oob.len() as u32,
                usr_ptr: oob.as_mut_ptr() as u64,
            };
            match ioctl_ptr(&self.file, MEMREADOOB64, &mut req) {
                Ok(_) | Err(libc::EUCLEAN) => {}
                Err(e) => return Err(e),
            }
        }
        let after = self.ecc_stats().unwrap_or_default();
        Ok(ReadEcc {
            uncorrectable: after.failed.wrapping_sub(before.failed),
            corrected_bitflips: after.corrected.wrapping_sub(before.corrected),
            max_bitflips: after.corrected.wrapping_sub(before.corrected),
        })
    }
}

impl MtdIo for CharDev {
    fn info(&self) -> &MtdInfo {
        &self.info
    }

    fn read(&mut self, start: u64, data: &mut [u8], oob: &mut [u8]) -> Result<ReadEcc, i32> {
        let nand = matches!(self.info.kind, MtdType::Nand | MtdType::MlcNand);
        if !nand {
            self.file
                .read_exact_at(data, start)
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
            return Ok(ReadEcc::default());
        }
        if self.no_memread {
            return self.read_old(start, data, oob);
        }
        let mut req = ReadReq {
            start,
            len: data.len() as u64,
            ooblen: oob.len() as u64,
            usr_data: user_ptr(data.as_mut_ptr(), data.len()),
            usr_oob: user_ptr(oob.as_mut_ptr(), oob.len()),
            mode: MTD_OPS_AUTO_OOB,
            padding: [0; 7],
            ecc_stats: ReadReqEccStats::default(),
        };
        let r = ioctl_ptr(&self.file, MEMREAD, &mut req);
        let s = &req.ecc_stats;
        let mut ecc = ReadEcc {
            uncorrectable: s.uncorrectable_errors,
            corrected_bitflips: s.corrected_bitflips,
            max_bitflips: s.max_bitflips,
        };
        match r {
            Ok(_) => Ok(ecc),
            // The return value is the verdict even where a driver leaves the counts at zero.
            Err(libc::EBADMSG) => {
                ecc.uncorrectable = ecc.uncorrectable.max(1);
                Ok(ecc)
            }
            Err(libc::EUCLEAN) => {
                ecc.max_bitflips = ecc.max_bitflips.max(1);
                Ok(ecc)
            }
            Err(libc::ENOTTY) | Err(libc::EOPNOTSUPP) => {
                self.no_memread = true;
                self.read_old(start, data, oob)
            }
            Err(e) => Err(e),
        }
    }

    fn write(&mut self, start: u64, data: &[u8], oob: &[u8]) -> Result<(), i32> {
        let nand = matches!(self.info.kind, MtdType::Nand | MtdType::MlcNand);
        if !nand {
            return self
                .file
                .write_all_at(data, start)
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
        }
        let mut req = WriteReq {
            start,
            len: data.len() as u64,
            ooblen: oob.len() as u64,
            usr_data: user_ptr(data.as_ptr(), data.len()),
            usr_oob: user_ptr(oob.as_ptr(), oob.len()),
            mode: MTD_OPS_AUTO_OOB,
            padding: [0; 7],
        };
        ioctl_ptr(&self.file, MEMWRITE, &mut req).map(|_| ())
    }

    fn erase(&mut self, start: u64, len: u64) -> Result<(), i32> {
        let mut req = EraseUser64 { start, length: len };
        ioctl_ptr(&self.file, MEMERASE64, &mut req).map(|_| ())
    }

    fn is_bad(&mut self, start: u64) -> Result<bool, i32> {
        let mut off = start as i64;
        match ioctl_ptr(&self.file, MEMGETBADBLOCK, &mut off) {
            Ok(r) => Ok(r > 0),
            Err(libc::EOPNOTSUPP) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn mark_bad(&mut self, start: u64) -> Result<(), i32> {
        let mut off = start as i64;
        ioctl_ptr(&self.file, MEMSETBADBLOCK, &mut off).map(|_| ())
    }
}
