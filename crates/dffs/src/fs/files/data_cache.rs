//! The write-back data cache: file blocks read or written, dirty ones pinned until written
//! back, on the shared LRU.
//!
//! It must never write to flash; the write path takes its dirty blocks.

use crate::format::attrs::Ino;
use crate::index::lru::Lru;
use alloc::vec::Vec;

#[derive(Clone, Debug)]
pub(crate) struct CachedBlock {
    ino: Ino,
    block: u32,
    data: Vec<u8>,
}

/// Data blocks in RAM: dirty ones are written back when the cache fills or a file commits.
pub(crate) struct DataCache {
    blocks: Lru<CachedBlock>,
    max: usize,
}

impl DataCache {
    pub fn new(max: usize) -> DataCache {
        DataCache {
            blocks: Lru::default(),
            max: max.max(1),
        }
    }
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
    pub fn ram_bytes(&self) -> usize {
        self.blocks.ram_bytes(|b| b.data.capacity())
    }
    pub fn dirty_count(&self) -> usize {
        self.blocks.dirty_count()
    }
    pub(crate) fn find(&self, ino: Ino, block: u32) -> Option<usize> {
        self.blocks.position(|b| b.ino == ino && b.block == block)
    }
    pub(crate) fn get(&mut self, ino: Ino, block: u32) -> Option<&[u8]> {
        let t = self.blocks.bump();
        let i = self.find(ino, block)?;
        let e = self.blocks.get_mut(i);
        e.used = t;
        Some(&e.item.data)
    }
    /// Drops clean blocks beyond the budget.
    pub(crate) fn trim_clean(&mut self) {
        self.blocks.trim(self.max, |_| false);
    }
    pub(crate) fn put(&mut self, ino: Ino, block: u32, data: Vec<u8>, dirty: bool) {
        let t = self.blocks.bump();
        match self.find(ino, block) {
            Some(i) => {
                let e = self.blocks.get_mut(i);
                e.item.data = data;
                e.dirty |= dirty;
                e.used = t;
            }
            None => {
                self.blocks
                    .push_with(CachedBlock { ino, block, data }, dirty, t);
            }
        }
        self.trim_clean();
    }
    pub(crate) fn drop_from(&mut self, ino: Ino, from: u32) {
        self.blocks.retain(|b| !(b.ino == ino && b.block >= from));
    }
    pub(crate) fn drop_ino(&mut self, ino: Ino) {
        self.blocks.retain(|b| b.ino != ino);
    }
    /// The inode whose dirty block was used least recently, when over budget.
    pub(crate) fn over_budget_victim(&self) -> Option<Ino> {
        if self.blocks.len() <= self.max {
            return None;
        }
        self.blocks
            .iter()
            .filter(|e| e.dirty)
            .min_by_key(|e| e.used)
            .map(|e| e.item.ino)
    }
    /// Block numbers of the dirty blocks of `ino`, in block order.
    pub(crate) fn dirty_blocks(&self, ino: Ino) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .blocks
            .iter()
            .filter(|e| e.item.ino == ino && e.dirty)
            .map(|e| e.item.block)
            .collect();
        crate::sort::sort(&mut v);
        v
    }
    /// Dirty blocks of `ino`, in block order, marked clean.
    pub(crate) fn take_dirty(&mut self, ino: Ino) -> Vec<(u32, Vec<u8>)> {
        let mut v: Vec<(u32, Vec<u8>)> = self
            .blocks
            .iter_mut()
            .filter(|e| e.item.ino == ino && e.dirty)
            .map(|e| {
                e.dirty = false;
                (e.item.block, e.item.data.clone())
            })
            .collect();
        crate::sort::sort_by_key(&mut v, |x| x.0);
        v
    }
}
