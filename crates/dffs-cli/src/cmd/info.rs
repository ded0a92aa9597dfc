//! `dffs info IMAGE [--json]`: what an image's device and file system are and hold, and what
//! mounting it costs.
//!
//! Owns the presentation of [`dffs::Info`] and of the simulator's view of the same device: the
//! file system's own erase counters (what it would report on real hardware) beside the device's
//! (the simulator's ground truth), a wear histogram, and the cost of the mount this command did
//! (measured from the simulator's counters around `Fs::mount`). It must never change the image
//! (read-only mount) and never compute file-system figures of its own.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::FlashKind;
use serde::Serialize;

use super::image::{Access, RawArgs, Session};
use super::{human_bytes, round3, sig3, size, CliError};

/// Options of `dffs info`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Print JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub raw: RawArgs,
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
}

#[derive(Serialize)]
struct Device {
    /// The simulator's erase counters (good blocks).
    erase_count: EraseCount,
    /// Simulated device time spent on this image since it was created, in seconds.
    sim_secs_total: f64,
}

#[derive(Serialize)]
struct Output {
    image: String,
    preset: &'static str,
    kind: &'static str,
    page_size: u32,
    oob_size: u32,
    pages_per_block: u32,
    blocks: u32,
    erase_size: u32,
    capacity_bytes: u64,
    endurance: u32,
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
    let mut s = Session::open(&args.image, Access::ReadOnly, &args.raw)?;
    let cost = s.mount_cost();
    let info = s.fs().info();
    let ram_bytes = s.fs().ram_bytes();
    let sim = s.sim();
    let p = *sim.preset();
    let g = p.geometry;
    let mut bad = sim.factory_bad_blocks();
    bad.extend(sim.grown_bad_blocks());
    let device = (!s.is_raw()).then(|| Device {
        erase_count: erase_stats(sim.erase_counts(), &bad),
        sim_secs_total: sim.stats().sim_secs(),
    });
    let (mn, mean, mx) = info.erase_count;
    let o = Output {
        image: args.image.display().to_string(),
        preset: p.name,
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
        endurance: p.endurance,
        used_bytes: info.used_bytes,
        free_bytes: info.free_bytes,
        compression: dffs::compress::name(info.params.compression),
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
        },
        ram_bytes,
        device,
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
            "erase count",
            format!(
                "min {}, mean {}, max {} (file system's counters; endurance {})",
                o.erase_count.min,
                sig3(o.erase_count.mean),
                o.erase_count.max,
                o.endurance
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
                None => "device's counters unknown (a raw dump has no sidecar)".to_string(),
            },
        ),
        (
            "mount",
            format!(
                "{} page reads, {} µs of simulated device time{}",
                o.mount.page_reads,
                sig3(o.mount.sim_us),
                if o.mount.recovered {
                    " (recovered: the last session did not unmount cleanly)"
                } else {
                    " (clean)"
                }
            ),
        ),
        ("RAM", format!("{} B after mount", o.ram_bytes)),
    ];
    for (k, v) in lines {
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
