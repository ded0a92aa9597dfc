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
}

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
    log_archives: Vec<u64>,
    max_file: u64,
    compressible: bool,
}

impl Exec {
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
                self.nospace += 1;
                Ok(false)
            }
            (Err(g), Err(w)) if g == w => Ok(false),
            (g, w) => Err(Stop::Fatal(format!(
                "{what}: file system says {g:?}, model says {w:?}"
            ))),
        }
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
                Ok(n) => return Err(Stop::Fatal(format!("write {path}: short write {n}"))),
                Err(Error::PowerLoss) => return Err(Stop::PowerLoss(Some(after))),
                Err(Error::NoSpace) => {
                    self.nospace += 1;
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
                    self.nospace += 1;
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
                self.nospace += 1;
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
        match self.fs().begin_transaction() {
            Ok(()) => self.durable(),
            Err(Error::PowerLoss) => return Err(Stop::PowerLoss(None)),
            Err(Error::NoSpace) => {
                self.nospace += 1;
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
            if self.check("mkdir /log", got, want, after)? {
                self.committed();
            }
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
                    self.nospace += 1;
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
            let oldest = if self.log_archives.len() >= 2 {
                Some(self.log_archives.remove(0))
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
                    self.log_archives.push(n);
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
                    Err(e) => Err(Stop::Fatal(format!("checkpoint: {e:?}"))),
                },
                88..=90 => match self.fs().gc_step(32) {
                    Ok(_) => Ok(()),
                    Err(Error::PowerLoss) => Err(Stop::PowerLoss(None)),
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
    /// Completed without a cut; program/erase operations issued.
    Done(u64, u64, u64),
    /// The cut happened; the device and the states recovery may produce.
    Cut(Box<SimFlash>, Vec<Model>),
}

fn execute(opts: &Options, cut: Option<u64>) -> Result<Outcome, String> {
    let sim_opts = SimOptions {
        seed: opts.seed ^ cut.unwrap_or(0).wrapping_mul(0x9E37_79B9),
        ..SimOptions::default()
    };
    let dev =
        SimFlash::with_options(opts.preset, sim_opts).map_err(|e| format!("device: {e:?}"))?;
    let fopts = FormatOptions {
        compression: opts.compression,
        ..FormatOptions::default()
    };
    let dev = Fs::format(dev, &fopts).map_err(|e| format!("format: {e:?}"))?;
    let mut fs = Fs::mount(dev, opts.config).map_err(|e| format!("mount after format: {e:?}"))?;
    let base = fs.flash().program_erase_ops();
    if let Some(n) = cut {
        fs.flash_mut().cut_power_after(n);
    }
    let dev_bytes = opts.preset.geometry.capacity();
    let mut ex = Exec {
        fs: Some(fs),
        dev: None,
        cfg: opts.config,
        model: Model::default(),
        cands: vec![Model::default()],
        rng: rng(opts.seed),
        commits: 0,
        nospace: 0,
        log_n: 0,
        log_archives: Vec::new(),
        max_file: (dev_bytes / 16).clamp(4096, 256 * 1024),
        compressible: opts.compression != dffs::format::compress::NONE,
    };
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
        if let (Ok(b), Some(fs)) = (std::env::var("DFFS_DEBUG_BLOCK"), ex.fs.as_ref()) {
            eprintln!("step {step}: {}", fs.debug_block(b.parse().unwrap_or(0)));
        }
        if check_each && cut.is_none() {
            if let Some(fs) = ex.fs.as_mut() {
                let rep = fs.fsck().map_err(|e| format!("step {step}: fsck: {e:?}"))?;
                if !rep.is_clean() {
                    return Err(format!("step {step}: fsck: {:?}", rep.errors));
                }
            }
        }
        if let Some(fs) = ex.fs.as_ref() {
            if !fs.flash().is_powered() {
                // The cut happened inside an operation that swallowed nothing: treat as cut.
                let cands = ex.cands;
                let fs = ex.fs.take().expect("mounted");
                return Ok(Outcome::Cut(Box::new(fs.into_flash()), cands));
            }
        }
    }
    // No cut: the final state must survive a clean remount.
    let fs = ex.fs.take().expect("mounted");
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
    Ok(Outcome::Done(ops, ex.commits, ex.nospace))
}

/// Powers up after a cut, mounts, checks, and makes sure the file system is usable.
fn verify(opts: &Options, mut dev: SimFlash, cands: &[Model]) -> Result<(), String> {
    dev.power_up();
    let mut fs =
        Fs::mount(dev, opts.config).map_err(|e| format!("mount after the cut failed: {e:?}"))?;
    let rep = fs.fsck().map_err(|e| format!("fsck failed: {e:?}"))?;
    if !rep.is_clean() {
        return Err(format!("fsck after the cut: {:?}", rep.errors));
    }
    let t = read_tree(&mut fs)?;
    if !cands.contains(&t) {
        let last = cands.last().cloned().unwrap_or_default();
        let first = cands.first().cloned().unwrap_or_default();
        return Err(format!(
            "recovered tree is none of the {} states the journal allows (vs newest: {}; vs durable: {})",
            cands.len(),
            model::diff(&t, &last),
            model::diff(&t, &first)
        ));
    }
    // Still usable: write, sync, remount, read back.
    let data = bytes(0xAF7E, 3000);
    let st = match fs.create(dffs::ROOT_INO, b"after-the-cut", 0o644, 0, 0) {
        Ok(s) => s,
        Err(Error::NoSpace) => return Ok(()),
        Err(e) => return Err(format!("create after the cut: {e:?}")),
    };
    let fh = fs
        .open(st.ino, OpenFlags::RW)
        .map_err(|e| format!("open after the cut: {e:?}"))?;
    match fs.write(fh, 0, &data) {
        Ok(_) | Err(Error::NoSpace) => {}
        Err(e) => return Err(format!("write after the cut: {e:?}")),
    }
    fs.close(fh)
        .map_err(|e| format!("close after the cut: {e:?}"))?;
    fs.sync()
        .map_err(|e| format!("sync after the cut: {e:?}"))?;
    let dev = fs
        .unmount()
        .map_err(|e| format!("unmount after the cut: {e:?}"))?;
    let mut fs =
        Fs::mount(dev, opts.config).map_err(|e| format!("remount after the cut: {e:?}"))?;
    let rep = fs
        .fsck()
        .map_err(|e| format!("fsck after remount: {e:?}"))?;
    if !rep.is_clean() {
        return Err(format!("fsck after the post-cut remount: {:?}", rep.errors));
    }
    Ok(())
}

/// Runs the workload once uncut to count its program and erase operations, then once per cut
/// point, verifying after each. `progress(done, total)` is called after each cut.
pub fn run(opts: &Options, progress: &mut dyn FnMut(u64, u64)) -> Report {
    let mut rep = Report::default();
    let name = opts.workload.name();
    let total = match execute(opts, None) {
        Ok(Outcome::Done(ops, commits, nospace)) => {
            rep.commits = commits;
            rep.nospace = nospace;
            ops
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
            Ok(Outcome::Cut(dev, cands)) => verify(opts, *dev, &cands),
            Ok(Outcome::Done(..)) => Ok(()),
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
        Outcome::Cut(dev, cands) => verify(opts, *dev, &cands),
        Outcome::Done(..) => Ok(()),
    }
}
