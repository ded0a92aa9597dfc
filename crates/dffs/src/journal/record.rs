//! Journal records: what every change since the last checkpoint looks like on flash.
//!
//! The only encoder and decoder of every record type, including the block link (`JLink`) and
//! the session marker (`JSession`) that the journal writer puts down itself.
//!
//! Owns the [`Record`] type and its encoding. Every modifying operation is expressed as one or
//! more records; the file system applies a record to its RAM state with the same code whether
//! the operation is happening now or being replayed after a power cut, so replay can never
//! drift from what was done live. This module must never apply records (that is the file
//! system's job) nor decide when they are written.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino, Time, S_IFMT};
use crate::format::codec::{Reader, Writer};
use crate::format::extents::{BlockMap, ExtentMap};
use crate::format::node::{NodeBuilder, NodeHeader, NodeType};
use crate::format::params::{Addr, NAME_MAX, NODE_HEADER};

/// Transaction id: 0 for records that commit themselves.
pub type Tid = u64;

/// Attribute fields a `Setattr` record changes.
pub mod mask {
    /// Mode (permission bits).
    pub const MODE: u32 = 1;
    /// Owner.
    pub const UID: u32 = 2;
    /// Group.
    pub const GID: u32 = 4;
    /// Access time.
    pub const ATIME: u32 = 8;
    /// Modification time.
    pub const MTIME: u32 = 16;
    /// Change time (always set with any of the others).
    pub const CTIME: u32 = 32;
    /// The file's compression for data written from now on; the algorithm (see
    /// [`crate::format::compress`]) is in bits 8..15 of the mask.
    pub const COMPRESS: u32 = 64;
    /// Shift of the algorithm within the mask when [`COMPRESS`] is set.
    pub const COMPRESS_SHIFT: u32 = 8;
}

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// First record written in a mount session after a clean mount.
    Session,
    /// The journal continues in block `next`; this block followed `prev`.
    Link {
        /// Previous journal block.
        prev: u32,
        /// Block the journal continues in after this one.
        next: u32,
    },
    /// A file, directory or symlink named `name` was created in `parent`.
    Create {
        /// Transaction.
        tid: Tid,
        /// The new inode.
        ino: Ino,
        /// Parent directory.
        parent: Ino,
        /// Attributes (type in `mode`).
        attrs: Attrs,
        /// Name.
        name: Vec<u8>,
        /// Symlink target (empty otherwise).
        target: Vec<u8>,
    },
    /// The entry of `ino` (name key `key`) was removed from `parent`.
    Unlink {
        /// Transaction.
        tid: Tid,
        /// Inode whose name was removed.
        ino: Ino,
        /// Whether it is a directory.
        is_dir: bool,
        /// Parent directory.
        parent: Ino,
        /// Hash key of the removed name.
        key: u32,
        /// Time of the change (parent mtime/ctime).
        time: Time,
    },
    /// File `ino` got another name, `name` in `parent` (a hard link).
    HardLink {
        /// Transaction.
        tid: Tid,
        /// The file.
        ino: Ino,
        /// Directory of the new name.
        parent: Ino,
        /// The new name.
        name: Vec<u8>,
        /// Time of the change (the file's ctime, the directory's mtime and ctime).
        time: Time,
    },
    /// `ino` moved from (`old_parent`, key `old_key`) to (`new_parent`, `name`), replacing
    /// `victim` (0: none) if that name existed.
    Rename {
        /// Transaction.
        tid: Tid,
        /// Inode renamed.
        ino: Ino,
        /// Whether it is a directory.
        is_dir: bool,
        /// Old parent.
        old_parent: Ino,
        /// Hash key of the old name.
        old_key: u32,
        /// New parent.
        new_parent: Ino,
        /// New name.
        name: Vec<u8>,
        /// Inode that had the new name and is replaced (0 if none).
        victim: Ino,
        /// Whether the victim is a directory.
        victim_is_dir: bool,
        /// Time of the change.
        time: Time,
    },
    /// Attributes of `ino` changed.
    Setattr {
        /// Transaction.
        tid: Tid,
        /// Inode.
        ino: Ino,
        /// Which fields ([`mask`]).
        mask: u32,
        /// New values (fields not in `mask` are ignored).
        attrs: Attrs,
    },
    /// A file's content and size as of a sync (or close).
    Commit {
        /// Transaction.
        tid: Tid,
        /// Inode.
        ino: Ino,
        /// New size.
        size: u64,
        /// New modification time.
        mtime: Time,
        /// New change time.
        ctime: Time,
        /// Blocks at or beyond `ceil(trunc_to / block)` of the previous content are dropped
        /// before the extents apply (the smallest size the file had since the last commit).
        trunc_to: Option<u64>,
        /// The whole content, for files kept inline in their inode.
        inline: Option<Vec<u8>>,
        /// Blocks written since the last commit.
        extents: ExtentMap,
        /// For large updates: the file's complete new block map (an index tree written for
        /// this update, or direct pointers), replacing the old one; `extents` then apply on top.
        map: Option<BlockMap>,
    },
    /// Transaction `tid` committed: its records take effect.
    TxCommit {
        /// Transaction.
        tid: Tid,
    },
    /// A bad block was swapped out: logical block `logical` now lives on physical block
    /// `physical`.
    Remap {
        /// Logical block.
        logical: u32,
        /// Physical block.
        physical: u32,
    },
    /// The user-data head continues in `block`: recovery scans it for commit runs (data pages
    /// whose tags commit them, FORMAT.md §8.7).
    DataBlock {
        /// The block.
        block: u32,
    },
    /// `blocks`, free and not known to be erased, may be erased before the next checkpoint: a
    /// mount after a power cut reads the first page of each that the checkpoint calls free,
    /// and counts an erase when it holds nothing written before the checkpoint. An entry
    /// with [`ERASED`] set names a block erased already, whose erase is counted whatever its
    /// first page holds.
    Erasing {
        /// The blocks (at most [`MAX_ERASING`]).
        blocks: Vec<u32>,
    },
}

/// Most blocks one `Erasing` record names.
pub const MAX_ERASING: usize = 64;

/// Bit of an `Erasing` entry: the block was erased before the record was written. Such a block
/// (taken to be an anchor outside the anchor area) stays erased until a later checkpoint
/// starts it, and an erased first page proves no erase otherwise (a free block may never have
/// been written).
pub const ERASED: u32 = 1 << 31;

fn put_name(w: &mut Writer, name: &[u8]) {
    w.u8(name.len() as u8).bytes(name);
}

fn get_name(r: &mut Reader<'_>) -> Result<Vec<u8>> {
    let n = r.u8()? as usize;
    let name = r.take(n)?;
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) || name.len() > NAME_MAX {
        return Err(Error::Corrupt);
    }
    Ok(name.to_vec())
}

/// Applies the fields of a `Setattr` record (`mask` `m`, values `new`) to `a`: the mode's
/// permission bits only, and each other field in the mask.
pub fn apply_setattr(a: &mut Attrs, m: u32, new: &Attrs) {
    if m & mask::MODE != 0 {
        a.mode = (a.mode & S_IFMT) | (new.mode & 0o7777);
    }
    if m & mask::UID != 0 {
        a.uid = new.uid;
    }
    if m & mask::GID != 0 {
        a.gid = new.gid;
    }
    if m & mask::ATIME != 0 {
        a.atime = new.atime;
    }
    if m & mask::MTIME != 0 {
        a.mtime = new.mtime;
    }
    if m & mask::CTIME != 0 {
        a.ctime = new.ctime;
    }
}

impl Record {
    /// The one record that replaying `self` then `next` amounts to, when there is one of the
    /// same size: two `Setattr` of the same inode outside transactions, neither changing the
    /// compression, make one with both masks (the journal writer folds the second into the
    /// first while the first is still in RAM: `chown`, `chmod` and `utimes` of a copied file
    /// cost one record).
    pub fn merged(&self, next: &Record) -> Option<Record> {
        match (self, next) {
            (
                Record::Setattr {
                    tid: 0,
                    ino,
                    mask: m1,
                    attrs: a1,
                },
                Record::Setattr {
                    tid: 0,
                    ino: ino2,
                    mask: m2,
                    attrs: a2,
                },
            ) if ino == ino2 && (m1 | m2) & mask::COMPRESS == 0 => {
                let mut attrs = *a1;
                apply_setattr(&mut attrs, *m2, a2);
                Some(Record::Setattr {
                    tid: 0,
                    ino: *ino,
                    mask: m1 | m2,
                    attrs,
                })
            }
            _ => None,
        }
    }

    /// The node type of this record.
    pub fn node_type(&self) -> NodeType {
        match self {
            Record::Session => NodeType::JSession,
            Record::Link { .. } => NodeType::JLink,
            Record::Create { .. } => NodeType::JCreate,
            Record::Unlink { .. } => NodeType::JUnlink,
            Record::Rename { .. } => NodeType::JRename,
            Record::Setattr { .. } => NodeType::JSetattr,
            Record::Commit { .. } => NodeType::JCommit,
            Record::TxCommit { .. } => NodeType::JTxCommit,
            Record::Remap { .. } => NodeType::JRemap,
            Record::HardLink { .. } => NodeType::JHardLink,
            Record::DataBlock { .. } => NodeType::JDataBlock,
            Record::Erasing { .. } => NodeType::JErasing,
        }
    }

    /// The record's transaction (0: commits itself).
    pub fn tid(&self) -> Tid {
        match self {
            Record::Create { tid, .. }
            | Record::Unlink { tid, .. }
            | Record::HardLink { tid, .. }
            | Record::Rename { tid, .. }
            | Record::Setattr { tid, .. }
            | Record::Commit { tid, .. } => *tid,
            _ => 0,
        }
    }

    /// The inode the record is about (0 if none).
    pub fn ino(&self) -> Ino {
        match self {
            Record::Create { ino, .. }
            | Record::Unlink { ino, .. }
            | Record::HardLink { ino, .. }
            | Record::Rename { ino, .. }
            | Record::Setattr { ino, .. }
            | Record::Commit { ino, .. } => *ino,
            _ => 0,
        }
    }

    /// Encodes the record as a node (sequence number and CRC are added when written).
    pub fn encode(&self) -> NodeBuilder {
        let mut nb = NodeBuilder::new(self.node_type(), 0, self.ino(), 64);
        let w = &mut nb.w;
        match self {
            Record::Session => {}
            Record::Link { prev, next } => {
                w.u32(*prev).u32(*next);
            }
            Record::Create {
                tid,
                parent,
                attrs,
                name,
                target,
                ..
            } => {
                w.u64(*tid).u32(*parent);
                attrs.encode(w);
                put_name(w, name);
                w.u16(target.len() as u16).bytes(target);
            }
            Record::Unlink {
                tid,
                is_dir,
                parent,
                key,
                time,
                ..
            } => {
                w.u64(*tid).u32(*parent).u32(*key).u8(*is_dir as u8);
                time.encode(w);
            }
            Record::HardLink {
                tid,
                parent,
                name,
                time,
                ..
            } => {
                w.u64(*tid).u32(*parent);
                time.encode(w);
                put_name(w, name);
            }
            Record::Rename {
                tid,
                is_dir,
                old_parent,
                old_key,
                new_parent,
                name,
                victim,
                victim_is_dir,
                time,
                ..
            } => {
                w.u64(*tid)
                    .u32(*old_parent)
                    .u32(*old_key)
                    .u32(*new_parent)
                    .u32(*victim)
                    .u8(*is_dir as u8 | (*victim_is_dir as u8) << 1);
                time.encode(w);
                put_name(w, name);
            }
            Record::Setattr {
                tid, mask, attrs, ..
            } => {
                w.u64(*tid).u32(*mask);
                attrs.encode(w);
            }
            Record::Commit {
                tid,
                size,
                mtime,
                ctime,
                trunc_to,
                inline,
                extents,
                map,
                ..
            } => {
                let flags = trunc_to.is_some() as u8
                    | (inline.is_some() as u8) << 1
                    | (map.is_some() as u8) << 2;
                w.u64(*tid).u64(*size);
                mtime.encode(w);
                ctime.encode(w);
                w.u8(flags);
                if let Some(t) = trunc_to {
                    w.u64(*t);
                }
                if let Some(d) = inline {
                    w.u16(d.len() as u16).bytes(d);
                }
                if let Some(m) = map {
                    w.u8(m.depth).u32(m.root.0).u8(m.direct.len() as u8);
                    for a in &m.direct {
                        w.u32(a.0);
                    }
                }
                extents.encode(w);
            }
            Record::TxCommit { tid } => {
                w.u64(*tid);
            }
            Record::Remap { logical, physical } => {
                w.u32(*logical).u32(*physical);
            }
            Record::DataBlock { block } => {
                w.u32(*block);
            }
            Record::Erasing { blocks } => {
                w.u16(blocks.len() as u16);
                for &b in blocks {
                    w.u32(b);
                }
            }
        }
        nb
    }

    /// Decodes a verified node's body into a record.
    pub fn decode(h: &NodeHeader, body: &[u8]) -> Result<Record> {
        let mut r = Reader::new(body);
        let ino = h.ino;
        let rec = match h.typ {
            NodeType::JSession => Record::Session,
            NodeType::JLink => Record::Link {
                prev: r.u32()?,
                next: r.u32()?,
            },
            NodeType::JCreate => {
                let tid = r.u64()?;
                let parent = r.u32()?;
                let attrs = Attrs::decode(&mut r)?;
                let name = get_name(&mut r)?;
                let tl = r.u16()? as usize;
                if tl > crate::format::params::SYMLINK_MAX {
                    return Err(Error::Corrupt);
                }
                let target = r.take(tl)?.to_vec();
                Record::Create {
                    tid,
                    ino,
                    parent,
                    attrs,
                    name,
                    target,
                }
            }
            NodeType::JUnlink => {
                let tid = r.u64()?;
                let parent = r.u32()?;
                let key = r.u32()?;
                let is_dir = r.u8()? & 1 != 0;
                let time = Time::decode(&mut r)?;
                Record::Unlink {
                    tid,
                    ino,
                    is_dir,
                    parent,
                    key,
                    time,
                }
            }
            NodeType::JHardLink => {
                let tid = r.u64()?;
                let parent = r.u32()?;
                let time = Time::decode(&mut r)?;
                let name = get_name(&mut r)?;
                Record::HardLink {
                    tid,
                    ino,
                    parent,
                    name,
                    time,
                }
            }
            NodeType::JRename => {
                let tid = r.u64()?;
                let old_parent = r.u32()?;
                let old_key = r.u32()?;
                let new_parent = r.u32()?;
                let victim = r.u32()?;
                let f = r.u8()?;
                let time = Time::decode(&mut r)?;
                let name = get_name(&mut r)?;
                Record::Rename {
                    tid,
                    ino,
                    is_dir: f & 1 != 0,
                    old_parent,
                    old_key,
                    new_parent,
                    name,
                    victim,
                    victim_is_dir: f & 2 != 0,
                    time,
                }
            }
            NodeType::JSetattr => {
                let tid = r.u64()?;
                let mask = r.u32()?;
                let attrs = Attrs::decode(&mut r)?;
                Record::Setattr {
                    tid,
                    ino,
                    mask,
                    attrs,
                }
            }
            NodeType::JCommit => {
                let tid = r.u64()?;
                let size = r.u64()?;
                let mtime = Time::decode(&mut r)?;
                let ctime = Time::decode(&mut r)?;
                let flags = r.u8()?;
                let trunc_to = if flags & 1 != 0 { Some(r.u64()?) } else { None };
                let inline = if flags & 2 != 0 {
                    let n = r.u16()? as usize;
                    Some(r.take(n)?.to_vec())
                } else {
                    None
                };
                let map = if flags & 4 != 0 {
                    let depth = r.u8()?;
                    let root = Addr(r.u32()?);
                    let n = r.u8()? as usize;
                    let mut direct = Vec::with_capacity(n);
                    for _ in 0..n {
                        direct.push(Addr(r.u32()?));
                    }
                    if depth > crate::format::params::MAX_DEPTH
                        || (depth == 0) != root.is_none()
                        || (depth > 0 && n != 0)
                    {
                        return Err(Error::Corrupt);
                    }
                    Some(BlockMap {
                        depth,
                        root,
                        direct,
                    })
                } else {
                    None
                };
                if flags >> 3 != 0 || (inline.is_some() && map.is_some()) {
                    return Err(Error::Corrupt);
                }
                let max = body.len() / 12 + 1;
                let extents = ExtentMap::decode(&mut r, max)?;
                Record::Commit {
                    tid,
                    ino,
                    size,
                    mtime,
                    ctime,
                    trunc_to,
                    inline,
                    extents,
                    map,
                }
            }
            NodeType::JTxCommit => Record::TxCommit { tid: r.u64()? },
            NodeType::JRemap => Record::Remap {
                logical: r.u32()?,
                physical: r.u32()?,
            },
            NodeType::JDataBlock => Record::DataBlock { block: r.u32()? },
            NodeType::JErasing => {
                let n = r.u16()? as usize;
                if n == 0 || n > MAX_ERASING {
                    return Err(Error::Corrupt);
                }
                let mut blocks = Vec::with_capacity(n);
                for _ in 0..n {
                    blocks.push(r.u32()?);
                }
                Record::Erasing { blocks }
            }
            _ => return Err(Error::Corrupt),
        };
        if r.remaining() != 0 {
            return Err(Error::Corrupt);
        }
        Ok(rec)
    }
}

/// Largest number of extents one `Commit` record may carry on a device whose journal nodes are
/// at most `max_node` bytes.
pub fn max_commit_extents(max_node: u32) -> usize {
    let fixed = NODE_HEADER + 8 + 8 + 24 + 1 + 8 + 4;
    (max_node.saturating_sub(fixed) / 12) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::attrs::S_IFREG;
    use crate::format::node::parse;

    fn roundtrip(r: Record) {
        let bytes = r.encode().finish(5, 8);
        let (h, body) = parse(&bytes, r.node_type()).unwrap();
        assert_eq!(Record::decode(&h, body).unwrap(), r);
    }

    /// Two `Setattr` of one inode outside transactions merge into the one record whose
    /// replay leaves what replaying both does; anything else does not merge.
    #[test]
    fn setattrs_of_one_inode_merge() {
        let t = |s| Time { secs: s, nsec: 7 };
        let a1 = Attrs {
            uid: 11,
            gid: 12,
            ctime: t(1),
            ..Attrs::default()
        };
        let a2 = Attrs {
            mode: 0o640,
            atime: t(2),
            mtime: t(3),
            ctime: t(4),
            ..Attrs::default()
        };
        let first = Record::Setattr {
            tid: 0,
            ino: 9,
            mask: mask::UID | mask::GID | mask::CTIME,
            attrs: a1,
        };
        let second = Record::Setattr {
            tid: 0,
            ino: 9,
            mask: mask::MODE | mask::ATIME | mask::MTIME | mask::CTIME,
            attrs: a2,
        };
        let merged = first.merged(&second).expect("no merge");
        assert_eq!(merged.encode().w.len(), first.encode().w.len());
        // Replaying the merged record leaves what replaying both does.
        let start = Attrs {
            mode: S_IFREG | 0o600,
            uid: 1,
            gid: 2,
            atime: t(10),
            mtime: t(11),
            ctime: t(12),
        };
        let apply = |a: &mut Attrs, r: &Record| match r {
            Record::Setattr { mask, attrs, .. } => apply_setattr(a, *mask, attrs),
            _ => unreachable!(),
        };
        let (mut both, mut one) = (start, start);
        apply(&mut both, &first);
        apply(&mut both, &second);
        apply(&mut one, &merged);
        assert_eq!(one, both);
        assert_eq!(
            both,
            Attrs {
                mode: S_IFREG | 0o640,
                uid: 11,
                gid: 12,
                atime: t(2),
                mtime: t(3),
                ctime: t(4),
            }
        );
        // Not merged: another inode, a transaction's record, a compression change, another
        // record type.
        let other = Record::Setattr {
            tid: 0,
            ino: 10,
            mask: mask::MODE,
            attrs: a2,
        };
        assert_eq!(first.merged(&other), None);
        let in_txn = Record::Setattr {
            tid: 3,
            ino: 9,
            mask: mask::MODE,
            attrs: a2,
        };
        assert_eq!(first.merged(&in_txn), None);
        assert_eq!(in_txn.merged(&first), None);
        let compress = Record::Setattr {
            tid: 0,
            ino: 9,
            mask: mask::COMPRESS | 1 << mask::COMPRESS_SHIFT,
            attrs: a2,
        };
        assert_eq!(first.merged(&compress), None);
        assert_eq!(first.merged(&Record::TxCommit { tid: 0 }), None);
    }

    #[test]
    fn records_roundtrip() {
        let t = Time { secs: 5, nsec: 6 };
        let attrs = Attrs {
            mode: 0o100644,
            uid: 1,
            gid: 2,
            atime: t,
            mtime: t,
            ctime: t,
        };
        roundtrip(Record::Session);
        roundtrip(Record::Link { prev: 3, next: 9 });
        roundtrip(Record::HardLink {
            tid: 2,
            ino: 9,
            parent: 4,
            name: b"second name".to_vec(),
            time: t,
        });
        roundtrip(Record::Create {
            tid: 0,
            ino: 7,
            parent: 1,
            attrs,
            name: b"hello".to_vec(),
            target: b"/x/y".to_vec(),
        });
        roundtrip(Record::Unlink {
            tid: 4,
            ino: 7,
            is_dir: true,
            parent: 1,
            key: 99,
            time: t,
        });
        roundtrip(Record::Rename {
            tid: 0,
            ino: 7,
            is_dir: false,
            old_parent: 1,
            old_key: 5,
            new_parent: 2,
            name: b"z".to_vec(),
            victim: 8,
            victim_is_dir: false,
            time: t,
        });
        roundtrip(Record::Setattr {
            tid: 0,
            ino: 7,
            mask: mask::MODE | mask::CTIME,
            attrs,
        });
        let mut e = ExtentMap::new();
        e.insert(3, 4, Addr(100), 4);
        e.insert(20, 1, Addr::NONE, 4);
        roundtrip(Record::Commit {
            tid: 0,
            ino: 7,
            size: 12345,
            mtime: t,
            ctime: t,
            trunc_to: Some(10),
            inline: None,
            extents: e,
            map: None,
        });
        roundtrip(Record::Commit {
            tid: 0,
            ino: 9,
            size: 1 << 30,
            mtime: t,
            ctime: t,
            trunc_to: None,
            inline: None,
            extents: ExtentMap::new(),
            map: Some(BlockMap {
                depth: 2,
                root: Addr(77),
                direct: Vec::new(),
            }),
        });
        roundtrip(Record::Commit {
            tid: 3,
            ino: 7,
            size: 3,
            mtime: t,
            ctime: t,
            trunc_to: None,
            inline: Some(b"abc".to_vec()),
            extents: ExtentMap::new(),
            map: None,
        });
        roundtrip(Record::TxCommit { tid: 3 });
        roundtrip(Record::Remap {
            logical: 1,
            physical: 2,
        });
        roundtrip(Record::DataBlock { block: 77 });
        roundtrip(Record::Erasing {
            blocks: vec![9, 3, 700_000],
        });
    }

    #[test]
    fn hostile_records_are_rejected() {
        let bytes = Record::Create {
            tid: 0,
            ino: 7,
            parent: 1,
            attrs: Attrs::default(),
            name: b"a/b".to_vec(),
            target: Vec::new(),
        }
        .encode()
        .finish(1, 8);
        let (h, body) = parse(&bytes, NodeType::JCreate).unwrap();
        assert_eq!(Record::decode(&h, body), Err(Error::Corrupt));
    }
}
