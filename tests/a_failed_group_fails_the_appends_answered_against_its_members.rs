//! A group commit decides its members against each other (a fact whose key or caller id an
//! earlier member carries is a duplicate of that member's seq; a decision repeating it is a
//! `DuplicateDecision`; a decision is fenced against the last seq as earlier members advanced
//! it). When the group's write or fdatasync then fails, nothing of the group is written
//! (SPEC §5: cut back), so no answer may stand on a member that failed: a fact answered
//! "duplicate, stored at seq 2" whose original was never stored is an acknowledgement of an
//! event the log does not hold — and seq 2 is given to another event next. Only answers
//! decided on committed state may survive the failure (`Plan::failed`'s own comment).
//!
//! On the crash simulator: the run's lock is held from the test (as another process's writer
//! would hold it) while a leader and then two appenders queue, so the two wait in one group;
//! that group's fdatasync fails with EIO.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use runlog::io::sim::{CallKind, Fault, FaultKind, SimFs, Trigger};
use runlog::io::{Fs, OpenMode};
use runlog::{Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";

fn open(fs: &SimFs) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, runlog::Config::default()).unwrap()
}

/// What the second member of the failed group was answered, and the store afterwards.
fn second_member_of_a_failed_group<T: Send + 'static>(
    second: impl FnOnce(&Store, &RunId) -> T + Send + 'static,
) -> (SimFs, Store, RunId, Result<Vec<runlog::Appended>, Error>, T) {
    let fs = SimFs::new(5);
    let store = open(&fs);
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", "one")])
        .unwrap();
    let lock = fs
        .open(Path::new("/store/runs/r/lock"), OpenMode::ReadWrite)
        .unwrap();
    assert!(lock.try_lock().unwrap(), "the test holds the run's lock");
    // The leader: a decision fenced at a wrong seq, so its own group writes and syncs nothing.
    let leader = {
        let (store, run) = (store.clone(), run.clone());
        std::thread::spawn(move || store.append_decisions(&run, 99, vec![NewEvent::new("k", "x")]))
    };
    std::thread::sleep(Duration::from_millis(200));
    let first = {
        let (store, run) = (store.clone(), run.clone());
        std::thread::spawn(move || {
            store.append_facts(&run, vec![NewEvent::new("k", "first").key("shared")])
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let second = {
        let (store, run) = (store.clone(), run.clone());
        std::thread::spawn(move || second(&store, &run))
    };
    std::thread::sleep(Duration::from_millis(200));
    // The next fdatasync — the one of the group of `first` and `second` — fails.
    fs.inject(Fault::once(
        Trigger::Call(CallKind::SyncData, fs.call_count(CallKind::SyncData)),
        FaultKind::Eio,
    ));
    lock.unlock().unwrap();
    assert!(matches!(leader.join().unwrap(), Err(Error::Fenced { .. })));
    let first = first.join().unwrap();
    let second = second.join().unwrap();
    assert!(
        matches!(first, Err(Error::Io { .. })),
        "the group's fdatasync failed: {first:?}"
    );
    assert_eq!(
        store.commit_stats().group_sizes[1],
        1,
        "first and second were one group of two"
    );
    (fs, store, run, first, second)
}

fn payloads(store: &Store, run: &RunId) -> Vec<(u64, String, Option<String>)> {
    store
        .read(run, 0, 100)
        .unwrap()
        .events
        .iter()
        .map(|e| {
            (
                e.seq,
                String::from_utf8_lossy(&e.payload).into_owned(),
                e.key.as_deref().map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn a_fact_deduplicated_against_a_failed_member_is_not_acknowledged() {
    let (fs, store, run, _, second) = second_member_of_a_failed_group(|store, run| {
        store.append_facts(run, vec![NewEvent::new("k", "second").key("shared")])
    });
    // Nothing of the failed group is in the log.
    assert_eq!(payloads(&store, &run), [(1, "one".into(), None)]);
    // The next append takes seq 2.
    let next = store
        .append_facts(&run, vec![NewEvent::new("k", "next")])
        .unwrap();
    assert_eq!(next[0].seq, 2);
    let fresh = open(&fs);
    let log = payloads(&fresh, &run);
    // `second` was answered; whatever it was told must be true of the log.
    match &second {
        Ok(acks) => {
            let held = log.iter().find(|(s, _, _)| *s == acks[0].seq);
            assert_eq!(
                held.and_then(|h| h.2.as_deref()),
                Some("shared"),
                "second was acknowledged as {acks:?} (its key stored at seq {}), but the log \
                 is {log:?}: no event holds key `shared`",
                acks[0].seq
            );
        }
        Err(e) => assert!(matches!(e, Error::Io { .. }), "{e:?}"),
    }
}

#[test]
fn a_decision_is_not_rejected_as_a_duplicate_of_a_failed_member() {
    let (_fs, store, run, _, second) = second_member_of_a_failed_group(|store, run| {
        // Fenced at the run's real last seq; repeats the key of the failing member.
        store.append_decisions(run, 1, vec![NewEvent::new("k", "decision").key("shared")])
    });
    let log = payloads(&store, &run);
    assert_eq!(log, [(1, "one".into(), None)]);
    match &second {
        Err(Error::DuplicateDecision { seq, key, .. }) => panic!(
            "the decision was rejected as a duplicate of key {key} at seq {seq}, but the log \
             is {log:?}"
        ),
        Err(Error::Fenced { actual, .. }) => panic!(
            "the decision at the log's last seq 1 was fenced against last seq {actual}, which \
             only the failed member would have made"
        ),
        _ => {}
    }
}
