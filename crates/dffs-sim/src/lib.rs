//! Simulated flash devices for DFFS (placeholder; see issue 2).
