//! Transparent compression of file data blocks.
//!
//! Owns the algorithm numbers (part of the on-flash format: the superblock default, the inode
//! attribute and each compressed data node record them), the only calls into `lz4_flex` and
//! `miniz_oxide`, and the body of a compressed data node (`DataZ`). It must never touch flash,
//! never decide which file gets compressed, and never trust bytes it decompresses: corrupt
//! input is an error, never a panic, and output never exceeds the block's declared length.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::Reader;
use crate::format::node::{NodeBuilder, NodeType};
use crate::format::params::{Params, NODE_HEADER};

/// No compression: blocks are stored as they are.
pub const NONE: u8 = 0;
/// LZ4 block format (no frame), as `lz4_flex::block` writes it.
pub const LZ4: u8 = 1;
/// Raw deflate (RFC 1951, no zlib header), as `miniz_oxide` writes it.
pub const DEFLATE: u8 = 2;

/// Bytes of a `DataZ` node before its compressed payload: the node header, the file block
/// index (u32) and the block's uncompressed length (u32).
pub const DATAZ_HEADER: u32 = NODE_HEADER + 8;

/// Largest uncompressed length of one compressed data node (a hostile node declaring more is
/// corrupt, so decompression never allocates more than this).
pub const MAX_RAW: u32 = 65536;

/// Consecutive file blocks compressed together into one node, for a wanted group of
/// `group_bytes` (`Config::compress_group`): whole blocks, at most a quarter of the erase block
/// and [`MAX_RAW`], at least one block. A Python library tree shrinks to 59% of its size with
/// LZ4 one 2 KiB page at a time, 53% in 8 KiB groups, 51% in 16 KiB and 50% in 32 KiB ones;
/// the price is that reading one block reads and decompresses its whole group.
pub fn group_blocks(p: &Params, group_bytes: u32) -> u32 {
    let bytes = group_bytes.min(p.geometry.block_size() / 4).min(MAX_RAW);
    (bytes / p.data_block).max(1)
}

/// Deflate level used when writing (miniz's default trade-off).
#[cfg(feature = "compression")]
const DEFLATE_LEVEL: u8 = 6;

/// The name of an algorithm (for reports and the CLI).
pub fn name(algo: u8) -> &'static str {
    match algo {
        NONE => "none",
        LZ4 => "lz4",
        DEFLATE => "deflate",
        _ => "unknown",
    }
}

/// Parses an algorithm name (`none`, `lz4`, `deflate`).
pub fn parse(s: &str) -> Option<u8> {
    match s {
        "none" | "off" => Some(NONE),
        "lz4" => Some(LZ4),
        "deflate" | "zlib" => Some(DEFLATE),
        _ => None,
    }
}

/// Whether this build can compress and decompress with `algo` (`NONE` always; LZ4 and
/// deflate with the `compression` feature).
pub const fn supported(algo: u8) -> bool {
    algo == NONE || (cfg!(feature = "compression") && (algo == LZ4 || algo == DEFLATE))
}

/// Compresses `input` with `algo`; `None` when the result would be longer than `max_out`
/// bytes (the block does not shrink enough to be worth a compressed node), `algo` is none, or
/// this build does not have it (the block is then stored as it is, which every build reads).
pub fn compress(algo: u8, input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    #[cfg(feature = "compression")]
    {
        let out = match algo {
            LZ4 => lz4_flex::block::compress(input),
            DEFLATE => miniz_oxide::deflate::compress_to_vec(input, DEFLATE_LEVEL),
            _ => return None,
        };
        (out.len() <= max_out).then_some(out)
    }
    #[cfg(not(feature = "compression"))]
    {
        let _ = (algo, input, max_out);
        None
    }
}

/// Decompresses `input` into `out`, which must come out exactly filled. Corrupt or hostile
/// input gives [`Error::Io`]; nothing is allocated beyond `out.len()`. An algorithm this build
/// does not have is [`Error::NotSupported`].
pub fn decompress(algo: u8, input: &[u8], out: &mut [u8]) -> Result<()> {
    match algo {
        #[cfg(feature = "compression")]
        LZ4 => match lz4_flex::block::decompress_into(input, out) {
            Ok(n) if n == out.len() => Ok(()),
            _ => Err(Error::Io),
        },
        #[cfg(feature = "compression")]
        DEFLATE => match miniz_oxide::inflate::decompress_to_vec_with_limit(input, out.len()) {
            Ok(v) if v.len() == out.len() => {
                out.copy_from_slice(&v);
                Ok(())
            }
            _ => Err(Error::Io),
        },
        #[cfg(not(feature = "compression"))]
        LZ4 | DEFLATE => {
            let _ = (input, out);
            Err(Error::NotSupported)
        }
        _ => Err(Error::Io),
    }
}

/// Starts a `DataZ` node for the blocks of `ino` from `block` on: `raw_len` bytes (a whole
/// number of data blocks) compressed with `algo` into `payload`. The caller finishes and
/// writes it like any node.
pub fn dataz_node(ino: u32, block: u32, algo: u8, raw_len: u32, payload: &[u8]) -> NodeBuilder {
    let mut nb = NodeBuilder::new(
        NodeType::DataZ,
        algo,
        ino,
        DATAZ_HEADER as usize + payload.len(),
    );
    nb.w.u32(block).u32(raw_len).bytes(payload);
    nb
}

/// A decoded `DataZ` node body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataZ<'a> {
    /// First file block the node holds.
    pub block: u32,
    /// Uncompressed length: the node holds `raw_len / data_block` consecutive blocks.
    pub raw_len: u32,
    /// Compression algorithm (header flags).
    pub algo: u8,
    /// The compressed bytes.
    pub payload: &'a [u8],
}

impl DataZ<'_> {
    /// Blocks the node holds (`None` when its length is not a whole number of blocks).
    pub fn blocks(&self, data_block: u32) -> Option<u32> {
        (data_block > 0 && self.raw_len % data_block == 0).then_some(self.raw_len / data_block)
    }
}

/// Live bytes each block pointer into a node of `len` (aligned) bytes holding `count` blocks
/// accounts for: the node is credited `count` shares when written, and each pointer that dies
/// takes one share away. Shares round down (at least 1 byte), so a node is never credited
/// more than its length: the credits of a block full of nodes never exceed the block (a
/// credit beyond the block size would be cut, and the kills after it would then take away
/// more than was counted).
pub fn share(len: u32, count: u32) -> u32 {
    (len / count.max(1)).max(1)
}

/// Decodes the body of a verified `DataZ` node (header flags give the algorithm).
pub fn parse_dataz(flags: u8, body: &[u8]) -> Result<DataZ<'_>> {
    let mut r = Reader::new(body);
    let block = r.u32()?;
    let raw_len = r.u32()?;
    let payload = &body[8..];
    if !matches!(flags, LZ4 | DEFLATE) || raw_len == 0 || raw_len > MAX_RAW {
        return Err(Error::Corrupt);
    }
    Ok(DataZ {
        block,
        raw_len,
        algo: flags,
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::node;

    fn text(n: usize) -> Vec<u8> {
        let words = b"flash page block erase program spare ";
        (0..n)
            .map(|i| words[(i * 7 + i / 13) % words.len()])
            .collect()
    }

    fn noise(n: usize, mut s: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    #[test]
    fn both_algorithms_round_trip_compressible_data() {
        let d = text(2048);
        for algo in [LZ4, DEFLATE] {
            let c = compress(algo, &d, 2048).expect("text shrinks");
            assert!(c.len() < d.len() / 2, "{} gave {}", name(algo), c.len());
            let mut out = vec![0u8; d.len()];
            decompress(algo, &c, &mut out).unwrap();
            assert_eq!(out, d);
        }
    }

    #[test]
    fn incompressible_data_is_refused() {
        let d = noise(2048, 7);
        for algo in [LZ4, DEFLATE] {
            assert_eq!(compress(algo, &d, 2000), None);
        }
        assert_eq!(compress(NONE, &text(100), 100), None);
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let d = text(2048);
        for algo in [LZ4, DEFLATE] {
            let c = compress(algo, &d, 2048).unwrap();
            // Wrong declared length: too short and too long.
            let mut small = vec![0u8; 1000];
            assert_eq!(decompress(algo, &c, &mut small), Err(Error::Io));
            let mut big = vec![0u8; 4096];
            assert_eq!(decompress(algo, &c, &mut big), Err(Error::Io));
            // Every truncation and many bit flips: errors or (rarely) other bytes, never a
            // panic and never more than the buffer.
            let mut out = vec![0u8; 2048];
            for cut in 0..c.len() {
                let _ = decompress(algo, &c[..cut], &mut out);
            }
            for i in 0..c.len() {
                for bit in [0x01u8, 0x10, 0x80] {
                    let mut bad = c.clone();
                    bad[i] ^= bit;
                    let _ = decompress(algo, &bad, &mut out);
                }
            }
            for seed in 1..200u64 {
                let junk = noise(64 + (seed as usize * 13) % 700, seed);
                let _ = decompress(algo, &junk, &mut out);
            }
        }
        assert_eq!(decompress(7, &[1, 2, 3], &mut [0u8; 4]), Err(Error::Io));
    }

    #[test]
    fn dataz_node_round_trip() {
        let d = text(2048);
        let c = compress(LZ4, &d, 2048).unwrap();
        let bytes = dataz_node(9, 33, LZ4, 2048, &c).finish(5, 8);
        let (h, body) = node::parse(&bytes, NodeType::DataZ).unwrap();
        assert_eq!(h.len, DATAZ_HEADER + c.len() as u32);
        let z = parse_dataz(h.flags, body).unwrap();
        assert_eq!((z.block, z.raw_len, z.algo), (33, 2048, LZ4));
        let mut out = vec![0u8; 2048];
        decompress(z.algo, z.payload, &mut out).unwrap();
        assert_eq!(out, d);
        assert_eq!(parse_dataz(0, body), Err(Error::Corrupt));
        assert_eq!(parse_dataz(3, body), Err(Error::Corrupt));
        assert!(parse_dataz(LZ4, &body[..6]).is_err());
    }

    #[test]
    fn names_parse_back() {
        for a in [NONE, LZ4, DEFLATE] {
            assert_eq!(parse(name(a)), Some(a));
        }
        assert_eq!(parse("zstd"), None);
    }
}
