//! One test per transition rule and error class of `events.create` (spec 5), on a real store:
//! what the reference (`@workflow/world-local` 5.0.0-beta.29) does, and where this World is
//! stricter, the stricter rule. Each test names the rule it pins.

mod common;

use common::*;
use runlog_world::{
    CreateEventParams, EventRequest, EventType, ResolveData, RunStatus, WaitStatus, format_iso_ms,
};

// ---------------------------------------------------------------- run_created

#[test]
fn run_created_creates_a_pending_run_with_the_request_fields() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    let data = format!(
        r#"{{"deploymentId":"dpl_1","workflowName":"workflow//./a//b","input":{},"executionContext":{{"k":[1]}},"attributes":{{"team":"x"}}}}"#,
        bin(b"devl\0in")
    );
    let r = ev(&w, &run, EventType::RunCreated, None, Some(&data)).unwrap();
    let created = r.run.unwrap();
    assert_eq!(created.run_id, run);
    assert_eq!(created.status, RunStatus::Pending);
    assert_eq!(created.deployment_id, "dpl_1");
    assert_eq!(created.workflow_name, "workflow//./a//b");
    assert_eq!(created.input.unwrap().as_str(), bin(b"devl\0in"));
    assert_eq!(created.execution_context.unwrap().as_str(), r#"{"k":[1]}"#);
    assert_eq!(
        created.attributes.get("team").map(String::as_str),
        Some("x")
    );
    assert_eq!(created.spec_version, Some(5));
    assert_eq!(created.created_at_ms, created.updated_at_ms);
    let event = r.event.unwrap();
    assert_eq!(event.event_type, EventType::RunCreated);
    assert!(event.event_id.starts_with("evnt_"));
    assert_eq!(event.event_data.unwrap().as_str(), data);
    assert_eq!(kinds(&w, &run), ["run_created"]);
}

#[test]
fn run_created_without_run_id_mints_a_wrun_ulid() {
    let (_d, w) = world();
    let r = w
        .create_event(
            None,
            req(EventType::RunCreated, None, Some(&run_created_data("wf"))),
            &params(),
        )
        .unwrap();
    let id = r.run.unwrap().run_id;
    assert!(id.starts_with("wrun_") && id.len() == 31, "{id}");
    assert_eq!(
        w.get_run(&id, ResolveData::All).unwrap().status,
        RunStatus::Pending
    );
}

#[test]
fn run_created_twice_is_entity_conflict_409_and_writes_nothing() {
    let (_d, w) = world();
    let run = create_run(&w);
    let again = ev(
        &w,
        &run,
        EventType::RunCreated,
        None,
        Some(&run_created_data("wf")),
    );
    assert_class(again, "EntityConflictError", 409);
    assert_eq!(kinds(&w, &run), ["run_created"]);
}

#[test]
fn run_id_that_is_not_wrun_ulid_is_rejected_400() {
    let (_d, w) = world();
    for bad in [
        "run_1",
        "wrun_123",
        "wrun_01ARZ3NDEKTSV4RRFFQ69G5FA!",
        "_world-hook-tokens",
        "wrun_81ARZ3NDEKTSV4RRFFQ69G5FAV",
    ] {
        let r = ev(
            &w,
            bad,
            EventType::RunCreated,
            None,
            Some(&run_created_data("wf")),
        );
        let e = assert_class(r, "WorkflowWorldError", 400);
        assert!(e.to_string().contains("runId"), "{e}");
    }
    // A request that would not store the id is about a run that cannot exist: not found.
    let r = ev(&w, "nope", EventType::RunStarted, None, None);
    assert_class(r, "WorkflowRunNotFoundError", 404);
}

#[test]
fn client_run_id_older_than_24h_or_more_than_5min_ahead_is_rejected_400() {
    let (_d, w) = world();
    let now = runlog_world::mint_ulid().timestamp_ms();
    for t in [now - 25 * 3600 * 1000, now + 10 * 60 * 1000] {
        let id = format!("wrun_{}", ulid::Ulid::from_parts(t, 7));
        let r = ev(
            &w,
            &id,
            EventType::RunCreated,
            None,
            Some(&run_created_data("wf")),
        );
        let e = assert_class(r, "WorkflowWorldError", 400);
        assert!(e.to_string().contains("embedded timestamp"), "{e}");
    }
    let ok = format!("wrun_{}", ulid::Ulid::from_parts(now - 3600 * 1000, 7));
    ev(
        &w,
        &ok,
        EventType::RunCreated,
        None,
        Some(&run_created_data("wf")),
    )
    .unwrap();
}

#[test]
fn run_created_of_a_newer_spec_version_is_run_not_supported() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    let r = w.create_event(
        Some(&run),
        req(EventType::RunCreated, None, Some(&run_created_data("wf"))).spec_version(8),
        &params(),
    );
    let e = assert_class(r, "RunNotSupportedError", 400);
    assert!(e.to_string().contains('8'));
}

#[test]
fn run_created_of_a_legacy_spec_version_is_rejected_400() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    let r = w.create_event(
        Some(&run),
        req(EventType::RunCreated, None, Some(&run_created_data("wf"))).spec_version(1),
        &params(),
    );
    assert_class(r, "WorkflowWorldError", 400);
}

#[test]
fn reserved_attributes_need_allow_reserved_attributes() {
    let (_d, w) = world();
    let data = |allow: &str| {
        format!(
            r#"{{"deploymentId":"d","workflowName":"w","input":null,"attributes":{{"$rootRunId":"wrun_x"}}{allow}}}"#
        )
    };
    let run = runlog_world::mint_run_id();
    let r = ev(&w, &run, EventType::RunCreated, None, Some(&data("")));
    assert_class(r, "AttributeValidationError", 400);
    let r = ev(
        &w,
        &run,
        EventType::RunCreated,
        None,
        Some(&data(r#","allowReservedAttributes":true"#)),
    );
    let created = r.unwrap().run.unwrap();
    assert_eq!(created.attributes["$rootRunId"], "wrun_x");
    assert_eq!(created.input.unwrap().as_str(), "null");
}

// ---------------------------------------------------------------- run_started

#[test]
fn run_started_starts_a_pending_run_and_preloads_its_events() {
    let (_d, w) = world();
    let run = create_run(&w);
    let r = ev(&w, &run, EventType::RunStarted, None, None).unwrap();
    let started = r.run.unwrap();
    assert_eq!(started.status, RunStatus::Running);
    assert!(started.started_at_ms.is_some());
    let events = r.events.unwrap();
    let types: Vec<_> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::RunCreated, EventType::RunStarted]);
    assert_eq!(r.has_more, Some(false));
    assert_eq!(r.cursor.as_deref(), Some("seq:2"));
    // The preload always carries payloads.
    assert!(events[0].event_data.is_some());
}

#[test]
fn run_started_with_skip_preload_returns_no_events() {
    let (_d, w) = world();
    let run = create_run(&w);
    let p = CreateEventParams {
        skip_preload: true,
        ..params()
    };
    let r = w
        .create_event(Some(&run), req(EventType::RunStarted, None, None), &p)
        .unwrap();
    assert!(r.events.is_none() && r.cursor.is_none() && r.has_more.is_none());
    assert_eq!(r.run.unwrap().status, RunStatus::Running);
}

#[test]
fn run_started_on_a_running_run_returns_the_run_and_stores_nothing() {
    let (_d, w) = world();
    let run = running_run(&w);
    let r = ev(&w, &run, EventType::RunStarted, None, None).unwrap();
    assert!(r.event.is_none());
    assert_eq!(r.run.unwrap().status, RunStatus::Running);
    assert!(r.events.is_none());
    assert_eq!(kinds(&w, &run), ["run_created", "run_started"]);
}

#[test]
fn run_started_on_a_terminal_run_is_run_expired_410() {
    let (_d, w) = world();
    let run = running_run(&w);
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    let r = ev(&w, &run, EventType::RunStarted, None, None);
    assert_class(r, "RunExpiredError", 410);
}

#[test]
fn run_started_with_creation_data_creates_a_missing_run_atomically() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    let data = format!(
        r#"{{"deploymentId":"dpl_r","workflowName":"wf","input":{},"attributes":{{"a":"1"}}}}"#,
        bin(b"x")
    );
    let r = ev(&w, &run, EventType::RunStarted, None, Some(&data)).unwrap();
    let started = r.run.unwrap();
    assert_eq!(started.status, RunStatus::Running);
    assert_eq!(started.deployment_id, "dpl_r");
    assert_eq!(started.input.unwrap().as_str(), bin(b"x"));
    assert_eq!(started.attributes["a"], "1");
    // One batch: the synthetic run_created, then run_started without data.
    assert_eq!(kinds(&w, &run), ["run_created", "run_started"]);
    assert!(r.event.unwrap().event_data.is_none());
    // A later run_created conflicts.
    let again = ev(
        &w,
        &run,
        EventType::RunCreated,
        None,
        Some(&run_created_data("wf")),
    );
    assert_class(again, "EntityConflictError", 409);
}

#[test]
fn run_started_on_a_missing_run_without_creation_data_is_404_and_creates_nothing() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    let r = ev(
        &w,
        &run,
        EventType::RunStarted,
        None,
        Some(r#"{"deploymentId":"d"}"#),
    );
    assert_class(r, "WorkflowRunNotFoundError", 404);
    let id = runlog::RunId::new(&run).unwrap();
    assert!(matches!(
        w.backend().run_info(&id),
        Err(runlog::Error::RunNotFound { .. })
    ));
}

// ---------------------------------------------------------------- terminal run events

#[test]
fn run_completed_failed_and_cancelled_set_status_payload_and_completed_at() {
    let (_d, w) = world();
    let a = running_run(&w);
    let done = terminal(&w, &a, EventType::RunCompleted)
        .unwrap()
        .run
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.output.unwrap().as_str(), bin(b"done"));
    assert!(done.completed_at_ms.is_some() && done.started_at_ms.is_some());

    let b = running_run(&w);
    let failed = terminal(&w, &b, EventType::RunFailed).unwrap().run.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.unwrap().as_str(), bin(b"e"));
    assert_eq!(failed.error_code.as_deref(), Some("USER_ERROR"));
    assert!(failed.output.is_none());

    // A pending run may be cancelled (and completed or failed: the reference does not
    // require run_started).
    let c = create_run(&w);
    let cancelled = terminal(&w, &c, EventType::RunCancelled)
        .unwrap()
        .run
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert!(cancelled.completed_at_ms.is_some() && cancelled.started_at_ms.is_none());
}

#[test]
fn a_terminal_event_on_a_terminal_run_is_entity_conflict_409() {
    let (_d, w) = world();
    for first in [
        EventType::RunCompleted,
        EventType::RunFailed,
        EventType::RunCancelled,
    ] {
        let run = running_run(&w);
        terminal(&w, &run, first).unwrap();
        for second in [
            EventType::RunCompleted,
            EventType::RunFailed,
            EventType::RunCancelled,
        ] {
            if first == EventType::RunCancelled && second == EventType::RunCancelled {
                continue;
            }
            assert_class(terminal(&w, &run, second), "EntityConflictError", 409);
        }
        let terminals = kinds(&w, &run)
            .iter()
            .filter(|k| ["run_completed", "run_failed", "run_cancelled"].contains(&k.as_str()))
            .count();
        assert_eq!(terminals, 1);
    }
}

#[test]
fn run_cancelled_on_a_cancelled_run_returns_the_original_event_without_a_second_one() {
    let (_d, w) = world();
    let run = running_run(&w);
    let first = terminal(&w, &run, EventType::RunCancelled)
        .unwrap()
        .event
        .unwrap();
    let again = terminal(&w, &run, EventType::RunCancelled).unwrap();
    assert_eq!(again.event.unwrap().event_id, first.event_id);
    assert_eq!(again.run.unwrap().status, RunStatus::Cancelled);
    assert_eq!(
        kinds(&w, &run),
        ["run_created", "run_started", "run_cancelled"]
    );
}

#[test]
fn events_on_a_missing_run_are_run_not_found_404_and_store_nothing() {
    let (_d, w) = world();
    let run = runlog_world::mint_run_id();
    assert_class(
        terminal(&w, &run, EventType::RunCompleted),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        terminal(&w, &run, EventType::RunCancelled),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        step_created(&w, &run, "step_1"),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        hook_created(&w, &run, "hook_1", "t"),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        wait_created(&w, &run, "wait_1"),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        step_completed(&w, &run, "step_1"),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        ev(
            &w,
            &run,
            EventType::AttrSet,
            None,
            Some(r#"{"changes":[],"writer":{"type":"workflow"}}"#),
        ),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        w.get_run(&run, ResolveData::All),
        "WorkflowRunNotFoundError",
        404,
    );
}

#[test]
fn a_run_ending_disposes_its_hooks_and_releases_their_tokens() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "hook_a", "tok-end").unwrap();
    assert_eq!(w.get_hook_by_token("tok-end").unwrap().hook_id, "hook_a");
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    assert_class(w.get_hook_by_token("tok-end"), "HookNotFoundError", 404);
    assert_class(
        w.get_hook("hook_a", ResolveData::All),
        "HookNotFoundError",
        404,
    );
    assert_class(hook_received(&w, &run, "hook_a"), "HookNotFoundError", 404);
    // No hook_disposed event is written for it (the reference's retention rule).
    assert!(!kinds(&w, &run).contains(&"hook_disposed".to_string()));
    let other = running_run(&w);
    let r = hook_created(&w, &other, "hook_b", "tok-end").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
}

// ---------------------------------------------------------------- attr_set

fn attr(
    w: &TestWorld,
    run: &str,
    corr: Option<&str>,
    changes: &str,
    writer: &str,
) -> Result<runlog_world::EventResult, runlog_world::WorldError> {
    let data = format!(r#"{{"changes":{changes},"writer":{writer}}}"#);
    ev(w, run, EventType::AttrSet, corr, Some(&data))
}

#[test]
fn attr_set_merges_values_and_null_removes_a_key() {
    let (_d, w) = world();
    let run = running_run(&w);
    let wf = r#"{"type":"workflow"}"#;
    attr(
        &w,
        &run,
        None,
        r#"[{"key":"a","value":"1"},{"key":"b","value":"2"}]"#,
        wf,
    )
    .unwrap();
    let r = attr(
        &w,
        &run,
        None,
        r#"[{"key":"a","value":null},{"key":"c","value":"3"}]"#,
        wf,
    )
    .unwrap();
    let attrs = r.run.unwrap().attributes;
    assert_eq!(attrs.len(), 2);
    assert_eq!((attrs["b"].as_str(), attrs["c"].as_str()), ("2", "3"));
}

#[test]
fn attr_set_on_a_terminal_run_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    terminal(&w, &run, EventType::RunFailed).unwrap();
    let r = attr(
        &w,
        &run,
        None,
        r#"[{"key":"a","value":"1"}]"#,
        r#"{"type":"workflow"}"#,
    );
    assert_class(r, "EntityConflictError", 409);
}

#[test]
fn attr_set_breaking_the_attribute_rules_is_attribute_validation_error_400() {
    let (_d, w) = world();
    let run = running_run(&w);
    let wf = r#"{"type":"workflow"}"#;
    let long = "v".repeat(257);
    for changes in [
        format!(r#"[{{"key":"a","value":"{long}"}}]"#),
        r#"[{"key":"a","value":"1"},{"key":"a","value":"2"}]"#.to_string(),
        r#"[{"key":"","value":"1"}]"#.to_string(),
        r#"[{"key":"$x","value":"1"}]"#.to_string(),
        format!(
            "[{}]",
            (0..65)
                .map(|i| format!(r#"{{"key":"k{i}","value":"v"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ] {
        assert_class(
            attr(&w, &run, None, &changes, wf),
            "AttributeValidationError",
            400,
        );
    }
    assert_eq!(kinds(&w, &run).len(), 2);
}

#[test]
fn attr_set_of_the_workflow_writer_is_deduplicated_by_correlation_id() {
    let (_d, w) = world();
    let run = running_run(&w);
    let wf = r#"{"type":"workflow"}"#;
    let step = r#"{"type":"step","stepId":"step_1","attempt":1}"#;
    attr(&w, &run, Some("attr_1"), r#"[{"key":"a","value":"1"}]"#, wf).unwrap();
    let r = attr(&w, &run, Some("attr_1"), r#"[{"key":"a","value":"2"}]"#, wf);
    assert_class(r, "EntityConflictError", 409);
    // The step writer is not deduplicated (the reference claims only workflow writes).
    attr(
        &w,
        &run,
        Some("attr_2"),
        r#"[{"key":"a","value":"3"}]"#,
        step,
    )
    .unwrap();
    let r = attr(
        &w,
        &run,
        Some("attr_2"),
        r#"[{"key":"a","value":"4"}]"#,
        step,
    )
    .unwrap();
    assert_eq!(r.run.unwrap().attributes["a"], "4");
}

// ---------------------------------------------------------------- steps

#[test]
fn step_created_creates_a_pending_step_at_attempt_0() {
    let (_d, w) = world();
    let run = running_run(&w);
    let step = step_created(&w, &run, "step_1").unwrap().step.unwrap();
    assert_eq!((step.status, step.attempt), (RunStatus::Pending, 0));
    assert_eq!(step.step_name, "step//./wf//add");
    assert_eq!(step.input.unwrap().as_str(), bin(b"[1,2]"));
    assert_eq!(step.spec_version, Some(5));
    assert!(step.started_at_ms.is_none());
}

#[test]
fn step_created_twice_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "step_1").unwrap();
    assert_class(step_created(&w, &run, "step_1"), "EntityConflictError", 409);
}

#[test]
fn creating_an_entity_on_a_terminal_run_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    assert_class(step_created(&w, &run, "step_1"), "EntityConflictError", 409);
    assert_class(lazy_start(&w, &run, "step_2"), "EntityConflictError", 409);
    assert_class(
        hook_created(&w, &run, "hook_1", "t1"),
        "EntityConflictError",
        409,
    );
    assert_class(wait_created(&w, &run, "wait_1"), "EntityConflictError", 409);
}

#[test]
fn step_started_counts_attempts_keeps_the_first_start_and_clears_retry_after() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    let first = step_started(&w, &run, "s").unwrap().step.unwrap();
    assert_eq!((first.status, first.attempt), (RunStatus::Running, 1));
    step_retrying(&w, &run, "s", Some("2001-01-01T00:00:00.000Z")).unwrap();
    // A running step may be started again (concurrent starts and retries), attempt + 1.
    let second = step_started(&w, &run, "s").unwrap().step.unwrap();
    assert_eq!((second.status, second.attempt), (RunStatus::Running, 2));
    assert_eq!(second.started_at_ms, first.started_at_ms);
    assert!(second.retry_after_ms.is_none());
    assert_eq!(second.error.unwrap().as_str(), bin(b"again"));
    let third = step_started(&w, &run, "s").unwrap().step.unwrap();
    assert_eq!(third.attempt, 3);
}

#[test]
fn step_started_on_an_unknown_step_is_step_not_found_404() {
    let (_d, w) = world();
    let run = running_run(&w);
    let e = assert_class(step_started(&w, &run, "ghost"), "WorkflowWorldError", 404);
    assert!(matches!(e, runlog_world::WorldError::StepNotFound { .. }));
    assert_class(step_completed(&w, &run, "ghost"), "WorkflowWorldError", 404);
    assert_class(step_failed(&w, &run, "ghost"), "WorkflowWorldError", 404);
    assert_class(
        step_retrying(&w, &run, "ghost", None),
        "WorkflowWorldError",
        404,
    );
}

#[test]
fn step_started_on_a_finished_step_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    step_started(&w, &run, "s").unwrap();
    step_completed(&w, &run, "s").unwrap();
    assert_class(step_started(&w, &run, "s"), "EntityConflictError", 409);
    assert_class(
        step_retrying(&w, &run, "s", None),
        "EntityConflictError",
        409,
    );
}

#[test]
fn step_started_before_retry_after_is_too_early_425_with_seconds() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    step_started(&w, &run, "s").unwrap();
    let at = format_iso_ms(runlog_world::mint_ulid().timestamp_ms() + 2_500);
    let retried = step_retrying(&w, &run, "s", Some(&at))
        .unwrap()
        .step
        .unwrap();
    assert_eq!(retried.status, RunStatus::Pending);
    assert_eq!(
        retried.retry_after_ms.map(format_iso_ms).as_deref(),
        Some(at.as_str())
    );
    let e = assert_class(step_started(&w, &run, "s"), "TooEarlyError", 425);
    assert!(matches!(e.retry_after_s(), Some(2 | 3)), "{e}");
}

#[test]
fn step_started_on_a_terminal_run_is_run_expired_410() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    terminal(&w, &run, EventType::RunCancelled).unwrap();
    assert_class(step_started(&w, &run, "s"), "RunExpiredError", 410);
}

#[test]
fn lazy_step_started_creates_and_starts_the_step_with_step_created() {
    let (_d, w) = world();
    let run = running_run(&w);
    let r = lazy_start(&w, &run, "lazy").unwrap();
    assert!(r.step_created);
    let step = r.step.unwrap();
    assert_eq!((step.status, step.attempt), (RunStatus::Running, 1));
    assert_eq!(step.input.unwrap().as_str(), bin(b"[3]"));
    assert_eq!(kinds(&w, &run)[2..], ["step_created", "step_started"]);
    // The stored step_started keeps stepName and ownerMessageId but not input.
    let stored = r.event.unwrap().event_data.unwrap();
    assert_eq!(
        stored.as_str(),
        r#"{"stepName":"step//./wf//add","ownerMessageId":"msg_1"}"#
    );
    // A plain start of an existing step has no stepCreated.
    assert!(!step_started(&w, &run, "lazy").unwrap().step_created);
}

#[test]
fn lazy_step_started_on_an_existing_step_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    assert_class(lazy_start(&w, &run, "s"), "EntityConflictError", 409);
    lazy_start(&w, &run, "t").unwrap();
    assert_class(lazy_start(&w, &run, "t"), "EntityConflictError", 409);
}

#[test]
fn step_completed_finishes_a_started_step_and_keeps_its_last_error() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    step_started(&w, &run, "s").unwrap();
    step_retrying(&w, &run, "s", None).unwrap();
    step_started(&w, &run, "s").unwrap();
    let done = step_completed(&w, &run, "s").unwrap().step.unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.output.unwrap().as_str(), bin(b"3"));
    assert_eq!(done.error.unwrap().as_str(), bin(b"again"));
    assert!(done.completed_at_ms.is_some());
}

#[test]
fn completing_a_completed_step_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    lazy_start(&w, &run, "s").unwrap();
    step_completed(&w, &run, "s").unwrap();
    assert_class(step_completed(&w, &run, "s"), "EntityConflictError", 409);
    assert_class(step_failed(&w, &run, "s"), "EntityConflictError", 409);
}

#[test]
fn completing_or_retrying_a_never_started_step_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    assert_class(step_completed(&w, &run, "s"), "EntityConflictError", 409);
    assert_class(
        step_retrying(&w, &run, "s", None),
        "EntityConflictError",
        409,
    );
}

#[test]
fn failing_a_never_started_step_is_allowed() {
    let (_d, w) = world();
    let run = running_run(&w);
    step_created(&w, &run, "s").unwrap();
    let failed = step_failed(&w, &run, "s").unwrap().step.unwrap();
    assert_eq!((failed.status, failed.attempt), (RunStatus::Failed, 0));
    assert_eq!(failed.error.unwrap().as_str(), bin(b"boom"));
}

#[test]
fn after_the_run_ended_only_a_running_step_may_complete_or_fail() {
    let (_d, w) = world();
    let run = running_run(&w);
    lazy_start(&w, &run, "running").unwrap();
    lazy_start(&w, &run, "retrying").unwrap();
    step_retrying(&w, &run, "retrying", None).unwrap();
    step_created(&w, &run, "pending").unwrap();
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    step_completed(&w, &run, "running").unwrap();
    assert_class(step_completed(&w, &run, "retrying"), "RunExpiredError", 410);
    assert_class(step_failed(&w, &run, "pending"), "RunExpiredError", 410);
    lazy_start(&w, &run, "x").expect_err("creation on a terminal run");
}

#[test]
fn step_retrying_on_a_terminal_run_is_run_expired_410() {
    let (_d, w) = world();
    let run = running_run(&w);
    lazy_start(&w, &run, "s").unwrap();
    terminal(&w, &run, EventType::RunFailed).unwrap();
    assert_class(step_retrying(&w, &run, "s", None), "RunExpiredError", 410);
}

#[test]
fn step_completed_with_since_cursor_returns_the_events_after_it() {
    let (_d, w) = world();
    let run = running_run(&w);
    let start = lazy_start(&w, &run, "s").unwrap();
    let cursor = format!("seq:{}", start.event.unwrap().seq - 2);
    hook_created(&w, &run, "h", "tok-delta").unwrap();
    let p = CreateEventParams {
        since_cursor: Some(cursor),
        resolve_data: ResolveData::None,
        ..params()
    };
    let data = format!(r#"{{"result":{}}}"#, bin(b"ok"));
    let r = w
        .create_event(
            Some(&run),
            req(EventType::StepCompleted, Some("s"), Some(&data)),
            &p,
        )
        .unwrap();
    let types: Vec<_> = r
        .events
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        types,
        [
            EventType::StepCreated,
            EventType::StepStarted,
            EventType::HookCreated,
            EventType::StepCompleted
        ]
    );
    assert_eq!(r.has_more, Some(false));
    assert_eq!(r.cursor.as_deref(), Some("seq:6"));
    // resolveData 'none' strips the delta's payloads too; the returned step is full.
    let delta_completed = r.events.unwrap().pop().unwrap();
    assert!(delta_completed.event_data.is_none());
    assert_eq!(r.step.unwrap().output.unwrap().as_str(), bin(b"ok"));
    let bad = CreateEventParams {
        since_cursor: Some("12".into()),
        ..params()
    };
    let r = w.create_event(
        Some(&run),
        req(EventType::StepFailed, Some("s"), Some(&data)),
        &bad,
    );
    assert_class(r, "WorkflowWorldError", 400);
}

// ---------------------------------------------------------------- hooks

#[test]
fn hook_created_creates_a_live_hook() {
    let (_d, w) = world();
    let run = running_run(&w);
    let hook = hook_created(&w, &run, "hook_1", "tok-1")
        .unwrap()
        .hook
        .unwrap();
    assert_eq!(
        (hook.hook_id.as_str(), hook.token.as_str()),
        ("hook_1", "tok-1")
    );
    assert_eq!(
        (
            hook.owner_id.as_str(),
            hook.project_id.as_str(),
            hook.environment.as_str()
        ),
        ("local-owner", "local-project", "local")
    );
    assert_eq!(hook.metadata.unwrap().as_str(), bin(b"meta"));
    assert_eq!(
        (hook.is_webhook, hook.is_system),
        (Some(false), Some(false))
    );
    assert_eq!(
        w.get_hook("hook_1", ResolveData::All).unwrap().token,
        "tok-1"
    );
    assert!(
        w.get_hook("hook_1", ResolveData::None)
            .unwrap()
            .metadata
            .is_none()
    );
    assert_eq!(w.get_hook_by_token("tok-1").unwrap().run_id, run);
}

#[test]
fn hook_created_twice_for_one_hook_is_entity_conflict_409() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "hook_1", "tok-1").unwrap();
    assert_class(
        hook_created(&w, &run, "hook_1", "tok-1"),
        "EntityConflictError",
        409,
    );
    assert_class(
        hook_created(&w, &run, "hook_1", "tok-other"),
        "EntityConflictError",
        409,
    );
}

#[test]
fn hook_created_with_a_token_held_by_a_live_hook_records_hook_conflict() {
    let (_d, w) = world();
    let a = running_run(&w);
    let b = running_run(&w);
    hook_created(&w, &a, "hook_a", "shared").unwrap();
    let r = hook_created(&w, &b, "hook_b", "shared").unwrap();
    let event = r.event.unwrap();
    assert_eq!(event.event_type, EventType::HookConflict);
    assert_eq!(event.correlation_id.as_deref(), Some("hook_b"));
    assert_eq!(
        event.event_data.unwrap().as_str(),
        format!(r#"{{"token":"shared","conflictingRunId":"{a}"}}"#)
    );
    assert!(r.hook.is_none());
    assert_eq!(kinds(&w, &b).last().unwrap(), "hook_conflict");
    assert_eq!(w.get_hook_by_token("shared").unwrap().run_id, a);
    assert_class(
        w.get_hook("hook_b", ResolveData::All),
        "HookNotFoundError",
        404,
    );
    // The conflicted hook id is used: asking again conflicts (no second event).
    assert_class(
        hook_created(&w, &b, "hook_b", "shared"),
        "EntityConflictError",
        409,
    );
    // Tokens are unique within a run too.
    let r = hook_created(&w, &a, "hook_a2", "shared").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookConflict);
}

#[test]
fn hook_received_appends_to_a_live_hook_and_returns_the_event_only() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "h", "tok-r").unwrap();
    let r = hook_received(&w, &run, "h").unwrap();
    assert_eq!(
        r.event.unwrap().event_data.unwrap().as_str(),
        format!(r#"{{"payload":{}}}"#, bin(b"hello"))
    );
    assert!(r.hook.is_none() && r.run.is_none() && r.step.is_none());
    hook_received(&w, &run, "h").unwrap();
    assert_eq!(
        kinds(&w, &run)
            .iter()
            .filter(|k| *k == "hook_received")
            .count(),
        2
    );
}

#[test]
fn hook_received_on_an_unknown_or_disposed_hook_is_hook_not_found_404() {
    let (_d, w) = world();
    let run = running_run(&w);
    assert_class(hook_received(&w, &run, "nope"), "HookNotFoundError", 404);
    hook_created(&w, &run, "h", "tok-d").unwrap();
    hook_disposed(&w, &run, "h").unwrap();
    assert_class(hook_received(&w, &run, "h"), "HookNotFoundError", 404);
}

#[test]
fn hook_received_naming_another_token_is_rejected_400() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "h", "tok-x").unwrap();
    let data = format!(r#"{{"token":"tok-y","payload":{}}}"#, bin(b"p"));
    let r = ev(&w, &run, EventType::HookReceived, Some("h"), Some(&data));
    assert_class(r, "WorkflowWorldError", 400);
    let data = format!(r#"{{"token":"tok-x","payload":{}}}"#, bin(b"p"));
    ev(&w, &run, EventType::HookReceived, Some("h"), Some(&data)).unwrap();
}

#[test]
fn hook_disposed_releases_the_token_for_any_run() {
    let (_d, w) = world();
    let a = running_run(&w);
    hook_created(&w, &a, "h1", "tok-reuse").unwrap();
    let r = hook_disposed(&w, &a, "h1").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookDisposed);
    assert_class(w.get_hook_by_token("tok-reuse"), "HookNotFoundError", 404);
    let b = running_run(&w);
    let r = hook_created(&w, &b, "h2", "tok-reuse").unwrap();
    assert_eq!(r.hook.unwrap().run_id, b);
    // A disposed hook id stays used in its run.
    assert_class(
        hook_created(&w, &a, "h1", "tok-new"),
        "EntityConflictError",
        409,
    );
}

#[test]
fn hook_disposed_twice_is_hook_not_found_404() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "h", "tok-2x").unwrap();
    hook_disposed(&w, &run, "h").unwrap();
    assert_class(hook_disposed(&w, &run, "h"), "HookNotFoundError", 404);
}

#[test]
fn hook_conflict_cannot_be_requested() {
    let (_d, w) = world();
    let run = running_run(&w);
    let r = ev(
        &w,
        &run,
        EventType::HookConflict,
        Some("h"),
        Some(r#"{"token":"t"}"#),
    );
    assert_class(r, "WorkflowWorldError", 400);
}

// ---------------------------------------------------------------- waits

#[test]
fn wait_created_creates_a_waiting_wait_with_the_composite_id() {
    let (_d, w) = world();
    let run = running_run(&w);
    let wait = wait_created(&w, &run, "wait_1").unwrap().wait.unwrap();
    assert_eq!(wait.wait_id, format!("{run}-wait_1"));
    assert_eq!(wait.status, WaitStatus::Waiting);
    assert_eq!(
        wait.resume_at_ms.map(format_iso_ms).as_deref(),
        Some("2030-01-01T00:00:00.000Z")
    );
    assert_class(wait_created(&w, &run, "wait_1"), "EntityConflictError", 409);
}

#[test]
fn wait_completed_completes_once() {
    let (_d, w) = world();
    let run = running_run(&w);
    wait_created(&w, &run, "w").unwrap();
    let done = wait_completed(&w, &run, "w").unwrap().wait.unwrap();
    assert_eq!(done.status, WaitStatus::Completed);
    assert!(done.completed_at_ms.is_some());
    assert_class(wait_completed(&w, &run, "w"), "EntityConflictError", 409);
}

#[test]
fn wait_completed_of_an_unknown_wait_is_404() {
    let (_d, w) = world();
    let run = running_run(&w);
    let e = assert_class(wait_completed(&w, &run, "ghost"), "WorkflowWorldError", 404);
    assert!(matches!(e, runlog_world::WorldError::WaitNotFound { .. }));
}

#[test]
fn wait_completed_on_a_terminal_run_is_run_expired_410() {
    let (_d, w) = world();
    let run = running_run(&w);
    wait_created(&w, &run, "w").unwrap();
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    assert_class(wait_completed(&w, &run, "w"), "RunExpiredError", 410);
}

// ---------------------------------------------------------------- every event type

#[test]
fn a_repeated_event_id_is_entity_conflict_409_and_writes_nothing() {
    let (_d, w) = world();
    let run = running_run(&w);
    let id = runlog_world::event_id_string(runlog_world::mint_ulid());
    let data = format!(r#"{{"stepName":"n","input":{}}}"#, bin(b"i"));
    let first = req(EventType::StepCreated, Some("s1"), Some(&data)).event_id(&id);
    let r = w.create_event(Some(&run), first, &params()).unwrap();
    assert_eq!(r.event.unwrap().event_id, id);
    let second = req(EventType::StepCreated, Some("s2"), Some(&data)).event_id(&id);
    let e = assert_class(
        w.create_event(Some(&run), second, &params()),
        "EntityConflictError",
        409,
    );
    assert!(matches!(
        e,
        runlog_world::WorldError::DuplicateEventId { .. }
    ));
    assert_eq!(kinds(&w, &run).len(), 3);
    let lower = req(EventType::StepCreated, Some("s3"), Some(&data)).event_id(id.to_lowercase());
    assert_class(
        w.create_event(Some(&run), lower, &params()),
        "WorkflowWorldError",
        400,
    );
}

#[test]
fn state_updated_at_before_the_newest_event_is_precondition_failed_412() {
    let (_d, w) = world();
    let run = running_run(&w);
    let newest = w.run_state(&run).unwrap().newest_created_at_ms();
    let data = format!(r#"{{"stepName":"n","input":{}}}"#, bin(b"i"));
    let stale = CreateEventParams {
        state_updated_at_ms: Some(newest - 1),
        ..params()
    };
    let r = w.create_event(
        Some(&run),
        req(EventType::StepCreated, Some("s"), Some(&data)),
        &stale,
    );
    assert_class(r, "PreconditionFailedError", 412);
    let current = CreateEventParams {
        state_updated_at_ms: Some(newest),
        ..params()
    };
    w.create_event(
        Some(&run),
        req(EventType::StepCreated, Some("s"), Some(&data)),
        &current,
    )
    .unwrap();
}

#[test]
fn requests_that_break_the_schema_are_rejected_400_before_anything_is_written() {
    let (_d, w) = world();
    let run = running_run(&w);
    let cases: Vec<(EventType, Option<&str>, Option<&str>)> = vec![
        (
            EventType::StepCreated,
            None,
            Some(r#"{"stepName":"n","input":1}"#),
        ),
        (EventType::StepCreated, Some("s"), None),
        (
            EventType::StepCreated,
            Some("s"),
            Some(r#"{"stepName":"n"}"#),
        ),
        (
            EventType::StepCreated,
            Some("s"),
            Some(r#"{"stepName":7,"input":1}"#),
        ),
        (EventType::StepCreated, Some("s"), Some("[1]")),
        (
            EventType::StepCreated,
            Some(""),
            Some(r#"{"stepName":"n","input":1}"#),
        ),
        (EventType::RunCompleted, None, None),
        (EventType::RunFailed, None, Some(r#"{"errorCode":"X"}"#)),
        (EventType::HookCreated, Some("h"), Some(r#"{"metadata":1}"#)),
        (EventType::HookReceived, Some("h"), Some(r#"{}"#)),
        (
            EventType::WaitCreated,
            Some("w"),
            Some(r#"{"resumeAt":"soon"}"#),
        ),
        (
            EventType::StepRetrying,
            Some("s"),
            Some(r#"{"error":1,"retryAfter":"x"}"#),
        ),
        (
            EventType::AttrSet,
            None,
            Some(r#"{"changes":[{"key":"a"}],"writer":{"type":"workflow"}}"#),
        ),
        (EventType::RunCancelled, None, Some(r#"null"#)),
    ];
    let long_corr = "c".repeat(201);
    for (ty, corr, data) in cases.into_iter().chain([(
        EventType::WaitCreated,
        Some(long_corr.as_str()),
        Some(r#"{"resumeAt":1}"#),
    )]) {
        let r = w.create_event(Some(&run), req(ty, corr, data), &params());
        assert_class(r, "WorkflowWorldError", 400);
    }
    let not_json = EventRequest::new(EventType::RunCompleted).data("{ not json");
    assert_class(not_json, "WorkflowWorldError", 400);
    assert_eq!(kinds(&w, &run).len(), 2);
}

#[test]
fn writes_to_a_run_of_a_newer_spec_version_are_run_not_supported() {
    let (_d, w) = world();
    // A run stamped spec 8 in its metadata (written by a newer World; this one serves 2–7).
    let run = runlog_world::mint_run_id();
    let id = runlog::RunId::new(&run).unwrap();
    w.backend()
        .create_run_with_meta(&id, br#"{"source":"world","spec_version":8}"#)
        .unwrap();
    w.backend()
        .append_facts(
            &id,
            vec![runlog::NewEvent::new("run_created", run_created_data("wf"))],
        )
        .unwrap();
    assert_eq!(
        w.get_run(&run, ResolveData::All).unwrap().spec_version,
        Some(8)
    );
    assert_class(
        ev(&w, &run, EventType::RunStarted, None, None),
        "RunNotSupportedError",
        400,
    );
}

#[test]
fn resolve_data_none_omits_payloads() {
    let (_d, w) = world();
    let run = running_run(&w);
    lazy_start(&w, &run, "s").unwrap();
    let p = CreateEventParams {
        resolve_data: ResolveData::None,
        ..params()
    };
    let data = format!(r#"{{"stepName":"n","result":{},"ttfs":3}}"#, bin(b"r"));
    let r = w
        .create_event(
            Some(&run),
            req(EventType::StepCompleted, Some("s"), Some(&data)),
            &p,
        )
        .unwrap();
    assert_eq!(
        r.event.unwrap().event_data.unwrap().as_str(),
        r#"{"stepName":"n","ttfs":3}"#
    );
    assert!(
        r.step.unwrap().output.is_some(),
        "entities stay full on create"
    );
    let run_none = w.get_run(&run, ResolveData::None).unwrap();
    assert!(run_none.input.is_none() && run_none.output.is_none());
    let step = w.get_step(&run, "s", ResolveData::None).unwrap();
    assert!(step.input.is_none() && step.output.is_none());
    let events = w
        .list_events(&run, &Default::default(), ResolveData::None)
        .unwrap();
    // run_created keeps deploymentId etc.; run_started has no data at all.
    let created = events.data[0].event_data.as_ref().unwrap().as_str();
    assert!(!created.contains("\"input\"") && created.contains("deploymentId"));
    assert!(events.data[1].event_data.is_none());
}

#[test]
fn error_classes_and_statuses_cover_storage_faults() {
    let busy = runlog_world::WorldError::Busy {
        run_id: "r".into(),
        attempts: 3,
    };
    assert_eq!(
        (busy.class_name(), busy.status()),
        ("WorkflowWorldError", 503)
    );
    let corrupt = runlog_world::WorldError::Storage(runlog::Error::Corrupt {
        run: "r".into(),
        segment: "seg".into(),
        offset: 0,
        detail: "x".into(),
    });
    assert_eq!(
        (corrupt.class_name(), corrupt.status()),
        ("WorkflowWorldError", 500)
    );
}

#[test]
fn a_minted_event_id_meeting_another_writers_mint_is_reminted_not_refused() {
    // runlog mints the successor of a run's last event id, and so does the World's monotonic
    // generator within one millisecond: a raw append right after a World event, then a World
    // event in the same millisecond, meet on one id. The World mints again.
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "h", "tok-mint").unwrap();
    let id = runlog::RunId::new(&run).unwrap();
    let payload = format!(r#"{{"payload":{}}}"#, bin(b"raw"));
    for _ in 0..200 {
        hook_received(&w, &run, "h").unwrap();
        let raw = runlog::NewEvent::new("hook_received", payload.clone()).correlation_id("h");
        w.backend().append_facts(&id, vec![raw]).unwrap();
    }
    hook_received(&w, &run, "h").unwrap();
    assert_eq!(w.run_state(&run).unwrap().anomalies(), 0);
}
