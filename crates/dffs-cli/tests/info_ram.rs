//! `dffs info --ram`: the RAM a configuration needs, measured on a device before anything is
//! flashed. Checks figures that could be wrong: the configurations order as their names say,
//! the smallest one on `nor-qspi-16m` holds less than the brief's 16 KiB after mount, the
//! library's own count agrees with the allocator's, an image's device is the one measured, and
//! misuse fails with one line.

mod common;

use common::{dffs, s};
use serde_json::Value;

fn ram_json(args: &[&str]) -> Value {
    let mut all = vec!["info", "--ram", "--json"];
    all.extend_from_slice(args);
    let run = dffs(&all).ok();
    serde_json::from_slice(&run.stdout).expect("valid JSON")
}

fn figure(v: &Value, config: usize, key: &str) -> u64 {
    v["configs"][config][key]
        .as_u64()
        .unwrap_or_else(|| panic!("configs[{config}].{key} in {v}"))
}

#[test]
fn configurations_order_and_the_smallest_stays_small_on_nor_qspi_16m() {
    let v = ram_json(&["--preset", "nor-qspi-16m"]);
    assert_eq!(v["preset"], "nor-qspi-16m");
    assert_eq!(v["capacity_bytes"], 16u64 << 20);
    let names: Vec<&str> = (0..3)
        .map(|i| v["configs"][i]["config"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["smallest", "default", "fast"]);
    for key in ["estimate_bytes", "after_mount_bytes", "peak_bytes"] {
        let (a, b, c) = (figure(&v, 0, key), figure(&v, 1, key), figure(&v, 2, key));
        assert!(a < b && b < c, "{key}: smallest {a}, default {b}, fast {c}");
    }
    for i in 0..3 {
        let mount = figure(&v, i, "after_mount_bytes");
        let peak = figure(&v, i, "peak_bytes");
        let own = figure(&v, i, "library_after_mount_bytes");
        assert!(
            mount > 0 && peak >= mount,
            "config {i}: mount {mount}, peak {peak}"
        );
        // The library's own count is what the allocator saw, less the C API's handle.
        assert!(
            own <= mount && mount - own < 512,
            "config {i}: own {own}, heap {mount}"
        );
        assert!(figure(&v, i, "format_peak_bytes") > 0);
    }
    // The brief: RAM after mount under 16 KiB on nor-qspi-16m in the smallest configuration.
    let smallest = figure(&v, 0, "after_mount_bytes");
    assert!(smallest < 16 * 1024, "smallest after mount: {smallest} B");
    // While working: the brief's goal is under 16 KiB too, which the standard workload (20
    // files in 10 directories, three open at once, a remount: 24,674 B on this 64-bit host,
    // 23,594 B on the Cortex-M4) does not meet yet (issue 19). This bound keeps it from
    // growing; lower it as the peak comes down.
    let peak = figure(&v, 0, "peak_bytes");
    assert!(peak <= 25 * 1024, "smallest peak: {peak} B");
    // The cache budget shown is the configuration's.
    assert_eq!(v["configs"][0]["caches"]["data_cache"], 2);
    assert_eq!(v["configs"][2]["caches"]["max_open"], 64);
}

#[test]
fn erase_size_and_partition_change_the_block_table() {
    let big = ram_json(&["--preset", "nor-qspi-16m", "--config", "smallest"]);
    let small = ram_json(&[
        "--preset",
        "nor-qspi-16m",
        "--erase-size",
        "4KiB",
        "--config",
        "smallest",
    ]);
    let part = ram_json(&[
        "--preset",
        "nor-qspi-16m",
        "--size",
        "2MiB",
        "--config",
        "smallest",
    ]);
    assert_eq!(small["blocks"], 4096);
    assert_eq!(small["erase_size"], 4096);
    assert_eq!(part["blocks"], 32);
    assert_eq!(big["configs"].as_array().unwrap().len(), 1);
    let mount = |v: &Value| figure(v, 0, "after_mount_bytes");
    // 16 times the blocks: the per-block records (19 bits each on 4 KiB sectors; the erase
    // counts of one block-table page in this configuration) dominate RAM after mount, which
    // stays within issue 16's 16 KiB.
    assert!(mount(&small) > 2 * mount(&big), "{small} vs {big}");
    assert!(mount(&small) <= 16 << 10, "{small}");
    assert!(mount(&part) < mount(&big), "{part} vs {big}");
}

#[test]
fn an_image_is_measured_on_its_own_device_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("nor.img");
    dffs(&[
        "format",
        s(&img),
        "--preset",
        "nor-qspi-16m",
        "--size",
        "1MiB",
    ])
    .ok();
    let before = std::fs::read(&img).unwrap();
    let v = ram_json(&[s(&img), "--config", "default"]);
    assert_eq!(v["preset"], "nor-qspi-16m");
    assert_eq!(v["capacity_bytes"], 1u64 << 20);
    assert_eq!(v["configs"][0]["config"], "default");
    assert_eq!(
        std::fs::read(&img).unwrap(),
        before,
        "--ram changed the image"
    );
    let text = dffs(&["info", "--ram", s(&img), "--config", "smallest"])
        .ok()
        .out();
    assert!(
        text.contains("after mount") && text.contains("peak"),
        "{text}"
    );
    assert!(text.contains("16 blocks of 64 KiB = 1 MiB"), "{text}");
}

#[test]
fn misuse_fails_with_one_line() {
    dffs(&["info", "--config", "smallest", "x.img"]).fails_with("--ram");
    dffs(&["info", "--ram", "--preset", "no-such-device"]).fails_with("no-such-device");
    dffs(&[
        "info",
        "--ram",
        "--preset",
        "nor-qspi-16m",
        "--erase-size",
        "3KiB",
    ])
    .fails_with("erase");
    dffs(&[
        "info",
        "--ram",
        "--preset",
        "nor-qspi-16m",
        "--config",
        "huge",
    ])
    .fails_with("huge");
}
