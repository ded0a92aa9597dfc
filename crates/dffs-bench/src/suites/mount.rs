//! Suite `mount` (seeds 001 and 003: mount time and RAM against file count): on
//! `nand-slc-128m` an empty file system, 10 files of 8 MiB and 10,000 files of 8 KiB; on
//! `nand-mlc-1g` 1,000, 10,000 and 100,000 files of 4 KiB spread over 100 directories. Each is
//! mounted after a clean unmount, and again after a power cut in the middle of writing.
//!
//! Owns that workload: the fill, the cut (a few small files written and synced, then a large
//! file cut by the simulator after a number of programs), and the checks after each mount (a
//! spread sample of the files, and every synced small file after the cut, must read back
//! exactly). It must never measure a mount whose data is wrong without saying so, and never
//! hide a fill that ran out of space: the row is marked failed with how many files fitted.

use std::io::Write;

use dffs_sim::{Preset, SharedSim};

use crate::content::Content;
use crate::devices::{describe, device_preset, human_bytes, round, Meter};
use crate::fsapi::{verify_file, write_file, Driver, End, FsError, FsResult, OpenMode, Session};
use crate::report::{table, Column, Row, SuiteReport};
use crate::suites::{pair, progress};
use crate::{Options, Scale};

/// One case: its name, device, files, file size, directories.
struct Case {
    name: &'static str,
    preset: Preset,
    files: u64,
    size: u64,
    dirs: u64,
}

fn cases(s: Scale) -> Result<Vec<Case>, String> {
    let slc = device_preset("nand-slc-128m", s.pick(Some(4 << 20), Some(32 << 20), None))?;
    let mlc = device_preset("nand-mlc-1g", s.pick(Some(8 << 20), Some(128 << 20), None))?;
    let c = |name, preset, files, size, dirs| Case {
        name,
        preset,
        files,
        size,
        dirs,
    };
    Ok(vec![
        c("empty", slc, 0, 0, 0),
        c("10x8MiB", slc, 10, s.pick(256 << 10, 2 << 20, 8 << 20), 0),
        c("10000x8KiB", slc, s.pick(250, 2500, 10_000), 8192, 100),
        c(
            "mlc_1000",
            mlc,
            s.pick(20, 100, 1000),
            4096,
            s.pick(10, 100, 100),
        ),
        c(
            "mlc_10000",
            mlc,
            s.pick(100, 1000, 10_000),
            4096,
            s.pick(10, 100, 100),
        ),
        c("mlc_100000", mlc, s.pick(400, 4000, 100_000), 4096, 100),
    ])
}

fn file_path(c: &Case, i: u64) -> String {
    if c.dirs == 0 {
        format!("/f{i}")
    } else {
        format!("/d{:03}/f{i:06}", i % c.dirs)
    }
}

fn content(i: u64) -> Content {
    Content::random(0x3000_0000 + i)
}

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let cases = cases(opts.scale)?;
    let mut devs: Vec<String> = Vec::new();
    for c in &cases {
        let d = describe(&c.preset);
        if !devs.contains(&d) {
            devs.push(d);
        }
    }
    let mut rep = SuiteReport::new("mount", opts.scale != Scale::Full, devs.join("; "));
    rep.note(
        "mount_us is the simulated device time of the mount call itself; page_reads the reads \
         it issued; ram_bytes what the mounted file system holds (DFFS: Fs::ram_bytes(); \
         littlefs: its Allocation with caches and lookahead)",
    );
    rep.note(
        "power cut: after the clean mount, 8 small files are written and synced, then a large \
         file is written and the simulator cuts the power after a number of its programs; the \
         synced files must be there after the next mount",
    );
    for c in &cases {
        for mut d in pair(c.preset)? {
            progress(
                opts,
                format!("mount {} {} ({} files)", c.name, d.name(), c.files),
            );
            rep.config_line(d.config());
            rep.results.extend(one(&mut *d, c));
        }
    }
    Ok(rep)
}

fn base_row(d: &dyn Driver, c: &Case, clean: bool) -> Row {
    Row::new(d.name(), c.name)
        .param("clean", clean)
        .param("device", c.preset.name)
        .param("files", c.files)
        .param("file_bytes", c.size)
        .param("dirs", c.dirs)
}

/// Up to `n` file indices spread over `0..files`.
fn sample(files: u64, n: u64) -> Vec<u64> {
    if files <= n {
        return (0..files).collect();
    }
    (0..n).map(|k| k * files / n).collect()
}

fn fill(s: &mut dyn Session, c: &Case, written: &mut u64) -> FsResult<()> {
    for d in 0..c.dirs {
        s.mkdir(&format!("/d{d:03}"))?;
    }
    let io = c.size.clamp(1, 65536) as usize;
    for i in 0..c.files {
        write_file(
            s,
            &file_path(c, i),
            &content(i),
            c.size,
            io,
            OpenMode::CREATE,
        )?;
        *written = i + 1;
    }
    Ok(())
}

fn check(s: &mut dyn Session, c: &Case, written: u64) -> FsResult<()> {
    let io = c.size.clamp(1, 65536) as usize;
    for i in sample(written, 64) {
        verify_file(s, &file_path(c, i), &content(i), c.size, io)?;
    }
    Ok(())
}

fn put_mount(row: &mut Row, m: &crate::fsapi::MountReport) {
    m.mount.put(&mut row.metrics, "");
    row.set("mount_us", round(m.mount.sim_us()));
    row.set("page_reads", m.mount.stats.reads);
    row.set("ram_bytes", m.ram_after_mount);
}

fn one(d: &mut dyn Driver, c: &Case) -> Vec<Row> {
    let sim: SharedSim = d.sim().clone();
    let mut clean = base_row(d, c, true);
    let mut cut = base_row(d, c, false);
    if let Err(e) = d.format() {
        clean.fail(format!("format: {e}"));
        cut.fail(format!("format: {e}"));
        return vec![clean, cut];
    }
    // Fill.
    let mut written = 0u64;
    let meter = Meter::start(&sim);
    let r = d.session(End::Unmount, &mut |s| fill(s, c, &mut written));
    let fill_m = meter.stop();
    let fill_err = match r {
        Ok(_) => None,
        Err(FsError::NoSpace) => {
            // What fitted is on flash; unmount it cleanly for the measurement.
            let _ = d.session(End::Unmount, &mut |_| Ok(()));
            Some(format!(
                "ENOSPC after {written} of {} files of {}",
                c.files,
                human_bytes(c.size)
            ))
        }
        Err(e) => {
            clean.fail(format!("fill: {e}"));
            cut.fail(format!("fill: {e}"));
            return vec![clean, cut];
        }
    };
    for row in [&mut clean, &mut cut] {
        row.set("files_written", written);
        fill_m.put(&mut row.metrics, "fill_");
        if let Some(e) = &fill_err {
            row.fail(e);
        }
    }
    // Clean mount, then the cut.
    let small = 8u64;
    let small_content = |k: u64| Content::random(0x3100_0000 + k);
    let big = c.preset.geometry.block_size() as u64 * 2;
    let cut_after = (big / c.preset.geometry.page_size as u64) / 2;
    let mut small_ok = 0u64;
    let r = d.session(End::PowerCut, &mut |s| {
        check(s, c, written)?;
        for k in 0..small {
            let mode = OpenMode::CREATE;
            write_file(
                s,
                &format!("/small{k}"),
                &small_content(k),
                4096,
                4096,
                mode,
            )?;
            s.with_file(&format!("/small{k}"), OpenMode::RW, &mut |f| f.sync())?;
            small_ok = k + 1;
        }
        sim.cut_power_after(cut_after);
        match write_file(s, "/big", &Content::random(1), big, 65536, OpenMode::CREATE) {
            Err(FsError::PowerLoss) => Ok(()),
            Err(e) => Err(e),
            Ok(()) => Err(FsError::Other("the power cut did not happen".into())),
        }
    });
    match r {
        Ok(m) => put_mount(&mut clean, &m),
        Err(FsError::NoSpace) => {
            // Too full for the power-cut writes (the fill took the room, whether or not it
            // ended with ENOSPC itself): report the clean mount measured anyway. The cut may
            // be armed still (the large file was refused before it came): disarm it, or it
            // falls in this mount.
            sim.lock().cancel_power_cut();
            let r2 = d.session(End::Unmount, &mut |s| check(s, c, written));
            match r2 {
                Ok(m) => put_mount(&mut clean, &m),
                Err(e) => clean.fail(format!("mount: {e}")),
            }
            cut.fail("no room left to write before the cut");
            return vec![clean, cut];
        }
        Err(e) => {
            clean.fail(format!("after mount: {e}"));
            cut.fail(format!("not reached: {e}"));
            return vec![clean, cut];
        }
    }
    sim.lock().cancel_power_cut();
    let r = d.session(End::Unmount, &mut |s| {
        check(s, c, written)?;
        for k in 0..small_ok {
            verify_file(s, &format!("/small{k}"), &small_content(k), 4096, 4096)?;
        }
        Ok(())
    });
    match r {
        Ok(m) => put_mount(&mut cut, &m),
        Err(e) => cut.fail(format!("mount after power cut: {e}")),
    }
    cut.set("cut_after_programs", cut_after);
    vec![clean, cut]
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    for (metric, label) in [
        ("mount_us", "mount time, µs (simulated)"),
        ("page_reads", "page reads during mount"),
        ("ram_bytes", "RAM after mount, bytes"),
    ] {
        table(
            out,
            rep,
            "mount",
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
