//! `dffs mount IMAGE MOUNTPOINT`: the image's file system as a Linux mount, over FUSE.
//!
//! Owns the command line of a mount and its two shapes: in the foreground it serves the mount
//! until it is unmounted (`umount`, `fusermount3 -u`, Ctrl-C, `SIGTERM`); by default it starts
//! itself again in the foreground as a background process and returns once the mount is
//! there. It reports what the flash paid at unmount and on `SIGUSR1` (and as JSON with
//! `--stats`). The session itself (library, image, kernel) is `dffs_fuse`'s; this file must
//! never open images other than through `image::open_device`, nor print the session's errors
//! itself (it returns them).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use dffs_fuse::{MountOptions, Session};
use dffs_sim::Stats;

use super::image::{open_device, Access, Device, RawArgs};
use super::{warn, CliError};

/// Arguments of `dffs mount`.
#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// The image file (made by `dffs format` or `dffs pack`).
    pub image: PathBuf,
    /// An existing directory to mount it on.
    pub mountpoint: PathBuf,
    /// Serve the mount from this process until it is unmounted (default: return once
    /// mounted, with a background process serving it).
    #[arg(short, long)]
    pub foreground: bool,
    /// Every write is synchronous, as `mount -o sync`.
    #[arg(long)]
    pub sync: bool,
    /// Mount read-only: the image is never written.
    #[arg(long)]
    pub ro: bool,
    /// RAM budget for the file system's caches (`256KiB`, `4MiB`); default: the embedded
    /// configuration `dffs info` describes.
    #[arg(long, value_name = "SIZE")]
    pub cache: Option<String>,
    /// At unmount and on SIGUSR1, also write the session's flash cost here as JSON
    /// (`reads`, `programs`, `erases`, `sim_us`).
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Runs `dffs mount`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let md =
        std::fs::metadata(&args.mountpoint).map_err(|e| CliError::local(&args.mountpoint, &e))?;
    if !md.is_dir() {
        return Err(CliError::msg(format!(
            "{}: not a directory",
            args.mountpoint.display()
        )));
    }
    let cache_bytes = match &args.cache {
        None => None,
        Some(t) => Some(dffs_sim::preset::parse_size(t).ok_or_else(|| {
            CliError::msg(format!(
                "invalid --cache '{t}' (examples: 256KiB, 4MiB, 1048576)"
            ))
        })?),
    };
    if let Err(why) = dffs_fuse::fuse_usable() {
        return Err(CliError::msg(format!("cannot mount: {why}")));
    }
    if !args.foreground {
        return start_in_background(args, out);
    }
    // A session that was just unmounted may still be saving this image: wait for it (the
    // lock is held until this session has saved the image in turn).
    // An MTD device is locked the same way: two sessions on one chip would destroy it.
    let lock = if args.image.is_file() || super::image::is_char_device(&args.image) {
        Some(
            dffs_fuse::ImageLock::acquire(&args.image, !args.ro, Duration::from_secs(60))
                .map_err(|e| CliError::local(&args.image, &e))?,
        )
    } else {
        None
    };
    if !args.ro && args.image.is_file() {
        // A session killed in the middle of a sync point left its pages in the WAL.
        let applied = dffs_fuse::recover(&args.image)
            .map_err(|e| CliError::local(&dffs_fuse::wal_path(&args.image), &e))?;
        if applied > 0 {
            warn(format!(
                "{}: applied {applied} pages that a killed session had synced",
                args.image.display()
            ));
        }
    }
    let access = if args.ro {
        Access::ReadOnly
    } else {
        Access::ReadWrite
    };
    let (dev, _raw) = open_device(&args.image, &args.raw, access)?;
    let simulated = dev.simulated();
    let opts = MountOptions {
        read_only: args.ro,
        sync: args.sync,
        cache_bytes,
    };
    let mut session = match dev {
        Device::Image(sim) => Session::mount(*sim, &args.image, &opts),
        Device::Mtd(mtd) => Session::mount_mtd(*mtd, &args.image, &opts),
    }
    .map_err(CliError::msg)?;
    if let Some(lock) = lock {
        session.hold(lock);
    }
    let image = args.image.clone();
    let json = args.stats.clone();
    let (stats, ops) = session
        .run(&args.mountpoint, move |s, ops| {
            // SIGUSR1: a report line on stdout, and the JSON file brought up to date. The
            // main thread holds the stdout lock while it serves; write through a descriptor
            // of our own, appending so that a redirect to a file is not overwritten.
            if let Ok(mut o) = std::fs::OpenOptions::new().append(true).open("/dev/stdout") {
                let _ = writeln!(o, "{}", report_line(&image, &s, "so far", simulated));
            }
            if let Some(p) = &json {
                let _ = write_json(p, &s, ops.as_ref());
            }
        })
        .map_err(CliError::msg)?;
    writeln!(
        out,
        "{}",
        report_line(&args.image, &stats, "session", simulated)
    )?;
    if let Some(p) = &args.stats {
        write_json(p, &stats, Some(&ops)).map_err(|e| CliError::local(p, &e))?;
    }
    Ok(())
}

/// One line of flash cost.
fn report_line(image: &Path, s: &Stats, when: &str, simulated: bool) -> String {
    let time = if simulated {
        "simulated device time"
    } else {
        "in MTD calls (measured)"
    };
    format!(
        "{}: {when}: {} page reads, {} programs, {} erases, {:.3} s {time}",
        image.display(),
        s.reads,
        s.programs,
        s.erases,
        s.sim_secs()
    )
}

/// The `--stats` file: the flash's totals for the session (mount and unmount included) and,
/// when the library's counts are known, the same operations by cause (`by_cause`: what each
/// read, program, erase and byte moved was for, see `dffs::Cause`; the unmount's final
/// checkpoint, counted by the flash only, is the `unmount` entry).
fn write_json(path: &Path, s: &Stats, ops: Option<&dffs::OpCounts>) -> std::io::Result<()> {
    let mut v = serde_json::json!({
        "reads": s.reads,
        "programs": s.programs,
        "erases": s.erases,
        "sim_us": s.sim_us(),
    });
    if let Some(o) = ops {
        let mut causes = serde_json::Map::new();
        for c in dffs::Cause::ALL {
            let i = c as usize;
            causes.insert(
                c.name().into(),
                serde_json::json!({
                    "reads": o.by_cause.reads[i],
                    "programs": o.by_cause.programs[i],
                    "erases": o.by_cause.erases[i],
                    "program_bytes": o.by_cause.program_bytes[i],
                    "read_bytes": o.by_cause.read_bytes[i],
                }),
            );
        }
        causes.insert(
            "unmount".into(),
            serde_json::json!({
                "reads": s.reads.saturating_sub(o.reads),
                "programs": s.programs.saturating_sub(o.programs),
                "erases": s.erases.saturating_sub(o.erases),
            }),
        );
        v["by_cause"] = serde_json::Value::Object(causes);
    }
    std::fs::write(path, format!("{v}\n"))
}

/// Starts `dffs mount … --foreground` as a background process of its own process group, and
/// returns when the mount is there (or with the status of a child that failed).
fn start_in_background(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::msg(format!("cannot find the dffs executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount")
        .arg(&args.image)
        .arg(&args.mountpoint)
        .arg("--foreground");
    if args.sync {
        cmd.arg("--sync");
    }
    if args.ro {
        cmd.arg("--ro");
    }
    if let Some(c) = &args.cache {
        cmd.arg("--cache").arg(c);
    }
    if let Some(s) = &args.stats {
        cmd.arg("--stats").arg(absolute(s));
    }
    if let Some(p) = &args.raw.preset {
        cmd.arg("--preset").arg(p);
    }
    // The server reports on the terminal or file our output goes to; it must not hold a
    // pipe open (whoever reads it would wait for the end of the session).
    cmd.stdin(Stdio::null())
        .stdout(unless_pipe(1))
        .stderr(unless_pipe(2))
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::msg(format!("cannot start the mount process: {e}")))?;
    let target = std::fs::canonicalize(&args.mountpoint)
        .map_err(|e| CliError::local(&args.mountpoint, &e))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| CliError::msg(format!("mount process: {e}")))?
        {
            return Err(CliError::Status {
                code: status.code().unwrap_or(1).clamp(1, 255) as u8,
                message: format!(
                    "{}: not mounted (run with --foreground to see why)",
                    args.image.display()
                ),
            });
        }
        if is_dffs_mount(&target) {
            writeln!(
                out,
                "{} mounted on {} (process {}); unmount with 'umount {}'",
                args.image.display(),
                target.display(),
                child.id(),
                target.display()
            )?;
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            return Err(CliError::msg(format!(
                "{}: the mount did not appear within 120 s",
                args.mountpoint.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Our file descriptor `fd` for a child, or nothing when it is a pipe or a socket.
fn unless_pipe(fd: u32) -> Stdio {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(format!("/proc/self/fd/{fd}")) {
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_socket() => Stdio::null(),
        _ => Stdio::inherit(),
    }
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Whether a DFFS FUSE file system is mounted on `dir` (a canonical path).
pub fn is_dffs_mount(dir: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = mountinfo_escape(&dir.to_string_lossy());
    info.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let fstype = f
            .iter()
            .position(|&x| x == "-")
            .and_then(|i| f.get(i + 1).copied());
        // A direct mount is of type `fuse`, one through fusermount3 of type `fuse.dffs`.
        f.get(4) == Some(&want.as_str()) && fstype.is_some_and(|t| t.starts_with("fuse"))
    })
}

/// A path as `/proc/self/mountinfo` writes it (space, tab, newline and backslash in octal).
fn mountinfo_escape(p: &str) -> String {
    let mut s = String::with_capacity(p.len());
    for c in p.chars() {
        match c {
            ' ' => s.push_str("\\040"),
            '\t' => s.push_str("\\011"),
            '\n' => s.push_str("\\012"),
            '\\' => s.push_str("\\134"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths() {
        assert_eq!(mountinfo_escape("/mnt/a b\\c"), "/mnt/a\\040b\\134c");
        assert!(!is_dffs_mount(Path::new("/definitely/not/mounted")));
    }
}
