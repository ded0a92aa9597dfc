use dffs::{Config, FormatOptions, Fs, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

#[test]
/// Regression: a recovery checkpoint after a crash must be newer than the checkpoint it recovers
/// from (it once reused its number and lost to it at the next mount).
fn crash_remount_twice_keeps_both_sessions() {
    let p = preset("nand-mlc-1g").unwrap().with_blocks(24).unwrap();
    let dev = SimFlash::new(p).unwrap();
    let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
    let cfg = Config::smallest();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.mkdir(ROOT_INO, b"c", 0o755, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.lookup(ROOT_INO, b"c").unwrap();
    fs.create(ROOT_INO, b"x", 0o644, 0, 0).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_flash();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    fs.lookup(ROOT_INO, b"c").unwrap();
    fs.lookup(ROOT_INO, b"x").unwrap();
}
