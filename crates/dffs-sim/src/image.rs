//! Image files: a simulated device's contents on disk, plus a JSON sidecar with its state.
//!
//! Owns the on-disk layout. NAND images hold, for each page, the page's data bytes followed by
//! its whole OOB area (the layout `nanddump --oob` writes and `nandwrite --oob` reads); NOR
//! images are the raw bytes. The sidecar `<image>.sim` holds the preset, geometry, timing,
//! options and device state (erase counters, bad blocks, unstable pages) so that a reopened
//! image is the same device. This module must never leave a half-written image behind: it writes
//! to a temporary file and renames it over the old one; and it must never panic on a malformed
//! image or sidecar.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use dffs_flash::{FlashKind, Geometry, PagePairing};
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::preset::{self, Preset, Timing};
use crate::rng::Rng;
use crate::sim::{SimFlash, SimOptions};
use crate::stats::Stats;

/// The `format` field of every sidecar.
pub const SIDECAR_FORMAT: &str = "dffs-sim-image";
/// The sidecar format version this crate writes and reads.
pub const SIDECAR_VERSION: u32 = 1;

/// The sidecar path of an image: the image path with `.sim` appended.
pub fn sidecar_path(image: &Path) -> PathBuf {
    let mut s: OsString = image.as_os_str().to_owned();
    s.push(".sim");
    PathBuf::from(s)
}

#[derive(Serialize, Deserialize)]
struct GeometryRecord {
    kind: String,
    page_size: u32,
    oob_size: u32,
    oob_free_offset: u32,
    oob_free_len: u32,
    pages_per_block: u32,
    blocks: u32,
    program_unit: u32,
    nop: u32,
    in_order: bool,
    ecc_strength: u32,
    ecc_step: u32,
    /// Page pairing code (`PagePairing::code`); absent in sidecars written before it existed.
    #[serde(default)]
    pairing: u8,
}

impl GeometryRecord {
    fn from_geometry(g: &Geometry) -> Self {
        GeometryRecord {
            kind: match g.kind {
                FlashKind::Nand => "nand",
                FlashKind::Nor => "nor",
            }
            .to_string(),
            page_size: g.page_size,
            oob_size: g.oob_size,
            oob_free_offset: g.oob_free_offset,
            oob_free_len: g.oob_free_len,
            pages_per_block: g.pages_per_block,
            blocks: g.blocks,
            program_unit: g.program_unit,
            nop: g.nop,
            in_order: g.in_order,
            ecc_strength: g.ecc_strength,
            ecc_step: g.ecc_step,
            pairing: g.pairing.code(),
        }
    }

    fn to_geometry(&self) -> Option<Geometry> {
        let kind = match self.kind.as_str() {
            "nand" => FlashKind::Nand,
            "nor" => FlashKind::Nor,
            _ => return None,
        };
        Some(Geometry {
            kind,
            page_size: self.page_size,
            oob_size: self.oob_size,
            oob_free_offset: self.oob_free_offset,
            oob_free_len: self.oob_free_len,
            pages_per_block: self.pages_per_block,
            blocks: self.blocks,
            program_unit: self.program_unit,
            nop: self.nop,
            in_order: self.in_order,
            ecc_strength: self.ecc_strength,
            ecc_step: self.ecc_step,
            pairing: PagePairing::from_code(self.pairing)?,
        })
    }
}

#[derive(Serialize, Deserialize)]
struct UnstableRecord {
    page: u32,
    /// Weak-bit mask of the raw page, hex.
    weak: String,
}

#[derive(Serialize, Deserialize)]
struct InjectedRecord {
    page: u32,
    bits: Vec<u32>,
}

#[derive(Serialize, Deserialize)]
struct Sidecar {
    format: String,
    version: u32,
    preset: String,
    layout: String,
    image_bytes: u64,
    geometry: GeometryRecord,
    timing: Timing,
    endurance: u32,
    options: SimOptions,
    erase_counts: Vec<u32>,
    factory_bad_blocks: Vec<u32>,
    grown_bad_blocks: Vec<u32>,
    pending_program_failures: Vec<u32>,
    pending_erase_failures: Vec<u32>,
    /// (page, program operations since its block's erase), for pages with a non-zero count.
    program_counts: Vec<(u32, u16)>,
    unstable_pages: Vec<UnstableRecord>,
    injected_bitflips: Vec<InjectedRecord>,
    rng_state: u64,
    program_erase_ops: u64,
    stats: Stats,
    /// Runs of blocks (first, count) left out of the image as holes: every page erased. Only
    /// devices larger than their preset's chip have them (`Preset::beyond_chip`); absent in
    /// sidecars written before they existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    erased_blocks: Vec<(u32, u32)>,
}

fn layout_name(kind: FlashKind) -> &'static str {
    match kind {
        FlashKind::Nand => "nand-page-oob-interleaved",
        FlashKind::Nor => "nor-raw",
    }
}

/// Bytes one page occupies in an image.
fn image_page_bytes(g: &Geometry) -> u64 {
    g.page_size as u64 + g.oob_size as u64
}

fn image_bytes(g: &Geometry) -> u64 {
    image_page_bytes(g) * g.total_pages() as u64
}

/// The image's blocks `0..blocks` as runs `(first, count, hole)`, in order: the `holes`
/// (ascending, disjoint, inside the device; see `Sidecar::erased_blocks`) and the runs of
/// written blocks between them.
fn block_runs(blocks: u32, holes: &[(u32, u32)]) -> Vec<(u32, u32, bool)> {
    let mut runs = Vec::with_capacity(2 * holes.len() + 1);
    let mut b = 0;
    for &(first, count) in holes {
        if first > b {
            runs.push((b, first - b, false));
        }
        runs.push((first, count, true));
        b = first + count;
    }
    if b < blocks {
        runs.push((b, blocks - b, false));
    }
    runs
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    };
    s.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Writes `path` atomically: into a temporary file in the same directory, synced, then renamed
/// over `path`.
fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), SimError> {
    let name = path
        .file_name()
        .ok_or_else(|| SimError::image(path, "not a file path"))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let n = SAVES.fetch_add(1, Ordering::Relaxed);
    tmp_name.push(format!(".tmp{}-{n}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(SimError::io(path, e));
    }
    Ok(())
}

fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Best effort: not every platform can open or sync a directory.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl SimFlash {
    /// Creates a fresh device (as [`SimFlash::with_options`]) and saves it to `path` at once.
    pub fn create(
        path: impl AsRef<Path>,
        preset: Preset,
        options: SimOptions,
    ) -> Result<SimFlash, SimError> {
        let sim = SimFlash::with_options(preset, options)?;
        sim.save(path)?;
        Ok(sim)
    }

    /// Saves the device: the image at `path` and the sidecar at `<path>.sim`, each written to a
    /// temporary file and renamed into place (the image first). A crash while saving leaves the
    /// previous image and sidecar, or the new image with the previous sidecar, never a partial
    /// file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), SimError> {
        let path = path.as_ref();
        let g = self.geo;
        let holes = self.hole_blocks();
        let block_bytes = image_page_bytes(&g) * g.pages_per_block as u64;
        write_atomic(path, |w| {
            for (first, count, hole) in block_runs(g.blocks, &holes) {
                if hole {
                    w.seek(SeekFrom::Current((block_bytes * count as u64) as i64))?;
                    continue;
                }
                for p in g.first_page(first)..g.first_page(first + count) {
                    w.write_all(self.page_raw(p))?;
                }
            }
            w.flush()?;
            // A hole at the end is not written by the seek alone.
            w.get_ref().set_len(image_bytes(&g))
        })?;
        let sidecar = self.sidecar();
        let json = serde_json::to_vec_pretty(&sidecar)
            .map_err(|e| SimError::image(path, format!("cannot encode sidecar: {e}")))?;
        let side = sidecar_path(path);
        write_atomic(&side, |w| {
            w.write_all(&json)?;
            w.write_all(b"\n")
        })?;
        sync_dir(path);
        Ok(())
    }

    /// Runs of wholly erased blocks that [`SimFlash::save`] leaves out of the image as holes:
    /// none unless the device is larger than its preset's chip (an image the size of a chip
    /// stays one that `nandwrite --oob` can write as it is, erased pages included).
    fn hole_blocks(&self) -> Vec<(u32, u32)> {
        let g = self.geo;
        if !self.preset.beyond_chip() {
            return Vec::new();
        }
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for b in 0..g.blocks {
            let first = g.first_page(b) as usize;
            let erased = self.pages[first..first + g.pages_per_block as usize]
                .iter()
                .all(Option::is_none);
            if !erased {
                continue;
            }
            match runs.last_mut() {
                Some((start, count)) if *start + *count == b => *count += 1,
                _ => runs.push((b, 1)),
            }
        }
        runs
    }

    fn sidecar(&self) -> Sidecar {
        let g = self.geo;
        Sidecar {
            format: SIDECAR_FORMAT.to_string(),
            version: SIDECAR_VERSION,
            preset: self.preset.name.to_string(),
            layout: layout_name(g.kind).to_string(),
            image_bytes: image_bytes(&g),
            geometry: GeometryRecord::from_geometry(&g),
            timing: self.preset.timing,
            endurance: self.preset.endurance,
            options: self.options,
            erase_counts: self.erase_counts.clone(),
            factory_bad_blocks: self.factory_bad.iter().copied().collect(),
            grown_bad_blocks: self.failing.iter().copied().collect(),
            pending_program_failures: self.fail_next_program.iter().copied().collect(),
            pending_erase_failures: self.fail_next_erase.iter().copied().collect(),
            program_counts: self
                .prog_count
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(p, &c)| (p as u32, c))
                .collect(),
            unstable_pages: self
                .unstable
                .iter()
                .map(|(&page, mask)| UnstableRecord {
                    page,
                    weak: hex(mask),
                })
                .collect(),
            injected_bitflips: self
                .injected
                .iter()
                .map(|(&page, bits)| InjectedRecord {
                    page,
                    bits: bits.clone(),
                })
                .collect(),
            rng_state: self.rng.state(),
            program_erase_ops: self.ops,
            stats: self.stats,
            erased_blocks: self.hole_blocks(),
        }
    }

    /// Opens an image saved by [`SimFlash::save`] (image plus sidecar): the same device, with
    /// its contents, erase counters, bad blocks, unstable pages and options.
    pub fn open(path: impl AsRef<Path>) -> Result<SimFlash, SimError> {
        let path = path.as_ref();
        let side = sidecar_path(path);
        let text = fs::read(&side).map_err(|e| SimError::io(&side, e))?;
        let s: Sidecar = serde_json::from_slice(&text)
            .map_err(|e| SimError::image(&side, format!("not a simulator sidecar: {e}")))?;
        let bad = |why: String| SimError::image(&side, why);
        if s.format != SIDECAR_FORMAT {
            return Err(bad(format!(
                "format is {:?}, not {SIDECAR_FORMAT}",
                s.format
            )));
        }
        if s.version != SIDECAR_VERSION {
            return Err(bad(format!(
                "sidecar version {} is not supported (this build reads {SIDECAR_VERSION})",
                s.version
            )));
        }
        let base = preset::preset(&s.preset)
            .ok_or_else(|| bad(format!("unknown preset {:?}", s.preset)))?;
        let geometry = s
            .geometry
            .to_geometry()
            .ok_or_else(|| bad(format!("unknown flash kind {:?}", s.geometry.kind)))?;
        crate::sim::check_geometry(&geometry).map_err(|why| bad(format!("bad geometry: {why}")))?;
        if s.layout != layout_name(geometry.kind) || s.image_bytes != image_bytes(&geometry) {
            return Err(bad(
                "layout or image size does not match the geometry".into()
            ));
        }
        let preset = Preset {
            geometry,
            timing: s.timing,
            endurance: s.endurance,
            ..base
        };
        // Check the image before allocating anything for the device it claims to be.
        let len = fs::metadata(path).map_err(|e| SimError::io(path, e))?.len();
        if len != s.image_bytes {
            return Err(SimError::image(
                path,
                format!(
                    "image is {len} B but its sidecar says {} B (interrupted copy or save?)",
                    s.image_bytes
                ),
            ));
        }
        let mut sim = SimFlash::blank(preset, s.options)?;
        let g = sim.geo;
        let blocks = g.blocks;
        let pages = g.total_pages();
        let raw = image_page_bytes(&g) as usize;

        if s.erase_counts.len() != blocks as usize {
            return Err(bad(
                "erase counter list does not match the block count".into()
            ));
        }
        let block_set = |v: &[u32], what: &str| -> Result<BTreeSet<u32>, SimError> {
            if v.iter().any(|&b| b >= blocks) {
                return Err(bad(format!("{what} names a block beyond the device")));
            }
            Ok(v.iter().copied().collect())
        };
        sim.erase_counts = s.erase_counts;
        sim.factory_bad = block_set(&s.factory_bad_blocks, "factory bad block list")?;
        sim.failing = block_set(&s.grown_bad_blocks, "grown bad block list")?;
        sim.fail_next_program = block_set(&s.pending_program_failures, "pending failures")?;
        sim.fail_next_erase = block_set(&s.pending_erase_failures, "pending failures")?;
        for (page, count) in s.program_counts {
            if page >= pages {
                return Err(bad("program counts name a page beyond the device".into()));
            }
            sim.prog_count[page as usize] = count;
        }
        let mut unstable = BTreeMap::new();
        for u in s.unstable_pages {
            let mask = unhex(&u.weak).filter(|m| m.len() == raw);
            match mask {
                Some(m) if u.page < pages => {
                    unstable.insert(u.page, m.into_boxed_slice());
                }
                _ => return Err(bad(format!("bad unstable page record for page {}", u.page))),
            }
        }
        sim.unstable = unstable;
        let mut injected = BTreeMap::new();
        for r in s.injected_bitflips {
            if r.page >= pages || r.bits.iter().any(|&b| b as usize >= raw * 8) {
                return Err(bad(format!("bad bit-flip record for page {}", r.page)));
            }
            injected.insert(r.page, r.bits);
        }
        sim.injected = injected;
        sim.rng = Rng::new(s.rng_state);
        sim.ops = s.program_erase_ops;
        sim.stats = s.stats;
        for b in 0..blocks {
            sim.recompute_highest_of(b);
        }
        let mut end = 0u64;
        for &(first, count) in &s.erased_blocks {
            let after = first as u64 + count as u64;
            if (first as u64) < end || count == 0 || after > blocks as u64 {
                return Err(bad(
                    "erased block runs overlap, are out of order or pass the device's end".into(),
                ));
            }
            end = after;
        }
        sim.load_pages(path, &s.erased_blocks)?;
        Ok(sim)
    }

    /// Opens an image that has no sidecar (e.g. a `nanddump --oob` of a real device) as a
    /// device of `preset`'s kind and page geometry. The image size sets the block count; factory
    /// bad blocks are found from the bad-block markers; erase counters start at 0 and the
    /// options are the defaults.
    pub fn open_raw(path: impl AsRef<Path>, preset: Preset) -> Result<SimFlash, SimError> {
        let path = path.as_ref();
        let len = fs::metadata(path).map_err(|e| SimError::io(path, e))?.len();
        let g = preset.geometry;
        let block_bytes = image_page_bytes(&g) * g.pages_per_block as u64;
        if len == 0 || block_bytes == 0 || len % block_bytes != 0 {
            return Err(SimError::image(
                path,
                format!(
                    "size {len} B is not a whole number of {} blocks ({block_bytes} B each{})",
                    preset.name,
                    if g.kind == FlashKind::Nand {
                        ", data and OOB"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let blocks = u32::try_from(len / block_bytes)
            .map_err(|_| SimError::image(path, "image too large"))?;
        let preset = if blocks == g.blocks {
            preset
        } else {
            preset.with_any_blocks(blocks)?
        };
        let mut sim = SimFlash::blank(preset, SimOptions::default())?;
        sim.load_pages(path, &[])?;
        if sim.geo.kind == FlashKind::Nand {
            sim.factory_bad = (0..sim.geo.blocks).filter(|&b| sim.has_marker(b)).collect();
        }
        Ok(sim)
    }

    /// Reads the image's pages, skipping the `holes` (runs of erased blocks, checked ascending
    /// and inside the device); all-0xFF pages stay unallocated.
    fn load_pages(&mut self, path: &Path, holes: &[(u32, u32)]) -> Result<(), SimError> {
        let g = self.geo;
        let file = File::open(path).map_err(|e| SimError::io(path, e))?;
        let len = file.metadata().map_err(|e| SimError::io(path, e))?.len();
        if len != image_bytes(&g) {
            return Err(SimError::image(
                path,
                format!(
                    "image is {len} B but the device needs {} B",
                    image_bytes(&g)
                ),
            ));
        }
        let mut r = BufReader::with_capacity(1 << 20, file);
        let mut buf = vec![0u8; image_page_bytes(&g) as usize];
        let block_bytes = image_page_bytes(&g) * g.pages_per_block as u64;
        for (first, count, hole) in block_runs(g.blocks, holes) {
            if hole {
                r.seek_relative((block_bytes * count as u64) as i64)
                    .map_err(|e| SimError::io(path, e))?;
                continue;
            }
            for p in g.first_page(first)..g.first_page(first + count) {
                r.read_exact(&mut buf).map_err(|e| SimError::io(path, e))?;
                self.pages[p as usize] = if buf.iter().all(|&b| b == 0xFF) {
                    None
                } else {
                    Some(buf.clone().into_boxed_slice())
                };
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let v = vec![0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(hex(&v), "00017f80ff");
        assert_eq!(unhex(&hex(&v)), Some(v));
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn sidecar_path_appends() {
        assert_eq!(
            sidecar_path(Path::new("/tmp/a.img")),
            PathBuf::from("/tmp/a.img.sim")
        );
    }
}
