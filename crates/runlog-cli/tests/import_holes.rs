//! Issue 11 §8: a world-local slot run whose slots skip a number (1, 2, 4) is imported (its
//! events are real), the missing slots are recorded on the run, the import names run and
//! slots and exits 1, and `runlog audit` reports them as `missing_slots`.
//!
//! The fixture holds no slot run, so the source is a real fixture run whose files are renamed
//! to slot ids 1..=6 in time order (the file format the source store writes for slot runs),
//! with one slot file then deleted.

mod cli_support;

use std::fs;
use std::path::{Path, PathBuf};

use cli_support::*;
use runlog::{Config, RunId, Store};
use serde_json::{Value, json};

const HOLES_RUN: &str = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
const WHOLE_RUN: &str = "wrun_01M8N4BRV2KFM4M7AG01H68PJ8";

fn slot_id(slot: u128) -> String {
    format!("evnt_{slot:026}")
}

/// Copies `run`'s fixture events into `<src>/events` renamed to slot ids 1, 2, … in
/// (createdAt, eventId) order; returns the rewritten events in slot order.
fn copy_as_slot_run(src: &Path, run: &str) -> Vec<Value> {
    let mut events: Vec<Value> = fs::read_dir(fixture_dir().join("events"))
        .expect("list fixture")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.starts_with(run) && name.ends_with(".json")
        })
        .map(|p| serde_json::from_slice(&fs::read(p).expect("read")).expect("json"))
        .collect();
    events.sort_by_key(|e| (e["createdAt"].to_string(), e["eventId"].to_string()));
    for (i, event) in events.iter_mut().enumerate() {
        event["eventId"] = json!(slot_id(i as u128 + 1));
        write_event(src, run, event);
    }
    events
}

fn write_event(src: &Path, run: &str, event: &Value) {
    let id = event["eventId"].as_str().expect("eventId");
    let path = src.join("events").join(format!("{run}-{id}.json"));
    fs::write(path, serde_json::to_vec_pretty(event).expect("json")).expect("write");
}

fn slot_file(src: &Path, run: &str, slot: u128) -> PathBuf {
    src.join("events")
        .join(format!("{run}-{}.json", slot_id(slot)))
}

/// A source with a slot run lacking slot 3 (of 6) and an intact slot run.
fn source_with_a_hole(tmp: &Path) -> (PathBuf, Vec<Value>) {
    let src = tmp.join("src");
    fs::create_dir_all(src.join("events")).expect("mkdir");
    let mut events = copy_as_slot_run(&src, HOLES_RUN);
    copy_as_slot_run(&src, WHOLE_RUN);
    fs::remove_file(slot_file(&src, HOLES_RUN, 3)).expect("delete slot 3");
    events.remove(2);
    (src, events)
}

fn stamp(store: &Path, run: &str) -> Value {
    let store = Store::open(store, Config::default()).expect("open store");
    let meta = store
        .run_meta(&RunId::new(run).expect("run id"))
        .expect("meta");
    serde_json::from_slice(&meta).expect("stamp is JSON")
}

#[test]
fn a_slot_run_with_a_hole_is_imported_recorded_reported_and_audited() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (src, kept) = source_with_a_hole(tmp.path());
    let store = tmp.path().join("store");

    let out = import(&store, &src);
    assert_eq!(code(&out), 1, "the hole is reported: {}", stdout(&out));
    let report = stdout(&out);
    assert!(
        report.contains(&format!("run {HOLES_RUN}: the source lacks 1 slot(s): 3 ")),
        "{report}"
    );
    assert!(!report.contains(&format!("run {WHOLE_RUN}: the source lacks")));
    assert!(report.contains("imported 2 of 2 runs"), "{report}");

    // The data is real: every event that exists is imported, slot 4 at seq 3.
    let exported = export(&store, HOLES_RUN);
    assert_eq!(exported.len(), 5);
    assert_eq!(exported[2]["eventId"], slot_id(4));
    assert_eq!(exported[2]["seq"], 3);
    for (stored, source) in exported.iter().zip(&kept) {
        let mut stored = stored.clone();
        stored.as_object_mut().expect("object").remove("seq");
        assert_eq!(&stored, source);
    }

    // Recorded on the run.
    let recorded = stamp(&store, HOLES_RUN);
    assert_eq!(recorded["order"], "slot");
    assert_eq!(recorded["missing_slots"], json!([3]));
    assert_eq!(recorded["missing_slot_count"], 1);
    assert!(stamp(&store, WHOLE_RUN).get("missing_slots").is_none());

    // The audit reports it, with the seq where the source skips.
    let audit = runlog(&store, &["audit", "--json"]);
    assert_eq!(code(&audit), 1);
    let holes: Vec<Value> = json_lines(&audit)
        .into_iter()
        .filter(|f| f["class"] == "missing_slots")
        .collect();
    assert_eq!(holes.len(), 1, "{}", stdout(&audit));
    assert_eq!(holes[0]["run"], HOLES_RUN);
    assert_eq!(holes[0]["seqs"], json!([3]));
    assert!(
        holes[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("lacked 1 slot(s): 3;")),
        "{}",
        holes[0]
    );

    // Importing again appends nothing and still reports the hole.
    let again = runlog(&store, &["import", src.to_str().expect("utf-8"), "--json"]);
    assert_eq!(code(&again), 1);
    let line = json_lines(&again)
        .into_iter()
        .find(|l| l["run"] == HOLES_RUN)
        .expect("run line");
    assert_eq!(line["result"], "unchanged");
    assert_eq!(line["missing_slots"], json!([3]));
    assert_eq!(line["missing_slot_count"], 1);
}

#[test]
fn a_vast_hole_is_counted_not_enumerated_and_its_list_is_capped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("events")).expect("mkdir");
    let events = copy_as_slot_run(&src, HOLES_RUN);
    // Slot 2 becomes slot 10^25: slots 1, 3..=6, 10^25 remain; 2 and 7..10^25 are missing
    // (10^25 - 6 in all), the first 32 of them listed.
    let far = 10u128.pow(25);
    fs::remove_file(slot_file(&src, HOLES_RUN, 2)).expect("remove");
    let mut moved = events[1].clone();
    moved["eventId"] = json!(slot_id(far));
    write_event(&src, HOLES_RUN, &moved);

    let store = tmp.path().join("store");
    let out = runlog(&store, &["import", src.to_str().expect("utf-8"), "--json"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let count = (far - 2 - 4).to_string();
    // Numbers past u64 are compared as text (serde_json would read them as floats).
    assert!(
        stdout(&out).contains(&format!("\"missing_slot_count\":{count}")),
        "{}",
        stdout(&out)
    );
    let recorded = stamp(&store, HOLES_RUN);
    let listed = recorded["missing_slots"].as_array().expect("list");
    assert_eq!(listed.len(), 32, "capped");
    assert_eq!(listed[0], 2);
    let audit = runlog(&store, &["audit", "--json"]);
    let finding = json_lines(&audit)
        .into_iter()
        .find(|f| f["class"] == "missing_slots")
        .expect("finding");
    assert_eq!(
        finding["seqs"],
        json!([2, 6]),
        "slot 3 (seq 2) follows the first gap, slot 10^25 (seq 6) the second: {finding}"
    );
}
