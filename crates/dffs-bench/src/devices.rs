//! Simulated devices for the suites, the meter that measures a step on them, and the raw limits
//! (the same bytes written straight to pre-erased flash, or read straight from it).
//!
//! Owns the choice of preset and partition for each suite and the arithmetic of a measurement
//! (simulated device time and operation counts from the simulator, host time beside them). It
//! must never decide anything about a file system: both file systems get the same kind of
//! device with the same timing, created here.

use std::time::Instant;

use dffs::{Flash, FlashKind};
use dffs_sim::{preset, Preset, SharedSim, SimFlash, Stats};
use serde_json::{Map, Value};

/// A preset by name, as the suites use it: NOR devices get 4 KiB erase sectors (the usual
/// littlefs configuration, and the brief's raw NOR limit near 80 KB/s), and `bytes` (if given)
/// cuts the device to a partition of its first blocks.
pub fn device_preset(name: &str, bytes: Option<u64>) -> Result<Preset, String> {
    let mut p = preset::preset(name).ok_or_else(|| {
        let names: Vec<&str> = dffs_sim::presets().iter().map(|p| p.name).collect();
        format!("unknown preset {name} (known: {})", names.join(", "))
    })?;
    if p.geometry.kind == FlashKind::Nor {
        p = p.with_erase_size(4096).map_err(|e| e.to_string())?;
    }
    if let Some(b) = bytes {
        p = p.with_size_bytes(b).map_err(|e| e.to_string())?;
    }
    Ok(p)
}

/// A fresh, erased simulated device (no faults).
pub fn new_device(p: Preset) -> Result<SharedSim, String> {
    SimFlash::new(p)
        .map(SharedSim::new)
        .map_err(|e| format!("simulator: {e}"))
}

/// One line describing a device for reports, e.g. `nand-slc-128m (8 MiB partition: 64 × 128 KiB)`.
pub fn describe(p: &Preset) -> String {
    let g = p.geometry;
    let full = preset::preset(p.name).map(|f| f.geometry.capacity());
    let part = if full != Some(g.capacity()) {
        format!(", {} partition", human_bytes(g.capacity()))
    } else {
        String::new()
    };
    format!(
        "{}{} ({} × {} erase blocks, {} B pages)",
        p.name,
        part,
        g.blocks,
        human_bytes(g.block_size() as u64),
        g.page_size
    )
}

/// `8 MiB`, `128 KiB`, `300 B`.
pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 && b % (1 << 30) == 0 {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b % (1 << 10) == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// What one measured step cost: simulated device time and operations, host time beside them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measure {
    /// Device counters over the step.
    pub stats: Stats,
    /// Host wall-clock time of the step in microseconds (file system plus simulator, one thread).
    pub host_us: f64,
}

impl Measure {
    /// Simulated device time in microseconds.
    pub fn sim_us(&self) -> f64 {
        self.stats.sim_ps as f64 / 1e6
    }

    /// Simulated device time in seconds.
    pub fn sim_s(&self) -> f64 {
        self.stats.sim_ps as f64 / 1e12
    }

    /// Adds another step's cost.
    pub fn add(&mut self, o: &Measure) {
        let s = &mut self.stats;
        let t = &o.stats;
        s.reads += t.reads;
        s.programs += t.programs;
        s.erases += t.erases;
        s.bytes_read += t.bytes_read;
        s.bytes_programmed += t.bytes_programmed;
        s.read_ps += t.read_ps;
        s.program_ps += t.program_ps;
        s.erase_ps += t.erase_ps;
        s.sim_ps += t.sim_ps;
        s.corrected_reads += t.corrected_reads;
        s.uncorrectable_reads += t.uncorrectable_reads;
        s.program_failures += t.program_failures;
        s.erase_failures += t.erase_failures;
        s.power_cuts += t.power_cuts;
        self.host_us += o.host_us;
    }

    /// Writes `reads`, `programs`, `erases`, `sim_us` and `host_us` (each key prefixed with
    /// `prefix`, e.g. `mount_`) into `m`.
    pub fn put(&self, m: &mut Map<String, Value>, prefix: &str) {
        let key = |k: &str| format!("{prefix}{k}");
        m.insert(key("reads"), self.stats.reads.into());
        m.insert(key("programs"), self.stats.programs.into());
        m.insert(key("erases"), self.stats.erases.into());
        m.insert(key("sim_us"), round(self.sim_us()).into());
        m.insert(key("host_us"), round(self.host_us).into());
    }
}

/// Rounds to 3 significant decimals for reports (keeps JSON readable).
pub fn round(x: f64) -> f64 {
    if !x.is_finite() {
        return 0.0;
    }
    (x * 1000.0).round() / 1000.0
}

/// Measures a step on a device: take a [`Meter`] before, [`Meter::stop`] after.
pub struct Meter {
    sim: SharedSim,
    s0: Stats,
    t0: Instant,
}

impl Meter {
    /// Starts measuring.
    pub fn start(sim: &SharedSim) -> Meter {
        Meter {
            sim: sim.clone(),
            s0: sim.stats(),
            t0: Instant::now(),
        }
    }

    /// What happened since [`Meter::start`].
    pub fn stop(&self) -> Measure {
        Measure {
            stats: self.sim.stats().since(&self.s0),
            host_us: self.t0.elapsed().as_secs_f64() * 1e6,
        }
    }
}

/// The raw device writing `total` bytes in accesses of `access` bytes to pre-erased flash: each
/// block is erased when the writes reach it (so erases are amortized over the block), and the
/// bytes are programmed in whole program pages (NAND: with their OOB area, as a controller
/// moves it). Returns the whole measure and the slowest single access in simulated µs.
pub fn raw_write(sim: &SharedSim, access: u64, total: u64) -> Result<(Measure, f64), String> {
    let g = sim.lock().geometry();
    let page = g.page_size as u64;
    let block = g.block_size() as u64;
    let total = total.min(g.capacity());
    let data = vec![0x5Au8; page as usize];
    let oob = vec![0xA5u8; g.oob_free_len as usize];
    let meter = Meter::start(sim);
    let mut max_op = 0f64;
    let mut pos = 0u64;
    let mut dev = sim.clone();
    while pos < total {
        let t0 = sim.stats().sim_ps;
        let end = (pos + access).min(total);
        let mut p = pos;
        while p < end {
            if p % block == 0 {
                dev.erase((p / block) as u32).map_err(|e| e.to_string())?;
            }
            let n = (page - p % page).min(end - p);
            let pg = (p / page) as u32;
            let off = (p % page) as u32;
            match g.kind {
                FlashKind::Nand => dev.program(pg, off, &data[..n as usize], &oob),
                FlashKind::Nor => dev.program(pg, off, &data[..n as usize], &[]),
            }
            .map_err(|e| e.to_string())?;
            p += n;
        }
        max_op = max_op.max((sim.stats().sim_ps - t0) as f64 / 1e6);
        pos = end;
    }
    Ok((meter.stop(), max_op))
}

/// The raw device reading `total` bytes in accesses of `access` bytes: NAND reads whole pages
/// with their OOB (what the ECC needs), NOR reads each access in one read command.
pub fn raw_read(sim: &SharedSim, access: u64, total: u64) -> Result<(Measure, f64), String> {
    let g = sim.lock().geometry();
    let page = g.page_size as u64;
    let total = total.min(g.capacity());
    let mut buf = vec![0u8; access.max(page) as usize];
    let mut oob = vec![0u8; g.oob_free_len as usize];
    let meter = Meter::start(sim);
    let mut max_op = 0f64;
    let mut pos = 0u64;
    let mut dev = sim.clone();
    while pos < total {
        let t0 = sim.stats().sim_ps;
        let end = (pos + access).min(total);
        match g.kind {
            FlashKind::Nand => {
                let mut p = pos - pos % page;
                while p < end {
                    dev.read((p / page) as u32, 0, &mut buf[..page as usize], &mut oob)
                        .map_err(|e| e.to_string())?;
                    p += page;
                }
            }
            FlashKind::Nor => {
                let n = (end - pos) as usize;
                dev.read(
                    (pos / page) as u32,
                    (pos % page) as u32,
                    &mut buf[..n],
                    &mut [],
                )
                .map_err(|e| e.to_string())?;
            }
        }
        max_op = max_op.max((sim.stats().sim_ps - t0) as f64 / 1e6);
        pos = end;
    }
    Ok((meter.stop(), max_op))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_figures_match_the_presets() {
        for name in [
            "nand-slc-128m",
            "arm926-nand-128m",
            "onenand-256m",
            "nor-qspi-16m",
        ] {
            let p = device_preset(name, None).unwrap();
            let sim = new_device(p).unwrap();
            let total = 4 * p.geometry.block_size() as u64;
            let (w, _) = raw_write(&sim, 65536, total).unwrap();
            let rate = total as f64 / w.sim_s();
            let want = p.raw_write_bytes_per_s();
            assert!(
                (rate / want - 1.0).abs() < 1e-6,
                "{name} write {rate} vs {want}"
            );
            let (r, _) = raw_read(&sim, p.geometry.block_size() as u64, total).unwrap();
            let rate = total as f64 / r.sim_s();
            let want = p.raw_read_bytes_per_s();
            assert!(
                (rate / want - 1.0).abs() < 1e-6,
                "{name} read {rate} vs {want}"
            );
        }
    }
}
