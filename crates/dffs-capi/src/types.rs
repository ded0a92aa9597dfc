//! The C-visible types and constants of `dffs.h`: error codes, flags, the configuration with
//! its driver callbacks and geometry, and the structs the caller allocates.
//!
//! Everything here is `#[repr(C)]` plain data or a constant; it must never hold behaviour (the
//! functions live in `fs`, `file` and `dir`) and its layout must never depend on a feature.

use core::ffi::{c_char, c_int, c_void};

// ----- error codes (negative errno values, as Linux numbers them) ----------------------------

/// Success.
pub const DFFS_ERR_OK: c_int = 0;
/// Operation not permitted (`dffs_link` of a directory).
pub const DFFS_ERR_PERM: c_int = -1;
/// No such file or directory.
pub const DFFS_ERR_NOENT: c_int = -2;
/// Input/output error: the flash failed, the data on it is corrupted, or the device lost power
/// (remount). Also returned after a library bug was caught (hosted builds only).
pub const DFFS_ERR_IO: c_int = -5;
/// Bad file handle: not open, already closed, or not opened for this operation.
pub const DFFS_ERR_BADF: c_int = -9;
/// The configured RAM budget cannot hold what the operation needs.
pub const DFFS_ERR_NOMEM: c_int = -12;
/// Permission denied.
pub const DFFS_ERR_ACCES: c_int = -13;
/// Busy: e.g. a transaction is already open.
pub const DFFS_ERR_BUSY: c_int = -16;
/// The name already exists.
pub const DFFS_ERR_EXIST: c_int = -17;
/// A path component is not a directory.
pub const DFFS_ERR_NOTDIR: c_int = -20;
/// The target is a directory.
pub const DFFS_ERR_ISDIR: c_int = -21;
/// Invalid argument, or no DFFS file system on the device.
pub const DFFS_ERR_INVAL: c_int = -22;
/// Too many open files.
pub const DFFS_ERR_MFILE: c_int = -24;
/// File too large.
pub const DFFS_ERR_FBIG: c_int = -27;
/// No space left on the device.
pub const DFFS_ERR_NOSPC: c_int = -28;
/// Read-only file system.
pub const DFFS_ERR_ROFS: c_int = -30;
/// The file has as many names as it can hold (`dffs_link`).
pub const DFFS_ERR_MLINK: c_int = -31;
/// A name is longer than `DFFS_NAME_MAX` bytes.
pub const DFFS_ERR_NAMETOOLONG: c_int = -36;
/// Directory not empty.
pub const DFFS_ERR_NOTEMPTY: c_int = -39;
/// Too many symbolic links while resolving a path.
pub const DFFS_ERR_LOOP: c_int = -40;
/// Operation not supported.
pub const DFFS_ERR_NOTSUP: c_int = -95;

/// Longest file name in bytes (without the terminating NUL).
pub const DFFS_NAME_MAX: usize = 255;
/// Size of `dffs_info.name` (`DFFS_NAME_MAX` bytes and the NUL).
pub const DFFS_NAME_SIZE: usize = 256;

// ----- flash driver results -----------------------------------------------------------------

/// Driver callback result: success (for `read`: no bit errors; a positive value is the number
/// of bits the ECC corrected in the worst ECC step, and asks the file system to scrub the block).
pub const DFFS_FLASH_OK: c_int = 0;
/// `read`: more bit errors than the ECC corrects. The buffers must still be filled.
pub const DFFS_FLASH_ECC_FAILED: c_int = -1;
/// Address or length outside the device, a page or the OOB area.
pub const DFFS_FLASH_ERR_RANGE: c_int = -2;
/// Offset or length not aligned to the program unit.
pub const DFFS_FLASH_ERR_ALIGN: c_int = -3;
/// Program of bytes that are not erased.
pub const DFFS_FLASH_ERR_NOT_ERASED: c_int = -4;
/// The program operation failed: the block has gone bad.
pub const DFFS_FLASH_ERR_PROG: c_int = -5;
/// The erase operation failed: the block has gone bad.
pub const DFFS_FLASH_ERR_ERASE: c_int = -6;
/// The block is marked bad.
pub const DFFS_FLASH_ERR_BAD_BLOCK: c_int = -7;
/// The device lost power; nothing works until it is mounted again.
pub const DFFS_FLASH_ERR_POWER: c_int = -8;
/// Any other driver failure.
pub const DFFS_FLASH_ERR_IO: c_int = -9;
/// More partial programs of one page than the device allows (NAND NOP).
pub const DFFS_FLASH_ERR_NOP: c_int = -10;
/// A page programmed after a higher page of its block (in-order NAND).
pub const DFFS_FLASH_ERR_ORDER: c_int = -11;
/// A NOR program crossed a program-page boundary.
pub const DFFS_FLASH_ERR_CROSSES_PAGE: c_int = -12;

// ----- geometry -----------------------------------------------------------------------------

/// `dffs_geometry.kind`: page-programmed NAND with a spare (OOB) area, bad blocks and ECC.
pub const DFFS_FLASH_NAND: u32 = 0;
/// `dffs_geometry.kind`: byte-addressable NOR (no OOB, no ECC, no bad-block marks).
pub const DFFS_FLASH_NOR: u32 = 1;
/// `dffs_geometry.pairing`: every page has cells of its own (SLC NAND, NOR).
pub const DFFS_PAIRING_NONE: u32 = 0;
/// `dffs_geometry.pairing`: 2-bit MLC shared pages (upper page `u`, even and at least 2,
/// shares its cells with lower page `u - 3`; page 2 with page 0).
pub const DFFS_PAIRING_MLC2: u32 = 1;

/// Sizes and rules of the flash device (or partition).
///
/// Addressing: the callbacks address the device by page and byte offset in the page. NAND: a
/// page is the read/program unit; a callback stays inside one page. NOR: a page is the program
/// page (e.g. 256 B); reads may run on into the following pages, programs may not.
/// `page = block * pages_per_block + n`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dffs_geometry {
    /// `DFFS_FLASH_NAND` or `DFFS_FLASH_NOR`.
    pub kind: u32,
    /// NAND: data bytes per page. NOR: bytes per program page.
    pub page_size: u32,
    /// NAND: spare bytes per page. NOR: 0.
    pub oob_size: u32,
    /// Offset of the spare bytes the file system may use (not the bad-block marker, not ECC).
    pub oob_free_offset: u32,
    /// Number of spare bytes the file system may use.
    pub oob_free_len: u32,
    /// Pages per erase block.
    pub pages_per_block: u32,
    /// Erase blocks on the device or partition.
    pub block_count: u32,
    /// Smallest program unit in bytes, the alignment of program offsets and lengths (NAND: the
    /// subpage size, `page_size / nop`; NOR: the driver's write granularity, 1 for most SPI NOR).
    pub program_unit: u32,
    /// Programs of one page allowed between two erases (NAND NOP); 0 means unlimited (NOR).
    pub nop: u32,
    /// Non-zero: pages of a block must be programmed in ascending order (MLC NAND).
    pub in_order: u32,
    /// Bits the ECC corrects per `ecc_step` bytes (0 on NOR).
    pub ecc_strength: u32,
    /// Bytes covered by one ECC codeword (NOR: the page size).
    pub ecc_step: u32,
    /// Which pages share memory cells: `DFFS_PAIRING_NONE` (SLC NAND, NOR) or
    /// `DFFS_PAIRING_MLC2` (2-bit MLC, upper page `u` even ≥ 2 shares its cells with lower page
    /// `u - 3`, page 2 with page 0).
    pub pairing: u32,
}

// ----- configuration ------------------------------------------------------------------------

/// Reads `len` bytes of the data area of `page` from byte `off` into `data`, and (NAND)
/// `oob_len` bytes of the page's free spare bytes into `oob` (`oob` is NULL and `oob_len` 0
/// when the spare area is not wanted, always on NOR).
///
/// Returns `DFFS_FLASH_OK`, a positive count of corrected bit errors, `DFFS_FLASH_ECC_FAILED`
/// (buffers filled anyway), or a negative `DFFS_FLASH_ERR_*`.
pub type dffs_read_fn = Option<
    unsafe extern "C" fn(
        cfg: *const dffs_config,
        page: u32,
        off: u32,
        data: *mut c_void,
        len: u32,
        oob: *mut c_void,
        oob_len: u32,
    ) -> c_int,
>;

/// Programs `len` bytes of `data` into `page` at byte `off` and (NAND) `oob_len` bytes of `oob`
/// into the page's free spare bytes, in ONE program operation (the NAND NOP limit counts it
/// once). Offsets and lengths are multiples of the program unit and stay inside the page.
///
/// Returns `DFFS_FLASH_OK` or a negative `DFFS_FLASH_ERR_*` (`DFFS_FLASH_ERR_PROG` when the block
/// went bad: the file system retires it).
pub type dffs_prog_fn = Option<
    unsafe extern "C" fn(
        cfg: *const dffs_config,
        page: u32,
        off: u32,
        data: *const c_void,
        len: u32,
        oob: *const c_void,
        oob_len: u32,
    ) -> c_int,
>;

/// Erases `block` (data and spare bytes become all ones). Returns `DFFS_FLASH_OK` or a negative
/// `DFFS_FLASH_ERR_*` (`DFFS_FLASH_ERR_ERASE` when the block went bad).
pub type dffs_erase_fn = Option<unsafe extern "C" fn(cfg: *const dffs_config, block: u32) -> c_int>;

/// NAND bad-block query: returns 1 if `block` carries a bad-block mark (factory or grown), 0 if
/// not, or a negative `DFFS_FLASH_ERR_*`.
pub type dffs_is_bad_fn =
    Option<unsafe extern "C" fn(cfg: *const dffs_config, block: u32) -> c_int>;

/// NAND bad-block marking: marks `block` bad the way the device's bad blocks are marked, so no
/// program ever uses it again. Returns `DFFS_FLASH_OK` or a negative `DFFS_FLASH_ERR_*`.
pub type dffs_mark_bad_fn =
    Option<unsafe extern "C" fn(cfg: *const dffs_config, block: u32) -> c_int>;

/// Current time in seconds since 1970 (for file times).
pub type dffs_now_fn = Option<unsafe extern "C" fn(cfg: *const dffs_config) -> i64>;

/// `dffs_config.ram_preset`: the default configuration (a few tens of KiB on large NAND).
pub const DFFS_RAM_DEFAULT: u32 = 0;
/// `dffs_config.ram_preset`: the smallest configuration, for microcontrollers.
pub const DFFS_RAM_SMALLEST: u32 = 1;
/// `dffs_config.ram_preset`: spend more RAM for speed.
pub const DFFS_RAM_FAST: u32 = 2;

/// `dffs_config.mount_flags`: mount read-only.
pub const DFFS_MOUNT_READ_ONLY: u32 = 1;
/// `dffs_config.mount_flags`: every write is synchronous (as `mount -o sync`).
pub const DFFS_MOUNT_SYNC: u32 = 2;

/// How to reach the flash device and how much RAM the file system may use.
///
/// A zero-initialised struct with the callbacks and geometry filled in is a valid default
/// configuration. The struct must stay valid, at the same address, while the file system is
/// mounted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct dffs_config {
    /// Opaque pointer for the driver (the callbacks get the config, and so this pointer).
    pub context: *mut c_void,
    /// Read a page (required).
    pub read: dffs_read_fn,
    /// Program a page (required).
    pub prog: dffs_prog_fn,
    /// Erase a block (required).
    pub erase: dffs_erase_fn,
    /// Bad-block query (NAND; NULL: no block is ever marked bad).
    pub is_bad: dffs_is_bad_fn,
    /// Bad-block marking (NAND; NULL: the file system only records bad blocks itself).
    pub mark_bad: dffs_mark_bad_fn,
    /// Clock for file times (NULL: every time is 0).
    pub now: dffs_now_fn,
    /// The device.
    pub geometry: dffs_geometry,
    /// `DFFS_RAM_DEFAULT`, `DFFS_RAM_SMALLEST` or `DFFS_RAM_FAST`: the base the fields below
    /// adjust.
    pub ram_preset: u32,
    /// Directory pages cached (0: the preset's value; the same for every field below).
    pub dir_cache: u32,
    /// Inode-map pages cached.
    pub map_cache: u32,
    /// File index nodes cached.
    pub index_cache: u32,
    /// Clean file inodes cached.
    pub inode_cache: u32,
    /// File data blocks cached (the write-back cache).
    pub data_cache: u32,
    /// Dirty metadata items before a checkpoint.
    pub max_dirty: u32,
    /// Open file handles.
    pub max_open: u32,
    /// Extents an uncommitted file update may touch before it is committed in parts.
    pub overlay_extents: u32,
    /// Journal bytes between checkpoints (bounds the replay after a power cut).
    pub journal_limit: u32,
    /// Garbage-collection work (pages examined) one operation may do.
    pub gc_step: u32,
    /// `DFFS_MOUNT_*` flags.
    pub mount_flags: u32,
    /// `dffs_format` only: identifier of the new file system (0: a fixed default). Pass entropy
    /// to tell file systems apart.
    pub fs_id: u64,
}

// ----- files --------------------------------------------------------------------------------

/// `dffs_file_open` flag: open for reading.
pub const DFFS_O_RDONLY: c_int = 1;
/// `dffs_file_open` flag: open for writing.
pub const DFFS_O_WRONLY: c_int = 2;
/// `dffs_file_open` flag: open for reading and writing.
pub const DFFS_O_RDWR: c_int = 3;
/// `dffs_file_open` flag: create the file if it does not exist.
pub const DFFS_O_CREAT: c_int = 0x0100;
/// `dffs_file_open` flag: with `DFFS_O_CREAT`, fail with `DFFS_ERR_EXIST` if the file exists.
pub const DFFS_O_EXCL: c_int = 0x0200;
/// `dffs_file_open` flag: truncate the file to size 0 (needs write access).
pub const DFFS_O_TRUNC: c_int = 0x0400;
/// `dffs_file_open` flag: every write goes to the end of the file.
pub const DFFS_O_APPEND: c_int = 0x0800;
/// `dffs_file_open` flag: every write is committed and durable before it returns.
pub const DFFS_O_SYNC: c_int = 0x1000;

/// `dffs_file_seek` whence: from the start of the file.
pub const DFFS_SEEK_SET: c_int = 0;
/// `dffs_file_seek` whence: from the current position.
pub const DFFS_SEEK_CUR: c_int = 1;
/// `dffs_file_seek` whence: from the end of the file.
pub const DFFS_SEEK_END: c_int = 2;

/// An open file. Allocated by the caller (e.g. on the stack); filled by `dffs_file_open`,
/// cleared by `dffs_file_close`. The fields are private to the library.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dffs_file_t {
    /// Handle number in the mounted file system.
    pub handle: u32,
    /// Inode of the file (0: not open).
    pub ino: u32,
    /// `DFFS_O_*` flags it was opened with.
    pub flags: u32,
    /// Reserved (0).
    pub reserved: u32,
    /// Current position.
    pub pos: u64,
}

/// An open directory. Allocated by the caller; filled by `dffs_dir_open`. The fields are
/// private to the library.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dffs_dir_t {
    /// Inode of the directory (0: not open).
    pub ino: u32,
    /// Entries returned so far.
    pub index: u32,
    /// Where the next entry is (the file system's readdir cookie).
    pub cookie: u64,
}

// ----- information --------------------------------------------------------------------------

/// `dffs_info.type`: regular file.
pub const DFFS_TYPE_REG: u32 = 1;
/// `dffs_info.type`: directory.
pub const DFFS_TYPE_DIR: u32 = 2;
/// `dffs_info.type`: symbolic link.
pub const DFFS_TYPE_SYMLINK: u32 = 3;

/// What `dffs_stat` and `dffs_dir_read` report about a file or directory.
///
/// cbindgen:field-names=[type, mode, ino, nlink, size, mtime, name]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct dffs_info {
    /// `DFFS_TYPE_*`.
    pub type_: u32,
    /// Type and permission bits (as `st_mode`).
    pub mode: u32,
    /// Inode number.
    pub ino: u32,
    /// Number of names (hard links) of a file; for a directory, 2 plus its subdirectories.
    pub nlink: u32,
    /// Size in bytes (for an open file: including its uncommitted writes).
    pub size: u64,
    /// Modification time, seconds since 1970.
    pub mtime: i64,
    /// Name, NUL-terminated (`dffs_stat`: the last component of the path, "/" for the root).
    pub name: [c_char; DFFS_NAME_SIZE],
}

/// What `dffs_statfs` reports.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct dffs_fsinfo {
    /// Bytes per reported block.
    pub block_size: u32,
    /// Longest name.
    pub name_max: u32,
    /// Blocks the file system can hold.
    pub blocks: u64,
    /// Blocks free for new data.
    pub blocks_free: u64,
    /// Files and directories.
    pub files: u64,
    /// Files and directories that can still be created (an upper bound).
    pub files_free: u64,
}
