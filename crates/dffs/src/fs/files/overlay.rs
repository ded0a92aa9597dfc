//! The overlay of an open file: what its uncommitted writes and truncates changed (new size,
//! the smallest size it was cut to, the blocks written back but not committed, inline data).
//!
//! An overlay is invisible to checkpoints and to replay until a commit journals it, so after a
//! power cut a file holds exactly the content of one of its commits. It must never hold data
//! itself (dirty blocks are in the data cache).

use crate::error::{Error, Result};
use crate::format::attrs::{Ino, Time};
use crate::format::extents::ExtentMap;
use crate::fs::Fs;
use crate::index::file::{Content, FileNode};
use alloc::vec::Vec;
use dffs_flash::Flash;

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

impl<F: Flash> Fs<F> {
    /// The overlay of open inode `ino`, created from the committed state if needed.
    pub(crate) fn overlay(&mut self, ino: Ino) -> Result<&mut Overlay> {
        let has = self.open.has_overlay(ino);
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
            self.open.files.get_or_default(ino).overlay = Some(ov);
        }
        self.open
            .files
            .get_mut(&ino)
            .and_then(|o| o.overlay.as_mut())
            .ok_or(Error::Corrupt)
    }

    /// The committed node of `ino` (orphans included).
    pub(crate) fn committed(&mut self, ino: Ino) -> Result<FileNode> {
        if let Some(n) = self.open.files.get(&ino).and_then(|o| o.orphan.as_ref()) {
            return Ok(n.clone());
        }
        Ok(self.load_file(ino)?.node.clone())
    }

    /// Current size of `ino` (overlay first).
    pub(crate) fn cur_size(&mut self, ino: Ino) -> Result<u64> {
        if let Some(ov) = self.open.files.get(&ino).and_then(|o| o.overlay.as_ref()) {
            return Ok(ov.size);
        }
        Ok(self.committed(ino)?.size)
    }
}
