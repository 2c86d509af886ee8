//! The world-local reader beyond the flat corpus: the run-scoped layout, tags, slot ids,
//! duplicate copies, malformed files, and re-import after a partial import.

mod cli_support;

use std::fs;
use std::path::{Path, PathBuf};

use cli_support::*;
use runlog::{Config, Store};
use runlog_cli::import::{BatchLimits, OrderScheme, discover, import_run, load_run};
use serde_json::{Value, json};

const PLAIN_RUN: &str = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
const WAIT_RUN: &str = "wrun_01M8N4BRV2KFM4M7AG01H68PJ8";

/// A source directory holding only the event files of `runs` (from the fixture).
fn source_with(tmp: &Path, runs: &[&str]) -> PathBuf {
    let src = tmp.join("src");
    fs::create_dir_all(src.join("events")).expect("mkdir");
    for entry in fs::read_dir(fixture_dir().join("events")).expect("list") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string();
        if runs.iter().any(|r| name.starts_with(r)) && name.ends_with(".json") {
            fs::copy(&path, src.join("events").join(&name)).expect("copy");
        }
    }
    src
}

fn event_files(src: &Path, run: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(src.join("events"))
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(run))
        })
        .collect();
    files.sort();
    files
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).expect("read")).expect("json")
}

fn without_seq(mut events: Vec<Value>) -> Vec<Value> {
    for e in &mut events {
        e.as_object_mut().expect("object").remove("seq");
    }
    events
}

#[test]
fn the_run_scoped_layout_imports_exactly_like_the_flat_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scoped = tmp.path().join("scoped");
    copy_dir(&fixture_dir(), &scoped);
    let events = scoped.join("events");
    for entry in fs::read_dir(&events).expect("list") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_string();
        let run = &name[..name.find("-evnt_").expect("event file")];
        fs::create_dir_all(events.join(run)).expect("mkdir");
        fs::rename(&path, events.join(run).join(&name)).expect("move");
    }
    let (flat_store, scoped_store) = (
        tmp.path().join("flat.store"),
        tmp.path().join("scoped.store"),
    );
    let flat_out = import(&flat_store, &fixture_dir());
    let scoped_out = import(&scoped_store, &scoped);
    assert_eq!(
        (code(&flat_out), code(&scoped_out)),
        (1, 1),
        "the temp file, in both layouts"
    );
    assert!(stdout(&scoped_out).contains(&format!(
        "events/{TEMP_FILE_RUN}/{TEMP_FILE}: leftover temp file"
    )));
    let flat = stdout(&runlog(&flat_store, &["export"]));
    assert_eq!(flat.lines().count(), 119);
    assert_eq!(stdout(&runlog(&scoped_store, &["export"])), flat);
}

#[test]
fn tagged_files_are_imported_only_with_their_tag() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source_with(tmp.path(), &[PLAIN_RUN, WAIT_RUN]);
    for path in event_files(&src, PLAIN_RUN) {
        let tagged = path
            .to_str()
            .expect("utf-8")
            .replace(".json", ".vitest-0.json");
        fs::rename(&path, tagged).expect("tag");
    }

    let untagged = tmp.path().join("untagged.store");
    let out = import(&untagged, &src);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("skipped 6 files tagged for another world (see --tag)"));
    assert_eq!(run_names(&untagged), [WAIT_RUN]);

    let other = tmp.path().join("other.store");
    let out = runlog(
        &other,
        &["import", src.to_str().expect("utf-8"), "--tag", "other"],
    );
    assert_eq!(code(&out), 0);
    assert_eq!(run_names(&other), [WAIT_RUN]);

    let tagged = tmp.path().join("tagged.store");
    let out = runlog(
        &tagged,
        &["import", src.to_str().expect("utf-8"), "--tag", "vitest-0"],
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(run_names(&tagged), [PLAIN_RUN, WAIT_RUN]);
    assert_eq!(export(&tagged, PLAIN_RUN).len(), 6);
}

/// Rewrites `run`'s fixture events with slot ids, numbering them in *reverse* createdAt
/// order, so slot order and time order disagree.
fn make_slot_run(src: &Path, run: &str) -> Vec<Value> {
    let mut events: Vec<(PathBuf, Value)> = event_files(src, run)
        .into_iter()
        .map(|p| {
            let v = read_json(&p);
            (p, v)
        })
        .collect();
    events.sort_by_key(|(_, v)| {
        std::cmp::Reverse(v["createdAt"].as_str().expect("createdAt").to_string())
    });
    let mut rewritten = Vec::new();
    for (slot, (path, mut value)) in events.into_iter().enumerate() {
        let id = format!("evnt_{:026}", slot + 1);
        value["eventId"] = json!(id);
        value["specVersion"] = json!(6);
        fs::remove_file(&path).expect("remove");
        fs::write(
            src.join("events").join(format!("{run}-{id}.json")),
            serde_json::to_vec_pretty(&value).expect("json"),
        )
        .expect("write");
        rewritten.push(value);
    }
    rewritten
}

#[test]
fn slot_ids_are_ordered_by_slot_and_exported_as_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source_with(tmp.path(), &[PLAIN_RUN]);
    let by_slot = make_slot_run(&src, PLAIN_RUN);
    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    let exported = export(&store, PLAIN_RUN);
    assert_eq!(exported[0]["eventId"], "evnt_00000000000000000000000001");
    assert_eq!(
        exported[0]["eventType"], "run_completed",
        "slot 1 is the latest event by time"
    );
    assert_eq!(without_seq(exported), by_slot);

    let found = discover(&src, None).expect("discover");
    let files = &found.runs[PLAIN_RUN];
    let source = load_run(PLAIN_RUN, files, Config::default().payload_len_bytes_max).expect("load");
    assert_eq!(source.stamp.order, OrderScheme::Slot);
    assert_eq!(source.stamp.spec_version, Some(6));
    assert_eq!(
        source.events[0].event_id.map(|u| u.0),
        Some(1),
        "slot N is the ULID with value N"
    );
}

#[test]
fn a_run_mixing_slot_and_ulid_ids_fails_whole() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source_with(tmp.path(), &[PLAIN_RUN, WAIT_RUN]);
    let first = event_files(&src, PLAIN_RUN).remove(0);
    let mut value = read_json(&first);
    value["eventId"] = json!("evnt_00000000000000000000000001");
    fs::remove_file(&first).expect("remove");
    fs::write(
        src.join("events")
            .join(format!("{PLAIN_RUN}-evnt_00000000000000000000000001.json")),
        value.to_string(),
    )
    .expect("write");
    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("run mixes slot and ULID event ids"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains(&format!("(run {PLAIN_RUN} not imported)")));
    assert_eq!(run_names(&store), [WAIT_RUN]);
}

#[test]
fn identical_copies_import_once_and_conflicting_copies_fail_the_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source_with(tmp.path(), &[PLAIN_RUN]);
    let file = event_files(&src, PLAIN_RUN).remove(2);
    let name = file.file_name().expect("name").to_owned();
    fs::create_dir_all(src.join("events").join(PLAIN_RUN)).expect("mkdir");
    let copy = src.join("events").join(PLAIN_RUN).join(&name);
    fs::copy(&file, &copy).expect("copy");

    let store = tmp.path().join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("collapsed 1 identical duplicate event files (imported once)"));
    assert_eq!(export(&store, PLAIN_RUN).len(), 6);

    let mut value = read_json(&copy);
    value["eventData"] = json!({"changed": true});
    fs::write(&copy, value.to_string()).expect("write");
    let other = tmp.path().join("other.store");
    let out = import(&other, &src);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("but different content"),
        "{}",
        stdout(&out)
    );
}

/// (what is broken, how, the expected reason).
type MalformedCase = (&'static str, fn(&mut Value), &'static str);

#[test]
fn malformed_files_are_reported_with_the_reason() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cases: [MalformedCase; 7] = [
        (
            "unknown key",
            |v| {
                v["extra"] = json!(1);
            },
            "unknown key \"extra\"",
        ),
        (
            "run id",
            |v| {
                v["runId"] = json!("wrun_other");
            },
            "does not match the file name's run",
        ),
        (
            "event id",
            |v| {
                v["eventId"] = json!("evnt_01M8N4BFZHDQ44SDC6QMZD8ZQB");
            },
            "does not match the file name",
        ),
        (
            "time",
            |v| {
                v["createdAt"] = json!("2026-11-30 02:25:43");
            },
            "createdAt",
        ),
        (
            "kind",
            |v| {
                v["eventType"] = json!(7);
            },
            "eventType is not a string",
        ),
        (
            "missing",
            |v| {
                v.as_object_mut().expect("object").remove("eventType");
            },
            "eventType is missing",
        ),
        (
            "correlation",
            |v| {
                v["correlationId"] = json!(null);
            },
            "correlationId is not a string",
        ),
    ];
    for (i, (what, mutate, reason)) in cases.into_iter().enumerate() {
        let src = tmp.path().join(format!("case{i}"));
        fs::create_dir_all(src.join("events")).expect("mkdir");
        let name = format!("{PLAIN_RUN}-evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA.json");
        let mut value = read_json(&fixture_dir().join("events").join(&name));
        mutate(&mut value);
        fs::write(src.join("events").join(&name), value.to_string()).expect("write");
        let found = discover(&src, None).expect("discover");
        let problems = load_run(PLAIN_RUN, &found.runs[PLAIN_RUN], 1 << 20).expect_err(what);
        assert_eq!(problems.len(), 1, "{what}");
        assert!(
            problems[0].reason.contains(reason),
            "{what}: {}",
            problems[0].reason
        );
        assert!(problems[0].path.ends_with(&name));
    }
}

#[test]
fn re_import_completes_a_partially_imported_run_and_refuses_a_foreign_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source_with(tmp.path(), &[PLAIN_RUN, WAIT_RUN]);
    let store_dir = tmp.path().join("store");
    let store = Store::open(&store_dir, Config::default()).expect("open");
    let found = discover(&src, None).expect("discover");
    let mut plain = load_run(PLAIN_RUN, &found.runs[PLAIN_RUN], 1 << 20).expect("load");
    let all = plain.events.clone();
    plain.events.truncate(2);
    let mut progress = Vec::new();
    let done = import_run(
        &store,
        &plain,
        BatchLimits {
            events_max: 1,
            payload_bytes_max: 1,
        },
        &mut |n| progress.push(n),
    )
    .expect("import");
    assert_eq!(
        (done.created, done.appended, done.already_present),
        (true, 2, 0)
    );
    assert_eq!(progress, [0, 1, 1]);

    let foreign = load_run(WAIT_RUN, &found.runs[WAIT_RUN], 1 << 20).expect("load");
    let run = foreign.run.clone();
    store.create_run(&run).expect("create");
    drop(store);

    let out = runlog(
        &store_dir,
        &["import", src.to_str().expect("utf-8"), "--json"],
    );
    assert_eq!(code(&out), 1);
    let lines = json_lines(&out);
    assert_eq!(lines[0]["run"], PLAIN_RUN);
    assert_eq!(
        (
            lines[0]["result"].as_str(),
            lines[0]["appended"].as_u64(),
            lines[0]["already_present"].as_u64()
        ),
        (Some("extended"), Some(4), Some(2))
    );
    assert_eq!(lines[1]["result"], "failed");
    assert!(
        lines[1]["problems"][0]["reason"]
            .as_str()
            .expect("reason")
            .contains("conflicts with the store: stored stamp")
    );
    assert_eq!(export(&store_dir, PLAIN_RUN).len(), all.len());
    assert_eq!(
        export(&store_dir, WAIT_RUN).len(),
        0,
        "the foreign run is untouched"
    );

    let grown = runlog(&store_dir, &["append", PLAIN_RUN, "--kind", "attr_set"]);
    assert_eq!(stdout(&grown).trim(), "7");
    let again = json_lines(&runlog(
        &store_dir,
        &["import", src.to_str().expect("utf-8"), "--json"],
    ));
    assert_eq!(
        (
            again[0]["result"].as_str(),
            again[0]["already_present"].as_u64()
        ),
        (Some("unchanged"), Some(6)),
        "a log that grew past its source still holds the source as its prefix"
    );
}
