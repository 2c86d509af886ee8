//! Issue 11 §7, honest output: control characters in stored text never reach the terminal
//! raw and never break a table's columns; payloads are never altered (not UTF-8, or not JSON
//! where JSON is expected: base64 in a named field).

mod cli_support;

use std::fs;
use std::path::Path;

use cli_support::*;
use serde_json::json;

/// An escape sequence that would paint the terminal red and set its title.
const HOSTILE_KIND: &str = "step_x\u{1b}[31m\nsecond\tline\u{7f}\u{9b}2J";
const HOSTILE_CORRELATION: &str = "corr\u{1b}]0;pwned\u{7}\r";
const HOSTILE_PAYLOAD: &str = "text \u{1b}[2J\u{1b}[H\nnext line\u{85}";

/// Bytes that a terminal would act on: C0 (except the newline ending each line), DEL, C1.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && c.is_control())
        .collect()
}

fn append(store: &Path, args: &[&str]) {
    let mut all = vec!["append", "r", "--create"];
    all.extend_from_slice(args);
    let out = runlog(store, &all);
    assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
}

fn hostile_store(tmp: &Path) -> std::path::PathBuf {
    let store = tmp.join("store");
    append(
        &store,
        &[
            "--kind",
            "run_created",
            "--correlation-id",
            "-",
            "--payload",
            "{}",
        ],
    );
    append(
        &store,
        &[
            "--kind",
            HOSTILE_KIND,
            "--correlation-id",
            HOSTILE_CORRELATION,
            "--key",
            "key\u{1b}[0m",
            "--payload",
            HOSTILE_PAYLOAD,
        ],
    );
    // JSON keeps DEL and C1 characters raw inside strings.
    append(
        &store,
        &[
            "--kind",
            "step_created",
            "--correlation-id",
            "s2",
            "--payload",
            "{\"a\":\"\u{7f}\u{9b}\"}",
        ],
    );
    store
}

#[test]
fn tables_escape_control_characters_and_stay_aligned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = hostile_store(tmp.path());

    let out = runlog(&store, &["events", "r"]);
    assert_eq!(code(&out), 0);
    let table = stdout(&out);
    assert_eq!(raw_controls(&table), Vec::<char>::new(), "{table:?}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "header and three events, one line each: {table}"
    );
    assert!(
        lines[2].contains("step_x\\x1b[31m\\nsecond\\tline\\x7f\\u{9b}2J"),
        "{table}"
    );
    assert!(lines[2].contains("corr\\x1b]0;pwned\\x07\\r"), "{table}");
    assert!(
        lines[2].contains("text \\x1b[2J\\x1b[H\\nnext line\\u{85}"),
        "{table}"
    );
    assert!(lines[3].contains("\\x7f\\u{9b}"), "{table}");
    // Escaped cells are ASCII here, so byte offsets are columns: every cell of a column
    // starts where its header does.
    for column in ["KIND", "CORRELATION", "EVENT_ID", "PAYLOAD"] {
        let at = lines[0].find(column).expect("header");
        for line in &lines[1..] {
            let cell_starts = line.is_char_boundary(at)
                && line[..at].ends_with(' ')
                && !line[at..].starts_with(' ');
            assert!(cell_starts, "{column} aligned at {at}: {table}");
        }
    }

    let tail = stdout(&runlog(&store, &["tail", "r"]));
    assert_eq!(raw_controls(&tail), Vec::<char>::new(), "{tail:?}");
    assert_eq!(
        tail.lines().count(),
        4,
        "the header and three events: {tail}"
    );

    let audit = runlog(&store, &["audit"]);
    assert_eq!(code(&audit), 1, "the hostile step event has no creation");
    let audit = stdout(&audit);
    assert_eq!(raw_controls(&audit), Vec::<char>::new(), "{audit:?}");
    assert!(audit.contains("creation_missing"), "{audit}");

    // JSON output escapes by its own rules and keeps the exact text.
    let events = json_lines(&runlog(&store, &["events", "r", "--json"]));
    assert_eq!(events[1]["kind"], HOSTILE_KIND);
    assert_eq!(events[1]["correlation_id"], HOSTILE_CORRELATION);
    assert_eq!(events[1]["payload"], HOSTILE_PAYLOAD);
}

#[test]
fn import_reports_escape_names_from_the_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("events")).expect("mkdir");
    let name = "wrun_\u{1b}[2J-evnt_01M8N4BFZHDQ44SDC6QMZD8ZQA.json";
    fs::write(src.join("events").join(name), "{}").expect("write");
    fs::write(src.join("events").join("stray\u{1b}]0;x\u{7}.txt"), "").expect("write");
    let out = import(&tmp.path().join("store"), &src);
    assert_eq!(code(&out), 1);
    let report = stdout(&out);
    assert_eq!(raw_controls(&report), Vec::<char>::new(), "{report:?}");
    assert!(report.contains("wrun_\\x1b[2J"), "{report}");
    assert!(report.contains("stray\\x1b]0;x\\x07.txt"), "{report}");
}

#[test]
fn payloads_that_are_not_utf8_or_not_json_are_carried_as_base64() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let binary = tmp.path().join("binary");
    fs::write(&binary, [0xff, 0x00, 0xfe, b'a']).expect("write");
    let binary = binary.to_str().expect("utf-8");
    append(&store, &["--kind", "blob", "--payload-file", binary]);
    append(&store, &["--kind", "text", "--payload", "hello"]);
    append(&store, &["--kind", "json", "--payload", "{\"a\": [1, 2]}"]);
    append(&store, &["--kind", "empty"]);

    let events = json_lines(&runlog(&store, &["events", "r", "--json"]));
    assert_eq!(events[0]["payload_base64"], "/wD+YQ==", "{}", events[0]);
    assert!(
        events[0].get("payload").is_none(),
        "never lossy: {}",
        events[0]
    );
    assert_eq!(events[1]["payload"], "hello");
    assert_eq!(events[2]["payload"], json!({"a": [1, 2]}));
    assert_eq!(events[3]["payload"], json!(null));
    for e in &events[1..] {
        assert!(e.get("payload_base64").is_none(), "{e}");
    }

    let export = runlog(&store, &["export", "r"]);
    assert_eq!(code(&export), 0, "{}", stderr(&export));
    let lines = json_lines(&export);
    assert_eq!(lines[0]["eventDataBase64"], "/wD+YQ==", "{}", lines[0]);
    assert!(lines[0].get("eventData").is_none(), "{}", lines[0]);
    assert_eq!(
        lines[1]["eventDataBase64"], "aGVsbG8=",
        "text is not JSON: quoting it would change the payload: {}",
        lines[1]
    );
    assert!(lines[1].get("eventData").is_none(), "{}", lines[1]);
    assert_eq!(
        lines[2]["eventData"],
        json!({"a": [1, 2]}),
        "JSON as before"
    );
    assert!(lines[2].get("eventDataBase64").is_none());
    assert!(lines[3].get("eventData").is_none() && lines[3].get("eventDataBase64").is_none());

    let table = stdout(&runlog(&store, &["events", "r"]));
    assert!(table.contains("base64:/wD+YQ=="), "{table}");
    assert!(!table.contains('\u{fffd}'), "{table}");
}
