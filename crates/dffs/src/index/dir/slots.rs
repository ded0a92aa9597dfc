//! The hash table of directory slots inside a directory page, and the name hash it is keyed
//! by.
//!
//! ```text
//!   slot (8 bytes):  | ptr u32 | key u32 |      key = name_hash(name) | dir << 31
//!   ptr: a directory's inode number; a file's inode node address (physical); or
//!        PLACEHOLDER | ino for a file reached logically (hard links; in RAM: a dirty inode)
//!   empty slot: ptr = key = 0xFFFF_FFFF
//! ```
//!
//! Open addressing: a slot's home is taken from the high bits of its hash, collisions probe
//! linearly, and deletion shifts later slots back so a lookup stops at the first empty slot.
//! Owns slots, their encoding, names' validity and hash. It must never touch flash.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::{Reader, Writer};
use crate::format::params::NAME_MAX;

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

/// Bytes of one used slot in the listed form of a table (position, two zero bytes, slot).
pub(crate) const LISTED_SLOT: u32 = 12;

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
pub(crate) fn home(hash: u32, n: usize) -> usize {
    (((hash >> 15) as u64 * n as u64) >> 16) as usize
}

/// Largest number of used slots a table of `n` positions keeps as a sparse list: a third of
/// the positions, so that the list (12 bytes per used slot, 25% growth room) stays smaller
/// than the full array (8 bytes per position).
fn sparse_max(n: usize) -> usize {
    n / 3
}

/// The slot table of one directory page in RAM (see the module comment for the table).
///
/// On flash the table is `len()` slots in a row. In RAM a table with few entries keeps only
/// its used slots, each with its position, sorted by position; it switches to the full array
/// once it holds more than [`sparse_max`] entries (and back when it falls under half of that).
/// Positions are those of the on-flash table in either form, so encoding is byte-identical.
#[derive(Clone, Debug)]
pub(crate) struct SlotTable {
    /// Positions in the table (slots on flash).
    n: u32,
    /// Used slots.
    used: u32,
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    /// Used slots with their positions, sorted by position.
    Sparse(Vec<(u32, Slot)>),
    /// Every position.
    Dense(Vec<Slot>),
}

impl SlotTable {
    /// An empty table of `n` positions.
    pub fn empty(n: usize) -> SlotTable {
        SlotTable {
            n: n as u32,
            used: 0,
            repr: Repr::Sparse(Vec::new()),
        }
    }

    /// Number of positions.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Number of used slots.
    pub fn used(&self) -> usize {
        self.used as usize
    }

    /// Heap bytes held.
    pub fn ram_bytes(&self) -> usize {
        match &self.repr {
            Repr::Sparse(v) => v.capacity() * core::mem::size_of::<(u32, Slot)>(),
            Repr::Dense(v) => v.capacity() * core::mem::size_of::<Slot>(),
        }
    }

    /// The slot at position `i` (empty if unused).
    fn get(&self, i: usize) -> Slot {
        match &self.repr {
            Repr::Sparse(v) => match v.binary_search_by_key(&(i as u32), |e| e.0) {
                Ok(k) => v[k].1,
                Err(_) => Slot::EMPTY,
            },
            Repr::Dense(v) => v[i],
        }
    }

    /// Puts `s` (possibly empty) at position `i`.
    fn set(&mut self, i: usize, s: Slot) {
        let was_used = match &mut self.repr {
            Repr::Sparse(v) => match v.binary_search_by_key(&(i as u32), |e| e.0) {
                Ok(k) => {
                    if s.is_empty() {
                        v.remove(k);
                    } else {
                        v[k].1 = s;
                    }
                    true
                }
                Err(k) => {
                    if !s.is_empty() {
                        if v.len() == v.capacity() {
                            v.reserve_exact(v.len() / 4 + 4);
                        }
                        v.insert(k, (i as u32, s));
                    }
                    false
                }
            },
            Repr::Dense(v) => {
                let was = !v[i].is_empty();
                v[i] = s;
                was
            }
        };
        match (was_used, s.is_empty()) {
            (false, false) => self.used += 1,
            (true, true) => self.used -= 1,
            _ => {}
        }
        self.reshape();
    }

    /// Switches representation when the number of used slots has crossed a threshold.
    fn reshape(&mut self) {
        let used = self.used();
        let n = self.len();
        match &self.repr {
            Repr::Sparse(v) if used > sparse_max(n) => {
                let mut d = vec![Slot::EMPTY; n];
                for &(i, s) in v {
                    d[i as usize] = s;
                }
                self.repr = Repr::Dense(d);
            }
            Repr::Dense(d) if used < sparse_max(n) / 2 => {
                let mut v = Vec::with_capacity(used);
                for (i, s) in d.iter().enumerate() {
                    if !s.is_empty() {
                        v.push((i as u32, *s));
                    }
                }
                self.repr = Repr::Sparse(v);
            }
            _ => {}
        }
    }

    /// The used slots in position order.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        let (sparse, dense): (&[(u32, Slot)], &[Slot]) = match &self.repr {
            Repr::Sparse(v) => (v, &[]),
            Repr::Dense(v) => (&[], v),
        };
        sparse
            .iter()
            .map(|e| e.1)
            .chain(dense.iter().copied().filter(|s| !s.is_empty()))
    }

    /// Open-addressing insert; false if every position is used.
    pub fn insert(&mut self, s: Slot) -> bool {
        let n = self.len();
        if n == 0 || self.used() >= n {
            return false;
        }
        let mut i = home(s.hash(), n);
        loop {
            if self.get(i).is_empty() {
                self.set(i, s);
                return true;
            }
            i = (i + 1) % n;
        }
    }

    /// Removes the slot equal to `s` (backward-shift deletion); false if absent.
    pub fn remove(&mut self, s: Slot) -> bool {
        let n = self.len();
        if n == 0 {
            return false;
        }
        let mut i = home(s.hash(), n);
        let mut found = None;
        for _ in 0..n {
            let here = self.get(i);
            if here.is_empty() {
                break;
            }
            if here == s {
                found = Some(i);
                break;
            }
            i = (i + 1) % n;
        }
        let Some(mut hole) = found else {
            return false;
        };
        self.set(hole, Slot::EMPTY);
        let mut j = (hole + 1) % n;
        loop {
            let sj = self.get(j);
            if sj.is_empty() {
                break;
            }
            let h = home(sj.hash(), n);
            // Move j into the hole unless its home lies cyclically in (hole, j].
            let in_range = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !in_range {
                self.set(hole, sj);
                self.set(j, Slot::EMPTY);
                hole = j;
            }
            j = (j + 1) % n;
        }
        true
    }

    /// Appends to `out` the slots whose hash equals `hash`.
    pub fn candidates(&self, hash: u32, out: &mut Vec<Slot>) {
        let n = self.len();
        if n == 0 {
            return;
        }
        let mut i = home(hash, n);
        for _ in 0..n {
            let s = self.get(i);
            if s.is_empty() {
                return;
            }
            if s.hash() == hash {
                out.push(s);
            }
            i = (i + 1) % n;
        }
    }

    /// Points the slot equal to `old` at `ptr`; false if absent.
    pub fn replace_ptr(&mut self, old: Slot, ptr: u32) -> bool {
        let slot = match &mut self.repr {
            Repr::Sparse(v) => v.iter_mut().map(|e| &mut e.1).find(|s| **s == old),
            Repr::Dense(v) => v.iter_mut().find(|s| **s == old),
        };
        match slot {
            Some(s) if !old.is_empty() && ptr != u32::MAX => {
                s.ptr = ptr;
                true
            }
            _ => false,
        }
    }

    /// Decodes a table of `n` slots.
    pub fn decode(r: &mut Reader<'_>, n: usize) -> Result<SlotTable> {
        let mut t = SlotTable::empty(n);
        for i in 0..n {
            let s = Slot {
                ptr: r.u32()?,
                key: r.u32()?,
            };
            if !s.is_empty() {
                t.set(i, s);
            }
        }
        Ok(t)
    }

    /// Decodes the listed form ([`SlotTable::encode_listed`]) of a table of `n` positions
    /// holding `count` slots: positions must rise, lie in the table and name used slots.
    pub fn decode_listed(r: &mut Reader<'_>, n: usize, count: usize) -> Result<SlotTable> {
        if count > n {
            return Err(Error::Corrupt);
        }
        let mut t = SlotTable::empty(n);
        let mut next = 0usize;
        for _ in 0..count {
            let pos = r.u16()? as usize;
            let pad = r.u16()?;
            let s = Slot {
                ptr: r.u32()?,
                key: r.u32()?,
            };
            if pos < next || pos >= n || pad != 0 || s.is_empty() {
                return Err(Error::Corrupt);
            }
            t.set(pos, s);
            next = pos + 1;
        }
        Ok(t)
    }

    /// Bytes of the listed form: [`LISTED_SLOT`] per used slot.
    pub fn listed_len(&self) -> usize {
        self.used() * LISTED_SLOT as usize
    }

    /// Encodes the used slots alone, in position order, each as its position (`u16`), two
    /// zero bytes and the slot (the form a root page takes when it is shorter:
    /// [`SlotTable::listed_is_smaller`]).
    pub fn encode_listed(&self, w: &mut Writer) {
        let mut put = |i: usize, s: Slot| {
            w.u16(i as u16).u16(0).u32(s.ptr).u32(s.key);
        };
        match &self.repr {
            Repr::Sparse(v) => v.iter().for_each(|&(i, s)| put(i as usize, s)),
            Repr::Dense(v) => v
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.is_empty())
                .for_each(|(i, s)| put(i, *s)),
        }
    }

    /// Whether the listed form is shorter than every position written out.
    pub fn listed_is_smaller(&self) -> bool {
        self.listed_len() < self.len() * 8
    }

    /// Encodes every position, empty ones as all-ones.
    pub fn encode(&self, w: &mut Writer) {
        match &self.repr {
            Repr::Dense(v) => {
                for s in v {
                    w.u32(s.ptr).u32(s.key);
                }
            }
            Repr::Sparse(v) => {
                let mut used = v.iter().peekable();
                for i in 0..self.n {
                    let s = match used.next_if(|e| e.0 == i) {
                        Some(e) => e.1,
                        None => Slot::EMPTY,
                    };
                    w.u32(s.ptr).u32(s.key);
                }
            }
        }
    }
}

/// Validates a name.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Error::Invalid);
    }
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    Ok(())
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
        let mut t = SlotTable::empty(16);
        let mk = |i: u32| Slot {
            ptr: i,
            key: i.wrapping_mul(0x9E37_79B9) & 0x7FFF_FFFF,
        };
        for i in 0..14 {
            assert!(t.insert(mk(i)));
        }
        for i in (0..14).step_by(3) {
            assert!(t.remove(mk(i)));
        }
        assert!(!t.remove(mk(0)), "removed twice");
        for i in 0..14 {
            let mut v = Vec::new();
            t.candidates(mk(i).hash(), &mut v);
            assert_eq!(v.contains(&mk(i)), i % 3 != 0, "slot {i}");
        }
        assert_eq!(t.used(), 9);
    }

    /// The on-flash table as FORMAT.md defines it, written out directly: every position in an
    /// array, linear probing from the home slot, backward-shift deletion.
    struct Reference(Vec<Slot>);

    impl Reference {
        fn insert(&mut self, s: Slot) -> bool {
            let n = self.0.len();
            let mut i = home(s.hash(), n);
            for _ in 0..n {
                if self.0[i].is_empty() {
                    self.0[i] = s;
                    return true;
                }
                i = (i + 1) % n;
            }
            false
        }
        fn remove(&mut self, s: Slot) -> bool {
            let n = self.0.len();
            let Some(mut hole) = self.0.iter().position(|x| *x == s) else {
                return false;
            };
            self.0[hole] = Slot::EMPTY;
            let mut j = (hole + 1) % n;
            while !self.0[j].is_empty() {
                let h = home(self.0[j].hash(), n);
                let stays = if hole <= j {
                    hole < h && h <= j
                } else {
                    hole < h || h <= j
                };
                if !stays {
                    self.0[hole] = self.0[j];
                    self.0[j] = Slot::EMPTY;
                    hole = j;
                }
                j = (j + 1) % n;
            }
            true
        }
        fn bytes(&self) -> Vec<u8> {
            self.0
                .iter()
                .flat_map(|s| s.ptr.to_le_bytes().into_iter().chain(s.key.to_le_bytes()))
                .collect()
        }
    }

    fn encoded(t: &SlotTable) -> Vec<u8> {
        let mut w = Writer::with_capacity(t.len() * 8);
        t.encode(&mut w);
        w.buf
    }

    #[test]
    fn table_matches_the_format_through_sparse_and_dense_forms() {
        // 61 positions: sparse up to 20 entries. Fill to full, empty it again, refill: the
        // table crosses both thresholds several times and must place every slot where the
        // plain array does, byte for byte.
        let n = 61;
        let mut t = SlotTable::empty(n);
        let mut r = Reference(vec![Slot::EMPTY; n]);
        let mut x: u32 = 12345;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        // Few distinct hashes so that probe chains are long and wrap around.
        let mk = |i: u32| Slot {
            ptr: i,
            key: (i % 23).wrapping_mul(0x0B0C_0D0F) & 0x7FFF_FFFF | (i & 1) << 31,
        };
        let mut present: Vec<u32> = Vec::new();
        let (mut was_dense, mut switches) = (false, 0);
        for step in 0..3000 {
            let grow = (step / 400) % 2 == 0;
            if (grow && rnd() % 4 != 0) || present.is_empty() {
                let id = rnd() % 1000;
                if present.contains(&id) {
                    continue;
                }
                let ok = t.insert(mk(id));
                assert_eq!(ok, r.insert(mk(id)), "insert at step {step}");
                if ok {
                    present.push(id);
                }
            } else {
                let k = rnd() as usize % present.len();
                let id = present.swap_remove(k);
                assert!(t.remove(mk(id)), "remove at step {step}");
                assert!(r.remove(mk(id)));
            }
            assert_eq!(t.used(), present.len());
            assert_eq!(encoded(&t), r.bytes(), "layout at step {step}");
            // Never more than the full array; less whenever few slots are used.
            let ram = t.ram_bytes();
            assert!(ram <= n * 8, "{ram} B for {} slots", t.used());
            if t.used() < sparse_max(n) / 2 {
                assert!(ram < n * 8, "{ram} B for {} slots", t.used());
            }
            let dense = ram == n * 8;
            switches += (dense != was_dense) as u32;
            was_dense = dense;
        }
        assert!(switches >= 4, "the table changed form {switches} times");
        // Decoding gives the same table back.
        let bytes = encoded(&t);
        let d = SlotTable::decode(&mut Reader::new(&bytes), n).unwrap();
        assert_eq!(encoded(&d), bytes);
        assert_eq!(d.used(), t.used());
        let mut a: Vec<Slot> = t.iter().collect();
        let mut b: Vec<Slot> = d.iter().collect();
        a.sort_by_key(|s| s.ptr);
        b.sort_by_key(|s| s.ptr);
        assert_eq!(a, b);
    }

    #[test]
    fn a_slot_pointer_is_replaced_in_place() {
        let mut t = SlotTable::empty(8);
        let s = Slot { ptr: 7, key: 99 };
        assert!(t.insert(s));
        assert!(t.replace_ptr(s, 8));
        assert!(!t.replace_ptr(s, 9), "the old slot is gone");
        assert_eq!(t.iter().collect::<Vec<_>>(), [Slot { ptr: 8, key: 99 }]);
        assert!(
            !t.replace_ptr(Slot::EMPTY, 1),
            "an empty slot is never filled this way"
        );
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
