//! The inode map: inode number → where the inode lives.
//!
//! Owns the paged radix tree indexed by inode number, its small page cache (with dirty pages
//! pinned until written), free-inode allocation, and copy-on-write writing of dirty pages.
//! Directory entries are the paper's DirInode map (logical id → directory page, so a moved
//! directory page never ripples up the tree). File entries are only a back-reference (parent
//! directory and name hash): lookups reach files through the physical pointer in their parent's
//! bucket, and the map entry lets garbage collection and inode-number access find a file's
//! inode without scanning. It must never interpret directory or inode contents.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::Reader;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, LogKind, Params, NODE_HEADER};
use crate::index::lru::Lru;
use crate::store::{Priority, Store};
use dffs_flash::Flash;

/// One inode map entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapEntry {
    /// The inode number is free.
    Free,
    /// A directory whose root page is at the address (NONE: not written yet).
    Dir(Addr),
    /// A file (or symlink) named in `parent` with a name whose hash key has these 30 low bits.
    File {
        /// Parent directory.
        parent: Ino,
        /// Low 30 bits of the name hash.
        hash: u32,
    },
    /// A file unlinked while open; freed when closed (or at the next mount).
    Orphan,
    /// A file with hard links (it has, or had, more than one name): its inode node is at the
    /// address (NONE: not written yet), and every name's slot points at it logically.
    Linked(Addr),
}

impl MapEntry {
    /// Encodes as 8 bytes.
    pub fn to_u64(self) -> u64 {
        match self {
            MapEntry::Free => 0,
            MapEntry::Dir(a) => 1 << 62 | a.0 as u64,
            MapEntry::File { parent, hash } => {
                2 << 62 | ((hash & 0x3FFF_FFFF) as u64) << 32 | parent as u64
            }
            MapEntry::Orphan => 3 << 62,
            MapEntry::Linked(a) => 3 << 62 | 1 << 32 | a.0 as u64,
        }
    }
    /// Whether the entry is a named file (indexed through its parent or, with hard links,
    /// through the map).
    pub fn is_file(self) -> bool {
        matches!(self, MapEntry::File { .. } | MapEntry::Linked(_))
    }
    /// Decodes 8 bytes.
    pub fn from_u64(v: u64) -> Result<MapEntry> {
        Ok(match v >> 62 {
            0 if v == 0 => MapEntry::Free,
            1 if v >> 32 & 0x3FFF_FFFF == 0 => MapEntry::Dir(Addr(v as u32)),
            2 => MapEntry::File {
                parent: v as u32,
                hash: (v >> 32) as u32 & 0x3FFF_FFFF,
            },
            3 if v == 3 << 62 => MapEntry::Orphan,
            3 if v >> 32 & 0x3FFF_FFFF == 1 => MapEntry::Linked(Addr(v as u32)),
            _ => return Err(Error::Corrupt),
        })
    }
}

#[derive(Clone, Debug)]
enum PageData {
    Leaf(Vec<u64>),
    /// (child address, free entries below it)
    Interior(Vec<(Addr, u32)>),
}

#[derive(Clone, Debug)]
struct MapPage {
    level: u8,
    index: u32,
    addr: Addr,
    data: PageData,
}

/// The inode map with its cache.
pub struct InodeMap {
    /// Address of the root page (NONE: empty map).
    pub root: Addr,
    /// Levels (1: the root is a leaf).
    pub depth: u8,
    /// Lowest inode number that may be free.
    pub hint: u32,
    /// One more than the highest inode number in use.
    pub high: u32,
    /// Inode numbers at or above this are never used on this device: every inode in use has
    /// an 8-byte map entry, so there are fewer than capacity / 8 of them (the bound a
    /// checkpoint's `ino_high` is checked against). A journal record naming one is forged.
    limit: u64,
    leaf_n: u32,
    fanout: u32,
    page_size: u32,
    cache: Lru<MapPage>,
    cache_max: usize,
}

/// What [`InodeMap::traverse`] calls per page: address, level, index, whether the address is
/// the page's live copy on flash, and the page's contents when known.
type PageVisitor<'a> = dyn FnMut(Addr, u8, u32, bool, Option<&PageData>) + 'a;

impl InodeMap {
    /// A map over an existing root (from a checkpoint), caching at most `cache_max` pages
    /// (dirty pages may exceed it until written).
    pub fn new(
        p: &Params,
        root: Addr,
        depth: u8,
        hint: u32,
        high: u32,
        cache_max: usize,
    ) -> InodeMap {
        InodeMap {
            root,
            depth,
            // Every number from `high` up is free, so a hint above it (forged, or left by an
            // allocation that failed) only makes the search skip free numbers.
            hint: hint.clamp(1, high.max(2)),
            high: high.max(2),
            limit: p.geometry.capacity() / 8,
            leaf_n: p.map_leaf_entries(),
            fanout: p.map_fanout(),
            page_size: p.map_page,
            cache: Lru::default(),
            cache_max: cache_max.max(3),
        }
    }

    /// RAM held by cached pages.
    pub fn ram_bytes(&self) -> usize {
        self.cache.ram_bytes(|p| match &p.data {
            PageData::Leaf(v) => v.capacity() * 8,
            PageData::Interior(v) => v.capacity() * 8,
        })
    }

    /// Inode numbers covered by one page at `level`.
    fn span(&self, level: u8) -> u64 {
        let mut s = self.leaf_n as u64;
        for _ in 0..level {
            s *= self.fanout as u64;
        }
        s
    }

    /// Inode numbers the current depth can hold.
    pub(crate) fn capacity(&self) -> u64 {
        if self.depth == 0 {
            0
        } else {
            self.span(self.depth - 1)
        }
    }

    fn find(&self, level: u8, index: u32) -> Option<usize> {
        self.cache
            .position(|p| p.level == level && p.index == index)
    }

    fn decode_page<F: Flash>(
        &self,
        st: &mut Store<F>,
        addr: Addr,
        level: u8,
        index: u32,
    ) -> Result<MapPage> {
        let typ = if level == 0 {
            NodeType::MapLeaf
        } else {
            NodeType::MapInterior
        };
        let (_h, bytes) = st.read_node(addr, typ, self.page_size)?;
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let lv = r.u8()?;
        r.take(3)?;
        let idx = r.u32()?;
        if lv != level || idx != index {
            return Err(Error::Corrupt);
        }
        let data = if level == 0 {
            let mut v = Vec::with_capacity(self.leaf_n as usize);
            for _ in 0..self.leaf_n {
                let e = r.u64()?;
                MapEntry::from_u64(e)?;
                v.push(e);
            }
            PageData::Leaf(v)
        } else {
            let mut v = Vec::with_capacity(self.fanout as usize);
            let cap = self.span(level - 1) as u32;
            for _ in 0..self.fanout {
                let a = Addr(r.u32()?);
                let free = r.u32()?;
                if free > cap || !(a.is_none() || st.p().addr_valid(a)) {
                    return Err(Error::Corrupt);
                }
                v.push((a, free));
            }
            PageData::Interior(v)
        };
        Ok(MapPage {
            level,
            index,
            addr,
            data,
        })
    }

    fn empty_page(&self, level: u8, index: u32) -> MapPage {
        let data = if level == 0 {
            PageData::Leaf(vec![0; self.leaf_n as usize])
        } else {
            let cap = self.span(level - 1) as u32;
            PageData::Interior(vec![(Addr::NONE, cap); self.fanout as usize])
        };
        MapPage {
            level,
            index,
            addr: Addr::NONE,
            data,
        }
    }

    /// Loads (or creates) the page at (`level`, `index`), loading its ancestors first.
    fn load<F: Flash>(&mut self, st: &mut Store<F>, level: u8, index: u32) -> Result<usize> {
        self.load_or_create(st, level, index, true)?
            .ok_or(Error::Corrupt)
    }

    /// Loads the page at (`level`, `index`) and its ancestors. A page never written (all its
    /// entries free) is created as a new dirty page if `create`, else `None` is returned and
    /// nothing is cached: a lookup must not leave pages for the next checkpoint to write.
    fn load_or_create<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        level: u8,
        index: u32,
        create: bool,
    ) -> Result<Option<usize>> {
        let t = self.cache.bump();
        if let Some(i) = self.find(level, index) {
            self.cache.get_mut(i).used = t;
            return Ok(Some(i));
        }
        let addr = if level + 1 == self.depth {
            if index != 0 {
                return Err(Error::Corrupt);
            }
            self.root
        } else {
            let Some(pi) = self.load_or_create(st, level + 1, index / self.fanout, create)? else {
                return Ok(None);
            };
            match &self.cache.get(pi).item.data {
                PageData::Interior(v) => v[(index % self.fanout) as usize].0,
                PageData::Leaf(_) => return Err(Error::Corrupt),
            }
        };
        // A page that was never written is new (dirty); one read from flash is clean.
        let (page, dirty) = if addr.is_some() {
            (self.decode_page(st, addr, level, index)?, false)
        } else if create {
            (self.empty_page(level, index), true)
        } else {
            return Ok(None);
        };
        let used = self.cache.now();
        self.make_room(st)?;
        Ok(Some(self.cache.push_with(page, dirty, used)))
    }

    /// Drops the least recently used clean page (never the root) when the cache is full.
    /// Dirty pages stay until written, so the cache may exceed its size while many pages are
    /// dirty; the file system checkpoints before that grows far.
    fn make_room<F: Flash>(&mut self, _st: &mut Store<F>) -> Result<()> {
        let depth = self.depth;
        while self.cache.len() >= self.cache_max && self.cache.evict_one(|p| p.level + 1 == depth) {
        }
        Ok(())
    }

    /// Number of dirty pages.
    pub fn dirty_pages(&self) -> usize {
        self.cache.dirty_count()
    }

    /// The entry of `ino`.
    pub fn get<F: Flash>(&mut self, st: &mut Store<F>, ino: Ino) -> Result<MapEntry> {
        if ino == 0 || ino as u64 >= self.capacity() || ino >= self.high {
            return Ok(MapEntry::Free);
        }
        let Some(li) = self.load_or_create(st, 0, ino / self.leaf_n, false)? else {
            return Ok(MapEntry::Free);
        };
        match &self.cache.get(li).item.data {
            PageData::Leaf(v) => MapEntry::from_u64(v[(ino % self.leaf_n) as usize]),
            PageData::Interior(_) => Err(Error::Corrupt),
        }
    }

    /// Grows the tree by one level (the old root becomes child 0 of a new root).
    fn grow<F: Flash>(&mut self, st: &mut Store<F>) -> Result<()> {
        if self.depth == 0 {
            self.depth = 1;
            self.root = Addr::NONE;
            let p = self.empty_page(0, 0);
            self.cache.push_with(p, true, 0);
            return Ok(());
        }
        if self.depth >= 6 {
            return Err(Error::NoSpace);
        }
        // Free count of the old root.
        let old_free = self.count_free_in_root(st)?;
        let old_root = self.root;
        self.depth += 1;
        let mut page = self.empty_page(self.depth - 1, 0);
        if let PageData::Interior(v) = &mut page.data {
            v[0] = (old_root, old_free);
        }
        self.root = Addr::NONE;
        self.cache.push_with(page, true, 0);
        Ok(())
    }

    fn count_free_in_root<F: Flash>(&mut self, st: &mut Store<F>) -> Result<u32> {
        let i = self.load(st, self.depth - 1, 0)?;
        Ok(match &self.cache.get(i).item.data {
            PageData::Leaf(v) => v.iter().filter(|&&e| e == 0).count() as u32,
            PageData::Interior(v) => v.iter().map(|c| c.1).sum(),
        })
    }

    /// Sets the entry of `ino` (growing the tree as needed).
    pub fn set<F: Flash>(&mut self, st: &mut Store<F>, ino: Ino, e: MapEntry) -> Result<()> {
        if ino == 0 || ino as u64 >= self.limit {
            return Err(Error::Corrupt);
        }
        while ino as u64 >= self.capacity() {
            self.grow(st)?;
        }
        let li = self.load(st, 0, ino / self.leaf_n)?;
        let slot = (ino % self.leaf_n) as usize;
        let old = match &mut self.cache.get_mut(li).item.data {
            PageData::Leaf(v) => {
                let old = v[slot];
                v[slot] = e.to_u64();
                old
            }
            PageData::Interior(_) => return Err(Error::Corrupt),
        };
        self.cache.get_mut(li).dirty = true;
        let was_free = old == 0;
        let is_free = e == MapEntry::Free;
        if was_free != is_free {
            // Adjust free counts on the path.
            let mut level = 1u8;
            while level < self.depth {
                let idx = (ino as u64 / self.span(level)) as u32;
                let child = ((ino as u64 / self.span(level - 1)) % self.fanout as u64) as usize;
                let pi = self.load(st, level, idx)?;
                if let PageData::Interior(v) = &mut self.cache.get_mut(pi).item.data {
                    v[child].1 = if is_free {
                        v[child].1 + 1
                    } else {
                        v[child].1.saturating_sub(1)
                    };
                }
                self.cache.get_mut(pi).dirty = true;
                level += 1;
            }
        }
        if ino >= self.high {
            self.high = ino + 1;
        }
        if is_free && ino < self.hint {
            self.hint = ino;
        }
        Ok(())
    }

    /// Finds a free inode number (≥ 2) and returns it without marking it used.
    pub fn find_free<F: Flash>(&mut self, st: &mut Store<F>) -> Result<Ino> {
        let mut ino = self.hint.max(2);
        loop {
            if ino >= self.high {
                if ino == u32::MAX || ino as u64 >= self.limit {
                    return Err(Error::NoSpace);
                }
                return Ok(ino);
            }
            // Skip full subtrees using interior free counts.
            if self.depth > 1 {
                let mut skipped = false;
                let mut level = self.depth - 1;
                while level >= 1 {
                    let idx = (ino as u64 / self.span(level)) as u32;
                    let child = ((ino as u64 / self.span(level - 1)) % self.fanout as u64) as usize;
                    let pi = self.load(st, level, idx)?;
                    let free = match &self.cache.get(pi).item.data {
                        PageData::Interior(v) => v[child].1,
                        PageData::Leaf(_) => return Err(Error::Corrupt),
                    };
                    if free == 0 {
                        let span = self.span(level - 1);
                        ino = ((ino as u64 / span + 1) * span) as u32;
                        skipped = true;
                        break;
                    }
                    level -= 1;
                }
                if skipped {
                    continue;
                }
            }
            let li = self.load(st, 0, ino / self.leaf_n)?;
            let start = (ino % self.leaf_n) as usize;
            let found = match &self.cache.get(li).item.data {
                PageData::Leaf(v) => v[start..].iter().position(|&e| e == 0),
                PageData::Interior(_) => return Err(Error::Corrupt),
            };
            match found {
                Some(k) => {
                    let f = ino - start as u32 + (start + k) as u32;
                    if f >= 2 {
                        self.hint = f;
                        return Ok(f);
                    }
                    ino = f + 1;
                }
                None => ino = ino - start as u32 + self.leaf_n,
            }
        }
    }

    /// Writes every dirty page (leaves first, copy-on-write), updating parents, and returns
    /// the new root.
    pub fn write_dirty<F: Flash>(&mut self, st: &mut Store<F>) -> Result<Addr> {
        for level in 0..self.depth {
            while let Some(i) = self
                .cache
                .position_entry(|e| e.item.level == level && e.dirty)
            {
                let (index, old) = (self.cache.get(i).item.index, self.cache.get(i).item.addr);
                let mut nb = NodeBuilder::new(
                    if level == 0 {
                        NodeType::MapLeaf
                    } else {
                        NodeType::MapInterior
                    },
                    0,
                    0,
                    self.page_size as usize,
                );
                nb.w.u8(level).u8(0).u16(0).u32(index);
                match &self.cache.get(i).item.data {
                    PageData::Leaf(v) => {
                        for &e in v {
                            nb.w.u64(e);
                        }
                    }
                    PageData::Interior(v) => {
                        for &(a, f) in v {
                            nb.w.u32(a.0).u32(f);
                        }
                    }
                }
                let total = self.page_size;
                let cur = nb.w.len() as u32;
                nb.w.fill(0, (total - cur) as usize);
                let addr = st.write_node(LogKind::Map, nb, Priority::Reserve)?;
                if old.is_some() {
                    st.kill(old, st.p().align(self.page_size))?;
                }
                self.cache.get_mut(i).item.addr = addr;
                self.cache.get_mut(i).dirty = false;
                if level + 1 == self.depth {
                    self.root = addr;
                } else {
                    let free = match &self.cache.get(i).item.data {
                        PageData::Leaf(v) => v.iter().filter(|&&e| e == 0).count() as u32,
                        PageData::Interior(v) => v.iter().map(|c| c.1).sum(),
                    };
                    let pi = self.load(st, level + 1, index / self.fanout)?;
                    if let PageData::Interior(v) = &mut self.cache.get_mut(pi).item.data {
                        v[(index % self.fanout) as usize] = (addr, free);
                    }
                    self.cache.get_mut(pi).dirty = true;
                }
            }
        }
        Ok(self.root)
    }

    /// For garbage collection: whether the map page at `a` (found on flash with this level and
    /// index) is the live copy; if so it is marked dirty so the next checkpoint rewrites it
    /// elsewhere.
    pub fn relocate_page<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        a: Addr,
        level: u8,
        index: u32,
    ) -> Result<bool> {
        if level >= self.depth {
            return Ok(false);
        }
        let live = if level + 1 == self.depth {
            index == 0 && self.root == a
        } else {
            let pi = self.load(st, level + 1, index / self.fanout)?;
            match &self.cache.get(pi).item.data {
                PageData::Interior(v) => {
                    v.get((index % self.fanout) as usize).map(|c| c.0) == Some(a)
                }
                PageData::Leaf(_) => false,
            }
        };
        if live {
            let i = self.load(st, level, index)?;
            self.cache.get_mut(i).dirty = true;
        }
        Ok(live)
    }

    /// Drops all cached pages (after the caller discarded RAM state).
    pub fn clear_cache(&mut self) {
        self.cache.clear();
    }

    /// Calls `f` for every map page address the live state uses (root first), for fsck:
    /// pages dirty in RAM are walked through their cached copy and their old address (about to
    /// be rewritten elsewhere) is not reported.
    pub fn walk_pages<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        f: &mut dyn FnMut(Addr, u8, u32),
    ) -> Result<()> {
        self.traverse(st, false, &mut |a, level, index, on_flash, _| {
            if on_flash {
                f(a, level, index)
            }
        })
    }

    /// Calls `f` for every inode number whose entry is not free, for fsck. Only pages that
    /// exist (on flash or in RAM) are visited, so the cost follows the pages written, never
    /// the inode numbers the tree could hold.
    pub fn for_each_used<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        f: &mut dyn FnMut(Ino, MapEntry),
    ) -> Result<()> {
        let leaf_n = self.leaf_n as u64;
        let mut bad = false;
        self.traverse(st, true, &mut |_, _, index, _, data| {
            if let Some(PageData::Leaf(v)) = data {
                for (k, &e) in v.iter().enumerate() {
                    if e == 0 {
                        continue;
                    }
                    let ino = index as u64 * leaf_n + k as u64;
                    match (Ino::try_from(ino), MapEntry::from_u64(e)) {
                        (Ok(ino), Ok(e)) => f(ino, e),
                        _ => bad = true,
                    }
                }
            }
        })?;
        if bad {
            return Err(Error::Corrupt);
        }
        Ok(())
    }

    /// Depth-first walk of the pages that exist (see [`PageVisitor`]): `f` gets each page's address, level, index,
    /// whether that address is its live copy on flash (not a dirty page about to move), and
    /// its contents when known (leaves read from flash only if `leaves`).
    fn traverse<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        leaves: bool,
        f: &mut PageVisitor<'_>,
    ) -> Result<()> {
        if self.depth == 0 {
            return Ok(());
        }
        let mut stack = vec![(self.root, self.depth - 1, 0u32)];
        while let Some((a, level, index)) = stack.pop() {
            let cached = self
                .find(level, index)
                .map(|i| (self.cache.get(i).dirty, self.cache.get(i).item.data.clone()));
            let (on_flash, data) = match cached {
                Some((dirty, data)) => (!dirty && a.is_some(), Some(data)),
                None if a.is_none() => continue,
                None if level == 0 && !leaves => (true, None),
                None => (true, Some(self.decode_page(st, a, level, index)?.data)),
            };
            f(a, level, index, on_flash, data.as_ref());
            if let Some(PageData::Interior(v)) = &data {
                self.push_children(&mut stack, level, index, v);
            }
        }
        Ok(())
    }

    fn push_children(
        &self,
        stack: &mut Vec<(Addr, u8, u32)>,
        level: u8,
        index: u32,
        v: &[(Addr, u32)],
    ) {
        for (k, (ca, _)) in v.iter().enumerate() {
            // Children past the last inode number hold nothing a lookup can reach.
            let Ok(ci) = u32::try_from(index as u64 * self.fanout as u64 + k as u64) else {
                break;
            };
            if ca.is_some() || self.find(level - 1, ci).is_some() {
                stack.push((*ca, level - 1, ci));
            }
        }
    }
}
