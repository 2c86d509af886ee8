//! Shared by the gc tests: a store of corpus runs plus World runs with streams and
//! attributes, and a snapshot of every log (metadata and every field of every event) read
//! through the store's API, to compare before a gc and after a restore.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use runlog::archive::{self, Archive};
use runlog::io::StdFs;
use runlog::{Config, Event, RunId, RunLog, Store};
use runlog_world::{
    COLLECTED_RUNS_LOG, CreateEventParams, EventRequest, EventType, Streams, World, WorldConfig,
};

/// Every log of a store: id → (metadata, events).
pub type Logs = BTreeMap<String, (Vec<u8>, Vec<Event>)>;

/// Every log of the store at `dir`, read-only.
pub fn snapshot(dir: &Path) -> Logs {
    let store = Store::open_read_only(dir, Config::default()).expect("open read-only");
    snapshot_of(&store)
}

/// Every log of `store` (any backend) but gc's own record of the runs it archived
/// ([`COLLECTED_RUNS_LOG`], read by [`collected_record`]).
pub fn snapshot_of(store: &dyn RunLog) -> Logs {
    let page = store.list_runs(None, 10_000).expect("list");
    assert!(page.damaged.is_empty(), "{:?}", page.damaged);
    page.runs
        .iter()
        .filter(|info| info.run.as_str() != COLLECTED_RUNS_LOG)
        .map(|info| {
            let meta = store.run_meta(&info.run).expect("meta");
            let events = store.read(&info.run, 0, 100_000).expect("read").events;
            (info.run.to_string(), (meta, events))
        })
        .collect()
}

/// The runs gc recorded as archived in the store at `dir` (the `collected` events of
/// [`COLLECTED_RUNS_LOG`]), in record order; none when the record does not exist.
pub fn collected_record(dir: &Path) -> Vec<String> {
    let store = Store::open_read_only(dir, Config::default()).expect("open read-only");
    match store.read(&RunId::new(COLLECTED_RUNS_LOG).unwrap(), 0, 100_000) {
        Ok(page) => page
            .events
            .into_iter()
            .filter(|e| e.kind == "collected")
            .filter_map(|e| e.correlation_id.map(String::from))
            .collect(),
        Err(runlog::Error::RunNotFound { .. }) => Vec::new(),
        Err(e) => panic!("the record of collected runs: {e}"),
    }
}

/// The archive of `run` in `dir`, if there is one.
pub fn archived(dir: &Path, run: &str) -> Option<Archive> {
    match archive::read_archive(&StdFs, dir, &RunId::new(run).unwrap()) {
        Ok(a) => Some(a),
        Err(runlog::Error::RunNotFound { .. }) => None,
        Err(e) => panic!("archive of {run}: {e}"),
    }
}

fn request(ty: EventType, data: Option<&str>) -> EventRequest {
    let r = EventRequest::new(ty).spec_version(5);
    match data {
        Some(d) => r.data(d).expect("test data is JSON"),
        None => r,
    }
}

/// Two World runs in the store at `dir`: a completed one with a stream and attributes,
/// and a running one with a stream (never collected). Returns (finished, running).
pub fn add_world_runs(dir: &Path) -> (String, String) {
    let store: Arc<dyn RunLog> = Arc::new(Store::open(dir, Config::default()).expect("open"));
    add_world_runs_to(store)
}

/// [`add_world_runs`] into `store` (any backend).
pub fn add_world_runs_to(store: Arc<dyn RunLog>) -> (String, String) {
    let w = World::new(Arc::clone(&store), WorldConfig::default());
    let streams = Streams::new(Arc::clone(&store));
    let params = CreateEventParams::default();
    let mut runs = Vec::new();
    for name in ["done", "live"] {
        let created = format!(
            r#"{{"deploymentId":"dpl_1","workflowName":"workflow//./wf//{name}","input":{{"__type":"Uint8Array","data":"AA=="}},"executionContext":{{}}}}"#
        );
        let run = runlog_world::mint_run_id();
        let r = w
            .create_event(
                Some(&run),
                request(EventType::RunCreated, Some(&created)),
                &params,
            )
            .expect("run_created");
        assert!(r.run.is_some());
        w.create_event(Some(&run), request(EventType::RunStarted, None), &params)
            .expect("run_started");
        let id = RunId::new(&run).unwrap();
        streams
            .write(&id, "out", &b"\x00first\xff"[..])
            .expect("chunk");
        streams.write(&id, "logs", &b"line\n"[..]).expect("chunk");
        runs.push(run);
    }
    let done = runs[0].clone();
    let id = RunId::new(&done).unwrap();
    streams.close(&id, "out").expect("close");
    let attrs = [("team".to_string(), Some("core".to_string()))];
    w.set_run_attributes(&done, &attrs, false)
        .expect("attributes");
    let out = r#"{"output":{"__type":"Uint8Array","data":"AQID"}}"#;
    w.create_event(
        Some(&done),
        request(EventType::RunCompleted, Some(out)),
        &params,
    )
    .expect("run_completed");
    (done, runs[1].clone())
}

/// A completed World run whose hook is retained by `tokenRetentionUntil` 20 days from now
/// (the World's limit is 30): gc keeps it (`live-hook`). Returns its id.
pub fn add_retained_hook_run(store: Arc<dyn RunLog>) -> String {
    let w = World::new(store, WorldConfig::default());
    let params = CreateEventParams::default();
    let run = runlog_world::mint_run_id();
    let created = r#"{"deploymentId":"dpl_1","workflowName":"workflow//./wf//hooked","input":{"__type":"Uint8Array","data":"AA=="},"executionContext":{}}"#;
    let until =
        runlog_world::format_iso_ms(runlog_world::Clock::system().now_ms() + 20 * 86_400_000);
    let hook = format!(
        r#"{{"token":"tok-retained","metadata":{{"__type":"Uint8Array","data":"AA=="}},"tokenRetentionUntil":"{until}"}}"#
    );
    let out = r#"{"output":{"__type":"Uint8Array","data":"AQID"}}"#;
    let steps = [
        (EventType::RunCreated, None, Some(created)),
        (EventType::RunStarted, None, None),
        (EventType::HookCreated, Some("hook_1"), Some(hook.as_str())),
        (EventType::RunCompleted, None, Some(out)),
    ];
    for (ty, corr, data) in steps {
        let mut r = request(ty, data);
        if let Some(c) = corr {
            r = r.correlation_id(c);
        }
        w.create_event(Some(&run), r, &params)
            .unwrap_or_else(|e| panic!("{ty:?}: {e}"));
    }
    run
}
