//! Suite `filebench` (seed 003, Table 4): on `onenand-256m`, data synced (dsync) after each I/O:
//! - `create`: 1,000 files of 128 KiB, 100 per directory, 4 KiB I/O;
//! - `copy`: 500 files of 128 KiB, 20 per directory, 4 KiB I/O, each copied to a second tree;
//! - `create_delete`: a fileserver mix (create and write a whole file, append, read a whole
//!   file, delete, stat) over up to 2,000 files of 128 KiB, 20 per directory, 64 KiB I/O, 80% of
//!   the files created beforehand, run for a fixed amount of simulated time.
//!
//! Owns those workloads (seeded, the same for both file systems) and their checks: every file
//! read in the mix is verified as it is read, and the trees left by `create` and `copy` are
//! read back after the timing. MB/s counts application bytes read and written (filebench's
//! bandwidth) per second of simulated device time, with MB = 10^6 B; each phase's time ends
//! with the work the file system deferred (`Session::finish_deferred`). Must never let
//! verification reads into the timed figures.

use std::collections::BTreeMap;
use std::io::Write;

use crate::content::{rng, Content};
use crate::devices::{describe, device_preset, round, Meter};
use crate::fsapi::{verify_file, Driver, End, FsError, FsResult, OpenMode, Session};
use crate::report::{table, Column, Row, SuiteReport};
use crate::suites::{pair, progress};
use crate::{Options, Scale};

struct Params {
    part: Option<u64>,
    create_files: u64,
    create_width: u64,
    copy_files: u64,
    copy_width: u64,
    mix_files: u64,
    mix_width: u64,
    mix_seconds: f64,
    size: u64,
}

fn params(s: Scale) -> Params {
    match s {
        Scale::Tiny => Params {
            part: Some(16 << 20),
            create_files: 16,
            create_width: 8,
            copy_files: 8,
            copy_width: 4,
            mix_files: 20,
            mix_width: 5,
            mix_seconds: 1.0,
            size: 128 << 10,
        },
        Scale::Quick => Params {
            part: Some(64 << 20),
            create_files: 50,
            create_width: 25,
            copy_files: 25,
            copy_width: 10,
            mix_files: 200,
            mix_width: 20,
            mix_seconds: 5.0,
            size: 128 << 10,
        },
        Scale::Full => Params {
            part: None,
            create_files: 1000,
            create_width: 100,
            copy_files: 500,
            copy_width: 20,
            mix_files: 2000,
            mix_width: 20,
            mix_seconds: 1000.0,
            size: 128 << 10,
        },
    }
}

fn dir_of(i: u64, width: u64) -> u64 {
    i / width
}

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let p = params(opts.scale);
    let preset = device_preset("onenand-256m", p.part)?;
    let mut rep = SuiteReport::new("filebench", opts.scale != Scale::Full, describe(&preset));
    rep.note(
        "mb_s: application bytes read and written per second of simulated device time (MB = \
         10^6 B), each I/O synced (dsync) before the next; create counts writes, copy counts \
         the reads and the writes of the copy, create_delete everything the mix moved",
    );
    rep.note(format!(
        "create_delete: fileserver mix (create + write whole file, append up to 64 KiB, read \
         whole file, delete, stat) over up to {} files, {}% created beforehand, run for {} s of \
         simulated time",
        p.mix_files, 80, p.mix_seconds
    ));
    for case in ["create", "copy", "create_delete"] {
        for mut d in pair(preset)? {
            progress(opts, format!("filebench {case} {}", d.name()));
            rep.config_line(d.config());
            let mut row = Row::new(d.name(), case);
            let r = match case {
                "create" => create(&mut *d, &p, &mut row),
                "copy" => copy(&mut *d, &p, &mut row),
                _ => mix(&mut *d, &p, &mut row),
            };
            if let Err(e) = r {
                row.fail(e);
            }
            rep.results.push(row);
        }
    }
    Ok(rep)
}

fn content(tree: u64, i: u64) -> Content {
    Content::random((tree << 40) | i)
}

/// Writes `len` bytes of `c` at `from` in `io` pieces, each synced.
fn write_synced(
    s: &mut dyn Session,
    path: &str,
    mode: OpenMode,
    c: &Content,
    from: u64,
    len: u64,
    io: u64,
) -> FsResult<()> {
    let mut buf = vec![0u8; io as usize];
    s.with_file(path, mode, &mut |f| {
        let mut off = from;
        while off < from + len {
            let n = io.min(from + len - off) as usize;
            c.fill(off, &mut buf[..n]);
            f.write_at(off, &buf[..n])?;
            f.sync()?;
            off += n as u64;
        }
        Ok(())
    })
    .map_err(|e| e.at(path))
}

fn mkdirs(s: &mut dyn Session, root: &str, files: u64, width: u64) -> FsResult<()> {
    s.mkdir(root)?;
    for d in 0..files.div_ceil(width) {
        s.mkdir(&format!("{root}/d{d:03}"))?;
    }
    Ok(())
}

fn path(root: &str, i: u64, width: u64) -> String {
    format!("{root}/d{:03}/f{i:05}", dir_of(i, width))
}

fn create(d: &mut dyn Driver, p: &Params, row: &mut Row) -> FsResult<()> {
    row.add_param("files", p.create_files);
    row.add_param("dir_width", p.create_width);
    row.add_param("file_bytes", p.size);
    row.add_param("io_bytes", 4096);
    d.format()?;
    let sim = d.sim().clone();
    let mut m = None;
    d.session(End::Unmount, &mut |s| {
        let meter = Meter::start(&sim);
        mkdirs(s, "/a", p.create_files, p.create_width)?;
        for i in 0..p.create_files {
            let mode = OpenMode::CREATE;
            write_synced(
                s,
                &path("/a", i, p.create_width),
                mode,
                &content(1, i),
                0,
                p.size,
                4096,
            )?;
        }
        // The work the phase left for later is the phase's (DFFS: a checkpoint).
        s.finish_deferred()?;
        m = Some(meter.stop());
        row.set("ram_bytes", s.take_peak_ram());
        Ok(())
    })?;
    let m = m.unwrap_or_default();
    m.put(&mut row.metrics, "");
    let bytes = p.create_files * p.size;
    row.set("mb_s", round(bytes as f64 / 1e6 / m.sim_s()));
    d.session(End::Unmount, &mut |s| {
        for i in 0..p.create_files {
            verify_file(
                s,
                &path("/a", i, p.create_width),
                &content(1, i),
                p.size,
                65536,
            )?;
        }
        Ok(())
    })?;
    Ok(())
}

fn copy(d: &mut dyn Driver, p: &Params, row: &mut Row) -> FsResult<()> {
    row.add_param("files", p.copy_files);
    row.add_param("dir_width", p.copy_width);
    row.add_param("file_bytes", p.size);
    row.add_param("io_bytes", 4096);
    d.format()?;
    let sim = d.sim().clone();
    d.session(End::Unmount, &mut |s| {
        mkdirs(s, "/src", p.copy_files, p.copy_width)?;
        for i in 0..p.copy_files {
            let mode = OpenMode::CREATE;
            write_synced(
                s,
                &path("/src", i, p.copy_width),
                mode,
                &content(2, i),
                0,
                p.size,
                65536,
            )?;
        }
        Ok(())
    })?;
    let mut m = None;
    d.session(End::Unmount, &mut |s| {
        let meter = Meter::start(&sim);
        mkdirs(s, "/dst", p.copy_files, p.copy_width)?;
        let mut buf = vec![0u8; 4096];
        for i in 0..p.copy_files {
            let from = path("/src", i, p.copy_width);
            let to = path("/dst", i, p.copy_width);
            // Read the source whole (4 KiB reads), then write the copy (4 KiB writes, each
            // synced): one file open at a time, as both file systems' handles are.
            let mut data = vec![0u8; p.size as usize];
            s.with_file(&from, OpenMode::READ, &mut |f| {
                let mut off = 0usize;
                while off < data.len() {
                    let n = buf.len().min(data.len() - off);
                    if f.read_at(off as u64, &mut buf[..n])? != n {
                        return Err(FsError::WrongData(format!("{from}: short read")));
                    }
                    data[off..off + n].copy_from_slice(&buf[..n]);
                    off += n;
                }
                Ok(())
            })?;
            s.with_file(&to, OpenMode::CREATE, &mut |f| {
                for (k, chunk) in data.chunks(4096).enumerate() {
                    f.write_at((k * 4096) as u64, chunk)?;
                    f.sync()?;
                }
                Ok(())
            })?;
        }
        // The work the phase left for later is the phase's (DFFS: a checkpoint).
        s.finish_deferred()?;
        m = Some(meter.stop());
        row.set("ram_bytes", s.take_peak_ram());
        Ok(())
    })?;
    let m = m.unwrap_or_default();
    m.put(&mut row.metrics, "");
    let bytes = 2 * p.copy_files * p.size;
    row.set("mb_s", round(bytes as f64 / 1e6 / m.sim_s()));
    d.session(End::Unmount, &mut |s| {
        for i in 0..p.copy_files {
            verify_file(
                s,
                &path("/dst", i, p.copy_width),
                &content(2, i),
                p.size,
                65536,
            )?;
        }
        Ok(())
    })?;
    Ok(())
}

/// The fileserver mix.
fn mix(d: &mut dyn Driver, p: &Params, row: &mut Row) -> FsResult<()> {
    row.add_param("files", p.mix_files);
    row.add_param("dir_width", p.mix_width);
    row.add_param("file_bytes", p.size);
    row.add_param("io_bytes", 65536);
    row.add_param("seconds", p.mix_seconds);
    d.format()?;
    let sim = d.sim().clone();
    let io = 65536u64;
    // Live files: slot -> (content key, length).
    let mut live: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut next_key = 0u64;
    let prealloc = p.mix_files * 8 / 10;
    d.session(End::Unmount, &mut |s| {
        mkdirs(s, "/fs", p.mix_files, p.mix_width)?;
        for i in 0..prealloc {
            let key = next_key;
            next_key += 1;
            let c = content(3, key);
            write_synced(
                s,
                &path("/fs", i, p.mix_width),
                OpenMode::CREATE,
                &c,
                0,
                p.size,
                io,
            )?;
            live.insert(i, (key, p.size));
        }
        Ok(())
    })?;
    let mut rng = rng(0x0F5);
    let mut bytes = 0u64;
    let mut ops = 0u64;
    let mut m = None;
    let budget_ps = (p.mix_seconds * 1e12) as u64;
    d.session(End::Unmount, &mut |s| {
        let meter = Meter::start(&sim);
        let start = sim.stats().sim_ps;
        let mut step = 0u64;
        while sim.stats().sim_ps - start < budget_ps {
            let slot = rng.below(p.mix_files);
            let file = path("/fs", slot, p.mix_width);
            match step % 5 {
                // Create and write a whole file (in a free slot).
                0 => {
                    if let std::collections::btree_map::Entry::Vacant(e) = live.entry(slot) {
                        let key = next_key;
                        next_key += 1;
                        let c = content(3, key);
                        write_synced(s, &file, OpenMode::CREATE, &c, 0, p.size, io)?;
                        e.insert((key, p.size));
                        bytes += p.size;
                    }
                }
                // Append up to one I/O.
                1 => {
                    if let Some((key, len)) = live.get(&slot).copied() {
                        let n = 1 + rng.below(io);
                        let c = content(3, key);
                        write_synced(s, &file, OpenMode::RW, &c, len, n, io)?;
                        live.insert(slot, (key, len + n));
                        bytes += n;
                    }
                }
                // Read a whole file (checked as it is read).
                2 => {
                    if let Some((key, len)) = live.get(&slot).copied() {
                        verify_file(s, &file, &content(3, key), len, io as usize)?;
                        bytes += len;
                    }
                }
                // Delete.
                3 => {
                    if live.remove(&slot).is_some() {
                        s.remove(&file)?;
                    }
                }
                // Stat.
                _ => {
                    if let Some((_, len)) = live.get(&slot).copied() {
                        let (dir, name) = crate::fsapi::split_path(&file);
                        let (_, size) = s.stat(dir, name)?;
                        if size != len {
                            return Err(FsError::WrongData(format!(
                                "{file}: stat says {size} bytes, expected {len}"
                            )));
                        }
                    }
                }
            }
            step += 1;
            ops += 1;
        }
        // The work the phase left for later is the phase's (DFFS: a checkpoint).
        s.finish_deferred()?;
        m = Some(meter.stop());
        row.set("ram_bytes", s.take_peak_ram());
        Ok(())
    })?;
    let m = m.unwrap_or_default();
    m.put(&mut row.metrics, "");
    row.set("mb_s", round(bytes as f64 / 1e6 / m.sim_s()));
    row.set("operations", ops);
    row.set("live_files", live.len());
    d.session(End::Unmount, &mut |s| {
        for (slot, (key, len)) in &live {
            verify_file(
                s,
                &path("/fs", *slot, p.mix_width),
                &content(3, *key),
                *len,
                65536,
            )?;
        }
        Ok(())
    })?;
    Ok(())
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    table(
        out,
        rep,
        "filebench",
        Column {
            metric: "mb_s",
            label: "MB/s (simulated device time)",
            higher_is_better: true,
        },
        &[],
    )
}
