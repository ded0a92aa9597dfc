//! Truncating files, open (through the overlay) or not (a commit of its own).
//!
//! It must never free a block a committed version of the file still maps.

use crate::error::{Error, Result};
use crate::format::attrs::Ino;
use crate::format::params::Addr;
use crate::fs::files::handles::Fh;
use crate::fs::Fs;
use crate::index::file::{blocks_for, inline_limit};
use alloc::vec;
use alloc::vec::Vec;
use dffs_flash::Flash;

impl<F: Flash> Fs<F> {
    /// Truncates or extends an open file through its handle.
    pub fn truncate(&mut self, fh: Fh, size: u64) -> Result<()> {
        self.guard(|fs| {
            let h = fs.handle(fh)?;
            if !h.flags.write {
                return Err(Error::BadHandle);
            }
            fs.ensure_writable()?;
            fs.truncate_ino(h.ino, size)?;
            if h.flags.sync || fs.cfg.sync {
                fs.commit_ino(h.ino)?;
                fs.journal_flush()?;
            }
            fs.after_op()
        })
    }

    /// Sets the size of `ino`; a file that is not open is committed right away.
    pub(crate) fn truncate_ino(&mut self, ino: Ino, size: u64) -> Result<()> {
        let p = self.store.p();
        if size > p.max_file_size() {
            return Err(Error::TooBig);
        }
        let was_open = self
            .open
            .files
            .get(&ino)
            .map(|o| o.refs > 0)
            .unwrap_or(false);
        if !was_open {
            self.open.files.get_or_default(ino).refs += 1;
        }
        let r = self.truncate_open(ino, size);
        let r = r.and_then(|_| {
            if was_open {
                Ok(())
            } else {
                self.commit_ino(ino)
            }
        });
        if !was_open {
            self.release(ino)?;
        }
        r
    }

    fn truncate_open(&mut self, ino: Ino, size: u64) -> Result<()> {
        let p = self.store.p();
        let bs = p.data_block as u64;
        let stride = p.stride();
        let now = self.now();
        let node = self.committed(ino)?;
        let limit = inline_limit(&p, node.names_len()) as u64;
        let cur = self.cur_size(ino)?;
        let ov = self.overlay(ino)?;
        ov.mtime = now;
        ov.ctime = now;
        if let Some(d) = ov.inline.as_mut() {
            if size <= limit {
                d.resize(size as usize, 0);
                ov.size = size;
                return Ok(());
            }
        }
        if ov.inline.is_some() {
            // Grows beyond inline: keep the bytes as block 0.. and extend.
            let d = ov.inline.take().unwrap_or_default();
            ov.trunc_to = Some(0);
            ov.size = size;
            for b in 0..blocks_for(d.len() as u64, p.data_block) {
                let mut blk = vec![0u8; bs as usize];
                let s = (b * bs) as usize;
                let e = (s + bs as usize).min(d.len());
                blk[..e - s].copy_from_slice(&d[s..e]);
                self.data_cache.put(ino, b as u32, blk, true);
            }
            return Ok(());
        }
        if size < cur {
            let keep = blocks_for(size, p.data_block) as u32;
            if let Some(mut sp) = ov.spilled.take() {
                // A spilled update cuts its own map; its own blocks beyond die now, committed
                // ones at commit.
                let mut mapped: Vec<(u32, Addr)> = sp
                    .pending
                    .iter_blocks(stride)
                    .filter(|(b, a)| *b >= keep && !a.is_none())
                    .collect();
                {
                    let mut ix = self.tree(ino);
                    let c = &sp;
                    ix.walk(
                        c,
                        &mut |b, a| {
                            if b >= keep
                                && c.pending.get(b, stride).is_none()
                                && c.trunc.is_none_or(|t| b < t)
                            {
                                mapped.push((b, a))
                            }
                        },
                        &mut |_, _, _| {},
                    )?;
                }
                for (b, a) in mapped {
                    if !self.is_committed_block(ino, b, a)? {
                        self.kill_data(a)?;
                    }
                }
                sp.pending.truncate(keep, stride);
                sp.trunc = Some(sp.trunc.map_or(keep, |t| t.min(keep)));
                let ov = self.overlay(ino)?;
                ov.spilled = Some(sp);
                ov.size = size;
            } else {
                ov.trunc_to = Some(ov.trunc_to.map_or(size, |t| t.min(size)));
                let dead: Vec<Addr> = ov
                    .extents
                    .iter_blocks(stride)
                    .filter(|(b, a)| *b >= keep && !a.is_none())
                    .map(|x| x.1)
                    .collect();
                ov.extents.truncate(keep, stride);
                ov.size = size;
                for a in dead {
                    self.kill_data(a)?;
                }
            }
            self.data_cache.drop_from(ino, keep);
            // Zero the tail of the last partial block.
            if size % bs != 0 {
                let b = (size / bs) as u32;
                let mut blk = self.get_block(ino, &node, b)?;
                blk[(size % bs) as usize..].fill(0);
                self.data_cache.put(ino, b, blk, true);
                // The tail block is rewritten; make sure the truncation point is block aligned
                // for the commit (blocks from `keep` are dropped, the rewritten one replaces).
            }
        } else {
            ov.size = size;
        }
        Ok(())
    }
}
