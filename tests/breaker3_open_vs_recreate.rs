//! Breaker round 3: a run deleted (and re-created under the same id) by another handle while
//! this handle is *opening* it.
//!
//! `Run::open` opens `seg-00000001.log` first and the run's `lock` file second, by path. A
//! delete + re-create in between leaves the handle with segment 1 of the *old* (now unlinked)
//! run and the lock file of the *new* run. Deletion is detected only through the lock file
//! (`is_unlinked`, `Store::cached`, `prepare`), which is alive, so the handle never notices:
//! it takes the new run's lock, appends into the unlinked old segment and acknowledges, and
//! writes commit slots salted for the old segment into the new run's lock file.
//!
//! The window is made deterministic with an `Fs` wrapper (`common::OpenHookFs`) that runs the
//! other handle's delete + re-create at a chosen open of this handle (both are public
//! API: `Store::open_with_fs`, `runlog::io::Fs`).
//!
//! Fixed: `Run::open` now opens the lock file *before* segment 1 (deletion unlinks the lock
//! file last, so a lock file from the old run is then always seen as unlinked) and checks it
//! after opening the segment. The hook now runs in that new window, between the two opens.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{OpenHook, OpenHookFs};
use runlog::io::OpenMode;
use runlog::{Config, Error, NewEvent, RunId, Store};

/// Where the other handle's work is put: just before `Run::open` opens the lock file, or just
/// before it opens segment 1 (after the lock file, in the current order). Each test runs at
/// both, so either order of the two opens is checked.
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
fn setup() -> (tempfile::TempDir, RunId, Store, Arc<OpenHookFs>, Store) {
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

/// Regression (failed before `Run::open` opened the lock file first): an acknowledged append
/// was lost (rules 4, 11) and a reader keeps reading a deleted
/// run (rules 6, 7). Handle A opens the run while handle B deletes it and creates a new run
/// with the same id (holding `new1`). A's open pairs the old segment 1 with the new lock file;
/// A's append of `a1` is acknowledged at seq 2 — written into the unlinked old segment. A
/// fresh handle then reads the run as `[new1]`: the acknowledged `a1` is nowhere, and A itself
/// keeps reading `[old1, a1]`, a log that no longer exists.
#[test]
fn append_through_a_handle_opened_across_delete_and_recreate_is_not_lost() {
    for point in POINTS {
        recreate_during_open(point);
    }
}

fn recreate_during_open(point: &'static str) {
    let (dir, run, a, fs, b) = setup();
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

/// Regression (error type; same fix): the same window with a delete and no re-create. A's open finds segment
/// 1 (still linked when opened) and then no lock file; `open_lock_file` tries to create it
/// in the vanished directory and reports `Io` ("creating lock file ... No such file or
/// directory") instead of the documented `RunNotFound`.
#[test]
fn open_racing_a_delete_reports_run_not_found() {
    for point in POINTS {
        delete_during_open(point);
    }
}

fn delete_during_open(point: &'static str) {
    let (_dir, run, a, fs, b) = setup();
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
