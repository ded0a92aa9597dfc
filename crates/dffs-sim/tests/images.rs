//! Image files: save and reopen keep the device (contents, erase counters, bad blocks, unstable
//! pages); NAND images are nanddump --oob layout; raw images open without a sidecar; malformed
//! input is an error, never a panic.

mod common;
use common::*;

use dffs_flash::{EccStatus, Flash, FlashError};
use dffs_sim::{sidecar_path, SimFlash, SimOptions};

#[test]
fn reopened_image_is_the_same_device() {
    let dir = TempDir::new("reopen");
    let path = dir.join("dev.img");
    let preset = p("nand-slc-128m").with_blocks(64).unwrap();
    let opts = SimOptions {
        factory_bad_blocks: 1,
        ..SimOptions::seeded(99)
    };
    let mut sim = SimFlash::create(&path, preset, opts).unwrap();
    let bad = sim.factory_bad_blocks();
    assert_eq!(bad.len(), 1);
    let data = pattern(2048, 7);
    for _ in 0..3 {
        sim.erase(2).unwrap();
    }
    sim.program(2 * 64 + 5, 0, &data, &[1, 2, 3]).unwrap();
    sim.program(3 * 64, 0, &data[..512], &[]).unwrap();
    sim.fail_block(10).unwrap();
    sim.inject_bitflips(2 * 64 + 5, 1).unwrap();
    sim.cut_power_after(1);
    assert_eq!(
        sim.program(4 * 64, 0, &data, &[]),
        Err(FlashError::PowerLoss)
    );
    sim.power_up();
    sim.save(&path).unwrap();

    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        64 * 64 * 2112,
        "image is pages with OOB interleaved"
    );
    // No temporary files are left beside the image.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["dev.img", "dev.img.sim"]);

    let mut back = SimFlash::open(&path).unwrap();
    // Same continuation: both devices behave identically from here (same random sequence).
    for i in 0..20 {
        assert!(
            read_page(&mut sim, 4 * 64) == read_page(&mut back, 4 * 64),
            "read {i} differs"
        );
    }
    assert_eq!(back.geometry(), sim.geometry());
    assert_eq!(back.preset().name, "nand-slc-128m");
    assert_eq!(back.erase_counts(), sim.erase_counts());
    assert_eq!(back.erase_counts()[2], 3);
    assert_eq!(back.factory_bad_blocks(), bad);
    assert_eq!(back.grown_bad_blocks(), vec![10]);
    assert_eq!(back.unstable_pages(), vec![4 * 64]);
    assert_eq!(back.options(), sim.options());
    assert_eq!(back.stats(), sim.stats());
    assert_eq!(back.program_erase_ops(), sim.program_erase_ops());
    for page in 0..64 * 64 {
        assert_eq!(back.raw_page(page).unwrap(), sim.raw_page(page).unwrap());
    }
    assert_eq!(back.is_bad(bad[0]), Ok(true));
    assert_eq!(back.erase(bad[0]), Err(FlashError::EraseFailed));
    assert_eq!(back.erase(10), Err(FlashError::EraseFailed));
    // NOP counts survive: page 3*64 had one of four programs.
    assert_eq!(back.program_count(3 * 64), Ok(1));
    // Injected flips survive.
    let (r, d, o) = read_page(&mut back, 2 * 64 + 5);
    assert_eq!(r, Ok(EccStatus::Corrected(1)));
    assert_eq!(d, data);
    assert_eq!(&o[..3], &[1, 2, 3]);
}

#[test]
fn nand_image_layout_is_nanddump_oob() {
    let dir = TempDir::new("layout");
    let path = dir.join("n.img");
    let mut sim = SimFlash::new(p("nand-slc-128m").with_blocks(8).unwrap()).unwrap();
    sim.program(65, 0, &[0x11; 2048], &[0x22; 38]).unwrap();
    sim.mark_bad(3).unwrap();
    sim.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let at = 65 * 2112;
    assert!(bytes[at..at + 2048].iter().all(|&b| b == 0x11));
    assert_eq!(&bytes[at + 2048..at + 2050], &[0xFF, 0xFF]);
    assert!(bytes[at + 2050..at + 2088].iter().all(|&b| b == 0x22));
    assert!(bytes[..at].iter().all(|&b| b == 0xFF));
    let marker = 3 * 64 * 2112 + 2048;
    assert_eq!(&bytes[marker..marker + 2], &[0, 0]);

    // Opened raw (no sidecar), e.g. a real nanddump: the marked block is found bad.
    let raw_path = dir.join("dump.bin");
    std::fs::copy(&path, &raw_path).unwrap();
    assert!(SimFlash::open(&raw_path).is_err());
    let mut raw = SimFlash::open_raw(&raw_path, p("nand-slc-128m")).unwrap();
    assert_eq!(raw.geometry().blocks, 8);
    assert_eq!(raw.factory_bad_blocks(), vec![3]);
    assert_eq!(raw.is_bad(3), Ok(true));
    assert_eq!(raw.erase_counts(), &[0; 8]);
    let (r, d, o) = read_page(&mut raw, 65);
    assert_eq!(r, Ok(EccStatus::Clean));
    assert_eq!(d, vec![0x11; 2048]);
    assert_eq!(o, vec![0x22; 38]);
    // The wrong size is an error, not a panic.
    std::fs::write(&raw_path, [0u8; 1000]).unwrap();
    assert!(SimFlash::open_raw(&raw_path, p("nand-slc-128m")).is_err());
    std::fs::write(&raw_path, []).unwrap();
    assert!(SimFlash::open_raw(&raw_path, p("nand-slc-128m")).is_err());
}

#[test]
fn nor_image_is_raw_bytes() {
    let dir = TempDir::new("nor");
    let path = dir.join("nor.img");
    let preset = p("nor-qspi-16m").with_erase_size(4096).unwrap();
    let mut sim = SimFlash::create(&path, preset, SimOptions::default()).unwrap();
    sim.program(17, 3, &[0x12, 0x34], &[]).unwrap();
    sim.erase(100).unwrap();
    sim.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 16 << 20);
    assert_eq!(&bytes[17 * 256 + 3..17 * 256 + 5], &[0x12, 0x34]);
    let back = SimFlash::open(&path).unwrap();
    assert_eq!(back.geometry().block_size(), 4096);
    assert_eq!(back.preset().timing.erase_ps, 45_000_000_000);
    assert_eq!(back.erase_counts()[100], 1);
    let raw = SimFlash::open_raw(&path, p("nor-qspi-16m")).unwrap();
    assert_eq!(raw.geometry().blocks, 256);
    assert_eq!(raw.raw_page(17).unwrap()[3..5], [0x12, 0x34]);
}

#[test]
fn saving_replaces_the_previous_image() {
    let dir = TempDir::new("replace");
    let path = dir.join("x.img");
    let preset = p("nand-slc-128m").with_blocks(4).unwrap();
    let mut sim = SimFlash::create(&path, preset, SimOptions::default()).unwrap();
    sim.program(0, 0, &[0u8; 512], &[]).unwrap();
    sim.save(&path).unwrap();
    sim.erase(0).unwrap();
    sim.save(&path).unwrap();
    let back = SimFlash::open(&path).unwrap();
    assert_eq!(back.raw_page(0).unwrap(), vec![0xFF; 2112]);
    assert_eq!(back.erase_counts()[0], 1);
    // Saving into a directory that does not exist fails cleanly.
    assert!(sim.save(dir.join("missing/x.img")).is_err());
}

#[test]
fn malformed_sidecars_are_errors() {
    let dir = TempDir::new("bad");
    let path = dir.join("b.img");
    let preset = p("nand-slc-128m").with_blocks(4).unwrap();
    SimFlash::create(&path, preset, SimOptions::default()).unwrap();
    let side = sidecar_path(&path);
    let good = std::fs::read_to_string(&side).unwrap();
    let cases = [
        "not json".to_string(),
        good.replace("\"version\": 1", "\"version\": 99"),
        good.replace("nand-slc-128m", "nand-imaginary"),
        good.replace("\"blocks\": 4", "\"blocks\": 5"),
        good.replace("\"page_size\": 2048", "\"page_size\": 2047"),
        good.replace("\"factory_bad_blocks\": []", "\"factory_bad_blocks\": [4]"),
        good.replace(
            "\"unstable_pages\": []",
            "\"unstable_pages\": [{\"page\": 1, \"weak\": \"zz\"}]",
        ),
        good.replace("\"bitflip_rate\": 0.0", "\"bitflip_rate\": 7.0"),
        good.replace("\"page_size\": 2048", "\"page_size\": 2147483648"),
        good.replace("\"pages_per_block\": 64", "\"pages_per_block\": 4294967295"),
        good.replace("\"erase_counts\": [", "\"erase_counts\": [1,"),
        good.replace("\"image_bytes\": 540672", "\"image_bytes\": 1"),
    ];
    for (i, text) in cases.iter().enumerate() {
        assert_ne!(text, &good, "case {i} did not change the sidecar");
        std::fs::write(&side, text).unwrap();
        let r = SimFlash::open(&path);
        assert!(r.is_err(), "case {i} was accepted");
        assert!(!r.unwrap_err().to_string().is_empty());
    }
    // A truncated image with a good sidecar.
    std::fs::write(&side, &good).unwrap();
    SimFlash::open(&path).unwrap();
    std::fs::write(&path, [0xFFu8; 100]).unwrap();
    assert!(SimFlash::open(&path).is_err());
}

/// Disk blocks (512 B) a file occupies.
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn a_chip_larger_than_its_preset_saves_a_sparse_image() {
    // 1 GiB of the 128 MiB SLC part's geometry: 8,192 blocks of 64 pages.
    let preset = p("nand-slc-128m").with_size_bytes(1 << 30).unwrap();
    assert!(preset.beyond_chip());
    assert_eq!(preset.geometry.blocks, 8192);
    assert_eq!(preset.geometry.page_size, 2048);
    let dir = TempDir::new("sparse");
    let path = dir.join("big.img");
    let mut sim = SimFlash::create(&path, preset, SimOptions::default()).unwrap();
    let data = pattern(2048, 3);
    // Blocks 0, 1 and 8191 written (the last block too: the image ends with data), 5 erased.
    for page in [0, 64 + 7, 8191 * 64 + 63] {
        sim.program(page, 0, &data, &[9, 8, 7]).unwrap();
    }
    sim.erase(5).unwrap();
    sim.save(&path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(len, 8192 * 64 * 2112, "the image keeps the device's size");
    assert!(
        allocated(&path) <= 4 * 64 * 2112,
        "only the written blocks take disk space: {} B",
        allocated(&path)
    );
    let mut back = SimFlash::open(&path).unwrap();
    assert_eq!(back.geometry().blocks, 8192);
    assert_eq!(back.erase_counts()[5], 1);
    for page in [0, 64 + 7, 8191 * 64 + 63] {
        let (r, d, o) = read_page(&mut back, page);
        assert_eq!(r, Ok(EccStatus::Clean));
        assert_eq!(d, data);
        assert_eq!(&o[..3], &[9, 8, 7]);
    }
    for page in [1, 2 * 64, 8190 * 64 + 5] {
        assert_eq!(
            back.raw_page(page).unwrap(),
            vec![0xFF; 2112],
            "page {page} erased"
        );
    }
    // Saved again after the last written block is erased: a hole at the end.
    back.erase(8191).unwrap();
    back.save(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    let again = SimFlash::open(&path).unwrap();
    assert_eq!(again.raw_page(8191 * 64 + 63).unwrap(), vec![0xFF; 2112]);
    assert_eq!(again.raw_page(64 + 7).unwrap()[..2048], data[..]);

    // A sidecar whose holes overlap or pass the end is refused.
    let side = sidecar_path(&path);
    let good = std::fs::read_to_string(&side).unwrap();
    assert!(good.contains("\"erased_blocks\""), "{good}");
    let v: serde_json::Value = serde_json::from_str(&good).unwrap();
    for holes in ["[[2, 9000]]", "[[2, 3], [3, 1]]", "[[4, 0]]"] {
        let mut bad = v.clone();
        bad["erased_blocks"] = serde_json::from_str(holes).unwrap();
        std::fs::write(&side, serde_json::to_string(&bad).unwrap()).unwrap();
        assert!(
            SimFlash::open(&path).is_err(),
            "holes {holes} were accepted"
        );
    }
}

#[test]
fn device_sizes_beyond_the_chip_stop_at_64_gib() {
    let slc = p("nand-slc-128m");
    // 64 GiB of 2 KiB pages is the simulator's page limit (2^25 pages) and the format's.
    let big = slc.with_size_bytes(64 << 30).unwrap();
    assert_eq!(big.geometry.blocks, 524_288);
    let err = slc.with_size_bytes(128 << 30).unwrap_err();
    assert!(err.to_string().contains("largest"), "{err}");
    let mlc = p("nand-mlc-1g").with_size_bytes(64 << 30).unwrap();
    assert_eq!(mlc.geometry.blocks, 131_072);
    // A size within the chip is a partition of it, as before; the chip itself is not beyond.
    let part = slc.with_size_bytes(8 << 20).unwrap();
    assert_eq!(part.geometry.blocks, 64);
    assert!(!part.beyond_chip() && !slc.beyond_chip());
    // NOR's 256-byte pages reach the simulator's page limit at 8 GiB.
    let nor = p("nor-qspi-16m");
    assert_eq!(
        nor.with_size_bytes(8 << 30).unwrap().geometry.blocks,
        131_072
    );
    assert!(nor.with_size_bytes(16 << 30).is_err());
}
