//! Suite `space` (seed 001's space-efficiency table): on an empty `nand-slc-128m`, the space
//! the file system itself takes; then a 1 MiB file of random data written as one piece, and
//! written in 16-byte pieces with a sync after each.
//!
//! Owns the "df" arithmetic: used space is what `df` would report (the file system's size
//! minus what it still offers), measured after an unmount and a fresh mount so that only
//! durable state counts; overhead is relative to the data written (or, for the empty file
//! system, to the device). It must never count space the file system has not committed, and
//! never skip checking the file's content.

use std::io::Write;

use crate::content::Content;
use crate::devices::{describe, device_preset, Meter};
use crate::fsapi::{verify_file, End, FsResult, OpenMode};
use crate::report::{table, Column, Row, SuiteReport};
use crate::suites::{pair_and_compressed, progress};
use crate::{Options, Scale};

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let s = opts.scale;
    let p = device_preset("nand-slc-128m", s.pick(Some(4 << 20), Some(32 << 20), None))?;
    let file_len: u64 = s.pick(16 << 10, 64 << 10, 1 << 20);
    let mut rep = SuiteReport::new("space", s != Scale::Full, describe(&p));
    rep.note(
        "kib_used is df's view: the file system's size minus what it still offers, after an \
         unmount and a fresh mount; for `empty` it is the device capacity minus what an empty \
         file system offers (overhead relative to the device), for the file cases the space \
         the file took (overhead relative to the file's size)",
    );
    rep.note(
        "compress: DFFS also runs formatted with LZ4; the file's content is random, so \
         compression can only show that incompressible data costs nothing extra",
    );
    rep.note(
        "littlefs allocates whole 128 KiB erase blocks to a file's data, so its df figures \
         move in 128 KiB steps",
    );
    let capacity = p.geometry.capacity();
    for case in ["empty", "one_piece", "pieces_16b"] {
        for (mut d, z) in pair_and_compressed(p)? {
            progress(opts, format!("space {case} {} {z}", d.name()));
            rep.config_line(d.config());
            let mut row = Row::new(d.name(), case)
                .param("compress", z)
                .param("file_bytes", if case == "empty" { 0 } else { file_len })
                .param(
                    "write_size",
                    match case {
                        "one_piece" => file_len,
                        "pieces_16b" => 16,
                        _ => 0,
                    },
                );
            let r = one(&mut *d, case, file_len, capacity, &mut row);
            if let Err(e) = r {
                row.fail(e);
            }
            rep.results.push(row);
        }
    }
    Ok(rep)
}

/// Available bytes (df) after a fresh mount.
fn available(d: &mut dyn crate::fsapi::Driver) -> FsResult<(u64, u64)> {
    let mut total = 0;
    let mut used = 0;
    d.session(End::Unmount, &mut |s| {
        total = s.total_bytes()?;
        used = s.used_bytes()?;
        Ok(())
    })?;
    Ok((total, total - used.min(total)))
}

fn one(
    d: &mut dyn crate::fsapi::Driver,
    case: &str,
    len: u64,
    capacity: u64,
    row: &mut Row,
) -> FsResult<()> {
    d.format()?;
    let (_, avail0) = available(d)?;
    if case == "empty" {
        let used = capacity - avail0.min(capacity);
        row.set("kib_used", used as f64 / 1024.0);
        row.set("overhead_pct", 100.0 * used as f64 / capacity as f64);
        row.set("device_kib", capacity / 1024);
        row.set("available_kib", avail0 / 1024);
        row.set("reads", 0);
        row.set("programs", 0);
        row.set("erases", 0);
        return Ok(());
    }
    let content = Content::random(0x5BACE);
    let piece = if case == "one_piece" {
        len as usize
    } else {
        16
    };
    let meter = Meter::start(d.sim());
    let mut buf = vec![0u8; piece];
    let mut ram = 0usize;
    d.session(End::Unmount, &mut |s| {
        s.take_peak_ram();
        let r = s.with_file("/file", OpenMode::CREATE, &mut |f| {
            let mut off = 0u64;
            while off < len {
                let n = (piece as u64).min(len - off) as usize;
                content.fill(off, &mut buf[..n]);
                f.write_at(off, &buf[..n])?;
                if piece < len as usize {
                    f.sync()?;
                }
                off += n as u64;
            }
            f.sync()
        });
        ram = s.take_peak_ram();
        r
    })?;
    let m = meter.stop();
    row.set("ram_bytes", ram);
    m.put(&mut row.metrics, "");
    row.set(
        "write_kb_s",
        crate::devices::round(len as f64 / 1000.0 / m.sim_s()),
    );
    let (_, avail1) = available(d)?;
    let used = avail0.saturating_sub(avail1);
    row.set("kib_used", used as f64 / 1024.0);
    row.set(
        "overhead_pct",
        crate::devices::round(100.0 * (used as f64 - len as f64) / len as f64),
    );
    d.session(End::Unmount, &mut |s| {
        verify_file(s, "/file", &content, len, 4096)
    })?;
    Ok(())
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    for (metric, label) in [
        ("kib_used", "KiB used (df)"),
        ("overhead_pct", "overhead % (lower is better)"),
    ] {
        table(
            out,
            rep,
            "space",
            Column {
                metric,
                label,
                higher_is_better: false,
            },
            &[],
        )?;
    }
    Ok(())
}
