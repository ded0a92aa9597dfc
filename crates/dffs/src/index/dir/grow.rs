//! Growing and shrinking a directory by linear hashing: moving the embedded entries out into
//! bucket pages (and back when it shrinks), splitting the bucket at the split pointer when the
//! load passes 11/16, and moving the bucket table into table pages when it outgrows the root.
//!
//! It never writes flash: everything it changes is marked dirty for the next checkpoint.

use alloc::vec;
use alloc::vec::Vec;

use super::page::{bucket_capacity, table_page_capacity, BucketPage, DirRoot, SPLIT_LOAD_16THS};
use super::pages::{Cached, Item, ItemKey};
use super::slots::{Slot, SlotTable};
use super::Dirs;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::params::Addr;
use crate::index::inode_map::InodeMap;
use crate::store::Store;
use dffs_flash::Flash;

impl Dirs {
    /// Moves the embedded slots of a root into two bucket pages (linear hashing level 1).
    pub(super) fn unembed<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let ri = self.load_root(st, map, ino)?;
        let moved: Vec<Slot> = match &mut self.pages.at(ri).page {
            Item::Root(r) => {
                let v = r.embedded.iter().collect();
                r.embedded = SlotTable::empty(0);
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
            self.pages
                .retain(|c| !(c.ino == ino && c.key == ItemKey::Bucket(b)));
            self.pages.push(
                Cached {
                    ino,
                    key: ItemKey::Bucket(b),
                    addr: Addr::NONE,
                    page: Item::Bucket(
                        vec![BucketPage {
                            slots: SlotTable::empty(cap),
                        }],
                        vec![Addr::NONE],
                    ),
                },
                true,
            );
        }
        for s in moved {
            self.insert_into_bucket(st, map, ino, s)?;
        }
        Ok(())
    }

    /// Splits buckets while the load is above the threshold.
    pub(super) fn maybe_split<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let cap = bucket_capacity(&self.p) as u64;
        loop {
            let ri = self.load_root(st, map, ino)?;
            let (entries, nb, level, split, name_len) = match &self.pages.at_ref(ri).page {
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
            let all: Vec<Slot> = match &mut self.pages.at(bi).page {
                Item::Bucket(pages, _) => pages.iter().flat_map(|p| p.slots.iter()).collect(),
                _ => return Err(Error::Corrupt),
            };
            // Old bucket keeps its first page address (rewritten at flush); overflow pages die.
            let (old_first, old_rest): (Addr, Vec<Addr>) = match &self.pages.at_ref(bi).page {
                Item::Bucket(_, addrs) => (addrs[0], addrs[1..].to_vec()),
                _ => return Err(Error::Corrupt),
            };
            for a in old_rest {
                if a.is_some() {
                    st.kill(a, self.p.dir_page)?;
                }
            }
            let capu = cap as usize;
            self.pages.at(bi).page = Item::Bucket(
                vec![BucketPage {
                    slots: SlotTable::empty(capu),
                }],
                vec![old_first],
            );
            self.pages.set_dirty(bi, true);
            self.pages
                .retain(|c| !(c.ino == ino && c.key == ItemKey::Bucket(new_b)));
            self.pages.push(
                Cached {
                    ino,
                    key: ItemKey::Bucket(new_b),
                    addr: Addr::NONE,
                    page: Item::Bucket(
                        vec![BucketPage {
                            slots: SlotTable::empty(capu),
                        }],
                        vec![Addr::NONE],
                    ),
                },
                true,
            );
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.pages.at(ri).page {
                r.split += 1;
                r.nbuckets += 1;
                if r.split == 1u32 << r.level {
                    r.level += 1;
                    r.split = 0;
                }
            }
            self.pages.set_dirty(ri, true);
            for s in all {
                self.insert_into_bucket(st, map, ino, s)?;
            }
        }
    }

    /// Adds one bucket address slot to the table (switching to table pages when the root is
    /// full).
    pub(super) fn grow_table<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        name_len: usize,
    ) -> Result<()> {
        let per = table_page_capacity(&self.p);
        let root_cap = DirRoot::table_capacity(&self.p, name_len);
        let ri = self.load_root(st, map, ino)?;
        self.pages.set_dirty(ri, true);
        let (paged, nb) = match &self.pages.at_ref(ri).page {
            Item::Root(r) => (r.paged, r.nbuckets as usize),
            _ => return Err(Error::Corrupt),
        };
        if !paged {
            if nb < root_cap {
                if let Item::Root(r) = &mut self.pages.at(ri).page {
                    r.table.push(Addr::NONE);
                }
                return Ok(());
            }
            // Move the inline table into table pages.
            let inline: Vec<Addr> = match &mut self.pages.at(ri).page {
                Item::Root(r) => core::mem::take(&mut r.table),
                _ => return Err(Error::Corrupt),
            };
            let pages = (nb + 1).div_ceil(per);
            if pages > root_cap {
                return Err(Error::NoSpace);
            }
            if let Item::Root(r) = &mut self.pages.at(ri).page {
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
                self.pages
                    .retain(|c| !(c.ino == ino && c.key == ItemKey::Table(t as u32)));
                self.pages.push(
                    Cached {
                        ino,
                        key: ItemKey::Table(t as u32),
                        addr: Addr::NONE,
                        page: Item::Table(v),
                    },
                    true,
                );
            }
            return Ok(());
        }
        // Paged: add a table page when the last one is full.
        let pages_needed = (nb + 1).div_ceil(per);
        let ri = self.load_root(st, map, ino)?;
        if let Item::Root(r) = &mut self.pages.at(ri).page {
            if pages_needed > r.table.len() {
                if pages_needed > root_cap {
                    return Err(Error::NoSpace);
                }
                r.table.push(Addr::NONE);
            }
        }
        Ok(())
    }

    /// Moves all entries of a bucketed directory back into its root page.
    pub(super) fn embed<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
    ) -> Result<()> {
        let all = self.all_slots(st, map, ino)?;
        let dead = self.page_addrs(st, map, ino, false)?;
        for (a, len) in dead {
            st.kill(a, len)?;
        }
        self.pages
            .retain(|c| !(c.ino == ino && c.key != ItemKey::Root));
        let ri = self.load_root(st, map, ino)?;
        let p = self.p;
        if let Item::Root(r) = &mut self.pages.at(ri).page {
            r.level = 0;
            r.split = 0;
            r.nbuckets = 0;
            r.table = Vec::new();
            r.paged = false;
            r.embedded = SlotTable::empty(DirRoot::embedded_capacity(&p, r.name.len()));
            for s in all {
                if !r.embedded.insert(s) {
                    return Err(Error::Corrupt);
                }
            }
        }
        self.pages.set_dirty(ri, true);
        Ok(())
    }
}
