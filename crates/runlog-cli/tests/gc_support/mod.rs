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
use runlog_world::{CreateEventParams, EventRequest, EventType, Streams, World, WorldConfig};

/// Every log of a store: id → (metadata, events).
pub type Logs = BTreeMap<String, (Vec<u8>, Vec<Event>)>;

/// Every log of the store at `dir`, read-only.
pub fn snapshot(dir: &Path) -> Logs {
    let store = Store::open_read_only(dir, Config::default()).expect("open read-only");
    let page = RunLog::list_runs(&store, None, 10_000).expect("list");
    assert!(page.damaged.is_empty(), "{:?}", page.damaged);
    page.runs
        .iter()
        .map(|info| {
            let meta = RunLog::run_meta(&store, &info.run).expect("meta");
            let events = store.read(&info.run, 0, 100_000).expect("read").events;
            (info.run.to_string(), (meta, events))
        })
        .collect()
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
    let store = Arc::new(Store::open(dir, Config::default()).expect("open"));
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
