//! Simulated raw NAND and NOR flash devices for DFFS: timing, counters, fault injection, images.
//!
//! This crate owns the simulator; it implements [`dffs::Flash`] and must never contain file
//! system logic, nor relax a device rule to make a caller's life easier.
//!
//! - [`preset`]: the device presets (geometry, timing, endurance) and their raw limits.
//! - [`SimFlash`]: a simulated device. It enforces the device rules (program only erased bytes,
//!   NOP, in-order programming, alignment, ranges), charges every operation its simulated time,
//!   counts everything ([`Stats`], per-block erase counters) and injects faults: power cuts at
//!   the N-th program or erase (leaving partial pages or blocks), bit flips reported through the
//!   ECC status, factory and grown bad blocks.
//! - [`SharedSim`]: a cloneable handle, so a test can steer the device a file system is using.
//! - Images: [`SimFlash::save`], [`SimFlash::open`], [`SimFlash::create`],
//!   [`SimFlash::open_raw`]; NAND images interleave each page's data and OOB as
//!   `nanddump --oob` does, with a JSON sidecar `<image>.sim` for the simulator state.
//!
//! ```
//! use dffs::{EccStatus, Flash};
//! use dffs_sim::{preset, SimFlash};
//!
//! let mut sim = SimFlash::new(preset::preset("nand-slc-128m").unwrap()).unwrap();
//! sim.program(0, 0, &[0x55; 512], &[1, 2, 3]).unwrap();
//! let (mut data, mut oob) = ([0u8; 512], [0u8; 3]);
//! assert_eq!(sim.read(0, 0, &mut data, &mut oob), Ok(EccStatus::Clean));
//! assert_eq!((data, oob), ([0x55; 512], [1, 2, 3]));
//! assert_eq!(sim.program(0, 0, &[0; 512], &[]), Err(dffs::FlashError::NotErased));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod image;
pub mod preset;
mod rng;
mod shared;
mod sim;
mod stats;

pub use error::SimError;
pub use image::{sidecar_path, SIDECAR_FORMAT, SIDECAR_VERSION};
pub use preset::{presets, EraseOption, Preset, PresetError, Timing};
pub use shared::SharedSim;
pub use sim::{max_factory_bad, SimFlash, SimOptions, UNSTABLE_UNCORRECTABLE_RATE};
pub use stats::{ps_to_us, Stats};
