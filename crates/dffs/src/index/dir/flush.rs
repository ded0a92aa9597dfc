//! Writing directories: a checkpoint writes each dirty directory's bucket chains (last page
//! first), table pages and finally its root, and points the inode map at the new root;
//! garbage collection finds which directory page a node on flash is and whether it is still
//! live; a removed directory's pages are uncounted.
//!
//! It owns the order of those writes; it never decides when to write (the checkpoint does).

use alloc::vec;
use alloc::vec::Vec;

use super::page::{BucketPage, DirPageId};
use super::pages::{Item, ItemKey};
use super::Dirs;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, LogKind};
use crate::index::inode_map::{InodeMap, MapEntry};
use crate::store::{Priority, Store};
use dffs_flash::Flash;

impl Dirs {
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
            .pages
            .find_dirty(ino, |k| matches!(k, ItemKey::Bucket(_)))
        {
            let b = match self.pages.at_ref(i).key {
                ItemKey::Bucket(b) => b,
                _ => unreachable!(),
            };
            let (pages, old_addrs) = match &self.pages.at_ref(i).page {
                Item::Bucket(pages, addrs) => (pages.clone(), addrs.clone()),
                _ => return Err(Error::Corrupt),
            };
            // Drop empty overflow pages.
            let mut keep: Vec<&BucketPage> = Vec::new();
            for (k, pg) in pages.iter().enumerate() {
                if k == 0 || pg.slots.used() > 0 {
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
                    .u32(keep[k].slots.used() as u32);
                keep[k].slots.encode(&mut nb.w);
                let cur = nb.w.len() as u32;
                nb.w.fill(0, (p.dir_page - cur) as usize);
                let a = st.write_node(LogKind::Dir, nb, Priority::Reserve)?;
                new_addrs[k] = a;
                next = a;
            }
            for a in old_addrs.iter().filter(|a| a.is_some()) {
                st.kill(*a, p.dir_page)?;
            }
            let kept: Vec<BucketPage> = keep.into_iter().cloned().collect();
            self.pages.at(i).page = Item::Bucket(kept, new_addrs.clone());
            self.pages.at(i).addr = new_addrs[0];
            self.pages.set_dirty(i, false);
            self.set_bucket_addr(st, map, ino, b, new_addrs[0])?;
        }
        // Table pages.
        while let Some(i) = self
            .pages
            .find_dirty(ino, |k| matches!(k, ItemKey::Table(_)))
        {
            let t = match self.pages.at_ref(i).key {
                ItemKey::Table(t) => t,
                _ => unreachable!(),
            };
            let entries = match &self.pages.at_ref(i).page {
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
            let old = self.pages.at_ref(i).addr;
            if old.is_some() {
                st.kill(old, p.dir_page)?;
            }
            self.pages.at(i).addr = a;
            self.pages.set_dirty(i, false);
            let ri = self.load_root(st, map, ino)?;
            if let Item::Root(r) = &mut self.pages.at(ri).page {
                if let Some(x) = r.table.get_mut(t as usize) {
                    *x = a;
                }
            }
            self.pages.set_dirty(ri, true);
        }
        // Root.
        if let Some(i) = self.pages.find(ino, ItemKey::Root) {
            if self.pages.dirty(i) {
                let (nb, old_len) = match &self.pages.at_ref(i).page {
                    Item::Root(r) => (r.encode(&p), r.stored_len),
                    _ => return Err(Error::Corrupt),
                };
                let len = nb.w.len() as u32;
                if len > p.dir_page {
                    return Err(Error::Corrupt);
                }
                let a = st.write_node(LogKind::Dir, nb, Priority::Reserve)?;
                let old = self.pages.at_ref(i).addr;
                if old.is_some() {
                    st.kill(old, old_len)?;
                }
                if let Item::Root(r) = &mut self.pages.at(i).page {
                    r.stored_len = p.align(len);
                }
                self.pages.at(i).addr = a;
                self.pages.set_dirty(i, false);
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
                let live = self.pages.at_ref(ri).addr == a;
                if live {
                    self.pages.set_dirty(ri, true);
                }
                Ok(live)
            }
            NodeType::DirBucket => {
                let nb = self.root(st, map, ino)?.nbuckets;
                if index >= nb {
                    return Ok(false);
                }
                let bi = self.load_bucket(st, map, ino, index)?;
                let live = match &self.pages.at_ref(bi).page {
                    Item::Bucket(_, addrs) => addrs.get(pos as usize) == Some(&a),
                    _ => false,
                };
                if live {
                    self.pages.set_dirty(bi, true);
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
                self.pages.set_dirty(ti, true);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Addresses of every written page of directory `ino` (root excluded unless `with_root`),
    /// each with the bytes its block is credited with for it.
    pub fn page_addrs<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        with_root: bool,
    ) -> Result<Vec<(Addr, u32)>> {
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
    ) -> Result<Vec<(Addr, u32)>> {
        self.page_addrs_filtered(st, map, ino, true, true)
    }

    fn page_addrs_filtered<F: Flash>(
        &mut self,
        st: &mut Store<F>,
        map: &mut InodeMap,
        ino: Ino,
        with_root: bool,
        clean_only: bool,
    ) -> Result<Vec<(Addr, u32)>> {
        let mut out = Vec::new();
        let page = self.p.dir_page;
        let ri = self.load_root(st, map, ino)?;
        let (nb, paged, table, root_len) = match &self.pages.at_ref(ri).page {
            Item::Root(r) => (r.nbuckets, r.paged, r.table.clone(), r.stored_len),
            _ => return Err(Error::Corrupt),
        };
        if with_root
            && self.pages.at_ref(ri).addr.is_some()
            && !(clean_only && self.pages.dirty(ri))
        {
            out.push((self.pages.at_ref(ri).addr, root_len));
        }
        if paged {
            for (t, a) in table.iter().enumerate() {
                if a.is_none() {
                    continue;
                }
                let dirty = self
                    .pages
                    .find(ino, ItemKey::Table(t as u32))
                    .map(|i| self.pages.dirty(i))
                    .unwrap_or(false);
                if !(clean_only && dirty) {
                    out.push((*a, page));
                }
            }
        }
        for b in 0..nb {
            let bi = self.load_bucket(st, map, ino, b)?;
            if clean_only && self.pages.dirty(bi) {
                continue;
            }
            if let Item::Bucket(_, addrs) = &self.pages.at_ref(bi).page {
                out.extend(addrs.iter().filter(|a| a.is_some()).map(|&a| (a, page)));
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
        for (a, len) in pages {
            st.kill(a, len)?;
        }
        self.pages.retain(|c| c.ino != ino);
        Ok(())
    }
}
