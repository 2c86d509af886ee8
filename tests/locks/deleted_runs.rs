//! A run deleted (and maybe re-created under the same id) by another handle or process while
//! this handle has it open, is opening it, or waits on it. Deletion unlinks the run's lock file
//! last, so a handle detects it through its lock file (unlinked) and drops its cached run: it
//! never serves the deleted run's files, reaches the re-created run, and reports
//! `RunNotFound` for a run that is gone (rules 4, 6, 7).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{OpenHook, OpenHookFs};
use runlog::io::OpenMode;
use runlog::{Config, Error, NewEvent, RunId, Store};

fn two_handles() -> (tempfile::TempDir, Store, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let a = Store::open(&path, Config::default()).unwrap();
    let b = Store::open(&path, Config::default()).unwrap();
    let run = RunId::new("r1").unwrap();
    a.create_run(&run).unwrap();
    a.append_facts(
        &run,
        vec![NewEvent::new("old1", "x"), NewEvent::new("old2", "y")],
    )
    .unwrap();
    // `a` now has the run open (cached).
    assert_eq!(a.read(&run, 0, 10).unwrap().events.len(), 2);
    (dir, a, b, run)
}

fn kinds(store: &Store, run: &RunId) -> Vec<String> {
    let page = store.read(run, 0, 100).unwrap();
    page.events
        .into_iter()
        .map(|e| e.kind.to_string())
        .collect()
}

/// Reads and `last_seq` through a handle that had the run cached, after another handle deleted
/// it: `RunNotFound`, not the deleted events.
#[test]
fn read_through_other_handle_after_delete_is_run_not_found() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    assert!(!a.run_exists(&run).unwrap());
    assert!(matches!(
        a.read(&run, 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(a.last_seq(&run), Err(Error::RunNotFound { .. })));
}

/// After another handle deleted and re-created the run, a handle that had it cached reads the
/// new log.
#[test]
fn read_through_other_handle_after_delete_and_recreate_returns_new_log() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    b.create_run(&run).unwrap();
    b.append_facts(&run, vec![NewEvent::new("new", "z")])
        .unwrap();
    assert_eq!(kinds(&a, &run), vec!["new".to_string()]);
    assert_eq!(a.last_seq(&run).unwrap(), 1);
}

/// After another handle deleted and re-created the run, a handle that had it cached appends
/// to the new run, at seq 1.
#[test]
fn append_through_other_handle_after_delete_and_recreate_succeeds() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    b.create_run(&run).unwrap();
    assert!(a.run_exists(&run).unwrap());
    let got = a.append_facts(&run, vec![NewEvent::new("from_a", "w")]);
    assert_eq!(got.unwrap()[0].seq, 1);
}

/// A handle that had the run cached re-creates it after another handle deleted it: the run it
/// created takes its appends and reads back only them.
#[test]
fn create_through_stale_handle_after_other_handle_deleted_gives_a_usable_run() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    a.create_run(&run).unwrap();
    assert_eq!(
        a.append_facts(&run, vec![NewEvent::new("e", "v")]).unwrap()[0].seq,
        1
    );
    assert_eq!(kinds(&a, &run), vec!["e".to_string()]);
}

/// Deleting, through a handle that had it cached, a run another handle already deleted:
/// `RunNotFound`, not an I/O error.
#[test]
fn second_delete_through_stale_handle_is_run_not_found() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    assert!(matches!(a.delete_run(&run), Err(Error::RunNotFound { .. })));
}

/// Where the other handle's work is put, through `OpenHookFs`: just before `Run::open` opens
/// the run's lock file, or just before it opens segment 1. Each test runs at both points, so
/// the window between the two opens is covered whichever comes first.
const POINTS: [&str; 2] = ["lock", "seg-00000001.log"];

/// A hook that runs `f` once, just before a store opens the file `name` read-write.
fn before_open(name: &'static str, f: impl FnOnce() + Send + 'static) -> OpenHook {
    let mut f = Some(f);
    Box::new(move |path: &Path, mode: OpenMode| {
        let hit = mode == OpenMode::ReadWrite && path.file_name().is_some_and(|n| n == name);
        hit.then(|| {
            if let Some(f) = f.take() {
                f();
            }
            Ok(())
        })
    })
}

fn payloads(store: &Store, run: &RunId) -> Vec<String> {
    let page = store.read(run, 0, 100).unwrap();
    page.events
        .iter()
        .map(|e| String::from_utf8(e.payload.to_vec()).unwrap())
        .collect()
}

/// Store `a` (hooked) and store `b` (plain) on one directory; `old1` committed in the run.
fn hooked_and_plain() -> (tempfile::TempDir, RunId, Store, Arc<OpenHookFs>, Store) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("wrun_recreate").unwrap();
    let b = Store::open(dir.path(), Config::default()).unwrap();
    b.create_run(&run).unwrap();
    b.append_facts(&run, vec![NewEvent::new("step_completed", "old1")])
        .unwrap();
    let fs = Arc::new(OpenHookFs::default());
    let a = Store::open_with_fs(fs.clone(), dir.path(), Config::default()).unwrap();
    (dir, run, a, fs, b)
}

/// Rules 4, 11 and 6, 7: handle A opens the run while handle B deletes it and creates a new
/// run with the same id (holding `new1`). A never pairs the old run's segment 1 with the new
/// run's lock file: its append of `a1` is either refused with `RunNotFound` or acknowledged at
/// a seq where a fresh handle reads `a1`, and A reads exactly what the fresh handle reads.
#[test]
fn append_through_a_handle_opened_across_delete_and_recreate_is_not_lost() {
    for point in POINTS {
        recreate_during_open(point);
    }
}

fn recreate_during_open(point: &'static str) {
    let (dir, run, a, fs, b) = hooked_and_plain();
    let (b2, run2) = (b.clone(), run.clone());
    *fs.hook.lock() = Some(before_open(point, move || {
        b2.delete_run(&run2).unwrap();
        b2.create_run(&run2).unwrap();
        b2.append_facts(&run2, vec![NewEvent::new("step_completed", "new1")])
            .unwrap();
    }));
    let acked = a.append_facts(&run, vec![NewEvent::new("step_completed", "a1")]);
    assert!(
        fs.hook.lock().is_none(),
        "{point}: the hook ran during A's open"
    );
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    let log = payloads(&fresh, &run);
    match acked {
        // Refusing is fine (the run A set out to append to is gone).
        Err(Error::RunNotFound { .. }) => assert_eq!(log, ["new1"]),
        Ok(got) => {
            let seq = got[0].seq;
            assert!(
                log.get(seq as usize - 1).is_some_and(|p| p == "a1"),
                "{point}: A's append acknowledged at seq {seq}, but the run reads {log:?}"
            );
        }
        Err(e) => panic!("{point}: unexpected error {e}"),
    }
    // And A reads what everyone else reads.
    assert_eq!(
        payloads(&a, &run),
        log,
        "{point}: handle A reads another log"
    );
}

/// The same window with a delete and no re-create: A's append reports the documented
/// `RunNotFound`, not an I/O error from the vanished directory, and the run stays gone.
#[test]
fn open_racing_a_delete_reports_run_not_found() {
    for point in POINTS {
        delete_during_open(point);
    }
}

fn delete_during_open(point: &'static str) {
    let (_dir, run, a, fs, b) = hooked_and_plain();
    let (b2, run2) = (b.clone(), run.clone());
    *fs.hook.lock() = Some(before_open(point, move || b2.delete_run(&run2).unwrap()));
    let got = a.append_facts(&run, vec![NewEvent::new("step_completed", "a1")]);
    assert!(
        fs.hook.lock().is_none(),
        "{point}: the hook ran during A's open"
    );
    assert!(
        matches!(got, Err(Error::RunNotFound { .. })),
        "{point}: expected RunNotFound, got {got:?}"
    );
    assert!(!b.run_exists(&run).unwrap());
}

/// `Store::wait` on a run that is deleted and re-created while the wait is in progress never
/// answers with the deleted run's last seq: the run holds seq 1 (committed 0.1 s into the
/// wait), and the answer is `Ok(n)` with `n >= 1` (it saw the new run) or `RunNotFound` (the
/// run it waited on is gone), not `Ok(0)` at the deadline.
#[test]
fn wait_does_not_report_a_deleted_run_stale_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("wrun_waitdel").unwrap();
    store.create_run(&run).unwrap();
    let waiter = {
        let (store, run) = (store.clone(), run.clone());
        std::thread::spawn(move || store.wait(&run, 0, Duration::from_secs(1)))
    };
    // Long enough for the waiter to be inside `Run::wait` (if it is not, it opens the new
    // run and the test passes: it cannot fail spuriously).
    std::thread::sleep(Duration::from_millis(100));
    store.delete_run(&run).unwrap();
    store.create_run(&run).unwrap();
    let got = store
        .append_facts(&run, vec![NewEvent::new("step_completed", "new1")])
        .unwrap();
    assert_eq!(got[0].seq, 1);
    match waiter.join().unwrap() {
        Ok(n) => assert!(n >= 1, "wait returned last seq {n}; the run holds seq 1"),
        Err(Error::RunNotFound { .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
    }
}
