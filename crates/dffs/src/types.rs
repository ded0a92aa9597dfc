//! Small value types shared by the index, journal and API layers: timestamps, attributes,
//! inode numbers, and the extent map of a file's pending block changes.
//!
//! Owns their in-RAM representation and their byte encoding. It must never touch flash.

use alloc::vec::Vec;

use crate::codec::{Reader, Writer};
use crate::error::{Error, Result};
use crate::layout::Addr;

/// An inode number. 1 is the root directory; 0 is never used.
pub type Ino = u32;

/// The root directory's inode number.
pub const ROOT_INO: Ino = 1;

/// File type bits of `mode` (as in POSIX `st_mode`).
pub const S_IFMT: u32 = 0o170000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Type bits of a named pipe.
pub const S_IFIFO: u32 = 0o010000;
/// Type bits of a character device.
pub const S_IFCHR: u32 = 0o020000;
/// Type bits of a block device.
pub const S_IFBLK: u32 = 0o060000;
/// Type bits of a socket.
pub const S_IFSOCK: u32 = 0o140000;

/// A point in time: seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds since 1970-01-01 UTC (may be negative).
    pub secs: i64,
    /// Nanoseconds (0..1e9).
    pub nsec: u32,
}

impl Time {
    /// Encodes (12 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.i64(self.secs).u32(self.nsec);
    }
    /// Decodes, rejecting out-of-range nanoseconds.
    pub fn decode(r: &mut Reader<'_>) -> Result<Time> {
        let secs = r.i64()?;
        let nsec = r.u32()?;
        if nsec >= 1_000_000_000 {
            return Err(Error::Corrupt);
        }
        Ok(Time { secs, nsec })
    }
}

/// Where the file system gets the current time from.
pub trait Clock {
    /// The current time.
    fn now(&self) -> Time;
}

/// A clock that always says the epoch (for systems without a clock, and deterministic tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClock;

impl Clock for NoClock {
    fn now(&self) -> Time {
        Time::default()
    }
}

/// The system clock (with the `std` feature).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now(&self) -> Time {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Time {
                secs: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(_) => Time::default(),
        }
    }
}

/// Ownership, permissions and times of a file or directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    /// Type and permission bits (`S_IF*` | permissions).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access (only changed explicitly: DFFS does not write on reads).
    pub atime: Time,
    /// Last content change.
    pub mtime: Time,
    /// Last attribute change.
    pub ctime: Time,
}

impl Attrs {
    /// Encodes (48 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.mode).u32(self.uid).u32(self.gid);
        self.atime.encode(w);
        self.mtime.encode(w);
        self.ctime.encode(w);
    }
    /// Decodes.
    pub fn decode(r: &mut Reader<'_>) -> Result<Attrs> {
        Ok(Attrs {
            mode: r.u32()?,
            uid: r.u32()?,
            gid: r.u32()?,
            atime: Time::decode(r)?,
            mtime: Time::decode(r)?,
            ctime: Time::decode(r)?,
        })
    }
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
    /// Whether this is a special file (named pipe, socket, character or block device): an
    /// inode without data, whose device number (devices) is its 4-byte inline content.
    pub fn is_special(&self) -> bool {
        matches!(self.mode & S_IFMT, S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
    }
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
