//! `dffs get IMAGE PATH LOCAL`: a file copied out of an image.
//!
//! Owns the command's flow: `LOCAL` may be a directory (the file keeps its name there) or `-`
//! (standard output); the copy gets the file's mode and times. It must never change the image
//! (read-only mount), and never leaves a partial local file behind when the image cannot give
//! the whole content back.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::image::{base_of, fs_path, Access, RawArgs, Session};
use super::{localfs, CliError};

/// Options of `dffs get`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// File inside the image.
    pub path: PathBuf,
    /// Local file or directory to write (`-`: standard output).
    pub local: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Runs `dffs get`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadOnly, &args.raw)?;
    let path = fs_path(args.path.as_os_str());
    let st = s.resolve_file(&path)?;
    if args.local.as_os_str() == "-" {
        s.read_file(st.ino, &path, &mut |piece| Ok(out.write_all(piece)?))?;
        s.finish()?;
        return Ok(());
    }
    let local: PathBuf = if args.local.is_dir() {
        args.local.join(std::ffi::OsStr::from_bytes(base_of(&path)))
    } else {
        args.local.clone()
    };
    let mut file = File::create(&local).map_err(|e| CliError::local(&local, &e))?;
    let copied = s.read_file(st.ino, &path, &mut |piece| {
        file.write_all(piece)
            .map_err(|e| CliError::local(&local, &e))
    });
    if let Err(e) = copied {
        drop(file);
        let _ = fs::remove_file(&local);
        return Err(e);
    }
    localfs::set_times_and_mode(&file, &local, &st)?;
    s.finish()?;
    Ok(())
}
