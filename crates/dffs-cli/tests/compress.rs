//! `dffs pack --compress` round trips a tree byte for byte with every algorithm, records the
//! algorithm (`dffs info`), takes less flash than an uncompressed pack of the same tree, keeps
//! a clean fsck, and `dffs format --compress` makes later writes compressed.

mod common;

use std::fs;

use common::*;

fn used_bytes(img: &std::path::Path) -> (u64, String) {
    let run = dffs(&["info", "--json", s(img)]).ok();
    let v: serde_json::Value = serde_json::from_str(&run.out()).unwrap();
    (
        v["used_bytes"].as_u64().unwrap(),
        v["compression"].as_str().unwrap().to_string(),
    )
}

#[test]
fn pack_compress_round_trip() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    make_tree(&src);
    let mut used = Vec::new();
    for algo in ["none", "lz4", "deflate"] {
        let img = t.path().join(format!("{algo}.img"));
        let run = dffs(&[
            "pack",
            s(&src),
            s(&img),
            "--size",
            "8MiB",
            "--compress",
            algo,
        ])
        .ok();
        assert_no_panic(&run.stderr);
        let (u, name) = used_bytes(&img);
        assert_eq!(name, algo);
        used.push(u);
        let out = t.path().join(format!("out-{algo}"));
        dffs(&["unpack", s(&img), s(&out)]).ok();
        assert_same_tree(&src, &out);
        let run = dffs(&["fsck", s(&img)]).ok();
        assert_no_panic(&run.stderr);
    }
    // The tree holds a compressible log: both algorithms take less than none, deflate least.
    assert!(used[1] < used[0], "lz4 {} vs none {}", used[1], used[0]);
    assert!(used[2] < used[1], "deflate {} vs lz4 {}", used[2], used[1]);
}

#[test]
fn format_compress_applies_to_later_writes() {
    let t = tempfile::tempdir().unwrap();
    let img = t.path().join("f.img");
    dffs(&["format", s(&img), "--size", "8MiB", "--compress", "deflate"]).ok();
    let (before, name) = used_bytes(&img);
    assert_eq!(name, "deflate");
    let text: Vec<u8> = (0..20_000u32)
        .flat_map(|i| format!("entry {i} ok\n").into_bytes())
        .collect();
    let local = t.path().join("log.txt");
    fs::write(&local, &text).unwrap();
    dffs(&["put", s(&img), s(&local), "/log.txt"]).ok();
    let (after, _) = used_bytes(&img);
    assert!(
        after - before < text.len() as u64 / 3,
        "{} bytes took {}",
        text.len(),
        after - before
    );
    let back = t.path().join("back.txt");
    dffs(&["get", s(&img), "/log.txt", s(&back)]).ok();
    assert_eq!(fs::read(&back).unwrap(), text);
    // A bad algorithm name is refused, naming it.
    let run = dffs(&["format", s(&img), "--compress", "zstd"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("zstd"), "{}", run.stderr);
    assert_no_panic(&run.stderr);
}
