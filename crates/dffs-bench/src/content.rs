//! Deterministic data: the random number generator every workload draws from, the content of
//! every file a suite writes, and the verifier that checks what a file system reads back.
//!
//! Owns the rule "the same key and offset always give the same byte", so a suite never has to
//! keep what it wrote in memory to check it later. It must never touch a file system or a device,
//! and never use the host's randomness: every run of a suite writes exactly the same bytes.

use std::fmt;

pub use dffs_testkit::{mix, Rng};

/// The workload generator for `seed` (salted, so bench seeds draw other sequences than the
/// same seeds in the tests).
pub fn rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x5EED_0DFF_BE4C_0001)
}

/// What a file's bytes look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Incompressible random bytes.
    Random,
    /// All zeros (seed 001's "10 MiB of zeros").
    Zero,
    /// About half compressible: 4 KiB chunks alternate (by hash) between random bytes and
    /// text-like lines, as executables, libraries and scripts mix.
    Mixed,
}

/// Lines that make the compressible half of [`Pattern::Mixed`] look like configuration and
/// script text (each fills a 64-byte line, repeating if shorter).
const LINES: [&[u8]; 8] = [
    b"export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin   \n",
    b"if [ -x /etc/init.d/networking ]; then /etc/init.d/networking; \n",
    b"    <option name=\"timeout\" value=\"30\"/> <!-- seconds -->     \n",
    b"libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 ld-linux.so.3   \n",
    b"# This file is generated automatically; do not edit by hand.   \n",
    b"static const char *usage = \"usage: %s [-v] [-q] file...\\n\";   \n",
    b"net.ipv4.ip_forward = 0\nkernel.printk = 4 4 1 7\nvm.swappiness\n",
    b"        return -EINVAL;\n    }\n    spin_unlock_irqrestore(l, f);\n",
];

/// The content of one file: `key` names it, `pattern` says what it looks like. Byte `i` of the
/// file is always [`Content::byte_at`]`(i)`, however the file is cut into writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Content {
    /// Distinguishes files (and versions of a file).
    pub key: u64,
    /// What the bytes look like.
    pub pattern: Pattern,
}

/// Where a read-back differed from what was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the file of the first wrong byte.
    pub offset: u64,
    /// The byte expected there.
    pub expected: u8,
    /// The byte found there.
    pub found: u8,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wrong data at offset {}: expected {:#04x}, found {:#04x}",
            self.offset, self.expected, self.found
        )
    }
}

impl Content {
    /// Random content named `key`.
    pub fn random(key: u64) -> Content {
        Content {
            key,
            pattern: Pattern::Random,
        }
    }

    /// The 8-byte word `w` of the file (bytes `8w..8w+8`).
    fn word(&self, w: u64) -> [u8; 8] {
        match self.pattern {
            Pattern::Zero => [0; 8],
            Pattern::Random => mix(self.key.wrapping_mul(0xA24B_AED4_963E_E407) ^ w).to_le_bytes(),
            Pattern::Mixed => {
                let chunk = w / 512;
                let h = mix(self.key ^ chunk.wrapping_mul(0x9FB2_1C65_1E98_DF25));
                if h & 1 == 0 {
                    mix(self.key.wrapping_mul(0xA24B_AED4_963E_E407) ^ w).to_le_bytes()
                } else {
                    // Text: one of the lines, chosen per 64-byte line by the hash.
                    let line = w / 8;
                    let pick = (mix(h ^ line) % LINES.len() as u64) as usize;
                    let text = LINES[pick];
                    let at = ((w % 8) * 8) as usize;
                    let mut out = [0u8; 8];
                    for (k, b) in out.iter_mut().enumerate() {
                        *b = text[(at + k) % text.len()];
                    }
                    out
                }
            }
        }
    }

    /// Byte `i` of the file.
    pub fn byte_at(&self, i: u64) -> u8 {
        self.word(i / 8)[(i % 8) as usize]
    }

    /// Fills `buf` with the file's bytes from offset `off`.
    pub fn fill(&self, off: u64, buf: &mut [u8]) {
        if self.pattern == Pattern::Zero {
            buf.fill(0);
            return;
        }
        let mut i = 0usize;
        while i < buf.len() {
            let pos = off + i as u64;
            let w = self.word(pos / 8);
            let start = (pos % 8) as usize;
            let n = (8 - start).min(buf.len() - i);
            buf[i..i + n].copy_from_slice(&w[start..start + n]);
            i += n;
        }
    }

    /// The file's bytes `off..off + len`.
    pub fn bytes(&self, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.fill(off, &mut v);
        v
    }

    /// Checks that `data` is the file's bytes from offset `off`.
    pub fn verify(&self, off: u64, data: &[u8]) -> Result<(), Mismatch> {
        let mut expect = [0u8; 4096];
        for (n, chunk) in data.chunks(expect.len()).enumerate() {
            let at = off + (n * expect.len()) as u64;
            let e = &mut expect[..chunk.len()];
            self.fill(at, e);
            if e != chunk {
                return Err(first_difference(at, e, chunk));
            }
        }
        Ok(())
    }
}

/// Compares `found` with `expected` (both starting at file offset `off`).
pub fn compare(off: u64, expected: &[u8], found: &[u8]) -> Result<(), Mismatch> {
    if expected.len() != found.len() {
        let at = expected.len().min(found.len());
        return Err(Mismatch {
            offset: off + at as u64,
            expected: expected.get(at).copied().unwrap_or(0),
            found: found.get(at).copied().unwrap_or(0),
        });
    }
    if expected == found {
        return Ok(());
    }
    Err(first_difference(off, expected, found))
}

fn first_difference(off: u64, expected: &[u8], found: &[u8]) -> Mismatch {
    let i = expected
        .iter()
        .zip(found)
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    Mismatch {
        offset: off + i as u64,
        expected: expected[i],
        found: found[i],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_the_same_however_it_is_cut() {
        for pattern in [Pattern::Random, Pattern::Zero, Pattern::Mixed] {
            let c = Content { key: 7, pattern };
            let whole = c.bytes(0, 20_000);
            let mut pieces = Vec::new();
            let mut off = 0;
            for len in [1usize, 7, 13, 4096, 5000, 9000] {
                let len = len.min(20_000 - off);
                pieces.extend(c.bytes(off as u64, len));
                off += len;
            }
            pieces.extend(c.bytes(off as u64, 20_000 - off));
            assert_eq!(whole, pieces);
            assert_eq!(whole[12_345], c.byte_at(12_345));
        }
    }

    #[test]
    fn verifier_detects_any_single_corruption() {
        let c = Content {
            key: 99,
            pattern: Pattern::Mixed,
        };
        let good = c.bytes(1000, 10_000);
        assert_eq!(c.verify(1000, &good), Ok(()));
        for i in [0usize, 1, 4095, 4096, 9999] {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            let m = c.verify(1000, &bad).unwrap_err();
            assert_eq!(m.offset, 1000 + i as u64);
            assert_eq!(m.found, bad[i]);
        }
        // Another file's content, or the right content at the wrong offset, is wrong too.
        assert!(Content::random(100).verify(1000, &good).is_err());
        assert!(c.verify(1008, &good).is_err());
        assert!(compare(0, &good, &good[..good.len() - 1]).is_err());
    }

    #[test]
    fn mixed_content_is_about_half_text() {
        let c = Content {
            key: 3,
            pattern: Pattern::Mixed,
        };
        let data = c.bytes(0, 1 << 20);
        let text = data
            .chunks(4096)
            .filter(|ch| ch.iter().all(|b| b.is_ascii()))
            .count();
        assert!((80..=176).contains(&text), "{text} text chunks of 256");
    }

    #[test]
    fn rng_is_deterministic_and_spread() {
        let mut a = rng(1);
        let mut b = rng(1);
        let xs: Vec<u64> = (0..100).map(|_| a.below(10)).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.below(10)).collect();
        assert_eq!(xs, ys);
        assert!((0..10).all(|v| xs.contains(&v)));
    }
}
