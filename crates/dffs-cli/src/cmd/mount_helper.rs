//! `dffs` as a mount(8) helper: `mount -t fuse.dffs IMAGE DIR -o OPTIONS`, `/etc/fstab` lines,
//! and `mount -o remount,ro|rw DIR` of a mounted image.
//!
//! mount(8) runs `/sbin/mount.fuse.dffs SOURCE DIR [-sfnv] [-o OPTIONS]` (install it as a link
//! to `dffs`); without that link it runs `mount.fuse3`, which runs `dffs SOURCE DIR -o
//! OPTIONS`. Both shapes arrive here. Owns only the translation of mount(8)'s arguments and
//! options into `dffs mount`'s, and of a remount into the kernel's own remount; it must never
//! open an image itself (the mount command does) nor loop back into a helper (a remount runs
//! `mount -i`, which calls no helper).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use super::image::RawArgs;
use super::{mount, CliError};

/// What mount(8) asked of the helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperCall {
    /// The source: an image file (a `dffs:` prefix, as the mount table shows it, is dropped).
    pub source: PathBuf,
    /// The mount point.
    pub dir: PathBuf,
    /// `-f`: do everything but the mount itself.
    pub fake: bool,
    /// The options of `-o` that `dffs mount` or a remount act on.
    pub options: HelperOptions,
}

/// The mount options the helper understands; the rest (`defaults`, `nofail`, `_netdev`,
/// `nosuid`, `x-…`, …) are mount(8)'s or the kernel's and are ignored here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelperOptions {
    /// `remount`: change a mounted image's flags instead of mounting it.
    pub remount: bool,
    /// `ro` (the last of `ro`/`rw` wins).
    pub read_only: bool,
    /// `sync`.
    pub sync: bool,
    /// `cache=SIZE`.
    pub cache: Option<String>,
    /// `stats=FILE`.
    pub stats: Option<PathBuf>,
    /// `preset=NAME`, for a raw dump without a sidecar.
    pub preset: Option<String>,
}

/// Whether the program was started as a mount helper, and with what. `subcommands` are the
/// names `dffs` knows: a call whose first argument is one of them is an ordinary command.
pub fn detect(argv: &[OsString], subcommands: &[String]) -> Option<Result<HelperCall, String>> {
    let name = argv
        .first()
        .map(|a| {
            PathBuf::from(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let by_name = name.starts_with("mount.");
    let rest = argv.get(1..).unwrap_or(&[]);
    if !by_name {
        // `dffs SOURCE DIR -o …` from mount.fuse3: never a subcommand, always with options.
        let first = rest.first()?.to_string_lossy();
        if first.starts_with('-') || subcommands.iter().any(|s| *s == first) {
            return None;
        }
        if !rest.iter().any(|a| a == "-o") {
            return None;
        }
    }
    Some(parse(rest))
}

/// Parses `SOURCE DIR [-sfnvrw] [-N NS] [-t TYPE] [-o OPTIONS]` (flags may come anywhere).
pub fn parse(args: &[OsString]) -> Result<HelperCall, String> {
    let mut positional = Vec::new();
    let mut fake = false;
    let mut options = HelperOptions::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        match s.as_ref() {
            "-o" => {
                let opts = it.next().ok_or("option -o needs a value")?;
                apply_options(&mut options, &opts.to_string_lossy())?;
            }
            "-t" | "-N" => {
                it.next()
                    .ok_or_else(|| format!("option {s} needs a value"))?;
            }
            "-r" => options.read_only = true,
            "-w" => options.read_only = false,
            "-f" => fake = true,
            _ if s.starts_with("-o") && s.len() > 2 => apply_options(&mut options, &s[2..])?,
            _ if s.starts_with('-') && s.len() > 1 => {
                // -s (sloppy), -n (no mtab), -v (verbose), and combinations: nothing to do.
                for c in s[1..].chars() {
                    match c {
                        's' | 'n' | 'v' | 'i' => {}
                        'f' => fake = true,
                        'r' => options.read_only = true,
                        'w' => options.read_only = false,
                        _ => return Err(format!("unknown option -{c}")),
                    }
                }
            }
            _ => positional.push(a.clone()),
        }
    }
    let [source, dir] = <[OsString; 2]>::try_from(positional)
        .map_err(|_| "usage: mount.fuse.dffs IMAGE DIR [-o OPTIONS]".to_string())?;
    let source = match source.to_str().and_then(|s| s.strip_prefix("dffs:")) {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(source),
    };
    Ok(HelperCall {
        source,
        dir: PathBuf::from(dir),
        fake,
        options,
    })
}

fn apply_options(o: &mut HelperOptions, list: &str) -> Result<(), String> {
    for opt in list.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let need = |v: Option<&str>| {
            v.filter(|v| !v.is_empty())
                .map(str::to_string)
                .ok_or_else(|| format!("mount option {key} needs a value ({key}=…)"))
        };
        match key {
            "remount" => o.remount = true,
            "ro" => o.read_only = true,
            "rw" => o.read_only = false,
            "sync" => o.sync = true,
            "async" => o.sync = false,
            "cache" => o.cache = Some(need(value)?),
            "stats" => o.stats = Some(PathBuf::from(need(value)?)),
            "preset" => o.preset = Some(need(value)?),
            _ => {}
        }
    }
    Ok(())
}

/// Carries out a helper call: a remount through the kernel, or a `dffs mount` in the
/// background.
pub fn run(call: &HelperCall, out: &mut dyn Write) -> Result<(), CliError> {
    if call.fake {
        return Ok(());
    }
    if call.options.remount {
        // The kernel remounts a FUSE file system by itself (the server has nothing to do: a
        // read-only mount never sends it a write). `-i` keeps mount(8) from calling us again;
        // it keeps the mount's other flags (nosuid, nodev) as they are.
        let flag = if call.options.read_only { "ro" } else { "rw" };
        let status = Command::new("mount")
            .args(["-i", "-o", &format!("remount,{flag}")])
            .arg(&call.dir)
            .status()
            .map_err(|e| CliError::msg(format!("cannot run mount -i: {e}")))?;
        return if status.success() {
            Ok(())
        } else {
            Err(CliError::Status {
                code: status.code().unwrap_or(1).clamp(1, 255) as u8,
                message: format!("{}: remount,{flag} failed", call.dir.display()),
            })
        };
    }
    let args = mount::Args {
        image: call.source.clone(),
        mountpoint: call.dir.clone(),
        foreground: false,
        sync: call.options.sync,
        ro: call.options.read_only,
        cache: call.options.cache.clone(),
        stats: call.options.stats.clone(),
        raw: RawArgs {
            preset: call.options.preset.clone(),
        },
    };
    mount::run(&args, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    fn subs() -> Vec<String> {
        vec!["mount".into(), "ls".into()]
    }

    #[test]
    fn ordinary_commands_are_not_helper_calls() {
        assert_eq!(
            detect(&argv(&["dffs", "ls", "img", "-o", "x"]), &subs()),
            None
        );
        assert_eq!(detect(&argv(&["dffs", "--help"]), &subs()), None);
        assert_eq!(detect(&argv(&["dffs", "img", "dir"]), &subs()), None);
        assert_eq!(detect(&argv(&["dffs"]), &subs()), None);
    }

    #[test]
    fn mount_fuse3_shape() {
        let call = detect(
            &argv(&[
                "dffs",
                "dffs:/a/img",
                "/mnt",
                "-o",
                "rw,subtype=dffs,ro,sync",
            ]),
            &subs(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(call.source, PathBuf::from("/a/img"));
        assert_eq!(call.dir, PathBuf::from("/mnt"));
        assert!(call.options.read_only && call.options.sync && !call.options.remount);
    }

    #[test]
    fn helper_link_shape_and_remount() {
        let call = detect(
            &argv(&[
                "/sbin/mount.fuse.dffs",
                "/img",
                "/mnt",
                "-n",
                "-o",
                "ro,nosuid,remount,rw",
            ]),
            &subs(),
        )
        .unwrap()
        .unwrap();
        assert!(call.options.remount);
        assert!(!call.options.read_only, "the last of ro/rw wins");
        let plain = detect(&argv(&["mount.fuse.dffs", "/img", "/mnt"]), &subs())
            .unwrap()
            .unwrap();
        assert_eq!(plain.options, HelperOptions::default());
        assert!(!plain.fake);
    }

    #[test]
    fn values_and_errors() {
        let call = parse(&argv(&[
            "/img",
            "/mnt",
            "-sfv",
            "-o",
            "cache=4MiB,stats=/tmp/s.json,preset=nor-qspi-16m,defaults",
        ]))
        .unwrap();
        assert!(call.fake);
        assert_eq!(call.options.cache.as_deref(), Some("4MiB"));
        assert_eq!(call.options.stats, Some(PathBuf::from("/tmp/s.json")));
        assert_eq!(call.options.preset.as_deref(), Some("nor-qspi-16m"));
        assert!(parse(&argv(&["/img"])).is_err());
        assert!(parse(&argv(&["/img", "/mnt", "/x"])).is_err());
        assert!(parse(&argv(&["/img", "/mnt", "-o"])).is_err());
        assert!(parse(&argv(&["/img", "/mnt", "-o", "cache="])).is_err());
        assert!(parse(&argv(&["/img", "/mnt", "-q"])).is_err());
    }
}
