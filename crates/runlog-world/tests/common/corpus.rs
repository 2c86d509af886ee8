//! The corpus of real world-local runs (`tests/fixtures/world-local-5.0.0-beta.29/`, and
//! its seven-run subset `tests/fixtures/world-local/`) as runlog events, in that store's
//! order (`createdAt`, `eventId`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runlog_world::parse_iso_ms;
use serde_json::Value;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A data directory's runs, each as its events in the store's order.
pub fn runs_of(dir: &Path) -> BTreeMap<String, Vec<runlog::Event>> {
    runs_with_spec(dir)
        .into_iter()
        .map(|(run, (_, events))| (run, events))
        .collect()
}

/// [`runs_of`], each run with the `specVersion` of its first event.
pub fn runs_with_spec(dir: &Path) -> BTreeMap<String, (Option<u32>, Vec<runlog::Event>)> {
    let mut runs: BTreeMap<String, Vec<(u64, String, Value)>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("events")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue; // a leftover *.json.tmp.* write the store never renamed into place
        }
        let v = read_json(&path);
        let created = parse_iso_ms(v["createdAt"].as_str().unwrap()).unwrap();
        let id = v["eventId"].as_str().unwrap().to_string();
        runs.entry(v["runId"].as_str().unwrap().to_string())
            .or_default()
            .push((created, id, v));
    }
    runs.into_iter()
        .map(|(run, mut events)| {
            events.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            let spec = events
                .first()
                .and_then(|(_, _, v)| v["specVersion"].as_u64())
                .and_then(|v| u32::try_from(v).ok());
            let events = events
                .into_iter()
                .enumerate()
                .map(|(i, (created, id, v))| runlog::Event {
                    seq: i as u64 + 1,
                    event_id: ulid::Ulid::from_string(id.trim_start_matches("evnt_")).unwrap(),
                    created_at_ms: created,
                    kind: v["eventType"].as_str().unwrap().into(),
                    correlation_id: v["correlationId"].as_str().map(Into::into),
                    key: None,
                    payload: match v.get("eventData") {
                        Some(d) => serde_json::to_vec(d).unwrap().into(),
                        None => Default::default(),
                    },
                })
                .collect();
            (run, (spec, events))
        })
        .collect()
}
