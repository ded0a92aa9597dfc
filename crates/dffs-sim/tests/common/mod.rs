//! Helpers shared by the simulator's integration tests: temporary directories and device
//! constructors. Must never hide a failure (every helper panics loudly on a setup error).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use dffs_sim::{preset, Preset, SimFlash, SimOptions};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("dffs-sim-test-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn p(name: &str) -> Preset {
    preset::preset(name).expect("preset exists")
}

pub fn slc() -> SimFlash {
    SimFlash::new(p("nand-slc-128m")).unwrap()
}

pub fn slc_seeded(seed: u64) -> SimFlash {
    SimFlash::with_options(p("nand-slc-128m"), SimOptions::seeded(seed)).unwrap()
}

pub fn mlc() -> SimFlash {
    SimFlash::new(p("nand-mlc-1g")).unwrap()
}

pub fn nor() -> SimFlash {
    SimFlash::new(p("nor-qspi-16m")).unwrap()
}

/// Reads a whole NAND page (all data, all free OOB bytes).
pub fn read_page(
    sim: &mut SimFlash,
    page: u32,
) -> (
    Result<dffs_flash::EccStatus, dffs_flash::FlashError>,
    Vec<u8>,
    Vec<u8>,
) {
    use dffs_flash::Flash;
    let g = sim.geometry();
    let mut data = vec![0u8; g.page_size as usize];
    let mut oob = vec![0u8; g.oob_free_len as usize];
    let r = sim.read(page, 0, &mut data, &mut oob);
    (r, data, oob)
}

/// A deterministic test pattern of `len` bytes.
pub fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt) ^ 0x5A)
        .collect()
}
