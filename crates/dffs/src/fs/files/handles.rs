//! Open files: handles, the open-inode table (its overlay, and the orphan an unlinked open file
//! leaves), open and close.
//!
//! It must never write file data; closing a handle commits through the commit module.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::params::Addr;
use crate::fs::files::overlay::Overlay;
use crate::fs::Fs;
use crate::index::file::FileNode;
use crate::index::inode_map::MapEntry;
use alloc::vec::Vec;
use dffs_flash::Flash;

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

impl<F: Flash> Fs<F> {
    /// Opens file `ino`.
    pub fn open(&mut self, ino: Ino, flags: OpenFlags) -> Result<Fh> {
        self.guard(|fs| {
            match fs.map.get(&mut fs.store, ino)? {
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
            // A truncating open writes, so it takes the recovery checkpoint a mount after a
            // power cut owes; a plain open for write writes nothing and only checks that the
            // file system may be changed (`EROFS`): the checkpoint, which may find no room
            // (`ENOSPC`, not an error `open` gives), waits for the first write.
            if flags.truncate {
                fs.ensure_writable()?;
            } else if flags.write {
                fs.writable_now()?;
            }
            let slot = fs
                .open
                .handles
                .iter()
                .position(|h| h.is_none())
                .ok_or(Error::TooManyOpen)?;
            fs.open.handles[slot] = Some(Handle { ino, flags });
            fs.open.files.get_or_default(ino).refs += 1;
            if flags.truncate && flags.write {
                if let Err(e) = fs.truncate_ino(ino, 0) {
                    fs.open.handles[slot] = None;
                    fs.release(ino)?;
                    return Err(e);
                }
            }
            Ok(Fh(slot as u32))
        })
    }

    pub(crate) fn handle(&self, fh: Fh) -> Result<Handle> {
        self.open
            .handles
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
            fs.open.handles[fh.0 as usize] = None;
            fs.release(h.ino)?;
            r?;
            fs.after_op()
        })
    }

    /// Drops one reference to an open inode; frees an orphan when the last goes.
    pub(crate) fn release(&mut self, ino: Ino) -> Result<()> {
        let last = match self.open.files.get_mut(&ino) {
            Some(o) => {
                o.refs = o.refs.saturating_sub(1);
                o.refs == 0
            }
            None => false,
        };
        if !last {
            return Ok(());
        }
        let o = self.open.files.get(&ino).cloned().unwrap_or_default();
        if let Some(node) = &o.orphan {
            if let Some(ov) = &o.overlay {
                self.discard_overlay_space(ino, ov, node)?;
            }
            self.open.files.remove(&ino);
            self.data_cache.drop_ino(ino);
            self.free_file_space(node)?;
            if self.map.get(&mut self.store, ino)? == MapEntry::Orphan {
                self.map.set(&mut self.store, ino, MapEntry::Free)?;
            }
        } else if let Some(ov) = &o.overlay {
            // Uncommitted changes of a handle closed without commit (read-only handles never
            // have any; this is a dropped overlay after an error).
            let committed = self.committed(ino)?;
            self.discard_overlay_space(ino, ov, &committed)?;
            self.open.files.remove(&ino);
            self.data_cache.drop_ino(ino);
        } else {
            self.open.files.remove(&ino);
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
        let (blocks, nodes) = self.overlay_owned(ino, ov, committed)?;
        let p = self.store.p();
        for a in nodes {
            self.store.kill(a, p.align(p.index_node))?;
        }
        for a in blocks {
            self.kill_data(a)?;
        }
        Ok(())
    }

    /// What an open update owns on flash beyond the committed content `committed` of its
    /// file: the data blocks it wrote (block pointers), and a spilled update's own index
    /// nodes. A spilled map's block counts as its own unless the committed content maps the
    /// same address (as replay of its commit counts it, `Fs::apply_commit`). Reads only.
    pub(crate) fn overlay_owned(
        &mut self,
        ino: Ino,
        ov: &Overlay,
        committed: &FileNode,
    ) -> Result<(Vec<Addr>, Vec<Addr>)> {
        let stride = self.store.p().stride();
        let Some(sp) = &ov.spilled else {
            let blocks = ov.extents.iter_blocks(stride).map(|x| x.1);
            return Ok((blocks.filter(|a| !a.is_none()).collect(), Vec::new()));
        };
        let old = self.mapped(ino, &committed.content)?.0;
        self.mapped_beyond(ino, sp, &old)
    }

    /// Open handles (for front ends).
    pub fn open_handles(&self) -> usize {
        self.open.handles.iter().filter(|h| h.is_some()).count()
    }

    /// The inode of a handle.
    pub fn handle_ino(&self, fh: Fh) -> Result<Ino> {
        Ok(self.handle(fh)?.ino)
    }
}
