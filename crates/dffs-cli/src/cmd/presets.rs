//! `dffs presets`: the simulated devices, their geometry and raw throughput limits.
//!
//! Owns only the presentation (table and JSON); every number comes from `dffs_sim::preset`.
//! It must never compute device figures of its own.

use std::io::Write;

use clap::Args as ClapArgs;
use dffs::FlashKind;
use dffs_sim::preset::{self, Preset};
use serde::Serialize;

use super::{round3, sig3, size, CliError};

/// Options of `dffs presets`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Print JSON instead of a table (MB = 10^6 bytes).
    #[arg(long)]
    pub json: bool,
}

/// One preset as `--json` prints it.
#[derive(Serialize)]
struct Row {
    name: &'static str,
    description: &'static str,
    default: bool,
    kind: &'static str,
    page_size: u32,
    oob_size: u32,
    oob_free_len: u32,
    pages_per_block: u32,
    blocks: u32,
    erase_size: u32,
    capacity_bytes: u64,
    program_unit: u32,
    /// Partial programs per page; 0 = unlimited.
    nop: u32,
    in_order: bool,
    ecc_bits_per_512: u32,
    endurance: u32,
    read_page_us: f64,
    program_page_us: f64,
    erase_block_us: f64,
    raw_write_mb_s: f64,
    raw_read_mb_s: f64,
    raw_write_bytes_per_s: f64,
    raw_read_bytes_per_s: f64,
    erase_sizes: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_write_mb_s_4k_erase: Option<f64>,
}

#[derive(Serialize)]
struct Output {
    presets: Vec<Row>,
}

fn ecc_bits_per_512(p: &Preset) -> u32 {
    let g = &p.geometry;
    if g.ecc_strength == 0 || g.ecc_step == 0 {
        0
    } else {
        (g.ecc_strength as u64 * 512 / g.ecc_step as u64) as u32
    }
}

/// Raw write limit with 4 KiB erase sectors, for devices that offer them (other than their
/// default erase size).
fn write_4k(p: &Preset) -> Option<f64> {
    if p.geometry.block_size() == 4096 {
        return None;
    }
    p.with_erase_size(4096)
        .ok()
        .map(|q| q.raw_write_bytes_per_s())
}

fn row(p: &Preset) -> Row {
    let g = &p.geometry;
    Row {
        name: p.name,
        description: p.description,
        default: p.name == preset::DEFAULT_PRESET,
        kind: match g.kind {
            FlashKind::Nand => "nand",
            FlashKind::Nor => "nor",
        },
        page_size: g.page_size,
        oob_size: g.oob_size,
        oob_free_len: g.oob_free_len,
        pages_per_block: g.pages_per_block,
        blocks: g.blocks,
        erase_size: g.block_size(),
        capacity_bytes: g.capacity(),
        program_unit: g.program_unit,
        nop: g.nop,
        in_order: g.in_order,
        ecc_bits_per_512: ecc_bits_per_512(p),
        endurance: p.endurance,
        read_page_us: p.read_page_ps() as f64 / 1e6,
        program_page_us: p.program_page_ps() as f64 / 1e6,
        erase_block_us: p.erase_block_ps() as f64 / 1e6,
        raw_write_mb_s: round3(p.raw_write_bytes_per_s() / 1e6),
        raw_read_mb_s: round3(p.raw_read_bytes_per_s() / 1e6),
        raw_write_bytes_per_s: p.raw_write_bytes_per_s(),
        raw_read_bytes_per_s: p.raw_read_bytes_per_s(),
        erase_sizes: p.erase_options.iter().map(|o| o.bytes).collect(),
        raw_write_mb_s_4k_erase: write_4k(p).map(|b| round3(b / 1e6)),
    }
}

/// Runs `dffs presets`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let all = preset::presets();
    if args.json {
        let output = Output {
            presets: all.iter().map(row).collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &output)?;
        writeln!(out)?;
        return Ok(());
    }
    let header = [
        "NAME",
        "KIND",
        "PAGE+OOB",
        "PAGES/BLK",
        "BLOCKS",
        "ERASE",
        "CAPACITY",
        "NOP",
        "ECC/512B",
        "ENDURANCE",
        "WRITE MB/s",
        "READ MB/s",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for p in &all {
        let g = &p.geometry;
        let mut name = p.name.to_string();
        if p.name == preset::DEFAULT_PRESET {
            name.push_str(" *");
        }
        rows.push(vec![
            name,
            match g.kind {
                FlashKind::Nand => "NAND".into(),
                FlashKind::Nor => "NOR".into(),
            },
            if g.oob_size > 0 {
                format!("{}+{}", g.page_size, g.oob_size)
            } else {
                g.page_size.to_string()
            },
            g.pages_per_block.to_string(),
            g.blocks.to_string(),
            size(g.block_size() as u64),
            size(g.capacity()),
            if g.nop == 0 {
                "-".into()
            } else {
                g.nop.to_string()
            },
            ecc_bits_per_512(p).to_string(),
            p.endurance.to_string(),
            sig3(p.raw_write_bytes_per_s() / 1e6),
            sig3(p.raw_read_bytes_per_s() / 1e6),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    writeln!(out)?;
    for p in &all {
        for o in p.erase_options {
            if o.bytes == p.geometry.block_size() {
                continue;
            }
            let q = p.with_erase_size(o.bytes)?;
            writeln!(
                out,
                "{} with {} KiB erase {} ({} blocks): raw write {} MB/s",
                p.name,
                o.bytes / 1024,
                if o.bytes == 4096 { "sectors" } else { "blocks" },
                q.geometry.blocks,
                sig3(q.raw_write_bytes_per_s() / 1e6)
            )?;
        }
    }
    writeln!(
        out,
        "* default preset. Raw limits: write = program + erase of whole blocks, read = full \
         pages (NOR: whole blocks); MB = 10^6 bytes."
    )?;
    Ok(())
}
