//! Builds the C test program (`tests/c/*.c`) with the system C compiler against the static
//! library cargo built for this test run (`libdffs_capi-*.a`) and `include/dffs.h`, runs it,
//! and fails if it fails.
//!
//! Owns only building and running that program; the scenarios are in `tests/c/test_main.c`.
//! It must never build the library itself (it uses the one cargo just built).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// The static libraries of this crate that cargo built into the profile directory, newest
/// first (the one built for this run is the newest: a source change rebuilds it).
fn static_libs() -> Vec<PathBuf> {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("deps directory");
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("libdffs_capi") && name.ends_with(".a") {
                let t = e.metadata().and_then(|m| m.modified());
                found.push((t.unwrap_or(SystemTime::UNIX_EPOCH), e.path()));
            }
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// What a C program linking a Rust static library needs besides it.
fn system_libs() -> &'static [&'static str] {
    if cfg!(target_os = "macos") {
        &["-lSystem", "-lc", "-lm"]
    } else {
        &[
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ]
    }
}

fn compile(lib: &Path, out: &Path) -> Result<(), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-std=c99",
        "-O1",
        "-g",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ])
    .arg("-I")
    .arg(dir.join("include"))
    // A library without NAND support: the program checks that NAND is refused instead.
    .args((!cfg!(feature = "nand")).then_some("-DDFFS_NO_NAND"))
    .arg(dir.join("tests/c/test_main.c"))
    .arg(dir.join("tests/c/ramflash.c"))
    .arg(lib)
    .args(system_libs())
    .arg("-o")
    .arg(out);
    let o = cmd.output().map_err(|e| format!("running {cc}: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cc} failed with {}:\n{}{}",
            lib.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

#[test]
fn c_program_passes_against_the_static_library() {
    let libs = static_libs();
    assert!(
        !libs.is_empty(),
        "no libdffs_capi*.a next to {:?}",
        std::env::current_exe()
    );
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dffs_capi_c_test");
    // A library of another feature set (e.g. a bare-metal build for the host) does not link;
    // fall back to the next newest.
    let mut errors = Vec::new();
    let built = libs.iter().any(|lib| match compile(lib, &out) {
        Ok(()) => true,
        Err(e) => {
            errors.push(e);
            false
        }
    });
    assert!(
        built,
        "the C test program did not build:\n{}",
        errors.join("\n")
    );
    let o = Command::new(&out).output().expect("run the C test program");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        o.status.success(),
        "the C test program failed ({})",
        o.status
    );
    assert!(stdout.contains("all C API checks passed"));
}
