//! Reading files: each block from the data cache, the overlay's written-back blocks, the
//! committed index, or a hole; runs of contiguous blocks read in one device read.
//!
//! It must never write (a read fills only clean cache entries).

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::node::{self};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, Params, DATA_CRC_LEN};
use crate::fs::files::handles::Fh;
use crate::fs::Fs;
use crate::index::file::{blocks_for, FileNode};
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::{Flash, FlashKind};

/// Where a block's data is.
pub(crate) enum Src {
    Hole,
    At(Addr),
}

impl<F: Flash> Fs<F> {
    /// Where block `b` of `ino` is, ignoring the data cache.
    pub(super) fn block_src(&mut self, ino: Ino, node: &FileNode, b: u32) -> Result<Src> {
        let p = self.store.p();
        let stride = p.stride();
        if let Some(ov) = self.open.files.get(&ino).and_then(|o| o.overlay.as_ref()) {
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

    /// Block `b` of `ino` (zeros for holes).
    pub(crate) fn get_block(&mut self, ino: Ino, node: &FileNode, b: u32) -> Result<Vec<u8>> {
        if let Some(d) = self.data_cache.get(ino, b) {
            return Ok(d.to_vec());
        }
        let bs = self.store.p().data_block as usize;
        let mut buf = vec![0u8; bs];
        if let Src::At(a) = self.block_src(ino, node, b)? {
            self.read_data(a, ino, b, &mut buf)?;
            self.data_cache.put(ino, b, buf.clone(), false);
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

    fn read_ino(&mut self, ino: Ino, off: u64, buf: &mut [u8]) -> Result<usize> {
        let node = self.committed(ino)?;
        let size = self.cur_size(ino)?;
        if off >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(size - off) as usize;
        // Inline content.
        let ov_inline = self
            .open
            .files
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
        let p = self.store.p();
        let bs = p.data_block as u64;
        let sequential = self.open.read_end == Some((ino, (off / bs) as u32));
        self.open.read_end = Some((ino, (off + n as u64).div_ceil(bs) as u32));
        let mut done = 0usize;
        while done < n {
            let pos = off + done as u64;
            let b = (pos / bs) as u32;
            let in_b = (pos % bs) as usize;
            let take = (bs as usize - in_b).min(n - done);
            // Whole blocks not in the cache go straight from flash into the caller's buffer,
            // coalescing runs that are contiguous on NOR.
            if in_b == 0 && take == bs as usize && self.data_cache.get(ino, b).is_none() {
                let run = self.read_run(ino, &node, b, &mut buf[done..n], sequential)?;
                done += run;
                continue;
            }
            let blk = self.get_block(ino, &node, b)?;
            buf[done..done + take].copy_from_slice(&blk[in_b..in_b + take]);
            done += take;
        }
        Ok(n)
    }

    /// NOR: where a random read of blocks `b…` may find them through index entries read
    /// alone, not whole nodes ([`IndexTree::lookup_run_unchecked`]), as the first block's
    /// address and how many follow it contiguously: for a read of at most half a leaf's
    /// blocks, which would read a whole node per level the cache does not hold and use a few
    /// of its entries. `None` when that path does not apply (a larger read, an open file's
    /// uncommitted changes, inline content, compressed blocks). The caller checks every block
    /// by its slot's CRC, which names the file and the block, and reads through the verified
    /// index when one fails. (`dffs bench nor --quick --erase-size 64KiB`: random 256-byte
    /// reads 19.4 → 37.8 MB/s of the raw 39.4; taken for every read, reads of 16 KiB and more
    /// lost 5%, each run reading its entries where the cached leaf had served the next runs.)
    ///
    /// [`IndexTree::lookup_run_unchecked`]: crate::index::file::IndexTree::lookup_run_unchecked
    fn unchecked_run(
        &mut self,
        ino: Ino,
        node: &FileNode,
        b: u32,
        blocks: usize,
    ) -> Result<Option<(Addr, usize)>> {
        let p = self.store.p();
        if p.geometry.flash_kind() != FlashKind::Nor
            || node.content.inline.is_some()
            || self.open.has_overlay(ino)
            || blocks > p.index_fanout() as usize / 2
        {
            return Ok(None);
        }
        let mut ix = self.tree(ino);
        let Some(addrs) = ix.lookup_run_unchecked(&node.content, b, blocks as u32)? else {
            return Ok(None);
        };
        let first = addrs[0];
        if first.is_packed() {
            return Ok(None);
        }
        let mut count = 1usize;
        while count < addrs.len()
            && continues_run(&p, first, count, addrs[count])
            && self.data_cache.get(ino, b + count as u32).is_none()
        {
            count += 1;
        }
        Ok(Some((first, count)))
    }

    /// Reads whole blocks from `b` into `dst` (a multiple of the block size or the tail),
    /// as many as are contiguous on flash; returns the bytes read. `sequential`: the read goes
    /// on from where the last one ended (its index nodes are read whole and cached, for the
    /// reads after it; a random one may read index entries alone, [`Fs::unchecked_run`]).
    fn read_run(
        &mut self,
        ino: Ino,
        node: &FileNode,
        b: u32,
        dst: &mut [u8],
        sequential: bool,
    ) -> Result<usize> {
        let p = self.store.p();
        let bs = p.data_block as usize;
        let unchecked = if sequential {
            None
        } else {
            self.unchecked_run(ino, node, b, dst.len() / bs)?
        };
        let (first, count) = match unchecked {
            Some(run) => run,
            None => match self.verified_run(ino, node, b, dst)? {
                Some(run) => run,
                None => return Ok(bs),
            },
        };
        // One read for the run, slots and their CRCs included; a block that fails its CRC is
        // read again on its own (the error may be transient), or through the verified index
        // when its address was not checked.
        let (stride, slot) = (p.stride(), p.data_slot() as usize);
        let mut raw = vec![0u8; (count - 1) * slot + bs + DATA_CRC_LEN as usize];
        let read = self.store.read(p.byte_of(first), &mut raw);
        for k in 0..count {
            let s = &raw[k * slot..k * slot + bs + DATA_CRC_LEN as usize];
            let out = &mut dst[k * bs..(k + 1) * bs];
            if read.is_ok() && node::data_slot_ok(ino, b + k as u32, s, bs) {
                out.copy_from_slice(&s[..bs]);
            } else if let Err(e @ Error::PowerLoss) = read {
                return Err(e);
            } else if unchecked.is_some() {
                return self.read_run(ino, node, b, dst, true);
            } else {
                let a = Addr(first.0 + k as u32 * stride);
                self.read_data(a, ino, b + k as u32, out)?;
            }
        }
        Ok(count * bs)
    }

    /// [`Fs::read_run`] through the verified index: the first block's address and how many
    /// follow it contiguously on NOR (not cached); `None` when the first block was read
    /// already (a hole, NAND, a compressed block).
    fn verified_run(
        &mut self,
        ino: Ino,
        node: &FileNode,
        b: u32,
        dst: &mut [u8],
    ) -> Result<Option<(Addr, usize)>> {
        let p = self.store.p();
        let bs = p.data_block as usize;
        let first = match self.block_src(ino, node, b)? {
            Src::Hole => {
                dst[..bs].fill(0);
                return Ok(None);
            }
            Src::At(a) => a,
        };
        if p.geometry.flash_kind() == FlashKind::Nand || first.is_packed() {
            self.read_data(first, ino, b, &mut dst[..bs])?;
            return Ok(None);
        }
        if !p.addr_valid(first) {
            return Err(Error::Corrupt);
        }
        // NOR: extend the run while the next block follows contiguously and is not cached.
        let mut count = 1usize;
        while (count + 1) * bs <= dst.len() && count < 64 {
            let nb = b + count as u32;
            if self.data_cache.get(ino, nb).is_some() {
                break;
            }
            match self.block_src(ino, node, nb)? {
                Src::At(a) if continues_run(&p, first, count, a) => count += 1,
                _ => break,
            }
        }
        Ok(Some((first, count)))
    }
}

/// Whether address `a` is block `count` of a NOR run that starts at `first`: the next slot of
/// the same erase block.
fn continues_run(p: &Params, first: Addr, count: usize, a: Addr) -> bool {
    Some(a.0) == first.0.checked_add(count as u32 * p.stride())
        && p.block_of(a) == p.block_of(first)
}
