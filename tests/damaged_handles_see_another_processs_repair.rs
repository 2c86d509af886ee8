//! A handle that met a run's damage (its reads stop there, its writes are refused) sees the
//! repair another handle or process makes: its next read returns the repaired run and what
//! was appended after it, its next append gets the next seq. It used to keep its damaged view
//! until it left the cache (a server needed a restart after `runlog repair`): a damaged view
//! never read the counter again, so it never saw the repair's new epoch (SPEC §3, §6). Other
//! `Store`s on one directory stand in for other processes (each its own descriptors, cache
//! and view). Found by a breaker (branch break-repair-2, D1).

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("cut").unwrap()
}

fn fact(i: u64) -> NewEvent {
    NewEvent::new(format!("kind_{i}"), format!("{{\"i\":{i:04}}}"))
}

fn seg_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("runs/cut/seg-{n:08}.log"))
}

fn batch_offsets(dir: &Path, n: u32) -> Vec<u64> {
    common::batch_offsets(&seg_path(dir, n))
}

/// Flips one bit inside the batch at `at` of segment `n` (bit rot in committed bytes).
fn damage(dir: &Path, n: u32, at: u64) {
    let seg = seg_path(dir, n);
    let middle = common::middle_of_batch(&std::fs::read(&seg).unwrap(), at as usize);
    common::flip(&seg, middle as u64, 1);
}

fn kinds(store: &Store) -> Result<Vec<(u64, String)>, Error> {
    store.read(&run(), 0, usize::MAX).map(|p| {
        p.events
            .iter()
            .map(|e| (e.seq, e.kind.to_string()))
            .collect()
    })
}

/// 20 single-event batches, bit rot in the 6th (seq 6).
fn damaged_run(dir: &Path) {
    let w = Store::open(dir, Config::default()).unwrap();
    w.create_run(&run()).unwrap();
    for i in 1..=20 {
        w.append_facts(&run(), vec![fact(i)]).unwrap();
    }
    drop(w);
    damage(dir, 1, batch_offsets(dir, 1)[5]);
}

/// D1: a handle (another process) that found the damage keeps it forever: after another
/// handle's repair its reads still fail at seq 6 and its writes are still refused, although a
/// fresh open reads the repaired run and appends to it. `RunState::catch_up` loops only
/// `while self.damage.is_none()`, so a damaged view never reads the counter, never sees the
/// new repair epoch and never reloads (SPEC §6: "Every other handle (of any process) that
/// applied a counter of the segment before the cut sees the new epoch at its next refresh and
/// reads the run again").
#[test]
fn damaged_handle_of_another_process_reads_and_writes_after_the_repair() {
    let dir = tempfile::tempdir().unwrap();
    damaged_run(dir.path());
    // The long-lived "server" process: it reads the run, meets the damage, and its writes are
    // refused (as they must be).
    let server = Store::open(dir.path(), Config::default()).unwrap();
    let page = server.read(&run(), 0, usize::MAX).unwrap();
    assert_eq!(page.events.len(), 5, "events before the damage");
    assert!(matches!(
        server.read(&run(), 5, 10),
        Err(Error::Corrupt { .. })
    ));
    assert!(matches!(
        server.append_facts(&run(), vec![fact(100)]),
        Err(Error::Corrupt { .. })
    ));
    // The operator repairs with another process (the CLI).
    let operator = Store::open(dir.path(), Config::default()).unwrap();
    let done = operator.repair_run(&run()).unwrap().expect("damaged");
    assert_eq!(done.last_seq, 5);
    drop(operator);
    // A fresh process reads and writes the repaired run.
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(kinds(&fresh).unwrap().len(), 5);
    assert_eq!(fresh.append_facts(&run(), vec![fact(6)]).unwrap()[0].seq, 6);
    drop(fresh);
    // The server must see the repaired run too (it never reopens the run on its own: the
    // handle stays in its cache).
    let read = kinds(&server);
    let after5 = server.read(&run(), 5, 10).map(|p| p.events.len());
    let appended = server.append_facts(&run(), vec![fact(7)]);
    assert!(
        read.as_ref().is_ok_and(|v| v.len() == 6)
            && after5.as_ref().is_ok_and(|n| *n == 1)
            && appended.as_ref().is_ok_and(|v| v[0].seq == 7),
        "server after another process's repair: read {read:?}; read after 5 {after5:?}; \
         append {appended:?}"
    );
}

/// D1b: the same for a read-only store (a pure reader process).
#[test]
fn damaged_read_only_handle_reads_the_repaired_run() {
    let dir = tempfile::tempdir().unwrap();
    damaged_run(dir.path());
    let reader = Store::open_read_only(dir.path(), Config::default()).unwrap();
    assert_eq!(reader.read(&run(), 0, usize::MAX).unwrap().events.len(), 5);
    assert!(reader.read(&run(), 5, 10).is_err());
    let operator = Store::open(dir.path(), Config::default()).unwrap();
    operator.repair_run(&run()).unwrap().expect("damaged");
    for i in 6..=8 {
        assert_eq!(
            operator.append_facts(&run(), vec![fact(i)]).unwrap()[0].seq,
            i
        );
    }
    drop(operator);
    let got = kinds(&reader);
    assert_eq!(
        got.as_ref().map(|v| v.len()).ok(),
        Some(8),
        "read-only reader after the repair: {got:?}"
    );
}
