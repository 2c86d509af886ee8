//! Appends that wait in one group commit are written as one batch per run of the same class
//! (facts, or decisions), not one batch per append: the group is acknowledged after one
//! `fdatasync` anyway, so a crash keeps all of it or none of it either way (rule 11), and the
//! batch framing and index entry are paid once. Each appender's events are still its own,
//! contiguous, at the seqs it was acknowledged for.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use runlog::{Config, NewEvent, RunId, Store};

/// A store at `<dir>/store` with run `name` holding one event; the run's directory.
fn one_event_run(dir: &std::path::Path, name: &str, config: Config) -> (Store, RunId, PathBuf) {
    let root = dir.join("store");
    let store = Store::open(&root, config).unwrap();
    let run = RunId::new(name).unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("run_created", b"{}".to_vec())])
        .unwrap();
    let run_dir = root.join("runs").join(run.as_str());
    (store, run, run_dir)
}

/// Eight threads append one fact each (`kind`, payload `appender <t>`) while the run's lock is
/// held: the first leads and waits for the lock, the others queue behind it; the lock is
/// released after 300 ms. Returns each appender's (seq, payload), sorted.
fn eight_appenders_behind_a_held_lock(
    store: &Store,
    run: &RunId,
    run_dir: &std::path::Path,
    kind: &'static str,
) -> Vec<(u64, String)> {
    let held = common::HeldLock::take(&run_dir.join("lock"));
    let start = Arc::new(Barrier::new(9));
    let appenders: Vec<_> = (0..8)
        .map(|t| {
            let (store, run, start) = (store.clone(), run.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let payload = format!("appender {t}");
                let out = store
                    .append_facts(
                        &run,
                        vec![NewEvent::new(kind, payload.clone().into_bytes())],
                    )
                    .unwrap();
                (out[0].seq, payload)
            })
        })
        .collect();
    start.wait();
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    let mut acked: Vec<(u64, String)> = appenders.into_iter().map(|a| a.join().unwrap()).collect();
    acked.sort();
    acked
}

/// Eight one-fact appenders queue behind a leader that waits for the run's lock; once it is
/// released the followers commit as one group. Every group of facts is one batch: the
/// segment holds as many new batches as the store counted groups (fewer than the appends),
/// each appender reads back its own payload at its acknowledged seq, and `verify` and a fresh
/// open agree.
#[test]
fn facts_waiting_in_one_group_share_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run, run_dir) = one_event_run(dir.path(), "wrun_grouped", Config::default());
    let seg = run_dir.join("seg-00000001.log");
    let batches_before = common::batch_offsets(&seg).len();
    let groups_before = store.commit_stats().groups;

    let acked = eight_appenders_behind_a_held_lock(&store, &run, &run_dir, "step_completed");
    assert_eq!(
        acked.iter().map(|a| a.0).collect::<Vec<_>>(),
        (2..=9).collect::<Vec<_>>()
    );

    let groups = store.commit_stats().groups - groups_before;
    let batches = common::batch_offsets(&seg).len() - batches_before;
    assert!(
        groups < 8,
        "the appenders waited in a shared group ({groups} groups)"
    );
    assert_eq!(batches as u64, groups, "one batch per group of facts");

    let read = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(read.len(), 9);
    for (seq, payload) in &acked {
        let e = &read[(*seq - 1) as usize];
        assert_eq!((e.seq, &e.payload[..]), (*seq, payload.as_bytes()));
    }
    assert!(
        read.windows(2).all(|w| w[0].event_id < w[1].event_id),
        "minted ids stay monotonic inside a shared batch"
    );
    drop(store);
    let reopened = Store::open(dir.path().join("store"), Config::default()).unwrap();
    let report = reopened.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, 9);
    let again = reopened.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(
        again.iter().map(|e| e.payload.to_vec()).collect::<Vec<_>>(),
        read.iter().map(|e| e.payload.to_vec()).collect::<Vec<_>>()
    );
}

/// A decision and the facts around it in one group are separate batches (its batch is marked
/// fenced, theirs not), and a batch never grows past `batch_events_max`, the most one append
/// may hold: eight single-fact appenders under a limit of 3 events need at least three
/// batches for their group.
#[test]
fn a_shared_batch_stays_within_what_one_append_may_be() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        batch_events_max: 3,
        ..Config::default()
    };
    let (store, run, run_dir) = one_event_run(dir.path(), "wrun_capped", config);
    let seg = run_dir.join("seg-00000001.log");
    eight_appenders_behind_a_held_lock(&store, &run, &run_dir, "e");
    let bytes = std::fs::read(&seg).unwrap();
    let counts: Vec<u64> = common::batch_offsets_in(&bytes)
        .iter()
        .map(|&at| common::batch_head(&bytes, at as usize).count)
        .collect();
    assert_eq!(counts[0], 1, "run_created");
    assert_eq!(counts.iter().sum::<u64>(), 9);
    assert!(counts.iter().all(|&c| c <= 3), "{counts:?}");
    assert!(counts.iter().any(|&c| c > 1), "{counts:?}");

    // A decision waiting with facts: its own batch, flagged fenced.
    let held = common::HeldLock::take(&run_dir.join("lock"));
    let before = common::batch_offsets_in(&bytes).len();
    let s = store.clone();
    let r = run.clone();
    let leader =
        std::thread::spawn(move || s.append_facts(&r, vec![NewEvent::new("lead", b"0".to_vec())]));
    std::thread::sleep(Duration::from_millis(100));
    let s = store.clone();
    let r = run.clone();
    let fact =
        std::thread::spawn(move || s.append_facts(&r, vec![NewEvent::new("f", b"1".to_vec())]));
    std::thread::sleep(Duration::from_millis(100));
    let s = store.clone();
    let r = run.clone();
    // Derived from the log as it will be after the leader and the fact: seq 11.
    let decision = std::thread::spawn(move || {
        s.append_decisions(&r, 11, vec![NewEvent::new("d", b"2".to_vec())])
    });
    std::thread::sleep(Duration::from_millis(200));
    drop(held);
    assert_eq!(leader.join().unwrap().unwrap()[0].seq, 10);
    assert_eq!(fact.join().unwrap().unwrap()[0].seq, 11);
    assert_eq!(decision.join().unwrap().unwrap(), vec![12]);
    let bytes = std::fs::read(&seg).unwrap();
    let after: Vec<(bool, u64)> = common::batch_offsets_in(&bytes)[before..]
        .iter()
        .map(|&at| {
            let h = common::batch_head(&bytes, at as usize);
            (h.fenced, h.count)
        })
        .collect();
    // (fenced, count): the leader alone, then the fact, then the decision on its own.
    assert_eq!(after, [(false, 1), (false, 1), (true, 1)]);
}

/// Damage inside a shared batch is the damage of every append in it: a fresh `Store` reads the
/// events before it and fails `Corrupt` at that batch's offset when a read reaches it; `repair_run` cuts the run there
/// (keeping the segment's tail from there, the shared batch and the append after it, in its
/// `.cut` file), and
/// the run takes its next append at the seq after the cut.
#[test]
fn damage_inside_a_shared_batch_is_cut_at_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run, run_dir) = one_event_run(dir.path(), "wrun_cut", Config::default());
    let seg = run_dir.join("seg-00000001.log");
    eight_appenders_behind_a_held_lock(&store, &run, &run_dir, "step_completed");
    store
        .append_facts(&run, vec![NewEvent::new("after", b"10".to_vec())])
        .unwrap();
    drop(store);
    let bytes = std::fs::read(&seg).unwrap();
    let offsets = common::batch_offsets_in(&bytes);
    let heads: Vec<common::BatchHead> = offsets
        .iter()
        .map(|&at| common::batch_head(&bytes, at as usize))
        .collect();
    let shared = heads
        .iter()
        .position(|h| h.count > 1)
        .expect("a shared batch");
    let (at, first) = (offsets[shared], heads[shared].first_seq);
    // A byte inside its records (past its header).
    let flipped = heads[shared].records_at + 4;
    common::flip(&seg, at + flipped as u64, 0x10);

    let store = Store::open(dir.path().join("store"), Config::default()).unwrap();
    // A page ends where the damage begins; the read that reaches it fails there.
    let page = store.read(&run, 0, usize::MAX).unwrap();
    assert_eq!((page.events.len() as u64, page.has_more), (first - 1, true));
    match store.read(&run, first - 1, usize::MAX) {
        Err(runlog::Error::Corrupt { offset, .. }) => assert_eq!(offset, at),
        other => panic!("expected Corrupt at {at}: {other:?}"),
    }
    let repair = store.repair_run(&run).unwrap().expect("damaged");
    assert_eq!((repair.offset, repair.last_seq), (at, first - 1));
    // The segment's tail from the cut, as it was on disk: the shared batch (damaged), the
    // append after it, the preallocated zeros.
    let mut tail = bytes[at as usize..].to_vec();
    tail[flipped] ^= 0x10;
    assert_eq!(repair.saved_bytes, tail.len() as u64);
    assert_eq!(std::fs::read(&repair.saved).unwrap(), tail);
    let out = store
        .append_facts(&run, vec![NewEvent::new("next", b"n".to_vec())])
        .unwrap();
    assert_eq!(out[0].seq, first);
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(events.len() as u64, first);
    assert_eq!(&events.last().unwrap().payload[..], b"n");
}
