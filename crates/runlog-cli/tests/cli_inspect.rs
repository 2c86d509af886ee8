//! `runlog inspect runs|steps|hooks|events|streams`: the World's entities computed from the
//! imported logs of real world-local runs (the seven-run fixture and the whole corpus),
//! in tables and as JSON lines with the SDK schemas' field names.

mod cli_support;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use cli_support::{
    TEMP_FILE_RUN, THIRTEEN_TERMINALS_RUN, code, copy_corpus, fixture_dir, import, json_lines,
    runlog, source_runs, stderr, stdout,
};
use serde_json::Value;

fn imported(tmp: &Path, src: &Path) -> std::path::PathBuf {
    let store = tmp.join("store");
    let out = import(&store, src);
    assert_eq!(code(&out), 1, "the temp file is reported: {}", stderr(&out));
    store
}

/// Every file under `dir` with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(tree(&path));
        } else {
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
    }
    out
}

fn ok(store: &Path, args: &[&str]) -> std::process::Output {
    let out = runlog(store, args);
    assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    out
}

fn run_line<'a>(runs: &'a [Value], run: &str) -> &'a Value {
    runs.iter()
        .find(|r| r["runId"] == run)
        .unwrap_or_else(|| panic!("{run} listed"))
}

#[test]
fn runs_of_the_fixture_are_the_worlds_runs_with_the_sdk_field_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = imported(tmp.path(), &fixture_dir());
    let runs = json_lines(&ok(&store, &["inspect", "runs", "--json"]));
    assert_eq!(runs.len(), 7);
    let ids: Vec<&str> = runs.iter().map(|r| r["runId"].as_str().unwrap()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "oldest first (run id order)");

    // Thirteen run_completed events: the run is what the first one made it.
    let r = run_line(&runs, THIRTEEN_TERMINALS_RUN);
    assert_eq!(r["status"], "completed");
    assert_eq!(r["workflowName"], "workflow//./workflows/noop//brokenWf");
    assert_eq!(r["deploymentId"], "dpl_local@5.0.0-beta.29");
    assert_eq!(r["completedAt"], "2026-11-30T02:25:45.278Z");
    assert_eq!(r["specVersion"], 5);
    // The run whose run_completed never left its temp file is still running.
    let r = run_line(&runs, TEMP_FILE_RUN);
    assert_eq!(r["status"], "running");
    assert!(r.get("completedAt").is_none(), "{r}");
    let r = run_line(&runs, "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG");
    assert_eq!(
        r["workflowName"],
        "workflow//./workflows/addition//addition"
    );
    assert_eq!(
        r["output"],
        serde_json::json!({"__type": "Uint8Array", "data": "ZGV2bFszXQ=="})
    );

    let table = stdout(&ok(&store, &["inspect", "runs"]));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 8, "{table}");
    assert!(lines[0].starts_with("RUN") && lines[0].contains("WORKFLOW"));
    let status = lines[0].find("STATUS").unwrap();
    let row = lines.iter().find(|l| l.starts_with(TEMP_FILE_RUN)).unwrap();
    assert_eq!(row.find("running"), Some(status), "aligned: {table}");
}

#[test]
fn steps_events_and_hooks_of_a_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = imported(tmp.path(), &src);
    let source = source_runs(&src);

    let steps = json_lines(&ok(
        &store,
        &["inspect", "steps", THIRTEEN_TERMINALS_RUN, "--json"],
    ));
    let step_ids: std::collections::BTreeSet<&str> = source[THIRTEEN_TERMINALS_RUN]
        .iter()
        .filter(|e| e["eventType"].as_str().unwrap().starts_with("step_"))
        .map(|e| e["correlationId"].as_str().unwrap())
        .collect();
    assert_eq!(steps.len(), step_ids.len());
    assert!(!steps.is_empty());
    for s in &steps {
        assert_eq!(s["runId"], THIRTEEN_TERMINALS_RUN);
        assert!(step_ids.contains(s["stepId"].as_str().unwrap()), "{s}");
        assert_eq!(s["stepName"], "step//./workflows/noop//noop");
        assert_eq!(s["status"], "completed");
        assert_eq!(s["attempt"], 1);
    }
    let a4 = steps
        .iter()
        .find(|s| s["stepId"] == "step_01M8N4BGVC4E5GE9N01QR2A8A4")
        .expect("step A4");
    assert_eq!(a4["startedAt"], "2026-11-30T02:25:44.946Z");
    assert_eq!(a4["completedAt"], "2026-11-30T02:25:44.962Z");
    let table = stdout(&ok(&store, &["inspect", "steps", THIRTEEN_TERMINALS_RUN]));
    assert_eq!(table.lines().count(), steps.len() + 1, "{table}");

    // Events: every event of the log, in seq order, in the SDK's Event shape.
    for (run, events) in &source {
        let got = json_lines(&ok(&store, &["inspect", "events", run, "--json"]));
        assert_eq!(got.len(), events.len(), "{run}");
        for (g, want) in got.iter().zip(events) {
            assert_eq!(g["eventId"], want["eventId"], "{run}");
            assert_eq!(g["eventType"], want["eventType"], "{run}");
            assert_eq!(g["runId"], want["runId"]);
            assert_eq!(g.get("eventData"), want.get("eventData"), "{run}");
            assert_eq!(g["createdAt"], want["createdAt"]);
        }
    }
    let table = stdout(&ok(&store, &["inspect", "events", THIRTEEN_TERMINALS_RUN]));
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains(" run_completed "))
            .count(),
        13,
        "{table}"
    );

    // Hooks: the live ones, of one run or of all.
    let all = json_lines(&ok(&store, &["inspect", "hooks", "--json"]));
    let hook_runs: Vec<&str> = all.iter().map(|h| h["runId"].as_str().unwrap()).collect();
    assert_eq!(
        hook_runs,
        [
            "wrun_01M8N4BJ9D6ZB68RC8VT3XA12E",
            "wrun_01M8N4C2DGSWHERV3FE801SFQV"
        ]
    );
    assert_eq!(all[1]["hookId"], "hook_01M8N4C2DGVEA0Y7MEVTTRW9BG");
    assert_eq!(all[1]["token"], "mx2nc9eb");
    assert_eq!(all[0]["hookId"], "hook_01M8N4BJ9DMTCRDZ900RTEX1XP");
    assert_eq!(all[0]["token"], "mx2nbwo1");
    assert_eq!(all[0]["ownerId"], "local-owner");
    assert_eq!(all[0]["isWebhook"], false);
    let one = json_lines(&ok(
        &store,
        &[
            "inspect",
            "hooks",
            "wrun_01M8N4BJ9D6ZB68RC8VT3XA12E",
            "--json",
        ],
    ));
    assert_eq!(one, all[..1]);
    let none = json_lines(&ok(
        &store,
        &["inspect", "hooks", THIRTEEN_TERMINALS_RUN, "--json"],
    ));
    assert!(none.is_empty());
}

#[test]
fn streams_of_a_run_by_name_with_chunk_counts_and_done() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = imported(tmp.path(), &src);
    let closed = json_lines(&ok(
        &store,
        &[
            "inspect",
            "streams",
            "wrun_01M8N4BQX3533WHD0GK89WDY54",
            "--json",
        ],
    ));
    assert_eq!(
        closed,
        [
            serde_json::json!({"runId": "wrun_01M8N4BQX3533WHD0GK89WDY54",
            "name": "strm_01M8N4BQX3533WHD0GK89WDY54_user", "chunks": 2, "tailIndex": 1,
            "done": true})
        ]
    );
    let open = stdout(&ok(
        &store,
        &["inspect", "streams", "wrun_01M8N4BJ9D6ZB68RC8VT3XA12E"],
    ));
    let lines: Vec<&str> = open.lines().collect();
    assert_eq!(lines.len(), 2, "{open}");
    assert!(lines[0].starts_with("STREAM"));
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells,
        ["strm_01M8N4BJ9D6ZB68RC8VT3XA12E_user", "1", "0", "false"]
    );
    // A run without streams lists none; `runs` lists workflow runs, not the stream logs.
    let none = json_lines(&ok(
        &store,
        &["inspect", "streams", THIRTEEN_TERMINALS_RUN, "--json"],
    ));
    assert!(none.is_empty());
    let runs = json_lines(&ok(&store, &["inspect", "runs", "--json"]));
    assert_eq!(runs.len(), 30);
}

#[test]
fn inspect_reads_only_and_refuses_missing_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = imported(tmp.path(), &fixture_dir());
    let before = tree(&store);
    for args in [
        &["inspect", "runs"][..],
        &["inspect", "hooks"],
        &["inspect", "steps", THIRTEEN_TERMINALS_RUN],
        &["inspect", "events", THIRTEEN_TERMINALS_RUN],
        &["inspect", "streams", THIRTEEN_TERMINALS_RUN],
    ] {
        ok(&store, args);
    }
    assert!(
        tree(&store) == before,
        "no file of the store created, changed or removed (no hook token claims, no stream index)"
    );

    let missing = runlog(&store, &["inspect", "steps"]);
    assert_eq!(code(&missing), 2);
    assert!(stderr(&missing).contains("inspect steps needs a RUN"));
    let unknown = runlog(
        &store,
        &["inspect", "steps", "wrun_01M8N4BGVC6PBGA4VZWAQRRZ00"],
    );
    assert_eq!(code(&unknown), 2, "{}", stderr(&unknown));
    assert!(stderr(&unknown).contains("not found"));
    let no_store = runlog(&tmp.path().join("none"), &["inspect", "runs"]);
    assert_eq!(code(&no_store), 2);
    assert!(!tmp.path().join("none").exists());
}

#[test]
fn a_run_without_run_created_is_a_row_with_its_error_and_exits_1() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = imported(tmp.path(), &fixture_dir());
    // Every run of the fixture has its run_created: exit 0.
    ok(&store, &["inspect", "runs", "--json"]);
    let bare = "wrun_01M8N4BJ000000000000000001";
    let out = runlog(
        &store,
        &[
            "append",
            bare,
            "--create",
            "--kind",
            "step_created",
            "--correlation-id",
            "step_01M8N4BJ000000000000000001",
            "--payload",
            r#"{"stepName":"step//./wf//add","input":[]}"#,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let out = runlog(&store, &["inspect", "runs", "--json"]);
    assert_eq!(code(&out), 1, "a run without run_created: {}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 8, "{}", stdout(&out));
    assert_eq!(
        run_line(&lines, bare),
        &serde_json::json!({"runId": bare, "error": format!("workflow run \"{bare}\" not found")})
    );
    assert_eq!(
        lines.iter().filter(|l| l.get("status").is_some()).count(),
        7,
        "the listing goes on"
    );

    let table = runlog(&store, &["inspect", "runs"]);
    assert_eq!(code(&table), 1);
    let text = stdout(&table);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 9, "{text}");
    assert!(rows[0].ends_with("ERROR"), "{text}");
    let row = rows.iter().find(|l| l.starts_with(bare)).expect("its row");
    assert_eq!(row.find("error"), rows[0].find("STATUS"), "{text}");
    assert!(row.ends_with(" not found"), "{row}");
}

#[test]
fn a_damaged_run_is_a_row_with_its_error_and_the_listing_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = imported(tmp.path(), &fixture_dir());
    let damaged = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    let segment = store.join("runs").join(damaged).join("seg-00000001.log");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&segment)
        .expect("open segment");
    // Inside the first batch (the segment header is 4096 bytes; run_created's batch is
    // several hundred bytes long).
    let offset = 4096 + 100;
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset).expect("read");
    file.write_all_at(&[!byte[0]], offset).expect("write");
    file.sync_all().expect("sync");

    let out = runlog(&store, &["inspect", "runs", "--json"]);
    assert_eq!(code(&out), 5, "corrupt, after all rows: {}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 7, "{}", stdout(&out));
    let bad = run_line(&lines, damaged);
    assert!(bad["error"].as_str().unwrap().contains("corrupt"), "{bad}");
    assert_eq!(
        lines.iter().filter(|l| l.get("status").is_some()).count(),
        6
    );

    let table = runlog(&store, &["inspect", "runs"]);
    assert_eq!(code(&table), 5);
    let text = stdout(&table);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 8, "{text}");
    assert!(rows[0].ends_with("ERROR"), "{text}");
    let row = rows.iter().find(|l| l.starts_with(damaged)).unwrap();
    assert_eq!(row.find("error"), rows[0].find("STATUS"), "{text}");

    let hooks = runlog(&store, &["inspect", "hooks", "--json"]);
    assert_eq!(code(&hooks), 5);
    let lines = json_lines(&hooks);
    assert_eq!(lines.len(), 2, "the live hook and the error: {lines:?}");
    assert_eq!(lines[0]["error"].is_string(), lines[0]["runId"] == damaged);
}
