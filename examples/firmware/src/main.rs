//! A firmware-sized DFFS application for a Cortex-M4F MCU: it runs the C API's standard
//! workload (`dffs_capi::workload`: format, mount, mkdir, create, write, synced overwrite, read
//! back, rename, stat, list, unmount) on a 16 MiB NOR chip with the `nor-qspi-16m` geometry
//! (256 B pages, 64 KiB blocks), in the RAM configuration the `smallest` or `ram-default`
//! feature picks.
//!
//! It owns only what a board port of DFFS owns: the heap DFFS allocates from (a static arena
//! behind `dffs_port_malloc`/`dffs_port_free`), the panic hook (`dffs_port_panic`), and the
//! flash chip (here RAM outside the MCU's SRAM, in the `.norchip` section; on a board, the QSPI
//! driver). It must never reach into DFFS's internals: everything goes through the C API, as
//! it would from C firmware. With the `qemu` feature it reports its figures over semihosting
//! and exits; without it the figures stay in `FIGURES` for a debugger.
#![no_std]
#![no_main]

#[cfg(all(feature = "smallest", feature = "ram-default"))]
compile_error!("choose one RAM configuration: `--no-default-features --features smallest`");

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_char, c_void};
use core::mem::MaybeUninit;
use core::ptr::{addr_of_mut, null_mut};

use cortex_m_rt::entry;
use dffs_capi::workload::{nor_geometry, run, Figures};
use embedded_alloc::LlffHeap;

/// The RAM configuration (the `dffs_config.ram_preset` value) and the heap arena it needs: the
/// workload's measured peak (`dffs info --ram`) plus room for the allocator's rounding and
/// fragmentation.
#[cfg(feature = "smallest")]
const CONFIG: (u32, usize) = (dffs_capi::DFFS_RAM_SMALLEST, 16 * 1024);
#[cfg(not(feature = "smallest"))]
const CONFIG: (u32, usize) = (dffs_capi::DFFS_RAM_DEFAULT, 28 * 1024);

/// The `nor-qspi-16m` chip: 256 B program pages, 256 pages (64 KiB) per erase block.
const PAGE: u32 = 256;
const PAGES_PER_BLOCK: u32 = 256;
const CHIP_BYTES: usize = 16 << 20;

static HEAP: LlffHeap = LlffHeap::empty();
static mut ARENA: [MaybeUninit<u8>; CONFIG.1] = [MaybeUninit::uninit(); CONFIG.1];

/// The simulated NOR chip (a board would read, program and erase it through its QSPI driver).
#[link_section = ".norchip"]
static mut CHIP: MaybeUninit<[u8; CHIP_BYTES]> = MaybeUninit::uninit();

/// The last run's figures and status (0: passed; else the negative code of the failed step),
/// kept for a debugger and so the optimizer keeps the workload.
#[no_mangle]
static mut FIGURES: (Figures, i64) = (
    Figures {
        estimate: 0,
        heap_after_mount: 0,
        heap_peak_format: 0,
        heap_peak: 0,
        heap_after_unmount: 0,
        ram_bytes_after_mount: 0,
        ram_bytes_peak: 0,
    },
    1,
);

/// Heap for DFFS (declared in `dffs.h`; the library's counting allocator calls it).
#[no_mangle]
pub extern "C" fn dffs_port_malloc(size: usize, align: usize) -> *mut c_void {
    match Layout::from_size_align(size, align) {
        // SAFETY: a valid non-zero layout (Rust's allocator never asks for zero bytes).
        Ok(l) => unsafe { HEAP.alloc(l).cast() },
        Err(_) => null_mut(),
    }
}

/// Frees a block from [`dffs_port_malloc`] (declared in `dffs.h`).
#[no_mangle]
pub extern "C" fn dffs_port_free(ptr: *mut c_void, size: usize, align: usize) {
    if let Ok(l) = Layout::from_size_align(size, align) {
        // SAFETY: `ptr` came from `dffs_port_malloc` with this layout.
        unsafe { HEAP.dealloc(ptr.cast(), l) }
    }
}

/// A DFFS bug or an exhausted heap (declared in `dffs.h`): report it and stop.
#[no_mangle]
pub extern "C" fn dffs_port_panic(file: *const c_char, file_len: usize, line: u32) -> ! {
    report::panic(file, file_len, line)
}

#[entry]
fn main() -> ! {
    report::paint_stack();
    // SAFETY: runs once, before the first allocation; the arena is used only by HEAP.
    unsafe { HEAP.init(addr_of_mut!(ARENA) as usize, CONFIG.1) };
    // SAFETY: the chip memory is used only here; the workload formats it before reading it.
    let chip = unsafe { &mut *(addr_of_mut!(CHIP).cast::<[u8; CHIP_BYTES]>()) };
    let blocks = (CHIP_BYTES / (PAGE * PAGES_PER_BLOCK) as usize) as u32;
    let geometry = nor_geometry(PAGE, PAGES_PER_BLOCK, blocks);
    let result = match run(chip, geometry, CONFIG.0) {
        Ok(f) => (f, 0),
        Err(e) => (Figures::default(), e.code.min(-1)),
    };
    // SAFETY: single-threaded; written once here.
    unsafe { addr_of_mut!(FIGURES).write_volatile(result) };
    report::done(&result.0, result.1, CONFIG.1)
}

/// Reporting: over semihosting under QEMU (feature `qemu`), else nothing (halt).
#[cfg(feature = "qemu")]
mod report {
    use core::ffi::c_char;

    use cortex_m_semihosting::{debug, hprintln};
    use dffs_capi::workload::Figures;

    extern "C" {
        static mut __sheap: u32;
        static mut _stack_start: u32;
    }

    const PAINT: u32 = 0x5AA5_C33C;

    fn stack_span() -> (*mut u32, *mut u32) {
        // Linker symbols: only their addresses are used.
        (
            core::ptr::addr_of_mut!(__sheap),
            core::ptr::addr_of_mut!(_stack_start),
        )
    }

    /// Fills the free RAM below the stack with a pattern, to find the stack's high water mark.
    pub fn paint_stack() {
        let (lo, _) = stack_span();
        let sp = cortex_m::register::msp::read() as usize - 256;
        let mut p = lo;
        while (p as usize) < sp {
            // SAFETY: free RAM between the end of the statics and the live stack.
            unsafe { p.write_volatile(PAINT) };
            p = p.wrapping_add(1);
        }
    }

    fn stack_used() -> usize {
        let (lo, hi) = stack_span();
        let mut p = lo;
        // SAFETY: reads of the RAM painted above.
        while p < hi && unsafe { p.read_volatile() } == PAINT {
            p = p.wrapping_add(1);
        }
        hi as usize - p as usize
    }

    pub fn done(f: &Figures, status: i64, arena: usize) -> ! {
        hprintln!(
            "dffs-firmware: status {} estimate {} heap_after_mount {} heap_peak {} heap_peak_format {} heap_after_unmount {} ram_bytes_after_mount {} ram_bytes_peak {} arena {} stack_peak {}",
            status,
            f.estimate,
            f.heap_after_mount,
            f.heap_peak,
            f.heap_peak_format,
            f.heap_after_unmount,
            f.ram_bytes_after_mount,
            f.ram_bytes_peak,
            arena,
            stack_used()
        );
        debug::exit(if status == 0 {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
        loop {
            cortex_m::asm::wfi();
        }
    }

    pub fn panic(file: *const c_char, len: usize, line: u32) -> ! {
        // SAFETY: DFFS passes a (pointer, length) pair of its source file name.
        let name = unsafe { core::slice::from_raw_parts(file.cast::<u8>(), len) };
        hprintln!(
            "dffs-firmware: panic at {}:{}",
            core::str::from_utf8(name).unwrap_or("?"),
            line
        );
        debug::exit(debug::EXIT_FAILURE);
        loop {
            cortex_m::asm::wfi();
        }
    }
}

#[cfg(not(feature = "qemu"))]
mod report {
    use core::ffi::c_char;

    use dffs_capi::workload::Figures;

    pub fn paint_stack() {}

    pub fn done(_f: &Figures, _status: i64, _arena: usize) -> ! {
        loop {
            cortex_m::asm::wfi();
        }
    }

    pub fn panic(_file: *const c_char, _len: usize, _line: u32) -> ! {
        cortex_m::asm::udf()
    }
}
