//! The write-ahead file of a mounted image: a session killed between writing the WAL and
//! writing the image leaves an image that `recover` completes; a torn WAL is discarded and
//! the image stays as it was at the previous persist. No FUSE needed: the library is driven
//! directly on an `ImageFlash`.

use std::fs;
use std::path::Path;

use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_fuse::{recover, wal_path, ImageFlash};
use dffs_sim::{preset, SimFlash, SimOptions};

fn image(dir: &Path) -> std::path::PathBuf {
    let p = preset::preset("nand-slc-128m")
        .unwrap()
        .with_size_bytes(8 << 20)
        .unwrap();
    let sim = SimFlash::with_options(p, SimOptions::default()).unwrap();
    let sim = Fs::format(sim, &FormatOptions::default()).unwrap();
    let path = dir.join("img");
    sim.save(&path).unwrap();
    path
}

/// Writes `name` with `data` and fsyncs it, on a session over the image at `path`; returns
/// the session's device without persisting the last sync point.
fn write_synced(path: &Path, name: &[u8], data: &[u8]) -> Fs<ImageFlash> {
    let flash = ImageFlash::new(SimFlash::open(path).unwrap(), path, true).unwrap();
    let mut fs = Fs::mount(flash, Config::default()).unwrap();
    let st = fs.create(ROOT_INO, name, 0o644, 0, 0).unwrap();
    let h = fs.open(st.ino, OpenFlags::RW).unwrap();
    fs.write(h, 0, data).unwrap();
    fs.fsync(h).unwrap();
    fs
}

fn read(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut fs = Fs::mount(SimFlash::open(path).unwrap(), Config::default()).unwrap();
    let ino = fs.resolve(format!("/{name}").as_bytes()).ok()?;
    let h = fs.open(ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let n = fs.read(h, 0, &mut buf).unwrap();
    buf.truncate(n);
    Some(buf)
}

#[test]
fn a_complete_wal_is_applied_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path());
    let mut fs = write_synced(&path, b"a", b"synced before the kill");
    fs.flash_mut().persist_wal_only().unwrap();
    drop(fs); // killed: the image file itself was never written
    assert_eq!(
        read(&path, "a"),
        None,
        "the image alone does not have it yet"
    );
    assert!(recover(&path).unwrap() > 0);
    assert!(!wal_path(&path).exists());
    assert_eq!(
        read(&path, "a").as_deref(),
        Some(&b"synced before the kill"[..])
    );
    // Applying is idempotent: nothing is left to apply.
    assert_eq!(recover(&path).unwrap(), 0);
}

#[test]
fn a_torn_wal_is_discarded_and_the_image_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path());
    let mut fs = write_synced(&path, b"first", b"one");
    fs.flash_mut().persist().unwrap();
    drop(fs);
    let before = fs::read(&path).unwrap();
    let mut fs = write_synced(&path, b"second", b"two");
    fs.flash_mut().persist_wal_only().unwrap();
    drop(fs);
    let wal = wal_path(&path);
    let len = fs::metadata(&wal).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(len - 1).unwrap();
    assert_eq!(recover(&path).unwrap(), 0);
    assert!(!wal.exists());
    assert!(
        fs::read(&path).unwrap() == before,
        "a torn WAL must not touch the image"
    );
    assert_eq!(read(&path, "first").as_deref(), Some(&b"one"[..]));
    assert_eq!(read(&path, "second"), None);
}

#[test]
fn persist_writes_the_image_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path());
    let mut fs = write_synced(&path, b"x", b"in place");
    assert!(fs.flash().dirty_pages() > 0);
    fs.flash_mut().persist().unwrap();
    assert_eq!(fs.flash().dirty_pages(), 0);
    assert_eq!(fs::metadata(wal_path(&path)).unwrap().len(), 0);
    drop(fs);
    assert_eq!(read(&path, "x").as_deref(), Some(&b"in place"[..]));
}
