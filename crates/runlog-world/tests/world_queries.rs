//! `runs`, `steps`, `hooks` and `events` reads: filters, orders, cursor pagination (stable
//! across Worlds and restarts, complete by density for events), `resolveData`, not-found
//! classes.

mod common;

use common::*;
use runlog_world::{
    Event, EventType, ListRunsParams, Pagination, RawJson, ResolveData, RunStatus, SortOrder,
    WorldError,
};

fn page(limit: usize, cursor: Option<String>, order: Option<SortOrder>) -> Pagination {
    Pagination {
        limit: Some(limit),
        cursor,
        sort_order: order,
    }
}

#[test]
fn runs_list_filters_by_workflow_and_status_newest_first_with_stable_cursors() {
    let (dir, w) = world();
    let mut ids = Vec::new();
    for i in 0..7 {
        let wf = if i % 2 == 0 { "wf-even" } else { "wf-odd" };
        let run = create_run_of(&w, wf);
        if i % 3 == 0 {
            ev(&w, &run, EventType::RunStarted, None, None).unwrap();
        }
        ids.push(run);
    }
    let all = w.list_runs(&ListRunsParams::default()).unwrap();
    let listed: Vec<_> = all.data.iter().map(|r| r.run_id.clone()).collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);
    assert!(!all.has_more);

    let even = ListRunsParams {
        workflow_name: Some("wf-even".into()),
        ..Default::default()
    };
    assert_eq!(w.list_runs(&even).unwrap().data.len(), 4);
    let running = ListRunsParams {
        status: Some(RunStatus::Running),
        ..Default::default()
    };
    let r = w.list_runs(&running).unwrap();
    assert!(r.data.iter().all(|x| x.status == RunStatus::Running));
    assert_eq!(r.data.len(), 3);

    // Pages of 3, continued by another World (cursor is opaque but stable).
    let fresh = open(dir.path());
    let mut seen = Vec::new();
    let mut cursor = None;
    for (i, world) in [&w, &fresh, &w].into_iter().enumerate() {
        let p = ListRunsParams {
            pagination: page(3, cursor.clone(), None),
            resolve_data: ResolveData::None,
            ..Default::default()
        };
        let got = world.list_runs(&p).unwrap();
        assert!(got.data.iter().all(|r| r.input.is_none()));
        seen.extend(got.data.iter().map(|r| r.run_id.clone()));
        assert_eq!(got.has_more, i < 2);
        cursor = got.cursor;
    }
    assert_eq!(seen, newest_first);
    let asc = ListRunsParams {
        pagination: page(2, None, Some(SortOrder::Asc)),
        ..Default::default()
    };
    let first = w.list_runs(&asc).unwrap();
    assert_eq!(first.data[0].run_id, ids[0]);
    let bad = ListRunsParams {
        pagination: page(2, Some("seq:3".into()), None),
        ..Default::default()
    };
    assert_class(w.list_runs(&bad), "WorkflowWorldError", 400);
}

#[test]
fn runs_list_skips_runs_without_run_created_and_system_runs() {
    let (_d, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "h", "t").unwrap();
    // A run log left by a crashed run_created (created, nothing appended).
    let orphan = runlog_world::mint_run_id();
    w.backend()
        .create_run(&runlog::RunId::new(&orphan).unwrap())
        .unwrap();
    let all = w.list_runs(&ListRunsParams::default()).unwrap();
    let ids: Vec<_> = all.data.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, [run.as_str()]);
}

#[test]
fn steps_list_newest_first_pages_by_creation() {
    let (_d, w) = world();
    let run = running_run(&w);
    for i in 0..5 {
        step_created(&w, &run, &format!("step_{i}")).unwrap();
    }
    let first = w
        .list_steps(&run, &page(2, None, None), ResolveData::All)
        .unwrap();
    let ids: Vec<_> = first.data.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(ids, ["step_4", "step_3"]);
    assert!(first.has_more);
    let rest = w
        .list_steps(&run, &page(10, first.cursor, None), ResolveData::None)
        .unwrap();
    let ids: Vec<_> = rest.data.iter().map(|s| s.step_id.as_str()).collect();
    assert_eq!(ids, ["step_2", "step_1", "step_0"]);
    assert!(!rest.has_more && rest.data.iter().all(|s| s.input.is_none()));
    let asc = w
        .list_steps(&run, &page(1, None, Some(SortOrder::Asc)), ResolveData::All)
        .unwrap();
    assert_eq!(asc.data[0].step_id, "step_0");
    assert_class(
        w.get_step(&run, "nope", ResolveData::All),
        "WorkflowWorldError",
        404,
    );
}

#[test]
fn hooks_list_by_run_and_store_wide_shows_live_hooks_only() {
    let (_d, w) = world();
    let a = running_run(&w);
    let b = running_run(&w);
    hook_created(&w, &a, "a1", "ta1").unwrap();
    hook_created(&w, &a, "a2", "ta2").unwrap();
    hook_created(&w, &b, "b1", "tb1").unwrap();
    hook_disposed(&w, &a, "a1").unwrap();
    let of_a = w
        .list_hooks(Some(&a), &Default::default(), ResolveData::All)
        .unwrap();
    assert_eq!(
        of_a.data
            .iter()
            .map(|h| h.hook_id.as_str())
            .collect::<Vec<_>>(),
        ["a2"]
    );
    let mut cursor = None;
    let mut all = Vec::new();
    loop {
        let p = w
            .list_hooks(None, &page(1, cursor, None), ResolveData::None)
            .unwrap();
        assert!(p.data.iter().all(|h| h.metadata.is_none()));
        all.extend(p.data.into_iter().map(|h| h.hook_id));
        if !p.has_more {
            break;
        }
        cursor = p.cursor;
    }
    all.sort();
    assert_eq!(all, ["a2", "b1"]);
}

#[test]
fn events_list_pages_by_seq_in_both_orders_and_is_complete_by_density() {
    let (dir, w) = world();
    let run = running_run(&w);
    for i in 0..8 {
        step_created(&w, &run, &format!("s{i}")).unwrap();
    }
    let total = kinds(&w, &run).len();
    assert_eq!(total, 10);
    let fresh = open(dir.path());
    let mut seqs = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let world = if pages % 2 == 0 { &w } else { &fresh };
        let p = world
            .list_events(&run, &page(3, cursor, None), ResolveData::All)
            .unwrap();
        seqs.extend(p.data.iter().map(|e| e.seq));
        pages += 1;
        if !p.has_more {
            break;
        }
        cursor = p.cursor;
    }
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    assert_eq!(pages, 4);
    let mut desc = Vec::new();
    let mut cursor = None;
    loop {
        let p = w
            .list_events(
                &run,
                &page(4, cursor, Some(SortOrder::Desc)),
                ResolveData::All,
            )
            .unwrap();
        desc.extend(p.data.iter().map(|e| e.seq));
        if !p.has_more {
            break;
        }
        cursor = p.cursor;
    }
    assert_eq!(desc, (1..=10).rev().collect::<Vec<_>>());
    // New events after the last cursor show up on the next page.
    let tail = w
        .list_events(&run, &page(100, None, None), ResolveData::All)
        .unwrap();
    step_created(&w, &run, "late").unwrap();
    let next = fresh
        .list_events(&run, &page(100, tail.cursor, None), ResolveData::All)
        .unwrap();
    assert_eq!(next.data.iter().map(|e| e.seq).collect::<Vec<_>>(), [11]);
    assert_class(
        w.list_events(&run, &page(3, Some("run:x".into()), None), ResolveData::All),
        "WorkflowWorldError",
        400,
    );
    assert_class(
        w.list_events(
            &runlog_world::mint_run_id(),
            &Default::default(),
            ResolveData::All,
        ),
        "WorkflowRunNotFoundError",
        404,
    );
}

#[test]
fn events_list_each_hands_out_what_events_list_lists_in_both_orders() {
    let (_d, w) = world();
    let run = running_run(&w);
    for i in 0..9 {
        step_created(&w, &run, &format!("s{i}")).unwrap();
    }
    step_started(&w, &run, "s0").unwrap();
    for order in [None, Some(SortOrder::Asc), Some(SortOrder::Desc)] {
        for (limit, after) in [
            (100, None),
            (4, None),
            (4, Some(5)),
            (1, Some(12)),
            (3, Some(1)),
        ] {
            // A cursor as events.list hands it out: after the first `after` events.
            let cursor = after.map(|k| {
                w.list_events(&run, &page(k, None, None), ResolveData::All)
                    .unwrap()
                    .cursor
                    .unwrap()
            });
            let p = page(limit, cursor, order);
            let listed = w.list_events(&run, &p, ResolveData::All).unwrap();
            let mut seen = Vec::new();
            let (cursor, has_more) = w
                .list_events_each(&run, &p, |e| {
                    seen.push(Event {
                        run_id: e.run_id.to_string(),
                        event_id: runlog_world::event_id_string(e.event_id),
                        event_type: e.event_type,
                        correlation_id: e.correlation_id.map(str::to_owned),
                        event_data: e.event_data.map(|d| RawJson::from_text(d).unwrap()),
                        created_at_ms: e.created_at_ms,
                        spec_version: e.spec_version,
                        resume_id: e.resume_id.map(str::to_owned),
                        seq: e.seq,
                    });
                    Ok::<(), WorldError>(())
                })
                .unwrap();
            assert_eq!(seen, listed.data, "{order:?} {limit} {after:?}");
            assert_eq!((cursor, has_more), (listed.cursor, listed.has_more));
        }
    }
    // Its errors are list_events' errors; an error of the callback stops the listing.
    assert_class(
        w.list_events_each(&runlog_world::mint_run_id(), &Default::default(), |_| {
            Ok::<(), WorldError>(())
        }),
        "WorkflowRunNotFoundError",
        404,
    );
    let mut calls = 0;
    let stopped = w.list_events_each(&run, &Default::default(), |_| {
        calls += 1;
        Err(WorldError::InvalidRequest {
            field: "x".into(),
            reason: "stop".into(),
        })
    });
    assert!(stopped.is_err());
    assert_eq!(calls, 1);
}

#[test]
fn events_get_by_id_and_not_found() {
    let (_d, w) = world();
    let run = running_run(&w);
    let e = step_created(&w, &run, "s").unwrap().event.unwrap();
    let got = w.get_event(&run, &e.event_id, ResolveData::All).unwrap();
    assert_eq!(got, e);
    let missing = runlog_world::event_id_string(runlog_world::mint_ulid());
    assert_class(
        w.get_event(&run, &missing, ResolveData::All),
        "WorkflowWorldError",
        404,
    );
    // An id that is no `evnt_<ULID>` names no event: not found, like any missing one.
    assert_class(
        w.get_event(&run, "evnt_x", ResolveData::All),
        "WorkflowWorldError",
        404,
    );
}

#[test]
fn events_by_correlation_id_within_a_run_and_across_the_store() {
    let (_d, w) = world();
    let a = running_run(&w);
    let b = running_run(&w);
    lazy_start(&w, &a, "shared").unwrap();
    step_completed(&w, &a, "shared").unwrap();
    step_created(&w, &b, "shared").unwrap();
    step_created(&w, &b, "other").unwrap();
    let in_a = w
        .list_events_by_correlation_id("shared", Some(&a), &Default::default(), ResolveData::All)
        .unwrap();
    let types: Vec<_> = in_a.data.iter().map(|e| e.event_type).collect();
    assert_eq!(
        types,
        [
            EventType::StepCreated,
            EventType::StepStarted,
            EventType::StepCompleted
        ]
    );
    let mut cursor = None;
    let mut everywhere = Vec::new();
    loop {
        let p = w
            .list_events_by_correlation_id(
                "shared",
                None,
                &page(2, cursor, None),
                ResolveData::None,
            )
            .unwrap();
        everywhere.extend(p.data.into_iter().map(|e| (e.run_id, e.seq)));
        if !p.has_more {
            break;
        }
        cursor = p.cursor;
    }
    assert_eq!(everywhere.len(), 4);
    assert_eq!(everywhere.iter().filter(|(r, _)| *r == b).count(), 1);
}
