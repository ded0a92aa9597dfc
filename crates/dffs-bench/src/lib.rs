//! Benchmark suites (placeholder; see issue 7).
