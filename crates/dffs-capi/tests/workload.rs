//! The standard workload (`dffs_capi::workload`) passes on a 16 MiB NOR part (the
//! `nor-qspi-16m` geometry, with 64 KiB blocks and with 4 KiB sectors) in every RAM preset,
//! frees everything it allocated, and the presets order their RAM as their names promise.
//!
//! Owns only those checks. One test function, so no other test allocates on another thread
//! while the counting allocator measures.

use dffs_capi::workload::{nor_geometry, run, Figures};
use dffs_capi::{DFFS_RAM_DEFAULT, DFFS_RAM_FAST, DFFS_RAM_SMALLEST};

const MIB16: usize = 16 << 20;

fn measure(device: &mut [u8], pages_per_block: u32, preset: u32) -> Figures {
    let blocks = (MIB16 / (256 * pages_per_block as usize)) as u32;
    let f = run(device, nor_geometry(256, pages_per_block, blocks), preset).unwrap_or_else(|e| {
        panic!("workload, preset {preset}, {pages_per_block} pages/block: {e:?}")
    });
    println!("{pages_per_block:>3} pages/block, preset {preset}: {f:?}");
    f
}

#[test]
fn workload_runs_in_every_preset_without_leaking() {
    let mut device = vec![0xFFu8; MIB16];
    for ppb in [256, 16] {
        let s = measure(&mut device, ppb, DFFS_RAM_SMALLEST);
        let d = measure(&mut device, ppb, DFFS_RAM_DEFAULT);
        let f = measure(&mut device, ppb, DFFS_RAM_FAST);
        for x in [s, d, f] {
            assert_eq!(x.heap_after_unmount, 0, "{x:?}");
            assert!(
                x.heap_after_mount > 0 && x.heap_peak >= x.heap_after_mount,
                "{x:?}"
            );
            assert!(x.ram_bytes_after_mount > 0, "{x:?}");
        }
        assert!(s.estimate < d.estimate && d.estimate < f.estimate);
        assert!(s.heap_peak <= d.heap_peak && d.heap_peak <= f.heap_peak);
    }
}
