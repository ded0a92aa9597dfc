//! Inode numbers, file types, timestamps and attributes, as the journal, inode nodes and
//! directory pages encode them.
//!
//! Owns their in-RAM representation and their byte encoding. It must never touch flash.

use super::codec::{Reader, Writer};
use crate::error::{Error, Result};

/// An inode number. 1 is the root directory; 0 is never used.
pub type Ino = u32;

/// The root directory's inode number.
pub const ROOT_INO: Ino = 1;

/// File type bits of `mode` (as in POSIX `st_mode`).
pub const S_IFMT: u32 = 0o170000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Directory.
pub const S_IFDIR: u32 = 0o040000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Type bits of a named pipe.
pub const S_IFIFO: u32 = 0o010000;
/// Type bits of a character device.
pub const S_IFCHR: u32 = 0o020000;
/// Type bits of a block device.
pub const S_IFBLK: u32 = 0o060000;
/// Type bits of a socket.
pub const S_IFSOCK: u32 = 0o140000;

/// A point in time: seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds since 1970-01-01 UTC (may be negative).
    pub secs: i64,
    /// Nanoseconds (0..1e9).
    pub nsec: u32,
}

impl Time {
    /// Encodes (12 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.i64(self.secs).u32(self.nsec);
    }
    /// Decodes, rejecting out-of-range nanoseconds.
    pub fn decode(r: &mut Reader<'_>) -> Result<Time> {
        let secs = r.i64()?;
        let nsec = r.u32()?;
        if nsec >= 1_000_000_000 {
            return Err(Error::Corrupt);
        }
        Ok(Time { secs, nsec })
    }
}

/// Ownership, permissions and times of a file or directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    /// Type and permission bits (`S_IF*` | permissions).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access (only changed explicitly: DFFS does not write on reads).
    pub atime: Time,
    /// Last content change.
    pub mtime: Time,
    /// Last attribute change.
    pub ctime: Time,
}

impl Attrs {
    /// Encodes (48 bytes).
    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.mode).u32(self.uid).u32(self.gid);
        self.atime.encode(w);
        self.mtime.encode(w);
        self.ctime.encode(w);
    }
    /// Decodes.
    pub fn decode(r: &mut Reader<'_>) -> Result<Attrs> {
        Ok(Attrs {
            mode: r.u32()?,
            uid: r.u32()?,
            gid: r.u32()?,
            atime: Time::decode(r)?,
            mtime: Time::decode(r)?,
            ctime: Time::decode(r)?,
        })
    }
    /// Whether this is a directory.
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    /// Whether this is a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.mode & S_IFMT == S_IFLNK
    }
    /// Whether this is a special file (named pipe, socket, character or block device): an
    /// inode without data, whose device number (devices) is its 4-byte inline content.
    pub fn is_special(&self) -> bool {
        matches!(self.mode & S_IFMT, S_IFIFO | S_IFCHR | S_IFBLK | S_IFSOCK)
    }
}
