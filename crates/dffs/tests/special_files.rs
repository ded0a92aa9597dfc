//! Special files: named pipes, sockets and device nodes are stored with their type and device
//! number, survive remounts and power cuts, list and unlink like files, and are never opened
//! for I/O by the library.

use dffs::format::attrs::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT, S_IFSOCK};
use dffs::{Config, Error, FormatOptions, Fs, OpenFlags, SetAttr, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

#[test]
fn pipes_sockets_and_devices_keep_their_type_and_number() {
    for name in ["nand-slc-128m", "nor-qspi-16m"] {
        let p = preset(name).unwrap().with_blocks(32).unwrap();
        let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        let cases = [
            (&b"fifo"[..], S_IFIFO | 0o640, 0u32),
            (b"sock", S_IFSOCK | 0o600, 0),
            (b"tty", S_IFCHR | 0o620, (4 << 8) | 1),
            (b"disk", S_IFBLK | 0o660, (8 << 8) | 16),
        ];
        for &(n, mode, rdev) in &cases {
            let st = fs.mknod(ROOT_INO, n, mode, rdev, 7, 8).unwrap();
            assert_eq!(st.mode, mode);
            assert_eq!(st.rdev, rdev);
            assert_eq!((st.size, st.uid, st.gid), (0, 7, 8));
            assert_eq!(
                fs.open(st.ino, OpenFlags::READ).unwrap_err(),
                Error::Invalid
            );
        }
        assert_eq!(
            fs.mknod(ROOT_INO, b"d", S_IFDIR | 0o755, 0, 0, 0)
                .unwrap_err(),
            Error::Invalid
        );
        assert_eq!(
            fs.mknod(ROOT_INO, b"fifo", S_IFIFO | 0o600, 0, 0, 0)
                .unwrap_err(),
            Error::Exists
        );
        // One more that only the journal knows at the cut.
        fs.sync().unwrap();
        let late = fs
            .mknod(ROOT_INO, b"late", S_IFCHR | 0o600, 77, 0, 0)
            .unwrap();
        fs.sync().unwrap();
        let mut dev = fs.into_flash();
        dev.power_off();
        dev.power_up();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        for &(n, mode, rdev) in &cases {
            let st = fs.lookup(ROOT_INO, n).unwrap();
            assert_eq!((st.mode, st.rdev, st.size), (mode, rdev, 0), "{name}");
        }
        assert_eq!(fs.stat(late.ino).unwrap().rdev, 77);
        // chmod keeps the type; truncate is refused.
        let st = fs
            .setattr(
                late.ino,
                SetAttr {
                    mode: Some(0o644),
                    ..SetAttr::default()
                },
            )
            .unwrap();
        assert_eq!(st.mode & S_IFMT, S_IFCHR);
        assert_eq!(st.mode & 0o7777, 0o644);
        let refused = fs.setattr(
            late.ino,
            SetAttr {
                size: Some(10),
                ..SetAttr::default()
            },
        );
        assert_eq!(refused.unwrap_err(), Error::Invalid);
        let mut names = Vec::new();
        fs.readdir(ROOT_INO, 0, &mut |e| {
            names.push(e.name);
            true
        })
        .unwrap();
        names.sort();
        assert_eq!(names.len(), 5);
        fs.unlink(ROOT_INO, b"tty").unwrap();
        assert_eq!(fs.lookup(ROOT_INO, b"tty").unwrap_err(), Error::NotFound);
        assert!(fs.fsck().unwrap().is_clean());
        let dev = fs.unmount().unwrap();
        let mut fs = Fs::mount(dev, Config::default()).unwrap();
        assert_eq!(fs.lookup(ROOT_INO, b"disk").unwrap().rdev, (8 << 8) | 16);
        assert!(fs.fsck().unwrap().is_clean());
    }
}
