//! Fault injection: power cuts, bit flips, bad blocks, failing programs and erases.

mod common;
use common::*;

use dffs_flash::{EccStatus, Flash, FlashError};
use dffs_sim::{SharedSim, SimFlash, SimOptions};

/// Classifies bytes of `raw` against the intended value `want`: (fully written, untouched 0xFF,
/// partial).
fn classify(raw: &[u8], want: u8) -> (usize, usize, usize) {
    let full = raw.iter().filter(|&&b| b == want).count();
    let erased = raw.iter().filter(|&&b| b == 0xFF).count();
    (full, erased, raw.len() - full - erased)
}

#[test]
fn cut_program_leaves_a_partial_page_and_refuses_everything_until_power_up() {
    let mut both_in_one_page = 0;
    let (mut tot_full, mut tot_erased, mut tot_partial) = (0, 0, 0);
    for seed in 0..40 {
        let mut sim = slc_seeded(seed);
        sim.program(10, 0, &[0x00; 512], &[]).unwrap();
        sim.cut_power_after(2);
        sim.program(11, 0, &[0x00; 512], &[]).unwrap();
        assert_eq!(sim.program_erase_ops(), 2);
        assert_eq!(
            sim.program(12, 0, &[0x00; 2048], &[0x00; 38]),
            Err(FlashError::PowerLoss)
        );
        assert!(!sim.is_powered());
        assert_eq!(sim.stats().power_cuts, 1);
        // Everything is refused, reads included.
        let mut b = [0u8; 16];
        assert_eq!(sim.read(10, 0, &mut b, &mut []), Err(FlashError::PowerLoss));
        assert_eq!(
            sim.program(13, 0, &[0; 512], &[]),
            Err(FlashError::PowerLoss)
        );
        assert_eq!(sim.erase(3), Err(FlashError::PowerLoss));
        assert_eq!(sim.is_bad(3), Err(FlashError::PowerLoss));
        assert_eq!(sim.mark_bad(3), Err(FlashError::PowerLoss));
        sim.power_up();
        assert!(sim.is_powered());
        // The pages programmed before the cut are intact.
        let (r, d, _) = read_page(&mut sim, 11);
        assert_eq!(r, Ok(EccStatus::Clean));
        assert!(d[..512].iter().all(|&x| x == 0));
        let raw = sim.raw_page(12).unwrap();
        let mut target = raw[..2048].to_vec();
        target.extend_from_slice(&raw[2050..2088]);
        let (full, erased, partial) = classify(&target, 0x00);
        tot_full += full;
        tot_erased += erased;
        tot_partial += partial;
        if full > 0 && erased > 0 {
            both_in_one_page += 1;
        }
        assert_eq!(sim.unstable_pages(), vec![12]);
        // The marker and ECC bytes were not touched by the cut program.
        assert_eq!(&raw[2048..2050], &[0xFF, 0xFF]);
    }
    assert!(tot_full > 0 && tot_erased > 0 && tot_partial > 0);
    assert!(
        both_in_one_page >= 30,
        "only {both_in_one_page} of 40 cuts were partial"
    );
}

#[test]
fn cut_at_every_op_of_a_workload() {
    // Count the workload's operations, then cut at each one: the n-th op always fails.
    let run = |sim: &mut SimFlash| -> Result<(), FlashError> {
        sim.erase(2)?;
        for i in 0..4 {
            sim.program(128 + i, 0, &[0u8; 512], &[])?;
        }
        sim.erase(3)?;
        Ok(())
    };
    let mut clean = slc();
    run(&mut clean).unwrap();
    let n = clean.program_erase_ops();
    assert_eq!(n, 6);
    for k in 1..=n {
        let mut sim = slc_seeded(k);
        sim.cut_power_after(k);
        assert_eq!(run(&mut sim), Err(FlashError::PowerLoss));
        assert_eq!(sim.program_erase_ops(), k);
    }
    // n == 0 disarms.
    let mut sim = slc();
    sim.cut_power_after(1);
    sim.cut_power_after(0);
    run(&mut sim).unwrap();
}

#[test]
fn unstable_nand_page_reads_uncorrectable_or_partial_data_reported_clean() {
    let mut sim = slc_seeded(3);
    let data = pattern(2048, 9);
    sim.cut_power_after(1);
    assert_eq!(sim.program(0, 0, &data, &[]), Err(FlashError::PowerLoss));
    sim.power_up();
    let (mut unc, mut clean_wrong) = (0, 0);
    for _ in 0..200 {
        let (r, d, _) = read_page(&mut sim, 0);
        match r.unwrap() {
            EccStatus::Uncorrectable => unc += 1,
            EccStatus::Clean if d != data => clean_wrong += 1,
            _ => {}
        }
    }
    assert!(unc > 20, "{unc}");
    assert!(clean_wrong > 20, "{clean_wrong}");
    // A successful erase makes the block stable again.
    sim.erase(0).unwrap();
    assert!(sim.unstable_pages().is_empty());
    sim.program(0, 0, &data, &[]).unwrap();
    for _ in 0..20 {
        let (r, d, _) = read_page(&mut sim, 0);
        assert_eq!(r, Ok(EccStatus::Clean));
        assert_eq!(d, data);
    }
}

#[test]
fn cut_erase_leaves_an_undefined_block() {
    let (mut erased_pages, mut untouched_pages, mut mixed_pages) = (0, 0, 0);
    for seed in 0..10 {
        let mut sim = slc_seeded(seed);
        for p in 64..128 {
            sim.program(p, 0, &[0u8; 2048], &[0u8; 38]).unwrap();
        }
        sim.cut_power_after(1);
        assert_eq!(sim.erase(1), Err(FlashError::PowerLoss));
        assert_eq!(sim.erase_counts()[1], 1);
        assert_eq!(
            sim.read(0, 0, &mut [0u8; 4], &mut []),
            Err(FlashError::PowerLoss)
        );
        sim.power_up();
        assert_eq!(sim.unstable_pages(), (64..128).collect::<Vec<u32>>());
        for p in 64..128 {
            let raw = sim.raw_page(p).unwrap();
            let (zero, ff, _) = classify(&raw[..2048], 0x00);
            match (zero, ff) {
                (0, 2048) => erased_pages += 1,
                (2048, 0) => untouched_pages += 1,
                _ => mixed_pages += 1,
            }
        }
        // The block is not bad (it can be erased again) and the erase cleans it up.
        sim.erase(1).unwrap();
        assert!(sim.unstable_pages().is_empty());
        assert_eq!(sim.raw_page(100).unwrap(), vec![0xFF; 2112]);
        assert_eq!(sim.erase_counts()[1], 2);
    }
    assert!(erased_pages > 0 && untouched_pages > 0 && mixed_pages > 0);
}

#[test]
fn nor_cut_program_reads_vary() {
    let mut varied = false;
    for seed in 0..20 {
        let mut sim = SimFlash::with_options(p("nor-qspi-16m"), SimOptions::seeded(seed)).unwrap();
        sim.program(6, 0, &[0x42; 256], &[]).unwrap();
        sim.cut_power_after(1);
        assert_eq!(
            sim.program(7, 0, &[0x00; 256], &[]),
            Err(FlashError::PowerLoss)
        );
        sim.power_up();
        let mut a = [0u8; 256];
        let mut b = [0u8; 256];
        assert_eq!(sim.read(7, 0, &mut a, &mut []), Ok(EccStatus::Clean));
        assert_eq!(sim.read(7, 0, &mut b, &mut []), Ok(EccStatus::Clean));
        if a != b {
            varied = true;
        }
        // A page programmed before the cut is stable.
        let mut c = [0u8; 256];
        assert_eq!(sim.read(6, 0, &mut c, &mut []), Ok(EccStatus::Clean));
        assert_eq!(c, [0x42; 256]);
    }
    assert!(varied);
}

#[test]
fn injected_bitflips_follow_the_ecc_rule() {
    let mut sim = slc();
    let data = pattern(2048, 4);
    let oob = pattern(38, 5);
    sim.program(20, 0, &data, &oob).unwrap();
    sim.inject_bitflips(20, 1).unwrap();
    for _ in 0..3 {
        let (r, d, o) = read_page(&mut sim, 20);
        assert_eq!(r, Ok(EccStatus::Corrected(1)));
        assert_eq!((d, o), (data.clone(), oob.clone()));
    }
    // A subpage read sees the flip too (every codeword has it).
    let mut sub = [0u8; 512];
    assert_eq!(
        sim.read(20, 1536, &mut sub, &mut []),
        Ok(EccStatus::Corrected(1))
    );
    assert_eq!(&sub[..], &data[1536..]);
    sim.inject_bitflips(20, 1).unwrap();
    let (r, d, o) = read_page(&mut sim, 20);
    assert_eq!(r, Ok(EccStatus::Uncorrectable));
    assert_ne!(d, data);
    assert_ne!(o, oob);
    // Exactly two flipped bits in each 512 B step.
    for s in 0..4 {
        let diff: u32 = (s * 512..(s + 1) * 512)
            .map(|i| (d[i] ^ data[i]).count_ones())
            .sum();
        assert_eq!(diff, 2);
    }
    let st = sim.stats();
    assert_eq!((st.corrected_reads, st.uncorrectable_reads), (4, 1));
    // Erasing the block removes them.
    sim.erase(0).unwrap();
    sim.program(20, 0, &data, &oob).unwrap();
    assert_eq!(read_page(&mut sim, 20).0, Ok(EccStatus::Clean));

    // MLC corrects 8 bits per 512 B.
    let mut m = mlc();
    let big = pattern(4096, 1);
    m.program(0, 0, &big, &[]).unwrap();
    m.inject_bitflips(0, 8).unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(m.read(0, 0, &mut buf, &mut []), Ok(EccStatus::Corrected(8)));
    assert_eq!(buf, big);
    m.inject_bitflips(0, 1).unwrap();
    assert_eq!(
        m.read(0, 0, &mut buf, &mut []),
        Ok(EccStatus::Uncorrectable)
    );
    assert_ne!(buf, big);

    // inject_uncorrectable on SLC.
    sim.inject_uncorrectable(21).unwrap();
    assert_eq!(read_page(&mut sim, 21).0, Ok(EccStatus::Uncorrectable));
}

#[test]
fn random_bitflips_corrected_with_right_data_or_uncorrectable_with_wrong_data() {
    let opts = SimOptions {
        bitflip_rate: 1e-4,
        ..SimOptions::seeded(11)
    };
    let mut sim = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    let data = pattern(2048, 2);
    let oob = pattern(38, 3);
    sim.program(0, 0, &data, &oob).unwrap();
    let (mut clean, mut corrected, mut unc) = (0, 0, 0);
    for _ in 0..2000 {
        let (r, d, o) = read_page(&mut sim, 0);
        match r.unwrap() {
            EccStatus::Clean => {
                clean += 1;
                assert_eq!((&d, &o), (&data, &oob));
            }
            EccStatus::Corrected(n) => {
                corrected += 1;
                assert_eq!(n, 1);
                assert_eq!((&d, &o), (&data, &oob));
            }
            EccStatus::Uncorrectable => {
                unc += 1;
                assert!(d != data || o != oob);
            }
        }
    }
    assert!(
        clean > 0 && corrected > 0 && unc > 0,
        "{clean} {corrected} {unc}"
    );
    // Expected per read: about 1.7 flips over 4 steps + OOB; P(no flip) ~ 0.18.
    assert!(corrected > unc);
    let st = sim.stats();
    assert_eq!(
        (st.corrected_reads, st.uncorrectable_reads),
        (corrected, unc)
    );
    // Transient: the stored page is unchanged.
    assert_eq!(&sim.raw_page(0).unwrap()[..2048], &data[..]);
    // Same seed, same sequence.
    let mut again = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    again.program(0, 0, &data, &oob).unwrap();
    let mut statuses = Vec::new();
    for _ in 0..2000 {
        statuses.push(read_page(&mut again, 0).0.unwrap());
    }
    let st2 = again.stats();
    assert_eq!(
        (st2.corrected_reads, st2.uncorrectable_reads),
        (corrected, unc)
    );
}

#[test]
fn nor_flips_are_silent() {
    let opts = SimOptions {
        bitflip_rate: 1e-3,
        ..SimOptions::seeded(1)
    };
    let mut n = SimFlash::with_options(p("nor-qspi-16m"), opts).unwrap();
    let mut wrong = 0;
    for _ in 0..50 {
        let mut b = vec![0u8; 4096];
        assert_eq!(n.read(0, 0, &mut b, &mut []), Ok(EccStatus::Clean));
        if b.iter().any(|&x| x != 0xFF) {
            wrong += 1;
        }
    }
    assert!(wrong > 40);
    let mut n = nor();
    n.inject_bitflips(0, 3).unwrap();
    let mut b = vec![0u8; 256];
    assert_eq!(n.read(0, 0, &mut b, &mut []), Ok(EccStatus::Clean));
    let flipped: u32 = b.iter().map(|x| (x ^ 0xFF).count_ones()).sum();
    assert_eq!(flipped, 3);
}

#[test]
fn factory_bad_blocks() {
    let opts = SimOptions {
        factory_bad_blocks: 20,
        ..SimOptions::seeded(77)
    };
    let mut sim = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    let bad = sim.factory_bad_blocks();
    assert_eq!(bad.len(), 20);
    assert!(!bad.contains(&0));
    for b in 0..1024 {
        assert_eq!(sim.is_bad(b), Ok(bad.contains(&b)), "block {b}");
    }
    let b = bad[0];
    // Marked the NAND way: bytes 0-1 of the OOB of pages 0 and 1.
    for page in [b * 64, b * 64 + 1] {
        let raw = sim.raw_page(page).unwrap();
        assert_ne!(&raw[2048..2050], &[0xFF, 0xFF]);
    }
    assert_eq!(sim.erase(b), Err(FlashError::EraseFailed));
    assert_eq!(sim.erase_counts()[b as usize], 1);
    assert_eq!(sim.is_bad(b), Ok(true));
    // Deterministic from the seed.
    let same = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    assert_eq!(same.factory_bad_blocks(), bad);
    let other =
        SimFlash::with_options(p("nand-slc-128m"), SimOptions { seed: 78, ..opts }).unwrap();
    assert_ne!(other.factory_bad_blocks(), bad);
    // At most 2%; none on NOR.
    let too_many = SimOptions {
        factory_bad_blocks: 21,
        ..opts
    };
    assert!(SimFlash::with_options(p("nand-slc-128m"), too_many).is_err());
    assert!(SimFlash::with_options(p("nor-qspi-16m"), opts).is_err());
}

#[test]
fn grown_bad_blocks() {
    let mut sim = slc_seeded(1);
    sim.fail_next_program_in(5).unwrap();
    assert_eq!(
        sim.program(5 * 64, 0, &[0u8; 512], &[]),
        Err(FlashError::ProgramFailed)
    );
    assert_eq!(sim.grown_bad_blocks(), vec![5]);
    // Bad forever: every later program and erase fails.
    assert_eq!(
        sim.program(5 * 64 + 1, 0, &[0u8; 512], &[]),
        Err(FlashError::ProgramFailed)
    );
    assert_eq!(sim.erase(5), Err(FlashError::EraseFailed));
    assert_eq!(sim.erase(5), Err(FlashError::EraseFailed));
    assert_eq!(sim.erase_counts()[5], 2);
    // Not marked until the file system marks it; marking works on a failing block.
    assert_eq!(sim.is_bad(5), Ok(false));
    sim.mark_bad(5).unwrap();
    assert_eq!(sim.is_bad(5), Ok(true));

    sim.fail_next_erase_of(7).unwrap();
    assert_eq!(sim.erase(7), Err(FlashError::EraseFailed));
    assert_eq!(
        sim.program(7 * 64, 0, &[0u8; 512], &[]),
        Err(FlashError::ProgramFailed)
    );
    sim.fail_block(9).unwrap();
    assert_eq!(sim.erase(9), Err(FlashError::EraseFailed));
    assert_eq!(sim.grown_bad_blocks(), vec![5, 7, 9]);
    // Other blocks are fine.
    sim.erase(6).unwrap();
    sim.program(6 * 64, 0, &[0u8; 512], &[]).unwrap();
    let st = sim.stats();
    assert_eq!((st.program_failures, st.erase_failures), (3, 4));
    assert_eq!(sim.fail_block(1024), Err(FlashError::OutOfRange));
}

#[test]
fn failure_rates() {
    let opts = SimOptions {
        program_fail_rate: 1.0,
        ..SimOptions::seeded(2)
    };
    let mut sim = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    assert_eq!(
        sim.program(0, 0, &[0u8; 512], &[]),
        Err(FlashError::ProgramFailed)
    );
    assert_eq!(
        sim.program(64, 0, &[0u8; 512], &[]),
        Err(FlashError::ProgramFailed)
    );
    assert_eq!(sim.grown_bad_blocks(), vec![0, 1]);

    let opts = SimOptions {
        erase_fail_rate: 0.1,
        ..SimOptions::seeded(2)
    };
    let mut sim = SimFlash::with_options(p("nand-slc-128m"), opts).unwrap();
    let failed = (0..1024).filter(|&b| sim.erase(b).is_err()).count();
    assert!((50..=160).contains(&failed), "{failed}");
    assert_eq!(sim.grown_bad_blocks().len(), failed);

    let bad_rate = SimOptions {
        bitflip_rate: 1.5,
        ..SimOptions::default()
    };
    assert!(SimFlash::with_options(p("nand-slc-128m"), bad_rate).is_err());
    let nan = SimOptions {
        erase_fail_rate: f64::NAN,
        ..SimOptions::default()
    };
    assert!(SimFlash::with_options(p("nand-slc-128m"), nan).is_err());
}

#[test]
fn wear_out_after_endurance() {
    let opts = SimOptions {
        wear_out: true,
        ..SimOptions::default()
    };
    let mut m = SimFlash::with_options(p("nand-mlc-1g"), opts).unwrap();
    for _ in 0..10_000 {
        m.erase(3).unwrap();
    }
    assert_eq!(m.erase(3), Err(FlashError::EraseFailed));
    assert_eq!(m.erase_counts()[3], 10_001);
}

#[test]
fn nor_has_no_bad_block_marks() {
    let mut n = nor();
    assert_eq!(n.is_bad(0), Ok(false));
    assert_eq!(n.mark_bad(0), Err(FlashError::Device));
    assert_eq!(n.mark_bad(256), Err(FlashError::OutOfRange));
}

#[test]
fn cut_while_marking_bad() {
    let mut sim = slc_seeded(4);
    sim.cut_power_after(2);
    assert_eq!(sim.mark_bad(3), Err(FlashError::PowerLoss));
    sim.power_up();
    // Page 0's marker was written before the cut.
    assert_eq!(sim.is_bad(3), Ok(true));
}

#[test]
fn shared_handle_steers_the_device_another_owner_uses() {
    let shared = SharedSim::new(slc());
    let mut fs_side = shared.clone();
    fs_side.program(0, 0, &[0u8; 512], &[]).unwrap();
    assert_eq!(shared.stats().programs, 1);
    shared.cut_power_after(1);
    assert_eq!(fs_side.erase(1), Err(FlashError::PowerLoss));
    assert!(!shared.lock().is_powered());
    assert_eq!(shared.erase_counts()[1], 1);
    shared.power_up();
    fs_side.erase(1).unwrap();
    assert_eq!(fs_side.geometry().blocks, 1024);
    let shared = shared.try_into_inner().unwrap_err();
    drop(fs_side);
    let sim = shared.try_into_inner().unwrap();
    assert_eq!(sim.erase_counts()[1], 2);
    // SharedSim can be used as a boxed device.
    let mut boxed: Box<dyn Flash + Send> = Box::new(SharedSim::new(slc()));
    boxed.program(0, 0, &[0u8; 512], &[]).unwrap();
}

/// Programs pages 0 and 1 of block `b` (the first two lower pages) with `fill`, then cuts
/// power while page 2 (the upper page sharing page 0's cells) is programmed.
fn cut_upper_page(sim: &mut SimFlash, b: u32, fill: u8) -> Result<(), FlashError> {
    let first = b * sim.preset().geometry.pages_per_block;
    let ps = sim.preset().geometry.page_size as usize;
    sim.program(first, 0, &vec![fill; ps], &[])?;
    sim.program(first + 1, 0, &vec![fill; ps], &[])?;
    sim.cut_power_after(1);
    sim.program(first + 2, 0, &vec![0x00; ps], &[])
}

#[test]
fn mlc_cut_upper_page_program_damages_its_lower_page() {
    let mut uncorrectable = 0;
    let mut wrong_but_clean = 0;
    for seed in 0..20 {
        let mut sim = SimFlash::with_options(p("nand-mlc-1g"), SimOptions::seeded(seed)).unwrap();
        let ps = sim.preset().geometry.page_size as usize;
        assert_eq!(
            cut_upper_page(&mut sim, 5, 0x5A),
            Err(FlashError::PowerLoss)
        );
        sim.power_up();
        assert_eq!(sim.stats().paired_page_damage, 1);
        let first = 5 * sim.preset().geometry.pages_per_block;
        // Page 0 shares its cells with page 2: damaged, and stays so (not a transient fault).
        let raw = sim.raw_page(first).unwrap();
        let changed = raw[..ps].iter().filter(|&&b| b != 0x5A).count();
        assert!(
            changed > ps / 8,
            "seed {seed}: only {changed} bytes of the lower page changed"
        );
        assert!(sim.unstable_pages().contains(&first));
        let mut d = vec![0u8; ps];
        for _ in 0..4 {
            match sim.read(first, 0, &mut d, &mut []) {
                Ok(EccStatus::Uncorrectable) => uncorrectable += 1,
                Ok(_) => {
                    assert_ne!(
                        d,
                        vec![0x5A; ps],
                        "seed {seed}: damaged page read back intact"
                    );
                    wrong_but_clean += 1;
                }
                Err(e) => panic!("seed {seed}: {e:?}"),
            }
        }
        // Page 1 is a lower page of another word line: untouched.
        let (r, d1, _) = read_page(&mut sim, first + 1);
        assert_eq!(r, Ok(EccStatus::Clean), "seed {seed}");
        assert!(d1[..ps].iter().all(|&x| x == 0x5A), "seed {seed}");
        // Erasing the block heals it.
        sim.erase(5).unwrap();
        assert!(!sim.unstable_pages().contains(&first));
    }
    assert!(
        uncorrectable > 0 && wrong_but_clean > 0,
        "{uncorrectable} {wrong_but_clean}"
    );
}

#[test]
fn mlc_failed_upper_page_program_damages_its_lower_page() {
    let mut sim = SimFlash::new(p("nand-mlc-1g")).unwrap();
    let ppb = sim.preset().geometry.pages_per_block;
    let ps = sim.preset().geometry.page_size as usize;
    // Lower pages 0, 1 and 3, upper page 2 (pairs with 0), then a failing upper page 4 (pairs
    // with 1).
    for i in 0..4 {
        sim.program(7 * ppb + i, 0, &vec![0x11; ps], &[]).unwrap();
    }
    sim.fail_next_program_in(7).unwrap();
    assert_eq!(
        sim.program(7 * ppb + 4, 0, &vec![0x00; ps], &[]),
        Err(FlashError::ProgramFailed)
    );
    assert_eq!(sim.stats().paired_page_damage, 1);
    assert!(sim.raw_page(7 * ppb + 1).unwrap()[..ps]
        .iter()
        .any(|&b| b != 0x11));
    for i in [0, 2, 3] {
        assert!(sim.raw_page(7 * ppb + i).unwrap()[..ps]
            .iter()
            .all(|&b| b == 0x11));
    }
}

#[test]
fn cut_programs_damage_no_other_page_without_pairing() {
    for name in ["nand-slc-128m", "nor-qspi-16m"] {
        let mut sim = SimFlash::with_options(p(name), SimOptions::seeded(3)).unwrap();
        assert_eq!(
            cut_upper_page(&mut sim, 5, 0x5A),
            Err(FlashError::PowerLoss)
        );
        sim.power_up();
        let g = sim.preset().geometry;
        let first = 5 * g.pages_per_block;
        assert_eq!(sim.stats().paired_page_damage, 0, "{name}");
        for pg in [first, first + 1] {
            assert!(
                sim.raw_page(pg).unwrap()[..g.page_size as usize]
                    .iter()
                    .all(|&b| b == 0x5A),
                "{name} page {pg}"
            );
        }
    }
}
