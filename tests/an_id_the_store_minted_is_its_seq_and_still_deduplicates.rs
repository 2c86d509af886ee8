//! In a segment of format version 3 an id the store mints is the one its seq gives
//! (format/SPEC.md §4b: the commit time, then the segment's salt, then the seq), so the frame
//! stores nothing of it and no index or map holds it. What that must not change: every id is
//! unique, a minted id sorts after every earlier one, and an id presented again by a caller
//! deduplicates at its seq wherever the run holds it — the last segment, a sealed and indexed
//! one, a parked one, the open segment's index, after a reopen.

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

fn small() -> Config {
    Config {
        segment_len_bytes_max: 6 << 10,
        open_segment_index_events: 16,
        ..Config::default()
    }
}

fn fact(i: u64) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}"))
}

/// The parts of an id of its seq: (the salt part, the seq part).
fn parts(id: Ulid) -> (u32, u64) {
    let random = id.0 & ((1u128 << 80) - 1);
    ((random >> 48) as u32, (random as u64) & ((1 << 48) - 1))
}

#[test]
fn minted_ids_are_their_seqs_unique_and_increasing_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    for i in 0..600 {
        store.append_facts(&run, vec![fact(i)]).unwrap();
    }
    let info = store.run_info(&run).unwrap();
    assert!(info.segment_count >= 4, "{info:?}");
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    let mut salts = std::collections::BTreeSet::new();
    let mut newest = Ulid::nil();
    let mut other_ways = 0;
    for e in &events {
        let (salt, seq) = parts(e.event_id);
        assert_eq!(e.event_id.timestamp_ms(), e.created_at_ms);
        assert!(e.event_id > newest, "seq {}: minted ids increase", e.seq);
        if seq == e.seq {
            salts.insert(salt);
        } else {
            // Only where the id of its seq would not sort after the newest: within the
            // millisecond of a roll to a segment whose salt is smaller.
            assert_eq!(
                e.event_id.timestamp_ms(),
                newest.timestamp_ms(),
                "seq {}",
                e.seq
            );
            other_ways += 1;
        }
        newest = e.event_id;
    }
    assert!(other_ways < 60, "{other_ways} of 600 minted another way");
    // One salt per segment.
    assert!(
        salts.len() as u32 <= info.segment_count && salts.len() >= 2,
        "{salts:?}"
    );
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn a_minted_id_presented_again_deduplicates_wherever_the_run_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    let events = {
        let store = Store::open(dir.path(), small()).unwrap();
        store.create_run(&run).unwrap();
        for i in 0..600 {
            store.append_facts(&run, vec![fact(i)]).unwrap();
        }
        store.read(&run, 0, usize::MAX).unwrap().events
    };
    // The first segment, one parked in the middle, the one before the last, the last.
    let seqs = [1u64, 2, 150, 300, 450, 599, 600];
    for round in 0..2 {
        // A fresh store each round: the first finds them through the indexes and the open
        // segment's index, the second after the first round's appends.
        let store = Store::open(dir.path(), small()).unwrap();
        for &seq in &seqs {
            let id = events[seq as usize - 1].event_id;
            let again = NewEvent::new("other", "x").event_id(id);
            let got = store.append_facts(&run, vec![again]).unwrap();
            assert_eq!(
                (got[0].seq, got[0].duplicate),
                (seq, true),
                "round {round}, seq {seq}"
            );
            // As a decision, the same id is refused naming its seq; nothing is written.
            let last = store.last_seq(&run).unwrap();
            let refused =
                store.append_decisions(&run, last, vec![NewEvent::new("other", "x").event_id(id)]);
            assert!(refused.is_err(), "round {round}, seq {seq}: {refused:?}");
            assert_eq!(store.last_seq(&run).unwrap(), last);
        }
        assert_eq!(store.last_seq(&run).unwrap(), 600 + round);
        // One new fact a round, so the second round also sees an appended tail.
        store.append_facts(&run, vec![fact(1000 + round)]).unwrap();
    }
    let store = Store::open(dir.path(), small()).unwrap();
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn an_id_of_the_shape_of_a_seq_whose_event_has_another_id_is_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    // Seq 1 minted; seq 2 with the caller's own id.
    store.append_facts(&run, vec![fact(0)]).unwrap();
    let own = Ulid::from_parts(1_700_000_000_000, 42);
    store
        .append_facts(&run, vec![fact(1).event_id(own)])
        .unwrap();
    let minted = store.read(&run, 0, 1).unwrap().events[0].event_id;
    // The id seq 2 would have had: seq 1's id + 1 (same time, same salt). Seq 2 holds
    // another id, so this one is new.
    let shaped = minted.increment().unwrap();
    assert_eq!(parts(shaped).1, 2);
    let got = store
        .append_facts(&run, vec![fact(2).event_id(shaped)])
        .unwrap();
    assert_eq!((got[0].seq, got[0].duplicate), (3, false));
    // Both stay findable: each deduplicates at its own seq.
    for (id, seq) in [(own, 2), (shaped, 3), (minted, 1)] {
        let got = store
            .append_facts(&run, vec![fact(9).event_id(id)])
            .unwrap();
        assert_eq!((got[0].seq, got[0].duplicate), (seq, true), "{id}");
    }
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    let ids: std::collections::HashSet<Ulid> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids.len(), events.len(), "ids stay unique");
}
