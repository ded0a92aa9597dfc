//! Each one-shot command on an image (`format`, `ls`, `cat`, `put`, `get`, `rm`, `mkdir`,
//! `mv`, `info`), with the values it must give and its error cases: a non-zero exit, one line
//! on stderr, and an image left as it was.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;

/// A fresh 4 MiB image in a temporary directory.
fn fresh() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("t.img");
    let run = dffs(&["format", s(&img), "--size", "4MiB"]).ok();
    assert!(run
        .out()
        .contains("formatted nand-slc-128m (4 MiB, 32 blocks of 128 KiB, 0 bad)"));
    (t, img)
}

fn json(img: &Path) -> serde_json::Value {
    serde_json::from_slice(&dffs(&["info", s(img), "--json"]).ok().stdout).unwrap()
}

fn ls(img: &Path, path: &str) -> String {
    dffs(&["ls", s(img), path]).ok().out()
}

#[test]
fn format_creates_reopens_and_refuses() {
    let (t, img) = fresh();
    assert_eq!(fs::metadata(&img).unwrap().len(), 32 * 64 * 2112);
    let v = json(&img);
    assert_eq!(
        (v["files"].as_u64(), v["dirs"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(v["blocks"], 32);
    assert_eq!(ls(&img, "/"), "");

    // Reformatting an image with contents empties it, on the same device.
    dffs(&["mkdir", s(&img), "/d"]).ok();
    let before = json(&img)["device"]["erase_count"]["mean"]
        .as_f64()
        .unwrap();
    dffs(&["format", s(&img)]).ok();
    assert_eq!(ls(&img, "/"), "");
    let after = json(&img)["device"]["erase_count"]["mean"]
        .as_f64()
        .unwrap();
    assert!(after > before, "device wear went from {before} to {after}");

    // Another preset or size for an existing image is refused and changes nothing.
    let bytes = fs::read(&img).unwrap();
    dffs(&["format", s(&img), "--preset", "nor-qspi-16m"]).fails_with("not nor-qspi-16m");
    dffs(&["format", s(&img), "--size", "8MiB"]).fails_with("not 8388608 B");
    assert!(fs::read(&img).unwrap() == bytes);

    // A file that is not an image is never overwritten.
    let notes = t.path().join("notes.txt");
    fs::write(&notes, b"precious").unwrap();
    dffs(&["format", s(&notes)]).fails_with("no sidecar");
    assert_eq!(fs::read(&notes).unwrap(), b"precious");

    // Other presets work, e.g. a NOR partition.
    let nor = t.path().join("nor.img");
    let run = dffs(&[
        "format",
        s(&nor),
        "--preset",
        "nor-qspi-16m",
        "--size",
        "1MiB",
    ])
    .ok();
    assert!(run.out().contains("nor-qspi-16m"), "{}", run.out());
    assert_eq!(fs::metadata(&nor).unwrap().len(), 1 << 20);
    let v = json(&nor);
    assert_eq!(v["kind"], "nor");
    assert_eq!(v["oob_size"], 0);
    dffs(&["put", s(&nor), "-", "/x"]).ok();
}

#[test]
fn put_cat_get() {
    let (t, img) = fresh();
    let local = t.path().join("data.bin");
    let data = content(7, 123_457);
    write_file(&local, &data, 0o640);
    dffs(&["put", s(&img), s(&local), "/data.bin"]).ok();
    assert_eq!(dffs(&["cat", s(&img), "/data.bin"]).ok().stdout, data);

    // Into an existing directory, under the local name.
    dffs(&["mkdir", s(&img), "/dir"]).ok();
    dffs(&["put", s(&img), s(&local), "/dir"]).ok();
    assert_eq!(ls(&img, "/dir"), "data.bin\n");
    assert_eq!(dffs(&["cat", s(&img), "dir/data.bin"]).ok().stdout, data);

    // Over an existing file: the old, longer content is gone.
    let short = t.path().join("short");
    write_file(&short, b"short", 0o644);
    dffs(&["put", s(&img), s(&short), "/data.bin"]).ok();
    assert_eq!(dffs(&["cat", s(&img), "/data.bin"]).ok().stdout, b"short");

    // From standard input.
    let piped = dffs_stdin(&["put", s(&img), "-", "/piped"], b"from a pipe\n").ok();
    assert!(piped.stdout.is_empty());
    assert_eq!(
        dffs(&["cat", s(&img), "/piped"]).ok().stdout,
        b"from a pipe\n"
    );

    // get: to a file, into a directory, to stdout; the copy keeps mode and mtime.
    let got = t.path().join("got.bin");
    dffs(&["get", s(&img), "/dir/data.bin", s(&got)]).ok();
    assert_eq!(fs::read(&got).unwrap(), data);
    let (ml, mg) = (fs::metadata(&local).unwrap(), fs::metadata(&got).unwrap());
    assert_eq!(mg.permissions().mode() & 0o7777, 0o640);
    assert_eq!((mg.mtime(), mg.mtime_nsec()), (ml.mtime(), ml.mtime_nsec()));
    let into = t.path().join("into");
    fs::create_dir(&into).unwrap();
    dffs(&["get", s(&img), "/dir/data.bin", s(&into)]).ok();
    assert_eq!(fs::read(into.join("data.bin")).unwrap(), data);
    assert_eq!(
        dffs(&["get", s(&img), "/piped", "-"]).ok().stdout,
        b"from a pipe\n"
    );

    // cat and get follow symlinks: the image from pack has one.
    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    write_file(&src.join("target"), b"through the link", 0o644);
    std::os::unix::fs::symlink("target", src.join("link")).unwrap();
    let img2 = t.path().join("linked.img");
    dffs(&["pack", s(&src), s(&img2), "--size", "4MiB", "-q"]).ok();
    assert_eq!(
        dffs(&["cat", s(&img2), "/link"]).ok().stdout,
        b"through the link"
    );

    // Errors.
    dffs(&["cat", s(&img), "/nope"]).fails_with("t.img: /nope: no such file or directory");
    dffs(&["cat", s(&img), "/dir"]).fails_with("/dir: is a directory");
    dffs(&["cat", s(&img), "/piped/x"]).fails_with("not a directory");
    dffs(&["get", s(&img), "/nope", s(&got)]).fails_with("no such file or directory");
    dffs(&["get", s(&img), "/dir", s(&got)]).fails_with("is a directory");
    let before = fs::read(&img).unwrap();
    dffs(&["put", s(&img), "/no/such/local", "/x"]).fails_with("/no/such/local: no such file");
    dffs(&["put", s(&img), s(&local), "/missing/x"]).fails_with("/missing/x: no such file");
    dffs(&["put", s(&img), s(t.path()), "/x"]).fails_with("is a directory");
    dffs_stdin(&["put", s(&img), "-", "/dir"], b"x").fails_with("/dir: is a directory");
    assert!(
        fs::read(&img).unwrap() == before,
        "a failed put changed the image"
    );
}

#[test]
fn put_that_does_not_fit_leaves_the_image_unchanged() {
    let (t, img) = fresh();
    let big = t.path().join("big");
    write_file(&big, &content(9, 5 << 20), 0o644);
    let before = fs::read(&img).unwrap();
    dffs(&["put", s(&img), s(&big), "/big"]).fails_with("no space left on device");
    assert!(fs::read(&img).unwrap() == before);
    assert_eq!(ls(&img, "/"), "");
    // The device is still usable.
    let small = t.path().join("small");
    write_file(&small, b"fits", 0o644);
    dffs(&["put", s(&img), s(&small), "/small"]).ok();
    assert_eq!(ls(&img, "/"), "small\n");
}

#[test]
fn ls_short_and_long() {
    let (t, img) = fresh();
    let src = t.path().join("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    write_file(&src.join("b-file"), &content(1, 1234), 0o600);
    write_file(&src.join("a-exec"), b"#!/bin/sh\n", 0o4755);
    std::os::unix::fs::symlink("b-file", src.join("c-link")).unwrap();
    fs::set_permissions(src.join("sub"), fs::Permissions::from_mode(0o1777)).unwrap();
    // A known time: 1,000,000,000 s after the epoch is 2001-09-09 01:46:40 UTC.
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let f = fs::File::options()
        .write(true)
        .open(src.join("b-file"))
        .unwrap();
    f.set_times(fs::FileTimes::new().set_modified(when))
        .unwrap();
    dffs(&["pack", s(&src), s(&img), "-q"]).ok();

    assert_eq!(ls(&img, "/"), "a-exec\nb-file\nc-link\nsub\n");
    assert_eq!(ls(&img, "sub"), "");
    assert_eq!(ls(&img, "/b-file"), "/b-file\n");

    let long = dffs(&["ls", s(&img), "-l"]).ok().out();
    let lines: Vec<&str> = long.lines().collect();
    assert_eq!(lines.len(), 4, "{long}");
    assert!(lines[0].starts_with("-rwsr-xr-x 1 "), "{long}");
    assert!(lines[0].ends_with(" a-exec"), "{long}");
    assert!(lines[1].starts_with("-rw------- 1 "), "{long}");
    assert!(lines[1].contains(" 1234 "), "{long}");
    assert!(lines[2].starts_with("lrwxrwxrwx "), "{long}");
    assert!(lines[2].ends_with(" c-link -> b-file"), "{long}");
    assert!(lines[3].starts_with("drwxrwxrwt 2 "), "{long}");
    let uid = fs::metadata(src.join("b-file")).unwrap().uid().to_string();
    assert!(
        lines[1].split_whitespace().nth(2) == Some(uid.as_str()),
        "{long}"
    );
    // The modification time is the source's, in UTC.
    assert!(lines[1].contains(" 1234 2001-09-09 01:46 b-file"), "{long}");

    dffs(&["ls", s(&img), "/nope"]).fails_with("/nope: no such file or directory");
    dffs(&["ls", s(&img), "/b-file/x"]).fails_with("not a directory");
    let missing = t.path().join("missing.img");
    dffs(&["ls", s(&missing)]).fails_with("no such image");
    dffs(&["ls", s(t.path())]).fails_with("is a directory, not an image");
}

#[test]
fn mkdir_rm_mv() {
    let (t, img) = fresh();
    dffs(&["mkdir", s(&img), "/a/b/c", "-p"]).ok();
    dffs(&["mkdir", s(&img), "/a/b/c", "-p"]).ok();
    dffs(&["mkdir", s(&img), "-m", "700", "/private"]).ok();
    assert_eq!(ls(&img, "/"), "a\nprivate\n");
    let long = dffs(&["ls", s(&img), "-l", "/"]).ok().out();
    assert!(
        long.lines()
            .nth(1)
            .unwrap()
            .starts_with("drwx------ 2 0 0 "),
        "{long}"
    );
    assert_eq!(json(&img)["dirs"], 5);
    dffs(&["mkdir", s(&img), "/a"]).fails_with("/a: file exists");
    dffs(&["mkdir", s(&img), "/x/y"]).fails_with("/x/y: no such file or directory");
    dffs(&["mkdir", s(&img), "-m", "999", "/z"]).fails_with("not an octal mode");

    let f = t.path().join("f");
    write_file(&f, b"file", 0o644);
    dffs(&["put", s(&img), s(&f), "/a/b/c/f"]).ok();
    dffs(&["mkdir", s(&img), "-p", "/a/b/c/f/g"]).fails_with("not a directory");

    // mv: rename, move into a directory, replace a file.
    dffs(&["mv", s(&img), "/a/b/c/f", "/a/f2"]).ok();
    assert_eq!(ls(&img, "/a"), "b\nf2\n");
    dffs(&["mv", s(&img), "/a/f2", "/private"]).ok();
    assert_eq!(ls(&img, "/private"), "f2\n");
    dffs(&["put", s(&img), "-", "/other"]).ok();
    dffs(&["mv", s(&img), "/other", "/private/f2"]).ok();
    assert_eq!(ls(&img, "/private"), "f2\n");
    assert_eq!(dffs(&["cat", s(&img), "/private/f2"]).ok().stdout, b"");
    dffs(&["mv", s(&img), "/a", "/private"]).ok();
    assert_eq!(ls(&img, "/private"), "a\nf2\n");
    assert_eq!(ls(&img, "/private/a/b"), "c\n");
    dffs(&["mv", s(&img), "/nope", "/x"]).fails_with("/nope: no such file or directory");
    dffs(&["mv", s(&img), "/private", "/private/a/b"])
        .fails_with("a directory cannot move into itself");

    // rm: a file, a directory only with -r, never the root.
    dffs(&["rm", s(&img), "/private/f2"]).ok();
    assert_eq!(ls(&img, "/private"), "a\n");
    dffs(&["rm", s(&img), "/private"]).fails_with("is a directory (use -r");
    dffs(&["rm", s(&img), "/"]).fails_with("refusing to remove the root directory");
    dffs(&["rm", s(&img), "/nope"]).fails_with("/nope: no such file or directory");
    dffs(&["rm", s(&img), "-r", "/private"]).ok();
    assert_eq!(ls(&img, "/"), "");
    let v = json(&img);
    assert_eq!(
        (v["files"].as_u64(), v["dirs"].as_u64()),
        (Some(0), Some(1))
    );
}

#[test]
fn one_line_errors_for_bad_invocations() {
    let (t, img) = fresh();
    dffs(&["cat", s(&img)]).fails_with("<PATH>");
    dffs(&["frobnicate"]).fails_with("unrecognized subcommand");
    dffs(&["ls", s(&img), "--bogus"]).fails_with("--bogus");
    dffs(&["info", s(&img), "--preset", "nand-mlc-1g"]).fails_with("is a nand-slc-128m device");
    // A raw dump (no sidecar) needs its preset named.
    let raw = t.path().join("raw.img");
    fs::copy(&img, &raw).unwrap();
    dffs(&["ls", s(&raw)]).fails_with("give --preset NAME");
    dffs(&["ls", s(&raw), "--preset", "nand-slc-128m"]).ok();
    let info = dffs(&["info", s(&raw), "--preset", "nand-slc-128m", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(v["dirs"], 1);
    assert!(
        v["device"].is_null(),
        "a raw dump has no device history: {}",
        v["device"]
    );
    assert!(json(&img)["device"]["erase_count"]["max"].as_u64().unwrap() >= 1);
    dffs(&["ls", s(&raw), "--preset", "nand-mlc-1g"]).fails_with("raw.img");
    dffs(&["ls", s(&raw), "--preset", "nor-qspi-16m"]).fails_with("raw.img");
}

/// `--erase-size` picks one of a NOR preset's erase sizes (4 KiB sectors here), keeps the
/// chip's capacity, and is refused for a size the preset does not offer or an image formatted
/// with another.
#[test]
fn format_with_an_erase_size() {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("n.img");
    let run = dffs(&[
        "format",
        s(&img),
        "--preset",
        "nor-qspi-16m",
        "--erase-size",
        "4KiB",
        "--size",
        "2MiB",
    ])
    .ok();
    assert!(run.out().contains("512 blocks of 4 KiB"), "{}", run.out());
    let v = json(&img);
    assert_eq!(v["blocks"], 512);
    // A file of half the partition goes in and comes back.
    let data = content(3, 1 << 20);
    let src = t.path().join("f.bin");
    fs::write(&src, &data).unwrap();
    dffs(&["put", s(&img), s(&src), "/f.bin"]).ok();
    let back = t.path().join("back.bin");
    dffs(&["get", s(&img), "/f.bin", s(&back)]).ok();
    assert!(fs::read(&back).unwrap() == data);
    let bytes = fs::read(&img).unwrap();
    dffs(&["format", s(&img), "--erase-size", "64KiB"]).fails_with("erase blocks are 4096 B");
    assert!(fs::read(&img).unwrap() == bytes);
    let other = t.path().join("o.img");
    dffs(&[
        "format",
        s(&other),
        "--preset",
        "nor-qspi-16m",
        "--erase-size",
        "8KiB",
    ])
    .fails_with("offers 4KiB");
    dffs(&["format", s(&other), "--erase-size", "4KiB"]).fails_with("nand-slc-128m offers");
    assert!(!other.exists());
}

/// A character device stands where an image can (an MTD device, `/dev/mtdN`); one that is not
/// MTD is refused by every command with the reason, before anything is written, and options
/// that only make sense for image files are refused for devices.
#[test]
fn a_character_device_that_is_not_mtd_is_refused() {
    for args in [
        &["format", "/dev/null"][..],
        &["pack", ".", "/dev/null"],
        &["ls", "/dev/null", "/"],
        &["fsck", "/dev/null"],
        &["info", "/dev/null"],
    ] {
        dffs(args)
            .fails_with("/dev/null: not an MTD device (character device 1:3; MTD is major 90)");
    }
    dffs(&["format", "/dev/null", "--size", "1MiB"])
        .fails_with("an MTD device has the size and erase blocks of its partition");
}
