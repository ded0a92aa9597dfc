//! The library configuration a mount runs with.
//!
//! Owns how `--cache SIZE` (a RAM budget in bytes) becomes cache sizes, and the settings every
//! FUSE mount needs whatever the budget (enough file handles for the kernel's open files). It
//! must never promise a budget the library's own estimate says it exceeds.

use dffs::{Config, Params};

/// File handles a mount allows open at once (each costs the library about 160 B).
pub const MAX_OPEN: usize = 256;

/// How a session mounts.
#[derive(Clone, Debug, Default)]
pub struct MountOptions {
    /// Mount read-only: the image is never written.
    pub read_only: bool,
    /// Every write is synchronous (as `mount -o sync`).
    pub sync: bool,
    /// RAM budget for the library's caches, in bytes (`None`: the embedded default).
    pub cache_bytes: Option<u64>,
}

/// Caches in between the smallest configuration (`k` = 0) and the fast one (`k` = 64), and
/// beyond it in the same proportions.
fn scaled(k: usize) -> Config {
    let (s, f) = (Config::smallest(), Config::fast());
    let at = |lo: usize, hi: usize| lo + (hi.saturating_sub(lo) * k).div_ceil(64);
    Config {
        dir_cache: at(s.dir_cache, f.dir_cache),
        map_cache: at(s.map_cache, f.map_cache),
        index_cache: at(s.index_cache, f.index_cache),
        inode_cache: at(s.inode_cache, f.inode_cache),
        data_cache: at(s.data_cache, f.data_cache),
        max_dirty: at(s.max_dirty, f.max_dirty),
        dirty_shares: at(s.dirty_shares, f.dirty_shares),
        max_open: MAX_OPEN,
        journal_limit: if k >= 64 {
            f.journal_limit
        } else {
            Config::default().journal_limit
        },
        gc_step: Config::default().gc_step,
        read_only: false,
        sync: false,
        overlay_extents: at(s.overlay_extents, f.overlay_extents),
        table_cache: at(s.table_cache, f.table_cache),
        records_ram: at(s.records_ram, f.records_ram),
        compress_group: at(s.compress_group as usize, f.compress_group as usize) as u32,
    }
}

/// The largest configuration whose RAM estimate on a file system with `p` fits `budget`
/// bytes; `Err(need)` with the least it could run with when even the smallest does not fit.
pub fn config_for_budget(p: &Params, budget: u64) -> Result<Config, usize> {
    let fits = |k: usize| scaled(k).ram_estimate(p) as u64 <= budget;
    if !fits(0) {
        return Err(scaled(0).ram_estimate(p));
    }
    let (mut lo, mut hi) = (0usize, 1usize);
    while hi < (1 << 20) && fits(hi) {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(scaled(lo))
}

/// The configuration of a mount: the budget's caches (or the embedded default), with the
/// session's read-only and sync settings.
pub fn mount_config(p: Option<&Params>, opts: &MountOptions) -> Result<Config, String> {
    let base = match (opts.cache_bytes, p) {
        (Some(b), Some(p)) => config_for_budget(p, b).map_err(|need| {
            format!("--cache {b} B is too small: this file system needs at least {need} B")
        })?,
        _ => Config {
            max_open: MAX_OPEN,
            ..Config::default()
        },
    };
    Ok(Config {
        read_only: opts.read_only,
        sync: opts.sync,
        ..base
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dffs::FormatOptions;

    fn params() -> Params {
        let g = dffs_sim::preset::preset("nand-slc-128m").unwrap().geometry;
        Params::for_geometry(g, &FormatOptions::default()).unwrap()
    }

    #[test]
    fn budgets_buy_caches_and_are_kept() {
        let p = params();
        let small = config_for_budget(&p, 256 << 10).unwrap();
        let big = config_for_budget(&p, 16 << 20).unwrap();
        assert!(small.ram_estimate(&p) <= 256 << 10);
        assert!(big.ram_estimate(&p) <= 16 << 20);
        assert!(big.data_cache > small.data_cache);
        assert!(big.dir_cache > small.dir_cache);
        let need = config_for_budget(&p, 1000).unwrap_err();
        assert!(need > 1000);
        assert!(config_for_budget(&p, need as u64).is_ok());
    }
}
