//! Bad blocks: retiring a block whose erase failed, and swapping out a block whose program
//! failed (its programmed part is copied to a spare, which takes over its logical number, so
//! every address already handed out stays valid), and the remap table of such swaps.
//!
//! Owns the remap table and the queue of swaps not yet recorded in the journal. It must never
//! write a journal record: the journal writer takes the new swaps ([`Store::take_new_remaps`])
//! and records them.

use alloc::vec;
use alloc::vec::Vec;

use super::heads::{RecentPage, RECENT_PAGES};
use super::medium::Medium;
use super::{BlockState, Priority, Store, Wear};
use crate::error::{Error, Result};
use crate::format::params::LogKind;
use crate::format::params::NandSupport;
use dffs_flash::{Flash, FlashError, FlashKind};

/// A bad block swapped out: logical block `logical` now lives on physical block `physical`
/// (and the logical block numbered `physical` is bad).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remap {
    /// The logical block whose data moved.
    pub logical: u32,
    /// The physical block now holding it.
    pub physical: u32,
}

impl<F: Flash> Store<F> {
    /// Marks a logical block bad, on flash where the device supports it, and in the table.
    pub fn retire(&mut self, b: u32) {
        let pb = self.phys(b);
        let _ = self.medium.flash_mut().mark_bad(pb);
        self.table.update(b, |e| {
            e.live = 0;
            e.set_state(BlockState::Bad);
        });
    }

    /// Erases a logical block, retiring it if the erase fails. Returns false if it went bad.
    pub(super) fn erase_block(&mut self, b: u32) -> Result<bool> {
        if self.read_only {
            return Err(Error::ReadOnly);
        }
        let pb = self.phys(b);
        let w = self.wear(b)?;
        let w = Wear {
            ec: w.ec.saturating_add(1),
            ..w
        };
        self.table.set_wear(b, w, true);
        match self.medium.erase(pb) {
            Ok(()) => Ok(true),
            Err(FlashError::PowerLoss) => Err(Error::PowerLoss),
            Err(_) => {
                self.retire(b);
                Ok(false)
            }
        }
    }

    /// Programs at a physical position on behalf of head `h`; if the block has gone bad, its
    /// content is moved to a spare block (same logical block number) and the program retried
    /// there.
    pub(super) fn program_with_recovery(
        &mut self,
        h: usize,
        ppos: u64,
        data: &[u8],
        oob: &[u8],
    ) -> Result<()> {
        let mut ppos = ppos;
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let last_page = ((ppos % bs) + data.len().max(1) as u64 - 1) / g.page_size as u64;
        let kind = LogKind::ALL
            .into_iter()
            .find(|&k| self.head_index(k) == h)
            .unwrap_or(LogKind::DataHot);
        self.medium.cause = self.write_cause(kind);
        let hd = &mut self.heads[h];
        hd.programmed = hd.programmed.max(last_page as u32 + 1);
        let logical = self.heads[h].block;
        if let Some(upto) = self.heads[h].failed_at() {
            // An earlier program failed when there was no spare: swap now, before anything
            // else goes into the failing block.
            self.swap_out_bad_block(h, logical, upto as u64)?;
            self.heads[h].fault_mut().failed_at = None;
            ppos = self.phys(logical) as u64 * bs + ppos % bs;
        }
        // Each failure retires a block, so the attempts are bounded by the device; in practice
        // the free pool runs out first (`ENOSPC` from the swap).
        for _attempt in 0..self.p.geometry.blocks {
            match self.medium.program(ppos, data, oob) {
                Ok(()) => {
                    self.remember_programmed(h, ppos % bs, data, oob);
                    return Ok(());
                }
                Err(FlashError::PowerLoss) => return Err(Error::PowerLoss),
                Err(FlashError::ProgramFailed) => {
                    let in_block = ppos % bs;
                    if let Err(e) = self.swap_out_bad_block(h, logical, in_block) {
                        // The failed bytes may be half programmed: never program them again.
                        // The operation fails; the next program retries the swap.
                        self.heads[h].fault_mut().failed_at = Some(in_block as u32);
                        return Err(e);
                    }
                    let np = self.phys(logical);
                    ppos = np as u64 * bs + in_block;
                }
                Err(_) => return Err(Error::Io),
            }
        }
        Err(Error::Io)
    }

    /// Paired-page NAND: records what was just programmed at `in_block` of head `h`'s block
    /// (see [`HeadFaultState::recent`](super::heads::HeadFaultState)).
    fn remember_programmed(&mut self, h: usize, in_block: u64, data: &[u8], oob: &[u8]) {
        let g = self.p.geometry;
        if g.flash_kind() != FlashKind::Nand || g.page_pairing() == dffs_flash::PagePairing::None {
            return;
        }
        let ps = g.page_size as u64;
        let page = (in_block / ps) as u32;
        let off = (in_block % ps) as usize;
        let recent = &mut self.heads[h].fault_mut().recent;
        if recent.last().is_none_or(|r| r.page != page) {
            // A new page: the oldest one's buffers are reused once the ring is full.
            let r = if recent.len() >= RECENT_PAGES {
                let mut r = recent.remove(0);
                r.page = page;
                r.data.fill(0xFF);
                r.oob.fill(0xFF);
                r
            } else {
                RecentPage {
                    page,
                    data: vec![0xFF; g.page_size as usize],
                    oob: vec![0xFF; g.oob_free_len as usize],
                }
            };
            recent.push(r);
        }
        if let Some(r) = recent.last_mut() {
            let n = data.len().min(r.data.len().saturating_sub(off));
            r.data[off..off + n].copy_from_slice(&data[..n]);
            let m = oob.len().min(r.oob.len());
            r.oob[..m].copy_from_slice(&oob[..m]);
        }
    }

    /// Copies the programmed part (`[0, upto)`) of logical block `logical` (head `h`'s) to a
    /// spare block, swaps the two in the remap table, and retires the old physical block.
    fn swap_out_bad_block(&mut self, h: usize, logical: u32, upto: u64) -> Result<()> {
        let g = self.p.geometry;
        let old_phys = self.phys(logical);
        let recent = self.heads[h].recent().to_vec();
        // Spares that fail too are retired and the next one tried, as long as there are any.
        for _ in 0..self.p.geometry.blocks {
            let spare = self.alloc_block(LogKind::DataCold, Priority::Spare)?;
            let spare_phys = self.phys(spare);
            let ok = self.copy_block_prefix(old_phys, spare_phys, upto, &recent)?;
            if !ok {
                // The spare failed too: retire it and try another.
                self.retire(spare);
                continue;
            }
            let _ = self.medium.flash_mut().mark_bad(old_phys);
            if self.block(logical)?.kind() == LogKind::Journal {
                self.journal_swapped = true;
            }
            // Swap: logical `logical` → spare_phys; logical `spare` → old_phys (bad).
            let mut remaps: Vec<Remap> = self
                .remaps
                .iter()
                .copied()
                .filter(|r| {
                    r.logical != logical
                        && r.physical != logical
                        && r.logical != spare
                        && r.physical != spare
                })
                .collect();
            // Compose with existing mappings: whatever physical `logical` had is now bad.
            if spare_phys != logical {
                remaps.push(Remap {
                    logical,
                    physical: spare_phys,
                });
            }
            self.remaps = remaps;
            let r = Remap {
                logical,
                physical: spare_phys,
            };
            self.new_remaps.push(r);
            self.table.update(spare, |e| {
                e.live = 0;
                e.set_state(BlockState::Bad);
            });
            let _ = g;
            return Ok(());
        }
        Err(Error::Io)
    }

    /// Copies the first `upto` bytes of physical block `from` to physical block `to`: whole
    /// pages with their OOB before the page holding `upto`, then (NAND) the programmed prefix of
    /// that page with its tag, never the part whose program failed. Returns false if
    /// programming `to` failed.
    ///
    /// Pages in `recent` are copied from there, as they were programmed: a failed upper-page
    /// program may have damaged its lower page on flash.
    fn copy_block_prefix(
        &mut self,
        from: u32,
        to: u32,
        upto: u64,
        recent: &[RecentPage],
    ) -> Result<bool> {
        let g = self.p.geometry;
        let bs = g.block_size() as u64;
        let program = |m: &mut Medium<F>, pos: u64, d: &[u8], o: &[u8]| -> Result<bool> {
            match m.program(pos, d, o) {
                Ok(()) => Ok(true),
                Err(FlashError::PowerLoss) => Err(Error::PowerLoss),
                Err(_) => Ok(false),
            }
        };
        match g.flash_kind() {
            FlashKind::Nand => {
                let ps = g.page_size as u64;
                let full_pages = (upto / ps) as u32;
                let tail = (upto % ps) as usize;
                let mut data = vec![0u8; g.page_size as usize];
                let mut oob = vec![0u8; g.oob_free_len as usize];
                for i in 0..full_pages + (tail > 0) as u32 {
                    if let Some(r) = recent.iter().find(|r| r.page == i) {
                        data.copy_from_slice(&r.data);
                        oob.copy_from_slice(&r.oob);
                    } else {
                        self.medium.read_page(
                            from * g.pages_per_block + i,
                            0,
                            &mut data,
                            &mut oob,
                        )?;
                    }
                    let len = if i == full_pages { tail } else { data.len() };
                    if data[..len].iter().all(|&b| b == 0xFF) && oob.iter().all(|&b| b == 0xFF) {
                        continue;
                    }
                    let len = len.div_ceil(g.program_unit as usize) * g.program_unit as usize;
                    if !program(
                        &mut self.medium,
                        to as u64 * bs + i as u64 * ps,
                        &data[..len],
                        &oob,
                    )? {
                        return Ok(false);
                    }
                }
            }
            FlashKind::Nor => {
                let mut buf = vec![0u8; 256];
                let mut done = 0u64;
                while done < upto {
                    let n = (upto - done).min(256) as usize;
                    self.medium.read(from as u64 * bs + done, &mut buf[..n])?;
                    if !program(&mut self.medium, to as u64 * bs + done, &buf[..n], &[])? {
                        return Ok(false);
                    }
                    done += n as u64;
                }
            }
        }
        Ok(true)
    }
}
