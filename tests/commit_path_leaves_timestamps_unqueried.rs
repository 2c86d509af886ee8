//! The commit path never asks for the times of the files it writes (`runlog::io::Probe`).
//!
//! On Linux 6.13 and later, multigrain timestamps (ext4, xfs, btrfs, tmpfs) give a write a
//! fine-grained mtime only when the file's times were queried by a stat since its last
//! change; otherwise the write reuses the coarse clock and leaves the inode clean. runlog
//! probes its lock file every commit and writes a commit slot into it: a probe that queried
//! the times dirtied that inode at every commit, and every segment `fdatasync` then wrote the
//! inode table block too (2 device writes per commit instead of 1, BENCHMARKS.md).
//!
//! How it is seen from user space: query a file's times once, then write it many times in
//! well under a clock tick with the probe under test between the writes. If the probe does
//! not query, only the first write takes a fine-grained time and the final mtime sits near
//! the start of the loop; if it queries, every write does and the mtime sits at the end. A
//! control with std's `metadata` (which asks for every field) between the writes shows that
//! the file system here has multigrain timestamps at all (else the test cannot run here).
//!
//! The tests of this file run one at a time ([`ONE_AT_A_TIME`]): a fine-grained time handed
//! to any file moves the kernel's global floor of the coarse clock, so the other test's
//! control loop, run at the same time, made the unqueried writes under test look late (8 of
//! 15 loops in a row in a CI run).

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use runlog::io::{Fs, OpenMode, StdFs};
use runlog::{Config, NewEvent, RunId, Store};

/// Held by each test for its whole length.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Trials per verdict, and how many may end late before a verdict of "queried".
const TRIALS: u32 = 15;
const LATE_MAX: u32 = 7;

/// Where `path`'s mtime falls after `steps` calls of `step` (each writing the file, and
/// whatever else is under test), between the start of the first (0.0) and the end of the
/// last (1.0), the file's times queried just before.
fn mtime_position(path: &Path, steps: u32, step: &mut dyn FnMut(u32)) -> f64 {
    // Query the times: the next write takes a fine-grained time (the loop's first).
    let _ = std::fs::metadata(path).unwrap().modified().unwrap();
    let t0 = SystemTime::now();
    for i in 0..steps {
        step(i);
    }
    let t1 = SystemTime::now();
    let m = std::fs::metadata(path).unwrap().modified().unwrap();
    let span = t1
        .duration_since(t0)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64();
    let at = m.duration_since(t0).unwrap_or(Duration::ZERO).as_secs_f64();
    if span == 0.0 { 1.0 } else { at / span }
}

/// Of [`TRIALS`] loops, how many ended with the mtime in the loop's second half (a write
/// after the first took a fine-grained time). A coarse clock tick inside a loop can put an
/// unqueried file's mtime anywhere in it, so the verdict is taken over several loops.
fn late_endings(path: &Path, steps: u32, step: &mut dyn FnMut(u32)) -> u32 {
    let positions: Vec<f64> = (0..TRIALS)
        .map(|_| mtime_position(path, steps, step))
        .collect();
    eprintln!("{}: mtime positions {positions:.2?}", path.display());
    positions.iter().filter(|&&p| p > 0.5).count() as u32
}

/// Whether this file system has multigrain timestamps: with std's metadata after each write,
/// the mtime should end late in (nearly) every loop.
fn multigrain(path: &Path) -> bool {
    let f = StdFs.open(path, OpenMode::ReadWrite).unwrap();
    let late = late_endings(path, 16, &mut |i| {
        f.write_all_at(&i.to_le_bytes(), 0).unwrap();
        let _ = std::fs::metadata(path).unwrap();
    });
    late >= TRIALS - 3
}

#[test]
fn the_file_probes_do_not_query_times() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lock");
    std::fs::write(&path, [0u8; 64]).unwrap();
    if !multigrain(&path) {
        runlog_conformance::skip::skip(
            "no multigrain timestamps here (Linux >= 6.13 on ext4, xfs, btrfs or tmpfs)",
        );
        return;
    }
    let f = StdFs.open(&path, OpenMode::ReadWrite).unwrap();
    let late = late_endings(&path, 16, &mut |i| {
        f.write_all_at(&i.to_le_bytes(), 0).unwrap();
        assert!(f.is_at(&path).unwrap());
        assert!(!f.is_unlinked().unwrap());
        assert_eq!(f.len().unwrap(), 64);
        assert!(!StdFs.is_dir(&path).unwrap());
        let probe = runlog::io::probe_path(&path).unwrap();
        assert_eq!((probe.size, probe.nlink, probe.is_dir), (64, 1, false));
    });
    assert!(
        late <= LATE_MAX,
        "the probes queried the file's times: {late} of {TRIALS} loops ended with a fine-grained mtime"
    );
}

#[test]
fn commits_do_not_query_the_times_of_the_lock_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = Store::open(&root, Config::default()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    let lock = root.join("runs/r/lock");
    if !multigrain(&lock) {
        runlog_conformance::skip::skip(
            "no multigrain timestamps here (Linux >= 6.13 on ext4, xfs, btrfs or tmpfs)",
        );
        return;
    }
    // Each append probes the lock file (a deleted run?) and writes a commit slot into it:
    // were the probe to query the times, every slot write would take a fine-grained time.
    let late = late_endings(&lock, 6, &mut |i| {
        store
            .append_facts(&run, vec![NewEvent::new("k", format!("{i}"))])
            .unwrap();
    });
    assert!(
        late <= LATE_MAX,
        "a commit queried the lock file's times: {late} of {TRIALS} loops ended with a fine-grained mtime"
    );
}
