//! The file-system operations the suites run, as one interface both file systems implement,
//! so that every workload is written once and runs identically on DFFS and on littlefs.
//!
//! Owns the interface ([`Driver`], [`Session`], [`FileOps`]) and the error vocabulary
//! ([`FsError`]). It must never hold a workload or a measurement, and never let one file system
//! do less work than the other: an operation means the same thing on both (a `sync` file write
//! is durable when it returns, a clean session ends with the file system's own unmount).

use std::fmt;

use dffs_sim::SharedSim;

use crate::devices::Measure;

/// How a file-system operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsError {
    /// The device is full (`ENOSPC`).
    NoSpace,
    /// The simulated power was cut during the operation.
    PowerLoss,
    /// Data read back differs from what was written (the verifier found it).
    WrongData(String),
    /// A panic inside the file system (caught, reported, never hidden).
    Panic(String),
    /// Anything else the file system returned.
    Other(String),
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::NoSpace => f.write_str("ENOSPC"),
            FsError::PowerLoss => f.write_str("power lost"),
            FsError::WrongData(w) => write!(f, "wrong data: {w}"),
            FsError::Panic(w) => write!(f, "panic: {w}"),
            FsError::Other(w) => f.write_str(w),
        }
    }
}

impl FsError {
    /// The same error, saying which path it concerns (space and power errors stay as they are,
    /// so callers can still tell them apart).
    pub fn at(self, path: &str) -> FsError {
        match self {
            FsError::WrongData(w) if !w.starts_with(path) => {
                FsError::WrongData(format!("{path}: {w}"))
            }
            FsError::Other(w) => FsError::Other(format!("{path}: {w}")),
            e => e,
        }
    }
}

/// Result of a file-system operation.
pub type FsResult<T> = Result<T, FsError>;

/// How a file is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenMode {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Open for writing (reading is always allowed).
    pub write: bool,
    /// Truncate to zero at open.
    pub truncate: bool,
    /// `O_SYNC`: every write is durable when it returns (DFFS: the handle's `sync` flag;
    /// littlefs: `lfs_file_sync` after each write).
    pub sync: bool,
}

impl OpenMode {
    /// Read only.
    pub const READ: OpenMode = OpenMode {
        create: false,
        write: false,
        truncate: false,
        sync: false,
    };
    /// Read and write an existing file.
    pub const RW: OpenMode = OpenMode {
        create: false,
        write: true,
        truncate: false,
        sync: false,
    };
    /// Create (or truncate) and write.
    pub const CREATE: OpenMode = OpenMode {
        create: true,
        write: true,
        truncate: true,
        sync: false,
    };

    /// The same mode with `O_SYNC`.
    pub const fn with_sync(mut self) -> OpenMode {
        self.sync = true;
        self
    }
}

/// An open file.
pub trait FileOps {
    /// Writes all of `data` at `off`.
    fn write_at(&mut self, off: u64, data: &[u8]) -> FsResult<()>;
    /// Reads up to `buf.len()` bytes at `off`; returns how many (short only at the end).
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> FsResult<usize>;
    /// Makes the file's content durable (`fsync`).
    fn sync(&mut self) -> FsResult<()>;
    /// The file's size.
    fn size(&mut self) -> FsResult<u64>;
}

/// A directory entry as `readdir` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Name in its directory.
    pub name: String,
    /// Whether it is a directory.
    pub is_dir: bool,
}

/// A mounted file system. Paths are absolute, `/`-separated.
pub trait Session {
    /// Creates a directory.
    fn mkdir(&mut self, path: &str) -> FsResult<()>;
    /// Opens `path` as `mode` says, runs `f` on it and closes it (the close commits, as
    /// `close` does on each file system).
    fn with_file(
        &mut self,
        path: &str,
        mode: OpenMode,
        f: &mut dyn FnMut(&mut dyn FileOps) -> FsResult<()>,
    ) -> FsResult<()>;
    /// Removes a file.
    fn remove(&mut self, path: &str) -> FsResult<()>;
    /// Removes an empty directory.
    fn rmdir(&mut self, path: &str) -> FsResult<()>;
    /// Lists a directory (without `.` and `..`).
    fn list(&mut self, dir: &str) -> FsResult<Vec<Entry>>;
    /// `stat` of `name` in directory `dir`: (is a directory, size in bytes).
    fn stat(&mut self, dir: &str, name: &str) -> FsResult<(bool, u64)>;
    /// Makes everything durable (`sync`).
    fn sync(&mut self) -> FsResult<()>;
    /// Does now the work the file system deferred so far, so that a measured window that ends
    /// with it pays for everything its operations caused (issue 17: no row may show more than
    /// the raw limit because its cost lands outside the window). DFFS: a checkpoint, which
    /// writes the index nodes, inodes, directory and map pages and block-table pages that
    /// synced operations left to it. littlefs: nothing (a sync or close commits completely).
    fn finish_deferred(&mut self) -> FsResult<()>;
    /// RAM the file system holds right now (its own accounting; open files included).
    fn ram_bytes(&mut self) -> usize;
    /// The device operations done so far by what they were for (DFFS: `Fs::op_counts`'s
    /// `by_cause`); `None` for a file system that does not count them.
    fn op_causes(&mut self) -> Option<dffs::CauseCounts> {
        None
    }
    /// The most RAM held since the last call (sampled after each operation, with the file of
    /// `with_file` still open); the peak starts again from what is held now.
    fn take_peak_ram(&mut self) -> usize;
    /// Bytes in use as `df` reports them (capacity minus what is still available).
    fn used_bytes(&mut self) -> FsResult<u64>;
    /// Bytes the file system can hold in all (as `df` reports its size).
    fn total_bytes(&mut self) -> FsResult<u64>;
}

/// What mounting cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct MountReport {
    /// The mount itself.
    pub mount: Measure,
    /// RAM held right after the mount.
    pub ram_after_mount: usize,
    /// Largest RAM seen during the session (sampled after each operation).
    pub peak_ram: usize,
    /// The unmount (zero for sessions ended by a power cut).
    pub unmount: Measure,
}

/// How a session ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The file system's own unmount.
    Unmount,
    /// Nothing: the device is taken away as a power cut would (the simulator's power stays as
    /// the session left it; the next session powers it up).
    PowerCut,
}

/// A file system on one simulated device.
pub trait Driver {
    /// `dffs` or `littlefs` (the `fs` of report rows).
    fn name(&self) -> &'static str;
    /// The configuration, one line, as the report prints it.
    fn config(&self) -> String;
    /// The device.
    fn sim(&self) -> &SharedSim;
    /// Formats the device (erasing what the file system needs).
    fn format(&mut self) -> FsResult<()>;
    /// Mounts (powering the device up first if a cut left it off), runs `f`, and ends the
    /// session as `end` says (a failing `f` ends it like a power cut).
    fn session(
        &mut self,
        end: End,
        f: &mut dyn FnMut(&mut dyn Session) -> FsResult<()>,
    ) -> FsResult<MountReport>;
}

/// Runs `f`, turning a panic into [`FsError::Panic`] so one file system's crash is a failure
/// row and the suite goes on.
pub fn catch<T>(f: impl FnOnce() -> FsResult<T>) -> FsResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(FsError::Panic(msg))
        }
    }
}

/// Splits `/a/b/c` into (`/a/b`, `c`); the parent of `/c` is `/`.
pub fn split_path(path: &str) -> (&str, &str) {
    let t = path.trim_end_matches('/');
    match t.rfind('/') {
        Some(0) => ("/", &t[1..]),
        Some(i) => (&t[..i], &t[i + 1..]),
        None => ("/", t),
    }
}

/// Joins a directory and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Writes `len` bytes of `content` to a new file in pieces of `io` bytes (a sync after each
/// piece when `mode.sync`), through one open handle.
pub fn write_file(
    s: &mut dyn Session,
    path: &str,
    content: &crate::content::Content,
    len: u64,
    io: usize,
    mode: OpenMode,
) -> FsResult<()> {
    let mut buf = vec![0u8; io];
    s.with_file(path, mode, &mut |f| {
        let mut off = 0u64;
        while off < len {
            let n = (io as u64).min(len - off) as usize;
            content.fill(off, &mut buf[..n]);
            f.write_at(off, &buf[..n])?;
            off += n as u64;
        }
        Ok(())
    })
    .map_err(|e| e.at(path))
}

/// [`write_file`], then `fsync` before the close: the file is durable when this returns.
pub fn write_file_durable(
    s: &mut dyn Session,
    path: &str,
    content: &crate::content::Content,
    len: u64,
    io: usize,
) -> FsResult<()> {
    let mut buf = vec![0u8; io];
    s.with_file(path, OpenMode::CREATE, &mut |f| {
        let mut off = 0u64;
        while off < len {
            let n = (io as u64).min(len - off) as usize;
            content.fill(off, &mut buf[..n]);
            f.write_at(off, &buf[..n])?;
            off += n as u64;
        }
        f.sync()
    })
    .map_err(|e| e.at(path))
}

/// Reads a whole file in pieces of `io` bytes and checks it against `content` and `len`.
pub fn verify_file(
    s: &mut dyn Session,
    path: &str,
    content: &crate::content::Content,
    len: u64,
    io: usize,
) -> FsResult<()> {
    let mut buf = vec![0u8; io];
    s.with_file(path, OpenMode::READ, &mut |f| {
        let size = f.size()?;
        if size != len {
            return Err(FsError::WrongData(format!(
                "{path}: size {size}, expected {len}"
            )));
        }
        let mut off = 0u64;
        while off < len {
            let n = (io as u64).min(len - off) as usize;
            let got = f.read_at(off, &mut buf[..n])?;
            if got != n {
                return Err(FsError::WrongData(format!(
                    "{path}: short read of {got} at {off}"
                )));
            }
            content
                .verify(off, &buf[..n])
                .map_err(|m| FsError::WrongData(format!("{path}: {m}")))?;
            off += n as u64;
        }
        Ok(())
    })
    .map_err(|e| e.at(path))
}

/// Writes the device operations between `before` and `after` by cause into `m`:
/// `reads_<cause>`, `programs_<cause>`, `erases_<cause>`, `program_bytes_<cause>` and
/// `read_bytes_<cause>` for every [`dffs::Cause`] (e.g. `programs_gc_copy`), each key prefixed
/// with `prefix`. Nothing when either is `None`.
pub fn put_causes(
    m: &mut serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    before: Option<dffs::CauseCounts>,
    after: Option<dffs::CauseCounts>,
) {
    let (Some(b), Some(a)) = (before, after) else {
        return;
    };
    for c in dffs::Cause::ALL {
        let i = c as usize;
        for (what, x, y) in [
            ("reads", a.reads[i], b.reads[i]),
            ("programs", a.programs[i], b.programs[i]),
            ("erases", a.erases[i], b.erases[i]),
            ("program_bytes", a.program_bytes[i], b.program_bytes[i]),
            ("read_bytes", a.read_bytes[i], b.read_bytes[i]),
        ] {
            m.insert(
                format!("{prefix}{what}_{}", c.name()),
                x.saturating_sub(y).into(),
            );
        }
    }
}

/// Simulated device time by cause, for a device whose operations cost what the file system
/// counts (NOR: no spare area, so the bytes DFFS counts are the bytes the simulator times):
/// `time_pct_<cause>`, the share of `total_ps` each [`dffs::Cause`] took with `timing`'s
/// costs, and `time_pct_other_device` for what no cause covers (the device's time outside the
/// file system's counts). Nothing when either count is `None` or `total_ps` is 0.
pub fn put_cause_times(
    m: &mut serde_json::Map<String, serde_json::Value>,
    timing: &dffs_sim::Timing,
    before: Option<dffs::CauseCounts>,
    after: Option<dffs::CauseCounts>,
    total_ps: u64,
) {
    let (Some(b), Some(a), true) = (before, after, total_ps > 0) else {
        return;
    };
    let d = |x: &[u64; dffs::Cause::COUNT], y: &[u64; dffs::Cause::COUNT], i: usize| {
        x[i].saturating_sub(y[i]) as u128
    };
    let mut covered = 0u128;
    for c in dffs::Cause::ALL {
        let i = c as usize;
        let ps = d(&a.programs, &b.programs, i) * timing.prog_setup_ps as u128
            + d(&a.program_bytes, &b.program_bytes, i) * timing.prog_byte_ps as u128
            + d(&a.reads, &b.reads, i) * timing.read_setup_ps as u128
            + d(&a.read_bytes, &b.read_bytes, i) * timing.read_byte_ps as u128
            + d(&a.erases, &b.erases, i) * timing.erase_ps as u128;
        covered += ps;
        m.insert(
            format!("time_pct_{}", c.name()),
            crate::devices::round(100.0 * ps as f64 / total_ps as f64).into(),
        );
    }
    let rest = (total_ps as u128).saturating_sub(covered);
    m.insert(
        "time_pct_other_device".into(),
        crate::devices::round(100.0 * rest as f64 / total_ps as f64).into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_and_join() {
        assert_eq!(split_path("/a/b/c"), ("/a/b", "c"));
        assert_eq!(split_path("/c"), ("/", "c"));
        assert_eq!(split_path("/a/"), ("/", "a"));
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/a", "x"), "/a/x");
    }

    #[test]
    fn panics_become_failures() {
        let r: FsResult<()> = catch(|| panic!("boom"));
        assert_eq!(r, Err(FsError::Panic("boom".into())));
    }
}
