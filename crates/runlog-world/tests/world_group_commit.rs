//! Group commit of `events.create` (`docs/WORLD.md` §2): concurrent requests to one run are
//! decided in queue order against the state advanced by the members before them and
//! appended as one fenced batch, so they share fdatasyncs and keep every rule; a leader that
//! panics answers nobody wrongly and wedges nothing.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use common::*;
use runlog::{Config, Result as LogResult, RunId, RunLog, Seq, Store};
use runlog_world::{EventType, StepStatus, World, WorldConfig, WorldError};

#[test]
fn concurrent_creates_on_one_run_share_fdatasyncs_and_each_commits_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let w = World::new(store.clone(), WorldConfig::default());
    let run = running_run(&w);
    let before = store.commit_stats();
    const THREADS: usize = 16;
    const EACH: usize = 20;
    let results: Vec<(String, u64, StepStatus, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (w, run) = (&w, &run);
                s.spawn(move || {
                    (0..EACH)
                        .map(|i| {
                            let id = format!("step_{t}_{i}");
                            let r = step_created(w, run, &id).expect("step_created");
                            let step = r.step.expect("the step");
                            let seq = r.event.expect("the event").seq;
                            (id, seq, step.status, step.step_id)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let after = store.commit_stats();
    let n = (THREADS * EACH) as u64;
    // Every request got its own event at its own seq, and its own step as of that event.
    let seqs: HashSet<u64> = results.iter().map(|r| r.1).collect();
    assert_eq!(seqs.len() as u64, n);
    assert_eq!(seqs.iter().min(), Some(&3));
    assert_eq!(seqs.iter().max(), Some(&(n + 2)));
    for (id, _, status, step_id) in &results {
        assert_eq!((status, step_id), (&StepStatus::Pending, id));
    }
    // The log holds each step_created exactly once, at the seq its caller was told.
    let page = store.read(&RunId::new(&run).unwrap(), 2, 10_000).unwrap();
    let logged: HashMap<String, u64> = page
        .events
        .iter()
        .map(|e| (e.correlation_id.as_deref().unwrap().to_string(), e.seq))
        .collect();
    assert_eq!(logged.len() as u64, n);
    for (id, seq, ..) in &results {
        assert_eq!(logged.get(id), Some(seq), "{id}");
    }
    // Shared commits: fewer store groups than events (16 writers wait on each other's syncs).
    let groups = after.groups - before.groups;
    assert_eq!(after.events - before.events, n);
    assert!(
        groups < n / 2,
        "{groups} store commits for {n} events: requests were not grouped"
    );
}

#[test]
fn grouped_requests_keep_every_rule_in_queue_order() {
    // 16 threads each try to create the same 8 steps and to complete the run: whatever the
    // grouping, each step is created at most once, one terminal event, none created after it.
    for _ in 0..5 {
        let (_dir, w) = world();
        let run = running_run(&w);
        let created = AtomicU32::new(0);
        let completed = AtomicU32::new(0);
        std::thread::scope(|s| {
            for t in 0..16u32 {
                let (w, run, created, completed) = (&w, &run, &created, &completed);
                s.spawn(move || {
                    for i in 0..8u32 {
                        if i == t % 8 {
                            let data = format!(r#"{{"output":{}}}"#, bin(b"done"));
                            match ev(w, run, EventType::RunCompleted, None, Some(&data)) {
                                Ok(_) => {
                                    completed.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => assert_eq!(e.status(), 409, "{e}"),
                            }
                        }
                        match step_created(w, run, &format!("step_{i}")) {
                            Ok(_) => {
                                created.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => assert!([409, 410].contains(&e.status()), "{e}"),
                        }
                    }
                });
            }
        });
        assert_eq!(completed.load(Ordering::Relaxed), 1);
        let events = w
            .backend()
            .read(&RunId::new(&run).unwrap(), 0, 10_000)
            .unwrap()
            .events;
        let terminal: Vec<u64> = events
            .iter()
            .filter(|e| e.kind == "run_completed")
            .map(|e| e.seq)
            .collect();
        assert_eq!(terminal.len(), 1);
        let steps: Vec<&runlog::Event> =
            events.iter().filter(|e| e.kind == "step_created").collect();
        let ids: HashSet<_> = steps.iter().map(|e| e.correlation_id.clone()).collect();
        assert_eq!(ids.len(), steps.len(), "a step created twice");
        assert_eq!(steps.len() as u32, created.load(Ordering::Relaxed));
        assert!(steps.iter().all(|e| e.seq < terminal[0]));
    }
}

/// What the second `append_decisions` through a [`SlowThenFaulty`] does.
#[derive(Clone, Copy)]
enum Fault {
    Panic,
    Eio,
}

/// The first `append_decisions` through it sleeps 400 ms (so that requests queue behind it
/// and form one group) and the second one panics or fails with EIO, writing nothing.
struct SlowThenFaulty {
    appends: AtomicU32,
    fault: Fault,
}

impl Interposer for SlowThenFaulty {
    fn append_decisions(&self, inner: &dyn RunLog, call: Decisions<'_>) -> LogResult<Vec<Seq>> {
        match (self.appends.fetch_add(1, Ordering::SeqCst), self.fault) {
            (0, _) => std::thread::sleep(Duration::from_millis(400)),
            (1, Fault::Panic) => panic!("injected: the backend panicked inside a group commit"),
            (1, Fault::Eio) => {
                return Err(runlog::Error::io(
                    "syncing",
                    "injected",
                    std::io::Error::from_raw_os_error(5),
                ));
            }
            _ => {}
        }
        call.pass(inner)
    }
}

/// A run started on `store`, a World on a [`SlowThenFaulty`] view of it, one slow request
/// and 8 queued behind it; the 8 callers' outcomes (`Err` for a panic).
#[allow(clippy::type_complexity)]
fn group_behind_a_slow_append(
    store: &Arc<Store>,
    fault: Fault,
) -> (
    String,
    Arc<World<Interposed<Arc<Store>, SlowThenFaulty>>>,
    Vec<std::thread::Result<Result<runlog_world::EventResult, WorldError>>>,
) {
    // The run is created and started directly, so the World's first append is the slow one.
    let seed = World::new(store.clone(), WorldConfig::default());
    let run = running_run(&seed);
    drop(seed);
    let slow = SlowThenFaulty {
        appends: AtomicU32::new(0),
        fault,
    };
    let backend = Interposed::new(store.clone(), slow);
    let w = Arc::new(World::new(backend, WorldConfig::default()));
    let (tx, rx) = mpsc::channel();
    let first = {
        let (w, run) = (w.clone(), run.clone());
        std::thread::spawn(move || step_created_on(&w, &run, "first").map(|_| ()))
    };
    std::thread::sleep(Duration::from_millis(100));
    for t in 0..8 {
        let (w, run, tx) = (w.clone(), run.clone(), tx.clone());
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                step_created_on(&w, &run, &format!("queued_{t}"))
            }));
            tx.send(r).unwrap();
        });
    }
    drop(tx);
    first
        .join()
        .unwrap()
        .expect("the slow first append commits");
    let outcomes = (0..8)
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(30))
                .expect("a member hung")
        })
        .collect();
    (run, w, outcomes)
}

fn logged_steps(store: &Store, run: &str) -> Vec<String> {
    store
        .read(&RunId::new(run).unwrap(), 0, 1000)
        .unwrap()
        .events
        .into_iter()
        .filter(|e| e.kind == "step_created")
        .filter_map(|e| e.correlation_id.map(String::from))
        .collect()
}

#[test]
fn a_leader_that_panics_aborts_its_group_loudly_and_wedges_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let (run, w, outcomes) = group_behind_a_slow_append(&store, Fault::Panic);
    let (mut panicked, mut aborted, mut ok) = (0, 0, 0);
    for outcome in outcomes {
        match outcome {
            Err(_) => panicked += 1,
            Ok(Err(WorldError::GroupAborted { run_id })) => {
                assert_eq!(run_id, run);
                aborted += 1;
            }
            Ok(Err(e)) => panic!("unexpected error {e}"),
            Ok(Ok(_)) => ok += 1,
        }
    }
    assert_eq!(panicked, 1, "the leader's own call panics");
    assert!(aborted >= 1, "its group's members are told it was aborted");
    assert_eq!(panicked + aborted + ok, 8);
    // Nothing of the aborted group was written, and the run takes new requests.
    step_created_on(&w, &run, "after").expect("the run is not wedged");
    let steps = logged_steps(&store, &run);
    assert_eq!(steps.len(), 2 + ok, "{steps:?}");
    assert_eq!(steps.first().map(String::as_str), Some("first"));
    assert_eq!(steps.last().map(String::as_str), Some("after"));
}

#[test]
fn a_storage_fault_fails_the_group_members_as_each_alone_would_and_retries_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let (run, w, outcomes) = group_behind_a_slow_append(&store, Fault::Eio);
    let (mut failed, mut ok) = (0, 0);
    for outcome in outcomes {
        match outcome.expect("no panic") {
            Err(WorldError::Storage(runlog::Error::Io { op, path, source })) => {
                assert_eq!((op, path.to_str()), ("syncing", Some("injected")));
                assert!(source.to_string().contains("os error 5"), "{source}");
                failed += 1;
            }
            Err(e) => panic!("a storage fault became {e} (status {})", e.status()),
            Ok(_) => ok += 1,
        }
    }
    // The group that met the fault fails whole with it (never a retried, misleading 409);
    // requests that queued after it commit.
    assert!(failed >= 2, "{failed} failed, {ok} ok");
    assert_eq!(failed + ok, 8);
    step_created_on(&w, &run, "after").expect("the run takes requests");
    let steps = logged_steps(&store, &run);
    assert_eq!(steps.len(), 2 + ok, "{steps:?}");
}

fn step_created_on<B: RunLog>(
    w: &World<B>,
    run: &str,
    step: &str,
) -> Result<runlog_world::EventResult, WorldError> {
    let data = format!(
        r#"{{"stepName":"step//./wf//add","input":{}}}"#,
        bin(b"[1,2]")
    );
    w.create_event(
        Some(run),
        req(EventType::StepCreated, Some(step), Some(&data)),
        &params(),
    )
}

#[test]
fn create_events_from_one_thread_commits_each_runs_requests_as_one_group_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let w = World::new(store.clone(), WorldConfig::default());
    let (a, b) = (running_run(&w), running_run(&w));
    let step = |run: &str, id: &str| {
        let data = format!(r#"{{"stepName":"s","input":{}}}"#, bin(id.as_bytes()));
        (
            Some(run.to_string()),
            req(EventType::StepCreated, Some(id), Some(&data)),
            params(),
        )
    };
    let completed = |run: &str| {
        let data = format!(r#"{{"output":{}}}"#, bin(b"done"));
        (
            Some(run.to_string()),
            req(EventType::RunCompleted, None, Some(&data)),
            params(),
        )
    };
    let before = store.commit_stats();
    let answers = w.create_events(vec![
        step(&a, "a1"),
        step(&b, "b1"),
        step(&a, "a1"), // the same step again: a conflict, as it would be after a1 alone
        completed(&a),
        step(&a, "a2"), // after run_completed: the run is terminal
        (
            Some("wrun_short".into()),
            req(EventType::RunStarted, None, None),
            params(),
        ),
        step(&b, "b2"),
        completed(&a), // a second terminal event: refused
    ]);
    let after = store.commit_stats();
    // The event's type and seq, or the error's class and status.
    type Outcome<'a> = Result<(EventType, u64), (&'a str, u16)>;
    let kinds: Vec<Outcome> = answers
        .iter()
        .map(|r| match r {
            Ok(r) => {
                let e = r.event.as_ref().expect("the event");
                Ok((e.event_type, e.seq))
            }
            Err(e) => Err((e.class_name(), e.status())),
        })
        .collect();
    // Each run's requests decided in the order given, against the events before them.
    assert_eq!(kinds[0], Ok((EventType::StepCreated, 3)));
    assert_eq!(kinds[1], Ok((EventType::StepCreated, 3)));
    assert!(matches!(kinds[2], Err((_, 409))), "{:?}", kinds[2]);
    assert_eq!(kinds[3], Ok((EventType::RunCompleted, 4)));
    assert!(matches!(kinds[4], Err((_, 409 | 410))), "{:?}", kinds[4]);
    assert!(matches!(kinds[5], Err((_, 404))), "{:?}", kinds[5]);
    assert_eq!(kinds[6], Ok((EventType::StepCreated, 4)));
    assert!(matches!(kinds[7], Err((_, 409 | 410))), "{:?}", kinds[7]);
    // What each refused request gets alone, now, is what it got in the batch.
    for (i, again) in [(2, step(&a, "a1")), (4, step(&a, "a2")), (7, completed(&a))] {
        let alone = w
            .create_event(again.0.as_deref(), again.1, &again.2)
            .unwrap_err();
        let batched = answers[i].as_ref().unwrap_err();
        assert_eq!(
            (alone.class_name(), alone.status()),
            (batched.class_name(), batched.status()),
            "request {i}"
        );
    }
    // One thread, two runs: one group commit (one fdatasync) per run, not one per request.
    assert_eq!(after.events - before.events, 4);
    assert_eq!(after.groups - before.groups, 2);
    let page = store.read(&RunId::new(&a).unwrap(), 0, 100).unwrap();
    let kinds_a: Vec<&str> = page.events.iter().map(|e| &*e.kind).collect();
    assert_eq!(
        kinds_a,
        [
            "run_created",
            "run_started",
            "step_created",
            "run_completed"
        ]
    );
}
