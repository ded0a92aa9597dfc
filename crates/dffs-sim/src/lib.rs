//! Simulated raw NAND and NOR flash devices for DFFS: timing, counters, fault injection, images.
//!
//! This crate owns the simulator; it implements [`dffs_flash::Flash`] and must never contain file
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
//! # Behaviour a file system can rely on
//!
//! - **Rules** (each violation is an error and changes nothing, costs nothing, and is not
//!   counted as an operation): NAND programs only erased bytes (every byte of the programmed data
//!   range and OOB range must be 0xFF, else `NotErased`); NOR programs only clear bits; at most
//!   `nop` programs per page between erases (`NopExceeded`); in-order devices refuse a page below
//!   the highest programmed page of its block (`OutOfOrder`); data offsets and lengths are
//!   multiples of `program_unit` (`Misaligned`); NOR programs stay inside one program page
//!   (`CrossesPage`); everything else outside the device, page or free OOB is `OutOfRange`.
//!   Priority when several apply: `OutOfRange`/`CrossesPage`, `Misaligned`, `NopExceeded`,
//!   `OutOfOrder`, `NotErased`. A program with empty data and empty OOB is a no-op.
//! - **OOB**: the OOB slices address the free OOB bytes only (index 0 = the first free byte).
//!   The image holds the whole spare area: bad-block marker in bytes 0-1, free bytes, and ECC
//!   bytes (a deterministic checksum of each 512 B step, written when the step is programmed).
//! - **Time**: a read costs `read_setup + bytes × read_byte`, a program
//!   `prog_setup + bytes × prog_byte`, an erase `erase`. On NAND, `bytes` is the data bytes plus
//!   the whole OOB area if the operation touches the OOB at all (controllers move the spare area
//!   as one piece), so a full-page operation costs exactly [`Preset::read_page_ps`] /
//!   [`Preset::program_page_ps`]. `is_bad` charges one OOB read per marker page checked (1 or 2)
//!   and `mark_bad` one OOB program per marker page (2, and they count as 2 program operations
//!   for power cuts).
//! - **Power cuts** ([`SimFlash::cut_power_after`]): the cut program leaves its target range
//!   partly programmed; the cut erase leaves each page of the block erased, untouched or with
//!   random bits set back to 1. The pages concerned become *unstable* until their block is
//!   erased successfully: a NAND read of an unstable page reports `Uncorrectable` with
//!   probability [`UNSTABLE_UNCORRECTABLE_RATE`], otherwise the partial data with up to two extra
//!   weak bits flipped, reported `Clean` (only CRCs catch this). NOR reads of the partly
//!   programmed bits vary from read to read. After the cut, every operation returns `PowerLoss`
//!   until [`SimFlash::power_up`].
//! - **Bit flips**: transient ones (rate per bit read) and injected ones are counted per ECC
//!   codeword read (each 512 B step touched, and the free OOB bytes as one more codeword): up to
//!   the ECC strength the data is correct and the status `Corrected(n)` (n = worst codeword);
//!   beyond it the flips are in the data and the status is `Uncorrectable`. NOR has no ECC: its
//!   flips are silent.
//! - **Bad blocks**: factory bad blocks carry the marker in OOB bytes 0-1 of pages 0 and 1 and
//!   fail every program and erase. A grown bad block (failed program or erase) fails every later
//!   program and erase but is *not* marked: the file system marks it with `mark_bad`, which works
//!   on any block. Failed programs and erases leave partial contents like power cuts do.
//! - **Determinism**: every random choice comes from [`SimOptions::seed`]; the same seed and the
//!   same operations give the same results, also across [`SimFlash::save`] and
//!   [`SimFlash::open`].
//!
//! ```
//! use dffs_flash::{EccStatus, Flash};
//! use dffs_sim::{preset, SimFlash};
//!
//! let mut sim = SimFlash::new(preset::preset("nand-slc-128m").unwrap()).unwrap();
//! sim.program(0, 0, &[0x55; 512], &[1, 2, 3]).unwrap();
//! let (mut data, mut oob) = ([0u8; 512], [0u8; 3]);
//! assert_eq!(sim.read(0, 0, &mut data, &mut oob), Ok(EccStatus::Clean));
//! assert_eq!((data, oob), ([0x55; 512], [1, 2, 3]));
//! assert_eq!(sim.program(0, 0, &[0; 512], &[]), Err(dffs_flash::FlashError::NotErased));
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
pub use rng::{mix, Rng};
pub use shared::SharedSim;
pub use sim::{max_factory_bad, SimFlash, SimOptions, UNSTABLE_UNCORRECTABLE_RATE};
pub use stats::{ps_to_us, Stats};
