//! One least-recently-used cache for every page cache of the file system (directory pages,
//! inode-map pages, index nodes, data blocks).
//!
//! Entries carry a use tick and a dirty flag: the least recently used entry that is clean (and
//! that the caller does not ask to keep) is evicted first; dirty entries are pinned until their
//! owner writes them and marks them clean. Lookups are linear: the caches are small (a handful
//! to a few hundred entries, counted against the RAM budget). It owns only the bookkeeping,
//! never the meaning of an entry, and never reads or writes flash.

use alloc::vec::Vec;

/// A cached item with its bookkeeping.
#[derive(Clone, Debug)]
pub(crate) struct Entry<T> {
    /// Tick of the last use.
    pub used: u64,
    /// Pinned until written.
    pub dirty: bool,
    /// The item.
    pub item: T,
}

/// Items in use order (see the module comment).
#[derive(Clone, Debug)]
pub(crate) struct Lru<T> {
    entries: Vec<Entry<T>>,
    tick: u64,
}

impl<T> Default for Lru<T> {
    fn default() -> Self {
        Lru {
            entries: Vec::new(),
            tick: 0,
        }
    }
}

impl<T> Lru<T> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops everything (dirty entries included).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Entries whose item matches `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.entries.retain(|e| keep(&e.item));
    }

    /// The position of the first entry whose item matches `f`.
    pub fn position(&self, mut f: impl FnMut(&T) -> bool) -> Option<usize> {
        self.entries.iter().position(|e| f(&e.item))
    }

    /// Marks entry `i` as just used.
    pub fn touch(&mut self, i: usize) {
        self.tick += 1;
        self.entries[i].used = self.tick;
    }

    /// Adds an entry, marked as just used; returns its position.
    pub fn push(&mut self, item: T, dirty: bool) -> usize {
        self.tick += 1;
        self.entries.push(Entry {
            used: self.tick,
            dirty,
            item,
        });
        self.entries.len() - 1
    }

    /// Adds an entry with use tick `used` (see [`Lru::bump`]) without advancing the clock;
    /// returns its position.
    pub fn push_with(&mut self, item: T, dirty: bool, used: u64) -> usize {
        self.entries.push(Entry { used, dirty, item });
        self.entries.len() - 1
    }

    /// Advances the use clock and returns the new tick.
    pub fn bump(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The current tick of the use clock.
    pub fn now(&self) -> u64 {
        self.tick
    }

    /// The position of the first entry (bookkeeping included) that `f` accepts.
    pub fn position_entry(&self, f: impl FnMut(&Entry<T>) -> bool) -> Option<usize> {
        self.entries.iter().position(f)
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> &Entry<T> {
        &self.entries[i]
    }

    /// Entry `i`, to change.
    pub fn get_mut(&mut self, i: usize) -> &mut Entry<T> {
        &mut self.entries[i]
    }

    /// Every entry.
    pub fn iter(&self) -> impl Iterator<Item = &Entry<T>> {
        self.entries.iter()
    }

    /// Every entry, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Entry<T>> {
        self.entries.iter_mut()
    }

    /// Number of dirty entries.
    pub fn dirty_count(&self) -> usize {
        self.entries.iter().filter(|e| e.dirty).count()
    }

    /// Evicts the least recently used clean entry whose item `keep` does not hold on to;
    /// false when every entry is dirty or kept.
    pub fn evict_one(&mut self, keep: impl Fn(&T) -> bool) -> bool {
        let v = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.dirty && !keep(&e.item))
            .min_by_key(|(_, e)| e.used)
            .map(|(i, _)| i);
        match v {
            Some(i) => {
                self.entries.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Evicts (see [`Lru::evict_one`]) until at most `max` entries remain, or nothing more
    /// can go.
    pub fn trim(&mut self, max: usize, keep: impl Fn(&T) -> bool) {
        while self.entries.len() > max && self.evict_one(&keep) {}
    }

    /// The capacity of the entry list plus `item_bytes` of every item: the RAM the cache
    /// holds.
    pub fn ram_bytes(&self, item_bytes: impl Fn(&T) -> usize) -> usize {
        self.entries.capacity() * core::mem::size_of::<Entry<T>>()
            + self
                .entries
                .iter()
                .map(|e| item_bytes(&e.item))
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_clean_entry_goes_first() {
        let mut c: Lru<u32> = Lru::default();
        let a = c.push(1, false);
        let b = c.push(2, true);
        let _ = c.push(3, false);
        c.touch(a);
        // 2 is dirty (pinned), 3 is older than 1.
        assert!(c.evict_one(|_| false));
        assert_eq!(c.position(|&x| x == 3), None);
        assert!(c.get(c.position(|&x| x == 2).unwrap()).dirty);
        c.get_mut(b).dirty = false;
        c.trim(1, |&x| x == 1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.position(|&x| x == 1), Some(0));
        // Nothing evictable: every entry kept.
        assert!(!c.evict_one(|_| true));
    }
}
