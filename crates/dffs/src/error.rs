//! File-system error codes.
//!
//! Owns the one error type the file system returns and its mapping to POSIX `errno` values, so
//! every front end (Rust API, C API, FUSE, CLI) reports the same code for the same condition.
//! It must never carry heap data: errors are cheap to copy and usable in `no_std`.

use core::ffi::CStr;
use core::fmt;

use dffs_flash::FlashError;

/// Everything that can go wrong in a file-system operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// No such file or directory (`ENOENT`).
    NotFound,
    /// The name already exists (`EEXIST`).
    Exists,
    /// A path component is not a directory (`ENOTDIR`).
    NotDir,
    /// The target is a directory (`EISDIR`).
    IsDir,
    /// The directory is not empty (`ENOTEMPTY`).
    NotEmpty,
    /// A name is longer than 255 bytes (`ENAMETOOLONG`).
    NameTooLong,
    /// No space left on the device (`ENOSPC`).
    NoSpace,
    /// An I/O error: the flash reported uncorrectable data or a failed operation (`EIO`).
    Io,
    /// On-flash data failed its checks: the image is corrupted (`EIO`, with `EUCLEAN` meaning).
    Corrupt,
    /// The file system's own state broke an invariant (a bug, not bad flash; `EIO`). Kept
    /// apart from [`Error::Corrupt`] so a report says which it was.
    Internal,
    /// An argument is invalid (`EINVAL`).
    Invalid,
    /// The file handle is not open (`EBADF`).
    BadHandle,
    /// The operation is not supported (`EOPNOTSUPP`), e.g. hard links.
    NotSupported,
    /// The file system is mounted read-only (`EROFS`).
    ReadOnly,
    /// The file would exceed the largest size the file system supports (`EFBIG`).
    TooBig,
    /// The configured RAM budget cannot hold what the operation needs (`ENOMEM`).
    NoMemory,
    /// The resource is busy (`EBUSY`), e.g. a transaction is already open.
    Busy,
    /// Too many open files (`EMFILE`).
    TooManyOpen,
    /// Too many symbolic links while resolving a path (`ELOOP`).
    Loop,
    /// Permission denied by the file's mode (`EACCES`); used for writes to read-only handles.
    Access,
    /// The device lost power; the file system must be mounted again (`EIO`).
    PowerLoss,
    /// The device does not hold a DFFS file system, or one of another version (`EINVAL`).
    NoFileSystem,
    /// The file has as many names as its inode node can hold (`EMLINK`).
    TooManyLinks,
    /// The operation is not permitted on this kind of file, e.g. a hard link to a directory
    /// (`EPERM`).
    NotPermitted,
}

impl Error {
    /// The Linux `errno` value for this error (positive).
    pub const fn errno(self) -> i32 {
        match self {
            Error::NotPermitted => 1,
            Error::NotFound => 2,
            Error::Io | Error::Corrupt | Error::Internal | Error::PowerLoss => 5,
            Error::BadHandle => 9,
            Error::NoMemory => 12,
            Error::Access => 13,
            Error::Busy => 16,
            Error::Exists => 17,
            Error::NotDir => 20,
            Error::IsDir => 21,
            Error::Invalid | Error::NoFileSystem => 22,
            Error::TooManyOpen => 24,
            Error::TooBig => 27,
            Error::NoSpace => 28,
            Error::ReadOnly => 30,
            Error::TooManyLinks => 31,
            Error::NameTooLong => 36,
            Error::NotEmpty => 39,
            Error::Loop => 40,
            Error::NotSupported => 95,
        }
    }

    /// A short description, as `strerror` would give.
    pub fn description(self) -> &'static str {
        // The C strings are the one table; they are ASCII.
        core::str::from_utf8(self.c_description().to_bytes()).unwrap_or("error")
    }

    /// [`Error::description`] as a NUL-terminated C string (the C API's `dffs_strerror`).
    pub const fn c_description(self) -> &'static CStr {
        match self {
            Error::NotFound => c"no such file or directory",
            Error::Exists => c"file exists",
            Error::NotDir => c"not a directory",
            Error::IsDir => c"is a directory",
            Error::NotEmpty => c"directory not empty",
            Error::NameTooLong => c"file name too long",
            Error::NoSpace => c"no space left on device",
            Error::Io => c"input/output error",
            Error::Corrupt => c"file system structure is corrupted",
            Error::Internal => c"internal error (broken invariant)",
            Error::Invalid => c"invalid argument",
            Error::BadHandle => c"bad file handle",
            Error::NotSupported => c"operation not supported",
            Error::ReadOnly => c"read-only file system",
            Error::TooManyLinks => c"too many links",
            Error::NotPermitted => c"operation not permitted",
            Error::TooBig => c"file too large",
            Error::NoMemory => c"RAM budget exhausted",
            Error::Busy => c"resource busy",
            Error::TooManyOpen => c"too many open files",
            Error::Loop => c"too many levels of symbolic links",
            Error::Access => c"permission denied",
            Error::PowerLoss => c"device lost power",
            Error::NoFileSystem => c"no DFFS file system on the device",
        }
    }

    /// Every variant, each errno's representative first (the one [`Error::from_errno`]
    /// gives): `Io` before the other `EIO` causes, `Invalid` before `NoFileSystem`.
    pub const ALL: [Error; 24] = [
        Error::NotPermitted,
        Error::NotFound,
        Error::Io,
        Error::Corrupt,
        Error::Internal,
        Error::PowerLoss,
        Error::BadHandle,
        Error::NoMemory,
        Error::Access,
        Error::Busy,
        Error::Exists,
        Error::NotDir,
        Error::IsDir,
        Error::Invalid,
        Error::NoFileSystem,
        Error::TooManyOpen,
        Error::TooBig,
        Error::NoSpace,
        Error::ReadOnly,
        Error::TooManyLinks,
        Error::NameTooLong,
        Error::NotEmpty,
        Error::Loop,
        Error::NotSupported,
    ];

    /// The representative error for a positive `errno` value, if DFFS returns that errno.
    pub fn from_errno(errno: i32) -> Option<Error> {
        Error::ALL.iter().copied().find(|e| e.errno() == errno)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

impl From<FlashError> for Error {
    fn from(e: FlashError) -> Self {
        match e {
            FlashError::PowerLoss => Error::PowerLoss,
            _ => Error::Io,
        }
    }
}

/// Result type of file-system operations.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::Error;

    /// `ALL` holds every variant once (the match makes a new variant a compile error here
    /// until it is listed), and every errno maps back to a variant with that errno.
    #[test]
    fn all_lists_every_variant_once() {
        fn listed(e: Error) -> bool {
            match e {
                Error::NotFound
                | Error::Exists
                | Error::NotDir
                | Error::IsDir
                | Error::NotEmpty
                | Error::NameTooLong
                | Error::NoSpace
                | Error::Io
                | Error::Corrupt
                | Error::Internal
                | Error::Invalid
                | Error::BadHandle
                | Error::NotSupported
                | Error::ReadOnly
                | Error::TooBig
                | Error::NoMemory
                | Error::Busy
                | Error::TooManyOpen
                | Error::Loop
                | Error::Access
                | Error::PowerLoss
                | Error::NoFileSystem
                | Error::TooManyLinks
                | Error::NotPermitted => Error::ALL.iter().filter(|x| **x == e).count() == 1,
            }
        }
        for e in Error::ALL {
            assert!(listed(e), "{e:?}");
            assert!(e.errno() > 0);
            let back = Error::from_errno(e.errno()).unwrap();
            assert_eq!(back.errno(), e.errno());
            assert!(!e.description().is_empty() && e.description() != "error");
        }
        let mut names: alloc::vec::Vec<&str> = Error::ALL.iter().map(|e| e.description()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Error::ALL.len(), "descriptions are distinct");
        assert_eq!(Error::from_errno(5), Some(Error::Io));
        assert_eq!(Error::from_errno(22), Some(Error::Invalid));
        assert_eq!(Error::from_errno(4), None);
    }
}
