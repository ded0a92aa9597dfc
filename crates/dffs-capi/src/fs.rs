//! File-system-wide functions of the C API: format, mount, unmount, the namespace by path
//! (mkdir, remove, rename, stat), sync, statfs, transactions, RAM figures and error strings;
//! plus the mounted handle `dffs_t` and the helpers every entry point uses to turn a core
//! result into a C return value.
//!
//! It must never let a panic or a Rust error cross into C: every entry point returns a number.

use alloc::boxed::Box;
use core::ffi::{c_char, c_int, CStr};

use dffs::{Config, Error, FileKind, FormatOptions, Fs, Params, Stat};

use crate::flash::{config_geometry, core_config, CClock, CFlash};
use crate::panic::catch;
use crate::types::*;

/// A mounted file system (opaque to C; allocated by `dffs_mount`, freed by `dffs_unmount`).
pub struct dffs_t {
    /// Boxed on its own (mounted and unmounted in place): no copy of it crosses the stack.
    pub(crate) fs: Box<Fs<CFlash>>,
    pub(crate) cfg: Config,
    /// A library bug was caught inside a call: nothing but unmount is allowed.
    pub(crate) poisoned: bool,
}

/// The C return value of an error.
pub(crate) fn code(e: Error) -> i64 {
    -(e.errno() as i64)
}

/// Runs `f` on a mounted file system and converts its result into a C return value (a
/// non-negative value, or a negative error code).
///
/// # Safety
/// `fs` must be NULL or a pointer returned by `dffs_mount` and not yet unmounted.
pub(crate) unsafe fn run(
    fs: *mut dffs_t,
    f: impl FnOnce(&mut dffs_t) -> Result<i64, Error>,
) -> i64 {
    // SAFETY: the caller guarantees `fs` is NULL or a live handle.
    let Some(h) = (unsafe { fs.as_mut() }) else {
        return DFFS_ERR_INVAL as i64;
    };
    if h.poisoned {
        return DFFS_ERR_IO as i64;
    }
    match catch(|| f(&mut *h)) {
        Some(Ok(v)) => v,
        Some(Err(e)) => code(e),
        None => {
            h.poisoned = true;
            DFFS_ERR_IO as i64
        }
    }
}

/// [`run`] for functions that return only success or an error.
pub(crate) unsafe fn run0(
    fs: *mut dffs_t,
    f: impl FnOnce(&mut dffs_t) -> Result<(), Error>,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { run(fs, |h| f(h).map(|()| 0)) as c_int }
}

/// The bytes of a C path (NULL is invalid).
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string that outlives the returned slice.
pub(crate) unsafe fn path<'a>(p: *const c_char) -> Result<&'a [u8], Error> {
    if p.is_null() {
        return Err(Error::Invalid);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// Fills a `dffs_info` from a stat and a name (cut to `DFFS_NAME_MAX` bytes).
pub(crate) fn fill_info(info: &mut dffs_info, st: &Stat, name: &[u8]) {
    info.type_ = match st.kind {
        FileKind::File => DFFS_TYPE_REG,
        FileKind::Dir => DFFS_TYPE_DIR,
        FileKind::Symlink => DFFS_TYPE_SYMLINK,
    };
    info.mode = st.mode;
    info.ino = st.ino;
    info.nlink = st.nlink;
    info.size = st.size;
    info.mtime = st.mtime.secs;
    let n = name.len().min(DFFS_NAME_MAX);
    for (d, s) in info.name.iter_mut().zip(&name[..n]) {
        *d = *s as c_char;
    }
    info.name[n] = 0;
}

// ----- format, mount, unmount -------------------------------------------------------------

/// Formats the device described by `cfg` with a new, empty file system (everything on it is
/// lost). The device must not be mounted.
///
/// # Safety
/// `cfg` must be NULL or point to a valid config.
#[no_mangle]
pub unsafe extern "C" fn dffs_format(cfg: *const dffs_config) -> c_int {
    let r = catch(|| {
        // SAFETY: the caller guarantees `cfg` is NULL or valid.
        let flash = unsafe { CFlash::new(cfg) }?;
        let c = unsafe { &*cfg };
        let mut opts = FormatOptions::default();
        if c.fs_id != 0 {
            opts.fs_id = c.fs_id;
        }
        Fs::format(flash, &opts).map(|_| ())
    });
    match r {
        Some(Ok(())) => DFFS_ERR_OK,
        Some(Err(e)) => code(e) as c_int,
        None => DFFS_ERR_IO,
    }
}

/// Mounts the file system on the device described by `cfg` and stores the new handle in
/// `*fs`. `cfg` must stay valid, at the same address, until `dffs_unmount`. Fails with
/// `DFFS_ERR_INVAL` when the device holds no DFFS file system or the config is invalid.
///
/// # Safety
/// `fs` must be NULL or writable; `cfg` NULL or valid for the whole mount.
#[no_mangle]
pub unsafe extern "C" fn dffs_mount(fs: *mut *mut dffs_t, cfg: *const dffs_config) -> c_int {
    if fs.is_null() {
        return DFFS_ERR_INVAL;
    }
    let r = catch(|| {
        // SAFETY: the caller guarantees `cfg` is NULL or valid.
        let flash = unsafe { CFlash::new(cfg) }?;
        let c = unsafe { &*cfg };
        let config = core_config(c)?;
        let clock: Box<dyn dffs::Clock> = match unsafe { CClock::of(cfg) } {
            Some(clock) => Box::new(clock),
            None => Box::new(dffs::NoClock),
        };
        let mounted = Fs::mount_boxed(flash, config, clock).map_err(|(e, _)| e)?;
        Ok(Box::new(dffs_t {
            fs: mounted,
            cfg: config,
            poisoned: false,
        }))
    });
    match r {
        Some(Ok(h)) => {
            // SAFETY: checked non-NULL above; the caller guarantees it is writable.
            unsafe { *fs = Box::into_raw(h) };
            DFFS_ERR_OK
        }
        Some(Err(e)) => code(e) as c_int,
        None => DFFS_ERR_IO,
    }
}

/// Commits open files, writes a clean checkpoint and frees the handle. The handle is freed even
/// when this fails (the next mount then recovers from the journal); open files and directories
/// of this mount become invalid.
///
/// # Safety
/// `fs` must be NULL or a live handle from `dffs_mount`; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn dffs_unmount(fs: *mut dffs_t) -> c_int {
    if fs.is_null() {
        return DFFS_ERR_INVAL;
    }
    // SAFETY: a live handle from `dffs_mount` (Box::into_raw), given back exactly once.
    let h = unsafe { Box::from_raw(fs) };
    if h.poisoned {
        let _device = h.fs.into_flash();
        return DFFS_ERR_IO;
    }
    match catch(move || h.fs.try_unmount_boxed().map(|_| ()).map_err(|(e, _)| e)) {
        Some(Ok(())) => DFFS_ERR_OK,
        Some(Err(e)) => code(e) as c_int,
        None => DFFS_ERR_IO,
    }
}

// ----- namespace by path ------------------------------------------------------------------

/// Creates a directory (`DFFS_ERR_EXIST` if the name exists, `DFFS_ERR_NOENT` if the parent
/// does not).
///
/// # Safety
/// `fs` a live handle or NULL; `path` a NUL-terminated string or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_mkdir(fs: *mut dffs_t, path: *const c_char) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let (parent, name) = h.fs.resolve_parent(self::path(path)?)?;
            h.fs.mkdir(parent, name, 0o755, 0, 0).map(|_| ())
        })
    }
}

/// Removes a file, or a directory that is empty (`DFFS_ERR_NOTEMPTY` otherwise).
///
/// # Safety
/// As `dffs_mkdir`.
#[no_mangle]
pub unsafe extern "C" fn dffs_remove(fs: *mut dffs_t, path: *const c_char) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let (parent, name) = h.fs.resolve_parent(self::path(path)?)?;
            if h.fs.lookup(parent, name)?.kind == FileKind::Dir {
                h.fs.rmdir(parent, name)
            } else {
                h.fs.unlink(parent, name)
            }
        })
    }
}

/// Renames `oldpath` to `newpath`, atomically replacing an existing `newpath` of a compatible
/// kind (a file replaces a file, a directory an empty directory).
///
/// # Safety
/// As `dffs_mkdir`, for both paths.
#[no_mangle]
pub unsafe extern "C" fn dffs_rename(
    fs: *mut dffs_t,
    oldpath: *const c_char,
    newpath: *const c_char,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let (op, on) = h.fs.resolve_parent(path(oldpath)?)?;
            let (np, nn) = h.fs.resolve_parent(path(newpath)?)?;
            h.fs.rename(op, on, np, nn)
        })
    }
}

/// Gives the file at `oldpath` another name, `newpath` (a hard link): both names then lead
/// to one file. `DFFS_ERR_PERM` for a directory, `DFFS_ERR_EXIST` if `newpath` exists,
/// `DFFS_ERR_MLINK` when the file's names fill its inode node.
///
/// # Safety
/// As `dffs_mkdir`, for both paths.
#[no_mangle]
pub unsafe extern "C" fn dffs_link(
    fs: *mut dffs_t,
    oldpath: *const c_char,
    newpath: *const c_char,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let ino = h.fs.resolve(path(oldpath)?)?;
            let (np, nn) = h.fs.resolve_parent(path(newpath)?)?;
            h.fs.link(ino, np, nn).map(|_| ())
        })
    }
}

/// Fills `info` with what `path` is.
///
/// # Safety
/// As `dffs_mkdir`; `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dffs_stat(
    fs: *mut dffs_t,
    path: *const c_char,
    info: *mut dffs_info,
) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let info = info.as_mut().ok_or(Error::Invalid)?;
            let p = self::path(path)?;
            let ino = h.fs.resolve(p)?;
            let st = h.fs.stat(ino)?;
            let name = p
                .split(|&c| c == b'/')
                .rfind(|c| !c.is_empty())
                .unwrap_or(b"/");
            fill_info(info, &st, name);
            Ok(())
        })
    }
}

// ----- whole file system ------------------------------------------------------------------

/// Commits every open file and makes everything durable.
///
/// # Safety
/// `fs` a live handle or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_sync(fs: *mut dffs_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { run0(fs, |h| h.fs.sync()) }
}

/// Fills `info` with space figures.
///
/// # Safety
/// `fs` a live handle or NULL; `info` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn dffs_statfs(fs: *mut dffs_t, info: *mut dffs_fsinfo) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe {
        run0(fs, |h| {
            let info = info.as_mut().ok_or(Error::Invalid)?;
            let s = h.fs.statfs()?;
            *info = dffs_fsinfo {
                block_size: s.block_size,
                name_max: s.name_max,
                blocks: s.blocks,
                blocks_free: s.blocks_free,
                files: s.files,
                files_free: s.files_free,
            };
            Ok(())
        })
    }
}

/// Starts a transaction: every change from now until `dffs_tx_commit` (to any file or
/// directory) becomes durable all together or not at all. `DFFS_ERR_BUSY` if one is open.
///
/// # Safety
/// `fs` a live handle or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_tx_begin(fs: *mut dffs_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { run0(fs, |h| h.fs.begin_transaction()) }
}

/// Commits the open transaction durably (`DFFS_ERR_INVAL` if none is open).
///
/// # Safety
/// `fs` a live handle or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_tx_commit(fs: *mut dffs_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { run0(fs, |h| h.fs.commit_transaction()) }
}

/// Abandons the open transaction: the file system returns to its state when the transaction
/// began (`DFFS_ERR_INVAL` if none is open). Open files stay open; files created inside the
/// transaction are gone and their handles report errors.
///
/// # Safety
/// `fs` a live handle or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_tx_abort(fs: *mut dffs_t) -> c_int {
    // SAFETY: forwarded from our caller.
    unsafe { run0(fs, |h| h.fs.abort_transaction()) }
}

// ----- RAM and errors ---------------------------------------------------------------------

/// Heap bytes a mount with `cfg` needs at most (an upper bound of the caches, buffers and
/// tables), or a negative error code if `cfg` is invalid. Needs no device access.
///
/// # Safety
/// `cfg` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn dffs_ram_estimate(cfg: *const dffs_config) -> i64 {
    // SAFETY: the caller guarantees `cfg` is NULL or valid.
    let Some(c) = (unsafe { cfg.as_ref() }) else {
        return DFFS_ERR_INVAL as i64;
    };
    let r = catch(|| {
        let g = config_geometry(c)?;
        let p = Params::for_geometry(g, &FormatOptions::default())?;
        Ok(core_config(c)?.ram_estimate(&p) as i64)
    });
    match r {
        Some(Ok(n)) => n,
        Some(Err(e)) => code(e),
        None => DFFS_ERR_IO as i64,
    }
}

/// Heap bytes the mounted file system holds now (its own accounting), or a negative error.
///
/// # Safety
/// `fs` a live handle or NULL.
#[no_mangle]
pub unsafe extern "C" fn dffs_ram_bytes(fs: *mut dffs_t) -> i64 {
    // SAFETY: forwarded from our caller.
    unsafe { run(fs, |h| Ok(h.fs.ram_bytes() as i64)) }
}

/// A short description of a `DFFS_ERR_*` code (a static string): the core library's
/// description of the error with that errno.
#[no_mangle]
pub extern "C" fn dffs_strerror(err: c_int) -> *const c_char {
    let s: &'static CStr = match err {
        DFFS_ERR_OK => c"success",
        _ => match Error::from_errno(err.wrapping_neg()) {
            Some(e) => e.c_description(),
            None => c"unknown error",
        },
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `DFFS_ERR_*` constant of the header, with its name.
    const CONSTANTS: [(c_int, &str); 21] = [
        (DFFS_ERR_PERM, "PERM"),
        (DFFS_ERR_NOENT, "NOENT"),
        (DFFS_ERR_IO, "IO"),
        (DFFS_ERR_BADF, "BADF"),
        (DFFS_ERR_NOMEM, "NOMEM"),
        (DFFS_ERR_ACCES, "ACCES"),
        (DFFS_ERR_BUSY, "BUSY"),
        (DFFS_ERR_EXIST, "EXIST"),
        (DFFS_ERR_NOTDIR, "NOTDIR"),
        (DFFS_ERR_ISDIR, "ISDIR"),
        (DFFS_ERR_INVAL, "INVAL"),
        (DFFS_ERR_MFILE, "MFILE"),
        (DFFS_ERR_FBIG, "FBIG"),
        (DFFS_ERR_NOSPC, "NOSPC"),
        (DFFS_ERR_ROFS, "ROFS"),
        (DFFS_ERR_MLINK, "MLINK"),
        (DFFS_ERR_NAMETOOLONG, "NAMETOOLONG"),
        (DFFS_ERR_NOTEMPTY, "NOTEMPTY"),
        (DFFS_ERR_LOOP, "LOOP"),
        (DFFS_ERR_NOTSUP, "NOTSUP"),
        (DFFS_ERR_OK, "OK"),
    ];

    /// Every core error (all of `Error::ALL`) returns a code that has a `DFFS_ERR_*`
    /// constant, and `dffs_strerror` gives the core's own description for it.
    #[test]
    fn every_core_error_has_a_constant_and_the_core_string() {
        for e in Error::ALL {
            let c = code(e) as c_int;
            assert!(
                CONSTANTS.iter().any(|(k, _)| *k == c),
                "{e:?} returns {c}, which has no DFFS_ERR_* constant"
            );
            let s = unsafe { CStr::from_ptr(dffs_strerror(c)) };
            let rep = Error::from_errno(e.errno()).unwrap();
            assert_eq!(s, rep.c_description(), "{e:?}");
        }
    }

    /// Every constant but OK is some core error's code: the header promises nothing the core
    /// never returns.
    #[test]
    fn every_constant_is_a_core_error() {
        for (k, name) in CONSTANTS {
            let s = unsafe { CStr::from_ptr(dffs_strerror(k)) };
            if k == DFFS_ERR_OK {
                assert_eq!(s, c"success");
                continue;
            }
            let e = Error::from_errno(-k).unwrap_or_else(|| panic!("DFFS_ERR_{name} ({k})"));
            assert_eq!(s, e.c_description());
        }
        assert_eq!(
            unsafe { CStr::from_ptr(dffs_strerror(-4)) },
            c"unknown error"
        );
    }
}
