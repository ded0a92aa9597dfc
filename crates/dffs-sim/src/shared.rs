//! A cloneable handle to one simulated device, so a test or benchmark can inspect and steer the
//! device (counters, erase counts, power cuts, faults) while a file system owns another handle.
//!
//! Owns only the sharing. It must never add behaviour of its own: every operation is the inner
//! [`SimFlash`]'s, under its lock.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use dffs_flash::{EccStatus, Flash, FlashError, Geometry};

use crate::sim::SimFlash;
use crate::stats::Stats;

/// A shared simulated device: `Arc<Mutex<SimFlash>>` that is itself a [`Flash`].
#[derive(Clone, Debug)]
pub struct SharedSim {
    inner: Arc<Mutex<SimFlash>>,
    geometry: Geometry,
}

impl SharedSim {
    /// Shares `sim`.
    pub fn new(sim: SimFlash) -> Self {
        let geometry = sim.geometry();
        SharedSim {
            inner: Arc::new(Mutex::new(sim)),
            geometry,
        }
    }

    /// Locks the device for inspection or control. A panic in another holder does not make the
    /// device unusable (the lock is taken over).
    pub fn lock(&self) -> MutexGuard<'_, SimFlash> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the locked device.
    pub fn with<R>(&self, f: impl FnOnce(&mut SimFlash) -> R) -> R {
        f(&mut self.lock())
    }

    /// A snapshot of the device's counters.
    pub fn stats(&self) -> Stats {
        self.lock().stats()
    }

    /// The device's erase counters.
    pub fn erase_counts(&self) -> Vec<u32> {
        self.lock().erase_counts().to_vec()
    }

    /// Arms a power cut at the `n`-th program or erase from now (see
    /// [`SimFlash::cut_power_after`]).
    pub fn cut_power_after(&self, n: u64) {
        self.lock().cut_power_after(n)
    }

    /// Restores power after a cut.
    pub fn power_up(&self) {
        self.lock().power_up()
    }

    /// Gives the device back if this is the last handle; otherwise returns the handle.
    pub fn try_into_inner(self) -> Result<SimFlash, SharedSim> {
        let geometry = self.geometry;
        match Arc::try_unwrap(self.inner) {
            Ok(m) => Ok(m.into_inner().unwrap_or_else(PoisonError::into_inner)),
            Err(inner) => Err(SharedSim { inner, geometry }),
        }
    }
}

impl From<SimFlash> for SharedSim {
    fn from(sim: SimFlash) -> Self {
        SharedSim::new(sim)
    }
}

impl Flash for SharedSim {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        self.lock().read(page, offset, data, oob)
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        self.lock().program(page, offset, data, oob)
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        self.lock().erase(block)
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        self.lock().is_bad(block)
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        self.lock().mark_bad(block)
    }
}
