//! A small ordered map kept as a vector sorted by key.
//!
//! Owns the ordered maps of the file system's RAM state that hold a handful of entries (open
//! files, cached inodes, per-block counts while a checkpoint is written). It exists for code
//! size and RAM: `BTreeMap` costs about 6.6 KiB of firmware code on a Cortex-M4 (and a
//! `collect` into one instantiates a stable sort), and allocates leaves of eleven entries
//! where these maps hold two or three. Lookups are binary searches; an insert or remove moves
//! the entries after it, which is cheap at the sizes the RAM budget allows. It must never hold
//! something that grows with the number of files on the device.

use alloc::vec::Vec;

/// A map from `K` to `V`, iterated in key order.
#[derive(Clone, Debug)]
pub(crate) struct VecMap<K, V> {
    items: Vec<(K, V)>,
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap { items: Vec::new() }
    }
}

impl<K: Ord + Copy, V> VecMap<K, V> {
    /// An empty map (allocates nothing).
    pub const fn new() -> Self {
        VecMap { items: Vec::new() }
    }

    fn find(&self, k: &K) -> Result<usize, usize> {
        self.items.binary_search_by(|(x, _)| x.cmp(k))
    }

    /// The value of `k`.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.items[i].1)
    }

    /// The value of `k`, to change.
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        match self.find(k) {
            Ok(i) => Some(&mut self.items[i].1),
            Err(_) => None,
        }
    }

    /// Number of keys in `lo..hi`.
    pub fn range_len(&self, lo: &K, hi: &K) -> usize {
        let a = self.items.partition_point(|(x, _)| x < lo);
        let b = self.items.partition_point(|(x, _)| x < hi);
        b.saturating_sub(a)
    }

    /// Whether `k` has a value.
    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    /// Sets the value of `k`; returns the one it replaced.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(core::mem::replace(&mut self.items[i].1, v)),
            Err(i) => {
                self.items.insert(i, (k, v));
                None
            }
        }
    }

    /// Removes `k`; returns its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.find(k).ok().map(|i| self.items.remove(i).1)
    }

    /// The value of `k`, inserted from `f` first if `k` has none.
    pub fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                self.items.insert(i, (k, f()));
                i
            }
        };
        &mut self.items[i].1
    }

    /// Keeps only the entries for which `f` is true.
    pub fn retain(&mut self, mut f: impl FnMut(&K, &V) -> bool) {
        self.items.retain(|(k, v)| f(k, v));
    }

    /// Gives back the vector's unused capacity.
    pub fn shrink(&mut self) {
        self.items.shrink_to_fit();
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.items.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.items.iter().map(|(k, _)| k)
    }

    /// Values in key order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.items.iter().map(|(_, v)| v)
    }

    /// Values in key order, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.items.iter_mut().map(|(_, v)| v)
    }

    /// The entries in key order, as a vector.
    pub fn into_vec(self) -> Vec<(K, V)> {
        self.items
    }

    /// Bytes of heap the map holds (its vector's capacity; not what the values own).
    pub fn heap_bytes(&self) -> usize {
        self.items.capacity() * core::mem::size_of::<(K, V)>()
    }
}

impl<K: Ord + Copy, V: Default> VecMap<K, V> {
    /// The value of `k`, inserted as `V::default()` first if `k` has none.
    pub fn get_or_default(&mut self, k: K) -> &mut V {
        self.get_or_insert_with(k, V::default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of inserts, removes and lookups gives what a `BTreeMap` gives.
        #[test]
        fn behaves_like_a_btree_map(ops in proptest::collection::vec((0u8..4, 0u16..40, any::<u32>()), 0..400)) {
            let mut m: VecMap<u16, u32> = VecMap::new();
            let mut want: BTreeMap<u16, u32> = BTreeMap::new();
            for (op, k, v) in ops {
                match op {
                    0 => prop_assert_eq!(m.insert(k, v), want.insert(k, v)),
                    1 => prop_assert_eq!(m.remove(&k), want.remove(&k)),
                    2 => {
                        *m.get_or_default(k) += 1;
                        *want.entry(k).or_default() += 1;
                    }
                    3 if v % 7 == 0 => {
                        m.retain(|&x, _| x % 3 != (v % 3) as u16);
                        want.retain(|&x, _| x % 3 != (v % 3) as u16);
                    }
                    _ => {
                        prop_assert_eq!(m.get(&k), want.get(&k));
                        prop_assert_eq!(m.contains_key(&k), want.contains_key(&k));
                    }
                }
                prop_assert_eq!(m.len(), want.len());
            }
            let got: Vec<(u16, u32)> = m.iter().map(|(k, v)| (*k, *v)).collect();
            let exp: Vec<(u16, u32)> = want.into_iter().collect();
            prop_assert_eq!(got, exp);
        }
    }
}
