//! Power-cut torture of DFFS.
//!
//! Owns the workloads (random mixes of file updates, directory churn, renames, transactions,
//! large and small files, a full device, and seed 002's log-archive scenario), the bookkeeping
//! of which file-system states a recovery may legitimately produce, and the loop that reruns a
//! workload with the power cut at its N-th program or erase, then powers up, mounts, runs fsck
//! and compares. The guarantees checked after every cut:
//! 1. the file system mounts and fsck finds it consistent;
//! 2. everything synced before the cut (sync, fsync, O_SYNC writes, committed transactions) is
//!    there, byte for byte;
//! 3. every file holds the content of one of its commits (never a mix);
//! 4. a transaction is there entirely or not at all;
//!
//! and, as the journal is one ordered log, the recovered tree is exactly the tree after one of
//! the commits since the last durable point. It must never use anything but the public DFFS and
//! simulator APIs.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The reference model (it lives in `dffs-testkit`, shared with the tests and fuzz targets).
pub use dffs_testkit::model;

use dffs::{Config, Error, FormatOptions, Fs, OpenFlags, SetAttr};
use dffs_sim::{Preset, SimFlash, SimOptions};
use serde::Serialize;

use dffs_testkit::Rng;
use model::{join, read_tree, split, Model, Node};

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Workload {
    /// A random mix of every operation.
    Mixed,
    /// Many small files created, renamed and removed across directories.
    Churn,
    /// Seed 002: a log filled entry by entry (each entry larger than the data cache, written in
    /// chunks, synced), archived when full (rename), the oldest archive deleted, in a
    /// transaction.
    Log,
    /// Files grown until the device is full, then partly deleted and refilled.
    Full,
    /// Large files rewritten at random offsets and truncated.
    Large,
    /// Hard links: files given more names across directories, written through one name,
    /// renamed and removed name by name.
    Links,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 6] = [
        Workload::Mixed,
        Workload::Churn,
        Workload::Log,
        Workload::Full,
        Workload::Large,
        Workload::Links,
    ];

    /// Parses a workload name.
    pub fn from_name(s: &str) -> Option<Workload> {
        Some(match s {
            "mixed" => Workload::Mixed,
            "churn" => Workload::Churn,
            "log" => Workload::Log,
            "full" => Workload::Full,
            "large" => Workload::Large,
            "links" => Workload::Links,
            _ => return None,
        })
    }

    /// The workload's name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Mixed => "mixed",
            Workload::Churn => "churn",
            Workload::Log => "log",
            Workload::Full => "full",
            Workload::Large => "large",
            Workload::Links => "links",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// The device (already cut to the wanted size).
    pub preset: Preset,
    /// The workload.
    pub workload: Workload,
    /// Operations in the workload.
    pub steps: usize,
    /// Seed of the workload and of the simulator's choices at the cut.
    pub seed: u64,
    /// Cut points to try (0: every program and erase of the workload).
    pub cuts: u64,
    /// Mount configuration.
    pub config: Config,
    /// Compression the device is formatted with (`dffs::format::compress::NONE`, `LZ4`, `DEFLATE`);
    /// with compression on, written data is about half compressible.
    pub compression: u8,
    /// Device faults during the workload, the recovery and after it.
    pub faults: Faults,
}

/// Device faults a torture run turns on. With faults, every guarantee must still hold: a
/// file system may retry a read, move data off a weak page and retire a failing block, but it
/// must lose nothing that was synced and never fail an operation the model allows (ENOSPC aside,
/// which is bounded on its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Faults {
    /// Transient bit flips per bit read (NAND: corrected by the ECC, or, on a page already at
    /// the ECC's limit, uncorrectable for that one read).
    pub bitflip_rate: f64,
    /// Every this many workload steps, one programmed page gets stuck bit flips: as many in
    /// every ECC codeword as the ECC corrects, so the page reads corrected and any transient
    /// flip on top makes that read uncorrectable (NAND only; 0: none).
    pub stuck_every: u32,
    /// Probability that a program fails (the block goes bad; the page is left partial).
    pub program_fail_rate: f64,
    /// Probability that an erase fails (the block goes bad).
    pub erase_fail_rate: f64,
}

impl Faults {
    /// No faults.
    pub const NONE: Faults = Faults {
        bitflip_rate: 0.0,
        stuck_every: 0,
        program_fail_rate: 0.0,
        erase_fail_rate: 0.0,
    };

    /// The standard mix for a device kind: NAND gets transient flips (3e-6 per bit, the rate
    /// the read-error bug was found at), stuck flips at the ECC limit every 5 steps and failing
    /// programs and erases; NOR (no ECC: a flipped bit is lost data no file system can
    /// restore) gets failing programs and erases only.
    pub fn standard(kind: dffs::FlashKind) -> Faults {
        match kind {
            dffs::FlashKind::Nand => Faults {
                bitflip_rate: 3e-6,
                stuck_every: 5,
                program_fail_rate: 2e-4,
                erase_fail_rate: 2e-3,
            },
            dffs::FlashKind::Nor => Faults {
                program_fail_rate: 2e-4,
                erase_fail_rate: 2e-3,
                ..Faults::NONE
            },
        }
    }

    /// Whether any fault is on.
    pub fn any(&self) -> bool {
        *self != Faults::NONE
    }
}

/// One cut after which a guarantee did not hold.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// Workload seed.
    pub seed: u64,
    /// The program/erase operation (1-based, counted from the start of the workload) at which
    /// power was cut.
    pub cut: u64,
    /// Workload name.
    pub workload: &'static str,
    /// What went wrong.
    pub message: String,
}

/// What a torture run found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Program and erase operations the uncut workload issued.
    pub workload_ops: u64,
    /// Cuts verified.
    pub cuts: u64,
    /// Cuts after which a guarantee did not hold (and failures of the uncut run).
    pub failures: Vec<Failure>,
    /// Commit points of the uncut run.
    pub commits: u64,
    /// Operations refused with ENOSPC in the uncut run.
    pub nospace: u64,
    /// The least the file system held when it said ENOSPC (uncut run, and every run after a
    /// cut): stored file bytes over the room for files (good blocks less [`FIXED_BLOCKS`]). A
    /// workload that hits ENOSPC below [`NOSPACE_FLOOR`] fails.
    pub nospace_min_fill: Option<f64>,
    /// Faults the uncut run met (device counters).
    pub faults: FaultCounts,
    /// Faults all runs met up to their cut, the uncut run included (device counters; stuck
    /// pages of the uncut run only).
    pub faults_all_runs: FaultCounts,
    /// Cuts after which a second cut landed while the file system recovered from the first,
    /// took its first checkpoint or ran the workload on after it.
    pub second_cuts: u64,
    /// Cut runs in which a cut upper-page program damaged its lower page (paired-page MLC).
    pub paired_page_damage: u64,
}

/// What faults a run met.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct FaultCounts {
    /// Reads the ECC corrected.
    pub corrected_reads: u64,
    /// Reads the ECC could not correct.
    pub uncorrectable_reads: u64,
    /// Programs that failed.
    pub program_failures: u64,
    /// Erases that failed.
    pub erase_failures: u64,
    /// Pages given stuck bit flips.
    pub stuck_pages: u64,
}

// The ENOSPC bound is the model test's too (`DFFS_NOSPACE_DEBUG=1` prints each ENOSPC with the
// file system's block summary).
pub use dffs_testkit::model::{good_for_files, room_for_files, FIXED_BLOCKS, NOSPACE_FLOOR};

/// Operations the workload runs on in the session that recovered from a cut, before the tree
/// is compared with the model again after a clean remount.
pub const STEPS_AFTER_RECOVERY: usize = 6;

/// The workload generator for `seed` (salted, so torture seeds draw other sequences than
/// the same seeds elsewhere).
fn rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x5DEE_CE66_D1CE_5EED)
}

/// Text-like runs alternating with random ones (about half compressible, so a compressed file
/// holds both compressed and raw blocks).
fn mixed_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = rng(seed);
    let words: [&[u8]; 6] = [
        b"erase ", b"page ", b"block\n", b"spare ", b"flash ", b"0x7f ",
    ];
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        let run = 256 + r.below_mod(3000) as usize;
        let end = (v.len() + run).min(len);
        if r.below_mod(2) == 0 {
            while v.len() < end {
                v.extend_from_slice(words[r.below_mod(6) as usize]);
            }
        } else {
            while v.len() < end {
                v.extend_from_slice(&r.next_u64().to_le_bytes());
            }
        }
        v.truncate(end);
    }
    v
}

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut r = rng(seed);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Why a workload stopped.
enum Stop {
    /// Power was cut during an operation; the model after that operation (had it completed)
    /// is also a state the recovery may produce.
    PowerLoss(Option<Model>),
    /// A guarantee failed without any cut.
    Fatal(String),
}

type Step = Result<(), Stop>;

/// The file system under test plus what it should hold.
struct Exec {
    fs: Option<Fs<SimFlash>>,
    /// The device while no file system is mounted on it (after a failed remount).
    dev: Option<SimFlash>,
    cfg: Config,
    model: Model,
    /// States a recovery may produce: every commit since the last durable point.
    cands: Vec<Model>,
    rng: Rng,
    commits: u64,
    nospace: u64,
    log_n: u64,
    max_file: u64,
    compressible: bool,
    /// Least fill at an ENOSPC so far.
    fill_min: Option<f64>,
    /// The tree when the open transaction began (the file system holds it until the commit).
    txn_pre: Option<Model>,
}

/// The numbers of the log workload's archives (`/log/archive.N`) in `model`, oldest first.
fn archives_in(model: &Model) -> Vec<u64> {
    let mut v: Vec<u64> = model
        .nodes
        .keys()
        .filter_map(|k| k.strip_prefix("/log/archive.")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

impl Exec {
    /// A session running the workload on `fs`, which holds `model`.
    fn new(fs: Fs<SimFlash>, model: Model, rng: Rng, opts: &Options) -> Exec {
        let log_archives = archives_in(&model);
        let dev_bytes = opts.preset.geometry.capacity();
        Exec {
            fs: Some(fs),
            dev: None,
            cfg: opts.config,
            cands: vec![model.clone()],
            model,
            rng,
            commits: 0,
            nospace: 0,
            log_n: log_archives.last().map_or(0, |n| n + 1),
            max_file: (dev_bytes / 16).clamp(4096, 256 * 1024),
            compressible: opts.compression != dffs::format::compress::NONE,
            fill_min: None,
            txn_pre: None,
        }
    }

    fn fs(&mut self) -> &mut Fs<SimFlash> {
        self.fs.as_mut().expect("file system mounted")
    }

    /// A state that may survive (committed, not yet known durable).
    fn committed(&mut self) {
        self.commits += 1;
        self.cands.push(self.model.clone());
    }

    /// The current state is durable: nothing older can come back.
    fn durable(&mut self) {
        self.cands.clear();
        self.cands.push(self.model.clone());
    }

    /// Interprets a file-system result against the model's; `after` is the model if the
    /// operation succeeds.
    fn check(
        &mut self,
        what: &str,
        got: Result<(), Error>,
        want: Result<(), Error>,
        after: Model,
    ) -> Result<bool, Stop> {
        match (got, want) {
            (Err(Error::PowerLoss), _) => Err(Stop::PowerLoss(if want.is_ok() {
                Some(after)
            } else {
                None
            })),
            (Ok(()), Ok(())) => {
                self.model = after;
                Ok(true)
            }
            (Err(Error::NoSpace), Ok(())) => {
                self.on_nospace(None)?;
                Ok(false)
            }
            (Err(g), Err(w)) if g == w => Ok(false),
            (g, w) => Err(Stop::Fatal(format!(
                "{what}: file system says {g:?}, model says {w:?}"
            ))),
        }
    }

    /// Counts an ENOSPC and checks it was not said too early: the file system then held at
    /// least [`NOSPACE_FLOOR`] of the room for files in file content (`pending`: the model
    /// with the refused write's earlier chunks, which the file system holds too).
    fn on_nospace(&mut self, pending: Option<&Model>) -> Result<(), Stop> {
        self.nospace += 1;
        let mut held = pending
            .map_or(0, Model::stored_bytes)
            .max(self.model.stored_bytes());
        // Inside a transaction the file system also holds what the transaction replaces.
        if let Some(pre) = &self.txn_pre {
            held = held.max(pending.unwrap_or(&self.model).stored_bytes_since(pre));
        }
        let dev = self.fs().flash();
        let g = dev.preset().geometry;
        let bad = dev.factory_bad_blocks().len() + dev.grown_bad_blocks().len();
        let good = good_for_files(
            (g.blocks as usize).saturating_sub(bad) as u64,
            self.fs().params().anchors,
            dffs::format::params::ANCHOR_AREA,
        );
        let room = room_for_files(good, g.block_size() as u64);
        // A device whose bad blocks left no room for files at all (16 MLC blocks with faults,
        // campaign seeds 9600-9604) may refuse anything: it is full however little it holds.
        let fill = if room == 0 {
            1.0
        } else {
            held as f64 / room as f64
        };
        self.fill_min = Some(self.fill_min.map_or(fill, |m: f64| m.min(fill)));
        if std::env::var_os("DFFS_NOSPACE_DEBUG").is_some() {
            let fs = self.fs();
            let st = fs.statfs();
            eprintln!(
                "ENOSPC fill {fill:.3}: statfs {st:?}; {}",
                fs.debug_block_summary()
            );
        }
        if fill < NOSPACE_FLOOR {
            return Err(Stop::Fatal(format!(
                "ENOSPC with {held} bytes stored, {:.1}% of the {room} bytes of room for files",
                fill * 100.0
            )));
        }
        Ok(())
    }

    fn ino(&mut self, path: &str) -> Result<u32, Stop> {
        match self.fs().resolve(path.as_bytes()) {
            Ok(i) => Ok(i),
            Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
            Err(e) => Err(Stop::Fatal(format!("resolve {path}: {e:?}"))),
        }
    }

    fn name(&mut self) -> String {
        const N: [&str; 10] = [
            "a",
            "b",
            "c",
            "data",
            "log.txt",
            "e",
            "ff",
            "g.bin",
            "hh",
            "a-rather-long-file-name.dat",
        ];
        N[self.rng.below_mod(N.len() as u64) as usize].to_string()
    }

    fn create(&mut self, dir: bool) -> Step {
        let d = self
            .rng
            .pick(&self.model.dirs())
            .cloned()
            .unwrap_or_else(|| "/".into());
        let path = join(&d, &self.name());
        let mut after = self.model.clone();
        let want = after.create(
            &path,
            if dir {
                Node::Dir
            } else {
                Node::File(Vec::new())
            },
        );
        let (pd, n) = split(&path);
        let pino = self.ino(pd)?;
        let got = if dir {
            self.fs().mkdir(pino, n.as_bytes(), 0o755, 0, 0).map(|_| ())
        } else {
            self.fs()
                .create(pino, n.as_bytes(), 0o644, 0, 0)
                .map(|_| ())
        };
        if self.check(&format!("create {path}"), got, want, after)? {
            self.committed();
        }
        Ok(())
    }

    /// open, write in chunks (O_SYNC or not), maybe fsync, close.
    fn write(
        &mut self,
        path: &str,
        off: u64,
        data: &[u8],
        chunks: usize,
        osync: bool,
        fsync: bool,
    ) -> Step {
        let ino = self.ino(path)?;
        let flags = OpenFlags {
            sync: osync,
            ..OpenFlags::RW
        };
        let fh = match self.fs().open(ino, flags) {
            Ok(f) => f,
            Err(Error::PowerLoss) => return Err(Stop::PowerLoss(None)),
            // Opening for writing after a recovery owes the recovery checkpoint, which may not
            // find room (ENOSPC like any other, checked against the bound).
            Err(Error::NoSpace) => return self.on_nospace(None),
            Err(e) => return Err(Stop::Fatal(format!("open {path}: {e:?}"))),
        };
        let mut staged = self.model.clone();
        let chunk = data.len().div_ceil(chunks.max(1)).max(1);
        let mut pos = 0usize;
        let mut failed = false;
        while pos < data.len() {
            let end = (pos + chunk).min(data.len());
            let mut after = staged.clone();
            let _ = after.write(path, off + pos as u64, &data[pos..end]);
            match self.fs().write(fh, off + pos as u64, &data[pos..end]) {
                Ok(n) if n == end - pos => {}
                // A short write: after failures the device refused the cache's blocks part-way
                // (ENOSPC like any other, checked against the bound); the bytes it took are
                // the file's, the rest of the write is not done.
                Ok(n) if n > 0 && n < end - pos && !osync => {
                    let _ = staged.write(path, off + pos as u64, &data[pos..pos + n]);
                    self.on_nospace(Some(&staged))?;
                    failed = true;
                    break;
                }
                Ok(n) => return Err(Stop::Fatal(format!("write {path}: short write {n}"))),
                Err(Error::PowerLoss) => return Err(Stop::PowerLoss(Some(after))),
                Err(Error::NoSpace) => {
                    self.on_nospace(Some(&staged))?;
                    failed = true;
                    break;
                }
                Err(e) => {
                    return Err(Stop::Fatal(format!(
                        "write {path} @{}: {e:?}",
                        off + pos as u64
                    )))
                }
            }
            staged = after;
            if osync {
                self.model = staged.clone();
                self.committed();
                self.durable();
            }
            pos = end;
        }
        if fsync && !failed {
            match self.fs().fsync(fh) {
                Ok(()) => {
                    self.model = staged.clone();
                    self.committed();
                    self.durable();
                }
                Err(Error::PowerLoss) => return Err(Stop::PowerLoss(Some(staged))),
                Err(Error::NoSpace) => {
                    self.on_nospace(Some(&staged))?;
                }
                Err(e) => return Err(Stop::Fatal(format!("fsync {path}: {e:?}"))),
            }
        }
        match self.fs().close(fh) {
            Ok(()) => {
                if self.model != staged {
                    self.model = staged;
                    self.committed();
                }
                Ok(())
            }
            Err(Error::PowerLoss) => Err(Stop::PowerLoss(Some(staged))),
            Err(Error::NoSpace) => {
                // The update could not be committed: the file keeps its committed content.
                self.on_nospace(Some(&staged))?;
                Ok(())
            }
            Err(e) => Err(Stop::Fatal(format!("close {path}: {e:?}"))),
        }
    }

    fn sync(&mut self) -> Step {
        match self.fs().sync() {
            Ok(()) => {
                self.durable();
                Ok(())
            }
            Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
            // Room for written data was counted when it was admitted; only blocks lost to
            // failing programs and erases since can make writing it back run out (and then
            // nothing new is durable: the states allowed after a cut stay as they were).
            Err(Error::NoSpace) if !self.fs().flash().grown_bad_blocks().is_empty() => {
                self.on_nospace(None)
            }
            Err(e) => Err(Stop::Fatal(format!("sync: {e:?}"))),
        }
    }

    fn remount(&mut self) -> Step {
        let fs = self.fs.take().expect("mounted");
        let dev = match fs.try_unmount() {
            Ok(d) => d,
            Err((Error::PowerLoss, d)) => {
                self.dev = Some(d);
                return Err(Stop::PowerLoss(None));
            }
            Err((e, _)) => return Err(Stop::Fatal(format!("unmount: {e:?}"))),
        };
        match Fs::mount_with_clock(dev, self.cfg, Box::new(dffs::NoClock)) {
            Ok(fs) => self.fs = Some(fs),
            Err((Error::PowerLoss, d)) => {
                self.dev = Some(d);
                return Err(Stop::PowerLoss(None));
            }
            Err((e, _)) => return Err(Stop::Fatal(format!("mount after clean unmount: {e:?}"))),
        }
        self.durable();
        Ok(())
    }

    fn unlink_any(&mut self) -> Step {
        let all: Vec<String> = self.model.nodes.keys().cloned().collect();
        let Some(path) = self.rng.pick(&all).cloned() else {
            return Ok(());
        };
        let is_dir = self.model.nodes[&path] == Node::Dir;
        let mut after = self.model.clone();
        let want = if is_dir {
            after.rmdir(&path)
        } else {
            after.unlink(&path)
        };
        let (pd, n) = split(&path);
        let pino = self.ino(pd)?;
        let got = if is_dir {
            self.fs().rmdir(pino, n.as_bytes())
        } else {
            self.fs().unlink(pino, n.as_bytes())
        };
        if self.check(&format!("remove {path}"), got, want, after)? {
            self.committed();
        }
        Ok(())
    }

    fn rename_any(&mut self) -> Step {
        let all: Vec<String> = self.model.nodes.keys().cloned().collect();
        let Some(src) = self.rng.pick(&all).cloned() else {
            return Ok(());
        };
        let dd = self
            .rng
            .pick(&self.model.dirs())
            .cloned()
            .unwrap_or_else(|| "/".into());
        let dst = join(&dd, &self.name());
        let mut after = self.model.clone();
        let want = after.rename(&src, &dst);
        let (sd, sn) = split(&src);
        let (dd, dn) = split(&dst);
        let sp = self.ino(sd)?;
        let dp = self.ino(dd)?;
        let got = self.fs().rename(sp, sn.as_bytes(), dp, dn.as_bytes());
        if self.check(&format!("rename {src} -> {dst}"), got, want, after)? && src != dst {
            self.committed();
        }
        Ok(())
    }

    fn link_any(&mut self) -> Step {
        let Some(src) = self.rng.pick(&self.model.files()).cloned() else {
            return self.create(false);
        };
        let dd = self
            .rng
            .pick(&self.model.dirs())
            .cloned()
            .unwrap_or_else(|| "/".into());
        let dst = join(&dd, &self.name());
        let mut after = self.model.clone();
        let want = after.link(&src, &dst);
        let ino = self.ino(&src)?;
        let (dd, dn) = split(&dst);
        let dp = self.ino(dd)?;
        let got = self.fs().link(ino, dp, dn.as_bytes()).map(|_| ());
        // The names a file can hold depend on their lengths: the model does not predict it.
        if got == Err(Error::TooManyLinks) && want.is_ok() {
            return Ok(());
        }
        if self.check(&format!("link {src} {dst}"), got, want, after)? {
            self.committed();
        }
        Ok(())
    }

    fn truncate_any(&mut self) -> Step {
        let Some(path) = self.rng.pick(&self.model.files()).cloned() else {
            return Ok(());
        };
        let size = self.rng.below_mod(self.max_file);
        let ino = self.ino(&path)?;
        let mut after = self.model.clone();
        let want = after.truncate(&path, size);
        let got = self
            .fs()
            .setattr(
                ino,
                SetAttr {
                    size: Some(size),
                    ..Default::default()
                },
            )
            .map(|_| ());
        if self.check(&format!("truncate {path} {size}"), got, want, after)? {
            self.committed();
        }
        Ok(())
    }

    fn random_write(&mut self) -> Step {
        let Some(path) = self.rng.pick(&self.model.files()).cloned() else {
            return self.create(false);
        };
        let cur = match &self.model.nodes[&path] {
            Node::File(c) => c.len() as u64,
            _ => 0,
        };
        let off = match self.rng.below_mod(3) {
            0 => cur,
            1 => self.rng.below_mod(cur + 1),
            _ => self.rng.below_mod(self.max_file),
        };
        let len = match self.rng.below_mod(3) {
            0 => 1 + self.rng.below_mod(200),
            1 => 1 + self.rng.below_mod(5000),
            _ => 1 + self.rng.below_mod(self.max_file / 2),
        } as usize;
        let data = if self.compressible {
            mixed_bytes(self.rng.next_u64(), len)
        } else {
            bytes(self.rng.next_u64(), len)
        };
        let chunks = 1 + self.rng.below_mod(3) as usize;
        let osync = self.rng.below_mod(6) == 0;
        let fsync = self.rng.below_mod(3) == 0;
        self.write(&path, off, &data, chunks, osync, fsync)
    }

    /// A transaction of a few operations; committed (or, sometimes, aborted).
    fn transaction(&mut self) -> Step {
        let pre = self.model.clone();
        let r = self.transaction_in(&pre);
        self.txn_pre = None;
        r
    }

    fn transaction_in(&mut self, pre: &Model) -> Step {
        let pre = pre.clone();
        match self.fs().begin_transaction() {
            Ok(()) => {
                self.durable();
                self.txn_pre = Some(pre.clone());
            }
            Err(Error::PowerLoss) => return Err(Stop::PowerLoss(None)),
            Err(Error::NoSpace) => {
                self.on_nospace(None)?;
                return Ok(());
            }
            Err(e) => return Err(Stop::Fatal(format!("begin: {e:?}"))),
        }
        let n = 2 + self.rng.below_mod(4);
        let saved_cands = self.cands.clone();
        for _ in 0..n {
            // Inside the transaction nothing is a commit point of its own.
            let r = match self.rng.below_mod(5) {
                0 => self.create(false),
                1 => self.create(true),
                2 => self.rename_any(),
                3 => self.unlink_any(),
                _ => self.random_write(),
            };
            self.cands = saved_cands.clone();
            match r {
                Ok(()) => {}
                Err(Stop::PowerLoss(_)) => {
                    self.model = pre;
                    return Err(Stop::PowerLoss(None));
                }
                Err(f) => return Err(f),
            }
        }
        if self.rng.below_mod(5) == 0 {
            match self.fs().abort_transaction() {
                Ok(()) => {
                    self.model = pre;
                    self.durable();
                    // The file system must be back exactly where it was.
                    let fs = self.fs();
                    match read_tree(fs) {
                        Ok(t) if t == self.model => Ok(()),
                        Ok(t) => Err(Stop::Fatal(format!(
                            "after abort: {}",
                            model::diff(&t, &self.model)
                        ))),
                        Err(e) if e == model::POWER_LOSS => Err(Stop::PowerLoss(None)),
                        Err(e) => Err(Stop::Fatal(format!("after abort: {e}"))),
                    }
                }
                Err(Error::PowerLoss) => {
                    self.model = pre;
                    Err(Stop::PowerLoss(None))
                }
                Err(e) => Err(Stop::Fatal(format!("abort: {e:?}"))),
            }
        } else {
            let after = self.model.clone();
            match self.fs().commit_transaction() {
                Ok(()) => {
                    self.committed();
                    self.durable();
                    Ok(())
                }
                Err(Error::PowerLoss) => {
                    self.model = pre;
                    Err(Stop::PowerLoss(Some(after)))
                }
                Err(Error::NoSpace) => Err(Stop::Fatal("commit_transaction: ENOSPC".into())),
                Err(e) => Err(Stop::Fatal(format!("commit_transaction: {e:?}"))),
            }
        }
    }

    /// Seed 002: one log entry (larger than the data cache, in chunks, synced); archive when
    /// the log is full.
    fn log_entry(&mut self) -> Step {
        if !self.model.nodes.contains_key("/log") {
            let mut after = self.model.clone();
            let want = after.create("/log", Node::Dir);
            let got = self
                .fs()
                .mkdir(dffs::ROOT_INO, b"log", 0o755, 0, 0)
                .map(|_| ());
            if !self.check("mkdir /log", got, want, after)? {
                // Refused (ENOSPC on a full device): there is no /log to create the log in.
                // (Going on said "resolve /log: NotFound" in a chain of cuts on MLC.)
                return Ok(());
            }
            self.committed();
        }
        if !matches!(self.model.nodes.get("/log"), Some(Node::Dir)) {
            return Ok(());
        }
        if !self.model.nodes.contains_key("/log/current") {
            // A new /log, or one a cut left without its current log (between the mkdir and
            // the create: every later entry found no log to append to, and a chain of cuts
            // took the idle workload for a wedged file system).
            let mut after = self.model.clone();
            let want = after.create("/log/current", Node::File(Vec::new()));
            let lino = self.ino("/log")?;
            let got = self.fs().create(lino, b"current", 0o644, 0, 0).map(|_| ());
            if self.check("create /log/current", got, want, after)? {
                self.committed();
            }
            return Ok(());
        }
        let cur = match self.model.nodes.get("/log/current") {
            Some(Node::File(c)) => c.len() as u64,
            _ => return Ok(()),
        };
        let entry = 3000 + self.rng.below_mod(9000) as usize;
        if cur + entry as u64 > self.max_file {
            // Archive: rename, drop the oldest, new log — all or nothing.
            let pre = self.model.clone();
            match self.fs().begin_transaction() {
                Ok(()) => self.durable(),
                Err(Error::PowerLoss) => return Err(Stop::PowerLoss(None)),
                Err(Error::NoSpace) => {
                    self.on_nospace(None)?;
                    return Ok(());
                }
                Err(e) => return Err(Stop::Fatal(format!("begin: {e:?}"))),
            }
            let n = self.log_n;
            self.log_n += 1;
            let lino = self.ino("/log")?;
            let name = format!("archive.{n}");
            let mut steps: Vec<Result<(), Error>> = Vec::new();
            steps.push(self.fs().rename(lino, b"current", lino, name.as_bytes()));
            // The archives as the tree has them now (the mixed workload's renames and
            // unlinks may have taken one away since it was written).
            let archives = archives_in(&self.model);
            let oldest = if archives.len() >= 2 {
                Some(archives[0])
            } else {
                None
            };
            if let Some(o) = oldest {
                steps.push(self.fs().unlink(lino, format!("archive.{o}").as_bytes()));
            }
            steps.push(self.fs().create(lino, b"current", 0o644, 0, 0).map(|_| ()));
            if steps.contains(&Err(Error::PowerLoss)) {
                self.model = pre;
                return Err(Stop::PowerLoss(None));
            }
            if steps.contains(&Err(Error::NoSpace)) {
                // A full device: the transaction is abandoned (the file system returns to
                // where it began), and the ENOSPC must not come too early.
                self.model = pre;
                return match self.fs().abort_transaction() {
                    Ok(()) => {
                        self.durable();
                        self.on_nospace(None)
                    }
                    Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
                    Err(e) => Err(Stop::Fatal(format!("abort archive: {e:?}"))),
                };
            }
            if let Some(e) = steps.iter().find_map(|r| r.err()) {
                return Err(Stop::Fatal(format!("archive step: {e:?}")));
            }
            let mut after = pre.clone();
            let _ = after.rename("/log/current", &format!("/log/{name}"));
            if let Some(o) = oldest {
                let _ = after.unlink(&format!("/log/archive.{o}"));
            }
            let _ = after.create("/log/current", Node::File(Vec::new()));
            self.model = after.clone();
            match self.fs().commit_transaction() {
                Ok(()) => {
                    self.committed();
                    self.durable();
                    return Ok(());
                }
                Err(Error::PowerLoss) => {
                    self.model = pre;
                    return Err(Stop::PowerLoss(Some(after)));
                }
                Err(e) => return Err(Stop::Fatal(format!("commit archive: {e:?}"))),
            }
        }
        let data = bytes(self.rng.next_u64(), entry);
        let chunks = 3 + self.rng.below_mod(5) as usize;
        self.write("/log/current", cur, &data, chunks, false, true)
    }

    fn step(&mut self, w: Workload) -> Step {
        let r = self.rng.below_mod(100);
        match w {
            Workload::Mixed => match r {
                0..=9 => self.create(false),
                10..=14 => self.create(true),
                15..=44 => self.random_write(),
                45..=50 => self.truncate_any(),
                51..=60 => self.unlink_any(),
                61..=70 => self.rename_any(),
                71..=78 => self.transaction(),
                79..=84 => self.sync(),
                85..=87 => match self.fs().checkpoint() {
                    Ok(()) => Ok(()),
                    Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
                    // A full device may refuse a checkpoint it has no room for (not too
                    // early: the synced state stays in the journal).
                    Err(Error::NoSpace) => self.on_nospace(None),
                    Err(e) => Err(Stop::Fatal(format!("checkpoint: {e:?}"))),
                },
                88..=90 => match self.fs().gc_step(32) {
                    Ok(_) => Ok(()),
                    Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
                    // The checkpoint a recovery owes before any write may find no room on a
                    // full device (not too early).
                    Err(Error::NoSpace) => self.on_nospace(None),
                    Err(e) => Err(Stop::Fatal(format!("gc_step: {e:?}"))),
                },
                91..=93 => self.remount(),
                _ => self.log_entry(),
            },
            Workload::Churn => match r {
                0..=34 => self.create(false),
                35..=44 => self.create(true),
                45..=64 => self.rename_any(),
                65..=84 => self.unlink_any(),
                85..=89 => self.random_write(),
                90..=95 => self.sync(),
                _ => self.transaction(),
            },
            Workload::Log => match r {
                0..=89 => self.log_entry(),
                90..=94 => self.sync(),
                _ => self.remount(),
            },
            // Until the device has refused a write, deletions are rare, so that the workload
            // really reaches a full device; after that it churns at the edge.
            Workload::Full
                if self.nospace == 0 && (70..93).contains(&r) && self.rng.below_mod(4) > 0 =>
            {
                self.sync()
            }
            Workload::Full => match r {
                0..=4 => self.create(false),
                5..=69 => {
                    let Some(path) = self.rng.pick(&self.model.files()).cloned() else {
                        return self.create(false);
                    };
                    let cur = match &self.model.nodes[&path] {
                        Node::File(c) => c.len() as u64,
                        _ => 0,
                    };
                    let len = 1 + self.rng.below_mod(self.max_file / 2) as usize;
                    let data = bytes(self.rng.next_u64(), len);
                    let fsync = self.rng.below_mod(2) == 0;
                    self.write(&path, cur, &data, 2, false, fsync)
                }
                70..=84 => self.unlink_any(),
                85..=92 => self.truncate_any(),
                _ => self.sync(),
            },
            Workload::Links => match r {
                0..=14 => self.create(false),
                15..=19 => self.create(true),
                20..=39 => self.link_any(),
                40..=54 => self.random_write(),
                55..=59 => self.truncate_any(),
                60..=71 => self.unlink_any(),
                72..=83 => self.rename_any(),
                84..=89 => self.transaction(),
                90..=95 => self.sync(),
                _ => self.remount(),
            },
            Workload::Large => match r {
                0..=4 => self.create(false),
                5..=74 => self.random_write(),
                75..=89 => self.truncate_any(),
                90..=95 => self.sync(),
                _ => self.transaction(),
            },
        }
    }
}

/// How one execution of a workload ended.
enum Outcome {
    /// Completed without a cut.
    Done(Done),
    /// The cut happened; the device and the states recovery may produce.
    Cut(Box<SimFlash>, Vec<Model>),
}

/// What an uncut execution counted.
struct Done {
    /// Program and erase operations issued.
    ops: u64,
    commits: u64,
    nospace: u64,
    fill_min: Option<f64>,
    faults: FaultCounts,
}

/// The simulator's options for a run: its seed (varied per cut, so each cut sees other
/// partial programs) and the fault rates.
fn sim_options(opts: &Options, salt: u64) -> SimOptions {
    SimOptions {
        seed: opts.seed ^ salt.wrapping_mul(0x9E37_79B9),
        bitflip_rate: opts.faults.bitflip_rate,
        program_fail_rate: opts.faults.program_fail_rate,
        erase_fail_rate: opts.faults.erase_fail_rate,
        ..SimOptions::default()
    }
}

/// Gives one programmed page without stuck flips stuck bit flips at the ECC's limit (NAND with
/// ECC only); true if a page got them. (A second dose on one page would make it uncorrectable
/// for good: data no file system without redundancy can keep.)
fn stick_flips(dev: &mut SimFlash, rng: &mut Rng) -> bool {
    let g = dev.preset().geometry;
    if g.kind != dffs::FlashKind::Nand || g.ecc_strength == 0 {
        return false;
    }
    for _ in 0..64 {
        let page = rng.below(g.total_pages() as u64) as u32;
        if dev.program_count(page).unwrap_or(0) > 0 && dev.injected_bitflips(page) == 0 {
            return dev.inject_bitflips(page, g.ecc_strength).is_ok();
        }
    }
    false
}

fn execute(opts: &Options, cut: Option<u64>) -> Result<Outcome, String> {
    let dev = SimFlash::with_options(opts.preset, sim_options(opts, cut.unwrap_or(0)))
        .map_err(|e| format!("device: {e:?}"))?;
    let fopts = FormatOptions {
        compression: opts.compression,
        ..FormatOptions::default()
    };
    let dev = Fs::format(dev, &fopts).map_err(|e| format!("format: {e:?}"))?;
    let mut fs = Fs::mount(dev, opts.config).map_err(|e| format!("mount after format: {e:?}"))?;
    let base = fs.flash().program_erase_ops();
    let stats0 = fs.flash().stats();
    if let Some(n) = cut {
        fs.flash_mut().cut_power_after(n);
    }
    let mut ex = Exec::new(fs, Model::default(), rng(opts.seed), opts);
    // Stuck flips come from a generator of their own, so the workload is the same with and
    // without them.
    let mut stuck_rng = rng(opts.seed ^ 0x57CC);
    let mut stuck_pages = 0;
    // Debugging aid: `DFFS_CHECK_EACH=1` runs fsck after every step of a run without a cut.
    let check_each = std::env::var_os("DFFS_CHECK_EACH").is_some();
    for step in 0..opts.steps {
        match ex.step(opts.workload) {
            Ok(()) => {}
            Err(Stop::PowerLoss(after)) => {
                let mut cands = ex.cands;
                if let Some(a) = after {
                    cands.push(a);
                }
                let dev = match ex.fs.take() {
                    Some(fs) => fs.into_flash(),
                    None => ex.dev.take().ok_or("device lost")?,
                };
                return Ok(Outcome::Cut(Box::new(dev), cands));
            }
            Err(Stop::Fatal(m)) => return Err(format!("step {step}: {m}")),
        }
        if let (Some(_), Some(fs)) = (std::env::var_os("DFFS_TORTURE_DEBUG"), ex.fs.as_ref()) {
            let st = fs.flash().stats();
            eprintln!(
                "step {step}: ops {} program failures {} erase failures {} grown bad {:?}",
                fs.flash().program_erase_ops() - base,
                st.program_failures,
                st.erase_failures,
                fs.flash().grown_bad_blocks()
            );
        }
        if let (Ok(b), Some(fs)) = (std::env::var("DFFS_DEBUG_BLOCK"), ex.fs.as_ref()) {
            eprintln!("step {step}: {}", fs.debug_block(b.parse().unwrap_or(0)));
        }
        if let Some(fs) = ex.fs.as_ref() {
            shadow_check(fs, opts.config, &format!("step {step}"));
        }
        if check_each && cut.is_none() {
            if let Some(fs) = ex.fs.as_mut() {
                let rep = fs.fsck().map_err(|e| format!("step {step}: fsck: {e:?}"))?;
                if !rep.is_clean() {
                    return Err(format!("step {step}: fsck: {:?}", rep.errors));
                }
            }
        }
        if let Some(fs) = ex.fs.as_mut() {
            if !fs.flash().is_powered() {
                // The cut happened inside an operation that swallowed nothing: treat as cut.
                let cands = ex.cands;
                let fs = ex.fs.take().expect("mounted");
                return Ok(Outcome::Cut(Box::new(fs.into_flash()), cands));
            }
            let every = opts.faults.stuck_every as usize;
            if every > 0 && step % every == every - 1 && stick_flips(fs.flash_mut(), &mut stuck_rng)
            {
                stuck_pages += 1;
            }
        }
    }
    // No cut: the final state must survive a clean remount. (With faults on, a run with a cut
    // armed may issue fewer operations than the uncut one and end before its cut.)
    let mut fs = ex.fs.take().expect("mounted");
    fs.flash_mut().cancel_power_cut();
    let ops = fs.flash().program_erase_ops() - base;
    if let Ok(b) = std::env::var("DFFS_DEBUG_BLOCK") {
        eprintln!("before unmount: {}", fs.debug_block(b.parse().unwrap_or(0)));
    }
    let dev = fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    let mut fs = Fs::mount(dev, opts.config).map_err(|e| format!("final mount: {e:?}"))?;
    if let Ok(b) = std::env::var("DFFS_DEBUG_BLOCK") {
        eprintln!("after mount: {}", fs.debug_block(b.parse().unwrap_or(0)));
    }
    let rep = fs.fsck().map_err(|e| format!("final fsck: {e:?}"))?;
    if !rep.is_clean() {
        return Err(format!("final fsck: {:?}", rep.errors));
    }
    let t = read_tree(&mut fs)?;
    if t != ex.model {
        return Err(format!(
            "final state differs from the model: {}",
            model::diff(&t, &ex.model)
        ));
    }
    let st = fs.flash().stats().since(&stats0);
    Ok(Outcome::Done(Done {
        ops,
        commits: ex.commits,
        nospace: ex.nospace,
        fill_min: ex.fill_min,
        faults: FaultCounts {
            corrected_reads: st.corrected_reads,
            uncorrectable_reads: st.uncorrectable_reads,
            program_failures: st.program_failures,
            erase_failures: st.erase_failures,
            stuck_pages,
        },
    }))
}

/// What verifying one cut found besides its verdict.
#[derive(Default)]
struct Verified {
    /// A second cut landed after power-up.
    second_cut: bool,
    fill_min: Option<f64>,
}

/// A copy of `fs`'s device as a power cut now would leave it, powered up again with no cut
/// armed and no faults (the real device's fault stream is not disturbed).
fn copy_cut_now(fs: &Fs<SimFlash>) -> SimFlash {
    let mut dev = fs.flash().clone();
    dev.power_off();
    dev.power_up();
    dev.cancel_power_cut();
    let _ = dev.set_bitflip_rate(0.0);
    let _ = dev.set_program_fail_rate(0.0);
    let _ = dev.set_erase_fail_rate(0.0);
    dev
}

/// Debugging aid (`DFFS_SHADOW_CHECK=1`): what a power cut now would leave, found on a clone of
/// the device (mount + fsck) so the real device's fault stream is not disturbed.
fn shadow_check(fs: &Fs<SimFlash>, config: Config, at: &str) {
    if std::env::var_os("DFFS_SHADOW_CHECK").is_none() {
        return;
    }
    if let Ok(b) = std::env::var("DFFS_DEBUG_BLOCK") {
        eprintln!(
            "shadow {at}: live session: {}",
            fs.debug_block(b.parse().unwrap_or(0))
        );
    }
    let dev = copy_cut_now(fs);
    match Fs::mount(dev, config) {
        Ok(mut f) => match f.fsck() {
            Ok(rep) if rep.is_clean() => eprintln!("shadow {at}: clean"),
            Ok(rep) => eprintln!("shadow {at}: fsck {:?}", rep.errors.first()),
            Err(e) => eprintln!("shadow {at}: fsck failed {e:?}"),
        },
        Err(e) => eprintln!("shadow {at}: mount failed {e:?}"),
    }
}

/// Whether the space accounting a recovery left is exact once a checkpoint is written: on a
/// clone of the device (power cut now, mount, checkpoint), fsck must find no block credited
/// with more than it holds. Right after a recovery fsck may find some, the metadata the next
/// checkpoint rewrites; a block still over-credited after it is space GC never reclaims.
fn check_space_after_checkpoint(fs: &Fs<SimFlash>, config: Config) -> Result<(), String> {
    let dev = copy_cut_now(fs);
    let mut f = Fs::mount(dev, config).map_err(|e| format!("space check: mount: {e:?}"))?;
    match f.checkpoint() {
        Ok(()) => {}
        // A device too full to write a checkpoint on: nothing to check (a wedge the chain
        // finds by itself when the workload goes on).
        Err(Error::NoSpace) => return Ok(()),
        Err(e) => return Err(format!("space check: checkpoint: {e:?}")),
    }
    let r = f.fsck().map_err(|e| format!("space check: fsck: {e:?}"))?;
    if r.over_credited > 0 {
        let first = r.warnings.iter().find(|w| w.contains("reclaimable"));
        return Err(format!(
            "after recovery and a checkpoint, {} blocks are credited with more than they hold \
             (first: {})",
            r.over_credited,
            first.map_or("?", |w| w.as_str())
        ));
    }
    Ok(())
}

/// What powering up after a cut gave (see [`recover`]).
enum Recovery {
    /// Mounted, the tree one of the allowed states, fsck clean.
    Done(Box<Fs<SimFlash>>, Model),
    /// Power was lost again (an armed cut) in the mount, the tree check or fsck.
    Cut(Box<SimFlash>),
}

/// Mounts `dev` after a cut (recovery), checks that the tree is one of `cands` and that fsck
/// finds it clean. `phase` ends every error message (e.g. " (after the second cut)").
fn recover(
    dev: SimFlash,
    opts: &Options,
    cands: &[Model],
    phase: &str,
) -> Result<Recovery, String> {
    let mut fs = match Fs::mount_with_clock(dev, opts.config, Box::new(dffs::NoClock)) {
        Ok(fs) => fs,
        Err((Error::PowerLoss, d)) => return Ok(Recovery::Cut(Box::new(d))),
        Err((e, _)) => return Err(format!("mount after the cut failed{phase}: {e:?}")),
    };
    shadow_check(&fs, opts.config, &format!("mounted{phase}"));
    let t = match check_recovered(&mut fs, cands) {
        Ok(t) => t,
        Err(e) if e == model::POWER_LOSS => return Ok(Recovery::Cut(Box::new(fs.into_flash()))),
        Err(e) => return Err(format!("{e}{phase}")),
    };
    match fs.fsck() {
        Ok(rep) if rep.is_clean() => Ok(Recovery::Done(Box::new(fs), t)),
        Ok(rep) => Err(format!("fsck after the cut{phase}: {:?}", rep.errors)),
        Err(Error::PowerLoss) => Ok(Recovery::Cut(Box::new(fs.into_flash()))),
        Err(e) => Err(format!("fsck failed{phase}: {e:?}")),
    }
}

/// Why the tree read after a recovery is not acceptable, if it is not.
fn check_recovered(fs: &mut Fs<SimFlash>, cands: &[Model]) -> Result<Model, String> {
    let t = read_tree(fs)?;
    if cands.contains(&t) {
        return Ok(t);
    }
    let last = cands.last().cloned().unwrap_or_default();
    let first = cands.first().cloned().unwrap_or_default();
    Err(format!(
        "recovered tree is none of the {} states the journal allows (vs newest: {}; vs durable: {})",
        cands.len(),
        model::diff(&t, &last),
        model::diff(&t, &first)
    ))
}

/// Powers up after the cut `cut`, mounts (recovery), compares the tree with the states the
/// journal allows, runs fsck, then runs the workload on in the same session for
/// [`STEPS_AFTER_RECOVERY`] operations and checks the tree against the model after a clean
/// remount. A second cut is armed at one of the first program/erase operations after power-up,
/// so it lands inside the recovery, the first checkpoint after it or the work that follows;
/// the same checks then run on the states allowed at that second cut.
fn verify(opts: &Options, dev: SimFlash, cands: Vec<Model>, cut: u64) -> Result<Verified, String> {
    let mut out = Verified::default();
    let mut dev = dev;
    let mut cands = cands;
    // Debugging aid: `DFFS_NO_SECOND_CUT=1` verifies without the second cut.
    let mut second = if std::env::var_os("DFFS_NO_SECOND_CUT").is_some() {
        0
    } else {
        1 + dffs_testkit::mix(opts.seed ^ cut.rotate_left(17)) % 16
    };
    loop {
        if std::env::var_os("DFFS_TORTURE_DEBUG").is_some() {
            eprintln!(
                "verify: second cut {second}, grown bad {:?}, stats {:?}",
                dev.grown_bad_blocks(),
                dev.stats()
            );
        }
        dev.power_up();
        dev.cut_power_after(second);
        let phase = if second != 0 {
            ""
        } else {
            " (after the second cut)"
        };
        // A second cut (if armed) can land anywhere from here to the end of the continuation;
        // every PowerLoss below goes back to the top with the states allowed at that point.
        let lost = |out: &mut Verified, second: &mut u64| -> Result<(), String> {
            if *second == 0 {
                return Err("power lost with no cut armed".into());
            }
            out.second_cut = true;
            *second = 0;
            Ok(())
        };
        let (fs, t) = match recover(dev, opts, &cands, phase)? {
            Recovery::Done(fs, t) => (*fs, t),
            Recovery::Cut(d) => {
                lost(&mut out, &mut second)?;
                dev = *d;
                continue;
            }
        };
        // The session that recovered goes on with the workload.
        let mut ex = Exec::new(fs, t, rng(opts.seed ^ cut ^ 0xAF7E), opts);
        let mut cut_again = None;
        for k in 0..STEPS_AFTER_RECOVERY {
            match ex.step(opts.workload) {
                Ok(()) if std::env::var_os("DFFS_CHECK_EACH").is_some() => {
                    if let Some(fs) = ex.fs.as_mut() {
                        if let Ok(rep) = fs.fsck() {
                            eprintln!("after recovery, step {k}: fsck {:?}", rep.errors.first());
                        }
                    }
                }
                Ok(()) => {}
                Err(Stop::PowerLoss(after)) => {
                    let mut c = std::mem::take(&mut ex.cands);
                    c.extend(after);
                    cut_again = Some(c);
                    break;
                }
                Err(Stop::Fatal(m)) => return Err(format!("after recovery{phase}: {m}")),
            }
            if ex.fs.as_ref().is_some_and(|fs| !fs.flash().is_powered()) {
                cut_again = Some(std::mem::take(&mut ex.cands));
                break;
            }
            if let Some(fs) = ex.fs.as_ref() {
                shadow_check(fs, opts.config, &format!("after recovery{phase}, step {k}"));
            }
        }
        if let Some(m) = ex.fill_min {
            out.fill_min = Some(out.fill_min.map_or(m, |f: f64| f.min(m)));
        }
        if let Some(c) = cut_again {
            lost(&mut out, &mut second)?;
            cands = c;
            dev = match ex.fs.take() {
                Some(fs) => fs.into_flash(),
                None => ex.dev.take().ok_or("device lost")?,
            };
            continue;
        }
        // Clean unmount and mount: the tree is exactly the model.
        let mut fs = ex.fs.take().ok_or("file system lost")?;
        fs.flash_mut().cancel_power_cut();
        let dev = match fs.try_unmount() {
            Ok(d) => d,
            // Blocks lost to failing programs and erases can leave too few for the unmount's
            // checkpoint: then it is a power cut, and what was synced must be there.
            Err((Error::NoSpace, mut d)) if !d.grown_bad_blocks().is_empty() => {
                d.power_off();
                d.power_up();
                let mut fs = Fs::mount(d, opts.config)
                    .map_err(|e| format!("mount after a full unmount{phase}: {e:?}"))?;
                check_recovered(&mut fs, &ex.cands)
                    .map_err(|e| format!("after an unmount that found no room{phase}: {e}"))?;
                return Ok(out);
            }
            Err((e, _)) => return Err(format!("unmount after recovery{phase}: {e:?}")),
        };
        let mut fs = Fs::mount(dev, opts.config).map_err(|e| format!("remount{phase}: {e:?}"))?;
        let rep = fs
            .fsck()
            .map_err(|e| format!("fsck after remount{phase}: {e:?}"))?;
        if !rep.is_clean() {
            return Err(format!(
                "fsck after the post-cut remount{phase}: {:?}",
                rep.errors
            ));
        }
        let t = read_tree(&mut fs)?;
        if t != ex.model {
            return Err(format!(
                "after recovery and {STEPS_AFTER_RECOVERY} more steps{phase}, the tree differs from the model: {}",
                model::diff(&t, &ex.model)
            ));
        }
        return Ok(out);
    }
}

fn min_fill(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Runs the workload once uncut to count its program and erase operations, then once per cut
/// point, verifying after each. `progress(done, total)` is called after each cut.
pub fn run(opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Report {
    let mut rep = Report::default();
    let name = opts.workload.name();
    let total = match execute(opts, None) {
        Ok(Outcome::Done(d)) => {
            rep.commits = d.commits;
            rep.nospace = d.nospace;
            rep.nospace_min_fill = d.fill_min;
            rep.faults = d.faults;
            rep.faults_all_runs = d.faults;
            d.ops
        }
        Ok(Outcome::Cut(..)) => 0,
        Err(m) => {
            rep.failures.push(Failure {
                seed: opts.seed,
                cut: 0,
                workload: name,
                message: format!("without any cut: {m}"),
            });
            return rep;
        }
    };
    rep.workload_ops = total;
    let points: Vec<u64> = if opts.cuts == 0 || opts.cuts >= total {
        (1..=total).collect()
    } else {
        (0..opts.cuts)
            .map(|i| 1 + i * (total - 1) / (opts.cuts - 1).max(1))
            .collect()
    };
    let n = points.len() as u64;
    for (i, &cut) in points.iter().enumerate() {
        let r = match execute(opts, Some(cut)) {
            Ok(Outcome::Cut(dev, cands)) => {
                let st = dev.stats();
                if st.paired_page_damage > 0 {
                    rep.paired_page_damage += 1;
                }
                let f = &mut rep.faults_all_runs;
                f.corrected_reads += st.corrected_reads;
                f.uncorrectable_reads += st.uncorrectable_reads;
                f.program_failures += st.program_failures;
                f.erase_failures += st.erase_failures;
                verify(opts, *dev, cands, cut).map(|v| {
                    rep.second_cuts += v.second_cut as u64;
                    rep.nospace_min_fill = min_fill(rep.nospace_min_fill, v.fill_min);
                })
            }
            Ok(Outcome::Done(d)) => {
                rep.nospace_min_fill = min_fill(rep.nospace_min_fill, d.fill_min);
                Ok(())
            }
            Err(m) => Err(m),
        };
        rep.cuts += 1;
        if let Err(m) = r {
            rep.failures.push(Failure {
                seed: opts.seed,
                cut,
                workload: name,
                message: m,
            });
        }
        progress(i as u64 + 1, n);
    }
    rep
}

/// Runs the workload with the power cut at operation `cut` and verifies (for debugging one
/// failure).
pub fn run_one(opts: &Options, cut: u64) -> Result<(), String> {
    match execute(opts, Some(cut))? {
        Outcome::Cut(dev, cands) => verify(opts, *dev, cands, cut).map(|_| ()),
        Outcome::Done(..) => Ok(()),
    }
}

/// What a chained-cut run found (see [`run_chain`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ChainReport {
    /// Power cuts made on the device, in the workload and during recoveries.
    pub cuts: u64,
    /// Of those, cuts that landed during a mount, its recovery, the check after it, or the
    /// first operations after it (which take the recovery checkpoint).
    pub recovery_cuts: u64,
    /// Recoveries verified (tree one of the allowed states, fsck clean).
    pub recoveries: u64,
    /// Operations that committed, and that said ENOSPC (bounded by the workload's own checks).
    pub commits: u64,
    /// Operations that said ENOSPC.
    pub nospace: u64,
    /// Blocks whose recorded erase count was lower after a recovery than before its cut (the
    /// counts of blocks erased after the last checkpoint that replay finds nothing in are lost
    /// in a cut: DESIGN.md §15 item 6). Counted, not a failure, until every erase is recorded
    /// on flash before it is made.
    pub erase_counts_lost: u64,
    /// At the end of the chain, the erases the device made that the recorded erase counts
    /// miss: over every block, how far its recorded count fell behind the simulator's count
    /// of its erases (cut erases included) since the first mount. The truth the lowered
    /// counts above only sample: an erase never counted at all lowers nothing.
    pub erases_uncounted: u64,
    /// The same, the other way: how far recorded counts ran ahead of the erases made.
    pub erases_overcounted: u64,
    /// The first failure; the chain stops there.
    pub failure: Option<String>,
}

/// Largest number of program/erase operations before an armed cut.
const CHAIN_WINDOW: u64 = 3000;

/// Runs ONE device through `cuts` power cuts in a row: the workload runs until a cut armed at a
/// random point; the device powers up and mounts (sometimes with another cut armed within the
/// first operations, so that it lands in the recovery, the check or the first checkpoint after
/// it); the recovered tree must be one of the states the journal allows and fsck clean; the
/// workload goes on from the recovered tree in the new session. Nothing is ever reformatted, so
/// the damage of one recovery is inherited by all the following ones. At the end a clean
/// unmount and mount must give exactly the model. `progress(done, total)` after each cut.
pub fn run_chain(opts: &Options, cuts: u64, progress: &mut dyn FnMut(u64, u64)) -> ChainReport {
    let mut rep = ChainReport::default();
    if let Err(m) = chain(opts, cuts, &mut rep, progress) {
        rep.failure = Some(m);
    }
    rep
}

fn chain(
    opts: &Options,
    cuts: u64,
    rep: &mut ChainReport,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), String> {
    let dev = SimFlash::with_options(opts.preset, sim_options(opts, 0))
        .map_err(|e| format!("device: {e:?}"))?;
    let fopts = FormatOptions {
        compression: opts.compression,
        ..FormatOptions::default()
    };
    let dev = Fs::format(dev, &fopts).map_err(|e| format!("format: {e:?}"))?;
    let fs = Fs::mount(dev, opts.config).map_err(|e| format!("mount after format: {e:?}"))?;
    let mut crng = rng(opts.seed ^ 0xC4A1_2C75);
    let mut ex = Exec::new(fs, Model::default(), rng(opts.seed), opts);
    let mut counts: Vec<u32> = ex
        .fs()
        .erase_counts()
        .map_err(|e| format!("erase counts: {e:?}"))?;
    // Recorded minus made, per block, after the first mount (what format counts).
    let drift = |rec: &[u32], made: &[u32]| -> Vec<i64> {
        rec.iter()
            .zip(made)
            .map(|(&r, &m)| i64::from(r) - i64::from(m))
            .collect()
    };
    let drift0 = drift(&counts, ex.fs().flash().erase_counts());
    let mut prev_drift = drift0.clone();
    let mut round = 0u64;
    while rep.cuts < cuts {
        round += 1;
        // Arm the next cut: mostly anywhere in the next few thousand operations, sometimes
        // within the first few (the recovery checkpoint the first write after a mount takes).
        let near = crng.below(4) == 0;
        let n = 1 + crng.below(if near { 16 } else { CHAIN_WINDOW });
        match ex.fs.as_mut() {
            Some(fs) => fs.flash_mut().cut_power_after(n),
            None => return Err(format!("cut {}: no file system mounted", rep.cuts)),
        }
        let mut cands: Option<Vec<Model>> = None;
        let writes_before = ex.fs.as_ref().map(|fs| {
            let st = fs.flash().stats();
            st.programs + st.erases
        });
        for _ in 0..20 * opts.steps.max(1) {
            match ex.step(opts.workload) {
                Ok(()) => {}
                Err(Stop::PowerLoss(after)) => {
                    let mut c = std::mem::take(&mut ex.cands);
                    c.extend(after);
                    cands = Some(c);
                    break;
                }
                Err(Stop::Fatal(m)) => return Err(format!("cut {}: {m}", rep.cuts)),
            }
            match ex.fs.as_mut() {
                Some(fs) if !fs.flash().is_powered() => {
                    cands = Some(std::mem::take(&mut ex.cands));
                    break;
                }
                Some(fs) => counts = fs.erase_counts().unwrap_or(counts),
                None => {}
            }
        }
        let Some(cands) = cands else {
            // The workload ended before the cut (it can go a long way on ENOSPC): go on,
            // unless not one of its operations reached the flash (every one refused, unlinks
            // included): the file system is wedged, and the chain would never end.
            if let Some(fs) = ex.fs.as_mut() {
                let st = fs.flash().stats();
                if writes_before == Some(st.programs + st.erases) {
                    return Err(format!(
                        "cut {}: wedged: {} operations in a row programmed and erased nothing \
                         ({} ENOSPC so far)",
                        rep.cuts,
                        20 * opts.steps.max(1),
                        ex.nospace
                    ));
                }
                fs.flash_mut().cancel_power_cut();
            }
            continue;
        };
        rep.cuts += 1;
        let mut dev = match ex.fs.take() {
            Some(fs) => fs.into_flash(),
            None => ex.dev.take().ok_or("device lost")?,
        };
        // Recover; a cut may be armed within the first operations after power-up.
        let (mut fs, t) = loop {
            dev.power_up();
            let armed = rep.cuts < cuts && crng.below(3) == 0;
            if armed {
                dev.cut_power_after(1 + crng.below(24));
            }
            let at = format!("cut {} (round {round})", rep.cuts);
            let lost = |rep: &mut ChainReport| {
                rep.cuts += 1;
                rep.recovery_cuts += 1;
            };
            match recover(dev, opts, &cands, "").map_err(|e| format!("{at}: {e}"))? {
                Recovery::Done(fs, t) => break (*fs, t),
                Recovery::Cut(_) if !armed => {
                    return Err(format!("{at}: power lost with no cut armed"))
                }
                Recovery::Cut(d) => {
                    lost(rep);
                    dev = *d;
                }
            }
        };
        rep.recoveries += 1;
        // A mount that could not write its checkpoint again comes up read-only (the tree was
        // checked above): the chain cannot go on.
        if let Some(e) = fs.info().read_only_cause {
            return Err(format!(
                "cut {} (round {round}): mounted read-only: the checkpoint written again at \
                 mount failed with {e:?} (tree and fsck checked)",
                rep.cuts
            ));
        }
        check_space_after_checkpoint(&fs, opts.config)
            .map_err(|e| format!("cut {} (round {round}): {e}", rep.cuts))?;
        let now = fs
            .erase_counts()
            .map_err(|e| format!("erase counts after recovery: {e:?}"))?;
        rep.erase_counts_lost +=
            now.iter().zip(counts.iter()).filter(|(a, b)| a < b).count() as u64;
        // `DFFS_DRIFT_DEBUG=1`: each block whose recorded erase count fell behind the
        // simulator's (or ran ahead of it) in this recovery, with its record (DESIGN §15 item 6
        // says what such runs found).
        if std::env::var_os("DFFS_DRIFT_DEBUG").is_some() {
            let d = drift(&now, fs.flash().erase_counts());
            for (b, (x, y)) in d.iter().zip(&prev_drift).enumerate() {
                if x != y {
                    let what = if x < y { "UNC" } else { "OVER" };
                    let by = (x - y).abs();
                    let rec = fs.debug_block(b as u32);
                    eprintln!("{what} cut {} b {b} by {by} {rec}", rep.cuts);
                }
            }
            prev_drift = d;
        }
        counts = now;
        rep.commits += ex.commits;
        rep.nospace += ex.nospace;
        ex = Exec::new(fs, t, rng(opts.seed ^ round.rotate_left(23)), opts);
        progress(rep.cuts.min(cuts), cuts);
    }
    // The end: a clean unmount and mount give exactly the model.
    rep.commits += ex.commits;
    rep.nospace += ex.nospace;
    let mut fs = ex.fs.take().ok_or("file system lost")?;
    fs.flash_mut().cancel_power_cut();
    let model = ex.model.clone();
    let dev = match fs.try_unmount() {
        Ok(d) => d,
        Err((e, _)) => return Err(format!("final unmount: {e:?}")),
    };
    let mut fs = Fs::mount(dev, opts.config).map_err(|e| format!("final mount: {e:?}"))?;
    let r = fs.fsck().map_err(|e| format!("final fsck: {e:?}"))?;
    if !r.is_clean() {
        return Err(format!("final fsck: {:?}", r.errors));
    }
    let rec = fs
        .erase_counts()
        .map_err(|e| format!("final erase counts: {e:?}"))?;
    for (d, d0) in drift(&rec, fs.flash().erase_counts()).iter().zip(&drift0) {
        let moved = d - d0;
        rep.erases_uncounted += (-moved).max(0) as u64;
        rep.erases_overcounted += moved.max(0) as u64;
    }
    let t = read_tree(&mut fs)?;
    if t != model {
        return Err(format!(
            "final state differs from the model: {}",
            model::diff(&t, &model)
        ));
    }
    Ok(())
}
