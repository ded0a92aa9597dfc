//! Data nodes on flash: writing one, reading one back (checking its tag on NAND and its block
//! CRCs on NOR, decompressing a packed node), the extent a node occupies, and killing it.
//!
//! It must never decide which file block a node belongs to; callers pass what the index says.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::compress::{self, DATAZ_HEADER};
use crate::format::node::{self, NodeBuilder, NodeType, OobTag, Probe};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind, DATA_CRC_LEN, NODE_HEADER};
use crate::fs::Fs;
use crate::store::{Priority, DATA_HEADER};
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{EccStatus, Flash, FlashKind};

impl<F: Flash> Fs<F> {
    /// NOR: writes `count` consecutive file blocks from `first` (`data`, whole blocks) as one
    /// data node, each block followed by its CRC, and returns the header address (block `k`
    /// is at `header + Params::data_header + k · data_slot`).
    pub(crate) fn write_data_node(
        &mut self,
        kind: LogKind,
        ino: Ino,
        first: u32,
        count: u32,
        data: &[u8],
        prio: Priority,
    ) -> Result<Addr> {
        let p = self.store.p();
        let (bs, slot) = (p.data_block as usize, p.data_slot() as usize);
        if data.len() != count as usize * bs {
            return Err(Error::Invalid);
        }
        let mut payload = Vec::with_capacity(count as usize * slot);
        node::put_data_slots(&mut payload, ino, first, data, bs, slot);
        let mut nb = NodeBuilder::new(NodeType::Data, 0, ino, DATA_HEADER as usize);
        nb.w.u32(first).u32(count).u32(payload.len() as u32).u32(0);
        self.store.write_data_node(kind, nb, &payload, prio)
    }

    /// Reads the whole data block at `a` into `buf`, checking it belongs to (`ino`, `b`).
    pub(crate) fn read_data(&mut self, a: Addr, ino: Ino, b: u32, buf: &mut [u8]) -> Result<()> {
        if a.is_packed() {
            return self.read_packed(a, ino, b, buf);
        }
        let p = self.store.p();
        let g = p.geometry;
        match g.flash_kind() {
            FlashKind::Nand => {
                if !p.addr_valid(a) || p.byte_of(a) % g.page_size as u64 != 0 {
                    return Err(Error::Corrupt);
                }
                let page = (p.byte_of(a) / g.page_size as u64) as u32;
                let (st, tag) = self.store.read_tagged_page(page, buf)?;
                if st == EccStatus::Uncorrectable {
                    return Err(Error::Io);
                }
                let Ok(Some(tag)) = tag else {
                    return Err(Error::Io);
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
                let ok = self.store.read_checked(p.byte_of(a), &mut slot, &mut |s| {
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
        let p = self.store.p();
        let max = DATAZ_HEADER + compress::MAX_RAW;
        let (h, bytes) = match self.store.read_node(a.node(), NodeType::DataZ, max) {
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

    /// Counts one data block dead (a compressed one: its whole node).
    pub(crate) fn kill_data(&mut self, a: Addr) -> Result<()> {
        if let Some((at, len)) = self.data_extent(a) {
            self.store.kill(at, len)?;
        }
        Ok(())
    }

    /// The aligned length of the compressed data node at `at` (for fsck).
    pub(crate) fn dataz_len(&mut self, at: Addr) -> Option<u32> {
        let p = self.store.p();
        let mut h = [0u8; NODE_HEADER as usize];
        self.store.read(p.byte_of(at), &mut h).ok()?;
        let max = crate::format::compress::DATAZ_HEADER + crate::format::compress::MAX_RAW;
        match node::probe(&h, max) {
            Probe::Header(hd) if hd.typ == NodeType::DataZ => Some(p.align(hd.len)),
            _ => None,
        }
    }

    /// Where the flash bytes of file block pointer `a` start and how many bytes they count
    /// live: a raw block is one data block at `a`; a packed pointer is one share of its
    /// compressed data node (see [`crate::format::compress::share`]), read from the node header (`None` when it cannot be read:
    /// the block then stays counted live until garbage collection recounts it).
    pub(crate) fn data_extent(&mut self, a: Addr) -> Option<(Addr, u32)> {
        let p = self.store.p();
        if a.is_none() {
            return None;
        }
        if !a.is_packed() {
            return Some((a, p.data_slot()));
        }
        let at = a.node();
        if !p.addr_valid(at) {
            return None;
        }
        let mut h = [0u8; crate::format::compress::DATAZ_HEADER as usize];
        self.store.read(p.byte_of(at), &mut h).ok()?;
        let max = crate::format::compress::DATAZ_HEADER + crate::format::compress::MAX_RAW;
        match node::probe(&h, max) {
            Probe::Header(hd) if hd.typ == NodeType::DataZ => {
                let raw_len = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
                if raw_len == 0 || raw_len % p.data_block != 0 {
                    return None;
                }
                let count = raw_len / p.data_block;
                Some((at, crate::format::compress::share(p.align(hd.len), count)))
            }
            _ => None,
        }
    }

    /// Whether an OOB tag read from a data page matches what is expected (fsck, GC).
    fn tag_matches(tag: &OobTag, ino: Ino, block: u32) -> bool {
        tag.kind == crate::format::node::TAG_DATA && tag.ino == ino && tag.block == block
    }
}
