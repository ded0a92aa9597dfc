//! `dffs mkdir IMAGE PATH [-p] [-m MODE]`: a directory created in an image.
//!
//! Owns the command's flow: new directories belong to 0:0 (images hold root file systems) with
//! mode 0755 unless `-m` says otherwise; `-p` creates missing parents and accepts an existing
//! directory. It must never leave the image half-changed: on failure nothing is written back.

use std::io::Write;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use dffs::{FileKind, ROOT_INO};

use super::image::{fs_path, join, Access, RawArgs, Session};
use super::CliError;

/// Options of `dffs mkdir`.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Image file.
    pub image: PathBuf,
    /// Directory to create inside the image.
    pub path: PathBuf,
    /// Create missing parent directories too; an existing directory is not an error.
    #[arg(short = 'p', long)]
    pub parents: bool,
    /// Permission bits, in octal.
    #[arg(short = 'm', long, default_value = "755", value_parser = parse_mode)]
    pub mode: u32,
    #[command(flatten)]
    pub raw: RawArgs,
}

/// Parses an octal mode such as `755` or `0700`.
pub fn parse_mode(text: &str) -> Result<u32, String> {
    match u32::from_str_radix(text, 8) {
        Ok(m) if m <= 0o7777 => Ok(m),
        _ => Err(format!("'{text}' is not an octal mode (e.g. 755)")),
    }
}

/// Runs `dffs mkdir`.
pub fn run(args: &Args, _out: &mut dyn Write) -> Result<(), CliError> {
    let mut s = Session::open(&args.image, Access::ReadWrite, &args.raw)?;
    let path = fs_path(args.path.as_os_str());
    if args.parents {
        let mut cur = ROOT_INO;
        let mut at: Vec<u8> = b"/".to_vec();
        for comp in path.split(|&c| c == b'/').filter(|c| !c.is_empty()) {
            at = join(&at, comp);
            match s.lookup_follow(&at)? {
                Some(st) if st.kind == FileKind::Dir => cur = st.ino,
                Some(_) => return Err(s.err(&at, dffs::Error::NotDir)),
                None => {
                    let st = s.fs().mkdir(cur, comp, args.mode, 0, 0);
                    cur = st.map_err(|e| s.err(&at, e))?.ino;
                }
            }
        }
    } else {
        let (parent, name) = s.resolve_parent(&path)?;
        s.fs()
            .mkdir(parent, &name, args.mode, 0, 0)
            .map_err(|e| s.err(&path, e))?;
    }
    s.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_modes() {
        assert_eq!(parse_mode("755"), Ok(0o755));
        assert_eq!(parse_mode("0700"), Ok(0o700));
        assert_eq!(parse_mode("1777"), Ok(0o1777));
        assert!(parse_mode("9").is_err());
        assert!(parse_mode("17777").is_err());
        assert!(parse_mode("").is_err());
    }
}
