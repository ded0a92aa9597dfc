//! `dffs fsck`: clean images pass with the right counts (also after every one-shot command),
//! damaged ones give exit status 4 with the findings, and a missing image is an error (1).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

fn fsck_json(img: &Path) -> (i32, serde_json::Value, String) {
    let r = dffs(&["fsck", s(img), "--json"]);
    let v = serde_json::from_slice(&r.stdout)
        .unwrap_or_else(|e| panic!("fsck printed bad JSON ({e}): {}", r.out()));
    (r.code, v, r.stderr)
}

fn assert_clean(img: &Path, what: &str) -> serde_json::Value {
    let (code, v, stderr) = fsck_json(img);
    assert_eq!(code, 0, "{what}: {v} {stderr}");
    assert!(stderr.is_empty(), "{what}: {stderr}");
    assert_eq!(v["clean"], true, "{what}: {v}");
    assert_eq!(v["mounted"], true);
    assert_eq!(v["errors"].as_array().unwrap().len(), 0, "{what}: {v}");
    v
}

/// `make_tree`'s tree in `src` under `t`, packed into image `name` of `size`: the source, its
/// counts and the image.
fn packed_tree(t: &Path, name: &str, size: &str) -> (PathBuf, TreeCounts, PathBuf) {
    let src = t.join("src");
    let counts = make_tree(&src);
    let img = t.join(name);
    dffs(&["pack", s(&src), s(&img), "--size", size, "-q"]).ok();
    (src, counts, img)
}

#[test]
fn a_packed_tree_is_clean_with_the_right_counts() {
    let t = tempfile::tempdir().unwrap();
    let (_, counts, img) = packed_tree(t.path(), "f.img", "8MiB");
    let v = assert_clean(&img, "after pack");
    assert_eq!(v["dirs"], counts.dirs + 1);
    assert_eq!(v["files"], counts.files);
    // Content bytes: the files' sizes plus the symlinks' targets.
    let targets = ["init.d/rcS", "/usr/lib/libc.so", "does/not/exist"];
    let link_bytes: u64 = targets.iter().map(|t| t.len() as u64).sum();
    let bytes = v["bytes"].as_u64().unwrap();
    assert_eq!(bytes, counts.bytes + link_bytes);
    // Every data page of the non-inline files was checked: at least one per 2 KiB of content.
    assert!(
        v["data_blocks"].as_u64().unwrap() >= counts.bytes / 2048 - 8,
        "{v}"
    );
    assert!(v["check"]["page_reads"].as_u64().unwrap() > 0);

    let human = dffs(&["fsck", s(&img)]).ok().out();
    assert!(human.ends_with("f.img: clean\n"), "{human}");
    assert!(
        human.contains(&format!("checked {} directories", counts.dirs + 1)),
        "{human}"
    );
}

#[test]
fn clean_after_every_one_shot_command() {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("o.img");
    dffs(&["format", s(&img), "--size", "4MiB"]).ok();
    assert_clean(&img, "after format");
    let local = t.path().join("local");
    write_file(&local, &content(5, 40_000), 0o644);
    let steps: &[&[&str]] = &[
        &["mkdir", "-p", "/a/b/c"],
        &["put", s(&local), "/a/b/c/f"],
        &["put", s(&local), "/a/g"],
        &["mv", "/a/b/c/f", "/a/h"],
        &["mv", "/a/g", "/a/h"],
        &["mkdir", "/d"],
        &["mv", "/a/b", "/d"],
        &["rm", "/a/h"],
        &["rm", "-r", "/d"],
    ];
    for step in steps {
        let mut args = vec![step[0], s(&img)];
        args.extend_from_slice(&step[1..]);
        dffs(&args).ok();
        assert_clean(&img, &format!("after {step:?}"));
    }
    assert_eq!(dffs(&["ls", s(&img), "/a"]).ok().out(), "");
}

#[test]
fn damage_is_reported_with_status_4() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    fs::create_dir_all(src.join("keep")).unwrap();
    fs::create_dir_all(src.join("doomed-dir")).unwrap();
    write_file(&src.join("keep/file"), &content(1, 10_000), 0o644);
    let img = t.path().join("d.img");
    dffs(&["pack", s(&src), s(&img), "--size", "4MiB", "-q"]).ok();

    // Break the directory page that holds the name "doomed-dir".
    let mut bytes = fs::read(&img).unwrap();
    let pages = pages_holding(&bytes, b"doomed-dir");
    assert!(!pages.is_empty());
    for p in pages {
        smash(&mut bytes, p, 40, 64);
    }
    fs::write(&img, &bytes).unwrap();
    let (code, v, stderr) = fsck_json(&img);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["clean"], false);
    assert_eq!(v["mounted"], true);
    assert!(!v["errors"].as_array().unwrap().is_empty(), "{v}");
    assert_one_error_line(&stderr);
    assert!(
        stderr.contains("d.img: the file system is inconsistent"),
        "{stderr}"
    );
    // The human form lists the errors on stdout.
    let r = dffs(&["fsck", s(&img)]);
    assert_eq!(r.code, 4);
    assert!(
        r.out().lines().any(|l| l.starts_with("error: ")),
        "{}",
        r.out()
    );

    // An image that does not mount at all.
    let mut bytes = fs::read(&img).unwrap();
    for p in used_pages(&bytes) {
        smash(&mut bytes, p, 16, 256);
    }
    fs::write(&img, &bytes).unwrap();
    let (code, v, stderr) = fsck_json(&img);
    assert_eq!(code, 4);
    assert_eq!(v["mounted"], false);
    assert!(
        v["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("cannot mount: "),
        "{v}"
    );
    assert_one_error_line(&stderr);

    // No image: the check cannot run.
    let r = dffs(&["fsck", s(&t.path().join("none.img"))]).fails_with("no such image");
    assert_eq!(r.code, 1);
}

/// `--size` above the chip's capacity: a larger chip of the preset's geometry (2 GiB of the
/// 128 MiB SLC part, 16,384 blocks), whose image is sparse. A packed tree comes back out,
/// and fsck finds it clean after the pack and after a change.
#[test]
fn a_chip_larger_than_its_preset_packs_and_checks_clean() {
    let t = tempfile::tempdir().unwrap();
    let (src, counts, img) = packed_tree(t.path(), "big.img", "2GiB");
    let len = fs::metadata(&img).unwrap().len();
    assert_eq!(len, 16_384 * 64 * 2112);
    let on_disk = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(&img).unwrap().blocks() * 512
    };
    assert!(
        on_disk < 64 << 20,
        "the image is sparse: {on_disk} B on disk"
    );
    let v = assert_clean(&img, "after pack");
    assert_eq!(v["files"], counts.files);
    let info: serde_json::Value =
        serde_json::from_slice(&dffs(&["info", s(&img), "--json"]).ok().stdout).unwrap();
    assert_eq!(info["blocks"], 16_384);
    assert_eq!(info["capacity_bytes"], 2u64 << 30);
    let out = t.path().join("out");
    dffs(&["unpack", s(&img), s(&out)]).ok();
    assert_same_tree(&src, &out);
    dffs(&["rm", s(&img), "/etc/hostname"]).ok();
    let v = assert_clean(&img, "after rm");
    assert_eq!(v["files"], counts.files - 1);
    // Beyond what the format addresses: a one-line error.
    dffs(&["format", s(&t.path().join("x.img")), "--size", "128GiB"]).fails_with("largest");
}
