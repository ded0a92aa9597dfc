//! Device presets: the geometry, timing and endurance of the simulated devices, and the raw
//! throughput limits that follow from them.
//!
//! Owns the numbers of design brief section 3 and the arithmetic that turns them into raw limits.
//! It must never hold device state (contents, counters, faults): that is [`crate::SimFlash`]'s.

use core::fmt;

use dffs_flash::{FlashKind, Geometry, PagePairing};
use serde::{Deserialize, Serialize};

/// Name of the default preset.
pub const DEFAULT_PRESET: &str = "nand-slc-128m";

/// Picoseconds per second.
pub const PS_PER_S: f64 = 1e12;
/// The largest device the file system's format addresses (FORMAT §1): 64 GiB.
pub const MAX_DEVICE_BYTES: u64 = 1 << 36;

const US: u64 = 1_000_000;
const NS: u64 = 1_000;
const MS: u64 = 1_000_000_000;

/// Operation costs in integer picoseconds.
///
/// A read costs `read_setup_ps + bytes * read_byte_ps`, a program
/// `prog_setup_ps + bytes * prog_byte_ps` (bytes = data plus OOB bytes the operation transfers),
/// an erase `erase_ps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Timing {
    /// Fixed cost of one read operation (command, array access, NOR dummy cycles).
    pub read_setup_ps: u64,
    /// Cost per byte transferred by a read.
    pub read_byte_ps: u64,
    /// Fixed cost of one program operation.
    pub prog_setup_ps: u64,
    /// Cost per byte transferred and programmed.
    pub prog_byte_ps: u64,
    /// Cost of erasing one erase block.
    pub erase_ps: u64,
}

impl Timing {
    /// Cost of a read that transfers `bytes` bytes.
    pub const fn read_cost_ps(&self, bytes: u64) -> u64 {
        self.read_setup_ps
            .saturating_add(bytes.saturating_mul(self.read_byte_ps))
    }

    /// Cost of a program that transfers `bytes` bytes.
    pub const fn program_cost_ps(&self, bytes: u64) -> u64 {
        self.prog_setup_ps
            .saturating_add(bytes.saturating_mul(self.prog_byte_ps))
    }
}

/// An erase size a preset offers, with its erase time (NOR parts erase 4 KiB sectors, 32 KiB
/// and 64 KiB blocks at different speeds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EraseOption {
    /// Bytes per erase block.
    pub bytes: u32,
    /// Time to erase one such block.
    pub erase_ps: u64,
}

/// A simulated device: geometry, timing and endurance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Preset {
    /// Preset name, e.g. `nand-slc-128m`.
    pub name: &'static str,
    /// One line saying what the device is and where its numbers come from.
    pub description: &'static str,
    /// Geometry (possibly cut to a partition with [`Preset::with_blocks`]).
    pub geometry: Geometry,
    /// Operation costs.
    pub timing: Timing,
    /// Rated erase cycles per block.
    pub endurance: u32,
    /// Erase sizes this device supports (empty: only the geometry's block size).
    pub erase_options: &'static [EraseOption],
}

/// Why a preset could not be adjusted as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PresetError {
    /// A partition needs between 4 blocks and the device's block count.
    BlockCount {
        /// Blocks asked for.
        requested: u64,
        /// Blocks the device has.
        available: u32,
    },
    /// A partition size must be a whole number of erase blocks.
    NotBlockMultiple {
        /// Bytes asked for.
        bytes: u64,
        /// The erase block size.
        block_size: u32,
    },
    /// The device does not offer this erase size.
    EraseSize {
        /// The preset.
        preset: &'static str,
        /// Erase size asked for.
        bytes: u32,
    },
    /// The resulting geometry is not usable.
    Geometry(&'static str),
    /// Larger than the simulator offers.
    TooLarge {
        /// Bytes asked for.
        bytes: u64,
        /// The largest device of this geometry.
        max: u64,
    },
}

impl fmt::Display for PresetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PresetError::BlockCount {
                requested,
                available,
            } => write!(
                f,
                "a partition needs between 4 and {available} erase blocks, not {requested}"
            ),
            PresetError::NotBlockMultiple { bytes, block_size } => write!(
                f,
                "size {bytes} B is not a whole number of {block_size} B erase blocks"
            ),
            PresetError::EraseSize { preset, bytes } => {
                write!(f, "preset {preset} does not offer {bytes} B erase blocks")
            }
            PresetError::Geometry(why) => write!(f, "invalid geometry: {why}"),
            PresetError::TooLarge { bytes, max } => write!(
                f,
                "{bytes} B is larger than the largest simulated device of this geometry \
                 ({max} B)"
            ),
        }
    }
}

impl std::error::Error for PresetError {}

impl Preset {
    /// Bytes one full-page transfer moves: data plus the whole OOB area.
    pub const fn full_page_bytes(&self) -> u64 {
        self.geometry.page_size as u64 + self.geometry.oob_size as u64
    }

    /// Time to read one full page with its OOB.
    pub const fn read_page_ps(&self) -> u64 {
        self.timing.read_cost_ps(self.full_page_bytes())
    }

    /// Time to program one full page with its OOB.
    pub const fn program_page_ps(&self) -> u64 {
        self.timing.program_cost_ps(self.full_page_bytes())
    }

    /// Time to erase one block.
    pub const fn erase_block_ps(&self) -> u64 {
        self.timing.erase_ps
    }

    /// Raw write limit in bytes per second: one block of data per
    /// (pages per block × full-page program time + one erase).
    pub fn raw_write_bytes_per_s(&self) -> f64 {
        let g = &self.geometry;
        let ps =
            g.pages_per_block as f64 * self.program_page_ps() as f64 + self.timing.erase_ps as f64;
        g.block_size() as f64 * PS_PER_S / ps
    }

    /// Raw read limit in bytes per second. NAND: one page of data per full-page read (data plus
    /// OOB). NOR: one whole erase block in one read access.
    pub fn raw_read_bytes_per_s(&self) -> f64 {
        let g = &self.geometry;
        match g.kind {
            FlashKind::Nand => g.page_size as f64 * PS_PER_S / self.read_page_ps() as f64,
            FlashKind::Nor => {
                let bytes = g.block_size() as u64;
                bytes as f64 * PS_PER_S / self.timing.read_cost_ps(bytes) as f64
            }
        }
    }

    /// The same device cut to a partition of its first `blocks` erase blocks (as MTD
    /// partitions are). Needs `4 <= blocks <= ` the current block count.
    pub fn with_blocks(self, blocks: u32) -> Result<Preset, PresetError> {
        if blocks < 4 || blocks > self.geometry.blocks {
            return Err(PresetError::BlockCount {
                requested: blocks as u64,
                available: self.geometry.blocks,
            });
        }
        let mut p = self;
        p.geometry.blocks = blocks;
        p.geometry.validate().map_err(PresetError::Geometry)?;
        Ok(p)
    }

    /// The same device with `bytes` data bytes (a whole number of erase blocks): up to the
    /// chip's capacity, a partition of its first blocks (as [`Preset::with_blocks`]); above it,
    /// a larger chip of the same page and block geometry and timing (as a bigger part of the
    /// same family), up to [`MAX_DEVICE_BYTES`] and the simulator's page limit.
    pub fn with_size_bytes(self, bytes: u64) -> Result<Preset, PresetError> {
        let block_size = self.geometry.block_size();
        if bytes == 0 || bytes % block_size as u64 != 0 {
            return Err(PresetError::NotBlockMultiple { bytes, block_size });
        }
        let blocks = bytes / block_size as u64;
        if blocks <= self.geometry.blocks as u64 {
            return self.with_blocks(blocks as u32);
        }
        let pages = blocks.saturating_mul(self.geometry.pages_per_block as u64);
        if bytes > MAX_DEVICE_BYTES || pages > crate::sim::MAX_PAGES as u64 {
            return Err(PresetError::TooLarge {
                bytes,
                max: MAX_DEVICE_BYTES
                    .min(crate::sim::MAX_PAGES as u64 * self.geometry.page_size as u64),
            });
        }
        self.with_any_blocks(blocks as u32)
    }

    /// Whether this device is larger than the chip its preset names (see
    /// [`Preset::with_size_bytes`]).
    pub fn beyond_chip(&self) -> bool {
        preset(self.name).is_some_and(|chip| self.geometry.capacity() > chip.geometry.capacity())
    }

    /// The same NOR device using erase blocks of `bytes` bytes (one of
    /// [`Preset::erase_options`], e.g. 4096, 32768 or 65536 for `nor-qspi-16m`). The capacity stays the
    /// same; the block count and erase time change.
    pub fn with_erase_size(self, bytes: u32) -> Result<Preset, PresetError> {
        let err = PresetError::EraseSize {
            preset: self.name,
            bytes,
        };
        let opt = self
            .erase_options
            .iter()
            .find(|o| o.bytes == bytes)
            .ok_or(err.clone())?;
        let g = self.geometry;
        if bytes % g.page_size != 0 || g.capacity() % bytes as u64 != 0 {
            return Err(err);
        }
        let mut p = self;
        p.geometry.pages_per_block = bytes / g.page_size;
        p.geometry.blocks = (g.capacity() / bytes as u64) as u32;
        p.timing.erase_ps = opt.erase_ps;
        p.geometry.validate().map_err(PresetError::Geometry)?;
        Ok(p)
    }

    /// The same device with `blocks` erase blocks, more or fewer (used when an image of another
    /// size is opened raw).
    pub(crate) fn with_any_blocks(self, blocks: u32) -> Result<Preset, PresetError> {
        let mut p = self;
        p.geometry.blocks = blocks;
        p.geometry.validate().map_err(PresetError::Geometry)?;
        Ok(p)
    }
}

/// Per-byte cost (ps) such that a full page with OOB (`page + oob` bytes) takes exactly as long
/// as `page` data bytes at `bytes_per_s`, rounded to the nearest picosecond.
fn per_byte_for_bandwidth(page: u32, oob: u32, bytes_per_s: f64) -> u64 {
    (page as f64 * PS_PER_S / (bytes_per_s * (page + oob) as f64)).round() as u64
}

/// A NAND geometry with the marker in OOB bytes 0-1, the free OOB bytes right after it, and ECC
/// steps of 512 B; `nop` partial programs per page of `page_size / nop` bytes each.
const fn nand(
    page_size: u32,
    oob_size: u32,
    oob_free_len: u32,
    pages_per_block: u32,
    blocks: u32,
    nop: u32,
) -> Geometry {
    Geometry {
        kind: FlashKind::Nand,
        page_size,
        oob_size,
        oob_free_offset: 2,
        oob_free_len,
        pages_per_block,
        blocks,
        program_unit: page_size / nop,
        nop,
        in_order: false,
        ecc_strength: 1,
        ecc_step: 512,
        pairing: PagePairing::None,
    }
}

const NOR_ERASE_OPTIONS: &[EraseOption] = &[
    EraseOption {
        bytes: 4096,
        erase_ps: 45 * MS,
    },
    // The 32 KiB block erase of the same part family (W25Q128JV: 120 ms typical, between the
    // 4 KiB sector's 45 ms and the 64 KiB block's 150 ms).
    EraseOption {
        bytes: 32768,
        erase_ps: 120 * MS,
    },
    EraseOption {
        bytes: 65536,
        erase_ps: 150 * MS,
    },
];

/// All presets, the default first.
pub fn presets() -> Vec<Preset> {
    let slc = nand(2048, 64, 38, 64, 1024, 4);
    let mlc = Geometry {
        in_order: true,
        ecc_strength: 8,
        pairing: PagePairing::Mlc2,
        ..nand(4096, 128, 22, 128, 2048, 1)
    };
    let onenand = nand(2048, 64, 20, 64, 2048, 4);
    let mib = (1u64 << 20) as f64;
    vec![
        Preset {
            name: "nand-slc-128m",
            description: "128 MiB SLC NAND (DFFS paper, Table 1)",
            geometry: slc,
            timing: Timing {
                read_setup_ps: 25 * US,
                read_byte_ps: 25 * NS,
                prog_setup_ps: 200 * US,
                prog_byte_ps: 25 * NS,
                erase_ps: 1500 * US,
            },
            endurance: 100_000,
            erase_options: &[],
        },
        Preset {
            name: "nand-mlc-1g",
            description: "1 GiB MLC NAND, in-order page programs (DFFS paper, Table 1)",
            geometry: mlc,
            timing: Timing {
                read_setup_ps: 60 * US,
                read_byte_ps: 25 * NS,
                prog_setup_ps: 800_200 * NS,
                prog_byte_ps: 25 * NS,
                erase_ps: 1500 * US,
            },
            endurance: 10_000,
            erase_options: &[],
        },
        Preset {
            name: "onenand-256m",
            description: "256 MiB OneNAND of the Nokia N810 (DFFS paper, Table 3)",
            geometry: onenand,
            timing: Timing {
                read_setup_ps: 0,
                read_byte_ps: per_byte_for_bandwidth(2048, 64, 108e6),
                prog_setup_ps: 0,
                prog_byte_ps: per_byte_for_bandwidth(2048, 64, 9.3e6),
                // 128 KiB at 64 MB/s = 2.048 ms.
                erase_ps: 2048 * US,
            },
            endurance: 100_000,
            erase_options: &[],
        },
        Preset {
            name: "arm926-nand-128m",
            description: "128 MiB SLC NAND on an ARM926 board, measured raw speeds",
            geometry: slc,
            timing: Timing {
                read_setup_ps: 0,
                read_byte_ps: per_byte_for_bandwidth(2048, 64, 1.1 * mib),
                prog_setup_ps: 0,
                prog_byte_ps: per_byte_for_bandwidth(2048, 64, 0.7 * mib),
                erase_ps: 1500 * US,
            },
            endurance: 100_000,
            erase_options: &[],
        },
        Preset {
            name: "nor-qspi-16m",
            description: "16 MiB serial NOR on 80 MHz QSPI (64 KiB blocks; 4 KiB sectors and 32 KiB blocks offered)",
            geometry: Geometry {
                kind: FlashKind::Nor,
                page_size: 256,
                oob_size: 0,
                oob_free_offset: 0,
                oob_free_len: 0,
                pages_per_block: 256,
                blocks: 256,
                program_unit: 1,
                nop: 0,
                in_order: false,
                ecc_strength: 0,
                ecc_step: 256,
                pairing: PagePairing::None,
            },
            timing: Timing {
                // 8 dummy cycles at 80 MHz per access, then 40 MB/s.
                read_setup_ps: 100 * NS,
                read_byte_ps: 25 * NS,
                // 20 µs + 1.5 µs/B of array time plus the transfer (100 ns + 25 ns/B).
                prog_setup_ps: 20 * US + 100 * NS,
                prog_byte_ps: 1500 * NS + 25 * NS,
                erase_ps: 150 * MS,
            },
            endurance: 100_000,
            erase_options: NOR_ERASE_OPTIONS,
        },
    ]
}

/// The preset called `name`, if there is one.
pub fn preset(name: &str) -> Option<Preset> {
    presets().into_iter().find(|p| p.name == name)
}

/// The default preset ([`DEFAULT_PRESET`]).
pub fn default_preset() -> Preset {
    let all = presets();
    all[0]
}

/// Parses a size such as `8MiB`, `512KiB`, `16M`, `1G`, `4096` or `2MB`. Binary multiples
/// for `K`, `M`, `G` and `KiB`, `MiB`, `GiB`; decimal for `KB`, `MB`, `GB`. `None` if the text is
/// not a size or overflows.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return None;
    }
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "m" | "MiB" => 1 << 20,
        "G" | "g" | "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_has_a_valid_geometry_and_unique_name() {
        let all = presets();
        assert_eq!(all.len(), 5);
        assert_eq!(all[0].name, DEFAULT_PRESET);
        for (i, p) in all.iter().enumerate() {
            p.geometry.validate().unwrap();
            assert!(all[i + 1..].iter().all(|q| q.name != p.name));
            assert_eq!(preset(p.name), Some(*p));
        }
        assert_eq!(preset("nand-tlc"), None);
    }

    #[test]
    fn parse_size_units() {
        assert_eq!(parse_size("8MiB"), Some(8 << 20));
        assert_eq!(parse_size("8M"), Some(8 << 20));
        assert_eq!(parse_size("2MB"), Some(2_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64 KiB"), Some(65536));
        assert_eq!(parse_size("MiB"), None);
        assert_eq!(parse_size("8XB"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }
}
