//! What DFFS's tests, fuzz targets, the torture harness and the benchmarks share, so each
//! exists once:
//!
//! - [`Rng`]: the one deterministic generator (SplitMix64, from `dffs-sim`, whose fault
//!   injection draws from it too);
//! - [`model`]: the reference model of a file-system tree with POSIX results, and reading a
//!   mounted DFFS back into it;
//! - [`RamFlash`]: a RAM device whose every byte can be damaged, with an operation budget and
//!   power cuts;
//! - [`hostile`]: images with every kind of structure, damaging them, bounded walks, and the
//!   fuzz inputs.
//!
//! Depends on `dffs` and `dffs-sim` and is depended on only by tests, fuzz targets, torture
//! and bench: it must never be a dependency of the file system or the simulator.

pub mod hostile;
pub mod model;
pub mod ram_flash;

pub use dffs_sim::{mix, Rng};
pub use model::Model;
pub use ram_flash::RamFlash;
