//! The byte layout of directory pages: the root page (the paper's DirInode: attributes, name
//! and either the embedded slot table or the bucket table), bucket pages (the paper's virtual
//! DirInodes) and bucket-table pages.
//!
//! ```text
//!   DirRoot   | node header | parent | attrs (48) | subdirs | entries | level | name_len |
//!             | paged | 0 | split | nbuckets | name, padded to 8 |
//!             | nbuckets = 0: embedded slots ... (or, paged = 2, used ones with positions) |
//!             | else: n, n bucket (or table page) addrs |
//!   DirBucket | node header | bucket | pos | next page | count | slots ... |
//!   DirTable  | node header | first | n | bucket addresses ... |
//! ```
//!
//! Owns these layouts (every page is `dir_page` bytes, zero filled, except a root whose
//! embedded slots fill under two-thirds of its positions: it lists them, position and slot,
//! and ends there) and what a decoder must reject. It must never touch flash or the cache.

use alloc::vec::Vec;

use super::slots::{Slot, SlotTable};
use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino};
use crate::format::codec::Reader;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, Params, NODE_HEADER};

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
    pub(crate) level: u8,
    /// Linear hashing split pointer.
    pub(crate) split: u32,
    /// Bucket pages (0: entries are embedded in this page).
    pub(crate) nbuckets: u32,
    /// Embedded slots (when `nbuckets == 0`).
    pub(crate) embedded: SlotTable,
    /// Bucket page addresses when they fit in the root; table page addresses otherwise.
    pub(crate) table: Vec<Addr>,
    /// Whether `table` lists table pages (very large directories).
    pub(crate) paged: bool,
    /// Bytes the copy on flash is credited with (0: never written): `dir_page`, or less for
    /// a root whose embedded slots are listed.
    pub(crate) stored_len: u32,
}

/// `paged` byte of a root whose embedded slots are listed, used ones only (FORMAT §8.4).
const LISTED: u8 = 2;

/// Fixed bytes of a DirRoot body before the name.
pub(crate) const ROOT_FIXED: u32 = 4 + 48 + 4 + 4 + 4 + 4 + 4;
/// Fixed bytes of a DirBucket body.
pub(crate) const BUCKET_FIXED: u32 = 16;
/// Fixed bytes of a DirTable body.
pub(crate) const TABLE_FIXED: u32 = 8;

/// Largest load (entries per slot) before a bucket split, as a fraction of 16.
pub(crate) const SPLIT_LOAD_16THS: u64 = 11;

impl DirRoot {
    pub(crate) fn room_after_name(p: &Params, name_len: usize) -> u32 {
        let used = NODE_HEADER + ROOT_FIXED + (name_len as u32).div_ceil(8) * 8;
        p.dir_page.saturating_sub(used)
    }
    /// Slots a root page with this name can embed.
    pub fn embedded_capacity(p: &Params, name_len: usize) -> usize {
        (Self::room_after_name(p, name_len) / 8) as usize
    }
    /// Bucket (or table page) addresses a root page with this name can hold: after the name,
    /// a 4-byte count and the addresses.
    pub(crate) fn table_capacity(p: &Params, name_len: usize) -> usize {
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
            embedded: SlotTable::empty(Self::embedded_capacity(p, name.len())),
            table: Vec::new(),
            paged: false,
            stored_len: 0,
        }
    }
    /// Whether the page is written with its embedded slots listed (shorter than the array).
    fn listed(&self) -> bool {
        self.nbuckets == 0 && self.embedded.listed_is_smaller()
    }
    /// Number of bucket pages (0: embedded).
    pub fn nbuckets(&self) -> u32 {
        self.nbuckets
    }
    /// Bucket holding `hash` under linear hashing.
    pub(crate) fn bucket_of(&self, hash: u32) -> u32 {
        let lo = hash & ((1u32 << self.level) - 1);
        if lo < self.split {
            hash & ((1u32 << (self.level + 1)) - 1)
        } else {
            lo
        }
    }
    pub(crate) fn encode(&self, p: &Params) -> NodeBuilder {
        let mut nb = NodeBuilder::new(NodeType::DirRoot, 0, self.ino, p.dir_page as usize);
        let w = &mut nb.w;
        w.u32(self.parent);
        self.attrs.encode(w);
        w.u32(self.subdirs).u32(self.entries);
        let listed = self.listed();
        w.u8(self.level)
            .u8(self.name.len() as u8)
            .u8(if listed { LISTED } else { self.paged as u8 })
            .u8(0);
        w.u32(self.split).u32(self.nbuckets);
        w.bytes(&self.name);
        w.pad_to(8, 0);
        if listed {
            self.embedded.encode_listed(w);
            w.pad_to(8, 0);
            return nb;
        }
        if self.nbuckets == 0 {
            self.embedded.encode(w);
        } else {
            w.u32(self.table.len() as u32);
            for a in &self.table {
                w.u32(a.0);
            }
        }
        let cur = w.len();
        if cur < p.dir_page as usize {
            w.fill(0, p.dir_page as usize - cur);
        }
        nb
    }
    pub(crate) fn decode(p: &Params, ino: Ino, body: &[u8]) -> Result<DirRoot> {
        let mut r = Reader::new(body);
        let parent = r.u32()?;
        let attrs = Attrs::decode(&mut r)?;
        let subdirs = r.u32()?;
        let entries = r.u32()?;
        let level = r.u8()?;
        let name_len = r.u8()? as usize;
        let (paged, listed) = match r.u8()? {
            0 => (false, false),
            1 => (true, false),
            LISTED => (false, true),
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
            || (listed && nbuckets != 0)
            || name.contains(&b'/')
            || name.contains(&0)
            || !attrs.is_dir()
        {
            return Err(Error::Corrupt);
        }
        let mut embedded = SlotTable::empty(0);
        let mut table = Vec::new();
        if listed {
            let cap = Self::embedded_capacity(p, name_len);
            embedded = SlotTable::decode_listed(&mut r, cap, entries as usize)?;
        } else if nbuckets == 0 {
            let cap = Self::embedded_capacity(p, name_len);
            embedded = SlotTable::decode(&mut r, cap)?;
            if embedded.used() as u32 != entries {
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
            stored_len: 0,
        })
    }
}

/// One page of a bucket chain (first page plus overflow pages) in RAM.
#[derive(Clone, Debug)]
pub(crate) struct BucketPage {
    pub slots: SlotTable,
}

/// Slots in one bucket page.
pub(crate) fn bucket_capacity(p: &Params) -> usize {
    ((p.dir_page - NODE_HEADER - BUCKET_FIXED) / 8) as usize
}

/// Bucket addresses in one bucket-table page.
pub(crate) fn table_page_capacity(p: &Params) -> usize {
    ((p.dir_page - NODE_HEADER - TABLE_FIXED) / 4) as usize
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::attrs::{Attrs, S_IFDIR};
    use crate::format::params::FormatOptions;
    use dffs_testkit::ram_flash::nor_geometry;

    /// 4 KiB NOR sectors: 1 KiB directory pages.
    fn nor() -> Params {
        Params::for_geometry(nor_geometry(256), &FormatOptions::default()).unwrap()
    }

    fn slot(i: u32) -> Slot {
        Slot {
            ptr: 0x100 + i * 8,
            key: i.wrapping_mul(0x9E37_79B9) & 0x7FFF_FFFF,
        }
    }

    fn root_with(p: &Params, n: u32) -> DirRoot {
        let attrs = Attrs {
            mode: S_IFDIR | 0o755,
            ..Attrs::default()
        };
        let mut r = DirRoot::new(p, 7, 1, attrs, b"dir");
        for i in 0..n {
            assert!(r.embedded.insert(slot(i)));
        }
        r.entries = n;
        r
    }

    fn bytes(p: &Params, r: &DirRoot) -> Vec<u8> {
        r.encode(p).finish(1, p.unit())
    }

    fn slots(r: &DirRoot) -> Vec<Slot> {
        r.embedded.iter().collect()
    }

    #[test]
    fn a_root_lists_its_slots_while_that_is_shorter_than_the_array() {
        let p = nor();
        let cap = DirRoot::embedded_capacity(&p, 3);
        // Listed while 12 bytes per used slot stay under 8 per position.
        let last_listed = (2 * cap - 1) / 3;
        for n in [0, 1, 5, last_listed, last_listed + 1, cap * 11 / 16] {
            let r = root_with(&p, n as u32);
            let b = bytes(&p, &r);
            let listed = 12 * n < 8 * cap;
            let want = if listed {
                NODE_HEADER as usize + 72 + 8 + (12 * n).div_ceil(8) * 8
            } else {
                p.dir_page as usize
            };
            assert_eq!(b.len(), want, "{n} entries");
            assert_eq!(b[NODE_HEADER as usize + 62], if listed { 2 } else { 0 });
            let back = DirRoot::decode(&p, 7, &b[NODE_HEADER as usize..]).unwrap();
            assert_eq!(back.entries, n as u32);
            assert_eq!(slots(&back), slots(&r), "{n} entries");
            assert_eq!(back.embedded.len(), cap);
            // Every slot is found from its hash where the array form would put it.
            for s in slots(&r) {
                let mut c = Vec::new();
                back.embedded.candidates(s.hash(), &mut c);
                assert!(c.contains(&s));
            }
        }
    }

    #[test]
    fn a_listed_root_that_breaks_its_rules_is_rejected() {
        let p = nor();
        let r = root_with(&p, 6);
        let good = bytes(&p, &r);
        let body = NODE_HEADER as usize;
        let list = body + 72 + 8;
        assert!(DirRoot::decode(&p, 7, &good[body..]).is_ok());
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            DirRoot::decode(&p, 7, &b[body..]).err()
        };
        // Positions out of order (the second entry's moved before the first's).
        let first = u16::from_le_bytes([good[list], good[list + 1]]);
        assert_eq!(
            bad(&|b| b[list + 12..list + 14].copy_from_slice(&first.to_le_bytes())),
            Some(Error::Corrupt)
        );
        // A position past the table.
        let cap = DirRoot::embedded_capacity(&p, 3) as u16;
        assert_eq!(
            bad(&|b| b[list + 60..list + 62].copy_from_slice(&cap.to_le_bytes())),
            Some(Error::Corrupt)
        );
        // The two bytes after a position must be zero.
        assert_eq!(bad(&|b| b[list + 2] = 1), Some(Error::Corrupt));
        // An empty slot listed as used.
        assert_eq!(
            bad(&|b| b[list + 4..list + 12].fill(0xFF)),
            Some(Error::Corrupt)
        );
        // More entries than the list holds.
        assert_eq!(
            bad(&|b| b[body + 56..body + 60].copy_from_slice(&40u32.to_le_bytes())),
            Some(Error::Corrupt)
        );
        // The listed form with buckets.
        assert_eq!(
            bad(&|b| {
                b[body + 60] = 1;
                b[body + 68..body + 72].copy_from_slice(&3u32.to_le_bytes());
            }),
            Some(Error::Corrupt)
        );
    }
}
