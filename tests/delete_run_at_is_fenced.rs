//! `Store::delete_run_at` (what `runlog gc` deletes an archived log with) deletes a run only
//! while its last seq is the expected one, checked under the run's write lock: a stale
//! expectation is `Fenced` and deletes nothing; and raced by a writer appending as fast as it
//! can, no delete ever succeeds past an acknowledged append (every append acknowledged
//! before the delete is counted in the seq the delete expected).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn store(dir: &std::path::Path) -> Arc<Store> {
    Arc::new(Store::open(dir, Config::default()).unwrap())
}

#[test]
fn a_stale_expected_seq_is_fenced_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let run = RunId::new("r1").unwrap();
    s.create_run(&run).unwrap();
    s.append_facts(
        &run,
        vec![NewEvent::new("a", &b"1"[..]), NewEvent::new("a", &b"2"[..])],
    )
    .unwrap();
    match s.delete_run_at(&run, 1) {
        Err(Error::Fenced {
            expected: 1,
            actual: 2,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(s.read(&run, 0, 10).unwrap().events.len(), 2);
    s.delete_run_at(&run, 2).unwrap();
    assert!(matches!(s.last_seq(&run), Err(Error::RunNotFound { .. })));
}

#[test]
fn no_delete_succeeds_past_an_acknowledged_append() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let run = RunId::new(format!("r{round}")).unwrap();
        s.create_run(&run).unwrap();
        let acked = Arc::new(AtomicU64::new(0));
        let writer = {
            let (s, run, acked) = (s.clone(), run.clone(), acked.clone());
            std::thread::spawn(move || {
                while let Ok(done) = s.append_facts(&run, vec![NewEvent::new("a", &b"x"[..])]) {
                    acked.fetch_max(done[0].seq, Ordering::SeqCst);
                }
            })
        };
        let deleted_at = loop {
            let last = s.last_seq(&run).unwrap();
            if last < 5 {
                continue;
            }
            match s.delete_run_at(&run, last) {
                Ok(()) => break last,
                Err(Error::Fenced { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        };
        writer.join().unwrap();
        assert_eq!(
            acked.load(Ordering::SeqCst),
            deleted_at,
            "round {round}: an append acknowledged past the seq the delete expected was lost"
        );
    }
}
