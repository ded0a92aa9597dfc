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

use dffs::{Config, Error, FileKind, Flash, FormatOptions, Fs, Ino, OpenFlags, ROOT_INO};
use dffs_sim::SharedSim;

use crate::devices::Meter;
use crate::fsapi::{
    catch, split_path, Driver, End, Entry, FileOps, FsError, FsResult, MountReport, OpenMode,
    Session,
};

/// DFFS on a simulated device.
pub struct DffsDriver {
    sim: SharedSim,
    cfg: Config,
    cfg_name: &'static str,
    fmt: FormatOptions,
}

impl DffsDriver {
    /// DFFS with `Config::default()` on `sim`.
    pub fn new(sim: SharedSim) -> DffsDriver {
        DffsDriver {
            sim,
            cfg: Config::default(),
            cfg_name: "default",
            fmt: FormatOptions::default(),
        }
    }

    /// DFFS with another mount configuration (`name` is how reports call it).
    pub fn with_config(sim: SharedSim, cfg: Config, name: &'static str) -> DffsDriver {
        DffsDriver {
            sim,
            cfg,
            cfg_name: name,
            fmt: FormatOptions::default(),
        }
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
             data_cache {}, max_dirty {}, journal_limit {} B), RAM estimate {} B",
            self.cfg_name,
            c.dir_cache,
            c.map_cache,
            c.index_cache,
            c.inode_cache,
            c.data_cache,
            c.max_dirty,
            c.journal_limit,
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
            Fs::format(sim.clone(), &self.fmt)
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
            let fs = Fs::mount(sim.clone(), cfg).map_err(|e| map_err(&sim, e))?;
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
    fs: Fs<SharedSim>,
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
    fs: &'a mut Fs<SharedSim>,
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

    fn len(&mut self) -> FsResult<u64> {
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

    fn ram_bytes(&mut self) -> usize {
        self.note_ram();
        self.fs.ram_bytes()
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
