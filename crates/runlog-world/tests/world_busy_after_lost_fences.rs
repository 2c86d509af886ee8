//! A request that loses its fenced append to another writer on every one of its
//! `fence_retries_max` (100) attempts gives up with `WorldError::Busy`:
//! `WorkflowWorldError` 503, retryable, nothing of it written. The other writer here is
//! real: a backend wrapper that commits a fact to the contested run between the World's
//! read of the run and each of its fenced appends, so every fence fails for the reason it
//! fails in production (the log moved), at every attempt.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use common::{Decisions, Interposed, Interposer, params, req, run_created_data};
use parking_lot::Mutex;
use runlog::{Config, NewEvent, Result as LogResult, RunId, RunLog, Seq, Store};
use runlog_world::{EventType, World, WorldConfig, WorldError};
use ulid::Ulid;

/// Kind of the other writer's facts (no World event: the fold counts it as an anomaly and
/// moves on, as it would for any foreign writer).
const INTERLOPER_KIND: &str = "interloper";

/// The other writer: every `append_decisions` to the contested run is preceded by its fact,
/// so the decision's fence is always stale by one event.
struct Interloper {
    contested: Mutex<Option<RunId>>,
    racing: AtomicBool,
    /// Fenced appends the World made to the contested run while racing.
    fenced_appends: AtomicU32,
}

impl Interloper {
    fn contest(&self, run: &str) {
        *self.contested.lock() = Some(RunId::new(run).expect("run id"));
        self.racing.store(true, Ordering::SeqCst);
    }

    fn stop(&self) {
        self.racing.store(false, Ordering::SeqCst);
    }

    fn races(&self, run: &RunId) -> bool {
        self.racing.load(Ordering::SeqCst) && self.contested.lock().as_ref() == Some(run)
    }
}

impl Interposer for Interloper {
    fn append_decisions(&self, inner: &dyn RunLog, call: Decisions<'_>) -> LogResult<Vec<Seq>> {
        if self.races(call.run) {
            let n = self.fenced_appends.fetch_add(1, Ordering::SeqCst);
            // An event id of its own (time 1 ms, random part n): one minted by runlog, the
            // successor of the run's last id, could meet the id the World minted for its
            // request in the same millisecond, and the World's re-mint is an attempt
            // without an append.
            let fact = NewEvent::new(INTERLOPER_KIND, "{}").event_id(Ulid::from_parts(1, n.into()));
            inner.append_facts(call.run, vec![fact])?;
        }
        call.pass(inner)
    }
}

/// The contested store: a [`Store`] whose appends go through an [`Interloper`].
type Contested = Interposed<Arc<Store>, Interloper>;

/// A World with the default config (100 fenced attempts) on an `Interloper` store, and a
/// started run on it.
fn contested_world() -> (tempfile::TempDir, World<Contested>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path(), Config::default()).expect("open store");
    let interloper = Interloper {
        contested: Mutex::new(None),
        racing: AtomicBool::new(false),
        fenced_appends: AtomicU32::new(0),
    };
    let backend = Interposed::new(Arc::new(store), interloper);
    let w = World::new(backend, WorldConfig::default());
    assert_eq!(WorldConfig::default().fence_retries_max, 100);
    let run = runlog_world::mint_run_id();
    let created = req(EventType::RunCreated, None, Some(&run_created_data("wf")));
    w.create_event(Some(&run), created, &params())
        .expect("run_created");
    w.create_event(
        Some(&run),
        req(EventType::RunStarted, None, None),
        &params(),
    )
    .expect("run_started");
    (dir, w, run)
}

/// The kinds stored in `run`, in seq order.
fn kinds(w: &World<Contested>, run: &str) -> Vec<String> {
    let id = RunId::new(run).expect("run id");
    let page = w.backend().inner.read(&id, 0, 1000).expect("read");
    assert!(!page.has_more);
    page.events
        .into_iter()
        .map(|e| e.kind.to_string())
        .collect()
}

#[track_caller]
fn assert_busy(e: &WorldError, run: &str) {
    assert!(
        matches!(e, WorldError::Busy { run_id, attempts: 100 } if run_id == run),
        "expected Busy after 100 attempts on {run}, got {e:?}"
    );
    assert_eq!((e.class_name(), e.status()), ("WorkflowWorldError", 503));
    assert_eq!(
        e.to_string(),
        format!("run {run:?} busy: 100 fenced attempts lost to concurrent writers")
    );
}

#[test]
fn create_event_losing_its_fence_100_times_is_busy_503_and_writes_nothing() {
    let (_d, w, run) = contested_world();
    let before = kinds(&w, &run);
    assert_eq!(before, ["run_created", "run_started"]);

    w.backend().hooks.contest(&run);
    let step = r#"{"stepName":"step//./wf//add","input":[1]}"#;
    let err = w
        .create_event(
            Some(&run),
            req(EventType::StepCreated, Some("step_1"), Some(step)),
            &params(),
        )
        .expect_err("every fence lost");
    w.backend().hooks.stop();

    assert_busy(&err, &run);
    assert_eq!(w.backend().hooks.fenced_appends.load(Ordering::SeqCst), 100);
    // The log holds the other writer's 100 facts and nothing of the request.
    let after = kinds(&w, &run);
    assert_eq!(after.len(), 2 + 100);
    assert!(after[2..].iter().all(|k| k == INTERLOPER_KIND), "{after:?}");

    // Not wedged: with the other writer gone, the same request commits after its facts.
    let ok = w
        .create_event(
            Some(&run),
            req(EventType::StepCreated, Some("step_1"), Some(step)),
            &params(),
        )
        .expect("uncontested");
    assert_eq!(ok.event.expect("the event").seq, 103);
}

#[test]
fn a_group_commit_losing_its_fence_100_times_answers_every_member_busy_503() {
    let (_d, w, run) = contested_world();
    w.backend().hooks.contest(&run);
    // Queued together, these three meet in one group commit: one fenced batch per attempt.
    let requests = ["step_a", "step_b", "step_c"]
        .map(|s| {
            let data = format!(r#"{{"stepName":"step//./wf//{s}","input":[1]}}"#);
            (
                Some(run.clone()),
                req(EventType::StepCreated, Some(s), Some(&data)),
                params(),
            )
        })
        .to_vec();
    let answers = w.create_events(requests);
    w.backend().hooks.stop();

    assert_eq!(answers.len(), 3);
    for answer in &answers {
        assert_busy(answer.as_ref().expect_err("every fence lost"), &run);
    }
    assert_eq!(w.backend().hooks.fenced_appends.load(Ordering::SeqCst), 100);
    let after = kinds(&w, &run);
    assert_eq!(after.len(), 2 + 100);
    assert!(after[2..].iter().all(|k| k == INTERLOPER_KIND), "{after:?}");
    assert!(
        w.list_steps(&run, &Default::default(), Default::default())
            .unwrap()
            .data
            .is_empty()
    );
}
