//! The file inode node: attributes, parent and name (and every other name of a hard-linked
//! file), size, and either inline content, direct block pointers or the root of an index tree.
//!
//! ```text
//!   | node header | parent | attrs (48) | size u64 | flags u16 | name_len | depth | root |
//!   | ndirect u16 | inline_len u16 | name | direct pointers ... | inline bytes ... |
//!   | (LINKED) n_links u8, per name: dir u32, len u8, name |
//! ```
//!
//! Owns the layout and its checks, and the size limits that follow from it (inline content,
//! names). It must never touch flash.

use alloc::vec::Vec;

use super::content::Content;
use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino};
use crate::format::codec::Reader;
use crate::format::extents::ExtentMap;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Addr, Params, MAX_DEPTH, NAME_MAX, NODE_HEADER};

/// Fixed bytes of an inode node body before the name.
const INODE_FIXED: u32 = 4 + 48 + 8 + 2 + 1 + 1 + 4 + 2 + 2;

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
    /// Indexed through the inode map ([`crate::index::inode_map::MapEntry::Linked`]) rather than through
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
            || depth > MAX_DEPTH
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

/// Blocks needed to hold `size` bytes.
pub fn blocks_for(size: u64, block: u32) -> u64 {
    size.div_ceil(block as u64)
}
