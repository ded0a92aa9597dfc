//! `dffs info IMAGE [--json]`: what an image's device and file system are and hold, and what
//! mounting it costs. `dffs info --ram [IMAGE | --preset NAME [--size S] [--erase-size S]]
//! [--config C] [--json]`: the RAM a configuration needs on that device, before you flash it.
//!
//! Owns the presentation of [`dffs::Info`] and of the simulator's view of the same device: the
//! file system's own erase counters (what it would report on real hardware) beside the device's
//! (the simulator's ground truth), a wear histogram, and the cost of the mount this command did
//! (measured from the simulator's counters around `Fs::mount`); and the RAM report, which runs
//! the C API's standard workload (`dffs_capi::workload`) on a RAM copy of the device's geometry
//! and reads the heap from the C API's counting allocator (this binary's global allocator).
//! It must never change the image (read-only mount; `--ram` never writes it) and never compute
//! file-system figures of its own.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::{Config, FlashKind};
use dffs_capi::workload;
use dffs_sim::preset::{parse_size, Preset};
use serde::Serialize;

use super::image::{chosen_preset, open_device, Access, DeviceArgs, RawArgs, Session};
use super::{human_bytes, round3, sig3, size, CliError};
use dffs::Flash;

/// Options of `dffs info`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file (with --ram: optional; its device is measured, the image is not touched).
    #[arg(required_unless_present = "ram")]
    pub image: Option<PathBuf>,
    /// Print JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Tell the RAM a configuration needs (after mount, and at its peak during a standard small
    /// workload) on the device of IMAGE or --preset, and the cache sizes it is made of.
    #[arg(long)]
    pub ram: bool,
    /// With --ram: the RAM configuration to measure (default: all three).
    #[arg(long, value_enum, requires = "ram")]
    pub config: Option<RamConfig>,
    /// With --ram and no image: cut the device to a partition of this size (`8MiB`, `512KiB`),
    /// or above the chip's capacity a larger chip of its geometry, up to 4 GiB here.
    #[arg(long, value_name = "SIZE", requires = "ram", conflicts_with = "image")]
    pub size: Option<String>,
    /// With --ram and no image, NOR only: the erase block size to use (`4KiB`, `32KiB`, `64KiB`; the
    /// preset's own otherwise).
    #[arg(long, value_name = "SIZE", requires = "ram", conflicts_with = "image")]
    pub erase_size: Option<String>,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// The library's RAM configurations (`Config::smallest`, `Config::default`, `Config::fast`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamConfig {
    /// A few pages of cache, for microcontrollers.
    Smallest,
    /// The library's default.
    Default,
    /// More RAM for speed.
    Fast,
}

impl RamConfig {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RamConfig::Smallest => "smallest",
            RamConfig::Default => "default",
            RamConfig::Fast => "fast",
        }
    }

    pub(crate) fn config(self) -> Config {
        match self {
            RamConfig::Smallest => Config::smallest(),
            RamConfig::Default => Config::default(),
            RamConfig::Fast => Config::fast(),
        }
    }

    /// The C API's `ram_preset` value.
    fn c_preset(self) -> u32 {
        match self {
            RamConfig::Smallest => dffs_capi::DFFS_RAM_SMALLEST,
            RamConfig::Default => dffs_capi::DFFS_RAM_DEFAULT,
            RamConfig::Fast => dffs_capi::DFFS_RAM_FAST,
        }
    }
}

#[derive(Serialize)]
struct EraseCount {
    min: u32,
    mean: f64,
    max: u32,
}

#[derive(Serialize)]
struct Bucket {
    /// Lowest erase count in the bucket.
    from: u32,
    /// Highest erase count in the bucket.
    to: u32,
    blocks: u32,
}

#[derive(Serialize)]
struct Mount {
    sim_us: f64,
    page_reads: u64,
    programs: u64,
    erases: u64,
    /// Whether the mount had to replay a journal (the last session did not unmount cleanly).
    recovered: bool,
    /// Set when the mount came up read-only because its one write failed (see
    /// `dffs::Info::read_only_cause`): the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    read_only_cause: Option<String>,
}

#[derive(Serialize)]
struct Device {
    /// The simulator's erase counters (good blocks).
    erase_count: EraseCount,
    /// Simulated device time spent on this image since it was created, in seconds.
    sim_secs_total: f64,
}

/// What the kernel counted for an MTD device since it appeared.
#[derive(Serialize)]
struct MtdEcc {
    corrected_bits: u32,
    uncorrectable: u32,
    bad_blocks: u32,
}

#[derive(Serialize)]
struct Output {
    image: String,
    preset: String,
    kind: &'static str,
    page_size: u32,
    oob_size: u32,
    pages_per_block: u32,
    blocks: u32,
    erase_size: u32,
    capacity_bytes: u64,
    endurance: Option<u32>,
    /// Bytes of live data and metadata on flash (compressed data counts at its compressed
    /// size; the unused tails of partly filled pages and the reserves do not count).
    used_bytes: u64,
    free_bytes: u64,
    /// Compression new files get (none, lz4, deflate).
    compression: &'static str,
    /// Regular files and symlinks.
    files: u32,
    /// Directories, the root included.
    dirs: u32,
    bad_blocks: u32,
    /// The file system's erase counters (good blocks).
    erase_count: EraseCount,
    wear_histogram: Vec<Bucket>,
    mount: Mount,
    ram_bytes: usize,
    /// The simulator's own view; `null` for a raw dump, whose device history is unknown.
    device: Option<Device>,
    /// The kernel's counters of an MTD device (`ECCGETSTATS`); absent for images.
    #[serde(skip_serializing_if = "Option::is_none")]
    mtd_ecc: Option<MtdEcc>,
}

/// Up to `n` buckets of equal width covering `counts`' range.
fn histogram(counts: &[u32], n: u32) -> Vec<Bucket> {
    let (Some(&lo), Some(&hi)) = (counts.iter().min(), counts.iter().max()) else {
        return Vec::new();
    };
    let width = ((hi - lo) / n + 1).max(1);
    let buckets = (hi - lo) / width + 1;
    let mut out: Vec<Bucket> = (0..buckets)
        .map(|i| Bucket {
            from: lo + i * width,
            to: (lo + (i + 1) * width - 1).min(hi),
            blocks: 0,
        })
        .collect();
    for &c in counts {
        out[((c - lo) / width) as usize].blocks += 1;
    }
    out
}

/// Min, mean and max of `counts` of the blocks that are not in `bad`.
fn erase_stats(counts: &[u32], bad: &[u32]) -> EraseCount {
    let good: Vec<u32> = counts
        .iter()
        .enumerate()
        .filter(|(b, _)| !bad.contains(&(*b as u32)))
        .map(|(_, &c)| c)
        .collect();
    if good.is_empty() {
        return EraseCount {
            min: 0,
            mean: 0.0,
            max: 0,
        };
    }
    let sum: u64 = good.iter().map(|&c| c as u64).sum();
    EraseCount {
        min: good.iter().copied().min().unwrap_or(0),
        mean: round3(sum as f64 / good.len() as f64),
        max: good.iter().copied().max().unwrap_or(0),
    }
}

/// Runs `dffs info`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    if args.ram {
        return run_ram(args, out);
    }
    let Some(image) = &args.image else {
        return Err(CliError::msg("an image is needed (or --ram)"));
    };
    let mut s = Session::open(image, Access::ReadOnly, &args.raw)?;
    let cost = s.mount_cost();
    let info = s.fs().info();
    let ram_bytes = s.fs().ram_bytes();
    let dev = s.device();
    let s_is_mtd = !dev.simulated();
    let label = dev.label();
    let endurance = dev.preset().map(|p| p.endurance);
    let g = dev.geometry();
    let device = match dev.sim() {
        Some(sim) if !s.is_raw() => {
            let mut bad = sim.factory_bad_blocks();
            bad.extend(sim.grown_bad_blocks());
            Some(Device {
                erase_count: erase_stats(sim.erase_counts(), &bad),
                sim_secs_total: sim.stats().sim_secs(),
            })
        }
        _ => None,
    };
    let mtd_ecc = match dev {
        super::image::Device::Mtd(m) => m.device().ecc_stats().ok().map(|e| MtdEcc {
            corrected_bits: e.corrected,
            uncorrectable: e.failed,
            bad_blocks: e.badblocks,
        }),
        super::image::Device::Image(_) => None,
    };
    let (mn, mean, mx) = info.erase_count;
    let o = Output {
        image: image.display().to_string(),
        preset: label,
        kind: match g.kind {
            FlashKind::Nand => "nand",
            FlashKind::Nor => "nor",
        },
        page_size: g.page_size,
        oob_size: g.oob_size,
        pages_per_block: g.pages_per_block,
        blocks: g.blocks,
        erase_size: g.block_size(),
        capacity_bytes: g.capacity(),
        endurance,
        used_bytes: info.used_bytes,
        free_bytes: info.free_bytes,
        compression: dffs::format::compress::name(info.params.compression),
        files: info.files,
        dirs: info.dirs,
        bad_blocks: info.bad_blocks,
        erase_count: EraseCount {
            min: mn,
            mean: round3(mean),
            max: mx,
        },
        wear_histogram: histogram(&info.erase_counts, 10),
        mount: Mount {
            sim_us: round3(cost.sim_us()),
            page_reads: cost.reads,
            programs: cost.programs,
            erases: cost.erases,
            recovered: info.recovered,
            read_only_cause: info.read_only_cause.map(|e| format!("{e:?}")),
        },
        ram_bytes,
        device,
        mtd_ecc,
    };
    s.finish()?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &o)?;
        writeln!(out)?;
        return Ok(());
    }
    let page = if g.oob_size > 0 {
        format!("{}+{} B pages", g.page_size, g.oob_size)
    } else {
        format!("{} B pages", g.page_size)
    };
    let lines = [
        ("image", o.image.clone()),
        (
            "device",
            format!(
                "{} ({}, {page}, {} pages per block, {} blocks of {} = {})",
                o.preset,
                o.kind.to_uppercase(),
                g.pages_per_block,
                g.blocks,
                size(g.block_size() as u64),
                size(g.capacity())
            ),
        ),
        (
            "space",
            format!(
                "{} used, {} free",
                human_bytes(o.used_bytes),
                human_bytes(o.free_bytes)
            ),
        ),
        (
            "contents",
            format!(
                "{} files and symlinks, {} directories (root included)",
                o.files, o.dirs
            ),
        ),
        ("compression", o.compression.to_string()),
        ("bad blocks", o.bad_blocks.to_string()),
        (
            "mtd",
            match &o.mtd_ecc {
                Some(e) => format!(
                    "kernel counts {} corrected bit flips, {} uncorrectable reads, {} bad blocks",
                    e.corrected_bits, e.uncorrectable, e.bad_blocks
                ),
                None => String::new(),
            },
        ),
        (
            "erase count",
            format!(
                "min {}, mean {}, max {} (file system's counters; endurance {})",
                o.erase_count.min,
                sig3(o.erase_count.mean),
                o.erase_count.max,
                o.endurance.map_or("unknown".to_string(), |e| e.to_string())
            ),
        ),
        (
            "",
            match &o.device {
                Some(d) => format!(
                    "min {}, mean {}, max {} (device's counters, from the simulator)",
                    d.erase_count.min,
                    sig3(d.erase_count.mean),
                    d.erase_count.max
                ),
                None if s_is_mtd => "device's counters: on the chip (MTD keeps none)".to_string(),
                None => "device's counters unknown (a raw dump has no sidecar)".to_string(),
            },
        ),
        (
            "mount",
            format!(
                "{} page reads, {} µs of {}{}",
                o.mount.page_reads,
                sig3(o.mount.sim_us),
                if s_is_mtd {
                    "time in MTD calls"
                } else {
                    "simulated device time"
                },
                match (&o.mount.read_only_cause, o.mount.recovered) {
                    (Some(e), _) => format!(
                        " (recovered, read-only: writing the checkpoint again failed with {e})"
                    ),
                    (None, true) => " (recovered: the last session did not unmount cleanly)".into(),
                    (None, false) => " (clean)".into(),
                }
            ),
        ),
        ("RAM", format!("{} B after mount", o.ram_bytes)),
    ];
    for (k, v) in lines {
        // The `mtd` line only for MTD devices.
        if k == "mtd" && v.is_empty() {
            continue;
        }
        writeln!(out, "{k:<12}{v}")?;
    }
    writeln!(out, "wear (file system's erase counts: blocks)")?;
    let most = o.wear_histogram.iter().map(|b| b.blocks).max().unwrap_or(0);
    let label = |b: &Bucket| {
        if b.from == b.to {
            b.from.to_string()
        } else {
            format!("{}-{}", b.from, b.to)
        }
    };
    let w = o
        .wear_histogram
        .iter()
        .map(|b| label(b).len())
        .max()
        .unwrap_or(1);
    for b in &o.wear_histogram {
        let bar = if most == 0 {
            0
        } else {
            (b.blocks as u64 * 50).div_ceil(most as u64) as usize
        };
        writeln!(out, "  {:>w$} | {} {}", label(b), "#".repeat(bar), b.blocks)?;
    }
    Ok(())
}

// ----- --ram ------------------------------------------------------------------------------

/// The cache sizes and limits a configuration is made of (`dffs::Config`).
#[derive(Serialize)]
struct CacheBudget {
    dir_cache: usize,
    map_cache: usize,
    index_cache: usize,
    inode_cache: usize,
    data_cache: usize,
    max_dirty: usize,
    /// Small dirty items per count of `max_dirty`, on devices large enough (`Config::shares_on`).
    dirty_shares: usize,
    max_open: usize,
    overlay_extents: usize,
    journal_limit: u32,
    table_cache: usize,
    records_ram: usize,
}

#[derive(Serialize)]
struct RamFigures {
    config: &'static str,
    caches: CacheBudget,
    /// The library's planned bound for this configuration (`Config::ram_estimate`).
    estimate_bytes: usize,
    /// Heap held right after mount (measured).
    after_mount_bytes: usize,
    /// Most heap held at once from mount to unmount during the workload (measured).
    peak_bytes: usize,
    /// Most heap held at once while formatting (measured; a factory or first-boot step).
    format_peak_bytes: usize,
    /// The library's own count right after mount (`Fs::ram_bytes`).
    library_after_mount_bytes: usize,
    /// The library's own count at its highest, sampled after every call of the workload
    /// (below `peak_bytes` by the buffers a call holds only while it runs).
    library_peak_bytes: usize,
}

#[derive(Serialize)]
struct RamOutput {
    preset: &'static str,
    kind: &'static str,
    page_size: u32,
    pages_per_block: u32,
    blocks: u32,
    erase_size: u32,
    capacity_bytes: u64,
    /// Pointer width of the machine that measured (heap figures shrink on a 32-bit MCU).
    pointer_bits: u32,
    workload: &'static str,
    configs: Vec<RamFigures>,
}

const WORKLOAD: &str = "format, mount, mkdir, create and write 3000 B in 256 B pieces, fsync, \
    overwrite 100 B, fsync, close, rename, stat, read back, list the directory; 20 files of \
    700 B in 10 directories, three open at once, each synced, one renamed; unmount, mount, \
    read and list everything, unmount (through the C API)";

/// The device `--ram` measures: the image's, or the chosen preset cut and re-blocked as asked.
fn ram_preset(args: &Args) -> Result<Preset, CliError> {
    if let Some(image) = &args.image {
        let (dev, _) = open_device(image, &args.raw, Access::ReadOnly)?;
        return dev.preset().copied().ok_or_else(|| {
            CliError::msg(format!(
                "{}: --ram measures on a simulated device: give --preset NAME without the MTD \
                 device",
                image.display()
            ))
        });
    }
    let base = chosen_preset(&DeviceArgs {
        preset: args.raw.preset.clone(),
        size: None,
        erase_size: args.erase_size.clone(),
    })?;
    match &args.size {
        None => Ok(base),
        Some(text) => {
            let bytes =
                parse_size(text).ok_or_else(|| CliError::msg(format!("invalid size '{text}'")))?;
            base.with_size_bytes(bytes)
                .map_err(|e| CliError::msg(format!("--size {text} for {}: {e}", base.name)))
        }
    }
}

fn measure(
    c: RamConfig,
    geometry: dffs_capi::dffs_geometry,
    device: &mut [u8],
) -> Result<RamFigures, CliError> {
    let f = workload::run(device, geometry, c.c_preset()).map_err(|e| {
        CliError::msg(format!(
            "the RAM workload failed in the {} configuration at '{}' ({})",
            c.name(),
            e.step,
            e.code
        ))
    })?;
    if f.heap_peak == 0 {
        return Err(CliError::msg(
            "no heap was counted: this build lacks the C API's counting allocator",
        ));
    }
    let k = c.config();
    Ok(RamFigures {
        config: c.name(),
        caches: CacheBudget {
            dir_cache: k.dir_cache,
            map_cache: k.map_cache,
            index_cache: k.index_cache,
            inode_cache: k.inode_cache,
            data_cache: k.data_cache,
            max_dirty: k.max_dirty,
            dirty_shares: k.dirty_shares,
            max_open: k.max_open,
            overlay_extents: k.overlay_extents,
            journal_limit: k.journal_limit,
            table_cache: k.table_cache,
            records_ram: k.records_ram,
        },
        estimate_bytes: f.estimate,
        after_mount_bytes: f.heap_after_mount,
        peak_bytes: f.heap_peak,
        format_peak_bytes: f.heap_peak_format,
        library_after_mount_bytes: f.ram_bytes_after_mount,
        library_peak_bytes: f.ram_bytes_peak,
    })
}

/// A row of the cache table: its label and how to show a configuration's value.
type CacheRow = (&'static str, fn(&CacheBudget) -> String);

/// The largest device `info --ram` runs its workload on (the device is a buffer in host
/// memory).
const RAM_DEVICE_MAX: u64 = 4 << 30;

/// Runs `dffs info --ram`.
fn run_ram(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let p = ram_preset(args)?;
    let g = p.geometry;
    if g.capacity() > RAM_DEVICE_MAX {
        return Err(CliError::msg(format!(
            "--ram runs its workload on a device held in host memory, at most {} B; for a \
             larger device, `dffs format --size` an image and `dffs info IMAGE` gives its RAM \
             after mount",
            RAM_DEVICE_MAX
        )));
    }
    let geometry = workload::c_geometry(&g);
    let mut device = vec![0xFFu8; workload::device_bytes(&geometry)];
    let configs = match args.config {
        Some(c) => vec![c],
        None => vec![RamConfig::Smallest, RamConfig::Default, RamConfig::Fast],
    };
    let figures = configs
        .into_iter()
        .map(|c| measure(c, geometry, &mut device))
        .collect::<Result<Vec<_>, _>>()?;
    let o = RamOutput {
        preset: p.name,
        kind: match g.kind {
            FlashKind::Nand => "nand",
            FlashKind::Nor => "nor",
        },
        page_size: g.page_size,
        pages_per_block: g.pages_per_block,
        blocks: g.blocks,
        erase_size: g.block_size(),
        capacity_bytes: g.capacity(),
        pointer_bits: usize::BITS,
        workload: WORKLOAD,
        configs: figures,
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &o)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "device      {} ({}, {} B pages, {} pages per block, {} blocks of {} = {})",
        o.preset,
        o.kind.to_uppercase(),
        g.page_size,
        g.pages_per_block,
        g.blocks,
        size(g.block_size() as u64),
        size(g.capacity())
    )?;
    writeln!(out, "workload    {WORKLOAD}")?;
    let kib = |b: usize| format!("{:.1} KiB", b as f64 / 1024.0);
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        ("", o.configs.iter().map(|c| c.config.to_string()).collect()),
        (
            "after mount",
            o.configs.iter().map(|c| kib(c.after_mount_bytes)).collect(),
        ),
        (
            "peak",
            o.configs.iter().map(|c| kib(c.peak_bytes)).collect(),
        ),
        (
            "counted peak",
            o.configs
                .iter()
                .map(|c| kib(c.library_peak_bytes))
                .collect(),
        ),
        (
            "format peak",
            o.configs.iter().map(|c| kib(c.format_peak_bytes)).collect(),
        ),
        (
            "estimate",
            o.configs.iter().map(|c| kib(c.estimate_bytes)).collect(),
        ),
    ];
    let caches: [CacheRow; 10] = [
        ("dir cache", |c| c.dir_cache.to_string()),
        ("map cache", |c| c.map_cache.to_string()),
        ("index cache", |c| c.index_cache.to_string()),
        ("inode cache", |c| c.inode_cache.to_string()),
        ("data cache", |c| c.data_cache.to_string()),
        ("max dirty", |c| c.max_dirty.to_string()),
        ("dirty shares", |c| c.dirty_shares.to_string()),
        ("max open", |c| c.max_open.to_string()),
        ("journal", |c| size(c.journal_limit as u64)),
        ("table cache", |c| c.table_cache.to_string()),
    ];
    for (name, f) in caches {
        rows.push((name, o.configs.iter().map(|c| f(&c.caches)).collect()));
    }
    for (name, cells) in rows {
        write!(out, "{name:<12}")?;
        for cell in cells {
            write!(out, "{cell:>12}")?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "heap measured with the C API's counting allocator on this {}-bit host; a 32-bit MCU \
         needs less (see docs/FOOTPRINT.md). Counted peak: the library's own count \
         (`ram_bytes`) at its highest after a call, less than the peak by the buffers a call \
         holds while it runs. Caches count items (pages, nodes, inodes).",
        o.pointer_bits
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_covers_the_range() {
        let h = histogram(&[0, 0, 1, 5, 9, 9], 10);
        assert_eq!(h.len(), 10);
        assert_eq!(h[0].blocks, 2);
        assert_eq!(h[9].blocks, 2);
        assert_eq!(h.iter().map(|b| b.blocks).sum::<u32>(), 6);
        let h = histogram(&[3, 3, 3], 10);
        assert_eq!((h.len(), h[0].from, h[0].to, h[0].blocks), (1, 3, 3, 3));
        let h = histogram(&[0, 100], 10);
        assert!(h.len() <= 10);
        assert_eq!(h.last().unwrap().to, 100);
        assert_eq!(h.iter().map(|b| b.blocks).sum::<u32>(), 2);
        assert!(histogram(&[], 10).is_empty());
    }

    #[test]
    fn erase_stats_skip_bad_blocks() {
        let e = erase_stats(&[1, 2, 100, 3], &[2]);
        assert_eq!((e.min, e.mean, e.max), (1, 2.0, 3));
    }
}
