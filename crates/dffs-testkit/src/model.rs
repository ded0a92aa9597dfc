//! The reference model: a file-system tree in plain data structures, the operations applied to
//! it with POSIX results, and reading a mounted DFFS back into the same shape.
//!
//! Owns what "the right answer" is. It must never call anything but the public DFFS API when
//! reading a file system, so a model mismatch always means a file-system bug (or a model bug).

use std::collections::{BTreeMap, BTreeSet};

use dffs::{Error, FileKind, Flash, Fs, OpenFlags, ROOT_INO};

/// A node of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file and its content.
    File(Vec<u8>),
    /// A directory.
    Dir,
    /// A symbolic link and its target.
    Link(Vec<u8>),
}

/// ENOSPC with less than this share of the room for files ([`room_for_files`]) held in file
/// content is a failure (torture runs and the model test check it at every ENOSPC). On the
/// tiny devices they run on (16-40 blocks) DFFS says ENOSPC at 88-100% of that room.
pub const NOSPACE_FLOOR: f64 = 0.5;

/// Blocks DFFS's format keeps whatever the device size: two anchors, five log heads, two
/// journal blocks and a five-block reserve. (Reserves that scale with the device are the block
/// layer's next step; this allowance then shrinks.)
pub const FIXED_BLOCKS: u64 = 14;

/// Bytes of room for files on a device of `good_blocks` good blocks of `block_size` bytes: the
/// blocks beyond [`FIXED_BLOCKS`].
pub fn room_for_files(good_blocks: u64, block_size: u64) -> u64 {
    good_blocks.saturating_sub(FIXED_BLOCKS) * block_size
}

/// Blocks more that DFFS keeps once its anchors have left the anchor area (worn out by
/// failures, or wearing faster than the device): the home pair there (DESIGN §10, §11).
pub const HOME_BLOCKS: u64 = 2;

/// The good blocks of a device of `good_blocks` that count for [`room_for_files`]: without the
/// home pair's when the anchors (`anchors`) lie outside the anchor area of `area` blocks.
pub fn good_for_files(good_blocks: u64, anchors: [u32; 2], area: u32) -> u64 {
    if anchors.iter().all(|&a| a >= area) {
        good_blocks.saturating_sub(HOME_BLOCKS)
    } else {
        good_blocks
    }
}

/// A whole tree: absolute path ("/a/b") → node. The root is implicit. Names of one file (hard
/// links) share an identity in `files`; two models are equal when their nodes are and the
/// same names are names of one file (whatever the identities' numbers).
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Every path except the root.
    pub nodes: BTreeMap<String, Node>,
    /// Identity of regular files that have had more than one name: path → file.
    pub files: BTreeMap<String, u64>,
}

impl PartialEq for Model {
    fn eq(&self, other: &Model) -> bool {
        self.nodes == other.nodes && self.link_groups() == other.link_groups()
    }
}

impl Eq for Model {}

/// Joins a directory path and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Splits a path into its directory and name.
pub fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

impl Model {
    /// The sets of names that are names of one file (two or more).
    pub fn link_groups(&self) -> BTreeSet<BTreeSet<String>> {
        let mut by_id: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for (p, id) in &self.files {
            by_id.entry(*id).or_default().insert(p.clone());
        }
        by_id.into_values().filter(|g| g.len() > 1).collect()
    }

    /// Copies `path`'s content to its other names.
    fn propagate(&mut self, path: &str) {
        let Some(&id) = self.files.get(path) else {
            return;
        };
        let content = self.nodes[path].clone();
        for (p, i) in &self.files {
            if *i == id && p != path {
                self.nodes.insert(p.clone(), content.clone());
            }
        }
    }

    /// Result of `link` (a new name `dst` for the regular file `src`).
    pub fn link(&mut self, src: &str, dst: &str) -> Result<(), Error> {
        let content = match self.nodes.get(src) {
            Some(Node::Dir) => return Err(Error::NotPermitted),
            Some(n) => n.clone(),
            None => return Err(Error::NotFound),
        };
        let (dir, _) = split(dst);
        if !self.is_dir(dir) {
            return Err(Error::NotFound);
        }
        if self.nodes.contains_key(dst) {
            return Err(Error::Exists);
        }
        let next = self.files.values().max().map_or(0, |m| m + 1);
        let id = *self.files.entry(src.to_string()).or_insert(next);
        self.files.insert(dst.to_string(), id);
        self.nodes.insert(dst.to_string(), content);
        Ok(())
    }

    /// Every directory, root first.
    pub fn dirs(&self) -> Vec<String> {
        let mut v = vec!["/".to_string()];
        v.extend(
            self.nodes
                .iter()
                .filter(|(_, n)| **n == Node::Dir)
                .map(|(k, _)| k.clone()),
        );
        v
    }
    /// Every regular file.
    pub fn files(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::File(_)))
            .map(|(k, _)| k.clone())
            .collect()
    }
    /// Entries directly inside `dir`.
    pub fn children(&self, dir: &str) -> Vec<String> {
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
            .cloned()
            .collect()
    }
    fn is_dir(&self, p: &str) -> bool {
        p == "/" || self.nodes.get(p) == Some(&Node::Dir)
    }
    /// Total bytes of file content.
    pub fn bytes(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| {
                if let Node::File(d) = n {
                    d.len() as u64
                } else {
                    0
                }
            })
            .sum()
    }

    /// Bytes of file content a file system must store: each file once, however many names it
    /// has. What an ENOSPC is measured against.
    pub fn stored_bytes(&self) -> u64 {
        let mut seen = BTreeSet::new();
        self.nodes
            .iter()
            .map(|(p, n)| match n {
                Node::File(d) if self.files.get(p).is_none_or(|id| seen.insert(*id)) => {
                    d.len() as u64
                }
                _ => 0,
            })
            .sum()
    }

    /// Bytes of file content a file system holds while a transaction that began at `earlier`
    /// is open: everything it held then (nothing is freed before the commit) and every file
    /// whose content has changed since (its new version).
    pub fn stored_bytes_since(&self, earlier: &Model) -> u64 {
        let changed: u64 = self
            .nodes
            .iter()
            .map(|(p, n)| match n {
                Node::File(d) if earlier.nodes.get(p) != Some(n) => d.len() as u64,
                _ => 0,
            })
            .sum();
        earlier.stored_bytes() + changed
    }

    /// Result of creating a file or directory at `path`.
    pub fn create(&mut self, path: &str, node: Node) -> Result<(), Error> {
        let (dir, _) = split(path);
        if !self.is_dir(dir) {
            return Err(Error::NotFound);
        }
        if self.nodes.contains_key(path) {
            return Err(Error::Exists);
        }
        self.nodes.insert(path.to_string(), node);
        Ok(())
    }
    /// Result of writing `data` at `off` into file `path`.
    pub fn write(&mut self, path: &str, off: u64, data: &[u8]) -> Result<(), Error> {
        match self.nodes.get_mut(path) {
            Some(Node::File(c)) => {
                let end = off as usize + data.len();
                if c.len() < end {
                    c.resize(end, 0);
                }
                c[off as usize..end].copy_from_slice(data);
                self.propagate(path);
                Ok(())
            }
            Some(Node::Dir) => Err(Error::IsDir),
            Some(Node::Link(_)) => Err(Error::Invalid),
            None => Err(Error::NotFound),
        }
    }
    /// Result of truncating file `path` to `size`.
    pub fn truncate(&mut self, path: &str, size: u64) -> Result<(), Error> {
        match self.nodes.get_mut(path) {
            Some(Node::File(c)) => {
                c.resize(size as usize, 0);
                self.propagate(path);
                Ok(())
            }
            Some(Node::Dir) => Err(Error::IsDir),
            Some(Node::Link(_)) => Err(Error::Invalid),
            None => Err(Error::NotFound),
        }
    }
    /// Result of `unlink`.
    pub fn unlink(&mut self, path: &str) -> Result<(), Error> {
        match self.nodes.get(path) {
            Some(Node::Dir) => Err(Error::IsDir),
            Some(_) => {
                self.nodes.remove(path);
                self.files.remove(path);
                Ok(())
            }
            None => Err(Error::NotFound),
        }
    }
    /// Result of `rmdir`.
    pub fn rmdir(&mut self, path: &str) -> Result<(), Error> {
        match self.nodes.get(path) {
            Some(Node::Dir) if !self.children(path).is_empty() => Err(Error::NotEmpty),
            Some(Node::Dir) => {
                self.nodes.remove(path);
                Ok(())
            }
            Some(_) => Err(Error::NotDir),
            None => Err(Error::NotFound),
        }
    }
    /// Result of `rename` (POSIX rules, directories moved with their subtree).
    pub fn rename(&mut self, src: &str, dst: &str) -> Result<(), Error> {
        let Some(s) = self.nodes.get(src).cloned() else {
            return Err(Error::NotFound);
        };
        let (dd, _) = split(dst);
        if !self.is_dir(dd) {
            return Err(Error::NotFound);
        }
        // Renaming a name onto another name of the same file does nothing (POSIX).
        if src == dst
            || (self.files.contains_key(src) && self.files.get(src) == self.files.get(dst))
        {
            return Ok(());
        }
        let src_is_dir = s == Node::Dir;
        if src_is_dir && dst.starts_with(&format!("{src}/")) {
            return Err(Error::Invalid);
        }
        match self.nodes.get(dst) {
            Some(Node::Dir) if !src_is_dir => return Err(Error::IsDir),
            Some(Node::Dir) if !self.children(dst).is_empty() => return Err(Error::NotEmpty),
            Some(n) if *n != Node::Dir && src_is_dir => return Err(Error::NotDir),
            _ => {}
        }
        let moved: Vec<(String, Node)> = self
            .nodes
            .iter()
            .filter(|(k, _)| *k == src || k.starts_with(&format!("{src}/")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.nodes.remove(dst);
        self.files.remove(dst);
        for (k, _) in &moved {
            self.nodes.remove(k);
        }
        for (k, v) in moved {
            let to = format!("{dst}{}", &k[src.len()..]);
            if let Some(id) = self.files.remove(&k) {
                self.files.insert(to.clone(), id);
            }
            self.nodes.insert(to, v);
        }
        Ok(())
    }
}

/// Reads a whole mounted file system into a model (readdir, lookup, read). A power loss
/// while reading (background work after an operation may write) is reported as
/// [`POWER_LOSS`].
pub fn read_tree<F: Flash>(fs: &mut Fs<F>) -> Result<Model, String> {
    read_tree_inner(fs).map_err(|e| {
        if e.contains("PowerLoss") {
            POWER_LOSS.to_string()
        } else {
            e
        }
    })
}

/// The error text of [`read_tree`] when the device lost power.
pub const POWER_LOSS: &str = "power loss while reading";

fn read_tree_inner<F: Flash>(fs: &mut Fs<F>) -> Result<Model, String> {
    let mut m = Model::default();
    let mut inos: BTreeMap<String, u64> = BTreeMap::new();
    let mut stack = vec![("/".to_string(), ROOT_INO)];
    let mut dirs_seen = 0usize;
    while let Some((path, ino)) = stack.pop() {
        dirs_seen += 1;
        if dirs_seen > 1_000_000 {
            return Err("directory walk does not end".into());
        }
        let mut ents = Vec::new();
        fs.readdir(ino, 0, &mut |e| {
            ents.push(e);
            true
        })
        .map_err(|e| format!("readdir {path}: {e:?}"))?;
        for e in ents {
            let name = String::from_utf8_lossy(&e.name).to_string();
            let p = join(&path, &name);
            match e.kind {
                FileKind::Dir => {
                    m.nodes.insert(p.clone(), Node::Dir);
                    stack.push((p, e.ino));
                }
                FileKind::Symlink => {
                    let t = fs
                        .readlink(e.ino)
                        .map_err(|err| format!("readlink {p}: {err:?}"))?;
                    m.nodes.insert(p, Node::Link(t));
                }
                FileKind::File => {
                    let st = fs.stat(e.ino).map_err(|err| format!("stat {p}: {err:?}"))?;
                    let fh = fs
                        .open(e.ino, OpenFlags::READ)
                        .map_err(|err| format!("open {p}: {err:?}"))?;
                    let mut buf = vec![0u8; st.size as usize];
                    let n = fs
                        .read(fh, 0, &mut buf)
                        .map_err(|err| format!("read {p}: {err:?}"));
                    fs.close(fh).map_err(|err| format!("close {p}: {err:?}"))?;
                    let n = n?;
                    if n as u64 != st.size {
                        return Err(format!("{p}: read {n} bytes of {}", st.size));
                    }
                    if st.nlink > 1 {
                        inos.insert(p.clone(), st.ino as u64);
                    }
                    m.nodes.insert(p, Node::File(buf));
                }
            }
        }
    }
    m.files = inos;
    Ok(m)
}

/// A short description of how two models differ (for failure reports).
pub fn diff(a: &Model, b: &Model) -> String {
    let mut out = Vec::new();
    for (k, v) in &a.nodes {
        match b.nodes.get(k) {
            None => out.push(format!("only in first: {k}")),
            Some(w) if w != v => match (v, w) {
                (Node::File(x), Node::File(y)) => {
                    let i = x
                        .iter()
                        .zip(y)
                        .position(|(p, q)| p != q)
                        .unwrap_or(x.len().min(y.len()));
                    out.push(format!(
                        "{k}: {} vs {} bytes, first difference at {i}",
                        x.len(),
                        y.len()
                    ))
                }
                _ => out.push(format!("{k}: {v:?} vs {w:?}")),
            },
            _ => {}
        }
    }
    for k in b.nodes.keys() {
        if !a.nodes.contains_key(k) {
            out.push(format!("only in second: {k}"));
        }
    }
    out.truncate(8);
    out.join("; ")
}
