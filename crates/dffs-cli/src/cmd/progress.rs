//! The progress bar of long commands (`pack`, `unpack`).
//!
//! Owns when a bar appears: only when standard output is a terminal, the user did not ask for
//! `--quiet`, and the work has already taken more than a moment. It must never write to a pipe
//! or file, and warnings printed while it shows go above it, never through it.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long work runs before a bar appears.
const DELAY: Duration = Duration::from_millis(400);

/// A progress bar that shows itself only when the work is slow enough to need one.
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    wanted: bool,
    shown: bool,
}

impl Progress {
    /// A bar for `total` units; `bytes` says whether units are bytes (else entries).
    pub fn new(total: u64, bytes: bool, quiet: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        let template = if bytes {
            "{spinner} [{elapsed_precise}] {wide_bar} {decimal_bytes}/{decimal_total_bytes} ({eta}) {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} entries ({eta}) {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Progress {
            bar,
            start: Instant::now(),
            wanted: !quiet && std::io::stdout().is_terminal(),
            shown: false,
        }
    }

    /// Records `n` more units done.
    pub fn inc(&mut self, n: u64) {
        self.bar.inc(n);
        if self.wanted && !self.shown && self.start.elapsed() >= DELAY {
            self.bar.set_draw_target(ProgressDrawTarget::stdout());
            self.shown = true;
        }
    }

    /// Prints a warning line on stderr, above the bar if it shows.
    pub fn warn(&self, text: impl std::fmt::Display) {
        if self.shown {
            self.bar.suspend(|| super::warn(&text));
        } else {
            super::warn(text);
        }
    }
}

impl Drop for Progress {
    /// Removes the bar, also when the command fails half-way.
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
