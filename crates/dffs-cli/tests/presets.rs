//! Runs the built `dffs` binary: `presets --json` parses and shows the brief's raw limits; the
//! table names every preset; bad arguments fail with one line on stderr.

use std::process::Command;

fn dffs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dffs"))
        .args(args)
        .output()
        .expect("run dffs")
}

fn round3(x: f64) -> f64 {
    let d = x.abs().log10().floor() as i32 + 1;
    let f = 10f64.powi(3 - d);
    (x * f).round() / f
}

#[test]
fn presets_json() {
    let out = dffs(&["presets", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let list = v["presets"].as_array().expect("presets array");
    assert_eq!(list.len(), 5);
    let find = |name: &str| {
        list.iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let slc = find("nand-slc-128m");
    assert_eq!(round3(slc["raw_write_mb_s"].as_f64().unwrap()), 7.41);
    assert_eq!(round3(slc["raw_read_mb_s"].as_f64().unwrap()), 26.3);
    assert_eq!(slc["kind"], "nand");
    assert_eq!(slc["page_size"], 2048);
    assert_eq!(slc["oob_size"], 64);
    assert_eq!(slc["pages_per_block"], 64);
    assert_eq!(slc["blocks"], 1024);
    assert_eq!(slc["erase_size"], 131072);
    assert_eq!(slc["capacity_bytes"], 134217728u64);
    assert_eq!(slc["endurance"], 100000);
    assert_eq!(slc["nop"], 4);
    assert_eq!(slc["ecc_bits_per_512"], 1);
    assert_eq!(slc["default"], true);
    assert_eq!(find("nand-mlc-1g")["ecc_bits_per_512"], 8);
    let nor = find("nor-qspi-16m");
    assert_eq!(nor["kind"], "nor");
    assert_eq!(round3(nor["raw_write_mb_s"].as_f64().unwrap()), 0.257);
    assert_eq!(
        round3(nor["raw_write_mb_s_4k_erase"].as_f64().unwrap()),
        0.0794
    );
    assert_eq!(round3(nor["raw_read_mb_s"].as_f64().unwrap()), 40.0);
    assert_eq!(nor["nop"], 0);
    assert_eq!(nor["erase_sizes"], serde_json::json!([4096, 32768, 65536]));
    assert!(slc.get("raw_write_mb_s_4k_erase").is_none());
}

#[test]
fn presets_table_names_every_preset() {
    let out = dffs(&["presets"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for p in dffs_sim::presets() {
        assert!(text.contains(p.name), "{} missing from:\n{text}", p.name);
    }
    assert!(text.contains("7.41"));
    assert!(text.contains("26.3"));
    assert!(text.contains("0.0794"));
    // 32 KiB blocks: 128 programs of 410.5 µs and a 120 ms erase per 32,768 B.
    assert!(
        text.contains("nor-qspi-16m with 32 KiB erase blocks (512 blocks): raw write 0.190 MB/s"),
        "{text}"
    );
}

#[test]
fn bad_arguments_are_one_line_errors() {
    for args in [&["presets", "--jsn"][..], &["no-such-command"][..]] {
        let out = dffs(args);
        assert!(!out.status.success());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("dffs: "), "{err}");
        assert!(!err.contains("panicked"));
    }
}
