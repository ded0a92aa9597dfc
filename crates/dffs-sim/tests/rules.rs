//! Device rules: every violation returns its error, is not counted as an operation, and leaves
//! the device unchanged. Also: timing and counters of legal operations.

mod common;
use common::*;

use dffs_flash::{EccStatus, Flash, FlashError};

#[test]
fn nand_program_then_read_back_data_and_oob() {
    let mut sim = slc();
    let data = pattern(2048, 1);
    sim.program(70, 0, &data, &[9, 8, 7]).unwrap();
    let (r, d, o) = read_page(&mut sim, 70);
    assert_eq!(r, Ok(EccStatus::Clean));
    assert_eq!(d, data);
    assert_eq!(&o[..3], &[9, 8, 7]);
    assert!(o[3..].iter().all(|&b| b == 0xFF));
    // The raw OOB keeps the free bytes after the marker; the marker stays 0xFF.
    let raw = sim.raw_page(70).unwrap();
    assert_eq!(&raw[2048..2050], &[0xFF, 0xFF]);
    assert_eq!(&raw[2050..2053], &[9, 8, 7]);
    // ECC bytes (40..64) were written with something deterministic.
    assert!(raw[2048 + 40..].iter().any(|&b| b != 0xFF));
    let mut again = slc();
    again.program(70, 0, &data, &[9, 8, 7]).unwrap();
    assert_eq!(again.raw_page(70).unwrap(), raw);
    // A partial read inside the page.
    let mut part = [0u8; 100];
    assert_eq!(sim.read(70, 1000, &mut part, &mut []), Ok(EccStatus::Clean));
    assert_eq!(&part[..], &data[1000..1100]);
}

#[test]
fn nand_not_erased() {
    let mut sim = slc();
    sim.program(0, 512, &[0xAB; 512], &[1, 0xFF]).unwrap();
    let before = sim.raw_page(0).unwrap();
    let ops = sim.program_erase_ops();
    // Same data range again, even with identical bytes.
    assert_eq!(
        sim.program(0, 512, &[0xAB; 512], &[]),
        Err(FlashError::NotErased)
    );
    // Overlapping OOB byte 0 (already 1).
    assert_eq!(
        sim.program(0, 0, &[0x00; 512], &[0xFF]),
        Err(FlashError::NotErased)
    );
    assert_eq!(sim.program_erase_ops(), ops);
    assert_eq!(sim.raw_page(0).unwrap(), before);
    // The whole programmed OOB range must be erased, even where the new byte is 0xFF.
    assert_eq!(
        sim.program(0, 0, &[], &[0xFF, 0x22]),
        Err(FlashError::NotErased)
    );
    // A different subpage is fine.
    sim.program(0, 1024, &[0x11; 512], &[]).unwrap();
}

#[test]
fn nor_program_only_clears_bits() {
    let mut sim = nor();
    sim.program(3, 0, &[0xF0, 0xFF], &[]).unwrap();
    assert_eq!(sim.program(3, 0, &[0x0F], &[]), Err(FlashError::NotErased));
    assert_eq!(sim.program(3, 0, &[0xF1], &[]), Err(FlashError::NotErased));
    sim.program(3, 0, &[0xE0, 0x7F], &[]).unwrap();
    sim.program(3, 0, &[0x00], &[]).unwrap();
    let mut buf = [0u8; 3];
    sim.read(3, 0, &mut buf, &mut []).unwrap();
    assert_eq!(buf, [0x00, 0x7F, 0xFF]);
}

#[test]
fn nop_limit() {
    let mut sim = slc();
    for sub in 0..4 {
        sim.program(5, sub * 512, &[0u8; 512], &[]).unwrap();
    }
    assert_eq!(sim.program_count(5), Ok(4));
    // A fifth program, even of OOB bytes that are still erased, exceeds NOP 4.
    assert_eq!(
        sim.program(5, 0, &[], &[0x00]),
        Err(FlashError::NopExceeded)
    );
    // MLC: NOP 1.
    let mut m = mlc();
    m.program(0, 0, &[0u8; 4096], &[]).unwrap();
    assert_eq!(m.program(0, 0, &[], &[0x00]), Err(FlashError::NopExceeded));
    // Erase resets the count.
    sim.erase(0).unwrap();
    assert_eq!(sim.program_count(5), Ok(0));
    sim.program(5, 0, &[0u8; 512], &[]).unwrap();
}

#[test]
fn in_order_programming_on_mlc() {
    let mut m = mlc();
    let page = vec![0x5Au8; 4096];
    m.program(5, 0, &page, &[]).unwrap();
    assert_eq!(m.program(3, 0, &page, &[]), Err(FlashError::OutOfOrder));
    assert_eq!(m.program(4, 0, &page, &[]), Err(FlashError::OutOfOrder));
    m.program(6, 0, &page, &[]).unwrap();
    m.program(127, 0, &page, &[]).unwrap();
    // Another block is independent.
    m.program(128 + 3, 0, &page, &[]).unwrap();
    // After an erase, low pages are legal again.
    m.erase(0).unwrap();
    m.program(3, 0, &page, &[]).unwrap();
    // SLC allows any order.
    let mut s = slc();
    s.program(5, 0, &[0u8; 512], &[]).unwrap();
    s.program(3, 0, &[0u8; 512], &[]).unwrap();
}

#[test]
fn out_of_range() {
    let mut sim = slc();
    let pages = sim.geometry().total_pages();
    let mut buf = [0u8; 512];
    assert_eq!(
        sim.program(pages, 0, &[0u8; 512], &[]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        sim.program(0, 2048, &[0u8; 512], &[]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        sim.program(0, 0, &[0u8; 512], &[0u8; 39]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        sim.read(pages, 0, &mut buf, &mut []),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        sim.read(0, 1537, &mut buf, &mut []),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        sim.read(0, 0, &mut buf, &mut [0u8; 39]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(sim.erase(1024), Err(FlashError::OutOfRange));
    assert_eq!(sim.is_bad(1024), Err(FlashError::OutOfRange));
    assert_eq!(sim.mark_bad(u32::MAX), Err(FlashError::OutOfRange));
    assert_eq!(sim.inject_bitflips(pages, 1), Err(FlashError::OutOfRange));
    assert_eq!(sim.stats().reads, 0);
    assert_eq!(sim.program_erase_ops(), 0);

    let mut n = nor();
    let cap = n.geometry().capacity();
    let last = (cap / 256) as u32 - 1;
    // NOR reads may cross pages, but not the end of the device.
    let mut big = vec![0u8; 1000];
    assert_eq!(n.read(0, 100, &mut big, &mut []), Ok(EccStatus::Clean));
    assert_eq!(
        n.read(last, 0, &mut big, &mut []),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        n.read(0, 0, &mut big, &mut [0u8; 1]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(
        n.program(last + 1, 0, &[0], &[]),
        Err(FlashError::OutOfRange)
    );
    assert_eq!(n.program(0, 0, &[0], &[0]), Err(FlashError::OutOfRange));
    assert_eq!(n.erase(256), Err(FlashError::OutOfRange));
}

#[test]
fn misaligned_and_crossing() {
    let mut sim = slc();
    assert_eq!(
        sim.program(0, 256, &[0u8; 512], &[]),
        Err(FlashError::Misaligned)
    );
    assert_eq!(
        sim.program(0, 0, &[0u8; 100], &[]),
        Err(FlashError::Misaligned)
    );
    let mut m = mlc();
    assert_eq!(
        m.program(0, 0, &[0u8; 2048], &[]),
        Err(FlashError::Misaligned)
    );
    let mut n = nor();
    assert_eq!(
        n.program(0, 200, &[0u8; 100], &[]),
        Err(FlashError::CrossesPage)
    );
    n.program(0, 200, &[0u8; 56], &[]).unwrap();
    n.program(0, 3, &[0x12], &[]).unwrap();
    assert_eq!(sim.program_erase_ops(), 0);
    assert_eq!(sim.allocated_pages(), 0);
}

#[test]
fn nor_reads_cross_pages() {
    let mut n = nor();
    n.program(0, 0, &pattern(256, 1), &[]).unwrap();
    n.program(1, 0, &pattern(256, 2), &[]).unwrap();
    let mut buf = vec![0u8; 300];
    assert_eq!(n.read(0, 100, &mut buf, &mut []), Ok(EccStatus::Clean));
    let mut want = pattern(256, 1)[100..].to_vec();
    want.extend_from_slice(&pattern(256, 2)[..144]);
    assert_eq!(buf, want);
    // Addressing by (page, offset past the page) is the same byte address.
    let mut b2 = vec![0u8; 300];
    n.read(0, 100, &mut b2, &mut []).unwrap();
    assert_eq!(b2, buf);
    assert_eq!(n.stats().reads, 2);
}

#[test]
fn erase_restores_all_ones_and_counts() {
    let mut sim = slc();
    sim.program(64, 0, &[0u8; 2048], &[0u8; 38]).unwrap();
    sim.program(127, 0, &[0u8; 512], &[]).unwrap();
    sim.erase(1).unwrap();
    sim.erase(1).unwrap();
    assert_eq!(sim.raw_page(64).unwrap(), vec![0xFF; 2112]);
    assert_eq!(sim.raw_page(127).unwrap(), vec![0xFF; 2112]);
    assert_eq!(sim.erase_counts()[1], 2);
    assert_eq!(sim.erase_counts()[0], 0);
    assert_eq!(sim.allocated_pages(), 0);
    let mut n = nor();
    n.program(256, 0, &[0u8; 256], &[]).unwrap();
    n.erase(1).unwrap();
    let mut b = [0u8; 256];
    n.read(256, 0, &mut b, &mut []).unwrap();
    assert_eq!(b, [0xFF; 256]);
}

#[test]
fn timing_of_operations() {
    let mut sim = slc();
    let s0 = sim.stats();
    sim.program(0, 0, &[0u8; 2048], &[0u8; 38]).unwrap();
    let s1 = sim.stats();
    let d = s1.since(&s0);
    assert_eq!(d.program_ps, 252_800_000);
    assert_eq!(d.program_us(), 252.8);
    assert_eq!((d.programs, d.bytes_programmed), (1, 2112));
    let (r, _, _) = read_page(&mut sim, 0);
    r.unwrap();
    let d = sim.stats().since(&s1);
    assert_eq!(d.read_ps, 77_800_000);
    assert_eq!(d.sim_us(), 77.8);
    assert_eq!(
        (d.reads, d.programs, d.erases, d.bytes_read),
        (1, 0, 0, 2112)
    );
    let s2 = sim.stats();
    // A subpage without OOB: 25 µs + 512 × 25 ns.
    let mut b = [0u8; 512];
    sim.read(0, 512, &mut b, &mut []).unwrap();
    assert_eq!(sim.stats().since(&s2).read_ps, 25_000_000 + 512 * 25_000);
    let s3 = sim.stats();
    sim.erase(0).unwrap();
    let d = sim.stats().since(&s3);
    assert_eq!(
        (d.erases, d.erase_ps, d.erase_us()),
        (1, 1_500_000_000, 1500.0)
    );
    let total = sim.stats();
    assert_eq!(
        total.sim_ps,
        total.read_ps + total.program_ps + total.erase_ps
    );
    assert_eq!(total.since(&total), dffs_sim::Stats::default());

    let mut n = nor();
    n.program(0, 0, &[0u8; 256], &[]).unwrap();
    assert_eq!(n.stats().program_ps, 20_000_000 + 384_000_000 + 6_500_000);
    let mut b = vec![0u8; 4096];
    n.read(0, 0, &mut b, &mut []).unwrap();
    assert_eq!(n.stats().read_ps, 100_000 + 4096 * 25_000);
    n.erase(0).unwrap();
    assert_eq!(n.stats().erase_ps, 150_000_000_000);
    let mut n4 = dffs_sim::SimFlash::new(p("nor-qspi-16m").with_erase_size(4096).unwrap()).unwrap();
    n4.erase(4095).unwrap();
    assert_eq!(n4.stats().erase_ps, 45_000_000_000);
}

#[test]
fn empty_program_is_a_no_op() {
    let mut sim = slc();
    sim.program(0, 0, &[], &[]).unwrap();
    assert_eq!(sim.program_erase_ops(), 0);
    assert_eq!(sim.program_count(0), Ok(0));
}

#[test]
fn large_device_is_lazily_allocated() {
    let mut m = mlc();
    assert_eq!(m.allocated_pages(), 0);
    m.program(1000, 0, &[0u8; 4096], &[]).unwrap();
    assert_eq!(m.allocated_pages(), 1);
    let mut b = vec![0u8; 4096];
    m.read(200_000, 0, &mut b, &mut []).unwrap();
    assert_eq!(b, vec![0xFF; 4096]);
    assert_eq!(m.allocated_pages(), 1);
}
