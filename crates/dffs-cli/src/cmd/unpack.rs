//! `dffs unpack IMAGE DIR [--quiet]`: the image's tree copied out into a local directory.
//!
//! Owns the walk of the image and the local copy: contents, directories and symlink targets,
//! with modes and access/modification times, and owners where the system allows it (as root;
//! otherwise `EPERM` is ignored). Symlinks keep the times the system gives them (changing them
//! needs `lutimes`, which safe Rust cannot call). An entry the image cannot give back
//! (uncorrectable data, a corrupted node) is reported and skipped so the intact rest comes out,
//! and the command then fails. It must never write outside `DIR` (names from the image are
//! checked: no `/`, `.` or `..`), never follow a directory cycle of a corrupted image, never
//! extract into a non-empty directory, and never write the image.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use dffs::{FileKind, Ino, OpenFlags, Stat, ROOT_INO};

use super::image::{join, show, Access, Caches, RawArgs, Session};
use super::localfs;
use super::progress::Progress;
use super::{human_bytes, CliError};

/// Options of `dffs unpack`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Directory to extract into (created if missing; must be empty if it exists).
    pub dir: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
    /// No progress bar and no summary (warnings and errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Bytes read per call.
const CHUNK: usize = 256 * 1024;

/// Deepest directory nesting followed.
const MAX_DEPTH: u32 = 4096;

/// Why one entry could not be extracted.
enum Fail {
    /// The image could not give it back: reported, skipped.
    Image(String),
    /// The local side failed: the command stops.
    Local(CliError),
}

impl From<CliError> for Fail {
    fn from(e: CliError) -> Self {
        Fail::Local(e)
    }
}

struct Unpacker {
    s: Session,
    progress: Progress,
    visited: HashSet<Ino>,
    /// Where the first name of each file with hard links was extracted.
    linked: std::collections::HashMap<Ino, std::path::PathBuf>,
    failures: u64,
    files: u64,
    bytes: u64,
    dirs: u64,
    symlinks: u64,
}

/// Gives the open local file or directory `f` (at `path`) the owner, times and mode of `st`.
fn restore(f: &File, path: &Path, st: &Stat) -> Result<(), CliError> {
    localfs::set_owner(f, path, st)?;
    localfs::set_times_and_mode(f, path, st)
}

/// Whether a name read from the image is safe to create in a local directory.
fn safe_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

impl Unpacker {
    fn image_fail(&self, path: &[u8], e: dffs::Error) -> Fail {
        Fail::Image(format!("{}: {}: {e}", self.s.path().display(), show(path)))
    }

    fn report(&mut self, f: Fail) -> Result<(), CliError> {
        match f {
            Fail::Image(text) => {
                self.progress.warn(text);
                self.failures += 1;
                Ok(())
            }
            Fail::Local(e) => Err(e),
        }
    }

    fn file(&mut self, ino: Ino, path: &[u8], local: &Path, st: &Stat) -> Result<(), Fail> {
        // Names of one file become names of one local file.
        if st.nlink > 1 {
            if let Some(first) = self.linked.get(&ino) {
                fs::hard_link(first, local).map_err(|e| CliError::local(local, &e))?;
                return Ok(());
            }
            self.linked.insert(ino, local.to_path_buf());
        }
        let mut out = File::create_new(local).map_err(|e| CliError::local(local, &e))?;
        let fh = self
            .s
            .fs()
            .open(ino, OpenFlags::READ)
            .map_err(|e| self.image_fail(path, e))?;
        let mut buf = vec![0u8; CHUNK];
        let mut off = 0u64;
        let copied = loop {
            match self.s.fs().read(fh, off, &mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    if let Err(e) = out.write_all(&buf[..n]) {
                        break Err(Fail::Local(CliError::local(local, &e)));
                    }
                    off += n as u64;
                }
                Err(e) => break Err(self.image_fail(path, e)),
            }
        };
        // A read-only handle has nothing to commit; closing cannot lose data.
        let _ = self.s.fs().close(fh);
        copied?;
        if off != st.size {
            return Err(Fail::Image(format!(
                "{}: {}: read {off} bytes of {}",
                self.s.path().display(),
                show(path),
                st.size
            )));
        }
        restore(&out, local, st)?;
        self.files += 1;
        self.bytes += off;
        Ok(())
    }

    fn symlink(&mut self, ino: Ino, path: &[u8], local: &Path, st: &Stat) -> Result<(), Fail> {
        let target = self
            .s
            .fs()
            .readlink(ino)
            .map_err(|e| self.image_fail(path, e))?;
        std::os::unix::fs::symlink(OsStr::from_bytes(&target), local)
            .map_err(|e| CliError::local(local, &e))?;
        localfs::set_link_owner(local, st)?;
        self.symlinks += 1;
        Ok(())
    }

    /// Extracts the contents of directory `ino` (image path `path`) into `local`.
    fn dir(&mut self, ino: Ino, path: &[u8], local: &Path, depth: u32) -> Result<(), CliError> {
        if depth > MAX_DEPTH {
            let f = Fail::Image(format!(
                "{}: {}: directories nested deeper than {MAX_DEPTH} levels; not extracted",
                self.s.path().display(),
                show(path)
            ));
            return self.report(f);
        }
        // A directory with damaged entries: extract the readable ones, report the rest.
        let (entries, damaged) = self.s.list_partial(ino, path);
        if let Some(e) = damaged {
            self.report(Fail::Image(format!("{e} (some entries could not be read)")))?;
        }
        for e in entries {
            let child = join(path, &e.name);
            if !safe_name(&e.name) {
                let f = Fail::Image(format!(
                    "{}: {}: invalid name in directory {}; not extracted",
                    self.s.path().display(),
                    show(&child),
                    show(path)
                ));
                self.report(f)?;
                continue;
            }
            let target = local.join(OsStr::from_bytes(&e.name));
            let st = match self.s.fs().stat(e.ino) {
                Ok(st) => st,
                Err(err) => {
                    let f = self.image_fail(&child, err);
                    self.report(f)?;
                    continue;
                }
            };
            let r = match st.kind {
                FileKind::Dir => {
                    if !self.visited.insert(e.ino) {
                        let f = Fail::Image(format!(
                            "{}: {}: directory cycle (the file system structure is \
                             corrupted); not followed",
                            self.s.path().display(),
                            show(&child)
                        ));
                        self.report(f)?;
                        continue;
                    }
                    fs::create_dir(&target).map_err(|e| CliError::local(&target, &e))?;
                    self.dir(e.ino, &child, &target, depth + 1)?;
                    let f = File::open(&target).map_err(|e| CliError::local(&target, &e))?;
                    restore(&f, &target, &st)?;
                    self.dirs += 1;
                    Ok(())
                }
                FileKind::File => self.file(e.ino, &child, &target, &st),
                FileKind::Symlink => self.symlink(e.ino, &child, &target, &st),
            };
            if let Err(f) = r {
                self.report(f)?;
            }
            self.progress.inc(1);
        }
        Ok(())
    }
}

/// Makes sure `dir` exists and is empty.
fn prepare(dir: &Path) -> Result<(), CliError> {
    match fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {
            let mut rd = fs::read_dir(dir).map_err(|e| CliError::local(dir, &e))?;
            if rd.next().is_some() {
                return Err(CliError::msg(format!(
                    "{}: exists and is not empty",
                    dir.display()
                )));
            }
            Ok(())
        }
        Ok(_) => Err(CliError::msg(format!(
            "{}: exists and is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(dir).map_err(|e| CliError::local(dir, &e))
        }
        Err(e) => Err(CliError::local(dir, &e)),
    }
}

/// Runs `dffs unpack`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open_with(&args.image, Access::ReadOnly, &args.raw, Caches::Bulk)?;
    let root = s.resolve(b"/")?;
    prepare(&args.dir)?;
    let info = s.fs().info();
    let total = (info.files as u64 + info.dirs as u64).saturating_sub(1);
    let mut u = Unpacker {
        s,
        progress: Progress::new(total, false, args.quiet),
        visited: HashSet::from([ROOT_INO]),
        linked: std::collections::HashMap::new(),
        failures: 0,
        files: 0,
        bytes: 0,
        dirs: 0,
        symlinks: 0,
    };
    u.dir(ROOT_INO, b"/", &args.dir, 0)?;
    let f = File::open(&args.dir).map_err(|e| CliError::local(&args.dir, &e))?;
    restore(&f, &args.dir, &root)?;
    let image = args.image.display().to_string();
    if u.failures > 0 {
        return Err(CliError::msg(format!(
            "{image}: {} entries could not be extracted (see the warnings above)",
            u.failures
        )));
    }
    // Directory listings skip entries whose node is unreadable; the file system's own counts
    // tell whether something was left behind that way.
    let found = (u.files + u.symlinks, u.dirs + 1);
    let counted = (info.files as u64, info.dirs as u64);
    if found != counted {
        return Err(CliError::msg(format!(
            "{image}: the file system counts {} files and symlinks and {} directories but \
             only {} and {} could be reached (unreadable directory entries?)",
            counted.0, counted.1, found.0, found.1
        )));
    }
    drop(u.progress);
    u.s.finish()?;
    if !args.quiet {
        writeln!(
            out,
            "{image}: unpacked {} files ({}), {} directories, {} symlinks into {}",
            u.files,
            human_bytes(u.bytes),
            u.dirs,
            u.symlinks,
            args.dir.display()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names_are_refused() {
        assert!(safe_name(b"a.txt"));
        assert!(safe_name(b"..."));
        assert!(!safe_name(b".."));
        assert!(!safe_name(b"."));
        assert!(!safe_name(b""));
        assert!(!safe_name(b"a/b"));
        assert!(!safe_name(b"a\0b"));
    }
}
