//! The heap: a `#[global_allocator]` (feature `global-allocator`) that counts the bytes the
//! library holds, over the system allocator (`std`) or the application's `dffs_port_malloc` /
//! `dffs_port_free` (bare metal), and the functions that report the counts.
//!
//! It must never allocate itself, never block, and never change a request (size and alignment
//! reach the backend unchanged), so the counts are exactly what the file system asked for.

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

// Declared in every build so that dffs.h always declares them; only bare-metal builds call
// (and so link) them.
extern "C" {
    /// Bare-metal builds: provided by the application. Returns `size` bytes aligned to `align`
    /// (a power of two, at most 8 on 32-bit MCUs), or NULL. Forward it to `malloc` /
    /// `aligned_alloc`, an RTOS heap or a static pool.
    pub fn dffs_port_malloc(size: usize, align: usize) -> *mut core::ffi::c_void;
    /// Bare-metal builds: provided by the application. Frees a block from `dffs_port_malloc`
    /// (given with the size and alignment it was allocated with).
    pub fn dffs_port_free(ptr: *mut core::ffi::c_void, size: usize, align: usize);
}

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The counting allocator.
pub struct CountingAlloc;

impl CountingAlloc {
    fn add(n: usize) {
        let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }

    fn sub(n: usize) {
        CURRENT.fetch_sub(n, Ordering::Relaxed);
    }

    unsafe fn backend_alloc(layout: Layout) -> *mut u8 {
        #[cfg(feature = "std")]
        {
            // SAFETY: forwarded unchanged from a `GlobalAlloc::alloc` caller.
            unsafe { std::alloc::System.alloc(layout) }
        }
        #[cfg(not(feature = "std"))]
        {
            // SAFETY: the application's allocator, called as its contract says.
            unsafe { dffs_port_malloc(layout.size(), layout.align()).cast() }
        }
    }

    unsafe fn backend_free(ptr: *mut u8, layout: Layout) {
        #[cfg(feature = "std")]
        {
            // SAFETY: forwarded unchanged from a `GlobalAlloc::dealloc` caller.
            unsafe { std::alloc::System.dealloc(ptr, layout) }
        }
        #[cfg(not(feature = "std"))]
        {
            // SAFETY: `ptr` came from `dffs_port_malloc` with this layout.
            unsafe { dffs_port_free(ptr.cast(), layout.size(), layout.align()) }
        }
    }
}

// SAFETY: every request is forwarded unchanged to a sound allocator; the counters are atomics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from our caller.
        let p = unsafe { Self::backend_alloc(layout) };
        if !p.is_null() {
            Self::add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from our caller.
        unsafe { Self::backend_free(ptr, layout) };
        Self::sub(layout.size());
    }
}

#[cfg(feature = "global-allocator")]
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Bytes of heap the library holds now (0 when the library's allocator is not installed).
#[no_mangle]
pub extern "C" fn dffs_heap_current() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

/// Most bytes of heap the library held at once since start-up or the last
/// `dffs_heap_reset_peak` (0 when the library's allocator is not installed).
#[no_mangle]
pub extern "C" fn dffs_heap_peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak measurement from what the library holds now.
#[no_mangle]
pub extern "C" fn dffs_heap_reset_peak() {
    PEAK.store(CURRENT.load(Ordering::Relaxed), Ordering::Relaxed);
}
