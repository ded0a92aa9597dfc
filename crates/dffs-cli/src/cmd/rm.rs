//! `dffs rm IMAGE PATH [-r]`: a file, symlink or (with `-r`) directory tree removed from an
//! image.
//!
//! Owns the command's flow and the recursive removal. It must never remove the root directory,
//! never follow a symlink (the link itself is removed), never loop on a corrupted directory
//! cycle, and never leave the image half-changed: on any failure nothing is written back.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::{FileKind, Ino};

use super::image::{base_of, fs_path, join, Access, RawArgs, Session};
use super::CliError;

/// Options of `dffs rm`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// File, symlink or directory inside the image.
    pub path: PathBuf,
    /// Remove a directory and everything in it.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Removes everything inside directory `ino` (at `path`).
fn empty_dir(
    s: &mut Session,
    ino: Ino,
    path: &[u8],
    seen: &mut HashSet<Ino>,
) -> Result<(), CliError> {
    if !seen.insert(ino) {
        return Err(s.err(path, dffs::Error::Corrupt));
    }
    for e in s.list(ino, path)? {
        let child = join(path, &e.name);
        if e.kind == FileKind::Dir {
            empty_dir(s, e.ino, &child, seen)?;
            s.fs()
                .rmdir(ino, &e.name)
                .map_err(|err| s.err(&child, err))?;
        } else {
            s.fs()
                .unlink(ino, &e.name)
                .map_err(|err| s.err(&child, err))?;
        }
    }
    Ok(())
}

/// Runs `dffs rm`.
pub fn run(args: &Args, _out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadWrite, &args.raw)?;
    let path = fs_path(args.path.as_os_str());
    if base_of(&path).is_empty() {
        return Err(CliError::msg(format!(
            "{}: refusing to remove the root directory",
            args.image.display()
        )));
    }
    let st = s.resolve(&path)?;
    let (parent, name) = s.resolve_parent(&path)?;
    if st.kind == FileKind::Dir {
        if !args.recursive {
            return Err(CliError::msg(format!(
                "{}: {}: is a directory (use -r to remove it and its contents)",
                args.image.display(),
                String::from_utf8_lossy(&path)
            )));
        }
        let mut seen = HashSet::new();
        empty_dir(&mut s, st.ino, &path, &mut seen)?;
        s.fs().rmdir(parent, &name).map_err(|e| s.err(&path, e))?;
    } else {
        s.fs().unlink(parent, &name).map_err(|e| s.err(&path, e))?;
    }
    s.finish()?;
    Ok(())
}
