//! `dffs mount` as a user runs it: in the background and in the foreground, ended by
//! `umount`, SIGTERM or Ctrl-C (clean image, flash cost printed and written as JSON), and
//! killed with SIGKILL (the image mounts again with everything that was fsynced).
//!
//! When FUSE cannot be used here each test says `SKIPPED: <reason>` on stderr, past the
//! harness's capture, and returns: a skip is never a silent pass.

mod common;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_same_tree, content, dffs, make_tree, s};

fn usable(test: &str) -> bool {
    match dffs_fuse::fuse_usable() {
        Ok(()) => true,
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
            false
        }
    }
}

/// A formatted 16 MiB image and an empty mount point.
fn place() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    dffs(&["format", s(&img), "--size", "16MiB"]).ok();
    (dir, img, mnt)
}

fn mounted(mnt: &Path) -> bool {
    let want = fs::canonicalize(mnt).unwrap();
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.to_str().unwrap()))
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `dffs mount IMG MNT --foreground ...`, once the mount is there.
fn foreground(img: &Path, mnt: &Path, extra: &[&str]) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dffs"))
        .args(["mount", s(img), s(mnt), "--foreground"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the mount appears", || {
        if let Ok(Some(st)) = child.try_wait() {
            let mut e = String::new();
            child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
            panic!("dffs mount exited with {st}: {e}");
        }
        mounted(mnt)
    });
    child
}

fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// `umount`, tried again while it fails (for up to a minute). It failed twice in about 40
/// runs of this file on a loaded machine, at the `umount` right after the tree comparison;
/// the likely cause, not confirmed (its message was not kept), is a mount still busy for a
/// moment after its last file was closed, since FUSE delivers the release asynchronously.
fn unmount(mnt: &Path) {
    wait_until(&format!("umount {}", mnt.display()), || {
        Command::new("umount")
            .arg(mnt)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    });
}

/// Clears the mount a killed server left behind ("transport endpoint is not connected").
fn clear_dead_mount(mnt: &Path) {
    dffs_fuse::lazy_unmount(mnt);
    wait_until("the dead mount goes", || !mounted(mnt));
}

#[test]
fn a_signal_unmounts_cleanly_and_reports_the_flash_cost() {
    if !usable("a_signal_unmounts_cleanly_and_reports_the_flash_cost") {
        return;
    }
    for sig in ["-TERM", "-INT"] {
        let (dir, img, mnt) = place();
        let json = dir.path().join("stats.json");
        let mut child = foreground(&img, &mnt, &["--stats", s(&json)]);
        fs::write(mnt.join("kept"), content(1, 100_000)).unwrap();
        signal(&child, "-USR1");
        wait_until("SIGUSR1 writes the JSON", || json.exists());
        signal(&child, sig);
        let st = child.wait().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(st.success(), "{sig}: {st}: {err}");
        assert!(!mounted(&mnt));
        assert!(
            out.contains("so far:"),
            "{sig}: SIGUSR1 report missing: {out}"
        );
        assert!(
            out.contains("session:"),
            "{sig}: final report missing: {out}"
        );
        assert!(out.contains("page reads") && out.contains("simulated device time"));
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&json).unwrap()).expect("--stats writes JSON");
        for k in ["reads", "programs", "erases", "sim_us"] {
            assert!(v.get(k).is_some_and(|x| x.is_number()), "{k} in {v}");
        }
        assert!(v["programs"].as_u64().unwrap() > 0);
        assert!(v["sim_us"].as_f64().unwrap() > 0.0);
        // The same operations by cause add up to the totals; the file's data went to `data`,
        // the mount's reads to `mount`.
        let causes = v["by_cause"]
            .as_object()
            .expect("by_cause in the final JSON");
        for k in ["reads", "programs", "erases"] {
            let sum: u64 = causes.values().map(|c| c[k].as_u64().unwrap()).sum();
            assert_eq!(sum, v[k].as_u64().unwrap(), "{k} by cause: {v}");
        }
        assert!(
            causes["data"]["programs"].as_u64().unwrap() >= 100_000 / 2048,
            "{v}"
        );
        // The file's 100,000 bytes, in whole pages.
        let data_bytes = causes["data"]["program_bytes"].as_u64().unwrap();
        assert!((100_000..=100_000 + 2048).contains(&data_bytes), "{v}");
        assert!(causes["mount"]["reads"].as_u64().unwrap() > 0, "{v}");
        // A clean image: the file is there, fsck is happy, no WAL is left.
        assert_eq!(
            dffs(&["cat", s(&img), "/kept"]).ok().stdout,
            content(1, 100_000)
        );
        dffs(&["fsck", s(&img)]).ok();
        assert!(!dffs_fuse::wal_path(&img).exists());
    }
}

#[test]
fn a_killed_mount_keeps_everything_fsynced() {
    if !usable("a_killed_mount_keeps_everything_fsynced") {
        return;
    }
    let (dir, img, mnt) = place();
    let src = dir.path().join("src");
    make_tree(&src);
    let mut child = foreground(&img, &mnt, &[]);
    // A tree, then a sync of the whole file system (through a directory fsync).
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success());
    File::open(&mnt).unwrap().sync_all().unwrap();
    let mut f = File::create(mnt.join("synced")).unwrap();
    f.write_all(&content(2, 300_000)).unwrap();
    f.sync_all().unwrap();
    // Written after the last sync point: may or may not survive.
    let mut g = File::create(mnt.join("unsynced")).unwrap();
    g.write_all(&content(3, 50_000)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop((f, g));
    clear_dead_mount(&mnt);

    // Mount again (in the background, as users do) and find the synced data intact.
    let run = dffs(&["mount", s(&img), s(&mnt)]).ok();
    assert!(run.out().contains("mounted on"), "{}", run.out());
    assert!(mounted(&mnt));
    assert_eq!(fs::read(mnt.join("synced")).unwrap(), content(2, 300_000));
    fs::remove_file(mnt.join("synced")).unwrap();
    let _ = fs::remove_file(mnt.join("unsynced"));
    assert_same_tree(&src, &mnt.join("."));
    unmount(&mnt);
    // The background server saves the image and exits; then the image is clean.
    wait_until("the image is saved", || {
        dffs(&["fsck", s(&img)]).code == 0 && !dffs_fuse::wal_path(&img).exists()
    });
}

#[test]
fn read_only_and_bad_arguments() {
    if !usable("read_only_and_bad_arguments") {
        return;
    }
    let (_dir, img, mnt) = place();
    let before = fs::read(&img).unwrap();
    let mut child = foreground(&img, &mnt, &["--ro", "--cache", "1MiB"]);
    assert_eq!(
        fs::write(mnt.join("x"), b"x").unwrap_err().raw_os_error(),
        Some(libc_erofs())
    );
    unmount(&mnt);
    assert!(child.wait().unwrap().success());
    assert_eq!(fs::read(&img).unwrap(), before, "--ro wrote the image");
    dffs(&["mount", s(&img), s(&mnt), "--cache", "lots"]).fails_with("invalid --cache");
    dffs(&["mount", s(&img), s(&img)]).fails_with("not a directory");
    dffs(&["mount", s(&mnt.join("nope")), s(&mnt), "--foreground"]).fails_with("no such image");
    assert!(!mounted(&mnt));
}

/// EROFS on Linux.
fn libc_erofs() -> i32 {
    30
}

#[test]
fn mount_helper_mounts_and_remounts() {
    if !usable("mount_helper_mounts_and_remounts") {
        return;
    }
    let (dir, img, mnt) = place();
    let stats = dir.path().join("stats.json");
    // As mount.fuse3 runs it for `mount -t fuse.dffs IMG MNT -o …`.
    let opts = format!("rw,nosuid,subtype=dffs,stats={}", s(&stats));
    dffs(&[s(&img), s(&mnt), "-o", &opts]).ok();
    assert!(mounted(&mnt));
    fs::write(mnt.join("before"), b"written read-write").unwrap();
    if dffs_fuse::is_root() {
        // `mount -o remount,ro MNT` passes the source as the mount table shows it.
        let source = format!("dffs:{}", s(&img));
        dffs(&[&source, s(&mnt), "-o", "rw,remount,ro"]).ok();
        assert_eq!(
            fs::write(mnt.join("during"), b"x")
                .unwrap_err()
                .raw_os_error(),
            Some(libc_erofs())
        );
        assert_eq!(fs::read(mnt.join("before")).unwrap(), b"written read-write");
        dffs(&[&source, s(&mnt), "-o", "remount,rw"]).ok();
        fs::write(mnt.join("after"), b"read-write again").unwrap();
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: mount_helper_mounts_and_remounts: remount part (needs root)"
        );
    }
    unmount(&mnt);
    wait_until("the session writes its stats", || stats.exists());
    let mut ls = String::new();
    wait_until("the image is saved", || {
        let r = dffs(&["ls", s(&img), "/"]);
        ls = r.out();
        r.code == 0 && !dffs_fuse::wal_path(&img).exists()
    });
    assert!(ls.contains("before"), "{ls}");
    assert_eq!(ls.contains("after"), dffs_fuse::is_root(), "{ls}");
    assert!(!ls.contains("during"), "{ls}");
    // `-f` (fake) does nothing; a helper call without a mount point is an error.
    dffs(&[s(&img), s(&mnt), "-f", "-o", "rw"]).ok();
    assert!(!mounted(&mnt));
    dffs(&[s(&img), "-o", "rw"]).fails_with("usage");
}
