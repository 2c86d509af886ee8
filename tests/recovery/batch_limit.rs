//! `Config::batch_len_bytes_max` limits what is *written*. `Config` is given per
//! `Store::open` and not stored in the files, so a store reopened with a smaller limit (or a
//! second process configured differently) meets committed batches longer than its own limit.
//! Those batches are decoded against the format's own bound (`BATCH_LEN_READ_MAX`), so:
//! - recovery past the counter never takes them for a torn tail and never truncates them
//!   (rules 4, 11), even when the lock file's unsynced commit slots were lost and the header
//!   checkpoint is older;
//! - in the committed region they read back and `verify_run` reports no problem (rule 5 is
//!   for real damage only).

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

const BIG: usize = 200 << 10;

fn small() -> Config {
    Config {
        payload_len_bytes_max: 64 << 10,
        batch_len_bytes_max: 128 << 10,
        ..Config::default()
    }
}

fn lock_path(dir: &Path, run: &RunId) -> PathBuf {
    dir.join("runs").join(run.as_str()).join("lock")
}

/// A run holding `e1` (small), `big` (200 KiB payload), `e3` (small), all acknowledged by a
/// store with the default limits.
fn setup() -> (tempfile::TempDir, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("wrun_lenmax").unwrap();
    let a = Store::open(dir.path(), Config::default()).unwrap();
    a.create_run(&run).unwrap();
    let seqs: Vec<u64> = [
        NewEvent::new("step_completed", "e1"),
        NewEvent::new("step_completed", vec![7u8; BIG]),
        NewEvent::new("step_completed", "e3"),
    ]
    .into_iter()
    .map(|e| a.append_facts(&run, vec![e]).unwrap()[0].seq)
    .collect();
    assert_eq!(seqs, [1, 2, 3]);
    (dir, run)
}

/// Rules 4 and 11: the lock file's commit slots are lost (as after a power loss: they are
/// never synced; SPEC §3 says this "only makes the header the newest counter") and the store
/// is reopened with a 128 KiB `batch_len_bytes_max`. Recovery at open scans past the header's
/// counter (4096) over the 200 KiB batch and keeps it: a store with the default limits then
/// reads all three events.
#[test]
fn reopening_with_a_smaller_batch_limit_never_truncates_acknowledged_events() {
    let (dir, run) = setup();
    std::fs::OpenOptions::new()
        .write(true)
        .open(lock_path(dir.path(), &run))
        .unwrap()
        .set_len(0)
        .unwrap();
    let b = Store::open(dir.path(), small()).unwrap();
    // Whatever b can or cannot read, it must not destroy data: a store with the default
    // limits still reads all three events.
    let _ = b.last_seq(&run);
    drop(b);
    let c = Store::open(dir.path(), Config::default()).unwrap();
    let page = c.read(&run, 0, 10).unwrap();
    let lens: Vec<usize> = page.events.iter().map(|e| e.payload.len()).collect();
    assert_eq!(
        lens,
        [2, BIG, 2],
        "acknowledged events were cut away by recovery under a smaller batch limit"
    );
}

/// Rule 5 is for real damage: a store opened with a smaller `batch_len_bytes_max` reads a run
/// holding a longer committed batch (every checksum and seq right) in full, and `verify_run`
/// lists no problem.
#[test]
fn a_smaller_batch_limit_does_not_make_committed_batches_corrupt() {
    let (dir, run) = setup();
    let b = Store::open(dir.path(), small()).unwrap();
    let report = b.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty(),
        "verify reports valid data as corrupt: {:?}",
        report.problems
    );
    match b.read(&run, 0, 10) {
        Ok(page) => assert_eq!(page.events.len(), 3),
        Err(e @ Error::Corrupt { .. }) => panic!("valid data read as corrupt: {e}"),
        Err(e) => panic!("unexpected error {e}"),
    }
}
