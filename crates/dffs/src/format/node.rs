//! The common framing of everything DFFS writes: node headers, node types, and the tags NAND
//! pages carry in their spare (OOB) area.
//!
//! Owns the byte layout of the 24-byte node header (magic, type, flags, length, sequence
//! number, owner inode, CRC-32C) and of the 20-byte OOB tag, and the rules that decide whether
//! bytes read from flash are a valid node. It must never interpret node bodies: each structure
//! (directory page, inode, journal record…) decodes its own body.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::{crc32c, crc32c_parts, Reader, Writer};
use crate::format::params::NODE_HEADER;

/// First two bytes of every node ("DF").
pub const NODE_MAGIC: u16 = 0x4644;

/// Node types. The numbers are part of the on-flash format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NodeType {
    /// A checkpoint (in an anchor block).
    Checkpoint = 0x01,
    /// Journal: link from one journal block to the next.
    JLink = 0x10,
    /// Journal: start of a mount session (written before anything else after a clean mount).
    JSession = 0x11,
    /// Journal: creation of a file, directory or symlink.
    JCreate = 0x12,
    /// Journal: removal of a name (unlink or rmdir).
    JUnlink = 0x13,
    /// Journal: rename.
    JRename = 0x14,
    /// Journal: attribute change.
    JSetattr = 0x15,
    /// Journal: commit of a file's content and size.
    JCommit = 0x16,
    /// Journal: commit of a transaction.
    JTxCommit = 0x17,
    /// Journal: a bad block was swapped for a spare.
    JRemap = 0x18,
    /// Journal: a new name (hard link) for an existing file.
    JHardLink = 0x19,
    /// Journal: the user-data head continues in a new block, which recovery scans for commit
    /// runs (FORMAT.md §8.7).
    JDataBlock = 0x1A,
    /// Journal: free blocks the allocator may erase before the next checkpoint (a mount after
    /// a power cut reads their first page to count an erase it finds; FORMAT.md §11).
    JErasing = 0x1B,
    /// Directory inode page (attributes, name, embedded buckets or bucket table).
    DirRoot = 0x20,
    /// Directory bucket page (the paper's virtual DirInode).
    DirBucket = 0x21,
    /// Directory bucket-table page (for very large directories).
    DirTable = 0x22,
    /// File inode node.
    Inode = 0x30,
    /// File index node.
    Index = 0x31,
    /// Inode map leaf page.
    MapLeaf = 0x40,
    /// Inode map interior page.
    MapInterior = 0x41,
    /// Block table page.
    BlockTable = 0x42,
    /// Block-table records that differ from their pages (a checkpoint's changes carried
    /// without rewriting the pages).
    BlockTableDelta = 0x43,
    /// Where the block-table pages are, for a checkpoint whose slot cannot list them all
    /// (FORMAT §8.2).
    BlockTableDir = 0x44,
    /// Data node header (payload follows the header).
    Data = 0x50,
    /// Compressed data node: one file block, compressed, inside the node (its CRC covers the
    /// compressed bytes; header flags give the algorithm). See COMPRESSION.md.
    DataZ = 0x51,
}

impl NodeType {
    /// Decodes a node type.
    pub fn from_u8(v: u8) -> Option<NodeType> {
        use NodeType::*;
        Some(match v {
            0x01 => Checkpoint,
            0x10 => JLink,
            0x11 => JSession,
            0x12 => JCreate,
            0x13 => JUnlink,
            0x14 => JRename,
            0x15 => JSetattr,
            0x16 => JCommit,
            0x17 => JTxCommit,
            0x18 => JRemap,
            0x19 => JHardLink,
            0x1A => JDataBlock,
            0x1B => JErasing,
            0x20 => DirRoot,
            0x21 => DirBucket,
            0x22 => DirTable,
            0x30 => Inode,
            0x31 => Index,
            0x40 => MapLeaf,
            0x41 => MapInterior,
            0x42 => BlockTable,
            0x43 => BlockTableDelta,
            0x44 => BlockTableDir,
            0x50 => Data,
            0x51 => DataZ,
            _ => return None,
        })
    }

    /// Whether nodes of this type are journal records.
    pub fn is_journal(self) -> bool {
        (self as u8) & 0xF0 == 0x10
    }
}

/// A decoded node header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeHeader {
    /// Node type.
    pub typ: NodeType,
    /// Type-specific flags.
    pub flags: u8,
    /// Length in bytes of header plus body (a data node's payload is not included).
    pub len: u32,
    /// Global sequence number: strictly increasing over everything written.
    pub seq: u64,
    /// Owner inode number (0 when the node has no owner).
    pub ino: u32,
}

/// What a header probe found at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Never-programmed bytes: the end of what was written here.
    Erased,
    /// Zero padding: skip one address unit.
    Padding,
    /// Bytes that are neither a node header nor padding.
    Garbage,
    /// A plausible header (its CRC still has to be checked over the whole node).
    Header(NodeHeader),
}

/// Looks at the bytes at the start of `buf` (at least [`NODE_HEADER`] bytes or all that is left)
/// and says what they are. `max_len` bounds the node length that is plausible here.
pub fn probe(buf: &[u8], max_len: u32) -> Probe {
    if buf.len() < 2 {
        return Probe::Garbage;
    }
    let magic = u16::from_le_bytes([buf[0], buf[1]]);
    if magic == 0xFFFF {
        return Probe::Erased;
    }
    if magic == 0 {
        return Probe::Padding;
    }
    if magic != NODE_MAGIC || buf.len() < NODE_HEADER as usize {
        return Probe::Garbage;
    }
    let mut r = Reader::new(&buf[2..]);
    let (Ok(t), Ok(flags), Ok(len), Ok(seq), Ok(ino)) = (r.u8(), r.u8(), r.u32(), r.u64(), r.u32())
    else {
        return Probe::Garbage;
    };
    let Some(typ) = NodeType::from_u8(t) else {
        return Probe::Garbage;
    };
    if len < NODE_HEADER || len > max_len {
        return Probe::Garbage;
    }
    Probe::Header(NodeHeader {
        typ,
        flags,
        len,
        seq,
        ino,
    })
}

/// Verifies the CRC of a whole node (`buf` holds at least `hdr.len` bytes) and returns its body.
pub fn verify<'a>(buf: &'a [u8], hdr: &NodeHeader) -> Result<&'a [u8]> {
    let len = hdr.len as usize;
    if buf.len() < len {
        return Err(Error::Corrupt);
    }
    let stored = u32::from_le_bytes([buf[20], buf[21], buf[22], buf[23]]);
    let crc = crc32c_parts(&[&buf[..20], &buf[NODE_HEADER as usize..len]]);
    if crc != stored {
        return Err(Error::Corrupt);
    }
    Ok(&buf[NODE_HEADER as usize..len])
}

/// Parses and verifies a complete node at the start of `buf`, expecting type `typ`.
pub fn parse(buf: &[u8], typ: NodeType) -> Result<(NodeHeader, &[u8])> {
    match probe(buf, buf.len() as u32) {
        Probe::Header(h) if h.typ == typ => {
            let body = verify(buf, &h)?;
            Ok((h, body))
        }
        _ => Err(Error::Corrupt),
    }
}

/// Builds a node: header first, body appended by the caller, length and CRC filled by
/// [`NodeBuilder::finish`].
pub struct NodeBuilder {
    /// The node bytes (header placeholder and body so far).
    pub w: Writer,
}

impl NodeBuilder {
    /// Starts a node of `typ` owned by `ino`.
    pub fn new(typ: NodeType, flags: u8, ino: u32, capacity: usize) -> NodeBuilder {
        let mut w = Writer::with_capacity(capacity.max(NODE_HEADER as usize));
        w.u16(NODE_MAGIC)
            .u8(typ as u8)
            .u8(flags)
            .u32(0)
            .u64(0)
            .u32(ino)
            .u32(0);
        NodeBuilder { w }
    }

    /// Fills in length, sequence number and CRC, and pads with zeros to a multiple of `align`
    /// (the padding is not part of the node). Returns the bytes to program.
    pub fn finish(mut self, seq: u64, align: u32) -> Vec<u8> {
        let len = self.w.len() as u32;
        self.w.put_u32_at(4, len);
        self.w.buf[8..16].copy_from_slice(&seq.to_le_bytes());
        let crc = crc32c_parts(&[&self.w.buf[..20], &self.w.buf[NODE_HEADER as usize..]]);
        self.w.put_u32_at(20, crc);
        self.w.pad_to(align as usize, 0);
        self.w.buf
    }

    /// Pads the body with zeros to exactly `total` bytes (fixed-size nodes such as directory
    /// pages), then finishes.
    pub fn finish_fixed(mut self, seq: u64, total: u32) -> Vec<u8> {
        let cur = self.w.len();
        if cur < total as usize {
            self.w.fill(0, total as usize - cur);
        }
        self.finish(seq, 1)
    }
}

/// The CRC that follows file block `block` of inode `ino` in a NOR data node: CRC-32C of the
/// inode and block numbers (little-endian) followed by the block's bytes, so a block read back
/// at the wrong address (or for the wrong file) fails its check as surely as a flipped bit.
pub fn data_block_crc(ino: u32, block: u32, data: &[u8]) -> u32 {
    crate::format::codec::crc32c_parts(&[&ino.to_le_bytes(), &block.to_le_bytes(), data])
}

/// Appends file blocks `first, first+1, …` (the consecutive `block`-byte pieces of `data`) to
/// `out` as NOR data-node slots: each block, its [`data_block_crc`], zeros up to `slot` bytes.
pub fn put_data_slots(
    out: &mut Vec<u8>,
    ino: u32,
    first: u32,
    data: &[u8],
    block: usize,
    slot: usize,
) {
    for (k, blk) in data.chunks(block).enumerate() {
        let start = out.len();
        out.extend_from_slice(blk);
        let crc = data_block_crc(ino, first.wrapping_add(k as u32), blk);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(start + slot, 0);
    }
}

/// Checks a NOR data-node slot (a block of `block` bytes followed by its CRC) read back for
/// file block `b` of `ino`.
pub fn data_slot_ok(ino: u32, b: u32, slot: &[u8], block: usize) -> bool {
    if slot.len() < block + 4 {
        return false;
    }
    let stored = u32::from_le_bytes([
        slot[block],
        slot[block + 1],
        slot[block + 2],
        slot[block + 3],
    ]);
    stored == data_block_crc(ino, b, &slot[..block])
}

/// Size of the OOB tag a NAND page carries.
pub const OOB_TAG_LEN: usize = 20;

/// OOB tag kind of a raw data page (`flags`: [`TAG_FIRST`], [`TAG_COMMIT`]).
pub const TAG_DATA: u8 = 0xD1;
/// OOB tag kind of a page holding nodes.
pub const TAG_NODES: u8 = 0xD2;
/// OOB tag kind of a raw data page that ends a commit of its file and sets the file's size:
/// bytes 1 and 6..10 hold `size − 1` (40 bits) instead of `flags` and `block`; the block is
/// `(size − 1) / page_size`.
pub const TAG_DATA_SIZE: u8 = 0xD5;
/// As [`TAG_DATA_SIZE`], for a page that is also the first of its commit.
pub const TAG_DATA_SIZE_FIRST: u8 = 0xD7;
/// Data tag flag: the first page of a commit run (see [`DataEnd`]).
pub const TAG_FIRST: u8 = 0x01;
/// Data tag flag: the page ends a commit run; the file's size stays what it was.
pub const TAG_COMMIT: u8 = 0x02;
/// Largest file size a [`TAG_DATA_SIZE`] tag can carry.
pub const TAG_MAX_SIZE: u64 = 1 << 40;

/// What a data page's tag says about the commit it belongs to: a synced write of consecutive
/// file blocks programmed as consecutive pages of one data block ends with a page that commits
/// them (FORMAT.md §8.7), so that no journal record is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataEnd {
    /// An ordinary data page (or a page inside a commit run).
    No,
    /// The last page of a commit run; the file keeps its size.
    Commit,
    /// The last page of a commit run; the file's size becomes this (the page holds its last
    /// block).
    CommitSize(u64),
}

/// The tag in the free OOB bytes of a NAND page: says whether the page holds raw file data
/// (and whose) or nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OobTag {
    /// [`TAG_DATA`] (for every kind of data tag) or [`TAG_NODES`].
    pub kind: u8,
    /// Flags of a data page other than the commit's end ([`TAG_FIRST`]).
    pub flags: u8,
    /// Owner inode of a data page.
    pub ino: u32,
    /// File block index of a data page.
    pub block: u32,
    /// Low 32 bits of the sequence number of the write.
    pub seq: u32,
    /// CRC-32C of the page's data area (data pages only).
    pub data_crc: u32,
    /// Whether the page ends a commit (data pages only).
    pub end: DataEnd,
}

impl OobTag {
    /// Whether this data page is the first of a commit run.
    pub fn first(&self) -> bool {
        self.flags & TAG_FIRST != 0
    }

    /// Encodes the tag (20 bytes, last two a check value). A [`DataEnd::CommitSize`] tag's
    /// block must be `(size − 1) / page_size` and its size at most [`TAG_MAX_SIZE`].
    pub fn encode(&self) -> [u8; OOB_TAG_LEN] {
        let mut b = [0u8; OOB_TAG_LEN];
        b[0] = self.kind;
        b[1] = self.flags;
        b[2..6].copy_from_slice(&self.ino.to_le_bytes());
        b[6..10].copy_from_slice(&self.block.to_le_bytes());
        match self.end {
            DataEnd::No => {}
            DataEnd::Commit => b[1] |= TAG_COMMIT,
            DataEnd::CommitSize(size) => {
                let v = size.saturating_sub(1);
                b[0] = if self.first() {
                    TAG_DATA_SIZE_FIRST
                } else {
                    TAG_DATA_SIZE
                };
                b[1] = (v >> 32) as u8;
                b[6..10].copy_from_slice(&(v as u32).to_le_bytes());
            }
        }
        b[10..14].copy_from_slice(&self.seq.to_le_bytes());
        b[14..18].copy_from_slice(&self.data_crc.to_le_bytes());
        let c = crc32c(&b[..18]) as u16;
        b[18..20].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes a tag of a page of `page_size` bytes: `Ok(None)` when the bytes are erased
    /// (page never programmed), `Err(Corrupt)` when they are neither erased nor a valid tag.
    pub fn decode(b: &[u8], page_size: u32) -> Result<Option<OobTag>> {
        if b.len() < OOB_TAG_LEN {
            return Err(Error::Corrupt);
        }
        if b[..OOB_TAG_LEN].iter().all(|&x| x == 0xFF) {
            return Ok(None);
        }
        let c = crc32c(&b[..18]) as u16;
        if c != u16::from_le_bytes([b[18], b[19]]) {
            return Err(Error::Corrupt);
        }
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut t = OobTag {
            kind: b[0],
            flags: b[1],
            ino: u(2),
            block: u(6),
            seq: u(10),
            data_crc: u(14),
            end: DataEnd::No,
        };
        match b[0] {
            TAG_NODES => {}
            TAG_DATA => {
                if t.flags & !(TAG_FIRST | TAG_COMMIT) != 0 {
                    return Err(Error::Corrupt);
                }
                if t.flags & TAG_COMMIT != 0 {
                    t.end = DataEnd::Commit;
                    t.flags &= !TAG_COMMIT;
                }
            }
            TAG_DATA_SIZE | TAG_DATA_SIZE_FIRST => {
                let size = ((b[1] as u64) << 32 | u(6) as u64) + 1;
                let block = (size - 1) / page_size.max(1) as u64;
                if block > u32::MAX as u64 {
                    return Err(Error::Corrupt);
                }
                t.kind = TAG_DATA;
                t.flags = if b[0] == TAG_DATA_SIZE_FIRST {
                    TAG_FIRST
                } else {
                    0
                };
                t.block = block as u32;
                t.end = DataEnd::CommitSize(size);
            }
            _ => return Err(Error::Corrupt),
        }
        Ok(Some(t))
    }

    /// The tag of a page holding nodes.
    pub fn nodes(seq: u64) -> OobTag {
        OobTag {
            kind: TAG_NODES,
            flags: 0,
            ino: 0,
            block: 0,
            seq: seq as u32,
            data_crc: 0,
            end: DataEnd::No,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_roundtrip_and_crc_detects_flips() {
        let mut b = NodeBuilder::new(NodeType::Inode, 3, 42, 64);
        b.w.bytes(b"hello world");
        let bytes = b.finish(7, 8);
        assert_eq!(bytes.len() % 8, 0);
        let (h, body) = parse(&bytes, NodeType::Inode).unwrap();
        assert_eq!((h.flags, h.seq, h.ino, h.len), (3, 7, 42, 35));
        assert_eq!(body, b"hello world");
        for i in 0..h.len as usize {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(
                parse(&bad, NodeType::Inode).is_err(),
                "flip at {i} undetected"
            );
        }
        assert!(parse(&bytes, NodeType::Index).is_err());
    }

    #[test]
    fn probe_classifies() {
        assert_eq!(probe(&[0xFF; 24], 100), Probe::Erased);
        assert_eq!(probe(&[0; 24], 100), Probe::Padding);
        assert_eq!(probe(&[1; 24], 100), Probe::Garbage);
        let bytes = NodeBuilder::new(NodeType::JLink, 0, 0, 0).finish(1, 8);
        assert!(matches!(probe(&bytes, 100), Probe::Header(_)));
        // A length beyond what is plausible is garbage, not a huge allocation.
        assert_eq!(probe(&bytes, 10), Probe::Garbage);
    }

    #[test]
    fn oob_tag_roundtrip() {
        let t = OobTag {
            kind: TAG_DATA,
            flags: 0,
            ino: 9,
            block: 1234,
            seq: 99,
            data_crc: 0xABCD,
            end: DataEnd::No,
        };
        let e = t.encode();
        assert_eq!(
            e,
            [0xd1, 0, 9, 0, 0, 0, 0xd2, 4, 0, 0, 99, 0, 0, 0, 0xcd, 0xab, 0, 0, e[18], e[19]]
        );
        assert_eq!(OobTag::decode(&e, 2048).unwrap(), Some(t));
        assert_eq!(OobTag::decode(&[0xFF; 20], 2048).unwrap(), None);
        let mut bad = e;
        bad[7] ^= 1;
        assert_eq!(OobTag::decode(&bad, 2048), Err(Error::Corrupt));
    }

    #[test]
    fn commit_tags_roundtrip_and_carry_the_size() {
        let base = OobTag {
            kind: TAG_DATA,
            flags: TAG_FIRST,
            ino: 7,
            block: 3,
            seq: 5,
            data_crc: 1,
            end: DataEnd::Commit,
        };
        let e = base.encode();
        assert_eq!((e[0], e[1]), (TAG_DATA, TAG_FIRST | TAG_COMMIT));
        let d = OobTag::decode(&e, 2048).unwrap().unwrap();
        assert_eq!(d, base);
        assert!(d.first());
        // A size whose last byte is in block 3 of 2 KiB blocks, beyond 32 bits of size.
        for (size, block) in [
            (3 * 2048 + 1, 3u32),
            (4 * 2048, 3),
            ((1u64 << 33) + 5, 1 << 22),
        ] {
            for first in [0, TAG_FIRST] {
                let t = OobTag {
                    flags: first,
                    block,
                    end: DataEnd::CommitSize(size),
                    ..base
                };
                let e = t.encode();
                let want = if first != 0 {
                    TAG_DATA_SIZE_FIRST
                } else {
                    TAG_DATA_SIZE
                };
                assert_eq!(e[0], want);
                assert_eq!(OobTag::decode(&e, 2048).unwrap(), Some(t), "size {size}");
            }
        }
        // The largest size a tag can carry.
        let t = OobTag {
            block: ((TAG_MAX_SIZE - 1) / 4096) as u32,
            end: DataEnd::CommitSize(TAG_MAX_SIZE),
            ..base
        };
        assert_eq!(OobTag::decode(&t.encode(), 4096).unwrap(), Some(t));
        // Unknown flag bits are corrupt.
        let mut bad = OobTag {
            flags: 0,
            end: DataEnd::No,
            ..base
        }
        .encode();
        bad[1] = 0x80;
        let c = crc32c(&bad[..18]) as u16;
        bad[18..20].copy_from_slice(&c.to_le_bytes());
        assert_eq!(OobTag::decode(&bad, 2048), Err(Error::Corrupt));
    }
}
