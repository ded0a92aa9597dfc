//! The subcommands of `dffs`, one file each, and the error type they share.
//!
//! Owns the mapping from library errors to one-line messages, and the few output helpers every
//! subcommand shares (warnings, sizes, times). A subcommand must never print errors itself or
//! exit the process: it returns a [`CliError`] and `main` reports it. Warnings (a fifo
//! skipped) are the only other lines a subcommand writes to stderr.

use std::fmt;
use std::io;
use std::path::Path;

pub mod bench;
pub mod cat;
pub mod format;
pub mod fsck;
pub mod get;
pub mod image;
pub mod info;
pub mod localfs;
pub mod ls;
pub mod mkdir;
pub mod mount;
pub mod mount_helper;
pub mod mv;
pub mod pack;
pub mod presets;
pub mod progress;
pub mod put;
pub mod rm;
pub mod torture;
pub mod unpack;

/// Why a subcommand failed; displayed as one line.
#[derive(Debug)]
pub enum CliError {
    /// Standard output was closed by the reader (e.g. `| head`); not reported.
    BrokenPipe,
    /// Any other failure, already worded for the user.
    Message(String),
    /// A finding rather than a failure (e.g. `fsck` found errors): the message and a specific
    /// exit status.
    Status {
        /// Exit status.
        code: u8,
        /// The one line to print.
        message: String,
    },
}

impl CliError {
    /// A failure worded for the user (`<what failed>: <why>`, without the `dffs: ` prefix).
    pub fn msg(text: impl Into<String>) -> Self {
        CliError::Message(text.into())
    }

    /// A failure of a local file operation on `path`.
    pub fn local(path: &Path, e: &io::Error) -> Self {
        CliError::Message(format!("{}: {}", path.display(), io_why(e)))
    }
}

/// The reason an I/O error gives, without the `(os error N)` suffix the standard library adds.
pub fn io_why(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => &text[..i],
        _ => &text[..],
    };
    // "No such file or directory" → "no such file or directory", as the library words it.
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_ascii_uppercase() && b.is_ascii_lowercase() => {
            format!("{}{}", a.to_ascii_lowercase(), &text[1..])
        }
        _ => text.to_string(),
    }
}

/// Prints a warning line on stderr (the command goes on).
pub fn warn(text: impl fmt::Display) {
    eprintln!("dffs: warning: {text}");
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::BrokenPipe => f.write_str("broken pipe"),
            CliError::Message(m) => f.write_str(m),
            CliError::Status { message, .. } => f.write_str(message),
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

/// Formats a byte count for people: `0 B`, `812 B`, `1.23 KB`, `45.6 MB`, `7.41 GB`
/// (MB = 10^6 bytes, 3 significant digits).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB")];
    let b = bytes as f64;
    for (unit, name) in UNITS {
        // Compare the rounded value so that 999,999 B is shown as 1.00 MB, not 1000 KB.
        if round3(b / unit) >= 1.0 {
            return format!("{} {name}", sig3(b / unit));
        }
    }
    format!("{bytes} B")
}

/// A Unix time as `YYYY-MM-DD HH:MM` in UTC.
pub fn utc_minutes(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    let (y, m, d) = civil_date(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// The proleptic Gregorian date of the day `days` after 1970-01-01.
fn civil_date(days: i64) -> (i64, u32, u32) {
    // Count from 0000-03-01 so that the leap day ends each 4/100/400-year cycle.
    let from_march_0000 = days + 719_468;
    let era = from_march_0000.div_euclid(146_097);
    let day_of_era = from_march_0000.rem_euclid(146_097); // 0..146096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // 0 = March .. 11 = February
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.00 KB");
        assert_eq!(human_bytes(45_612_345), "45.6 MB");
        assert_eq!(human_bytes(999_999), "1.00 MB");
        assert_eq!(human_bytes(134_217_728), "134 MB");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_minutes(0), "1970-01-01 00:00");
        assert_eq!(utc_minutes(951_782_400), "2000-02-29 00:00");
        assert_eq!(utc_minutes(1_709_251_199), "2024-02-29 23:59");
        assert_eq!(utc_minutes(-1), "1969-12-31 23:59");
        assert_eq!(utc_minutes(4_102_444_800), "2100-01-01 00:00");
    }

    #[test]
    fn io_reasons_lose_the_errno_suffix() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(io_why(&e), "no such file or directory");
    }
}
