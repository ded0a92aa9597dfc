//! The simulator's own error type (bad options, image files), as opposed to device errors, which
//! are [`dffs_flash::FlashError`].
//!
//! Owns the wording of simulator errors. It must never carry device-operation failures: those are
//! returned as `FlashError` through the `Flash` trait.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::preset::PresetError;

/// Why a simulated device could not be created, opened or saved.
#[derive(Debug)]
pub enum SimError {
    /// The options or preset are not usable (the text says why).
    Options(String),
    /// A preset adjustment failed.
    Preset(PresetError),
    /// Reading or writing a file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// An image or its sidecar is malformed or does not match.
    Image {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

impl SimError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        SimError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn image(path: impl Into<PathBuf>, why: impl Into<String>) -> Self {
        SimError::Image {
            path: path.into(),
            why: why.into(),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Options(why) => write!(f, "invalid simulator options: {why}"),
            SimError::Preset(e) => write!(f, "{e}"),
            SimError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            SimError::Image { path, why } => write!(f, "{}: {why}", path.display()),
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SimError::Io { source, .. } => Some(source),
            SimError::Preset(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PresetError> for SimError {
    fn from(e: PresetError) -> Self {
        SimError::Preset(e)
    }
}
