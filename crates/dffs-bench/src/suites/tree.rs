//! The trees the `rootfs` suite writes: a deterministic synthetic root file system (a generator
//! seeded like everything else, not data), or a directory a user points at with `--tree`.
//!
//! The synthetic tree has 1,865 files over about 150 directories, as seed 000's ARM root file
//! system: executables, shared libraries, scripts and configuration files with log-normal sizes
//! (about 81 MB in all) and content about half compressible. For a partition it is scaled by
//! file count, never by file size: the files are taken in a fixed shuffled order until 85% of
//! the partition is reached, and further copies of the tree (under `/copyN`) are used when one is
//! not enough. Owns the generator and the host-tree walker; must never hold a file system.

use std::path::{Path, PathBuf};

use crate::content::{rng, Content, Pattern};

/// Where a file's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Generated content.
    Synthetic(Content),
    /// A file on the host (read when written and again when verified).
    Host(PathBuf),
}

/// One file of a tree.
#[derive(Clone, Debug)]
pub struct FileSpec {
    /// Absolute path in the file system under test.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Its bytes.
    pub source: Source,
}

impl FileSpec {
    /// The whole content.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        match &self.source {
            Source::Synthetic(c) => Ok(c.bytes(0, self.size as usize)),
            Source::Host(p) => std::fs::read(p).map_err(|e| format!("{}: {e}", p.display())),
        }
    }
}

/// A tree to write: directories (each after its parent) and files.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// Directories, parents first.
    pub dirs: Vec<String>,
    /// Files.
    pub files: Vec<FileSpec>,
    /// Host entries left out (symlinks, devices, unreadable), for `--tree`.
    pub skipped: Vec<String>,
}

impl Tree {
    /// Total file bytes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// The largest file of the synthetic tree (an embedded root file system's largest files, libc
/// or busybox, are a megabyte or two).
pub const MAX_FILE: u64 = 2 << 20;

/// Files in the base tree (seed 000).
pub const BASE_FILES: usize = 1865;
/// Directories in the base tree.
pub const BASE_DIRS: usize = 150;

#[derive(Clone, Copy)]
enum Kind {
    Exec,
    Lib,
    Script,
    Config,
}

/// (kind, share of files, median bytes, sigma of ln size, name suffix)
const KINDS: [(Kind, f64, f64, f64, &str); 4] = [
    (Kind::Exec, 0.26, 24_000.0, 1.2, ""),
    (Kind::Lib, 0.16, 80_000.0, 1.4, ".so"),
    (Kind::Script, 0.22, 2_500.0, 1.0, ".sh"),
    (Kind::Config, 0.36, 700.0, 1.0, ".conf"),
];

/// Top-level directories and the kinds of file they hold.
const TOPS: [(&str, Kind); 8] = [
    ("bin", Kind::Exec),
    ("sbin", Kind::Exec),
    ("lib", Kind::Lib),
    ("etc", Kind::Config),
    ("usr/bin", Kind::Exec),
    ("usr/lib", Kind::Lib),
    ("usr/share", Kind::Script),
    ("usr/libexec", Kind::Script),
];

struct BaseFile {
    rel: String,
    size: u64,
}

/// The base tree: directories (relative, parents first) and files in a fixed shuffled order.
fn base(seed: u64) -> (Vec<String>, Vec<BaseFile>) {
    let mut rng = rng(seed);
    let mut dirs: Vec<(String, Kind)> = Vec::new();
    dirs.push(("usr".to_string(), Kind::Script));
    for (t, k) in TOPS {
        dirs.push((t.to_string(), k));
    }
    // Grow subdirectories under random existing ones until there are BASE_DIRS.
    let mut n = 0;
    while dirs.len() < BASE_DIRS {
        let (parent, kind) = dirs[1 + rng.below(dirs.len() as u64 - 1) as usize].clone();
        if parent.matches('/').count() >= 4 {
            continue;
        }
        dirs.push((format!("{parent}/sub{n:03}"), kind));
        n += 1;
    }
    let mut files = Vec::with_capacity(BASE_FILES);
    for i in 0..BASE_FILES {
        // Pick a kind by share, then a directory holding that kind.
        let mut u = rng.unit();
        let mut pick = KINDS[KINDS.len() - 1];
        for k in KINDS {
            if u < k.1 {
                pick = k;
                break;
            }
            u -= k.1;
        }
        let (kind, _, median, sigma, suffix) = pick;
        let candidates: Vec<&String> = dirs
            .iter()
            .filter(|(_, k)| std::mem::discriminant(k) == std::mem::discriminant(&kind))
            .map(|(d, _)| d)
            .collect();
        let dir = candidates[rng.below(candidates.len() as u64) as usize];
        let size = (median * (sigma * rng.normal()).exp()).clamp(16.0, MAX_FILE as f64) as u64;
        files.push(BaseFile {
            rel: format!("{dir}/f{i:04}{suffix}"),
            size,
        });
    }
    // A fixed shuffled order, so any prefix is a representative subset.
    for i in (1..files.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        files.swap(i, j);
    }
    (dirs.into_iter().map(|(d, _)| d).collect(), files)
}

/// The synthetic tree scaled to hold about `target` bytes of files (whole files only; extra
/// copies of the tree under `/copyN` when one copy is not enough).
pub fn synthetic(target: u64, seed: u64) -> Tree {
    let (_, files) = base(seed);
    let mut tree = Tree::default();
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    let mut copy = 0u64;
    let mut used_dirs: Vec<String> = Vec::new();
    'copies: loop {
        let prefix = if copy == 0 {
            String::new()
        } else {
            format!("/copy{copy}")
        };
        for (i, f) in files.iter().enumerate() {
            if total + f.size > target {
                // Skip files that do not fit; stop when nothing small enough is left.
                if total + 16 > target {
                    break 'copies;
                }
                continue;
            }
            total += f.size;
            let path = format!("{prefix}/{}", f.rel);
            let dir = &path[..path.rfind('/').unwrap_or(0)];
            // Every ancestor directory.
            let mut p = String::new();
            for comp in dir.split('/').filter(|c| !c.is_empty()) {
                p.push('/');
                p.push_str(comp);
                if seen.insert(p.clone()) {
                    used_dirs.push(p.clone());
                }
            }
            tree.files.push(FileSpec {
                path,
                size: f.size,
                source: Source::Synthetic(Content {
                    key: (copy << 32) | i as u64,
                    pattern: Pattern::Mixed,
                }),
            });
        }
        if total + 16 > target || copy > 1000 {
            break;
        }
        copy += 1;
    }
    // Parents first: sort by depth, then name.
    used_dirs.sort_by(|a, b| (a.matches('/').count(), a).cmp(&(b.matches('/').count(), b)));
    tree.dirs = used_dirs;
    tree
}

/// The tree under `root` on the host: directories and regular files (symlinks and special
/// files are skipped and listed).
pub fn from_dir(root: &Path) -> Result<Tree, String> {
    let mut tree = Tree::default();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}/{name}");
            let ft = match e.file_type() {
                Ok(t) => t,
                Err(_) => {
                    tree.skipped.push(path);
                    continue;
                }
            };
            if ft.is_dir() {
                tree.dirs.push(path.clone());
                stack.push((e.path(), path));
            } else if ft.is_file() {
                let size = e.metadata().map(|m| m.len()).unwrap_or(0);
                tree.files.push(FileSpec {
                    path,
                    size,
                    source: Source::Host(e.path()),
                });
            } else {
                tree.skipped.push(path);
            }
        }
    }
    tree.dirs
        .sort_by(|a, b| (a.matches('/').count(), a).cmp(&(b.matches('/').count(), b)));
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_tree_looks_like_seed_000() {
        let t = synthetic(u64::MAX / 4, 0x000);
        let (dirs, files) = base(0x000);
        assert_eq!(files.len(), BASE_FILES);
        assert_eq!(dirs.len(), BASE_DIRS);
        let total: u64 = files.iter().map(|f| f.size).sum();
        assert!(
            (50_000_000..130_000_000).contains(&total),
            "base tree holds {total} bytes"
        );
        assert!(t.files.len() > BASE_FILES);
    }

    #[test]
    fn scaled_trees_fill_the_target_with_whole_files() {
        let target = 7 << 20;
        let t = synthetic(target, 1);
        let total = t.bytes();
        assert!(total <= target && total > target * 95 / 100, "{total}");
        assert!(t.files.len() > 50 && t.files.len() < BASE_FILES);
        // Every file's directory exists, parents come first.
        for f in &t.files {
            let dir = &f.path[..f.path.rfind('/').unwrap()];
            assert!(t.dirs.iter().any(|d| d == dir), "{dir}");
        }
        for (i, d) in t.dirs.iter().enumerate() {
            let parent = &d[..d.rfind('/').unwrap()];
            if !parent.is_empty() {
                assert!(t.dirs[..i].iter().any(|p| p == parent), "{d}");
            }
        }
        // Deterministic.
        let again = synthetic(target, 1);
        assert_eq!(again.files.len(), t.files.len());
        assert_eq!(again.files[10].path, t.files[10].path);
    }
}
