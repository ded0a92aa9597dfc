//! The cache of directory pages: roots, bucket chains and bucket-table pages of recently used
//! directories, dirty ones pinned until the next checkpoint writes them, and their loading
//! from flash (through the inode map for a root, through the root's bucket table for the rest).
//!
//! Owns what is cached and the loads. It must never write flash (flush.rs does) and never
//! decide what a directory holds (the algorithms in mod.rs and grow.rs do).

use alloc::vec;
use alloc::vec::Vec;

use super::page::{bucket_capacity, table_page_capacity, BucketPage, DirRoot};
use super::slots::{SlotTable, PLACEHOLDER};
use super::Dirs;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::Reader;
use crate::format::node::NodeType;
use crate::format::params::{Addr, NODE_HEADER};
use crate::index::inode_map::{InodeMap, MapEntry};
use crate::index::lru::{Entry, Lru};
use crate::store::Store;
use dffs_flash::Flash;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ItemKey {
    Root,
    Bucket(u32),
    Table(u32),
}

#[derive(Clone, Debug)]
pub(crate) enum Item {
    Root(DirRoot),
    /// A bucket chain: pages and their on-flash addresses (NONE: not written).
    Bucket(Vec<BucketPage>, Vec<Addr>),
    Table(Vec<Addr>),
}

#[derive(Clone, Debug)]
pub(crate) struct Cached {
    pub ino: Ino,
    pub key: ItemKey,
    /// On-flash address of the item (first page for buckets); NONE: never written.
    pub addr: Addr,
    pub page: Item,
}

impl Cached {
    /// Heap bytes the item holds.
    fn heap_bytes(&self) -> usize {
        match &self.page {
            Item::Root(r) => r.embedded.ram_bytes() + r.table.capacity() * 4 + r.name.capacity(),
            Item::Bucket(pages, addrs) => {
                pages.iter().map(|p| p.slots.ram_bytes()).sum::<usize>() + addrs.capacity() * 4
            }
            Item::Table(t) => t.capacity() * 4,
        }
    }
}

/// Cached directory pages (see the module comment).
pub(crate) struct DirPages {
    cache: Lru<Cached>,
    /// Items kept when clean; dirty items may exceed it until written.
    max: usize,
}

impl DirPages {
    /// A cache of up to `max` items (at least 4).
    pub fn new(max: usize) -> DirPages {
        DirPages {
            cache: Lru::default(),
            max: max.max(4),
        }
    }

    /// RAM held by cached pages.
    pub fn ram_bytes(&self) -> usize {
        self.cache.ram_bytes(Cached::heap_bytes)
    }

    /// The dirty items in `n`ths of a page of RAM each holds, at least one each (see
    /// `Fs::dirty_items`).
    pub fn dirty_shares(&self, n: usize, page: usize) -> usize {
        self.cache
            .iter()
            .filter(|e| e.dirty)
            .map(|e| {
                (n * (e.item.heap_bytes() + core::mem::size_of::<Entry<Cached>>()))
                    .div_ceil(page)
                    .max(1)
            })
            .sum()
    }

    /// Number of cached items.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Number of dirty items.
    pub fn dirty_count(&self) -> usize {
        self.cache.dirty_count()
    }

    /// Directories with dirty items.
    pub fn dirty_dirs(&self) -> Vec<Ino> {
        let mut v: Vec<Ino> = self
            .cache
            .iter()
            .filter(|c| c.dirty)
            .map(|c| c.item.ino)
            .collect();
        crate::sort::sort(&mut v);
        v.dedup();
        v
    }

    /// Forgets everything cached (dirty state included).
    pub fn clear(&mut self) {
        self.cache.clear();
    }

    /// The position of item `key` of directory `ino`.
    pub fn find(&self, ino: Ino, key: ItemKey) -> Option<usize> {
        self.cache.position(|c| c.ino == ino && c.key == key)
    }

    /// The position of a dirty item of directory `ino` whose key `f` accepts.
    pub fn find_dirty(&self, ino: Ino, f: impl Fn(ItemKey) -> bool) -> Option<usize> {
        self.cache
            .iter()
            .position(|e| e.dirty && e.item.ino == ino && f(e.item.key))
    }

    /// Marks item `i` as just used.
    pub fn touch(&mut self, i: usize) {
        self.cache.touch(i);
    }

    /// Item `i`.
    pub fn at_ref(&self, i: usize) -> &Cached {
        &self.cache.get(i).item
    }

    /// Item `i`, to change.
    pub fn at(&mut self, i: usize) -> &mut Cached {
        &mut self.cache.get_mut(i).item
    }

    /// Whether item `i` is dirty.
    pub fn dirty(&self, i: usize) -> bool {
        self.cache.get(i).dirty
    }

    /// Marks item `i` dirty (or clean, once written).
    pub fn set_dirty(&mut self, i: usize, dirty: bool) {
        self.cache.get_mut(i).dirty = dirty;
    }

    /// Keeps the items `keep` holds on to.
    pub fn retain(&mut self, keep: impl FnMut(&Cached) -> bool) {
        self.cache.retain(keep);
    }

    /// Caches an item (evicting clean items of other directories first while full); returns
    /// its position.
    pub fn push(&mut self, c: Cached, dirty: bool) -> usize {
        let keep = c.ino;
        while self.cache.len() >= self.max && self.cache.evict_one(|x| x.ino == keep) {}
        self.cache.push(c, dirty)
    }

    /// Evicts clean items, least recently used first, down to the budget (between
    /// operations: positions in the cache held during an operation become invalid).
    pub fn trim(&mut self) {
        self.cache.trim(self.max, |_| false);
    }

    /// The logical file pointers (`PLACEHOLDER | ino`) in dirty items of directory `ino`.
    pub fn placeholders(&self, ino: Ino) -> Vec<Ino> {
        let mut v = Vec::new();
        for e in self.cache.iter().filter(|e| e.item.ino == ino && e.dirty) {
            let mut scan = |slots: &SlotTable| {
                for s in slots.iter() {
                    if s.is_placeholder() {
                        v.push(s.ptr & !PLACEHOLDER);
                    }
                }
            };
            match &e.item.page {
                Item::Root(r) => scan(&r.embedded),
                Item::Bucket(pages, _) => pages.iter().for_each(|p| scan(&p.slots)),
                Item::Table(_) => {}
            }
        }
        v
    }
}

impl Dirs {
    /// Loads the root of directory `ino` into the cache; returns its index.
    pub(super) fn load_root<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<usize> {
        if let Some(i) = self.pages.find(ino, ItemKey::Root) {
            self.pages.touch(i);
            return Ok(i);
        }
        let addr = match map.get(st, ino)? {
            MapEntry::Dir(a) if a.is_some() => a,
            MapEntry::Dir(_) => return Err(Error::Corrupt),
            _ => return Err(Error::NotFound),
        };
        let (h, bytes) = st.read_node(addr, NodeType::DirRoot, self.p.dir_page)?;
        if h.ino != ino {
            return Err(Error::Corrupt);
        }
        let mut root = DirRoot::decode(&self.p, ino, &bytes[NODE_HEADER as usize..])?;
        root.stored_len = self.p.align(h.len);
        Ok(self.pages.push(
            Cached {
                ino,
                key: ItemKey::Root,
                addr,
                page: Item::Root(root),
            },
            false,
        ))
    }

    /// The root page of directory `ino` (loaded if needed).
    pub fn root<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<&DirRoot> {
        let i = self.load_root(st, map, ino)?;
        match &self.pages.at_ref(i).page {
            Item::Root(r) => Ok(r),
            _ => Err(Error::Corrupt),
        }
    }

    /// The root page of directory `ino`, for modification (marked dirty).
    pub fn root_mut<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<&mut DirRoot> {
        let i = self.load_root(st, map, ino)?;
        self.pages.set_dirty(i, true);
        match &mut self.pages.at(i).page {
            Item::Root(r) => Ok(r),
            _ => Err(Error::Corrupt),
        }
    }

    /// Address of the table page `t` of a paged directory.
    pub(super) fn table_page_addr(root: &DirRoot, t: u32) -> Result<Addr> {
        root.table.get(t as usize).copied().ok_or(Error::Corrupt)
    }

    /// Loads table page `t` of directory `ino`.
    pub(super) fn load_table<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        t: u32,
    ) -> Result<usize> {
        if let Some(i) = self.pages.find(ino, ItemKey::Table(t)) {
            self.pages.touch(i);
            return Ok(i);
        }
        let ri = self.load_root(st, map, ino)?;
        let addr = match &self.pages.at_ref(ri).page {
            Item::Root(r) => Self::table_page_addr(r, t)?,
            _ => return Err(Error::Corrupt),
        };
        let per = table_page_capacity(&self.p);
        let entries = if addr.is_none() {
            vec![Addr::NONE; per]
        } else {
            let (h, bytes) = st.read_node(addr, NodeType::DirTable, self.p.dir_page)?;
            let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
            let first = r.u32()?;
            let n = r.u32()? as usize;
            if h.ino != ino || first != t || n != per {
                return Err(Error::Corrupt);
            }
            let mut v = Vec::with_capacity(per);
            for _ in 0..per {
                let a = Addr(r.u32()?);
                if !(a.is_none() || self.p.addr_valid(a)) {
                    return Err(Error::Corrupt);
                }
                v.push(a);
            }
            v
        };
        Ok(self.pages.push(
            Cached {
                ino,
                key: ItemKey::Table(t),
                addr,
                page: Item::Table(entries),
            },
            false,
        ))
    }

    /// Current on-flash address of bucket `b`'s first page.
    pub(super) fn bucket_addr<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
    ) -> Result<Addr> {
        let ri = self.load_root(st, map, ino)?;
        let (paged, direct) = match &self.pages.at_ref(ri).page {
            Item::Root(r) => (
                r.paged,
                if r.paged {
                    None
                } else {
                    r.table.get(b as usize).copied()
                },
            ),
            _ => return Err(Error::Corrupt),
        };
        if !paged {
            return direct.ok_or(Error::Corrupt);
        }
        let per = table_page_capacity(&self.p) as u32;
        let ti = self.load_table(st, map, ino, b / per)?;
        match &self.pages.at_ref(ti).page {
            Item::Table(v) => v.get((b % per) as usize).copied().ok_or(Error::Corrupt),
            _ => Err(Error::Corrupt),
        }
    }

    /// Records the new first-page address of bucket `b` in the root or its table page.
    pub(super) fn set_bucket_addr<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
        a: Addr,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let paged = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                if !r.paged {
                    if let Some(x) = r.table.get_mut(b as usize) {
                        *x = a;
                    } else {
                        return Err(Error::Corrupt);
                    }
                }
                r.paged
            }
            _ => return Err(Error::Corrupt),
        };
        if !paged {
            self.pages.set_dirty(ri, true);
            return Ok(());
        }
        let per = table_page_capacity(&self.p) as u32;
        let ti = self.load_table(st, map, ino, b / per)?;
        if let Item::Table(v) = &mut self.pages.at(ti).page {
            v[(b % per) as usize] = a;
        }
        self.pages.set_dirty(ti, true);
        Ok(())
    }

    /// Loads bucket `b`'s chain.
    pub(super) fn load_bucket<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
    ) -> Result<usize> {
        if let Some(i) = self.pages.find(ino, ItemKey::Bucket(b)) {
            self.pages.touch(i);
            return Ok(i);
        }
        let first = self.bucket_addr(st, map, ino, b)?;
        let cap = bucket_capacity(&self.p);
        let mut pages = Vec::new();
        let mut addrs = Vec::new();
        let mut a = first;
        while a.is_some() {
            if pages.len() > 64 {
                return Err(Error::Corrupt);
            }
            let (h, bytes) = st.read_node(a, NodeType::DirBucket, self.p.dir_page)?;
            let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
            let bi = r.u32()?;
            let pos = r.u32()?;
            let next = Addr(r.u32()?);
            let count = r.u32()?;
            if h.ino != ino
                || bi != b
                || pos != pages.len() as u32
                || !(next.is_none() || self.p.addr_valid(next))
            {
                return Err(Error::Corrupt);
            }
            let slots = SlotTable::decode(&mut r, cap)?;
            if slots.used() as u32 != count {
                return Err(Error::Corrupt);
            }
            pages.push(BucketPage { slots });
            addrs.push(a);
            a = next;
        }
        if pages.is_empty() {
            pages.push(BucketPage {
                slots: SlotTable::empty(cap),
            });
            addrs.push(Addr::NONE);
        }
        Ok(self.pages.push(
            Cached {
                ino,
                key: ItemKey::Bucket(b),
                addr: first,
                page: Item::Bucket(pages, addrs),
            },
            false,
        ))
    }
}
