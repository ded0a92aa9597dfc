//! `dffs format IMAGE [--preset NAME] [--size SIZE]`: a new, empty file system on an image
//! (or on an MTD device, `dffs format /dev/mtdN`).
//!
//! Owns the command's flow and its one-line summary. Creating or reopening the device is
//! `image.rs`'s job; this module must never write the image before the format succeeded, and
//! never overwrite a file that is not a device image.

use std::io::Write;

use dffs::Flash;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::image::{self, Access, Caches, Compress, DeviceArgs, Session};
use super::{human_bytes, size, CliError};

/// Options of `dffs format`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file; created if missing, reformatted (same device) if it exists.
    pub image: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Compression of file data: none, lz4 or deflate (recorded in the file system; every
    /// file written later gets it too).
    #[arg(long, value_enum, default_value_t = Compress::None)]
    pub compress: Compress,
}

/// Runs `dffs format`.
pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let sim = image::device_for_format(&args.image, &args.device)?;
    let sim = image::format_device(&args.image, sim, args.compress)?;
    // Mount once to report what the new file system offers (and to prove it mounts).
    let mut s = Session::mount(sim, &args.image, Access::ReadWrite, Caches::Embedded)?;
    let info = s.fs().info();
    let label = s.device().label();
    let g = s.device().geometry();
    s.finish()?;
    writeln!(
        out,
        "{}: formatted {} ({}, {} blocks of {}, {} bad): {} free",
        args.image.display(),
        label,
        size(g.capacity()),
        g.blocks,
        size(g.block_size() as u64),
        info.bad_blocks,
        human_bytes(info.free_bytes)
    )?;
    Ok(())
}
