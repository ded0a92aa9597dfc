//! Results: the rows every suite produces, the JSON document tooling reads, and the terminal
//! tables (DFFS, littlefs, raw and their ratio).
//!
//! Owns the JSON shape (`{"suite", "quick", "device", "results": [ROW...]}` with each ROW
//! `{"fs", "case", "params", "metrics", "ok", "error"}`) and the table layout. It must never
//! compute a figure: it prints and serializes what the suites measured, and it must never hide a
//! failure row or print it as a number.

use std::io::Write;

use serde::Serialize;
use serde_json::{Map, Value};

/// One measured result.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    /// `dffs`, `littlefs` or `raw`.
    pub fs: String,
    /// The case within the suite.
    pub case: String,
    /// What the case was run with (sizes, device, …).
    pub params: Map<String, Value>,
    /// What was measured.
    pub metrics: Map<String, Value>,
    /// False when the file system failed the case (the error says how).
    pub ok: bool,
    /// The failure, if any.
    pub error: Option<String>,
}

impl Row {
    /// A row for `fs` and `case` with no params or metrics yet.
    pub fn new(fs: &str, case: &str) -> Row {
        Row {
            fs: fs.to_string(),
            case: case.to_string(),
            params: Map::new(),
            metrics: Map::new(),
            ok: true,
            error: None,
        }
    }

    /// Adds a parameter.
    pub fn param(mut self, k: &str, v: impl Into<Value>) -> Row {
        self.params.insert(k.to_string(), v.into());
        self
    }

    /// Adds a parameter to a row in place.
    pub fn add_param(&mut self, k: &str, v: impl Into<Value>) {
        self.params.insert(k.to_string(), v.into());
    }

    /// Sets a metric.
    pub fn set(&mut self, k: &str, v: impl Into<Value>) {
        self.metrics.insert(k.to_string(), v.into());
    }

    /// Marks the row failed.
    pub fn fail(&mut self, why: impl std::fmt::Display) {
        self.ok = false;
        self.error = Some(why.to_string());
    }

    /// A metric as a number.
    pub fn num(&self, k: &str) -> Option<f64> {
        self.metrics.get(k).and_then(Value::as_f64)
    }
}

/// Everything one suite produced.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// Suite name.
    pub suite: String,
    /// Whether it ran at `--quick` size.
    pub quick: bool,
    /// The device(s), one line.
    pub device: String,
    /// Every row.
    pub results: Vec<Row>,
    /// Each file system's configuration, one line each.
    pub config: Vec<String>,
    /// How figures were obtained and what to keep in mind reading them.
    pub notes: Vec<String>,
}

impl SuiteReport {
    /// An empty report.
    pub fn new(suite: &str, quick: bool, device: String) -> SuiteReport {
        SuiteReport {
            suite: suite.to_string(),
            quick,
            device,
            results: Vec::new(),
            config: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Records a configuration line once.
    pub fn config_line(&mut self, line: String) {
        if !self.config.contains(&line) {
            self.config.push(line);
        }
    }

    /// Adds a note.
    pub fn note(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.notes.contains(&line) {
            self.notes.push(line);
        }
    }

    /// The rows of one file system and case.
    pub fn rows<'a>(&'a self, fs: &'a str, case: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.results
            .iter()
            .filter(move |r| r.fs == fs && r.case == case)
    }
}

/// How a table shows one metric.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    /// Metric key.
    pub metric: &'a str,
    /// Heading, with unit.
    pub label: &'a str,
    /// Whether a larger number is better (for the ratio's direction).
    pub higher_is_better: bool,
}

/// The params of a row as `k=v` text, leaving out `skip`.
fn params_text(r: &Row, skip: &[&str]) -> String {
    r.params
        .iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Formats a number for a table.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100_000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else if a >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

fn cell(r: Option<&Row>, metric: &str) -> String {
    match r {
        None => "-".into(),
        Some(r) => {
            let v = r.num(metric).map(fmt_num);
            match (&r.error, v) {
                (Some(e), Some(v)) => format!("{v} FAIL({})", short(e)),
                (Some(e), None) => format!("FAIL({})", short(e)),
                (None, Some(v)) => v,
                (None, None) => "n/a".into(),
            }
        }
    }
}

fn short(e: &str) -> String {
    let first = e.split(':').next().unwrap_or(e);
    if first.len() > 28 {
        format!("{}…", first.chars().take(27).collect::<String>())
    } else {
        first.to_string()
    }
}

/// One table per `(metric, label, higher is better)` column, each titled `title`.
pub fn tables_of(
    out: &mut dyn Write,
    rep: &SuiteReport,
    title: &str,
    columns: &[(&'static str, &'static str, bool)],
) -> std::io::Result<()> {
    for &(metric, label, higher_is_better) in columns {
        let col = Column {
            metric,
            label,
            higher_is_better,
        };
        table(out, rep, title, col, &[])?;
    }
    Ok(())
}

/// Writes a table of `col` for every (case, params) in `rep`: DFFS, littlefs, their ratio
/// (how many times better DFFS is, in the column's direction) and raw when there is a raw row.
/// Rows are matched on their params, leaving out the keys in `ignore` (e.g. the file-system
/// specific `config`).
pub fn table(
    out: &mut dyn Write,
    rep: &SuiteReport,
    title: &str,
    col: Column,
    ignore: &[&str],
) -> std::io::Result<()> {
    // Every distinct (case, params) in order of first appearance.
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in &rep.results {
        if !r.metrics.contains_key(col.metric) && r.error.is_none() {
            continue;
        }
        if r.error.is_some() && !has_metric_in_case(rep, &r.case, col.metric) {
            continue;
        }
        let k = (r.case.clone(), params_text(r, ignore));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let find = |fs: &str, k: &(String, String)| {
        rep.results
            .iter()
            .find(|r| r.fs == fs && r.case == k.0 && params_text(r, ignore) == k.1)
    };
    let has_raw = keys.iter().any(|k| find("raw", k).is_some());
    let mut lines: Vec<[String; 6]> = Vec::new();
    lines.push([
        "case".into(),
        "params".into(),
        "DFFS".into(),
        "littlefs".into(),
        "DFFS ×".into(),
        if has_raw { "raw".into() } else { String::new() },
    ]);
    for k in &keys {
        let d = find("dffs", k);
        let l = find("littlefs", k);
        let raw = find("raw", k);
        let ratio = match (d, l) {
            (Some(d), Some(l)) if d.ok => match (d.num(col.metric), l.num(col.metric)) {
                (Some(a), Some(b)) if a > 0.0 && b > 0.0 => {
                    let x = if col.higher_is_better { a / b } else { b / a };
                    format!("{}{}", fmt_num(x), if l.ok { "" } else { " (lfs failed)" })
                }
                (Some(_), None) if !l.ok => "lfs failed".into(),
                _ => "-".into(),
            },
            _ => "-".into(),
        };
        lines.push([
            k.0.clone(),
            k.1.clone(),
            cell(d, col.metric),
            cell(l, col.metric),
            ratio,
            if has_raw {
                cell(raw, col.metric)
            } else {
                String::new()
            },
        ]);
    }
    let mut w = [0usize; 6];
    for l in &lines {
        for (i, c) in l.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    writeln!(out, "\n{title} — {}", col.label)?;
    for (n, l) in lines.iter().enumerate() {
        let mut s = String::new();
        for (i, c) in l.iter().enumerate() {
            if i == 5 && !has_raw {
                break;
            }
            let pad = w[i] - c.chars().count();
            if i >= 2 {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
            s.push_str("  ");
        }
        writeln!(out, "  {}", s.trim_end())?;
        if n == 0 {
            writeln!(out, "  {}", "-".repeat(s.trim_end().chars().count()))?;
        }
    }
    Ok(())
}

fn has_metric_in_case(rep: &SuiteReport, case: &str, metric: &str) -> bool {
    rep.results
        .iter()
        .any(|r| r.case == case && r.metrics.contains_key(metric))
}

/// Writes the header of a suite: device, configurations.
pub fn header(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    writeln!(
        out,
        "\n=== suite {}{} — {}",
        rep.suite,
        if rep.quick { " (--quick)" } else { "" },
        rep.device
    )?;
    for c in &rep.config {
        writeln!(out, "  config: {c}")?;
    }
    Ok(())
}

/// Writes the notes and every failure row in full.
pub fn footer(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    let failures: Vec<&Row> = rep.results.iter().filter(|r| !r.ok).collect();
    if !failures.is_empty() {
        writeln!(out, "\n  failures:")?;
        for r in failures {
            writeln!(
                out,
                "    {} {} [{}]: {}",
                r.fs,
                r.case,
                params_text(r, &[]),
                r.error.as_deref().unwrap_or("")
            )?;
        }
    }
    for n in &rep.notes {
        writeln!(out, "  note: {n}")?;
    }
    Ok(())
}

/// The JSON document of one suite.
pub fn suite_json(rep: &SuiteReport) -> Value {
    serde_json::to_value(rep).unwrap_or(Value::Null)
}

/// The JSON document of `dffs bench all`: every row (each with its `suite`) in `results`, and
/// each suite's own document in `suites`.
pub fn all_json(reps: &[SuiteReport], quick: bool) -> Value {
    let mut results = Vec::new();
    for rep in reps {
        for r in &rep.results {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("suite".into(), rep.suite.clone().into());
            }
            results.push(v);
        }
    }
    let devices: Vec<String> = reps.iter().map(|r| r.device.clone()).collect();
    serde_json::json!({
        "suite": "all",
        "quick": quick,
        "device": devices.join("; "),
        "results": results,
        "suites": reps.iter().map(suite_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_ratio_and_failures() {
        let mut rep = SuiteReport::new("t", true, "dev".into());
        let mut d = Row::new("dffs", "c").param("size", 4);
        d.set("kb_s", 100.0);
        let mut l = Row::new("littlefs", "c").param("size", 4);
        l.set("kb_s", 25.0);
        let mut l2 = Row::new("littlefs", "c").param("size", 8);
        l2.fail("ENOSPC on 3 of 8 accesses");
        let mut d2 = Row::new("dffs", "c").param("size", 8);
        d2.set("kb_s", 50.0);
        rep.results = vec![d, l, d2, l2];
        let mut out = Vec::new();
        table(
            &mut out,
            &rep,
            "T",
            Column {
                metric: "kb_s",
                label: "KB/s",
                higher_is_better: true,
            },
            &[],
        )
        .unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("4.00"), "{s}");
        assert!(s.contains("FAIL(ENOSPC on 3 of 8 accesses)"), "{s}");
        let v = suite_json(&rep);
        assert_eq!(v["results"][3]["ok"], false);
        assert_eq!(v["results"][0]["metrics"]["kb_s"], 100.0);
    }
}
