//! Namespace operations (lookup, create, mkdir, symlink, unlink, rmdir, rename, setattr,
//! readdir, path resolution) and [`Fs::apply`], the single place where a journal record
//! changes the RAM state, live or during replay.

use alloc::vec::Vec;

use super::Fs;
use crate::error::{Error, Result};
use crate::format::attrs::{
    Attrs, Ino, Time, ROOT_INO, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG,
    S_IFSOCK,
};
use crate::format::params::SYMLINK_MAX;
use crate::format::params::{Addr, NAME_MAX};
use crate::index::dir::{name_hash, name_key};
use crate::index::dir::{DirRoot, Slot, PLACEHOLDER};
use crate::index::file::{Content, FileNode};
use crate::index::inode_map::MapEntry;
use crate::journal::{mask, Record};
use dffs_flash::Flash;

/// Kind of a file-system object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
}

/// Attributes of a file or directory, as `stat` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: Ino,
    /// Kind.
    pub kind: FileKind,
    /// Mode (type and permission bits).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Hard links (files: 1; directories: 2 + subdirectories).
    pub nlink: u32,
    /// Access time.
    pub atime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Change time.
    pub ctime: Time,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    /// Device number of a character or block device (0 for everything else).
    pub rdev: u32,
}

/// One directory entry returned by readdir.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Name.
    pub name: Vec<u8>,
    /// Inode number.
    pub ino: Ino,
    /// Kind.
    pub kind: FileKind,
    /// Cookie to pass to continue after this entry (stable across inserts and deletes of
    /// other entries).
    pub cookie: u64,
}

/// Attribute changes for [`Fs::setattr`] (`None`: unchanged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// Permission bits (the type bits are kept).
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
    /// Size (truncate or extend).
    pub size: Option<u64>,
    /// Access time.
    pub atime: Option<Time>,
    /// Modification time.
    pub mtime: Option<Time>,
}

/// A name found in a directory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub slot: Slot,
    pub ino: Ino,
    pub is_dir: bool,
}

fn kind_of(mode: u32) -> FileKind {
    match mode & S_IFMT {
        S_IFDIR => FileKind::Dir,
        S_IFLNK => FileKind::Symlink,
        _ => FileKind::File,
    }
}

/// Whether file `node` can take the name `name` in `parent` (a new hard link, or with
/// `replacing` a rename of that name of a linked file): the names must fit the inode node
/// beside its content (`NameTooLong` otherwise), and two names of one file in one directory
/// must not share a hash, which would make identical slots (`TooManyLinks`; the chance is
/// 2^-31 per pair).
fn check_linked_name(
    p: &crate::format::params::Params,
    node: &FileNode,
    parent: Ino,
    name: &[u8],
    replacing: Option<(Ino, &[u8])>,
) -> Result<()> {
    let key = name_key(name, false);
    if node
        .names()
        .any(|(d, n)| d == parent && name_key(n, false) == key && replacing != Some((d, n)))
    {
        return Err(Error::TooManyLinks);
    }
    let names_after = match replacing {
        Some((_, old)) => node.names_len() - old.len() + name.len(),
        // A first link adds the count byte of the list, every link a 5-byte name header.
        None => node.names_len() + usize::from(!node.linked) + 5 + name.len(),
    };
    if node.worst_len(p, names_after) > p.dir_page {
        return Err(Error::NameTooLong);
    }
    Ok(())
}

impl<F: Flash> Fs<F> {
    // ----- lookups ----------------------------------------------------------------------

    /// Checks that `ino` is a directory.
    pub(crate) fn expect_dir(&mut self, ino: Ino) -> Result<()> {
        match self.map.get(&mut self.st, ino)? {
            MapEntry::Dir(_) => Ok(()),
            MapEntry::File { .. } | MapEntry::Linked(_) | MapEntry::Orphan => Err(Error::NotDir),
            MapEntry::Free => Err(Error::NotFound),
        }
    }

    /// Finds `name` in directory `parent`.
    pub(crate) fn find(&mut self, parent: Ino, name: &[u8]) -> Result<Option<Found>> {
        self.expect_dir(parent)?;
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        let hash = name_hash(name);
        let cands = self
            .dirs
            .candidates(&mut self.st, &mut self.map, parent, hash)?;
        // A candidate with this name's hash that cannot be read is, almost surely, the entry
        // looked for: when nothing else matches, the answer is EIO, not "no such name".
        let mut damaged = false;
        for s in cands {
            if s.is_dir() {
                match self.dirs.root(&mut self.st, &mut self.map, s.ptr) {
                    Ok(r) if r.name == name => {
                        return Ok(Some(Found {
                            slot: s,
                            ino: s.ptr,
                            is_dir: true,
                        }))
                    }
                    Ok(_) => {}
                    Err(Error::Corrupt) | Err(Error::Io) | Err(Error::NotFound) => damaged = true,
                    Err(e) => return Err(e),
                }
            } else if s.is_placeholder() {
                // A dirty inode (cached), or a file with hard links (through the inode map).
                let ino = s.ptr & !PLACEHOLDER;
                let hit = match self.placeholder_file(ino) {
                    Ok(Some(node)) => node.has_name(parent, name),
                    Ok(None) => false,
                    Err(Error::Corrupt) | Err(Error::Io) => {
                        damaged = true;
                        false
                    }
                    Err(e) => return Err(e),
                };
                if hit {
                    return Ok(Some(Found {
                        slot: s,
                        ino,
                        is_dir: false,
                    }));
                }
            } else {
                let node = match self.read_inode(Addr(s.ptr), 0) {
                    Ok(n) => n,
                    Err(Error::Corrupt) | Err(Error::Io) => {
                        damaged = true;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                if node.name == name && node.parent == parent {
                    let ino = node.ino;
                    if !self.files.contains_key(&ino) {
                        self.cache_file(node, false);
                    }
                    return Ok(Some(Found {
                        slot: s,
                        ino,
                        is_dir: false,
                    }));
                }
            }
        }
        if damaged {
            return Err(Error::Io);
        }
        Ok(None)
    }

    /// The inode a placeholder slot stands for: a dirty file in the cache, or a file with
    /// hard links (loaded through the inode map); None for anything else.
    fn placeholder_file(&mut self, ino: Ino) -> Result<Option<&FileNode>> {
        if !self.files.contains_key(&ino) {
            match self.map.get(&mut self.st, ino)? {
                MapEntry::Linked(_) => {
                    self.load_file(ino)?;
                }
                _ => return Ok(None),
            }
        }
        Ok(self.files.get(&ino).map(|c| &c.node))
    }

    /// Looks `name` up in `parent`.
    pub fn lookup(&mut self, parent: Ino, name: &[u8]) -> Result<Stat> {
        self.guard(|fs| {
            if name == b"." {
                return fs.stat_inner(parent);
            }
            if name == b".." {
                fs.expect_dir(parent)?;
                let pp = fs.dirs.root(&mut fs.st, &mut fs.map, parent)?.parent;
                return fs.stat_inner(pp);
            }
            match fs.find(parent, name)? {
                Some(f) => fs.stat_inner(f.ino),
                None => Err(Error::NotFound),
            }
        })
    }

    /// Attributes of `ino`.
    pub fn stat(&mut self, ino: Ino) -> Result<Stat> {
        self.guard(|fs| fs.stat_inner(ino))
    }

    pub(crate) fn stat_inner(&mut self, ino: Ino) -> Result<Stat> {
        let entry = self.map.get(&mut self.st, ino)?;
        let p = self.st.p();
        match entry {
            MapEntry::Dir(_) => {
                let r = self.dirs.root(&mut self.st, &mut self.map, ino)?;
                let size = p.dir_page as u64 * (1 + r.nbuckets() as u64);
                Ok(Stat {
                    ino,
                    kind: FileKind::Dir,
                    mode: r.attrs.mode,
                    uid: r.attrs.uid,
                    gid: r.attrs.gid,
                    size,
                    nlink: r.subdirs.saturating_add(2),
                    atime: r.attrs.atime,
                    mtime: r.attrs.mtime,
                    ctime: r.attrs.ctime,
                    blocks: size / 512,
                    rdev: 0,
                })
            }
            MapEntry::File { .. } | MapEntry::Linked(_) | MapEntry::Orphan => {
                let (attrs, mut size, nlink, rdev) =
                    match self.inos.get(&ino).and_then(|o| o.orphan.as_ref()) {
                        Some(n) => (n.attrs, n.size, 0, 0),
                        None => {
                            let c = self.load_file(ino)?;
                            let rdev = match (&c.node.content.inline, c.node.attrs.is_special()) {
                                (Some(d), true) if d.len() == 4 => {
                                    u32::from_le_bytes([d[0], d[1], d[2], d[3]])
                                }
                                _ => 0,
                            };
                            (c.node.attrs, c.node.size, c.node.nlink(), rdev)
                        }
                    };
                if attrs.is_special() {
                    size = 0;
                }
                let mut attrs = attrs;
                if let Some(ov) = self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
                    size = ov.size;
                    attrs.mtime = ov.mtime;
                    attrs.ctime = ov.ctime;
                }
                Ok(Stat {
                    ino,
                    kind: kind_of(attrs.mode),
                    mode: attrs.mode,
                    uid: attrs.uid,
                    gid: attrs.gid,
                    size,
                    nlink,
                    atime: attrs.atime,
                    mtime: attrs.mtime,
                    ctime: attrs.ctime,
                    blocks: size.div_ceil(p.data_block as u64) * (p.data_block as u64 / 512).max(1),
                    rdev,
                })
            }
            MapEntry::Free => Err(Error::NotFound),
        }
    }

    /// Target of symlink `ino`.
    pub fn readlink(&mut self, ino: Ino) -> Result<Vec<u8>> {
        self.guard(|fs| {
            if let MapEntry::Dir(_) = fs.map.get(&mut fs.st, ino)? {
                return Err(Error::Invalid);
            }
            let c = fs.load_file(ino)?;
            if !c.node.attrs.is_symlink() {
                return Err(Error::Invalid);
            }
            c.node.content.inline.clone().ok_or(Error::Corrupt)
        })
    }

    // ----- creation ---------------------------------------------------------------------

    fn check_new_name(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        crate::index::dir::check_name(name)?;
        self.expect_dir(parent)?;
        if self.find(parent, name)?.is_some() {
            return Err(Error::Exists);
        }
        Ok(())
    }

    fn create_any(
        &mut self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
        target: &[u8],
    ) -> Result<Stat> {
        self.writable()?;
        self.check_new_name(parent, name)?;
        self.meta_space()?;
        let ino = self.map.find_free(&mut self.st)?;
        let now = self.now();
        let rec = Record::Create {
            tid: self.tx.unwrap_or(0),
            ino,
            parent,
            attrs: Attrs {
                mode,
                uid,
                gid,
                atime: now,
                mtime: now,
                ctime: now,
            },
            name: name.to_vec(),
            target: target.to_vec(),
        };
        self.journal(&rec)?;
        self.apply(&rec)?;
        self.after_op()?;
        self.stat_inner(ino)
    }

    /// Creates an empty regular file (`EEXIST` if the name exists).
    pub fn create(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Stat> {
        self.guard(|fs| fs.create_any(parent, name, S_IFREG | (perm & 0o7777), uid, gid, b""))
    }

    /// Creates a directory.
    pub fn mkdir(
        &mut self,
        parent: Ino,
        name: &[u8],
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Stat> {
        self.guard(|fs| fs.create_any(parent, name, S_IFDIR | (perm & 0o7777), uid, gid, b""))
    }

    /// Creates a symbolic link to `target`.
    pub fn symlink(
        &mut self,
        parent: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Stat> {
        self.guard(|fs| {
            if target.is_empty() || target.contains(&0) {
                return Err(Error::Invalid);
            }
            if target.len()
                > SYMLINK_MAX.min(crate::index::file::inline_limit(&fs.st.p(), name.len()).max(64))
            {
                return Err(Error::NameTooLong);
            }
            fs.create_any(parent, name, S_IFLNK | 0o777, uid, gid, target)
        })
    }

    /// Creates a special file: a named pipe (`S_IFIFO`), a socket (`S_IFSOCK`), or a character
    /// (`S_IFCHR`) or block (`S_IFBLK`) device with device number `rdev`; `S_IFREG` creates a
    /// regular file. The file system stores such inodes and reports them; opening them for
    /// I/O is the operating system's business (the library refuses it with `Invalid`).
    pub fn mknod(
        &mut self,
        parent: Ino,
        name: &[u8],
        mode: u32,
        rdev: u32,
        uid: u32,
        gid: u32,
    ) -> Result<Stat> {
        self.guard(|fs| {
            let perm = mode & 0o7777;
            match mode & S_IFMT {
                S_IFREG => fs.create_any(parent, name, S_IFREG | perm, uid, gid, b""),
                t @ (S_IFIFO | S_IFSOCK) => fs.create_any(parent, name, t | perm, uid, gid, b""),
                t @ (S_IFCHR | S_IFBLK) => {
                    fs.create_any(parent, name, t | perm, uid, gid, &rdev.to_le_bytes())
                }
                _ => Err(Error::Invalid),
            }
        })
    }

    /// Gives file `ino` another name, `name` in `parent` (a hard link). The first link
    /// moves the file from its parent's physical pointer to the inode map (every name's slot
    /// then points at it logically). A directory cannot be linked (`NotPermitted`); a file
    /// whose names no longer fit its inode node gets `TooManyLinks`.
    pub fn link(&mut self, ino: Ino, parent: Ino, name: &[u8]) -> Result<Stat> {
        self.guard(|fs| {
            fs.writable()?;
            match fs.map.get(&mut fs.st, ino)? {
                MapEntry::Dir(_) => return Err(Error::NotPermitted),
                MapEntry::File { .. } | MapEntry::Linked(_) => {}
                MapEntry::Orphan | MapEntry::Free => return Err(Error::NotFound),
            }
            fs.check_new_name(parent, name)?;
            let p = fs.st.p();
            let node = &fs.load_file(ino)?.node;
            if node.links.len() >= crate::index::file::LINKS_MAX {
                return Err(Error::TooManyLinks);
            }
            check_linked_name(&p, node, parent, name, None).map_err(|_| Error::TooManyLinks)?;
            fs.meta_space()?;
            let rec = Record::HardLink {
                tid: fs.tx.unwrap_or(0),
                ino,
                parent,
                name: name.to_vec(),
                time: fs.now(),
            };
            fs.journal(&rec)?;
            fs.apply(&rec)?;
            fs.after_op()?;
            fs.stat_inner(ino)
        })
    }

    // ----- removal ----------------------------------------------------------------------

    /// Removes a file or symlink.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            let f = fs.find(parent, name)?.ok_or(Error::NotFound)?;
            if f.is_dir {
                return Err(Error::IsDir);
            }
            let rec = Record::Unlink {
                tid: fs.tx.unwrap_or(0),
                ino: f.ino,
                is_dir: false,
                parent,
                key: f.slot.key,
                time: fs.now(),
            };
            fs.journal(&rec)?;
            fs.apply(&rec)?;
            fs.after_op()
        })
    }

    /// Removes an empty directory (`ENOTEMPTY` otherwise).
    pub fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            if name == b"." {
                return Err(Error::Invalid);
            }
            if name == b".." {
                return Err(Error::NotEmpty);
            }
            let f = fs.find(parent, name)?.ok_or(Error::NotFound)?;
            if !f.is_dir {
                return Err(Error::NotDir);
            }
            if fs.dirs.root(&mut fs.st, &mut fs.map, f.ino)?.entries != 0 {
                return Err(Error::NotEmpty);
            }
            let rec = Record::Unlink {
                tid: fs.tx.unwrap_or(0),
                ino: f.ino,
                is_dir: true,
                parent,
                key: f.slot.key,
                time: fs.now(),
            };
            fs.journal(&rec)?;
            fs.apply(&rec)?;
            fs.after_op()
        })
    }

    /// Whether directory `a` is `b` or one of its ancestors.
    fn is_ancestor(&mut self, a: Ino, mut b: Ino) -> Result<bool> {
        for _ in 0..4096 {
            if a == b {
                return Ok(true);
            }
            if b == ROOT_INO {
                return Ok(false);
            }
            b = self.dirs.root(&mut self.st, &mut self.map, b)?.parent;
        }
        Err(Error::Corrupt)
    }

    /// Renames `old_name` in `old_parent` to `new_name` in `new_parent`, atomically
    /// replacing an existing target of a compatible kind.
    pub fn rename(
        &mut self,
        old_parent: Ino,
        old_name: &[u8],
        new_parent: Ino,
        new_name: &[u8],
    ) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            crate::index::dir::check_name(new_name)?;
            if old_name == b"." || old_name == b".." {
                return Err(Error::Invalid);
            }
            fs.expect_dir(new_parent)?;
            let src = fs.find(old_parent, old_name)?.ok_or(Error::NotFound)?;
            // Moving a directory under itself is refused before anything else (as Linux does).
            if src.is_dir && fs.is_ancestor(src.ino, new_parent)? {
                return Err(Error::Invalid);
            }
            let dst = fs.find(new_parent, new_name)?;
            if let Some(d) = dst {
                if d.ino == src.ino {
                    return Ok(());
                }
                match (src.is_dir, d.is_dir) {
                    (true, false) => return Err(Error::NotDir),
                    (false, true) => return Err(Error::IsDir),
                    (true, true) if fs.dirs.root(&mut fs.st, &mut fs.map, d.ino)?.entries != 0 => {
                        return Err(Error::NotEmpty);
                    }
                    _ => {}
                }
            }
            if !src.is_dir {
                let p = fs.st.p();
                let node = &fs.load_file(src.ino)?.node;
                if node.linked {
                    let replacing = Some((old_parent, old_name));
                    check_linked_name(&p, node, new_parent, new_name, replacing)?;
                }
            }
            fs.meta_space()?;
            let rec = Record::Rename {
                tid: fs.tx.unwrap_or(0),
                ino: src.ino,
                is_dir: src.is_dir,
                old_parent,
                old_key: src.slot.key,
                new_parent,
                name: new_name.to_vec(),
                victim: dst.map(|d| d.ino).unwrap_or(0),
                victim_is_dir: dst.map(|d| d.is_dir).unwrap_or(false),
                time: fs.now(),
            };
            fs.journal(&rec)?;
            fs.apply(&rec)?;
            fs.after_op()
        })
    }

    // ----- attributes -------------------------------------------------------------------

    /// Changes attributes (size changes truncate or extend the file).
    pub fn setattr(&mut self, ino: Ino, a: SetAttr) -> Result<Stat> {
        self.guard(|fs| {
            fs.writable()?;
            let is_dir = matches!(fs.map.get(&mut fs.st, ino)?, MapEntry::Dir(_));
            if let Some(size) = a.size {
                if is_dir {
                    return Err(Error::IsDir);
                }
                if fs.load_file(ino)?.node.attrs.is_special() {
                    return Err(Error::Invalid);
                }
                fs.truncate_ino(ino, size)?;
            }
            let mut m = 0;
            let mut attrs = Attrs::default();
            if let Some(mode) = a.mode {
                m |= mask::MODE;
                attrs.mode = mode & 0o7777;
            }
            if let Some(u) = a.uid {
                m |= mask::UID;
                attrs.uid = u;
            }
            if let Some(g) = a.gid {
                m |= mask::GID;
                attrs.gid = g;
            }
            if let Some(t) = a.atime {
                m |= mask::ATIME;
                attrs.atime = t;
            }
            if let Some(t) = a.mtime {
                m |= mask::MTIME;
                attrs.mtime = t;
            }
            if m != 0 {
                m |= mask::CTIME;
                attrs.ctime = fs.now();
                fs.stat_inner(ino)?;
                let rec = Record::Setattr {
                    tid: fs.tx.unwrap_or(0),
                    ino,
                    mask: m,
                    attrs,
                };
                fs.journal(&rec)?;
                fs.apply(&rec)?;
                // An open file's uncommitted times follow explicit changes.
                if let Some(ov) = fs.inos.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
                    if m & mask::MTIME != 0 {
                        ov.mtime = attrs.mtime;
                    }
                    ov.ctime = attrs.ctime;
                }
                fs.after_op()?;
            }
            fs.stat_inner(ino)
        })
    }

    /// Sets the compression of file `ino` for data written from now on (`compress::NONE`,
    /// `LZ4` or `DEFLATE`). Blocks already written keep the form they were written in (each
    /// compressed data node records its own algorithm), so a file can hold both.
    pub fn set_compression(&mut self, ino: Ino, algo: u8) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            if algo > crate::format::compress::DEFLATE {
                return Err(Error::Invalid);
            }
            match fs.map.get(&mut fs.st, ino)? {
                MapEntry::Dir(_) => return Err(Error::IsDir),
                MapEntry::File { .. } | MapEntry::Linked(_) | MapEntry::Orphan => {}
                MapEntry::Free => return Err(Error::NotFound),
            }
            let rec = Record::Setattr {
                tid: fs.tx.unwrap_or(0),
                ino,
                mask: mask::COMPRESS | (algo as u32) << mask::COMPRESS_SHIFT,
                attrs: Attrs::default(),
            };
            fs.journal(&rec)?;
            fs.apply(&rec)?;
            fs.after_op()
        })
    }

    /// The compression of file `ino` (what data written to it now gets).
    pub fn compression(&mut self, ino: Ino) -> Result<u8> {
        self.guard(|fs| {
            if let Some(n) = fs.inos.get(&ino).and_then(|o| o.orphan.as_ref()) {
                return Ok(n.compression);
            }
            match fs.map.get(&mut fs.st, ino)? {
                MapEntry::Dir(_) => Err(Error::IsDir),
                MapEntry::File { .. } | MapEntry::Linked(_) => {
                    Ok(fs.load_file(ino)?.node.compression)
                }
                _ => Err(Error::NotFound),
            }
        })
    }

    // ----- readdir ----------------------------------------------------------------------

    /// Lists directory `ino` from `cookie` (0: the start): calls `f` for each entry until it
    /// returns false. Entries are in hash order; cookies stay valid across changes. When an
    /// entry's node cannot be read (damaged flash), every readable entry is still listed and
    /// then the call fails with [`Error::Io`].
    pub fn readdir(
        &mut self,
        ino: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry) -> bool,
    ) -> Result<()> {
        self.guard(|fs| fs.readdir_inner(ino, cookie, f))
    }

    fn readdir_inner(
        &mut self,
        ino: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry) -> bool,
    ) -> Result<()> {
        self.expect_dir(ino)?;
        // Cookie c > 0 continues after the entry with position c - 1 = order << 16 | index.
        let (mut from, skip_through) = if cookie == 0 {
            (0u64, None)
        } else {
            let c = cookie - 1;
            (c >> 16, Some(c))
        };
        // An entry whose node cannot be read has no name to list: the others are listed, then
        // the listing fails (EIO) rather than leave it out silently.
        let mut damaged = false;
        loop {
            let (raw, next) = self
                .dirs
                .entries_from(&mut self.st, &mut self.map, ino, from)?;
            // Resolve names, then order ties by inode number.
            let mut ents: Vec<(u32, DirEntry)> = Vec::with_capacity(raw.len());
            for r in raw {
                let s = r.slot;
                let (name, child, kind) = if s.is_dir() {
                    match self.dirs.root(&mut self.st, &mut self.map, s.ptr) {
                        Ok(root) => (root.name.clone(), s.ptr, FileKind::Dir),
                        Err(Error::Corrupt) | Err(Error::Io) | Err(Error::NotFound) => {
                            damaged = true;
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                } else if s.is_placeholder() {
                    // The name of this slot: a linked file's name in this directory with the
                    // slot's hash (a file never has two names with one hash in a directory).
                    let i = s.ptr & !PLACEHOLDER;
                    match self.placeholder_file(i) {
                        Ok(Some(n)) => {
                            match n
                                .names()
                                .find(|(d, nm)| *d == ino && name_key(nm, false) == s.key)
                            {
                                Some((_, nm)) => (nm.to_vec(), i, kind_of(n.attrs.mode)),
                                None => {
                                    damaged = true;
                                    continue;
                                }
                            }
                        }
                        Ok(None) => continue,
                        Err(Error::Corrupt) | Err(Error::Io) => {
                            damaged = true;
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                } else {
                    match self.read_inode(Addr(s.ptr), 0) {
                        Ok(n) => (n.name.clone(), n.ino, kind_of(n.attrs.mode)),
                        Err(Error::Corrupt) | Err(Error::Io) => {
                            damaged = true;
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                };
                ents.push((
                    r.order,
                    DirEntry {
                        name,
                        ino: child,
                        kind,
                        cookie: 0,
                    },
                ));
            }
            ents.sort_by_key(|(o, e)| (*o, e.ino));
            let mut i = 0;
            while i < ents.len() {
                let order = ents[i].0;
                let mut idx = 0u64;
                while i < ents.len() && ents[i].0 == order {
                    let pos = (order as u64) << 16 | idx.min(0xFFFF);
                    idx += 1;
                    let e = &mut ents[i].1;
                    i += 1;
                    if let Some(s) = skip_through {
                        if pos <= s {
                            continue;
                        }
                    }
                    e.cookie = pos + 1;
                    if !f(e.clone()) {
                        return Ok(());
                    }
                }
            }
            match next {
                Some(n) => from = n,
                None if damaged => return Err(Error::Io),
                None => return Ok(()),
            }
        }
    }

    // ----- paths ------------------------------------------------------------------------

    /// Resolves an absolute path (components separated by `/`; symlinks in the middle are
    /// followed, the last component is not).
    pub fn resolve(&mut self, path: &[u8]) -> Result<Ino> {
        self.guard(|fs| fs.resolve_inner(path, 0))
    }

    fn resolve_inner(&mut self, path: &[u8], depth: u32) -> Result<Ino> {
        let comps: Vec<&[u8]> = path
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        self.walk(ROOT_INO, &comps, depth)
    }

    fn walk(&mut self, start: Ino, comps: &[&[u8]], depth: u32) -> Result<Ino> {
        if depth > 40 {
            return Err(Error::Loop);
        }
        let mut cur = start;
        for (i, c) in comps.iter().enumerate() {
            self.expect_dir(cur)?;
            if *c == b".." {
                cur = self.dirs.root(&mut self.st, &mut self.map, cur)?.parent;
                continue;
            }
            let found = self.find(cur, c)?.ok_or(Error::NotFound)?;
            let last = i + 1 == comps.len();
            if !last && !found.is_dir {
                let st = self.stat_inner(found.ino)?;
                if st.kind != FileKind::Symlink {
                    return Err(Error::NotDir);
                }
                let target = self.readlink_inner(found.ino)?;
                let base = if target.first() == Some(&b'/') {
                    ROOT_INO
                } else {
                    cur
                };
                let tcomps: Vec<&[u8]> = target
                    .split(|&c| c == b'/')
                    .filter(|c| !c.is_empty() && *c != b".")
                    .collect();
                let t = self.walk(base, &tcomps, depth + 1)?;
                cur = t;
                continue;
            }
            cur = found.ino;
        }
        Ok(cur)
    }

    fn readlink_inner(&mut self, ino: Ino) -> Result<Vec<u8>> {
        let c = self.load_file(ino)?;
        c.node.content.inline.clone().ok_or(Error::Corrupt)
    }

    /// Splits a path into its parent directory (resolved) and last name.
    pub fn resolve_parent<'p>(&mut self, path: &'p [u8]) -> Result<(Ino, &'p [u8])> {
        let trimmed = {
            let mut t = path;
            while t.len() > 1 && t.last() == Some(&b'/') {
                t = &t[..t.len() - 1];
            }
            t
        };
        let (dir, name) = match trimmed.iter().rposition(|&c| c == b'/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (&b""[..], trimmed),
        };
        if name.is_empty() {
            return Err(Error::Invalid);
        }
        let parent = self.resolve(dir)?;
        Ok((parent, name))
    }

    // ----- apply ------------------------------------------------------------------------

    /// The slot in `parent` (hash `key`) that names `ino`.
    pub(crate) fn slot_of(
        &mut self,
        parent: Ino,
        key: u32,
        ino: Ino,
        is_dir: bool,
    ) -> Result<Slot> {
        if !is_dir {
            self.load_file(ino)?;
        }
        let cands = self
            .dirs
            .candidates(&mut self.st, &mut self.map, parent, key & 0x7FFF_FFFF)?;
        for s in cands {
            if s.is_dir() != is_dir {
                continue;
            }
            if is_dir {
                if s.ptr == ino {
                    return Ok(s);
                }
                continue;
            }
            if s.is_placeholder() {
                if s.ptr & !PLACEHOLDER == ino {
                    return Ok(s);
                }
                continue;
            }
            if self.files.get(&ino).map(|c| c.node.node_addr) == Some(Addr(s.ptr)) {
                return Ok(s);
            }
            match self.read_inode(Addr(s.ptr), 0) {
                Ok(n) if n.ino == ino => return Ok(s),
                Ok(_) | Err(Error::Corrupt) | Err(Error::Io) => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::Corrupt)
    }

    fn touch_dir(&mut self, dir: Ino, t: Time) -> Result<()> {
        let r = self.dirs.root_mut(&mut self.st, &mut self.map, dir)?;
        r.attrs.mtime = t;
        r.attrs.ctime = t;
        Ok(())
    }

    /// Takes file `ino`'s inode out of the cache (loading it if needed).
    fn take_file(&mut self, ino: Ino) -> Result<super::CachedFile> {
        if !self.files.contains_key(&ino) {
            self.load_file(ino)?;
        }
        self.files.remove(&ino).map(|b| *b).ok_or(Error::Corrupt)
    }

    /// Frees a removed file's space unless it is open (then it lives on as an orphan until
    /// closed).
    fn drop_file(&mut self, node: FileNode) -> Result<()> {
        let ino = node.ino;
        let open = !self.replaying && self.inos.get(&ino).map(|o| o.refs > 0).unwrap_or(false);
        if open {
            if let Some(o) = self.inos.get_mut(&ino) {
                o.orphan = Some(node);
            }
            self.map.set(&mut self.st, ino, MapEntry::Orphan)?;
        } else {
            self.free_file_space(&node)?;
            if let Some(o) = self.inos.get_mut(&ino) {
                o.overlay = None;
            }
            self.dcache.drop_ino(ino);
            self.map.set(&mut self.st, ino, MapEntry::Free)?;
        }
        self.nfiles = self.nfiles.saturating_sub(1);
        Ok(())
    }

    /// Moves file `ino` to logical indexing (its first hard link): its slot points at it
    /// through the inode map from now on. Marks it dirty.
    fn make_linked(&mut self, ino: Ino) -> Result<()> {
        let (linked, parent, name, addr) = {
            let c = self.load_file(ino)?;
            (
                c.node.linked,
                c.node.parent,
                c.node.name.clone(),
                c.node.node_addr,
            )
        };
        if linked {
            return self.make_dirty(ino);
        }
        let slot = self.file_slot(parent, &name, ino)?;
        if slot.ptr != PLACEHOLDER | ino {
            self.dirs
                .replace_ptr(&mut self.st, &mut self.map, parent, slot, PLACEHOLDER | ino)?;
        }
        self.map.set(&mut self.st, ino, MapEntry::Linked(addr))?;
        let c = self.files.get_mut(&ino).ok_or(Error::Corrupt)?;
        c.node.linked = true;
        c.dirty = true;
        Ok(())
    }

    /// Whether `ino` is a file with more than one name (removing one leaves the file).
    fn has_other_names(&mut self, ino: Ino) -> Result<bool> {
        let c = self.load_file(ino)?;
        Ok(c.node.linked && c.node.nlink() > 1)
    }

    /// Renames or removes (`to` None) the name of linked file `ino` in `parent` whose hash
    /// key is `key`; sets its ctime.
    fn change_name(
        &mut self,
        ino: Ino,
        parent: Ino,
        key: u32,
        to: Option<(Ino, &[u8])>,
        time: Time,
    ) -> Result<()> {
        self.make_dirty(ino)?;
        let c = self.files.get_mut(&ino).ok_or(Error::Corrupt)?;
        let n = &mut c.node;
        let i = n
            .names()
            .position(|(d, nm)| d == parent && name_key(nm, false) == key)
            .ok_or(Error::Corrupt)?;
        match (i, to) {
            (0, Some((d, nm))) => {
                n.parent = d;
                n.name = nm.to_vec();
            }
            (i, Some((d, nm))) => n.links[i - 1] = (d, nm.to_vec()),
            (0, None) => {
                if n.links.is_empty() {
                    return Err(Error::Corrupt);
                }
                let (d, nm) = n.links.remove(0);
                n.parent = d;
                n.name = nm;
            }
            (i, None) => {
                n.links.remove(i - 1);
            }
        }
        n.attrs.ctime = time;
        Ok(())
    }

    /// Applies a record to the RAM state. Live operations call it right after journaling the
    /// record; mount calls it for every committed record of the journal tail.
    pub(crate) fn apply(&mut self, rec: &Record) -> Result<()> {
        let p = self.st.p();
        match rec {
            // The journal's own structure: nothing in RAM changes (a transaction's commit is
            // decided by the replay's first pass).
            Record::Session | Record::Link { .. } | Record::TxCommit { .. } => Ok(()),
            // A bad-block swap the store made: logical `logical` lives on `physical` now.
            Record::Remap { logical, physical } => {
                self.st.apply_remap(*logical, *physical);
                Ok(())
            }
            Record::Create {
                ino,
                parent,
                attrs,
                name,
                target,
                ..
            } => {
                let ino = *ino;
                if ino < 2 || self.map.get(&mut self.st, ino)? != MapEntry::Free {
                    return Err(Error::Corrupt);
                }
                let is_dir = attrs.is_dir();
                let key = name_key(name, is_dir);
                if is_dir {
                    self.map.set(&mut self.st, ino, MapEntry::Dir(Addr::NONE))?;
                    self.dirs
                        .create(DirRoot::new(&p, ino, *parent, *attrs, name));
                    self.dirs.insert(
                        &mut self.st,
                        &mut self.map,
                        *parent,
                        Slot { ptr: ino, key },
                    )?;
                    self.ndirs = self.ndirs.saturating_add(1);
                } else {
                    self.map.set(
                        &mut self.st,
                        ino,
                        MapEntry::File {
                            parent: *parent,
                            hash: key & 0x3FFF_FFFF,
                        },
                    )?;
                    let node = FileNode {
                        ino,
                        parent: *parent,
                        attrs: *attrs,
                        size: target.len() as u64,
                        name: name.clone(),
                        content: Content {
                            inline: Some(target.clone()),
                            ..Content::empty_inline()
                        },
                        compression: p.compression,
                        node_addr: Addr::NONE,
                        node_len: 0,
                        linked: false,
                        links: Vec::new(),
                    };
                    self.cache_file(node, true);
                    self.dirs.insert(
                        &mut self.st,
                        &mut self.map,
                        *parent,
                        Slot {
                            ptr: PLACEHOLDER | ino,
                            key,
                        },
                    )?;
                    self.nfiles = self.nfiles.saturating_add(1);
                }
                self.touch_dir(*parent, attrs.ctime)
            }
            Record::HardLink {
                ino,
                parent,
                name,
                time,
                ..
            } => {
                if !self.map.get(&mut self.st, *ino)?.is_file() {
                    return Err(Error::Corrupt);
                }
                self.expect_dir(*parent)?;
                self.make_linked(*ino)?;
                let c = self.files.get_mut(ino).ok_or(Error::Corrupt)?;
                if c.node.links.len() >= crate::index::file::LINKS_MAX {
                    return Err(Error::Corrupt);
                }
                c.node.links.push((*parent, name.clone()));
                c.node.attrs.ctime = *time;
                self.dirs.insert(
                    &mut self.st,
                    &mut self.map,
                    *parent,
                    Slot {
                        ptr: PLACEHOLDER | *ino,
                        key: name_key(name, false),
                    },
                )?;
                self.touch_dir(*parent, *time)
            }
            Record::Unlink {
                ino,
                is_dir,
                parent,
                key,
                time,
                ..
            } => {
                let slot = self.slot_of(*parent, *key, *ino, *is_dir)?;
                if !*is_dir && self.has_other_names(*ino)? {
                    // One name of several goes; the file stays.
                    self.dirs
                        .remove(&mut self.st, &mut self.map, *parent, slot)?;
                    self.change_name(*ino, *parent, *key, None, *time)?;
                    return self.touch_dir(*parent, *time);
                }
                let file = if *is_dir {
                    None
                } else {
                    Some(self.take_file(*ino)?)
                };
                self.dirs
                    .remove(&mut self.st, &mut self.map, *parent, slot)?;
                match file {
                    None => {
                        self.dirs.destroy(&mut self.st, &mut self.map, *ino)?;
                        self.map.set(&mut self.st, *ino, MapEntry::Free)?;
                        self.ndirs = self.ndirs.saturating_sub(1);
                    }
                    Some(c) => self.drop_file(c.node)?,
                }
                self.touch_dir(*parent, *time)
            }
            Record::Rename {
                ino,
                is_dir,
                old_parent,
                old_key,
                new_parent,
                name,
                victim,
                victim_is_dir,
                time,
                ..
            } => {
                if *victim == *ino {
                    return Err(Error::Corrupt);
                }
                let old_slot = self.slot_of(*old_parent, *old_key, *ino, *is_dir)?;
                let linked = !*is_dir && self.load_file(*ino)?.node.linked;
                let moved = if *is_dir || linked {
                    None
                } else {
                    Some(self.take_file(*ino)?)
                };
                if *victim != 0 {
                    let vkey = name_key(name, *victim_is_dir);
                    let vs = self.slot_of(*new_parent, vkey, *victim, *victim_is_dir)?;
                    let keep = !*victim_is_dir && self.has_other_names(*victim)?;
                    let vfile = if *victim_is_dir || keep {
                        None
                    } else {
                        Some(self.take_file(*victim)?)
                    };
                    self.dirs
                        .remove(&mut self.st, &mut self.map, *new_parent, vs)?;
                    match vfile {
                        None if keep => {
                            self.change_name(*victim, *new_parent, vkey, None, *time)?;
                        }
                        None => {
                            self.dirs.destroy(&mut self.st, &mut self.map, *victim)?;
                            self.map.set(&mut self.st, *victim, MapEntry::Free)?;
                            self.ndirs = self.ndirs.saturating_sub(1);
                        }
                        Some(c) => self.drop_file(c.node)?,
                    }
                }
                self.dirs
                    .remove(&mut self.st, &mut self.map, *old_parent, old_slot)?;
                let key = name_key(name, *is_dir);
                if *is_dir {
                    self.dirs
                        .rename_dir(&mut self.st, &mut self.map, *ino, *new_parent, name)?;
                    self.dirs
                        .root_mut(&mut self.st, &mut self.map, *ino)?
                        .attrs
                        .ctime = *time;
                    self.dirs.insert(
                        &mut self.st,
                        &mut self.map,
                        *new_parent,
                        Slot { ptr: *ino, key },
                    )?;
                } else {
                    if linked {
                        // One name in the inode's list changes; the map entry stays Linked.
                        let to = Some((*new_parent, name.as_slice()));
                        self.change_name(*ino, *old_parent, *old_key, to, *time)?;
                    } else {
                        let mut c = moved.ok_or(Error::Corrupt)?;
                        c.node.parent = *new_parent;
                        c.node.name = name.clone();
                        c.node.attrs.ctime = *time;
                        self.cache_file(c.node, true);
                        let hash = key & 0x3FFF_FFFF;
                        let entry = MapEntry::File {
                            parent: *new_parent,
                            hash,
                        };
                        self.map.set(&mut self.st, *ino, entry)?;
                    }
                    self.dirs.insert(
                        &mut self.st,
                        &mut self.map,
                        *new_parent,
                        Slot {
                            ptr: PLACEHOLDER | *ino,
                            key,
                        },
                    )?;
                }
                self.touch_dir(*old_parent, *time)?;
                if new_parent != old_parent {
                    self.touch_dir(*new_parent, *time)?;
                }
                Ok(())
            }
            Record::Setattr {
                ino,
                mask: m,
                attrs,
                ..
            } => {
                // A compression change for an algorithm this code does not know is ignored.
                let algo = ((m & mask::COMPRESS) != 0)
                    .then_some((m >> mask::COMPRESS_SHIFT) as u8)
                    .filter(|z| *z <= crate::format::compress::DEFLATE);
                let apply_to = |a: &mut Attrs| {
                    if m & mask::MODE != 0 {
                        a.mode = (a.mode & S_IFMT) | (attrs.mode & 0o7777);
                    }
                    if m & mask::UID != 0 {
                        a.uid = attrs.uid;
                    }
                    if m & mask::GID != 0 {
                        a.gid = attrs.gid;
                    }
                    if m & mask::ATIME != 0 {
                        a.atime = attrs.atime;
                    }
                    if m & mask::MTIME != 0 {
                        a.mtime = attrs.mtime;
                    }
                    if m & mask::CTIME != 0 {
                        a.ctime = attrs.ctime;
                    }
                };
                match self.map.get(&mut self.st, *ino)? {
                    MapEntry::Dir(_) => {
                        let r = self.dirs.root_mut(&mut self.st, &mut self.map, *ino)?;
                        apply_to(&mut r.attrs);
                        Ok(())
                    }
                    MapEntry::File { .. } | MapEntry::Linked(_) => {
                        self.make_dirty(*ino)?;
                        let c = self.load_file(*ino)?;
                        apply_to(&mut c.node.attrs);
                        if let Some(z) = algo {
                            c.node.compression = z;
                        }
                        Ok(())
                    }
                    MapEntry::Orphan => {
                        if let Some(n) = self.inos.get_mut(ino).and_then(|o| o.orphan.as_mut()) {
                            apply_to(&mut n.attrs);
                            if let Some(z) = algo {
                                n.compression = z;
                            }
                        }
                        Ok(())
                    }
                    MapEntry::Free => Err(Error::Corrupt),
                }
            }
            Record::Commit { .. } => self.apply_commit(rec),
        }
    }
}

impl<F: Flash> Fs<F> {
    /// Checks the block-table invariant that must hold after every operation (no free block
    /// is credited with live data). For tests; fsck checks this and more.
    #[doc(hidden)]
    pub fn debug_check_blocks(&self) -> core::result::Result<(), alloc::string::String> {
        use crate::store::BlockState;
        for (i, b) in self.st.blocks() {
            if matches!(b.state(), BlockState::Free | BlockState::Erased) && b.live != 0 {
                return Err(alloc::format!(
                    "block {i} is {:?} but has {} live bytes",
                    b.state(),
                    b.live
                ));
            }
        }
        Ok(())
    }
}
