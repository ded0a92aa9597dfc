//! The FUSE operations, each answered by the mounted [`dffs::Fs`].
//!
//! Owns the translation between the kernel's requests and the library's calls: inode numbers
//! (the library's, the root is 1 in both), attributes, open flags, directory cookies (the
//! library's, shifted past `.` and `..`), and when the image must be persisted (after `fsync`,
//! `fsyncdir`, an `O_SYNC` write, and every change on a `--sync` mount). It must never answer
//! a request without the library's word on it, keep file data of its own, or let a synced
//! change return before it reached the image file.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dffs::{FileKind, Fs, Ino, OpenFlags as DOpen, SetAttr, Stat, Time};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::device::SessionFlash;
use crate::errno::errno;

/// How long the kernel may trust a name or attributes we gave it. Only the kernel changes
/// the file system while it is mounted, and it invalidates what it changes itself, so names
/// can be cached; attributes are asked again each time so that times set by the library
/// (ctime on rename, mtime on write) are never stale.
const ENTRY_TTL: Duration = Duration::from_secs(1);
const ATTR_TTL: Duration = Duration::ZERO;

/// How long the kernel may trust the attributes of `st` from `getattr`: a directory's change
/// only when an entry in it is added, removed or renamed, or by `setattr`, and the kernel drops
/// what it cached of a directory on each of those itself, so they can be cached as names are
/// (with default permissions every path walk needs the attributes of each directory on the
/// way: asked each time they cost a directory-page read per component, 9.4k of the 59k page
/// reads of Postmark on a `--sync` mount). A file's are asked again each time (see above).
fn attr_ttl(st: &Stat) -> Duration {
    if st.kind == dffs::FileKind::Dir {
        ENTRY_TTL
    } else {
        ATTR_TTL
    }
}

/// Open flags of every regular file: keep the kernel's page cache across opens. File data
/// changes only through this mount (the kernel's cache sees every write and truncate), so
/// what it caches stays right, and a file read again after it was written or read is served
/// from RAM instead of flash (Postmark reads back files it wrote: issue 17).
const FILE_OPEN_FLAGS: FopenFlags = FopenFlags::FOPEN_KEEP_CACHE;

/// The mounted file system, movable between the FUSE threads.
///
/// [`Fs`] holds its clock as a `Box<dyn Clock>`, which is not `Send` as a type; the only way
/// to build this wrapper is [`MountedFs::new`], which gives the library the system clock (a
/// `Send` unit struct), so nothing in it is tied to a thread.
pub struct MountedFs(Fs<SessionFlash>);

impl MountedFs {
    /// Mounts the library on `flash` with the system clock.
    pub fn new(flash: SessionFlash, cfg: dffs::Config) -> Result<MountedFs, dffs::Error> {
        Fs::mount_with_clock(flash, cfg, Box::new(dffs::SystemClock))
            .map(MountedFs)
            .map_err(|(e, _)| e)
    }

    /// The file system, for unmounting.
    pub fn into_inner(self) -> Fs<SessionFlash> {
        self.0
    }
}

// SAFETY: see the type's documentation: the only non-`Send` part of `Fs<SessionFlash>` is the
// boxed clock, and `MountedFs::new` always boxes `SystemClock`, which is `Send`.
unsafe impl Send for MountedFs {}

impl std::ops::Deref for MountedFs {
    type Target = Fs<SessionFlash>;
    fn deref(&self) -> &Fs<SessionFlash> {
        &self.0
    }
}

impl std::ops::DerefMut for MountedFs {
    fn deref_mut(&mut self) -> &mut Fs<SessionFlash> {
        &mut self.0
    }
}

/// The kernel's open files, each mapped onto a library handle shared by every open file of
/// the same inode with the same access (the kernel releases files late: a closed file whose
/// mapped pages are still being written back stays open until the write-back ends, so one
/// library handle per kernel open could run out of handles under mmap-heavy loads).
#[derive(Default)]
pub struct Handles {
    next: u64,
    by_fh: HashMap<u64, HandleKey>,
    shared: HashMap<HandleKey, (dffs::Fh, u32)>,
}

/// Inode, write, append, sync.
type HandleKey = (Ino, bool, bool, bool);

impl Handles {
    /// Opens `ino` for the kernel; returns the kernel's file handle.
    fn open(&mut self, fs: &mut Fs<SessionFlash>, ino: Ino, f: DOpen) -> dffs::Result<u64> {
        let key = (ino, f.write, f.append, f.sync);
        match self.shared.get_mut(&key) {
            Some((_, refs)) => *refs += 1,
            None => {
                let flags = DOpen {
                    read: true,
                    truncate: false,
                    ..f
                };
                let h = fs.open(ino, flags)?;
                self.shared.insert(key, (h, 1));
            }
        }
        if f.truncate {
            let a = SetAttr {
                size: Some(0),
                ..SetAttr::default()
            };
            if let Err(e) = fs.setattr(ino, a) {
                let fh = self.register(key);
                let _ = self.release(fs, fh);
                return Err(e);
            }
        }
        Ok(self.register(key))
    }

    fn register(&mut self, key: HandleKey) -> u64 {
        self.next += 1;
        self.by_fh.insert(self.next, key);
        self.next
    }

    /// The library handle behind a kernel file handle.
    fn get(&self, fh: FileHandle) -> Result<dffs::Fh, Errno> {
        self.by_fh
            .get(&fh.0)
            .and_then(|k| self.shared.get(k))
            .map(|(h, _)| *h)
            .ok_or(Errno::EBADF)
    }

    /// Releases a kernel file handle; the library handle closes with the last of them.
    fn release(&mut self, fs: &mut Fs<SessionFlash>, fh: u64) -> Result<(), Errno> {
        let key = self.by_fh.remove(&fh).ok_or(Errno::EBADF)?;
        let Some((h, refs)) = self.shared.get_mut(&key) else {
            return Err(Errno::EBADF);
        };
        *refs -= 1;
        if *refs == 0 {
            let h = *h;
            self.shared.remove(&key);
            fs.close(h).map_err(errno)?;
        }
        Ok(())
    }

    /// The library handles of `ino` that write (an `fsync` through any file of an inode must
    /// make every write to it durable, also those made through other files).
    fn writers(&self, ino: Ino) -> Vec<dffs::Fh> {
        self.shared
            .iter()
            .filter(|((i, write, _, _), _)| *i == ino && *write)
            .map(|(_, (h, _))| *h)
            .collect()
    }

    /// Library handles open now.
    pub fn open_count(&self) -> usize {
        self.shared.len()
    }
}

/// What the mounted session shares between the FUSE threads, the signal handler and the
/// code that ends the session.
pub struct Shared {
    /// The file system (`None` once the session has unmounted it).
    pub fs: Option<MountedFs>,
    /// `--sync`: every change is persisted before it is answered.
    pub sync: bool,
    /// The first error met while persisting the image (later replies fail with `EIO`).
    pub persist_error: Option<String>,
    /// The kernel's open files.
    pub handles: Handles,
}

/// The kernel's page size: the unit of its page cache.
const PAGE_SIZE: u32 = 4096;

/// The I/O size `stat` suggests (`st_blksize`): the file system's data block, but never less
/// than a kernel page. Buffered I/O (stdio) writes in chunks of `st_blksize`; 2 KiB chunks (the
/// data block of 2 KiB-page NAND) leave every page-cache page half written, so the kernel does
/// not keep it and each later read of the file went to flash (Postmark read 84 of its 123 MB
/// from the device, and its 4 KiB writes arrived as twice as many 2 KiB synced writes).
pub fn preferred_io_size(data_block: u32) -> u32 {
    data_block.max(PAGE_SIZE)
}

/// The FUSE file system: the kernel's requests, answered by the shared [`Shared`] state.
pub struct DffsFuse {
    shared: Arc<Mutex<Shared>>,
    /// `st_blksize` of every file ([`preferred_io_size`]).
    io_size: u32,
    /// Generation of each inode number created in this session (the library reuses the
    /// numbers of deleted inodes; the kernel must not take a new inode for an old one that it
    /// still holds, e.g. a removed directory pinned by an open file). Inodes older than the
    /// session are generation 0.
    gens: Mutex<(u64, HashMap<Ino, u64>)>,
}

impl DffsFuse {
    /// A FUSE file system over `shared` (whose `fs` must be mounted).
    pub fn new(shared: Arc<Mutex<Shared>>) -> DffsFuse {
        let io_size = lock(&shared)
            .fs
            .as_ref()
            .map(|fs| preferred_io_size(fs.params().data_block))
            .unwrap_or(PAGE_SIZE);
        DffsFuse {
            shared,
            io_size,
            gens: Mutex::new((0, HashMap::new())),
        }
    }

    /// A new generation for an inode number just created.
    fn born(&self, i: Ino) -> Generation {
        let mut g = self.gens.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        let n = g.0;
        g.1.insert(i, n);
        Generation(n)
    }

    /// The generation of an existing inode.
    fn generation(&self, i: Ino) -> Generation {
        let g = self.gens.lock().unwrap_or_else(|p| p.into_inner());
        Generation(g.1.get(&i).copied().unwrap_or(0))
    }

    /// Runs `f` on the mounted file system; `EIO` once it is gone.
    fn with<R>(
        &self,
        f: impl FnOnce(&mut Fs<SessionFlash>, &mut Handles) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = lock(&self.shared);
        let sh = &mut *g;
        match sh.fs.as_mut() {
            Some(fs) => f(&mut *fs, &mut sh.handles),
            None => Err(Errno::EIO),
        }
    }

    /// Runs a change; on a `--sync` mount (or when `durable`) persists the image before the
    /// answer goes out.
    fn change<R>(
        &self,
        durable: bool,
        f: impl FnOnce(&mut Fs<SessionFlash>, &mut Handles) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = lock(&self.shared);
        let sh = &mut *g;
        let Some(fs) = sh.fs.as_mut() else {
            return Err(Errno::EIO);
        };
        let r = f(&mut *fs, &mut sh.handles);
        if durable || sh.sync {
            if let Err(e) = fs.flash_mut().persist() {
                if sh.persist_error.is_none() {
                    sh.persist_error = Some(e.to_string());
                }
                return Err(Errno::EIO);
            }
        }
        r
    }

    fn attr(&self, st: &Stat) -> FileAttr {
        attr_of(st, self.io_size)
    }
}

/// Locks the shared state, also after a panic in another thread (the library's state is
/// only changed through calls that either finish or report an error).
pub fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// A library time as a system time.
pub fn system_time(t: Time) -> SystemTime {
    if t.secs >= 0 {
        UNIX_EPOCH + Duration::new(t.secs as u64, t.nsec.min(999_999_999))
    } else {
        UNIX_EPOCH - Duration::from_secs(t.secs.unsigned_abs())
            + Duration::from_nanos(t.nsec.min(999_999_999) as u64)
    }
}

/// A system time as a library time.
pub fn dffs_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time {
            secs: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                Time {
                    secs: -(d.as_secs() as i64),
                    nsec: 0,
                }
            } else {
                Time {
                    secs: -(d.as_secs() as i64) - 1,
                    nsec: 1_000_000_000 - d.subsec_nanos(),
                }
            }
        }
    }
}

fn kind(k: FileKind) -> FileType {
    match k {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
    }
}

/// The kernel's file type of a library `Stat`: special files (pipes, sockets, devices) are
/// `FileKind::File` to the library, their type is in the mode.
fn type_of(st: &Stat) -> FileType {
    match st.mode & libc::S_IFMT {
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => kind(st.kind),
    }
}

/// The kernel's attributes of a library `Stat`.
pub fn attr_of(st: &Stat, io_size: u32) -> FileAttr {
    FileAttr {
        ino: INodeNo(st.ino as u64),
        size: st.size,
        blocks: st.blocks,
        atime: system_time(st.atime),
        mtime: system_time(st.mtime),
        ctime: system_time(st.ctime),
        crtime: system_time(st.ctime),
        kind: type_of(st),
        perm: (st.mode & 0o7777) as u16,
        nlink: st.nlink,
        uid: st.uid,
        gid: st.gid,
        rdev: st.rdev,
        blksize: io_size,
        flags: 0,
    }
}

fn ino(i: INodeNo) -> Result<Ino, Errno> {
    Ino::try_from(i.0).map_err(|_| Errno::ENOENT)
}

fn time_of(t: TimeOrNow) -> Time {
    match t {
        TimeOrNow::SpecificTime(t) => dffs_time(t),
        TimeOrNow::Now => dffs_time(SystemTime::now()),
    }
}

fn is_sync(flags: i32) -> bool {
    flags & (libc::O_SYNC | libc::O_DSYNC) != 0
}

/// The owner of a new entry in `parent`: the caller, with the parent's group when the parent
/// has the set-group-id bit (as every Linux file system does); directories inherit the bit.
fn owner(
    fs: &mut Fs<SessionFlash>,
    req: &Request,
    parent: Ino,
    mode: u32,
    dir: bool,
) -> (u32, u32, u32) {
    match fs.stat(parent) {
        Ok(p) if p.mode & libc::S_ISGID != 0 => {
            let mode = if dir { mode | libc::S_ISGID } else { mode };
            (req.uid(), p.gid, mode)
        }
        _ => (req.uid(), req.gid(), mode),
    }
}

/// Reads up to `size` bytes at `off` (short only at the end of the file).
fn read_all(
    fs: &mut Fs<SessionFlash>,
    h: dffs::Fh,
    off: u64,
    size: usize,
) -> dffs::Result<Vec<u8>> {
    let mut buf = vec![0u8; size];
    let mut done = 0;
    while done < size {
        let n = fs.read(h, off + done as u64, &mut buf[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

/// Writes all of `data` at `off`.
fn write_all(fs: &mut Fs<SessionFlash>, h: dffs::Fh, off: u64, data: &[u8]) -> dffs::Result<usize> {
    let mut done = 0;
    while done < data.len() {
        let n = fs.write(h, off + done as u64, &data[done..])?;
        if n == 0 {
            return Err(dffs::Error::Io);
        }
        done += n;
    }
    Ok(done)
}

impl Filesystem for DffsFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large writes cost fewer round trips; the kernel keeps its own limit if it is lower.
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = self.with(|fs, _| fs.lookup(ino(parent)?, name.as_bytes()).map_err(errno));
        match r {
            Ok(st) => reply.entry(&ENTRY_TTL, &self.attr(&st), self.generation(st.ino)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, i: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with(|fs, _| fs.stat(ino(i)?).map_err(errno)) {
            Ok(st) => reply.attr(&attr_ttl(&st), &self.attr(&st)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        i: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(time_of),
            mtime: mtime.map(time_of),
        };
        match self.change(false, |fs, _| fs.setattr(ino(i)?, a).map_err(errno)) {
            Ok(st) => reply.attr(&ATTR_TTL, &self.attr(&st)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, i: INodeNo, reply: ReplyData) {
        match self.with(|fs, _| fs.readlink(ino(i)?).map_err(errno)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        // Regular files, pipes, sockets and device nodes (the kernel does their I/O).
        let typ = match mode & libc::S_IFMT {
            0 => libc::S_IFREG,
            t
            @ (libc::S_IFREG | libc::S_IFIFO | libc::S_IFSOCK | libc::S_IFCHR | libc::S_IFBLK) => t,
            _ => {
                reply.error(Errno::EPERM);
                return;
            }
        };
        let r = self.change(false, |fs, _| {
            let p = ino(parent)?;
            let (uid, gid, perm) = owner(fs, req, p, mode & 0o7777, false);
            fs.mknod(p, name.as_bytes(), typ | perm, rdev, uid, gid)
                .map_err(errno)
        });
        match r {
            Ok(st) => reply.entry(&ENTRY_TTL, &self.attr(&st), self.born(st.ino)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self.change(false, |fs, _| {
            let p = ino(parent)?;
            let (uid, gid, perm) = owner(fs, req, p, mode & !umask & 0o7777, true);
            fs.mkdir(p, name.as_bytes(), perm, uid, gid).map_err(errno)
        });
        match r {
            Ok(st) => reply.entry(&ENTRY_TTL, &self.attr(&st), self.born(st.ino)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.change(false, |fs, _| {
            fs.unlink(ino(parent)?, name.as_bytes()).map_err(errno)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.change(false, |fs, _| {
            fs.rmdir(ino(parent)?, name.as_bytes()).map_err(errno)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.change(false, |fs, _| {
            let p = ino(parent)?;
            let (uid, gid, _) = owner(fs, req, p, 0o777, false);
            fs.symlink(
                p,
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
                uid,
                gid,
            )
            .map_err(errno)
        });
        match r {
            Ok(st) => reply.entry(&ENTRY_TTL, &self.attr(&st), self.born(st.ino)),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let bits = flags.bits();
        let noreplace = bits & libc::RENAME_NOREPLACE != 0;
        if bits & !libc::RENAME_NOREPLACE != 0 {
            // RENAME_EXCHANGE and RENAME_WHITEOUT have no library counterpart.
            reply.error(Errno::EINVAL);
            return;
        }
        let r = self.change(false, |fs, _| {
            let (op, np) = (ino(parent)?, ino(newparent)?);
            if noreplace {
                match fs.lookup(np, newname.as_bytes()) {
                    Ok(_) => return Err(Errno::EEXIST),
                    Err(dffs::Error::NotFound) => {}
                    Err(e) => return Err(errno(e)),
                }
            }
            fs.rename(op, name.as_bytes(), np, newname.as_bytes())
                .map_err(errno)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        _req: &Request,
        i: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = self.change(false, |fs, _| {
            fs.link(ino(i)?, ino(newparent)?, newname.as_bytes())
                .map_err(errno)
        });
        match r {
            Ok(st) => reply.entry(&ENTRY_TTL, &self.attr(&st), self.generation(st.ino)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let f = DOpen {
            // Always readable: the kernel reads through write-only handles for mmap.
            read: true,
            write,
            append: flags.0 & libc::O_APPEND != 0,
            sync: is_sync(flags.0),
            truncate: write && flags.0 & libc::O_TRUNC != 0,
        };
        match self.change(false, |fs, hs| hs.open(fs, ino(i)?, f).map_err(errno)) {
            Ok(h) => reply.opened(FileHandle(h), FILE_OPEN_FLAGS),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.with(|fs, hs| read_all(fs, hs.get(h)?, offset, size as usize).map_err(errno)) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // An O_SYNC handle's write is committed by the library before it returns; it must
        // reach the image before the caller hears of it.
        let r = self.change(is_sync(flags.0), |fs, hs| {
            write_all(fs, hs.get(h)?, offset, data).map_err(errno)
        });
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: FileHandle,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Closing an O_SYNC file is a sync point too.
        match self.change(is_sync(flags.0), |fs, hs| hs.release(fs, h.0)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&self, _req: &Request, _i: INodeNo, h: FileHandle, datasync: bool, reply: ReplyEmpty) {
        match self.change(true, |fs, hs| {
            let me = hs.get(h)?;
            let ino = fs.handle_ino(me).map_err(errno)?;
            // fdatasync: data and size only, so a write of new blocks may commit by its
            // pages' tags (no journal page).
            let sync = |fs: &mut dffs::Fs<_>, fh| {
                if datasync {
                    fs.fdatasync(fh)
                } else {
                    fs.fsync(fh)
                }
            };
            for w in hs.writers(ino) {
                sync(fs, w).map_err(errno)?;
            }
            sync(fs, me).map_err(errno)
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(|fs, _| fs.stat(ino(i)?).map_err(errno)) {
            Ok(st) if st.kind == FileKind::Dir => reply.opened(FileHandle(0), FopenFlags::empty()),
            Ok(_) => reply.error(Errno::ENOTDIR),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Offsets: 1 after ".", 2 after "..", then the library's cookie + 2 (stable across
        // changes, so a listing interrupted by creates and deletes goes on where it was).
        let r = self.with(|fs, _| {
            let dir = ino(i)?;
            let me = fs.stat(dir).map_err(errno)?;
            if me.kind != FileKind::Dir {
                return Err(Errno::ENOTDIR);
            }
            if offset < 1 && reply.add(INodeNo(dir as u64), 1, FileType::Directory, ".") {
                return Ok(());
            }
            if offset < 2 {
                let up = fs.lookup(dir, b"..").map(|s| s.ino).unwrap_or(dir);
                if reply.add(INodeNo(up as u64), 2, FileType::Directory, "..") {
                    return Ok(());
                }
            }
            let from = offset.saturating_sub(2);
            fs.readdir(dir, from, &mut |e| {
                let name = OsStr::from_bytes(&e.name);
                !reply.add(INodeNo(e.ino as u64), e.cookie + 2, kind(e.kind), name)
            })
            .map_err(errno)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.change(true, |fs, _| fs.sync().map_err(errno)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        match self.with(|fs, _| fs.statfs().map_err(errno)) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_free,
                s.files + s.files_free,
                s.files_free,
                s.block_size,
                s.name_max,
                s.block_size,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        _i: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn getxattr(&self, _req: &Request, _i: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn listxattr(&self, _req: &Request, _i: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn removexattr(&self, _req: &Request, _i: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn access(&self, _req: &Request, i: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Permissions are the kernel's (default_permissions); only existence is ours.
        match self.with(|fs, _| fs.stat(ino(i)?).map_err(errno)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let f = DOpen {
            read: true,
            write,
            append: flags & libc::O_APPEND != 0,
            sync: is_sync(flags),
            truncate: false,
        };
        let r = self.change(is_sync(flags), |fs, hs| {
            let p = ino(parent)?;
            let (uid, gid, perm) = owner(fs, req, p, mode & !umask & 0o7777, false);
            let st = fs
                .create(p, name.as_bytes(), perm, uid, gid)
                .map_err(errno)?;
            let h = hs.open(fs, st.ino, f).map_err(errno)?;
            Ok((st, h))
        });
        match r {
            Ok((st, h)) => reply.created(
                &ENTRY_TTL,
                &self.attr(&st),
                self.born(st.ino),
                FileHandle(h),
                FILE_OPEN_FLAGS,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Plain allocation only: the file grows (sparse) to cover the range. Flash space is
        // never reserved ahead, so the other modes are not offered.
        if mode != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let r = self.change(false, |fs, _| {
            let i = ino(i)?;
            let end = offset.checked_add(length).ok_or(Errno::EFBIG)?;
            let st = fs.stat(i).map_err(errno)?;
            if st.kind != FileKind::File {
                return Err(Errno::ENODEV);
            }
            if end > st.size {
                let a = SetAttr {
                    size: Some(end),
                    ..SetAttr::default()
                };
                fs.setattr(i, a).map_err(errno)?;
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        for t in [
            Time { secs: 0, nsec: 0 },
            Time {
                secs: 1_700_000_000,
                nsec: 123,
            },
            Time {
                secs: -1,
                nsec: 500_000_000,
            },
            Time {
                secs: -86_400,
                nsec: 0,
            },
        ] {
            assert_eq!(dffs_time(system_time(t)), t);
        }
    }
}
