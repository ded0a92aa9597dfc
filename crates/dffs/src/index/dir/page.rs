//! The byte layout of directory pages: the root page (the paper's DirInode: attributes, name
//! and either the embedded slot table or the bucket table), bucket pages (the paper's virtual
//! DirInodes) and bucket-table pages.
//!
//! ```text
//!   DirRoot   | node header | parent | attrs (48) | subdirs | entries | level | name_len |
//!             | paged | 0 | split | nbuckets | name, padded to 8 |
//!             | nbuckets = 0: embedded slots ... | else: n, n bucket (or table page) addrs |
//!   DirBucket | node header | bucket | pos | next page | count | slots ... |
//!   DirTable  | node header | first | n | bucket addresses ... |
//! ```
//!
//! Owns these layouts (every page is `dir_page` bytes, zero filled) and what a decoder must
//! reject. It must never touch flash or the cache.

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
}

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
        }
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
        w.u8(self.level)
            .u8(self.name.len() as u8)
            .u8(self.paged as u8)
            .u8(0);
        w.u32(self.split).u32(self.nbuckets);
        w.bytes(&self.name);
        w.pad_to(8, 0);
        if self.nbuckets == 0 {
            self.embedded.encode(w);
        } else {
            w.u32(self.table.len() as u32);
            for a in &self.table {
                w.u32(a.0);
            }
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
        let paged = match r.u8()? {
            0 => false,
            1 => true,
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
            || name.contains(&b'/')
            || name.contains(&0)
            || !attrs.is_dir()
        {
            return Err(Error::Corrupt);
        }
        let mut embedded = SlotTable::empty(0);
        let mut table = Vec::new();
        if nbuckets == 0 {
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
