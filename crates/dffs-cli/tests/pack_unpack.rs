//! `dffs pack` then `dffs unpack` of a generated tree gives back the same tree (contents,
//! symlink targets, modes, mtimes), and `dffs info --json` describes the packed image.

mod common;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};

use common::*;

#[test]
fn pack_unpack_round_trip_and_info() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    let counts = make_tree(&src);
    // A hard link (kept: two names of one file) and a fifo (skipped: pack takes files,
    // directories and symlinks).
    fs::hard_link(src.join("etc/hostname"), src.join("etc/hostname.link")).unwrap();
    let fifo = src.join("var/fifo");
    let made_fifo = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let img = t.path().join("rootfs.img");

    let run = dffs(&["pack", s(&src), s(&img), "--size", "8MiB"]).ok();
    assert_no_panic(&run.stderr);
    let warnings: Vec<&str> = run.stderr.lines().collect();
    assert!(
        !warnings.iter().any(|l| l.contains("hostname.link")),
        "{warnings:?}"
    );
    if made_fifo {
        assert!(
            warnings
                .iter()
                .any(|l| l.contains("var/fifo") && l.contains("skipping") && l.contains("fifo")),
            "{warnings:?}"
        );
        // Take the fifo out of the source for the comparison, keeping its directory's times.
        let var = src.join("var");
        let m = fs::metadata(&var).unwrap();
        fs::remove_file(&fifo).unwrap();
        let times = fs::FileTimes::new()
            .set_accessed(m.accessed().unwrap())
            .set_modified(m.modified().unwrap());
        fs::File::open(&var).unwrap().set_times(times).unwrap();
    }
    assert_eq!(warnings.len(), made_fifo as usize, "{warnings:?}");
    // The summary names what went in.
    let summary = run.out();
    assert!(
        summary.contains(&format!("packed {} files", counts.files - 3)),
        "{summary}"
    );
    assert!(summary.contains("3 symlinks"), "{summary}");

    // The image is a nanddump-style file: 64 blocks of 64 pages of 2048 + 64 bytes.
    assert_eq!(fs::metadata(&img).unwrap().len(), 64 * 64 * 2112);
    assert!(dffs_sim::sidecar_path(&img).exists());

    let out = t.path().join("out");
    dffs(&["unpack", s(&img), s(&out)]).ok();
    // The hard link came back as a second name of the same file.
    let (a, b) = (
        fs::metadata(out.join("etc/hostname")).unwrap(),
        fs::metadata(out.join("etc/hostname.link")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    let ls = dffs(&["ls", s(&img), "/etc", "-l"]).ok().out();
    assert!(
        ls.lines()
            .any(|l| l.contains("hostname.link") && l.split_whitespace().nth(1) == Some("2")),
        "{ls}"
    );
    assert_same_tree(&src, &out);
    // The root directory's attributes went into the image root and came back.
    let (ms, mo) = (fs::metadata(&src).unwrap(), fs::metadata(&out).unwrap());
    assert_eq!(ms.mode() & 0o7777, mo.mode() & 0o7777);
    assert_eq!(ms.mtime(), mo.mtime());

    // Unpacking again into the same, now non-empty, directory is refused.
    dffs(&["unpack", s(&img), s(&out)]).fails_with("not empty");

    let info = dffs(&["info", s(&img), "--json"]).ok();
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).expect("valid JSON");
    assert_eq!(v["preset"], "nand-slc-128m");
    assert_eq!(v["page_size"], 2048);
    assert_eq!(v["pages_per_block"], 64);
    assert_eq!(v["blocks"], 64);
    // 15 files (the hard link is a second name of one of them); 10 directories plus the root.
    assert_eq!(v["files"], counts.files);
    assert_eq!(v["dirs"], counts.dirs + 1);
    assert_eq!(v["bad_blocks"], 0);
    let used = v["used_bytes"].as_u64().unwrap();
    let free = v["free_bytes"].as_u64().unwrap();
    assert!(
        used >= counts.bytes,
        "used {used} < {} packed",
        counts.bytes
    );
    assert!(
        used < counts.bytes + counts.bytes / 5 + 256 * 1024,
        "used {used}"
    );
    assert!(free > 1 << 20 && used + free <= 8 << 20, "free {free}");
    let ec = &v["erase_count"];
    let (min, mean, max) = (
        ec["min"].as_u64().unwrap(),
        ec["mean"].as_f64().unwrap(),
        ec["max"].as_u64().unwrap(),
    );
    assert!(min as f64 <= mean && mean <= max as f64 && max >= 1, "{ec}");
    let mount = &v["mount"];
    let reads = mount["page_reads"].as_u64().unwrap();
    assert!(reads > 0 && reads <= 64, "mount read {reads} pages");
    let sim_us = mount["sim_us"].as_f64().unwrap();
    // Each page read costs 77.8 µs on this device.
    assert!(
        (sim_us - reads as f64 * 77.8).abs() < reads as f64 * 77.8 * 0.5 + 1.0,
        "{sim_us} µs for {reads} reads"
    );
    assert_eq!(mount["programs"], 0, "a read-only mount wrote");
    assert_eq!(mount["erases"], 0);
    assert_eq!(mount["recovered"], false);
    let ram = v["ram_bytes"].as_u64().unwrap();
    assert!(ram > 0 && ram < 64 * 1024, "RAM {ram}");
    let hist = v["wear_histogram"].as_array().unwrap();
    let blocks: u64 = hist.iter().map(|b| b["blocks"].as_u64().unwrap()).sum();
    assert_eq!(blocks, 64);

    // The human form says the same things, with a histogram.
    let human = dffs(&["info", s(&img)]).ok().out();
    assert!(human.contains("nand-slc-128m"), "{human}");
    assert!(
        human.contains(&format!("{} files and symlinks", counts.files)),
        "{human}"
    );
    assert!(human.contains(&format!("{reads} page reads")), "{human}");
    assert!(human.contains(" | #"), "{human}");
}

#[test]
fn pack_into_an_existing_image_reformats_it_on_the_same_device() {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("a.img");
    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    write_file(&src.join("one"), &content(1, 50_000), 0o644);
    dffs(&["pack", s(&src), s(&img), "--size", "4MiB", "-q"]).ok();
    let device_erases = |img: &std::path::Path| {
        let v: serde_json::Value =
            serde_json::from_slice(&dffs(&["info", s(img), "--json"]).ok().stdout).unwrap();
        (
            v["blocks"].as_u64().unwrap(),
            v["device"]["erase_count"]["mean"].as_f64().unwrap(),
        )
    };
    let (blocks, before) = device_erases(&img);
    assert_eq!(blocks, 32);

    // A second tree replaces the first; the device keeps its wear.
    fs::remove_file(src.join("one")).unwrap();
    write_file(&src.join("two"), &content(2, 70_000), 0o600);
    symlink("two", src.join("link")).unwrap();
    let run = dffs(&["pack", s(&src), s(&img), "--quiet"]).ok();
    assert!(run.stdout.is_empty(), "--quiet printed {:?}", run.out());
    let (blocks, after) = device_erases(&img);
    assert_eq!(blocks, 32);
    assert!(
        after > before,
        "device erase counts went from {before} to {after}"
    );
    let ls = dffs(&["ls", s(&img)]).ok().out();
    assert_eq!(ls, "link\ntwo\n");
    let cat = dffs(&["cat", s(&img), "/link"]).ok();
    assert_eq!(cat.stdout, content(2, 70_000));

    // Another device for the same image is refused, and the image is left alone.
    let bytes = fs::read(&img).unwrap();
    dffs(&["pack", s(&src), s(&img), "--preset", "nand-mlc-1g"]).fails_with("nand-slc-128m");
    dffs(&["pack", s(&src), s(&img), "--size", "8MiB"]).fails_with("remove it");
    assert!(
        fs::read(&img).unwrap() == bytes,
        "a refused pack changed the image"
    );
}

#[test]
fn pack_that_does_not_fit_leaves_no_image() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir(&src).unwrap();
    write_file(&src.join("huge"), &content(3, 5 << 20), 0o644);
    let img = t.path().join("small.img");
    dffs(&["pack", s(&src), s(&img), "--size", "2MiB"]).fails_with("no space left on device");
    assert!(!img.exists(), "a failed pack left an image behind");
}

#[test]
fn pack_errors() {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("x.img");
    let missing = t.path().join("missing");
    dffs(&["pack", s(&missing), s(&img)]).fails_with("no such file or directory");
    let file = t.path().join("file");
    fs::write(&file, b"x").unwrap();
    dffs(&["pack", s(&file), s(&img)]).fails_with("not a directory");
    dffs(&["pack", s(t.path()), s(&img), "--preset", "nand-tlc"])
        .fails_with("unknown preset 'nand-tlc'");
    dffs(&["pack", s(t.path()), s(&img), "--size", "100KiB"]).fails_with("erase blocks");
    dffs(&["pack", s(t.path()), s(&img), "--size", "lots"]).fails_with("invalid size 'lots'");
    assert!(!img.exists());
}
