//! Directories: entries embedded in the directory's own page as a hash table (the paper's inode
//! embedding), growing by linear hashing into bucket pages (the paper's virtual DirInodes) when
//! one page is not enough.
//!
//! Owns the on-flash layout of directory pages (DirRoot, DirBucket, DirTable), the slot hash
//! table inside each page (open addressing, 8-byte slots: a pointer and a 32-bit key holding 31
//! bits of name hash and a directory bit), linear hashing across bucket pages, readdir order and
//! cookies, and the cache of directory pages with dirty pages pinned until written. A slot's
//! pointer is a directory's inode number (logical, through the inode map), a file inode node's
//! address (physical), or a hard-linked file's inode number (logical). It must never read file inodes or compare names: callers resolve the
//! candidate slots it returns.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino};
use crate::format::codec::Reader;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, LogKind, Params, NAME_MAX, NODE_HEADER};
use crate::map::{InodeMap, MapEntry};
use crate::store::{Priority, Store};
use dffs_flash::Flash;

/// Hash key of a name as stored in directory slots: 31 bits of hash, bit 31 set for
/// directories.
pub fn name_key(name: &[u8], is_dir: bool) -> u32 {
    name_hash(name) | (is_dir as u32) << 31
}

/// The 31-bit name hash: FNV-1a over the bytes, finished with the MurmurHash3 mixer.
pub fn name_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for &b in name {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^= h >> 16;
    h & 0x7FFF_FFFF
}

/// A directory slot: a pointer and a key. Empty slots have both all-ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Child directory inode number (key bit 31 set), file inode node address, or
    /// `PLACEHOLDER | ino`: a logical pointer to a file, resolved through the inode cache or
    /// map (in RAM for a file whose inode is dirty; on flash too for a file with hard links).
    pub ptr: u32,
    /// Bits 0..30: name hash; bit 31: the child is a directory.
    pub key: u32,
}

/// Pointer bit marking a logical file pointer (`PLACEHOLDER | ino`). On flash only files with
/// hard links have one; any other file's is replaced by its inode's address before its
/// directory page is written.
pub const PLACEHOLDER: u32 = 0x8000_0000;

impl Slot {
    /// The empty slot.
    pub const EMPTY: Slot = Slot {
        ptr: u32::MAX,
        key: u32::MAX,
    };
    /// Whether the slot is empty.
    pub fn is_empty(&self) -> bool {
        self.ptr == u32::MAX
    }
    /// Whether the child is a directory.
    pub fn is_dir(&self) -> bool {
        self.key & 0x8000_0000 != 0
    }
    /// The 31-bit name hash.
    pub fn hash(&self) -> u32 {
        self.key & 0x7FFF_FFFF
    }
    /// Whether the pointer is logical (a dirty file inode, or a file with hard links).
    pub fn is_placeholder(&self) -> bool {
        !self.is_dir() && !self.is_empty() && self.ptr & PLACEHOLDER != 0
    }
}

/// Readdir position key of a hash: the hash with its 31 bits reversed, so that every linear
/// hashing bucket covers one contiguous range of keys.
pub fn order_key(hash: u32) -> u32 {
    (hash & 0x7FFF_FFFF).reverse_bits() >> 1
}

/// Home slot of a hash in a table of `n` slots (uses the high hash bits; buckets use the low).
fn home(hash: u32, n: usize) -> usize {
    (((hash >> 15) as u64 * n as u64) >> 16) as usize
}

/// Open-addressing insert into `slots`; false if full.
fn table_insert(slots: &mut [Slot], s: Slot) -> bool {
    let n = slots.len();
    if n == 0 {
        return false;
    }
    let mut i = home(s.hash(), n);
    for _ in 0..n {
        if slots[i].is_empty() {
            slots[i] = s;
            return true;
        }
        i = (i + 1) % n;
    }
    false
}

/// Removes the slot equal to `s` (backward-shift deletion); false if absent.
fn table_remove(slots: &mut [Slot], s: Slot) -> bool {
    let n = slots.len();
    if n == 0 {
        return false;
    }
    let mut i = home(s.hash(), n);
    let mut found = None;
    for _ in 0..n {
        if slots[i].is_empty() {
            break;
        }
        if slots[i] == s {
            found = Some(i);
            break;
        }
        i = (i + 1) % n;
    }
    let Some(mut hole) = found else {
        return false;
    };
    slots[hole] = Slot::EMPTY;
    let mut j = (hole + 1) % n;
    while !slots[j].is_empty() {
        let h = home(slots[j].hash(), n);
        // Move j into the hole unless its home lies cyclically in (hole, j].
        let in_range = if hole <= j {
            hole < h && h <= j
        } else {
            hole < h || h <= j
        };
        if !in_range {
            slots[hole] = slots[j];
            slots[j] = Slot::EMPTY;
            hole = j;
        }
        j = (j + 1) % n;
    }
    true
}

/// Slots whose hash equals `hash`.
fn table_candidates(slots: &[Slot], hash: u32, out: &mut Vec<Slot>) {
    let n = slots.len();
    if n == 0 {
        return;
    }
    let mut i = home(hash, n);
    for _ in 0..n {
        let s = slots[i];
        if s.is_empty() {
            return;
        }
        if s.hash() == hash {
            out.push(s);
        }
        i = (i + 1) % n;
    }
}

fn count_used(slots: &[Slot]) -> usize {
    slots.iter().filter(|s| !s.is_empty()).count()
}

/// A directory's root page (the paper's DirInode) in RAM.
#[derive(Clone, Debug)]
pub struct DirRoot {
    /// The directory's inode number.
    pub ino: Ino,
    /// Parent directory (the root's parent is itself).
    pub parent: Ino,
    /// Attributes.
    pub attrs: Attrs,
    /// Number of subdirectories (nlink = 2 + subdirs).
    pub subdirs: u32,
    /// Number of entries.
    pub entries: u32,
    /// The directory's own name (empty for the root).
    pub name: Vec<u8>,
    /// Linear hashing level.
    level: u8,
    /// Linear hashing split pointer.
    split: u32,
    /// Bucket pages (0: entries are embedded in this page).
    nbuckets: u32,
    /// Embedded slots (when `nbuckets == 0`).
    embedded: Vec<Slot>,
    /// Bucket page addresses when they fit in the root; table page addresses otherwise.
    table: Vec<Addr>,
    /// Whether `table` lists table pages (very large directories).
    paged: bool,
}

/// Fixed bytes of a DirRoot body before the name.
const ROOT_FIXED: u32 = 4 + 48 + 4 + 4 + 4 + 4 + 4;
/// Fixed bytes of a DirBucket body.
const BUCKET_FIXED: u32 = 16;
/// Fixed bytes of a DirTable body.
const TABLE_FIXED: u32 = 8;

/// Largest load (entries per slot) before a bucket split, as a fraction of 16.
const SPLIT_LOAD_16THS: u64 = 11;

impl DirRoot {
    fn room_after_name(p: &Params, name_len: usize) -> u32 {
        let used = NODE_HEADER + ROOT_FIXED + (name_len as u32).div_ceil(8) * 8;
        p.dir_page.saturating_sub(used)
    }
    /// Slots a root page with this name can embed.
    pub fn embedded_capacity(p: &Params, name_len: usize) -> usize {
        (Self::room_after_name(p, name_len) / 8) as usize
    }
    /// Bucket (or table page) addresses a root page with this name can hold: after the name,
    /// a 4-byte count and the addresses.
    fn table_capacity(p: &Params, name_len: usize) -> usize {
        (Self::room_after_name(p, name_len).saturating_sub(4) / 4) as usize
    }
    /// A new, empty directory.
    pub fn new(p: &Params, ino: Ino, parent: Ino, attrs: Attrs, name: &[u8]) -> DirRoot {
        DirRoot {
            ino,
            parent,
            attrs,
            subdirs: 0,
            entries: 0,
            name: name.to_vec(),
            level: 0,
            split: 0,
            nbuckets: 0,
            embedded: vec![Slot::EMPTY; Self::embedded_capacity(p, name.len())],
            table: Vec::new(),
            paged: false,
        }
    }
    /// Number of bucket pages (0: embedded).
    pub fn nbuckets(&self) -> u32 {
        self.nbuckets
    }
    /// Bucket holding `hash` under linear hashing.
    fn bucket_of(&self, hash: u32) -> u32 {
        let lo = hash & ((1u32 << self.level) - 1);
        if lo < self.split {
            hash & ((1u32 << (self.level + 1)) - 1)
        } else {
            lo
        }
    }
    fn encode(&self, p: &Params) -> NodeBuilder {
        let mut nb = NodeBuilder::new(NodeType::DirRoot, 0, self.ino, p.dir_page as usize);
        let w = &mut nb.w;
        w.u32(self.parent);
        self.attrs.encode(w);
        w.u32(self.subdirs).u32(self.entries);
        w.u8(self.level)
            .u8(self.name.len() as u8)
            .u8(self.paged as u8)
            .u8(0);
        w.u32(self.split).u32(self.nbuckets);
        w.bytes(&self.name);
        w.pad_to(8, 0);
        if self.nbuckets == 0 {
            for s in &self.embedded {
                w.u32(s.ptr).u32(s.key);
            }
        } else {
            w.u32(self.table.len() as u32);
            for a in &self.table {
                w.u32(a.0);
            }
        }
        nb
    }
    fn decode(p: &Params, ino: Ino, body: &[u8]) -> Result<DirRoot> {
        let mut r = Reader::new(body);
        let parent = r.u32()?;
        let attrs = Attrs::decode(&mut r)?;
        let subdirs = r.u32()?;
        let entries = r.u32()?;
        let level = r.u8()?;
        let name_len = r.u8()? as usize;
        let paged = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(Error::Corrupt),
        };
        r.u8()?;
        let split = r.u32()?;
        let nbuckets = r.u32()?;
        let name = r.take(name_len)?.to_vec();
        r.skip(name_len.div_ceil(8) * 8 - name_len)?;
        if level > 24
            || (nbuckets > 0 && (split >= (1u32 << level) || nbuckets != (1u32 << level) + split))
            || (nbuckets == 0 && (level != 0 || split != 0))
            || name.contains(&b'/')
            || name.contains(&0)
            || !attrs.is_dir()
        {
            return Err(Error::Corrupt);
        }
        let mut embedded = Vec::new();
        let mut table = Vec::new();
        if nbuckets == 0 {
            let cap = Self::embedded_capacity(p, name_len);
            for _ in 0..cap {
                let s = Slot {
                    ptr: r.u32()?,
                    key: r.u32()?,
                };
                embedded.push(s);
            }
            if count_used(&embedded) as u32 != entries {
                return Err(Error::Corrupt);
            }
        } else {
            let n = r.u32()? as usize;
            let per_page = ((p.dir_page - NODE_HEADER - TABLE_FIXED) / 4) as usize;
            let expect = if paged {
                (nbuckets as usize).div_ceil(per_page)
            } else {
                nbuckets as usize
            };
            if n != expect || n > Self::table_capacity(p, name_len) {
                return Err(Error::Corrupt);
            }
            for _ in 0..n {
                let a = Addr(r.u32()?);
                if !(a.is_none() || p.addr_valid(a)) {
                    return Err(Error::Corrupt);
                }
                table.push(a);
            }
        }
        Ok(DirRoot {
            ino,
            parent,
            attrs,
            subdirs,
            entries,
            name,
            level,
            split,
            nbuckets,
            embedded,
            table,
            paged,
        })
    }
}

/// One page of a bucket chain (first page plus overflow pages) in RAM.
#[derive(Clone, Debug)]
struct BucketPage {
    slots: Vec<Slot>,
}

fn bucket_capacity(p: &Params) -> usize {
    ((p.dir_page - NODE_HEADER - BUCKET_FIXED) / 8) as usize
}

fn table_page_capacity(p: &Params) -> usize {
    ((p.dir_page - NODE_HEADER - TABLE_FIXED) / 4) as usize
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemKey {
    Root,
    Bucket(u32),
    Table(u32),
}

#[derive(Clone, Debug)]
enum Item {
    Root(DirRoot),
    /// A bucket chain: pages and their on-flash addresses (NONE: not written).
    Bucket(Vec<BucketPage>, Vec<Addr>),
    Table(Vec<Addr>),
}

#[derive(Clone, Debug)]
struct Cached {
    ino: Ino,
    key: ItemKey,
    /// On-flash address of the item (first page for buckets); NONE: never written.
    addr: Addr,
    dirty: bool,
    used: u64,
    item: Item,
}

/// What a directory page found on flash says it is (for garbage collection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirPageId {
    /// DirRoot, DirBucket or DirTable.
    pub typ: NodeType,
    /// The directory.
    pub ino: Ino,
    /// Bucket number (DirBucket) or table page number (DirTable).
    pub index: u32,
    /// Position in the bucket's overflow chain (DirBucket).
    pub pos: u32,
}

/// An entry seen by readdir, before the caller resolves its name.
#[derive(Clone, Copy, Debug)]
pub struct RawEntry {
    /// The slot.
    pub slot: Slot,
    /// Readdir order key.
    pub order: u32,
}

/// The directory page cache and the operations on directories.
pub struct Dirs {
    cache: Vec<Cached>,
    cache_max: usize,
    tick: u64,
    p: Params,
}

impl Dirs {
    /// A cache holding up to `cache_max` pages (dirty ones may exceed it until written).
    pub fn new(p: Params, cache_max: usize) -> Dirs {
        Dirs {
            cache: Vec::new(),
            cache_max: cache_max.max(4),
            tick: 0,
            p,
        }
    }

    /// RAM held by cached pages.
    pub fn ram_bytes(&self) -> usize {
        self.cache.capacity() * core::mem::size_of::<Cached>()
            + self
                .cache
                .iter()
                .map(|c| match &c.item {
                    Item::Root(r) => {
                        r.embedded.capacity() * 8 + r.table.capacity() * 4 + r.name.capacity()
                    }
                    Item::Bucket(pages, addrs) => {
                        pages.iter().map(|p| p.slots.capacity() * 8).sum::<usize>()
                            + addrs.capacity() * 4
                    }
                    Item::Table(t) => t.capacity() * 4,
                })
                .sum::<usize>()
    }

    /// Number of cached items.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Number of dirty items.
    pub fn dirty_count(&self) -> usize {
        self.cache.iter().filter(|c| c.dirty).count()
    }

    /// Directories with dirty items.
    pub fn dirty_dirs(&self) -> Vec<Ino> {
        let mut v: Vec<Ino> = self
            .cache
            .iter()
            .filter(|c| c.dirty)
            .map(|c| c.ino)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Forgets everything cached (dirty state included).
    pub fn clear(&mut self) {
        self.cache.clear();
    }

    fn find(&self, ino: Ino, key: ItemKey) -> Option<usize> {
        self.cache.iter().position(|c| c.ino == ino && c.key == key)
    }

    fn touch(&mut self, i: usize) {
        self.tick += 1;
        self.cache[i].used = self.tick;
    }

    /// Evicts clean items while over budget (never items of `keep`).
    fn make_room(&mut self, keep: Ino) {
        while self.cache.len() >= self.cache_max {
            let v = self
                .cache
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.dirty && c.ino != keep)
                .min_by_key(|(_, c)| c.used)
                .map(|(i, _)| i);
            match v {
                Some(i) => {
                    self.cache.swap_remove(i);
                }
                None => return,
            }
        }
    }

    /// Evicts clean items, least recently used first, down to the budget (between
    /// operations: positions in the cache held during an operation become invalid).
    pub fn trim(&mut self) {
        while self.cache.len() > self.cache_max {
            let v = self
                .cache
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.dirty)
                .min_by_key(|(_, c)| c.used)
                .map(|(i, _)| i);
            match v {
                Some(i) => {
                    self.cache.swap_remove(i);
                }
                None => return,
            }
        }
    }

    fn push(&mut self, c: Cached) -> usize {
        self.make_room(c.ino);
        self.cache.push(c);
        let i = self.cache.len() - 1;
        self.touch(i);
        i
    }

    /// Loads the root of directory `ino` into the cache; returns its index.
    fn load_root<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<usize> {
        if let Some(i) = self.find(ino, ItemKey::Root) {
            self.touch(i);
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
        let root = DirRoot::decode(&self.p, ino, &bytes[NODE_HEADER as usize..])?;
        Ok(self.push(Cached {
            ino,
            key: ItemKey::Root,
            addr,
            dirty: false,
            used: 0,
            item: Item::Root(root),
        }))
    }

    /// The root page of directory `ino` (loaded if needed).
    pub fn root<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<&DirRoot> {
        let i = self.load_root(st, map, ino)?;
        match &self.cache[i].item {
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
        self.cache[i].dirty = true;
        match &mut self.cache[i].item {
            Item::Root(r) => Ok(r),
            _ => Err(Error::Corrupt),
        }
    }

    /// Adds a new, empty directory to the cache (dirty; written at the next checkpoint).
    pub fn create(&mut self, root: DirRoot) {
        let ino = root.ino;
        self.cache.retain(|c| c.ino != ino);
        self.push(Cached {
            ino,
            key: ItemKey::Root,
            addr: Addr::NONE,
            dirty: true,
            used: 0,
            item: Item::Root(root),
        });
    }

    /// Address of the table page `t` of a paged directory.
    fn table_page_addr(root: &DirRoot, t: u32) -> Result<Addr> {
        root.table.get(t as usize).copied().ok_or(Error::Corrupt)
    }

    /// Loads table page `t` of directory `ino`.
    fn load_table<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        t: u32,
    ) -> Result<usize> {
        if let Some(i) = self.find(ino, ItemKey::Table(t)) {
            self.touch(i);
            return Ok(i);
        }
        let ri = self.load_root(st, map, ino)?;
        let addr = match &self.cache[ri].item {
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
        Ok(self.push(Cached {
            ino,
            key: ItemKey::Table(t),
            addr,
            dirty: false,
            used: 0,
            item: Item::Table(entries),
        }))
    }

    /// Current on-flash address of bucket `b`'s first page.
    fn bucket_addr<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
    ) -> Result<Addr> {
        let ri = self.load_root(st, map, ino)?;
        let (paged, direct) = match &self.cache[ri].item {
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
        match &self.cache[ti].item {
            Item::Table(v) => v.get((b % per) as usize).copied().ok_or(Error::Corrupt),
            _ => Err(Error::Corrupt),
        }
    }

    /// Records the new first-page address of bucket `b` in the root or its table page.
    fn set_bucket_addr<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
        a: Addr,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let paged = match &mut self.cache[ri].item {
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
            self.cache[ri].dirty = true;
            return Ok(());
        }
        let per = table_page_capacity(&self.p) as u32;
        let ti = self.load_table(st, map, ino, b / per)?;
        if let Item::Table(v) = &mut self.cache[ti].item {
            v[(b % per) as usize] = a;
        }
        self.cache[ti].dirty = true;
        Ok(())
    }

    /// Loads bucket `b`'s chain.
    fn load_bucket<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        b: u32,
    ) -> Result<usize> {
        if let Some(i) = self.find(ino, ItemKey::Bucket(b)) {
            self.touch(i);
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
            let mut slots = Vec::with_capacity(cap);
            for _ in 0..cap {
                let s = Slot {
                    ptr: r.u32()?,
                    key: r.u32()?,
                };
                slots.push(s);
            }
            if count_used(&slots) as u32 != count {
                return Err(Error::Corrupt);
            }
            pages.push(BucketPage { slots });
            addrs.push(a);
            a = next;
        }
        if pages.is_empty() {
            pages.push(BucketPage {
                slots: vec![Slot::EMPTY; cap],
            });
            addrs.push(Addr::NONE);
        }
        Ok(self.push(Cached {
            ino,
            key: ItemKey::Bucket(b),
            addr: first,
            dirty: false,
            used: 0,
            item: Item::Bucket(pages, addrs),
        }))
    }

    /// Slots of directory `ino` whose name hash is `hash`.
    pub fn candidates<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        hash: u32,
    ) -> Result<Vec<Slot>> {
        let mut out = Vec::new();
        let ri = self.load_root(st, map, ino)?;
        let b = match &self.cache[ri].item {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    table_candidates(&r.embedded, hash, &mut out);
                    return Ok(out);
                }
                r.bucket_of(hash)
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        if let Item::Bucket(pages, _) = &self.cache[bi].item {
            for p in pages {
                table_candidates(&p.slots, hash, &mut out);
            }
        }
        Ok(out)
    }

    /// Inserts a slot into directory `ino` (the caller has checked the name is new) and
    /// updates the entry count.
    pub fn insert<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        s: Slot,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        self.cache[ri].dirty = true;
        let nb = match &mut self.cache[ri].item {
            Item::Root(r) => {
                r.entries = r.entries.saturating_add(1);
                if s.is_dir() {
                    r.subdirs = r.subdirs.saturating_add(1);
                }
                if r.nbuckets == 0 {
                    let cap = r.embedded.len() as u64;
                    if (r.entries as u64) * 16 <= cap * SPLIT_LOAD_16THS
                        && table_insert(&mut r.embedded, s)
                    {
                        return Ok(());
                    }
                }
                r.nbuckets
            }
            _ => return Err(Error::Corrupt),
        };
        if nb == 0 {
            // The embedded table is full: spread its entries over two bucket pages.
            self.unembed(st, map, ino)?;
        }
        self.insert_into_bucket(st, map, ino, s)?;
        self.maybe_split(st, map, ino)
    }

    fn insert_into_bucket<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        s: Slot,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let b = match &self.cache[ri].item {
            Item::Root(r) => r.bucket_of(s.hash()),
            _ => return Err(Error::Corrupt),
        };
        let cap = bucket_capacity(&self.p);
        let bi = self.load_bucket(st, map, ino, b)?;
        self.cache[bi].dirty = true;
        if let Item::Bucket(pages, addrs) = &mut self.cache[bi].item {
            for p in pages.iter_mut() {
                if count_used(&p.slots) < cap && table_insert(&mut p.slots, s) {
                    return Ok(());
                }
            }
            // Every page of the chain is full: add an overflow page (a virtual DirInode).
            let mut slots = vec![Slot::EMPTY; cap];
            table_insert(&mut slots, s);
            pages.push(BucketPage { slots });
            addrs.push(Addr::NONE);
        }
        Ok(())
    }

    /// Moves the embedded slots of a root into two bucket pages (linear hashing level 1).
    fn unembed<F: Flash>(&mut self, st: &mut Store<F>, map: &mut InodeMap, ino: Ino) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let moved: Vec<Slot> = match &mut self.cache[ri].item {
            Item::Root(r) => {
                let v = r
                    .embedded
                    .iter()
                    .copied()
                    .filter(|s| !s.is_empty())
                    .collect();
                r.embedded = Vec::new();
                r.level = 1;
                r.split = 0;
                r.nbuckets = 2;
                r.table = vec![Addr::NONE; 2];
                r.paged = false;
                v
            }
            _ => return Err(Error::Corrupt),
        };
        let cap = bucket_capacity(&self.p);
        for b in 0..2 {
            self.cache
                .retain(|c| !(c.ino == ino && c.key == ItemKey::Bucket(b)));
            self.push(Cached {
                ino,
                key: ItemKey::Bucket(b),
                addr: Addr::NONE,
                dirty: true,
                used: 0,
                item: Item::Bucket(
                    vec![BucketPage {
                        slots: vec![Slot::EMPTY; cap],
                    }],
                    vec![Addr::NONE],
                ),
            });
        }
        for s in moved {
            self.insert_into_bucket(st, map, ino, s)?;
        }
        Ok(())
    }

    /// Splits buckets while the load is above the threshold.
    fn maybe_split<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let cap = bucket_capacity(&self.p) as u64;
        loop {
            let ri = self.load_root(st, map, ino)?;
            let (entries, nb, level, split, name_len) = match &self.cache[ri].item {
                Item::Root(r) => (r.entries as u64, r.nbuckets, r.level, r.split, r.name.len()),
                _ => return Err(Error::Corrupt),
            };
            if nb == 0 || entries * 16 <= nb as u64 * cap * SPLIT_LOAD_16THS {
                return Ok(());
            }
            if level >= 24 {
                return Ok(());
            }
            let new_b = (1u32 << level) + split;
            // Grow the table first (may switch the root to table pages).
            self.grow_table(st, map, ino, name_len)?;
            let bi = self.load_bucket(st, map, ino, split)?;
            let all: Vec<Slot> = match &mut self.cache[bi].item {
                Item::Bucket(pages, _) => pages
                    .iter()
                    .flat_map(|p| p.slots.iter().copied())
                    .filter(|s| !s.is_empty())
                    .collect(),
                _ => return Err(Error::Corrupt),
            };
            // Old bucket keeps its first page address (rewritten at flush); overflow pages die.
            let (old_first, old_rest): (Addr, Vec<Addr>) = match &self.cache[bi].item {
                Item::Bucket(_, addrs) => (addrs[0], addrs[1..].to_vec()),
                _ => return Err(Error::Corrupt),
            };
            for a in old_rest {
                if a.is_some() {
                    st.kill(a, self.p.dir_page);
                }
            }
            let capu = cap as usize;
            self.cache[bi].item = Item::Bucket(
                vec![BucketPage {
                    slots: vec![Slot::EMPTY; capu],
                }],
                vec![old_first],
            );
            self.cache[bi].dirty = true;
            self.cache
                .retain(|c| !(c.ino == ino && c.key == ItemKey::Bucket(new_b)));
            self.push(Cached {
                ino,
                key: ItemKey::Bucket(new_b),
                addr: Addr::NONE,
                dirty: true,
                used: 0,
                item: Item::Bucket(
                    vec![BucketPage {
                        slots: vec![Slot::EMPTY; capu],
                    }],
                    vec![Addr::NONE],
                ),
            });
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.cache[ri].item {
                r.split += 1;
                r.nbuckets += 1;
                if r.split == 1u32 << r.level {
                    r.level += 1;
                    r.split = 0;
                }
            }
            self.cache[ri].dirty = true;
            for s in all {
                self.insert_into_bucket(st, map, ino, s)?;
            }
        }
    }

    /// Adds one bucket address slot to the table (switching to table pages when the root is
    /// full).
    fn grow_table<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        name_len: usize,
    ) -> Result<()> {
        let per = table_page_capacity(&self.p);
        let root_cap = DirRoot::table_capacity(&self.p, name_len);
        let ri = self.load_root(st, map, ino)?;
        self.cache[ri].dirty = true;
        let (paged, nb) = match &self.cache[ri].item {
            Item::Root(r) => (r.paged, r.nbuckets as usize),
            _ => return Err(Error::Corrupt),
        };
        if !paged {
            if nb < root_cap {
                if let Item::Root(r) = &mut self.cache[ri].item {
                    r.table.push(Addr::NONE);
                }
                return Ok(());
            }
            // Move the inline table into table pages.
            let inline: Vec<Addr> = match &mut self.cache[ri].item {
                Item::Root(r) => core::mem::take(&mut r.table),
                _ => return Err(Error::Corrupt),
            };
            let pages = (nb + 1).div_ceil(per);
            if pages > root_cap {
                return Err(Error::NoSpace);
            }
            if let Item::Root(r) = &mut self.cache[ri].item {
                r.paged = true;
                r.table = vec![Addr::NONE; pages];
            }
            for t in 0..pages {
                let mut v = vec![Addr::NONE; per];
                for (k, x) in v.iter_mut().enumerate() {
                    if let Some(a) = inline.get(t * per + k) {
                        *x = *a;
                    }
                }
                self.cache
                    .retain(|c| !(c.ino == ino && c.key == ItemKey::Table(t as u32)));
                self.push(Cached {
                    ino,
                    key: ItemKey::Table(t as u32),
                    addr: Addr::NONE,
                    dirty: true,
                    used: 0,
                    item: Item::Table(v),
                });
            }
            return Ok(());
        }
        // Paged: add a table page when the last one is full.
        let pages_needed = (nb + 1).div_ceil(per);
        let ri = self.load_root(st, map, ino)?;
        if let Item::Root(r) = &mut self.cache[ri].item {
            if pages_needed > r.table.len() {
                if pages_needed > root_cap {
                    return Err(Error::NoSpace);
                }
                r.table.push(Addr::NONE);
            }
        }
        Ok(())
    }

    /// Removes the slot `s` from directory `ino` and updates the counts.
    pub fn remove<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        s: Slot,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let b = match &mut self.cache[ri].item {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    if !table_remove(&mut r.embedded, s) {
                        return Err(Error::Corrupt);
                    }
                    r.entries = r.entries.saturating_sub(1);
                    if s.is_dir() {
                        r.subdirs = r.subdirs.saturating_sub(1);
                    }
                    self.cache[ri].dirty = true;
                    return Ok(());
                }
                r.bucket_of(s.hash())
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        let mut removed = false;
        if let Item::Bucket(pages, _) = &mut self.cache[bi].item {
            for p in pages.iter_mut() {
                if table_remove(&mut p.slots, s) {
                    removed = true;
                    break;
                }
            }
        }
        if !removed {
            return Err(Error::Corrupt);
        }
        self.cache[bi].dirty = true;
        let ri = self.load_root(st, map, ino)?;
        self.cache[ri].dirty = true;
        let (entries, name_len) = match &mut self.cache[ri].item {
            Item::Root(r) => {
                r.entries = r.entries.saturating_sub(1);
                if s.is_dir() {
                    r.subdirs = r.subdirs.saturating_sub(1);
                }
                (r.entries as usize, r.name.len())
            }
            _ => return Err(Error::Corrupt),
        };
        // Shrink back into the root page when the directory has become small.
        if entries <= DirRoot::embedded_capacity(&self.p, name_len) / 4 {
            self.embed(st, map, ino)?;
        }
        Ok(())
    }

    /// Moves all entries of a bucketed directory back into its root page.
    fn embed<F: Flash>(&mut self, st: &mut Store<F>, map: &mut InodeMap, ino: Ino) -> Result<()> {
        let all = self.all_slots(st, map, ino)?;
        let dead = self.page_addrs(st, map, ino, false)?;
        for a in dead {
            st.kill(a, self.p.dir_page);
        }
        self.cache
            .retain(|c| !(c.ino == ino && c.key != ItemKey::Root));
        let ri = self.load_root(st, map, ino)?;
        let p = self.p;
        if let Item::Root(r) = &mut self.cache[ri].item {
            r.level = 0;
            r.split = 0;
            r.nbuckets = 0;
            r.table = Vec::new();
            r.paged = false;
            r.embedded = vec![Slot::EMPTY; DirRoot::embedded_capacity(&p, r.name.len())];
            for s in all {
                if !table_insert(&mut r.embedded, s) {
                    return Err(Error::Corrupt);
                }
            }
        }
        self.cache[ri].dirty = true;
        Ok(())
    }

    /// Replaces the pointer of the slot `old` with `new_ptr` (a file inode moved, or became
    /// dirty / clean).
    pub fn replace_ptr<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        old: Slot,
        new_ptr: u32,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let b = match &mut self.cache[ri].item {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    for s in r.embedded.iter_mut() {
                        if *s == old {
                            s.ptr = new_ptr;
                            self.cache[ri].dirty = true;
                            return Ok(());
                        }
                    }
                    return Err(Error::Corrupt);
                }
                r.bucket_of(old.hash())
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        if let Item::Bucket(pages, _) = &mut self.cache[bi].item {
            for p in pages.iter_mut() {
                for s in p.slots.iter_mut() {
                    if *s == old {
                        s.ptr = new_ptr;
                        self.cache[bi].dirty = true;
                        return Ok(());
                    }
                }
            }
        }
        Err(Error::Corrupt)
    }

    /// Every slot of directory `ino` (for shrinking, fsck and deletion).
    pub fn all_slots<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<Vec<Slot>> {
        let ri = self.load_root(st, map, ino)?;
        let nb = match &self.cache[ri].item {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    return Ok(r
                        .embedded
                        .iter()
                        .copied()
                        .filter(|s| !s.is_empty())
                        .collect());
                }
                r.nbuckets
            }
            _ => return Err(Error::Corrupt),
        };
        let mut out = Vec::new();
        for b in 0..nb {
            let bi = self.load_bucket(st, map, ino, b)?;
            if let Item::Bucket(pages, _) = &self.cache[bi].item {
                for p in pages {
                    out.extend(p.slots.iter().copied().filter(|s| !s.is_empty()));
                }
            }
        }
        Ok(out)
    }

    /// Readdir, one bucket at a time: the entries of the bucket range holding order key
    /// `from` whose order key is at least `from`, sorted by order key, and the first order key
    /// after that range (`None` at the end).
    pub fn entries_from<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        from: u64,
    ) -> Result<(Vec<RawEntry>, Option<u64>)> {
        let ri = self.load_root(st, map, ino)?;
        let (nb, level, split) = match &self.cache[ri].item {
            Item::Root(r) => (r.nbuckets, r.level, r.split),
            _ => return Err(Error::Corrupt),
        };
        let collect = |slots: &mut dyn Iterator<Item = Slot>| -> Vec<RawEntry> {
            let mut v: Vec<RawEntry> = slots
                .filter(|s| !s.is_empty())
                .map(|s| RawEntry {
                    slot: s,
                    order: order_key(s.hash()),
                })
                .filter(|e| e.order as u64 >= from)
                .collect();
            v.sort_by_key(|e| e.order);
            v
        };
        if from > 0x7FFF_FFFF {
            return Ok((Vec::new(), None));
        }
        if nb == 0 {
            let v = match &self.cache[ri].item {
                Item::Root(r) => collect(&mut r.embedded.iter().copied()),
                _ => return Err(Error::Corrupt),
            };
            return Ok((v, None));
        }
        // Order keys are 31 bits; their top `level+1` bits select a prefix, and an unsplit
        // bucket covers two consecutive prefixes.
        let bits = level as u32 + 1;
        let shift = 31 - bits;
        let prefix = (from >> shift) as u32;
        let suffix = prefix.reverse_bits() >> (32 - bits);
        let lo = suffix & ((1u32 << level) - 1);
        let (bucket, range_end_prefix) = if lo < split {
            (suffix, prefix as u64 + 1)
        } else {
            (lo, (prefix as u64 | 1) + 1)
        };
        let bi = self.load_bucket(st, map, ino, bucket)?;
        let v = match &self.cache[bi].item {
            Item::Bucket(pages, _) => {
                collect(&mut pages.iter().flat_map(|p| p.slots.iter().copied()))
            }
            _ => return Err(Error::Corrupt),
        };
        let next = range_end_prefix << shift;
        Ok((v, if next > 0x7FFF_FFFF { None } else { Some(next) }))
    }

    /// Renames directory `ino` in place: new parent and name (the root page's embedded table
    /// is rebuilt when the name changes its capacity).
    pub fn rename_dir<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        parent: Ino,
        name: &[u8],
    ) -> Result<()> {
        let p = self.p;
        let ri = self.load_root(st, map, ino)?;
        self.cache[ri].dirty = true;
        let overflow = match &mut self.cache[ri].item {
            Item::Root(r) => {
                r.parent = parent;
                r.name = name.to_vec();
                if r.nbuckets == 0 {
                    let cap = DirRoot::embedded_capacity(&p, name.len());
                    let old: Vec<Slot> = r
                        .embedded
                        .iter()
                        .copied()
                        .filter(|s| !s.is_empty())
                        .collect();
                    let mut fresh = vec![Slot::EMPTY; cap];
                    let mut ok = (old.len() as u64) * 16 <= cap as u64 * SPLIT_LOAD_16THS;
                    if ok {
                        for s in &old {
                            if !table_insert(&mut fresh, *s) {
                                ok = false;
                                break;
                            }
                        }
                    }
                    if ok {
                        r.embedded = fresh;
                        false
                    } else {
                        true
                    }
                } else {
                    false
                }
            }
            _ => return Err(Error::Corrupt),
        };
        if overflow {
            self.unembed(st, map, ino)?;
            self.maybe_split(st, map, ino)?;
        }
        // A longer name may leave no room for an inline bucket table.
        let ri = self.load_root(st, map, ino)?;
        let (nb, paged) = match &self.cache[ri].item {
            Item::Root(r) => (r.nbuckets as usize, r.paged),
            _ => return Err(Error::Corrupt),
        };
        if nb > 0 && !paged && nb > DirRoot::table_capacity(&p, name.len()) {
            // Force the switch to table pages by growing and shrinking the table by one.
            self.grow_table(st, map, ino, name.len())?;
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.cache[ri].item {
                if !r.paged {
                    r.table.pop();
                }
            }
        }
        Ok(())
    }

    /// Addresses of every written page of directory `ino` (root excluded unless `with_root`).
    pub fn page_addrs<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        with_root: bool,
    ) -> Result<Vec<Addr>> {
        self.page_addrs_filtered(st, map, ino, with_root, false)
    }

    /// Addresses of the written pages that the live state still uses: like [`Dirs::page_addrs`]
    /// but without the old copies of pages that are dirty in RAM (they are superseded and
    /// rewritten elsewhere by the next checkpoint). For fsck.
    pub fn live_page_addrs<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<Vec<Addr>> {
        self.page_addrs_filtered(st, map, ino, true, true)
    }

    fn page_addrs_filtered<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        with_root: bool,
        clean_only: bool,
    ) -> Result<Vec<Addr>> {
        let mut out = Vec::new();
        let ri = self.load_root(st, map, ino)?;
        if with_root && self.cache[ri].addr.is_some() && !(clean_only && self.cache[ri].dirty) {
            out.push(self.cache[ri].addr);
        }
        let (nb, paged, table) = match &self.cache[ri].item {
            Item::Root(r) => (r.nbuckets, r.paged, r.table.clone()),
            _ => return Err(Error::Corrupt),
        };
        if paged {
            for (t, a) in table.iter().enumerate() {
                if a.is_none() {
                    continue;
                }
                let dirty = self
                    .find(ino, ItemKey::Table(t as u32))
                    .map(|i| self.cache[i].dirty)
                    .unwrap_or(false);
                if !(clean_only && dirty) {
                    out.push(*a);
                }
            }
        }
        for b in 0..nb {
            let bi = self.load_bucket(st, map, ino, b)?;
            if clean_only && self.cache[bi].dirty {
                continue;
            }
            if let Item::Bucket(_, addrs) = &self.cache[bi].item {
                out.extend(addrs.iter().copied().filter(|a| a.is_some()));
            }
        }
        Ok(out)
    }

    /// Forgets directory `ino` and counts its pages dead (rmdir).
    pub fn destroy<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let pages = self.page_addrs(st, map, ino, true)?;
        for a in pages {
            st.kill(a, self.p.dir_page);
        }
        self.cache.retain(|c| c.ino != ino);
        Ok(())
    }

    /// Whether any slot of a dirty item of directory `ino` is a placeholder.
    pub fn placeholders(&self, ino: Ino) -> Vec<Ino> {
        let mut v = Vec::new();
        for c in self.cache.iter().filter(|c| c.ino == ino && c.dirty) {
            let mut scan = |slots: &[Slot]| {
                for s in slots {
                    if s.is_placeholder() {
                        v.push(s.ptr & !PLACEHOLDER);
                    }
                }
            };
            match &c.item {
                Item::Root(r) => scan(&r.embedded),
                Item::Bucket(pages, _) => pages.iter().for_each(|p| scan(&p.slots)),
                Item::Table(_) => {}
            }
        }
        v
    }

    /// Writes every dirty page of directory `ino` (buckets, then table pages, then the root)
    /// and points the inode map at the new root. The placeholders left must be files with
    /// hard links (logical pointers, resolved through the inode map); the caller checks.
    pub fn flush_dir<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let p = self.p;
        // Buckets.
        while let Some(i) = self
            .cache
            .iter()
            .position(|c| c.ino == ino && c.dirty && matches!(c.key, ItemKey::Bucket(_)))
        {
            let b = match self.cache[i].key {
                ItemKey::Bucket(b) => b,
                _ => unreachable!(),
            };
            let (pages, old_addrs) = match &self.cache[i].item {
                Item::Bucket(pages, addrs) => (pages.clone(), addrs.clone()),
                _ => return Err(Error::Corrupt),
            };
            // Drop empty overflow pages.
            let mut keep: Vec<&BucketPage> = Vec::new();
            for (k, pg) in pages.iter().enumerate() {
                if k == 0 || count_used(&pg.slots) > 0 {
                    keep.push(pg);
                }
            }
            let mut next = Addr::NONE;
            let mut new_addrs = vec![Addr::NONE; keep.len()];
            for k in (0..keep.len()).rev() {
                let mut nb = NodeBuilder::new(NodeType::DirBucket, 0, ino, p.dir_page as usize);
                nb.w.u32(b)
                    .u32(k as u32)
                    .u32(next.0)
                    .u32(count_used(&keep[k].slots) as u32);
                for s in &keep[k].slots {
                    nb.w.u32(s.ptr).u32(s.key);
                }
                let cur = nb.w.len() as u32;
                nb.w.fill(0, (p.dir_page - cur) as usize);
                let a = st.write_node(LogKind::Dir, nb, Priority::Reserve)?;
                new_addrs[k] = a;
                next = a;
            }
            for a in old_addrs.iter().filter(|a| a.is_some()) {
                st.kill(*a, p.dir_page);
            }
            let kept: Vec<BucketPage> = keep.into_iter().cloned().collect();
            self.cache[i].item = Item::Bucket(kept, new_addrs.clone());
            self.cache[i].addr = new_addrs[0];
            self.cache[i].dirty = false;
            self.set_bucket_addr(st, map, ino, b, new_addrs[0])?;
        }
        // Table pages.
        while let Some(i) = self
            .cache
            .iter()
            .position(|c| c.ino == ino && c.dirty && matches!(c.key, ItemKey::Table(_)))
        {
            let t = match self.cache[i].key {
                ItemKey::Table(t) => t,
                _ => unreachable!(),
            };
            let entries = match &self.cache[i].item {
                Item::Table(v) => v.clone(),
                _ => return Err(Error::Corrupt),
            };
            let mut nb = NodeBuilder::new(NodeType::DirTable, 0, ino, p.dir_page as usize);
            nb.w.u32(t).u32(entries.len() as u32);
            for a in &entries {
                nb.w.u32(a.0);
            }
            let cur = nb.w.len() as u32;
            nb.w.fill(0, (p.dir_page - cur) as usize);
            let a = st.write_node(LogKind::Dir, nb, Priority::Reserve)?;
            let old = self.cache[i].addr;
            if old.is_some() {
                st.kill(old, p.dir_page);
            }
            self.cache[i].addr = a;
            self.cache[i].dirty = false;
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.cache[ri].item {
                if let Some(x) = r.table.get_mut(t as usize) {
                    *x = a;
                }
            }
            self.cache[ri].dirty = true;
        }
        // Root.
        if let Some(i) = self.find(ino, ItemKey::Root) {
            if self.cache[i].dirty {
                let nb = match &self.cache[i].item {
                    Item::Root(r) => r.encode(&p),
                    _ => return Err(Error::Corrupt),
                };
                let mut nb = nb;
                let cur = nb.w.len() as u32;
                if cur > p.dir_page {
                    return Err(Error::Corrupt);
                }
                nb.w.fill(0, (p.dir_page - cur) as usize);
                let a = st.write_node(LogKind::Dir, nb, Priority::Reserve)?;
                let old = self.cache[i].addr;
                if old.is_some() {
                    st.kill(old, p.dir_page);
                }
                self.cache[i].addr = a;
                self.cache[i].dirty = false;
                map.set(st, ino, MapEntry::Dir(a))?;
            }
        }
        Ok(())
    }

    /// For garbage collection: whether the directory page at `a` (identified by what its
    /// header and body say) is live; if so its item is marked dirty so the next checkpoint
    /// rewrites it elsewhere.
    pub fn relocate<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        a: Addr,
        id: DirPageId,
    ) -> Result<bool> {
        let DirPageId {
            typ,
            ino,
            index,
            pos,
        } = id;
        match map.get(st, ino)? {
            MapEntry::Dir(_) => {}
            _ => return Ok(false),
        }
        match typ {
            NodeType::DirRoot => {
                let ri = self.load_root(st, map, ino)?;
                let live = self.cache[ri].addr == a;
                if live {
                    self.cache[ri].dirty = true;
                }
                Ok(live)
            }
            NodeType::DirBucket => {
                let nb = self.root(st, map, ino)?.nbuckets;
                if index >= nb {
                    return Ok(false);
                }
                let bi = self.load_bucket(st, map, ino, index)?;
                let live = match &self.cache[bi].item {
                    Item::Bucket(_, addrs) => addrs.get(pos as usize) == Some(&a),
                    _ => false,
                };
                if live {
                    self.cache[bi].dirty = true;
                }
                Ok(live)
            }
            NodeType::DirTable => {
                let (paged, t) = {
                    let r = self.root(st, map, ino)?;
                    (r.paged, r.table.get(index as usize).copied())
                };
                if !paged || t != Some(a) {
                    return Ok(false);
                }
                let ti = self.load_table(st, map, ino, index)?;
                self.cache[ti].dirty = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Validates a name.
    pub fn check_name(name: &[u8]) -> Result<()> {
        if name.is_empty()
            || name == b"."
            || name == b".."
            || name.contains(&b'/')
            || name.contains(&0)
        {
            return Err(Error::Invalid);
        }
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn name_hash_is_stable_and_31_bits() {
        // Values fixed by the format (computed by an independent Python implementation of
        // FORMAT.md's definition): changing the hash breaks every image.
        assert_eq!(name_hash(b""), 0x2b3e_7c0b);
        assert_eq!(name_hash(b"hello"), 0x088d_766e);
        assert_eq!(name_hash(b"lost+found"), 0x4c88_e800);
        assert_ne!(name_hash(b"a"), name_hash(b"b"));
        assert_eq!(name_key(b"a", true) & 0x8000_0000, 0x8000_0000);
    }

    use super::*;

    #[test]
    fn open_addressing_insert_remove_keeps_lookups_working() {
        let mut slots = vec![Slot::EMPTY; 16];
        let mk = |i: u32| Slot {
            ptr: i,
            key: i.wrapping_mul(0x9E37_79B9) & 0x7FFF_FFFF,
        };
        for i in 0..14 {
            assert!(table_insert(&mut slots, mk(i)));
        }
        for i in (0..14).step_by(3) {
            assert!(table_remove(&mut slots, mk(i)));
        }
        for i in 0..14 {
            let mut v = Vec::new();
            table_candidates(&slots, mk(i).hash(), &mut v);
            assert_eq!(v.contains(&mk(i)), i % 3 != 0, "slot {i}");
        }
    }

    #[test]
    fn order_key_makes_linear_hashing_buckets_contiguous() {
        // With level L, all hashes with the same low L bits share the top L bits of the key.
        for h in [0u32, 1, 5, 0x1234_5678, 0x7FFF_FFFF] {
            let k = order_key(h);
            assert_eq!(k >> 28, (h & 0b111).reverse_bits() >> 29);
        }
    }
}
