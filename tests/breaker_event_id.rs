//! A caller-supplied event id equal to the id the store minted for an existing event is not
//! deduplicated: the run ends up with two events of one event id (the README: "idempotent by a
//! key or a caller-supplied event id"; `event_id` is an event's identity, e.g. `eventId` in
//! `runlog export`). Only caller-supplied ids are indexed (src/run/commit.rs, `Planner`).
//! Found by the breaker review.

use runlog::{Config, NewEvent, RunId, Store};

#[test]
fn fact_with_event_id_of_a_stored_minted_event_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("r1").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("a", "p")])
        .unwrap();
    let minted = store.read(&run, 0, 1).unwrap().events[0].event_id;

    let got = store
        .append_facts(&run, vec![NewEvent::new("b", "q").event_id(minted)])
        .unwrap();

    // Actual: Appended { seq: 2, duplicate: false } and two events with id `minted`.
    assert_eq!(got[0].seq, 1);
    assert!(got[0].duplicate);
    assert_eq!(store.last_seq(&run).unwrap(), 1);
}
