//! Reading back what the store wrote: byte ranges (through the heads' page buffers, across
//! pages and remapped blocks), whole NAND pages with their OOB, and nodes checked by their CRC,
//! read again when a check fails (the error may be transient).
//!
//! It must never write and never interpret a node beyond its header and CRC.

use alloc::vec;
use alloc::vec::Vec;

use super::medium::{Cause, READ_RETRIES};
use super::{Phase, Store};
use crate::error::{Error, Result};
use crate::format::codec::crc32c;
use crate::format::node::{self, NodeHeader, NodeType, OobTag, Probe, OOB_TAG_LEN, TAG_DATA};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, NODE_HEADER};
use dffs_flash::{EccStatus, Flash, FlashKind};

impl<F: Flash> Store<F> {
    /// If `[pos, pos+len)` lies in a head's buffered page, copies it from RAM.
    fn read_from_buffers(&self, pos: u64, buf: &mut [u8]) -> bool {
        let bs = self.p.geometry.block_size() as u64;
        for h in self.heads.iter() {
            if !h.is_open() || h.buf.is_empty() {
                continue;
            }
            let start = h.block as u64 * bs + h.buf_page as u64;
            let end = start + h.buf.len() as u64;
            if pos >= start && pos + buf.len() as u64 <= end {
                let o = (pos - start) as usize;
                buf.copy_from_slice(&h.buf[o..o + buf.len()]);
                return true;
            }
        }
        false
    }

    /// The first read of a node at `pos` (in one NAND page): from a head's buffer, or through
    /// the medium's page cache (NAND), so nodes packed into one page cost one page read.
    fn read_node_start(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        if self.read_from_buffers(pos, buf) {
            return Ok(());
        }
        let ps = self.p.geometry.page_size as u64;
        if self.p.geometry.flash_kind() != FlashKind::Nand || pos % ps + buf.len() as u64 > ps {
            return self.read_inner(pos, buf);
        }
        let pp = self.phys_pos(pos);
        self.medium.read_cached(pp, buf)
    }

    /// Reads `buf.len()` bytes at logical byte offset `pos`; uncorrectable data is `Io`.
    /// (Counted as [`Cause::Other`] unless a phase says otherwise: callers that know what they
    /// read use the typed reads below.)
    pub fn read(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        self.medium.cause = self.read_cause(Cause::Other);
        self.read_inner(pos, buf)
    }

    /// Reads `buf.len()` bytes of an index node at `pos`, unchecked (some of its entries:
    /// `IndexTree::lookup_run_unchecked`).
    pub fn read_index_entries(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        self.medium.cause = self.read_cause(Cause::Index);
        self.read_inner(pos, buf)
    }

    /// What a read of `what` counts as in the current phase.
    fn read_cause(&self, what: Cause) -> Cause {
        match self.phase {
            Phase::Op => what,
            Phase::Checkpoint => Cause::Checkpoint,
            Phase::Gc => Cause::GcRead,
            Phase::Mount => Cause::Mount,
        }
    }

    fn read_inner(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        if self.read_from_buffers(pos, buf) {
            return Ok(());
        }
        let g = self.p.geometry;
        let ps = g.page_size as u64;
        let end = pos + buf.len() as u64;
        if g.flash_kind() == FlashKind::Nand && pos / ps != (end.max(1) - 1) / ps {
            // A node that runs from a programmed page into a buffered one (a compressed data
            // node): read page by page so each part comes from where it is.
            let bsz = g.block_size() as u64;
            let buffered = self.heads.iter().any(|h| {
                let start = h.block as u64 * bsz + h.buf_page as u64;
                h.is_open() && !h.buf.is_empty() && start < end && start + ps > pos
            });
            if buffered {
                let split = (pos / ps + 1) * ps;
                let (a, b) = buf.split_at_mut((split - pos) as usize);
                self.read_inner(pos, a)?;
                return self.read_inner(split, b);
            }
        }
        let bs = self.p.geometry.block_size() as u64;
        if pos / bs != (pos + buf.len().max(1) as u64 - 1) / bs {
            // Crosses a block boundary: read block by block (remaps differ).
            let split = ((pos / bs) + 1) * bs;
            let n = (split - pos) as usize;
            let (a, b) = buf.split_at_mut(n);
            self.read_inner(pos, a)?;
            return self.read_inner(split, b);
        }
        let pp = self.phys_pos(pos);
        self.medium.read(pp, buf)
    }

    /// Reads `buf.len()` bytes at `pos` until `ok` accepts them, at most
    /// `1 + READ_RETRIES` times: a CRC that fails may be a transient read error (NOR has no
    /// ECC to tell). Returns whether the bytes were accepted; an uncorrectable read counts as
    /// not accepted.
    pub fn read_checked(
        &mut self,
        pos: u64,
        buf: &mut [u8],
        ok: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool> {
        self.medium.cause = self.read_cause(Cause::Data);
        for _ in 0..=READ_RETRIES {
            match self.read_inner(pos, buf) {
                Ok(()) if ok(buf) => return Ok(true),
                Ok(()) | Err(Error::Io) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Reads a NAND page's data and free OOB bytes (logical page number) from flash (not from
    /// write buffers: flush first); returns the ECC status.
    pub fn read_page(&mut self, page: u32, data: &mut [u8], oob: &mut [u8]) -> Result<EccStatus> {
        let g = self.p.geometry;
        let pos = page as u64 * g.page_size as u64;
        let ppage = (self.phys_pos(pos) / g.page_size as u64) as u32;
        self.medium.cause = self.read_cause(Cause::Data);
        self.medium.read_page(ppage, 0, data, oob)
    }

    /// Reads NAND page `page` with its OOB tag, and reads it again, at most [`READ_RETRIES`]
    /// more times, while a read the ECC called good gives a tag that fails its check or, for a
    /// data tag, data that fails the tag's CRC. The free OOB bytes are not covered by every
    /// controller's ECC (Linux's software ECC protects the data area only; nandsim's
    /// `bitflips=` flips OOB bits too), so a bit error there reads as a corrupt tag with a
    /// `Clean` status, and is as transient as the errors the ECC reports. An `Uncorrectable`
    /// read is returned as it is ([`Store::read_page`] has retried it already). Returns the
    /// last status and the last tag (an erased tag is `Ok(None)` and is not retried). With an
    /// empty `data` only the free OOB bytes are read (no data transferred: what a recovery's
    /// scan for commit runs needs of most pages), and only the tag's check is retried.
    pub fn read_tagged_page(
        &mut self,
        page: u32,
        data: &mut [u8],
    ) -> Result<(EccStatus, Result<Option<OobTag>>)> {
        let n = OOB_TAG_LEN.min(self.p.geometry.oob_free_len as usize);
        let mut tries = 0;
        loop {
            let mut oob = [0xFFu8; OOB_TAG_LEN];
            let st = self.read_page(page, data, &mut oob[..n])?;
            let tag = OobTag::decode(&oob, self.p.geometry.page_size);
            // Settled: uncorrectable (retried below us already), erased, or a tag (and data)
            // that passes its checks.
            let settled = st == EccStatus::Uncorrectable
                || match &tag {
                    Ok(None) => true,
                    Ok(Some(t)) => {
                        t.kind != TAG_DATA || data.is_empty() || t.data_crc == crc32c(data)
                    }
                    Err(_) => false,
                };
            if settled || tries == READ_RETRIES {
                if settled && tries > 0 && st != EccStatus::Uncorrectable {
                    self.medium.note_recovered();
                }
                return Ok((st, tag));
            }
            tries += 1;
        }
    }

    /// Reads a complete node at `a` (at most `max_len` bytes long), checks its CRC and type,
    /// and returns its bytes (header included, padding excluded). A node that fails its checks
    /// is read again (at most [`READ_RETRIES`] times) before it is reported `Corrupt`: the error
    /// may have been a transient one.
    pub fn read_node(
        &mut self,
        a: Addr,
        typ: NodeType,
        max_len: u32,
    ) -> Result<(NodeHeader, Vec<u8>)> {
        if !self.p.addr_valid(a) {
            return Err(Error::Corrupt);
        }
        let pos = self.p.byte_of(a);
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let room = (bs - pos % bs) as u32;
        let max_len = max_len.min(room);
        if max_len < NODE_HEADER {
            return Err(Error::Corrupt);
        }
        let first = match g.flash_kind() {
            // One operation for the whole node (nodes never cross NAND pages unless they are
            // larger than a page).
            FlashKind::Nand => {
                let to_page_end = g.page_size - (pos % g.page_size as u64) as u32;
                max_len.min(to_page_end.max(NODE_HEADER))
            }
            FlashKind::Nor => max_len.min(256),
        };
        let mut err = Error::Corrupt;
        let mut retry = false;
        let mut span = first;
        self.medium.cause = self.read_cause(node_cause(typ));
        for _ in 0..=READ_RETRIES {
            let mut buf = vec![0u8; span as usize];
            // A retry reads the device again, not the page the failed attempt cached.
            if retry {
                self.medium.drop_cached();
            }
            retry = true;
            match self.read_node_start(pos, &mut buf) {
                Ok(()) => {}
                Err(Error::Io) => {
                    err = Error::Io;
                    // The ECC may have failed past the node (a damaged end of the page, or
                    // another node's codeword): the next try reads the header alone, then
                    // the node's own bytes.
                    span = NODE_HEADER;
                    continue;
                }
                Err(e) => return Err(e),
            }
            let hdr = match node::probe(&buf, max_len) {
                Probe::Header(h) if h.typ == typ => h,
                // Nothing was ever written there: no second read will find a node.
                Probe::Erased => return Err(Error::Corrupt),
                _ => {
                    err = Error::Corrupt;
                    continue;
                }
            };
            if hdr.len as usize > buf.len() {
                let have = buf.len();
                buf.resize(hdr.len as usize, 0);
                match self.read_inner(pos + have as u64, &mut buf[have..]) {
                    Ok(()) => {}
                    Err(Error::Io) => {
                        err = Error::Io;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            buf.truncate(hdr.len as usize);
            if node::verify(&buf, &hdr).is_ok() {
                return Ok((hdr, buf));
            }
            err = Error::Corrupt;
        }
        Err(err)
    }
}

/// What reading a node of type `typ` is for.
fn node_cause(typ: NodeType) -> Cause {
    match typ {
        NodeType::Checkpoint => Cause::Checkpoint,
        NodeType::DirRoot | NodeType::DirBucket | NodeType::DirTable => Cause::Dir,
        NodeType::Inode => Cause::Inode,
        NodeType::Index => Cause::Index,
        NodeType::MapLeaf
        | NodeType::MapInterior
        | NodeType::BlockTable
        | NodeType::BlockTableDelta
        | NodeType::BlockTableDir => Cause::Map,
        NodeType::Data | NodeType::DataZ => Cause::Data,
        _ => Cause::Journal,
    }
}
