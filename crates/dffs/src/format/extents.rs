//! Value types that map file blocks to flash addresses, as commit records and inode nodes
//! carry them: the extent map of a file's pending block changes, and a complete block map.
//!
//! Owns their in-RAM representation and their byte encoding. It must never touch flash.

use alloc::vec::Vec;

use super::codec::{Reader, Writer};
use super::params::Addr;
use crate::error::{Error, Result};

/// A file's complete block map as a commit record carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockMap {
    /// 0: `direct` holds the block addresses; otherwise the depth of the tree at `root`.
    pub depth: u8,
    /// Root of the index tree (NONE for depth 0).
    pub root: Addr,
    /// Direct block pointers (depth 0).
    pub direct: Vec<Addr>,
}

/// A run of consecutive file blocks mapped to consecutive addresses (each block `stride`
/// address units after the previous one), or a run of holes (`addr` = NONE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First file block.
    pub first: u32,
    /// Number of blocks.
    pub count: u32,
    /// Address of the first block (NONE: the blocks are holes).
    pub addr: Addr,
}

/// File block → address changes not yet folded into a file's on-flash index, kept as sorted,
/// non-overlapping, coalesced extents. Consecutive blocks coalesce when their addresses are
/// `stride` units apart (one data block), so a sequential write is one extent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtentMap {
    runs: Vec<Extent>,
}

impl ExtentMap {
    /// An empty map.
    pub fn new() -> Self {
        ExtentMap { runs: Vec::new() }
    }

    /// Number of extents.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The extents, in block order.
    pub fn extents(&self) -> &[Extent] {
        &self.runs
    }

    /// RAM used.
    pub fn ram_bytes(&self) -> usize {
        self.runs.capacity() * core::mem::size_of::<Extent>()
    }

    fn addr_at(e: &Extent, block: u32, stride: u32) -> Addr {
        if e.addr.is_none() {
            Addr::NONE
        } else {
            Addr(e.addr.0 + (block - e.first) * stride)
        }
    }

    /// `Some(addr)` if the map says where `block` is (NONE meaning a hole), `None` if the map
    /// has nothing for it.
    pub fn get(&self, block: u32, stride: u32) -> Option<Addr> {
        let i = self.runs.partition_point(|e| e.first + e.count <= block);
        let e = self.runs.get(i)?;
        if e.first <= block {
            Some(Self::addr_at(e, block, stride))
        } else {
            None
        }
    }

    /// Maps `count` blocks from `first` to consecutive addresses from `addr` (or holes),
    /// replacing what the map said about them.
    pub fn insert(&mut self, first: u32, count: u32, addr: Addr, stride: u32) {
        if count == 0 {
            return;
        }
        self.remove(first, count, stride);
        let i = self.runs.partition_point(|e| e.first < first);
        self.runs.insert(i, Extent { first, count, addr });
        // Coalesce with neighbours.
        let mergeable = |a: &Extent, b: &Extent| {
            a.first + a.count == b.first
                && ((a.addr.is_none() && b.addr.is_none())
                    || (a.addr.is_some()
                        && b.addr.is_some()
                        && a.addr.0 as u64 + a.count as u64 * stride as u64 == b.addr.0 as u64))
        };
        if i + 1 < self.runs.len() && mergeable(&self.runs[i], &self.runs[i + 1]) {
            self.runs[i].count += self.runs[i + 1].count;
            self.runs.remove(i + 1);
        }
        if i > 0 && mergeable(&self.runs[i - 1], &self.runs[i]) {
            self.runs[i - 1].count += self.runs[i].count;
            self.runs.remove(i);
        }
    }

    /// Forgets what the map says about `count` blocks from `first`.
    pub fn remove(&mut self, first: u32, count: u32, stride: u32) {
        let end = first.saturating_add(count);
        let mut out: Vec<Extent> = Vec::with_capacity(self.runs.len() + 1);
        for e in self.runs.drain(..) {
            let e_end = e.first + e.count;
            if e_end <= first || e.first >= end {
                out.push(e);
                continue;
            }
            if e.first < first {
                out.push(Extent {
                    first: e.first,
                    count: first - e.first,
                    addr: e.addr,
                });
            }
            if e_end > end {
                out.push(Extent {
                    first: end,
                    count: e_end - end,
                    addr: Self::addr_at(&e, end, stride),
                });
            }
        }
        self.runs = out;
    }

    /// Drops everything at or beyond block `from`.
    pub fn truncate(&mut self, from: u32, stride: u32) {
        self.remove(from, u32::MAX - from, stride);
    }

    /// Iterates over every (block, addr) pair.
    pub fn iter_blocks(&self, stride: u32) -> impl Iterator<Item = (u32, Addr)> + '_ {
        self.runs.iter().flat_map(move |e| {
            (0..e.count).map(move |i| (e.first + i, Self::addr_at(e, e.first + i, stride)))
        })
    }

    /// Encodes (count, then 12 bytes per extent).
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.runs.len() as u32);
        for e in &self.runs {
            w.u32(e.first).u32(e.count).u32(e.addr.0);
        }
    }

    /// Decodes a map, rejecting overlaps, disorder and more than `max` extents.
    pub fn decode(r: &mut Reader<'_>, max: usize) -> Result<ExtentMap> {
        let n = r.u32()? as usize;
        if n > max || n * 12 > r.remaining() {
            return Err(Error::Corrupt);
        }
        let mut runs = Vec::with_capacity(n);
        let mut end = 0u64;
        for _ in 0..n {
            let first = r.u32()?;
            let count = r.u32()?;
            let addr = Addr(r.u32()?);
            if count == 0 || (first as u64) < end || first as u64 + count as u64 > u32::MAX as u64 {
                return Err(Error::Corrupt);
            }
            end = first as u64 + count as u64;
            runs.push(Extent { first, count, addr });
        }
        Ok(ExtentMap { runs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sequential_writes_coalesce() {
        let mut m = ExtentMap::new();
        for b in 0..100 {
            m.insert(b, 1, Addr(1000 + b * 4), 4);
        }
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(57, 4), Some(Addr(1000 + 57 * 4)));
        assert_eq!(m.get(100, 4), None);
        m.insert(50, 1, Addr(9), 4);
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(50, 4), Some(Addr(9)));
        assert_eq!(m.get(51, 4), Some(Addr(1000 + 51 * 4)));
        m.truncate(10, 4);
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(10, 4), None);
    }

    proptest! {
        #[test]
        fn extent_map_matches_a_plain_map(ops in proptest::collection::vec((0u32..64, 1u32..8, 0u32..3), 1..80)) {
            let mut m = ExtentMap::new();
            let mut model = alloc::collections::BTreeMap::new();
            for (first, count, kind) in ops {
                match kind {
                    0 => {
                        m.insert(first, count, Addr(first * 2), 2);
                        for b in first..first + count { model.insert(b, Addr(b * 2)); }
                    }
                    1 => {
                        m.insert(first, count, Addr::NONE, 2);
                        for b in first..first + count { model.insert(b, Addr::NONE); }
                    }
                    _ => {
                        m.remove(first, count, 2);
                        for b in first..first + count { model.remove(&b); }
                    }
                }
                for b in 0..80 {
                    prop_assert_eq!(m.get(b, 2), model.get(&b).copied());
                }
                let mut w = Writer::default();
                m.encode(&mut w);
                let d = ExtentMap::decode(&mut Reader::new(&w.buf), 1000).unwrap();
                prop_assert_eq!(&d, &m);
            }
        }
    }
}
