//! `dffs torture`: the campaign runs, counts what it verified, writes the JSON the issue
//! specifies, reproduces one cut, and refuses bad arguments with one line.

mod common;

use common::{dffs, s};

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_short_campaign_verifies_the_cuts_it_was_asked_for_on_nand_and_nor() {
    let dir = tempfile::tempdir().unwrap();
    for preset in ["nand-slc-128m", "nor-qspi-16m"] {
        let out = dir.path().join(format!("{preset}.json"));
        let run = dffs(&[
            "torture",
            "--preset",
            preset,
            "--cuts",
            "40",
            "--steps",
            "40",
            "--seed",
            "3",
            "--json",
            s(&out),
        ])
        .ok();
        let text = run.out();
        assert!(text.contains("40 cuts verified, 0 failures"), "{text}");
        let j = json(&out);
        assert_eq!(j["preset"], preset);
        assert_eq!(j["cuts"], 40);
        assert_eq!(j["failures"], 0);
        let rows = j["workloads"].as_array().unwrap();
        let names: Vec<&str> = rows
            .iter()
            .map(|r| r["workload"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["mixed", "churn", "log", "full", "large", "links"]);
        let sum: u64 = rows.iter().map(|r| r["cuts"].as_u64().unwrap()).sum();
        assert_eq!(sum, 40, "the rows add up to the total");
        for r in rows {
            assert!(r["workload_ops"].as_u64().unwrap() > 0, "{r}");
            assert!(r["cuts"].as_u64().unwrap() <= r["workload_ops"].as_u64().unwrap());
        }
        assert!(j["failure_list"].as_array().unwrap().is_empty());
    }
}

#[test]
fn zero_cuts_means_every_program_and_erase() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    dffs(&[
        "torture",
        "--workload",
        "churn",
        "--steps",
        "12",
        "--cuts",
        "0",
        "--json",
        s(&out),
    ])
    .ok();
    let j = json(&out);
    let row = &j["workloads"][0];
    assert_eq!(row["cuts"], row["workload_ops"]);
    assert_eq!(j["cuts"], row["cuts"]);
}

#[test]
fn one_cut_can_be_rerun_alone() {
    let run = dffs(&[
        "torture",
        "--workload",
        "log",
        "--steps",
        "20",
        "--seed",
        "5",
        "--cut",
        "17",
    ])
    .ok();
    assert!(
        run.out().contains("cut 17: every guarantee holds"),
        "{}",
        run.out()
    );
}

#[test]
fn bad_arguments_are_one_line_errors() {
    dffs(&["torture", "--preset", "nope"]).fails_with("unknown preset 'nope'");
    dffs(&["torture", "--workload", "nope"]).fails_with("unknown workload 'nope'");
    dffs(&["torture", "--config", "huge"]).fails_with("unknown configuration 'huge'");
    dffs(&["torture", "--cut", "3"]).fails_with("--cut needs one --workload");
    dffs(&["torture", "--blocks", "2"]).fails_with("");
}

/// `--chain N`: one device through at least N cuts in a row, reported per workload and in the
/// JSON (cuts, recoveries, commits), exit 0 when every recovery held.
#[test]
fn a_chain_of_cuts_on_one_device() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("chain.json");
    let run = dffs(&[
        "torture",
        "--preset",
        "nand-slc-128m",
        "--blocks",
        "24",
        "--workload",
        "log",
        "--steps",
        "60",
        "--seed",
        "7",
        "--chain",
        "12",
        "--json",
        s(&out),
    ])
    .ok();
    assert!(run.out().contains("torture --chain: "), "{}", run.out());
    let v = json(&out);
    assert_eq!(v["chain"], 12);
    let r = &v["runs"][0]["report"];
    assert!(r["cuts"].as_u64().unwrap() >= 12, "{r}");
    assert!(r["recoveries"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["commits"].as_u64().unwrap() > 0, "{r}");
    assert!(r["failure"].is_null(), "{r}");
}
