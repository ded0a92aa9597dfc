//! DFFS on a simulated device: the [`Driver`] and [`Session`] implementations the suites run,
//! through DFFS's public API only (`Fs::format`, `Fs::mount`, namespace and file operations,
//! `Fs::ram_bytes`, `Fs::statfs`).
//!
//! Owns the translation from the suites' path-based operations to DFFS's inode-based API. The
//! session remembers the inode of each directory path it resolved, as the kernel's dentry cache
//! (or a FUSE front end) does for DFFS; that memo is the host's, not the file system's, and is
//! not counted in DFFS's RAM. It must never reach into DFFS internals, and never fix or work
//! around a DFFS bug: errors, wrong data and panics go to the report as they are.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use dffs::format::node::{OobTag, OOB_TAG_LEN, TAG_DATA, TAG_NODES};
use dffs::{
    Config, EccStatus, Error, FileKind, Flash, FlashError, FormatOptions, Fs, Geometry, Ino,
    OpenFlags, ROOT_INO,
};
use dffs_sim::SharedSim;

use crate::devices::Meter;
use crate::fsapi::{
    catch, split_path, Driver, End, Entry, FileOps, FsError, FsResult, MountReport, OpenMode,
    Session,
};

/// The device handle DFFS mounts (the simulator itself, or a wrapper that watches it).
type FlashFactory = Box<dyn Fn() -> Box<dyn Flash>>;

/// DFFS on a simulated device.
pub struct DffsDriver {
    sim: SharedSim,
    flash: FlashFactory,
    cfg: Config,
    cfg_name: &'static str,
    fmt: FormatOptions,
}

impl DffsDriver {
    /// DFFS with `Config::default()` on `sim`.
    pub fn new(sim: SharedSim) -> DffsDriver {
        Self::with_config(sim, Config::default(), "default")
    }

    /// DFFS with another mount configuration (`name` is how reports call it).
    pub fn with_config(sim: SharedSim, cfg: Config, name: &'static str) -> DffsDriver {
        let handle = sim.clone();
        DffsDriver {
            sim,
            flash: Box::new(move || Box::new(handle.clone())),
            cfg,
            cfg_name: name,
            fmt: FormatOptions::default(),
        }
    }

    /// DFFS on `sim` seen through a [`SplitFlash`] that attributes every operation's device
    /// time to data, metadata or garbage collection (returned with the driver).
    pub fn with_split(sim: SharedSim) -> (DffsDriver, SplitFlash) {
        let split = SplitFlash::new(sim.clone());
        let handle = split.clone();
        let d = DffsDriver {
            sim,
            flash: Box::new(move || Box::new(handle.clone())),
            cfg: Config::default(),
            cfg_name: "default",
            fmt: FormatOptions::default(),
        };
        (d, split)
    }

    /// The same driver formatting with compression `algo` (`dffs::format::compress::NONE`, `LZ4`,
    /// `DEFLATE`) for every file.
    pub fn with_compression(mut self, algo: u8) -> DffsDriver {
        self.fmt.compression = algo;
        self
    }

    fn power_up(&self) {
        if !self.sim.lock().is_powered() {
            self.sim.power_up();
        }
    }
}

/// DFFS errors in the suites' vocabulary.
fn map_err(sim: &SharedSim, e: Error) -> FsError {
    match e {
        Error::NoSpace => FsError::NoSpace,
        Error::PowerLoss => FsError::PowerLoss,
        _ if !sim.lock().is_powered() => FsError::PowerLoss,
        e => FsError::Other(format!("DFFS error {e:?} ({e})")),
    }
}

impl Driver for DffsDriver {
    fn name(&self) -> &'static str {
        "dffs"
    }

    fn config(&self) -> String {
        let c = &self.cfg;
        let p = dffs::Params::for_geometry(self.sim.lock().geometry(), &self.fmt).ok();
        let ram = p.map(|p| c.ram_estimate(&p)).unwrap_or(0);
        format!(
            "DFFS Config::{}() (dir_cache {}, map_cache {}, index_cache {}, inode_cache {}, \
             data_cache {}, max_dirty {}, journal_limit {} B), compression {}, RAM estimate {} B",
            self.cfg_name,
            c.dir_cache,
            c.map_cache,
            c.index_cache,
            c.inode_cache,
            c.data_cache,
            c.max_dirty,
            c.journal_limit,
            dffs::format::compress::name(self.fmt.compression),
            ram
        )
    }

    fn sim(&self) -> &SharedSim {
        &self.sim
    }

    fn format(&mut self) -> FsResult<()> {
        self.power_up();
        let sim = self.sim.clone();
        catch(|| {
            Fs::format((self.flash)(), &self.fmt)
                .map(|_| ())
                .map_err(|e| map_err(&sim, e))
        })
    }

    fn session(
        &mut self,
        end: End,
        f: &mut dyn FnMut(&mut dyn Session) -> FsResult<()>,
    ) -> FsResult<MountReport> {
        self.power_up();
        let sim = self.sim.clone();
        let cfg = self.cfg;
        catch(|| {
            let meter = Meter::start(&sim);
            let fs = Fs::mount((self.flash)(), cfg).map_err(|e| map_err(&sim, e))?;
            let mount = meter.stop();
            let ram = fs.ram_bytes();
            let mut s = DffsSession {
                fs,
                sim: sim.clone(),
                dirs: HashMap::new(),
                peak: ram,
                session_peak: ram,
            };
            s.session_peak = ram;
            let r = f(&mut s);
            let peak = s.session_peak.max(s.peak).max(s.fs.ram_bytes());
            let mut unmount = Default::default();
            match (&r, end) {
                (Ok(()), End::Unmount) => {
                    let m = Meter::start(&sim);
                    s.fs.unmount().map_err(|e| map_err(&sim, e))?;
                    unmount = m.stop();
                }
                // An operation that failed (ENOSPC, say) leaves the file system usable: it is
                // unmounted, so what was written before stays, as on a real system. (Dropping it
                // here was a power cut that lost every file not yet synced.) The operation's
                // error is the session's.
                (Err(e), End::Unmount) if !matches!(e, FsError::PowerLoss) => {
                    let _ = s.fs.unmount();
                }
                _ => drop(s.fs.into_flash()),
            }
            r?;
            Ok(MountReport {
                mount,
                ram_after_mount: ram,
                peak_ram: peak,
                unmount,
            })
        })
    }
}

struct DffsSession {
    fs: Fs<Box<dyn Flash>>,
    sim: SharedSim,
    dirs: HashMap<String, Ino>,
    /// Peak since the last `take_peak_ram`.
    peak: usize,
    /// Peak over the whole session.
    session_peak: usize,
}

impl DffsSession {
    fn err(&self, e: Error) -> FsError {
        map_err(&self.sim, e)
    }

    fn note_ram(&mut self) {
        let r = self.fs.ram_bytes();
        self.peak = self.peak.max(r);
        self.session_peak = self.session_peak.max(r);
    }

    /// The inode of directory `path` (remembered once resolved).
    fn dir(&mut self, path: &str) -> FsResult<Ino> {
        if path == "/" || path.is_empty() {
            return Ok(ROOT_INO);
        }
        if let Some(&i) = self.dirs.get(path) {
            return Ok(i);
        }
        let i = self
            .fs
            .resolve(path.as_bytes())
            .map_err(|e| map_err(&self.sim, e))?;
        self.dirs.insert(path.to_string(), i);
        Ok(i)
    }
}

struct DffsFile<'a> {
    fs: &'a mut Fs<Box<dyn Flash>>,
    fh: dffs::Fh,
    sim: &'a SharedSim,
}

impl FileOps for DffsFile<'_> {
    fn write_at(&mut self, off: u64, data: &[u8]) -> FsResult<()> {
        let mut done = 0;
        while done < data.len() {
            let n = self
                .fs
                .write(self.fh, off + done as u64, &data[done..])
                .map_err(|e| map_err(self.sim, e))?;
            if n == 0 {
                return Err(FsError::Other("DFFS: write returned 0".into()));
            }
            done += n;
        }
        Ok(())
    }

    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> FsResult<usize> {
        let mut done = 0;
        while done < buf.len() {
            let n = self
                .fs
                .read(self.fh, off + done as u64, &mut buf[done..])
                .map_err(|e| map_err(self.sim, e))?;
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }

    fn sync(&mut self) -> FsResult<()> {
        self.fs.fsync(self.fh).map_err(|e| map_err(self.sim, e))
    }

    fn size(&mut self) -> FsResult<u64> {
        let ino = self
            .fs
            .handle_ino(self.fh)
            .map_err(|e| map_err(self.sim, e))?;
        self.fs
            .stat(ino)
            .map(|s| s.size)
            .map_err(|e| map_err(self.sim, e))
    }
}

impl Session for DffsSession {
    fn mkdir(&mut self, path: &str) -> FsResult<()> {
        let (parent, name) = split_path(path);
        let p = self.dir(parent)?;
        let st = self
            .fs
            .mkdir(p, name.as_bytes(), 0o755, 0, 0)
            .map_err(|e| self.err(e))?;
        self.dirs.insert(path.to_string(), st.ino);
        self.note_ram();
        Ok(())
    }

    fn with_file(
        &mut self,
        path: &str,
        mode: OpenMode,
        f: &mut dyn FnMut(&mut dyn FileOps) -> FsResult<()>,
    ) -> FsResult<()> {
        let (parent, name) = split_path(path);
        let p = self.dir(parent)?;
        let ino = match self.fs.lookup(p, name.as_bytes()) {
            Ok(st) => st.ino,
            Err(Error::NotFound) if mode.create => {
                self.fs
                    .create(p, name.as_bytes(), 0o644, 0, 0)
                    .map_err(|e| self.err(e))?
                    .ino
            }
            Err(e) => return Err(self.err(e)),
        };
        let flags = OpenFlags {
            read: true,
            write: mode.write,
            append: false,
            sync: mode.sync,
            truncate: mode.truncate,
        };
        let fh = self.fs.open(ino, flags).map_err(|e| self.err(e))?;
        let r = {
            let mut file = DffsFile {
                fs: &mut self.fs,
                fh,
                sim: &self.sim,
            };
            f(&mut file)
        };
        self.note_ram();
        let c = self.fs.close(fh).map_err(|e| self.err(e));
        r?;
        c
    }

    fn remove(&mut self, path: &str) -> FsResult<()> {
        let (parent, name) = split_path(path);
        let p = self.dir(parent)?;
        self.fs
            .unlink(p, name.as_bytes())
            .map_err(|e| self.err(e))?;
        self.note_ram();
        Ok(())
    }

    fn rmdir(&mut self, path: &str) -> FsResult<()> {
        let (parent, name) = split_path(path);
        let p = self.dir(parent)?;
        self.fs.rmdir(p, name.as_bytes()).map_err(|e| self.err(e))?;
        self.dirs.remove(path);
        Ok(())
    }

    fn list(&mut self, dir: &str) -> FsResult<Vec<Entry>> {
        let d = self.dir(dir)?;
        let mut out = Vec::new();
        self.fs
            .readdir(d, 0, &mut |e| {
                out.push(Entry {
                    name: String::from_utf8_lossy(&e.name).into_owned(),
                    is_dir: e.kind == FileKind::Dir,
                });
                true
            })
            .map_err(|e| self.err(e))?;
        self.note_ram();
        Ok(out)
    }

    fn stat(&mut self, dir: &str, name: &str) -> FsResult<(bool, u64)> {
        let d = self.dir(dir)?;
        let st = self
            .fs
            .lookup(d, name.as_bytes())
            .map_err(|e| self.err(e))?;
        Ok((st.kind == FileKind::Dir, st.size))
    }

    fn sync(&mut self) -> FsResult<()> {
        self.fs.sync().map_err(|e| self.err(e))
    }

    fn finish_deferred(&mut self) -> FsResult<()> {
        self.fs.checkpoint().map_err(|e| self.err(e))
    }

    fn ram_bytes(&mut self) -> usize {
        self.note_ram();
        self.fs.ram_bytes()
    }

    fn op_causes(&mut self) -> Option<dffs::CauseCounts> {
        Some(self.fs.op_counts().by_cause)
    }

    fn take_peak_ram(&mut self) -> usize {
        let now = self.fs.ram_bytes();
        let peak = self.peak.max(now);
        self.peak = now;
        peak
    }

    fn used_bytes(&mut self) -> FsResult<u64> {
        let s = self.fs.statfs().map_err(|e| self.err(e))?;
        Ok((s.blocks.saturating_sub(s.blocks_free)) * s.block_size as u64)
    }

    fn total_bytes(&mut self) -> FsResult<u64> {
        let s = self.fs.statfs().map_err(|e| self.err(e))?;
        Ok(s.blocks * s.block_size as u64)
    }
}

/// Device time attributed to what DFFS was doing, as far as the device operations tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Programs of file data pages written for the first time, and reads of data pages while
    /// the application reads.
    pub data_ps: u64,
    /// Programs and reads of node pages (journal, inodes, directories, maps, checkpoints).
    pub meta_ps: u64,
    /// Erases, programs of data pages that carry data already on flash (moved by garbage
    /// collection), and reads of data pages while the application is not reading.
    pub gc_ps: u64,
}

#[derive(Default)]
struct SplitState {
    split: Split,
    /// What each page holds: 0 unknown, 1 file data, 2 nodes.
    page_kind: Vec<u8>,
    /// The CRC of the data last programmed for each (inode, file block).
    seen: HashMap<(u32, u32), u32>,
    app_reading: bool,
}

/// A [`Flash`] over the simulator that attributes each operation's simulated time to data,
/// metadata or garbage collection, from the OOB tags DFFS writes on NAND (a public part of its
/// format: `dffs::format::node::OobTag`). Node pages moved by the collector count as metadata (their
/// bytes change when they are rewritten, so they cannot be told apart from new nodes).
#[derive(Clone)]
pub struct SplitFlash {
    sim: SharedSim,
    g: Geometry,
    state: Arc<Mutex<SplitState>>,
}

impl SplitFlash {
    fn new(sim: SharedSim) -> SplitFlash {
        let g = sim.geometry();
        let st = SplitState {
            page_kind: vec![0; g.total_pages() as usize],
            ..SplitState::default()
        };
        SplitFlash {
            sim,
            g,
            state: Arc::new(Mutex::new(st)),
        }
    }

    /// The split so far.
    pub fn split(&self) -> Split {
        self.state.lock().map(|s| s.split).unwrap_or_default()
    }

    /// Says whether the application is reading file data now (its data-page reads are data,
    /// not garbage collection).
    pub fn set_app_reading(&self, on: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.app_reading = on;
        }
    }

    fn charge(&self, ps: u64, what: u8) {
        if let Ok(mut s) = self.state.lock() {
            match what {
                0 => s.split.data_ps += ps,
                1 => s.split.meta_ps += ps,
                _ => s.split.gc_ps += ps,
            }
        }
    }
}

impl Flash for SplitFlash {
    fn geometry(&self) -> Geometry {
        self.g
    }

    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        let t0 = self.sim.stats().sim_ps;
        let r = self.sim.read(page, offset, data, oob);
        let dt = self.sim.stats().sim_ps - t0;
        let what = match self.state.lock() {
            Ok(s) => match s.page_kind.get(page as usize) {
                Some(1) if s.app_reading => 0,
                Some(1) => 2,
                _ => 1,
            },
            Err(_) => 1,
        };
        self.charge(dt, what);
        r
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let t0 = self.sim.stats().sim_ps;
        let r = self.sim.program(page, offset, data, oob);
        let dt = self.sim.stats().sim_ps - t0;
        let tag = if oob.len() >= OOB_TAG_LEN {
            OobTag::decode(&oob[..OOB_TAG_LEN], data.len().max(1) as u32)
                .ok()
                .flatten()
        } else {
            None
        };
        let what = match self.state.lock() {
            Ok(mut s) => {
                let p = page as usize;
                match tag {
                    Some(t) if t.kind == TAG_DATA => {
                        if p < s.page_kind.len() {
                            s.page_kind[p] = 1;
                        }
                        let moved = s.seen.get(&(t.ino, t.block)) == Some(&t.data_crc);
                        s.seen.insert((t.ino, t.block), t.data_crc);
                        if moved {
                            2
                        } else {
                            0
                        }
                    }
                    Some(t) if t.kind == TAG_NODES => {
                        if p < s.page_kind.len() {
                            s.page_kind[p] = 2;
                        }
                        1
                    }
                    _ => match s.page_kind.get(p) {
                        Some(1) => 0,
                        _ => 1,
                    },
                }
            }
            Err(_) => 1,
        };
        self.charge(dt, what);
        r
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        let t0 = self.sim.stats().sim_ps;
        let r = self.sim.erase(block);
        let dt = self.sim.stats().sim_ps - t0;
        if let Ok(mut s) = self.state.lock() {
            let ppb = self.g.pages_per_block as usize;
            let first = block as usize * ppb;
            if let Some(k) = s.page_kind.get_mut(first..first + ppb) {
                k.fill(0);
            }
        }
        self.charge(dt, 2);
        r
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        let t0 = self.sim.stats().sim_ps;
        let r = self.sim.is_bad(block);
        self.charge(self.sim.stats().sim_ps - t0, 1);
        r
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        let t0 = self.sim.stats().sim_ps;
        let r = self.sim.mark_bad(block);
        self.charge(self.sim.stats().sim_ps - t0, 1);
        r
    }
}
