//! Helpers shared by the CLI tests: running the built `dffs` binary, generating source trees
//! with known content, and comparing two trees entry by entry.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// What one run of `dffs` gave.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Panics unless the run succeeded without a word on stderr.
    pub fn ok(self) -> Run {
        assert!(
            self.code == 0,
            "dffs failed ({}): {}",
            self.code,
            self.stderr
        );
        self
    }

    /// Panics unless the run failed with one clean line on stderr that contains `why`.
    pub fn fails_with(self, why: &str) -> Run {
        assert_ne!(
            self.code,
            0,
            "expected a failure, got success: {}",
            self.out()
        );
        assert_one_error_line(&self.stderr);
        assert!(
            self.stderr.contains(why),
            "expected {why:?} in the error, got {:?}",
            self.stderr
        );
        self
    }
}

/// Checks that stderr is exactly one `dffs: ...` line, with no panic or backtrace.
pub fn assert_one_error_line(stderr: &str) {
    assert_eq!(
        stderr.lines().count(),
        1,
        "expected one line on stderr, got {stderr:?}"
    );
    assert!(stderr.starts_with("dffs: "), "{stderr:?}");
    assert_no_panic(stderr);
}

pub fn assert_no_panic(stderr: &str) {
    for bad in [
        "panicked",
        "internal error",
        "RUST_BACKTRACE",
        "stack backtrace",
    ] {
        assert!(!stderr.contains(bad), "{bad} in stderr: {stderr:?}");
    }
}

fn finish(out: Output) -> Run {
    Run {
        // Killed by a signal: report it as a code no clean exit uses.
        code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `dffs args...`.
pub fn dffs<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_dffs"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run dffs");
    finish(out)
}

/// Runs `dffs args...` with `input` on stdin.
pub fn dffs_stdin<S: AsRef<std::ffi::OsStr>>(args: &[S], input: &[u8]) -> Run {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_dffs"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run dffs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("feed stdin");
    finish(child.wait_with_output().expect("wait for dffs"))
}

/// Deterministic bytes: a xorshift stream for `seed` (not compressible, not repetitive).
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// What a generated tree holds.
pub struct TreeCounts {
    /// Regular files and symlinks (what `info` calls files).
    pub files: u32,
    /// Directories below the root.
    pub dirs: u32,
    pub bytes: u64,
}

pub fn write_file(path: &Path, data: &[u8], mode: u32) {
    fs::write(path, data).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A tree with nested directories, empty files, files of several sizes up to ~1 MB with
/// non-trivial content, symlinks (relative, absolute, dangling) and various modes.
pub fn make_tree(root: &Path) -> TreeCounts {
    fs::create_dir_all(root.join("etc/init.d")).unwrap();
    fs::create_dir_all(root.join("usr/lib/deep/deeper/deepest")).unwrap();
    fs::create_dir_all(root.join("var/empty")).unwrap();
    fs::create_dir_all(root.join("readonly")).unwrap();
    let files: &[(&str, usize, u32)] = &[
        ("empty", 0, 0o644),
        ("etc/empty.conf", 0, 0o600),
        ("etc/hostname", 7, 0o644),
        ("etc/secret", 100, 0o600),
        ("etc/init.d/rcS", 1500, 0o755),
        ("usr/lib/one-page", 2048, 0o644),
        ("usr/lib/page-plus-one", 2049, 0o644),
        ("usr/lib/libc.so", 300_000, 0o755),
        ("usr/lib/deep/deeper/deepest/big.bin", 1_000_000, 0o640),
        ("usr/lib/deep/odd", 65_537, 0o4755),
        ("readonly/file", 5000, 0o444),
    ];
    let mut bytes = 0;
    for (i, (name, len, mode)) in files.iter().enumerate() {
        write_file(&root.join(name), &content(i as u64 + 1, *len), *mode);
        bytes += *len as u64;
    }
    // Text-like content, compressible, in a file of its own.
    let text: Vec<u8> = (0..40_000u32)
        .flat_map(|i| format!("line {i} of the log\n").into_bytes())
        .collect();
    bytes += text.len() as u64;
    write_file(&root.join("var/log.txt"), &text, 0o644);
    symlink("init.d/rcS", root.join("etc/rc")).unwrap();
    symlink("/usr/lib/libc.so", root.join("usr/libc-abs")).unwrap();
    symlink("does/not/exist", root.join("dangling")).unwrap();
    fs::set_permissions(root.join("etc"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(root.join("var/empty"), fs::Permissions::from_mode(0o1777)).unwrap();
    fs::set_permissions(root.join("readonly"), fs::Permissions::from_mode(0o555)).unwrap();
    TreeCounts {
        files: files.len() as u32 + 1 + 3,
        dirs: 10,
        bytes,
    }
}

/// One entry of a tree as compared: kind, permission bits, content or target, mtime.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    Dir {
        mode: u32,
        mtime: (i64, i64),
    },
    File {
        mode: u32,
        mtime: (i64, i64),
        data: Vec<u8>,
    },
    Symlink {
        target: PathBuf,
    },
}

/// Every entry below `root`, by relative path.
pub fn read_tree(root: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            let mtime = (m.mtime(), m.mtime_nsec());
            let mode = m.mode() & 0o7777;
            let entry = if m.file_type().is_symlink() {
                Entry::Symlink {
                    target: fs::read_link(&p).unwrap(),
                }
            } else if m.is_dir() {
                stack.push(p.clone());
                Entry::Dir { mode, mtime }
            } else if m.is_file() {
                Entry::File {
                    mode,
                    mtime,
                    data: fs::read(&p).unwrap(),
                }
            } else {
                continue;
            };
            out.insert(rel, entry);
        }
    }
    out
}

/// Panics with the first difference between two trees.
pub fn assert_same_tree(a: &Path, b: &Path) {
    let ta = read_tree(a);
    let tb = read_tree(b);
    let names_a: Vec<_> = ta.keys().collect();
    let names_b: Vec<_> = tb.keys().collect();
    assert_eq!(names_a, names_b, "the trees hold different names");
    for (name, ea) in &ta {
        let eb = &tb[name];
        if ea != eb {
            // Keep the message short: no megabytes of data in it.
            let show = |e: &Entry| match e {
                Entry::File { mode, mtime, data } => {
                    format!("file mode {mode:o} mtime {mtime:?} {} bytes", data.len())
                }
                other => format!("{other:?}"),
            };
            panic!("{}: {} vs {}", name.display(), show(ea), show(eb));
        }
    }
}

/// The raw NAND image layout of the tests' devices: 2048 B pages + 64 B OOB.
pub const RAW_PAGE: usize = 2048 + 64;

/// Indexes of the pages of an image that hold `needle` in their data area.
pub fn pages_holding(image: &[u8], needle: &[u8]) -> Vec<usize> {
    image
        .chunks(RAW_PAGE)
        .enumerate()
        .filter(|(_, p)| p[..2048].windows(needle.len()).any(|w| w == needle))
        .map(|(i, _)| i)
        .collect()
}

/// Indexes of the pages of an image that are not erased.
pub fn used_pages(image: &[u8]) -> Vec<usize> {
    image
        .chunks(RAW_PAGE)
        .enumerate()
        .filter(|(_, p)| p.iter().any(|&b| b != 0xFF))
        .map(|(i, _)| i)
        .collect()
}

/// Overwrites `len` bytes at `offset` of page `page`'s data with zeros.
pub fn smash(image: &mut [u8], page: usize, offset: usize, len: usize) {
    let at = page * RAW_PAGE + offset;
    image[at..at + len].fill(0);
}

/// A test path as `&str` (temporary directories have UTF-8 names).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}
