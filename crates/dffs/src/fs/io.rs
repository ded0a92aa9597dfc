//! File handles and data: open/close, read/write/truncate, the write-back data cache, the
//! uncommitted overlay of each open file, commit (fsync, close, O_SYNC), sync, transactions,
//! and the space budget.
//!
//! An open file's writes go to its overlay (new block addresses, new size, the smallest size it
//! was truncated to) and are invisible to checkpoints until a commit journals them in one
//! record, so after a power cut a file holds exactly the content of one of its commits.

use alloc::vec;
use alloc::vec::Vec;

use super::Fs;
use crate::error::{Error, Result};
use crate::format::attrs::{Ino, Time};
use crate::format::compress::{self, DATAZ_HEADER};
use crate::format::extents::BlockMap;
use crate::format::extents::ExtentMap;
use crate::format::node::{self, NodeBuilder, NodeType, OobTag, OOB_TAG_LEN};
use crate::format::params::{Addr, LogKind, DATA_CRC_LEN, NODE_HEADER};
use crate::index::file::{blocks_for, inline_limit, Content, FileNode};
use crate::index::inode_map::MapEntry;
use crate::index::lru::Lru;
use crate::journal::{max_commit_extents, Record, Tid};
use crate::store::{BlockInfo, BlockState, Priority, DATA_HEADER};
use dffs_flash::{EccStatus, Flash, FlashKind};

/// How a file is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    /// Reading allowed.
    pub read: bool,
    /// Writing allowed.
    pub write: bool,
    /// Every write goes to the end of the file.
    pub append: bool,
    /// Every write is committed and durable before it returns (`O_SYNC`).
    pub sync: bool,
    /// Truncate to zero at open (`O_TRUNC`).
    pub truncate: bool,
}

impl OpenFlags {
    /// Read-only.
    pub const READ: OpenFlags = OpenFlags {
        read: true,
        write: false,
        append: false,
        sync: false,
        truncate: false,
    };
    /// Read and write.
    pub const RW: OpenFlags = OpenFlags {
        read: true,
        write: true,
        append: false,
        sync: false,
        truncate: false,
    };
}

/// A file handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fh(pub u32);

#[derive(Clone, Copy, Debug)]
pub(crate) struct Handle {
    pub ino: Ino,
    pub flags: OpenFlags,
}

/// Uncommitted changes of an open file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlay {
    /// Current size.
    pub size: u64,
    /// Current modification time.
    pub mtime: Time,
    /// Current change time.
    pub ctime: Time,
    /// Smallest size the file was truncated to since the last commit.
    pub trunc_to: Option<u64>,
    /// Blocks written to flash since the last commit (provisional until committed).
    pub extents: ExtentMap,
    /// The whole content while the file is small enough to stay inline.
    pub inline: Option<Vec<u8>>,
    /// For updates too large to track as extents: the file's complete new block map, with an
    /// index tree of its own (no node shared with the committed tree). When set, `extents` and
    /// `trunc_to` are unused and the commit record carries this map.
    pub spilled: Option<Content>,
}

/// An open inode: handle count, overlay, and (after unlink) the file itself.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenInode {
    pub refs: u32,
    pub overlay: Option<Overlay>,
    pub orphan: Option<FileNode>,
}

impl OpenInode {
    pub fn ram_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self
                .overlay
                .as_ref()
                .map(|o| {
                    o.extents.ram_bytes() + o.inline.as_ref().map(|v| v.capacity()).unwrap_or(0)
                })
                .unwrap_or(0)
            + self
                .orphan
                .as_ref()
                .map(|n| n.content.ram_bytes() + n.name.capacity())
                .unwrap_or(0)
    }
}

#[derive(Clone, Debug)]
struct CachedBlock {
    ino: Ino,
    block: u32,
    data: Vec<u8>,
}

/// Data blocks in RAM: dirty ones are written back when the cache fills or a file commits.
pub(crate) struct DataCache {
    blocks: Lru<CachedBlock>,
    max: usize,
}

impl DataCache {
    pub fn new(max: usize) -> DataCache {
        DataCache {
            blocks: Lru::default(),
            max: max.max(1),
        }
    }
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
    pub fn ram_bytes(&self) -> usize {
        self.blocks.ram_bytes(|b| b.data.capacity())
    }
    pub fn dirty_count(&self) -> usize {
        self.blocks.dirty_count()
    }
    fn find(&self, ino: Ino, block: u32) -> Option<usize> {
        self.blocks.position(|b| b.ino == ino && b.block == block)
    }
    fn get(&mut self, ino: Ino, block: u32) -> Option<&[u8]> {
        let t = self.blocks.bump();
        let i = self.find(ino, block)?;
        let e = self.blocks.get_mut(i);
        e.used = t;
        Some(&e.item.data)
    }
    /// Drops clean blocks beyond the budget.
    fn trim_clean(&mut self) {
        self.blocks.trim(self.max, |_| false);
    }
    fn put(&mut self, ino: Ino, block: u32, data: Vec<u8>, dirty: bool) {
        let t = self.blocks.bump();
        match self.find(ino, block) {
            Some(i) => {
                let e = self.blocks.get_mut(i);
                e.item.data = data;
                e.dirty |= dirty;
                e.used = t;
            }
            None => {
                self.blocks
                    .push_with(CachedBlock { ino, block, data }, dirty, t);
            }
        }
        self.trim_clean();
    }
    fn drop_from(&mut self, ino: Ino, from: u32) {
        self.blocks.retain(|b| !(b.ino == ino && b.block >= from));
    }
    pub(crate) fn drop_ino(&mut self, ino: Ino) {
        self.blocks.retain(|b| b.ino != ino);
    }
    /// The inode whose dirty block was used least recently, when over budget.
    fn over_budget_victim(&self) -> Option<Ino> {
        if self.blocks.len() <= self.max {
            return None;
        }
        self.blocks
            .iter()
            .filter(|e| e.dirty)
            .min_by_key(|e| e.used)
            .map(|e| e.item.ino)
    }
    /// Dirty blocks of `ino`, in block order, marked clean.
    fn take_dirty(&mut self, ino: Ino) -> Vec<(u32, Vec<u8>)> {
        let mut v: Vec<(u32, Vec<u8>)> = self
            .blocks
            .iter_mut()
            .filter(|e| e.item.ino == ino && e.dirty)
            .map(|e| {
                e.dirty = false;
                (e.item.block, e.item.data.clone())
            })
            .collect();
        v.sort_by_key(|x| x.0);
        v
    }
}

/// Every (block, address) of a block map, and the addresses of its index nodes.
type Mapped = (Vec<(u32, Addr)>, Vec<Addr>);

/// Where a block's data is.
enum Src {
    Hole,
    At(Addr),
}

impl<F: Flash> Fs<F> {
    // ----- handles ----------------------------------------------------------------------

    /// Opens file `ino`.
    pub fn open(&mut self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.guard(|fs| {
            match fs.map.get(&mut fs.st, ino)? {
                MapEntry::Dir(_) => {
                    if flags.write {
                        return Err(Error::IsDir);
                    }
                }
                MapEntry::File { .. } | MapEntry::Linked(_) => {
                    // Pipes, sockets and devices are the operating system's to open.
                    if fs.load_file(ino)?.node.attrs.is_special() {
                        return Err(Error::Invalid);
                    }
                }
                MapEntry::Orphan | MapEntry::Free => return Err(Error::NotFound),
            }
            if flags.write || flags.truncate {
                fs.writable()?;
            }
            let slot = fs
                .handles
                .iter()
                .position(|h| h.is_none())
                .ok_or(Error::TooManyOpen)?;
            fs.handles[slot] = Some(Handle { ino, flags });
            fs.inos.entry(ino).or_default().refs += 1;
            if flags.truncate && flags.write {
                if let Err(e) = fs.truncate_ino(ino, 0) {
                    fs.handles[slot] = None;
                    fs.release(ino)?;
                    return Err(e);
                }
            }
            Ok(Fh(slot as u32))
        })
    }

    fn handle(&self, fh: Fh) -> Result<Handle> {
        self.handles
            .get(fh.0 as usize)
            .copied()
            .flatten()
            .ok_or(Error::BadHandle)
    }

    /// Closes a handle; the file's changes are committed (not necessarily durable: see
    /// [`Fs::fsync`]).
    pub fn close(&mut self, fh: Fh) -> Result<()> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            let r = if h.flags.write {
                fs.commit_ino(h.ino)
            } else {
                Ok(())
            };
            fs.handles[fh.0 as usize] = None;
            fs.release(h.ino)?;
            r?;
            fs.after_op()
        })
    }

    /// Drops one reference to an open inode; frees an orphan when the last goes.
    fn release(&mut self, ino: Ino) -> Result<()> {
        let last = match self.inos.get_mut(&ino) {
            Some(o) => {
                o.refs = o.refs.saturating_sub(1);
                o.refs == 0
            }
            None => false,
        };
        if !last {
            return Ok(());
        }
        let o = self.inos.get(&ino).cloned().unwrap_or_default();
        if let Some(node) = &o.orphan {
            if let Some(ov) = &o.overlay {
                self.discard_overlay_space(ino, ov, node)?;
            }
            self.inos.remove(&ino);
            self.dcache.drop_ino(ino);
            self.free_file_space(node)?;
            if self.map.get(&mut self.st, ino)? == MapEntry::Orphan {
                self.map.set(&mut self.st, ino, MapEntry::Free)?;
            }
        } else if let Some(ov) = &o.overlay {
            // Uncommitted changes of a handle closed without commit (read-only handles never
            // have any; this is a dropped overlay after an error).
            let committed = self.committed(ino)?;
            self.discard_overlay_space(ino, ov, &committed)?;
            self.inos.remove(&ino);
            self.dcache.drop_ino(ino);
        } else {
            self.inos.remove(&ino);
        }
        Ok(())
    }

    /// Counts dead what an abandoned update owned: its provisional blocks, and (spilled) its
    /// own index nodes.
    fn discard_overlay_space(
        &mut self,
        ino: Ino,
        ov: &Overlay,
        committed: &FileNode,
    ) -> Result<()> {
        let stride = self.st.p().stride();
        let addrs: Vec<Addr> = match &ov.spilled {
            None => ov.extents.iter_blocks(stride).map(|x| x.1).collect(),
            Some(sp) => {
                let (blocks, nodes) = self.mapped(ino, sp)?;
                let p = self.st.p();
                for a in nodes {
                    self.st.kill(a, p.align(p.index_node));
                }
                let mut own = Vec::new();
                for (b, a) in blocks {
                    let shared = committed.content.inline.is_none() && {
                        let mut ix = self.tree(ino);
                        ix.lookup(&committed.content, b)? == a
                    };
                    if !shared {
                        own.push(a);
                    }
                }
                own
            }
        };
        for a in addrs {
            self.kill_data(a);
        }
        Ok(())
    }

    // ----- reading ----------------------------------------------------------------------

    /// The committed node of `ino` (orphans included).
    fn committed(&mut self, ino: Ino) -> Result<FileNode> {
        if let Some(n) = self.inos.get(&ino).and_then(|o| o.orphan.as_ref()) {
            return Ok(n.clone());
        }
        Ok(self.load_file(ino)?.node.clone())
    }

    /// Current size of `ino` (overlay first).
    fn cur_size(&mut self, ino: Ino) -> Result<u64> {
        if let Some(ov) = self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
            return Ok(ov.size);
        }
        Ok(self.committed(ino)?.size)
    }

    /// Where block `b` of `ino` is, ignoring the data cache.
    fn block_src(&mut self, ino: Ino, node: &FileNode, b: u32) -> Result<Src> {
        let p = self.st.p();
        let stride = p.stride();
        if let Some(ov) = self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
            if let Some(sp) = ov.spilled.clone() {
                let mut ix = self.tree(ino);
                let a = ix.lookup(&sp, b)?;
                return Ok(if a.is_none() { Src::Hole } else { Src::At(a) });
            }
            if let Some(a) = ov.extents.get(b, stride) {
                return Ok(if a.is_none() { Src::Hole } else { Src::At(a) });
            }
            if let Some(t) = ov.trunc_to {
                if b as u64 >= blocks_for(t, p.data_block) {
                    return Ok(Src::Hole);
                }
            }
        }
        if node.content.inline.is_some() {
            return Ok(Src::Hole);
        }
        let mut ix = self.tree(ino);
        let a = ix.lookup(&node.content, b)?;
        Ok(if a.is_none() { Src::Hole } else { Src::At(a) })
    }

    /// Reads the whole data block at `a` into `buf`, checking it belongs to (`ino`, `b`).
    pub(crate) fn read_data(&mut self, a: Addr, ino: Ino, b: u32, buf: &mut [u8]) -> Result<()> {
        if a.is_packed() {
            return self.read_packed(a, ino, b, buf);
        }
        let p = self.st.p();
        let g = p.geometry;
        match g.kind {
            FlashKind::Nand => {
                if !p.addr_valid(a) || p.byte_of(a) % g.page_size as u64 != 0 {
                    return Err(Error::Corrupt);
                }
                let page = (p.byte_of(a) / g.page_size as u64) as u32;
                let mut oob = [0u8; OOB_TAG_LEN];
                let n = OOB_TAG_LEN.min(g.oob_free_len as usize);
                let st = self.st.read_page(page, buf, &mut oob[..n])?;
                if st == EccStatus::Uncorrectable {
                    return Err(Error::Io);
                }
                let tag = match OobTag::decode(&oob) {
                    Ok(Some(t)) => t,
                    other => {
                        let _ = other;
                        return Err(Error::Io);
                    }
                };
                if !Self::tag_matches(&tag, ino, b)
                    || tag.data_crc != crate::format::codec::crc32c(buf)
                {
                    return Err(Error::Io);
                }
                Ok(())
            }
            FlashKind::Nor => {
                if !p.addr_valid(a) {
                    return Err(Error::Corrupt);
                }
                let bs = p.data_block as usize;
                if buf.len() != bs {
                    return Err(Error::Invalid);
                }
                let mut slot = vec![0u8; bs + DATA_CRC_LEN as usize];
                let ok = self.st.read_checked(p.byte_of(a), &mut slot, &mut |s| {
                    node::data_slot_ok(ino, b, s, bs)
                })?;
                if !ok {
                    return Err(Error::Io);
                }
                buf.copy_from_slice(&slot[..bs]);
                Ok(())
            }
        }
    }

    /// Reads and decompresses the compressed data node a packed pointer `a` points at. A node
    /// that is unreadable, fails its CRC, belongs elsewhere or does not decompress to exactly
    /// one block is `Io`.
    fn read_packed(&mut self, a: Addr, ino: Ino, b: u32, buf: &mut [u8]) -> Result<()> {
        let p = self.st.p();
        let max = DATAZ_HEADER + compress::MAX_RAW;
        let (h, bytes) = match self.st.read_node(a.node(), NodeType::DataZ, max) {
            Ok(x) => x,
            Err(Error::PowerLoss) => return Err(Error::PowerLoss),
            Err(_) => return Err(Error::Io),
        };
        let z = compress::parse_dataz(h.flags, &bytes[NODE_HEADER as usize..])
            .map_err(|_| Error::Io)?;
        let count = z.blocks(p.data_block).ok_or(Error::Io)?;
        let bs = p.data_block as usize;
        if h.ino != ino || b < z.block || b - z.block >= count || buf.len() != bs {
            return Err(Error::Io);
        }
        if count == 1 {
            return compress::decompress(z.algo, z.payload, buf);
        }
        let mut all = vec![0u8; z.raw_len as usize];
        compress::decompress(z.algo, z.payload, &mut all)?;
        let k = (b - z.block) as usize * bs;
        buf.copy_from_slice(&all[k..k + bs]);
        Ok(())
    }

    /// Block `b` of `ino` (zeros for holes).
    fn get_block(&mut self, ino: Ino, node: &FileNode, b: u32) -> Result<Vec<u8>> {
        if let Some(d) = self.dcache.get(ino, b) {
            return Ok(d.to_vec());
        }
        let bs = self.st.p().data_block as usize;
        let mut buf = vec![0u8; bs];
        if let Src::At(a) = self.block_src(ino, node, b)? {
            self.read_data(a, ino, b, &mut buf)?;
            self.dcache.put(ino, b, buf.clone(), false);
        }
        Ok(buf)
    }

    /// Reads up to `buf.len()` bytes at `off`; returns how many (0 at end of file).
    pub fn read(&mut self, fh: Fh, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if !h.flags.read {
                return Err(Error::BadHandle);
            }
            fs.read_ino(h.ino, off, buf)
        })
    }

    pub(crate) fn read_ino(&mut self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        let node = self.committed(ino)?;
        let size = self.cur_size(ino)?;
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        // Inline content.
        let ov_inline = self
            .inos
            .get(&ino)
            .and_then(|o| o.overlay.as_ref())
            .map(|o| o.inline.clone());
        let inline = match ov_inline {
            Some(Some(d)) => Some(d),
            Some(None) => None,
            None => node.content.inline.clone(),
        };
        if let Some(d) = inline {
            for (i, x) in buf[..n].iter_mut().enumerate() {
                *x = d.get(off as usize + i).copied().unwrap_or(0);
            }
            return Ok(n);
        }
        let p = self.st.p();
        let bs = p.data_block as u64;
        let mut done = 0usize;
        while done < n {
            let pos = off + done as u64;
            let b = (pos / bs) as u32;
            let in_b = (pos % bs) as usize;
            let take = (bs as usize - in_b).min(n - done);
            // Whole blocks not in the cache go straight from flash into the caller's buffer,
            // coalescing runs that are contiguous on NOR.
            if in_b == 0 && take == bs as usize && self.dcache.get(ino, b).is_none() {
                let run = self.read_run(ino, &node, b, &mut buf[done..n])?;
                done += run;
                continue;
            }
            let blk = self.get_block(ino, &node, b)?;
            buf[done..done + take].copy_from_slice(&blk[in_b..in_b + take]);
            done += take;
        }
        Ok(n)
    }

    /// Reads whole blocks from `b` into `dst` (a multiple of the block size or the tail),
    /// as many as are contiguous on flash; returns the bytes read.
    fn read_run(&mut self, ino: Ino, node: &FileNode, b: u32, dst: &mut [u8]) -> Result<usize> {
        let p = self.st.p();
        let bs = p.data_block as usize;
        let first = match self.block_src(ino, node, b)? {
            Src::Hole => {
                dst[..bs].fill(0);
                return Ok(bs);
            }
            Src::At(a) => a,
        };
        if p.geometry.kind == FlashKind::Nand || first.is_packed() {
            self.read_data(first, ino, b, &mut dst[..bs])?;
            return Ok(bs);
        }
        if !p.addr_valid(first) {
            return Err(Error::Corrupt);
        }
        // NOR: extend the run while the next block follows contiguously and is not cached.
        let stride = p.stride();
        let mut count = 1usize;
        while (count + 1) * bs <= dst.len() && count < 64 {
            let nb = b + count as u32;
            if self.dcache.get(ino, nb).is_some() {
                break;
            }
            match self.block_src(ino, node, nb)? {
                Src::At(a)
                    if Some(a.0) == first.0.checked_add(count as u32 * stride)
                        && p.block_of(a) == p.block_of(first) =>
                {
                    count += 1
                }
                _ => break,
            }
        }
        // One read for the run, slots and their CRCs included; a block that fails its CRC is
        // read again on its own (the error may be transient).
        let slot = p.data_slot() as usize;
        let mut raw = vec![0u8; (count - 1) * slot + bs + DATA_CRC_LEN as usize];
        let read = self.st.read(p.byte_of(first), &mut raw);
        for k in 0..count {
            let s = &raw[k * slot..k * slot + bs + DATA_CRC_LEN as usize];
            let out = &mut dst[k * bs..(k + 1) * bs];
            if read.is_ok() && node::data_slot_ok(ino, b + k as u32, s, bs) {
                out.copy_from_slice(&s[..bs]);
            } else if let Err(e @ Error::PowerLoss) = read {
                return Err(e);
            } else {
                let a = Addr(first.0 + k as u32 * stride);
                self.read_data(a, ino, b + k as u32, out)?;
            }
        }
        Ok(count * bs)
    }

    // ----- writing ----------------------------------------------------------------------

    /// The overlay of open inode `ino`, created from the committed state if needed.
    fn overlay(&mut self, ino: Ino) -> Result<&mut Overlay> {
        let has = self
            .inos
            .get(&ino)
            .map(|o| o.overlay.is_some())
            .unwrap_or(false);
        if !has {
            let node = self.committed(ino)?;
            let ov = Overlay {
                size: node.size,
                mtime: node.attrs.mtime,
                ctime: node.attrs.ctime,
                trunc_to: None,
                extents: ExtentMap::new(),
                inline: node.content.inline.clone(),
                spilled: None,
            };
            self.inos.entry(ino).or_default().overlay = Some(ov);
        }
        self.inos
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
            .ok_or(Error::Corrupt)
    }

    /// Writes `data` at `off` (at the end for append handles); returns the bytes written.
    pub fn write(&mut self, fh: Fh, off: u64, data: &[u8]) -> Result<usize> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if !h.flags.write {
                return Err(Error::BadHandle);
            }
            fs.writable()?;
            let off = if h.flags.append {
                fs.cur_size(h.ino)?
            } else {
                off
            };
            let n = fs.write_ino(h.ino, off, data)?;
            if h.flags.sync || fs.cfg.sync {
                fs.commit_ino(h.ino)?;
                if fs.tx.is_none() {
                    fs.journal_flush()?;
                }
            }
            fs.after_op()?;
            Ok(n)
        })
    }

    pub(crate) fn write_ino(&mut self, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let p = self.st.p();
        let end = off.checked_add(data.len() as u64).ok_or(Error::TooBig)?;
        if end > p.max_file_size() {
            return Err(Error::TooBig);
        }
        let name_len = self.committed(ino)?.names_len();
        let limit = inline_limit(&p, name_len) as u64;
        let now = self.now();
        let bs = p.data_block as u64;
        // Space: every block written takes a new block until the old one dies at commit.
        let first_b = off / bs;
        let last_b = (end - 1) / bs;
        let need = (last_b - first_b + 1) * bs;
        self.ensure_space(need)?;
        // Room for writing it all back, so a write either happens whole or not at all: the
        // blocks as flush_blocks will write them (each with its data node header on NOR).
        let blocks = need / bs + self.dcache.dirty_count() as u64;
        let bytes = blocks * (p.data_slot() as u64 + DATA_HEADER as u64);
        self.ensure_blocks(
            bytes.div_ceil(p.geometry.block_size() as u64) as u32,
            Priority::User,
        )?;
        let ov = self.overlay(ino)?;
        ov.mtime = now;
        ov.ctime = now;
        if let Some(d) = ov.inline.as_mut() {
            if end <= limit {
                if d.len() < end as usize {
                    d.resize(end as usize, 0);
                }
                d[off as usize..end as usize].copy_from_slice(data);
                ov.size = ov.size.max(end);
                return Ok(data.len());
            }
            // Outgrows its inode: the inline bytes become ordinary blocks.
            let d = ov.inline.take().unwrap_or_default();
            ov.trunc_to = Some(0);
            let nblocks = blocks_for(d.len() as u64, p.data_block);
            for b in 0..nblocks {
                let mut blk = vec![0u8; bs as usize];
                let s = (b * bs) as usize;
                let e = (s + bs as usize).min(d.len());
                blk[..e - s].copy_from_slice(&d[s..e]);
                self.dcache.put(ino, b as u32, blk, true);
            }
        }
        let mut pos = off;
        let mut i = 0usize;
        while i < data.len() {
            let b = (pos / bs) as u32;
            let in_b = (pos % bs) as usize;
            let take = (bs as usize - in_b).min(data.len() - i);
            let mut blk = if take == bs as usize {
                vec![0u8; bs as usize]
            } else {
                // The committed inode as it is now: writing back earlier blocks of this write
                // may have run garbage collection, which moves the file's blocks and index.
                let node = self.committed(ino)?;
                self.get_block(ino, &node, b)?
            };
            blk[in_b..in_b + take].copy_from_slice(&data[i..i + take]);
            self.dcache.put(ino, b, blk, true);
            i += take;
            pos += take as u64;
            self.writeback_if_full()?;
        }
        let ov = self.overlay(ino)?;
        ov.size = ov.size.max(end);
        Ok(data.len())
    }

    /// Writes back dirty blocks while the data cache is over budget.
    fn writeback_if_full(&mut self) -> Result<()> {
        while let Some(ino) = self.dcache.over_budget_victim() {
            self.flush_blocks(ino)?;
            self.dcache.trim_clean();
        }
        Ok(())
    }

    /// Writes the dirty cached blocks of `ino` to flash (provisionally: they join its overlay).
    pub(crate) fn flush_blocks(&mut self, ino: Ino) -> Result<()> {
        let dirty = self.dcache.take_dirty(ino);
        if dirty.is_empty() {
            return Ok(());
        }
        let p = self.st.p();
        let stride = p.stride();
        let bs = p.data_block as usize;
        let bytes = dirty.len() as u64 * (p.data_slot() as u64 + DATA_HEADER as u64);
        let blocks = bytes.div_ceil(p.geometry.block_size() as u64) as u32;
        // Admitted when it was written (see `write_ino`): written back at the journal's level.
        if let Err(e) = self.ensure_blocks(blocks, Priority::Log) {
            // Put the blocks back as dirty: nothing was written.
            for (b, d) in dirty {
                self.dcache.put(ino, b, d, true);
            }
            return Err(e);
        }
        // A compressed file's dirty blocks go in groups of consecutive blocks (at most
        // `group_blocks`, never across a multiple of it); a group that shrinks by at least an
        // eighth becomes one compressed data node, the rest (and every block of other files)
        // are written raw.
        let algo = self.committed(ino)?.compression;
        let mut packed: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let dirty = if algo == compress::NONE {
            dirty
        } else {
            let group = compress::group_blocks(&p, self.cfg.compress_group);
            let mut raw = Vec::with_capacity(dirty.len());
            let mut i = 0;
            while i < dirty.len() {
                let mut j = i + 1;
                while j < dirty.len() && dirty[j].0 == dirty[j - 1].0 + 1 && dirty[j].0 % group != 0
                {
                    j += 1;
                }
                let n = j - i;
                let mut input = Vec::with_capacity(n * bs);
                for d in &dirty[i..j] {
                    input.extend_from_slice(&d.1);
                }
                let max = (n * bs - n * bs / 8).saturating_sub(DATAZ_HEADER as usize);
                match compress::compress(algo, &input, max) {
                    Some(z) => packed.push((dirty[i].0, n as u32, z)),
                    None => raw.extend(dirty[i..j].iter().cloned()),
                }
                i = j;
            }
            raw
        };
        let mut written: Vec<(u32, u32, Addr)> = Vec::new();
        match p.geometry.kind {
            FlashKind::Nand => {
                for (b, data) in &dirty {
                    let a =
                        self.st
                            .write_data_page(LogKind::DataHot, ino, *b, data, Priority::Log)?;
                    written.push((*b, 1, a));
                }
            }
            FlashKind::Nor => {
                // Contiguous runs become one data node each.
                let max_run =
                    ((p.geometry.block_size() - DATA_HEADER) / p.data_slot()).clamp(1, 64) as usize;
                let mut i = 0;
                while i < dirty.len() {
                    let mut j = i + 1;
                    while j < dirty.len() && dirty[j].0 == dirty[j - 1].0 + 1 && j - i < max_run {
                        j += 1;
                    }
                    let first = dirty[i].0;
                    let count = (j - i) as u32;
                    let mut payload = Vec::with_capacity(count as usize * bs);
                    for d in &dirty[i..j] {
                        payload.extend_from_slice(&d.1);
                    }
                    let a = self.write_data_node(
                        LogKind::DataHot,
                        ino,
                        first,
                        count,
                        &payload,
                        Priority::Log,
                    )?;
                    written.push((first, count, Addr(a.0 + (DATA_HEADER >> p.addr_shift))));
                    i = j;
                }
            }
        }
        // Compressed nodes last, so the page they leave partly filled is continued by the next
        // write-back (on NAND they share pages; the journal programs them before any record
        // that points at them, see `Store::program_buffered`).
        for (b, n, z) in &packed {
            let nb = compress::dataz_node(ino, *b, algo, n * bs as u32, z);
            let len = p.align(nb.w.len() as u32);
            let credit = n * compress::share(len, *n);
            let a = self
                .st
                .write_spanning_node(LogKind::DataHot, nb, credit, Priority::Log)?;
            for k in 0..*n {
                written.push((b + k, 1, Addr::packed(a)));
            }
        }
        written.sort_by_key(|w| w.0);
        let spilled = self.overlay(ino)?.spilled.is_some();
        if spilled {
            return self.record_spilled_writes(ino, &written);
        }
        let ov = self.overlay(ino)?;
        let mut dead = Vec::new();
        for &(first, count, a) in &written {
            for k in 0..count {
                if let Some(old) = ov.extents.get(first + k, stride) {
                    if !old.is_none() {
                        dead.push(old);
                    }
                }
            }
            ov.extents.insert(first, count, a, stride);
        }
        for a in dead {
            self.kill_data(a);
        }
        // Too many separate extents to keep in RAM: switch the update to a block map of its own.
        let n = self
            .inos
            .get(&ino)
            .and_then(|o| o.overlay.as_ref())
            .map(|o| o.extents.len())
            .unwrap_or(0);
        if n > self.cfg.overlay_extents {
            self.spill(ino)?;
        }
        Ok(())
    }

    /// Whether `a` is where the committed content of `ino` keeps block `b` (so the overlay
    /// shares it rather than owning it).
    fn is_committed_block(&mut self, ino: Ino, b: u32, a: Addr) -> Result<bool> {
        let c = self.committed(ino)?;
        if c.content.inline.is_some() {
            return Ok(false);
        }
        let mut ix = self.tree(ino);
        Ok(ix.lookup(&c.content, b)? == a)
    }

    /// Records blocks just written into a spilled overlay's own map (folding it when its
    /// pending list grows).
    fn record_spilled_writes(&mut self, ino: Ino, written: &[(u32, u32, Addr)]) -> Result<()> {
        let p = self.st.p();
        let stride = p.stride();
        let mut sp = match self
            .inos
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
            .and_then(|o| o.spilled.take())
        {
            Some(c) => c,
            None => return Err(Error::Corrupt),
        };
        let mut dead = Vec::new();
        for &(first, count, a) in written {
            for k in 0..count {
                let b = first + k;
                let old = {
                    let mut ix = self.tree(ino);
                    ix.lookup(&sp, b)?
                };
                // The update's own earlier copy dies now; a committed block dies at commit.
                if !old.is_none() && !self.is_committed_block(ino, b, old)? {
                    dead.push(old);
                }
            }
            sp.pending.insert(first, count, a, stride);
        }
        for a in dead {
            self.kill_data(a);
        }
        if sp.pending.len() > self.cfg.overlay_extents {
            let mut ix = self.tree(ino);
            ix.fold(&mut sp)?;
        }
        if let Some(ov) = self.inos.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
            ov.spilled = Some(sp);
        }
        Ok(())
    }

    /// Switches an overlay from extents to a complete block map of its own: the committed
    /// map, cut at the update's truncation point, with the update's extents on top, folded
    /// into new index nodes (none shared with the committed tree, so either can be dropped
    /// without touching the other).
    fn spill(&mut self, ino: Ino) -> Result<()> {
        let p = self.st.p();
        let stride = p.stride();
        let committed = self.committed(ino)?;
        let (trunc_to, extents) = match self.inos.get(&ino).and_then(|o| o.overlay.as_ref()) {
            Some(ov) if ov.spilled.is_none() && ov.inline.is_none() => {
                (ov.trunc_to, ov.extents.clone())
            }
            _ => return Ok(()),
        };
        let keep = trunc_to.map(|t| blocks_for(t, p.data_block).min(u32::MAX as u64) as u32);
        let mut full = ExtentMap::new();
        if committed.content.inline.is_none() {
            let c = &committed.content;
            let mut blocks: Vec<(u32, Addr)> = Vec::new();
            {
                let mut ix = self.tree(ino);
                ix.walk(
                    c,
                    &mut |b, a| {
                        if c.pending.get(b, stride).is_none() && c.trunc.is_none_or(|t| b < t) {
                            blocks.push((b, a))
                        }
                    },
                    &mut |_, _, _| {},
                )?;
            }
            blocks.extend(c.pending.iter_blocks(stride).filter(|(_, a)| !a.is_none()));
            for (b, a) in blocks {
                if keep.is_none_or(|k| b < k) {
                    full.insert(b, 1, a, stride);
                }
            }
        }
        for e in extents.extents() {
            full.insert(e.first, e.count, e.addr, stride);
        }
        let mut sp = Content {
            pending: full,
            ..Content::default()
        };
        {
            let mut ix = self.tree(ino);
            ix.fold(&mut sp)?;
        }
        if let Some(ov) = self.inos.get_mut(&ino).and_then(|o| o.overlay.as_mut()) {
            ov.spilled = Some(sp);
            ov.extents = ExtentMap::new();
            ov.trunc_to = None;
        }
        Ok(())
    }

    /// NOR: writes `count` consecutive file blocks from `first` (`data`, whole blocks) as one
    /// data node, each block followed by its CRC, and returns the header address (block `k`
    /// is at `header + DATA_HEADER + k · data_slot`).
    pub(crate) fn write_data_node(
        &mut self,
        kind: LogKind,
        ino: Ino,
        first: u32,
        count: u32,
        data: &[u8],
        prio: Priority,
    ) -> Result<Addr> {
        let p = self.st.p();
        let (bs, slot) = (p.data_block as usize, p.data_slot() as usize);
        if data.len() != count as usize * bs {
            return Err(Error::Invalid);
        }
        let mut payload = Vec::with_capacity(count as usize * slot);
        node::put_data_slots(&mut payload, ino, first, data, bs, slot);
        let mut nb = NodeBuilder::new(NodeType::Data, 0, ino, DATA_HEADER as usize);
        nb.w.u32(first).u32(count).u32(payload.len() as u32).u32(0);
        self.st.write_data_node(kind, nb, &payload, prio)
    }

    // ----- truncate ---------------------------------------------------------------------

    /// Truncates or extends an open file through its handle.
    pub fn truncate(&mut self, fh: Fh, size: u64) -> Result<()> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if !h.flags.write {
                return Err(Error::BadHandle);
            }
            fs.writable()?;
            fs.truncate_ino(h.ino, size)?;
            if h.flags.sync || fs.cfg.sync {
                fs.commit_ino(h.ino)?;
                fs.journal_flush()?;
            }
            fs.after_op()
        })
    }

    /// Sets the size of `ino`; a file that is not open is committed right away.
    pub(crate) fn truncate_ino(&mut self, ino: Ino, size: u64) -> Result<()> {
        let p = self.st.p();
        if size > p.max_file_size() {
            return Err(Error::TooBig);
        }
        let was_open = self.inos.get(&ino).map(|o| o.refs > 0).unwrap_or(false);
        if !was_open {
            self.inos.entry(ino).or_default().refs += 1;
        }
        let r = self.truncate_open(ino, size);
        let r = r.and_then(|_| {
            if was_open {
                Ok(())
            } else {
                self.commit_ino(ino)
            }
        });
        if !was_open {
            self.release(ino)?;
        }
        r
    }

    fn truncate_open(&mut self, ino: Ino, size: u64) -> Result<()> {
        let p = self.st.p();
        let bs = p.data_block as u64;
        let stride = p.stride();
        let now = self.now();
        let node = self.committed(ino)?;
        let limit = inline_limit(&p, node.names_len()) as u64;
        let cur = self.cur_size(ino)?;
        let ov = self.overlay(ino)?;
        ov.mtime = now;
        ov.ctime = now;
        if let Some(d) = ov.inline.as_mut() {
            if size <= limit {
                d.resize(size as usize, 0);
                ov.size = size;
                return Ok(());
            }
        }
        if ov.inline.is_some() {
            // Grows beyond inline: keep the bytes as block 0.. and extend.
            let d = ov.inline.take().unwrap_or_default();
            ov.trunc_to = Some(0);
            ov.size = size;
            for b in 0..blocks_for(d.len() as u64, p.data_block) {
                let mut blk = vec![0u8; bs as usize];
                let s = (b * bs) as usize;
                let e = (s + bs as usize).min(d.len());
                blk[..e - s].copy_from_slice(&d[s..e]);
                self.dcache.put(ino, b as u32, blk, true);
            }
            return Ok(());
        }
        if size < cur {
            let keep = blocks_for(size, p.data_block) as u32;
            if let Some(mut sp) = ov.spilled.take() {
                // A spilled update cuts its own map; its own blocks beyond die now, committed
                // ones at commit.
                let mut mapped: Vec<(u32, Addr)> = sp
                    .pending
                    .iter_blocks(stride)
                    .filter(|(b, a)| *b >= keep && !a.is_none())
                    .collect();
                {
                    let mut ix = self.tree(ino);
                    let c = &sp;
                    ix.walk(
                        c,
                        &mut |b, a| {
                            if b >= keep
                                && c.pending.get(b, stride).is_none()
                                && c.trunc.is_none_or(|t| b < t)
                            {
                                mapped.push((b, a))
                            }
                        },
                        &mut |_, _, _| {},
                    )?;
                }
                for (b, a) in mapped {
                    if !self.is_committed_block(ino, b, a)? {
                        self.kill_data(a);
                    }
                }
                sp.pending.truncate(keep, stride);
                sp.trunc = Some(sp.trunc.map_or(keep, |t| t.min(keep)));
                let ov = self.overlay(ino)?;
                ov.spilled = Some(sp);
                ov.size = size;
            } else {
                ov.trunc_to = Some(ov.trunc_to.map_or(size, |t| t.min(size)));
                let dead: Vec<Addr> = ov
                    .extents
                    .iter_blocks(stride)
                    .filter(|(b, a)| *b >= keep && !a.is_none())
                    .map(|x| x.1)
                    .collect();
                ov.extents.truncate(keep, stride);
                ov.size = size;
                for a in dead {
                    self.kill_data(a);
                }
            }
            self.dcache.drop_from(ino, keep);
            // Zero the tail of the last partial block.
            if size % bs != 0 {
                let b = (size / bs) as u32;
                let mut blk = self.get_block(ino, &node, b)?;
                blk[(size % bs) as usize..].fill(0);
                self.dcache.put(ino, b, blk, true);
                // The tail block is rewritten; make sure the truncation point is block aligned
                // for the commit (blocks from `keep` are dropped, the rewritten one replaces).
            }
        } else {
            ov.size = size;
        }
        Ok(())
    }

    // ----- commit -----------------------------------------------------------------------

    /// Commits the uncommitted changes of `ino` as one journal record (or, for very large
    /// updates, as a transaction of several).
    pub(crate) fn commit_ino(&mut self, ino: Ino) -> Result<()> {
        if !self
            .inos
            .get(&ino)
            .map(|o| o.overlay.is_some())
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.flush_blocks(ino)?;
        let Some(mut ov) = self.inos.get_mut(&ino).and_then(|o| o.overlay.take()) else {
            return Ok(());
        };
        // A spilled update commits its whole block map at once.
        let map = match ov.spilled.take() {
            Some(mut sp) => {
                let mut ix = self.tree(ino);
                if let Err(e) = ix.fold(&mut sp) {
                    ov.spilled = Some(sp);
                    if let Some(o) = self.inos.get_mut(&ino) {
                        o.overlay = Some(ov);
                    }
                    return Err(e);
                }
                Some(BlockMap {
                    depth: sp.depth,
                    root: sp.root,
                    direct: sp.direct,
                })
            }
            None => None,
        };
        if let Some(m) = map {
            let mut rec = self.commit_record(self.tx.unwrap_or(0), ino, &ov, ExtentMap::new());
            if let Record::Commit { map, trunc_to, .. } = &mut rec {
                *map = Some(m);
                *trunc_to = None;
            }
            if self
                .inos
                .get(&ino)
                .map(|o| o.orphan.is_some())
                .unwrap_or(false)
            {
                return self.apply_commit(&rec);
            }
            self.journal(&rec)?;
            return self.apply(&rec);
        }
        // An unlinked file's changes never need to survive a power cut.
        if self
            .inos
            .get(&ino)
            .map(|o| o.orphan.is_some())
            .unwrap_or(false)
        {
            let rec = self.commit_record(0, ino, &ov, ov.extents.clone());
            return self.apply_commit(&rec);
        }
        let per = max_commit_extents(
            self.st
                .p()
                .dir_page
                .min(self.st.p().geometry.page_size.max(512)),
        )
        .max(1);
        if ov.extents.len() <= per {
            let rec = self.commit_record(self.tx.unwrap_or(0), ino, &ov, ov.extents.clone());
            self.journal(&rec)?;
            return self.apply(&rec);
        }
        // Split across records of one transaction.
        let (tid, own) = match self.tx {
            Some(t) => (t, false),
            None => {
                let t = self.next_tid;
                self.next_tid += 1;
                (t, true)
            }
        };
        let all: Vec<_> = ov.extents.extents().to_vec();
        let mut recs = Vec::new();
        for (i, chunk) in all.chunks(per).enumerate() {
            let mut e = ExtentMap::new();
            let stride = self.st.p().stride();
            for x in chunk {
                e.insert(x.first, x.count, x.addr, stride);
            }
            let mut part = ov.clone();
            if i > 0 {
                part.trunc_to = None;
            }
            recs.push(self.commit_record(tid, ino, &part, e));
        }
        for r in &recs {
            self.journal(r)?;
        }
        if own {
            self.journal(&Record::TxCommit { tid })?;
        }
        for r in &recs {
            self.apply(r)?;
        }
        Ok(())
    }

    fn commit_record(&self, tid: Tid, ino: Ino, ov: &Overlay, extents: ExtentMap) -> Record {
        Record::Commit {
            tid,
            ino,
            size: ov.size,
            mtime: ov.mtime,
            ctime: ov.ctime,
            trunc_to: ov.trunc_to,
            inline: ov.inline.clone(),
            extents,
            map: None,
        }
    }

    /// Applies a `Commit` record: the file's committed content becomes the new one.
    pub(crate) fn apply_commit(&mut self, rec: &Record) -> Result<()> {
        let Record::Commit {
            ino,
            size,
            mtime,
            ctime,
            trunc_to,
            inline,
            extents,
            map,
            ..
        } = rec
        else {
            return Err(Error::Corrupt);
        };
        let ino = *ino;
        let p = self.st.p();
        let stride = p.stride();
        let orphan = self
            .inos
            .get(&ino)
            .map(|o| o.orphan.is_some())
            .unwrap_or(false);
        let mut node = if orphan {
            self.inos
                .get(&ino)
                .and_then(|o| o.orphan.clone())
                .ok_or(Error::Corrupt)?
        } else {
            match self.map.get(&mut self.st, ino)? {
                MapEntry::File { .. } | MapEntry::Linked(_) => {}
                _ => return Err(Error::Corrupt),
            }
            self.make_dirty(ino)?;
            self.load_file(ino)?.node.clone()
        };
        if *size > p.max_file_size() {
            return Err(Error::Corrupt);
        }
        let mut dead: Vec<Addr> = Vec::new();
        if let Some(m) = map {
            // A large update: its own block map replaces the old one wholesale. The old tree's
            // nodes die, and every old block the new map does not keep in place.
            let old = core::mem::take(&mut node.content);
            let new = Content {
                inline: None,
                depth: m.depth,
                root: m.root,
                direct: m.direct.clone(),
                pending: extents.clone(),
                trunc: None,
            };
            let (old_blocks, old_nodes) = self.mapped(ino, &old)?;
            for (b, a) in &old_blocks {
                let now = {
                    let mut ix = self.tree(ino);
                    ix.lookup(&new, *b)?
                };
                if now != *a {
                    dead.push(*a);
                }
            }
            for a in old_nodes {
                self.st.kill(a, p.align(p.index_node));
            }
            if self.replaying {
                // Written before the crash, perhaps after the checkpoint: count it (counting
                // twice what the checkpoint already counted is harmless, GC recounts).
                let (new_blocks, new_nodes) = self.mapped(ino, &new)?;
                let keep: alloc::collections::BTreeSet<u32> =
                    old_blocks.iter().map(|x| x.1 .0).collect();
                for (_, a) in new_blocks {
                    if !keep.contains(&a.0) {
                        self.claim_replayed_data(a);
                    }
                }
                for a in new_nodes {
                    self.claim_replayed(a, p.align(p.index_node));
                }
            }
            node.content = new;
        } else if let Some(d) = inline {
            // The whole content is inline now: every block dies.
            let old = core::mem::replace(&mut node.content, Content::empty_inline());
            let tmp = FileNode {
                content: old,
                node_addr: Addr::NONE,
                ..node.clone()
            };
            self.free_file_space(&tmp)?;
            node.content.inline = Some(d.clone());
        } else {
            if node.content.inline.is_some() {
                node.content = Content::default();
            }
            {
                let mut ix = self.tree(ino);
                if let Some(t) = trunc_to {
                    let keep = blocks_for(*t, p.data_block).min(u32::MAX as u64) as u32;
                    dead.extend(
                        node.content
                            .pending
                            .iter_blocks(stride)
                            .filter(|(b, a)| *b >= keep && !a.is_none())
                            .map(|x| x.1),
                    );
                    // The folded map's blocks from `keep` on die too, except those a pending
                    // change already replaced (counted above). Nothing is written here: the
                    // cut is folded into the index later (replay must not write).
                    let old_trunc = node.content.trunc;
                    let pending = node.content.pending.clone();
                    ix.walk(
                        &node.content,
                        &mut |b, a| {
                            if b >= keep
                                && old_trunc.is_none_or(|t| b < t)
                                && pending.get(b, stride).is_none()
                            {
                                dead.push(a);
                            }
                        },
                        &mut |_, _, _| {},
                    )?;
                    node.content.pending.truncate(keep, stride);
                    node.content.trunc = Some(old_trunc.map_or(keep, |t| t.min(keep)));
                }
                for e in extents.extents() {
                    for k in 0..e.count {
                        let b = e.first + k;
                        let old = ix.lookup(&node.content, b)?;
                        if !old.is_none() {
                            dead.push(old);
                        }
                    }
                    node.content
                        .pending
                        .insert(e.first, e.count, e.addr, stride);
                }
            }
            if self.replaying {
                // Data written after the checkpoint: count it and keep its blocks allocated.
                for (_, a) in extents.iter_blocks(stride) {
                    self.claim_replayed_data(a);
                }
            }
        }
        for a in dead {
            self.kill_data(a);
        }
        node.size = *size;
        node.attrs.mtime = *mtime;
        node.attrs.ctime = *ctime;
        // Keep RAM bounded: fold a long list of changes into the index now.
        if !self.replaying && node.content.pending.len() > self.cfg.overlay_extents.max(16) {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        if orphan {
            if let Some(o) = self.inos.get_mut(&ino) {
                o.orphan = Some(node);
            }
        } else if let Some(c) = self.files.get_mut(&ino) {
            c.node = node;
            c.dirty = true;
        }
        Ok(())
    }

    /// Every (block, address) a content maps (pending changes and truncation applied) and
    /// every index node of its tree. Reads only.
    fn mapped(&mut self, ino: Ino, c: &Content) -> Result<Mapped> {
        let stride = self.st.p().stride();
        let mut blocks = Vec::new();
        let mut nodes = Vec::new();
        if c.inline.is_some() {
            return Ok((blocks, nodes));
        }
        {
            let mut ix = self.tree(ino);
            ix.walk(
                c,
                &mut |b, a| {
                    if c.pending.get(b, stride).is_none() && c.trunc.is_none_or(|t| b < t) {
                        blocks.push((b, a))
                    }
                },
                &mut |a, _, _| nodes.push(a),
            )?;
        }
        blocks.extend(c.pending.iter_blocks(stride).filter(|(_, a)| !a.is_none()));
        Ok((blocks, nodes))
    }

    /// During replay: counts file block pointer `a` live (a compressed block: its whole node).
    fn claim_replayed_data(&mut self, a: Addr) {
        if let Some((at, len)) = self.data_extent(a) {
            self.claim_replayed(at, len);
        }
    }

    /// During replay: counts `bytes` at `a` live and keeps its block from the allocator.
    fn claim_replayed(&mut self, a: Addr, bytes: u32) {
        let p = self.st.p();
        if !p.addr_valid(a) {
            return;
        }
        self.st.add_live(a, bytes);
        let blk = p.block_of(a);
        let e = self.st.block(blk);
        if matches!(e.state(), BlockState::Free | BlockState::Erased) {
            self.st.set_block(
                blk,
                BlockInfo::new(BlockState::Used, LogKind::DataHot, e.ec, e.live, e.age()),
            );
        }
    }

    /// Commits `fh`'s file and makes it durable (inside a transaction: commits it into the
    /// transaction, durable when the transaction commits).
    pub fn fsync(&mut self, fh: Fh) -> Result<()> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if h.flags.write {
                fs.writable()?;
                fs.commit_ino(h.ino)?;
            }
            if fs.tx.is_none() && !fs.cfg.read_only {
                fs.journal_flush()?;
            }
            fs.after_op()
        })
    }

    /// Commits every open file and makes everything durable.
    pub fn sync(&mut self) -> Result<()> {
        self.guard(|fs| {
            if fs.cfg.read_only {
                return Ok(());
            }
            let inos: Vec<Ino> = fs
                .inos
                .iter()
                .filter(|(_, o)| o.overlay.is_some())
                .map(|(i, _)| *i)
                .collect();
            for ino in inos {
                fs.commit_ino(ino)?;
            }
            if fs.tx.is_none() {
                fs.journal_flush()?;
            }
            Ok(())
        })
    }

    // ----- transactions -----------------------------------------------------------------

    /// Starts a transaction: from now until [`Fs::commit_transaction`], every change (to any
    /// file or directory) becomes durable all together or not at all. Everything before is
    /// synced first.
    pub fn begin_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            fs.writable()?;
            if fs.tx.is_some() {
                return Err(Error::Busy);
            }
            fs.sync()?;
            let t = fs.next_tid;
            fs.next_tid += 1;
            fs.tx = Some(t);
            Ok(())
        })
    }

    /// Commits the open transaction: all its changes become durable at once.
    pub fn commit_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            let tid = fs.tx.ok_or(Error::Invalid)?;
            let inos: Vec<Ino> = fs
                .inos
                .iter()
                .filter(|(_, o)| o.overlay.is_some())
                .map(|(i, _)| *i)
                .collect();
            for ino in inos {
                fs.commit_ino(ino)?;
            }
            fs.journal(&Record::TxCommit { tid })?;
            fs.journal_flush()?;
            fs.tx = None;
            fs.after_op()
        })
    }

    /// Abandons the open transaction: the file system returns to its state when the
    /// transaction began (open handles stay open; files created in it are gone).
    pub fn abort_transaction(&mut self) -> Result<()> {
        self.guard(|fs| {
            if fs.tx.is_none() {
                return Err(Error::Invalid);
            }
            fs.abort()
        })
    }

    /// Drops all RAM state and reloads from flash (what a power cut and remount would do).
    pub(crate) fn abort(&mut self) -> Result<()> {
        self.tx = None;
        for o in self.inos.values_mut() {
            o.overlay = None;
        }
        self.dcache.clear();
        self.files.clear();
        self.dirs.clear();
        self.map.clear_cache();
        self.icache.clear();
        self.st.reset_heads();
        self.load()?;
        // Orphans and handles to inodes that no longer exist are left dangling; their
        // operations report NotFound.
        let stale: Vec<Ino> = self
            .inos
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .into_iter()
            .filter(|&i| !matches!(self.map.get(&mut self.st, i), Ok(e) if e.is_file()))
            .collect();
        for i in stale {
            if let Some(o) = self.inos.get_mut(&i) {
                o.orphan = None;
            }
        }
        Ok(())
    }

    // ----- space ------------------------------------------------------------------------

    /// Open handles (for front ends).
    pub fn open_handles(&self) -> usize {
        self.handles.iter().filter(|h| h.is_some()).count()
    }

    /// The inode of a handle.
    pub fn handle_ino(&self, fh: Fh) -> Result<Ino> {
        Ok(self.handle(fh)?.ino)
    }
}
