//! The errno a FUSE reply carries for each library error.
//!
//! Owns the mapping from library errors to the kernel's codes (the library's own
//! [`dffs::Error::errno`]). It must never invent an error the library did not report.

use fuser::Errno;

/// The errno for `e` in a reply to the kernel.
pub fn errno(e: dffs::Error) -> Errno {
    Errno::from_i32(e.errno())
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
        assert_eq!(errno(dffs::Error::TooManyLinks), Errno::EMLINK);
        assert_eq!(errno(dffs::Error::NotPermitted), Errno::EPERM);
    }
}
