//! Suites `postmark` (seed 003, Postmark as in the DFFS paper) and `postmark-sync` (Postmark
//! 1.51 as issue 17 runs it on a `--sync` mount, see `sync_params`). `postmark`: on `onenand-256m`, 100
//! subdirectories; a create phase of 1,300 files of 128 KiB in random subdirectories; 2,000
//! transactions, each a create (with 128 KiB of data) or a delete; then everything deleted. All
//! writes are synchronous (O_SYNC semantics: each 4 KiB write is durable before the next).
//! Each phase's time ends with the work the file system deferred (`Session::finish_deferred`:
//! DFFS's checkpoint), so the transactions pay for what they left to the delete phase.
//!
//! Owns that workload (one seeded sequence, the same for both file systems), its check (every
//! live file read back before the delete phase, outside the timing) and the time split:
//! - DFFS: from the OOB tags of the pages it programs ([`crate::dffs_fs::SplitFlash`]): first
//!   programs of file data are data; node pages (journal, inodes, directories, maps,
//!   checkpoints) are metadata; erases, re-programs of data already on flash and reads of data
//!   pages (the workload reads nothing) are garbage collection.
//! - littlefs: from the API calls: the time inside `write` is data, everything else (sync,
//!   open, close, create, remove) metadata; littlefs has no garbage collector (its copies and
//!   erases happen inside those calls).
//!
//! Must never count verification reads in any phase.

use std::io::Write;

use dffs_sim::SharedSim;

use crate::content::{rng, Content};
use crate::devices::{describe, device_preset, new_device, round, Measure, Meter};
use crate::dffs_fs::{DffsDriver, SplitFlash};
use crate::fsapi::{put_causes, verify_file, Driver, End, FsResult, OpenMode, Session};
use crate::report::{tables_of, Row, SuiteReport};
use crate::suites::progress;
use crate::{littlefs, Options, Scale};

struct Params {
    part: Option<u64>,
    dirs: u64,
    files: u64,
    size: u64,
    transactions: u64,
    io: u64,
    /// Files opened `O_SYNC` (each write durable on return) instead of an fsync per write.
    osync: bool,
    /// Each transaction also reads a whole file, with even odds (as Postmark 1.51 does).
    reads: bool,
    /// Bytes of whole files an operating system's page cache keeps (least recently used
    /// first out; 0: none). A read of a cached file opens and closes it but reads nothing
    /// from the file system, as a read through a mount whose kernel keeps the pages.
    page_cache: u64,
}

fn params(s: Scale) -> Params {
    match s {
        Scale::Tiny => Params {
            part: Some(4 << 20),
            dirs: 4,
            files: 10,
            size: 128 << 10,
            transactions: 16,
            io: 4096,
            osync: false,
            reads: false,
            page_cache: 0,
        },
        Scale::Quick => Params {
            part: Some(32 << 20),
            dirs: 10,
            files: 40,
            size: 128 << 10,
            transactions: 60,
            io: 4096,
            osync: false,
            reads: false,
            page_cache: 0,
        },
        Scale::Full => Params {
            part: None,
            dirs: 100,
            files: 1300,
            size: 128 << 10,
            transactions: 2000,
            io: 4096,
            osync: false,
            reads: false,
            page_cache: 0,
        },
    }
}

/// Suite `postmark-sync`: Postmark 1.51 as issue 17 runs it on a `--sync` mount (`set
/// subdirectories 100`, `set number 600`, `set size 131072`, `set transactions 2000`: every
/// file 128 KiB, written in 4 KiB pieces (Postmark writes through stdio, in chunks of the
/// mount's `st_blksize`, a kernel page), each transaction a whole-file read with even odds and
/// a create or delete), on `nand-slc-128m`, through the library with files opened `O_SYNC`.
fn sync_params(s: Scale) -> Params {
    let (part, dirs, files, transactions) = match s {
        Scale::Tiny => (Some(4 << 20), 4, 10, 16),
        Scale::Quick => (Some(32 << 20), 10, 60, 200),
        Scale::Full => (None, 100, 600, 2000),
    };
    Params {
        part,
        dirs,
        files,
        size: 128 << 10,
        transactions,
        io: 4096,
        osync: true,
        reads: true,
        page_cache: 0,
    }
}

/// The page cache of the suite's second case: 256 MiB, more than every file Postmark keeps at
/// once (600 files of 128 KiB in the full size), as on the host of the mount measurement.
const PAGE_CACHE: u64 = 256 << 20;

/// Runs suite `postmark-sync` (its sizes: `sync_params`).
pub fn run_sync(opts: &Options) -> Result<SuiteReport, String> {
    let p = sync_params(opts.scale);
    let preset = device_preset("nand-slc-128m", p.part)?;
    let mut rep = SuiteReport::new(
        "postmark-sync",
        opts.scale != Scale::Full,
        describe(&preset),
    );
    rep.note(format!(
        "Postmark 1.51 as on a --sync mount: {} directories, {} files of {} KiB created in {} B \
         writes to files opened O_SYNC, {} transactions (a whole-file read with even odds, then \
         a create or delete with even odds), then all deleted; tps is transactions per second \
         of simulated device time in the transaction phase; programs, reads and erases are \
         the device operations of the three phases",
        p.dirs,
        p.files,
        p.size >> 10,
        p.io,
        p.transactions,
    ));
    rep.note(format!(
        "case `postmark`: every read reaches the file system (no page cache); case `postmark, \
         page cache`: the same with a page cache of {} MiB of whole files, least recently used \
         out, as the kernel keeps for a mount (a read of a cached file still opens and closes \
         it; files written are cached as they are written)",
        PAGE_CACHE >> 20
    ));
    let rep = run_with(opts, &p, preset, rep)?;
    let p = Params {
        page_cache: PAGE_CACHE,
        ..p
    };
    run_with(opts, &p, preset, rep)
}

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let p = params(opts.scale);
    let preset = device_preset("onenand-256m", p.part)?;
    let mut rep = SuiteReport::new("postmark", opts.scale != Scale::Full, describe(&preset));
    rep.note(format!(
        "{} directories, {} files of {} KiB created, {} transactions (create or delete, even \
         odds), then all deleted; every {} B write is synced before the next (O_SYNC); tps is \
         transactions per second of simulated device time in the transaction phase",
        p.dirs,
        p.files,
        p.size >> 10,
        p.transactions,
        p.io
    ));
    run_with(opts, &p, preset, rep)
}

fn run_with(
    opts: &Options,
    p: &Params,
    preset: dffs_sim::Preset,
    mut rep: SuiteReport,
) -> Result<SuiteReport, String> {
    if p.page_cache == 0 {
        rep.note(
            "time split, DFFS: from the OOB tags of the pages it programs (first programs of \
             file data = data; node pages = metadata; erases, re-programs of data already on \
             flash and data-page reads = garbage collection; nodes moved by the collector \
             count as metadata); littlefs: time inside write calls = data, all other calls = \
             metadata, no garbage collector",
        );
    }
    let case = if p.page_cache == 0 {
        "postmark"
    } else {
        "postmark, page cache"
    };
    for which in ["dffs", "littlefs"] {
        let sim = new_device(preset)?;
        let (mut d, split): (Box<dyn Driver>, Option<SplitFlash>) = if which == "dffs" {
            let (d, s) = DffsDriver::with_split(sim.clone());
            (Box::new(d), Some(s))
        } else {
            (littlefs::driver(sim.clone())?, None)
        };
        if p.page_cache == 0 {
            rep.config_line(d.config());
        }
        progress(opts, format!("{case} {which}"));
        let mut row = Row::new(which, case)
            .param("dirs", p.dirs)
            .param("files", p.files)
            .param("file_bytes", p.size)
            .param("transactions", p.transactions)
            .param("io_bytes", p.io);
        if let Err(e) = one(&mut *d, &sim, split.as_ref(), p, &mut row) {
            row.fail(e);
        }
        rep.results.push(row);
    }
    Ok(rep)
}

/// The files an operating system's page cache holds (`Params::page_cache`), by id, least
/// recently used first.
struct PageCache {
    files: std::collections::VecDeque<u64>,
    /// Files it holds at most (0: no cache).
    cap: usize,
}

impl PageCache {
    /// Whether file `id` is cached (then it becomes the most recently used).
    fn hit(&mut self, id: u64) -> bool {
        match self.files.iter().position(|&f| f == id) {
            Some(i) => {
                self.files.remove(i);
                self.files.push_back(id);
                true
            }
            None => false,
        }
    }

    /// Caches file `id` (written or read whole), dropping the least recently used.
    fn insert(&mut self, id: u64) {
        if self.cap == 0 {
            return;
        }
        self.remove(id);
        if self.files.len() == self.cap {
            self.files.pop_front();
        }
        self.files.push_back(id);
    }

    /// Forgets a deleted file.
    fn remove(&mut self, id: u64) {
        self.files.retain(|&f| f != id);
    }
}

/// Time spent so far: (total, inside write calls) in ps, and DFFS's split if any.
struct Clock<'a> {
    sim: &'a SharedSim,
    write_ps: u64,
}

impl Clock<'_> {
    fn now(&self) -> u64 {
        self.sim.stats().sim_ps
    }
}

fn create(
    s: &mut dyn Session,
    clk: &mut Clock,
    path: &str,
    c: &Content,
    p: &Params,
) -> FsResult<()> {
    let mut buf = vec![0u8; p.io as usize];
    let sim = clk.sim.clone();
    let mut wps = 0u64;
    let mode = if p.osync {
        OpenMode::CREATE.with_sync()
    } else {
        OpenMode::CREATE
    };
    s.with_file(path, mode, &mut |f| {
        let mut off = 0;
        while off < p.size {
            let n = p.io.min(p.size - off) as usize;
            c.fill(off, &mut buf[..n]);
            let t0 = sim.stats().sim_ps;
            f.write_at(off, &buf[..n])?;
            wps += sim.stats().sim_ps - t0;
            if !p.osync {
                f.sync()?;
            }
            off += n as u64;
        }
        Ok(())
    })?;
    clk.write_ps += wps;
    Ok(())
}

fn one(
    d: &mut dyn Driver,
    sim: &SharedSim,
    split: Option<&SplitFlash>,
    p: &Params,
    row: &mut Row,
) -> FsResult<()> {
    d.format()?;
    let mut rng = rng(0x003);
    let mut next = 0u64;
    let mut live: Vec<(String, u64)> = Vec::new();
    let content = |id: u64| Content::random(0x9000_0000 + id);
    let mut clk = Clock { sim, write_ps: 0 };
    let mut cache = PageCache {
        files: std::collections::VecDeque::new(),
        cap: (p.page_cache / p.size.max(1)) as usize,
    };
    let split0 = split.map(|s| s.split()).unwrap_or_default();
    let meter = Meter::start(sim);
    let mut phases = [0u64; 3];
    let mut ops = Measure::default();
    let mut verify_split = crate::dffs_fs::Split::default();
    let mut ram = 0usize;
    // Operation counts by cause at the start and end of the timed phases (DFFS).
    let mut causes: [Option<dffs::CauseCounts>; 4] = [None; 4];
    d.session(End::Unmount, &mut |s| {
        causes[0] = s.op_causes();
        let phase = Meter::start(sim);
        let t0 = clk.now();
        for k in 0..p.dirs {
            s.mkdir(&format!("/p{k:03}"))?;
        }
        for _ in 0..p.files {
            let path = format!("/p{:03}/f{next:06}", rng.below(p.dirs));
            create(s, &mut clk, &path, &content(next), p)?;
            cache.insert(next);
            live.push((path, next));
            next += 1;
        }
        // Each phase's time ends with the work it left for later (DFFS: a checkpoint).
        s.finish_deferred()?;
        let t1 = clk.now();
        let mut rbuf = vec![0u8; p.io as usize];
        for _ in 0..p.transactions {
            if p.reads && rng.below(2) == 0 && !live.is_empty() {
                let (path, id) = &live[rng.below(live.len() as u64) as usize];
                if cache.hit(*id) {
                    s.with_file(path, OpenMode::READ, &mut |_| Ok(()))?;
                } else {
                    cache.insert(*id);
                    s.with_file(path, OpenMode::READ, &mut |f| {
                        let mut off = 0;
                        while off < p.size {
                            let n = f.read_at(off, &mut rbuf)?;
                            if n == 0 {
                                break;
                            }
                            off += n as u64;
                        }
                        Ok(())
                    })?;
                }
            }
            if rng.below(2) == 0 && !live.is_empty() {
                let (path, id) = live.swap_remove(rng.below(live.len() as u64) as usize);
                cache.remove(id);
                s.remove(&path)?;
            } else {
                let path = format!("/p{:03}/f{next:06}", rng.below(p.dirs));
                create(s, &mut clk, &path, &content(next), p)?;
                cache.insert(next);
                live.push((path, next));
                next += 1;
            }
        }
        s.finish_deferred()?;
        causes[1] = s.op_causes();
        let t2 = clk.now();
        ops.add(&phase.stop());
        // Check every live file (not timed, not in the split).
        let v0 = split.map(|s| s.split()).unwrap_or_default();
        if let Some(sp) = split {
            sp.set_app_reading(true);
        }
        for (path, id) in &live {
            verify_file(s, path, &content(*id), p.size, 65536)?;
        }
        if let Some(sp) = split {
            sp.set_app_reading(false);
            let v1 = sp.split();
            verify_split = crate::dffs_fs::Split {
                data_ps: v1.data_ps - v0.data_ps,
                meta_ps: v1.meta_ps - v0.meta_ps,
                gc_ps: v1.gc_ps - v0.gc_ps,
            };
        }
        let t3 = clk.now();
        causes[2] = s.op_causes();
        let phase = Meter::start(sim);
        ram = s.take_peak_ram();
        for (path, _) in live.drain(..) {
            s.remove(&path)?;
        }
        for k in 0..p.dirs {
            s.rmdir(&format!("/p{k:03}"))?;
        }
        s.finish_deferred()?;
        causes[3] = s.op_causes();
        let t4 = clk.now();
        ops.add(&phase.stop());
        phases = [t1 - t0, t2 - t1, t4 - t3];
        Ok(())
    })?;
    let all = meter.stop();
    let run_ps: u64 = phases.iter().sum();
    row.set("create_us", round(phases[0] as f64 / 1e6));
    row.set("transactions_us", round(phases[1] as f64 / 1e6));
    row.set("delete_us", round(phases[2] as f64 / 1e6));
    row.set(
        "tps",
        round(p.transactions as f64 / (phases[1] as f64 / 1e12)),
    );
    row.set("total_us", round(run_ps as f64 / 1e6));
    let (data, meta, gc) = match split {
        Some(sp) => {
            let s1 = sp.split();
            (
                s1.data_ps - split0.data_ps - verify_split.data_ps,
                s1.meta_ps - split0.meta_ps - verify_split.meta_ps,
                s1.gc_ps - split0.gc_ps - verify_split.gc_ps,
            )
        }
        None => (clk.write_ps, run_ps.saturating_sub(clk.write_ps), 0),
    };
    row.set("data_us", round(data as f64 / 1e6));
    row.set("meta_us", round(meta as f64 / 1e6));
    row.set("gc_us", round(gc as f64 / 1e6));
    row.set("ram_bytes", ram);
    row.set("files_created", next);
    // Operations of the three phases (verification left out); host time of the whole session.
    ops.put(&mut row.metrics, "");
    // The same by cause: the first two phases, and the deletion phase added.
    let after = match causes {
        [_, Some(mut two), Some(c3), Some(c4)] => {
            for i in 0..dffs::Cause::COUNT {
                two.reads[i] += c4.reads[i] - c3.reads[i];
                two.programs[i] += c4.programs[i] - c3.programs[i];
                two.erases[i] += c4.erases[i] - c3.erases[i];
                two.program_bytes[i] += c4.program_bytes[i] - c3.program_bytes[i];
                two.read_bytes[i] += c4.read_bytes[i] - c3.read_bytes[i];
            }
            Some(two)
        }
        _ => None,
    };
    put_causes(&mut row.metrics, "", causes[0], after);
    row.set("session_host_us", round(all.host_us));
    Ok(())
}

/// The suite's tables (`postmark-sync` adds the device operations, issue 17's measures).
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    let mut t = vec![
        ("tps", "transactions per second", true),
        ("total_us", "all three phases, µs", false),
        ("data_us", "data writes, µs", false),
        ("meta_us", "metadata, µs", false),
        ("gc_us", "garbage collection, µs", false),
    ];
    if rep.suite == "postmark-sync" {
        t.extend([
            ("programs", "page programs, all three phases", false),
            ("reads", "page reads, all three phases", false),
            ("erases", "block erases, all three phases", false),
        ]);
    }
    tables_of(out, rep, "postmark", &t)
}
