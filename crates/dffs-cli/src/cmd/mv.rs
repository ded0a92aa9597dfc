//! `dffs mv IMAGE FROM TO`: an entry renamed or moved inside an image.
//!
//! Owns the command's flow: when `TO` is an existing directory the entry moves into it under
//! its own name (as `mv` does); otherwise it is renamed to `TO`, atomically replacing a target
//! of the same kind. It must never leave the image half-changed.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::FileKind;

use super::image::{fs_path, join, Access, RawArgs, Session};
use super::CliError;

/// Options of `dffs mv`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Entry to move.
    pub from: PathBuf,
    /// New path, or an existing directory to move it into.
    pub to: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Runs `dffs mv`.
pub fn run(args: &Args, _out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadWrite, &args.raw)?;
    let from = fs_path(args.from.as_os_str());
    let mut to = fs_path(args.to.as_os_str());
    s.resolve(&from)?;
    let (from_dir, from_name) = s.resolve_parent(&from)?;
    if let Some(st) = s.lookup_follow(&to)? {
        if st.kind == FileKind::Dir {
            let src = s.resolve(&from)?;
            if src.ino != st.ino {
                to = join(&to, &from_name);
            }
        }
    }
    let (to_dir, to_name) = s.resolve_parent(&to)?;
    s.fs()
        .rename(from_dir, &from_name, to_dir, &to_name)
        .map_err(|e| {
            let why = match e {
                dffs::Error::Invalid => "a directory cannot move into itself".to_string(),
                e => e.to_string(),
            };
            CliError::msg(format!(
                "{}: {} -> {}: {why}",
                args.image.display(),
                String::from_utf8_lossy(&from),
                String::from_utf8_lossy(&to)
            ))
        })?;
    s.finish()?;
    Ok(())
}
