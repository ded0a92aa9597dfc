//! Panics at the C boundary: hosted builds catch them so no unwinding crosses into C; bare-metal
//! builds (feature `panic-handler`, no `std`, not under test) get a `#[panic_handler]` that
//! hands over to the application's `dffs_port_panic`.
//!
//! It must never format the panic message (that would pull the formatting machinery into
//! firmware) and never return from a bare-metal panic.

/// Runs `f`, returning `None` if it panicked (hosted builds; bare-metal builds abort instead).
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Option<R> {
    #[cfg(feature = "std")]
    {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
    }
    #[cfg(not(feature = "std"))]
    {
        Some(f())
    }
}

// Declared in every build so that dffs.h always declares it; only bare-metal builds with the
// panic handler call (and so link) it.
extern "C" {
    /// Bare-metal builds: provided by the application. Called on a library bug (or when
    /// `dffs_port_malloc` returned NULL) with the Rust source location (`file` is not
    /// NUL-terminated). Must not return: log and reset the MCU.
    pub fn dffs_port_panic(file: *const core::ffi::c_char, file_len: usize, line: u32) -> !;
}

#[cfg(all(not(feature = "std"), not(test), feature = "panic-handler"))]
mod handler {
    use super::dffs_port_panic;

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let (file, line) = match info.location() {
            Some(l) => (l.file(), l.line()),
            None => ("", 0),
        };
        // SAFETY: the application's hook, with a valid (pointer, length) pair.
        unsafe { dffs_port_panic(file.as_ptr().cast(), file.len(), line) }
    }
}
