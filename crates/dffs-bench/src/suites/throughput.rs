//! Suite `throughput` (seed 001's write and read speed by block size): on `nand-slc-128m` and
//! `arm926-nand-128m`, write 10 MiB of random data and then 10 MiB of zeros to a file in block
//! sizes of 4 KiB, 64 KiB and 1 MiB; read each random file back in the same block size right
//! after a mount (cold) and again (warm). The raw rows write the same bytes to pre-erased flash
//! and read them straight from it.
//!
//! Owns that workload. A write is measured up to the fsync and close that make it durable (the
//! data and what finds it are on flash when the figure ends) and the deferred work it caused
//! (`Session::finish_deferred`); reads are checked against what was written after the meter
//! has stopped. It must never time a write whose data is still only in RAM.

use std::io::Write;

use crate::content::{Content, Pattern};
use crate::devices::{describe, device_preset, new_device, raw_read, raw_write, round, Meter};
use crate::fsapi::{Driver, End, FsError, OpenMode};
use crate::report::{table, Column, Row, SuiteReport};
use crate::suites::{pair, progress};
use crate::{Options, Scale};

const MIB: f64 = 1048576.0;

/// Runs the suite.
pub fn run(opts: &Options) -> Result<SuiteReport, String> {
    let s = opts.scale;
    let part = s.pick(Some(4u64 << 20), None, None);
    let total: u64 = s.pick(256 << 10, 1 << 20, 10 << 20);
    let sizes: Vec<u64> = s.pick(
        vec![4096, 65536, 256 << 10],
        vec![4096, 65536, 1 << 20],
        vec![4096, 65536, 1 << 20],
    );
    let names = ["nand-slc-128m", "arm926-nand-128m"];
    let presets = names
        .iter()
        .map(|n| device_preset(n, part))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rep = SuiteReport::new(
        "throughput",
        s != Scale::Full,
        presets.iter().map(describe).collect::<Vec<_>>().join("; "),
    );
    rep.note(format!(
        "each file holds {} MiB; write figures run from open to the fsync and close that make \
         the file durable, and include the work the file system deferred (DFFS: a \
         checkpoint); reads are verified after the meter stops",
        total as f64 / MIB
    ));
    rep.note(
        "raw: the same bytes programmed page by page (with OOB) into pre-erased blocks, each \
         block erased when the writes reach it; raw reads read whole pages with OOB",
    );
    for p in &presets {
        let dev = p.name;
        // Raw limits.
        for &bs in &sizes {
            let sim = new_device(*p)?;
            let (w, _) = raw_write(&sim, bs, total)?;
            let (r, _) = raw_read(&sim, bs, total)?;
            for (case, m) in [
                ("write_random", w),
                ("write_zero", w),
                ("read_cold", r),
                ("read_warm", r),
            ] {
                let mut row = Row::new("raw", case)
                    .param("device", dev)
                    .param("block_size", bs);
                m.put(&mut row.metrics, "");
                row.set("mib_s", round(total as f64 / MIB / m.sim_s()));
                rep.results.push(row);
            }
        }
        for mut d in pair(*p)? {
            progress(opts, format!("throughput {dev} {}", d.name()));
            rep.config_line(d.config());
            let rows = one(&mut *d, dev, &sizes, total);
            rep.results.extend(rows);
        }
    }
    Ok(rep)
}

fn row(d: &dyn Driver, case: &str, dev: &str, bs: u64) -> Row {
    Row::new(d.name(), case)
        .param("device", dev)
        .param("block_size", bs)
}

fn one(d: &mut dyn Driver, dev: &str, sizes: &[u64], total: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    if let Err(e) = d.format() {
        // A failure row for every case and size, so the report shows what did not run.
        for &bs in sizes {
            for case in ["write_random", "write_zero", "read_cold", "read_warm"] {
                let mut r = row(d, case, dev, bs);
                r.fail(format!("format: {e}"));
                rows.push(r);
            }
        }
        return rows;
    }
    let rnd = |bs: u64| Content {
        key: 0x7000 + bs,
        pattern: Pattern::Random,
    };
    let zero = Content {
        key: 0,
        pattern: Pattern::Zero,
    };
    // Writes.
    let mut written: Vec<(String, Content)> = Vec::new();
    let sim = d.sim().clone();
    let mut rs: Vec<Row> = Vec::new();
    let res = d.session(End::Unmount, &mut |s| {
        for &bs in sizes {
            for (case, c, name) in [
                ("write_random", rnd(bs), format!("/rnd_{bs}")),
                ("write_zero", zero, format!("/zero_{bs}")),
            ] {
                let mut r = Row::new("", case)
                    .param("device", dev)
                    .param("block_size", bs);
                let mut buf = vec![0u8; bs as usize];
                let meter = Meter::start(&sim);
                let w = s.with_file(&name, OpenMode::CREATE, &mut |f| {
                    let mut off = 0;
                    while off < total {
                        let n = bs.min(total - off) as usize;
                        c.fill(off, &mut buf[..n]);
                        f.write_at(off, &buf[..n])?;
                        off += n as u64;
                    }
                    // Durable before the figure ends (a close alone need not be, on DFFS).
                    f.sync()
                });
                // And what the write left for later (DFFS: its index and inode, at the next
                // checkpoint) is paid inside the figure too.
                let w = w.and_then(|()| s.finish_deferred());
                let m = meter.stop();
                m.put(&mut r.metrics, "");
                match w {
                    Ok(()) => {
                        r.set("mib_s", round(total as f64 / MIB / m.sim_s()));
                        written.push((name.clone(), c));
                    }
                    Err(e) => r.fail(e),
                }
                r.set("ram_bytes", s.ram_bytes());
                rs.push(r);
            }
        }
        Ok(())
    });
    for mut r in rs.drain(..) {
        r.fs = d.name().to_string();
        rows.push(r);
    }
    if let Err(e) = res {
        let mut r = row(d, "write_random", dev, 0);
        r.fail(format!("session: {e}"));
        rows.push(r);
        return rows;
    }
    // Reads: one mount, then each random file cold and warm.
    let res = d.session(End::Unmount, &mut |s| {
        for &bs in sizes {
            let name = format!("/rnd_{bs}");
            let Some(c) = written.iter().find(|(n, _)| *n == name).map(|(_, c)| *c) else {
                continue;
            };
            for case in ["read_cold", "read_warm"] {
                let mut r = Row::new("", case)
                    .param("device", dev)
                    .param("block_size", bs);
                let mut data = vec![0u8; total as usize];
                let meter = Meter::start(&sim);
                let rd = s.with_file(&name, OpenMode::READ, &mut |f| {
                    let mut off = 0usize;
                    while off < data.len() {
                        let n = (bs as usize).min(data.len() - off);
                        let got = f.read_at(off as u64, &mut data[off..off + n])?;
                        if got != n {
                            return Err(FsError::WrongData(format!("short read at {off}")));
                        }
                        off += n;
                    }
                    Ok(())
                });
                let m = meter.stop();
                m.put(&mut r.metrics, "");
                match rd.and_then(|()| {
                    c.verify(0, &data)
                        .map_err(|e| FsError::WrongData(format!("{name}: {e}")))
                }) {
                    Ok(()) => r.set("mib_s", round(total as f64 / MIB / m.sim_s())),
                    Err(e) => r.fail(e),
                }
                rs.push(r);
            }
        }
        // The zero files too (not timed).
        for &bs in sizes {
            let name = format!("/zero_{bs}");
            if written.iter().any(|(n, _)| *n == name) {
                crate::fsapi::verify_file(s, &name, &zero, total, 65536)?;
            }
        }
        Ok(())
    });
    for mut r in rs {
        r.fs = d.name().to_string();
        rows.push(r);
    }
    if let Err(e) = res {
        let mut r = row(d, "read_cold", dev, 0);
        r.fail(format!("session: {e}"));
        rows.push(r);
    }
    rows
}

/// The suite's tables.
pub fn tables(out: &mut dyn Write, rep: &SuiteReport) -> std::io::Result<()> {
    table(
        out,
        rep,
        "throughput",
        Column {
            metric: "mib_s",
            label: "MiB/s (simulated device time)",
            higher_is_better: true,
        },
        &[],
    )
}
