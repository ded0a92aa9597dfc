//! Finding things by name: lookup, stat, readlink, readdir, and path resolution.
//!
//! A name is found by hashing it into its directory's slot table (the directory page, or the
//! bucket its hash selects) and comparing the names the candidate slots lead to. It must never
//! write: every function here only reads (the caches it fills are clean).

use crate::error::{Error, Result};
use crate::format::attrs::{Ino, Time, ROOT_INO, S_IFDIR, S_IFLNK, S_IFMT};
use crate::format::params::{Addr, NAME_MAX};
use crate::fs::Fs;
use crate::index::dir::{name_hash, name_key, Slot, PLACEHOLDER};
use crate::index::file::inode::FileNode;
use crate::index::inode_map::MapEntry;
use alloc::vec::Vec;
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

/// A name found in a directory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub slot: Slot,
    pub ino: Ino,
    pub is_dir: bool,
}

pub(crate) fn kind_of(mode: u32) -> FileKind {
    match mode & S_IFMT {
        S_IFDIR => FileKind::Dir,
        S_IFLNK => FileKind::Symlink,
        _ => FileKind::File,
    }
}

impl<F: Flash> Fs<F> {
    /// Checks that `ino` is a directory.
    pub(crate) fn expect_dir(&mut self, ino: Ino) -> Result<()> {
        match self.map.get(&mut self.store, ino)? {
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
            .candidates(&mut self.store, &mut self.map, parent, hash)?;
        // A candidate with this name's hash that cannot be read is, almost surely, the entry
        // looked for: when nothing else matches, the answer is EIO, not "no such name".
        let mut damaged = false;
        for s in cands {
            if s.is_dir() {
                match self.dirs.root(&mut self.store, &mut self.map, s.ptr) {
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
                // The slot points at a committed inode: one cached clean is the same node
                // (a listing just read it, say) and needs no read.
                let cached = self
                    .inodes
                    .iter()
                    .find(|c| !c.dirty && c.node.node_addr == Addr(s.ptr))
                    .map(|c| (c.node.ino, c.node.name == name && c.node.parent == parent));
                if let Some((ino, hit)) = cached {
                    if hit {
                        return Ok(Some(Found {
                            slot: s,
                            ino,
                            is_dir: false,
                        }));
                    }
                    continue;
                }
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
                    if !self.inodes.contains(ino) {
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

    /// Looks `name` up in `parent`.
    pub fn lookup(&mut self, parent: Ino, name: &[u8]) -> Result<Stat> {
        self.guard(|fs| {
            if name == b"." {
                return fs.stat_inner(parent);
            }
            if name == b".." {
                fs.expect_dir(parent)?;
                let pp = fs.dirs.root(&mut fs.store, &mut fs.map, parent)?.parent;
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
        let entry = self.map.get(&mut self.store, ino)?;
        let p = self.store.p();
        match entry {
            MapEntry::Dir(_) => {
                let r = self.dirs.root(&mut self.store, &mut self.map, ino)?;
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
                    match self.open.files.get(&ino).and_then(|o| o.orphan.as_ref()) {
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
                if let Some(ov) = self.open.files.get(&ino).and_then(|o| o.overlay.as_ref()) {
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
            if let MapEntry::Dir(_) = fs.map.get(&mut fs.store, ino)? {
                return Err(Error::Invalid);
            }
            let c = fs.load_file(ino)?;
            if !c.node.attrs.is_symlink() {
                return Err(Error::Invalid);
            }
            c.node.content.inline.clone().ok_or(Error::Corrupt)
        })
    }

    fn readlink_inner(&mut self, ino: Ino) -> Result<Vec<u8>> {
        let c = self.load_file(ino)?;
        c.node.content.inline.clone().ok_or(Error::Corrupt)
    }

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
            let (mut raw, next) =
                self.dirs
                    .entries_from(&mut self.store, &mut self.map, ino, from)?;
            // Resolve names in the order of the inodes' addresses (files created together
            // share inode pages, read once each: see `Medium::read_cached`), then order the
            // entries by position, ties by inode number.
            crate::sort::sort_by_key(&mut raw, |r| r.slot.ptr);
            // The inodes of the first entries in listing order (as many as the inode cache
            // holds) are kept in the cache: a listing is often followed by a lookup of each
            // name in that order (`ls -l`, `du`), which then reads nothing.
            let mut orders: Vec<u32> = raw
                .iter()
                .filter(|r| !r.slot.is_dir() && !r.slot.is_placeholder())
                .map(|r| r.order)
                .collect();
            crate::sort::sort_by_key(&mut orders, |&o| o);
            let keep_below = orders.get(self.cfg.inode_cache).copied();
            let mut keep: Vec<(u32, FileNode)> = Vec::new();
            let mut ents: Vec<(u32, DirEntry)> = Vec::with_capacity(raw.len());
            for r in raw {
                let s = r.slot;
                let (name, child, kind) = if s.is_dir() {
                    match self.dirs.root(&mut self.store, &mut self.map, s.ptr) {
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
                        Ok(n) => {
                            let e = (n.name.clone(), n.ino, kind_of(n.attrs.mode));
                            // (The slot points at the committed inode; a cached one, maybe
                            // dirty, is newer and stays.)
                            if keep_below.is_none_or(|k| r.order < k)
                                && !self.inodes.contains(n.ino)
                            {
                                keep.push((r.order, n));
                            }
                            e
                        }
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
            crate::sort::sort_by_key(&mut ents, |(o, e)| (*o, e.ino));
            // Last in, most recent: the first entry in listing order is the last evicted.
            crate::sort::sort_by_key(&mut keep, |(o, _)| u32::MAX - *o);
            for (_, n) in keep {
                // (Resolving placeholders may have cached the file meanwhile: that copy stays.)
                if !self.inodes.contains(n.ino) {
                    self.cache_file(n, false);
                }
            }
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

    pub(crate) fn walk(&mut self, start: Ino, comps: &[&[u8]], depth: u32) -> Result<Ino> {
        if depth > 40 {
            return Err(Error::Loop);
        }
        let mut cur = start;
        for (i, c) in comps.iter().enumerate() {
            self.expect_dir(cur)?;
            if *c == b".." {
                cur = self.dirs.root(&mut self.store, &mut self.map, cur)?.parent;
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
        let cands =
            self.dirs
                .candidates(&mut self.store, &mut self.map, parent, key & 0x7FFF_FFFF)?;
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
            if self.inodes.get(ino).map(|c| c.node.node_addr) == Some(Addr(s.ptr)) {
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

    /// Slots of `parent` whose hash has these low 30 bits (the map keeps 30 bits).
    pub(crate) fn slots_with_hash30(&mut self, parent: Ino, hash30: u32) -> Result<Vec<Slot>> {
        let mut out = Vec::new();
        for top in [0u32, 1] {
            let h = hash30 | top << 30;
            out.extend(
                self.dirs
                    .candidates(&mut self.store, &mut self.map, parent, h)?,
            );
        }
        Ok(out)
    }
}
