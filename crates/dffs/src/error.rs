//! File-system error codes.
//!
//! Owns the one error type the file system returns and its mapping to POSIX `errno` values, so
//! every front end (Rust API, C API, FUSE, CLI) reports the same code for the same condition.
//! It must never carry heap data: errors are cheap to copy and usable in `no_std`.

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
    pub const fn description(self) -> &'static str {
        match self {
            Error::NotFound => "no such file or directory",
            Error::Exists => "file exists",
            Error::NotDir => "not a directory",
            Error::IsDir => "is a directory",
            Error::NotEmpty => "directory not empty",
            Error::NameTooLong => "file name too long",
            Error::NoSpace => "no space left on device",
            Error::Io => "input/output error",
            Error::Corrupt => "file system structure is corrupted",
            Error::Internal => "internal error (broken invariant)",
            Error::Invalid => "invalid argument",
            Error::BadHandle => "bad file handle",
            Error::NotSupported => "operation not supported",
            Error::ReadOnly => "read-only file system",
            Error::TooManyLinks => "too many links",
            Error::NotPermitted => "operation not permitted",
            Error::TooBig => "file too large",
            Error::NoMemory => "RAM budget exhausted",
            Error::Busy => "resource busy",
            Error::TooManyOpen => "too many open files",
            Error::Loop => "too many levels of symbolic links",
            Error::Access => "permission denied",
            Error::PowerLoss => "device lost power",
            Error::NoFileSystem => "no DFFS file system on the device",
        }
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
