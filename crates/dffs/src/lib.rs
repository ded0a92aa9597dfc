//! DFFS, a direct flash file system for raw NAND and NOR flash.
//!
//! Layers, from the device up (data flows one way, each layer only calls the one below):
//! - [`flash`]: the device model (NAND and NOR behind one trait) and the `embedded-storage`
//!   adapter.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod flash;

pub use flash::{EccStatus, Flash, FlashError, FlashKind, Geometry, NorFlashDevice};
