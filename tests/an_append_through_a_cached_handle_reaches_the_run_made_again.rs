//! A store keeps its open runs cached, and an append through a cached handle does not ask
//! the path whether the run was deleted before it commits: the commit asks, under the run's
//! lock, before any write. These tests prove what the caller sees when another handle (as
//! another process would) deleted the run meanwhile: the append goes to the run created again
//! under the id, at its seqs, with none of the old run's keys; or, with no run there, it is
//! `RunNotFound` and creates nothing.

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("r").unwrap()
}

fn fact(tag: &str) -> NewEvent {
    NewEvent::new("step_completed", tag.to_string()).key(tag.to_string())
}

fn payloads(store: &Store) -> Vec<(u64, String)> {
    let page = store.read(&run(), 0, 100).unwrap();
    page.events
        .iter()
        .map(|e| (e.seq, String::from_utf8(e.payload.to_vec()).unwrap()))
        .collect()
}

/// `a` holds the run open (cached, with its dedupe maps built); `b` deletes it.
fn cached_then_deleted(root: &std::path::Path) -> (Store, Store) {
    let a = Store::open(root, Config::default()).unwrap();
    a.create_run(&run()).unwrap();
    a.append_facts(&run(), vec![fact("old-1"), fact("old-2")])
        .unwrap();
    assert!(a.append_facts(&run(), vec![fact("old-1")]).unwrap()[0].duplicate);
    let b = Store::open(root, Config::default()).unwrap();
    b.delete_run(&run()).unwrap();
    (a, b)
}

#[test]
fn a_fact_goes_to_the_run_made_again_at_its_next_seq() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = cached_then_deleted(tmp.path());
    b.create_run(&run()).unwrap();
    b.append_facts(&run(), vec![fact("new-1")]).unwrap();

    // "old-1" was a key of the deleted run only: new here.
    let got = a.append_facts(&run(), vec![fact("old-1")]).unwrap();
    assert_eq!((got[0].seq, got[0].duplicate), (2, false));
    let want = vec![(1, "new-1".to_string()), (2, "old-1".to_string())];
    assert_eq!(payloads(&b), want);
    assert_eq!(payloads(&a), want);
}

#[test]
fn a_decision_is_fenced_against_the_run_made_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = cached_then_deleted(tmp.path());
    b.create_run(&run()).unwrap();
    // Derived from the deleted run's seq 2: the new run is at 0.
    let fenced = a.append_decisions(&run(), 2, vec![NewEvent::new("step_created", "d")]);
    assert!(
        matches!(fenced, Err(Error::Fenced { actual: 0, .. })),
        "{fenced:?}"
    );
    let seqs = a
        .append_decisions(&run(), 0, vec![NewEvent::new("step_created", "d")])
        .unwrap();
    assert_eq!(seqs, vec![1]);
    assert_eq!(b.last_seq(&run()).unwrap(), 1);
}

#[test]
fn with_no_run_made_again_the_append_is_run_not_found_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = cached_then_deleted(tmp.path());
    for _ in 0..2 {
        let got = a.append_facts(&run(), vec![fact("late")]);
        assert!(matches!(got, Err(Error::RunNotFound { .. })), "{got:?}");
    }
    assert!(!b.run_exists(&run()).unwrap());
    assert!(!tmp.path().join("runs/r").exists());
}
