//! Corrupted and malformed images give one-line errors, never a panic, and never wrong data:
//! `ls`, `info` and `cat` on images with overwritten pages, a truncated image, a broken
//! sidecar; a damaged file does not hide the intact ones.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;

/// The content of `/data/file-<i>`.
fn file_data(i: u64) -> Vec<u8> {
    // A recognisable prefix, so a test can find the file's pages in the image.
    let mut v = format!("<<file {i} payload>>").into_bytes();
    v.extend(content(100 + i, 6000 + i as usize * 3000));
    v
}

/// A 4 MiB image holding a few files and directories.
fn small_image(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    fs::create_dir_all(src.join("data")).unwrap();
    fs::create_dir_all(src.join("etc/sub")).unwrap();
    for i in 0..3 {
        write_file(&src.join(format!("data/file-{i}")), &file_data(i), 0o644);
    }
    write_file(&src.join("etc/hostname"), b"board\n", 0o644);
    std::os::unix::fs::symlink("../data/file-0", src.join("etc/link")).unwrap();
    let img = dir.join("c.img");
    dffs(&["pack", s(&src), s(&img), "--size", "4MiB", "-q"]).ok();
    img
}

/// Runs `ls`, `info`, `cat` on an image and checks each either succeeds with true values or
/// fails with one clean line; and that `fsck` finds the damage whenever a read meets it.
/// Returns how many failed.
fn probe(img: &Path, what: &str) -> usize {
    let fsck = dffs(&["fsck", s(img), "--json"]);
    assert_no_panic(&fsck.stderr);
    assert!(
        fsck.code == 0 || fsck.code == 4,
        "{what}: fsck exit {} ({})",
        fsck.code,
        fsck.stderr
    );
    let fsck_clean = fsck.code == 0;
    let mut failed = 0;
    let runs = [
        dffs(&["ls", s(img), "/data"]),
        dffs(&["info", s(img), "--json"]),
        dffs(&["cat", s(img), "/data/file-1"]),
    ];
    for (i, r) in runs.into_iter().enumerate() {
        if r.code != 0 && fsck_clean {
            panic!(
                "{what}: fsck said clean but {r_stderr}",
                r_stderr = r.stderr
            );
        }
        if r.code != 0 {
            assert_eq!(r.code, 1, "{what}: exit code {} ({})", r.code, r.stderr);
            assert_one_error_line(&r.stderr);
            failed += 1;
            continue;
        }
        assert!(r.stderr.is_empty(), "{what}: {}", r.stderr);
        match i {
            0 => {
                // Entries may be missing, but no name may be made up.
                for name in r.out().lines() {
                    assert!(
                        ["file-0", "file-1", "file-2"].contains(&name),
                        "{what}: ls listed {name:?}"
                    );
                }
                if fsck_clean {
                    assert_eq!(
                        r.out(),
                        "file-0\nfile-1\nfile-2\n",
                        "{what}: fsck said clean"
                    );
                }
            }
            1 => {
                let v: serde_json::Value = serde_json::from_slice(&r.stdout)
                    .unwrap_or_else(|e| panic!("{what}: info printed bad JSON: {e}"));
                assert_eq!(v["blocks"], 32, "{what}");
            }
            _ => assert!(
                r.stdout == file_data(1),
                "{what}: cat gave {} wrong bytes",
                r.stdout.len()
            ),
        }
    }
    failed
}

#[test]
fn every_command_fails_cleanly_when_all_metadata_is_overwritten() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    let mut bytes = fs::read(&img).unwrap();
    for p in used_pages(&bytes) {
        smash(&mut bytes, p, 16, 256);
    }
    fs::write(&img, &bytes).unwrap();
    dffs(&["ls", s(&img)]).fails_with("c.img: cannot mount");
    dffs(&["info", s(&img)]).fails_with("c.img: cannot mount");
    dffs(&["info", s(&img), "--json"]).fails_with("c.img: cannot mount");
    dffs(&["cat", s(&img), "/data/file-1"]).fails_with("c.img: cannot mount");
    dffs(&["unpack", s(&img), s(&t.path().join("out"))]).fails_with("c.img: cannot mount");
}

#[test]
fn overwriting_any_one_page_never_panics_nor_gives_wrong_data() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    let clean = fs::read(&img).unwrap();
    assert_eq!(probe(&img, "clean image"), 0);
    let pages = used_pages(&clean);
    assert!(pages.len() > 10, "only {} pages in use", pages.len());
    let mut failures = 0;
    for &p in &pages {
        // Data area and spare area (tags) in turn.
        for (off, len, area) in [(100, 64, "data"), (2050, 30, "spare")] {
            let mut bytes = clean.clone();
            smash(&mut bytes, p, off, len);
            fs::write(&img, &bytes).unwrap();
            failures += probe(&img, &format!("page {p} {area} overwritten"));
        }
    }
    println!(
        "{} pages in use, {failures} of {} runs failed cleanly",
        pages.len(),
        pages.len() * 6
    );
    // The checks above must have met damaged images, not only lucky ones.
    assert!(failures > 0, "no corruption was ever noticed");
}

#[test]
fn a_damaged_file_does_not_hide_the_others() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    let mut bytes = fs::read(&img).unwrap();
    let pages = pages_holding(&bytes, b"<<file 1 payload>>");
    assert_eq!(pages.len(), 1, "file-1's first data page");
    smash(&mut bytes, pages[0], 500, 100);
    fs::write(&img, &bytes).unwrap();

    dffs(&["cat", s(&img), "/data/file-1"]).fails_with("c.img: /data/file-1: input/output error");
    assert_eq!(ls_of(&img, "/data"), "file-0\nfile-1\nfile-2\n");
    assert_eq!(
        dffs(&["cat", s(&img), "/data/file-2"]).ok().stdout,
        file_data(2)
    );
    assert_eq!(
        dffs(&["cat", s(&img), "/etc/link"]).ok().stdout,
        file_data(0)
    );

    // unpack takes out everything else, names the damaged file, and fails.
    let out = t.path().join("out");
    let r = dffs(&["unpack", s(&img), s(&out)]);
    assert_eq!(r.code, 1);
    assert_no_panic(&r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("dffs: warning: ")
            && lines[0].contains("/data/file-1: input/output error"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("1 entries could not be extracted"),
        "{lines:?}"
    );
    assert_eq!(fs::read(out.join("data/file-2")).unwrap(), file_data(2));
    assert_eq!(fs::read(out.join("etc/hostname")).unwrap(), b"board\n");
}

fn ls_of(img: &Path, path: &str) -> String {
    dffs(&["ls", s(img), path]).ok().out()
}

#[test]
fn malformed_image_files() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    let bytes = fs::read(&img).unwrap();

    // Truncated image (an interrupted copy).
    fs::write(&img, &bytes[..bytes.len() - 5000]).unwrap();
    for cmd in ["ls", "info", "cat"] {
        let mut args = vec![cmd, s(&img)];
        if cmd == "cat" {
            args.push("/data/file-0");
        }
        dffs(&args).fails_with("image is");
    }

    // Garbage sidecar.
    fs::write(&img, &bytes).unwrap();
    let side = dffs_sim::sidecar_path(&img);
    let good_side = fs::read(&side).unwrap();
    fs::write(&side, b"{ not json").unwrap();
    dffs(&["ls", s(&img)]).fails_with("not a simulator sidecar");
    dffs(&["cat", s(&img), "/etc/hostname"]).fails_with("not a simulator sidecar");

    // A sidecar of another device.
    let other = t.path().join("other.img");
    dffs(&["format", s(&other), "--size", "8MiB"]).ok();
    fs::copy(dffs_sim::sidecar_path(&other), &side).unwrap();
    dffs(&["info", s(&img)]).fails_with("c.img");

    // An empty image file with its sidecar.
    fs::write(&side, &good_side).unwrap();
    fs::write(&img, b"").unwrap();
    dffs(&["info", s(&img)]).fails_with("c.img");

    // An image that is all erased: no file system.
    fs::write(&img, vec![0xFF; bytes.len()]).unwrap();
    dffs(&["ls", s(&img)]).fails_with("no DFFS file system");
    // All zeros: every page looks programmed and fails its checks.
    fs::write(&img, vec![0; bytes.len()]).unwrap();
    dffs(&["info", s(&img)]).fails_with("cannot mount");
}

/// Overwrites `needle` wherever a page's data holds it (e.g. the name in an inode node, which
/// breaks that node's checksum and nothing else). Returns how many pages were hit.
fn smash_pages_holding(img: &Path, needle: &[u8]) -> usize {
    let mut bytes = fs::read(img).unwrap();
    let pages = pages_holding(&bytes, needle);
    for &p in &pages {
        let data = &bytes[p * RAW_PAGE..p * RAW_PAGE + 2048];
        let at = data
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap();
        smash(&mut bytes, p, at, needle.len());
    }
    fs::write(img, &bytes).unwrap();
    pages.len()
}

#[test]
fn unpack_never_succeeds_with_entries_missing() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    // The pages holding file-1's name: its inode node (and its neighbours' in the same page).
    assert!(smash_pages_holding(&img, b"file-1") >= 1);
    let out = t.path().join("out");
    let r = dffs(&["unpack", s(&img), s(&out), "-q"]);
    assert_eq!(r.code, 1, "unpack succeeded with an inode destroyed");
    assert_no_panic(&r.stderr);
    let last = r.stderr.lines().last().unwrap_or("");
    assert!(
        last.contains("could not be extracted") || last.contains("could be reached"),
        "{}",
        r.stderr
    );
    assert!(!out.join("data/file-1").exists());
    assert_eq!(fs::read(out.join("data/file-2")).unwrap(), file_data(2));
}

#[test]
fn a_destroyed_inode_is_an_error_not_a_missing_file() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    assert!(smash_pages_holding(&img, b"file-1") >= 1);
    // The file system still counts the file...
    let v: serde_json::Value =
        serde_json::from_slice(&dffs(&["info", s(&img), "--json"]).ok().stdout).unwrap();
    assert_eq!(v["files"], 5);
    // ...so reading it must say the structure is damaged, not that it does not exist.
    let r = dffs(&["cat", s(&img), "/data/file-1"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("input/output error") || r.stderr.contains("corrupted"),
        "{}",
        r.stderr
    );
    // And a listing of its directory must not silently leave it out.
    let r = dffs(&["ls", s(&img), "/data"]);
    assert!(
        r.code != 0 || r.out().contains("file-1"),
        "ls /data listed {:?} with success",
        r.out()
    );
}

/// A local tree: each path under the root (relative, `/`-separated) with its content (a file's
/// bytes, a link's target, nothing for a directory).
fn local_tree(root: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    fn walk(
        root: &Path,
        dir: &Path,
        out: &mut std::collections::BTreeMap<String, Option<Vec<u8>>>,
    ) {
        let Ok(rd) = fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let ty = e.file_type().unwrap();
            if ty.is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, Some(t.to_string_lossy().into_owned().into_bytes()));
            } else if ty.is_dir() {
                out.insert(rel, None);
                walk(root, &p, out);
            } else {
                out.insert(rel, Some(fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// What `unpack` extracted from a damaged image (`out`) against what was packed (`src`): every
/// entry it did not name in a warning is either absent (its directory was damaged) or exactly
/// as packed, and nothing was made up; when unpack succeeded, the whole tree is there.
/// Returns how many entries were compared equal.
fn compare_unpacked(src: &Path, out: &Path, stderr: &str, ok: bool, what: &str) -> usize {
    let want = local_tree(src);
    let got = local_tree(out);
    let named = |rel: &str| stderr.contains(&format!("/{rel}:"));
    let mut equal = 0;
    for (rel, content) in &got {
        let Some(w) = want.get(rel) else {
            panic!("{what}: unpack made up {rel:?}");
        };
        if named(rel) {
            continue;
        }
        assert_eq!(
            content, w,
            "{what}: {rel} differs from what was packed and unpack said nothing ({stderr})"
        );
        equal += 1;
    }
    if ok {
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{what}: unpack succeeded with a different tree"
        );
    }
    equal
}

/// `unpack` and `fsck` on a damaged image: either success, or exit 1 (4 for fsck's "found
/// damage") with every stderr line a clean `dffs: ` line and no panic; a mount failure is one
/// line; what was extracted matches what was packed ([`compare_unpacked`]). Returns whether
/// unpack failed and how many entries it extracted intact.
fn unpack_and_fsck(img: &Path, src: &Path, out: &Path, what: &str) -> (bool, usize) {
    let _ = fs::remove_dir_all(out);
    let r = dffs(&["unpack", s(img), s(out), "-q"]);
    assert_no_panic(&r.stderr);
    assert!(
        r.code == 0 || r.code == 1,
        "{what}: unpack exit {} ({})",
        r.code,
        r.stderr
    );
    for line in r.stderr.lines() {
        assert!(line.starts_with("dffs: "), "{what}: unpack said {line:?}");
    }
    if r.stderr.contains("cannot mount") || r.stderr.contains("no DFFS file system") {
        assert_one_error_line(&r.stderr);
    }
    let intact = compare_unpacked(src, out, &r.stderr, r.code == 0, what);
    let f = dffs(&["fsck", s(img)]);
    assert_no_panic(&f.stderr);
    assert!(
        [0, 1, 4].contains(&f.code),
        "{what}: fsck exit {} ({})",
        f.code,
        f.stderr
    );
    if f.code == 1 {
        assert_one_error_line(&f.stderr);
    }
    (r.code != 0, intact)
}

#[test]
fn unpack_and_fsck_fail_cleanly_on_hostile_images() {
    let t = tempfile::tempdir().unwrap();
    let img = small_image(t.path());
    let out = t.path().join("out");
    let clean = fs::read(&img).unwrap();
    let pages = used_pages(&clean);
    let mut rng = 0x5EED_u64;
    let mut next = move || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut variants: Vec<(String, Vec<u8>)> = Vec::new();
    // Random bytes over one page, and over many; pages swapped; the spare area garbled.
    for (i, &p) in pages.iter().enumerate().step_by(3) {
        let mut b = clean.clone();
        let at = p * RAW_PAGE;
        let n = if i % 2 == 0 { 2048 } else { RAW_PAGE };
        for x in &mut b[at..at + n] {
            *x = next() as u8;
        }
        variants.push((format!("page {p} random"), b));
    }
    for k in 0..4 {
        let mut b = clean.clone();
        let picked: Vec<usize> = pages.iter().copied().filter(|_| next() % 3 == 0).collect();
        for p in picked {
            let q = pages[next() as usize % pages.len()];
            if k % 2 == 0 {
                let (x, y) = (p.min(q), p.max(q));
                if x != y {
                    let (lo, hi) = b.split_at_mut(y * RAW_PAGE);
                    lo[x * RAW_PAGE..(x + 1) * RAW_PAGE].swap_with_slice(&mut hi[..RAW_PAGE]);
                }
            } else {
                for x in &mut b[p * RAW_PAGE + 2048..(p + 1) * RAW_PAGE] {
                    *x = next() as u8;
                }
            }
        }
        variants.push((format!("pages swapped or spare garbled ({k})"), b));
    }
    let mut random = clean.clone();
    for x in random.iter_mut() {
        *x = next() as u8;
    }
    variants.push(("random image".into(), random));
    let src = t.path().join("src");
    let mut failed = 0;
    let mut intact = 0;
    for (what, bytes) in &variants {
        fs::write(&img, bytes).unwrap();
        let (f, n) = unpack_and_fsck(&img, &src, &out, what);
        failed += f as usize;
        intact += n;
    }
    println!(
        "{} damaged images, unpack failed cleanly on {failed}, {intact} entries extracted intact",
        variants.len()
    );
    assert!(failed > 0, "no damage was ever noticed");
    // Most damage leaves most of the tree readable: the comparison had something to compare.
    assert!(
        intact > variants.len() * 3,
        "only {intact} entries extracted intact"
    );
}
