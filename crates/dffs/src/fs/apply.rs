//! [`Fs::apply`]: the single place where a journal record changes the RAM state, for every
//! record kind, live and during replay; and [`Fs::apply_commit`], the file-content half of it.
//!
//! A live operation journals its record and then applies it; replay applies the same records
//! in the same order, so the state after a power cut is the state some prefix of the
//! operations produced. It must never write to flash except the metadata a record makes dirty
//! (written by the next checkpoint) and never decide anything that depends on whether it runs
//! live or in replay, beyond crediting the space a replayed record's nodes occupy.

use crate::error::{Error, Result};
use crate::format::attrs::{Attrs, Ino};
use crate::format::extents::Extent;
use crate::format::params::{Addr, LogKind, Params};
use crate::fs::Fs;
use crate::index::dir::{name_key, DirRoot, Slot, PLACEHOLDER};
use crate::index::file::{blocks_for, Content, FileNode};
use crate::index::inode_map::MapEntry;
use crate::journal::{apply_setattr, mask, Record};
use crate::store::{BlockInfo, BlockState};
use alloc::vec::Vec;
use dffs_flash::Flash;

/// Every (block, address) of a block map, and the addresses of its index nodes.
pub(crate) type Mapped = (Vec<(u32, Addr)>, Vec<Addr>);

impl<F: Flash> Fs<F> {
    /// Applies a record to the RAM state. Live operations call it right after journaling the
    /// record; mount calls it for every committed record of the journal tail.
    pub(crate) fn apply(&mut self, rec: &Record) -> Result<()> {
        let p = self.store.p();
        match rec {
            // The journal's own structure: nothing in RAM changes (a transaction's commit is
            // decided by the replay's first pass).
            Record::Session | Record::Link { .. } | Record::TxCommit { .. } => Ok(()),
            // Blocks that may be erased: only a mount reads them (`Store::count_announced_erases`).
            Record::Erasing { .. } => Ok(()),
            // A bad-block swap the store made: logical `logical` lives on `physical` now.
            Record::Remap { logical, physical } => {
                self.store.apply_remap(*logical, *physical)?;
                Ok(())
            }
            // The user-data head moved to `block`: later synced writes may commit by their
            // data pages' tags there.
            Record::DataBlock { block } => {
                self.store.set_scanned_block(*block);
                Ok(())
            }
            Record::Create {
                ino,
                parent,
                attrs,
                name,
                target,
                ..
            } => {
                let ino = *ino;
                if ino < 2 || self.map.get(&mut self.store, ino)? != MapEntry::Free {
                    return Err(Error::Corrupt);
                }
                let is_dir = attrs.is_dir();
                let key = name_key(name, is_dir);
                if is_dir {
                    self.map
                        .set(&mut self.store, ino, MapEntry::Dir(Addr::NONE))?;
                    self.dirs
                        .create(DirRoot::new(&p, ino, *parent, *attrs, name));
                    self.dirs.insert(
                        &mut self.store,
                        &mut self.map,
                        *parent,
                        Slot { ptr: ino, key },
                    )?;
                    self.counts.dirs = self.counts.dirs.saturating_add(1);
                } else {
                    self.map.set(
                        &mut self.store,
                        ino,
                        MapEntry::File {
                            parent: *parent,
                            hash: key & 0x3FFF_FFFF,
                        },
                    )?;
                    let node = FileNode {
                        ino,
                        parent: *parent,
                        attrs: *attrs,
                        size: target.len() as u64,
                        name: name.clone(),
                        content: Content {
                            inline: Some(target.clone()),
                            ..Content::empty_inline()
                        },
                        compression: p.compression,
                        node_addr: Addr::NONE,
                        node_len: 0,
                        linked: false,
                        links: Vec::new(),
                    };
                    self.cache_file(node, true);
                    self.dirs.insert(
                        &mut self.store,
                        &mut self.map,
                        *parent,
                        Slot {
                            ptr: PLACEHOLDER | ino,
                            key,
                        },
                    )?;
                    self.counts.files = self.counts.files.saturating_add(1);
                }
                self.touch_dir(*parent, attrs.ctime)
            }
            Record::HardLink {
                ino,
                parent,
                name,
                time,
                ..
            } => {
                if !self.map.get(&mut self.store, *ino)?.is_file() {
                    return Err(Error::Corrupt);
                }
                self.expect_dir(*parent)?;
                self.make_linked(*ino)?;
                let c = self.inodes.get_mut(*ino).ok_or(Error::Corrupt)?;
                if c.node.links.len() >= crate::index::file::LINKS_MAX {
                    return Err(Error::Corrupt);
                }
                c.node.links.push((*parent, name.clone()));
                c.node.attrs.ctime = *time;
                self.dirs.insert(
                    &mut self.store,
                    &mut self.map,
                    *parent,
                    Slot {
                        ptr: PLACEHOLDER | *ino,
                        key: name_key(name, false),
                    },
                )?;
                self.touch_dir(*parent, *time)
            }
            Record::Unlink {
                ino,
                is_dir,
                parent,
                key,
                time,
                ..
            } => {
                let slot = self.slot_of(*parent, *key, *ino, *is_dir)?;
                if !*is_dir && self.has_other_names(*ino)? {
                    // One name of several goes; the file stays.
                    self.dirs
                        .remove(&mut self.store, &mut self.map, *parent, slot)?;
                    self.change_name(*ino, *parent, *key, None, *time)?;
                    return self.touch_dir(*parent, *time);
                }
                let file = if *is_dir {
                    None
                } else {
                    Some(self.take_file(*ino)?)
                };
                self.dirs
                    .remove(&mut self.store, &mut self.map, *parent, slot)?;
                match file {
                    None => {
                        self.dirs.destroy(&mut self.store, &mut self.map, *ino)?;
                        self.map.set(&mut self.store, *ino, MapEntry::Free)?;
                        self.counts.dirs = self.counts.dirs.saturating_sub(1);
                    }
                    Some(c) => self.drop_file(c.node)?,
                }
                self.touch_dir(*parent, *time)
            }
            Record::Rename {
                ino,
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
                if *victim == *ino {
                    return Err(Error::Corrupt);
                }
                let old_slot = self.slot_of(*old_parent, *old_key, *ino, *is_dir)?;
                let linked = !*is_dir && self.load_file(*ino)?.node.linked;
                let moved = if *is_dir || linked {
                    None
                } else {
                    Some(self.take_file(*ino)?)
                };
                if *victim != 0 {
                    let vkey = name_key(name, *victim_is_dir);
                    let vs = self.slot_of(*new_parent, vkey, *victim, *victim_is_dir)?;
                    let keep = !*victim_is_dir && self.has_other_names(*victim)?;
                    let vfile = if *victim_is_dir || keep {
                        None
                    } else {
                        Some(self.take_file(*victim)?)
                    };
                    self.dirs
                        .remove(&mut self.store, &mut self.map, *new_parent, vs)?;
                    match vfile {
                        None if keep => {
                            self.change_name(*victim, *new_parent, vkey, None, *time)?;
                        }
                        None => {
                            self.dirs.destroy(&mut self.store, &mut self.map, *victim)?;
                            self.map.set(&mut self.store, *victim, MapEntry::Free)?;
                            self.counts.dirs = self.counts.dirs.saturating_sub(1);
                        }
                        Some(c) => self.drop_file(c.node)?,
                    }
                }
                self.dirs
                    .remove(&mut self.store, &mut self.map, *old_parent, old_slot)?;
                let key = name_key(name, *is_dir);
                if *is_dir {
                    self.dirs.rename_dir(
                        &mut self.store,
                        &mut self.map,
                        *ino,
                        *new_parent,
                        name,
                    )?;
                    self.dirs
                        .root_mut(&mut self.store, &mut self.map, *ino)?
                        .attrs
                        .ctime = *time;
                    self.dirs.insert(
                        &mut self.store,
                        &mut self.map,
                        *new_parent,
                        Slot { ptr: *ino, key },
                    )?;
                } else {
                    if linked {
                        // One name in the inode's list changes; the map entry stays Linked.
                        let to = Some((*new_parent, name.as_slice()));
                        self.change_name(*ino, *old_parent, *old_key, to, *time)?;
                    } else {
                        let mut c = moved.ok_or(Error::Corrupt)?;
                        c.node.parent = *new_parent;
                        c.node.name = name.clone();
                        c.node.attrs.ctime = *time;
                        self.cache_file(c.node, true);
                        let hash = key & 0x3FFF_FFFF;
                        let entry = MapEntry::File {
                            parent: *new_parent,
                            hash,
                        };
                        self.map.set(&mut self.store, *ino, entry)?;
                    }
                    self.dirs.insert(
                        &mut self.store,
                        &mut self.map,
                        *new_parent,
                        Slot {
                            ptr: PLACEHOLDER | *ino,
                            key,
                        },
                    )?;
                }
                self.touch_dir(*old_parent, *time)?;
                if new_parent != old_parent {
                    self.touch_dir(*new_parent, *time)?;
                }
                Ok(())
            }
            Record::Setattr {
                ino,
                mask: m,
                attrs,
                ..
            } => {
                // A compression change for an algorithm this code does not know is ignored.
                let algo = ((m & mask::COMPRESS) != 0)
                    .then_some((m >> mask::COMPRESS_SHIFT) as u8)
                    .filter(|z| *z <= crate::format::compress::DEFLATE);
                let apply_to = |a: &mut Attrs| apply_setattr(a, *m, attrs);
                match self.map.get(&mut self.store, *ino)? {
                    MapEntry::Dir(_) => {
                        let r = self.dirs.root_mut(&mut self.store, &mut self.map, *ino)?;
                        apply_to(&mut r.attrs);
                        Ok(())
                    }
                    MapEntry::File { .. } | MapEntry::Linked(_) => {
                        self.make_dirty(*ino)?;
                        let c = self.load_file(*ino)?;
                        apply_to(&mut c.node.attrs);
                        if let Some(z) = algo {
                            c.node.compression = z;
                        }
                        Ok(())
                    }
                    MapEntry::Orphan => {
                        if let Some(n) =
                            self.open.files.get_mut(ino).and_then(|o| o.orphan.as_mut())
                        {
                            apply_to(&mut n.attrs);
                            if let Some(z) = algo {
                                n.compression = z;
                            }
                        }
                        Ok(())
                    }
                    MapEntry::Free => Err(Error::Corrupt),
                }
            }
            Record::Commit { .. } => self.apply_commit(rec),
        }
    }

    /// Applies a `Commit` record: the file's committed content becomes the new one.
    fn apply_commit(&mut self, rec: &Record) -> Result<()> {
        let Record::Commit {
            ino,
            size,
            mtime,
            ctime,
            trunc_to,
            inline,
            extents,
            map,
            ..
        } = rec
        else {
            return Err(Error::Corrupt);
        };
        let ino = *ino;
        let p = self.store.p();
        let stride = p.stride();
        let orphan = self.open.is_orphan(ino);
        let mut node = if orphan {
            self.open
                .files
                .get(&ino)
                .and_then(|o| o.orphan.clone())
                .ok_or(Error::Corrupt)?
        } else {
            match self.map.get(&mut self.store, ino)? {
                MapEntry::File { .. } | MapEntry::Linked(_) => {}
                _ => return Err(Error::Corrupt),
            }
            self.make_dirty(ino)?;
            self.load_file(ino)?.node.clone()
        };
        if *size > p.max_file_size() || !extents.extents().iter().all(|e| extent_fits(&p, e)) {
            return Err(Error::Corrupt);
        }
        let mut dead: Vec<Addr> = Vec::new();
        // Blocks this commit maps where they are mapped already (in block order).
        let mut again: Vec<u32> = Vec::new();
        if let Some(m) = map {
            // A large update: its own block map replaces the old one wholesale. The old tree's
            // nodes die, and every old block the new map does not keep in place.
            let old = core::mem::take(&mut node.content);
            let new = Content {
                inline: None,
                depth: m.depth,
                root: m.root,
                direct: m.direct.clone(),
                pending: extents.clone(),
                trunc: None,
            };
            let (old_blocks, old_nodes) = self.mapped(ino, &old)?;
            for (b, a) in &old_blocks {
                let now = {
                    let mut ix = self.tree(ino);
                    ix.lookup(&new, *b)?
                };
                if now != *a {
                    dead.push(*a);
                }
            }
            for a in old_nodes {
                self.store.kill(a, p.align(p.index_node))?;
            }
            if self.mount.replaying {
                // Written before the crash, perhaps before the checkpoint, which did not count
                // it (provisional then: `Fs::provisional_bytes`): count it, once.
                let (new_blocks, new_nodes) = self.mapped_beyond(ino, &new, &old_blocks)?;
                for a in new_blocks {
                    self.claim_replayed_data(a)?;
                }
                for a in new_nodes {
                    self.claim_replayed(a, p.align(p.index_node))?;
                }
            }
            node.content = new;
        } else if let Some(d) = inline {
            // The whole content is inline now: every block dies.
            let old = core::mem::replace(&mut node.content, Content::empty_inline());
            let tmp = FileNode {
                content: old,
                node_addr: Addr::NONE,
                ..node.clone()
            };
            self.free_file_space(&tmp)?;
            node.content.inline = Some(d.clone());
        } else {
            if node.content.inline.is_some() {
                node.content = Content::default();
            }
            {
                let mut ix = self.tree(ino);
                if let Some(t) = trunc_to {
                    let keep = blocks_for(*t, p.data_block).min(u32::MAX as u64) as u32;
                    dead.extend(
                        node.content
                            .pending
                            .iter_blocks(stride)
                            .filter(|(b, a)| *b >= keep && !a.is_none())
                            .map(|x| x.1),
                    );
                    // The folded map's blocks from `keep` on die too, except those a pending
                    // change already replaced (counted above). Nothing is written here: the
                    // cut is folded into the index later (replay must not write).
                    let old_trunc = node.content.trunc;
                    let pending = node.content.pending.clone();
                    ix.walk(
                        &node.content,
                        &mut |b, a| {
                            if b >= keep
                                && old_trunc.is_none_or(|t| b < t)
                                && pending.get(b, stride).is_none()
                            {
                                dead.push(a);
                            }
                        },
                        &mut |_, _, _| {},
                    )?;
                    node.content.pending.truncate(keep, stride);
                    node.content.trunc = Some(old_trunc.map_or(keep, |t| t.min(keep)));
                }
                for e in extents.extents() {
                    for k in 0..e.count {
                        let b = e.first + k;
                        let old = ix.lookup(&node.content, b)?;
                        // A commit applied twice (a synced write whose tag committed it, then
                        // the journal record that committed it again) keeps its blocks.
                        let new = if e.addr.is_none() {
                            Addr::NONE
                        } else {
                            Addr(e.addr.0 + k * stride)
                        };
                        if old == new {
                            again.push(b);
                        } else if !old.is_none() {
                            dead.push(old);
                        }
                    }
                    node.content
                        .pending
                        .insert(e.first, e.count, e.addr, stride);
                }
            }
            if self.mount.replaying {
                // Data written after the checkpoint: count it and keep its blocks allocated.
                for (b, a) in extents.iter_blocks(stride) {
                    if again.binary_search(&b).is_err() {
                        self.claim_replayed_data(a)?;
                    }
                }
            }
        }
        for a in dead {
            self.kill_data(a)?;
        }
        node.size = *size;
        node.attrs.mtime = *mtime;
        node.attrs.ctime = *ctime;
        // Keep RAM bounded: fold a long list of changes into the index now.
        if !self.mount.replaying && node.content.pending.len() > self.cfg.overlay_extents.max(16) {
            let mut ix = self.tree(ino);
            ix.fold(&mut node.content)?;
        }
        if orphan {
            if let Some(o) = self.open.files.get_mut(&ino) {
                o.orphan = Some(node);
            }
        } else if let Some(c) = self.inodes.get_mut(ino) {
            c.node = node;
            c.dirty = true;
        }
        Ok(())
    }

    /// The block pointers content `c` maps that `old` (another content's [`Fs::mapped`]
    /// blocks) does not, and every index node of `c`'s tree: what a new block map owns beyond
    /// the one it replaces (a spilled update's own tree shares no node). Reads only.
    pub(crate) fn mapped_beyond(
        &mut self,
        ino: Ino,
        c: &Content,
        old: &[(u32, Addr)],
    ) -> Result<(Vec<Addr>, Vec<Addr>)> {
        let (blocks, nodes) = self.mapped(ino, c)?;
        let mut keep: Vec<u32> = old.iter().map(|x| x.1 .0).collect();
        crate::sort::sort(&mut keep);
        let own = blocks.into_iter().map(|x| x.1);
        let own = own.filter(|a| keep.binary_search(&a.0).is_err()).collect();
        Ok((own, nodes))
    }

    /// Every (block, address) a content maps (pending changes and truncation applied) and
    /// every index node of its tree. Reads only.
    pub(crate) fn mapped(&mut self, ino: Ino, c: &Content) -> Result<Mapped> {
        let stride = self.store.p().stride();
        let mut blocks = Vec::new();
        let mut nodes = Vec::new();
        if c.inline.is_some() {
            return Ok((blocks, nodes));
        }
        {
            let mut ix = self.tree(ino);
            ix.walk(
                c,
                &mut |b, a| {
                    if c.pending.get(b, stride).is_none() && c.trunc.is_none_or(|t| b < t) {
                        blocks.push((b, a))
                    }
                },
                &mut |a, _, _| nodes.push(a),
            )?;
        }
        blocks.extend(c.pending.iter_blocks(stride).filter(|(_, a)| !a.is_none()));
        Ok((blocks, nodes))
    }

    /// During replay: counts file block pointer `a` live (a compressed block: its whole node).
    fn claim_replayed_data(&mut self, a: Addr) -> Result<()> {
        match self.data_extent(a) {
            Some((at, len)) => self.claim_replayed(at, len),
            None => Ok(()),
        }
    }

    /// During replay: counts `bytes` at `a` live and keeps its block from the allocator.
    /// `Corrupt` for a block no node written after the checkpoint can lie in: the journal's
    /// reserved next block (recovery frees it, and a damaged record crediting it left a free
    /// block with live bytes: the `mount` fuzzer), an anchor or a bad block.
    fn claim_replayed(&mut self, a: Addr, bytes: u32) -> Result<()> {
        let p = self.store.p();
        if !p.addr_valid(a) {
            return Ok(());
        }
        let blk = p.block_of(a);
        if matches!(
            self.store.block(blk)?.state(),
            BlockState::Reserved | BlockState::Anchor | BlockState::Bad
        ) {
            return Err(Error::Corrupt);
        }
        self.store.count_replayed_erase(blk)?;
        self.store.add_live(a, bytes)?;
        let e = self.store.block(blk)?;
        if matches!(e.state(), BlockState::Free | BlockState::Erased) {
            self.store.set_block(
                blk,
                BlockInfo::new(BlockState::Used, LogKind::DataHot, e.live),
            )?;
        }
        Ok(())
    }
}

/// Whether every block of extent `e` points inside the device: a run's blocks lie `stride`
/// units apart, so a damaged record's run could otherwise reach past the last address (or
/// past `u32`). A compressed block's pointer names its node, which must be on the device.
fn extent_fits(p: &Params, e: &Extent) -> bool {
    if e.addr.is_none() {
        return true;
    }
    let last = e.addr.0 as u64 + (e.count as u64 - 1) * p.stride() as u64;
    if e.addr.is_packed() {
        last < u32::MAX as u64 && p.addr_valid(e.addr.node())
    } else {
        last <= Addr::MAX as u64 && p.addr_valid(e.addr) && p.addr_valid(Addr(last as u32))
    }
}
