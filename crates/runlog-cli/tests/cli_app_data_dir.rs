//! Issue 20 item 6: the CLI on a real app's data directory. `runs` lists the workflow runs and
//! only counts the World's own logs (streams, stream indexes, 4.x stream owners, the hook
//! token claims; `runlog_world::log_kind`), which `--all` lists with their kind, never as
//! `pending` runs; `tail` prints an aligned table with a header, like every other table;
//! `events` on a damaged run prints the intact events in table mode too, then the error
//! (exit 5).

mod cli_support;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cli_support::*;
use runlog::{Config, NewEvent, RunId, Store};
use runlog_world::Streams;

const RUN: &str = "wrun_01M8RD6VDN78DRZESK20KEMJWK";

fn id(s: &str) -> RunId {
    RunId::new(s).expect("run id")
}

/// A store as an app's World leaves it: one running workflow run with a stream `out` (its
/// chunk log and the run's stream index, written by the World's `Streams`), a 4.x stream
/// owner index and the hook token claims log.
fn app_store(tmp: &Path) -> PathBuf {
    let dir = tmp.join("runlog");
    let store = Store::open(&dir, Config::default()).expect("open");
    let run = id(RUN);
    store.create_run(&run).expect("create run");
    let events = vec![
        NewEvent::new("run_created", r#"{"workflowName":"wf"}"#),
        NewEvent::new("run_started", "{}"),
    ];
    store.append_facts(&run, events).expect("append");
    Streams::new(store.clone())
        .write(&run, "out", &b"chunk"[..])
        .expect("stream write");
    for internal in ["stream-owner-nout", runlog_world::HOOK_TOKENS_RUN] {
        store
            .create_run(&id(internal))
            .expect("create internal log");
        let claim = NewEvent::new("claim", "{}");
        store
            .append_facts(&id(internal), vec![claim])
            .expect("append");
    }
    dir
}

#[test]
fn runs_lists_workflow_runs_and_counts_the_worlds_own_logs_apart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = app_store(tmp.path());

    let out = runlog(&store, &["runs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "header, the run, the count: {text}");
    assert!(
        lines[0].starts_with("RUN ") && lines[0].contains("STATUS"),
        "{text}"
    );
    assert!(
        lines[1].starts_with(RUN) && lines[1].contains(" running "),
        "{text}"
    );
    assert_eq!(
        lines[2],
        "+4 internal logs (1 stream, 1 stream-index, 1 stream-owner, 1 token-claims); --all to show"
    );
    assert!(!text.contains("pending"), "{text}");

    let json = json_lines(&runlog(&store, &["runs", "--json"]));
    let named: Vec<&str> = json.iter().filter_map(|l| l["run"].as_str()).collect();
    assert_eq!(named, [RUN]);
    assert_eq!(json[0]["status"], "running");
}

#[test]
fn runs_all_shows_each_internal_log_with_its_kind_and_no_status() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = app_store(tmp.path());

    let out = runlog(&store, &["runs", "--all"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        6,
        "header and five logs, no count line: {text}"
    );
    let kind_at = lines[0].find("KIND").expect("a KIND column");
    let status_at = lines[0].find("STATUS").expect("a STATUS column");
    let row = |prefix: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no row {prefix}: {text}"))
    };
    let cases = [
        (RUN, "run", "running"),
        (
            "stream-31-wrun_01M8RD6VDN78DRZESK20KEMJWK-nout",
            "stream",
            "-",
        ),
        (
            "stream-31-wrun_01M8RD6VDN78DRZESK20KEMJWK-i",
            "stream-index",
            "-",
        ),
        ("stream-owner-nout", "stream-owner", "-"),
        ("_world-hook-tokens", "token-claims", "-"),
    ];
    for (prefix, kind, status) in cases {
        let line = row(prefix);
        assert_eq!(line[kind_at..].split(' ').next(), Some(kind), "{text}");
        assert_eq!(line[status_at..].split(' ').next(), Some(status), "{text}");
    }
    assert!(!text.contains("pending"), "{text}");

    let json = json_lines(&runlog(&store, &["runs", "--all", "--json"]));
    assert_eq!(json.len(), 5);
    for line in &json {
        let internal = line["run"] != RUN;
        assert_eq!(line["status"].is_null(), internal, "{line}");
        assert_eq!(line["kind"] == "run", !internal, "{line}");
    }
}

/// `runlog append` of one event of `kind` with `payload`.
fn append(store: &Path, kind: &str, correlation: &str, payload: &str) {
    let args = [
        "append",
        "r1",
        "--create",
        "--kind",
        kind,
        "--correlation-id",
        correlation,
        "--payload",
        payload,
    ];
    let out = runlog(store, &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn tail_prints_an_aligned_table_with_the_events_header() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    append(&store, "run_created", "c", "{}");
    append(&store, "step_created", "step_with_a_long_id", r#"{"a":1}"#);
    append(&store, "hook_disposed", "h", r#""x""#);

    let tail = stdout(&runlog(&store, &["tail", "r1"]));
    let events = stdout(&runlog(&store, &["events", "r1"]));
    assert_eq!(tail, events, "tail shows what events shows");
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 4, "{tail}");
    let header = lines[0];
    assert!(header.starts_with("SEQ  CREATED"), "{tail}");
    for column in ["KIND", "CORRELATION", "EVENT_ID", "PAYLOAD"] {
        let at = header.find(column).expect(column);
        for line in &lines[1..] {
            let before = &line[..at];
            assert!(before.ends_with("  "), "{column} aligned: {tail}");
            assert_ne!(&line[at..at + 1], " ", "{column} aligned: {tail}");
        }
    }

    let last = stdout(&runlog(&store, &["tail", "r1", "-n", "1"]));
    let lines: Vec<&str> = last.lines().collect();
    assert_eq!(lines.len(), 2, "{last}");
    assert!(
        lines[0].starts_with("SEQ ") && lines[1].starts_with("3 "),
        "{last}"
    );
}

#[test]
fn events_on_a_damaged_run_prints_the_intact_events_then_exits_5() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let pad = |c: &str| format!("{{\"pad\":\"{}\"}}", c.repeat(190));
    let kinds = ["run_created", "run_started", "step_created", "step_started"];
    for (kind, c) in kinds.into_iter().zip(["w", "x", "y", "z"]) {
        append(&store, kind, "s", &pad(c));
    }
    // A byte inside the payload of the third batch: two intact events before it, one after.
    let segment = store.join("runs/r1/seg-00000001.log");
    let bytes = std::fs::read(&segment).expect("read segment");
    let third = bytes
        .windows(12)
        .position(|w| w == b"\"pad\":\"yyyyy")
        .expect("the third event");
    let file = OpenOptions::new().write(true).open(&segment).expect("open");
    file.write_all_at(b"X", (third + 40) as u64).expect("flip");

    let json = runlog(&store, &["events", "r1", "--json"]);
    assert_eq!(code(&json), 5, "{}", stderr(&json));
    let seqs: Vec<u64> = json_lines(&json)
        .iter()
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, [1, 2]);

    let table = runlog(&store, &["events", "r1"]);
    assert_eq!(code(&table), 5, "{}", stderr(&table));
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "header and the two intact events: {text}");
    assert!(lines[0].starts_with("SEQ "), "{text}");
    assert!(
        lines[1].starts_with("1 ") && lines[1].contains("run_created"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("2 ") && lines[2].contains("run_started"),
        "{text}"
    );
    assert!(
        stderr(&table).contains("corrupt run r1"),
        "{}",
        stderr(&table)
    );

    let tail = runlog(&store, &["tail", "r1"]);
    assert_eq!(code(&tail), 5, "{}", stderr(&tail));
    assert_eq!(stdout(&tail), text, "tail too");
}
