//! Real FUSE mounts of small images: trees copied in with `cp -a` survive a remount byte for
//! byte, errno values, statfs, attribute changes, readdir under changes, read-only mounts,
//! and synced data reaching the image file while the session still runs.
//!
//! Each test mounts its own image in its own temporary directory. When FUSE cannot be used
//! here, each test says `SKIPPED: <reason>` on stderr (past the test harness's capture) and
//! returns, so a skip is never a silent pass.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{symlink, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use dffs::{Config, FormatOptions, Fs};
use dffs_fuse::{Background, MountOptions, Session};
use dffs_sim::{preset, SimFlash, SimOptions};

/// A small image and a mount point in a temporary directory.
struct Place {
    _dir: tempfile::TempDir,
    image: PathBuf,
    mnt: PathBuf,
}

/// A fresh 16 MiB NAND image, or `None` (after saying why) when FUSE is not usable.
fn place(test: &str) -> Option<Place> {
    if let Err(why) = dffs_fuse::fuse_usable() {
        let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("img");
    let mnt = dir.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let p = preset::preset("nand-slc-128m")
        .unwrap()
        .with_size_bytes(16 << 20)
        .unwrap();
    let sim = SimFlash::with_options(p, SimOptions::default()).unwrap();
    let sim = Fs::format(sim, &FormatOptions::default()).unwrap();
    sim.save(&image).unwrap();
    Some(Place {
        _dir: dir,
        image,
        mnt,
    })
}

fn mount(p: &Place, opts: &MountOptions) -> Background {
    let sim = SimFlash::open(&p.image).unwrap();
    let s = Session::mount(sim, &p.image, opts).unwrap();
    s.spawn(&p.mnt).unwrap()
}

fn rw() -> MountOptions {
    MountOptions::default()
}

/// The errno of a failed operation.
fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("the operation should have failed")
        .raw_os_error()
        .expect("an OS error")
}

/// Deterministic content of `len` bytes.
fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Builds a tree with files of many sizes, nested directories, symlinks, modes and times.
fn make_tree(root: &Path) {
    let sizes = [0usize, 1, 100, 2047, 2048, 4096, 5000, 65_536, 300_001];
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    fs::create_dir_all(root.join("empty")).unwrap();
    fs::create_dir_all(root.join("many")).unwrap();
    for (i, &n) in sizes.iter().enumerate() {
        fs::write(root.join(format!("f{i}")), content(i as u64, n)).unwrap();
        fs::write(
            root.join(format!("a/b/c/g{i}")),
            content(100 + i as u64, n / 3),
        )
        .unwrap();
    }
    for i in 0..150 {
        fs::write(root.join(format!("many/entry-{i:03}")), format!("{i}\n")).unwrap();
    }
    symlink("f1", root.join("link-rel")).unwrap();
    symlink("/nowhere/at/all", root.join("link-dangling")).unwrap();
    symlink("a/b", root.join("link-dir")).unwrap();
    fs::set_permissions(root.join("f2"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(root.join("f3"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(root.join("a/b"), fs::Permissions::from_mode(0o2750)).unwrap();
    let old = std::time::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 123_456_789);
    File::options()
        .write(true)
        .open(root.join("f4"))
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// Everything `cp -a` keeps, per relative path.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let md = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let ft = md.file_type();
            let what = if ft.is_symlink() {
                format!("link {}", fs::read_link(&p).unwrap().display())
            } else if ft.is_dir() {
                walk(root, &p, out);
                format!("dir {:o} {} {}", md.mode(), md.uid(), md.gid())
            } else {
                let bytes = fs::read(&p).unwrap();
                format!(
                    "file {:o} {} {} {} mtime {}.{:09} sum {:016x}",
                    md.mode(),
                    md.uid(),
                    md.gid(),
                    bytes.len(),
                    md.mtime(),
                    md.mtime_nsec(),
                    bytes
                        .iter()
                        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64)
                            .wrapping_mul(0x100_0000_01b3))
                )
            };
            out.insert(rel, what);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn cp_a_tree_survives_unmount_and_remount_byte_for_byte() {
    let Some(p) = place("cp_a_tree_survives_unmount_and_remount_byte_for_byte") else {
        return;
    };
    let src = p._dir.path().join("src");
    make_tree(&src);
    let m = mount(&p, &rw());
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(&p.mnt)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a failed");
    let before = m.stats();
    assert!(before.programs > 0, "copying in must program pages");
    m.unmount().unwrap();
    // The image alone (and its sidecar) holds the tree: mount it again.
    let m = mount(&p, &rw());
    assert_eq!(snapshot(&src), snapshot(&p.mnt));
    let out = Command::new("diff")
        .arg("-r")
        .arg("--no-dereference")
        .arg(&src)
        .arg(&p.mnt)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "diff -r: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    m.unmount().unwrap();
    // And the library agrees the image is consistent.
    let mut fs = Fs::mount(SimFlash::open(&p.image).unwrap(), Config::default()).unwrap();
    let report = fs.fsck().unwrap();
    assert!(report.is_clean(), "fsck: {:?}", report.errors);
}

#[test]
fn errno_values_are_the_posix_ones() {
    let Some(p) = place("errno_values_are_the_posix_ones") else {
        return;
    };
    let m = mount(&p, &rw());
    let d = &p.mnt;
    fs::create_dir(d.join("dir")).unwrap();
    fs::write(d.join("dir/file"), b"x").unwrap();
    fs::write(d.join("file"), b"hello").unwrap();

    assert_eq!(errno(File::open(d.join("missing"))), libc::ENOENT);
    assert_eq!(errno(fs::read_dir(d.join("missing/deeper"))), libc::ENOENT);
    assert_eq!(errno(fs::create_dir(d.join("dir"))), libc::EEXIST);
    let excl = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(d.join("file"));
    assert_eq!(errno(excl), libc::EEXIST);
    assert_eq!(errno(fs::remove_dir(d.join("dir"))), libc::ENOTEMPTY);
    let long = "n".repeat(256);
    assert_eq!(errno(fs::write(d.join(&long), b"")), libc::ENAMETOOLONG);
    assert_eq!(errno(File::open(d.join(&long))), libc::ENAMETOOLONG);
    fs::write(d.join("n".repeat(255)), b"255 is fine").unwrap();
    assert_eq!(
        errno(OpenOptions::new().write(true).open(d.join("dir"))),
        libc::EISDIR
    );
    assert_eq!(errno(fs::remove_file(d.join("dir"))), libc::EISDIR);
    assert_eq!(errno(fs::remove_dir(d.join("file"))), libc::ENOTDIR);
    assert_eq!(errno(File::open(d.join("file/x"))), libc::ENOTDIR);
    assert_eq!(
        errno(fs::rename(d.join("dir"), d.join("dir/sub"))),
        libc::EINVAL
    );
    fs::create_dir(d.join("other")).unwrap();
    assert_eq!(
        errno(fs::rename(d.join("file"), d.join("other"))),
        libc::EISDIR
    );
    assert_eq!(
        errno(fs::rename(d.join("other"), d.join("file"))),
        libc::ENOTDIR
    );
    assert_eq!(
        errno(fs::rename(d.join("other"), d.join("dir"))),
        libc::ENOTEMPTY
    );
    // Hard links: one inode under two names; a directory cannot be linked (EPERM).
    fs::hard_link(d.join("file"), d.join("dir/hl")).unwrap();
    let (a, b) = (
        fs::metadata(d.join("file")).unwrap(),
        fs::metadata(d.join("dir/hl")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    fs::write(d.join("dir/hl"), b"through the link").unwrap();
    assert_eq!(fs::read(d.join("file")).unwrap(), b"through the link");
    fs::write(d.join("file"), b"hello").unwrap();
    assert_eq!(fs::read(d.join("dir/hl")).unwrap(), b"hello");
    assert_eq!(
        errno(fs::hard_link(d.join("dir"), d.join("dl"))),
        libc::EPERM
    );
    assert_eq!(
        errno(fs::hard_link(d.join("file"), d.join("dir/hl"))),
        libc::EEXIST
    );
    fs::remove_file(d.join("dir/hl")).unwrap();
    assert_eq!(fs::metadata(d.join("file")).unwrap().nlink(), 1);
    symlink("loop2", d.join("loop1")).unwrap();
    symlink("loop1", d.join("loop2")).unwrap();
    assert_eq!(errno(File::open(d.join("loop1"))), libc::ELOOP);
    // Special files: a named pipe is created and reported as one (the kernel does its I/O).
    let made = Command::new("mkfifo").arg(d.join("fifo")).status().unwrap();
    assert!(made.success());
    let ft = fs::symlink_metadata(d.join("fifo")).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ft));
    // No extended attributes.
    let c = std::ffi::CString::new(d.join("file").as_os_str().as_encoded_bytes()).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid NUL-terminated path and name, and a buffer of the given size.
    let r = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"user.x".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    assert_eq!(r, -1);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::EOPNOTSUPP)
    );
    // Renames work, also replacing a file and across directories.
    fs::write(d.join("dir/victim"), b"old").unwrap();
    fs::rename(d.join("file"), d.join("dir/victim")).unwrap();
    assert_eq!(fs::read(d.join("dir/victim")).unwrap(), b"hello");
    assert_eq!(errno(fs::metadata(d.join("file"))), libc::ENOENT);
    m.unmount().unwrap();
}

#[test]
fn statfs_reports_the_device_and_follows_writes() {
    let Some(p) = place("statfs_reports_the_device_and_follows_writes") else {
        return;
    };
    let m = mount(&p, &rw());
    let vfs = |path: &Path| -> libc::statvfs {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path and a zeroed out-structure the call fills.
        unsafe {
            let mut s: libc::statvfs = std::mem::zeroed();
            assert_eq!(libc::statvfs(c.as_ptr(), &mut s), 0);
            s
        }
    };
    let a = vfs(&p.mnt);
    let total = a.f_blocks * a.f_frsize;
    assert!(
        total > 12 << 20 && total <= 16 << 20,
        "a 16 MiB device cannot hold {total} B"
    );
    assert!(a.f_bfree <= a.f_blocks && a.f_bavail <= a.f_bfree);
    assert_eq!(a.f_namemax, 255);
    let mut f = File::create(p.mnt.join("big")).unwrap();
    f.write_all(&content(7, 2 << 20)).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let b = vfs(&p.mnt);
    let used = (a.f_bfree - b.f_bfree) * b.f_frsize;
    assert!(
        (2 << 20..3 << 20).contains(&used),
        "writing 2 MiB took {used} B of free space"
    );
    fs::remove_file(p.mnt.join("big")).unwrap();
    m.unmount().unwrap();
}

#[test]
fn attributes_change_as_asked() {
    let Some(p) = place("attributes_change_as_asked") else {
        return;
    };
    let m = mount(&p, &rw());
    let f = p.mnt.join("f");
    fs::write(&f, content(3, 10_000)).unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o4751);
    std::os::unix::fs::chown(&f, Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(&f).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 5678));
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_234_567_890, 5);
    let file = OpenOptions::new().write(true).open(&f).unwrap();
    file.set_times(fs::FileTimes::new().set_accessed(t).set_modified(t))
        .unwrap();
    let md = fs::metadata(&f).unwrap();
    assert_eq!((md.mtime(), md.mtime_nsec()), (1_234_567_890, 5));
    assert_eq!((md.atime(), md.atime_nsec()), (1_234_567_890, 5));
    // Truncate down, then up: the new tail reads as zeros.
    file.set_len(100).unwrap();
    file.set_len(5000).unwrap();
    drop(file);
    let data = fs::read(&f).unwrap();
    assert_eq!(data.len(), 5000);
    assert_eq!(&data[..100], &content(3, 100)[..]);
    assert!(data[100..].iter().all(|&b| b == 0));
    // A sparse write far out.
    let mut w = OpenOptions::new().write(true).open(&f).unwrap();
    std::io::Seek::seek(&mut w, std::io::SeekFrom::Start(3 << 20)).unwrap();
    w.write_all(b"end").unwrap();
    drop(w);
    assert_eq!(fs::metadata(&f).unwrap().len(), (3 << 20) + 3);
    // Symlinks keep their target and are listed as links.
    symlink("some/where", p.mnt.join("l")).unwrap();
    assert_eq!(
        fs::read_link(p.mnt.join("l")).unwrap(),
        Path::new("some/where")
    );
    assert!(fs::symlink_metadata(p.mnt.join("l"))
        .unwrap()
        .file_type()
        .is_symlink());
    // Appends go to the end.
    let mut a = OpenOptions::new().append(true).open(&f).unwrap();
    a.write_all(b"++").unwrap();
    drop(a);
    assert_eq!(fs::metadata(&f).unwrap().len(), (3 << 20) + 5);
    // The kernel cleared the set-user-id bit when the owner changed and when data was
    // written, as on any Linux file system; set it again and keep it across a remount.
    assert_eq!(fs::metadata(&f).unwrap().mode() & 0o7777, 0o751);
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4751)).unwrap();
    m.unmount().unwrap();
    let m = mount(&p, &rw());
    let md = fs::metadata(&f).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o4751);
    assert_eq!((md.uid(), md.gid(), md.len()), (1234, 5678, (3 << 20) + 5));
    m.unmount().unwrap();
}

/// Directory attributes are cached by the kernel (a path walk needs each directory's), but
/// every change of a directory made through the mount shows at once: an entry added or removed
/// gives a new mtime and ctime, a subdirectory a new link count, chmod a new mode.
#[test]
fn directory_attributes_follow_entry_changes_at_once() {
    let Some(p) = place("directory_attributes_follow_entry_changes_at_once") else {
        return;
    };
    let m = mount(&p, &rw());
    let d = p.mnt.join("d");
    fs::create_dir(&d).unwrap();
    let times = |md: &fs::Metadata| (md.mtime(), md.mtime_nsec(), md.ctime(), md.ctime_nsec());
    let before = fs::metadata(&d).unwrap();
    // Asked again at once: the cached copy.
    assert_eq!(times(&fs::metadata(&d).unwrap()), times(&before));
    let pause = || std::thread::sleep(std::time::Duration::from_millis(20));
    pause();
    fs::write(d.join("f"), b"x").unwrap();
    let after_create = fs::metadata(&d).unwrap();
    assert!(
        times(&after_create) > times(&before),
        "{:?} then {:?}",
        times(&before),
        times(&after_create)
    );
    assert_eq!(after_create.nlink(), 2);
    pause();
    fs::create_dir(d.join("sub")).unwrap();
    let after_mkdir = fs::metadata(&d).unwrap();
    assert_eq!(after_mkdir.nlink(), 3);
    assert!(times(&after_mkdir) > times(&after_create));
    pause();
    fs::remove_file(d.join("f")).unwrap();
    let after_unlink = fs::metadata(&d).unwrap();
    assert!(times(&after_unlink) > times(&after_mkdir));
    pause();
    fs::rename(d.join("sub"), p.mnt.join("sub")).unwrap();
    let after_rename = fs::metadata(&d).unwrap();
    assert_eq!(after_rename.nlink(), 2);
    assert!(times(&after_rename) > times(&after_unlink));
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().mode() & 0o7777, 0o700);
    m.unmount().unwrap();
}

#[test]
fn readdir_lists_each_entry_once_while_the_directory_changes() {
    let Some(p) = place("readdir_lists_each_entry_once_while_the_directory_changes") else {
        return;
    };
    let m = mount(&p, &rw());
    let d = p.mnt.join("d");
    fs::create_dir(&d).unwrap();
    let n = 600;
    for i in 0..n {
        File::create(d.join(format!("file-{i:04}"))).unwrap();
    }
    let mut seen = BTreeMap::new();
    for (k, e) in fs::read_dir(&d).unwrap().enumerate() {
        let name = e.unwrap().file_name().into_string().unwrap();
        *seen.entry(name.clone()).or_insert(0) += 1;
        // Remove what was listed, and add entries, while the listing goes on.
        if k % 3 == 0 {
            fs::remove_file(d.join(&name)).unwrap();
        }
        if k % 50 == 0 {
            File::create(d.join(format!("new-{k}"))).unwrap();
        }
    }
    for i in 0..n {
        let name = format!("file-{i:04}");
        assert_eq!(
            seen.get(&name),
            Some(&1),
            "{name} listed {:?} times",
            seen.get(&name)
        );
    }
    assert!(seen.values().all(|&c| c == 1));
    m.unmount().unwrap();
}

#[test]
fn read_only_mounts_refuse_changes_and_leave_the_image_alone() {
    let Some(p) = place("read_only_mounts_refuse_changes_and_leave_the_image_alone") else {
        return;
    };
    let m = mount(&p, &rw());
    fs::write(p.mnt.join("kept"), b"kept").unwrap();
    m.unmount().unwrap();
    let before = fs::read(&p.image).unwrap();
    let ro = MountOptions {
        read_only: true,
        ..MountOptions::default()
    };
    let m = mount(&p, &ro);
    assert_eq!(fs::read(p.mnt.join("kept")).unwrap(), b"kept");
    assert_eq!(errno(fs::write(p.mnt.join("new"), b"x")), libc::EROFS);
    assert_eq!(errno(fs::remove_file(p.mnt.join("kept"))), libc::EROFS);
    assert_eq!(errno(fs::create_dir(p.mnt.join("d"))), libc::EROFS);
    m.unmount().unwrap();
    assert!(
        fs::read(&p.image).unwrap() == before,
        "a read-only mount wrote the image"
    );
}

/// The file `name` as the image file on disk holds it now (as a killed session would leave
/// it), read by a separate library mount of a copy of the image.
fn in_image_file(p: &Place, name: &str) -> Option<Vec<u8>> {
    let copy = p._dir.path().join(format!("copy-{name}"));
    fs::copy(&p.image, &copy).unwrap();
    fs::copy(
        dffs_sim::sidecar_path(&p.image),
        dffs_sim::sidecar_path(&copy),
    )
    .unwrap();
    dffs_fuse::recover(&copy).unwrap();
    let mut fs = Fs::mount(SimFlash::open(&copy).unwrap(), Config::default()).unwrap();
    let ino = fs.resolve(format!("/{name}").as_bytes()).ok()?;
    let fh = fs.open(ino, dffs::OpenFlags::READ).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = fs.read(fh, out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    Some(out)
}

#[test]
fn fsync_and_o_sync_reach_the_image_file_before_returning() {
    let Some(p) = place("fsync_and_o_sync_reach_the_image_file_before_returning") else {
        return;
    };
    let m = mount(&p, &rw());
    let data = content(11, 200_000);
    let mut f = File::create(p.mnt.join("synced")).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    assert_eq!(in_image_file(&p, "synced").as_deref(), Some(&data[..]));
    // O_SYNC: every write is durable when it returns, with no fsync.
    let mut s = OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_SYNC)
        .open(p.mnt.join("osync"))
        .unwrap();
    s.write_all(b"first").unwrap();
    assert_eq!(in_image_file(&p, "osync").as_deref(), Some(&b"first"[..]));
    s.write_all(b" second").unwrap();
    assert_eq!(
        in_image_file(&p, "osync").as_deref(),
        Some(&b"first second"[..])
    );
    drop(s);
    drop(f);
    // fsync through a read-only file makes the writes made through another file durable.
    let mut w = File::create(p.mnt.join("other")).unwrap();
    w.write_all(b"written by w").unwrap();
    File::open(p.mnt.join("other")).unwrap().sync_all().unwrap();
    assert_eq!(
        in_image_file(&p, "other").as_deref(),
        Some(&b"written by w"[..])
    );
    drop(w);
    m.unmount().unwrap();
}

#[test]
fn many_open_files_of_one_inode_do_not_run_out_of_handles() {
    let Some(p) = place("many_open_files_of_one_inode_do_not_run_out_of_handles") else {
        return;
    };
    let m = mount(&p, &rw());
    fs::write(p.mnt.join("f"), b"shared").unwrap();
    let files: Vec<File> = (0..600)
        .map(|i| {
            OpenOptions::new()
                .read(true)
                .write(i % 2 == 0)
                .open(p.mnt.join("f"))
                .unwrap()
        })
        .collect();
    let mut buf = String::new();
    (&files[599]).read_to_string(&mut buf).unwrap();
    assert_eq!(buf, "shared");
    drop(files);
    m.unmount().unwrap();
}

#[test]
fn sync_mounts_make_every_write_durable() {
    let Some(p) = place("sync_mounts_make_every_write_durable") else {
        return;
    };
    let opts = MountOptions {
        sync: true,
        ..MountOptions::default()
    };
    let m = mount(&p, &opts);
    let mut f = File::create(p.mnt.join("w")).unwrap();
    f.write_all(b"no fsync needed").unwrap();
    assert_eq!(
        in_image_file(&p, "w").as_deref(),
        Some(&b"no fsync needed"[..])
    );
    fs::create_dir(p.mnt.join("dir")).unwrap();
    let copy = p._dir.path().join("copy-dir");
    fs::copy(&p.image, &copy).unwrap();
    fs::copy(
        dffs_sim::sidecar_path(&p.image),
        dffs_sim::sidecar_path(&copy),
    )
    .unwrap();
    let mut lib = Fs::mount(SimFlash::open(&copy).unwrap(), Config::default()).unwrap();
    assert!(
        lib.resolve(b"/dir").is_ok(),
        "mkdir on a sync mount is durable"
    );
    drop(f);
    let mut r = String::new();
    File::open(p.mnt.join("w"))
        .unwrap()
        .read_to_string(&mut r)
        .unwrap();
    assert_eq!(r, "no fsync needed");
    m.unmount().unwrap();
}

#[test]
fn a_budget_sets_the_caches() {
    let Some(p) = place("a_budget_sets_the_caches") else {
        return;
    };
    let opts = MountOptions {
        cache_bytes: Some(4 << 20),
        ..MountOptions::default()
    };
    let m = mount(&p, &opts);
    fs::write(p.mnt.join("x"), content(1, 1 << 20)).unwrap();
    assert_eq!(fs::read(p.mnt.join("x")).unwrap(), content(1, 1 << 20));
    m.unmount().unwrap();
    let sim = SimFlash::open(&p.image).unwrap();
    let too_small = MountOptions {
        cache_bytes: Some(1000),
        ..MountOptions::default()
    };
    let err = Session::mount(sim, &p.image, &too_small)
        .err()
        .expect("a 1000 B budget is refused");
    assert!(err.contains("too small"), "{err}");
}

/// A file read again is served from the kernel's page cache, not from flash: every file is
/// opened with `FOPEN_KEEP_CACHE` (without it each open drops the cache and the second read
/// costs a flash read per page again).
#[test]
fn a_file_read_twice_is_read_from_flash_at_most_once() {
    let Some(p) = place("a_file_read_twice_is_read_from_flash_at_most_once") else {
        return;
    };
    let data = content(9, 256 << 10);
    let bg = mount(&p, &rw());
    fs::write(p.mnt.join("f"), &data).unwrap();
    bg.unmount().unwrap();
    let bg = mount(&p, &rw());
    let pages = (data.len() / 2048) as u64;
    let before = bg.stats().reads;
    assert_eq!(fs::read(p.mnt.join("f")).unwrap(), data);
    let first = bg.stats().reads - before;
    assert!(
        first >= pages,
        "the first read costs a flash read per page: {first}"
    );
    let before = bg.stats().reads;
    assert_eq!(fs::read(p.mnt.join("f")).unwrap(), data);
    let second = bg.stats().reads - before;
    assert!(
        second < pages / 8,
        "second read: {second} flash reads for {pages} pages"
    );
    bg.unmount().unwrap();
}

/// `st_blksize` is at least a kernel page, and a file written through a buffered writer in
/// chunks of it is read back from the kernel's page cache, not from flash. (It was the 2 KiB
/// data block of the image: stdio wrote in 2 KiB chunks, every page-cache page was left half
/// written and not kept, and Postmark read 84 of its 123 MB back from flash.)
#[test]
fn a_file_written_in_chunks_of_st_blksize_is_read_back_from_the_page_cache() {
    let Some(p) = place("a_file_written_in_chunks_of_st_blksize_is_read_back_from_the_page_cache")
    else {
        return;
    };
    let bg = mount(&p, &rw());
    let path = p.mnt.join("f");
    fs::write(&path, b"").unwrap();
    let blksize = fs::metadata(&path).unwrap().blksize() as usize;
    assert!(blksize >= 4096, "st_blksize {blksize}");
    assert_eq!(
        blksize % 2048,
        0,
        "st_blksize {blksize} is whole flash pages"
    );
    // What stdio does: the data in chunks of st_blksize, each its own write().
    let data = content(11, 40 * blksize);
    let mut f = OpenOptions::new().write(true).open(&path).unwrap();
    for chunk in data.chunks(blksize) {
        f.write_all(chunk).unwrap();
    }
    drop(f);
    let before = bg.stats().reads;
    assert_eq!(fs::read(&path).unwrap(), data);
    let reads = bg.stats().reads - before;
    assert!(
        reads <= 2,
        "{reads} flash reads to read back {} bytes just written",
        data.len()
    );
    bg.unmount().unwrap();
}
