//! Store-wide reads of a store holding damaged runs (issue 20, items 1 and 2): a damaged run
//! is never dropped. `runs.list` lists it as the state of its readable part with its
//! `storageError` (under every filter its unreadable part could still satisfy); `hooks.list`
//! and `events.listByCorrelationId` without a run serve the intact runs and what a damaged
//! run's readable part holds, and fail naming the damaged runs where the answer may lie past
//! the damage; the hook token rebuild claims the hooks of a damaged run's readable part and
//! reports the run. The damage is real: one flipped byte in a batch of a run's segment file,
//! with valid batches after it (which runlog reports as corruption, never cuts).

mod common;

use common::*;
use runlog::RunId;
use runlog_world::{
    EventType, HOOK_TOKENS_RUN, ListRunsParams, Pagination, ResolveData, RunStatus, WorldError,
};

/// A `step_created` whose step name carries `marker` (a place to damage).
fn marked_step(w: &TestWorld, run: &str, step: &str, marker: &str) {
    let data = format!(
        r#"{{"stepName":"step//./wf//{marker}","input":{}}}"#,
        bin(b"[1]")
    );
    ev(w, run, EventType::StepCreated, Some(step), Some(&data)).unwrap();
}

fn list(w: &TestWorld, workflow: Option<&str>, status: Option<RunStatus>) -> Vec<String> {
    let params = ListRunsParams {
        workflow_name: workflow.map(str::to_string),
        status,
        pagination: Pagination {
            sort_order: Some(runlog_world::SortOrder::Asc),
            ..Pagination::default()
        },
        resolve_data: ResolveData::None,
    };
    let page = w.list_runs(&params).unwrap();
    assert!(!page.has_more);
    page.data.into_iter().map(|r| r.run_id).collect()
}

#[test]
fn runs_list_shows_a_damaged_run_as_its_readable_part_with_its_fault_under_every_filter_it_may_pass()
 {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let done = running_run(&w);
    terminal(&w, &done, EventType::RunCompleted).unwrap();
    let pending = create_run(&w);
    // Damaged at seq 4: runs to seq 3 (running, one step) can be read.
    let damaged = running_run(&w);
    step_created(&w, &damaged, "s1").unwrap();
    marked_step(&w, &damaged, "s2", "DAMAGE_MID");
    step_created(&w, &damaged, "s3").unwrap();
    // Damaged at seq 1: not even its run_created can be read.
    let headless = create_run_of(&w, "workflow//./wf//HEADLESS");
    ev(&w, &headless, EventType::RunStarted, None, None).unwrap();
    drop(w);
    flip_marker(dir.path(), &damaged, "DAMAGE_MID");
    flip_marker(dir.path(), &headless, "HEADLESS");
    let w = open(dir.path());

    // The per-run read fails with the fault, never a state short of the log's end.
    let e = w.get_run(&damaged, ResolveData::All).unwrap_err();
    assert!(
        matches!(e, WorldError::Storage(runlog::Error::Corrupt { .. })),
        "{e}"
    );

    let page = w.list_runs(&ListRunsParams::default()).unwrap();
    let ids: Vec<&str> = page.data.iter().map(|r| r.run_id.as_str()).collect();
    let mut all = vec![
        done.as_str(),
        pending.as_str(),
        damaged.as_str(),
        headless.as_str(),
    ];
    all.reverse(); // newest first
    assert_eq!(ids, all);
    assert!(!page.has_more);
    let by_id = |id: &str| page.data.iter().find(|r| r.run_id == id).unwrap();
    assert_eq!(by_id(&done).storage_error, None);
    assert_eq!(by_id(&pending).storage_error, None);
    let d = by_id(&damaged);
    assert_eq!(d.status, RunStatus::Running);
    assert_eq!(d.workflow_name, "workflow//./wf//main");
    let fault = d.storage_error.as_ref().expect("the damaged run's fault");
    assert_eq!(
        (
            fault.run_id.as_str(),
            fault.code.as_str(),
            fault.readable_seq
        ),
        (damaged.as_str(), "CORRUPT", 3)
    );
    assert_eq!(fault.segment.as_deref(), Some("seg-00000001.log"));
    assert!(fault.offset.is_some_and(|o| o > 0));
    assert!(fault.message.contains(&damaged) && fault.message.contains("seg-00000001.log"));
    let h = by_id(&headless);
    assert_eq!(
        (h.status, h.workflow_name.as_str()),
        (RunStatus::Pending, "")
    );
    let expected_created = runlog_world::parse_run_id(&headless)
        .unwrap()
        .1
        .timestamp_ms();
    assert_eq!(h.created_at_ms, expected_created);
    let fault = h.storage_error.as_ref().unwrap();
    assert_eq!((fault.code.as_str(), fault.readable_seq), ("CORRUPT", 0));
    // The wire form names the fault in a field of its own, beside the SDK's fields.
    let json = serde_json::to_value(d).unwrap();
    assert_eq!(json["storageError"]["code"], "CORRUPT");
    assert_eq!(json["storageError"]["readableSeq"], 3);
    assert_eq!(json["status"], "running");

    // Filters: the damaged run passes every status it may reach past its damage (running or
    // a terminal one, never pending again); the headless one passes every filter.
    let pending_ids = list(&w, None, Some(RunStatus::Pending));
    assert_eq!(pending_ids, [pending.clone(), headless.clone()]);
    let running_ids = list(&w, None, Some(RunStatus::Running));
    assert_eq!(running_ids, [damaged.clone(), headless.clone()]);
    let completed_ids = list(&w, None, Some(RunStatus::Completed));
    assert_eq!(
        completed_ids,
        [done.clone(), damaged.clone(), headless.clone()]
    );
    let other = list(&w, Some("workflow//./wf//other"), None);
    assert_eq!(other, std::slice::from_ref(&headless));
    let main = list(&w, Some("workflow//./wf//main"), Some(RunStatus::Cancelled));
    assert_eq!(main, [damaged.clone(), headless.clone()]);
    // Pages of one keep every run, damaged or not, once.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let params = ListRunsParams {
            pagination: Pagination {
                limit: Some(1),
                cursor,
                ..Pagination::default()
            },
            ..ListRunsParams::default()
        };
        let page = w.list_runs(&params).unwrap();
        seen.extend(page.data.into_iter().map(|r| r.run_id));
        if !page.has_more {
            break;
        }
        cursor = page.cursor;
    }
    assert_eq!(seen, all);
}

#[test]
fn a_run_the_store_cannot_open_is_listed_with_its_fault() {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let fine = running_run(&w);
    let broken = running_run(&w);
    drop(w);
    // The segment's header (its first bytes): the store's own listing cannot read the run.
    let seg = dir
        .path()
        .join("runs")
        .join(&broken)
        .join("seg-00000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();
    let w = open(dir.path());
    let listed = w.backend().list_runs(None, 100).unwrap();
    assert_eq!(
        listed.damaged.len(),
        1,
        "the store's listing reports it apart"
    );
    let page = w.list_runs(&ListRunsParams::default()).unwrap();
    let ids: Vec<&str> = page.data.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, [broken.as_str(), fine.as_str()]);
    let fault = page.data[0].storage_error.as_ref().unwrap();
    assert_eq!(
        (fault.run_id.as_str(), fault.readable_seq),
        (broken.as_str(), 0)
    );
    assert!(
        !fault.code.is_empty() && fault.code != "UNKNOWN",
        "{fault:?}"
    );
    let running = list(&w, None, Some(RunStatus::Running));
    assert_eq!(running, [fine, broken]);
}

#[test]
fn store_wide_hooks_list_serves_intact_runs_and_a_damaged_runs_readable_hooks_and_fails_naming_a_run_whose_claimed_hook_is_past_its_damage()
 {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let intact = running_run(&w);
    hook_created(&w, &intact, "hook_intact", "tok-intact").unwrap();
    // A hook before the damage.
    let damaged = running_run(&w);
    hook_created(&w, &damaged, "hook_before", "tok-before").unwrap();
    marked_step(&w, &damaged, "s1", "DAMAGE_AFTER_HOOK");
    step_created(&w, &damaged, "s2").unwrap();
    drop(w);
    flip_marker(dir.path(), &damaged, "DAMAGE_AFTER_HOOK");
    let w = open(dir.path());
    let page = w
        .list_hooks(None, &Pagination::default(), ResolveData::All)
        .unwrap();
    let hooks: Vec<(&str, &str, bool)> = page
        .data
        .iter()
        .map(|h| {
            (
                h.run_id.as_str(),
                h.hook_id.as_str(),
                h.storage_error.is_some(),
            )
        })
        .collect();
    let mut expected = vec![
        (intact.as_str(), "hook_intact", false),
        (damaged.as_str(), "hook_before", true),
    ];
    expected.sort();
    assert_eq!(hooks, expected);
    let fault = page
        .data
        .iter()
        .find_map(|h| h.storage_error.clone())
        .unwrap();
    assert_eq!((fault.code.as_str(), fault.readable_seq), ("CORRUPT", 3));
    // One run's hooks alone: a per-run read, which fails with the run's fault.
    assert!(matches!(
        w.list_hooks(Some(&damaged), &Pagination::default(), ResolveData::All),
        Err(WorldError::Storage(runlog::Error::Corrupt { .. }))
    ));

    // A hook created after the damage: its claim names it, its run cannot show it.
    drop(w);
    let w = open(dir.path());
    let late = running_run(&w);
    marked_step(&w, &late, "s1", "DAMAGE_BEFORE_HOOK");
    hook_created(&w, &late, "hook_late", "tok-late").unwrap();
    step_created(&w, &late, "s2").unwrap();
    drop(w);
    flip_marker(dir.path(), &late, "DAMAGE_BEFORE_HOOK");
    let w = open(dir.path());
    match w.list_hooks(None, &Pagination::default(), ResolveData::All) {
        Err(WorldError::Unreadable { what, runs }) => {
            assert_eq!(what, "hooks.list");
            let named: Vec<(&str, u64)> = runs
                .iter()
                .map(|f| (f.run_id.as_str(), f.readable_seq))
                .collect();
            assert_eq!(named, [(late.as_str(), 2)]);
        }
        other => panic!("expected Unreadable naming {late}, got {other:?}"),
    }
    let e = w
        .list_hooks(None, &Pagination::default(), ResolveData::All)
        .unwrap_err();
    assert_eq!((e.class_name(), e.status()), ("WorkflowWorldError", 500));
    assert!(e.to_string().contains(&late), "{e}");
}

#[test]
fn store_wide_correlation_lookup_answers_from_intact_runs_and_fails_naming_damaged_runs_where_the_answer_may_lie()
 {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let intact = running_run(&w);
    step_created(&w, &intact, "step_intact").unwrap();
    step_started(&w, &intact, "step_intact").unwrap();
    let damaged = running_run(&w);
    step_created(&w, &damaged, "step_damaged").unwrap();
    marked_step(&w, &damaged, "s_mark", "DAMAGE_CORR");
    step_started(&w, &damaged, "step_damaged").unwrap();
    drop(w);
    flip_marker(dir.path(), &damaged, "DAMAGE_CORR");
    let w = open(dir.path());
    let p = Pagination::default();
    // Found in an intact run: that entity's events, in full.
    let page = w
        .list_events_by_correlation_id("step_intact", None, &p, ResolveData::All)
        .unwrap();
    let types: Vec<EventType> = page.data.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::StepCreated, EventType::StepStarted]);
    assert!(page.data.iter().all(|e| e.run_id == intact));
    // Found in the damaged run (its step_started lies past the damage), or found nowhere
    // while a run cannot be read to its end: the lookup fails naming that run.
    for corr in ["step_damaged", "step_nowhere"] {
        match w.list_events_by_correlation_id(corr, None, &p, ResolveData::All) {
            Err(WorldError::Unreadable { what, runs }) => {
                assert_eq!(what, "events.listByCorrelationId");
                let named: Vec<(&str, &str, u64)> = runs
                    .iter()
                    .map(|f| (f.run_id.as_str(), f.code.as_str(), f.readable_seq))
                    .collect();
                assert_eq!(named, [(damaged.as_str(), "CORRUPT", 3)], "{corr}");
            }
            other => panic!("{corr}: expected Unreadable, got {other:?}"),
        }
    }
    // Within one intact run, as before.
    let one = w
        .list_events_by_correlation_id("step_intact", Some(&intact), &p, ResolveData::All)
        .unwrap();
    assert_eq!(one.data.len(), 2);
}

#[test]
fn the_token_rebuild_claims_a_damaged_runs_readable_hooks_and_reports_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let damaged = running_run(&w);
    hook_created(&w, &damaged, "hook_kept", "tok-kept").unwrap();
    marked_step(&w, &damaged, "s1", "DAMAGE_REBUILD");
    step_created(&w, &damaged, "s2").unwrap();
    let other = running_run(&w);
    drop(w);
    flip_marker(dir.path(), &damaged, "DAMAGE_REBUILD");
    let w = open(dir.path());
    // Lose the claims log: the next use rebuilds it from the run logs.
    w.backend()
        .delete_run(&RunId::new(HOOK_TOKENS_RUN).unwrap())
        .unwrap();
    let report = w.rebuild_hook_tokens().unwrap();
    let named: Vec<(&str, &str, u64)> = report
        .damaged_runs
        .iter()
        .map(|f| (f.run_id.as_str(), f.code.as_str(), f.readable_seq))
        .collect();
    assert_eq!(named, [(damaged.as_str(), "CORRUPT", 3)]);
    assert_eq!(report.live_hooks, 1);
    // The damaged run's readable hook keeps its token: another run conflicts.
    let r = hook_created(&w, &other, "hook_other", "tok-kept").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookConflict);
}

/// Creates and starts a run stamped with spec version `spec` (7: a slot run).
fn running_run_at(w: &TestWorld, spec: u32) -> String {
    let run = runlog_world::mint_run_id();
    let created = runlog_world::EventRequest::new(EventType::RunCreated)
        .spec_version(spec)
        .data(run_created_data("workflow//./wf//main"))
        .unwrap();
    w.create_event(Some(&run), created, &params()).unwrap();
    ev(w, &run, EventType::RunStarted, None, None).unwrap();
    run
}

#[test]
fn slot_runs_damaged_are_listed_with_their_fault_by_every_store_wide_read() {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let intact = running_run_at(&w, 7);
    step_created(&w, &intact, "step_intact").unwrap();
    hook_created(&w, &intact, "hook_intact", "tok-slot-intact").unwrap();
    // Damaged at seq 4 (a slot run: its events are named by seq), its hook at seq 3 before.
    let damaged = running_run_at(&w, 7);
    hook_created(&w, &damaged, "hook_before", "tok-slot-before").unwrap();
    marked_step(&w, &damaged, "s_mark", "DAMAGE_SLOT");
    step_created(&w, &damaged, "s_after").unwrap();
    drop(w);
    flip_marker(dir.path(), &damaged, "DAMAGE_SLOT");
    let w = open(dir.path());

    // runs.list: listed as its readable part, with its fault.
    let page = w.list_runs(&ListRunsParams::default()).unwrap();
    let d = page.data.iter().find(|r| r.run_id == damaged).unwrap();
    assert_eq!((d.status, d.spec_version), (RunStatus::Running, Some(7)));
    let fault = d
        .storage_error
        .as_ref()
        .expect("the damaged slot run's fault");
    assert_eq!((fault.code.as_str(), fault.readable_seq), ("CORRUPT", 3));
    let i = page.data.iter().find(|r| r.run_id == intact).unwrap();
    assert_eq!(i.storage_error, None);
    assert_eq!(
        list(&w, None, Some(RunStatus::Completed)),
        std::slice::from_ref(&damaged)
    );
    // runs.getMany of it fails with its fault, as runs.get does; never `null`.
    let many = w.get_runs(std::slice::from_ref(&damaged), ResolveData::None);
    assert!(
        matches!(
            many,
            Err(WorldError::Storage(runlog::Error::Corrupt { .. }))
        ),
        "{many:?}"
    );

    // hooks.list store-wide: both hooks, the damaged run's with its fault.
    let hooks = w
        .list_hooks(None, &Pagination::default(), ResolveData::All)
        .unwrap();
    let mut got: Vec<(&str, bool)> = hooks
        .data
        .iter()
        .map(|h| (h.hook_id.as_str(), h.storage_error.is_some()))
        .collect();
    got.sort();
    assert_eq!(got, [("hook_before", true), ("hook_intact", false)]);

    // The store-wide correlation lookup: the intact slot run's step, by slot id.
    let p = Pagination::default();
    let found = w
        .list_events_by_correlation_id("step_intact", None, &p, ResolveData::All)
        .unwrap();
    let ids: Vec<&str> = found.data.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids, [runlog_world::slot_event_id(3)]);
    assert!(matches!(
        w.list_events_by_correlation_id("step_nowhere", None, &p, ResolveData::All),
        Err(WorldError::Unreadable { runs, .. }) if runs.len() == 1 && runs[0].run_id == damaged
    ));

    // events.get on slot runs: an id of the other scheme or of no scheme names no event.
    let ok = w
        .get_event(&intact, &runlog_world::slot_event_id(3), ResolveData::All)
        .unwrap();
    assert_eq!(ok.event_type, EventType::StepCreated);
    for bad in [
        "evnt_x".to_string(),
        "nonsense".to_string(),
        format!("evnt_{}", runlog_world::mint_ulid()),
        runlog_world::slot_event_id(99),
    ] {
        let e = w.get_event(&intact, &bad, ResolveData::All).unwrap_err();
        assert!(
            matches!(e, WorldError::EventNotFound { .. }),
            "{bad}: {e:?}"
        );
        assert_eq!(e.status(), 404, "{bad}");
    }
}

#[test]
fn a_token_whose_holders_hook_lies_in_its_damage_is_not_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let w = open(dir.path());
    let holder = running_run(&w);
    hook_created(&w, &holder, "hook_held", "tok-in-damage").unwrap();
    step_created(&w, &holder, "s1").unwrap();
    let other = running_run(&w);
    drop(w);
    // The holder's `hook_created` (seq 3, claimed at seq 2) is the damaged batch: its log
    // reads to seq 2 only, and its store says it is damaged, not that it ends there.
    flip_marker(dir.path(), &holder, "tok-in-damage");
    let w = open(dir.path());
    match hook_created(&w, &other, "hook_other", "tok-in-damage") {
        Err(WorldError::Unreadable { runs, .. }) => {
            let named: Vec<(&str, &str, u64)> = runs
                .iter()
                .map(|f| (f.run_id.as_str(), f.code.as_str(), f.readable_seq))
                .collect();
            assert_eq!(named, [(holder.as_str(), "CORRUPT", 2)]);
        }
        other => panic!("expected Unreadable naming {holder}, got {other:?}"),
    }
}
