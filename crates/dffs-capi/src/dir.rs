//! Directory iteration of the C API: open, read one entry at a time ("." and ".." first, then
//! the entries in the core's hash order), rewind, close. The iteration state (the core's readdir
//! cookie) lives in the caller's `dffs_dir_t`, so an open directory holds no library memory.
//!
//! It must never hold a core borrow between calls: each read resumes from the cookie.

use core::ffi::{c_char, c_int};

use dffs::{DirEntry, Error, FileKind};

use crate::fs::{dffs_t, fill_info, path, run, run0};
use crate::types::*;

/// Opens the directory at `path` for reading (`DFFS_ERR_NOTDIR` if it is not a directory).
///
/// # Safety
/// `fs` a live handle or NULL; `dir` NULL or writable; `path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn dffs_dir_open(
    fs: *mut dffs_t,
    dir: *mut dffs_dir_t,
    path: *const c_char,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let dir = dir.as_mut().ok_or(Error::Invalid)?;
            let ino = h.fs.resolve(self::path(path)?)?;
            if h.fs.stat(ino)?.kind != FileKind::Dir {
                return Err(Error::NotDir);
            }
            *dir = dffs_dir_t {
                ino,
                index: 0,
                cookie: 0,
            };
            Ok(())
        })
    }
}

/// Reads the next entry into `info`. Returns 1 when an entry was read, 0 at the end, or a
/// negative error. Entries created or removed while reading may or may not be seen; the others
/// are seen exactly once.
///
/// # Safety
/// `fs` a live handle or NULL; `dir` NULL or an opened `dffs_dir_t`; `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dffs_dir_read(
    fs: *mut dffs_t,
    dir: *mut dffs_dir_t,
    info: *mut dffs_info,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run(fs, |h| {
            let dir = dir.as_mut().ok_or(Error::Invalid)?;
            let info = info.as_mut().ok_or(Error::Invalid)?;
            if dir.ino == 0 {
                return Err(Error::BadHandle);
            }
            match dir.index {
                0 | 1 => {
                    let name: &[u8] = if dir.index == 0 { b"." } else { b".." };
                    let st = h.fs.lookup(dir.ino, name)?;
                    fill_info(info, &st, name);
                }
                _ => {
                    let mut next: Option<DirEntry> = None;
                    h.fs.readdir(dir.ino, dir.cookie, &mut |e| {
                        next = Some(e);
                        false
                    })?;
                    let Some(e) = next else {
                        return Ok(0);
                    };
                    let st = h.fs.stat(e.ino)?;
                    fill_info(info, &st, &e.name);
                    dir.cookie = e.cookie;
                }
            }
            dir.index = dir.index.saturating_add(1);
            Ok(1)
        }) as c_int
    }
}

/// Starts reading the directory again from its first entry.
///
/// # Safety
/// `fs` a live handle or NULL; `dir` NULL or an opened `dffs_dir_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_dir_rewind(fs: *mut dffs_t, dir: *mut dffs_dir_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |_| {
            let dir = dir.as_mut().ok_or(Error::Invalid)?;
            if dir.ino == 0 {
                return Err(Error::BadHandle);
            }
            dir.index = 0;
            dir.cookie = 0;
            Ok(())
        })
    }
}

/// Closes the directory (it holds no library resources; this clears `dir`).
///
/// # Safety
/// `fs` a live handle or NULL; `dir` NULL or an opened `dffs_dir_t`.
#[no_mangle]
pub unsafe extern "C" fn dffs_dir_close(fs: *mut dffs_t, dir: *mut dffs_dir_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |_| {
            let dir = dir.as_mut().ok_or(Error::Invalid)?;
            if dir.ino == 0 {
                return Err(Error::BadHandle);
            }
            *dir = dffs_dir_t::default();
            Ok(())
        })
    }
}
