//! Collecting data: whether a data block or packed data node is still mapped by its file (the
//! committed index or an open file's overlay), and moving it to the cold data log, retargeting
//! every reference.
//!
//! It must never leave a reference pointing at the victim once its copy is written.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::Reader;
use crate::format::compress;
use crate::format::node::{self};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind, DATA_CRC_LEN, NODE_HEADER};
use crate::fs::Fs;
use crate::store::Priority;
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{Flash, FlashKind};

/// Bytes a NOR data node spans (header, payload and padding), from its verified header.
pub(crate) fn data_node_span(p: &crate::format::params::Params, bytes: &[u8]) -> u32 {
    let plen = bytes
        .get(32..36)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    p.align(
        p.data_header()
            .saturating_add(plen)
            .min(p.geometry.block_size()),
    )
}

impl<F: Flash> Fs<F> {
    /// Whether (`ino`, block `b`) currently maps to `a` in its committed state or its overlay.
    pub(crate) fn data_refs(&mut self, ino: Ino, b: u32, a: Addr) -> Result<(bool, bool)> {
        let stride = self.store.p().stride();
        let (ov_extents, spilled) = match self.open.files.get(&ino).and_then(|o| o.overlay.as_ref())
        {
            Some(ov) => (ov.extents.get(b, stride) == Some(a), ov.spilled.clone()),
            None => (false, None),
        };
        let ov = match spilled {
            Some(sp) => {
                let mut ix = self.tree(ino);
                ix.lookup(&sp, b)? == a
            }
            None => ov_extents,
        };
        let orphan = self.open.files.get(&ino).and_then(|o| o.orphan.clone());
        let content = match orphan {
            Some(n) => n.content,
            None => {
                if !self.map.get(&mut self.store, ino)?.is_file() {
                    return Ok((false, ov));
                }
                match self.load_file(ino) {
                    Ok(c) => c.node.content.clone(),
                    Err(Error::NotFound) => return Ok((false, ov)),
                    Err(e) => return Err(e),
                }
            }
        };
        if content.inline.is_some() {
            return Ok((false, ov));
        }
        let mut ix = self.tree(ino);
        let committed = ix.lookup(&content, b)? == a;
        Ok((committed, ov))
    }

    /// Points (`ino`, `b`) at `new` wherever it pointed at the old copy.
    fn retarget(
        &mut self,
        ino: Ino,
        b: u32,
        count: u32,
        committed: bool,
        overlay: bool,
        new: Addr,
    ) -> Result<()> {
        let stride = self.store.p().stride();
        if overlay {
            if let Some(ov) = self
                .open
                .files
                .get_mut(&ino)
                .and_then(|o| o.overlay.as_mut())
            {
                match ov.spilled.as_mut() {
                    Some(sp) => sp.pending.insert(b, count, new, stride),
                    None => ov.extents.insert(b, count, new, stride),
                }
            }
        }
        if committed {
            if let Some(n) = self
                .open
                .files
                .get_mut(&ino)
                .and_then(|o| o.orphan.as_mut())
            {
                n.content.pending.insert(b, count, new, stride);
            } else {
                self.make_dirty(ino)?;
                if let Some(c) = self.inodes.get_mut(ino) {
                    c.node.content.pending.insert(b, count, new, stride);
                }
            }
        }
        Ok(())
    }

    /// Liveness and relocation of one NAND data page.
    pub(crate) fn gc_data_block(&mut self, ino: Ino, b: u32, a: Addr, data: &[u8]) -> Result<()> {
        let (committed, overlay) = self.data_refs(ino, b, a)?;
        if !committed && !overlay {
            return Ok(());
        }
        let new = self
            .store
            .write_data_page(LogKind::DataCold, ino, b, data, Priority::Log)?;
        self.retarget(ino, b, 1, committed, overlay, new)?;
        self.kill_data(a)?;
        self.gc.moved_bytes += data.len() as u64;
        Ok(())
    }

    /// Liveness and relocation of a compressed data node: a live one is copied as it is (no
    /// recompression) and the block pointer follows it.
    pub(crate) fn gc_dataz_node(
        &mut self,
        a: Addr,
        h: &node::NodeHeader,
        bytes: &[u8],
    ) -> Result<()> {
        let p = self.store.p();
        let z = match compress::parse_dataz(h.flags, &bytes[NODE_HEADER as usize..]) {
            Ok(z) => z,
            Err(_) => return Ok(()),
        };
        let Some(count) = z.blocks(p.data_block) else {
            return Ok(());
        };
        let ptr = Addr::packed(a);
        let mut live: Vec<(u32, bool, bool)> = Vec::new();
        for k in 0..count {
            let b = z.block.saturating_add(k);
            let (c, o) = self.data_refs(h.ino, b, ptr)?;
            if c || o {
                live.push((b, c, o));
            }
        }
        if live.is_empty() {
            return Ok(());
        }
        let len = p.align(h.len);
        let share = compress::share(len, count);
        if live.len() < count as usize {
            // Some blocks were overwritten since: moving the node whole would copy dead data
            // (and need more room than the shares credited say). Recompress what is live.
            return self.gc_dataz_split(a, h, &z, share, &live);
        }
        // The node moves whole, as it is.
        let nb = compress::dataz_node(h.ino, z.block, z.algo, z.raw_len, z.payload);
        let na = self.store.write_spanning_node(
            LogKind::DataCold,
            nb,
            share * live.len() as u32,
            Priority::Log,
        )?;
        for &(b, c, o) in &live {
            self.retarget(h.ino, b, 1, c, o, Addr::packed(na))?;
        }
        self.store.kill(a, share * live.len() as u32)?;
        self.gc.moved_bytes += len as u64;
        Ok(())
    }

    /// Moves the live blocks of a compressed node some of whose blocks are dead: runs of
    /// consecutive live blocks are compressed again (or written raw if they no longer shrink).
    fn gc_dataz_split(
        &mut self,
        a: Addr,
        h: &node::NodeHeader,
        z: &compress::DataZ<'_>,
        share: u32,
        live: &[(u32, bool, bool)],
    ) -> Result<()> {
        let p = self.store.p();
        let bs = p.data_block as usize;
        let mut all = vec![0u8; z.raw_len as usize];
        if compress::decompress(z.algo, z.payload, &mut all).is_err() {
            // Its CRC held but it does not decompress: live blocks nobody can read. They stay
            // where they are (reads give EIO), and so does the victim.
            self.gc.unreadable = true;
            return Ok(());
        }
        let mut i = 0;
        while i < live.len() {
            let mut j = i + 1;
            while j < live.len() && live[j].0 == live[j - 1].0 + 1 {
                j += 1;
            }
            let first = live[i].0;
            let n = j - i;
            let off = (first - z.block) as usize * bs;
            let raw = &all[off..off + n * bs];
            let max = (n * bs - n * bs / 8).saturating_sub(compress::DATAZ_HEADER as usize);
            let mut ptrs: Vec<Addr> = Vec::with_capacity(n);
            match compress::compress(z.algo, raw, max) {
                Some(c) => {
                    let nb = compress::dataz_node(h.ino, first, z.algo, (n * bs) as u32, &c);
                    let l = p.align(nb.w.len() as u32);
                    let credit = n as u32 * compress::share(l, n as u32);
                    let na = self.store.write_spanning_node(
                        LogKind::DataCold,
                        nb,
                        credit,
                        Priority::Log,
                    )?;
                    ptrs.resize(n, Addr::packed(na));
                    self.gc.moved_bytes += l as u64;
                }
                None => {
                    for k in 0..n {
                        let blk = &raw[k * bs..(k + 1) * bs];
                        let b = first + k as u32;
                        let na = match p.geometry.flash_kind() {
                            FlashKind::Nand => self.store.write_data_page(
                                LogKind::DataCold,
                                h.ino,
                                b,
                                blk,
                                Priority::Log,
                            )?,
                            FlashKind::Nor => {
                                let hdr = self.write_data_node(
                                    LogKind::DataCold,
                                    h.ino,
                                    b,
                                    1,
                                    blk,
                                    Priority::Log,
                                )?;
                                Addr(hdr.0 + (p.data_header() >> p.addr_shift))
                            }
                        };
                        ptrs.push(na);
                        self.gc.moved_bytes += bs as u64;
                    }
                }
            }
            for (k, &(b, c, o)) in live[i..j].iter().enumerate() {
                self.retarget(h.ino, b, 1, c, o, ptrs[k])?;
                self.store.kill(a, share)?;
            }
            i = j;
        }
        Ok(())
    }

    /// Liveness and relocation of a NOR data node (header plus payload); returns the bytes it
    /// spans. Each live block is checked against its CRC before it is copied; a live block
    /// that fails it (however often it is read) is not copied, and keeps the victim.
    pub(crate) fn gc_data_node(&mut self, a: Addr, bytes: &[u8]) -> Result<u32> {
        let p = self.store.p();
        let mut r = Reader::new(&bytes[NODE_HEADER as usize..]);
        let first = r.u32()?;
        let count = r.u32()?;
        let plen = r.u32()?;
        let ino = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
        let bs = p.data_block as usize;
        let slot = p.data_slot();
        if count == 0
            || count > 4096
            || plen != count.saturating_mul(slot)
            || first.checked_add(count).is_none()
        {
            return Ok(p.data_header());
        }
        let total = data_node_span(&p, bytes);
        let stride = p.stride();
        let payload_addr = Addr(a.0 + (p.data_header() >> p.addr_shift));
        // Liveness of every block, then the live ones read and checked.
        let mut good: Vec<(u32, bool, bool, Vec<u8>)> = Vec::new();
        let mut buf = vec![0u8; bs + DATA_CRC_LEN as usize];
        for k in 0..count {
            let at = Addr(payload_addr.0 + k * stride);
            let (c, o) = self.data_refs(ino, first + k, at)?;
            if !c && !o {
                continue;
            }
            let ok = self.store.read_checked(p.byte_of(at), &mut buf, &mut |s| {
                node::data_slot_ok(ino, first + k, s, bs)
            })?;
            if ok {
                good.push((k, c, o, buf[..bs].to_vec()));
            } else {
                self.gc.unreadable = true;
            }
        }
        // Runs of consecutive good blocks with the same owners move as one node each.
        let mut i = 0usize;
        while i < good.len() {
            let (k0, c, o, _) = good[i];
            // Split where the copy head's block ends (see `Store::data_slots_room`).
            let room = self.store.data_slots_room(LogKind::DataCold) as usize;
            let lim = if room > 0 { room } else { usize::MAX };
            let mut j = i + 1;
            while j < good.len()
                && good[j].0 == good[j - 1].0 + 1
                && good[j].1 == c
                && good[j].2 == o
                && j - i < lim
            {
                j += 1;
            }
            let n = (j - i) as u32;
            let mut data = Vec::with_capacity(n as usize * bs);
            for g in &good[i..j] {
                data.extend_from_slice(&g.3);
            }
            let na =
                self.write_data_node(LogKind::DataCold, ino, first + k0, n, &data, Priority::Log)?;
            let new_payload = Addr(na.0 + (p.data_header() >> p.addr_shift));
            self.retarget(ino, first + k0, n, c, o, new_payload)?;
            for g in &good[i..j] {
                self.kill_data(Addr(payload_addr.0 + g.0 * stride))?;
            }
            self.gc.moved_bytes += n as u64 * bs as u64;
            i = j;
        }
        Ok(total)
    }
}
