//! DFFS over FUSE: a DFFS image mounted as a Linux file system.
//!
//! Owns the mount and nothing below it: the library ([`dffs::Fs`]) decides every answer, the
//! simulator ([`dffs_sim::SimFlash`]) or a Linux MTD device ([`dffs_mtd::MtdFlash`]) is the device, and this crate connects them to the kernel
//! and to the image file. It must never implement file-system behaviour of its own (what the
//! library does not support is reported as unsupported, not emulated).
//!
//! - [`device`]: the device of a session: an image ([`image`]) or a Linux MTD device.
//! - [`image`]: the device written through to its image file at every sync point, with a WAL
//!   so that a killed session leaves an image that mounts again with everything synced.
//! - [`config`]: `--cache SIZE`, `--sync`, `--ro` as a library configuration.
//! - [`ops`]: the FUSE operations.
//! - [`session`]: mounting, serving, signals, and the clean end of a session.
//! - [`errno`]: library errors as the kernel's errno values.

pub mod config;
pub mod device;
pub mod errno;
pub mod image;
pub mod ops;
pub mod session;

pub use config::MountOptions;
pub use device::{mtd_stats, SessionFlash};
pub use image::{recover, save_sidecar, wal_path, ImageFlash, ImageLock};
pub use session::{is_root, lazy_unmount, Background, Session};

/// Whether this machine can mount FUSE file systems here: `Err` with the reason when not
/// (tests use it to skip with a message instead of passing silently).
pub fn fuse_usable() -> Result<(), String> {
    // Also fusermount3, which mounts for users, opens the device with the user's rights.
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => {}
        Err(e) => return Err(format!("/dev/fuse cannot be opened: {e}")),
    }
    if !is_root()
        && std::process::Command::new("fusermount3")
            .arg("-V")
            .output()
            .is_err()
    {
        return Err("not root, and fusermount3 (Debian package fuse3) is not installed".into());
    }
    Ok(())
}
