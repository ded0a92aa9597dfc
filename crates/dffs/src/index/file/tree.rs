//! A file's index tree: a copy-on-write radix tree of block addresses with a fan-out fixed per
//! file system (`index_fanout`), at most four levels, each node `index_node` bytes:
//!
//! ```text
//!   | node header | level u8 | 0 u8 | 0 u16 | first u32 | entries: fanout x addr u32 | 0 ... |
//!   entry k of a leaf (level 1): the address of block first + k (NONE: a hole)
//!   entry k of an interior node: the child covering first + k * fanout^(level-1)
//! ```
//!
//! Owns lookups, folding pending changes into new nodes (never changing an old one), cutting a
//! truncated tree, walking it, and moving a node for GC, plus the cache of clean nodes. It
//! must never decide when to fold, and never account data blocks as dead except when
//! truncating: data liveness belongs to the file-system layer.

use alloc::vec;
use alloc::vec::Vec;

use super::content::Content;
use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::Reader;
use crate::format::extents::ExtentMap;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind, Params, MAX_DEPTH, NODE_HEADER};
use crate::index::lru::Lru;
use crate::store::{Priority, Store};
use dffs_flash::Flash;

/// A decoded index node.
#[derive(Clone, Debug)]
struct IndexNode {
    level: u8,
    first: u32,
    entries: Vec<Addr>,
}

/// Cache of clean index nodes by address.
pub(crate) struct IndexCache {
    items: Lru<(Addr, IndexNode)>,
    max: usize,
}

impl IndexCache {
    /// A cache of at most `max` nodes.
    pub fn new(max: usize) -> IndexCache {
        IndexCache {
            items: Lru::default(),
            max,
        }
    }
    /// RAM used.
    pub fn ram_bytes(&self) -> usize {
        self.items.ram_bytes(|i| i.1.entries.capacity() * 4)
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
        let t = self.items.bump();
        let i = self.items.position(|i| i.0 == a)?;
        let e = self.items.get_mut(i);
        e.used = t;
        Some(e.item.1.clone())
    }
    /// Entries `k..k + n` of the node at `a` if it is cached as the node at `level` covering
    /// from `first` (without cloning the node).
    fn entries(&mut self, a: Addr, level: u8, first: u32, k: usize, n: usize) -> Option<Vec<Addr>> {
        let t = self.items.bump();
        let i = self.items.position(|i| i.0 == a)?;
        let e = self.items.get_mut(i);
        let node = &e.item.1;
        if node.level != level || node.first != first {
            return None;
        }
        e.used = t;
        node.entries.get(k..k + n).map(<[Addr]>::to_vec)
    }
    fn put(&mut self, a: Addr, n: IndexNode) {
        if self.max == 0 {
            return;
        }
        if self.items.len() >= self.max {
            self.items.evict_one(|_| false);
        }
        self.items.push((a, n), false);
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

/// Upper bound on the index nodes a fold of `c`'s pending changes writes (what the next
/// checkpoint plans room for): the tree's depth after the fold `D` (grown to cover the highest
/// changed block), and at each level every node above a changed block, which the fold rewrites
/// once however many of its blocks changed; plus a node per level for growth and for a
/// pending truncation's cut. (The bound it replaced counted a whole path per changed leaf:
/// 256 B random writes into a 1 MiB file on 64 KiB NOR blocks planned three times the nodes,
/// and the checkpoint floors that raised kept collection from copying.)
pub(crate) fn fold_bound(c: &Content, fanout: u32) -> u64 {
    let Some(last) = c.pending.extents().last() else {
        return 0;
    };
    let f = fanout.max(2) as u64;
    let max_b = last.first as u64 + last.count.max(1) as u64 - 1;
    let mut depth = (c.depth as u32).max(1);
    let mut covered = span(fanout.max(2), depth as u8);
    while covered <= max_b && depth < MAX_DEPTH as u32 {
        depth += 1;
        covered = covered.saturating_mul(f);
    }
    let mut nodes = 0u64;
    let mut s = 1u64;
    for _ in 0..depth {
        s = s.saturating_mul(f);
        let mut prev = u64::MAX;
        for e in c.pending.extents() {
            let first = e.first as u64 / s;
            let end = (e.first as u64 + e.count.max(1) as u64 - 1) / s;
            let from = if first == prev { first + 1 } else { first };
            if end >= from {
                nodes += end - from + 1;
            }
            prev = end;
        }
    }
    let cut = if c.trunc.is_some() { c.depth as u64 } else { 0 };
    nodes + depth as u64 + cut
}

/// One file's index tree, borrowed for an operation: the operations on a [`Content`] that read
/// or write index nodes.
pub(crate) struct IndexTree<'a, F: Flash> {
    /// The store.
    pub st: &'a mut Store<F>,
    /// Node cache.
    pub cache: &'a mut IndexCache,
    /// Owner inode (recorded in every node written).
    pub ino: Ino,
    /// Inside [`IndexTree::fold`]: the nodes it made dead and the nodes it wrote, accounted
    /// only once the whole fold has succeeded (see there).
    pub undo: Option<(Vec<Addr>, Vec<Addr>)>,
}

impl<'a, F: Flash> IndexTree<'a, F> {
    fn fanout(&self) -> u32 {
        self.st.p().index_fanout()
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
        if let Some(u) = &mut self.undo {
            u.1.push(a);
        }
        Ok(a)
    }

    fn kill_node(&mut self, a: Addr) -> Result<()> {
        if let Some(u) = &mut self.undo {
            u.0.push(a);
            return Ok(());
        }
        let len = self.st.p().align(self.st.p().index_node);
        self.st.kill(a, len)
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

    /// NOR: where blocks `b`, `b + 1`, … are (at most `want`, and not past `b`'s leaf or a
    /// block with a pending change or beyond a pending truncation), found by reading from each
    /// node that is not cached only the entry the path takes (the leaf: the entries asked for),
    /// not the whole node and its CRC. A random read of one 256-byte block of a large file read
    /// an index node of 160–288 bytes per level the cache did not hold (it holds a few):
    /// twice the bytes of the data. The entries are not checked, so a caller must check what
    /// it reads through them (a data slot's CRC names the file and the block) and take
    /// [`IndexTree::lookup`] when that fails. `None` when this cannot help: NAND (a node is a
    /// page read either way), a file of direct pointers, `b` pending or beyond the tree, or an
    /// entry that reads as a hole or an impossible address (the verified path says which).
    pub fn lookup_run_unchecked(
        &mut self,
        c: &Content,
        b: u32,
        want: u32,
    ) -> Result<Option<Vec<Addr>>> {
        let p = self.st.p();
        let f = self.fanout();
        if p.geometry.flash_kind() != dffs_flash::FlashKind::Nor
            || c.depth == 0
            || c.trunc.is_some_and(|t| b >= t)
            || b as u64 >= span(f, c.depth)
        {
            return Ok(None);
        }
        let stride = p.stride();
        // The run stops before a block a pending change or truncation decides.
        let mut want = want.max(1);
        for i in 0..want {
            if c.pending.get(b + i, stride).is_some() || c.trunc.is_some_and(|t| b + i >= t) {
                want = i;
                break;
            }
        }
        if want == 0 {
            return Ok(None);
        }
        // Entries follow the header, the level and the first block: `[NODE_HEADER + 8, …)`.
        let (mut a, mut level, mut first) = (c.root, c.depth, 0u32);
        loop {
            if !p.addr_valid(a) || a.is_packed() {
                return Ok(None);
            }
            let child_span = span(f, level - 1);
            let k = ((b - first) as u64 / child_span) as usize;
            // The leaf: the entries asked for; above it, the one entry the path takes.
            let n = if level == 1 {
                (want as usize).min(f as usize - k)
            } else {
                1
            };
            let entries = match self.cache.entries(a, level, first, k, n) {
                Some(e) => e,
                None => {
                    let mut raw = vec![0u8; 4 * n];
                    let at = p.byte_of(a) + NODE_HEADER as u64 + 8 + 4 * k as u64;
                    match self.st.read_index_entries(at, &mut raw) {
                        Ok(()) => raw
                            .chunks_exact(4)
                            .map(|x| Addr(u32::from_le_bytes([x[0], x[1], x[2], x[3]])))
                            .collect(),
                        Err(Error::Io | Error::Corrupt) => return Ok(None),
                        Err(e) => return Err(e),
                    }
                }
            };
            if level == 1 {
                let valid = entries.iter().take_while(|&&x| p.addr_valid(x)).count();
                return Ok((valid > 0).then(|| entries[..valid].to_vec()));
            }
            first += (k as u64 * child_span) as u32;
            a = entries[0];
            level -= 1;
        }
    }

    /// Where block `b` is (pending changes first).
    pub fn lookup(&mut self, c: &Content, b: u32) -> Result<Addr> {
        let stride = self.st.p().stride();
        if let Some(a) = c.pending.get(b, stride) {
            return Ok(a);
        }
        if c.trunc.is_some_and(|t| b >= t) {
            return Ok(Addr::NONE);
        }
        self.lookup_base(c, b)
    }

    /// Folds pending changes into direct pointers or the index tree (copy-on-write). All or
    /// nothing: on success `c` names the new nodes and the nodes they replace are dead; on
    /// failure `c` is unchanged, the nodes it names are still live and the nodes written so
    /// far are dead. (Old nodes used to die as the fold went: a fold or an inode write that
    /// failed for room left the caller's content naming dead nodes, every retry killed them
    /// again, and their block was credited with nothing while it held live index nodes.)
    pub fn fold(&mut self, c: &mut Content) -> Result<()> {
        if self.undo.is_some() {
            return self.fold_inner(c);
        }
        let mut work = c.clone();
        self.undo = Some((Vec::new(), Vec::new()));
        let r = self.fold_inner(&mut work);
        let (dead, written) = self.undo.take().unwrap_or_default();
        let gone = if r.is_ok() { dead } else { written };
        for a in gone {
            self.kill_node(a)?;
        }
        if r.is_ok() {
            *c = work;
        }
        r
    }

    fn fold_inner(&mut self, c: &mut Content) -> Result<()> {
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
        let stride = p.stride();
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
            return self.fold_inner(c);
        }
        let f = self.fanout();
        while (max_b as u64) >= span(f, c.depth) {
            if c.depth >= MAX_DEPTH {
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
            self.kill_node(a)?;
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
        let stride = self.st.p().stride();
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
        self.kill_node(a)?;
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
        self.kill_node(a)?;
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

    /// For garbage collection: writes a copy of every node of `nodes` (address, level, first
    /// block, per its header) that is part of `c`'s tree, and of each node above one of them
    /// once, however many of them lie below it (copy-on-write). Returns how many were live.
    /// (One node at a time, each copy rewrote the whole path above it: collecting a NOR index
    /// block a third live wrote about as many nodes as it freed, `dffs bench nor` at 80% fill.)
    pub fn relocate(&mut self, c: &mut Content, nodes: &[(Addr, u8, u32)]) -> Result<usize> {
        let mut live: Vec<(Addr, u8, u32)> = Vec::new();
        for &(a, level, first) in nodes {
            if !live.contains(&(a, level, first)) && self.is_in_tree(c, a, level, first)? {
                live.push((a, level, first));
            }
        }
        if live.is_empty() {
            return Ok(0);
        }
        // The new nodes are written first; the old copies die only once the whole new tree
        // top exists (a write that fails leaves the tree and its accounting as they were).
        let mut written = Vec::new();
        let mut old = Vec::new();
        match self.copy_above(c.root, c.depth, 0, &live, &mut written, &mut old) {
            Ok(root) => {
                for o in old {
                    self.kill_node(o)?;
                }
                c.root = root;
                Ok(live.len())
            }
            Err(e) => {
                for w in written {
                    self.kill_node(w)?;
                }
                Err(e)
            }
        }
    }

    /// Whether the node at `a` is `c`'s node at (`level`, `first`).
    fn is_in_tree(&mut self, c: &Content, a: Addr, level: u8, first: u32) -> Result<bool> {
        if c.depth == 0 || level == 0 || level > c.depth {
            return Ok(false);
        }
        let f = self.fanout();
        let (mut cur, mut lv, mut fi) = (c.root, c.depth, 0u32);
        while lv > level {
            if cur.is_none()
                || (first as u64) < fi as u64
                || first as u64 >= fi as u64 + span(f, lv)
            {
                return Ok(false);
            }
            let n = self.read(cur, lv, fi)?;
            let child_span = span(f, lv - 1);
            let k = ((first - fi) as u64 / child_span) as usize;
            fi += (k as u64 * child_span) as u32;
            cur = n.entries[k];
            lv -= 1;
        }
        Ok(cur == a && fi == first)
    }

    /// Writes a copy of the node at `a` (`level`, `first`), its children that have one of
    /// `targets` at or below them copied first; returns the copy's address. Recursion depth is
    /// the tree's (at most [`MAX_DEPTH`]).
    fn copy_above(
        &mut self,
        a: Addr,
        level: u8,
        first: u32,
        targets: &[(Addr, u8, u32)],
        written: &mut Vec<Addr>,
        old: &mut Vec<Addr>,
    ) -> Result<Addr> {
        let mut n = self.read(a, level, first)?;
        if level > 1 {
            let cs = span(self.fanout(), level - 1);
            for k in 0..n.entries.len() {
                let child = n.entries[k];
                let cfirst = first as u64 + k as u64 * cs;
                let below = |&(_, tl, tf): &(Addr, u8, u32)| {
                    tl < level && tf as u64 >= cfirst && (tf as u64) < cfirst + cs
                };
                if !child.is_none() && targets.iter().any(below) {
                    n.entries[k] =
                        self.copy_above(child, level - 1, cfirst as u32, targets, written, old)?;
                }
            }
        }
        let new = self.write(&n)?;
        written.push(new);
        old.push(a);
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::params::FormatOptions;
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

    /// A store on a NOR device of `blocks` 4 KiB blocks, and its parameters.
    fn nor_store(blocks: u32) -> (Store<RamFlash>, Params) {
        let g = nor_geometry(blocks);
        let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
        (Store::new(RamFlash::new(g), p), p)
    }

    /// The index tree of inode 7 on `st`.
    fn tree_of_7<'a>(
        st: &'a mut Store<RamFlash>,
        cache: &'a mut IndexCache,
    ) -> IndexTree<'a, RamFlash> {
        IndexTree {
            st,
            cache,
            ino: 7,
            undo: None,
        }
    }

    /// Bytes of index nodes `c` names, and bytes the block table credits to index blocks.
    fn live_index_bytes(t: &mut IndexTree<'_, RamFlash>, c: &Content) -> (u64, u64) {
        let mut nodes = 0u64;
        t.walk(c, &mut |_, _| {}, &mut |_, _, _| nodes += 1)
            .unwrap();
        let p = t.st.p();
        let named = nodes * p.align(p.index_node) as u64;
        let credited = (0..p.geometry.blocks)
            .map(|b| t.st.block(b).unwrap())
            .filter(|e| e.kind() == LogKind::Index)
            .map(|e| e.live as u64)
            .sum();
        (named, credited)
    }

    /// A fold writes at most the nodes `fold_bound` plans for, and that bound is tight: beyond
    /// the nodes written it allows one per level of the tree. Changes clustered in one leaf,
    /// spread over two levels, and far beyond the tree (growth by two levels at once).
    #[test]
    fn a_fold_writes_no_more_nodes_than_its_bound() {
        let (mut st, p) = nor_store(512);
        let mut cache = IndexCache::new(4);
        let mut t = tree_of_7(&mut st, &mut cache);
        let stride = p.stride();
        let fan = p.index_fanout();
        let mut rng = 0x5eed_u64;
        let mut next_rand = |n: u32| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((rng >> 33) % n as u64) as u32
        };
        let mut c = Content::default();
        let mut grew_twice = false;
        for round in 0..60u32 {
            let mut next = c.clone();
            let spread = match round % 4 {
                0 => fan,
                // (Runs of up to 3 blocks: the tree stays two levels deep.)
                1 => fan * fan - 3,
                2 if round == 30 => fan * fan * fan * 2,
                _ => fan * 4,
            };
            for k in 0..1 + next_rand(40) {
                let b = next_rand(spread);
                let n = 1 + next_rand(3);
                next.pending
                    .insert(b, n, Addr(0x10_0000 + round * 64 + k), stride);
            }
            let depth_before = next.depth;
            let bound = fold_bound(&next, fan);
            t.undo = Some((Vec::new(), Vec::new()));
            t.fold(&mut next).unwrap();
            let (dead, written) = t.undo.take().unwrap();
            for a in dead {
                t.kill_node(a).unwrap();
            }
            let written = written.len() as u64;
            assert!(
                written <= bound,
                "round {round}: {written} nodes written, bound {bound}"
            );
            assert!(
                bound <= written + next.depth as u64,
                "round {round}: bound {bound} for {written} nodes written, depth {}",
                next.depth
            );
            grew_twice |= next.depth >= depth_before + 2 && depth_before > 0;
            c = next;
        }
        assert!(grew_twice, "no round grew the tree by two levels");
    }

    /// A fold that fails for room leaves the content it was given as it was, naming live
    /// nodes only, and the index blocks credited with exactly the nodes it names (folds
    /// used to kill the old nodes as they went: a failed one, retried, killed them twice).
    #[test]
    fn a_fold_that_fails_for_room_changes_nothing() {
        let (mut st, p) = nor_store(32);
        let mut cache = IndexCache::new(4);
        let mut t = tree_of_7(&mut st, &mut cache);
        let stride = p.stride();
        let fan = p.index_fanout();
        // A two-level tree.
        let mut c = Content::default();
        for b in 0..fan * 3 {
            c.pending.insert(b, 1, Addr(0x10_0000 + b), stride);
        }
        t.fold(&mut c).unwrap();
        assert!(c.depth >= 2, "depth {}", c.depth);
        let (named, credited) = live_index_bytes(&mut t, &c);
        assert_eq!(named, credited);
        // No block may be allocated now: folds go on while the open index block has room.
        let free = t.st.free_blocks();
        t.st.set_floors(free, free, free);
        let mut failed = false;
        for k in 0..1000u32 {
            let mut next = c.clone();
            let b = (k * 7) % (fan * 3);
            next.pending.insert(b, 1, Addr(0x20_0000 + k), stride);
            let before = next.clone();
            match t.fold(&mut next) {
                Ok(()) => c = next,
                Err(Error::NoSpace) => {
                    assert_eq!(next, before, "a failed fold changed its content");
                    failed = true;
                    break;
                }
                Err(e) => panic!("fold: {e:?}"),
            }
            let (named, credited) = live_index_bytes(&mut t, &c);
            assert_eq!(named, credited, "after fold {k}");
        }
        assert!(failed, "the index block never filled");
        // Retried, it fails again the same way, and nothing the content names has died.
        let mut again = c.clone();
        again.pending.insert(1, 1, Addr(0x30_0000), stride);
        assert_eq!(t.fold(&mut again), Err(Error::NoSpace));
        let (named, credited) = live_index_bytes(&mut t, &c);
        assert_eq!(named, credited, "a failed fold changed the accounting");
    }

    /// Moving several nodes for collection writes each node above them once: the copies
    /// are the moved nodes and their ancestors, each a single time, every block maps where it
    /// did, and the old copies are dead (a node that is not in the tree is not moved).
    #[test]
    fn moving_nodes_together_writes_each_node_above_them_once() {
        let (mut st, p) = nor_store(512);
        let mut cache = IndexCache::new(4);
        let mut t = tree_of_7(&mut st, &mut cache);
        let stride = p.stride();
        let fan = p.index_fanout();
        // A three-level tree: blocks spread over three level-2 subtrees.
        let mut c = Content::default();
        for k in 0..3 * fan {
            let b = k * fan + k % fan;
            c.pending.insert(b, 1, Addr(0x10_0000 + k), stride);
        }
        t.fold(&mut c).unwrap();
        assert_eq!(c.depth, 3);
        let mut nodes = Vec::new();
        t.walk(&c, &mut |_, _| {}, &mut |a, l, f| nodes.push((a, l, f)))
            .unwrap();
        let maps = |t: &mut IndexTree<'_, RamFlash>, c: &Content| -> Vec<Addr> {
            (0..3 * fan * fan)
                .map(|b| t.lookup(c, b).unwrap())
                .collect()
        };
        let before = maps(&mut t, &c);
        // Five leaves of the first subtree, two of the second, the second's own node, and a
        // node no longer in the tree.
        let span2 = fan * fan;
        let leaves = |lo: u32| {
            nodes
                .iter()
                .filter(move |&&(_, l, f)| l == 1 && f >= lo && f < lo + span2)
                .copied()
        };
        let mut moving: Vec<(Addr, u8, u32)> = leaves(0).take(5).collect();
        moving.extend(leaves(span2).take(2));
        let second = *nodes
            .iter()
            .find(|&&(_, l, f)| l == 2 && f == span2)
            .unwrap();
        moving.push(second);
        let gone = moving[0];
        let mut stale = c.clone();
        stale.pending.insert(gone.2, 1, Addr(0x20_0000), stride);
        t.fold(&mut stale).unwrap();
        let mut c = stale;
        let before_stale = maps(&mut t, &c);
        assert_ne!(before, before_stale);
        let mut old_nodes = Vec::new();
        t.walk(&c, &mut |_, _| {}, &mut |a, _, _| old_nodes.push(a))
            .unwrap();
        // (`undo` records what is written and killed; the kills are done after.)
        t.undo = Some((Vec::new(), Vec::new()));
        let moved = t.relocate(&mut c, &moving).unwrap();
        let (dead, written) = t.undo.take().unwrap();
        for a in &dead {
            t.kill_node(*a).unwrap();
        }
        assert_eq!(moved, moving.len() - 1);
        assert_eq!(maps(&mut t, &c), before_stale);
        let mut new_nodes = Vec::new();
        t.walk(&c, &mut |_, _| {}, &mut |a, _, _| new_nodes.push(a))
            .unwrap();
        assert_eq!(new_nodes.len(), old_nodes.len());
        // The stale leaf is not moved; the four other leaves of the first subtree, its level-2
        // node and the root; two leaves and the second subtree's node. (One node at a time:
        // 4 * 3 + 2 * 3 + 2 = 20.)
        let replaced = old_nodes.iter().filter(|a| !new_nodes.contains(a)).count();
        assert_eq!(written.len(), 4 + 1 + 1 + 2 + 1, "index nodes written");
        assert_eq!(replaced, written.len());
        assert!(old_nodes
            .iter()
            .filter(|a| !new_nodes.contains(a))
            .all(|a| dead.contains(a)));
        // A node written twice would leave a copy credited live that the tree does not name.
        let (named, credited) = live_index_bytes(&mut t, &c);
        assert_eq!(named, credited);
    }
}
