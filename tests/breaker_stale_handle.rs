//! A `Store` handle that has a run open keeps serving the run's old files after another
//! handle (or process) deleted it: reads return deleted events, and a run recreated under
//! the same id is unreachable through the stale handle. Found by the breaker review.

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
    page.events.into_iter().map(|e| e.kind).collect()
}

#[test]
fn read_through_other_handle_after_delete_is_run_not_found() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    assert!(!a.run_exists(&run).unwrap());
    // Actual: Ok with the two deleted events; last_seq 2.
    assert!(matches!(
        a.read(&run, 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(a.last_seq(&run), Err(Error::RunNotFound { .. })));
}

#[test]
fn read_through_other_handle_after_delete_and_recreate_returns_new_log() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    b.create_run(&run).unwrap();
    b.append_facts(&run, vec![NewEvent::new("new", "z")])
        .unwrap();
    // Actual: ["old1", "old2"] — the deleted run's events.
    assert_eq!(kinds(&a, &run), vec!["new".to_string()]);
    assert_eq!(a.last_seq(&run).unwrap(), 1);
}

#[test]
fn append_through_other_handle_after_delete_and_recreate_succeeds() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    b.create_run(&run).unwrap();
    // Actual: Err(RunNotFound) although run_exists is true, for as long as `a` lives.
    assert!(a.run_exists(&run).unwrap());
    let got = a.append_facts(&run, vec![NewEvent::new("from_a", "w")]);
    assert_eq!(got.unwrap()[0].seq, 1);
}

#[test]
fn create_through_stale_handle_after_other_handle_deleted_gives_a_usable_run() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    a.create_run(&run).unwrap();
    // Actual: RunNotFound on the run `a` itself just created; reads return the old events.
    assert_eq!(
        a.append_facts(&run, vec![NewEvent::new("e", "v")]).unwrap()[0].seq,
        1
    );
    assert_eq!(kinds(&a, &run), vec!["e".to_string()]);
}

#[test]
fn second_delete_through_stale_handle_is_run_not_found() {
    let (_dir, a, b, run) = two_handles();
    b.delete_run(&run).unwrap();
    // Actual: Err(Io { op: "renaming away", .. ENOENT }).
    assert!(matches!(a.delete_run(&run), Err(Error::RunNotFound { .. })));
}
