//! A World on a store opened read-only (`runlog::Store::open_read_only`: another user's store,
//! a read-only mount; issue 20 item 4): every read answers, with the hook token claims folded
//! in memory from the run logs when the claims log is missing (a read cannot create it), and
//! every write is `Storage(ReadOnly)`, `WorkflowWorldError` 403, nothing written.

mod common;

use std::sync::Arc;

use common::*;
use runlog::{Config, RunId, Store};
use runlog_world::{
    EventType, HOOK_TOKENS_RUN, Pagination, ResolveData, World, WorldConfig, WorldError,
};

fn read_only(path: &std::path::Path) -> TestWorld {
    let store = Store::open_read_only(path, Config::default()).expect("open read-only");
    World::new(Arc::new(store), WorldConfig::default())
}

#[test]
fn hooks_are_found_by_token_and_listed_without_a_claims_log() {
    let (dir, w) = world();
    let run = running_run(&w);
    hook_created(&w, &run, "hook_1", "tok_1").expect("hook");
    drop(w);
    // As an import leaves a store: the hooks are in the run logs, no claims log yet.
    let store = Store::open(dir.path(), Config::default()).expect("open");
    store
        .delete_run(&RunId::new(HOOK_TOKENS_RUN).expect("id"))
        .expect("delete the claims log");
    drop(store);

    let ro = read_only(dir.path());
    let hook = ro.get_hook_by_token("tok_1").expect("by token");
    assert_eq!(
        (hook.hook_id.as_str(), hook.run_id.as_str()),
        ("hook_1", run.as_str())
    );
    let p = Pagination::default();
    let page = ro.list_hooks(None, &p, ResolveData::All).expect("list");
    let ids: Vec<&str> = page.data.iter().map(|h| h.hook_id.as_str()).collect();
    assert_eq!(ids, ["hook_1"]);
    let missing = ro.get_hook_by_token("tok_2").expect_err("no such token");
    assert!(
        matches!(missing, WorldError::HookNotFound { .. }),
        "{missing:?}"
    );
    let listed = Store::open_read_only(dir.path(), Config::default()).expect("open");
    let names: Vec<String> = runlog::RunLog::list_runs(&listed, None, 10)
        .expect("list runs")
        .runs
        .iter()
        .map(|i| i.run.to_string())
        .collect();
    assert!(
        !names.contains(&HOOK_TOKENS_RUN.to_string()),
        "nothing created: {names:?}"
    );
}

#[test]
fn a_store_without_hooks_lists_none_and_every_write_is_read_only_403() {
    let (dir, w) = world();
    let run = running_run(&w);
    drop(w);
    let ro = read_only(dir.path());
    let p = Pagination::default();
    assert!(
        ro.list_hooks(None, &p, ResolveData::All)
            .expect("list")
            .data
            .is_empty()
    );
    assert!(matches!(
        ro.get_hook_by_token("t"),
        Err(WorldError::HookNotFound { .. })
    ));
    assert_eq!(
        ro.get_run(&run, ResolveData::None).expect("get").run_id,
        run
    );

    let writes = [
        step_created(&ro, &run, "step_1"),
        hook_created(&ro, &run, "hook_1", "tok_1"),
        terminal(&ro, &run, EventType::RunCancelled),
    ];
    for w in writes {
        let e = w.expect_err("a write");
        assert!(
            matches!(&e, WorldError::Storage(runlog::Error::ReadOnly { path, .. }) if path == dir.path()),
            "{e:?}"
        );
        assert_eq!((e.class_name(), e.status()), ("WorkflowWorldError", 403));
    }
    let data = run_created_data("wf");
    let created = ro.create_event(
        None,
        req(EventType::RunCreated, None, Some(&data)),
        &params(),
    );
    assert_eq!(created.expect_err("create").status(), 403);
    assert_eq!(
        kinds(&open(dir.path()), &run),
        ["run_created", "run_started"]
    );
}
