//! Finding the commits that data pages carry in their OOB tags (NAND): after a power cut,
//! recovery reads the tags of the user-data head's pages written since the checkpoint (the
//! block the checkpoint recorded, from its recorded offset, and each block a `JDataBlock`
//! record named) and collects every complete commit run (FORMAT.md §8.7): a page tagged
//! `first`, the pages after it with the same inode, the next file block and the next sequence
//! number each, and a last page whose tag commits them. A commit page's data is read and
//! checked only where a cut program could have torn it (FORMAT.md §12 step 3).
//!
//! It must never apply anything (replay merges the runs with the journal's records by sequence
//! number) and never write.

use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::format::codec::crc32c;
use crate::format::node::{DataEnd, OobTag, TAG_DATA};
use crate::format::params::Addr;
use crate::store::Store;
use dffs_flash::{EccStatus, Flash};

/// Erased pages in a row after which a block holds nothing more.
const ERASED_END: u32 = 3;

/// A commit carried by data page tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TagCommit {
    /// Sequence number of the run's last page (orders it among the journal's records).
    pub seq: u64,
    /// The file.
    pub ino: u32,
    /// File block of the run's first page.
    pub first: u32,
    /// Address of each page of the run (file blocks `first`, `first + 1`, …).
    pub pages: Vec<Addr>,
    /// What the last page's tag says about the file's size.
    pub end: DataEnd,
}

/// What a scan found.
#[derive(Clone, Debug, Default)]
pub(crate) struct TagScan {
    /// Complete runs, in the order they were written.
    pub commits: Vec<TagCommit>,
    /// Highest sequence number of any data page read (0: none).
    pub max_seq: u64,
    /// Commit pages whose run could not be read whole (an unreadable page inside it).
    pub lost: u32,
}

/// A run being collected.
struct Run {
    ino: u32,
    first: u32,
    next_block: u32,
    next_seq: u64,
    pages: Vec<Addr>,
}

/// A page's ECC status and tag.
type Tagged = (EccStatus, Result<Option<OobTag>>);

/// The tag of `page`, read without its data; a read that fails is an unreadable tag.
fn read_tag<F: Flash>(st: &mut Store<F>, page: u32) -> Result<Tagged> {
    match st.read_tagged_page(page, &mut []) {
        Ok(x) => Ok(x),
        Err(Error::PowerLoss) => Err(Error::PowerLoss),
        Err(_) => Ok((EccStatus::Uncorrectable, Err(Error::Io))),
    }
}

/// Whether `page` reads whole: readable, its data matching the CRC its tag gives.
fn data_whole<F: Flash>(st: &mut Store<F>, page: u32, buf: &mut [u8], crc: u32) -> Result<bool> {
    match st.read_tagged_page(page, buf) {
        Ok((status, _)) => Ok(status != EccStatus::Uncorrectable && crc32c(buf) == crc),
        Err(Error::PowerLoss) => Err(Error::PowerLoss),
        Err(_) => Ok(false),
    }
}

/// Scans `blocks` (each with the offset to start at) in order. `base_seq` is the checkpoint's
/// next sequence number: tags carry the low 32 bits, pages written after it are within 2³¹
/// of it.
pub(crate) fn scan<F: Flash>(
    st: &mut Store<F>,
    blocks: &[(u32, u32)],
    base_seq: u64,
) -> Result<TagScan> {
    let p = st.p();
    let g = p.geometry;
    let ps = g.page_size;
    let ppb = g.pages_per_block;
    let mut out = TagScan::default();
    let mut buf = vec![0u8; ps as usize];
    for &(b, off) in blocks {
        if b >= g.blocks {
            continue;
        }
        let mut run: Option<Run> = None;
        // Unreadable pages since the last readable one (their addresses).
        let mut unknown: Vec<Addr> = Vec::new();
        let mut erased = 0;
        // The tag of the page after the last one read, when a commit page needed it.
        let mut ahead: Option<Tagged> = None;
        for i in off.div_ceil(ps)..ppb {
            let page = b * ppb + i;
            let addr = p.addr_of(page as u64 * ps as u64);
            let (status, tag) = match ahead.take() {
                Some(t) => t,
                None => read_tag(st, page)?,
            };
            let tag = match (status, tag) {
                (EccStatus::Uncorrectable, _) | (_, Err(_)) => {
                    erased = 0;
                    unknown.push(addr);
                    continue;
                }
                (_, Ok(None)) => {
                    erased += 1;
                    if erased >= ERASED_END {
                        break;
                    }
                    continue;
                }
                (_, Ok(Some(t))) => t,
            };
            erased = 0;
            if tag.kind != TAG_DATA {
                run = None;
                unknown.clear();
                continue;
            }
            let seq = base_seq.wrapping_add(tag.seq.wrapping_sub(base_seq as u32) as u64);
            out.max_seq = out.max_seq.max(seq);
            // A commit page must be whole: a program cut in mid-page can leave a tag that
            // passes its check over data that does not. Only the last page a block's program
            // reached can be cut so (a recovery leaves the page after it unwritten), so a
            // commit page followed by a page with a tag was whole; any other is read and its
            // data checked.
            if tag.end != DataEnd::No {
                let followed = if i + 1 < ppb {
                    let next = read_tag(st, page + 1)?;
                    let tagged =
                        next.0 != EccStatus::Uncorrectable && matches!(next.1, Ok(Some(_)));
                    ahead = Some(next);
                    tagged
                } else {
                    false
                };
                if !followed && !data_whole(st, page, &mut buf, tag.data_crc)? {
                    run = None;
                    unknown.clear();
                    continue;
                }
            }
            let gap = unknown.len() as u32;
            let continues = |r: &Run| {
                r.ino == tag.ino
                    && r.next_block.wrapping_add(gap) == tag.block
                    && r.next_seq.wrapping_add(gap as u64) == seq
            };
            if tag.first() {
                unknown.clear();
                run = Some(Run {
                    ino: tag.ino,
                    first: tag.block,
                    next_block: tag.block,
                    next_seq: seq,
                    pages: Vec::new(),
                });
            } else if run.as_ref().is_some_and(continues) {
                // Unreadable pages between are part of the run: their blocks read as errors.
            } else if run.is_none() && gap == 1 && tag.block > 0 {
                // The run's first page is the one unreadable page before this one.
                run = Some(Run {
                    ino: tag.ino,
                    first: tag.block - 1,
                    next_block: tag.block - 1,
                    next_seq: seq.wrapping_sub(1),
                    pages: Vec::new(),
                });
            } else {
                if tag.end != DataEnd::No {
                    out.lost += 1;
                }
                run = None;
                unknown.clear();
                continue;
            }
            if let Some(r) = run.as_mut() {
                r.pages.append(&mut unknown);
                r.pages.push(addr);
                r.next_block = tag.block.wrapping_add(1);
                r.next_seq = seq + 1;
            }
            unknown.clear();
            if tag.end != DataEnd::No {
                if let Some(r) = run.take() {
                    out.commits.push(TagCommit {
                        seq,
                        ino: r.ino,
                        first: r.first,
                        pages: r.pages,
                        end: tag.end,
                    });
                }
            }
        }
    }
    Ok(out)
}
