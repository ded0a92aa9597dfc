//! Choosing what to collect: cost-benefit victims, static wear leveling, scrubbing, and
//! whether collection can help an operation that needs room.
//!
//! It must never move or erase anything; it only picks.

use alloc::vec::Vec;

use crate::error::Result;
use crate::format::params::{LogKind, NandSupport, ANCHOR_AREA};
use crate::fs::Fs;
use crate::store::{BlockInfo, BlockState, Wear, ANCHOR_SPARES};
use dffs_flash::{Flash, FlashKind};

/// A victim's cost-benefit score, the exact fraction `num / den` (integer arithmetic: a
/// Cortex-M4F has no double-precision unit, and the software routines cost 2.6 KiB of code).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Score {
    num: u64,
    den: u64,
}

impl Score {
    const ZERO: Score = Score { num: 0, den: 1 };

    /// Whether `self` is more than `k` times `other`.
    fn exceeds(self, k: u64, other: Score) -> bool {
        self.num as u128 * other.den as u128 > k as u128 * other.num as u128 * self.den as u128
    }
}

/// NOR: checkpoints after which a block counts as cold, where the cost-benefit age saturates.
/// Synced writes take a checkpoint every few dozen writes, so uncapped ages spanned hundreds
/// and outweighed the dead space (DESIGN §9.1). Not on NAND, where the cap gained nothing
/// measured and a nearly full small device refused more synced overwrites with it.
const AGE_CAP: u64 = 32;

/// The best victim so far without and with the open copy block's room: score and block.
type Best = [Option<(Score, u32)>; 2];

/// Where the ages of a page's blocks come from when they are scored.
#[derive(Clone, Copy)]
enum Ages<'a> {
    /// No age (the urgent score).
    Unused,
    /// Each block's own, in block order.
    Each(&'a [Wear]),
    /// One age for all (a bound: the oldest the page may hold).
    All(u32),
}

/// Whether `a` (score, block) beats `b`: a higher score, or an equal one and a lower block
/// (the choice a pass in block order makes, keeping the first of equal scores).
fn beats(a: (Score, u32), b: (Score, u32)) -> bool {
    a.0.exceeds(1, b.0) || (!b.0.exceeds(1, a.0) && a.1 < b.1)
}

impl<F: Flash> Fs<F> {
    /// Whether static wear leveling should move a cold block now (only with free blocks to
    /// spare: leveling is never urgent): above the pool's leveling level
    /// ([`Fs::pool_levels`]). Moves started just above the reserve took the room collection
    /// and checkpoints needed on small devices (4 KiB NOR chained cuts: 12-14 of 120 chains
    /// ran out of space against 8 before leveling ran at all); a thirty-second of the device,
    /// where background collection starts, held leveling back on `dffs bench wear` (+15%
    /// above the mean against +9%).
    pub(crate) fn wl_due(&mut self) -> Result<bool> {
        let low = self.pool_levels().leveling;
        Ok(self.store.free_blocks() > low && self.wl_candidate()?.is_some())
    }

    /// The coldest used block, when static wear leveling should move it: the erase-count
    /// spread of the blocks in circulation (anchors and bad blocks aside) passes the
    /// threshold, and no free block is young enough for dynamic leveling to catch up alone.
    ///
    /// Asked after every operation. The figures it needs are kept up to date by the block
    /// table change by change (`WlFigures`): counting them again reads every block's erase
    /// count, which RAM may not hold (DESIGN §12.1).
    fn wl_candidate(&mut self) -> Result<Option<u32>> {
        // The block dynamic leveling hands out next: free blocks the allocator holds back (the
        // anchor area's spares) never catch up by use, and counting them stopped static
        // leveling for good once the rest of the pool had worn past them (`dffs bench wear`:
        // cold blocks at 5-9 erases, the others at 35).
        let young_free = self.store.next_free_ec()?.unwrap_or(u32::MAX);
        let mut f = self.store.wl_figures()?;
        // A block kept for an unreadable item is not moved: the coldest of the others.
        let coldest_kept = match f.coldest {
            Some((_, b)) => self.is_kept(b)?,
            None => false,
        };
        if coldest_kept {
            let kept = self.kept_blocks()?;
            f = self.store.count_wl_figures(|b| kept.contains(&b))?;
        }
        #[cfg(debug_assertions)]
        if self.store.all_wear_in_ram() {
            let kept = self.kept_blocks()?;
            let counted = self.store.count_wl_figures(|b| kept.contains(&b))?;
            debug_assert_eq!(f, counted, "static wear leveling's figures");
        }
        if f.n == 0 {
            return Ok(None);
        }
        let th = f.threshold();
        let (mn, cand) = match f.coldest {
            Some((ec, b)) => (ec, Some(b)),
            None => (u32::MAX, None),
        };
        Ok(
            if f.max.saturating_sub(mn) > th && young_free.saturating_sub(mn) > th / 2 {
                cand
            } else {
                None
            },
        )
    }

    /// Whether collecting could free `bytes` (there is dead space or pending blocks): the
    /// dead bytes of the closed blocks outside the journal, from the table's sums, less
    /// those of the blocks kept for unreadable items (kept unless RAM shows one has changed).
    pub(crate) fn gc_could_help(&self, bytes: u64) -> bool {
        let bs = self.store.p().geometry.block_size() as u64;
        let mut dead: u64 = LogKind::ALL
            .iter()
            .filter(|&&k| k != LogKind::Journal)
            .map(|&k| {
                let (n, live) = self.store.used_of(k);
                (n as u64 * bs).saturating_sub(live)
            })
            .sum();
        for (k, &(b, _)) in self.gc.kept.iter().enumerate() {
            if self.gc.kept[..k].iter().any(|x| x.0 == b) {
                continue;
            }
            if let Some(e) = self.store.block_in_ram(b) {
                if e.kind() != LogKind::Journal && self.is_kept_as(b, e) {
                    dead = dead.saturating_sub(bs - (e.live as u64).min(bs));
                }
            }
        }
        dead + self.store.pending_blocks() as u64 * bs >= bytes.min(bs)
    }

    /// Whether collection may copy live data now (copies must leave what a checkpoint needs).
    pub(crate) fn copy_room(&self) -> bool {
        self.store.free_blocks() > self.store.log_floor() + 1
    }

    /// Bytes of live metadata that collection may mark dirty now: what the next checkpoint
    /// can rewrite with the free blocks beyond those it needs already (and one of slack).
    /// Collecting a directory, map or inode block copies nothing but makes the checkpoint
    /// that releases it rewrite its live nodes; with no room for them that checkpoint took
    /// the last free block and no checkpoint could be taken again (4 KiB NOR sectors: every
    /// operation said ENOSPC, unlinks included, with blocks waiting to be released).
    pub(crate) fn rewrite_room(&self) -> u64 {
        let p = self.store.p();
        let free = self.store.free_blocks();
        let need = self.cp_need_two() + 1;
        let usable = (p.geometry.block_size() - p.geometry.page_size) as u64;
        free.saturating_sub(need) as u64 * usable
    }

    /// Whether one more live metadata node may be marked dirty by collection: the next
    /// checkpoint, writing it and the map page above it, still leaves what the checkpoint
    /// after it needs ([`Fs::cp_need_two`]).
    pub(crate) fn rewrite_fits(&self) -> bool {
        self.store.free_blocks() >= self.cp_need_two() + 2
    }

    /// Whether collecting block `b` may copy its live data now: there are free blocks for
    /// copies ([`Fs::copy_room`]), or `b`'s live bytes fit twice over in the open block of the
    /// head its copies go to (data: the cold data head; metadata of a head that also takes
    /// index nodes: that head, together with what the next checkpoint writes there, since it
    /// rewrites what is not copied now), so no block is allocated. (Without it a small device
    /// whose free blocks are down to the floors says ENOSPC with most of its used blocks dead:
    /// their copies would fit where copies go. Metadata blocks were left out at first, and a
    /// 24-block SLC device with merged heads stopped with four metadata blocks 9% live.)
    pub(crate) fn copy_room_for(&self, e: BlockInfo) -> bool {
        if self.copy_room() {
            return true;
        }
        let page = self.store.p().geometry.page_size as u64;
        let need = 2 * e.live as u64 + page;
        if e.kind().is_data() {
            return need <= self.store.head_room(LogKind::DataCold) as u64;
        }
        self.copies_now(e.kind()) && self.fits_in_meta_heads(need)
    }

    /// Whether collecting a block of log `kind` writes copies at once: data is copied, and so
    /// are index nodes (with the path above them); directory, map and inode nodes are only
    /// marked dirty for the next checkpoint. A block of a head that also takes index nodes
    /// may hold some.
    pub(crate) fn copies_now(&self, kind: LogKind) -> bool {
        let p = &self.store.p();
        kind.is_data() || p.head_of(kind) == p.head_of(LogKind::Index)
    }

    /// Cost-benefit score of collecting block `i`, last written at checkpoint `age` (low 24
    /// bits; not used when `urgent`), now (higher is better), or `None` when it does not
    /// qualify: not a closed non-journal block, kept, completely live, more than 97% live
    /// (unless `urgent`), or a data block with live data while there is no room to copy (with
    /// `stretch`, room in the open copy block counts: [`Fs::copy_room_for`]). `rewrite`: bytes
    /// of live metadata the next checkpoint can rewrite beyond what it writes already
    /// ([`Fs::rewrite_room`]).
    fn victim_score(
        &self,
        (i, e): (u32, BlockInfo),
        urgent: bool,
        (room, rewrite): (bool, u64),
        stretch: bool,
        age: u32,
    ) -> Option<Score> {
        if e.state() != BlockState::Used
            || e.kind() == LogKind::Journal
            || self.is_kept_as(i, e)
            || (!room
                && self.copies_now(e.kind())
                && e.live > 0
                && !(stretch && self.copy_room_for(e)))
            || (!self.copies_now(e.kind()) && e.live as u64 > rewrite)
        {
            return None;
        }
        let p = &self.store.p();
        // With u = live / bs the utilization and c the cost of copying a live byte, the score
        // is (1 - u) * age / (1 + u * c), or (1 - u) / (1 + u * (c - 1)) when urgent; both are
        // kept as exact fractions, multiplied through by bs and by C = 160 (c = c160 / C).
        let bs = p.geometry.block_size() as u64;
        let live = e.live as u64;
        if (100 * live > 97 * bs && !urgent)
            || live >= bs
            || (self.gc.picky && e.kind().is_data() && 4 * live > 3 * bs)
        {
            return None;
        }
        let now = self.store.cp_number() as u32 & 0xFF_FFFF;
        let mut age = (now.wrapping_sub(age) & 0xFF_FFFF) as u64 + 1;
        if p.geometry.flash_kind() == FlashKind::Nor {
            age = age.min(AGE_CAP);
        }
        // Moving a live file inode rewrites the directory page that points to it as well: an
        // inode's bytes cost about a directory page each (at least 8 times their own size).
        // Moving a live index node rewrites the nodes above it: its bytes cost the tree's
        // depth.
        const C: u64 = 160;
        let c160 = match e.kind() {
            LogKind::Inode => (p.dir_page as u64).max(8 * C),
            LogKind::Index => p.index_depth() as u64 * C,
            _ => C,
        };
        let free = (bs - live) * C;
        Some(if urgent {
            Score {
                num: free,
                den: bs * C + live * (c160 - C),
            }
        } else {
            Score {
                num: free * age,
                den: bs * C + live * c160,
            }
        })
    }

    /// Cost-benefit choice among closed blocks with dead space. Without room for copies only
    /// blocks whose collection copies nothing now qualify (metadata, whose live nodes the next
    /// checkpoint rewrites, and data blocks with nothing live); only when none qualifies, data
    /// blocks whose copies fit in the open copy block ([`Fs::copy_room_for`]).
    pub(crate) fn best_victim(&mut self, urgent: bool) -> Result<Option<u32>> {
        Ok(self.best_victim_how(urgent)?.map(|(b, _)| b))
    }

    /// [`Fs::best_victim`], and whether the choice needed the open copy block's room. The
    /// score by age needs the blocks' ages, a block-table page at a time: pages RAM holds are
    /// scored first, then the page whose bound is best (its blocks scored with the oldest age
    /// the page may hold, [`Store::bt_page_oldest`]), then, in block order, every other page
    /// whose bound could still beat the best so far; only those are read from flash. The
    /// choice is the one a pass over every block makes: the best score, the lower block among
    /// equals. The urgent score reads nothing.
    ///
    /// [`Store::bt_page_oldest`]: crate::store::Store::bt_page_oldest
    fn best_victim_how(&mut self, urgent: bool) -> Result<Option<(u32, bool)>> {
        let room = self.copy_room();
        let rewrite = self.rewrite_room();
        let per = self.store.p().bt_entries();
        let pages = self.store.block_count().div_ceil(per);
        // The best block without and with the open copy block's room (the second only
        // matters when there is no room for copies).
        let mut best: Best = [None, None];
        // (Paged records: RAM holds the records of cached pages only, urgent or not.)
        let paged = self.store.records_paged();
        let needs_read = |fs: &Self, pg: u32| (!urgent || paged) && !fs.store.bt_page_in_ram(pg);
        for pg in 0..pages {
            if !needs_read(self, pg) {
                // (Nothing is read: the page is cached, or its wear is RAM's alone.)
                let read = match urgent {
                    true => None,
                    false => self.store.uncached_bt_page_wear(pg)?,
                };
                let ages = match urgent {
                    true => Ages::Unused,
                    false => Ages::Each(self.store.page_wear_in(pg, &read)),
                };
                self.score_page(pg, &mut best, urgent, (room, rewrite), ages);
            }
        }
        // Pages on flash: the one of best bound first, so that the others are mostly ruled
        // out by their bounds.
        let mut first: Option<(Score, u32)> = None;
        for pg in 0..pages {
            if needs_read(self, pg) {
                if let Some(ub) = self.page_bound(pg, &best, (room, rewrite), urgent) {
                    if first.is_none_or(|(s, _)| ub.exceeds(1, s)) {
                        first = Some((ub, pg));
                    }
                }
            }
        }
        let first = first.map(|(_, pg)| pg);
        for (step, pg) in first.into_iter().chain(0..pages).enumerate() {
            if !needs_read(self, pg)
                || (step > 0 && Some(pg) == first)
                || (self
                    .page_bound(pg, &best, (room, rewrite), urgent)
                    .is_none()
                    && !self.store.bt_page_read_anyway(pg))
            {
                continue;
            }
            let read = self.store.uncached_bt_page_wear(pg)?;
            let ages = match urgent {
                true => Ages::Unused,
                false => Ages::Each(self.store.page_wear_in(pg, &read)),
            };
            self.score_page(pg, &mut best, urgent, (room, rewrite), ages);
        }
        Ok(best[0]
            .map(|x| (x.1, false))
            .or_else(|| best[1].map(|x| (x.1, true))))
    }

    /// Scores the blocks of block-table page `pg` into `best` (one entry without and one
    /// with the open copy block's room), with their ages from `ages`. A block replaces the
    /// best with a higher score, or an equal one and a lower number.
    fn score_page(
        &self,
        pg: u32,
        best: &mut Best,
        urgent: bool,
        (room, rewrite): (bool, u64),
        ages: Ages<'_>,
    ) {
        let per = self.store.p().bt_entries();
        let blocks = pg * per..((pg + 1) * per).min(self.store.block_count());
        for b in blocks {
            let Some(e) = self.store.block_in_ram(b) else {
                continue;
            };
            let age = match ages {
                Ages::Unused => 0,
                Ages::Each(w) => w.get((b - pg * per) as usize).map_or(0, |w| w.age),
                Ages::All(a) => a,
            };
            for (k, stretch) in [(0, false), (1, true)] {
                if stretch && room {
                    continue;
                }
                let score = self.victim_score((b, e), urgent, (room, rewrite), stretch, age);
                if let Some(score) = score {
                    if best[k].is_none_or(|(s, x)| beats((score, b), (s, x))) {
                        best[k] = Some((score, b));
                    }
                }
            }
        }
    }

    /// The best score a block of page `pg` could have, scored with the oldest age the page
    /// may hold, if it could beat `best` (with the lowest block of the page, which wins a
    /// tie); `None` when no block of the page can change the choice.
    fn page_bound(&self, pg: u32, best: &Best, room: (bool, u64), urgent: bool) -> Option<Score> {
        // (Without a bound, the oldest age there is: a full turn of the ring before now.)
        let now = self.store.cp_number() as u32;
        let oldest = self
            .store
            .bt_page_oldest(pg)
            .unwrap_or(now.wrapping_add(1) & 0xFF_FFFF);
        let mut ub: Best = [None, None];
        if self.store.records_paged() && !self.store.bt_page_in_ram(pg) {
            // Paged records not in RAM: the page's least live count of a closed block, at the
            // cheapest copy cost and the oldest age, bounds every block's score.
            let lo = self.store.bt_page_used_lo(pg);
            let bs = self.store.p().geometry.block_size() as u64;
            if lo as u64 >= bs {
                return None;
            }
            let free = (bs - lo as u64) * 160;
            let s = match urgent {
                true => Score {
                    num: free,
                    den: bs * 160,
                },
                false => {
                    let mut age = (now.wrapping_sub(oldest) & 0xFF_FFFF) as u64 + 1;
                    if self.store.p().geometry.flash_kind() == FlashKind::Nor {
                        age = age.min(AGE_CAP);
                    }
                    Score {
                        num: free * age,
                        den: bs * 160 + lo as u64 * 160,
                    }
                }
            };
            ub = [Some((s, 0)), Some((s, 0))];
        } else {
            self.score_page(pg, &mut ub, urgent, room, Ages::All(oldest));
        }
        let first = pg * self.store.p().bt_entries();
        let mut out: Option<Score> = None;
        for (u, b) in ub.into_iter().zip(best) {
            if let Some((u, _)) = u {
                if b.is_none_or(|b| beats((u, first), b)) && out.is_none_or(|s| u.exceeds(1, s)) {
                    out = Some(u);
                }
            }
        }
        out
    }

    /// When space is needed now: drops a victim chosen earlier (in the background, by age)
    /// if another block gives back space far more cheaply. What was already moved stays moved.
    pub(crate) fn reconsider_victim(&mut self) -> Result<()> {
        let Some(v) = self.gc.victim else {
            return Ok(());
        };
        if self.gc.unreadable || self.gc.unknown {
            return Ok(());
        }
        // Urgent scores: no age.
        let room = (self.copy_room(), self.rewrite_room());
        let ve = self.store.block(v)?;
        let cur = self
            .victim_score((v, ve), true, room, true, 0)
            .unwrap_or(Score::ZERO);
        if let Some(b) = self.best_victim(true)? {
            let be = self.store.block(b)?;
            let best = self
                .victim_score((b, be), true, room, true, 0)
                .unwrap_or(Score::ZERO);
            if b != v && best.exceeds(2, cur) {
                self.gc.victim = None;
            }
        }
        Ok(())
    }

    /// The blocks [`Fs::is_kept`] says are kept.
    fn kept_blocks(&mut self) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        for k in 0..self.gc.kept.len() {
            let b = self.gc.kept[k].0;
            if self.is_kept(b)? {
                out.push(b);
            }
        }
        Ok(out)
    }

    /// Whether `b` was kept for an unreadable item and nothing in it has died since.
    fn is_kept(&mut self, b: u32) -> Result<bool> {
        if b >= self.store.block_count() || !self.gc.kept.iter().any(|k| k.0 == b) {
            return Ok(false);
        }
        let e = self.store.block(b)?;
        Ok(self.is_kept_as(b, e))
    }

    /// [`Fs::is_kept`] for block `b` of record `e`.
    fn is_kept_as(&self, b: u32, e: BlockInfo) -> bool {
        self.gc
            .kept
            .iter()
            .any(|&(k, live)| k == b && e.state() == BlockState::Used && e.live >= live)
    }

    /// A used block of the anchor area to move out, when the area holds fewer than
    /// [`ANCHOR_SPARES`] free blocks that could replace a failing anchor (blocks not swapped
    /// to another physical block): the one with the least live data, if its copies have room
    /// now outside the area. Without a spare, an anchor whose erase or program fails cannot
    /// be replaced, and no checkpoint can be written (ENOSPC) until a collected block is
    /// released, which takes a checkpoint: so the spares are made before they are all gone.
    pub(crate) fn anchor_spare_victim(&self) -> Option<u32> {
        let area = ANCHOR_AREA.min(self.store.block_count());
        let (mut spares, mut area_free) = (0, 0);
        let mut best: Option<(u32, u32)> = None;
        for b in 0..area {
            if self.store.phys(b) != b {
                continue;
            }
            let e = self.store.area_block(b);
            match e.state() {
                // (A collected block is a spare from the next checkpoint on.)
                BlockState::Free | BlockState::Erased => {
                    spares += 1;
                    area_free += 1;
                }
                BlockState::PendingErase => spares += 1,
                BlockState::Used
                    if e.kind() != LogKind::Journal
                        && !self.is_kept_as(b, e)
                        && best.is_none_or(|(_, live)| e.live < live) =>
                {
                    best = Some((b, e.live));
                }
                _ => {}
            }
        }
        if spares >= ANCHOR_SPARES {
            return None;
        }
        // Live data moves out only when a block outside the area can take it: copied into
        // the area's own free blocks it would empty one block by filling another, again and
        // again on a nearly full device.
        let (b, live) = best?;
        if live == 0 {
            return Some(b);
        }
        // (Free blocks outside the area or swapped: all free blocks less the area's own.)
        let outside_free = self.store.free_blocks() > area_free;
        (outside_free && self.copy_room()).then_some(b)
    }

    /// Makes `b` the victim.
    fn start_victim(&mut self, b: u32) {
        self.gc.kept.retain(|&(k, _)| k != b);
        self.gc.victim = Some(b);
        self.gc.index_batch.clear();
        self.gc.pos = 0;
        self.gc.carry = 0;
        self.gc.unreadable = false;
        self.gc.unknown = false;
        self.gc.stretch = false;
    }

    /// Chooses the next victim (scrub, a spare for the anchors, wear leveling, then
    /// cost-benefit). False if none.
    pub(crate) fn pick_victim(&mut self, urgent: bool) -> Result<bool> {
        while let Some(b) = self.store.peek_scrub_candidate() {
            // Scrubbing copies the block's live data: without room for the copies it waits on
            // the list, and collection that gives space back goes first (it used to take both
            // of a collection's tries, so a device full of dead metadata said ENOSPC).
            if b < self.store.block_count() {
                let e = self.store.block(b)?;
                if e.live > 0 && self.copies_now(e.kind()) && !self.copy_room_for(e) {
                    break;
                }
            }
            self.store.take_scrub_candidate();
            if b < self.store.block_count() {
                let e = self.store.block(b)?;
                // A block still open as a log head is closed first (as if it had filled up), so
                // that it can be moved and erased like any other.
                if e.state() == BlockState::Head && e.kind() != LogKind::Journal {
                    if let Some(h) = self.store.heads().holding(b) {
                        if self.store.close_head(h).is_err() {
                            continue;
                        }
                    }
                }
                let e = self.store.block(b)?;
                if e.state() == BlockState::Used
                    && e.kind() != LogKind::Journal
                    && !self.is_kept_as(b, e)
                {
                    self.start_victim(b);
                    // Admitted above on `copy_room_for`: without free blocks for copies it is
                    // collected as a stretch (copies into the open copy block), or it would be
                    // dropped at its first live item, and two such scrub candidates took both
                    // of a collection's tries while blocks with nothing live waited (ENOSPC at
                    // 42% on a small device with a quarter of its blocks bad).
                    self.gc.stretch = !self.copy_room();
                    return Ok(true);
                }
            }
        }
        if let Some(b) = self.anchor_spare_victim() {
            self.start_victim(b);
            return Ok(true);
        }
        if !urgent && self.wl_due()? {
            if let Some(b) = self.wl_candidate()? {
                self.start_victim(b);
                self.gc.wl_moves += 1;
                return Ok(true);
            }
        }
        Ok(match self.best_victim_how(urgent)? {
            Some((b, stretch)) => {
                self.start_victim(b);
                self.gc.stretch = stretch;
                true
            }
            None => false,
        })
    }
}
