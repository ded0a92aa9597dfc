//! Diagnostic: the cost of creating many files, per thousand (programs, reads, erases,
//! checkpoints, GC), and the cost of a lookup at the end.
//!
//! `cargo run --release -p dffs --example scale -- PRESET FILES DIRS SIZE [fast|default|smallest]`
use dffs::{Config, FormatOptions, Fs, OpenFlags, ROOT_INO};
use dffs_sim::{preset::preset, SimFlash};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map(String::as_str).unwrap_or("nand-slc-128m");
    let files: u64 = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let ndirs: u64 = a.get(3).and_then(|v| v.parse().ok()).unwrap_or(1);
    let size: usize = a.get(4).and_then(|v| v.parse().ok()).unwrap_or(0);
    let cfg = match a.get(5).map(String::as_str) {
        Some("fast") => Config::fast(),
        Some("smallest") => Config::smallest(),
        _ => Config::default(),
    };
    let p = preset(name).unwrap();
    let dev = Fs::format(SimFlash::new(p).unwrap(), &FormatOptions::default()).unwrap();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let mut dirs = vec![ROOT_INO];
    if ndirs > 1 {
        dirs.clear();
        for d in 0..ndirs {
            dirs.push(
                fs.mkdir(ROOT_INO, format!("d{d:03}").as_bytes(), 0o755, 0, 0)
                    .unwrap()
                    .ino,
            );
        }
    }
    let data = vec![0x5au8; size];
    let step: u64 = std::env::var("STEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or((files / 10).max(1));
    let mut last = fs.activity();
    let t0 = std::time::Instant::now();
    for i in 0..files {
        let d = dirs[(i % ndirs) as usize];
        let ino = match fs.create(d, format!("file{i:07}").as_bytes(), 0o644, 0, 0) {
            Ok(s) => s.ino,
            Err(e) => {
                println!("create {i}: {e:?} {:?}", fs.statfs());
                println!("{}", fs.debug_block_summary());
                break;
            }
        };
        if size > 0 {
            let fh = fs.open(ino, OpenFlags::RW).unwrap();
            if let Err(e) = fs.write(fh, 0, &data) {
                println!("write {i}: {e:?} {:?}", fs.statfs());
                break;
            }
            fs.close(fh).unwrap();
        }
        if (i + 1) % step == 0 {
            let now = fs.activity();
            let n = step as f64;
            println!(
                "{:>8} files: per create {:.2} prog {:.2} read {:.3} erase; {} checkpoints, {} gc blocks, {} KiB moved, {} wl; ram {}",
                i + 1,
                (now.ops.programs - last.ops.programs) as f64 / n,
                (now.ops.reads - last.ops.reads) as f64 / n,
                (now.ops.erases - last.ops.erases) as f64 / n,
                now.checkpoints - last.checkpoints,
                now.gc_blocks - last.gc_blocks,
                (now.gc_moved_bytes - last.gc_moved_bytes) >> 10,
                now.wl_moves - last.wl_moves,
                fs.ram_bytes()
            );
            println!("         {}", fs.debug_ram_summary());
            let info = fs.info();
            println!("         erase counts {:?}", info.erase_count);
            println!("         {}", fs.debug_block_summary());
            last = now;
        }
    }
    println!("host time {:?}", t0.elapsed());
    let before = fs.op_counts();
    let n = 200u64.min(files);
    for k in 0..n {
        let i = k * files / n;
        let d = dirs[(i % ndirs) as usize];
        fs.lookup(d, format!("file{i:07}").as_bytes()).unwrap();
    }
    let after = fs.op_counts();
    println!(
        "warm lookups: {:.2} reads each",
        (after.reads - before.reads) as f64 / n as f64
    );
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, cfg).unwrap();
    let info = fs.info();
    println!("mount: {:?}, ram {}", info.mount_cost, info.ram_bytes);
    let before = fs.op_counts();
    for k in 0..n {
        let i = k * files / n;
        let d = dirs[(i % ndirs) as usize];
        fs.lookup(d, format!("file{i:07}").as_bytes()).unwrap();
    }
    let after = fs.op_counts();
    println!(
        "cold lookups: {:.2} reads each",
        (after.reads - before.reads) as f64 / n as f64
    );
    println!("{:?}", fs.statfs());
}
