//! Minimal reproductions of DFFS bugs the benchmark suites ran into, kept as regression tests
//! once the DFFS core fixed them (a new one is added `#[ignore = "dffs bug: ..."]` until it is
//! fixed). They use only DFFS's public API and the simulator (plus the bench crate's
//! deterministic content), so they can move into `crates/dffs/tests` as they are.

use dffs::{FormatOptions, Fs};
use dffs_bench::content::Content;
use dffs_bench::devices::{device_preset, new_device};
use dffs_bench::dffs_fs::DffsDriver;
use dffs_bench::fsapi::{verify_file, write_file, Driver, End, OpenMode};

/// `nor-qspi-16m` with its 4 KiB erase sectors (the usual littlefs configuration, and the
/// brief's raw NOR limit) could not be formatted: the checkpoint's block table had to fit in one
/// erase block, which failed from 256 sectors (1 MiB) up. Found by the `nor` suite (which falls
/// back to 64 KiB block erases for DFFS when this fails); passes at 1269459 (a204f7d).
#[test]
fn nor_4k_sectors_format() {
    for kib in [1024u64, 2048, 16384] {
        let p = device_preset("nor-qspi-16m", Some(kib << 10)).unwrap();
        assert_eq!(p.geometry.block_size(), 4096);
        let r = Fs::format(new_device(p).unwrap(), &FormatOptions::default());
        assert!(r.is_ok(), "{kib} KiB of 4 KiB sectors: {:?}", r.err());
    }
}

/// Files written and fsynced before a power cut were gone after the next mount. On a 128 MiB
/// `nand-mlc-1g` partition holding 2,500 files of 4 KiB in 100 directories (cleanly
/// unmounted), a session creates 8 files of 4 KiB and fsyncs each, then writes a 1 MiB file and
/// the power is cut after 64 programs of it. After the next mount all 8 synced files were
/// NotFound (the 2,500 older files were fine). With 2,000, 2,400 or 3,000 files it did not
/// happen: it depends on where the checkpoint and journal stand. Found by the `mount` suite;
/// passes at 1269459 (a204f7d).
#[test]
fn synced_files_survive_a_power_cut() {
    let p = device_preset("nand-mlc-1g", Some(128 << 20)).unwrap();
    let sim = new_device(p).unwrap();
    let mut d = DffsDriver::new(sim.clone());
    d.format().unwrap();
    d.session(End::Unmount, &mut |s| {
        for k in 0..100 {
            s.mkdir(&format!("/d{k:03}"))?;
        }
        for i in 0..2500u64 {
            let path = format!("/d{:03}/f{i:06}", i % 100);
            write_file(s, &path, &Content::random(i), 4096, 4096, OpenMode::CREATE)?;
        }
        Ok(())
    })
    .unwrap();
    d.session(End::PowerCut, &mut |s| {
        for k in 0..8u64 {
            let path = format!("/small{k}");
            write_file(
                s,
                &path,
                &Content::random(100 + k),
                4096,
                4096,
                OpenMode::CREATE,
            )?;
            s.with_file(&path, OpenMode::RW, &mut |f| f.sync())?;
        }
        sim.cut_power_after(64);
        let r = write_file(
            s,
            "/big",
            &Content::random(1),
            1 << 20,
            65536,
            OpenMode::CREATE,
        );
        assert!(r.is_err(), "the power cut did not happen");
        Ok(())
    })
    .unwrap();
    d.session(End::Unmount, &mut |s| {
        for k in 0..8u64 {
            verify_file(
                s,
                &format!("/small{k}"),
                &Content::random(100 + k),
                4096,
                4096,
            )?;
        }
        Ok(())
    })
    .unwrap();
}

/// Rewriting one file (truncate at open, write 1 MiB, close) on an empty 16 MiB `nand-slc-128m`
/// partition failed with NoSpace at the 17th rewrite, although the file system held 1 MiB:
/// the space of the truncated versions was never given back (df said 0.4 MB used). On the whole
/// 128 MiB device half full of cold files it failed at the 62nd rewrite. Found by the `wear`
/// suite; passes at 1269459.
#[test]
fn rewriting_a_file_does_not_run_out_of_space() {
    let p = device_preset("nand-slc-128m", Some(16 << 20)).unwrap();
    let mut d = DffsDriver::new(new_device(p).unwrap());
    d.format().unwrap();
    d.session(End::Unmount, &mut |s| {
        for k in 0..64u64 {
            let c = Content::random(k);
            write_file(s, "/hot", &c, 1 << 20, 65536, OpenMode::CREATE)
                .map_err(|e| e.at(&format!("rewrite {k}")))?;
        }
        verify_file(s, "/hot", &Content::random(63), 1 << 20, 65536)
    })
    .unwrap();
}

/// On NOR with 4 KiB erase sectors, synced overwrites inside a file run out of space: on a
/// 2 MiB `nor-qspi-16m` partition (512 sectors) holding one 1 MiB file, 4 KiB writes at offsets
/// 0, 4 KiB, 8 KiB… each followed by fsync fail with NoSpace from the 16th on, and so does the
/// close. On the whole 16 MiB device it happens after 176 overwrites of an 8 MiB file, or 1,761
/// of a 1 MiB file: the overwritten versions are not reclaimed. Found by the `nor` suite (with
/// 64 KiB block erases the same workload runs). Cause: every checkpoint rewrote the whole
/// block table (two 4 KiB sectors) and was taken as soon as one collected block waited, so
/// checkpoints used more blocks than they gave back; fixed by the space budget (checkpoints only
/// when they give back more than they cost).
#[test]
fn nor_4k_overwrites_do_not_run_out_of_space() {
    let p = device_preset("nor-qspi-16m", Some(2 << 20)).unwrap();
    let mut d = DffsDriver::new(new_device(p).unwrap());
    d.format().unwrap();
    d.session(End::Unmount, &mut |s| {
        write_file(
            s,
            "/t",
            &Content::random(1),
            1 << 20,
            65536,
            OpenMode::CREATE,
        )?;
        s.with_file("/t", OpenMode::RW, &mut |f| {
            for i in 0..64u64 {
                let buf = Content::random(100 + i).bytes(0, 4096);
                f.write_at(i * 4096, &buf)
                    .and_then(|()| f.sync())
                    .map_err(|e| e.at(&format!("overwrite {i}")))?;
            }
            Ok(())
        })
    })
    .unwrap();
}

/// Many small files run out of space with half the device free: on a 64 MiB `nand-mlc-1g`
/// partition (df: 60 MB), creating 4 KiB files spread over 100 directories fails with NoSpace
/// after 6,913 files (28 MB of data; df says 29.7 MB used), having cost 120,408 page programs
/// (17 per file) and 947 erases. On the whole 1 GiB device it stops at 47,887 of the `mount`
/// suite's 100,000 files. Found by the `mount` suite. Causes: collection took blocks mixing
/// directory pages with inodes for cheap (moving an inode rewrites its parent's directory page),
/// and kept working on such a victim chosen by age when space was urgent; fixed by giving
/// inodes their own head on small devices, weighing inode bytes by a directory page each, and
/// switching to a far cheaper victim when space is needed now.
#[test]
fn many_small_files_fill_the_device() {
    let p = device_preset("nand-mlc-1g", Some(64 << 20)).unwrap();
    let mut d = DffsDriver::new(new_device(p).unwrap());
    d.format().unwrap();
    d.session(End::Unmount, &mut |s| {
        for k in 0..100 {
            s.mkdir(&format!("/d{k:03}"))?;
        }
        let total = s.total_bytes()?;
        // 80% of what df offers, in 4 KiB files.
        for n in 0..total * 8 / 10 / 4096 {
            let path = format!("/d{:03}/f{n:06}", n % 100);
            write_file(s, &path, &Content::random(n), 4096, 4096, OpenMode::CREATE)
                .map_err(|e| e.at(&format!("file {n}")))?;
        }
        Ok(())
    })
    .unwrap();
}
