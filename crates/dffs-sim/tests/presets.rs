//! Preset numbers and raw limits, checked against values computed by hand from the design
//! brief's device table (never from the simulator's own code).

mod common;
use common::*;

use dffs_flash::{Flash, FlashKind};
use dffs_sim::{preset, PresetError};

/// Rounds to 3 significant digits.
fn sig3(x: f64) -> f64 {
    let d = x.abs().log10().floor() as i32 + 1;
    let f = 10f64.powi(3 - d);
    (x * f).round() / f
}

fn close(got: f64, want: f64) {
    assert!(
        ((got - want) / want).abs() < 1e-4,
        "got {got}, want {want} (relative error too large)"
    );
}

/// (preset, erase size, hand-computed raw write B/s, raw read B/s, rounded MB/s write, read)
type HandValue = (&'static str, Option<u32>, f64, f64, f64, f64);

fn hand_values() -> Vec<HandValue> {
    let mib = 1048576.0;
    vec![
        (
            "nand-slc-128m",
            None,
            131072.0 / (64.0 * 252.8e-6 + 1.5e-3),
            2048.0 / 77.8e-6,
            7.41,
            26.3,
        ),
        (
            "nand-mlc-1g",
            None,
            524288.0 / (128.0 * 905.8e-6 + 1.5e-3),
            4096.0 / 165.6e-6,
            4.46,
            24.7,
        ),
        (
            "onenand-256m",
            None,
            131072.0 / (64.0 * 2048.0 / 9.3e6 + 131072.0 / 64e6),
            108e6,
            8.12,
            108.0,
        ),
        (
            "arm926-nand-128m",
            None,
            131072.0 / (64.0 * 2048.0 / (0.7 * mib) + 1.5e-3),
            1.1 * mib,
            0.728,
            1.15,
        ),
        (
            "nor-qspi-16m",
            None,
            65536.0 / (256.0 * (20e-6 + 256.0 * 1.5e-6 + 100e-9 + 256.0 * 25e-9) + 150e-3),
            65536.0 / (100e-9 + 65536.0 * 25e-9),
            0.257,
            40.0,
        ),
        (
            "nor-qspi-16m",
            Some(32768),
            32768.0 / (128.0 * (20e-6 + 256.0 * 1.5e-6 + 100e-9 + 256.0 * 25e-9) + 120e-3),
            32768.0 / (100e-9 + 32768.0 * 25e-9),
            0.190,
            40.0,
        ),
        (
            "nor-qspi-16m",
            Some(4096),
            4096.0 / (16.0 * (20e-6 + 256.0 * 1.5e-6 + 100e-9 + 256.0 * 25e-9) + 45e-3),
            4096.0 / (100e-9 + 4096.0 * 25e-9),
            0.0794,
            40.0,
        ),
    ]
}

#[test]
fn raw_limits_match_hand_computation() {
    for (name, erase, write, read, write_mb, read_mb) in hand_values() {
        let mut pr = p(name);
        if let Some(e) = erase {
            pr = pr.with_erase_size(e).unwrap();
        }
        close(pr.raw_write_bytes_per_s(), write);
        close(pr.raw_read_bytes_per_s(), read);
        assert_eq!(
            sig3(pr.raw_write_bytes_per_s() / 1e6),
            write_mb,
            "{name} write"
        );
        assert_eq!(
            sig3(pr.raw_read_bytes_per_s() / 1e6),
            read_mb,
            "{name} read"
        );
    }
}

#[test]
fn full_page_times_are_exact() {
    let slc = p("nand-slc-128m");
    assert_eq!(slc.read_page_ps(), 77_800_000);
    assert_eq!(slc.program_page_ps(), 252_800_000);
    assert_eq!(slc.erase_block_ps(), 1_500_000_000);
    let mlc = p("nand-mlc-1g");
    assert_eq!(mlc.read_page_ps(), 165_600_000);
    assert_eq!(mlc.program_page_ps(), 905_800_000);
    let onenand = p("onenand-256m");
    assert_eq!(onenand.erase_block_ps(), 2_048_000_000);
    let nor = p("nor-qspi-16m");
    assert_eq!(
        nor.timing.program_cost_ps(256),
        20_000_000 + 384_000_000 + 6_500_000
    );
    assert_eq!(nor.erase_block_ps(), 150_000_000_000);
    assert_eq!(
        nor.with_erase_size(4096).unwrap().erase_block_ps(),
        45_000_000_000
    );
    assert_eq!(
        nor.with_erase_size(32768).unwrap().erase_block_ps(),
        120_000_000_000
    );
}

#[test]
fn geometries_are_the_table() {
    let g = p("nand-slc-128m").geometry;
    assert_eq!(
        (g.kind, g.page_size, g.oob_size, g.pages_per_block, g.blocks),
        (FlashKind::Nand, 2048, 64, 64, 1024)
    );
    assert_eq!((g.oob_free_offset, g.oob_free_len), (2, 38));
    assert_eq!((g.nop, g.program_unit, g.in_order), (4, 512, false));
    assert_eq!((g.ecc_strength, g.ecc_step), (1, 512));
    assert_eq!(g.capacity(), 128 << 20);

    let g = p("nand-mlc-1g").geometry;
    assert_eq!(
        (g.page_size, g.oob_size, g.pages_per_block, g.blocks),
        (4096, 128, 128, 2048)
    );
    assert_eq!((g.oob_free_offset, g.oob_free_len), (2, 22));
    assert_eq!(
        (g.nop, g.program_unit, g.in_order, g.ecc_strength),
        (1, 4096, true, 8)
    );
    assert_eq!(g.capacity(), 1 << 30);

    let g = p("onenand-256m").geometry;
    assert_eq!((g.page_size, g.oob_size, g.blocks), (2048, 64, 2048));
    assert_eq!(
        (g.oob_free_offset, g.oob_free_len, g.nop, g.ecc_strength),
        (2, 20, 4, 1)
    );
    assert_eq!(g.capacity(), 256 << 20);

    let g = p("arm926-nand-128m").geometry;
    assert_eq!(g, p("nand-slc-128m").geometry);

    let g = p("nor-qspi-16m").geometry;
    assert_eq!((g.kind, g.page_size, g.oob_size), (FlashKind::Nor, 256, 0));
    assert_eq!((g.block_size(), g.blocks), (65536, 256));
    assert_eq!((g.program_unit, g.nop, g.ecc_strength), (1, 0, 0));
    assert_eq!(g.capacity(), 16 << 20);
    let g4 = p("nor-qspi-16m").with_erase_size(4096).unwrap().geometry;
    assert_eq!((g4.block_size(), g4.blocks), (4096, 4096));

    let endurance: Vec<u32> = preset::presets().iter().map(|p| p.endurance).collect();
    assert_eq!(endurance, vec![100_000, 10_000, 100_000, 100_000, 100_000]);
}

#[test]
fn partitions_and_erase_sizes() {
    let slc = p("nand-slc-128m");
    let part = slc.with_size_bytes(8 << 20).unwrap();
    assert_eq!(part.geometry.blocks, 64);
    assert_eq!(part.geometry.capacity(), 8 << 20);
    // Raw limits do not depend on the partition size.
    assert_eq!(part.raw_write_bytes_per_s(), slc.raw_write_bytes_per_s());
    assert_eq!(slc.with_blocks(100).unwrap().geometry.blocks, 100);
    assert!(matches!(
        slc.with_blocks(3),
        Err(PresetError::BlockCount { .. })
    ));
    assert!(matches!(
        slc.with_blocks(1025),
        Err(PresetError::BlockCount { .. })
    ));
    assert!(matches!(
        slc.with_size_bytes(1000),
        Err(PresetError::NotBlockMultiple { .. })
    ));
    assert!(matches!(
        slc.with_erase_size(4096),
        Err(PresetError::EraseSize { .. })
    ));
    let nor = p("nor-qspi-16m");
    assert!(nor.with_erase_size(8192).is_err());
    // 4 KiB sectors, then back to 64 KiB blocks.
    let small = nor.with_erase_size(4096).unwrap();
    assert_eq!(small.with_erase_size(65536).unwrap(), nor);
    // 32 KiB blocks: the same 16 MiB in 512 blocks of 128 pages.
    let mid = small.with_erase_size(32768).unwrap();
    assert_eq!(
        (mid.geometry.blocks, mid.geometry.pages_per_block),
        (512, 128)
    );
    assert_eq!(mid.geometry.capacity(), nor.geometry.capacity());
    assert_eq!(mid.with_erase_size(65536).unwrap(), nor);
    // A 1 MiB NOR partition with 4 KiB sectors.
    let tiny = small.with_size_bytes(1 << 20).unwrap();
    assert_eq!(tiny.geometry.blocks, 256);
    let sim = dffs_sim::SimFlash::new(tiny).unwrap();
    assert_eq!(sim.geometry().capacity(), 1 << 20);
}
