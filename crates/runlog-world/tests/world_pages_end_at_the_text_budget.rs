//! A listing's page ends early once the JSON its items carry reaches
//! `WorldConfig::page_text_budget_bytes` (it always holds one item): `hasMore` and the cursor
//! of its last item, and the next page goes on from there. Walking any listing page by page
//! with a small budget gives exactly the items of one unbounded page, in order, each once:
//! `events.list` (ascending and descending), `steps.list`, `runs.list`, `hooks.list` and
//! `events.listByCorrelationId`. Each page holds what the rule admits: items are taken until
//! their JSON reaches the budget. The Node binding hands a page to JavaScript as one string,
//! which V8 caps at about 512 MiB: an unbounded page of large text payloads (37 of 15 MiB)
//! failed there with an untyped error (`test/large-text-pages-list.test.mjs`).

mod common;

use std::sync::Arc;

use common::*;
use runlog::{Config, Store};
use runlog_world::{
    EventType, ListRunsParams, Page, Pagination, ResolveData, SortOrder, World, WorldConfig,
};

const BUDGET: usize = 10_000;

/// Two Worlds on one store: one with a budget of [`BUDGET`] bytes, one unbounded.
fn worlds() -> (tempfile::TempDir, TestWorld, TestWorld) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let small = WorldConfig {
        page_text_budget_bytes: BUDGET,
        ..WorldConfig::default()
    };
    let big = WorldConfig {
        page_text_budget_bytes: usize::MAX,
        ..WorldConfig::default()
    };
    (
        dir,
        World::new(store.clone(), small),
        World::new(store, big),
    )
}

/// A `Uint8Array` of `n` bytes in the reference's JSON shape (its base64 is 4n/3 bytes).
fn blob(n: usize, fill: u8) -> String {
    bin(&vec![fill; n])
}

/// Creates step `step` of `run` with an input of `n` bytes of `fill`.
fn big_step(w: &TestWorld, run: &str, step: &str, n: usize, fill: u8) {
    let data = format!(
        r#"{{"stepName":"step//./wf//s","input":{}}}"#,
        blob(n, fill)
    );
    ev(w, run, EventType::StepCreated, Some(step), Some(&data)).unwrap();
}

/// Every page of a listing from the start, following cursors; asserts each page's shape.
fn walk<T: Clone>(
    limit: usize,
    mut page: impl FnMut(Pagination) -> Page<T>,
    bytes: impl Fn(&T) -> usize,
) -> Vec<Vec<T>> {
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let p = page(Pagination {
            limit: Some(limit),
            cursor: cursor.clone(),
            sort_order: None,
        });
        assert!(
            !p.data.is_empty() || pages.is_empty(),
            "an empty page past the first"
        );
        // What the rule admits: items until their JSON reaches the budget.
        let mut sum = 0;
        for (i, item) in p.data.iter().enumerate() {
            assert!(
                i == 0 || sum < BUDGET,
                "item {i} added past the budget ({sum} B)"
            );
            sum += bytes(item);
        }
        let full = p.data.len() == limit || sum >= BUDGET;
        assert!(
            !p.has_more || full,
            "a short page with hasMore: {} items, {sum} B",
            p.data.len()
        );
        pages.push(p.data);
        if !p.has_more {
            return pages;
        }
        cursor = Some(p.cursor.expect("a page with hasMore has a cursor"));
    }
}

fn json_len(v: &Option<runlog_world::RawJson>) -> usize {
    v.as_ref().map_or(0, |v| v.as_str().len())
}

/// Asserts that `pages` hold exactly `whole`, in order, and that the budget cut some page.
#[track_caller]
fn same_items<T: PartialEq + std::fmt::Debug>(pages: Vec<Vec<T>>, whole: Vec<T>, limit: usize) {
    let cut = pages.iter().any(|p| p.len() < limit) && pages.len() > 1;
    let flat: Vec<T> = pages.into_iter().flatten().collect();
    assert_eq!(flat.len(), whole.len());
    assert_eq!(flat, whole);
    assert!(cut, "no page was cut by the budget");
}

#[test]
fn events_pages_ascending_and_descending() {
    let (_dir, w, whole) = worlds();
    let run = running_run(&w);
    for i in 0..12u8 {
        big_step(
            &w,
            &run,
            &format!("step_{i:02}"),
            2_000 + usize::from(i) * 100,
            i,
        );
    }
    for order in [SortOrder::Asc, SortOrder::Desc] {
        let all = whole
            .list_events(
                &run,
                &Pagination {
                    limit: Some(100),
                    cursor: None,
                    sort_order: Some(order),
                },
                ResolveData::All,
            )
            .unwrap();
        assert_eq!(all.data.len(), 14);
        assert!(!all.has_more);
        let pages = walk(
            100,
            |mut p| {
                p.sort_order = Some(order);
                w.list_events(&run, &p, ResolveData::All).unwrap()
            },
            |e| json_len(&e.event_data),
        );
        // 2.7–4.1 KB per step's event: three or four to a page of 10 KB.
        assert!(pages.len() >= 4, "{order:?}: {} pages", pages.len());
        same_items(pages, all.data, 100);
    }
}

#[test]
fn steps_runs_and_hooks_pages() {
    let (_dir, w, whole) = worlds();
    let run = running_run(&w);
    for i in 0..9u8 {
        big_step(&w, &run, &format!("step_{i}"), 3_000, i);
        let data = format!(r#"{{"token":"tok_{i}","metadata":{}}}"#, blob(3_000, i));
        ev(
            &w,
            &run,
            EventType::HookCreated,
            Some(&format!("hook_{i}")),
            Some(&data),
        )
        .unwrap();
    }
    let steps = |w: &TestWorld, p: &Pagination| w.list_steps(&run, p, ResolveData::All).unwrap();
    let all = steps(
        &whole,
        &Pagination {
            limit: Some(20),
            ..Pagination::default()
        },
    );
    assert_eq!(all.data.len(), 9);
    let pages = walk(
        20,
        |p| steps(&w, &p),
        |s| json_len(&s.input) + json_len(&s.output) + json_len(&s.error),
    );
    same_items(pages, all.data, 20);

    let hooks =
        |w: &TestWorld, p: &Pagination| w.list_hooks(Some(&run), p, ResolveData::All).unwrap();
    let all = hooks(
        &whole,
        &Pagination {
            limit: Some(20),
            ..Pagination::default()
        },
    );
    assert_eq!(all.data.len(), 9);
    let pages = walk(20, |p| hooks(&w, &p), |h| json_len(&h.metadata));
    same_items(pages, all.data, 20);

    for i in 0..7u8 {
        let id = runlog_world::mint_run_id();
        let data = format!(
            r#"{{"deploymentId":"d","workflowName":"workflow//./wf//big","input":{}}}"#,
            blob(3_000, i)
        );
        w.create_event(
            Some(&id),
            req(EventType::RunCreated, None, Some(&data)),
            &params(),
        )
        .unwrap();
    }
    let runs = |w: &TestWorld, p: Pagination| {
        let params = ListRunsParams {
            workflow_name: None,
            status: None,
            pagination: p,
            resolve_data: ResolveData::All,
        };
        w.list_runs(&params).unwrap()
    };
    let all = runs(
        &whole,
        Pagination {
            limit: Some(50),
            ..Pagination::default()
        },
    );
    assert_eq!(all.data.len(), 8);
    let pages = walk(
        50,
        |p| runs(&w, p),
        |r| {
            json_len(&r.execution_context)
                + json_len(&r.input)
                + json_len(&r.output)
                + json_len(&r.error)
        },
    );
    same_items(pages, all.data, 50);
}

#[test]
fn events_by_correlation_id_pages() {
    let (_dir, w, whole) = worlds();
    let run = running_run(&w);
    big_step(&w, &run, "step_a", 3_000, 1);
    for i in 0..6u8 {
        ev(&w, &run, EventType::StepStarted, Some("step_a"), None).unwrap();
        let data = format!(r#"{{"error":{}}}"#, blob(3_000, i));
        ev(
            &w,
            &run,
            EventType::StepRetrying,
            Some("step_a"),
            Some(&data),
        )
        .unwrap();
    }
    for scope in [Some(run.as_str()), None] {
        let list = |w: &TestWorld, p: &Pagination| {
            w.list_events_by_correlation_id("step_a", scope, p, ResolveData::All)
                .unwrap()
        };
        let all = list(
            &whole,
            &Pagination {
                limit: Some(100),
                ..Pagination::default()
            },
        );
        assert_eq!(all.data.len(), 13);
        let pages = walk(100, |p| list(&w, &p), |e| json_len(&e.event_data));
        same_items(pages, all.data, 100);
    }
}

#[test]
fn one_item_larger_than_the_budget_is_a_page_of_its_own() {
    let (_dir, w, _) = worlds();
    let run = running_run(&w);
    for i in 0..3u8 {
        big_step(&w, &run, &format!("step_{i}"), 3 * BUDGET, i);
    }
    let steps = walk(
        20,
        |p| w.list_steps(&run, &p, ResolveData::All).unwrap(),
        |s| json_len(&s.input),
    );
    assert_eq!(
        steps.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![1, 1, 1]
    );
}
