//! The cases. Each takes a fresh [`Fixture`] and panics with the broken rule.

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use runlog::{Error, NewEvent, RunId, RunLog, Seq};
use ulid::Ulid;

use crate::Fixture;

fn run(name: &str) -> RunId {
    RunId::new(name).expect("valid run id")
}

fn ev(kind: &str) -> NewEvent {
    NewEvent::new(kind, format!("{{\"kind\":\"{kind}\"}}"))
}

fn created(log: &impl RunLog, name: &str) -> RunId {
    let id = run(name);
    log.create_run(&id, &[]).expect("create run");
    id
}

/// Every event of the run, read in pages of `page`.
fn all(log: &impl RunLog, id: &RunId, page: usize) -> Vec<runlog::Event> {
    let mut out = Vec::new();
    loop {
        let p = log.read(id, out.len() as Seq, page).expect("read");
        out.extend(p.events);
        if !p.has_more {
            return out;
        }
    }
}

fn seqs(events: &[runlog::Event]) -> Vec<Seq> {
    events.iter().map(|e| e.seq).collect()
}

fn kinds(events: &[runlog::Event]) -> Vec<&str> {
    events.iter().map(|e| &*e.kind).collect()
}

/// Rule 6: the store assigns 1, 2, 3, … at commit, whatever the write class.
pub fn seqs_are_dense_from_one_across_facts_and_decisions<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "dense");
    assert_eq!(log.last_seq(&id).unwrap(), 0);
    let a = log.append_facts(&id, vec![ev("a"), ev("b")]).unwrap();
    assert_eq!(
        a.iter().map(|x| (x.seq, x.duplicate)).collect::<Vec<_>>(),
        [(1, false), (2, false)]
    );
    assert_eq!(log.append_decisions(&id, 2, vec![ev("c")]).unwrap(), [3]);
    assert_eq!(log.append_facts(&id, vec![ev("d")]).unwrap()[0].seq, 4);
    assert_eq!(
        log.append_decisions(&id, 4, vec![ev("e"), ev("f")])
            .unwrap(),
        [5, 6]
    );
    let events = all(log, &id, 4);
    assert_eq!(seqs(&events), [1, 2, 3, 4, 5, 6]);
    assert_eq!(kinds(&events), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(log.last_seq(&id).unwrap(), 6);
    let ids: BTreeSet<Ulid> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids.len(), 6, "every event has its own id");
}

/// Rules 1–2: a decision derived from a shorter log is rejected with both seqs named, and
/// the log is exactly as before.
pub fn fenced_decision_is_rejected_and_writes_nothing<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "fence");
    log.append_facts(&id, vec![ev("a"), ev("b")]).unwrap();
    let before = log.run_info(&id).unwrap();
    match log.append_decisions(&id, 1, vec![ev("run_completed")]) {
        Err(Error::Fenced {
            run,
            expected,
            actual,
        }) => {
            assert_eq!((run.as_str(), expected, actual), ("fence", 1, 2));
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    match log.append_decisions(&id, 3, vec![ev("ahead")]) {
        Err(Error::Fenced {
            expected: 3,
            actual: 2,
            ..
        }) => {}
        other => panic!("a fence ahead of the log is rejected too, got {other:?}"),
    }
    assert_eq!(log.run_info(&id).unwrap().last_seq, before.last_seq);
    assert_eq!(
        log.run_info(&id).unwrap().committed_bytes,
        before.committed_bytes
    );
    assert_eq!(kinds(&all(log, &id, 10)), ["a", "b"]);
    assert_eq!(
        log.append_decisions(&id, 2, vec![ev("run_completed")])
            .unwrap(),
        [3]
    );
}

/// Rule 1: the fence rides the append. Eight deciders race for each position; exactly one
/// wins every round, the others are fenced at the winner's seq.
pub fn concurrent_deciders_exactly_one_wins_each_position<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "race");
    const DECIDERS: usize = 8;
    const ROUNDS: u64 = 20;
    let barrier = Barrier::new(DECIDERS);
    let wins: Vec<Vec<Seq>> = thread::scope(|s| {
        let handles: Vec<_> = (0..DECIDERS)
            .map(|t| {
                let (barrier, id) = (&barrier, &id);
                s.spawn(move || {
                    let mut won = Vec::new();
                    for round in 0..ROUNDS {
                        barrier.wait();
                        let e = NewEvent::new("decided", format!("{t}"));
                        match log.append_decisions(id, round, vec![e]) {
                            Ok(seqs) => won.extend(seqs),
                            Err(Error::Fenced {
                                expected, actual, ..
                            }) => {
                                assert_eq!((expected, actual), (round, round + 1));
                            }
                            Err(e) => panic!("decider {t}: {e}"),
                        }
                        barrier.wait();
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all_wins: Vec<Seq> = wins.into_iter().flatten().collect();
    all_wins.sort_unstable();
    assert_eq!(
        all_wins,
        (1..=ROUNDS).collect::<Vec<_>>(),
        "one winner per position"
    );
    assert_eq!(log.last_seq(&id).unwrap(), ROUNDS);
}

/// Rule 3: a suspension's decisions commit together at consecutive seqs.
pub fn decision_batch_commits_whole_at_consecutive_seqs<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "batch");
    log.append_facts(&id, vec![ev("run_created")]).unwrap();
    let batch = vec![
        ev("hook_created").correlation_id("hook_1"),
        ev("step_created").correlation_id("step_1"),
        ev("wait_created").correlation_id("wait_1"),
    ];
    assert_eq!(log.append_decisions(&id, 1, batch).unwrap(), [2, 3, 4]);
    let events = all(log, &id, 100);
    assert_eq!(
        kinds(&events),
        [
            "run_created",
            "hook_created",
            "step_created",
            "wait_created"
        ]
    );
    let corr: Vec<_> = events.iter().map(|e| e.correlation_id.as_deref()).collect();
    assert_eq!(corr, [None, Some("hook_1"), Some("step_1"), Some("wait_1")]);
}

/// Rule 3 and bad input: one invalid event rejects the whole batch; nothing is written.
pub fn invalid_batch_is_rejected_whole<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "invalid");
    log.append_facts(&id, vec![ev("a")]).unwrap();
    let bad_kind = "k".repeat(65);
    for batch in [
        vec![ev("ok"), NewEvent::new(bad_kind.as_str(), "x")],
        vec![ev("ok"), NewEvent::new("", "x")],
        vec![ev("ok"), ev("ok2").key("x".repeat(257))],
        vec![],
    ] {
        assert!(matches!(
            log.append_facts(&id, batch.clone()),
            Err(Error::InvalidEvent { .. })
        ));
        assert!(matches!(
            log.append_decisions(&id, 1, batch),
            Err(Error::InvalidEvent { .. })
        ));
    }
    assert_eq!(kinds(&all(log, &id, 10)), ["a"]);
    assert_eq!(log.last_seq(&id).unwrap(), 1);
}

/// Rule 3 under concurrency: batches from four writers land contiguous, never interleaved.
pub fn concurrent_batches_never_interleave<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "interleave");
    const WRITERS: usize = 4;
    const BATCHES: usize = 25;
    const LEN: usize = 5;
    thread::scope(|s| {
        for w in 0..WRITERS {
            let id = &id;
            s.spawn(move || {
                for b in 0..BATCHES {
                    let batch = (0..LEN)
                        .map(|i| {
                            ev("fact")
                                .correlation_id(format!("w{w}b{b}"))
                                .key(format!("w{w}b{b}i{i}"))
                        })
                        .collect();
                    log.append_facts(id, batch).unwrap();
                }
            });
        }
    });
    let events = all(log, &id, 33);
    assert_eq!(
        seqs(&events),
        (1..=(WRITERS * BATCHES * LEN) as Seq).collect::<Vec<_>>()
    );
    for chunk in events.chunks(LEN) {
        let first = chunk[0].correlation_id.clone();
        assert!(
            chunk.iter().all(|e| e.correlation_id == first),
            "interleaved batch at seq {}",
            chunk[0].seq
        );
    }
}

/// Facts are idempotent: a repeated key or caller event id appends nothing and reports the
/// original seq, across calls and within one batch.
pub fn facts_are_idempotent_by_key_and_event_id<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "idem");
    let done = ev("step_completed")
        .correlation_id("step_1")
        .key("step_1/done");
    assert_eq!(log.append_facts(&id, vec![done.clone()]).unwrap()[0].seq, 1);
    let again = log
        .append_facts(&id, vec![ev("other"), done.clone()])
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|a| (a.seq, a.duplicate))
            .collect::<Vec<_>>(),
        [(2, false), (1, true)]
    );
    let eid = Ulid::from_parts(1_700_000_000_000, 42);
    let by_id = ev("hook_received").event_id(eid);
    assert_eq!(
        log.append_facts(&id, vec![by_id.clone()]).unwrap()[0].seq,
        3
    );
    let twice = log.append_facts(&id, vec![by_id.clone(), by_id]).unwrap();
    assert_eq!(
        twice
            .iter()
            .map(|a| (a.seq, a.duplicate))
            .collect::<Vec<_>>(),
        [(3, true), (3, true)]
    );
    let inner = log
        .append_facts(&id, vec![ev("x").key("same"), ev("y").key("same")])
        .unwrap();
    assert_eq!(
        inner
            .iter()
            .map(|a| (a.seq, a.duplicate))
            .collect::<Vec<_>>(),
        [(4, false), (4, true)]
    );
    let events = all(log, &id, 10);
    assert_eq!(
        kinds(&events),
        ["step_completed", "other", "hook_received", "x"]
    );
    assert_eq!(
        events[2].event_id, eid,
        "a caller-supplied event id is stored as given"
    );
    assert_eq!(events[0].key.as_deref(), Some("step_1/done"));
}

/// Decisions are never deduplicated: an existing key is `DuplicateDecision`, nothing written.
pub fn decisions_with_an_existing_key_are_rejected<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "dupdec");
    log.append_facts(&id, vec![ev("a").key("k1")]).unwrap();
    match log.append_decisions(&id, 1, vec![ev("b"), ev("c").key("k1")]) {
        Err(Error::DuplicateDecision { key, seq, .. }) => {
            assert_eq!((key.as_str(), seq), ("k1", 1))
        }
        other => panic!("expected DuplicateDecision, got {other:?}"),
    }
    match log.append_decisions(&id, 1, vec![ev("b").key("k2"), ev("c").key("k2")]) {
        Err(Error::DuplicateDecision { key, .. }) => assert_eq!(key, "k2"),
        other => panic!("a key repeated inside a decision batch is rejected, got {other:?}"),
    }
    assert_eq!(log.last_seq(&id).unwrap(), 1);
}

/// Rule 6: a read after N returns what follows N, with the cursor and `has_more` exact.
pub fn read_after_n_is_complete_by_density<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "cursor");
    for i in 0..10 {
        log.append_facts(&id, vec![ev(&format!("e{i}")), ev(&format!("f{i}"))])
            .unwrap();
    }
    let p = log.read(&id, 0, 3).unwrap();
    assert_eq!(
        (seqs(&p.events), p.next, p.has_more),
        (vec![1, 2, 3], 3, true)
    );
    let p = log.read(&id, 3, 100).unwrap();
    assert_eq!(
        (p.events.first().map(|e| e.seq), p.next, p.has_more),
        (Some(4), 20, false)
    );
    assert_eq!(p.events.len(), 17);
    let p = log.read(&id, 20, 5).unwrap();
    assert_eq!((p.events.len(), p.next, p.has_more), (0, 20, false));
    let p = log.read(&id, 19, 0).unwrap();
    assert_eq!((p.events.len(), p.next, p.has_more), (0, 19, true));
    let p = log.read(&id, 500, 5).unwrap();
    assert_eq!((p.events.len(), p.next, p.has_more), (0, 500, false));
}

/// Rules 6–7: a reader paging while writers append only ever sees a dense prefix, and its
/// cursor reaches every committed event.
pub fn concurrent_reader_sees_a_dense_prefix_and_ends_complete<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "follow");
    const TOTAL: usize = 300;
    let seen = thread::scope(|s| {
        let id = &id;
        for w in 0..3 {
            s.spawn(move || {
                for i in 0..TOTAL / 3 {
                    log.append_facts(id, vec![ev("w").key(format!("{w}/{i}"))])
                        .unwrap();
                }
            });
        }
        s.spawn(move || {
            let mut seen: Vec<Seq> = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            while seen.len() < TOTAL && Instant::now() < deadline {
                let after = seen.len() as Seq;
                let p = log.read(id, after, 7).unwrap();
                assert_eq!(p.next, after + p.events.len() as Seq);
                seen.extend(p.events.iter().map(|e| e.seq));
                if p.events.is_empty() {
                    log.wait(id, after, Duration::from_millis(50)).unwrap();
                }
            }
            seen
        })
        .join()
        .unwrap()
    });
    assert_eq!(seen, (1..=TOTAL as Seq).collect::<Vec<_>>());
}

/// `read_each` hands over exactly the events `read` returns, with the same cursor.
pub fn read_each_hands_over_what_read_returns<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "each");
    log.append_facts(&id, vec![ev("a").key("k"), ev("b").correlation_id("c")])
        .unwrap();
    log.append_decisions(&id, 2, vec![ev("c"), ev("d")])
        .unwrap();
    for (after, limit) in [(0, 10), (1, 2), (3, 1), (4, 3)] {
        let page = log.read(&id, after, limit).unwrap();
        let mut got = Vec::new();
        let (next, more) = log
            .read_each(&id, after, limit, &mut |e| got.push(e.to_event()))
            .unwrap();
        assert_eq!(got, page.events, "after {after} limit {limit}");
        assert_eq!((next, more), (page.next, page.has_more));
    }
}

/// Payloads, kinds, ids and times come back exactly as given (binary, NUL, empty).
pub fn payloads_round_trip_byte_for_byte<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "bytes");
    let binary: Vec<u8> = (0..=255u8).chain([0, 0, 0xff]).collect();
    let eid = Ulid::from_parts(1_700_000_000_123, 7);
    let events = vec![
        NewEvent::new("bin", binary.clone())
            .created_at_ms(1_700_000_000_123)
            .event_id(eid),
        NewEvent::new("empty", Vec::<u8>::new()),
        NewEvent::new("nul", "a\0b"),
        NewEvent::new("utf8", "ü 🦀")
            .correlation_id("c/ü")
            .key("k ü"),
    ];
    log.append_facts(&id, events).unwrap();
    let back = all(log, &id, 10);
    assert_eq!(&back[0].payload[..], &binary[..]);
    assert_eq!(
        (back[0].created_at_ms, back[0].event_id),
        (1_700_000_000_123, eid)
    );
    assert!(back[1].payload.is_empty());
    assert_eq!(&back[2].payload[..], b"a\0b");
    assert_eq!(&back[3].payload[..], "ü 🦀".as_bytes());
    assert_eq!(
        (back[3].correlation_id.as_deref(), back[3].key.as_deref()),
        (Some("c/ü"), Some("k ü"))
    );
}

/// `wait` returns at once when the log is past `after`, times out with the last seq, and is
/// woken by a commit.
pub fn wait_returns_at_once_times_out_and_wakes<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "wait");
    log.append_facts(&id, vec![ev("a")]).unwrap();
    assert_eq!(log.wait(&id, 0, Duration::from_secs(5)).unwrap(), 1);
    let t = Instant::now();
    assert_eq!(log.wait(&id, 1, Duration::from_millis(100)).unwrap(), 1);
    assert!(t.elapsed() >= Duration::from_millis(100));
    let woke = thread::scope(|s| {
        let id = &id;
        let waiter = s.spawn(move || log.wait(id, 1, Duration::from_secs(30)).unwrap());
        thread::sleep(Duration::from_millis(50));
        log.append_facts(id, vec![ev("b")]).unwrap();
        waiter.join().unwrap()
    });
    assert_eq!(woke, 2);
    assert!(matches!(
        log.wait(&run("nope"), 0, Duration::from_millis(10)),
        Err(Error::RunNotFound { .. })
    ));
}

/// `list_runs` pages in id order, exactly once each, with a correct `has_more`.
pub fn list_runs_pages_in_id_order<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let mut want: Vec<String> = (0..25)
        .map(|i| format!("run-{:02}", (i * 7) % 25))
        .collect();
    for name in &want {
        created(log, name);
    }
    log.append_facts(&run("run-03"), vec![ev("a"), ev("b")])
        .unwrap();
    want.sort();
    let mut got = Vec::new();
    let mut after: Option<RunId> = None;
    let mut pages = 0;
    loop {
        let page = log.list_runs(after.as_ref(), 10).unwrap();
        pages += 1;
        got.extend(page.runs.iter().map(|r| (r.run.to_string(), r.last_seq)));
        if !page.has_more {
            break;
        }
        after = page.next;
    }
    assert_eq!(pages, 3);
    assert_eq!(got.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(), want);
    assert_eq!(
        got.iter().find(|(r, _)| r == "run-03").map(|(_, s)| *s),
        Some(2)
    );
    let last = log.list_runs(Some(&run("run-24")), 10).unwrap();
    assert!(last.runs.is_empty() && !last.has_more && last.next.is_none());
}

/// Run info, metadata and delete: a deleted run is gone, re-creating it starts a new log, and
/// the fenced delete deletes only at the expected last seq.
pub fn run_info_meta_and_delete<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = run("meta");
    let meta = br#"{"source":"conformance"}"#;
    log.create_run(&id, meta).unwrap();
    assert_eq!(log.run_meta(&id).unwrap(), meta);
    log.append_facts(&id, vec![ev("a"), ev("b")]).unwrap();
    let info = log.run_info(&id).unwrap();
    assert_eq!((info.run.as_str(), info.last_seq), ("meta", 2));
    assert!(info.committed_bytes > 0 && info.updated_at_ms >= info.created_at_ms);
    log.delete_run(&id).unwrap();
    assert!(matches!(
        log.read(&id, 0, 10),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.append_facts(&id, vec![ev("c")]),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.delete_run(&id),
        Err(Error::RunNotFound { .. })
    ));
    log.create_run(&id, &[]).unwrap();
    assert_eq!(log.last_seq(&id).unwrap(), 0);
    assert!(log.run_meta(&id).unwrap().is_empty());
    assert_eq!(log.append_facts(&id, vec![ev("new")]).unwrap()[0].seq, 1);

    // The fenced delete (what gc deletes an archived log with): a stale expectation deletes
    // nothing, the right one deletes.
    assert!(matches!(
        log.delete_run_at(&id, 0),
        Err(Error::Fenced {
            expected: 0,
            actual: 1,
            ..
        })
    ));
    assert_eq!(log.last_seq(&id).unwrap(), 1);
    log.delete_run_at(&id, 1).unwrap();
    assert!(matches!(
        log.delete_run_at(&id, 1),
        Err(Error::RunNotFound { .. })
    ));
}

/// Bad input is a typed error and changes nothing.
pub fn bad_input_gives_typed_errors_and_changes_nothing<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "bad");
    let missing = run("missing");
    assert!(matches!(
        log.create_run(&id, &[]),
        Err(Error::RunExists { .. })
    ));
    assert!(matches!(
        log.create_run(&run("big-meta"), &[b'x'; 2049]),
        Err(Error::InvalidEvent { field: "meta", .. })
    ));
    assert!(matches!(
        log.append_facts(&missing, vec![ev("a")]),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.append_decisions(&missing, 0, vec![ev("a")]),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.read(&missing, 0, 1),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.run_info(&missing),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.last_seq(&missing),
        Err(Error::RunNotFound { .. })
    ));
    assert!(matches!(
        log.verify_run(&missing),
        Err(Error::RunNotFound { .. })
    ));
    let names: Vec<String> = log
        .list_runs(None, 100)
        .unwrap()
        .runs
        .iter()
        .map(|r| r.run.to_string())
        .collect();
    assert_eq!(names, ["bad"], "no run was created by a rejected call");
    assert_eq!(log.last_seq(&id).unwrap(), 0);
}

/// After a mixed workload, `verify_run` finds nothing and counts every event.
pub fn verify_is_clean_after_a_workload<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let id = created(log, "verify");
    for i in 0..20u64 {
        if i % 3 == 0 {
            log.append_decisions(&id, log.last_seq(&id).unwrap(), vec![ev("d"), ev("e")])
                .unwrap();
        } else {
            log.append_facts(&id, vec![ev("f").key(format!("k{i}"))])
                .unwrap();
        }
    }
    let report = log.verify_run(&id).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(log.last_seq(&id).unwrap(), 27);
    assert_eq!(report.events, 27);
}

/// The collector lock (`RunLog::lock_collector`): one holder at a time (a second taker is
/// `Busy` at once, and writes go on meanwhile), free again once the guard drops.
pub fn collector_lock_is_one_holder_at_a_time<L: RunLog>(f: Fixture<L>) {
    let log = &f.log;
    let held = log.lock_collector().expect("the first collector");
    let start = std::time::Instant::now();
    let second = log
        .lock_collector()
        .expect_err("a second collector while one holds it");
    assert!(
        matches!(second, runlog::Error::Busy { waited_ms: 0, .. }),
        "{second:?}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(10),
        "Busy at once, not after a wait"
    );
    let id = created(log, "collector");
    log.append_facts(&id, vec![ev("f")]).expect("appends go on");
    drop(held);
    let again = log
        .lock_collector()
        .expect("free once the holder dropped its guard");
    drop(again);
}
