//! Suite `wear` (wear leveling): `nand-slc-128m` filled to 50% with cold data, then a 1 MiB hot
//! file rewritten (truncated and written anew, 64 KiB writes, fsync, close) until 20 times the device
//! capacity has been written. Reports the erase-count distribution of every block as the
//! simulator counted it (min, mean, max, standard deviation) and the write amplification.
//! A second case, many checkpoints and little data (`metadata_churn`), on 1 MiB of 4 KiB NOR
//! sectors: 100-byte files created (written and synced) in ten directories, the oldest of 40
//! removed after each, 20,000 times; it wears whatever holds a file system's metadata roots
//! (DFFS's anchors, littlefs's superblock and directory pairs) against the rest.
//!
//! Owns that workload and its figures; write amplification is pages programmed times the page
//! size over the bytes the application wrote during the rewrites (a partial-page program counts
//! as a page, as it costs one program operation). The cold files and the last hot file are read
//! back after a remount. Must never take erase counts from a file system's own bookkeeping: the
//! device's counters are the truth both file systems are judged by.

use std::io::Write;

use crate::content::Content;
use crate::devices::{describe, device_preset, round, Meter};
use crate::fsapi::{
    verify_file, write_file, write_file_durable, Driver, End, FsError, FsResult, OpenMode,
};
use crate::report::{tables_of, Row, SuiteReport};
use crate::suites::{pair, progress};
use crate::{Options, Scale};

struct Params {
    part: Option<u64>,
    hot: u64,
    times: u64,
    /// Files created (and synced) by the `metadata_churn` case.
    churn: u64,
}

fn params(s: Scale) -> Params {
    match s {
        Scale::Tiny => Params {
            part: Some(4 << 20),
            hot: 256 << 10,
            times: 2,
            churn: 500,
        },
        Scale::Quick => Params {
            part: Some(16 << 20),
            hot: 1 << 20,
            times: 5,
            churn: 5_000,
        },
        Scale::Full => Params {
            part: None,
            hot: 1 << 20,
            times: 20,
            churn: 20_000,
        },
    }
}

/// The `metadata_churn` case's device: 1 MiB of 4 KiB NOR sectors.
const CHURN_DEVICE: (&str, u64) = ("nor-qspi-16m", 1 << 20);
/// Files of the `metadata_churn` case that exist at once, and the bytes of each.
const CHURN_LIVE: usize = 40;
const CHURN_FILE: u64 = 100;

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let p = params(opts.scale);
    let preset = device_preset("nand-slc-128m", p.part)?;
    let mut rep = SuiteReport::new("wear", opts.scale != Scale::Full, describe(&preset));
    rep.note(format!(
        "50% of the device filled with cold 1 MiB files, then a {} KiB hot file rewritten until \
         {}× the device capacity was written; erase counts are the simulator's, over every \
         block; write_amp = pages programmed × page size ÷ bytes written by the application \
         during the rewrites",
        p.hot >> 10,
        p.times
    ));
    for mut d in pair(preset)? {
        progress(opts, format!("wear {}", d.name()));
        rep.config_line(d.config());
        let mut row = Row::new(d.name(), "hot_rewrite")
            .param("hot_bytes", p.hot)
            .param("times_capacity", p.times);
        if let Err(e) = one(&mut *d, &p, &mut row) {
            row.fail(e);
        }
        rep.results.push(row);
    }
    let churn = device_preset(CHURN_DEVICE.0, Some(CHURN_DEVICE.1))?;
    rep.note(format!(
        "metadata_churn: on {} ({} KiB of {} KiB erase sectors), {} rounds of a {CHURN_FILE}-byte \
         file created, written and synced in one of ten directories, and once {CHURN_LIVE} \
         exist one of them removed; erase counts over every block",
        churn.name,
        churn.geometry.capacity() >> 10,
        churn.geometry.block_size() >> 10,
        p.churn
    ));
    for mut d in pair(churn)? {
        progress(opts, format!("wear metadata churn {}", d.name()));
        let mut row = Row::new(d.name(), "metadata_churn").param("files", p.churn);
        if let Err(e) = metadata_churn(&mut *d, p.churn, &mut row) {
            row.fail(e);
        }
        rep.results.push(row);
    }
    Ok(rep)
}

/// The `metadata_churn` case on driver `d`: `rounds` files created, the oldest-but-random
/// removed once [`CHURN_LIVE`] exist; then every live file is read back after a remount.
fn metadata_churn(d: &mut dyn Driver, rounds: u64, row: &mut Row) -> FsResult<()> {
    let sim = d.sim().clone();
    let content = |i: u64| Content::random(0x5000_0000 + i);
    d.format()?;
    let meter = Meter::start(&sim);
    let mut live: Vec<(String, u64)> = Vec::new();
    d.session(End::Unmount, &mut |s| {
        for k in 0..10 {
            s.mkdir(&format!("/d{k}"))?;
        }
        // A xorshift generator: which directory, and which live file goes.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for i in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let path = format!("/d{}/f{i}", x % 10);
            write_file_durable(s, &path, &content(i), CHURN_FILE, CHURN_FILE as usize)?;
            live.push((path, i));
            if live.len() > CHURN_LIVE {
                let (gone, _) = live.remove((x >> 8) as usize % live.len());
                s.remove(&gone)?;
            }
        }
        row.set("ram_bytes", s.take_peak_ram());
        Ok(())
    })?;
    let m = meter.stop();
    m.put(&mut row.metrics, "");
    erase_count_figures(&sim, row);
    d.session(End::Unmount, &mut |s| {
        for (path, i) in &live {
            verify_file(s, path, &content(*i), CHURN_FILE, CHURN_FILE as usize)?;
        }
        Ok(())
    })?;
    Ok(())
}

/// The erase-count figures of every block of the device, as the simulator counted them.
fn erase_count_figures(sim: &dffs_sim::SharedSim, row: &mut Row) {
    let ec: Vec<f64> = sim.erase_counts().iter().map(|&e| e as f64).collect();
    let n = ec.len() as f64;
    let mean = ec.iter().sum::<f64>() / n;
    let var = ec.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / n;
    let min = ec.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = ec.iter().cloned().fold(0.0, f64::max);
    row.set("ec_min", min);
    row.set("ec_mean", round(mean));
    row.set("ec_max", max);
    row.set("ec_stddev", round(var.sqrt()));
    row.set("ec_max_over_mean_pct", round(100.0 * (max - mean) / mean));
}

fn one(d: &mut dyn Driver, p: &Params, row: &mut Row) -> FsResult<()> {
    let sim = d.sim().clone();
    let g = sim.lock().preset().geometry;
    let cap = g.capacity();
    let cold_file = 1u64 << 20;
    let cold_n = (cap / 2) / cold_file;
    let cold = |i: u64| Content::random(0x6000_0000 + i);
    d.format()?;
    d.session(End::Unmount, &mut |s| {
        s.mkdir("/cold")?;
        for i in 0..cold_n {
            write_file(
                s,
                &format!("/cold/c{i:04}"),
                &cold(i),
                cold_file,
                65536,
                OpenMode::CREATE,
            )?;
        }
        Ok(())
    })?;
    let rewrites = (p.times * cap).div_ceil(p.hot);
    let hot = |k: u64| Content::random(0x7000_0000 + k);
    let meter = Meter::start(&sim);
    let mut done = 0u64;
    let mut failed: Option<FsError> = None;
    d.session(End::Unmount, &mut |s| {
        for k in 0..rewrites {
            if let Err(e) = write_file_durable(s, "/hot", &hot(k), p.hot, 65536) {
                // Report what was done up to here; the row is marked failed below.
                failed = Some(e);
                break;
            }
            done = k + 1;
        }
        row.set("ram_bytes", s.take_peak_ram());
        Ok(())
    })?;
    let m = meter.stop();
    m.put(&mut row.metrics, "");
    let app = done * p.hot;
    row.set("rewrites", done);
    row.set("app_bytes", app);
    row.set(
        "write_amp",
        round(m.stats.programs as f64 * g.page_size as f64 / app as f64),
    );
    row.set("mib_s", round(app as f64 / 1048576.0 / m.sim_s()));
    erase_count_figures(&sim, row);
    if let Some(e) = failed {
        row.fail(format!("{e} at rewrite {} of {rewrites}", done + 1));
        // The hot file's last version is not known (the failed rewrite truncated it).
        return d
            .session(End::Unmount, &mut |s| {
                for i in 0..cold_n {
                    verify_file(s, &format!("/cold/c{i:04}"), &cold(i), cold_file, 65536)?;
                }
                Ok(())
            })
            .map(|_| ());
    }
    // Everything reads back after a remount.
    let last = done.saturating_sub(1);
    d.session(End::Unmount, &mut |s| {
        for i in 0..cold_n {
            verify_file(s, &format!("/cold/c{i:04}"), &cold(i), cold_file, 65536)?;
        }
        verify_file(s, "/hot", &hot(last), p.hot, 65536)
    })?;
    Ok(())
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    tables_of(
        out,
        rep,
        "wear",
        &[
            ("ec_min", "erase count, min", true),
            ("ec_mean", "erase count, mean", false),
            ("ec_max", "erase count, max", false),
            ("ec_stddev", "erase count, standard deviation", false),
            ("ec_max_over_mean_pct", "max above mean, %", false),
            ("write_amp", "write amplification", false),
            ("mib_s", "rewrite speed, MiB/s", true),
        ],
    )
}
