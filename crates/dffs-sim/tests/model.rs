//! Random operation sequences against a plain reference model of NAND and NOR flash: the
//! simulator must return exactly the error the rules demand, and data exactly as programmed.

use dffs_flash::{EccStatus, Flash, FlashError};
use dffs_sim::{preset, SimFlash};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Program {
        page: u32,
        offset: u32,
        len: u32,
        oob: u32,
        value: u8,
    },
    Read {
        page: u32,
        offset: u32,
        len: u32,
        oob: u32,
    },
    Erase {
        block: u32,
    },
}

fn nand_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..260, 0u32..2200, 0u32..2200, 0u32..42, any::<u8>()).prop_map(
            |(page, offset, len, oob, value)| {
                // Mostly aligned, sometimes not.
                let (offset, len) = if value % 5 == 0 { (offset, len) } else {
                    (offset / 512 * 512, len / 512 * 512)
                };
                Op::Program { page, offset, len, oob, value }
            }
        ),
        3 => (0u32..260, 0u32..2100, 0u32..2100, 0u32..42)
            .prop_map(|(page, offset, len, oob)| Op::Read { page, offset, len, oob }),
        1 => (0u32..5).prop_map(|block| Op::Erase { block }),
    ]
}

/// The reference: 4 blocks × 64 pages of 2048 data bytes and 38 free OOB bytes, NOP 4.
struct NandModel {
    data: Vec<Vec<u8>>,
    oob: Vec<Vec<u8>>,
    nop: Vec<u32>,
}

impl NandModel {
    fn new() -> Self {
        NandModel {
            data: vec![vec![0xFF; 2048]; 256],
            oob: vec![vec![0xFF; 38]; 256],
            nop: vec![0; 256],
        }
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        len: u32,
        oob: u32,
        v: u8,
    ) -> Result<(), FlashError> {
        let (p, o, l, ol) = (page as usize, offset as usize, len as usize, oob as usize);
        if page >= 256 || o + l > 2048 || ol > 38 {
            return Err(FlashError::OutOfRange);
        }
        if l == 0 && ol == 0 {
            return Ok(());
        }
        if l > 0 && (o % 512 != 0 || l % 512 != 0) {
            return Err(FlashError::Misaligned);
        }
        if self.nop[p] >= 4 {
            return Err(FlashError::NopExceeded);
        }
        if self.data[p][o..o + l]
            .iter()
            .chain(&self.oob[p][..ol])
            .any(|&b| b != 0xFF)
        {
            return Err(FlashError::NotErased);
        }
        self.nop[p] += 1;
        self.data[p][o..o + l].fill(v);
        self.oob[p][..ol].fill(v);
        Ok(())
    }
}

fn run_nand(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut sim = SimFlash::new(
        preset::preset("nand-slc-128m")
            .unwrap()
            .with_blocks(4)
            .unwrap(),
    )
    .unwrap();
    let mut m = NandModel::new();
    for op in ops {
        match op {
            Op::Program {
                page,
                offset,
                len,
                oob,
                value,
            } => {
                let want = m.program(page, offset, len, oob, value);
                let got = sim.program(
                    page,
                    offset,
                    &vec![value; len as usize],
                    &vec![value; oob as usize],
                );
                prop_assert_eq!(got, want, "program {} {} {} {}", page, offset, len, oob);
            }
            Op::Read {
                page,
                offset,
                len,
                oob,
            } => {
                let mut d = vec![0u8; len as usize];
                let mut o = vec![0u8; oob as usize];
                let got = sim.read(page, offset, &mut d, &mut o);
                if page >= 256 || offset + len > 2048 || oob > 38 {
                    prop_assert_eq!(got, Err(FlashError::OutOfRange));
                } else {
                    prop_assert_eq!(got, Ok(EccStatus::Clean));
                    let (p, off) = (page as usize, offset as usize);
                    prop_assert_eq!(&d[..], &m.data[p][off..off + len as usize]);
                    prop_assert_eq!(&o[..], &m.oob[p][..oob as usize]);
                }
            }
            Op::Erase { block } => {
                let got = sim.erase(block);
                if block >= 4 {
                    prop_assert_eq!(got, Err(FlashError::OutOfRange));
                } else {
                    prop_assert_eq!(got, Ok(()));
                    for p in block as usize * 64..(block as usize + 1) * 64 {
                        m.data[p].fill(0xFF);
                        m.oob[p].fill(0xFF);
                        m.nop[p] = 0;
                    }
                }
            }
        }
    }
    Ok(())
}

fn nor_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..70, 0u32..300, 0u32..300, any::<u8>())
            .prop_map(|(page, offset, len, value)| Op::Program { page, offset, len, oob: 0, value }),
        3 => (0u32..70, 0u32..600, 0u32..1000)
            .prop_map(|(page, offset, len)| Op::Read { page, offset, len, oob: 0 }),
        1 => (0u32..5).prop_map(|block| Op::Erase { block }),
    ]
}

fn run_nor(ops: Vec<Op>) -> Result<(), TestCaseError> {
    // 4 sectors of 4 KiB = 64 program pages of 256 B.
    let pr = preset::preset("nor-qspi-16m")
        .unwrap()
        .with_erase_size(4096)
        .unwrap()
        .with_blocks(4)
        .unwrap();
    let mut sim = SimFlash::new(pr).unwrap();
    let mut m = vec![0xFFu8; 16384];
    for op in ops {
        match op {
            Op::Program {
                page,
                offset,
                len,
                value,
                ..
            } => {
                let data: Vec<u8> = (0..len).map(|i| value.rotate_left(i % 8)).collect();
                let got = sim.program(page, offset, &data, &[]);
                let want = if page >= 64 {
                    Err(FlashError::OutOfRange)
                } else if offset + len > 256 {
                    Err(FlashError::CrossesPage)
                } else {
                    let at = (page * 256 + offset) as usize;
                    if m[at..at + len as usize]
                        .iter()
                        .zip(&data)
                        .any(|(&old, &new)| new & !old != 0)
                    {
                        Err(FlashError::NotErased)
                    } else {
                        for (o, n) in m[at..at + len as usize].iter_mut().zip(&data) {
                            *o &= n;
                        }
                        Ok(())
                    }
                };
                prop_assert_eq!(got, want);
            }
            Op::Read {
                page, offset, len, ..
            } => {
                let mut d = vec![0u8; len as usize];
                let got = sim.read(page, offset, &mut d, &mut []);
                let at = (page * 256 + offset) as usize;
                if page >= 64 || at + len as usize > 16384 {
                    prop_assert_eq!(got, Err(FlashError::OutOfRange));
                } else {
                    prop_assert_eq!(got, Ok(EccStatus::Clean));
                    prop_assert_eq!(&d[..], &m[at..at + len as usize]);
                }
            }
            Op::Erase { block } => {
                let got = sim.erase(block);
                if block >= 4 {
                    prop_assert_eq!(got, Err(FlashError::OutOfRange));
                } else {
                    prop_assert_eq!(got, Ok(()));
                    m[block as usize * 4096..(block as usize + 1) * 4096].fill(0xFF);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn nand_matches_reference(ops in proptest::collection::vec(nand_op(), 1..200)) {
        run_nand(ops)?;
    }

    #[test]
    fn nor_matches_reference(ops in proptest::collection::vec(nor_op(), 1..200)) {
        run_nor(ops)?;
    }
}
