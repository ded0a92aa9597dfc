//! The standard workload (`dffs_capi::workload`) passes on a 16 MiB NOR part (the
//! `nor-qspi-16m` geometry, with 64 KiB blocks and with 4 KiB sectors) in every RAM preset,
//! and on a small SLC NAND (refused with `DFFS_ERR_NOTSUP` by a build without the `nand`
//! feature), frees everything it allocated, stays within the library's own RAM
//! estimate, agrees with its own count of what it holds (after mount and at the peak), and the
//! presets order their RAM as their names promise; the smallest preset on 64 KiB blocks peaks
//! under the brief's 16 KiB, and on 4 KiB sectors (4,096 of them) holds at most 16 KiB after
//! mount and 24 KiB at its peak (issue 16: the block table keeps erase counts and ages of one
//! page of its records in RAM, the rest on flash).
//!
//! Owns only those checks. One test function, so no other test allocates on another thread
//! while the counting allocator measures.

use dffs_capi::workload::{device_bytes, nor_geometry, run, Figures};
use dffs_capi::{
    dffs_geometry, DFFS_FLASH_NAND, DFFS_RAM_DEFAULT, DFFS_RAM_FAST, DFFS_RAM_SMALLEST,
};

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
            // The library's own count agrees with what it allocated (within 5%), and the
            // bound it plans for is never below what the workload needed.
            let (held, counted) = (x.heap_after_mount, x.ram_bytes_after_mount);
            assert!(held.abs_diff(counted) <= held / 20, "{x:?}");
            assert!(x.estimate >= x.heap_peak, "{x:?}");
            // At its highest the library's count is what the heap peaked at, less the buffers
            // a call holds only while it runs (a node being read or encoded): never more, and
            // not less by over a fifth.
            assert!(x.ram_bytes_peak <= x.heap_peak, "{x:?}");
            assert!(x.heap_peak - x.ram_bytes_peak <= x.heap_peak / 5, "{x:?}");
        }
        assert!(s.estimate < d.estimate && d.estimate < f.estimate);
        assert!(s.heap_peak <= d.heap_peak && d.heap_peak <= f.heap_peak);
        if ppb == 256 {
            // The brief: under 16 KiB of RAM on this chip in the smallest configuration (here
            // on a 64-bit host, whose pointers make it about 10% more than on the MCU).
            assert!(s.heap_peak <= 16 * 1024, "{s:?}");
        } else {
            // 4,096 sectors: 12 bytes of record each would be 48 KiB alone.
            assert!(s.heap_after_mount <= 16 * 1024, "{s:?}");
            assert!(s.heap_peak <= 24 * 1024, "{s:?}");
        }
    }
    // SLC NAND as `nand-slc-128m` has it (2048 + 64 B pages, 38 free OOB bytes, NOP 4), 16 MiB.
    let nand = dffs_geometry {
        kind: DFFS_FLASH_NAND,
        page_size: 2048,
        oob_size: 64,
        oob_free_offset: 2,
        oob_free_len: 38,
        pages_per_block: 64,
        block_count: 128,
        program_unit: 512,
        nop: 4,
        in_order: 0,
        ecc_strength: 1,
        ecc_step: 512,
        pairing: 0,
    };
    let mut device = vec![0xFFu8; device_bytes(&nand)];
    if !cfg!(feature = "nand") {
        // A library built without NAND support refuses it at the format.
        let e = run(&mut device, nand, DFFS_RAM_SMALLEST).unwrap_err();
        assert_eq!(e.code, dffs_capi::DFFS_ERR_NOTSUP as i64, "{e:?}");
        return;
    }
    let f = run(&mut device, nand, DFFS_RAM_SMALLEST).expect("workload on NAND");
    println!("NAND smallest: {f:?}");
    assert_eq!(f.heap_after_unmount, 0, "{f:?}");
    assert!(f.estimate >= f.heap_peak, "{f:?}");
    assert!(f.ram_bytes_peak <= f.heap_peak, "{f:?}");
    assert!(f.heap_peak - f.ram_bytes_peak <= f.heap_peak / 5, "{f:?}");
    assert!(run(&mut device[..1000], nand, DFFS_RAM_SMALLEST).is_err());
}
