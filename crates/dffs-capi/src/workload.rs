//! The standard small workload by which DFFS's RAM is measured, run through this C API exactly
//! as C firmware would call it, on a RAM-backed flash device: format, mount, mkdir, create,
//! write, synced overwrite, read back, rename, stat, list a directory; then a tree as a device
//! keeps one (20 files in 10 directories, written with three files open at once, one renamed
//! into another directory), unmount, mount again, every file read back and every directory
//! listed, unmount. The firmware
//! example (`examples/firmware`), `dffs info --ram` and `scripts/footprint.sh` all run this one
//! workload, so their figures describe the same thing.
//!
//! It owns only the workload, the RAM flash device it runs on and the heap figures it reads from
//! the counting allocator (`heap`). It must never allocate on its own behalf between the
//! measurement points (the device memory is the caller's), never print, and never be called
//! from C (it is a Rust API: nothing here is `#[no_mangle]`).

use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::dir::{dffs_dir_close, dffs_dir_open, dffs_dir_read};
use crate::file::{
    dffs_file_close, dffs_file_open, dffs_file_read, dffs_file_seek, dffs_file_sync,
    dffs_file_write,
};
use crate::fs::{
    dffs_format, dffs_mkdir, dffs_mount, dffs_ram_bytes, dffs_ram_estimate, dffs_rename, dffs_stat,
    dffs_t, dffs_unmount,
};
use crate::heap::{dffs_heap_current, dffs_heap_peak, dffs_heap_reset_peak};
use crate::types::*;

/// Bytes the workload writes to its file (a few NOR pages, not a multiple of one).
const WORKLOAD_FILE_BYTES: usize = 3000;

/// Directories of the tree phase (`/d0` .. `/d9`), files in each (`f0`, `f1`), and the bytes
/// of each file (a few pages, not a multiple of one).
const TREE_DIRS: u8 = 10;
const TREE_FILES: u8 = 2;
const TREE_FILE_BYTES: usize = 700;

/// The figures one run of [`run`] measured. Heap figures are what the library's counting
/// allocator handed out (zero unless this crate's `global-allocator` feature installed it),
/// relative to what was allocated when the run started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// `dffs_ram_estimate` of the configuration: the bound the library plans for.
    pub estimate: usize,
    /// Heap held right after `dffs_mount` returned.
    pub heap_after_mount: usize,
    /// Most heap held at once while formatting (a factory or first-boot step).
    pub heap_peak_format: usize,
    /// Most heap held at once from mount to unmount (both included).
    pub heap_peak: usize,
    /// Heap still held after unmount (a leak if not zero).
    pub heap_after_unmount: usize,
    /// `dffs_ram_bytes` right after mount: the library's own account of what it holds.
    pub ram_bytes_after_mount: usize,
    /// The highest `dffs_ram_bytes` seen after any call while mounted: the library's own
    /// account at its fullest (it leaves out the buffers a call holds only while it runs, so
    /// it stays under `heap_peak` by about those).
    pub ram_bytes_peak: usize,
}

/// The mounted file system whose `dffs_ram_bytes` [`check`] samples after every call (null:
/// none), and the highest value seen.
static SAMPLED: AtomicPtr<dffs_t> = AtomicPtr::new(ptr::null_mut());
static RAM_BYTES_MAX: AtomicUsize = AtomicUsize::new(0);

/// Starts (`fs`) or stops (null) sampling; set only while `fs` is mounted.
fn sample(fs: *mut dffs_t) {
    SAMPLED.store(fs, Ordering::Relaxed);
}

/// Why a run failed: the step and the `DFFS_ERR_*` (or other negative) code it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What the workload was doing.
    pub step: &'static str,
    /// The negative code the call returned (or -1 for a wrong result).
    pub code: i64,
}

/// A flash device in memory the caller owns: bits program from 1 to 0 only, erase sets a whole
/// block to 0xFF, a program stays inside one page. NOR pages lie back to back; a NAND page is
/// followed by its free OOB bytes (the only spare bytes the library reads or writes).
struct RamFlash {
    mem: *mut u8,
    len: usize,
}

fn ram_of(cfg: *const dffs_config) -> &'static mut RamFlash {
    // SAFETY: `context` is the `RamFlash` that `run` set up and keeps alive (on its stack) for
    // as long as the config is in use; the library calls one callback at a time.
    unsafe { &mut *(*cfg).context.cast::<RamFlash>() }
}

fn geometry_of(cfg: *const dffs_config) -> &'static dffs_geometry {
    // SAFETY: the library passes the config it was given (valid for the whole run).
    unsafe { &(*cfg).geometry }
}

/// Bytes one page takes in the device memory.
fn stride(g: &dffs_geometry) -> usize {
    g.page_size as usize
        + if g.kind == DFFS_FLASH_NAND {
            g.oob_free_len as usize
        } else {
            0
        }
}

/// Bytes of memory a device of geometry `g` needs for [`run`].
pub fn device_bytes(g: &dffs_geometry) -> usize {
    stride(g) * g.pages_per_block as usize * g.block_count as usize
}

/// The device ranges of a read or program: (data start, data length, OOB start, OOB length),
/// or `None` if out of range.
fn ranges(
    cfg: *const dffs_config,
    page: u32,
    off: u32,
    len: u32,
    oob_len: u32,
    may_cross: bool,
) -> Option<(usize, usize, usize, usize)> {
    let g = geometry_of(cfg);
    let (off, len, oob_len) = (off as usize, len as usize, oob_len as usize);
    let start = page as usize * stride(g);
    let cross = off + len > g.page_size as usize;
    let nand = g.kind == DFFS_FLASH_NAND;
    if (cross && (nand || !may_cross))
        || (!nand && oob_len > 0)
        || oob_len > g.oob_free_len as usize
    {
        return None;
    }
    let oob = start + g.page_size as usize;
    let end = (start + off + len).max(oob + oob_len);
    (end <= ram_of(cfg).len).then_some((start + off, len, oob, oob_len))
}

unsafe extern "C" fn ram_read(
    cfg: *const dffs_config,
    page: u32,
    off: u32,
    data: *mut c_void,
    len: u32,
    oob: *mut c_void,
    oob_len: u32,
) -> c_int {
    // NOR reads may run on into the following pages.
    let Some((d, dl, o, ol)) = ranges(cfg, page, off, len, oob_len, true) else {
        return DFFS_FLASH_ERR_RANGE;
    };
    let mem = ram_of(cfg).mem;
    // SAFETY: both ranges are inside the device; the buffers hold `dl` and `ol` bytes.
    unsafe {
        if dl > 0 {
            ptr::copy_nonoverlapping(mem.add(d), data.cast(), dl);
        }
        if ol > 0 {
            ptr::copy_nonoverlapping(mem.add(o), oob.cast(), ol);
        }
    }
    DFFS_FLASH_OK
}

/// Programs `src` into `dst` (1 to 0 only); false if a bit would have to go from 0 to 1.
fn program(dst: &mut [u8], src: &[u8]) -> bool {
    if dst.iter().zip(src).any(|(d, s)| d & s != *s) {
        return false;
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d &= *s;
    }
    true
}

unsafe extern "C" fn ram_prog(
    cfg: *const dffs_config,
    page: u32,
    off: u32,
    data: *const c_void,
    len: u32,
    oob: *const c_void,
    oob_len: u32,
) -> c_int {
    let Some((d, dl, o, ol)) = ranges(cfg, page, off, len, oob_len, false) else {
        return if off as u64 + len as u64 > geometry_of(cfg).page_size as u64 {
            DFFS_FLASH_ERR_CROSSES_PAGE
        } else {
            DFFS_FLASH_ERR_RANGE
        };
    };
    let mem = ram_of(cfg).mem;
    // SAFETY: both ranges are inside the device and do not overlap each other or the
    // caller's buffers, which hold `dl` and `ol` bytes.
    let ok = unsafe {
        (dl == 0
            || program(
                core::slice::from_raw_parts_mut(mem.add(d), dl),
                core::slice::from_raw_parts(data.cast::<u8>(), dl),
            ))
            && (ol == 0
                || program(
                    core::slice::from_raw_parts_mut(mem.add(o), ol),
                    core::slice::from_raw_parts(oob.cast::<u8>(), ol),
                ))
    };
    if ok {
        DFFS_FLASH_OK
    } else {
        DFFS_FLASH_ERR_NOT_ERASED
    }
}

unsafe extern "C" fn ram_erase(cfg: *const dffs_config, block: u32) -> c_int {
    let g = geometry_of(cfg);
    let size = stride(g) * g.pages_per_block as usize;
    let ram = ram_of(cfg);
    let start = block as usize * size;
    if block >= g.block_count || start + size > ram.len {
        return DFFS_FLASH_ERR_RANGE;
    }
    // SAFETY: the block lies inside the device.
    unsafe { ptr::write_bytes(ram.mem.add(start), 0xFF, size) };
    DFFS_FLASH_OK
}

/// A NOR geometry for `dffs_config`: `page_size`-byte program pages, `pages_per_block` pages
/// per erase block, `blocks` blocks, byte-programmable, no ECC.
pub fn nor_geometry(page_size: u32, pages_per_block: u32, blocks: u32) -> dffs_geometry {
    dffs_geometry {
        kind: DFFS_FLASH_NOR,
        page_size,
        pages_per_block,
        block_count: blocks,
        program_unit: 1,
        ecc_step: page_size,
        ..dffs_geometry::default()
    }
}

/// The C form of a core geometry (a simulator preset's, for instance).
pub fn c_geometry(g: &dffs::Geometry) -> dffs_geometry {
    dffs_geometry {
        kind: match g.kind {
            dffs::FlashKind::Nand => DFFS_FLASH_NAND,
            dffs::FlashKind::Nor => DFFS_FLASH_NOR,
        },
        page_size: g.page_size,
        oob_size: g.oob_size,
        oob_free_offset: g.oob_free_offset,
        oob_free_len: g.oob_free_len,
        pages_per_block: g.pages_per_block,
        block_count: g.blocks,
        program_unit: g.program_unit,
        nop: g.nop,
        in_order: g.in_order as u32,
        ecc_strength: g.ecc_strength,
        ecc_step: g.ecc_step,
        pairing: g.pairing.code() as u32,
    }
}

fn check(step: &'static str, code: i64) -> Result<i64, Failure> {
    let fs = SAMPLED.load(Ordering::Relaxed);
    if !fs.is_null() {
        // SAFETY: `run` sets it to a handle only while that handle is mounted. The count
        // allocates nothing, so it leaves the heap figures alone.
        let held = unsafe { dffs_ram_bytes(fs) };
        if held > 0 {
            RAM_BYTES_MAX.fetch_max(held as usize, Ordering::Relaxed);
        }
    }
    if code < 0 {
        Err(Failure { step, code })
    } else {
        Ok(code)
    }
}

fn expect(step: &'static str, ok: bool) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err(Failure { step, code: -1 })
    }
}

fn path(p: &'static CStr) -> *const c_char {
    p.as_ptr()
}

/// The byte the workload writes at `i` (a pattern that no off-by-one reads back unchanged).
fn pattern(i: usize) -> u8 {
    (i * 7 + i / 251) as u8
}

/// Runs the workload on `device` (erased or not: it is formatted first), a NOR or NAND flash
/// of `geometry` held in RAM ([`device_bytes`] long; NAND without bad blocks or bit errors),
/// with the RAM preset `ram_preset` (`DFFS_RAM_SMALLEST`,
/// `DFFS_RAM_DEFAULT` or `DFFS_RAM_FAST`). Heap figures need this crate's counting allocator
/// and a caller that allocates nothing on another thread meanwhile.
pub fn run(
    device: &mut [u8],
    geometry: dffs_geometry,
    ram_preset: u32,
) -> Result<Figures, Failure> {
    if device.len() < device_bytes(&geometry) {
        return Err(Failure {
            step: "device size",
            code: DFFS_ERR_INVAL as i64,
        });
    }
    let mut ram = RamFlash {
        mem: device.as_mut_ptr(),
        len: device.len(),
    };
    let cfg = dffs_config {
        context: (&mut ram as *mut RamFlash).cast(),
        read: Some(ram_read),
        prog: Some(ram_prog),
        erase: Some(ram_erase),
        is_bad: None,
        mark_bad: None,
        now: None,
        geometry,
        ram_preset,
        dir_cache: 0,
        map_cache: 0,
        index_cache: 0,
        inode_cache: 0,
        data_cache: 0,
        max_dirty: 0,
        max_open: 0,
        overlay_extents: 0,
        journal_limit: 0,
        gc_step: 0,
        mount_flags: 0,
        fs_id: 0,
    };
    let mut fig = Figures::default();
    // SAFETY (every call below): `cfg` and `ram` outlive the mount, handles are used only
    // while mounted, paths are NUL-terminated and buffers are as long as the sizes given.
    unsafe {
        fig.estimate = check("ram estimate", dffs_ram_estimate(&cfg))? as usize;
        let base = dffs_heap_current();
        dffs_heap_reset_peak();
        check("format", dffs_format(&cfg) as i64)?;
        fig.heap_peak_format = dffs_heap_peak().saturating_sub(base);
        dffs_heap_reset_peak();
        let mut fs: *mut dffs_t = ptr::null_mut();
        RAM_BYTES_MAX.store(0, Ordering::Relaxed);
        check("mount", dffs_mount(&mut fs, &cfg) as i64)?;
        fig.heap_after_mount = dffs_heap_current().saturating_sub(base);
        sample(fs);
        let steps = body(fs);
        let mounted = steps.and_then(|held| {
            fig.ram_bytes_after_mount = held as usize;
            tree(fs)
        });
        sample(ptr::null_mut());
        mounted?;
        check("unmount", dffs_unmount(fs) as i64)?;
        check("remount", dffs_mount(&mut fs, &cfg) as i64)?;
        sample(fs);
        let mounted = check_tree(fs);
        sample(ptr::null_mut());
        mounted?;
        check("unmount", dffs_unmount(fs) as i64)?;
        fig.ram_bytes_peak = RAM_BYTES_MAX.load(Ordering::Relaxed);
        fig.heap_peak = dffs_heap_peak().saturating_sub(base);
        fig.heap_after_unmount = dffs_heap_current().saturating_sub(base);
    }
    Ok(fig)
}

/// The mounted part of the workload; returns `dffs_ram_bytes` right after mount.
unsafe fn body(fs: *mut dffs_t) -> Result<i64, Failure> {
    // SAFETY: see `run`.
    unsafe {
        let ram_bytes = check("ram bytes", dffs_ram_bytes(fs))?;
        check("mkdir", dffs_mkdir(fs, path(c"/log")) as i64)?;
        let mut f = dffs_file_t::default();
        let flags = DFFS_O_RDWR | DFFS_O_CREAT | DFFS_O_EXCL;
        check(
            "create",
            dffs_file_open(fs, &mut f, path(c"/log/boot.txt"), flags) as i64,
        )?;
        let mut chunk = [0u8; 256];
        let mut at = 0;
        while at < WORKLOAD_FILE_BYTES {
            let n = chunk.len().min(WORKLOAD_FILE_BYTES - at);
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(at + i);
            }
            let w = check(
                "write",
                dffs_file_write(fs, &mut f, chunk.as_ptr().cast(), n as u32) as i64,
            )?;
            expect("short write", w as usize == n)?;
            at += n;
        }
        check("sync", dffs_file_sync(fs, &mut f) as i64)?;
        // A synced overwrite in the middle, as a log that patches its header would do.
        check("seek", dffs_file_seek(fs, &mut f, 1000, DFFS_SEEK_SET))?;
        let patch = [0xA5u8; 100];
        check(
            "overwrite",
            dffs_file_write(fs, &mut f, patch.as_ptr().cast(), 100) as i64,
        )?;
        check("sync", dffs_file_sync(fs, &mut f) as i64)?;
        check("close", dffs_file_close(fs, &mut f) as i64)?;
        check(
            "rename",
            dffs_rename(fs, path(c"/log/boot.txt"), path(c"/log/boot.old")) as i64,
        )?;
        let mut info: dffs_info = core::mem::zeroed();
        check(
            "stat",
            dffs_stat(fs, path(c"/log/boot.old"), &mut info) as i64,
        )?;
        expect("stat size", info.size == WORKLOAD_FILE_BYTES as u64)?;
        check(
            "reopen",
            dffs_file_open(fs, &mut f, path(c"/log/boot.old"), DFFS_O_RDONLY) as i64,
        )?;
        let mut at = 0;
        loop {
            let n = check(
                "read",
                dffs_file_read(fs, &mut f, chunk.as_mut_ptr().cast(), 256) as i64,
            )? as usize;
            if n == 0 {
                break;
            }
            for (i, &b) in chunk[..n].iter().enumerate() {
                let want = if (1000..1100).contains(&(at + i)) {
                    0xA5
                } else {
                    pattern(at + i)
                };
                expect("read back", b == want)?;
            }
            at += n;
        }
        expect("read length", at == WORKLOAD_FILE_BYTES)?;
        check("close", dffs_file_close(fs, &mut f) as i64)?;
        let mut d = dffs_dir_t::default();
        check("opendir", dffs_dir_open(fs, &mut d, path(c"/log")) as i64)?;
        let mut names = 0;
        while check("readdir", dffs_dir_read(fs, &mut d, &mut info) as i64)? > 0 {
            let name = CStr::from_ptr(info.name.as_ptr()).to_bytes();
            if name != b"." && name != b".." {
                expect("listed name", name == b"boot.old")?;
                names += 1;
            }
        }
        expect("listed count", names == 1)?;
        check("closedir", dffs_dir_close(fs, &mut d) as i64)?;
        Ok(ram_bytes)
    }
}

/// `/dD` (`name` empty) or `/dD/NAME` as a NUL-terminated path in `buf` (`name` at most 11
/// bytes).
fn tree_path(buf: &mut [u8; 16], dir: u8, name: &[u8]) -> *const c_char {
    buf[..3].copy_from_slice(&[b'/', b'd', b'0' + dir]);
    let mut n = 3;
    if !name.is_empty() {
        buf[3] = b'/';
        buf[4..4 + name.len()].copy_from_slice(name);
        n = 4 + name.len();
    }
    buf[n] = 0;
    buf.as_ptr().cast()
}

/// The byte at `i` of tree file `k` (each file its own pattern).
fn tree_byte(k: usize, i: usize) -> u8 {
    pattern(i + 131 * k) ^ k as u8
}

/// The tree phase: `/d0`..`/d9` with `f0`, `f1` each, written in 256 B pieces with three files
/// open at once and each synced; then `/d3/f1` renamed to `/d7/moved`.
unsafe fn tree(fs: *mut dffs_t) -> Result<(), Failure> {
    let mut buf = [0u8; 16];
    // SAFETY: see `run`.
    unsafe {
        for d in 0..TREE_DIRS {
            check(
                "tree mkdir",
                dffs_mkdir(fs, tree_path(&mut buf, d, b"")) as i64,
            )?;
        }
        let total = (TREE_DIRS * TREE_FILES) as usize;
        let mut open = [
            dffs_file_t::default(),
            dffs_file_t::default(),
            dffs_file_t::default(),
        ];
        let mut chunk = [0u8; 256];
        let mut k = 0;
        while k < total {
            let group = open.len().min(total - k);
            for (j, f) in open[..group].iter_mut().enumerate() {
                let (d, i) = ((k + j) / TREE_FILES as usize, (k + j) % TREE_FILES as usize);
                let p = tree_path(&mut buf, d as u8, &[b'f', b'0' + i as u8]);
                let flags = DFFS_O_WRONLY | DFFS_O_CREAT | DFFS_O_EXCL;
                check("tree create", dffs_file_open(fs, f, p, flags) as i64)?;
            }
            let mut at = 0;
            while at < TREE_FILE_BYTES {
                let n = chunk.len().min(TREE_FILE_BYTES - at);
                for (j, f) in open[..group].iter_mut().enumerate() {
                    for (i, b) in chunk[..n].iter_mut().enumerate() {
                        *b = tree_byte(k + j, at + i);
                    }
                    let w = dffs_file_write(fs, f, chunk.as_ptr().cast(), n as u32) as i64;
                    expect("tree short write", check("tree write", w)? as usize == n)?;
                }
                at += n;
            }
            for f in open[..group].iter_mut() {
                check("tree sync", dffs_file_sync(fs, f) as i64)?;
                check("tree close", dffs_file_close(fs, f) as i64)?;
            }
            k += group;
        }
        let mut to = [0u8; 16];
        check(
            "tree rename",
            dffs_rename(
                fs,
                tree_path(&mut buf, 3, b"f1"),
                tree_path(&mut to, 7, b"moved"),
            ) as i64,
        )?;
    }
    Ok(())
}

/// After the remount: every tree file reads back whole, each directory lists its files (the
/// renamed one where it went), and the first phase's file is still there.
unsafe fn check_tree(fs: *mut dffs_t) -> Result<(), Failure> {
    let mut buf = [0u8; 16];
    let mut chunk = [0u8; 256];
    // SAFETY: see `run`.
    unsafe {
        for k in 0..(TREE_DIRS * TREE_FILES) as usize {
            let (d, i) = (
                (k / TREE_FILES as usize) as u8,
                (k % TREE_FILES as usize) as u8,
            );
            let p = if (d, i) == (3, 1) {
                tree_path(&mut buf, 7, b"moved")
            } else {
                tree_path(&mut buf, d, &[b'f', b'0' + i])
            };
            let mut f = dffs_file_t::default();
            check(
                "tree open",
                dffs_file_open(fs, &mut f, p, DFFS_O_RDONLY) as i64,
            )?;
            let mut at = 0;
            loop {
                let n = dffs_file_read(fs, &mut f, chunk.as_mut_ptr().cast(), 256) as i64;
                let n = check("tree read", n)? as usize;
                if n == 0 {
                    break;
                }
                for (j, &b) in chunk[..n].iter().enumerate() {
                    expect("tree read back", b == tree_byte(k, at + j))?;
                }
                at += n;
            }
            expect("tree file length", at == TREE_FILE_BYTES)?;
            check("tree close", dffs_file_close(fs, &mut f) as i64)?;
        }
        let mut info: dffs_info = core::mem::zeroed();
        for d in 0..TREE_DIRS {
            let mut dir = dffs_dir_t::default();
            let p = tree_path(&mut buf, d, b"");
            check("tree opendir", dffs_dir_open(fs, &mut dir, p) as i64)?;
            let mut names = 0;
            while check(
                "tree readdir",
                dffs_dir_read(fs, &mut dir, &mut info) as i64,
            )? > 0
            {
                let name = CStr::from_ptr(info.name.as_ptr()).to_bytes();
                if name != b"." && name != b".." {
                    names += 1;
                }
            }
            check("tree closedir", dffs_dir_close(fs, &mut dir) as i64)?;
            let want = match d {
                3 => 1,
                7 => 3,
                _ => TREE_FILES as usize,
            };
            expect("tree listed count", names == want)?;
        }
        check(
            "stat after remount",
            dffs_stat(fs, path(c"/log/boot.old"), &mut info) as i64,
        )?;
        expect(
            "size after remount",
            info.size == WORKLOAD_FILE_BYTES as u64,
        )?;
    }
    Ok(())
}
