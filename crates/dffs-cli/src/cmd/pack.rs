//! `dffs pack DIR IMAGE [--preset NAME] [--size SIZE] [--quiet]`: a new file system holding a
//! copy of a directory tree (as `mkfs.ubifs -r` builds one).
//!
//! Owns the walk of the source tree and the copy into the image: regular files, directories and
//! symlinks with their modes, owners and access/modification times (the tree's root directory
//! gives the image root its attributes), and hard links (names of one file stay names of one
//! file). Sockets, fifos and devices are skipped with a warning. It must
//! never follow a symlink in the source, never pack the image into itself, and never write the
//! image unless the whole tree went in.

use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use dffs::{Flash, Ino, OpenFlags, SetAttr, Time, ROOT_INO};

use super::image::{self, Access, Caches, Compress, DeviceArgs, Session};
use super::progress::Progress;
use super::{human_bytes, sig3, size, warn, CliError};

/// Options of `dffs pack`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Directory whose contents go into the image.
    pub dir: PathBuf,
    /// Image file; created if missing, reformatted (same device) if it exists.
    pub image: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Compression of file data: none, lz4 or deflate (recorded in the file system; every
    /// file written later gets it too).
    #[arg(long, value_enum, default_value_t = Compress::None)]
    pub compress: Compress,
    /// No progress bar and no summary (warnings and errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Bytes copied per write call.
const CHUNK: usize = 256 * 1024;

/// Parent index of entries directly under the tree's root.
const TOP: usize = usize::MAX;

enum Kind {
    Dir,
    File,
    Symlink(Vec<u8>),
    /// Another name of the file of item `.0` (a hard link).
    HardLink(usize),
}

/// One entry of the source tree, in an order where every directory comes before its contents.
struct Item {
    src: PathBuf,
    parent: usize,
    name: Vec<u8>,
    kind: Kind,
    attrs: Attrs,
}

#[derive(Clone, Copy)]
struct Attrs {
    mode: u32,
    uid: u32,
    gid: u32,
    atime: Time,
    mtime: Time,
}

fn time(secs: i64, nsec: i64) -> Time {
    Time {
        secs,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

fn attrs(m: &Metadata) -> Attrs {
    Attrs {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
    }
}

/// What the walk found.
#[derive(Default)]
struct Tree {
    items: Vec<Item>,
    bytes: u64,
    files: u64,
    dirs: u64,
    symlinks: u64,
}

/// Walks `root` (directories before their contents, names sorted), warning about what cannot be
/// stored as it is; `skip` are (device, inode) pairs never to pack (the image itself).
fn scan(root: &Path, skip: &[(u64, u64)]) -> Result<Tree, CliError> {
    let mut tree = Tree::default();
    let mut links: HashMap<(u64, u64), usize> = HashMap::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), TOP)];
    while let Some((dir, parent)) = stack.pop() {
        let rd = fs::read_dir(&dir).map_err(|e| CliError::local(&dir, &e))?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| CliError::local(&dir, &e))?;
            names.push(entry.file_name());
        }
        names.sort();
        for name in names {
            let src = dir.join(&name);
            let m = fs::symlink_metadata(&src).map_err(|e| CliError::local(&src, &e))?;
            if skip.contains(&(m.dev(), m.ino())) {
                warn(format_args!(
                    "skipping {}: it is the image being written",
                    src.display()
                ));
                continue;
            }
            let ft = m.file_type();
            let kind = if ft.is_dir() {
                tree.dirs += 1;
                Kind::Dir
            } else if ft.is_file() {
                let key = (m.dev(), m.ino());
                match links.get(&key) {
                    Some(&first) if m.nlink() > 1 => Kind::HardLink(first),
                    _ => {
                        if m.nlink() > 1 {
                            links.insert(key, tree.items.len());
                        }
                        tree.files += 1;
                        tree.bytes += m.len();
                        Kind::File
                    }
                }
            } else if ft.is_symlink() {
                let target = fs::read_link(&src).map_err(|e| CliError::local(&src, &e))?;
                tree.symlinks += 1;
                Kind::Symlink(target.as_os_str().as_bytes().to_vec())
            } else {
                let what = if ft.is_fifo() {
                    "a fifo"
                } else if ft.is_socket() {
                    "a socket"
                } else if ft.is_char_device() {
                    "a character device"
                } else if ft.is_block_device() {
                    "a block device"
                } else {
                    "of an unknown type"
                };
                warn(format_args!(
                    "skipping {}: it is {what}; DFFS stores only files, directories and \
                     symlinks",
                    src.display()
                ));
                continue;
            };
            let index = tree.items.len();
            if let Kind::Dir = kind {
                stack.push((src.clone(), index));
            }
            tree.items.push(Item {
                src,
                parent,
                name: name.as_bytes().to_vec(),
                kind,
                attrs: attrs(&m),
            });
        }
    }
    Ok(tree)
}

/// (device, inode) of the image and its sidecar, if they exist.
fn image_ids(image: &Path) -> Vec<(u64, u64)> {
    [image.to_path_buf(), dffs_sim::sidecar_path(image)]
        .iter()
        .filter_map(|p| fs::symlink_metadata(p).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// Copies the local file `src` into the new file `ino`.
fn copy_in(s: &mut Session, src: &Path, ino: Ino, progress: &mut Progress) -> Result<(), CliError> {
    let image = s.path().display().to_string();
    let fail = |e: dffs::Error| CliError::msg(format!("{image}: storing {}: {e}", src.display()));
    let mut file = File::open(src).map_err(|e| CliError::local(src, &e))?;
    let fh = s.fs().open(ino, OpenFlags::RW).map_err(fail)?;
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    let result = loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(CliError::local(src, &e)),
        };
        let mut done = 0;
        while done < n {
            match s.fs().write(fh, off, &buf[done..n]) {
                Ok(0) => return Err(fail(dffs::Error::Io)),
                Ok(w) => {
                    done += w;
                    off += w as u64;
                }
                Err(e) => return Err(fail(e)),
            }
        }
        progress.inc(n as u64);
    };
    result?;
    s.fs().close(fh).map_err(fail)
}

/// Runs `dffs pack`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let root_meta = fs::metadata(&args.dir).map_err(|e| CliError::local(&args.dir, &e))?;
    if !root_meta.is_dir() {
        return Err(CliError::msg(format!(
            "{}: not a directory",
            args.dir.display()
        )));
    }
    let tree = scan(&args.dir, &image_ids(&args.image))?;

    let sim = image::device_for_format(&args.image, &args.device)?;
    let start = sim.stats();
    let sim = image::format_device(&args.image, sim, args.compress)?;
    let mut s = Session::mount(sim, &args.image, Access::ReadWrite, Caches::Bulk)?;
    let image_name = args.image.display().to_string();
    let mut progress = Progress::new(tree.bytes, true, args.quiet);

    let mut inos: Vec<Ino> = vec![0; tree.items.len()];
    for (i, it) in tree.items.iter().enumerate() {
        let parent = if it.parent == TOP {
            ROOT_INO
        } else {
            inos[it.parent]
        };
        let a = it.attrs;
        let fail = |e: dffs::Error| {
            CliError::msg(format!("{image_name}: storing {}: {e}", it.src.display()))
        };
        let st = match &it.kind {
            Kind::Dir => s.fs().mkdir(parent, &it.name, a.mode, a.uid, a.gid),
            Kind::File => s.fs().create(parent, &it.name, a.mode, a.uid, a.gid),
            Kind::Symlink(target) => s.fs().symlink(parent, &it.name, target, a.uid, a.gid),
            Kind::HardLink(first) => {
                // The file's times are set once, through its first name.
                let st = s.fs().link(inos[*first], parent, &it.name).map_err(fail)?;
                inos[i] = st.ino;
                continue;
            }
        }
        .map_err(fail)?;
        inos[i] = st.ino;
        if let Kind::File = it.kind {
            copy_in(&mut s, &it.src, st.ino, &mut progress)?;
        }
        if !matches!(it.kind, Kind::Dir) {
            let times = SetAttr {
                atime: Some(a.atime),
                mtime: Some(a.mtime),
                ..SetAttr::default()
            };
            s.fs().setattr(st.ino, times).map_err(fail)?;
        }
    }
    // Directory times last: adding entries changed them.
    for (i, it) in tree.items.iter().enumerate().rev() {
        if let Kind::Dir = it.kind {
            let times = SetAttr {
                atime: Some(it.attrs.atime),
                mtime: Some(it.attrs.mtime),
                ..SetAttr::default()
            };
            s.fs().setattr(inos[i], times).map_err(|e| {
                CliError::msg(format!("{image_name}: storing {}: {e}", it.src.display()))
            })?;
        }
    }
    let r = attrs(&root_meta);
    let root = SetAttr {
        mode: Some(r.mode & 0o7777),
        uid: Some(r.uid),
        gid: Some(r.gid),
        atime: Some(r.atime),
        mtime: Some(r.mtime),
        size: None,
    };
    s.fs()
        .setattr(ROOT_INO, root)
        .map_err(|e| CliError::msg(format!("{image_name}: storing {}: {e}", args.dir.display())))?;
    let info = s.fs().info();
    let label = s.device().label();
    let capacity = s.device().geometry().capacity();
    let time_kind = if s.device().simulated() {
        "simulated"
    } else {
        "measured"
    };
    let end = s.finish()?;
    drop(progress);
    if !args.quiet {
        let spent = end.since(&start);
        writeln!(
            out,
            "{image_name}: packed {} files ({}), {} directories, {} symlinks into {} ({}): {} \
             used, {} free; {} s of {time_kind} device time",
            tree.files,
            human_bytes(tree.bytes),
            tree.dirs,
            tree.symlinks,
            label,
            size(capacity),
            human_bytes(info.used_bytes),
            human_bytes(info.free_bytes),
            sig3(spent.sim_secs())
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_nanoseconds_in_range() {
        assert_eq!(time(5, 7), Time { secs: 5, nsec: 7 });
        assert_eq!(time(-1, -3).nsec, 0);
        assert_eq!(time(0, 2_000_000_000).nsec, 999_999_999);
    }
}
