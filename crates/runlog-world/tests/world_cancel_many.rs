//! `runs.cancelMany`: one `run_cancelled` per live run (its spec version, the request's
//! reason), nothing written to runs already ended or missing, one outcome per id in request
//! order, and the requests the SDK's schema refuses refused whole, writing nothing.
mod common;

use common::*;
use runlog_world::{
    BULK_CANCEL_RUN_IDS_MAX, CancelOutcome, EventType, ResolveData, RunStatus, WorldError,
};

fn outcome_name(o: &CancelOutcome) -> String {
    match o {
        CancelOutcome::Cancelled => "cancelled".into(),
        CancelOutcome::AlreadyCancelled => "already_cancelled".into(),
        CancelOutcome::NotCancellable(s) => format!("not_cancellable {}", s.as_str()),
        CancelOutcome::NotFound => "not_found".into(),
        CancelOutcome::Failed(e) => format!("failed {}", e.status()),
    }
}

#[test]
fn live_runs_are_cancelled_and_ended_or_missing_runs_reported_without_a_write() {
    let (_dir, w) = world();
    let running = running_run(&w);
    let pending = create_run(&w);
    let completed = running_run(&w);
    terminal(&w, &completed, EventType::RunCompleted).unwrap();
    let failed = running_run(&w);
    terminal(&w, &failed, EventType::RunFailed).unwrap();
    let cancelled = running_run(&w);
    terminal(&w, &cancelled, EventType::RunCancelled).unwrap();
    let ids = vec![
        running.clone(),
        pending.clone(),
        completed.clone(),
        failed.clone(),
        cancelled.clone(),
        runlog_world::mint_run_id(),
        "not-a-run-id".to_string(),
    ];
    let before: Vec<_> = ids[2..5].iter().map(|r| kinds(&w, r)).collect();

    let outcomes = w.cancel_runs(&ids, Some("bulk stop")).unwrap();

    let names: Vec<_> = outcomes.iter().map(outcome_name).collect();
    assert_eq!(
        names,
        [
            "cancelled",
            "cancelled",
            "not_cancellable completed",
            "not_cancellable failed",
            "already_cancelled",
            "not_found",
            "not_found",
        ]
    );
    for run in [&running, &pending] {
        assert_eq!(
            w.get_run(run, ResolveData::All).unwrap().status,
            RunStatus::Cancelled
        );
        let log = kinds(&w, run);
        assert_eq!(log.last().map(String::as_str), Some("run_cancelled"));
        assert_eq!(log.iter().filter(|k| *k == "run_cancelled").count(), 1);
        let state = w.run_state(run).unwrap();
        let (seq, _) = state.terminal_event().unwrap();
        assert_eq!(seq as usize, log.len());
    }
    // Ended runs: not one byte more in their logs.
    let after: Vec<_> = ids[2..5].iter().map(|r| kinds(&w, r)).collect();
    assert_eq!(after, before);
}

#[test]
fn the_cancel_reason_rides_the_run_cancelled_event() {
    let (_dir, w) = world();
    let run = running_run(&w);
    w.cancel_runs(std::slice::from_ref(&run), Some("because"))
        .unwrap();
    let page = w
        .list_events(&run, &Default::default(), ResolveData::All)
        .unwrap();
    let last = page.data.last().unwrap();
    assert_eq!(last.event_type, EventType::RunCancelled);
    let data = last.event_data.as_ref().unwrap().as_str();
    assert_eq!(data, r#"{"cancelReason":"because"}"#);
    // Without a reason: no eventData, as `cancelRun` sends none.
    let other = running_run(&w);
    w.cancel_runs(std::slice::from_ref(&other), None).unwrap();
    let page = w
        .list_events(&other, &Default::default(), ResolveData::All)
        .unwrap();
    assert!(page.data.last().unwrap().event_data.is_none());
}

#[test]
fn requests_the_schema_refuses_write_nothing() {
    let (_dir, w) = world();
    let run = running_run(&w);
    let too_many: Vec<String> = (0..=BULK_CANCEL_RUN_IDS_MAX)
        .map(|_| runlog_world::mint_run_id())
        .collect();
    for (ids, reason) in [
        (vec![], None),
        (vec![run.clone(), run.clone()], None),
        (too_many, None),
        (vec![run.clone()], Some("x".repeat(513))),
    ] {
        let e = assert_class(
            w.cancel_runs(&ids, reason.as_deref()),
            "WorkflowWorldError",
            400,
        );
        assert!(matches!(e, WorldError::InvalidRequest { .. }), "{e}");
    }
    assert_eq!(kinds(&w, &run), ["run_created", "run_started"]);
}
