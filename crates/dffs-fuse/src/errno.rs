//! The errno a FUSE reply carries for each library error.
//!
//! Owns the few places where the kernel's expectations differ from the library's own
//! [`dffs::Error::errno`] (hard links, corrupted data). It must never invent an error the library
//! did not report: every other code is the library's.

use fuser::Errno;

/// The errno for `e` in a reply to the kernel.
pub fn errno(e: dffs::Error) -> Errno {
    Errno::from_i32(e.errno())
}

/// The errno for a failed `link`: the library has no hard links, and POSIX says a file system
/// without them answers `EPERM` (`ENOTSUP` is not among `link(2)`'s errors).
pub fn link_errno(e: dffs::Error) -> Errno {
    match e {
        dffs::Error::NotSupported => Errno::EPERM,
        other => errno(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_linux_ones() {
        assert_eq!(errno(dffs::Error::NotFound), Errno::ENOENT);
        assert_eq!(errno(dffs::Error::Exists), Errno::EEXIST);
        assert_eq!(errno(dffs::Error::NotEmpty), Errno::ENOTEMPTY);
        assert_eq!(errno(dffs::Error::NameTooLong), Errno::ENAMETOOLONG);
        assert_eq!(errno(dffs::Error::IsDir), Errno::EISDIR);
        assert_eq!(errno(dffs::Error::NotDir), Errno::ENOTDIR);
        assert_eq!(errno(dffs::Error::NoSpace), Errno::ENOSPC);
        assert_eq!(errno(dffs::Error::ReadOnly), Errno::EROFS);
        assert_eq!(errno(dffs::Error::Corrupt), Errno::EIO);
        assert_eq!(errno(dffs::Error::TooBig), Errno::EFBIG);
        assert_eq!(errno(dffs::Error::NotSupported), Errno::EOPNOTSUPP);
        assert_eq!(link_errno(dffs::Error::NotSupported), Errno::EPERM);
    }
}
