//! A file's content map as RAM holds it: inline bytes, or direct block pointers, or the root
//! of an index tree; plus the block changes committed since the inode was last written, not
//! yet folded into the tree, and a truncation not folded yet.
//!
//! Owns that value type. It must never read or write flash (the tree does).

use alloc::vec::Vec;

use crate::format::extents::ExtentMap;
use crate::format::params::Addr;

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
