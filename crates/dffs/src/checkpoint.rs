//! Checkpoints and the anchor blocks that hold them.
//!
//! Owns the [`Checkpoint`] record (format parameters plus the roots of every on-flash structure:
//! inode map, block table pages, journal start, open heads, swapped bad blocks, orphans) and the
//! two anchor blocks it is written to: each checkpoint is written twice (two consecutive slots),
//! slots fill an anchor block in order, and when one block is full the other is erased and
//! used. Mount finds the newest checkpoint with a few reads: the first slot of each anchor, then
//! a binary search for the last used slot. Anchors live in the anchor area until it is worn
//! out; then they leave it, and the old pair becomes the [`Home`] pair that records where they
//! went. It must never decide *when* to checkpoint.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::codec::Reader;
use crate::format::node::{self, NodeBuilder, NodeType, OobTag, Probe, OOB_TAG_LEN};
use crate::format::params::NandSupport;
use crate::format::params::{Addr, Params, MAX_BT_DELTAS, MAX_HEADS};
use crate::store::{BlockState, Remap, Store};
use dffs_flash::{Flash, FlashError, FlashKind, PagePairing};

/// Checkpoint flag: written by a clean unmount (nothing was written after it).
pub const CP_CLEAN: u16 = 1;

/// Checkpoint flag: a restamp (the same checkpoint written again, at a mount, into the anchor
/// it erased first): its block table does not count that erase, so a mount counts it.
pub const CP_ANCHOR_UNCOUNTED: u16 = 2;

/// Checkpoint flag: the anchors have left the anchor area, and the checkpoint names the home
/// pair (see [`Home`]): the block-table delta count is then always present, and the two home
/// blocks follow the delta list.
pub const CP_HOME: u16 = 4;

/// Checkpoint flag: the block-table pages are listed in directory nodes the checkpoint names
/// ([`Checkpoint::bt_dirs`], FORMAT §8.2), set by `encode` when the device's table needs them
/// (`Params::bt_dir_nodes`); the page count is followed by the directory nodes' addresses.
pub const CP_BT_DIRS: u16 = 8;

/// Checkpoint flag: replay reads at most [`Checkpoint::journal_records`] records of the
/// journal after this checkpoint (FORMAT §6, §12). Set on a restamp written by a recovery whose
/// scan ended on a page a power cut tore: the recovery may erase blocks that records beyond its
/// reading name, so no later mount may read further (DESIGN §15 item 22). The delta count is
/// then always present, and the bound is the record's last field.
pub const CP_JOURNAL_BOUND: u16 = 16;

/// No block (an absent home pair).
pub const NO_BLOCK: u32 = u32::MAX;

pub use crate::format::params::ANCHOR_AREA;

/// Everything mount needs to find the file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Format parameters.
    pub params: Params,
    /// [`CP_CLEAN`], [`CP_ANCHOR_UNCOUNTED`], [`CP_HOME`] (set by `encode` from `home`),
    /// [`CP_BT_DIRS`] and [`CP_JOURNAL_BOUND`] (likewise from `bt_dirs` and
    /// `journal_records`) and reserved bits.
    pub flags: u16,
    /// Checkpoint counter.
    pub cp_number: u64,
    /// Next sequence number to hand out.
    pub next_seq: u64,
    /// Next transaction id.
    pub next_tid: u64,
    /// Root of the inode map.
    pub map_root: Addr,
    /// Depth of the inode map (1: the root is a leaf).
    pub map_depth: u8,
    /// Lowest inode number that may be free.
    pub ino_hint: u32,
    /// One more than the highest inode number ever used.
    pub ino_high: u32,
    /// Number of files (regular and symlinks).
    pub files: u32,
    /// Number of directories.
    pub dirs: u32,
    /// Block table pages, in block order. Empty in a decoded checkpoint that names directory
    /// nodes instead (`bt_dirs`): the mount reads the list from them.
    pub bt_pages: Vec<Addr>,
    /// Block-table directory nodes (FORMAT §8.2), in page order: on devices whose table
    /// needs them (`Params::bt_dir_nodes`), they list `bt_pages` and the checkpoint names
    /// only them.
    pub bt_dirs: Vec<Addr>,
    /// Journal block where replay starts.
    pub journal_block: u32,
    /// Byte offset in that block where replay starts.
    pub journal_off: u32,
    /// Block set aside for the journal to continue in.
    pub journal_next: u32,
    /// Open heads at the time of the checkpoint: (block, offset); only used after a clean
    /// unmount.
    pub heads: [(u32, u32); MAX_HEADS],
    /// Swapped-out bad blocks.
    pub remaps: Vec<Remap>,
    /// Files unlinked while still open: (inode, inode node address); freed at mount.
    pub orphans: Vec<(Ino, Addr)>,
    /// Block-table delta nodes: records that differ from their pages in `bt_pages`, applied
    /// in order after the pages (at most [`MAX_BT_DELTAS`]).
    pub bt_deltas: Vec<Addr>,
    /// The home pair ([`Home`]; [`NO_BLOCK`] twice while the anchors lie in the anchor area).
    pub home: [u32; 2],
    /// The records of the journal replay may read after this checkpoint, at most
    /// ([`CP_JOURNAL_BOUND`]; `None`: up to the journal's end).
    pub journal_records: Option<u32>,
}

impl Checkpoint {
    /// Encodes as a node.
    pub fn encode(&self) -> NodeBuilder {
        let mut nb = NodeBuilder::new(NodeType::Checkpoint, 0, 0, 512);
        let w = &mut nb.w;
        self.params.encode(w);
        let home = self.home[0] != NO_BLOCK;
        let flags = if home {
            self.flags | CP_HOME
        } else {
            self.flags & !CP_HOME
        };
        let by_dirs = !self.bt_dirs.is_empty();
        let flags = if by_dirs {
            flags | CP_BT_DIRS
        } else {
            flags & !CP_BT_DIRS
        };
        let flags = match self.journal_records {
            Some(_) => flags | CP_JOURNAL_BOUND,
            None => flags & !CP_JOURNAL_BOUND,
        };
        w.u16(flags).u16(0);
        w.u64(self.cp_number).u64(self.next_seq).u64(self.next_tid);
        w.u32(self.map_root.0).u8(self.map_depth).u8(0).u16(0);
        w.u32(self.ino_hint)
            .u32(self.ino_high)
            .u32(self.files)
            .u32(self.dirs);
        w.u32(self.journal_block)
            .u32(self.journal_off)
            .u32(self.journal_next);
        for (b, o) in self.heads {
            w.u32(b).u32(o);
        }
        if by_dirs {
            let per = self.params.bt_entries();
            w.u32(self.params.geometry.blocks.div_ceil(per));
            for a in &self.bt_dirs {
                w.u32(a.0);
            }
        } else {
            w.u32(self.bt_pages.len() as u32);
            for a in &self.bt_pages {
                w.u32(a.0);
            }
        }
        w.u32(self.remaps.len() as u32);
        for r in &self.remaps {
            w.u32(r.logical).u32(r.physical);
        }
        w.u32(self.orphans.len() as u32);
        for (i, a) in &self.orphans {
            w.u32(*i).u32(a.0);
        }
        // Only a checkpoint that names delta nodes carries their list (tables under 4 pages
        // never do, and their records stay as small as before).
        if !self.bt_deltas.is_empty() || home || self.journal_records.is_some() {
            w.u32(self.bt_deltas.len() as u32);
        }
        for a in &self.bt_deltas {
            w.u32(a.0);
        }
        if home {
            w.u32(self.home[0]).u32(self.home[1]);
        }
        if let Some(n) = self.journal_records {
            w.u32(n);
        }
        nb
    }

    /// Decodes and sanity-checks a checkpoint body.
    pub fn decode(body: &[u8]) -> Result<Checkpoint> {
        let mut r = Reader::new(body);
        let params = Params::decode(&mut r)?;
        let blocks = params.geometry.blocks;
        let flags = r.u16()?;
        r.u16()?;
        let cp_number = r.u64()?;
        let next_seq = r.u64()?;
        let next_tid = r.u64()?;
        let map_root = Addr(r.u32()?);
        let map_depth = r.u8()?;
        r.u8()?;
        r.u16()?;
        let ino_hint = r.u32()?;
        let ino_high = r.u32()?;
        let files = r.u32()?;
        let dirs = r.u32()?;
        let journal_block = r.u32()?;
        let journal_off = r.u32()?;
        let journal_next = r.u32()?;
        let mut heads = [(u32::MAX, 0); MAX_HEADS];
        for h in heads.iter_mut() {
            *h = (r.u32()?, r.u32()?);
        }
        let n_pages = r.u32()? as usize;
        // Directory nodes only where the device's table needs them. (Without the flag the
        // pages are listed here on any device: images of 40-60 MiB of 4 KiB NOR sectors were
        // written that way before directory nodes existed.)
        let n_dirs = if flags & CP_BT_DIRS != 0 {
            match params.bt_dir_nodes() {
                0 => return Err(Error::Corrupt),
                n => n as usize,
            }
        } else {
            0
        };
        let listed = if n_dirs > 0 { n_dirs } else { n_pages };
        if listed > r.remaining() / 4 {
            return Err(Error::Corrupt);
        }
        let mut addrs = Vec::with_capacity(listed);
        for _ in 0..listed {
            let a = Addr(r.u32()?);
            if !params.addr_valid(a) {
                return Err(Error::Corrupt);
            }
            addrs.push(a);
        }
        let (bt_pages, bt_dirs) = if n_dirs > 0 {
            (Vec::new(), addrs)
        } else {
            (addrs, Vec::new())
        };
        let n = r.u32()? as usize;
        if n > r.remaining() / 8 {
            return Err(Error::Corrupt);
        }
        let mut remaps = Vec::with_capacity(n);
        for _ in 0..n {
            let rm = Remap {
                logical: r.u32()?,
                physical: r.u32()?,
            };
            if rm.logical >= blocks || rm.physical >= blocks {
                return Err(Error::Corrupt);
            }
            remaps.push(rm);
        }
        let n = r.u32()? as usize;
        if n > r.remaining() / 8 {
            return Err(Error::Corrupt);
        }
        let mut orphans = Vec::with_capacity(n);
        for _ in 0..n {
            orphans.push((r.u32()?, Addr(r.u32()?)));
        }
        // (Absent: no delta nodes.)
        let n = if r.remaining() >= 4 || flags & (CP_HOME | CP_JOURNAL_BOUND) != 0 {
            r.u32()?
        } else {
            0
        };
        if n > MAX_BT_DELTAS.min(params.bt_delta_nodes()) {
            return Err(Error::Corrupt);
        }
        let mut bt_deltas = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let a = Addr(r.u32()?);
            if !params.addr_valid(a) {
                return Err(Error::Corrupt);
            }
            bt_deltas.push(a);
        }
        let home = if flags & CP_HOME != 0 {
            [r.u32()?, r.u32()?]
        } else {
            [NO_BLOCK; 2]
        };
        let journal_records = if flags & CP_JOURNAL_BOUND != 0 {
            Some(r.u32()?)
        } else {
            None
        };
        let per = params.bt_entries();
        let map_ok = (map_root.is_none() && map_depth == 0)
            || (params.addr_valid(map_root) && (1..=6).contains(&map_depth));
        if journal_block >= blocks
            || journal_off >= params.geometry.block_size()
            || (journal_next != u32::MAX && journal_next >= blocks)
            || n_pages as u64 != (blocks as u64).div_ceil(per as u64)
            || !map_ok
            || ino_hint == 0
            || ino_high < 2
            // Every inode below the highest in use had an 8-byte map entry on this device.
            || ino_high as u64 > params.geometry.capacity() / 8
            || heads
                .iter()
                .any(|&(b, o)| b != u32::MAX && (b >= blocks || o > params.geometry.block_size()))
            || (flags & CP_HOME != 0
                && (home[0] >= ANCHOR_AREA.min(blocks)
                    || home[1] >= ANCHOR_AREA.min(blocks)
                    || home[0] == home[1]
                    || params.anchors.iter().any(|a| home.contains(a))))
        {
            return Err(Error::Corrupt);
        }
        Ok(Checkpoint {
            params,
            flags,
            cp_number,
            next_seq,
            next_tid,
            map_root,
            map_depth,
            ino_hint,
            ino_high,
            files,
            dirs,
            bt_pages,
            bt_dirs,
            journal_block,
            journal_off,
            journal_next,
            heads,
            remaps,
            orphans,
            bt_deltas,
            home,
            journal_records,
        })
    }
}

/// Where the newest checkpoint was found, and where the next one goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnchorPos {
    /// Index (0 or 1) into `params.anchors` of the block holding the newest checkpoint.
    pub anchor: usize,
    /// Slot of its first copy.
    pub slot: u32,
    /// Whether the next checkpoint may go into the following slots of the same block (only
    /// when nothing can have been programmed after the newest checkpoint).
    pub may_append: bool,
}

/// The home pair: once the anchor area has no free block left to replace a failing anchor,
/// the anchors leave it for blocks anywhere on the device, and the two anchors they leave
/// become the home pair. Home blocks hold only the checkpoints that moved the anchors there
/// (entering, and each replacement of an anchor that failed), written as anchors hold
/// checkpoints (slots in order, the other block erased when one is full); a mount finds the
/// newest home checkpoint in the area, and through the anchors it names, the newest one.
/// Home blocks are written once per move, so they wear and fail far less than anchors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Home {
    /// The two home blocks ([`NO_BLOCK`] twice while the anchors lie in the area).
    pub blocks: [u32; 2],
    /// Where the newest home checkpoint is (`anchor` indexes `blocks`).
    pub pos: AnchorPos,
    /// Whether that is the newest checkpoint of all (mount's choice).
    pub holds_newest: bool,
}

impl Home {
    /// No home pair: the anchors lie in the anchor area.
    pub const NONE: Home = Home {
        blocks: [NO_BLOCK; 2],
        pos: AnchorPos {
            anchor: 0,
            slot: 0,
            may_append: false,
        },
        holds_newest: false,
    };

    /// Whether the anchors have left the anchor area.
    pub fn active(&self) -> bool {
        self.blocks[0] != NO_BLOCK
    }
}

/// Checkpoint slots in an anchor block. On paired-page NAND only pages that are no upper page
/// hold slots: every checkpoint is durable once written, so programming the upper page of an
/// earlier slot could destroy it.
/// Whether the checkpoint after the one at `pos` starts the other anchor (erasing it first).
pub fn starts_block(p: &Params, pos: AnchorPos) -> bool {
    !(pos.may_append && pos.slot + 3 < slots_per_block(p))
}

fn slots_per_block(p: &Params) -> u32 {
    let g = p.geometry;
    if g.flash_kind() == FlashKind::Nand && g.page_pairing() != PagePairing::None {
        return (0..g.pages_per_block)
            .filter(|&pg| g.page_pairing().lower_of(pg).is_none())
            .count() as u32;
    }
    g.block_size() / p.cp_slot
}

/// Byte offset of checkpoint slot `slot` in its anchor block.
fn slot_offset(p: &Params, slot: u32, cp_slot: u32) -> u64 {
    let g = p.geometry;
    if g.flash_kind() == FlashKind::Nand && g.page_pairing() != PagePairing::None {
        let page = (0..g.pages_per_block)
            .filter(|&pg| g.page_pairing().lower_of(pg).is_none())
            .nth(slot as usize)
            .unwrap_or(g.pages_per_block);
        return page as u64 * g.page_size as u64;
    }
    slot as u64 * cp_slot as u64
}

/// Reads the checkpoint at `slot` of logical block `block`, if valid (boxed: mount compares
/// several, and each copy on a microcontroller's stack costs its size).
fn read_slot<F: Flash>(
    st: &mut Store<F>,
    block: u32,
    slot: u32,
    cp_slot: u32,
) -> Result<Option<Box<Checkpoint>>> {
    let bs = st.p().geometry.block_size() as u64;
    let pos = block as u64 * bs + slot_offset(&st.p(), slot, cp_slot);
    let mut buf = vec![0u8; cp_slot as usize];
    // A copy that fails its CRC is read again: NOR has no ECC, and the error may be transient.
    for _ in 0..=crate::store::medium::READ_RETRIES {
        let st_ecc = st.read_raw(pos, &mut buf);
        match st_ecc {
            Ok(dffs_flash::EccStatus::Uncorrectable) | Err(Error::Io) => return Ok(None),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        match node::probe(&buf, cp_slot) {
            Probe::Header(h) if h.typ == NodeType::Checkpoint => {
                if let Ok(body) = node::verify(&buf, &h) {
                    return Ok(Checkpoint::decode(body).ok().map(Box::new));
                }
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// Whether the slot's first bytes were ever programmed.
fn slot_used<F: Flash>(st: &mut Store<F>, block: u32, slot: u32, cp_slot: u32) -> Result<bool> {
    let bs = st.p().geometry.block_size() as u64;
    let pos = block as u64 * bs + slot_offset(&st.p(), slot, cp_slot);
    let mut buf = [0u8; 16];
    match st.read_raw(pos, &mut buf) {
        Ok(dffs_flash::EccStatus::Uncorrectable) => Ok(true),
        Ok(_) => Ok(buf.iter().any(|&b| b != 0xFF)),
        Err(Error::Io) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The first pair of slots of anchor `block` whose first slot was never programmed (binary
/// search: pairs are written in order), or the number of pairs when all were.
fn first_unused_pair<F: Flash>(st: &mut Store<F>, block: u32, cp_slot: u32) -> Result<u32> {
    let pairs = slots_per_block(&st.p()) / 2;
    let (mut lo, mut hi) = (0u32, pairs);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if slot_used(st, block, mid * 2, cp_slot)? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Reads the newest valid checkpoint in anchor `block` (both copies of each pair are tried,
/// newest pair first).
fn newest_in_block<F: Flash>(
    st: &mut Store<F>,
    block: u32,
    cp_slot: u32,
) -> Result<Option<(Box<Checkpoint>, u32)>> {
    let mut j = first_unused_pair(st, block, cp_slot)?;
    while j > 0 {
        j -= 1;
        for s in [j * 2, j * 2 + 1] {
            if let Some(cp) = read_slot(st, block, s, cp_slot)? {
                return Ok(Some((cp, j * 2)));
            }
        }
    }
    Ok(None)
}

/// Finds the newest checkpoint on the device. `st.p()` only needs a correct geometry; the
/// parameters found are returned inside the checkpoint.
///
/// Also returns which blocks of the anchor area (bit `b` for block `b`) hold a valid checkpoint
/// of this file system in their first two slots, as read on the way (for
/// [`moved_anchor_attempt`]).
#[inline(never)]
pub fn find_newest<F: Flash>(st: &mut Store<F>) -> Result<(Box<Checkpoint>, AnchorPos, u32, Home)> {
    let g = st.p().geometry;
    let area = ANCHOR_AREA.min(g.blocks);
    // Any valid first slot names both anchors. But an anchor that went bad is replaced by
    // another block of the area, and the first slot of the replacement names the new pair: the
    // newest first slot of the area decides.
    let mut found: Option<Box<Checkpoint>> = None;
    let mut valid_first: Vec<(u32, u64)> = Vec::new();
    for b in 0..area {
        for slot in [0u32, 1] {
            let cp_slot = match (g.flash_kind(), &found) {
                (FlashKind::Nand, _) => g.page_size,
                (FlashKind::Nor, Some(f)) => f.params.cp_slot,
                (FlashKind::Nor, None) => st.p().cp_slot,
            };
            if let Some(cp) = read_slot(st, b, slot, cp_slot)? {
                if cp.params.geometry.same_layout(&g) {
                    valid_first.push((b, cp.params.fs_id));
                    let newer = match &found {
                        None => true,
                        Some(f) => cp.params.fs_id == f.params.fs_id && cp.cp_number > f.cp_number,
                    };
                    if newer {
                        found = Some(cp);
                    }
                    break;
                }
            }
        }
    }
    let first = found.ok_or(Error::NoFileSystem)?;
    let p = first.params;
    let holding = valid_first
        .iter()
        .filter(|&&(_, id)| id == p.fs_id)
        .fold(0u32, |m, &(b, _)| m | 1 << b);
    st.set_params(p);
    st.set_remaps(first.remaps.clone());
    // The home pair the first slot names, or without one the anchors it names; the newest
    // checkpoint in them names the blocks to search next, until it names the blocks it was
    // found among. Each step finds a newer checkpoint, and anchors move only by a checkpoint
    // in blocks the one before names, so a few steps reach the newest. (While the anchors lie
    // in the area, one step: the first slot names them.) Anchors outside the area move only
    // by a checkpoint written home, so the anchors a home block's first slot names are stale
    // (not searched: on 128 MiB of SLC NAND whose anchors had moved for wear, a mount read 12
    // pages more in anchors that had left long before).
    let mut set = if first.home[0] != NO_BLOCK {
        [first.home[0], first.home[1], NO_BLOCK, NO_BLOCK]
    } else {
        [p.anchors[0], p.anchors[1], NO_BLOCK, NO_BLOCK]
    };
    let mut best: Option<(Box<Checkpoint>, u32, u32)> = None;
    let mut home_best: Option<(u64, u32, u32)> = None;
    let mut searched: Vec<u32> = Vec::new();
    for _ in 0..4 {
        for b in set {
            if b >= g.blocks || searched.contains(&b) {
                continue;
            }
            searched.push(b);
            if let Some((cp, slot)) = newest_in_block(st, b, p.cp_slot)? {
                if cp.params.fs_id != p.fs_id
                    || !(cp.params.anchors.contains(&b) || cp.home.contains(&b))
                {
                    continue;
                }
                if cp.home.contains(&b) && home_best.is_none_or(|h| cp.cp_number > h.0) {
                    home_best = Some((cp.cp_number, b, slot));
                }
                if best.as_ref().is_none_or(|x| cp.cp_number > x.0.cp_number) {
                    best = Some((cp, b, slot));
                }
            }
        }
        let Some((cp, _, _)) = &best else { break };
        let next = [
            cp.params.anchors[0],
            cp.params.anchors[1],
            cp.home[0],
            cp.home[1],
        ];
        if next == set {
            break;
        }
        set = next;
        st.set_remaps(cp.remaps.clone());
    }
    let (cp, block, slot) = best.ok_or(Error::NoFileSystem)?;
    // A home checkpoint: the next one starts the anchor `anchors[1]` (both hold only older
    // ones).
    let pos = match cp.params.anchors.iter().position(|&a| a == block) {
        Some(anchor) => AnchorPos {
            anchor,
            slot,
            may_append: cp.flags & CP_CLEAN != 0,
        },
        None => AnchorPos {
            anchor: 0,
            slot: 0,
            may_append: false,
        },
    };
    let home = match home_best {
        Some((n, hb, hslot)) if cp.home.contains(&hb) => Home {
            blocks: cp.home,
            pos: AnchorPos {
                anchor: if cp.home[0] == hb { 0 } else { 1 },
                slot: hslot,
                may_append: false,
            },
            holds_newest: n == cp.cp_number && hb == block,
        },
        // (No home checkpoint read: the next home write starts the second home block.)
        _ if cp.home[0] != NO_BLOCK => Home {
            blocks: cp.home,
            ..Home::NONE
        },
        _ => Home::NONE,
    };
    st.set_params(cp.params);
    st.set_remaps(cp.remaps.clone());
    Ok((cp, pos, holding, home))
}

/// Whether the mount's choice, checkpoint number `chosen` at `pos`, may not survive: its own
/// second copy does not read as that checkpoint (the first copy may then be a cut program
/// that read valid this once: a checkpoint's second copy is programmed only once the first
/// is whole), or the anchors hold a checkpoint cut while it was written after the choice: the
/// pair after it in its block is programmed, or the other
/// anchor's first slot is programmed but holds no valid checkpoint older than the choice (a
/// switch to that block was cut). Such a slot reads as invalid now, but a cut program leaves
/// bits that read differently from read to read (NOR) or a page that may pass its CRC on
/// another read (NAND): a later mount could find it valid, and prefer its state, to everything
/// written after this mount's choice. (It may even read valid here, where `find_newest` read it
/// invalid a moment before: a newer checkpoint than the choice is such a slot too. Taken for
/// an old one, a cut switch was never outranked, and a later mount chose it over a recovery
/// checkpoint that had reused the blocks it names: 4 KiB NOR chained cuts, links seed 300.)
///
/// With a home pair (`home`), the choice may be the newest home checkpoint, and an attempt
/// after it may lie in either pair: the other pair's blocks are read too (the slot after the
/// newest home checkpoint and the other home block's first; the anchors' first slots).
#[inline(never)]
pub fn cut_attempt_after<F: Flash>(
    st: &mut Store<F>,
    pos: AnchorPos,
    chosen: u64,
    home: &Home,
) -> Result<bool> {
    if home.active() {
        let p = st.p();
        let (pair, at) = if home.holds_newest {
            (home.blocks, home.pos)
        } else {
            (p.anchors, pos)
        };
        if pair_attempt_after(st, pair, at, chosen)? {
            return Ok(true);
        }
        if home.holds_newest {
            for b in p.anchors {
                if first_slot_attempt(st, b, chosen)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        return written_after(st, home.blocks, home.pos, chosen);
    }
    pair_attempt_after(st, st.p().anchors, pos, chosen)
}

/// Whether block `b`'s first slot is programmed and holds no checkpoint of this file system
/// older than `chosen` (an attempt cut there).
fn first_slot_attempt<F: Flash>(st: &mut Store<F>, b: u32, chosen: u64) -> Result<bool> {
    let p = st.p();
    if b >= p.geometry.blocks || !slot_used(st, b, 0, p.cp_slot)? {
        return Ok(false);
    }
    Ok(!holds_checkpoint_of(st, b, p.fs_id, p.cp_slot, chosen)?)
}

/// [`cut_attempt_after`] within the pair `pair` holding the choice at `pos`.
fn pair_attempt_after<F: Flash>(
    st: &mut Store<F>,
    pair: [u32; 2],
    pos: AnchorPos,
    chosen: u64,
) -> Result<bool> {
    let p = st.p();
    let block = pair[pos.anchor];
    // (A clean unmount's checkpoint cut in its first copy read valid at the recovery, which
    // took it and wrote on; the next mount read it invalid and went back to the checkpoint
    // before, losing a create synced after the recovery: 4 KiB NOR chained cuts, mixed seed
    // 210.)
    match read_slot(st, block, pos.slot + 1, p.cp_slot)? {
        Some(cp) if cp.cp_number == chosen => {}
        _ => return Ok(true),
    }
    written_after(st, pair, pos, chosen)
}

/// Whether the pair `pair` was written after the checkpoint at `pos`, numbered `chosen` or
/// older: the pair of slots after it in its block is used, or the other block's first slot
/// holds an attempt ([`first_slot_attempt`]).
fn written_after<F: Flash>(
    st: &mut Store<F>,
    pair: [u32; 2],
    pos: AnchorPos,
    chosen: u64,
) -> Result<bool> {
    let p = st.p();
    let per = slots_per_block(&p);
    if pos.slot + 3 < per && slot_used(st, pair[pos.anchor], pos.slot + 2, p.cp_slot)? {
        return Ok(true);
    }
    first_slot_attempt(st, pair[1 - pos.anchor], chosen)
}

/// Makes a mount's choice of checkpoint `cp` (found at `pos`) durable when
/// [`cut_attempt_after`] says a cut attempt may outrank it later: writes `cp` again, unchanged
/// but for its number, into the other anchor (erasing it: it holds older checkpoints or the
/// cut attempt), numbered past every number an attempt after `cp` can carry (`write` tries at
/// most `ANCHOR_AREA + 2` numbers from `cp.cp_number + 1`). Updates `cp` (number, parameters:
/// an anchor that fails is replaced) and returns the new position.
///
/// With a home pair, `cp` goes home instead (into the home block the newest home checkpoint
/// is not in): a mount finds the home pair first, and an attempt cut there or in an anchor
/// then reads as older. The position returned then starts an anchor next.
#[inline(never)]
pub fn restamp<F: Flash>(
    st: &mut Store<F>,
    cp: &mut Checkpoint,
    pos: AnchorPos,
    home: &mut Home,
) -> Result<AnchorPos> {
    let mut again = cp.clone();
    again.cp_number = cp.cp_number + ANCHOR_AREA as u64 + 3;
    again.flags |= CP_ANCHOR_UNCOUNTED;
    let to = AnchorPos {
        may_append: false,
        ..pos
    };
    home.pos.may_append = false;
    let at_home = home.active();
    let mut at = write(st, &again, Some(to), home, at_home, false)?;
    cp.cp_number = st.cp_number();
    cp.params = st.p();
    cp.home = home.blocks;
    at.may_append = pos.may_append && !at_home;
    Ok(at)
}

/// The home block a checkpoint written home starts (erasing it), if it starts one.
pub fn home_block_started(p: &Params, home: &Home) -> Option<u32> {
    let (ha, hs) = next_slot(slots_per_block(p), Some(home.pos));
    (home.active() && hs == 0).then_some(home.blocks[ha])
}

/// The slot the checkpoint after the one at `pos` goes to: the next pair of the same block when
/// it may append and one is left, else the first of the other block.
fn next_slot(per: u32, pos: Option<AnchorPos>) -> (usize, u32) {
    match pos {
        Some(AnchorPos {
            anchor,
            slot,
            may_append: true,
        }) if slot + 3 < per => (anchor, slot + 2),
        Some(AnchorPos { anchor, .. }) => (1 - anchor, 0),
        None => (0, 0),
    }
}

/// Writes checkpoint `cp` (two copies) after `pos`, erasing and switching anchor blocks when
/// needed. Returns the new position; the store's checkpoint number is left at the number
/// written, which is `cp.cp_number` plus one per failed attempt.
///
/// With a home pair ([`Home`]), a checkpoint goes to the home pair instead when `to_home`
/// (the one that takes the anchors out of the area) or when an anchor fails at the start of
/// its block: the anchor is replaced by a free block anywhere, and the checkpoint that names
/// it is written home, after `home.pos` (which it updates). The anchor taken is started by
/// the next checkpoint (the position returned says so).
pub fn write<F: Flash>(
    st: &mut Store<F>,
    cp: &Checkpoint,
    pos: Option<AnchorPos>,
    home: &mut Home,
    to_home: bool,
    may_leave: bool,
) -> Result<AnchorPos> {
    let per = slots_per_block(&st.p());
    let (mut anchor, mut slot) = next_slot(per, pos);
    let mut at_home = to_home && home.active();
    let (mut ha, mut hs) = next_slot(per, Some(home.pos));
    // The anchor the next checkpoint starts after a home checkpoint: one just taken.
    let mut fresh = 1;
    // Whether a block that could not be replaced sent the checkpoint after the other block's
    // used pairs ([`append_instead`], once per write).
    let mut appended = false;
    // A program or erase of an anchor that fails: a failed append moves to the other anchor;
    // a failed start of a block retires it and starts in a free block of the anchor area.
    // Each retry takes the next checkpoint number: the failed attempt may have left a valid
    // first copy behind (naming the old anchor pair), and a mount must find the retry newer.
    // A write that fails leaves the store's number past every number tried, so that a copy
    // left by a failed attempt is never as new as a later checkpoint.
    let attempts = cp.cp_number..cp.cp_number + ANCHOR_AREA as u64 + 2;
    for number in attempts {
        st.set_cp_number(number + 1);
        if at_home {
            if write_at(st, cp, home.blocks, number, home.blocks[ha], hs)? {
                st.set_cp_number(number);
                home.pos = AnchorPos {
                    anchor: ha,
                    slot: hs,
                    may_append: true,
                };
                home.holds_newest = true;
                return Ok(AnchorPos {
                    anchor: 1 - fresh,
                    slot: 0,
                    may_append: false,
                });
            }
            if hs != 0 {
                ha = 1 - ha;
                hs = 0;
            } else if let Err(e) = replace_in(st, &mut home.blocks, ha, false) {
                hs = append_instead(st, &mut appended, home.blocks[1 - ha], e)?;
                ha = 1 - ha;
            }
            continue;
        }
        let block = st.p().anchors[anchor];
        if write_at(st, cp, home.blocks, number, block, slot)? {
            st.set_cp_number(number);
            home.holds_newest = false;
            return Ok(AnchorPos {
                anchor,
                slot,
                may_append: true,
            });
        }
        if slot != 0 {
            anchor = 1 - anchor;
            slot = 0;
        } else if let Err(e) = replace_anchor(st, anchor, home.active()) {
            let other = st.p().anchors[1 - anchor];
            slot = append_instead(st, &mut appended, other, e)?;
            anchor = 1 - anchor;
        } else if home.active() {
            fresh = anchor;
            at_home = true;
        } else {
            // The area worn out but for one block (bad or swapped out: failures): the anchors
            // leave it, and the pair becomes the home pair, starting with this checkpoint
            // (not at a mount's restamp: before replay, a free block of the table may hold
            // what the journal wrote after it). The home pair's next checkpoint starts the
            // block just taken.
            let newest = AnchorPos {
                anchor: 1 - anchor,
                slot: 0,
                may_append: false,
            };
            if may_leave && area_spares(st) <= 1 && leave_area(st, home, newest)? {
                (ha, hs) = next_slot(per, Some(home.pos));
                fresh = 1;
                at_home = true;
            }
        }
    }
    Err(Error::Io)
}

/// When a block of a pair (anchors or home) that failed at its start could not be replaced
/// (`e`: no block of the anchor area free, `NoSpace`, or none left, `Io`), the slot of the
/// pair's other block `other` after every pair of it ever programmed, once per write: a
/// checkpoint there is found as the newest of its block, and a cut attempt before it reads
/// as older. The failed block stays in the pair, to be started (and replaced, once
/// collection has emptied a block of the area) when `other` is full. (A home block that failed
/// at a mount's restamp, with the area's one remaining block holding data, made the mount
/// fail with `NoSpace`: the model test with faults, SLC seed 4057 at 1,000 operations.) `e`
/// again when `other` is full, or after one such try.
fn append_instead<F: Flash>(
    st: &mut Store<F>,
    appended: &mut bool,
    other: u32,
    e: Error,
) -> Result<u32> {
    let per = slots_per_block(&st.p());
    if *appended || !matches!(e, Error::NoSpace | Error::Io) || other >= st.p().geometry.blocks {
        return Err(e);
    }
    *appended = true;
    let pair = first_unused_pair(st, other, st.p().cp_slot)?;
    if pair * 2 + 1 < per {
        Ok(pair * 2)
    } else {
        Err(e)
    }
}

/// Anchor wear leveling, before a checkpoint that will start a block (erase the other anchor):
/// when that anchor has been erased more than once above the mean of the blocks in circulation
/// (anchors and bad blocks aside) and a free block of the anchor area has been erased at least
/// two times less, that block takes its place in the parameters. The block table the
/// checkpoint writes then records the pair it names: the new anchor as `Anchor`, the old one as
/// `PendingErase` (free once the checkpoint is written; until then it is never handed out, and
/// a checkpoint cut before that names the old pair). True when the anchor moved.
///
/// Must run before the checkpoint's block-table pages are written. A cut while the first slot
/// of the new anchor is written leaves a block that the table calls free with a programmed
/// first slot: mount looks for one ([`moved_anchor_attempt`]).
pub fn level_anchors<F: Flash>(st: &mut Store<F>, pos: AnchorPos) -> Result<bool> {
    let p = st.p();
    if !starts_block(&p, pos) {
        return Ok(false);
    }
    let other = pos.anchor ^ 1;
    let worn = p.anchors[other];
    if worn >= p.geometry.blocks {
        return Ok(false);
    }
    let wec = st.wear(worn)?.ec;
    if !st.wl_figures()?.above_mean(wec, 1) {
        return Ok(false);
    }
    let Some((yec, young)) = youngest_free_in_area(st)? else {
        return Ok(false);
    };
    if yec.saturating_add(2) > wec {
        return Ok(false);
    }
    let mut np = p;
    np.anchors[other] = young;
    st.set_params(np);
    st.set_state(young, BlockState::Anchor)?;
    st.set_state(worn, BlockState::PendingErase)?;
    Ok(true)
}

/// The least worn free block of the anchor area (not an anchor, not swapped out), with its
/// erase count.
fn youngest_free_in_area<F: Flash>(st: &mut Store<F>) -> Result<Option<(u32, u32)>> {
    let p = st.p();
    let mut young: Option<(u32, u32)> = None;
    for b in 0..ANCHOR_AREA.min(p.geometry.blocks) {
        if !p.anchors.contains(&b) && st.phys(b) == b && st.block(b)?.state().is_free() {
            let ec = st.wear(b)?.ec;
            if young.is_none_or(|y| ec < y.0) {
                young = Some((ec, b));
            }
        }
    }
    Ok(young)
}

/// The erase count of the anchor a checkpoint at `pos` starts (erasing it), when it is worn
/// more than static wear leveling's threshold above the mean of the blocks in circulation.
fn worn_anchor<F: Flash>(st: &mut Store<F>, pos: AnchorPos) -> Result<Option<u32>> {
    let p = st.p();
    let worn = p.anchors[pos.anchor ^ 1];
    if !starts_block(&p, pos) || worn >= p.geometry.blocks {
        return Ok(None);
    }
    let wec = st.wear(worn)?.ec;
    let f = st.wl_figures()?;
    Ok(f.above_mean(wec, f.threshold()).then_some(wec))
}

/// Whether the anchor area as a whole wears faster than the device: the anchor a checkpoint
/// at `pos` starts is worn more than static leveling's threshold above the mean, and no free
/// block of the area is two erases younger to take its place ([`level_anchors`]). A workload
/// of many checkpoints and little data does this: on 4 KiB NOR sectors a checkpoint's two
/// copies take half of an anchor, so the area's 8 blocks took every second checkpoint's erase
/// between them; 100,000 files created on 128 MiB of SLC NAND left its blocks at 17 erases
/// against a mean of 2.8. The anchors then leave the area ([`leave_area`]) and are leveled
/// over the whole device ([`level_roaming_anchor`]). (Leaving later, at a lead of 16 erases,
/// was tried: it only delays what the area's wear rate makes necessary, and the home pair
/// then starts from more worn blocks.)
pub fn area_worn<F: Flash>(st: &mut Store<F>, pos: AnchorPos) -> Result<bool> {
    let Some(wec) = worn_anchor(st, pos)? else {
        return Ok(false);
    };
    Ok(youngest_free_in_area(st)?.is_none_or(|(yec, _)| yec.saturating_add(2) > wec))
}

/// Anchor wear leveling outside the anchor area (with a home pair), before a checkpoint that
/// will start a block: when that anchor is worn more than static leveling's threshold above
/// the mean and the two least worn free blocks outside the area are two erases younger, they
/// (erased) take the place of both anchors, which become `PendingErase` (free once the
/// checkpoint is written). The checkpoint that names the new pair must be written home, as
/// after a failed anchor ([`write`]): a mount finds anchors outside the area only through the
/// home pair. Both move at once (the two wear alike, taking turns) so that the home pair is
/// written once per two moves: it is written and erased only by moves, but in the area. And
/// they move only when that anchor is worn more than the home block the home checkpoint would
/// start (erase), if it starts one: a move spends an erase there to spare the anchors one.
/// (Without this, 20,000 rounds of the metadata churn of `tests/wear.rs` on 1 MiB of 4 KiB
/// NOR sectors left the home pair at 132 erases against a mean of 92.) True when the anchors
/// moved.
pub fn level_roaming_anchor<F: Flash>(
    st: &mut Store<F>,
    pos: AnchorPos,
    home: &Home,
) -> Result<bool> {
    let Some(wec) = worn_anchor(st, pos)? else {
        return Ok(false);
    };
    if let Some(h) = home_block_started(&st.p(), home) {
        if st.wear(h)?.ec >= wec {
            return Ok(false);
        }
    }
    let Some(pair) = take_roaming_pair(st, wec.saturating_sub(1))? else {
        return Ok(false);
    };
    let mut p = st.p();
    for old in p.anchors {
        st.set_state(old, BlockState::PendingErase)?;
    }
    p.anchors = pair;
    st.set_params(p);
    Ok(true)
}

/// Two free blocks outside the anchor area erased fewer than `below` times, erased and marked
/// `Anchor` ([`Store::pick_roaming_anchor`]); none taken when two cannot be had.
fn take_roaming_pair<F: Flash>(st: &mut Store<F>, below: u32) -> Result<Option<[u32; 2]>> {
    let Some(a) = st.pick_roaming_anchor(below)? else {
        return Ok(None);
    };
    st.set_state(a, BlockState::Anchor)?;
    let Some(b) = st.pick_roaming_anchor(below)? else {
        st.set_state(a, BlockState::Erased)?;
        return Ok(None);
    };
    st.set_state(b, BlockState::Anchor)?;
    Ok(Some([a, b]))
}

/// Whether a free block of the anchor area has a programmed first slot: a checkpoint that moved
/// an anchor there ([`level_anchors`]) was cut while it was written. Such a slot may read as a
/// valid checkpoint at a later mount, numbered like the next one this mount writes, and name
/// the block as an anchor after it has been reused: the caller writes its checkpoint again
/// with a higher number ([`restamp`]). The blocks found are marked `Free` (erased before use).
///
/// Needs the loaded block table and `holding` from [`find_newest`]. Only blocks a move after
/// the checkpoint at `pos` could have taken are read: a move takes a block at least two erases
/// younger than the anchor it replaces, the anchor `pos` does not hold, whose erase count no
/// write after that checkpoint changed (nor those of the free blocks). So a mount reads no slot
/// at all until the anchors have worn ahead of the free blocks of their area.
#[inline(never)]
pub fn moved_anchor_attempt<F: Flash>(
    st: &mut Store<F>,
    pos: AnchorPos,
    holding: u32,
) -> Result<bool> {
    let p = st.p();
    let worn = p.anchors[pos.anchor ^ 1];
    if worn >= p.geometry.blocks {
        return Ok(false);
    }
    let wec = st.wear(worn)?.ec;
    let area = ANCHOR_AREA.min(p.geometry.blocks);
    let mut found = false;
    for b in 0..area {
        let e = st.block(b)?;
        if p.anchors.contains(&b)
            || st.phys(b) != b
            || !e.state().is_free()
            || st.wear(b)?.ec.saturating_add(2) > wec
        {
            continue;
        }
        // A block that was an anchor before holds its old checkpoints: valid ones of this
        // file system are no cut attempt (one that reads as valid now would be newer than the
        // choice and have been chosen). Only a used first slot without one is. (`holding`:
        // what `find_newest` read, so that old anchors cost no read here.)
        if holding & (1 << b) == 0 && slot_used(st, b, 0, p.cp_slot)? {
            st.set_state(b, BlockState::Free)?;
            found = true;
        }
    }
    Ok(found)
}

/// Whether one of the first two slots of `block` holds a valid checkpoint of file system `fs_id`
/// numbered below `below`.
pub fn holds_checkpoint_of<F: Flash>(
    st: &mut Store<F>,
    block: u32,
    fs_id: u64,
    cp_slot: u32,
    below: u64,
) -> Result<bool> {
    for slot in [0u32, 1] {
        if let Some(c) = read_slot(st, block, slot, cp_slot)? {
            if c.params.fs_id == fs_id && c.cp_number < below {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Replaces member `i` of `pair` (the anchors, or the home pair), which failed, and retires
/// it: by a free block of the anchor area, or with `outside`, by the least worn free block
/// outside the area, erased (`NoSpace` when none is free).
///
/// A block of the area is never one whose data was swapped to another physical block: mount
/// reads the anchor area before it knows the swaps, so a checkpoint there would not be found.
/// With none free, the previous checkpoint stays the valid one and the failed block stays in
/// place to be tried again. While the area holds blocks that collection can empty
/// (`Fs::anchor_spare_victim`), that is a lack of room (ENOSPC) until it has; with every other
/// block of the area bad or swapped out, the area is worn out (EIO).
fn replace_in<F: Flash>(
    st: &mut Store<F>,
    pair: &mut [u32; 2],
    i: usize,
    outside: bool,
) -> Result<()> {
    let new = if outside {
        st.pick_roaming_anchor(u32::MAX)?.ok_or(Error::NoSpace)?
    } else {
        let area = ANCHOR_AREA.min(st.p().geometry.blocks);
        let free = (0..area).find(|&b| {
            st.phys(b) == b
                && matches!(
                    st.area_block(b).state(),
                    BlockState::Free | BlockState::Erased
                )
        });
        match free {
            Some(b) => b,
            None if area_spares(st) > 0 => return Err(Error::NoSpace),
            None => return Err(Error::Io),
        }
    };
    st.retire(pair[i]);
    pair[i] = new;
    st.set_state(new, BlockState::Anchor)?;
    Ok(())
}

/// Replaces anchor `anchor`, which failed (see [`replace_in`]).
fn replace_anchor<F: Flash>(st: &mut Store<F>, anchor: usize, outside: bool) -> Result<()> {
    let mut p = st.p();
    replace_in(st, &mut p.anchors, anchor, outside)?;
    st.set_params(p);
    Ok(())
}

/// Blocks of the anchor area that are free to replace an anchor or can be emptied for it (not
/// bad, not swapped out, not anchors).
pub fn area_spares<F: Flash>(st: &Store<F>) -> usize {
    let p = st.p();
    (0..ANCHOR_AREA.min(p.geometry.blocks))
        .filter(|&b| {
            !p.anchors.contains(&b)
                && st.phys(b) == b
                && !matches!(
                    st.area_block(b).state(),
                    BlockState::Bad | BlockState::Anchor
                )
        })
        .count()
}

/// Takes the anchors out of the anchor area: two free blocks outside it (erased) become the
/// anchors, and the two anchors the home pair, whose newest checkpoint is at `newest`.
/// False (nothing changed) when two such blocks cannot be had.
pub fn leave_area<F: Flash>(st: &mut Store<F>, home: &mut Home, newest: AnchorPos) -> Result<bool> {
    let Some(pair) = take_roaming_pair(st, u32::MAX)? else {
        return Ok(false);
    };
    let mut p = st.p();
    *home = Home {
        blocks: p.anchors,
        pos: newest,
        holds_newest: true,
    };
    p.anchors = pair;
    st.set_params(p);
    Ok(true)
}

/// Writes the two copies of `cp`, numbered `number` and naming the home pair `home`, at `slot`
/// of anchor or home block `block` (erasing the block first at slot 0). False when the device
/// refused the erase or a program.
fn write_at<F: Flash>(
    st: &mut Store<F>,
    cp: &Checkpoint,
    home: [u32; 2],
    number: u64,
    block: u32,
    slot: u32,
) -> Result<bool> {
    let p = st.p();
    if slot == 0 {
        match st.erase_raw(block) {
            Ok(()) => {}
            Err(FlashError::PowerLoss) => return Err(Error::PowerLoss),
            Err(_) => return Ok(false),
        }
    }
    // The parameters name the anchors, which may have just changed (and the home pair).
    let mut cp = cp.clone();
    cp.params = p;
    cp.cp_number = number;
    cp.home = home;
    let bytes = cp.encode().finish(st.seq(), p.unit());
    st.set_seq(st.seq() + 1);
    if bytes.len() > p.cp_slot as usize {
        return Err(Error::NoMemory);
    }
    let g = p.geometry;
    let mut data = bytes.clone();
    let unit = g.program_unit as usize;
    data.resize(data.len().div_ceil(unit) * unit, 0);
    if data.len() > p.cp_slot as usize {
        data.truncate(p.cp_slot as usize);
    }
    let bs = g.block_size() as u64;
    for copy in 0..2u32 {
        let pos = block as u64 * bs + slot_offset(&p, slot + copy, p.cp_slot);
        let tag = OobTag::nodes(cp.cp_number).encode();
        let oob: &[u8] = match g.flash_kind() {
            FlashKind::Nand => &tag[..OOB_TAG_LEN.min(g.oob_free_len as usize)],
            FlashKind::Nor => &[],
        };
        match st.program_raw(pos, &data, oob) {
            Ok(()) => {}
            Err(FlashError::PowerLoss) => return Err(Error::PowerLoss),
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::params::FormatOptions;
    use crate::fs::Fs;
    use dffs_testkit::ram_flash::{nor_geometry, RamFlash};

    /// The store of a freshly formatted NOR device of 32 blocks.
    fn formatted_nor() -> Store<RamFlash> {
        let g = nor_geometry(32);
        let dev = Fs::format(RamFlash::new(g), &FormatOptions::default()).unwrap();
        let p = Params::for_geometry(g, &FormatOptions::default()).unwrap();
        Store::new(dev, p)
    }

    /// `CP_BT_DIRS` is accepted only where the device's table needs directory nodes, and
    /// then the body carries their addresses, not the pages'; without it the pages are listed
    /// on any device.
    #[test]
    fn directory_nodes_are_named_only_where_the_table_needs_them() {
        let mut st = formatted_nor();
        let (cp, _, _, _) = find_newest(&mut st).unwrap();
        assert_eq!(cp.params.bt_dir_nodes(), 0);
        assert!(cp.bt_dirs.is_empty() && !cp.bt_pages.is_empty());
        let body = |cp: &Checkpoint| {
            let nb = cp.encode();
            nb.w.buf[crate::format::params::NODE_HEADER as usize..].to_vec()
        };
        assert_eq!(Checkpoint::decode(&body(&cp)).unwrap(), *cp);
        // The flag on a device that needs no directory nodes.
        let mut forged = (*cp).clone();
        forged.bt_dirs = cp.bt_pages.clone();
        assert_eq!(Checkpoint::decode(&body(&forged)), Err(Error::Corrupt));
        // A device that needs them: 12,288 sectors of 4 KiB (48 MiB), as formatted.
        let preset = dffs_sim::preset::preset("nor-qspi-16m")
            .and_then(|p| p.with_erase_size(4096).ok())
            .and_then(|p| p.with_size_bytes(48 << 20).ok())
            .unwrap();
        let dev = Fs::format(
            dffs_sim::SimFlash::new(preset).unwrap(),
            &FormatOptions::default(),
        )
        .unwrap();
        let p = Params::for_geometry(preset.geometry, &FormatOptions::default()).unwrap();
        let mut st = Store::new(dev, p);
        let (big, _, _, _) = find_newest(&mut st).unwrap();
        let dirs = big.params.bt_dir_nodes() as usize;
        assert!(dirs > 0);
        assert_eq!(big.bt_dirs.len(), dirs);
        assert!(big.bt_pages.is_empty());
        assert_eq!(Checkpoint::decode(&body(&big)).unwrap(), *big);
        // Without the flag it lists the pages (as images written before the nodes existed).
        let pages = preset.geometry.blocks.div_ceil(big.params.bt_entries()) as usize;
        let mut listed = (*big).clone();
        listed.bt_pages = alloc::vec![big.bt_dirs[0]; pages];
        listed.bt_dirs.clear();
        let back = Checkpoint::decode(&body(&listed)).unwrap();
        assert_eq!(back.bt_pages.len(), pages);
        assert!(back.bt_dirs.is_empty());
    }

    /// A journal bound is carried as the record's last field, after the delta count (always
    /// present then) and the home pair, and survives the round trip with and without a home;
    /// a checkpoint without the flag decodes with no bound, and one cut short of its bound
    /// does not decode.
    #[test]
    fn a_journal_bound_round_trips_as_the_last_field() {
        let mut st = formatted_nor();
        let (cp, _, _, _) = find_newest(&mut st).unwrap();
        assert_eq!(cp.journal_records, None);
        let body = |cp: &Checkpoint| {
            let nb = cp.encode();
            nb.w.buf[crate::format::params::NODE_HEADER as usize..].to_vec()
        };
        let plain = body(&cp);
        // (A table of one page has no delta nodes: the count written is 0.)
        assert_eq!(cp.params.bt_delta_nodes(), 0);
        for home in [false, true] {
            let mut bound = (*cp).clone();
            bound.journal_records = Some(0x0102_0304);
            if home {
                bound.home = [2, 3];
            }
            let bytes = body(&bound);
            // (Decoding keeps the flags as read: `encode` sets them from the fields.)
            bound.flags |= CP_JOURNAL_BOUND | if home { CP_HOME } else { 0 };
            assert_eq!(Checkpoint::decode(&bytes).unwrap(), bound, "home {home}");
            assert_eq!(&bytes[bytes.len() - 4..], &0x0102_0304u32.to_le_bytes());
            assert_eq!(
                Checkpoint::decode(&bytes[..bytes.len() - 4]),
                Err(Error::Corrupt),
                "home {home}"
            );
        }
        // Without deltas, home or bound, the delta count is left out as before.
        let mut bound = (*cp).clone();
        bound.journal_records = Some(7);
        assert_eq!(body(&bound).len(), plain.len() + 8);
    }

    /// A checkpoint's second copy is programmed only once the first is whole: a choice whose
    /// second copy does not read as it may be a first copy cut while it was programmed that
    /// read valid this once, and the mount must write it again (`cut_attempt_after`). Without
    /// that, a recovery took a clean unmount's checkpoint cut in its first copy and wrote on;
    /// the next mount read that copy invalid and went back to the checkpoint before it, losing
    /// a create synced in between (4 KiB NOR chained cuts, mixed seed 210).
    #[test]
    fn a_choice_without_its_second_copy_is_written_again() {
        let mut st = formatted_nor();
        let (cp, pos, _, _) = find_newest(&mut st).unwrap();
        let mut cp = *cp;
        cp.cp_number += 1;
        let at = AnchorPos {
            may_append: true,
            ..pos
        };
        let pos = write(
            &mut st,
            &cp,
            Some(at),
            &mut Home::NONE.clone(),
            false,
            false,
        )
        .unwrap();
        let (found, found_at, _, _) = find_newest(&mut st).unwrap();
        assert_eq!((found.cp_number, found_at.slot), (cp.cp_number, pos.slot));
        assert!(!cut_attempt_after(&mut st, pos, cp.cp_number, &Home::NONE).unwrap());
        // The second copy spoiled as a cut program leaves it (bits at 0): the first copy is
        // still the newest checkpoint, but no longer a durable choice.
        let p = st.p();
        let bs = p.geometry.block_size() as u64;
        let second = p.anchors[pos.anchor] as u64 * bs + slot_offset(&p, pos.slot + 1, p.cp_slot);
        st.program_raw(second, &[0u8; 64], &[]).unwrap();
        let (found, found_at, _, _) = find_newest(&mut st).unwrap();
        assert_eq!((found.cp_number, found_at.slot), (cp.cp_number, pos.slot));
        assert!(cut_attempt_after(&mut st, pos, cp.cp_number, &Home::NONE).unwrap());
    }

    /// A mount reads the anchors' slots more than once, and a slot a cut left half programmed
    /// may read as invalid to `find_newest` and as valid a moment later. A valid checkpoint in
    /// the other anchor numbered past the one chosen is such a slot (a legitimate one would
    /// have been chosen): `cut_attempt_after` must report it, so that the mount writes its
    /// choice again past it. (Taken for an old checkpoint, it was never outranked; a later
    /// mount chose it over the recovery checkpoint that had reused the blocks it names: 4 KiB
    /// NOR chained cuts, links seed 300, `mount: Corrupt`.)
    #[test]
    fn a_newer_checkpoint_in_the_other_anchor_than_the_choice_is_a_cut_attempt() {
        let mut st = formatted_nor();
        let (cp, mut pos, _, _) = find_newest(&mut st).unwrap();
        let mut cp = *cp;
        // Checkpoints appended until one switches to the other anchor's first slot.
        let (before, number_before) = loop {
            let prev = (pos, cp.cp_number);
            cp.cp_number += 1;
            pos = write(
                &mut st,
                &cp,
                Some(AnchorPos {
                    may_append: true,
                    ..pos
                }),
                &mut Home::NONE.clone(),
                false,
                false,
            )
            .unwrap();
            if pos.anchor != prev.0.anchor {
                assert_eq!(pos.slot, 0);
                break prev;
            }
        };
        // Chosen: the newest. The other anchor holds only older checkpoints.
        assert!(!cut_attempt_after(&mut st, pos, cp.cp_number, &Home::NONE).unwrap());
        // Chosen: the one before (the newest read as invalid a moment before): the newer one
        // in the other anchor is a cut attempt.
        assert!(cut_attempt_after(&mut st, before, number_before, &Home::NONE).unwrap());
    }
}
