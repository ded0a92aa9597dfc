//! SVG plots shaped like the seeds' figures: throughput against access size (seed 002's
//! figures 2–6, seed 001's write and read speed), throughput against fill level (seed 002's
//! figure 4), mount time and RAM against file count (seed 003's figure 8).
//!
//! Owns the drawing only (plotters' SVG backend, which writes text as SVG text elements, so no
//! system font is read). It must never compute or alter a figure: it draws the rows of a report,
//! and draws a failed row's point as a cross so it cannot pass for a good one.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::{Row, SuiteReport};

/// One line of a chart.
struct Series {
    name: String,
    color: RGBColor,
    /// (x, y, the row failed)
    points: Vec<(f64, f64, bool)>,
}

const DFFS: RGBColor = RGBColor(31, 100, 200);
const LFS: RGBColor = RGBColor(210, 60, 40);
const RAW: RGBColor = RGBColor(90, 90, 90);
const DFFS2: RGBColor = RGBColor(100, 170, 240);
const LFS2: RGBColor = RGBColor(240, 150, 110);

fn color(fs: &str, alt: bool) -> RGBColor {
    match (fs, alt) {
        ("dffs", false) => DFFS,
        ("dffs", true) => DFFS2,
        ("littlefs", false) => LFS,
        ("littlefs", true) => LFS2,
        _ => RAW,
    }
}

/// Writes the suite's plots into `dir`; returns the files written.
pub fn plots(rep: &SuiteReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    match rep.suite.as_str() {
        "nor" => nor(rep, dir),
        "throughput" => throughput(rep, dir),
        "mount" => mount(rep, dir),
        _ => Ok(Vec::new()),
    }
}

fn param(r: &Row, k: &str) -> Option<f64> {
    r.params.get(k).and_then(|v| v.as_f64())
}

/// The NOR series: one per file system and erase size (DFFS may have run on two).
fn nor_series(rep: &SuiteReport, case: &str, x: &str) -> Vec<Series> {
    let mut out = Vec::new();
    for fs in ["dffs", "littlefs", "raw"] {
        let mut sizes: Vec<u64> = rep
            .results
            .iter()
            .filter(|r| r.fs == fs && r.case == case)
            .filter_map(|r| r.params.get("erase_size").and_then(|v| v.as_u64()))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        for (i, es) in sizes.iter().enumerate() {
            let mut pts: Vec<(f64, f64, bool)> = rep
                .results
                .iter()
                .filter(|r| r.fs == fs && r.case == case)
                .filter(|r| r.params.get("erase_size").and_then(|v| v.as_u64()) == Some(*es))
                .filter_map(|r| Some((param(r, x)?, r.num("kb_s")?, !r.ok)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            if pts.is_empty() {
                continue;
            }
            let name = if fs == "raw" {
                format!("raw, {} KiB erase", es / 1024)
            } else {
                format!("{fs}, {} KiB erase", es / 1024)
            };
            out.push(Series {
                name,
                color: match (fs, i) {
                    ("raw", 0) => RAW,
                    ("raw", _) => RGBColor(160, 160, 160),
                    (f, i) => color(f, i > 0),
                },
                points: pts,
            });
        }
    }
    out
}

fn nor(rep: &SuiteReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for (case, title) in [
        ("seq_write", "Sequential write (synced), NOR"),
        ("rand_write", "Random write (synced), NOR"),
        ("seq_read", "Sequential read, NOR"),
        ("rand_read", "Random read, NOR"),
    ] {
        let series = nor_series(rep, case, "access_size");
        let path = dir.join(format!("nor_{case}.svg"));
        chart(
            &path,
            title,
            "access size (bytes)",
            "KB/s",
            true,
            true,
            &series,
        )?;
        out.push(path);
    }
    let series = nor_series(rep, "rand_write_fill", "fill_pct");
    let path = dir.join("nor_rand_write_fill.svg");
    chart(
        &path,
        "Random 4 KiB writes against fill level, NOR",
        "working set (% of device)",
        "KB/s",
        false,
        true,
        &series,
    )?;
    out.push(path);
    Ok(out)
}

fn throughput(rep: &SuiteReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut devices: Vec<String> = Vec::new();
    for r in &rep.results {
        if let Some(d) = r.params.get("device").and_then(|v| v.as_str()) {
            if !devices.iter().any(|x| x == d) {
                devices.push(d.to_string());
            }
        }
    }
    for dev in &devices {
        let only = |fs: &str, case: &str| -> Vec<(f64, f64, bool)> {
            let mut v: Vec<(f64, f64, bool)> = rep
                .results
                .iter()
                .filter(|r| r.fs == fs && r.case == case)
                .filter(|r| r.params.get("device").and_then(|v| v.as_str()) == Some(dev))
                .filter_map(|r| Some((param(r, "block_size")?, r.num("mib_s")?, !r.ok)))
                .collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            v
        };
        for (kind, cases, title) in [
            ("write", ["write_random", "write_zero"], "Write speed"),
            ("read", ["read_cold", "read_warm"], "Read speed"),
        ] {
            let mut series = Vec::new();
            for fs in ["dffs", "littlefs"] {
                for (i, case) in cases.iter().enumerate() {
                    series.push(Series {
                        name: format!("{fs} {}", case.split('_').nth(1).unwrap_or(case)),
                        color: color(fs, i == 1),
                        points: only(fs, case),
                    });
                }
            }
            series.push(Series {
                name: "raw".into(),
                color: RAW,
                points: only("raw", cases[0]),
            });
            let path = dir.join(format!("throughput_{kind}_{dev}.svg"));
            chart(
                &path,
                &format!("{title}, {dev}"),
                "block size (bytes)",
                "MiB/s",
                true,
                false,
                &series,
            )?;
            out.push(path);
        }
    }
    Ok(out)
}

fn mount(rep: &SuiteReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for (metric, name, title, ylabel) in [
        (
            "mount_us",
            "mount_time",
            "Mount time against file count",
            "mount time (ms, simulated)",
        ),
        (
            "ram_bytes",
            "mount_ram",
            "RAM after mount against file count",
            "RAM (KiB)",
        ),
    ] {
        let mut series = Vec::new();
        for dev in ["nand-slc-128m", "nand-mlc-1g"] {
            for fs in ["dffs", "littlefs"] {
                for clean in [true, false] {
                    let mut pts: Vec<(f64, f64, bool)> = rep
                        .results
                        .iter()
                        .filter(|r| r.fs == fs)
                        .filter(|r| r.params.get("device").and_then(|v| v.as_str()) == Some(dev))
                        .filter(|r| r.params.get("clean").and_then(|v| v.as_bool()) == Some(clean))
                        .filter_map(|r| {
                            let files = r
                                .num("files_written")
                                .or_else(|| param(r, "files"))?
                                .max(1.0);
                            let y = r.num(metric)?;
                            let y = if metric == "mount_us" {
                                y / 1000.0
                            } else {
                                y / 1024.0
                            };
                            Some((files, y, !r.ok))
                        })
                        .collect();
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    if pts.is_empty() {
                        continue;
                    }
                    let mlc = dev.contains("mlc");
                    let c = match (fs, mlc, clean) {
                        (_, false, _) => color(fs, !clean),
                        ("dffs", true, true) => RGBColor(0, 130, 100),
                        ("dffs", true, false) => RGBColor(90, 200, 170),
                        (_, true, true) => RGBColor(140, 50, 160),
                        (_, true, false) => RGBColor(205, 140, 220),
                    };
                    series.push(Series {
                        name: format!(
                            "{fs} {} {}",
                            if mlc { "MLC" } else { "SLC" },
                            if clean { "clean" } else { "after cut" }
                        ),
                        color: c,
                        points: pts,
                    });
                }
            }
        }
        let path = dir.join(format!("{name}.svg"));
        chart(
            &path,
            title,
            "files written (an empty file system is drawn at 1)",
            ylabel,
            true,
            true,
            &series,
        )?;
        out.push(path);
    }
    Ok(out)
}

/// A tick label: no decimals for large numbers, a few for small ones.
fn fmt_tick(v: f64) -> String {
    if v.abs() >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Draws a line chart with markers; failed points are crosses.
fn chart(
    path: &Path,
    title: &str,
    xlabel: &str,
    ylabel: &str,
    xlog: bool,
    ylog: bool,
    series: &[Series],
) -> Result<(), String> {
    // The raw limit first, so the file systems' lines are drawn over it.
    let mut ordered: Vec<&Series> = series.iter().collect();
    ordered.sort_by_key(|s| !s.name.starts_with("raw"));
    let legend_at = if !ylog && !xlog {
        SeriesLabelPosition::UpperRight
    } else if !ylog {
        SeriesLabelPosition::LowerRight
    } else {
        SeriesLabelPosition::UpperLeft
    };
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| (p.0, p.1)))
        .filter(|p| p.0.is_finite() && p.1.is_finite() && (!ylog || p.1 > 0.0))
        .collect();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in &all {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    if all.is_empty() {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    if x1 <= x0 {
        x1 = x0 * 2.0 + 1.0;
    }
    if ylog {
        y0 /= 2.0;
        y1 *= 2.0;
    } else {
        y0 = 0.0;
        y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    }
    let (xa, xb) = if xlog {
        (x0 / 1.5, x1 * 1.5)
    } else {
        (x0 - 5.0, x1 + 5.0)
    };
    let e = |e: String| format!("{}: {e}", path.display());
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(x.to_string()))?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut c = $chart;
            c.configure_mesh()
                .x_label_formatter(&|x| fmt_tick(*x))
                .y_label_formatter(&|y| fmt_tick(*y))
                .x_desc(xlabel)
                .y_desc(ylabel)
                .label_style(("sans-serif", 13))
                .draw()
                .map_err(|x| e(x.to_string()))?;
            for s in &ordered {
                let color = s.color;
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter(|p| !ylog || p.1 > 0.0)
                    .map(|p| (p.0, p.1))
                    .collect();
                c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(|x| e(x.to_string()))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                c.draw_series(
                    s.points
                        .iter()
                        .filter(|p| !p.2 && (!ylog || p.1 > 0.0))
                        .map(|p| Circle::new((p.0, p.1), 3, color.filled())),
                )
                .map_err(|x| e(x.to_string()))?;
                c.draw_series(
                    s.points
                        .iter()
                        .filter(|p| p.2 && (!ylog || p.1 > 0.0))
                        .map(|p| Cross::new((p.0, p.1), 6, color.stroke_width(2))),
                )
                .map_err(|x| e(x.to_string()))?;
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(legend_at)
                .draw()
                .map_err(|x| e(x.to_string()))?;
        }};
    }
    match (xlog, ylog) {
        (true, true) => draw!(b
            .build_cartesian_2d((xa..xb).log_scale(), (y0..y1).log_scale())
            .map_err(|x| e(x.to_string()))?),
        (true, false) => draw!(b
            .build_cartesian_2d((xa..xb).log_scale(), y0..y1)
            .map_err(|x| e(x.to_string()))?),
        (false, true) => draw!(b
            .build_cartesian_2d(xa..xb, (y0..y1).log_scale())
            .map_err(|x| e(x.to_string()))?),
        (false, false) => draw!(b
            .build_cartesian_2d(xa..xb, y0..y1)
            .map_err(|x| e(x.to_string()))?),
    }
    root.present().map_err(|x| e(x.to_string()))?;
    Ok(())
}
