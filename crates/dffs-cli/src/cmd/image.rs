//! Image files and mounted sessions, shared by every subcommand that works on an image.
//!
//! Owns how an image path becomes a simulated device (with its sidecar, or as a raw flash dump
//! of a named preset), how a new device is chosen (`--preset`, `--size`), how a file system is
//! formatted and mounted on it, how paths inside the image are resolved, and when the image is
//! written back. Its rules:
//! - a session opened read-only never writes the image or its sidecar;
//! - a read-write session writes the image back only through [`Session::finish`], after a clean
//!   unmount, so a command that fails leaves the image exactly as it was;
//! - an existing file is only ever overwritten when it is a device image (it has a sidecar, or
//!   the user named its preset).
//!
//! An MTD character device (`/dev/mtdN`) can stand wherever an image can: it is opened as a
//! [`Device::Mtd`] (every operation goes to the chip through the kernel; there is nothing to
//! write back), after checking that DFFS can describe it.
//!
//! It must never print anything: it returns [`CliError`]s and values.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use dffs::Flash;
use dffs::SystemClock;
use dffs::{Config, DirEntry, FileKind, FormatOptions, Fs, Ino, OpenFlags, Stat};
use dffs_mtd::MtdFlash;
use dffs_sim::preset::{self, Preset};
use dffs_sim::{SimFlash, SimOptions, Stats};

use super::CliError;

/// Options naming the device of an image that has no sidecar (a raw flash dump).
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct RawArgs {
    /// Device preset of an image without a `.sim` sidecar (a raw dump, e.g. from
    /// `nanddump --oob`); images with a sidecar know their preset.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
}

/// Options choosing the device of a new image.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct DeviceArgs {
    /// Device preset (see `dffs presets`); default `nand-slc-128m`. For an existing image it
    /// must match the image's device.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Cut the device to a partition of this size (`8MiB`, `512KiB`, `16M`): a whole number of
    /// erase blocks from the start of the device, as MTD partitions are. Above the chip's
    /// capacity: a larger chip of the same geometry and timing, up to 64 GiB (NOR: 8 GiB),
    /// whose image file is sparse (erased blocks are holes the sidecar lists).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Erase block size for a preset that offers several (NOR: `4KiB` sectors, `32KiB` or
    /// `64KiB` blocks; see `dffs presets`). The chip's capacity stays the same.
    #[arg(long, value_name = "SIZE")]
    pub erase_size: Option<String>,
}

/// `base` with erase blocks of `text` bytes (`--erase-size`), or unchanged for `None`.
pub fn with_erase_size(base: Preset, text: Option<&str>) -> Result<Preset, CliError> {
    let Some(text) = text else {
        return Ok(base);
    };
    let bytes = preset::parse_size(text)
        .and_then(|b| u32::try_from(b).ok())
        .ok_or_else(|| {
            CliError::msg(format!(
                "invalid erase size '{text}' (examples: 4KiB, 32KiB, 64KiB)"
            ))
        })?;
    if bytes == base.geometry.block_size() {
        return Ok(base);
    }
    let offered: Vec<String> = base
        .erase_options
        .iter()
        .map(|o| format!("{}KiB", o.bytes / 1024))
        .collect();
    base.with_erase_size(bytes).map_err(|_| {
        CliError::msg(format!(
            "--erase-size {text}: {} offers {}",
            base.name,
            if offered.is_empty() {
                String::from("only its own erase block size")
            } else {
                offered.join(", ")
            }
        ))
    })
}

/// Whether a session may change the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Mounted read-only; the image is never written.
    ReadOnly,
    /// Mounted read-write; [`Session::finish`] writes the image back.
    ReadWrite,
}

/// How much RAM the mounted file system may spend on caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caches {
    /// The library's default configuration, as an embedded system would mount it (what
    /// `info` measures).
    Embedded,
    /// The library's fast configuration, for bulk work on a workstation (`pack`, `unpack`):
    /// fewer evictions and checkpoints. The mount configuration is not part of the format.
    Bulk,
}

/// Looks a preset up by name.
pub fn named_preset(name: &str) -> Result<Preset, CliError> {
    preset::preset(name)
        .ok_or_else(|| CliError::msg(format!("unknown preset '{name}' (see 'dffs presets')")))
}

/// The device `args` describe: the named (or default) preset, cut to `--size`.
pub fn chosen_preset(args: &DeviceArgs) -> Result<Preset, CliError> {
    let base = match &args.preset {
        Some(name) => named_preset(name)?,
        None => preset::default_preset(),
    };
    let base = with_erase_size(base, args.erase_size.as_deref())?;
    match &args.size {
        None => Ok(base),
        Some(text) => {
            let bytes = preset::parse_size(text).ok_or_else(|| {
                CliError::msg(format!(
                    "invalid size '{text}' (examples: 8MiB, 512KiB, 16M, 4194304)"
                ))
            })?;
            base.with_size_bytes(bytes)
                .map_err(|e| CliError::msg(format!("--size {text} for {}: {e}", base.name)))
        }
    }
}

fn no_image(path: &Path) -> CliError {
    CliError::msg(format!(
        "{}: no such image (create one with 'dffs format' or 'dffs pack')",
        path.display()
    ))
}

/// The device a command works on: a simulated device loaded from an image file, or a Linux
/// MTD device.
pub enum Device {
    /// An image file (with its sidecar, or a raw dump of a named preset).
    Image(Box<SimFlash>),
    /// An MTD character device.
    Mtd(Box<MtdFlash>),
}

dffs::flash_enum!(Device { Image, Mtd });

impl Device {
    /// What the flash paid so far: simulated time for an image, host time around the kernel
    /// calls for MTD.
    pub fn stats(&self) -> Stats {
        match self {
            Device::Image(sim) => sim.stats(),
            Device::Mtd(m) => dffs_fuse::mtd_stats(&m.counters()),
        }
    }

    /// The simulated device's preset (`None` on MTD).
    pub fn preset(&self) -> Option<&Preset> {
        match self {
            Device::Image(sim) => Some(sim.preset()),
            Device::Mtd(_) => None,
        }
    }

    /// The simulated device (`None` on MTD).
    pub fn sim(&self) -> Option<&SimFlash> {
        match self {
            Device::Image(sim) => Some(sim),
            Device::Mtd(_) => None,
        }
    }

    /// What the device is, for messages: the preset's name, or `mtd-nand "NAME"`.
    pub fn label(&self) -> String {
        match self {
            Device::Image(sim) => sim.preset().name.to_string(),
            Device::Mtd(m) => format!("mtd-{} \"{}\"", m.info().kind.name(), m.info().name),
        }
    }

    /// Whether the time in [`Device::stats`] is simulated (image) rather than measured (MTD).
    pub fn simulated(&self) -> bool {
        matches!(self, Device::Image(_))
    }
}

/// Whether `path` names a character device (then it is opened as an MTD device).
pub fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

/// Opens the MTD device at `path`; with `preset`, its geometry must have that preset's layout
/// (a check that the chip is the one an image was packed for).
fn open_mtd(path: &Path, writable: bool, preset: Option<&str>) -> Result<MtdFlash, CliError> {
    let mtd = MtdFlash::open(path, writable).map_err(CliError::msg)?;
    if let Some(name) = preset {
        let want = named_preset(name)?.geometry;
        if !want.same_layout(&mtd.geometry()) {
            return Err(CliError::msg(format!(
                "{}: the MTD device is not a {name} device ({:?} vs {:?})",
                path.display(),
                mtd.geometry(),
                want
            )));
        }
    }
    Ok(mtd)
}

/// Opens an existing image: with its sidecar, or as a raw dump of `raw.preset` (then the
/// second value is true: the device's own state, such as erase counters, is unknown); or an
/// MTD device (read-write when `access` says so).
pub fn open_device(path: &Path, raw: &RawArgs, access: Access) -> Result<(Device, bool), CliError> {
    if is_char_device(path) {
        let mtd = open_mtd(path, access == Access::ReadWrite, raw.preset.as_deref())?;
        return Ok((Device::Mtd(Box::new(mtd)), false));
    }
    let (sim, raw) = open_image(path, raw)?;
    Ok((Device::Image(Box::new(sim)), raw))
}

fn open_image(path: &Path, raw: &RawArgs) -> Result<(SimFlash, bool), CliError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => no_image(path),
        _ => CliError::local(path, &e),
    })?;
    if meta.is_dir() {
        return Err(CliError::msg(format!(
            "{}: is a directory, not an image",
            path.display()
        )));
    }
    let sidecar = dffs_sim::sidecar_path(path);
    if sidecar.exists() {
        let sim = SimFlash::open(path)?;
        if let Some(name) = &raw.preset {
            named_preset(name)?;
            if sim.preset().name != name {
                return Err(CliError::msg(format!(
                    "{}: the image is a {} device (its sidecar says so), not {name}",
                    path.display(),
                    sim.preset().name
                )));
            }
        }
        Ok((sim, false))
    } else {
        match &raw.preset {
            Some(name) => Ok((SimFlash::open_raw(path, named_preset(name)?)?, true)),
            None => Err(CliError::msg(format!(
                "{}: no sidecar {}; give --preset NAME to open it as a raw flash dump",
                path.display(),
                sidecar.display()
            ))),
        }
    }
}

/// The device a `format` or `pack` of `path` works on: the existing image (the same device,
/// with its erase counters and bad blocks; `args` must agree with it), or a new one as `args`
/// say. Nothing is written to disk here.
pub fn device_for_format(path: &Path, args: &DeviceArgs) -> Result<Device, CliError> {
    if is_char_device(path) {
        if args.size.is_some() || args.erase_size.is_some() {
            return Err(CliError::msg(format!(
                "{}: an MTD device has the size and erase blocks of its partition; --size and \
                 --erase-size are for images",
                path.display()
            )));
        }
        let mtd = open_mtd(path, true, args.preset.as_deref())?;
        dffs::format::params::check_geometry(&mtd.geometry()).map_err(|why| {
            CliError::msg(format!(
                "{}: DFFS cannot use this device: {why}",
                path.display()
            ))
        })?;
        return Ok(Device::Mtd(Box::new(mtd)));
    }
    device_for_image(path, args).map(|sim| Device::Image(Box::new(sim)))
}

fn device_for_image(path: &Path, args: &DeviceArgs) -> Result<SimFlash, CliError> {
    let exists = match std::fs::symlink_metadata(path) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(CliError::local(path, &e)),
    };
    if !exists {
        let p = chosen_preset(args)?;
        return Ok(SimFlash::with_options(p, SimOptions::default())?);
    }
    let sidecar = dffs_sim::sidecar_path(path);
    let sim = if sidecar.exists() {
        SimFlash::open(path)?
    } else {
        match &args.preset {
            Some(name) => SimFlash::open_raw(
                path,
                with_erase_size(named_preset(name)?, args.erase_size.as_deref())?,
            )?,
            None => {
                return Err(CliError::msg(format!(
                    "{}: exists and has no sidecar {}; give --preset NAME if it is a raw \
                     flash dump to reformat, or choose another name",
                    path.display(),
                    sidecar.display()
                )))
            }
        }
    };
    let have = sim.preset();
    if let Some(name) = &args.preset {
        named_preset(name)?;
        if have.name != name {
            return Err(CliError::msg(format!(
                "{}: the image is a {} device, not {name} (remove it to create another)",
                path.display(),
                have.name
            )));
        }
    }
    if args.erase_size.is_some() {
        let want = with_erase_size(*have, args.erase_size.as_deref())?;
        if want.geometry.block_size() != have.geometry.block_size() {
            return Err(CliError::msg(format!(
                "{}: the image's erase blocks are {} B, not {} B (remove it to create another)",
                path.display(),
                have.geometry.block_size(),
                want.geometry.block_size()
            )));
        }
    }
    if args.size.is_some() {
        let want = chosen_preset(&DeviceArgs {
            preset: Some(have.name.to_string()),
            size: args.size.clone(),
            erase_size: Some(format!("{}", have.geometry.block_size())),
        })?;
        if want.geometry.capacity() != have.geometry.capacity() {
            return Err(CliError::msg(format!(
                "{}: the image holds {} B of flash, not {} B (remove it to create another size)",
                path.display(),
                have.geometry.capacity(),
                want.geometry.capacity()
            )));
        }
    }
    Ok(sim)
}

/// `--compress`: the compression new files get (recorded in the file system's parameters).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compress {
    /// Data is stored as it is.
    #[default]
    None,
    /// LZ4 (fast; the usual choice for a root file system).
    Lz4,
    /// Deflate (smaller, slower to write).
    Deflate,
}

impl Compress {
    /// The algorithm number the core records.
    pub fn algo(self) -> u8 {
        match self {
            Compress::None => dffs::format::compress::NONE,
            Compress::Lz4 => dffs::format::compress::LZ4,
            Compress::Deflate => dffs::format::compress::DEFLATE,
        }
    }
}

/// Formats `sim` with a new, empty file system (a fresh random identifier) whose files are
/// compressed with `compress`.
pub fn format_device(path: &Path, dev: Device, compress: Compress) -> Result<Device, CliError> {
    let opts = FormatOptions {
        fs_id: RandomState::new().hash_one(std::time::SystemTime::now()),
        compression: compress.algo(),
        ..FormatOptions::default()
    };
    Fs::format(dev, &opts)
        .map_err(|e| CliError::msg(format!("{}: cannot format: {e}", path.display())))
}

/// A path inside the image as bytes (`/` separated; relative paths start at the root).
pub fn fs_path(text: &std::ffi::OsStr) -> Vec<u8> {
    text.as_bytes().to_vec()
}

/// A path inside the image for messages.
pub fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// `path` without its last component (`/a/b` → `/a`, `b` → ``).
pub fn parent_of(path: &[u8]) -> &[u8] {
    let mut p = path;
    while p.len() > 1 && p.last() == Some(&b'/') {
        p = &p[..p.len() - 1];
    }
    match p.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &p[..i],
        None => b"",
    }
}

/// The last component of `path` (empty for the root).
pub fn base_of(path: &[u8]) -> &[u8] {
    path.split(|&c| c == b'/')
        .rfind(|c| !c.is_empty())
        .unwrap_or(b"")
}

/// `dir` joined with `name`.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if p.last() != Some(&b'/') {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A file system mounted on an image for one command.
pub struct Session {
    fs: Fs<Device>,
    path: PathBuf,
    access: Access,
    mount_cost: Stats,
    raw: bool,
}

impl Session {
    /// Opens the image at `path` and mounts it with the embedded configuration.
    pub fn open(path: &Path, access: Access, raw: &RawArgs) -> Result<Session, CliError> {
        Session::open_with(path, access, raw, Caches::Embedded)
    }

    /// Opens the image at `path` and mounts it with `caches`.
    pub fn open_with(
        path: &Path,
        access: Access,
        raw: &RawArgs,
        caches: Caches,
    ) -> Result<Session, CliError> {
        let (dev, raw) = open_device(path, raw, access)?;
        let mut s = Session::mount(dev, path, access, caches)?;
        s.raw = raw;
        Ok(s)
    }

    /// Mounts the file system on `sim`, the device of the image at `path`.
    pub fn mount(
        sim: Device,
        path: &Path,
        access: Access,
        caches: Caches,
    ) -> Result<Session, CliError> {
        let before = sim.stats();
        let base = match caches {
            Caches::Embedded => Config::default(),
            Caches::Bulk => Config::fast(),
        };
        let cfg = Config {
            read_only: access == Access::ReadOnly,
            ..base
        };
        match Fs::mount_with_clock(sim, cfg, Box::new(SystemClock)) {
            Ok(fs) => {
                let mount_cost = fs.flash().stats().since(&before);
                Ok(Session {
                    fs,
                    path: path.to_path_buf(),
                    access,
                    mount_cost,
                    raw: false,
                })
            }
            Err((e, _)) => Err(CliError::msg(match e {
                dffs::Error::NoFileSystem => format!(
                    "{}: cannot mount: {e} (create one with 'dffs format')",
                    path.display()
                ),
                _ => format!("{}: cannot mount: {e}", path.display()),
            })),
        }
    }

    /// The mounted file system.
    pub fn fs(&mut self) -> &mut Fs<Device> {
        &mut self.fs
    }

    /// The device.
    pub fn device(&self) -> &Device {
        self.fs.flash()
    }

    /// The image file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the image was opened as a raw dump (no sidecar: the simulator's erase counters
    /// and statistics start from zero and say nothing about the real device).
    pub fn is_raw(&self) -> bool {
        self.raw
    }

    /// What the mount cost on the device (simulated time and operation counts).
    pub fn mount_cost(&self) -> Stats {
        self.mount_cost
    }

    /// An error about `path` inside the image: `IMAGE: PATH: why`.
    pub fn err(&self, path: &[u8], e: dffs::Error) -> CliError {
        CliError::msg(format!("{}: {}: {e}", self.path.display(), show(path)))
    }

    /// Resolves `path` (the last component is not followed if it is a symlink).
    pub fn resolve(&mut self, path: &[u8]) -> Result<Stat, CliError> {
        let r = self.fs.resolve(path).and_then(|ino| self.fs.stat(ino));
        r.map_err(|e| self.err(path, e))
    }

    /// Resolves `path`, following a symlink in the last component too.
    pub fn resolve_follow(&mut self, path: &[u8]) -> Result<Stat, CliError> {
        self.follow(path).map_err(|e| self.err(path, e))
    }

    /// Resolves `path` with symlinks followed to something that is not a directory
    /// (`EISDIR` otherwise): what `cat` and `get` read.
    pub fn resolve_file(&mut self, path: &[u8]) -> Result<Stat, CliError> {
        let st = self.resolve_follow(path)?;
        if st.kind == dffs::FileKind::Dir {
            return Err(self.err(path, dffs::Error::IsDir));
        }
        Ok(st)
    }

    /// Resolves `path` with symlinks followed; `None` if nothing is there (a missing last
    /// component or a dangling symlink), errors for anything else (a missing parent included).
    pub fn lookup_follow(&mut self, path: &[u8]) -> Result<Option<Stat>, CliError> {
        match self.follow(path) {
            Ok(st) => Ok(Some(st)),
            Err(dffs::Error::NotFound) => {
                // Only "nothing there" if the parent directory itself exists.
                self.fs
                    .resolve_parent(path)
                    .map_err(|e| self.err(path, e))?;
                Ok(None)
            }
            Err(e) => Err(self.err(path, e)),
        }
    }

    fn follow(&mut self, path: &[u8]) -> dffs::Result<Stat> {
        let mut cur = path.to_vec();
        for _ in 0..40 {
            let ino = self.fs.resolve(&cur)?;
            let st = self.fs.stat(ino)?;
            if st.kind != FileKind::Symlink {
                return Ok(st);
            }
            let target = self.fs.readlink(st.ino)?;
            cur = if target.first() == Some(&b'/') {
                target
            } else {
                join(parent_of(&cur), &target)
            };
        }
        Err(dffs::Error::Loop)
    }

    /// Resolves the parent directory of `path`; returns it and the last name.
    pub fn resolve_parent(&mut self, path: &[u8]) -> Result<(Ino, Vec<u8>), CliError> {
        match self.fs.resolve_parent(path) {
            Ok((ino, name)) => Ok((ino, name.to_vec())),
            Err(dffs::Error::Invalid) if base_of(path).is_empty() => Err(CliError::msg(format!(
                "{}: {}: not allowed on the root directory",
                self.path.display(),
                show(path)
            ))),
            Err(e) => Err(self.err(path, e)),
        }
    }

    /// The entries of directory `ino` (at `path`, for messages), sorted by name.
    pub fn list(&mut self, ino: Ino, path: &[u8]) -> Result<Vec<DirEntry>, CliError> {
        let mut entries = Vec::new();
        let r = self.fs.readdir(ino, 0, &mut |e| {
            entries.push(e);
            true
        });
        r.map_err(|e| self.err(path, e))?;
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// The readable entries of directory `ino` sorted by name, and the error that kept the
    /// others (damaged on flash) from being listed, if any.
    pub fn list_partial(&mut self, ino: Ino, path: &[u8]) -> (Vec<DirEntry>, Option<CliError>) {
        let mut entries = Vec::new();
        let r = self.fs.readdir(ino, 0, &mut |e| {
            entries.push(e);
            true
        });
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        (entries, r.err().map(|e| self.err(path, e)))
    }

    /// Reads file `ino` (at `path`, for messages) from start to end, passing each piece to
    /// `sink`; returns the bytes read.
    pub fn read_file(
        &mut self,
        ino: Ino,
        path: &[u8],
        sink: &mut dyn FnMut(&[u8]) -> Result<(), CliError>,
    ) -> Result<u64, CliError> {
        let fh = self
            .fs
            .open(ino, OpenFlags::READ)
            .map_err(|e| self.err(path, e))?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut off = 0u64;
        let result = loop {
            match self.fs.read(fh, off, &mut buf) {
                Ok(0) => break Ok(off),
                Ok(n) => {
                    if let Err(e) = sink(&buf[..n]) {
                        break Err(e);
                    }
                    off += n as u64;
                }
                Err(e) => break Err(self.err(path, e)),
            }
        };
        // A read-only handle has nothing to commit: closing it cannot lose data.
        let _ = self.fs.close(fh);
        result
    }

    /// Replaces the content of file `ino` (at `path`, for messages) with what `source` gives
    /// (it fills the buffer and says how much; 0 at the end); returns the bytes written.
    pub fn write_file(
        &mut self,
        ino: Ino,
        path: &[u8],
        source: &mut dyn FnMut(&mut [u8]) -> Result<usize, CliError>,
    ) -> Result<u64, CliError> {
        let flags = OpenFlags {
            truncate: true,
            ..OpenFlags::RW
        };
        let fh = self.fs.open(ino, flags).map_err(|e| self.err(path, e))?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut off = 0u64;
        let result = loop {
            let n = match source(&mut buf) {
                Ok(0) => break Ok(off),
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            let mut done = 0;
            while done < n {
                match self.fs.write(fh, off, &buf[done..n]) {
                    Ok(0) => return Err(self.err(path, dffs::Error::Io)),
                    Ok(w) => {
                        done += w;
                        off += w as u64;
                    }
                    Err(e) => return Err(self.err(path, e)),
                }
            }
        };
        let closed = self.fs.close(fh).map_err(|e| self.err(path, e));
        let n = result?;
        closed?;
        Ok(n)
    }

    /// Unmounts cleanly and, for a read-write session, writes the image back. Returns the
    /// device's counters after the unmount.
    pub fn finish(self) -> Result<Stats, CliError> {
        let path = self.path;
        let sim = self
            .fs
            .unmount()
            .map_err(|e| CliError::msg(format!("{}: cannot unmount: {e}", path.display())))?;
        if let (Access::ReadWrite, Device::Image(sim)) = (self.access, &sim) {
            sim.save(&path)?;
        }
        Ok(sim.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_pieces() {
        assert_eq!(parent_of(b"/a/b"), b"/a");
        assert_eq!(parent_of(b"/a/b/c/"), b"/a/b");
        assert_eq!(parent_of(b"/a"), b"/");
        assert_eq!(parent_of(b"a"), b"");
        assert_eq!(base_of(b"/a/b/"), b"b");
        assert_eq!(base_of(b"/"), b"");
        assert_eq!(join(b"/", b"x"), b"/x");
        assert_eq!(join(b"/a", b"x"), b"/a/x");
        assert_eq!(join(b"", b"x"), b"/x");
    }
}
