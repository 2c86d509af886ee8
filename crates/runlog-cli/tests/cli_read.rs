//! Read commands (`runs`, `events`, `tail`, `export`), `--help`, and exit codes of a missing
//! store.

mod cli_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use cli_support::*;
use serde_json::{Value, json};

#[test]
fn runs_derives_status_counts_and_times_from_the_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    import(&store, &fixture_dir());
    let runs = json_lines(&runlog(&store, &["runs", "--json"]));
    let row = |run: &str| {
        runs.iter()
            .find(|r| r["run"] == run)
            .expect("listed")
            .clone()
    };
    assert_eq!(
        row(THIRTEEN_TERMINALS_RUN),
        json!({"run": THIRTEEN_TERMINALS_RUN, "last_seq": 75, "events": 75, "status": "completed",
               "created_at": "2026-11-30T02:25:44.825Z", "updated_at": "2026-11-30T02:25:45.653Z"})
    );
    assert_eq!(
        row(TEMP_FILE_RUN)["status"],
        "running",
        "its run_completed is only a temp file"
    );
    assert_eq!(row("wrun_01M8N4BJ9D6ZB68RC8VT3XA12E")["status"], "running");
    assert_eq!(runs.len(), 7);

    let table = stdout(&runlog(&store, &["runs"]));
    let header = table.lines().next().expect("header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["RUN", "LAST_SEQ", "EVENTS", "STATUS", "CREATED", "UPDATED"]
    );
    let line = table
        .lines()
        .find(|l| l.starts_with(THIRTEEN_TERMINALS_RUN))
        .expect("row");
    assert_eq!(
        line.find("75"),
        header.find("LAST_SEQ"),
        "columns aligned: {table}"
    );
}

#[test]
fn events_pages_with_after_and_limit_and_renders_source_ids() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    import(&store, &fixture_dir());
    let run = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    let out = runlog(
        &store,
        &["events", run, "--after", "2", "--limit", "2", "--json"],
    );
    let events = json_lines(&out);
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["seq"], 3);
    assert_eq!(events[0]["kind"], "step_started");
    assert_eq!(events[0]["event_id"], "evnt_01M8N4BG3KMJDWQVFMKQGCYRTP");
    assert_eq!(events[0]["created_at"], "2026-11-30T02:25:44.051Z");
    assert_eq!(events[1]["kind"], "step_created");
    assert_eq!(
        events[1]["correlation_id"],
        "step_01M8N4BFZ5229RX1D7PQRPJZ11"
    );

    let table = stdout(&runlog(&store, &["events", run]));
    assert_eq!(table.lines().count(), 7, "header and six events: {table}");
    let tail = stdout(&runlog(&store, &["tail", run, "-n", "2"]));
    let seqs: Vec<&str> = tail
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(seqs, ["SEQ", "5", "6"], "the header, then the events");
}

#[test]
fn tail_follow_prints_new_events_and_ends_on_ctrl_c() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    assert_eq!(
        code(&runlog(
            &store,
            &["append", "r", "--create", "--kind", "run_created"]
        )),
        0
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["tail", "r", "--follow", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tail");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first: serde_json::Value =
        serde_json::from_str(&lines.next().expect("line").expect("read")).expect("json");
    assert_eq!(first["seq"], 1);

    assert_eq!(
        code(&runlog(&store, &["append", "r", "--kind", "run_started"])),
        0
    );
    let second: serde_json::Value =
        serde_json::from_str(&lines.next().expect("line").expect("read")).expect("json");
    assert_eq!(
        (second["seq"].as_u64(), second["kind"].as_str()),
        (Some(2), Some("run_started"))
    );

    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: sending SIGINT to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn export_renders_the_world_local_shape() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    import(&store, &fixture_dir());
    let events = export(&store, "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG");
    assert_eq!(
        events[1],
        json!({"runId": "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG", "eventId": "evnt_01M8N4BG0SXR1VP6KW6E96NCBR",
               "eventType": "run_started", "createdAt": "2026-11-30T02:25:43.961Z", "specVersion": 5, "seq": 2})
    );
    assert_eq!(
        events[5]["eventData"],
        json!({"output": {"__type": "Uint8Array", "data": "ZGV2bFszXQ=="}})
    );
}

#[test]
fn export_carries_the_resume_id_of_a_keyed_hook_received_and_nothing_else_gets_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let run = "wrun_01M8N4BFZ5ZB7EFN8RZEZ744VG";
    let append = |kind: &str, key: Option<&str>, create: bool| {
        let mut args = vec!["append", run, "--kind", kind, "--correlation-id", "hook_1"];
        args.extend([
            "--payload",
            r#"{"payload":{"__type":"Uint8Array","data":"AA=="}}"#,
        ]);
        if let Some(k) = key {
            args.extend(["--key", k]);
        }
        if create {
            args.push("--create");
        }
        let out = runlog(&store, &args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    append(
        "hook_received",
        Some("resume/01JRESUMEID000000000000001 9f86d0"),
        true,
    );
    append(
        "hook_received",
        Some("resume/01JRESUMEID000000000000002"),
        false,
    );
    append("hook_received", None, false);
    append("step_created", Some("resume/not-a-resume"), false);
    let events = export(&store, run);
    let ids: Vec<&Value> = events.iter().map(|e| &e["resumeId"]).collect();
    assert_eq!(
        ids,
        [
            &json!("01JRESUMEID000000000000001"),
            &json!("01JRESUMEID000000000000002"),
            &Value::Null,
            &Value::Null,
        ]
    );
}

#[test]
fn every_subcommand_has_help_and_the_exit_codes_are_documented() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let top = runlog(&store, &["--help"]);
    assert_eq!(code(&top), 0);
    for line in [
        "0  ok",
        "1  verify or audit found problems",
        "3  fenced append rejected",
        "4  run busy",
        "5  store corrupt",
        "6  environment: permission denied, read-only or full file system, I/O error",
    ] {
        assert!(stdout(&top).contains(line), "{line}");
    }
    for sub in [
        "import", "runs", "events", "tail", "append", "verify", "audit", "export", "storm",
    ] {
        let out = runlog(&store, &[sub, "--help"]);
        assert_eq!(code(&out), 0, "{sub}");
        assert!(
            stdout(&out).contains("Usage: runlog"),
            "{sub}: {}",
            stdout(&out)
        );
    }
    assert!(!store.exists(), "help creates no store");
}

#[test]
fn read_commands_on_a_missing_store_exit_2_and_create_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("absent");
    for args in [
        &["runs"][..],
        &["events", "r"],
        &["audit"],
        &["verify"],
        &["export"],
        &["tail", "r"],
    ] {
        let out = runlog(&store, args);
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(stderr(&out).contains("no store at"), "{}", stderr(&out));
    }
    assert!(!store.exists());
    assert_eq!(code(&runlog(&store, &["frobnicate"])), 2);
}

#[test]
fn the_store_comes_from_runlog_store_when_no_flag_is_given() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("from-env");
    let out = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .args(["append", "r", "--create", "--kind", "a"])
        .env("RUNLOG_STORE", &store)
        .output()
        .expect("run");
    assert_eq!(code(&out), 0);
    assert!(store.join("runs").join("r").is_dir());
}
