//! `dffs put IMAGE LOCAL PATH`: a local file copied into an image.
//!
//! Owns the command's flow. `PATH` may name an existing directory (the file keeps its local name
//! there) or an existing file (its content is replaced); `LOCAL` may be `-` (standard input).
//! Like `pack`, the copy keeps the local file's mode, owner and times (standard input gives mode
//! 0644, owner 0:0 and the current time). It must never store a partial file: on any failure the
//! image is left as it was.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::{FileKind, SetAttr, Time};

use super::image::{fs_path, join, Access, RawArgs, Session};
use super::{io_why, CliError};

/// Options of `dffs put`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Local file to copy (`-`: standard input).
    pub local: PathBuf,
    /// Where it goes inside the image (a file path, or an existing directory).
    pub path: PathBuf,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Runs `dffs put`.
pub fn run(args: &Args, _out: &mut dyn Write) -> Result<(), CliError> {
    let stdin = args.local.as_os_str() == "-";
    let (mut source, attrs): (Box<dyn Read>, Option<SetAttr>) = if stdin {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let m = fs::metadata(&args.local).map_err(|e| CliError::local(&args.local, &e))?;
        if m.is_dir() {
            return Err(CliError::msg(format!(
                "{}: is a directory (use 'dffs pack' for trees)",
                args.local.display()
            )));
        }
        let file = File::open(&args.local).map_err(|e| CliError::local(&args.local, &e))?;
        let attrs = SetAttr {
            mode: Some(m.mode() & 0o7777),
            uid: Some(m.uid()),
            gid: Some(m.gid()),
            atime: Some(Time {
                secs: m.atime(),
                nsec: m.atime_nsec().clamp(0, 999_999_999) as u32,
            }),
            mtime: Some(Time {
                secs: m.mtime(),
                nsec: m.mtime_nsec().clamp(0, 999_999_999) as u32,
            }),
            size: None,
        };
        (Box::new(file), Some(attrs))
    };
    let mut s = Session::open(&args.image, Access::ReadWrite, &args.raw)?;
    let mut path = fs_path(args.path.as_os_str());
    let mut existing = s.lookup_follow(&path)?;
    if let Some(st) = existing {
        if st.kind == FileKind::Dir {
            if stdin {
                return Err(s.err(&path, dffs::Error::IsDir));
            }
            let name = fs_path(args.local.file_name().unwrap_or_default());
            path = join(&path, &name);
            existing = s.lookup_follow(&path)?;
            if let Some(st) = existing {
                if st.kind == FileKind::Dir {
                    return Err(s.err(&path, dffs::Error::IsDir));
                }
            }
        }
    }
    let ino = match existing {
        Some(st) => st.ino,
        None => {
            let (parent, name) = s.resolve_parent(&path)?;
            let mode = attrs.and_then(|a| a.mode).unwrap_or(0o644);
            let st = s.fs().create(parent, &name, mode, 0, 0);
            st.map_err(|e| s.err(&path, e))?.ino
        }
    };
    let local = args.local.clone();
    s.write_file(ino, &path, &mut |buf| loop {
        match source.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(CliError::msg(format!(
                    "{}: {}",
                    local.display(),
                    io_why(&e)
                )))
            }
        }
    })?;
    if let Some(a) = attrs {
        s.fs().setattr(ino, a).map_err(|e| s.err(&path, e))?;
    }
    s.finish()?;
    Ok(())
}
