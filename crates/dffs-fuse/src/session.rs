//! A mount session: the file system mounted on an image, served over FUSE until unmounted.
//!
//! Owns the life of a session: mounting the library on the device with the session's
//! configuration, the kernel mount (directly as root, through `fusermount3` otherwise), the
//! signals (`SIGINT`, `SIGTERM`, `SIGHUP` unmount; `SIGUSR1` reports the flash cost so far),
//! and the clean end (library unmount, image and sidecar saved whole, WAL removed). It must
//! never save an image of a read-only session, nor end a session without giving the caller
//! the flash cost or the reason it could not save.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dffs::{Config, Fs};
use dffs_sim::{SimFlash, Stats};
use fuser::{MountOption, SessionACL};

use crate::config::{mount_config, MountOptions};
use crate::device::SessionFlash;
use crate::image::{save_sidecar, ImageFlash, ImageLock};
use crate::ops::{lock, DffsFuse, MountedFs, Shared};
use dffs_mtd::MtdFlash;

/// A file system mounted on an image, ready to be served.
pub struct Session {
    shared: Arc<Mutex<Shared>>,
    image: PathBuf,
    read_only: bool,
    base: Stats,
    lock: Option<ImageLock>,
}

impl Session {
    /// Mounts the file system on `sim`, the device of the image at `image` (which must hold
    /// exactly `sim`'s contents: a WAL left by a killed session is applied first with
    /// [`crate::recover`]).
    pub fn mount(mut sim: SimFlash, image: &Path, opts: &MountOptions) -> Result<Session, String> {
        let params = probe_params(&mut sim, image, opts)?;
        let cfg = mount_config(params.as_ref(), opts)?;
        let flash = ImageFlash::new(sim, image, !opts.read_only)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        Session::start(SessionFlash::Image(Box::new(flash)), image, opts, cfg)
    }

    /// Mounts the file system on the MTD device `mtd` (the character device at `dev`). Every
    /// program reaches the chip when the library issues it; there is no image to save.
    pub fn mount_mtd(
        mut mtd: MtdFlash,
        dev: &Path,
        opts: &MountOptions,
    ) -> Result<Session, String> {
        let params = probe_params(&mut mtd, dev, opts)?;
        let cfg = mount_config(params.as_ref(), opts)?;
        Session::start(SessionFlash::Mtd(Box::new(mtd)), dev, opts, cfg)
    }

    fn start(
        flash: SessionFlash,
        image: &Path,
        opts: &MountOptions,
        cfg: Config,
    ) -> Result<Session, String> {
        let base = flash.stats();
        let fs = MountedFs::new(flash, cfg).map_err(|e| cannot_mount(image, e))?;
        Ok(Session {
            shared: Arc::new(Mutex::new(Shared {
                fs: Some(fs),
                sync: opts.sync,
                persist_error: None,
                handles: Default::default(),
            })),
            image: image.to_path_buf(),
            read_only: opts.read_only,
            base,
            lock: None,
        })
    }

    /// Keeps `lock` (taken before the image was opened) until the session has saved the
    /// image.
    pub fn hold(&mut self, lock: ImageLock) {
        self.lock = Some(lock);
    }

    /// The FUSE operations of this session.
    pub fn fuse(&self) -> DffsFuse {
        DffsFuse::new(self.shared.clone())
    }

    /// What the flash paid since the session began (the mount included).
    pub fn stats(&self) -> Stats {
        session_stats(&self.shared, &self.base)
    }

    /// The kernel mount options of this session.
    pub fn fuse_config(&self) -> fuser::Config {
        let mut c = fuser::Config::default();
        c.mount_options = vec![
            MountOption::FSName(format!("dffs:{}", self.image.display())),
            // The kernel checks modes, owners and the sticky bit, as for any local file system.
            MountOption::DefaultPermissions,
            MountOption::NoDev,
            if self.read_only {
                MountOption::RO
            } else {
                MountOption::RW
            },
        ];
        // Root mounts for everyone (as a local file system is); a user's mount is the user's.
        c.acl = if is_root() {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        // The mount's type is `fuse.dffs`, so that mount(8) finds our helper for a remount
        // (`mount -o remount,ro DIR`). fusermount3 takes the subtype as its own option; a
        // root mount passes it to the kernel directly.
        c.mount_options.push(if is_root() {
            MountOption::CUSTOM("subtype=dffs".into())
        } else {
            MountOption::Subtype("dffs".into())
        });
        c.n_threads = Some(1);
        c
    }

    /// Ends the session: unmounts the library cleanly and, unless read-only, saves the image
    /// and its sidecar whole. Returns what the flash paid during the session.
    pub fn finish(self) -> Result<Stats, String> {
        self.finish_counted().map(|(stats, _)| stats)
    }

    /// [`Session::finish`], with the library's operation counts (by cause) taken just before
    /// the unmount: what the flash paid beyond them is the unmount's own checkpoint.
    pub fn finish_counted(self) -> Result<(Stats, dffs::OpCounts), String> {
        let fs = lock(&self.shared).fs.take();
        let persist_error = lock(&self.shared).persist_error.take();
        let Some(fs) = fs else {
            return Err("the session was already finished".into());
        };
        let path = &self.image;
        let ops = fs.op_counts();
        let (flash, unmounted) = match fs.into_inner().try_unmount() {
            Ok(flash) => (flash, Ok(())),
            Err((e, flash)) => (flash, Err(e)),
        };
        let stats = flash.stats().since(&self.base);
        if let (false, SessionFlash::Image(mut flash)) = (self.read_only, flash) {
            // Saved even when the library could not unmount cleanly: the image is then as
            // after a power cut, and everything synced is in it. The pages go in place (the
            // image keeps its inode and our lock), then the sidecar; if writing in place
            // fails, the whole image is saved anew.
            let in_place = flash.persist().map_err(|e| e.to_string());
            let sim = (*flash).into_sim();
            match in_place {
                Ok(()) => save_sidecar(&sim, path)?,
                Err(_) => sim.save(path).map_err(|e| e.to_string())?,
            }
            ImageFlash::forget_wal(path);
        }
        drop(self.lock);
        if let Err(e) = unmounted {
            return Err(format!(
                "{}: cannot unmount cleanly: {e} (the image was saved as after a power cut)",
                path.display()
            ));
        }
        if let Some(e) = persist_error {
            return Err(format!(
                "{}: a sync could not reach the image during the session ({e}); the image \
                 was saved at unmount",
                path.display()
            ));
        }
        Ok((stats, ops))
    }

    /// Serves the kernel in this thread until the file system is unmounted (`umount`,
    /// `fusermount3 -u`, or a signal), then finishes the session ([`Session::finish_counted`]).
    /// `SIGUSR1` calls `report` with the flash cost so far and the library's counts.
    pub fn run(
        self,
        mountpoint: &Path,
        report: impl Fn(Stats, Option<dffs::OpCounts>) + Send + 'static,
    ) -> Result<(Stats, dffs::OpCounts), String> {
        // Block the signals in every thread (FUSE's threads inherit the mask); one thread
        // waits for them.
        let set = signal_set();
        block(&set).map_err(|e| format!("cannot block signals: {e}"))?;
        let cfg = self.fuse_config();
        let mut fuse = fuser::Session::new(self.fuse(), mountpoint, &cfg)
            .map_err(|e| format!("{}: cannot mount: {e}", mountpoint.display()))?;
        let mut unmounter = fuse.unmount_callable();
        let shared = self.shared.clone();
        let base = self.base;
        let mp = mountpoint.to_path_buf();
        std::thread::Builder::new()
            .name("dffs-signals".into())
            .spawn(move || loop {
                match wait(&set) {
                    Some(libc::SIGUSR1) => report(
                        session_stats(&shared, &base),
                        lock(&shared).fs.as_ref().map(|fs| fs.op_counts()),
                    ),
                    Some(_) => {
                        if unmounter.unmount().is_err() {
                            // Busy (a shell's working directory, an open file): detach it now;
                            // the session ends when the last user lets go.
                            lazy_unmount(&mp);
                        }
                    }
                    None => return,
                }
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
        let served = fuse.run();
        let finished = self.finish_counted();
        served.map_err(|e| format!("{}: FUSE session failed: {e}", mountpoint.display()))?;
        finished
    }
}

/// A session served by a background thread (for tests and embedding): ends with
/// [`Background::unmount`].
pub struct Background {
    fuse: fuser::BackgroundSession,
    session: Session,
}

impl Session {
    /// Mounts at `mountpoint` and serves the kernel from a background thread.
    pub fn spawn(self, mountpoint: &Path) -> Result<Background, String> {
        let cfg = self.fuse_config();
        let fuse = fuser::spawn_mount(self.fuse(), mountpoint, &cfg)
            .map_err(|e| format!("{}: cannot mount: {e}", mountpoint.display()))?;
        Ok(Background {
            fuse,
            session: self,
        })
    }
}

impl Background {
    /// What the flash paid since the session began.
    pub fn stats(&self) -> Stats {
        self.session.stats()
    }

    /// Unmounts, waits for the FUSE thread and finishes the session (see [`Session::finish`]).
    pub fn unmount(self) -> Result<Stats, String> {
        let served = self.fuse.umount_and_join();
        let finished = self.session.finish();
        served.map_err(|e| format!("FUSE session failed: {e}"))?;
        finished
    }
}

/// With `--cache`, the budget's caches depend on the format: a read-only look at it first.
fn probe_params<F: dffs::Flash>(
    flash: &mut F,
    image: &Path,
    opts: &MountOptions,
) -> Result<Option<dffs::Params>, String> {
    if opts.cache_bytes.is_none() {
        return Ok(None);
    }
    let probe = Config {
        read_only: true,
        ..Config::default()
    };
    match Fs::mount(flash, probe) {
        Ok(fs) => Ok(Some(fs.params())),
        Err(e) => Err(cannot_mount(image, e)),
    }
}

fn cannot_mount(image: &Path, e: dffs::Error) -> String {
    match e {
        dffs::Error::NoFileSystem => format!(
            "{}: cannot mount: {e} (create one with 'dffs format')",
            image.display()
        ),
        _ => format!("{}: cannot mount: {e}", image.display()),
    }
}

fn session_stats(shared: &Mutex<Shared>, base: &Stats) -> Stats {
    match lock(shared).fs.as_ref() {
        Some(fs) => fs.flash().stats().since(base),
        None => Stats::default(),
    }
}

/// Whether this process runs as root (and so mounts without `fusermount3`).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Detaches `mountpoint` (as `umount -l`): directly as root, through `fusermount3 -u -z`
/// otherwise.
pub fn lazy_unmount(mountpoint: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if is_root() {
        if let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) {
            // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                return;
            }
        }
    }
    let _ = std::process::Command::new("fusermount3")
        .args(["-u", "-z", "--"])
        .arg(mountpoint)
        .status();
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a sigset_t we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn block(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: `set` is an initialised signal set; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

fn wait(set: &libc::sigset_t) -> Option<i32> {
    let mut sig = 0;
    // SAFETY: `set` is initialised and blocked in this thread; `sig` is a valid out pointer.
    let r = unsafe { libc::sigwait(set, &mut sig) };
    (r == 0).then_some(sig)
}
