//! Directories: entries embedded in the directory's own page as a hash table (the paper's inode
//! embedding), growing by linear hashing into bucket pages (the paper's virtual DirInodes) when
//! one page is not enough.
//!
//! A slot's pointer is a directory's inode number (logical, through the inode map), a file
//! inode node's address (physical), or a hard-linked file's inode number (logical). The parts:
//! [`slots`] (the in-page hash table and the name hash), [`page`] (byte layouts), [`pages`]
//! (the page cache and loading), [`grow`] (linear hashing), [`flush`] (writing, and
//! liveness for GC); this file holds [`Dirs`] and the operations on entries. It must never
//! read file inodes or compare names: callers resolve the candidate slots it returns.

mod flush;
mod grow;
pub(crate) mod page;
mod pages;
pub(crate) mod slots;

use alloc::vec::Vec;

use page::{bucket_capacity, BucketPage, SPLIT_LOAD_16THS};
pub(crate) use page::{DirPageId, DirRoot, RawEntry};
use pages::{Cached, DirPages, Item, ItemKey};
use slots::SlotTable;
pub(crate) use slots::{check_name, name_hash, name_key, order_key, Slot, PLACEHOLDER};

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::params::{Addr, Params};
use crate::index::inode_map::InodeMap;
use crate::store::Store;
use dffs_flash::Flash;

/// The directory page cache and the operations on directories.
pub(crate) struct Dirs {
    pages: DirPages,
    p: Params,
}

impl Dirs {
    /// A cache holding up to `cache_max` pages (dirty ones may exceed it until written).
    pub fn new(p: Params, cache_max: usize) -> Dirs {
        Dirs {
            pages: DirPages::new(cache_max),
            p,
        }
    }

    /// RAM held by cached pages.
    pub fn ram_bytes(&self) -> usize {
        self.pages.ram_bytes()
    }

    /// Number of cached items.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Number of dirty items.
    pub fn dirty_count(&self) -> usize {
        self.pages.dirty_count()
    }

    /// The dirty items in `n`ths of a page of RAM each holds, at least one each.
    pub fn dirty_shares(&self, n: usize, page: usize) -> usize {
        self.pages.dirty_shares(n, page)
    }

    /// Directories with dirty items.
    pub fn dirty_dirs(&self) -> Vec<Ino> {
        self.pages.dirty_dirs()
    }

    /// Forgets everything cached (dirty state included).
    pub fn clear(&mut self) {
        self.pages.clear();
    }

    /// Evicts clean items down to the budget (between operations).
    pub fn trim(&mut self) {
        self.pages.trim();
    }

    /// The logical file pointers in dirty items of directory `ino`.
    pub fn placeholders(&self, ino: Ino) -> Vec<Ino> {
        self.pages.placeholders(ino)
    }

    /// Adds a new, empty directory to the cache (dirty; written at the next checkpoint).
    pub fn create(&mut self, root: DirRoot) {
        let ino = root.ino;
        self.pages.retain(|c| c.ino != ino);
        self.pages.push(
            Cached {
                ino,
                key: ItemKey::Root,
                addr: Addr::NONE,
                page: Item::Root(root),
            },
            true,
        );
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
        let b = match &self.pages.at_ref(ri).page {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    r.embedded.candidates(hash, &mut out);
                    return Ok(out);
                }
                r.bucket_of(hash)
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        if let Item::Bucket(pages, _) = &self.pages.at_ref(bi).page {
            for p in pages {
                p.slots.candidates(hash, &mut out);
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
        self.pages.set_dirty(ri, true);
        let nb = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                r.entries = r.entries.saturating_add(1);
                if s.is_dir() {
                    r.subdirs = r.subdirs.saturating_add(1);
                }
                if r.nbuckets == 0 {
                    let cap = r.embedded.len() as u64;
                    if (r.entries as u64) * 16 <= cap * SPLIT_LOAD_16THS && r.embedded.insert(s) {
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

    pub(super) fn insert_into_bucket<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        s: Slot,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let b = match &self.pages.at_ref(ri).page {
            Item::Root(r) => r.bucket_of(s.hash()),
            _ => return Err(Error::Corrupt),
        };
        let cap = bucket_capacity(&self.p);
        let bi = self.load_bucket(st, map, ino, b)?;
        self.pages.set_dirty(bi, true);
        if let Item::Bucket(pages, addrs) = &mut self.pages.at(bi).page {
            for p in pages.iter_mut() {
                if p.slots.used() < cap && p.slots.insert(s) {
                    return Ok(());
                }
            }
            // Every page of the chain is full: add an overflow page (a virtual DirInode).
            let mut slots = SlotTable::empty(cap);
            slots.insert(s);
            pages.push(BucketPage { slots });
            addrs.push(Addr::NONE);
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
        let b = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    if !r.embedded.remove(s) {
                        return Err(Error::Corrupt);
                    }
                    r.entries = r.entries.saturating_sub(1);
                    if s.is_dir() {
                        r.subdirs = r.subdirs.saturating_sub(1);
                    }
                    self.pages.set_dirty(ri, true);
                    return Ok(());
                }
                r.bucket_of(s.hash())
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        let mut removed = false;
        if let Item::Bucket(pages, _) = &mut self.pages.at(bi).page {
            for p in pages.iter_mut() {
                if p.slots.remove(s) {
                    removed = true;
                    break;
                }
            }
        }
        if !removed {
            return Err(Error::Corrupt);
        }
        self.pages.set_dirty(bi, true);
        let ri = self.load_root(st, map, ino)?;
        self.pages.set_dirty(ri, true);
        let (entries, name_len) = match &mut self.pages.at(ri).page {
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
        let b = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    if r.embedded.replace_ptr(old, new_ptr) {
                        self.pages.set_dirty(ri, true);
                        return Ok(());
                    }
                    return Err(Error::Corrupt);
                }
                r.bucket_of(old.hash())
            }
            _ => return Err(Error::Corrupt),
        };
        let bi = self.load_bucket(st, map, ino, b)?;
        if let Item::Bucket(pages, _) = &mut self.pages.at(bi).page {
            for p in pages.iter_mut() {
                if p.slots.replace_ptr(old, new_ptr) {
                    self.pages.set_dirty(bi, true);
                    return Ok(());
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
        let nb = match &self.pages.at_ref(ri).page {
            Item::Root(r) => {
                if r.nbuckets == 0 {
                    return Ok(r.embedded.iter().collect());
                }
                r.nbuckets
            }
            _ => return Err(Error::Corrupt),
        };
        let mut out = Vec::new();
        for b in 0..nb {
            let bi = self.load_bucket(st, map, ino, b)?;
            if let Item::Bucket(pages, _) = &self.pages.at_ref(bi).page {
                for p in pages {
                    out.extend(p.slots.iter());
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
        let (nb, level, split) = match &self.pages.at_ref(ri).page {
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
            crate::sort::sort_by_key(&mut v, |e| e.order);
            v
        };
        if from > 0x7FFF_FFFF {
            return Ok((Vec::new(), None));
        }
        if nb == 0 {
            let v = match &self.pages.at_ref(ri).page {
                Item::Root(r) => collect(&mut r.embedded.iter()),
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
        let v = match &self.pages.at_ref(bi).page {
            Item::Bucket(pages, _) => collect(&mut pages.iter().flat_map(|p| p.slots.iter())),
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
        self.pages.set_dirty(ri, true);
        let overflow = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                r.parent = parent;
                r.name = name.to_vec();
                if r.nbuckets == 0 {
                    let cap = DirRoot::embedded_capacity(&p, name.len());
                    let old: Vec<Slot> = r.embedded.iter().collect();
                    let mut fresh = SlotTable::empty(cap);
                    let mut ok = (old.len() as u64) * 16 <= cap as u64 * SPLIT_LOAD_16THS;
                    if ok {
                        for s in &old {
                            if !fresh.insert(*s) {
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
        let (nb, paged) = match &self.pages.at_ref(ri).page {
            Item::Root(r) => (r.nbuckets as usize, r.paged),
            _ => return Err(Error::Corrupt),
        };
        if nb > 0 && !paged && nb > DirRoot::table_capacity(&p, name.len()) {
            // Force the switch to table pages by growing and shrinking the table by one.
            self.grow_table(st, map, ino, name.len())?;
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.pages.at(ri).page {
                if !r.paged {
                    r.table.pop();
                }
            }
        }
        Ok(())
    }
}
