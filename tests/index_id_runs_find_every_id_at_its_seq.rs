//! A segment index of version 3 or later (format/SPEC.md §9) keeps the event ids as runs of
//! consecutive ids at consecutive seqs, so the ids a batch mints in one millisecond cost one
//! entry, not one each. Every id is still found at its own seq: a caller presenting any
//! stored id again (minted or its own, first, inside or last of a run) gets a duplicate at
//! that seq from a fresh open that reads the indexes, and an id just past a run is new.

mod common;

use std::path::Path;

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        open_segment_index_events: 16,
        ..Config::default()
    }
}

fn fact(i: u64) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}"))
}

/// Batches of 40 minted ids, each followed by a fact with a caller id: 20 rounds. Returns
/// the run and the caller ids.
fn build(dir: &Path) -> (RunId, Vec<Ulid>) {
    let store = Store::open(dir, small()).unwrap();
    let run = RunId::new("runs").unwrap();
    store.create_run(&run).unwrap();
    let mut callers = Vec::new();
    for round in 0..20u64 {
        store
            .append_facts(&run, (0..40).map(|j| fact(round * 100 + j)).collect())
            .unwrap();
        let id = Ulid::from_parts(1_600_000_000_000 + round, u128::from(round) + 1);
        callers.push(id);
        let a = store
            .append_facts(&run, vec![fact(round).event_id(id)])
            .unwrap();
        assert!(!a[0].duplicate);
    }
    assert_eq!(store.last_seq(&run).unwrap(), 20 * 41);
    (run, callers)
}

/// (version, id tree entries, events covered) of each index of the run, from page 0.
fn index_headers(dir: &Path) -> Vec<(u32, u32, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join("runs/runs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "idx") {
            let b = std::fs::read(&path).unwrap();
            let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            // Header (SPEC §9): version at 4, base_seq 16, last_seq 24; the id tree's five
            // u32 at 84, its entry count last.
            out.push((u32_at(4), u32_at(100), u64_at(24) + 1 - u64_at(16)));
        }
    }
    out
}

#[test]
fn every_stored_id_presented_again_is_a_duplicate_at_its_seq_from_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let (run, callers) = build(dir.path());
    let headers = index_headers(dir.path());
    assert!(
        headers.len() >= 3,
        "sealed segments and the open one's: {headers:?}"
    );
    for (version, entries, covered) in &headers {
        assert_eq!(*version, 4);
        assert!(
            u64::from(*entries) * 3 < *covered,
            "runs, not one entry per id: {headers:?}"
        );
    }
    let store = Store::open(dir.path(), small()).unwrap();
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(events.len(), 820);
    for e in &events {
        let again = fact(0).event_id(e.event_id);
        let a = store.append_facts(&run, vec![again]).unwrap();
        assert_eq!(
            (a[0].seq, a[0].duplicate),
            (e.seq, true),
            "id {}",
            e.event_id
        );
    }
    for (round, id) in callers.iter().enumerate() {
        assert_eq!(events[round * 41 + 40].event_id, *id);
    }
    assert_eq!(store.last_seq(&run).unwrap(), 820, "nothing was appended");
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report.notes.is_empty(),
        "every index read: {:?}",
        report.notes
    );
}

#[test]
fn an_id_just_below_or_past_a_run_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = build(dir.path());
    let store = Store::open(dir.path(), small()).unwrap();
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    // Nothing is minted before the first batch's first id, nor after the last batch's last
    // (the caller ids are from another millisecond): one below and one past are stored
    // nowhere, though each is an id + 1 away from a run of the indexes.
    let below = Ulid(events[0].event_id.0 - 1);
    let past = Ulid(events[818].event_id.0 + 1);
    let stepped = events[779..819]
        .windows(2)
        .filter(|w| w[1].event_id.0 == w[0].event_id.0 + 1)
        .count();
    assert!(stepped > 0, "a run of the last batch ends at its last id");
    let a = store
        .append_facts(&run, vec![fact(1).event_id(below), fact(2).event_id(past)])
        .unwrap();
    assert_eq!(
        a.iter().map(|a| (a.seq, a.duplicate)).collect::<Vec<_>>(),
        [(821, false), (822, false)]
    );
    let a = store
        .append_facts(&run, vec![fact(3).event_id(past)])
        .unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (822, true));
}

/// Old or forged data holding one id twice (a later batch's caller id rewritten to an
/// earlier batch's, its checksum made good): a caller presenting that id is told its first
/// seq, by a writer's in-memory map before the segment is indexed and by its index after
/// (version 3's first form answered the last).
#[test]
fn a_repeated_id_in_old_data_is_found_at_its_first_seq_before_and_after_indexing() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("dup").unwrap();
    let (x, y) = (1_000_000u128, 9_000_000u128);
    {
        let store = Store::open(dir.path(), small()).unwrap();
        store.create_run(&run).unwrap();
        let first: Vec<NewEvent> = (0..3).map(|k| fact(0).event_id(Ulid(x + k))).collect();
        store.append_facts(&run, first).unwrap();
        store
            .append_facts(&run, vec![fact(0).event_id(Ulid(y))])
            .unwrap();
    }
    let seg = dir.path().join("runs/dup/seg-00000001.log");
    let mut b = std::fs::read(&seg).unwrap();
    let salt = u32::from_le_bytes(b[20..24].try_into().unwrap());
    let second = common::batch_offsets_in(&b)[1] as usize;
    let len = common::batch_len_at(&b, second).unwrap();
    let batch = &mut b[second..second + len];
    let at = batch
        .windows(16)
        .position(|w| w == Ulid(y).to_bytes())
        .unwrap();
    batch[at..at + 16].copy_from_slice(&Ulid(x + 1).to_bytes());
    let mut crc = crc32fast::Hasher::new_with_initial(salt);
    crc.update(&batch[..len - 4]);
    batch[len - 4..].copy_from_slice(&crc.finalize().to_le_bytes());
    std::fs::write(&seg, &b).unwrap();
    let ask = |store: &Store| {
        let a = store
            .append_facts(&run, vec![fact(9).event_id(Ulid(x + 1))])
            .unwrap();
        (a[0].seq, a[0].duplicate)
    };
    let store = Store::open(dir.path(), small()).unwrap();
    assert_eq!(
        store.read(&run, 3, 1).unwrap().events[0].event_id,
        Ulid(x + 1)
    );
    assert_eq!(ask(&store), (2, true), "from the in-memory map");
    while !dir.path().join("runs/dup/seg-00000001.idx").exists() {
        store
            .append_facts(&run, (0..50).map(fact).collect())
            .unwrap();
    }
    drop(store);
    let store = Store::open(dir.path(), small()).unwrap();
    assert_eq!(ask(&store), (2, true), "from the version-3 index");
}
