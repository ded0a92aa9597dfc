//! Changing the namespace: create, mkdir, symlink, mknod, link, unlink, rmdir, rename, setattr
//! and the per-file compression setting.
//!
//! Each operation checks everything that can fail first, then journals one record and applies
//! it; so a power cut leaves either the old namespace or the new one. It must never change RAM
//! state except through [`Fs::apply`](super::Fs).

use crate::error::{Error, Result};
use crate::format::attrs::{
    Attrs, Ino, Time, ROOT_INO, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG,
    S_IFSOCK,
};
use crate::format::params::SYMLINK_MAX;
use crate::fs::lookup::Stat;
use crate::fs::Fs;
use crate::index::dir::name_key;
use crate::index::file::FileNode;
use crate::index::inode_map::MapEntry;
use crate::journal::{mask, Record};
use dffs_flash::Flash;

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

/// Whether file `node` can take the name `name` in `parent` (a new hard link, or with
/// `replacing` a rename of that name of a linked file): the names must fit the inode node
/// beside its content (`NameTooLong` otherwise), and two names of one file in one directory
/// must not share a hash, which would make identical slots (`TooManyLinks`; the chance is
/// 2^-31 per pair).
pub(crate) fn check_linked_name(
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
        self.writable_now()?;
        self.check_new_name(parent, name)?;
        self.ensure_writable()?;
        self.meta_space()?;
        let ino = self.map.find_free(&mut self.store)?;
        let now = self.now();
        let rec = Record::Create {
            tid: self.txn.open.unwrap_or(0),
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
                > SYMLINK_MAX
                    .min(crate::index::file::inline_limit(&fs.store.p(), name.len()).max(64))
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
            fs.writable_now()?;
            match fs.map.get(&mut fs.store, ino)? {
                MapEntry::Dir(_) => return Err(Error::NotPermitted),
                MapEntry::File { .. } | MapEntry::Linked(_) => {}
                MapEntry::Orphan | MapEntry::Free => return Err(Error::NotFound),
            }
            fs.check_new_name(parent, name)?;
            let p = fs.store.p();
            let node = &fs.load_file(ino)?.node;
            if node.links.len() >= crate::index::file::LINKS_MAX {
                return Err(Error::TooManyLinks);
            }
            check_linked_name(&p, node, parent, name, None).map_err(|_| Error::TooManyLinks)?;
            fs.ensure_writable()?;
            fs.meta_space()?;
            let rec = Record::HardLink {
                tid: fs.txn.open.unwrap_or(0),
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

    /// Removes a file or symlink.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.guard(|fs| {
            fs.writable_now()?;
            let f = fs.find(parent, name)?.ok_or(Error::NotFound)?;
            if f.is_dir {
                return Err(Error::IsDir);
            }
            fs.ensure_writable()?;
            let rec = Record::Unlink {
                tid: fs.txn.open.unwrap_or(0),
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
            fs.writable_now()?;
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
            if fs.dirs.root(&mut fs.store, &mut fs.map, f.ino)?.entries != 0 {
                return Err(Error::NotEmpty);
            }
            fs.ensure_writable()?;
            let rec = Record::Unlink {
                tid: fs.txn.open.unwrap_or(0),
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
            b = self.dirs.root(&mut self.store, &mut self.map, b)?.parent;
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
            fs.writable_now()?;
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
                    (true, true)
                        if fs.dirs.root(&mut fs.store, &mut fs.map, d.ino)?.entries != 0 =>
                    {
                        return Err(Error::NotEmpty);
                    }
                    _ => {}
                }
            }
            if !src.is_dir {
                let p = fs.store.p();
                let node = &fs.load_file(src.ino)?.node;
                if node.linked {
                    let replacing = Some((old_parent, old_name));
                    check_linked_name(&p, node, new_parent, new_name, replacing)?;
                }
            }
            fs.ensure_writable()?;
            fs.meta_space()?;
            let rec = Record::Rename {
                tid: fs.txn.open.unwrap_or(0),
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

    /// Changes attributes (size changes truncate or extend the file).
    pub fn setattr(&mut self, ino: Ino, a: SetAttr) -> Result<Stat> {
        self.guard(|fs| {
            fs.ensure_writable()?;
            let is_dir = matches!(fs.map.get(&mut fs.store, ino)?, MapEntry::Dir(_));
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
                    tid: fs.txn.open.unwrap_or(0),
                    ino,
                    mask: m,
                    attrs,
                };
                fs.journal(&rec)?;
                fs.apply(&rec)?;
                // An open file's uncommitted times follow explicit changes.
                if let Some(ov) = fs.open.files.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
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
            fs.ensure_writable()?;
            if algo > crate::format::compress::DEFLATE {
                return Err(Error::Invalid);
            }
            if !crate::format::compress::supported(algo) {
                return Err(Error::NotSupported);
            }
            match fs.map.get(&mut fs.store, ino)? {
                MapEntry::Dir(_) => return Err(Error::IsDir),
                MapEntry::File { .. } | MapEntry::Linked(_) | MapEntry::Orphan => {}
                MapEntry::Free => return Err(Error::NotFound),
            }
            let rec = Record::Setattr {
                tid: fs.txn.open.unwrap_or(0),
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
            if let Some(n) = fs.open.files.get(&ino).and_then(|o| o.orphan.as_ref()) {
                return Ok(n.compression);
            }
            match fs.map.get(&mut fs.store, ino)? {
                MapEntry::Dir(_) => Err(Error::IsDir),
                MapEntry::File { .. } | MapEntry::Linked(_) => {
                    Ok(fs.load_file(ino)?.node.compression)
                }
                _ => Err(Error::NotFound),
            }
        })
    }

    pub(crate) fn touch_dir(&mut self, dir: Ino, t: Time) -> Result<()> {
        let r = self.dirs.root_mut(&mut self.store, &mut self.map, dir)?;
        r.attrs.mtime = t;
        r.attrs.ctime = t;
        Ok(())
    }

    /// Renames or removes (`to` None) the name of linked file `ino` in `parent` whose hash
    /// key is `key`; sets its ctime.
    pub(crate) fn change_name(
        &mut self,
        ino: Ino,
        parent: Ino,
        key: u32,
        to: Option<(Ino, &[u8])>,
        time: Time,
    ) -> Result<()> {
        self.make_dirty(ino)?;
        let c = self.inodes.get_mut(ino).ok_or(Error::Corrupt)?;
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
}
