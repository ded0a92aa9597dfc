//! Suite `rootfs` (seeds 000 and 004): write a root file system tree (as `tar xf` does), sync,
//! unmount; mount; scan it (readdir and stat of every entry, as `du -shc`); read every file;
//! used space as `df` reports it; remove everything. On `nand-slc-128m` partitions of 8, 32 and
//! 120 MiB filled to 85% (seed 004) and the whole device with 81 MB (seed 000, whose tree was
//! compressed; DFFS runs without compression and with LZ4). `--tree DIR` runs the same steps on
//! a user's directory.
//!
//! Owns the steps and their checks: the scan must find exactly the files written with their
//! sizes, every file must read back byte for byte, and the file system must be empty after the
//! removal. A file system that runs out of space is marked failed with how much it held, and
//! the remaining steps run on what it holds. The write and remove steps end with the work the
//! file system deferred (`Session::finish_deferred`). Must never time verification work as
//! device time.

use std::collections::BTreeMap;
use std::io::Write;

use dffs_sim::{Preset, SharedSim};

use crate::devices::{describe, device_preset, round, Measure, Meter};
use crate::fsapi::{join, Driver, End, FsError, FsResult, OpenMode, Session};
use crate::report::{tables_of, Row, SuiteReport};
use crate::suites::pair_and_compressed;
use crate::suites::progress;
use crate::suites::tree::{self, Source, Tree};
use crate::{Options, Scale};

/// The fill level of seed 004's partitions.
const FILL: f64 = 0.85;

struct Case {
    name: String,
    preset: Preset,
    tree: Tree,
}

fn cases(opts: &Options) -> Result<Vec<Case>, String> {
    if let Some(dir) = &opts.tree {
        let name = opts.preset.as_deref().unwrap_or("nand-slc-128m");
        let preset = device_preset(name, None)?;
        let t = tree::from_dir(dir)?;
        return Ok(vec![Case {
            name: "tree".into(),
            preset,
            tree: t,
        }]);
    }
    let parts: Vec<(&str, u64, Option<u64>)> = match opts.scale {
        Scale::Tiny => vec![("4m", 4 << 20, None)],
        Scale::Quick => vec![("8m", 8 << 20, None), ("32m", 32 << 20, None)],
        Scale::Full => vec![
            ("8m", 8 << 20, None),
            ("32m", 32 << 20, None),
            ("120m", 120 << 20, None),
            ("81m", 128 << 20, Some(81_000_000)),
        ],
    };
    parts
        .into_iter()
        .map(|(name, bytes, target)| {
            let preset = device_preset("nand-slc-128m", Some(bytes))?;
            let target = target.unwrap_or((bytes as f64 * FILL) as u64);
            Ok(Case {
                name: name.into(),
                preset,
                tree: tree::synthetic(target, 0x000),
            })
        })
        .collect()
}

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let cases = cases(opts)?;
    let devs: Vec<String> = cases.iter().map(|c| describe(&c.preset)).collect();
    let mut rep = SuiteReport::new("rootfs", opts.scale != Scale::Full, devs.join("; "));
    rep.note(
        "steps: write every directory and file (8 KiB writes, as tar does) and sync; unmount; \
         mount; scan (readdir + stat of every entry, as du -shc); read every file (64 KiB \
         reads); df; remove every file and directory; *_us is simulated device time of each \
         step, *_reads/_programs/_erases its operations",
    );
    if opts.scale == Scale::Quick && opts.tree.is_none() {
        rep.note("--quick runs the 8m and 32m partitions; 120m and 81m run at full size only");
    }
    if opts.tree.is_none() {
        rep.note(format!(
            "synthetic tree: {} files over {} directories with log-normal sizes (executables, \
             libraries, scripts, configuration), content about half compressible, scaled by \
             file count to 85% of each partition (81m: 81 MB on the whole device, as seed 000); \
             DFFS runs formatted without compression and with LZ4 (row parameter compress)",
            tree::BASE_FILES,
            tree::BASE_DIRS
        ));
    }
    for c in &cases {
        if !c.tree.skipped.is_empty() {
            rep.note(format!(
                "{} host entries skipped (not regular files or directories), e.g. {}",
                c.tree.skipped.len(),
                c.tree.skipped[0]
            ));
        }
        for (mut d, z) in pair_and_compressed(c.preset)? {
            progress(opts, format!("rootfs {} {} {z}", c.name, d.name()));
            rep.config_line(d.config());
            rep.results.push(one(&mut *d, c, z));
        }
    }
    Ok(rep)
}

/// Accumulates a step's measure from pieces.
struct Step {
    m: Measure,
}

impl Step {
    fn new() -> Step {
        Step {
            m: Measure::default(),
        }
    }
    fn add(&mut self, m: &Measure) {
        self.m.add(m);
    }
    fn put(&self, row: &mut Row, name: &str) {
        row.set(&format!("{name}_us"), round(self.m.sim_us()));
        row.set(&format!("{name}_reads"), self.m.stats.reads);
        row.set(&format!("{name}_programs"), self.m.stats.programs);
        row.set(&format!("{name}_erases"), self.m.stats.erases);
        row.set(&format!("{name}_host_us"), round(self.m.host_us));
    }
}

fn one(d: &mut dyn Driver, c: &Case, compress: &str) -> Row {
    let sim = d.sim().clone();
    let t = &c.tree;
    let part = c.preset.geometry.capacity();
    let mut row = Row::new(d.name(), &c.name)
        .param("compress", compress)
        .param("partition_bytes", part)
        .param("files", t.files.len())
        .param("dirs", t.dirs.len())
        .param("data_bytes", t.bytes());
    let mut total = Measure::default();
    if let Err(e) = d.format() {
        row.fail(format!("format: {e}"));
        return row;
    }
    // Write.
    let mut written: Vec<usize> = Vec::new();
    let mut write = Step::new();
    let mut no_space = 0u64;
    let rep = d.session(End::Unmount, &mut |s| {
        let meter = Meter::start(&sim);
        let r = write_tree(s, t, &mut written, &mut no_space);
        // Synced, and what the file system deferred done (DFFS: a checkpoint), inside the
        // figure.
        let r = r.and_then(|()| s.sync()).and_then(|()| s.finish_deferred());
        write.add(&meter.stop());
        r
    });
    let held: u64 = written.iter().map(|&i| t.files[i].size).sum();
    let failure = (no_space > 0).then(|| {
        format!(
            "ENOSPC: {no_space} entries did not fit; holds {} of {} files ({} of {} bytes)",
            written.len(),
            t.files.len(),
            held,
            t.bytes()
        )
    });
    let unmount = match rep {
        Ok(m) => m.unmount,
        Err(e) => {
            row.fail(format!("write: {e}"));
            return row;
        }
    };
    write.put(&mut row, "write");
    total.add(&write.m);
    total.add(&unmount);
    row.set("unmount_us", round(unmount.sim_us()));
    row.set("files_written", written.len());
    row.set("entries_no_space", no_space);
    row.set("data_written_bytes", held);
    row.set("data_pct", round(100.0 * held as f64 / part as f64));
    if let Some(f) = &failure {
        row.fail(f);
    }
    // Mount, scan, read, df, remove.
    let mut scan = Step::new();
    let mut read = Step::new();
    let mut remove = Step::new();
    let mut used = 0u64;
    let r = d.session(End::Unmount, &mut |s| {
        let meter = Meter::start(&sim);
        let found = scan_tree(s)?;
        scan.add(&meter.stop());
        check_scan(t, &written, &found)?;
        read_tree(s, &sim, t, &written, &mut read)?;
        used = s.used_bytes()?;
        let meter = Meter::start(&sim);
        remove_tree(s, t, &written, no_space == 0)?;
        s.finish_deferred()?;
        remove.add(&meter.stop());
        let left = s.list("/")?;
        if !left.is_empty() {
            return Err(FsError::WrongData(format!(
                "{} entries left after removing everything, e.g. {}",
                left.len(),
                left[0].name
            )));
        }
        Ok(())
    });
    match r {
        Ok(m) => {
            row.set("mount_us", round(m.mount.sim_us()));
            row.set("mount_reads", m.mount.stats.reads);
            row.set("mount_programs", m.mount.stats.programs);
            row.set("mount_erases", m.mount.stats.erases);
            row.set("ram_bytes", m.ram_after_mount);
            row.set("peak_ram_bytes", m.peak_ram);
            total.add(&m.mount);
            total.add(&m.unmount);
        }
        Err(e) => {
            row.fail(match failure {
                Some(f) => format!("{f}; then {e}"),
                None => e.to_string(),
            });
        }
    }
    for (st, name) in [(&scan, "scan"), (&read, "read"), (&remove, "remove")] {
        st.put(&mut row, name);
        total.add(&st.m);
    }
    row.set("used_kib", round(used as f64 / 1024.0));
    row.set("reads", total.stats.reads);
    row.set("programs", total.stats.programs);
    row.set("erases", total.stats.erases);
    row.set("sim_us", round(total.sim_us()));
    row.set("host_us", round(total.host_us));
    row
}

/// Writes the tree as `tar xf` does: a directory or file that does not fit is reported and
/// skipped (its partial content removed), and the rest goes on. Returns the first error that was
/// not "no space" (those end the step), and records the indices of the files written whole and
/// how many entries ran out of space.
fn write_tree(
    s: &mut dyn Session,
    t: &Tree,
    written: &mut Vec<usize>,
    no_space: &mut u64,
) -> FsResult<()> {
    let mut missing: Vec<&str> = Vec::new();
    let under_missing = |p: &str, missing: &[&str]| {
        missing
            .iter()
            .any(|m| p.starts_with(m) && p.as_bytes().get(m.len()) == Some(&b'/'))
    };
    for d in &t.dirs {
        if under_missing(d, &missing) {
            missing.push(d);
            continue;
        }
        match s.mkdir(d) {
            Ok(()) => {}
            Err(FsError::NoSpace) => {
                *no_space += 1;
                missing.push(d);
            }
            Err(e) => return Err(e.at(d)),
        }
    }
    let io = 8192usize;
    let mut buf = vec![0u8; io];
    for (i, f) in t.files.iter().enumerate() {
        if under_missing(&f.path, &missing) {
            *no_space += 1;
            continue;
        }
        let (content, host) = match &f.source {
            Source::Synthetic(c) => (Some(*c), Vec::new()),
            Source::Host(_) => (None, f.bytes().map_err(FsError::Other)?),
        };
        let r = s.with_file(&f.path, OpenMode::CREATE, &mut |fh| {
            let mut off = 0u64;
            while off < f.size {
                let n = (io as u64).min(f.size - off) as usize;
                match content {
                    Some(c) => c.fill(off, &mut buf[..n]),
                    None => buf[..n].copy_from_slice(&host[off as usize..off as usize + n]),
                }
                fh.write_at(off, &buf[..n])?;
                off += n as u64;
            }
            Ok(())
        });
        match r {
            Ok(()) => written.push(i),
            Err(FsError::NoSpace) => {
                *no_space += 1;
                // The partial file goes, as a failed tar extraction leaves it useless.
                match s.remove(&f.path) {
                    Ok(()) | Err(FsError::NoSpace) | Err(FsError::Other(_)) => {}
                    Err(e) => return Err(e.at(&f.path)),
                }
            }
            Err(e) => return Err(e.at(&f.path)),
        }
    }
    Ok(())
}

/// Walks the whole tree: readdir of every directory, stat of every entry. Returns each file's
/// size by path.
fn scan_tree(s: &mut dyn Session) -> FsResult<BTreeMap<String, u64>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec!["/".to_string()];
    while let Some(d) = dirs.pop() {
        for e in s.list(&d).map_err(|e| e.at(&d))? {
            let (is_dir, size) = s.stat(&d, &e.name).map_err(|x| x.at(&join(&d, &e.name)))?;
            let p = join(&d, &e.name);
            if is_dir {
                dirs.push(p);
            } else {
                files.insert(p, size);
            }
        }
    }
    Ok(files)
}

fn check_scan(t: &Tree, written: &[usize], found: &BTreeMap<String, u64>) -> FsResult<()> {
    if found.len() != written.len() {
        return Err(FsError::WrongData(format!(
            "scan found {} files, {} were written",
            found.len(),
            written.len()
        )));
    }
    for &i in written {
        let f = &t.files[i];
        match found.get(&f.path) {
            Some(&sz) if sz == f.size => {}
            Some(&sz) => {
                return Err(FsError::WrongData(format!(
                    "{}: stat says {sz} bytes, {} were written",
                    f.path, f.size
                )))
            }
            None => return Err(FsError::WrongData(format!("{}: missing from scan", f.path))),
        }
    }
    Ok(())
}

fn read_tree(
    s: &mut dyn Session,
    sim: &SharedSim,
    t: &Tree,
    written: &[usize],
    step: &mut Step,
) -> FsResult<()> {
    let io = 65536usize;
    for &i in written {
        let f = &t.files[i];
        let mut data = vec![0u8; f.size as usize];
        let meter = Meter::start(sim);
        s.with_file(&f.path, OpenMode::READ, &mut |fh| {
            let mut off = 0usize;
            while off < data.len() {
                let n = io.min(data.len() - off);
                let got = fh.read_at(off as u64, &mut data[off..off + n])?;
                if got != n {
                    return Err(FsError::WrongData(format!("short read at {off}")));
                }
                off += n;
            }
            Ok(())
        })
        .map_err(|e| e.at(&f.path))?;
        step.add(&meter.stop());
        match &f.source {
            Source::Synthetic(c) => c.verify(0, &data),
            Source::Host(_) => {
                crate::content::compare(0, &f.bytes().map_err(FsError::Other)?, &data)
            }
        }
        .map_err(|m| FsError::WrongData(format!("{}: {m}", f.path)))?;
    }
    Ok(())
}

fn remove_tree(
    s: &mut dyn Session,
    t: &Tree,
    written: &[usize],
    all_dirs_exist: bool,
) -> FsResult<()> {
    for &i in written.iter().rev() {
        let p = &t.files[i].path;
        s.remove(p).map_err(|e| e.at(p))?;
    }
    for d in t.dirs.iter().rev() {
        match s.rmdir(d) {
            Ok(()) => {}
            // A directory the write step could not create (it ran out of space).
            Err(FsError::Other(_)) if !all_dirs_exist => {}
            Err(e) => return Err(e.at(d)),
        }
    }
    Ok(())
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    tables_of(
        out,
        rep,
        "rootfs",
        &[
            ("write_us", "write + sync, µs", false),
            ("mount_us", "mount, µs", false),
            ("scan_us", "scan (readdir + stat), µs", false),
            ("read_us", "read every file, µs", false),
            ("remove_us", "remove everything, µs", false),
            ("used_kib", "df used, KiB", false),
            ("data_pct", "file data held, % of partition", true),
        ],
    )
}
