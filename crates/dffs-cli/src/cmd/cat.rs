//! `dffs cat IMAGE PATH`: a file's content from an image, on standard output.
//!
//! Owns only the command's flow: the path is resolved with symlinks followed, directories are
//! refused. It must never change the image (read-only mount) and writes the bytes unchanged.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::image::{fs_path, Access, RawArgs, Session};
use super::CliError;

/// Options of `dffs cat`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// File inside the image.
    pub path: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Runs `dffs cat`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadOnly, &args.raw)?;
    let path = fs_path(args.path.as_os_str());
    let st = s.resolve_file(&path)?;
    s.read_file(st.ino, &path, &mut |piece| Ok(out.write_all(piece)?))?;
    s.finish()?;
    Ok(())
}
