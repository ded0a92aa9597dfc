//! Files: inode nodes and the file index.
//!
//! Owns the on-flash inode node (attributes, name, parent, size, and either inline data, direct
//! block pointers, or the root of an index tree), the index tree itself (a copy-on-write radix
//! tree of block addresses, fan-out fixed per file system), and [`Content`]: a file's block map
//! plus the changes not yet folded into the tree. Folding writes new index nodes and never
//! modifies old ones. It must never decide when to fold or commit, and never account data
//! blocks as dead except when truncating: data liveness belongs to the file-system layer.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino};
use crate::format::codec::Reader;
use crate::format::extents::ExtentMap;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, LogKind, Params, NAME_MAX, NODE_HEADER};
use crate::store::{Priority, Store};
use dffs_flash::Flash;

/// Fixed bytes of an inode node body before the name.
const INODE_FIXED: u32 = 4 + 48 + 8 + 2 + 1 + 1 + 4 + 2 + 2;

/// What a file's blocks are mapped by, plus pending changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Content {
    /// The whole content, when the file is kept inline in its inode node.
    pub inline: Option<Vec<u8>>,
    /// 0: `direct` holds the block addresses; 1..: `root` is an index tree of that depth.
    pub depth: u8,
    /// Root of the index tree.
    pub root: Addr,
    /// Direct block pointers (depth 0).
    pub direct: Vec<Addr>,
    /// Changes not folded yet.
    pub pending: ExtentMap,
    /// Blocks at or beyond this are holes in the folded map (a truncation not folded yet;
    /// `pending` may map some of them again).
    pub trunc: Option<u32>,
}

impl Content {
    /// An empty file kept inline.
    pub fn empty_inline() -> Content {
        Content {
            inline: Some(Vec::new()),
            depth: 0,
            root: Addr::NONE,
            direct: Vec::new(),
            pending: ExtentMap::new(),
            trunc: None,
        }
    }

    /// Whether nothing is waiting to be folded.
    pub fn is_folded(&self) -> bool {
        self.pending.is_empty() && self.trunc.is_none()
    }

    /// RAM used.
    pub fn ram_bytes(&self) -> usize {
        self.inline.as_ref().map(|v| v.capacity()).unwrap_or(0)
            + self.direct.capacity() * 4
            + self.pending.ram_bytes()
    }
}

/// A file inode (decoded inode node plus RAM bookkeeping).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileNode {
    /// Inode number.
    pub ino: Ino,
    /// Parent directory.
    pub parent: Ino,
    /// Attributes.
    pub attrs: Attrs,
    /// Size in bytes.
    pub size: u64,
    /// Name in the parent.
    pub name: Vec<u8>,
    /// Data mapping.
    pub content: Content,
    /// Compression of data written to this file (0 none, 1 LZ4, 2 deflate).
    pub compression: u8,
    /// Current inode node on flash (NONE: never written).
    pub node_addr: Addr,
    /// Its length in bytes (aligned).
    pub node_len: u32,
    /// Indexed through the inode map ([`crate::map::MapEntry::Linked`]) rather than through
    /// its parent's slot: set by the file's first hard link, and kept.
    pub linked: bool,
    /// The file's other names (directory, name), beyond `parent`/`name` (hard links).
    pub links: Vec<(Ino, Vec<u8>)>,
}

impl FileNode {
    /// Encodes the inode node (pending changes must be folded first).
    pub fn encode(&self) -> Result<NodeBuilder> {
        if !self.content.is_folded() {
            return Err(Error::Invalid);
        }
        let c = &self.content;
        let mut nb = NodeBuilder::new(NodeType::Inode, 0, self.ino, 128 + self.name.len());
        let w = &mut nb.w;
        w.u32(self.parent);
        self.attrs.encode(w);
        w.u64(self.size);
        let flags =
            c.inline.is_some() as u16 | (self.compression as u16) << 1 | (self.linked as u16) << 3;
        w.u16(flags)
            .u8(self.name.len() as u8)
            .u8(c.depth)
            .u32(c.root.0);
        w.u16(c.direct.len() as u16);
        w.u16(c.inline.as_ref().map(|d| d.len()).unwrap_or(0) as u16);
        w.bytes(&self.name);
        for a in &c.direct {
            w.u32(a.0);
        }
        if let Some(d) = &c.inline {
            w.bytes(d);
        }
        if self.linked {
            if self.links.len() > LINKS_MAX {
                return Err(Error::Invalid);
            }
            w.u8(self.links.len() as u8);
            for (parent, name) in &self.links {
                w.u32(*parent).u8(name.len() as u8).bytes(name);
            }
        }
        Ok(nb)
    }

    /// Decodes an inode node body.
    pub fn decode(
        p: &Params,
        ino: Ino,
        addr: Addr,
        node_len: u32,
        body: &[u8],
    ) -> Result<FileNode> {
        let mut r = Reader::new(body);
        let parent = r.u32()?;
        let attrs = Attrs::decode(&mut r)?;
        let size = r.u64()?;
        let flags = r.u16()?;
        let name_len = r.u8()? as usize;
        let depth = r.u8()?;
        let root = Addr(r.u32()?);
        let ndirect = r.u16()? as usize;
        let inline_len = r.u16()? as usize;
        let name = r.take(name_len)?.to_vec();
        if name.is_empty() || name_len > NAME_MAX || name.contains(&b'/') || name.contains(&0) {
            return Err(Error::Corrupt);
        }
        let inline = flags & 1 != 0;
        let compression = ((flags >> 1) & 3) as u8;
        if attrs.is_dir()
            || depth > crate::format::params::MAX_DEPTH
            || ndirect > p.direct_ptrs as usize
            || compression > 2
            || flags >> 4 != 0
        {
            return Err(Error::Corrupt);
        }
        let mut direct = Vec::with_capacity(ndirect);
        for _ in 0..ndirect {
            direct.push(Addr(r.u32()?));
        }
        let data = r.take(inline_len)?.to_vec();
        let linked = flags & 8 != 0;
        let mut links = Vec::new();
        if linked {
            let n = r.u8()? as usize;
            if n > LINKS_MAX {
                return Err(Error::Corrupt);
            }
            for _ in 0..n {
                let parent = r.u32()?;
                let len = r.u8()? as usize;
                let name = r.take(len)?.to_vec();
                if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
                    return Err(Error::Corrupt);
                }
                links.push((parent, name));
            }
        }
        if r.remaining() != 0 {
            return Err(Error::Corrupt);
        }
        if inline {
            if depth != 0 || ndirect != 0 || data.len() as u64 != size {
                return Err(Error::Corrupt);
            }
        } else if inline_len != 0
            || (depth == 0) != root.is_none()
            || (depth > 0 && !p.addr_valid(root))
        {
            return Err(Error::Corrupt);
        }
        if size > p.max_file_size() {
            return Err(Error::Corrupt);
        }
        Ok(FileNode {
            ino,
            parent,
            attrs,
            size,
            name,
            content: Content {
                inline: if inline { Some(data) } else { None },
                depth,
                root,
                direct,
                pending: ExtentMap::new(),
                trunc: None,
            },
            compression,
            node_addr: addr,
            node_len,
            linked,
            links,
        })
    }

    /// Bytes the file's names take in its inode node (the first name, and the list of the
    /// others for a linked file).
    pub fn names_len(&self) -> usize {
        self.name.len()
            + if self.linked {
                1 + self.links.iter().map(|(_, n)| 5 + n.len()).sum::<usize>()
            } else {
                0
            }
    }

    /// Number of names (hard links) the file has.
    pub fn nlink(&self) -> u32 {
        1 + self.links.len() as u32
    }

    /// All the file's names: (directory, name).
    pub fn names(&self) -> impl Iterator<Item = (Ino, &[u8])> + '_ {
        core::iter::once((self.parent, self.name.as_slice()))
            .chain(self.links.iter().map(|(p, n)| (*p, n.as_slice())))
    }

    /// Whether one of the file's names is `name` in `parent`.
    pub fn has_name(&self, parent: Ino, name: &[u8]) -> bool {
        (self.parent == parent && self.name == name)
            || self.links.iter().any(|(p, n)| *p == parent && n == name)
    }

    /// The largest node this file can need with names taking `names_len` bytes: its inline
    /// content, or every direct pointer.
    pub fn worst_len(&self, p: &Params, names_len: usize) -> u32 {
        let content = match &self.content.inline {
            Some(d) => d.len() as u32,
            None => 4 * p.direct_ptrs,
        };
        NODE_HEADER + INODE_FIXED + names_len as u32 + content
    }
}

/// Most names a file can have beyond its first (the node keeps the count in a byte; the
/// names must also fit the node, which usually limits them first).
pub const LINKS_MAX: usize = 255;

/// Largest inline content that still lets the inode node fit its limit with names taking
/// `name_len` bytes ([`FileNode::names_len`]).
pub fn inline_limit(p: &Params, name_len: usize) -> usize {
    let max_node = p.dir_page;
    let room = max_node.saturating_sub(NODE_HEADER + INODE_FIXED + name_len as u32) as usize;
    room.min(p.inline_max as usize)
}

/// A decoded index node.
#[derive(Clone, Debug)]
struct IndexNode {
    level: u8,
    first: u32,
    entries: Vec<Addr>,
}

/// Cache of clean index nodes by address.
pub struct IndexCache {
    items: Vec<(Addr, u64, IndexNode)>,
    max: usize,
    tick: u64,
}

impl IndexCache {
    /// A cache of at most `max` nodes.
    pub fn new(max: usize) -> IndexCache {
        IndexCache {
            items: Vec::new(),
            max,
            tick: 0,
        }
    }
    /// RAM used.
    pub fn ram_bytes(&self) -> usize {
        self.items.capacity() * core::mem::size_of::<(Addr, u64, IndexNode)>()
            + self
                .items
                .iter()
                .map(|i| i.2.entries.capacity() * 4)
                .sum::<usize>()
    }
    /// Drops nodes that lie in erase block `b`.
    pub fn forget_block(&mut self, p: &Params, b: u32) {
        self.items.retain(|i| p.block_of(i.0) != b);
    }
    /// Drops everything.
    pub fn clear(&mut self) {
        self.items.clear();
    }
    fn get(&mut self, a: Addr) -> Option<IndexNode> {
        self.tick += 1;
        let t = self.tick;
        self.items.iter_mut().find(|i| i.0 == a).map(|i| {
            i.1 = t;
            i.2.clone()
        })
    }
    fn put(&mut self, a: Addr, n: IndexNode) {
        if self.max == 0 {
            return;
        }
        if self.items.len() >= self.max {
            if let Some(k) = self
                .items
                .iter()
                .enumerate()
                .min_by_key(|(_, i)| i.1)
                .map(|(k, _)| k)
            {
                self.items.swap_remove(k);
            }
        }
        self.tick += 1;
        self.items.push((a, self.tick, n));
    }
}

/// Blocks covered by one node at `level` (level 1 = leaf).
fn span(fanout: u32, level: u8) -> u64 {
    let mut s = 1u64;
    for _ in 0..level {
        s *= fanout as u64;
    }
    s
}

/// The file index: operations on [`Content`] that read or write index nodes.
pub struct Index<'a, F: Flash> {
    /// The store.
    pub st: &'a mut Store<F>,
    /// Node cache.
    pub cache: &'a mut IndexCache,
    /// Owner inode (recorded in every node written).
    pub ino: Ino,
}

impl<'a, F: Flash> Index<'a, F> {
    fn fanout(&self) -> u32 {
        self.st.p().index_fanout()
    }

    /// Data stride in address units between consecutive blocks of a contiguous write.
    pub fn stride(p: &Params) -> u32 {
        p.data_slot() >> p.addr_shift
    }

    fn read(&mut self, a: Addr, level: u8, first: u32) -> Result<IndexNode> {
        if let Some(n) = self.cache.get(a) {
            if n.level == level && n.first == first {
                return Ok(n);
            }
            return Err(Error::Corrupt);
        }
        let p = self.st.p();
        let (h, bytes) = self.st.read_node(a, NodeType::Index, p.index_node)?;
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let lv = r.u8()?;
        r.take(3)?;
        let fi = r.u32()?;
        if h.ino != self.ino || lv != level || fi != first {
            return Err(Error::Corrupt);
        }
        let f = self.fanout() as usize;
        let mut entries = Vec::with_capacity(f);
        for _ in 0..f {
            entries.push(Addr(r.u32()?));
        }
        let n = IndexNode {
            level,
            first,
            entries,
        };
        self.cache.put(a, n.clone());
        Ok(n)
    }

    fn write(&mut self, n: &IndexNode) -> Result<Addr> {
        let p = self.st.p();
        let mut nb = NodeBuilder::new(NodeType::Index, 0, self.ino, p.index_node as usize);
        nb.w.u8(n.level).u8(0).u16(0).u32(n.first);
        for a in &n.entries {
            nb.w.u32(a.0);
        }
        let cur = nb.w.len() as u32;
        nb.w.fill(0, (p.index_node - cur) as usize);
        let a = self.st.write_node(LogKind::Index, nb, Priority::Reserve)?;
        self.cache.put(a, n.clone());
        Ok(a)
    }

    fn kill_node(&mut self, a: Addr) {
        let len = self.st.p().align(self.st.p().index_node);
        self.st.kill(a, len);
    }

    /// Where block `b` is according to the folded map (ignores pending changes).
    pub fn lookup_base(&mut self, c: &Content, b: u32) -> Result<Addr> {
        if c.depth == 0 {
            return Ok(c.direct.get(b as usize).copied().unwrap_or(Addr::NONE));
        }
        let f = self.fanout();
        if b as u64 >= span(f, c.depth) {
            return Ok(Addr::NONE);
        }
        let mut a = c.root;
        let mut level = c.depth;
        let mut first = 0u32;
        loop {
            if a.is_none() {
                return Ok(Addr::NONE);
            }
            let n = self.read(a, level, first)?;
            let child_span = span(f, level - 1);
            let k = ((b - first) as u64 / child_span) as usize;
            let next = n.entries[k];
            if level == 1 {
                return Ok(next);
            }
            first += (k as u64 * child_span) as u32;
            a = next;
            level -= 1;
        }
    }

    /// Where block `b` is (pending changes first).
    pub fn lookup(&mut self, c: &Content, b: u32) -> Result<Addr> {
        let stride = Self::stride(&self.st.p());
        if let Some(a) = c.pending.get(b, stride) {
            return Ok(a);
        }
        if c.trunc.is_some_and(|t| b >= t) {
            return Ok(Addr::NONE);
        }
        self.lookup_base(c, b)
    }

    /// Folds pending changes into direct pointers or the index tree (copy-on-write).
    pub fn fold(&mut self, c: &mut Content) -> Result<()> {
        if let Some(t) = c.trunc.take() {
            // The data beyond was accounted dead when the truncation was committed; only the
            // index nodes die here. Pending changes (blocks written after the truncation) stay.
            let pending = core::mem::take(&mut c.pending);
            self.truncate(c, t, &mut |_, _| {})?;
            c.pending = pending;
        }
        if c.pending.is_empty() {
            return Ok(());
        }
        let p = self.st.p();
        let stride = Self::stride(&p);
        let changes: Vec<(u32, Addr)> = c.pending.iter_blocks(stride).collect();
        let max_b = changes.iter().map(|x| x.0).max().unwrap_or(0);
        if c.depth == 0 {
            let highest_direct = c
                .direct
                .iter()
                .rposition(|a| !a.is_none())
                .map(|i| i as u32);
            let fits = max_b < p.direct_ptrs && highest_direct.is_none_or(|h| h < p.direct_ptrs);
            if fits {
                for (b, a) in changes {
                    let b = b as usize;
                    if c.direct.len() <= b {
                        c.direct.resize(b + 1, Addr::NONE);
                    }
                    c.direct[b] = a;
                }
                while c.direct.last() == Some(&Addr::NONE) {
                    c.direct.pop();
                }
                c.pending = ExtentMap::new();
                return Ok(());
            }
            // Move direct pointers into a tree.
            let mut ext = ExtentMap::new();
            for (i, a) in c.direct.iter().enumerate() {
                if !a.is_none() {
                    ext.insert(i as u32, 1, *a, stride);
                }
            }
            for (b, a) in &changes {
                ext.insert(*b, 1, *a, stride);
            }
            c.direct = Vec::new();
            c.depth = 1;
            c.root = Addr::NONE;
            c.pending = ext;
            return self.fold(c);
        }
        let f = self.fanout();
        while (max_b as u64) >= span(f, c.depth) {
            if c.depth >= crate::format::params::MAX_DEPTH {
                return Err(Error::TooBig);
            }
            // Grow: the old root becomes child 0 of a new root.
            let mut entries = vec![Addr::NONE; f as usize];
            entries[0] = c.root;
            let n = IndexNode {
                level: c.depth + 1,
                first: 0,
                entries,
            };
            let a = if c.root.is_none() {
                Addr::NONE
            } else {
                self.write(&n)?
            };
            c.root = a;
            c.depth += 1;
        }
        let root = self.apply(c.root, c.depth, 0, &changes)?;
        c.root = root;
        if c.root.is_none() {
            c.depth = 0;
        }
        c.pending = ExtentMap::new();
        Ok(())
    }

    /// Applies sorted (block, addr) changes under the node at `a`; returns its new address.
    fn apply(&mut self, a: Addr, level: u8, first: u32, changes: &[(u32, Addr)]) -> Result<Addr> {
        if changes.is_empty() {
            return Ok(a);
        }
        let f = self.fanout();
        let mut n = if a.is_none() {
            IndexNode {
                level,
                first,
                entries: vec![Addr::NONE; f as usize],
            }
        } else {
            self.read(a, level, first)?
        };
        let child_span = span(f, level - 1);
        if level == 1 {
            for (b, x) in changes {
                n.entries[(b - first) as usize] = *x;
            }
        } else {
            let mut i = 0;
            while i < changes.len() {
                let k = ((changes[i].0 - first) as u64 / child_span) as usize;
                let cfirst = first + (k as u64 * child_span) as u32;
                let mut j = i;
                while j < changes.len()
                    && ((changes[j].0 - first) as u64 / child_span) as usize == k
                {
                    j += 1;
                }
                let child = n.entries[k];
                n.entries[k] = self.apply(child, level - 1, cfirst, &changes[i..j])?;
                i = j;
            }
        }
        if a.is_some() {
            self.kill_node(a);
        }
        if n.entries.iter().all(|x| x.is_none()) {
            return Ok(Addr::NONE);
        }
        self.write(&n)
    }

    /// Drops every block at or beyond `from`, calling `dead` for each data address dropped
    /// from the folded map (pending changes are dropped silently: their caller accounts them).
    pub fn truncate(
        &mut self,
        c: &mut Content,
        from: u32,
        dead: &mut dyn FnMut(&mut Store<F>, Addr),
    ) -> Result<()> {
        let stride = Self::stride(&self.st.p());
        c.pending.truncate(from, stride);
        if c.depth == 0 {
            if c.direct.len() > from as usize {
                for a in c.direct.drain(from as usize..) {
                    if !a.is_none() {
                        dead(self.st, a);
                    }
                }
            }
            return Ok(());
        }
        let root = self.cut(c.root, c.depth, 0, from, dead)?;
        c.root = root;
        if c.root.is_none() {
            c.depth = 0;
        }
        Ok(())
    }

    fn cut(
        &mut self,
        a: Addr,
        level: u8,
        first: u32,
        from: u32,
        dead: &mut dyn FnMut(&mut Store<F>, Addr),
    ) -> Result<Addr> {
        if a.is_none() {
            return Ok(a);
        }
        let f = self.fanout();
        let end = first as u64 + span(f, level);
        if from as u64 >= end {
            return Ok(a);
        }
        let n = self.read(a, level, first)?;
        let child_span = span(f, level - 1);
        let mut m = n.clone();
        for k in 0..f as usize {
            let cfirst = first as u64 + k as u64 * child_span;
            if cfirst + child_span <= from as u64 {
                continue;
            }
            let child = n.entries[k];
            if child.is_none() {
                continue;
            }
            if level == 1 {
                dead(self.st, child);
                m.entries[k] = Addr::NONE;
            } else if cfirst >= from as u64 {
                self.drop_subtree(child, level - 1, cfirst as u32, dead)?;
                m.entries[k] = Addr::NONE;
            } else {
                m.entries[k] = self.cut(child, level - 1, cfirst as u32, from, dead)?;
            }
        }
        self.kill_node(a);
        if m.entries.iter().all(|x| x.is_none()) {
            return Ok(Addr::NONE);
        }
        self.write(&m)
    }

    fn drop_subtree(
        &mut self,
        a: Addr,
        level: u8,
        first: u32,
        dead: &mut dyn FnMut(&mut Store<F>, Addr),
    ) -> Result<()> {
        let n = self.read(a, level, first)?;
        let f = self.fanout();
        let child_span = span(f, level - 1);
        for (k, child) in n.entries.iter().enumerate() {
            if child.is_none() {
                continue;
            }
            if level == 1 {
                dead(self.st, *child);
            } else {
                self.drop_subtree(
                    *child,
                    level - 1,
                    first + (k as u64 * child_span) as u32,
                    dead,
                )?;
            }
        }
        self.kill_node(a);
        Ok(())
    }

    /// Calls `f(block, addr)` for every mapped block of the folded map, and `node(addr)` for
    /// every index node.
    pub fn walk(
        &mut self,
        c: &Content,
        f: &mut dyn FnMut(u32, Addr),
        node: &mut dyn FnMut(Addr, u8, u32),
    ) -> Result<()> {
        if c.depth == 0 {
            for (i, a) in c.direct.iter().enumerate() {
                if !a.is_none() {
                    f(i as u32, *a);
                }
            }
            return Ok(());
        }
        let fan = self.fanout();
        let mut stack = vec![(c.root, c.depth, 0u32)];
        while let Some((a, level, first)) = stack.pop() {
            if a.is_none() {
                continue;
            }
            node(a, level, first);
            let n = self.read(a, level, first)?;
            let child_span = span(fan, level - 1);
            for (k, child) in n.entries.iter().enumerate() {
                if child.is_none() {
                    continue;
                }
                let cfirst = first as u64 + k as u64 * child_span;
                if cfirst > u32::MAX as u64 {
                    return Err(Error::Corrupt);
                }
                if level == 1 {
                    f(cfirst as u32, *child);
                } else {
                    stack.push((*child, level - 1, cfirst as u32));
                }
            }
        }
        Ok(())
    }

    /// For garbage collection: if the index node at `a` (level, first block, per its header)
    /// is part of `c`'s tree, writes a copy and updates the path to it (copy-on-write).
    /// Returns whether it was live.
    pub fn relocate(&mut self, c: &mut Content, a: Addr, level: u8, first: u32) -> Result<bool> {
        if c.depth == 0 || level == 0 || level > c.depth {
            return Ok(false);
        }
        let f = self.fanout();
        // Walk down to the parent of (level, first), recording the path.
        let mut path: Vec<(Addr, IndexNode, usize)> = Vec::new();
        let mut cur = c.root;
        let mut lv = c.depth;
        let mut fi = 0u32;
        while lv > level {
            if cur.is_none() {
                return Ok(false);
            }
            let n = self.read(cur, lv, fi)?;
            let child_span = span(f, lv - 1);
            if (first as u64) < fi as u64 || first as u64 >= fi as u64 + span(f, lv) {
                return Ok(false);
            }
            let k = ((first - fi) as u64 / child_span) as usize;
            let next = n.entries[k];
            path.push((cur, n, k));
            fi += (k as u64 * child_span) as u32;
            cur = next;
            lv -= 1;
        }
        if cur != a || fi != first {
            return Ok(false);
        }
        // The node and the path above it are written first; the old copies die only once the
        // whole new path exists (a write that fails leaves the tree and its accounting as
        // they were).
        let node = self.read(a, level, first)?;
        let mut new = self.write(&node)?;
        let mut written = vec![new];
        let mut old = vec![a];
        while let Some((pa, mut pn, k)) = path.pop() {
            pn.entries[k] = new;
            match self.write(&pn) {
                Ok(n) => {
                    new = n;
                    written.push(n);
                    old.push(pa);
                }
                Err(e) => {
                    for w in written {
                        self.kill_node(w);
                    }
                    return Err(e);
                }
            }
        }
        for o in old {
            self.kill_node(o);
        }
        c.root = new;
        Ok(true)
    }
}

/// Blocks needed to hold `size` bytes.
pub fn blocks_for(size: u64, block: u32) -> u64 {
    size.div_ceil(block as u64)
}
