//! Smoke test of the core API on a real directory.

use runlog::{Config, Error, NewEvent, RunId, Store};

#[test]
fn append_read_fence_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    let run = RunId::new("wrun_1").unwrap();
    store.create_run(&run).unwrap();
    let a = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert_eq!(a[0].seq, 1);
    let seqs = store
        .append_decisions(
            &run,
            1,
            vec![
                NewEvent::new("step_created", "a"),
                NewEvent::new("step_created", "b"),
            ],
        )
        .unwrap();
    assert_eq!(seqs, vec![2, 3]);
    let err = store
        .append_decisions(&run, 1, vec![NewEvent::new("x", "")])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Fenced {
                expected: 1,
                actual: 3,
                ..
            }
        ),
        "{err}"
    );
    let dup = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert_eq!((dup[0].seq, dup[0].duplicate), (1, true));
    let page = store.read(&run, 1, 10).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(&page.events[1].payload[..], b"b");
    drop(store);
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 3);
    let dup = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert!(dup[0].duplicate);
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, 3);
}
