//! `hookResumeDedup` (`src/resume.rs`): a `hook_received` created with `params.resumeId` is
//! a fact of its run keyed by the resume id, so every writer of one `(runId, resumeId)` —
//! a retry, threads of one World, two Worlds on one store — commits one event and is
//! answered with it; a reused resume id with another payload digest, or for another hook,
//! is `EntityConflictError` (409) as in world-local 5.0.0-beta.46; a `hook_received`
//! without a resume id is written as before; the resume id round-trips through
//! `events.list`/`get`/`listByCorrelationId`.

mod common;

use std::sync::{Arc, Barrier};

use common::*;
use runlog_world::{
    CreateEventParams, EventResult, EventType, Pagination, ResolveData, World, WorldError,
    slot_event_id,
};

const HOOK: &str = "hook_1";
const TOKEN: &str = "tok-resume";
const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn resume(id: &str, digest: Option<&str>) -> CreateEventParams {
    CreateEventParams {
        resume_id: Some(id.to_string()),
        resume_payload_digest: digest.map(str::to_owned),
        ..params()
    }
}

fn received(
    w: &TestWorld,
    run: &str,
    hook: &str,
    payload: &[u8],
    p: &CreateEventParams,
) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"token":"{TOKEN}","payload":{}}}"#, bin(payload));
    w.create_event(
        Some(run),
        req(EventType::HookReceived, Some(hook), Some(&data)),
        p,
    )
}

/// A running slot run (spec 7) with live hook [`HOOK`].
fn run_with_hook(w: &TestWorld) -> String {
    let run = running_run_at(w, 7);
    hook_created(w, &run, HOOK, TOKEN).unwrap();
    run
}

fn hook_received_count(w: &TestWorld, run: &str) -> usize {
    kinds(w, run)
        .iter()
        .filter(|k| *k == "hook_received")
        .count()
}

fn event_id(r: &EventResult) -> String {
    r.event.as_ref().expect("an event").event_id.clone()
}

#[test]
fn same_resume_id_twice_commits_one_event_and_answers_both_with_it() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let p = resume("01JRESUME0000000000000000A", Some(DIGEST));
    let first = received(&w, &run, HOOK, b"hello", &p).unwrap();
    let again = received(&w, &run, HOOK, b"hello", &p).unwrap();
    let e = first.event.as_ref().unwrap();
    assert_eq!(e.event_id, slot_event_id(4));
    assert_eq!(e.resume_id.as_deref(), Some("01JRESUME0000000000000000A"));
    assert_eq!(again.event, first.event);
    assert_eq!(hook_received_count(&w, &run), 1);
    assert_eq!(w.run_state(&run).unwrap().seq(), 4);
}

#[test]
fn a_retry_without_the_digest_converges_on_the_recorded_resume() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let first = received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    let bare = received(&w, &run, HOOK, b"hello", &resume("r1", None)).unwrap();
    assert_eq!(event_id(&bare), event_id(&first));
    assert_eq!(hook_received_count(&w, &run), 1);
}

#[test]
fn reused_resume_id_with_another_digest_is_a_conflict_and_writes_nothing() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    let other = "0".repeat(64);
    let e = assert_class(
        received(&w, &run, HOOK, b"other", &resume("r1", Some(&other))),
        "EntityConflictError",
        409,
    );
    assert!(e.to_string().contains("different payload"), "{e}");
    assert_eq!(hook_received_count(&w, &run), 1);
}

#[test]
fn reused_resume_id_for_another_hook_is_a_conflict_and_writes_nothing() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    hook_created(&w, &run, "hook_2", "tok-2").unwrap();
    received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    let data = format!(r#"{{"token":"tok-2","payload":{}}}"#, bin(b"hello"));
    let r = w.create_event(
        Some(&run),
        req(EventType::HookReceived, Some("hook_2"), Some(&data)),
        &resume("r1", Some(DIGEST)),
    );
    let e = assert_class(r, "EntityConflictError", 409);
    assert!(e.to_string().contains("different hook"), "{e}");
    assert_eq!(hook_received_count(&w, &run), 1);
}

#[test]
fn distinct_resume_ids_on_one_hook_each_commit_an_event() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let a = received(&w, &run, HOOK, b"a", &resume("r1", Some(DIGEST))).unwrap();
    let b = received(&w, &run, HOOK, b"b", &resume("r2", Some(DIGEST))).unwrap();
    assert_eq!(
        (event_id(&a), event_id(&b)),
        (slot_event_id(4), slot_event_id(5))
    );
    assert_eq!(hook_received_count(&w, &run), 2);
}

#[test]
fn without_a_resume_id_two_hook_received_are_two_events() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let a = received(&w, &run, HOOK, b"hello", &params()).unwrap();
    let b = received(&w, &run, HOOK, b"hello", &params()).unwrap();
    // An empty resume id is none, as world-local gates on a truthy `resumeId`.
    let c = received(&w, &run, HOOK, b"hello", &resume("", Some(DIGEST))).unwrap();
    let ids = [&a, &b, &c].map(event_id);
    assert_eq!(ids, [4, 5, 6].map(slot_event_id));
    assert!(
        [&a, &b, &c]
            .iter()
            .all(|r| r.event.as_ref().unwrap().resume_id.is_none())
    );
    assert_eq!(hook_received_count(&w, &run), 3);
}

#[test]
fn redelivery_after_the_hook_is_disposed_returns_the_recorded_resume() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let first = received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    hook_disposed(&w, &run, HOOK).unwrap();
    let again = received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    assert_eq!(again.event, first.event);
    // A resume the run never recorded cannot reach a disposed hook.
    assert_class(
        received(&w, &run, HOOK, b"hello", &resume("r2", Some(DIGEST))),
        "HookNotFoundError",
        404,
    );
    assert_eq!(hook_received_count(&w, &run), 1);
}

#[test]
fn the_resume_id_round_trips_through_list_get_and_by_correlation_id() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let first = received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    received(&w, &run, HOOK, b"plain", &params()).unwrap();
    let listed = w
        .list_events(&run, &Pagination::default(), ResolveData::All)
        .unwrap();
    let resume_ids: Vec<_> = listed
        .data
        .iter()
        .map(|e| (e.event_type, e.resume_id.as_deref()))
        .collect();
    assert_eq!(
        resume_ids,
        [
            (EventType::RunCreated, None),
            (EventType::RunStarted, None),
            (EventType::HookCreated, None),
            (EventType::HookReceived, Some("r1")),
            (EventType::HookReceived, None),
        ]
    );
    let got = w
        .get_event(&run, &event_id(&first), ResolveData::None)
        .unwrap();
    assert_eq!(got.resume_id.as_deref(), Some("r1"));
    let by_corr = w
        .list_events_by_correlation_id(HOOK, Some(&run), &Pagination::default(), ResolveData::All)
        .unwrap();
    assert_eq!(
        by_corr
            .data
            .iter()
            .filter_map(|e| e.resume_id.as_deref())
            .collect::<Vec<_>>(),
        ["r1"]
    );
    // Serialized as the SDK's `resumeId` member.
    let json = serde_json::to_value(first.event.as_ref().unwrap()).unwrap();
    assert_eq!(json["resumeId"], "r1");
}

#[test]
fn a_fresh_world_on_the_store_still_knows_the_resume() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let first = received(&w, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    let fresh = World::new(w.backend().clone(), Default::default());
    let again = received(&fresh, &run, HOOK, b"hello", &resume("r1", Some(DIGEST))).unwrap();
    assert_eq!(again.event, first.event);
    assert_class(
        received(
            &fresh,
            &run,
            HOOK,
            b"x",
            &resume("r1", Some(&"1".repeat(64))),
        ),
        "EntityConflictError",
        409,
    );
    assert_eq!(hook_received_count(&w, &run), 1);
}

#[test]
fn threads_of_two_worlds_racing_one_resume_commit_one_event() {
    let (_d, w) = world();
    let fresh = World::new(w.backend().clone(), Default::default());
    let worlds = [Arc::new(w), Arc::new(fresh)];
    let threads = 8;
    for round in 0..5 {
        let run = run_with_hook(&worlds[0]);
        let resume_id = format!("race-{round}");
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (w, run, id, barrier) = (
                    worlds[t % 2].clone(),
                    run.clone(),
                    resume_id.clone(),
                    barrier.clone(),
                );
                std::thread::spawn(move || {
                    barrier.wait();
                    received(&w, &run, HOOK, b"hello", &resume(&id, Some(DIGEST)))
                })
            })
            .collect();
        let answers: Vec<String> = handles
            .into_iter()
            .map(|h| event_id(&h.join().unwrap().unwrap()))
            .collect();
        assert!(
            answers.iter().all(|id| *id == answers[0]),
            "round {round}: {answers:?}"
        );
        assert_eq!(hook_received_count(&worlds[0], &run), 1, "round {round}");
        assert_eq!(answers[0], slot_event_id(4));
        // Releases the token for the next round's hook.
        hook_disposed(&worlds[0], &run, HOOK).unwrap();
    }
}

#[test]
fn a_resume_id_too_long_or_with_whitespace_is_refused() {
    let (_d, w) = world();
    let run = run_with_hook(&w);
    let long = "r".repeat(runlog_world::RESUME_ID_LEN_MAX + 1);
    let e = assert_class(
        received(&w, &run, HOOK, b"x", &resume(&long, None)),
        "WorkflowWorldError",
        400,
    );
    assert!(e.to_string().contains("resumeId"), "{e}");
    let e = assert_class(
        received(&w, &run, HOOK, b"x", &resume("r1", Some("a b"))),
        "WorkflowWorldError",
        400,
    );
    assert!(e.to_string().contains("resumePayloadDigest"), "{e}");
    assert_eq!(hook_received_count(&w, &run), 0);
}
