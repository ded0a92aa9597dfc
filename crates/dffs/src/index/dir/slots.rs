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

/// Open-addressing insert into `slots`; false if full.
pub(crate) fn table_insert(slots: &mut [Slot], s: Slot) -> bool {
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
pub(crate) fn table_remove(slots: &mut [Slot], s: Slot) -> bool {
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
pub(crate) fn table_candidates(slots: &[Slot], hash: u32, out: &mut Vec<Slot>) {
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

pub(crate) fn count_used(slots: &[Slot]) -> usize {
    slots.iter().filter(|s| !s.is_empty()).count()
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

/// Decodes `n` slots.
pub(crate) fn decode_slots(r: &mut Reader<'_>, n: usize) -> Result<Vec<Slot>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(Slot {
            ptr: r.u32()?,
            key: r.u32()?,
        });
    }
    Ok(v)
}

/// Encodes slots.
pub(crate) fn encode_slots(w: &mut Writer, slots: &[Slot]) {
    for s in slots {
        w.u32(s.ptr).u32(s.key);
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
