use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn small(name: &str, blocks: u32) -> SimFlash {
    let p = preset(name).unwrap().with_blocks(blocks).unwrap();
    SimFlash::new(p).unwrap()
}

#[test]
fn smoke_nand() {
    let dev = small("nand-slc-128m", 64);
    let dev = Fs::format(dev, &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let st = fs.create(ROOT_INO, b"hello.txt", 0o644, 0, 0).unwrap();
    let fh = fs.open(st.ino, OpenFlags::RW).unwrap();
    assert_eq!(fs.write(fh, 0, b"hello world").unwrap(), 11);
    let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    fs.write(fh, 100, &big).unwrap();
    fs.close(fh).unwrap();
    let d = fs.mkdir(ROOT_INO, b"sub", 0o755, 0, 0).unwrap();
    fs.create(d.ino, b"inner", 0o600, 1, 2).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, Config::default()).unwrap();
    let st = fs.lookup(ROOT_INO, b"hello.txt").unwrap();
    assert_eq!(st.size, 100_100);
    let fh = fs.open(st.ino, OpenFlags::READ).unwrap();
    let mut buf = vec![0u8; 100_100];
    assert_eq!(fs.read(fh, 0, &mut buf).unwrap(), 100_100);
    assert_eq!(&buf[..11], b"hello world");
    assert_eq!(&buf[100..], &big[..]);
    let d = fs.lookup(ROOT_INO, b"sub").unwrap();
    let i = fs.lookup(d.ino, b"inner").unwrap();
    assert_eq!((i.uid, i.gid, i.mode & 0o777), (1, 2, 0o600));
    let mut names = Vec::new();
    fs.readdir(ROOT_INO, 0, &mut |e| {
        names.push(e.name);
        true
    })
    .unwrap();
    names.sort();
    assert_eq!(names, vec![b"hello.txt".to_vec(), b"sub".to_vec()]);
}
