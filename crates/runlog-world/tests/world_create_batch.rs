//! `events.createBatch` on slot runs: request order at consecutive seqs in one fenced,
//! atomic append (one store commit), per-event answers as each single `create` would give,
//! and the batches the reference refuses refused whole, writing nothing.
mod common;

use std::sync::Arc;

use common::*;
use parking_lot::Mutex;
use runlog::{Config, RunId, RunLog, Seq, Store};
use runlog_world::{EventRequest, EventType, StepStatus, World, WorldConfig, slot_event_id};

fn step(corr: &str) -> EventRequest {
    let data = format!(
        r#"{{"stepName":"step//./wf//add","input":{}}}"#,
        bin(b"[1]")
    );
    req(EventType::StepCreated, Some(corr), Some(&data))
}

fn wait(corr: &str) -> EventRequest {
    req(
        EventType::WaitCreated,
        Some(corr),
        Some(r#"{"resumeAt":"2030-01-01T00:00:00.000Z"}"#),
    )
}

#[test]
fn batch_lands_in_request_order_at_consecutive_seqs_in_one_commit() {
    let (_dir, w) = world();
    let run = running_run_at(&w, 7);
    let before = w.backend().commit_stats();
    let answers = w
        .create_batch(
            &run,
            vec![
                step("step_1"),
                req(EventType::StepStarted, Some("step_1"), None),
                wait("wait_1"),
                step("step_2"),
            ],
            &params(),
        )
        .unwrap();
    let after = w.backend().commit_stats();
    assert_eq!(
        (after.groups - before.groups, after.events - before.events),
        (1, 4)
    );
    let answers: Vec<_> = answers.into_iter().map(Result::unwrap).collect();
    let ids: Vec<_> = answers
        .iter()
        .map(|a| a.event.as_ref().unwrap().event_id.clone())
        .collect();
    assert_eq!(ids, (3..=6).map(slot_event_id).collect::<Vec<_>>());
    // step_created + step_started of one step: born running, attempt 1.
    assert_eq!(
        answers[0].step.as_ref().unwrap().status,
        StepStatus::Pending
    );
    let started = answers[1].step.as_ref().unwrap();
    assert_eq!((started.status, started.attempt), (StepStatus::Running, 1));
    assert!(answers[2].wait.is_some());
    assert_eq!(
        kinds(&w, &run),
        [
            "run_created",
            "run_started",
            "step_created",
            "step_started",
            "wait_created",
            "step_created"
        ]
    );
}

#[test]
fn batch_rejects_each_failing_event_as_its_single_create_would_and_commits_the_rest() {
    let (_dir, w) = world();
    let run = running_run_at(&w, 7);
    step_created(&w, &run, "step_1").unwrap();
    let answers = w
        .create_batch(
            &run,
            vec![
                wait("wait_1"),
                step("step_1"),
                req(EventType::StepCompleted, Some("step_9"), None),
                step("step_2"),
            ],
            &params(),
        )
        .unwrap();
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0].as_ref().unwrap().event.as_ref().unwrap().seq, 4);
    // What a single create of each would have answered.
    assert_eq!(
        answers[1].as_ref().unwrap_err().status(),
        step_created(&w, &run, "step_1").unwrap_err().status()
    );
    assert_eq!(answers[1].as_ref().unwrap_err().status(), 409);
    assert!(answers[2].as_ref().unwrap_err().status() >= 400);
    assert_eq!(answers[3].as_ref().unwrap().event.as_ref().unwrap().seq, 5);
    assert_eq!(kinds(&w, &run).len(), 5);
}

#[test]
fn batches_the_reference_refuses_are_refused_whole_and_write_nothing() {
    let (_dir, w) = world();
    let run = running_run_at(&w, 7);
    let data = format!(r#"{{"token":"t","metadata":{}}}"#, bin(b"m"));
    let refused = [
        vec![
            wait("wait_1"),
            req(EventType::HookCreated, Some("hook_1"), Some(&data)),
        ],
        vec![wait("wait_1"), req(EventType::RunCancelled, None, None)],
        vec![step("step_1"), step("step_1")],
        vec![
            wait("wait_1"),
            req(EventType::WaitCompleted, Some("wait_1"), None),
        ],
        vec![
            step("step_1"),
            req(
                EventType::StepStarted,
                Some("step_1"),
                Some(r#"{"input":1}"#),
            ),
        ],
    ];
    for batch in refused {
        let e = w.create_batch(&run, batch, &params()).unwrap_err();
        assert_eq!(e.status(), 400, "{e}");
    }
    assert_eq!(kinds(&w, &run).len(), 2);
    // A run of spec 5 has no slots to batch into.
    let old = running_run_at(&w, 5);
    assert_eq!(
        w.create_batch(&old, vec![wait("wait_1")], &params())
            .unwrap_err()
            .status(),
        400
    );
    assert_eq!(kinds(&w, &old).len(), 2);
}

#[test]
fn batch_after_a_terminal_event_answers_each_event_with_the_terminal_runs_refusal() {
    let (_dir, w) = world();
    let run = running_run_at(&w, 7);
    let answers = w
        .create_batch(
            &run,
            vec![
                req(EventType::RunCompleted, None, Some(r#"{"output":1}"#)),
                wait("wait_1"),
            ],
            &params(),
        )
        .unwrap();
    assert!(answers[0].is_ok());
    assert_eq!(answers[1].as_ref().unwrap_err().status(), 409);
    assert_eq!(
        kinds(&w, &run),
        ["run_created", "run_started", "run_completed"]
    );
}

/// What another writer does once, just before the next fenced append reaches the store.
type Intrusion = Box<dyn FnOnce() + Send>;

/// Lets another writer commit right before the next fenced append (a lost race, as another
/// process would cause it).
struct Racing {
    before_next_append: Mutex<Option<Intrusion>>,
}

impl Interposer for Racing {
    fn append_decisions(
        &self,
        inner: &dyn RunLog,
        call: Decisions<'_>,
    ) -> runlog::Result<Vec<Seq>> {
        let intrusion = self.before_next_append.lock().take();
        if let Some(intrude) = intrusion {
            intrude();
        }
        call.pass(inner)
    }
}

#[test]
fn batch_that_loses_its_fence_leaves_nothing_and_is_decided_again_after_the_winner() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let racing = World::new(
        Interposed::new(
            store.clone(),
            Racing {
                before_next_append: Mutex::new(None),
            },
        ),
        WorldConfig::default(),
    );
    // The other writer: another World on the same store (its own caches and locks, as in
    // another process).
    let other = Arc::new(World::new(store.clone(), WorldConfig::default()));
    let run = running_run_at(&other, 7);
    let intruder = {
        let (other, run) = (other.clone(), run.clone());
        Box::new(move || {
            step_created(&other, &run, "step_2").expect("the other writer's step");
        })
    };
    *racing.backend().hooks.before_next_append.lock() = Some(intruder);
    let answers = racing
        .create_batch(
            &run,
            vec![step("step_1"), step("step_2"), wait("wait_1")],
            &params(),
        )
        .unwrap();
    // The first attempt's fence failed (the other writer took seq 3): nothing of it was
    // written; decided again, step_2 is now taken and the rest lands after the winner.
    assert_eq!(answers[0].as_ref().unwrap().event.as_ref().unwrap().seq, 4);
    assert_eq!(answers[1].as_ref().unwrap_err().status(), 409);
    assert_eq!(answers[2].as_ref().unwrap().event.as_ref().unwrap().seq, 5);
    let stored: Vec<_> = store
        .read(&RunId::new(&run).unwrap(), 0, 100)
        .unwrap()
        .events
        .into_iter()
        .map(|e| (e.kind.to_string(), e.correlation_id.map(String::from)))
        .collect();
    let expected = [
        ("run_created", None),
        ("run_started", None),
        ("step_created", Some("step_2")),
        ("step_created", Some("step_1")),
        ("wait_created", Some("wait_1")),
    ];
    assert_eq!(
        stored,
        expected
            .iter()
            .map(|(k, c)| (k.to_string(), c.map(str::to_string)))
            .collect::<Vec<_>>()
    );
}
