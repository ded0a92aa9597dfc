//! Suite `nor` (seed 002, small accesses on NOR): `nor-qspi-16m` with 4 KiB erase sectors, an
//! 8 MiB test file, accesses of 256 B to 64 KiB each completed down to the device (a file sync
//! after each write) before the next starts: sequential and random writes, random 4 KiB writes
//! against fill level, sequential and random reads with the file kept open; raw rows per access
//! size.
//!
//! Owns that workload and its model of the file (every write is applied to an in-memory copy
//! once the file system acknowledged it; every read and a final read-back after a remount are
//! compared with it). littlefs's sequential writes run as seed 002 ran them: the file is deleted
//! and written anew when the end is reached (overwriting in place crawls). A littlefs access
//! that fails (ENOSPC when the copy-on-write of an overwrite near the start of a half-device file
//! cannot fit) counts its time and no bytes, and marks the row failed: it is never a fast
//! access. DFFS gets a warm-up of random or sequential writes as large as the free space before
//! the measured writes, so its figures are steady state (garbage collection running), not the
//! easy start on an empty device. Each row's time ends with the work the file system deferred
//! (`Session::finish_deferred`: DFFS's checkpoint), so no row leaves its cost to the next.

use std::io::Write;

use dffs::Config;
use dffs_sim::SharedSim;

use crate::content::{rng, Content, Rng};
use crate::devices::{describe, device_preset, new_device, raw_read, raw_write, round, Measure};
use crate::dffs_fs::DffsDriver;
use crate::fsapi::{
    put_cause_times, put_causes, Driver, End, FsError, FsResult, OpenMode, Session,
};
use crate::report::{table, Column, Row, SuiteReport};
use crate::suites::progress;
use crate::{littlefs, Options, Scale};

const PATH: &str = "/test.bin";

struct Sizes {
    part: Option<u64>,
    file: u64,
    access: Vec<u64>,
    /// Bytes each measured sequential/random write phase writes (per access size).
    volume: u64,
    /// Bytes each read phase reads (per access size).
    read_volume: u64,
    /// littlefs random overwrites per access size (each rewrites half the file on average).
    lfs_random: u64,
    fills: Vec<u32>,
    /// Bytes written (measured) per fill level.
    fill_volume: u64,
}

fn sizes(s: Scale) -> Sizes {
    let all = vec![256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];
    match s {
        Scale::Tiny => Sizes {
            part: Some(512 << 10),
            file: 256 << 10,
            access: vec![256, 4096, 16384],
            volume: 64 << 10,
            read_volume: 64 << 10,
            lfs_random: 3,
            fills: vec![20, 50],
            fill_volume: 64 << 10,
        },
        Scale::Quick => Sizes {
            part: Some(2 << 20),
            file: 1 << 20,
            access: all,
            volume: 256 << 10,
            read_volume: 512 << 10,
            lfs_random: 4,
            fills: vec![10, 30, 50, 80],
            fill_volume: 512 << 10,
        },
        Scale::Full => Sizes {
            part: None,
            file: 8 << 20,
            access: all,
            volume: 2 << 20,
            read_volume: 4 << 20,
            lfs_random: 16,
            fills: vec![10, 20, 30, 40, 50, 60, 70, 80, 90],
            fill_volume: 4 << 20,
        },
    }
}

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let sz = sizes(opts.scale);
    let mut p = device_preset("nor-qspi-16m", sz.part)?;
    if let Some(es) = opts.erase_size {
        p = p
            .with_erase_size(es)
            .map_err(|e| format!("--erase-size {es}: {e}"))?;
    }
    let es = p.geometry.block_size();
    let mut rep = SuiteReport::new("nor", opts.scale != Scale::Full, describe(&p));
    rep.note(format!(
        "test file {} KiB; every write is followed by a file sync and completes on the device \
         before the next starts; a row's time includes the work the file system deferred \
         (DFFS: a checkpoint after its last access); kb_s is KB/s (1000 B) of simulated \
         device time; max_op_us is the slowest single access",
        sz.file >> 10
    ));
    rep.note(
        "littlefs seq_write: as seed 002 did, the file is deleted and written anew when the end \
         is reached (overwriting in place crawls); DFFS overwrites in place and wraps",
    );
    rep.note(format!(
        "DFFS writes are measured after a warm-up as large as the free space (garbage \
         collection running); littlefs random writes are {} accesses per size (each rewrites \
         the rest of the file); a failed access counts its time and no bytes and marks the row \
         failed",
        sz.lfs_random
    ));
    rep.note(format!(
        "raw: the same bytes programmed into pre-erased {} KiB erase blocks (one erase per \
         block, amortized), or read in one read command per access",
        es / 1024
    ));
    // littlefs and DFFS on 4 KiB sectors; if DFFS fails there (format or any row), DFFS runs
    // again on the same device with 64 KiB block erases, with its own raw rows (reported).
    raw_rows(&mut rep, &sz, p)?;
    let mut fs_rows = Vec::new();
    for which in ["littlefs", "dffs"] {
        fs_rows.extend(fs_run(opts, &mut rep, which, p, &sz)?);
    }
    // (Only on the default 4 KiB sectors: an erase size asked for is the one reported.)
    let dffs_failed = opts.erase_size.is_none() && fs_rows.iter().any(|r| r.fs == "dffs" && !r.ok);
    rep.results.extend(fs_rows);
    let mut dffs_p = p;
    if dffs_failed {
        dffs_p = device_preset_64k(sz.part)?;
        rep.note(
            "DFFS failed rows on 4 KiB erase sectors (see the failures), so it also ran on the \
             same device with 64 KiB block erases: rows with erase_size=65536, next to raw rows \
             for that erase size (littlefs runs on 4 KiB sectors only, as its users configure it)",
        );
        raw_rows(&mut rep, &sz, dffs_p)?;
        let rows = fs_run(opts, &mut rep, "dffs", dffs_p, &sz)?;
        rep.results.extend(rows);
    }
    // RAM of DFFS's smallest configuration (the brief's NOR RAM goal), on each erase size it
    // ran on.
    let mut sizes_run = vec![p];
    if dffs_p.geometry.block_size() != p.geometry.block_size() {
        sizes_run.push(dffs_p);
    }
    for fp in sizes_run {
        let mut d = DffsDriver::with_config(new_device(fp)?, Config::smallest(), "smallest");
        rep.config_line(d.config());
        let mut row = Row::new("dffs", "ram_smallest")
            .param("config", "smallest")
            .param("erase_size", fp.geometry.block_size());
        match smallest_ram(&mut d, &sz) {
            Ok((mounted, peak)) => {
                row.set("ram_bytes", mounted);
                row.set("peak_ram_bytes", peak);
                row.set("reads", 0);
                row.set("programs", 0);
                row.set("erases", 0);
            }
            Err(e) => row.fail(e),
        }
        rep.results.push(row);
    }
    Ok(rep)
}

/// The raw rows for the device `rp` (its erase size in the params).
fn raw_rows(rep: &mut SuiteReport, sz: &Sizes, rp: dffs_sim::Preset) -> Result<(), String> {
    let es = rp.geometry.block_size();
    for &a in &sz.access {
        let sim = new_device(rp)?;
        let vol = sz.volume.max(es as u64);
        let (w, wmax) = raw_write(&sim, a, vol)?;
        let (r, rmax) = raw_read(&sim, a, sz.read_volume)?;
        for (case, m, max, bytes) in [
            ("seq_write", w, wmax, vol),
            ("rand_write", w, wmax, vol),
            ("seq_read", r, rmax, sz.read_volume),
            ("rand_read", r, rmax, sz.read_volume),
        ] {
            let mut row = Row::new("raw", case)
                .param("access_size", a)
                .param("erase_size", es);
            m.put(&mut row.metrics, "");
            row.set("kb_s", round(bytes as f64 / 1000.0 / m.sim_s()));
            row.set("max_op_us", round(max));
            row.set("ram_bytes", 0);
            rep.results.push(row);
        }
    }
    let sim = new_device(rp)?;
    let vol = sz.fill_volume.max(es as u64);
    let (w, wmax) = raw_write(&sim, 4096, vol)?;
    for &fill in &sz.fills {
        let mut row = Row::new("raw", "rand_write_fill")
            .param("access_size", 4096)
            .param("fill_pct", fill)
            .param("erase_size", es);
        w.put(&mut row.metrics, "");
        row.set("kb_s", round(vol as f64 / 1000.0 / w.sim_s()));
        row.set("max_op_us", round(wmax));
        row.set("ram_bytes", 0);
        rep.results.push(row);
    }
    Ok(())
}

/// One file system's rows on device `fp`: the sweep and the fill levels (each row with the
/// erase size in its params).
fn fs_run(
    opts: &Options,
    rep: &mut SuiteReport,
    which: &str,
    fp: dffs_sim::Preset,
    sz: &Sizes,
) -> Result<Vec<Row>, String> {
    let es = fp.geometry.block_size();
    let mut rows = Vec::new();
    let mut d = make(which, new_device(fp)?)?;
    rep.config_line(d.config());
    progress(opts, format!("nor sweep {which} ({es} B erase blocks)"));
    for r in sweep(opts, &mut *d, sz) {
        rows.push(r.param("erase_size", es));
    }
    for &fill in &sz.fills {
        progress(opts, format!("nor fill {fill}% {which}"));
        let mut d = make(which, new_device(fp)?)?;
        rows.push(fill_level(&mut *d, sz, fill).param("erase_size", es));
    }
    Ok(rows)
}

/// `nor-qspi-16m` with its 64 KiB block erases (cut to `part` bytes if given).
fn device_preset_64k(part: Option<u64>) -> Result<dffs_sim::Preset, String> {
    let mut p = dffs_sim::preset::preset("nor-qspi-16m").ok_or("no nor-qspi-16m preset")?;
    p = p.with_erase_size(65536).map_err(|e| e.to_string())?;
    if let Some(b) = part {
        p = p.with_size_bytes(b).map_err(|e| e.to_string())?;
    }
    Ok(p)
}

fn make(which: &str, sim: SharedSim) -> Result<Box<dyn Driver>, String> {
    match which {
        "dffs" => Ok(Box::new(DffsDriver::new(sim))),
        _ => littlefs::driver(sim),
    }
}

/// The file as the file system acknowledged it.
struct Model {
    data: Vec<u8>,
    key: u64,
}

impl Model {
    fn next_content(&mut self) -> Content {
        self.key += 1;
        Content::random(0x0A0B_0000 + self.key)
    }
}

/// What a run of accesses did.
#[derive(Default)]
struct Run {
    bytes: u64,
    accesses: u64,
    failed: u64,
    first_error: Option<FsError>,
    m: Measure,
    max_op_ps: u64,
    ram: usize,
    /// The file system's operation counts by cause before and after the run (DFFS).
    causes: (Option<dffs::CauseCounts>, Option<dffs::CauseCounts>),
    /// The device's operation costs (for the time by cause).
    timing: Option<dffs_sim::Timing>,
}

impl Run {
    /// An empty run on `sim`'s device (whose costs give the time by cause).
    fn on(sim: &SharedSim) -> Run {
        Run {
            timing: Some(sim.lock().preset().timing),
            ..Run::default()
        }
    }

    fn row(&self, fs: &str, case: &str, access: u64, fill: Option<u32>) -> Row {
        let mut r = Row::new(fs, case).param("access_size", access);
        if let Some(f) = fill {
            r = r.param("fill_pct", f);
        }
        self.m.put(&mut r.metrics, "");
        r.set("kb_s", round(self.bytes as f64 / 1000.0 / self.m.sim_s()));
        r.set("max_op_us", round(self.max_op_ps as f64 / 1e6));
        r.set("ram_bytes", self.ram);
        r.set("accesses", self.accesses);
        r.set("failed_accesses", self.failed);
        put_causes(&mut r.metrics, "", self.causes.0, self.causes.1);
        if let Some(t) = &self.timing {
            put_cause_times(
                &mut r.metrics,
                t,
                self.causes.0,
                self.causes.1,
                self.m.stats.sim_ps,
            );
        }
        if self.failed > 0 {
            r.fail(format!(
                "{} on {} of {} accesses (counted as time without bytes)",
                self.first_error
                    .as_ref()
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
                self.failed,
                self.accesses
            ));
        }
        r
    }
}

/// Access pattern of a write run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// In place, position advancing and wrapping at the end of the file.
    SeqInPlace,
    /// Appending; at the end of the file it is deleted and written anew (littlefs, seed 002).
    SeqRecreate,
    /// Uniform positions (aligned to the access size).
    Random,
}

/// `n` synced writes of `size` bytes. Failed accesses are counted; the file is reopened after
/// each failure (a file system may refuse more writes on a handle that failed).
#[allow(clippy::too_many_arguments)]
fn writes(
    s: &mut dyn Session,
    sim: &SharedSim,
    model: &mut Model,
    file_len: u64,
    size: u64,
    n: u64,
    pat: Pattern,
    pos: &mut u64,
    rng: &mut Rng,
) -> FsResult<Run> {
    let mut run = Run::on(sim);
    s.take_peak_ram();
    run.causes.0 = s.op_causes();
    let start = sim.stats();
    let t0 = std::time::Instant::now();
    let mut buf = vec![0u8; size as usize];
    let mut done = 0u64;
    while done < n {
        let mut restart = false;
        let mut failed_now: Option<FsError> = None;
        let mut failed_at: Option<(u64, Vec<u8>)> = None;
        let mode = OpenMode {
            create: true,
            write: true,
            truncate: false,
            sync: false,
        };
        let r = s.with_file(PATH, mode, &mut |f| {
            while done < n {
                let off = match pat {
                    Pattern::SeqInPlace => {
                        if *pos + size > file_len {
                            *pos = 0;
                        }
                        *pos
                    }
                    Pattern::SeqRecreate => {
                        if model.data.len() as u64 + size > file_len {
                            restart = true;
                            return Ok(());
                        }
                        model.data.len() as u64
                    }
                    Pattern::Random => rng.below(file_len / size) * size,
                };
                let c = model.next_content();
                c.fill(0, &mut buf);
                let before = sim.stats().sim_ps;
                let res = f.write_at(off, &buf).and_then(|()| f.sync());
                let dt = sim.stats().sim_ps - before;
                done += 1;
                run.accesses += 1;
                match res {
                    Ok(()) => {
                        run.bytes += size;
                        run.max_op_ps = run.max_op_ps.max(dt);
                        let end = (off + size) as usize;
                        if model.data.len() < end {
                            model.data.resize(end, 0);
                        }
                        model.data[off as usize..end].copy_from_slice(&buf);
                        if pat == Pattern::SeqInPlace {
                            *pos = off + size;
                        }
                    }
                    Err(e @ FsError::NoSpace) => {
                        run.failed += 1;
                        failed_now = Some(e);
                        failed_at = Some((off, buf.clone()));
                        if pat == Pattern::SeqInPlace {
                            *pos = off + size;
                        }
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        });
        match (r, failed_now) {
            (_, Some(e)) => {
                // The handle failed: it is closed (whatever the close says); go on with a new one.
                if run.first_error.is_none() {
                    run.first_error = Some(e);
                }
                if let Some((off, new)) = failed_at {
                    settle(s, model, off, &new)?;
                }
            }
            (Err(e), None) => return Err(e),
            (Ok(()), None) => {}
        }
        if restart {
            s.remove(PATH)?;
            model.data.clear();
        }
    }
    // The work the accesses left for later is theirs (DFFS: the checkpoint that writes the
    // index and metadata they changed).
    s.finish_deferred()?;
    run.causes.1 = s.op_causes();
    run.m = Measure {
        stats: sim.stats().since(&start),
        host_us: t0.elapsed().as_secs_f64() * 1e6,
    };
    run.ram = s.take_peak_ram();
    Ok(run)
}

/// After a write that failed: the range holds either what was there or what the write carried
/// (the model follows), never a mix, and nothing else changed size.
fn settle(s: &mut dyn Session, model: &mut Model, off: u64, new: &[u8]) -> FsResult<()> {
    let mut got = vec![0u8; new.len()];
    let mut len = 0;
    s.with_file(PATH, OpenMode::READ, &mut |f| {
        len = f.size()?;
        let n = f.read_at(off, &mut got)?;
        got.truncate(n);
        Ok(())
    })?;
    let end = off as usize + new.len();
    let old_len = model.data.len();
    let old: Vec<u8> = model
        .data
        .get(off as usize..end.min(old_len))
        .unwrap_or(&[])
        .to_vec();
    if got == new {
        if model.data.len() < end {
            model.data.resize(end, 0);
        }
        model.data[off as usize..end].copy_from_slice(new);
    } else if got != old || len != old_len as u64 {
        return Err(FsError::WrongData(format!(
            "after a failed write of {} B at {off}: neither the old nor the new content \
             (file size {len}, was {old_len})",
            new.len()
        )));
    }
    Ok(())
}

/// Reads of `size` bytes, the file kept open, each compared with the model.
fn reads(
    s: &mut dyn Session,
    sim: &SharedSim,
    model: &Model,
    size: u64,
    n: u64,
    random: bool,
    rng: &mut Rng,
) -> FsResult<Run> {
    let mut run = Run::on(sim);
    s.take_peak_ram();
    run.causes.0 = s.op_causes();
    let start = sim.stats();
    let t0 = std::time::Instant::now();
    let len = model.data.len() as u64;
    let mut buf = vec![0u8; size as usize];
    let mut pos = 0u64;
    s.with_file(PATH, OpenMode::READ, &mut |f| {
        for _ in 0..n {
            let off = if random {
                rng.below(len / size) * size
            } else {
                if pos + size > len {
                    pos = 0;
                }
                pos
            };
            let before = sim.stats().sim_ps;
            let got = f.read_at(off, &mut buf)?;
            run.max_op_ps = run.max_op_ps.max(sim.stats().sim_ps - before);
            run.accesses += 1;
            let want = &model.data[off as usize..(off + size) as usize];
            if got != size as usize || buf != want {
                let m = crate::content::compare(off, want, &buf[..got]).err();
                return Err(FsError::WrongData(format!(
                    "read of {size} B at {off}: {}",
                    m.map(|m| m.to_string())
                        .unwrap_or_else(|| "short read".into())
                )));
            }
            run.bytes += size;
            pos = off + size;
        }
        Ok(())
    })?;
    run.ram = s.take_peak_ram();
    run.m = Measure {
        stats: sim.stats().since(&start),
        host_us: t0.elapsed().as_secs_f64() * 1e6,
    };
    Ok(run)
}

/// Creates the file at `len` bytes (64 KiB writes, one sync at the end).
fn fill_file(s: &mut dyn Session, model: &mut Model, len: u64) -> FsResult<()> {
    let c = model.next_content();
    model.data = c.bytes(0, len as usize);
    let data = &model.data;
    s.with_file(PATH, OpenMode::CREATE, &mut |f| {
        let mut off = 0u64;
        while off < len {
            let n = (65536u64).min(len - off) as usize;
            f.write_at(off, &data[off as usize..off as usize + n])?;
            off += n as u64;
        }
        f.sync()
    })
}

/// Verifies the whole file against the model in a new session (after a remount).
fn verify(d: &mut dyn Driver, model: &Model) -> FsResult<()> {
    d.session(End::Unmount, &mut |s| {
        s.with_file(PATH, OpenMode::READ, &mut |f| {
            let len = f.size()?;
            if len != model.data.len() as u64 {
                return Err(FsError::WrongData(format!(
                    "size {len}, expected {}",
                    model.data.len()
                )));
            }
            let mut buf = vec![0u8; 65536];
            let mut off = 0u64;
            while off < len {
                let n = (buf.len() as u64).min(len - off) as usize;
                f.read_at(off, &mut buf[..n])?;
                crate::content::compare(
                    off,
                    &model.data[off as usize..off as usize + n],
                    &buf[..n],
                )
                .map_err(|m| FsError::WrongData(m.to_string()))?;
                off += n as u64;
            }
            Ok(())
        })
    })
    .map(|_| ())
}

/// The access-size sweep: reads, then sequential writes, then random writes, on one file.
fn sweep(opts: &Options, d: &mut dyn Driver, sz: &Sizes) -> Vec<Row> {
    let name = d.name();
    let lfs = name == "littlefs";
    let sim = d.sim().clone();
    let mut rows: Vec<Row> = Vec::new();
    let mut model = Model {
        data: Vec::new(),
        key: 0,
    };
    let mut rng = rng(0x2002);
    let cap = sim.lock().preset().geometry.capacity();
    let free = cap.saturating_sub(sz.file);
    if let Err(e) = d.format() {
        for case in ["seq_read", "rand_read", "seq_write", "rand_write"] {
            for &a in &sz.access {
                let mut r = Row::new(name, case).param("access_size", a);
                r.fail(format!("format: {e}"));
                rows.push(r);
            }
        }
        return rows;
    }
    let (mut seq_warm_failed, mut rand_warm_failed) = (0u64, 0u64);
    let res = d.session(End::Unmount, &mut |s| {
        fill_file(s, &mut model, sz.file)?;
        for (case, random) in [("seq_read", false), ("rand_read", true)] {
            for &a in &sz.access {
                let n = (sz.read_volume / a).max(1);
                let run = reads(s, &sim, &model, a, n, random, &mut rng)?;
                rows.push(run.row(name, case, a, None));
            }
        }
        // Sequential writes.
        let mut pos = 0u64;
        if lfs {
            s.remove(PATH)?;
            model.data.clear();
        } else {
            // Warm-up: as much as the free space, sequentially in 4 KiB accesses.
            progress(opts, "  nor: DFFS sequential warm-up");
            seq_warm_failed = writes(
                s,
                &sim,
                &mut model,
                sz.file,
                4096,
                free / 4096,
                Pattern::SeqInPlace,
                &mut pos,
                &mut rng,
            )?
            .failed;
        }
        for &a in &sz.access {
            let pat = if lfs {
                Pattern::SeqRecreate
            } else {
                Pattern::SeqInPlace
            };
            let run = writes(
                s,
                &sim,
                &mut model,
                sz.file,
                a,
                (sz.volume / a).max(1),
                pat,
                &mut pos,
                &mut rng,
            )?;
            let mut r = run.row(name, "seq_write", a, None);
            r.set("warmup_failed_accesses", seq_warm_failed);
            rows.push(r);
        }
        // Random writes need the whole file again.
        if (model.data.len() as u64) < sz.file {
            fill_file(s, &mut model, sz.file)?;
        }
        if !lfs {
            progress(opts, "  nor: DFFS random warm-up");
            rand_warm_failed = writes(
                s,
                &sim,
                &mut model,
                sz.file,
                4096,
                free / 4096,
                Pattern::Random,
                &mut pos,
                &mut rng,
            )?
            .failed;
        }
        for &a in &sz.access {
            let n = if lfs {
                sz.lfs_random
            } else {
                (sz.volume / a).max(1)
            };
            let run = writes(
                s,
                &sim,
                &mut model,
                sz.file,
                a,
                n,
                Pattern::Random,
                &mut pos,
                &mut rng,
            )?;
            let mut r = run.row(name, "rand_write", a, None);
            r.set("warmup_failed_accesses", rand_warm_failed);
            rows.push(r);
        }
        Ok(())
    });
    if let Err(e) = res {
        // Every case and size the error kept from running gets its failure row.
        for case in ["seq_read", "rand_read", "seq_write", "rand_write"] {
            for &a in &sz.access {
                let have = rows.iter().any(|r| {
                    r.case == case
                        && r.params.get("access_size").and_then(|v| v.as_u64()) == Some(a)
                });
                if !have {
                    let mut r = Row::new(name, case).param("access_size", a);
                    r.fail(format!("not run: the sweep stopped with {e}"));
                    rows.push(r);
                }
            }
        }
        return rows;
    }
    if let Err(e) = verify(d, &model) {
        for r in rows.iter_mut() {
            r.fail(format!("final read-back failed: {e}"));
        }
    }
    rows
}

/// Random 4 KiB writes with the file at `fill` percent of the device.
fn fill_level(d: &mut dyn Driver, sz: &Sizes, fill: u32) -> Row {
    let name = d.name();
    let lfs = name == "littlefs";
    let sim = d.sim().clone();
    let cap = sim.lock().preset().geometry.capacity();
    let file = (cap * fill as u64 / 100) / 4096 * 4096;
    let mut model = Model {
        data: Vec::new(),
        key: 0,
    };
    let mut rng = rng(0x2002 + fill as u64);
    let mut out: Option<Row> = None;
    let res = d.format().and_then(|()| {
        d.session(End::Unmount, &mut |s| {
            fill_file(s, &mut model, file)?;
            let mut pos = 0;
            if !lfs {
                let free = cap.saturating_sub(file);
                writes(
                    s,
                    &sim,
                    &mut model,
                    file,
                    4096,
                    free / 4096,
                    Pattern::Random,
                    &mut pos,
                    &mut rng,
                )?;
            }
            let n = if lfs {
                sz.lfs_random
            } else {
                sz.fill_volume / 4096
            };
            let run = writes(
                s,
                &sim,
                &mut model,
                file,
                4096,
                n,
                Pattern::Random,
                &mut pos,
                &mut rng,
            )?;
            out = Some(run.row(name, "rand_write_fill", 4096, Some(fill)));
            Ok(())
        })
    });
    let mut row = match (res, out) {
        (Ok(_), Some(r)) => r,
        (Err(e), _) => {
            let mut r = Row::new(name, "rand_write_fill")
                .param("access_size", 4096)
                .param("fill_pct", fill);
            r.fail(e);
            return r;
        }
        (Ok(_), None) => {
            let mut r = Row::new(name, "rand_write_fill")
                .param("access_size", 4096)
                .param("fill_pct", fill);
            r.fail("no measurement");
            return r;
        }
    };
    if let Err(e) = verify(d, &model) {
        row.fail(format!("final read-back failed: {e}"));
    }
    row.set("file_bytes", file);
    row
}

/// DFFS's RAM in the smallest configuration: after mount, and at its peak during synced 4 KiB
/// writes.
fn smallest_ram(d: &mut DffsDriver, sz: &Sizes) -> FsResult<(usize, usize)> {
    d.format()?;
    let mut model = Model {
        data: Vec::new(),
        key: 0,
    };
    let sim = d.sim().clone();
    d.session(End::Unmount, &mut |s| {
        fill_file(s, &mut model, sz.file / 4)?;
        Ok(())
    })?;
    let mut rng = rng(7);
    let rep = d.session(End::Unmount, &mut |s| {
        let mut pos = 0;
        writes(
            s,
            &sim,
            &mut model,
            sz.file / 4,
            4096,
            64,
            Pattern::Random,
            &mut pos,
            &mut rng,
        )?;
        Ok(())
    })?;
    verify(d, &model)?;
    Ok((rep.ram_after_mount, rep.peak_ram))
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    table(
        out,
        rep,
        "nor",
        Column {
            metric: "kb_s",
            label: "KB/s (simulated device time)",
            higher_is_better: true,
        },
        &[],
    )?;
    table(
        out,
        rep,
        "nor",
        Column {
            metric: "max_op_us",
            label: "slowest access, µs",
            higher_is_better: false,
        },
        &[],
    )?;
    table(
        out,
        rep,
        "nor",
        Column {
            metric: "ram_bytes",
            label: "RAM, bytes",
            higher_is_better: false,
        },
        &[],
    )?;
    cause_table(out, rep)
}

/// Where DFFS's simulated device time goes in each write row: the share of each cause
/// (`time_pct_<cause>`, from the operations and bytes DFFS counts by cause and the device's
/// costs), the main causes in columns and the rest summed.
fn cause_table(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    const COLS: [&str; 6] = ["data", "journal", "index", "map", "gc_copy", "gc_read"];
    let rows: Vec<&Row> = rep
        .results
        .iter()
        .filter(|r| {
            r.fs == "dffs" && r.case.contains("write") && r.metrics.contains_key("time_pct_data")
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nnor — DFFS simulated device time by cause, % of the row's time"
    )?;
    write!(
        out,
        "  {:<16} {:>7} {:>5} {:>8}",
        "case", "access", "fill", "KB/s"
    )?;
    for c in COLS {
        write!(out, " {c:>8}")?;
    }
    writeln!(out, " {:>8}", "rest")?;
    for r in rows {
        let num = |k: &str| r.metrics.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let param = |k: &str| {
            r.params
                .get(k)
                .and_then(|v| v.as_u64())
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into())
        };
        write!(
            out,
            "  {:<16} {:>7} {:>5} {:>8.1}",
            r.case,
            param("access_size"),
            param("fill_pct"),
            num("kb_s")
        )?;
        let mut rest = 0.0;
        for (k, v) in &r.metrics {
            if let Some(c) = k.strip_prefix("time_pct_") {
                if !COLS.contains(&c) {
                    rest += v.as_f64().unwrap_or(0.0);
                }
            }
        }
        for c in COLS {
            write!(out, " {:>8.1}", num(&format!("time_pct_{c}")))?;
        }
        writeln!(out, " {rest:>8.1}")?;
    }
    Ok(())
}
