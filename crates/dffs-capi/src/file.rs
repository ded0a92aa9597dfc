//! File functions of the C API: open (with `DFFS_O_*` flags), read, write, seek, tell, size,
//! truncate, sync, close. The file position lives in the caller's `dffs_file_t`; the core
//! handle does the rest.
//!
//! It must never act on a `dffs_file_t` whose handle no longer names the same inode (a closed
//! or reused handle is `DFFS_ERR_BADF`), and never change data except through the core.

use core::ffi::{c_char, c_int, c_void};
use core::slice;

use dffs::{Error, Fh, FileKind, OpenFlags};

use crate::fs::{dffs_t, path, run, run0};
use crate::types::*;

const ACCESS: c_int = DFFS_O_RDWR;
const KNOWN: c_int =
    ACCESS | DFFS_O_CREAT | DFFS_O_EXCL | DFFS_O_TRUNC | DFFS_O_APPEND | DFFS_O_SYNC;

/// The core handle of an open `dffs_file_t`, checked against the mount.
fn handle(h: &dffs_t, file: &dffs_file_t) -> Result<Fh, Error> {
    let fh = Fh(file.handle);
    if file.ino == 0 || h.fs.handle_ino(fh).ok() != Some(file.ino) {
        return Err(Error::BadHandle);
    }
    Ok(fh)
}

/// Opens (and with `DFFS_O_CREAT` creates) the file at `path`. `flags` is one of
/// `DFFS_O_RDONLY`, `DFFS_O_WRONLY`, `DFFS_O_RDWR`, or-ed with `DFFS_O_CREAT`, `DFFS_O_EXCL`,
/// `DFFS_O_TRUNC`, `DFFS_O_APPEND`, `DFFS_O_SYNC`. The position starts at 0.
///
/// Errors: `DFFS_ERR_NOENT` (no such file, or no parent directory), `DFFS_ERR_EXIST`
/// (`DFFS_O_CREAT | DFFS_O_EXCL` on an existing name), `DFFS_ERR_ISDIR`, `DFFS_ERR_MFILE`
/// (the configured `max_open` handles are open), `DFFS_ERR_INVAL` (bad flags).
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or writable; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_open(
    fs: *mut dffs_t,
    file: *mut dffs_file_t,
    path: *const c_char,
    flags: c_int,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let file = file.as_mut().ok_or(Error::Invalid)?;
            let p = self::path(path)?;
            if flags & !KNOWN != 0 || flags & ACCESS == 0 {
                return Err(Error::Invalid);
            }
            let ino = match h.fs.resolve(p) {
                Ok(_) if flags & DFFS_O_CREAT != 0 && flags & DFFS_O_EXCL != 0 => {
                    return Err(Error::Exists)
                }
                Ok(ino) => ino,
                Err(Error::NotFound) if flags & DFFS_O_CREAT != 0 => {
                    if h.fs.open_handles() >= h.cfg.max_open {
                        return Err(Error::TooManyOpen);
                    }
                    let (parent, name) = h.fs.resolve_parent(p)?;
                    h.fs.create(parent, name, 0o644, 0, 0)?.ino
                }
                Err(e) => return Err(e),
            };
            if h.fs.stat(ino)?.kind == FileKind::Dir {
                return Err(Error::IsDir);
            }
            let write = flags & DFFS_O_WRONLY != 0;
            let fh = h.fs.open(
                ino,
                OpenFlags {
                    read: flags & DFFS_O_RDONLY != 0,
                    write,
                    append: flags & DFFS_O_APPEND != 0,
                    sync: flags & DFFS_O_SYNC != 0,
                    truncate: write && flags & DFFS_O_TRUNC != 0,
                },
            )?;
            *file = dffs_file_t {
                handle: fh.0,
                ino,
                flags: flags as u32,
                reserved: 0,
                pos: 0,
            };
            Ok(())
        })
    }
}

/// Commits the file's changes (not necessarily durable: see `dffs_file_sync`) and closes it.
/// The handle is closed even when the commit fails.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_close(fs: *mut dffs_t, file: *mut dffs_file_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let file = file.as_mut().ok_or(Error::Invalid)?;
            let fh = handle(h, file)?;
            *file = dffs_file_t::default();
            h.fs.close(fh)
        })
    }
}

/// Reads up to `size` bytes at the position into `buf` and advances the position. Returns the
/// number of bytes read (0 at the end of the file) or a negative error (`DFFS_ERR_BADF` if the
/// file was not opened for reading).
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`; `buf` writable for
/// `size` bytes (may be NULL when `size` is 0).
#[no_mangle]
pub unsafe extern "C" fn dffs_file_read(
    fs: *mut dffs_t,
    file: *mut dffs_file_t,
    buf: *mut c_void,
    size: u32,
) -> i32 {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let file = file.as_mut().ok_or(Error::Invalid)?;
            let fh = handle(h, file)?;
            let len = size.min(i32::MAX as u32) as usize;
            let out: &mut [u8] = if len == 0 {
                &mut []
            } else if buf.is_null() {
                return Err(Error::Invalid);
            } else {
                slice::from_raw_parts_mut(buf.cast(), len)
            };
            let n = h.fs.read(fh, file.pos, out)?;
            file.pos += n as u64;
            Ok(n as i64)
        }) as i32
    }
}

/// Writes `size` bytes from `buf` at the position (at the end with `DFFS_O_APPEND`) and moves
/// the position past them. Returns `size` or a negative error (`DFFS_ERR_NOSPC`,
/// `DFFS_ERR_BADF` if not opened for writing, ...). Writes past the end leave a hole of zeros.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`; `buf` readable for
/// `size` bytes (may be NULL when `size` is 0).
#[no_mangle]
pub unsafe extern "C" fn dffs_file_write(
    fs: *mut dffs_t,
    file: *mut dffs_file_t,
    buf: *const c_void,
    size: u32,
) -> i32 {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let file = file.as_mut().ok_or(Error::Invalid)?;
            let fh = handle(h, file)?;
            let len = size.min(i32::MAX as u32) as usize;
            let data: &[u8] = if len == 0 {
                &[]
            } else if buf.is_null() {
                return Err(Error::Invalid);
            } else {
                slice::from_raw_parts(buf.cast(), len)
            };
            let n = h.fs.write(fh, file.pos, data)?;
            if file.flags as c_int & DFFS_O_APPEND != 0 {
                file.pos = h.fs.stat(file.ino)?.size;
            } else {
                file.pos += n as u64;
            }
            Ok(n as i64)
        }) as i32
    }
}

/// Moves the position to `off` from the start (`DFFS_SEEK_SET`), the current position
/// (`DFFS_SEEK_CUR`) or the end (`DFFS_SEEK_END`). Returns the new position, or
/// `DFFS_ERR_INVAL` if it would be negative.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_seek(
    fs: *mut dffs_t,
    file: *mut dffs_file_t,
    off: i64,
    whence: c_int,
) -> i64 {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let file = file.as_mut().ok_or(Error::Invalid)?;
            handle(h, file)?;
            let base = match whence {
                DFFS_SEEK_SET => 0,
                DFFS_SEEK_CUR => file.pos,
                DFFS_SEEK_END => h.fs.stat(file.ino)?.size,
                _ => return Err(Error::Invalid),
            };
            let pos = i64::try_from(base)
                .ok()
                .and_then(|b| b.checked_add(off))
                .filter(|p| *p >= 0)
                .ok_or(Error::Invalid)?;
            file.pos = pos as u64;
            Ok(pos)
        })
    }
}

/// The position, or a negative error.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_tell(fs: *mut dffs_t, file: *mut dffs_file_t) -> i64 {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let file = file.as_ref().ok_or(Error::Invalid)?;
            handle(h, file)?;
            i64::try_from(file.pos).map_err(|_| Error::TooBig)
        })
    }
}

/// The file's size (with its uncommitted writes), or a negative error.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_size(fs: *mut dffs_t, file: *mut dffs_file_t) -> i64 {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let file = file.as_ref().ok_or(Error::Invalid)?;
            handle(h, file)?;
            i64::try_from(h.fs.stat(file.ino)?.size).map_err(|_| Error::TooBig)
        })
    }
}

/// Cuts the file to `size` bytes or extends it with zeros (needs write access). The position
/// does not move.
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_truncate(
    fs: *mut dffs_t,
    file: *mut dffs_file_t,
    size: u64,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let file = file.as_ref().ok_or(Error::Invalid)?;
            let fh = handle(h, file)?;
            h.fs.truncate(fh, size)
        })
    }
}

/// Commits the file's changes and makes them durable (inside a transaction: durable when the
/// transaction commits).
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_sync(fs: *mut dffs_t, file: *mut dffs_file_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { sync_file(fs, file, false) }
}

/// Makes the file's data and size durable, as `dffs_file_sync`, but an append (or an
/// overwrite that keeps the size) of whole new blocks on NAND may be committed by its last
/// data page's tag instead of a journal page: after a power cut the file then has the times of
/// its last journaled change (`fdatasync` semantics).
///
/// # Safety
/// `fs` a live handle or NULL; `file` NULL or an opened `dffs_file_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_file_datasync(fs: *mut dffs_t, file: *mut dffs_file_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { sync_file(fs, file, true) }
}

/// The body of `dffs_file_sync` (`data_only` false) and `dffs_file_datasync`.
///
/// # Safety
/// As theirs.
unsafe fn sync_file(fs: *mut dffs_t, file: *mut dffs_file_t, data_only: bool) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let file = file.as_ref().ok_or(Error::Invalid)?;
            let fh = handle(h, file)?;
            if data_only {
                h.fs.fdatasync(fh)
            } else {
                h.fs.fsync(fh)
            }
        })
    }
}
