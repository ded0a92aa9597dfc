//! `dffs ls IMAGE [PATH] [-l]`: the entries of a directory in an image (or one entry).
//!
//! Owns the listing format: names sorted bytewise, one per line; with `-l`, type and mode,
//! links, owner, group, size, modification time (UTC) and symlink targets. It must never change
//! the image (the file system is mounted read-only), and writes names as the raw bytes they are.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::{FileKind, Ino, Stat};

use super::image::{fs_path, join, Access, RawArgs, Session};
use super::{utc_minutes, CliError};

/// Options of `dffs ls`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Directory (or file) inside the image.
    #[arg(default_value = "/")]
    pub path: PathBuf,
    /// Long listing: mode, links, owner, group, size, modification time (UTC), name.
    #[arg(short = 'l')]
    pub long: bool,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// `ls -l`'s mode column (`drwxr-xr-x`, `-rwsr-x--T`, `lrwxrwxrwx`).
pub fn mode_string(kind: FileKind, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        FileKind::File => '-',
    });
    // (read, write, execute bit, special bit, special letter) for user, group, other.
    let triads = [
        (0o400, 0o200, 0o100, 0o4000, 's'),
        (0o040, 0o020, 0o010, 0o2000, 's'),
        (0o004, 0o002, 0o001, 0o1000, 't'),
    ];
    for (r, w, x, special, letter) in triads {
        s.push(if mode & r != 0 { 'r' } else { '-' });
        s.push(if mode & w != 0 { 'w' } else { '-' });
        s.push(match (mode & x != 0, mode & special != 0) {
            (true, true) => letter,
            (false, true) => letter.to_ascii_uppercase(),
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

struct Row {
    stat: Stat,
    name: Vec<u8>,
    target: Option<Vec<u8>>,
}

/// Writes `ls -l` lines with aligned columns.
fn long_listing(rows: &[Row], out: &mut dyn Write) -> Result<(), CliError> {
    let width =
        |f: &dyn Fn(&Stat) -> String| rows.iter().map(|r| f(&r.stat).len()).max().unwrap_or(1);
    let w_links = width(&|st| st.nlink.to_string());
    let w_uid = width(&|st| st.uid.to_string());
    let w_gid = width(&|st| st.gid.to_string());
    let w_size = width(&|st| st.size.to_string());
    for r in rows {
        let st = &r.stat;
        write!(
            out,
            "{} {:>w_links$} {:>w_uid$} {:>w_gid$} {:>w_size$} {} ",
            mode_string(st.kind, st.mode),
            st.nlink,
            st.uid,
            st.gid,
            st.size,
            utc_minutes(st.mtime.secs)
        )?;
        out.write_all(&r.name)?;
        if let Some(t) = &r.target {
            out.write_all(b" -> ")?;
            out.write_all(t)?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Runs `dffs ls`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadOnly, &args.raw)?;
    let path = fs_path(args.path.as_os_str());
    let st = s.resolve(&path)?;
    // (name shown, path inside the image, inode)
    let entries: Vec<(Vec<u8>, Vec<u8>, Ino)> = if st.kind == FileKind::Dir {
        s.list(st.ino, &path)?
            .into_iter()
            .map(|e| {
                let child = join(&path, &e.name);
                (e.name, child, e.ino)
            })
            .collect()
    } else {
        vec![(path.clone(), path.clone(), st.ino)]
    };
    if args.long {
        let mut rows = Vec::with_capacity(entries.len());
        for (name, child, ino) in entries {
            let stat = s.fs().stat(ino).map_err(|e| s.err(&child, e))?;
            let target = if stat.kind == FileKind::Symlink {
                Some(s.fs().readlink(ino).map_err(|e| s.err(&child, e))?)
            } else {
                None
            };
            rows.push(Row { stat, name, target });
        }
        long_listing(&rows, out)?;
    } else {
        for (name, _, _) in &entries {
            out.write_all(name)?;
            out.write_all(b"\n")?;
        }
    }
    s.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_strings() {
        assert_eq!(mode_string(FileKind::Dir, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(FileKind::File, 0o600), "-rw-------");
        assert_eq!(mode_string(FileKind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(FileKind::File, 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_string(FileKind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(FileKind::Dir, 0o1776), "drwxrwxrwT");
        assert_eq!(mode_string(FileKind::Symlink, 0o777), "lrwxrwxrwx");
    }
}
