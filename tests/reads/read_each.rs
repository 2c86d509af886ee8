//! `Store::read_each` callbacks that call back into the store, panic, or delete the run they
//! are reading. No lock of the store or the run is held while the callback runs (the page is
//! planned, and each segment's view taken, before events are handed over), so re-entry
//! neither deadlocks nor changes the page being read.

use std::panic::AssertUnwindSafe;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn ev(i: u64) -> NewEvent {
    NewEvent::new("step_completed", format!("p{i}"))
}

/// A store whose run holds `p1..=pn`, one batch each, over several small segments, with
/// preallocation on from the start.
fn setup(n: u64) -> (tempfile::TempDir, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_len_bytes_max: 4096 + 60,
        preallocate_from_bytes: 0,
        ..Config::default()
    };
    let store = Store::open(dir.path(), cfg).unwrap();
    let run = RunId::new("wrun_reentry").unwrap();
    store.create_run(&run).unwrap();
    for i in 1..=n {
        assert_eq!(store.append_facts(&run, vec![ev(i)]).unwrap()[0].seq, i);
    }
    (dir, store, run)
}

fn check_dense(store: &Store, run: &RunId, n: u64) {
    let page = store.read(run, 0, usize::MAX).unwrap();
    let got: Vec<(u64, String)> = page
        .events
        .iter()
        .map(|e| (e.seq, String::from_utf8(e.payload.to_vec()).unwrap()))
        .collect();
    let want: Vec<(u64, String)> = (1..=n).map(|i| (i, format!("p{i}"))).collect();
    assert_eq!(got, want);
    assert_eq!(store.verify_run(run).unwrap().problems, vec![]);
}

/// Appends (which roll segments) and reads of the same run from inside the callback: no
/// deadlock; the page holds exactly the events committed when it was planned, with the
/// cursor and `has_more` of that moment; the appends land densely after them.
#[test]
fn callback_appending_and_reading_the_same_run_neither_deadlocks_nor_changes_its_page() {
    let (_dir, store, run) = setup(6);
    let mut seen = Vec::new();
    let mut next_new = 7;
    let (next, has_more) = store
        .read_each(&run, 0, 4, |e| {
            seen.push(e.seq);
            let got = store.append_facts(&run, vec![ev(next_new)]).unwrap();
            assert_eq!(got[0].seq, next_new);
            next_new += 1;
            let inner = store.read(&run, e.seq - 1, 1).unwrap();
            assert_eq!(inner.events[0].payload, format!("p{}", e.seq).as_bytes());
        })
        .unwrap();
    assert_eq!(seen, [1, 2, 3, 4]);
    assert_eq!((next, has_more), (4, true));
    // The first callback appended 7..=10. A page planned when the run ended at 10 reports no
    // more past 10, even though its callback appends 11 and 12 meanwhile.
    let mut seen = Vec::new();
    let (next, has_more) = store
        .read_each(&run, 8, usize::MAX, |e| {
            seen.push(e.seq);
            store.append_facts(&run, vec![ev(next_new)]).unwrap();
            next_new += 1;
        })
        .unwrap();
    assert_eq!(seen, [9, 10]);
    assert_eq!((next, has_more), (10, false));
    check_dense(&store, &run, 12);
    assert!(store.run_info(&run).unwrap().segment_count > 2);
}

/// A panicking callback leaves nothing locked or half-applied: the same handle reads and
/// appends afterwards.
#[test]
fn callback_panic_leaves_the_run_usable() {
    let (_dir, store, run) = setup(5);
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
        store.read_each(&run, 1, 10, |e| {
            if e.seq == 3 {
                panic!("callback gives up at seq 3");
            }
        })
    }));
    assert!(r.is_err());
    assert_eq!(store.append_facts(&run, vec![ev(6)]).unwrap()[0].seq, 6);
    check_dense(&store, &run, 6);
}

/// The callback deletes the run it is reading: the page already planned is handed over
/// whole from the (unlinked, still mapped) segments; afterwards the run is gone.
#[test]
fn callback_deleting_the_run_it_reads_still_gets_the_whole_planned_page() {
    let (_dir, store, run) = setup(5);
    let mut seen = Vec::new();
    let got = store.read_each(&run, 0, 10, |e| {
        if e.seq == 2 {
            store.delete_run(&run).unwrap();
        }
        seen.push((e.seq, e.payload.to_vec()));
    });
    assert_eq!(got.unwrap(), (5, false));
    let want: Vec<(u64, Vec<u8>)> = (1..=5).map(|i| (i, format!("p{i}").into_bytes())).collect();
    assert_eq!(seen, want);
    assert!(matches!(
        store.read(&run, 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(!store.run_exists(&run).unwrap());
}
