//! The consistency checker.
//!
//! Walks the whole file system from the root and checks every invariant of the format: each
//! directory is reached exactly once and its page says who its parent is; each slot's hash
//! key matches the name it leads to and its directory bit the kind; each file's inode node
//! names its parent and name, and the inode map agrees (mutual pointers); counts of entries and
//! subdirectories match the slots; index trees are well formed; data blocks carry the tags of
//! the file and block that map them (NAND) and their CRCs match; no address is used twice; every
//! referenced address lies in a block the block table says is in use, and no block holds more
//! live bytes than it is credited with. It never writes and never panics: a hostile image gives
//! a report full of errors.

use super::Fs;
use crate::error::{Error, Result};
use crate::format::attrs::{Ino, ROOT_INO};
use crate::format::node::TAG_DATA;
use crate::format::params::NandSupport;
use crate::format::params::{Addr, LogKind};
use crate::index::dir::{name_hash, PLACEHOLDER};
use crate::index::file::{blocks_for, FileNode};
use crate::index::inode_map::MapEntry;
use crate::store::BlockState;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use alloc::{format, vec};
use dffs_flash::{EccStatus, Flash, FlashKind};

/// Most errors recorded before the checker stops collecting details.
const MAX_MESSAGES: usize = 200;

/// What the checker found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Inconsistencies (the file system is not clean when there is any).
    pub errors: Vec<String>,
    /// Harmless oddities (e.g. space counted live that nothing references: reclaimed by GC).
    pub warnings: Vec<String>,
    /// Errors beyond the ones recorded.
    pub more_errors: usize,
    /// Blocks credited with more live bytes than the checker finds in them (beyond one
    /// directory page of slack), each also a warning: space GC will not reclaim until it
    /// collects them. Counted only with no uncommitted update open.
    pub over_credited: u64,
    /// Directories reached.
    pub dirs: u64,
    /// Files and symlinks reached.
    pub files: u64,
    /// Data blocks referenced.
    pub data_blocks: u64,
    /// Bytes of file content (sum of sizes).
    pub bytes: u64,
}

impl FsckReport {
    /// Whether no error was found.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty() && self.more_errors == 0
    }
    fn error(&mut self, m: String) {
        if self.errors.len() < MAX_MESSAGES {
            self.errors.push(m);
        } else {
            self.more_errors += 1;
        }
    }
    fn warn(&mut self, m: String) {
        if self.warnings.len() < MAX_MESSAGES {
            self.warnings.push(m);
        }
    }
}

struct Walk {
    rep: FsckReport,
    /// Referenced address → (length in bytes, what).
    used: BTreeMap<u32, (u32, &'static str)>,
    dirs: BTreeSet<Ino>,
    files: BTreeSet<Ino>,
}

impl Walk {
    fn claim(&mut self, a: Addr, len: u32, what: &'static str, ctx: &str) {
        if let Some((_, w)) = self.used.insert(a.0, (len, what)) {
            self.rep
                .error(format!("{ctx}: {what} at {a:?} is also used as {w}"));
        }
    }
}

fn path_of(parent_path: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if parent_path == "/" {
        format!("/{n}")
    } else {
        format!("{parent_path}/{n}")
    }
}

impl<F: Flash> Fs<F> {
    /// Checks the whole file system (committed state; open files' uncommitted changes are not
    /// looked at). Reads everything, writes nothing.
    pub fn fsck(&mut self) -> Result<FsckReport> {
        self.guard(|fs| fs.fsck_inner())
    }

    fn fsck_inner(&mut self) -> Result<FsckReport> {
        let p = self.store.p();
        let mut w = Walk {
            rep: FsckReport::default(),
            used: BTreeMap::new(),
            dirs: BTreeSet::new(),
            files: BTreeSet::new(),
        };
        // Directories, breadth first.
        let mut queue: VecDeque<(Ino, Ino, String, Vec<u8>)> = VecDeque::new();
        // Linked inodes reached so far: (slots leading to them, names they list).
        let mut linked_seen: BTreeMap<Ino, (u32, u32)> = BTreeMap::new();
        queue.push_back((ROOT_INO, ROOT_INO, String::from("/"), Vec::new()));
        while let Some((d, parent, path, name)) = queue.pop_front() {
            if !w.dirs.insert(d) {
                w.rep
                    .error(format!("{path}: directory {d} is reached more than once"));
                continue;
            }
            w.rep.dirs += 1;
            let (r_parent, r_name, entries, subdirs) =
                match self.dirs.root(&mut self.store, &mut self.map, d) {
                    Ok(r) => (r.parent, r.name.clone(), r.entries, r.subdirs),
                    Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                    Err(e) => {
                        w.rep
                            .error(format!("{path}: directory page unreadable ({e})"));
                        continue;
                    }
                };
            if r_parent != parent {
                w.rep.error(format!(
                    "{path}: directory says its parent is {r_parent}, reached from {parent}"
                ));
            }
            if d != ROOT_INO && r_name != name {
                w.rep.error(format!(
                    "{path}: directory page names it {:?}",
                    String::from_utf8_lossy(&r_name)
                ));
            }
            match self.dirs.live_page_addrs(&mut self.store, &mut self.map, d) {
                Ok(pages) => {
                    for (a, len) in pages {
                        w.claim(a, len, "directory page", &path);
                    }
                }
                Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                Err(e) => w
                    .rep
                    .error(format!("{path}: bucket pages unreadable ({e})")),
            }
            let slots = match self.dirs.all_slots(&mut self.store, &mut self.map, d) {
                Ok(s) => s,
                Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                Err(e) => {
                    w.rep.error(format!("{path}: entries unreadable ({e})"));
                    continue;
                }
            };
            if slots.len() as u32 != entries {
                w.rep.error(format!(
                    "{path}: {} entries, directory page counts {entries}",
                    slots.len()
                ));
            }
            let ndirs = slots.iter().filter(|s| s.is_dir()).count() as u32;
            if ndirs != subdirs {
                w.rep.error(format!(
                    "{path}: {ndirs} subdirectories, directory page counts {subdirs}"
                ));
            }
            let mut names: BTreeSet<Vec<u8>> = BTreeSet::new();
            for s in slots {
                if s.is_dir() {
                    let child = s.ptr;
                    match self.map.get(&mut self.store, child)? {
                        MapEntry::Dir(_) => {}
                        other => {
                            w.rep.error(format!("{path}: slot for directory {child} but the inode map says {other:?}"));
                            continue;
                        }
                    }
                    let cname = match self.dirs.root(&mut self.store, &mut self.map, child) {
                        Ok(r) => r.name.clone(),
                        Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                        Err(e) => {
                            w.rep
                                .error(format!("{path}: subdirectory {child} unreadable ({e})"));
                            continue;
                        }
                    };
                    let cpath = path_of(&path, &cname);
                    if name_hash(&cname) != s.hash() {
                        w.rep
                            .error(format!("{cpath}: slot hash does not match the name"));
                    }
                    if !names.insert(cname.clone()) {
                        w.rep.error(format!("{cpath}: name appears twice"));
                    }
                    queue.push_back((child, d, cpath, cname));
                    continue;
                }
                // A file.
                let node: FileNode = if s.is_placeholder() {
                    let ino = s.ptr & !PLACEHOLDER;
                    match (self.inodes.get(ino), self.map.get(&mut self.store, ino)?) {
                        (Some(c), _) => {
                            // A clean cached linked inode is live on flash.
                            let n = c.node.clone();
                            if !c.dirty && n.linked && !linked_seen.contains_key(&ino) {
                                w.claim(n.node_addr, n.node_len, "inode node", &path);
                            }
                            n
                        }
                        (None, MapEntry::Linked(a)) if !a.is_none() => {
                            match self.read_inode(a, 0) {
                                Ok(n) => {
                                    if !linked_seen.contains_key(&ino) {
                                        w.claim(a, n.node_len, "inode node", &path);
                                    }
                                    n
                                }
                                Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                                Err(e) => {
                                    w.rep.error(format!(
                                    "{path}: inode node of linked inode {ino} at {a:?} unreadable ({e})"
                                ));
                                    continue;
                                }
                            }
                        }
                        (None, e) => {
                            w.rep.error(format!(
                                "{path}: logical slot for inode {ino}, which the inode map says is {e:?}"
                            ));
                            continue;
                        }
                    }
                } else {
                    let a = Addr(s.ptr);
                    match self.read_inode(a, 0) {
                        Ok(n) => {
                            w.claim(a, n.node_len, "inode node", &path);
                            n
                        }
                        Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                        Err(e) => {
                            w.rep
                                .error(format!("{path}: inode node at {a:?} unreadable ({e})"));
                            continue;
                        }
                    }
                };
                // The name this slot stands for.
                let name: Vec<u8> = if node.linked {
                    match node
                        .names()
                        .find(|(p, n)| *p == d && name_hash(n) == s.hash())
                    {
                        Some((_, n)) => n.to_vec(),
                        None => {
                            w.rep.error(format!(
                                "{path}: a slot leads to linked inode {} with no name here of that hash",
                                node.ino
                            ));
                            continue;
                        }
                    }
                } else {
                    node.name.clone()
                };
                let fpath = path_of(&path, &name);
                if !names.insert(name.clone()) {
                    w.rep.error(format!("{fpath}: name appears twice"));
                }
                if name_hash(&name) != s.hash() {
                    w.rep
                        .error(format!("{fpath}: slot hash does not match the name"));
                }
                if !node.linked && node.parent != d {
                    w.rep
                        .error(format!("{fpath}: inode says its parent is {}", node.parent));
                }
                if node.attrs.is_dir() {
                    w.rep
                        .error(format!("{fpath}: a file slot leads to a directory inode"));
                }
                if node.linked {
                    if s.ptr != PLACEHOLDER | node.ino {
                        w.rep.error(format!(
                            "{fpath}: linked inode {} reached through a physical pointer",
                            node.ino
                        ));
                    }
                    match self.map.get(&mut self.store, node.ino)? {
                        MapEntry::Linked(_) => {}
                        e => w.rep.error(format!(
                            "{fpath}: inode map entry of linked inode {} is {e:?}",
                            node.ino
                        )),
                    }
                    let seen = linked_seen.entry(node.ino).or_insert((0, node.nlink()));
                    seen.0 += 1;
                    if seen.0 > 1 {
                        continue;
                    }
                } else {
                    let want = MapEntry::File {
                        parent: d,
                        hash: s.hash() & 0x3FFF_FFFF,
                    };
                    match self.map.get(&mut self.store, node.ino)? {
                        e if e == want => {}
                        e => w
                            .rep
                            .error(format!("{fpath}: inode map entry of {} is {e:?}", node.ino)),
                    }
                }
                if !w.files.insert(node.ino) {
                    w.rep
                        .error(format!("{fpath}: inode {} is named twice", node.ino));
                }
                w.rep.files += 1;
                self.fsck_content(&mut w, &node, &fpath)?;
            }
        }
        // A linked file is reached once per name it lists.
        for (ino, (seen, nlink)) in &linked_seen {
            if seen != nlink {
                w.rep.error(format!(
                    "linked inode {ino} lists {nlink} names but {seen} directory slots lead to it"
                ));
            }
        }
        // Every inode map entry must have been reached. Only the map pages that exist are
        // read: a hostile `ino_high` or a deep tree must not turn this into billions of
        // lookups.
        let high = self.map.high;
        let orphans: BTreeSet<Ino> = self.open.orphans().into_iter().collect();
        let mut used = Vec::new();
        match self
            .map
            .for_each_used(&mut self.store, &mut |ino, e| used.push((ino, e)))
        {
            Ok(()) => {}
            Err(Error::PowerLoss) => return Err(Error::PowerLoss),
            Err(e) => w.rep.error(format!("inode map unreadable ({e})")),
        }
        for (ino, e) in used {
            if ino == 0 || ino >= high {
                w.rep.error(format!(
                    "inode map entry of inode {ino} is {e:?}, past the highest inode number {high}"
                ));
                continue;
            }
            match e {
                MapEntry::Dir(_) if !w.dirs.contains(&ino) => w
                    .rep
                    .error(format!("directory inode {ino} is not reachable")),
                MapEntry::File { .. } | MapEntry::Linked(_) if !w.files.contains(&ino) => {
                    w.rep.error(format!("file inode {ino} is not reachable"))
                }
                MapEntry::Orphan if !orphans.contains(&ino) => w
                    .rep
                    .warn(format!("inode {ino} is an orphan with no open handle")),
                _ => {}
            }
        }
        if self.counts.files as u64 != w.rep.files + orphans.len() as u64 {
            w.rep.warn(format!(
                "file count {} but {} files reached",
                self.counts.files, w.rep.files
            ));
        }
        if self.counts.dirs as u64 != w.rep.dirs {
            w.rep.warn(format!(
                "directory count {} but {} directories reached",
                self.counts.dirs, w.rep.dirs
            ));
        }
        // Inode map pages.
        let mut map_pages = Vec::new();
        if let Err(e) = self
            .map
            .walk_pages(&mut self.store, &mut |a, _, _| map_pages.push(a))
        {
            if e == Error::PowerLoss {
                return Err(e);
            }
            w.rep.error(format!("inode map pages unreadable ({e})"));
        }
        for a in map_pages {
            w.claim(a, p.map_page, "inode map page", "inode map");
        }
        // Block-table pages (counted live in RAM, see the checkpoint). One in a block that
        // garbage collection emptied must be marked for the next checkpoint to rewrite.
        for (i, a) in self.store.bt_page_addrs().to_vec().into_iter().enumerate() {
            if a.is_none() {
                continue;
            }
            let collected = p.addr_valid(a)
                && self.store.block(p.block_of(a))?.state() == BlockState::PendingErase;
            if !collected {
                w.claim(a, p.map_page, "block-table page", "block table");
            } else if !self.store.bt_page_forced(i as u32) {
                w.rep.error(format!(
                    "block-table page {i} at {a:?} lies in a collected block and is not due \
                     to be rewritten"
                ));
            }
        }
        // Block-table delta and directory nodes: live while the newest checkpoint names them
        // (every checkpoint writes its own, so one in a collected block needs nothing more).
        for a in self.cp.table_nodes.clone() {
            let collected = p.addr_valid(a)
                && self.store.block(p.block_of(a))?.state() == BlockState::PendingErase;
            if !collected {
                w.claim(
                    a,
                    p.map_page,
                    "block-table delta or directory",
                    "block table",
                );
            }
        }
        self.fsck_blocks(&mut w)?;
        Ok(w.rep)
    }

    /// Index tree, data tags and sizes of one file.
    fn fsck_content(&mut self, w: &mut Walk, node: &FileNode, path: &str) -> Result<()> {
        let p = self.store.p();
        w.rep.bytes += node.size;
        if let Some(d) = &node.content.inline {
            if d.len() as u64 != node.size {
                w.rep.error(format!(
                    "{path}: inline content of {} bytes, size {}",
                    d.len(),
                    node.size
                ));
            }
            return Ok(());
        }
        let stride = p.stride();
        let mut blocks: Vec<(u32, Addr)> = Vec::new();
        let mut nodes: Vec<Addr> = Vec::new();
        let walked = {
            let mut ix = self.tree(node.ino);
            let c = &node.content;
            ix.walk(
                c,
                &mut |b, a| {
                    if c.pending.get(b, stride).is_none() && c.trunc.is_none_or(|t| b < t) {
                        blocks.push((b, a))
                    }
                },
                &mut |a, _, _| nodes.push(a),
            )
        };
        match walked {
            Ok(()) => {}
            Err(Error::PowerLoss) => return Err(Error::PowerLoss),
            Err(e) => w.rep.error(format!("{path}: index unreadable ({e})")),
        }
        blocks.extend(
            node.content
                .pending
                .iter_blocks(stride)
                .filter(|(_, a)| !a.is_none()),
        );
        for a in nodes {
            w.claim(a, p.align(p.index_node), "index node", path);
        }
        let nb = blocks_for(node.size, p.data_block);
        let mut claimed_nodes: BTreeMap<u32, u32> = BTreeMap::new();
        for (b, a) in blocks {
            w.rep.data_blocks += 1;
            if b as u64 >= nb {
                w.rep.warn(format!(
                    "{path}: block {b} mapped beyond the size {}",
                    node.size
                ));
            }
            if a.is_packed() {
                match self.data_extent(a) {
                    // The blocks of one node point at it alike: it is claimed once, for the
                    // shares of the blocks that still point at it.
                    Some((at, share)) => *claimed_nodes.entry(at.0).or_insert(0) += share,
                    None => {
                        w.rep
                            .error(format!("{path}: block {b} at {a:?} is no compressed node"));
                        continue;
                    }
                }
                let mut data = vec![0u8; p.data_block as usize];
                match self.read_data(a, node.ino, b, &mut data) {
                    Ok(()) => {}
                    Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                    Err(e) => w.rep.error(format!(
                        "{path}: compressed block {b} at {a:?} unreadable ({e})"
                    )),
                }
                continue;
            }
            if !p.addr_valid(a) {
                w.rep.error(format!(
                    "{path}: block {b} at an address outside the device ({a:?})"
                ));
                continue;
            }
            w.claim(a, p.data_slot(), "data block", path);
            if p.geometry.flash_kind() == FlashKind::Nand {
                let g = p.geometry;
                if p.byte_of(a) % g.page_size as u64 != 0 {
                    w.rep
                        .error(format!("{path}: block {b} at {a:?} is not page aligned"));
                    continue;
                }
                let page = (p.byte_of(a) / g.page_size as u64) as u32;
                let mut data = vec![0u8; g.page_size as usize];
                match self.store.read_tagged_page(page, &mut data) {
                    Ok((EccStatus::Uncorrectable, _)) => w
                        .rep
                        .error(format!("{path}: block {b} at {a:?} is uncorrectable")),
                    Ok((_, tag)) => match tag {
                        Ok(Some(t)) if t.kind == TAG_DATA && t.ino == node.ino && t.block == b => {
                            if t.data_crc != crate::format::codec::crc32c(&data) {
                                w.rep
                                    .error(format!("{path}: block {b} at {a:?} fails its CRC"));
                            }
                        }
                        Ok(t) => w
                            .rep
                            .error(format!("{path}: block {b} at {a:?} is tagged {t:?}")),
                        Err(_) => w
                            .rep
                            .error(format!("{path}: block {b} at {a:?} has a corrupt tag")),
                    },
                    Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                    Err(e) => w
                        .rep
                        .error(format!("{path}: block {b} at {a:?} unreadable ({e})")),
                }
            } else {
                // NOR: the block's own CRC (which also names its file and block number).
                let mut data = vec![0u8; p.data_block as usize];
                match self.read_data(a, node.ino, b, &mut data) {
                    Ok(()) => {}
                    Err(Error::PowerLoss) => return Err(Error::PowerLoss),
                    Err(e) => w.rep.error(format!(
                        "{path}: block {b} at {a:?} fails its CRC or is unreadable ({e})"
                    )),
                }
            }
        }
        for (at, shares) in claimed_nodes {
            // Shares round up: all of them together may exceed the node by a few bytes.
            let len = self.dataz_len(Addr(at)).unwrap_or(0).min(shares);
            w.claim(Addr(at), len, "compressed data node", path);
        }
        Ok(())
    }

    /// Block states and live-byte accounting against what the walk found referenced.
    fn fsck_blocks(&mut self, w: &mut Walk) -> Result<()> {
        let p = self.store.p();
        let nblocks = p.geometry.blocks as usize;
        let mut live = vec![0u64; nblocks];
        let used: Vec<(u32, (u32, &'static str))> = w.used.iter().map(|(a, v)| (*a, *v)).collect();
        let mut prev_end = 0u64;
        for (a, (len, what)) in used {
            let a = Addr(a);
            let start = p.byte_of(a);
            if start < prev_end {
                w.rep.error(format!(
                    "{what} at {a:?} overlaps the previous referenced item"
                ));
            }
            prev_end = start + len as u64;
            let b = p.block_of(a) as usize;
            if b >= nblocks {
                continue;
            }
            live[b] += len as u64;
            let e = self.store.block(b as u32)?;
            match e.state() {
                BlockState::Used | BlockState::Head => {}
                s => w
                    .rep
                    .error(format!("{what} at {a:?} lies in block {b}, which is {s:?}")),
            }
        }
        for (b, &l) in live.iter().enumerate() {
            let e = self.store.block(b as u32)?;
            if e.kind() == LogKind::Journal
                || !matches!(e.state(), BlockState::Used | BlockState::Head)
            {
                continue;
            }
            if l > e.live as u64 {
                w.rep.error(format!(
                    "block {b} holds {l} live bytes but is credited with {}",
                    e.live
                ));
            } else if (e.live as u64) > l + p.dir_page as u64
                && self.open.files.values().all(|o| o.overlay.is_none())
            {
                w.rep.over_credited += 1;
                w.rep.warn(format!(
                    "block {b} is credited with {} live bytes, {l} found (reclaimable)",
                    e.live
                ));
            }
        }
        Ok(())
    }
}
