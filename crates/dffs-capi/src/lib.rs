//! C API for DFFS: the functions and types of `dffs.h`, for C firmware that links the static
//! library `libdffs_capi.a`.
//!
//! This crate owns the C boundary only: converting C arguments (NUL-terminated paths, raw
//! buffers, flag words) into calls of the `dffs` crate, file positions, directory iteration,
//! negative-errno results, the flash driver callbacks, and the heap and panic hooks a bare-metal
//! build needs. It must never contain file-system logic: every decision about flash, space or
//! durability is the core's.
//!
//! # Ownership and handles
//! - `dffs_t` is opaque and allocated by the library: [`dffs_mount`] stores a pointer to it,
//!   [`dffs_unmount`] frees it (always, even when unmounting fails).
//! - `dffs_file_t` and `dffs_dir_t` are small plain structs the caller allocates (on the stack,
//!   statically or inside its own objects). Their fields are private to the library.
//! - The `dffs_config` passed to `dffs_mount` must stay valid, at the same address, until
//!   `dffs_unmount` returns: driver callbacks receive that pointer (so a driver may find its
//!   state from `context` or by embedding the config in a larger struct).
//!
//! # Heap
//! The file system allocates its caches and buffers on the heap (their total is bounded by the
//! RAM configuration; `dffs_ram_estimate` says how much). With the `global-allocator` feature
//! (default) this crate installs a counting `#[global_allocator]`:
//! - hosted (`std`): memory comes from the system allocator;
//! - bare metal (no `std`): memory comes from two functions the application defines,
//!   `dffs_port_malloc(size, align)` and `dffs_port_free(ptr, size, align)` (declared in
//!   `dffs.h`; forward them to `malloc`/`free`, an RTOS heap or a static pool).
//!
//! `dffs_heap_current`/`dffs_heap_peak` report what the library holds. An allocation failure is
//! fatal (it ends in the panic hook), so give the heap at least the estimate.
//!
//! # Panics
//! The library does not panic on bad input or bad flash; a panic is a bug. Hosted builds catch
//! it at the API boundary: the call returns `DFFS_ERR_IO` and the mounted file system refuses
//! every further call except `dffs_unmount` (which then frees without writing). Bare-metal builds
//! (no `std`, `panic-handler` feature, not under test) install a `#[panic_handler]` that calls
//! the application's `dffs_port_panic(file, file_len, line)`, which must not return (reset the
//! MCU, log and halt, ...).
#![cfg_attr(not(feature = "std"), no_std)]
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

extern crate alloc;

mod dir;
mod file;
mod flash;
mod fs;
mod heap;
mod panic;
mod types;
pub mod workload;

pub use dir::*;
pub use file::*;
pub use fs::*;
pub use heap::*;
pub use panic::dffs_port_panic;
pub use types::*;
