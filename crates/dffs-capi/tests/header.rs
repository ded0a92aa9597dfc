//! The checked-in `include/dffs.h` is what cbindgen generates from the sources now.
//!
//! Owns only that comparison (and, with `DFFS_BLESS=1`, rewriting the header); it must never
//! change the header silently in a normal test run.

use std::path::Path;

#[test]
fn checked_in_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen failed")
        .write(&mut generated);
    let path = dir.join("include/dffs.h");
    let checked_in = std::fs::read(&path).unwrap_or_default();
    if generated == checked_in {
        return;
    }
    if std::env::var_os("DFFS_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/dffs.h");
        return;
    }
    panic!(
        "include/dffs.h is stale. Regenerate it with\n  \
         DFFS_BLESS=1 cargo test -p dffs-capi --test header\nor, from crates/dffs-capi,\n  \
         cbindgen --config cbindgen.toml --crate dffs-capi --output include/dffs.h"
    );
}
