//! The subcommands of `dffs`, one file each, and the error type they share.
//!
//! Owns the mapping from library errors to one-line messages. A subcommand must never print
//! errors itself or exit the process: it returns a [`CliError`] and `main` reports it.

use std::fmt;
use std::io;

pub mod presets;

/// Why a subcommand failed; displayed as one line.
#[derive(Debug)]
pub enum CliError {
    /// Standard output was closed by the reader (e.g. `| head`); not reported.
    BrokenPipe,
    /// Any other failure, already worded for the user.
    Message(String),
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::BrokenPipe => f.write_str("broken pipe"),
            CliError::Message(m) => f.write_str(m),
        }
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Message(format!("cannot write output: {e}"))
        }
    }
}

impl From<dffs_sim::SimError> for CliError {
    fn from(e: dffs_sim::SimError) -> Self {
        CliError::Message(e.to_string())
    }
}

impl From<dffs_sim::PresetError> for CliError {
    fn from(e: dffs_sim::PresetError) -> Self {
        CliError::Message(e.to_string())
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        if e.io_error_kind() == Some(io::ErrorKind::BrokenPipe) {
            CliError::BrokenPipe
        } else {
            CliError::Message(format!("cannot write JSON: {e}"))
        }
    }
}

/// Rounds `x` to 3 significant digits.
pub fn round3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = x.abs().log10().floor() as i32 + 1;
    let scale = 10f64.powi(3 - digits);
    (x * scale).round() / scale
}

/// Formats `x` with 3 significant digits (`7.41`, `26.3`, `108`, `0.0794`, `40.0`).
pub fn sig3(x: f64) -> String {
    let r = round3(x);
    if r == 0.0 || !r.is_finite() {
        return format!("{r}");
    }
    let digits = r.abs().log10().floor() as i32 + 1;
    let decimals = (3 - digits).max(0) as usize;
    format!("{r:.decimals$}")
}

/// Formats a byte count in binary units when it is a whole number of them (`128 KiB`, `16 MiB`).
pub fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(7.414), "7.41");
        assert_eq!(sig3(26.32), "26.3");
        assert_eq!(sig3(107.996), "108");
        assert_eq!(sig3(0.07943), "0.0794");
        assert_eq!(sig3(39.998), "40.0");
        assert_eq!(sig3(9.9996), "10.0");
        assert_eq!(round3(7.414), 7.41);
        assert_eq!(size(131072), "128 KiB");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(1000), "1000 B");
    }
}
