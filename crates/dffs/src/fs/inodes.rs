//! File inodes: the inode cache, loading an inode through the inode map and its parent's slot
//! (or its own map entry once it has several names), writing inodes back at a checkpoint
//! (named, linked or orphaned), and freeing a file's space when its last name and handle go.
//!
//! It must never decide what a file contains (that is the files module's overlay and the
//! index tree); it only moves whole inodes between flash and RAM.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::node::NodeType;
use crate::format::params::{Addr, LogKind, NODE_HEADER};
use crate::fs::Fs;
use crate::index::dir::{name_key, Slot, PLACEHOLDER};
use crate::index::file::FileNode;
use crate::index::inode_map::MapEntry;
use crate::store::Priority;
use crate::vec_map::VecMap;
use alloc::boxed::Box;
use alloc::vec::Vec;
use dffs_flash::Flash;

/// A file inode in the inode cache.
#[derive(Clone, Debug)]
pub(crate) struct CachedFile {
    pub node: FileNode,
    /// Changed since the last checkpoint (pinned until written).
    pub dirty: bool,
    /// Tick of the last use.
    used: u64,
}

/// The inode cache: file inodes by number, dirty ones pinned until a checkpoint writes them,
/// clean ones evicted least recently used first beyond the configured count. Keyed (not one of
/// the linear page caches of `index::lru`): dirty inodes can number thousands between
/// checkpoints.
#[derive(Default)]
pub(crate) struct InodeCache {
    // Boxed: the map's nodes then hold pointers, not whole inodes (a B-tree node has room for
    // eleven entries however few are used).
    files: VecMap<Ino, Box<CachedFile>>,
    tick: u64,
}

impl InodeCache {
    /// Whether `ino` is cached.
    pub fn contains(&self, ino: Ino) -> bool {
        self.files.contains_key(&ino)
    }

    /// The cached inode of `ino` (not counted as a use).
    pub fn get(&self, ino: Ino) -> Option<&CachedFile> {
        self.files.get(&ino).map(|b| &**b)
    }

    /// The cached inode of `ino`, mutably (not counted as a use).
    pub fn get_mut(&mut self, ino: Ino) -> Option<&mut CachedFile> {
        self.files.get_mut(&ino).map(|b| &mut **b)
    }

    /// The cached inode of `ino`, counted as a use.
    pub fn hit(&mut self, ino: Ino) -> Option<&mut CachedFile> {
        let c = self.files.get_mut(&ino)?;
        self.tick += 1;
        c.used = self.tick;
        Some(&mut **c)
    }

    /// Caches `node`, then evicts the least recently used clean inode (not this one) when more
    /// than `budget` are clean.
    pub fn insert(&mut self, node: FileNode, dirty: bool, budget: usize) {
        self.tick += 1;
        let ino = node.ino;
        let used = self.tick;
        self.files
            .insert(ino, Box::new(CachedFile { node, dirty, used }));
        if self.clean() > budget {
            if let Some(victim) = self.lru_clean(|i| i != ino) {
                self.files.remove(&victim);
            }
        }
    }

    /// Evicts least recently used clean inodes until at most `budget` are clean.
    pub fn trim(&mut self, budget: usize) {
        let mut clean = self.clean();
        while clean > budget {
            let Some(victim) = self.lru_clean(|_| true) else {
                break;
            };
            self.files.remove(&victim);
            clean -= 1;
        }
    }

    /// Removes `ino` and gives its inode back.
    pub fn remove(&mut self, ino: Ino) -> Option<CachedFile> {
        self.files.remove(&ino).map(|b| *b)
    }

    /// Drops everything (dirty inodes included).
    pub fn clear(&mut self) {
        self.files.clear();
    }

    /// Cached inodes.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Heap the map of cached inodes holds itself (not the inodes).
    pub fn map_bytes(&self) -> usize {
        self.files.heap_bytes()
    }

    /// Every cached inode, by inode number.
    pub fn iter(&self) -> impl Iterator<Item = &CachedFile> {
        self.files.values().map(|b| &**b)
    }

    fn clean(&self) -> usize {
        self.files.values().filter(|c| !c.dirty).count()
    }

    fn lru_clean(&self, may_evict: impl Fn(Ino) -> bool) -> Option<Ino> {
        self.files
            .iter()
            .filter(|(i, c)| !c.dirty && may_evict(**i))
            .min_by_key(|(_, c)| c.used)
            .map(|(i, _)| *i)
    }
}

impl<F: Flash> Fs<F> {
    /// Reads and decodes the inode node at `a`, checking it belongs to `ino`.
    pub(crate) fn read_inode(&mut self, a: Addr, ino: Ino) -> Result<FileNode> {
        let p = self.store.p();
        let (h, bytes) = self.store.read_node(a, NodeType::Inode, p.dir_page)?;
        if ino != 0 && h.ino != ino {
            return Err(Error::Corrupt);
        }
        let len = p.align(h.len);
        FileNode::decode(&p, h.ino, a, len, &bytes[NODE_HEADER as usize..])
    }

    /// Puts a file inode into the cache (evicting clean ones over budget).
    pub(crate) fn cache_file(&mut self, node: FileNode, dirty: bool) {
        self.inodes.insert(node, dirty, self.cfg.inode_cache);
    }

    /// The committed inode of file `ino` (from the cache, or found through the inode map and
    /// its parent's slot).
    pub(crate) fn load_file(&mut self, ino: Ino) -> Result<&mut CachedFile> {
        if self.inodes.contains(ino) {
            return self.inodes.hit(ino).ok_or(Error::Internal);
        }
        let node = match self.map.get(&mut self.store, ino)? {
            MapEntry::File { parent, hash } => self.find_file_in_parent(parent, hash, ino)?,
            MapEntry::Linked(a) => {
                if a.is_none() {
                    return Err(Error::Corrupt);
                }
                let node = self.read_inode(a, 0)?;
                if node.ino != ino || !node.linked {
                    return Err(Error::Corrupt);
                }
                node
            }
            MapEntry::Dir(_) => return Err(Error::IsDir),
            _ => return Err(Error::NotFound),
        };
        self.cache_file(node, false);
        self.inodes.get_mut(ino).ok_or(Error::Internal)
    }

    /// Finds the inode node of `ino` among the slots of `parent` whose hash matches.
    fn find_file_in_parent(&mut self, parent: Ino, hash30: u32, ino: Ino) -> Result<FileNode> {
        let slots = self.slots_with_hash30(parent, hash30)?;
        for s in slots {
            if s.is_dir() {
                continue;
            }
            if s.is_placeholder() {
                if s.ptr & !PLACEHOLDER == ino {
                    return Err(Error::Corrupt);
                }
                continue;
            }
            let node = match self.read_inode(Addr(s.ptr), 0) {
                Ok(n) => n,
                Err(Error::Corrupt) | Err(Error::Io) => continue,
                Err(e) => return Err(e),
            };
            if node.ino == ino {
                return Ok(node);
            }
        }
        Err(Error::Corrupt)
    }

    /// The slot of file `ino` (name `name`) in `parent`.
    fn file_slot(&mut self, parent: Ino, name: &[u8], ino: Ino) -> Result<Slot> {
        let key = name_key(name, false);
        let cands =
            self.dirs
                .candidates(&mut self.store, &mut self.map, parent, key & 0x7FFF_FFFF)?;
        let node_addr = self.inodes.get(ino).map(|c| c.node.node_addr);
        for s in cands {
            if s.is_dir() {
                continue;
            }
            if s.is_placeholder() {
                if s.ptr & !PLACEHOLDER == ino {
                    return Ok(s);
                }
                continue;
            }
            if Some(Addr(s.ptr)) == node_addr {
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

    /// Marks a cached file inode dirty: its slot becomes a placeholder until it is written
    /// (a linked file's slots are logical already; its map entry moves when it is written).
    pub(crate) fn make_dirty(&mut self, ino: Ino) -> Result<()> {
        let (dirty, parent, name, linked) = {
            let c = self.load_file(ino)?;
            (c.dirty, c.node.parent, c.node.name.clone(), c.node.linked)
        };
        if dirty {
            return Ok(());
        }
        if linked {
            if let Some(c) = self.inodes.get_mut(ino) {
                c.dirty = true;
            }
            return Ok(());
        }
        let slot = self.file_slot(parent, &name, ino)?;
        self.dirs.replace_ptr(
            &mut self.store,
            &mut self.map,
            parent,
            slot,
            PLACEHOLDER | ino,
        )?;
        if let Some(c) = self.inodes.get_mut(ino) {
            c.dirty = true;
        }
        Ok(())
    }

    /// Writes a dirty file inode (folding its pending block changes first) and points its
    /// slot at the new node.
    pub(crate) fn write_inode(&mut self, ino: Ino) -> Result<()> {
        let mut node = match self.inodes.get(ino) {
            Some(c) if c.dirty => c.node.clone(),
            _ => return Ok(()),
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        // The nodes the fold replaced are dead: the cached inode names the new ones from now
        // on, also if writing its node fails below.
        if let Some(c) = self.inodes.get_mut(ino) {
            c.node.content = node.content.clone();
        }
        let nb = node.encode()?;
        let len = self.store.p().align(nb.w.len() as u32);
        let a = self
            .store
            .write_node(LogKind::Inode, nb, Priority::Reserve)?;
        if node.node_addr.is_some() {
            self.store.kill(node.node_addr, node.node_len)?;
        }
        node.node_addr = a;
        node.node_len = len;
        if node.linked {
            self.map.set(&mut self.store, ino, MapEntry::Linked(a))?;
            if let Some(c) = self.inodes.get_mut(ino) {
                c.node = node;
                c.dirty = false;
            }
            return Ok(());
        }
        let key = name_key(&node.name, false);
        let parent = node.parent;
        self.dirs.replace_ptr(
            &mut self.store,
            &mut self.map,
            parent,
            Slot {
                ptr: PLACEHOLDER | ino,
                key,
            },
            a.0,
        )?;
        if let Some(c) = self.inodes.get_mut(ino) {
            c.node = node;
            c.dirty = false;
        }
        Ok(())
    }

    /// Writes the inode node of an open, unlinked file (for the checkpoint's orphan list).
    pub(crate) fn write_orphan_inode(&mut self, ino: Ino) -> Result<Addr> {
        let mut node = match self.open.files.get(&ino).and_then(|o| o.orphan.clone()) {
            Some(n) => n,
            None => return Err(Error::Corrupt),
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        if let Some(o) = self
            .open
            .files
            .get_mut(&ino)
            .and_then(|o| o.orphan.as_mut())
        {
            o.content = node.content.clone();
        }
        let nb = node.encode()?;
        let len = self.store.p().align(nb.w.len() as u32);
        let a = self
            .store
            .write_node(LogKind::Inode, nb, Priority::Reserve)?;
        if node.node_addr.is_some() {
            self.store.kill(node.node_addr, node.node_len)?;
        }
        node.node_addr = a;
        node.node_len = len;
        if let Some(o) = self.open.files.get_mut(&ino) {
            o.orphan = Some(node);
        }
        Ok(a)
    }

    /// Counts every block and node of a file dead (unlink, truncate of orphans).
    pub(crate) fn free_file_space(&mut self, node: &FileNode) -> Result<()> {
        let p = self.store.p();
        let stride = p.stride();
        let mut dead_data: Vec<Addr> = node
            .content
            .pending
            .iter_blocks(stride)
            .map(|x| x.1)
            .filter(|a| !a.is_none())
            .collect();
        let mut dead_nodes: Vec<Addr> = Vec::new();
        {
            let mut ix = self.tree(node.ino);
            let pending = &node.content.pending;
            let trunc = node.content.trunc;
            ix.walk(
                &node.content,
                &mut |b, a| {
                    if pending.get(b, stride).is_none() && trunc.is_none_or(|t| b < t) {
                        dead_data.push(a)
                    }
                },
                &mut |a, _, _| dead_nodes.push(a),
            )?;
        }
        for a in dead_data {
            self.kill_data(a)?;
        }
        for a in dead_nodes {
            self.store.kill(a, p.align(p.index_node))?;
        }
        if node.node_addr.is_some() {
            self.store.kill(node.node_addr, node.node_len)?;
        }
        Ok(())
    }

    /// The inode a placeholder slot stands for: a dirty file in the cache, or a file with
    /// hard links (loaded through the inode map); None for anything else.
    pub(crate) fn placeholder_file(&mut self, ino: Ino) -> Result<Option<&FileNode>> {
        if !self.inodes.contains(ino) {
            match self.map.get(&mut self.store, ino)? {
                MapEntry::Linked(_) => {
                    self.load_file(ino)?;
                }
                _ => return Ok(None),
            }
        }
        Ok(self.inodes.get(ino).map(|c| &c.node))
    }

    /// Takes file `ino`'s inode out of the cache (loading it if needed).
    pub(crate) fn take_file(&mut self, ino: Ino) -> Result<CachedFile> {
        if !self.inodes.contains(ino) {
            self.load_file(ino)?;
        }
        self.inodes.remove(ino).ok_or(Error::Corrupt)
    }

    /// Frees a removed file's space unless it is open (then it lives on as an orphan until
    /// closed).
    pub(crate) fn drop_file(&mut self, node: FileNode) -> Result<()> {
        let ino = node.ino;
        let open = !self.mount.replaying
            && self
                .open
                .files
                .get(&ino)
                .map(|o| o.refs > 0)
                .unwrap_or(false);
        if open {
            if let Some(o) = self.open.files.get_mut(&ino) {
                o.orphan = Some(node);
            }
            self.map.set(&mut self.store, ino, MapEntry::Orphan)?;
        } else {
            self.free_file_space(&node)?;
            if let Some(o) = self.open.files.get_mut(&ino) {
                o.overlay = None;
            }
            self.data_cache.drop_ino(ino);
            self.map.set(&mut self.store, ino, MapEntry::Free)?;
        }
        self.counts.files = self.counts.files.saturating_sub(1);
        Ok(())
    }

    /// Moves file `ino` to logical indexing (its first hard link): its slot points at it
    /// through the inode map from now on. Marks it dirty.
    pub(crate) fn make_linked(&mut self, ino: Ino) -> Result<()> {
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
            self.dirs.replace_ptr(
                &mut self.store,
                &mut self.map,
                parent,
                slot,
                PLACEHOLDER | ino,
            )?;
        }
        self.map.set(&mut self.store, ino, MapEntry::Linked(addr))?;
        let c = self.inodes.get_mut(ino).ok_or(Error::Corrupt)?;
        c.node.linked = true;
        c.dirty = true;
        Ok(())
    }

    /// Whether `ino` is a file with more than one name (removing one leaves the file).
    pub(crate) fn has_other_names(&mut self, ino: Ino) -> Result<bool> {
        let c = self.load_file(ino)?;
        Ok(c.node.linked && c.node.nlink() > 1)
    }
}
