//! `runlog import --check-entities`: the runs, steps and live hooks runlog-world computes from
//! the imported logs against the source store's own `runs/`, `steps/`, `hooks/` files. Every
//! run without a recorded anomaly equals; each differing run is one documented class.

mod cli_support;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use cli_support::{
    TEMP_FILE, TEMP_FILE_RUN, THIRTEEN_TERMINALS_RUN, code, copy_corpus, copy_dir, fixture_dir,
    json_lines, runlog, stderr, stdout,
};
use serde_json::{Value, json};

/// The run whose file was rewritten by a terminal write that is not in its log.
const REWRITTEN_RUN: &str = "wrun_01M8N4C12X6NPQN7EKS11B9DF1";
/// The run whose file says running without a run_started in its log.
const RUNNING_RUN: &str = "wrun_01M8N4C2DGSWHERV3FE801SFQV";

fn check(store: &Path, src: &Path) -> (i32, Vec<Value>) {
    let out = runlog(
        store,
        &[
            "import",
            src.to_str().unwrap(),
            "--check-entities",
            "--json",
        ],
    );
    (code(&out), json_lines(&out))
}

fn of<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["check"] == kind).collect()
}

fn classes(lines: &[Value]) -> BTreeMap<String, String> {
    of(lines, "run")
        .iter()
        .map(|l| {
            (
                l["run"].as_str().unwrap().to_string(),
                l["class"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn difference<'a>(lines: &'a [Value], run: &str, field: &str) -> &'a Value {
    of(lines, "difference")
        .into_iter()
        .find(|d| d["run"] == run && d["entity"] == "run" && d["field"] == field)
        .unwrap_or_else(|| panic!("{run} {field} differs"))
}

#[test]
fn the_fixture_differs_in_exactly_its_two_recorded_anomalies() {
    let tmp = tempfile::tempdir().unwrap();
    let (rc, lines) = check(&tmp.path().join("store"), &fixture_dir());
    assert_eq!(rc, 1);
    assert_eq!(
        classes(&lines),
        BTreeMap::from([
            (
                THIRTEEN_TERMINALS_RUN.to_string(),
                "extra-terminal-events".to_string()
            ),
            (
                TEMP_FILE_RUN.to_string(),
                "terminal-in-temp-file".to_string()
            ),
        ])
    );
    let summary = of(&lines, "summary")[0];
    // The fixture ships runs/ only: steps and hooks are not compared.
    assert_eq!(summary["compared"], json!(["runs"]));
    assert_eq!(summary["runs"], 7);
    assert_eq!(summary["differing_runs"], 2);
    assert_eq!(
        summary["classes"],
        json!({"extra-terminal-events": 1, "terminal-in-temp-file": 1})
    );
    // The thirteen run_completed: ours is the first, the file the last write.
    let d = difference(&lines, THIRTEEN_TERMINALS_RUN, "completedAt");
    assert_eq!(d["ours"], "2026-11-30T02:25:45.278Z");
    assert_eq!(d["theirs"], "2026-11-30T02:25:45.653Z");
    // The temp-file run_completed: the file has its output, the log does not.
    let d = difference(&lines, TEMP_FILE_RUN, "status");
    assert_eq!(
        (d["ours"].clone(), d["theirs"].clone()),
        (json!("running"), json!("completed"))
    );
    let d = difference(&lines, TEMP_FILE_RUN, "output");
    assert_eq!(d["ours"], Value::Null, "absent on our side: {d}");
    assert_eq!(
        d["theirs"],
        json!({"__type": "Uint8Array", "data": "ZGV2bFsiZG9uZSJd"})
    );
    // Only those two runs' run entities differ.
    for d in of(&lines, "difference") {
        assert_eq!(d["entity"], "run", "{d}");
    }
}

#[test]
fn the_table_names_run_entity_field_ours_theirs_and_the_classes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = runlog(
        &tmp.path().join("store"),
        &[
            "import",
            fixture_dir().to_str().unwrap(),
            "--check-entities",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("check-entities (runs): compared 7 runs, 0 steps, 0 live hooks with the source's files: 2 runs differ"),
        "{text}"
    );
    let header = text
        .lines()
        .find(|l| l.starts_with("RUN") && l.contains("THEIRS"))
        .expect("difference table");
    assert!(header.contains("ENTITY") && header.contains("FIELD") && header.contains("OURS"));
    let row = text
        .lines()
        .find(|l| l.starts_with(TEMP_FILE_RUN) && l.contains(" status "))
        .expect("status row");
    assert!(
        row.contains("\"running\"") && row.contains("\"completed\""),
        "{row}"
    );
    assert!(
        text.contains("classes:\n  extra-terminal-events 1\n"),
        "{text}"
    );
    assert!(text.contains("  terminal-in-temp-file 1\n"), "{text}");
}

#[test]
fn the_corpus_differs_in_four_runs_of_four_classes_steps_and_hooks_equal() {
    let tmp = tempfile::tempdir().unwrap();
    let src = copy_corpus(tmp.path());
    let (rc, lines) = check(&tmp.path().join("store"), &src);
    assert_eq!(rc, 1);
    assert_eq!(
        classes(&lines),
        BTreeMap::from([
            (
                THIRTEEN_TERMINALS_RUN.to_string(),
                "extra-terminal-events".to_string()
            ),
            (REWRITTEN_RUN.to_string(), "terminal-not-in-log".to_string()),
            (RUNNING_RUN.to_string(), "status-without-event".to_string()),
            (
                TEMP_FILE_RUN.to_string(),
                "terminal-in-temp-file".to_string()
            ),
        ])
    );
    let summary = of(&lines, "summary")[0];
    assert_eq!(summary["compared"], json!(["runs", "steps", "hooks"]));
    assert_eq!(
        (
            summary["runs"].clone(),
            summary["steps"].clone(),
            summary["hooks"].clone()
        ),
        (json!(30), json!(94), json!(2))
    );
    assert_eq!(
        summary["classes"],
        json!({"extra-terminal-events": 1, "terminal-in-temp-file": 1,
               "terminal-not-in-log": 1, "status-without-event": 1})
    );
    for d in of(&lines, "difference") {
        assert_eq!(d["entity"], "run", "steps and hooks equal everywhere: {d}");
    }
    assert_eq!(of(&lines, "difference").len(), 11);
    let d = difference(&lines, REWRITTEN_RUN, "completedAt");
    assert_eq!(d["ours"], "2026-11-30T02:26:01.845Z");
    assert_eq!(d["theirs"], "2026-11-30T02:26:01.884Z");
    let d = difference(&lines, RUNNING_RUN, "status");
    assert_eq!(
        (d["ours"].clone(), d["theirs"].clone()),
        (json!("pending"), json!("running"))
    );
    let d = difference(&lines, RUNNING_RUN, "startedAt");
    assert_eq!(d["ours"], Value::Null);
    assert_eq!(d["theirs"], "2026-11-30T02:26:02.821Z");
}

/// The fixture without its two anomalous runs (their events, their temp file, their run
/// files).
fn clean_fixture(tmp: &Path) -> std::path::PathBuf {
    let src = tmp.join("clean");
    copy_dir(&fixture_dir(), &src);
    for dir in ["events", "runs"] {
        for entry in fs::read_dir(src.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap();
            if name.starts_with(THIRTEEN_TERMINALS_RUN) || name.starts_with(TEMP_FILE_RUN) {
                fs::remove_file(&path).unwrap();
            }
        }
    }
    assert!(!src.join("events").join(TEMP_FILE).exists());
    src
}

#[test]
fn runs_without_anomalies_equal_and_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let src = clean_fixture(tmp.path());
    let (rc, lines) = check(&tmp.path().join("store"), &src);
    assert_eq!(rc, 0, "{lines:?}");
    let summary = of(&lines, "summary")[0];
    assert_eq!(summary["runs"], 5);
    assert_eq!(summary["differing_runs"], 0);
    assert!(of(&lines, "difference").is_empty());
}

/// Rewrites `src/runs/<run>.json` with `change` applied to its members.
fn rewrite_run_file(src: &Path, run: &str, change: impl FnOnce(&mut Value)) {
    let path = src.join("runs").join(format!("{run}.json"));
    let mut v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    change(&mut v);
    fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// Removes the event files of `run` in `src/events` but those of the `keep` event types.
fn keep_only_events(src: &Path, run: &str, keep: &[&str]) {
    for entry in fs::read_dir(src.join("events")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap();
        if !name.starts_with(run) {
            continue;
        }
        let v: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        if !keep.contains(&v["eventType"].as_str().unwrap()) {
            fs::remove_file(&path).unwrap();
        }
    }
}

/// The classes the whole corpus shows once each, on runs built here from the clean fixture:
/// a run file rewritten by a second terminal write (`terminal-not-in-log`), a run file saying
/// `running` over a log without `run_started` (`status-without-event`), and as the boundary of
/// the first, a terminal run file over a log without any terminal event (`unexplained`).
#[test]
fn terminal_not_in_log_and_status_without_event_on_runs_built_here() {
    let tmp = tempfile::tempdir().unwrap();
    let src = clean_fixture(tmp.path());
    let rewritten = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    rewrite_run_file(&src, rewritten, |v| {
        v["completedAt"] = json!("2026-11-30T02:25:44.130Z");
        v["updatedAt"] = json!("2026-11-30T02:25:44.130Z");
        v["output"] = json!({"__type": "Uint8Array", "data": "ZGV2bFs0XQ=="});
    });
    let running = "wrun_01M8N4BRV2KFM4M7AG01H68PJ8";
    keep_only_events(&src, running, &["run_created"]);
    rewrite_run_file(&src, running, |v| {
        let m = v.as_object_mut().unwrap();
        m.remove("completedAt");
        m.remove("output");
        m.insert("status".into(), json!("running"));
        m.insert("startedAt".into(), json!("2026-11-30T02:25:53.016Z"));
        m.insert("updatedAt".into(), json!("2026-11-30T02:25:53.016Z"));
    });
    let no_terminal = "wrun_01M8N4BKWEAJKFB8ZQTFZ5ZVSN";
    keep_only_events(&src, no_terminal, &["run_created", "run_started"]);

    let (rc, lines) = check(&tmp.path().join("store"), &src);
    assert_eq!(rc, 1);
    assert_eq!(
        classes(&lines),
        BTreeMap::from([
            (rewritten.to_string(), "terminal-not-in-log".to_string()),
            (running.to_string(), "status-without-event".to_string()),
            (no_terminal.to_string(), "unexplained".to_string()),
        ])
    );
    let summary = of(&lines, "summary")[0];
    assert_eq!(summary["runs"], 5);
    assert_eq!(summary["differing_runs"], 3);
    // Ours is the log's one run_completed; theirs the later write.
    let d = difference(&lines, rewritten, "completedAt");
    assert_eq!(d["ours"], "2026-11-30T02:25:44.090Z");
    assert_eq!(d["theirs"], "2026-11-30T02:25:44.130Z");
    let d = difference(&lines, rewritten, "output");
    assert_eq!(
        d["ours"],
        json!({"__type": "Uint8Array", "data": "ZGV2bFszXQ=="})
    );
    // Ours is what run_created alone makes: pending, never started.
    let d = difference(&lines, running, "status");
    assert_eq!(
        (d["ours"].clone(), d["theirs"].clone()),
        (json!("pending"), json!("running"))
    );
    let d = difference(&lines, running, "startedAt");
    assert_eq!(d["ours"], Value::Null);
    assert_eq!(d["theirs"], "2026-11-30T02:25:53.016Z");
    let d = difference(&lines, no_terminal, "status");
    assert_eq!(d["ours"], "running");
}

#[test]
fn normalizations_are_representation_only_and_a_real_change_is_unexplained() {
    let tmp = tempfile::tempdir().unwrap();
    let src = clean_fixture(tmp.path());
    let run = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    let path = src.join("runs").join(format!("{run}.json"));
    let original: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();

    // null for an optional member equals its absence.
    let mut v = original.clone();
    v["errorCode"] = Value::Null;
    v["expiredAt"] = Value::Null;
    fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let (rc, lines) = check(&tmp.path().join("s1"), &src);
    assert_eq!(rc, 0, "{lines:?}");

    // A changed value, and null for a required member, are differences; no evidence in the
    // log explains them.
    let mut v = original.clone();
    v["workflowName"] = Value::Null;
    v["attributes"] = json!({"k": "v"});
    fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let (rc, lines) = check(&tmp.path().join("s2"), &src);
    assert_eq!(rc, 1);
    assert_eq!(
        classes(&lines),
        BTreeMap::from([(run.to_string(), "unexplained".to_string())])
    );
    let d = difference(&lines, run, "workflowName");
    assert_eq!(d["ours"], "workflow//./workflows/addition//addition");
    assert_eq!(d["theirs"], Value::Null);
    let d = difference(&lines, run, "attributes");
    assert_eq!(
        (d["ours"].clone(), d["theirs"].clone()),
        (json!({}), json!({"k": "v"}))
    );
    assert_eq!(of(&lines, "difference").len(), 2);
}

#[test]
fn a_step_file_that_disagrees_with_the_log_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let src = clean_fixture(tmp.path());
    let run = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    // The fixture has no steps/: a source with a step file of its own for a step the log
    // never created is a difference (the step exists only on their side).
    let steps = src.join("steps");
    fs::create_dir_all(&steps).unwrap();
    fs::write(
        steps.join(format!("{run}-step_01M8N4BFZ5229RX1D7PQRPJZ99.json")),
        serde_json::to_vec(
            &json!({"runId": run, "stepId": "step_01M8N4BFZ5229RX1D7PQRPJZ99",
            "stepName": "x", "status": "completed", "attempt": 1,
            "createdAt": "2026-11-30T02:25:43.921Z", "updatedAt": "2026-11-30T02:25:43.921Z"}),
        )
        .unwrap(),
    )
    .unwrap();
    let (rc, lines) = check(&tmp.path().join("store"), &src);
    assert_eq!(rc, 1);
    let diffs = of(&lines, "difference");
    let step = diffs
        .iter()
        .find(|d| d["entity"] == "step step_01M8N4BFZ5229RX1D7PQRPJZ99")
        .expect("their step reported");
    assert_eq!(step["field"], "(exists)");
    assert_eq!(
        (step["ours"].clone(), step["theirs"].clone()),
        (json!(false), json!(true))
    );
    assert_eq!(classes(&lines)[run], "unexplained");
}
