//! A simulated device whose synced state reaches its image file while it is mounted.
//!
//! Owns [`ImageFlash`]: a [`SimFlash`] that remembers which pages changed since the last
//! [`ImageFlash::persist`], and the write-ahead file `<image>.wal` that makes each persist
//! atomic. A persist first writes every changed page (data and OOB, as the image holds them)
//! into the WAL with a checksum, then writes the pages in place into the image, then empties
//! the WAL. A process killed at any moment therefore leaves either the image as of the previous
//! persist (the WAL is incomplete and ignored) or a complete WAL that [`recover`] applies before
//! the next mount: the image always shows the device as it was at one persist point, never a
//! mix of two. The clean end of a session is still [`SimFlash::save`] (image and sidecar).
//!
//! It must never change a page's contents itself, write anything for a read-only session, or
//! leave a WAL that [`recover`] would apply after a clean save.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use dffs::{EccStatus, Flash, FlashError, Geometry};
use dffs_sim::SimFlash;

const WAL_MAGIC: &[u8; 8] = b"DFFSWAL1";
const WAL_END: &[u8; 8] = b"DFFSEND1";

/// The write-ahead file of an image: the image path with `.wal` appended.
pub fn wal_path(image: &Path) -> PathBuf {
    let mut s = image.as_os_str().to_owned();
    s.push(".wal");
    PathBuf::from(s)
}

/// FNV-1a, 64 bits: enough to tell a complete WAL from a torn one.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A writer that checksums what passes through it.
struct Summed<W: Write> {
    inner: W,
    sum: Fnv,
}

impl<W: Write> Summed<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sum.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// Applies a complete WAL left by a killed session to the image at `image`, then removes it.
/// Returns how many pages were applied (0: there was no WAL, or only a torn one, which is
/// discarded because the image still holds the previous persist point).
pub fn recover(image: &Path) -> io::Result<usize> {
    let wal = wal_path(image);
    let mut bytes = Vec::new();
    match File::open(&wal) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    }
    let applied = match parse_wal(&bytes) {
        Some((page_bytes, pages)) => {
            let img = OpenOptions::new().write(true).open(image)?;
            for (page, raw) in &pages {
                img.write_all_at(raw, *page as u64 * page_bytes as u64)?;
            }
            img.sync_data()?;
            pages.len()
        }
        None => 0,
    };
    std::fs::remove_file(&wal)?;
    Ok(applied)
}

/// Pages of a WAL: (page number, raw bytes as the image holds them).
type WalPages<'a> = Vec<(u32, &'a [u8])>;

/// The pages of a complete WAL (page size in the image, and the pages).
fn parse_wal(b: &[u8]) -> Option<(u32, WalPages<'_>)> {
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    if b.get(..8)? != WAL_MAGIC {
        return None;
    }
    let page_bytes = u32_at(8)?;
    let count = u32_at(12)? as usize;
    let rec = 4 + page_bytes as usize;
    let body_end = 16usize.checked_add(count.checked_mul(rec)?)?;
    if b.len() != body_end + 16 || page_bytes == 0 {
        return None;
    }
    let mut sum = Fnv::new();
    sum.update(&b[..body_end]);
    if b[body_end..body_end + 8] != sum.0.to_le_bytes() || &b[body_end + 8..] != WAL_END {
        return None;
    }
    let pages = (0..count)
        .map(|i| {
            let o = 16 + i * rec;
            (u32_at(o).unwrap_or(0), &b[o + 4..o + rec])
        })
        .collect();
    Some((page_bytes, pages))
}

/// A session's hold on its image file: an exclusive `flock` for a read-write session (shared
/// for a read-only one), from before the image is opened until after it is saved, so that a
/// session started right after `umount` waits for the previous one to finish saving.
pub struct ImageLock {
    _file: File,
}

impl ImageLock {
    /// Locks the image at `path`, waiting up to `wait` for another session to let go.
    pub fn acquire(
        path: &Path,
        exclusive: bool,
        wait: std::time::Duration,
    ) -> io::Result<ImageLock> {
        use std::os::fd::AsRawFd;
        let file = OpenOptions::new().read(true).open(path)?;
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        let start = std::time::Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own has no memory effects.
            if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } == 0 {
                return Ok(ImageLock { _file: file });
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(e);
            }
            if start.elapsed() >= wait {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the image is in use by another dffs mount session",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// Saves `sim`'s sidecar next to the image at `path` whose pages already hold `sim`'s
/// contents (after a final [`ImageFlash::persist`]): the image file keeps its inode (and so
/// the session's lock on it); only the sidecar is replaced, atomically.
pub fn save_sidecar(sim: &SimFlash, path: &Path) -> Result<(), String> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{}.dffs-final-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let side = dffs_sim::sidecar_path(path);
    let r = sim.save(&tmp).map_err(|e| e.to_string()).and_then(|()| {
        std::fs::rename(dffs_sim::sidecar_path(&tmp), &side)
            .map_err(|e| format!("{}: {e}", side.display()))
    });
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_file(dffs_sim::sidecar_path(&tmp));
    r
}

/// A simulated device that writes its changed pages through to its image file on
/// [`ImageFlash::persist`].
pub struct ImageFlash {
    sim: SimFlash,
    image: Option<(PathBuf, File)>,
    dirty: BTreeSet<u32>,
    page_bytes: u32,
    persists: u64,
}

impl ImageFlash {
    /// Wraps `sim`, the device of the image at `path`. With `writable`, the image is opened for
    /// in-place writes now (it must exist and hold `sim`'s current contents, as a freshly
    /// opened or saved image does); without, nothing is ever written.
    pub fn new(sim: SimFlash, path: &Path, writable: bool) -> io::Result<ImageFlash> {
        let g = sim.geometry();
        let image = if writable {
            let f = OpenOptions::new().write(true).open(path)?;
            let want = (g.page_size as u64 + g.oob_size as u64) * g.total_pages() as u64;
            let have = f.metadata()?.len();
            if have != want {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("image is {have} B, the device needs {want} B"),
                ));
            }
            Some((path.to_path_buf(), f))
        } else {
            None
        };
        Ok(ImageFlash {
            sim,
            image,
            dirty: BTreeSet::new(),
            page_bytes: g.page_size + g.oob_size,
            persists: 0,
        })
    }

    /// The simulated device.
    pub fn sim(&self) -> &SimFlash {
        &self.sim
    }

    /// Gives the simulated device back (pages not yet persisted are in it, not in the image).
    pub fn into_sim(self) -> SimFlash {
        self.sim
    }

    /// Pages changed since the last persist.
    pub fn dirty_pages(&self) -> usize {
        self.dirty.len()
    }

    /// Persists done so far (each one wrote at least one page).
    pub fn persists(&self) -> u64 {
        self.persists
    }

    /// Makes the image file hold the device's current contents: through the WAL, then in
    /// place. A no-op when nothing changed or the session is read-only.
    pub fn persist(&mut self) -> io::Result<()> {
        if let Some(wal) = self.write_wal()? {
            self.apply(wal)?;
        }
        Ok(())
    }

    /// Only the first half of a persist: the WAL is complete, the image not yet written (what
    /// a session killed in the middle of a persist leaves). For tests of [`recover`].
    #[doc(hidden)]
    pub fn persist_wal_only(&mut self) -> io::Result<()> {
        self.write_wal().map(|_| ())
    }

    /// Writes the changed pages into the WAL; `None` when there is nothing to write.
    fn write_wal(&mut self) -> io::Result<Option<File>> {
        let Some((path, _)) = &self.image else {
            self.dirty.clear();
            return Ok(None);
        };
        if self.dirty.is_empty() {
            return Ok(None);
        }
        let wal = wal_path(path);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&wal)?;
        let mut w = Summed {
            inner: BufWriter::with_capacity(1 << 20, file),
            sum: Fnv::new(),
        };
        w.put(WAL_MAGIC)?;
        w.put(&self.page_bytes.to_le_bytes())?;
        w.put(&(self.dirty.len() as u32).to_le_bytes())?;
        for &p in &self.dirty {
            let raw = self.sim.raw_page(p).map_err(flash_io)?;
            w.put(&p.to_le_bytes())?;
            w.put(&raw)?;
        }
        let sum = w.sum.0;
        let mut file = w.inner.into_inner().map_err(|e| e.into_error())?;
        file.write_all(&sum.to_le_bytes())?;
        file.write_all(WAL_END)?;
        Ok(Some(file))
    }

    /// Writes the changed pages in place, then empties the WAL.
    fn apply(&mut self, wal: File) -> io::Result<()> {
        let Some((_, img)) = &self.image else {
            return Ok(());
        };
        for &p in &self.dirty {
            let raw = self.sim.raw_page(p).map_err(flash_io)?;
            img.write_all_at(&raw, p as u64 * self.page_bytes as u64)?;
        }
        wal.set_len(0)?;
        self.dirty.clear();
        self.persists += 1;
        Ok(())
    }

    /// Removes an (empty) WAL after the image was saved whole.
    pub fn forget_wal(path: &Path) {
        let _ = std::fs::remove_file(wal_path(path));
    }

    fn touch_block(&mut self, block: u32) {
        let ppb = self.sim.geometry().pages_per_block;
        self.dirty
            .extend(block.saturating_mul(ppb)..block.saturating_add(1).saturating_mul(ppb));
    }
}

fn flash_io(e: FlashError) -> io::Error {
    io::Error::other(format!("simulated device: {e:?}"))
}

impl Flash for ImageFlash {
    fn geometry(&self) -> Geometry {
        self.sim.geometry()
    }

    fn read(
        &mut self,
        page: u32,
        offset: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<EccStatus, FlashError> {
        self.sim.read(page, offset, data, oob)
    }

    fn program(
        &mut self,
        page: u32,
        offset: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), FlashError> {
        let r = self.sim.program(page, offset, data, oob);
        // A failed program may have left partial contents: the image follows the device.
        if page < self.sim.geometry().total_pages() {
            self.dirty.insert(page);
        }
        r
    }

    fn erase(&mut self, block: u32) -> Result<(), FlashError> {
        let r = self.sim.erase(block);
        if block < self.sim.geometry().blocks {
            self.touch_block(block);
        }
        r
    }

    fn is_bad(&mut self, block: u32) -> Result<bool, FlashError> {
        self.sim.is_bad(block)
    }

    fn mark_bad(&mut self, block: u32) -> Result<(), FlashError> {
        let r = self.sim.mark_bad(block);
        if block < self.sim.geometry().blocks {
            self.touch_block(block);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_wals_are_refused() {
        let mut b = Vec::new();
        b.extend_from_slice(WAL_MAGIC);
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&7u32.to_le_bytes());
        b.extend_from_slice(&[1, 2, 3, 4]);
        let mut s = Fnv::new();
        s.update(&b);
        let body = b.clone();
        b.extend_from_slice(&s.0.to_le_bytes());
        b.extend_from_slice(WAL_END);
        let (pb, pages) = parse_wal(&b).unwrap();
        assert_eq!(pb, 4);
        assert_eq!(pages, vec![(7u32, &[1u8, 2, 3, 4][..])]);
        assert!(parse_wal(&b[..b.len() - 1]).is_none());
        assert!(parse_wal(&body).is_none());
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert!(parse_wal(&bad).is_none());
    }
}
