//! Breaker round 3: `Config::batch_len_bytes_max` is a *write* limit ("every limit is checked
//! before anything is written"), but the read, verify and recovery paths use it as a bound
//! on batches that are already committed.
//!
//! `Config` is given per `Store::open` and not stored in the files, so a store reopened with
//! a smaller limit (or a second process configured differently) meets batches longer than its
//! own limit. `check_batch` rejects them ("batch length N out of range"), and:
//! - in a committed region that is a false `Corrupt` (reads, `last_seq`) and false
//!   `problems` from `verify_run`;
//! - past the counter, `RunState::recover_tail` takes the rejection for a torn tail and
//!   **truncates** it. After a power loss the lock file's commit slots (never synced) are gone
//!   and the header checkpoint is older, so acknowledged, fdatasync'd batches lie past the
//!   counter: the reopened store silently cuts them away (rules 4, 11).
//!
//! Fix: decode existing data against the format's own bound (SPEC §4 says
//! `len <= Config::batch_len_bytes_max`, which only works if the limit never shrinks), e.g.
//! `u32::MAX`/a format constant on the read and recovery paths, keeping the configured limit
//! for `validate` only; or refuse to open with a smaller limit than the data needs.

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

/// Regression (failed before readers bounded stored batches by `BATCH_LEN_READ_MAX` instead
/// of their own config): acknowledged events were truncated away (rules 4, 11). The lock file's commit
/// slots are lost (as after a power loss: they are never synced; SPEC §3 says this "only
/// makes the header the newest counter"), and the store is reopened with a smaller
/// `batch_len_bytes_max`. Recovery at open scans past the header's counter (4096), fails
/// to decode the 200 KiB batch against the 128 KiB limit, and truncates the segment there:
/// only `e1` survives, for every later opener too.
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

/// Regression (same fix): valid committed data was reported as corruption. Without any loss of counters, a
/// store opened with a smaller `batch_len_bytes_max` reads the run as `Corrupt` at the big
/// batch ("batch length ... out of range"), and `verify_run` lists it in `problems`, though
/// every checksum and seq is right (rule 5 is for real damage).
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
