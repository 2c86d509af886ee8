//! The ids the SDK itself sends (issue 20, item 5): `getRun("my-run-id").exists` reads a run
//! id that is no `wrun_<ULID>`, and `workflow health` uses `wrun_hc_<ULID>`. A read of an id
//! that cannot name a World run answers not found (`WorkflowRunNotFoundError` 404, what
//! `exists` turns into `false`), as the reference does; only a write that would store the id
//! as a run's (`run_created`, a resilient `run_started`) refuses it with a 400.

mod common;

use common::*;
use runlog_world::{EventRequest, EventType, Pagination, ResolveData, WorldError};

const CANNOT_EXIST: [&str; 5] = [
    "my-run-id",
    "wrun_hc_01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "wrun_short",
    "../etc/passwd",
    "_world-hook-tokens",
];

#[track_caller]
fn not_found<T: std::fmt::Debug>(r: Result<T, WorldError>, id: &str) {
    let e = r.expect_err(id);
    assert!(
        matches!(&e, WorldError::RunNotFound { run_id } if run_id == id),
        "{id}: {e:?}"
    );
    assert_eq!(
        (e.class_name(), e.status()),
        ("WorkflowRunNotFoundError", 404)
    );
}

#[test]
fn every_read_of_a_run_id_that_cannot_exist_is_run_not_found() {
    let (_d, w) = world();
    let p = Pagination::default();
    for id in CANNOT_EXIST.into_iter().chain([""]) {
        not_found(w.get_run(id, ResolveData::None), id);
        not_found(w.get_run(id, ResolveData::All), id);
        not_found(w.get_step(id, "step_1", ResolveData::All), id);
        not_found(w.list_steps(id, &p, ResolveData::All), id);
        not_found(w.get_event(id, "evnt_x", ResolveData::All), id);
        not_found(w.list_events(id, &p, ResolveData::All), id);
        not_found(w.list_events_each(id, &p, |_| Ok::<(), WorldError>(())), id);
        not_found(w.list_hooks(Some(id), &p, ResolveData::All), id);
        not_found(
            w.list_events_by_correlation_id("c", Some(id), &p, ResolveData::All),
            id,
        );
        not_found(w.run_state(id), id);
    }
}

#[test]
fn a_write_about_a_run_that_cannot_exist_is_not_found_and_one_that_would_store_its_id_is_400() {
    let (_d, w) = world();
    for id in CANNOT_EXIST {
        not_found(step_created(&w, id, "step_1"), id);
        not_found(hook_received(&w, id, "hook_1"), id);
        not_found(ev(&w, id, EventType::RunStarted, None, None), id);
        not_found(terminal(&w, id, EventType::RunCancelled), id);
        let created = ev(
            &w,
            id,
            EventType::RunCreated,
            None,
            Some(&run_created_data("wf")),
        );
        let e = assert_class(created, "WorkflowWorldError", 400);
        assert!(matches!(&e, WorldError::InvalidRequest { field, .. } if field == "runId"));
        // A run_started carrying the creation data would create the run under that id.
        let resilient = format!(
            r#"{{"deploymentId":"d","workflowName":"wf","input":{}}}"#,
            bin(b"[]")
        );
        let started = ev(&w, id, EventType::RunStarted, None, Some(&resilient));
        assert_class(started, "WorkflowWorldError", 400);
    }
    // Nothing was written: the store holds no run at all.
    assert!(w.backend().list_runs(None, 100).unwrap().runs.is_empty());
}

#[test]
fn the_beta55_members_answer_not_found_for_a_run_id_that_cannot_exist() {
    let (_d, w) = world();
    for id in CANNOT_EXIST {
        // A slot id or a ULID event id of such a run: the run is what is not found.
        not_found(
            w.get_event(id, &runlog_world::slot_event_id(1), ResolveData::All),
            id,
        );
        not_found(
            w.wait_for_terminal_run(id, std::time::Duration::ZERO, ResolveData::None),
            id,
        );
        let wait = EventRequest::new(EventType::WaitCreated)
            .correlation_id("wait_1")
            .data(r#"{"resumeAt":"2030-01-01T00:00:00.000Z"}"#)
            .unwrap();
        not_found(w.create_batch(id, vec![wait], &params()), id);
    }
    // getMany: `null` for each, in input order, beside a run that exists.
    let run = create_run(&w);
    let ids: Vec<String> = CANNOT_EXIST
        .iter()
        .map(|s| s.to_string())
        .chain([run.clone()])
        .collect();
    let got = w.get_runs(&ids, ResolveData::None).unwrap();
    let found: Vec<Option<&str>> = got
        .iter()
        .map(|r| r.as_ref().map(|r| r.run_id.as_str()))
        .collect();
    let mut expected = vec![None; CANNOT_EXIST.len()];
    expected.push(Some(run.as_str()));
    assert_eq!(found, expected);
}
