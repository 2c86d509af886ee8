//! Issue 11 §4: one damaged run never hides the others. `runs`, `audit`, `export` and
//! `verify` without RUN print every healthy run, give a damaged run a row with its error
//! (`{"run", "error"}` in JSON), go on, and exit non-zero (5 for corruption) after all rows.

mod cli_support;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cli_support::*;
use serde_json::Value;

const RUNS: [&str; 3] = ["r1", "r2", "r3"];

/// Offset of a byte inside the payload of the first batch of a run built by [`three_runs`]:
/// batch header (32) + event record header (44) + kind `run_started` (11) + 40 into the
/// 200-byte payload.
const FIRST_PAYLOAD_BYTE: u64 = 4096 + 32 + 44 + 11 + 40;

/// A store with runs r1, r2, r3, each of three events that `audit` reports (no
/// `run_created`), so every healthy run shows up in every command's output.
fn three_runs(tmp: &Path) -> PathBuf {
    let store = tmp.join("store");
    let payload = format!("{{\"pad\":\"{}\"}}", "x".repeat(190));
    for run in RUNS {
        for kind in ["run_started", "step_completed", "run_completed"] {
            let out = runlog(
                &store,
                &[
                    "append",
                    run,
                    "--create",
                    "--kind",
                    kind,
                    "--payload",
                    &payload,
                ],
            );
            assert_eq!(code(&out), 0, "{}", stderr(&out));
        }
    }
    store
}

fn segment_1(store: &Path, run: &str) -> PathBuf {
    store.join("runs").join(run).join("seg-00000001.log")
}

/// Flips every bit of the byte at `offset` of `path`.
fn flip_byte(path: &Path, offset: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open segment");
    let mut byte = [0u8; 1];
    file.read_exact_at(&mut byte, offset).expect("read byte");
    file.write_all_at(&[!byte[0]], offset).expect("write byte");
    file.sync_all().expect("sync");
}

/// The runs named by the JSON lines of `out`, and the error line of `run`.
fn runs_and_error(out: &std::process::Output, key: &str, run: &str) -> (Vec<String>, Value) {
    let lines = json_lines(out);
    let mut named: Vec<String> = lines
        .iter()
        .filter_map(|l| l[key].as_str().or(l["run"].as_str()).map(str::to_string))
        .collect();
    named.dedup();
    let error = lines
        .iter()
        .find(|l| l["run"] == run && l.get("error").is_some())
        .cloned()
        .unwrap_or(Value::Null);
    (named, error)
}

fn assert_corrupt_row(error: &Value, run: &str) {
    let message = error["error"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("corrupt run {run}")) && message.contains("seg-00000001.log"),
        "{error}"
    );
}

#[test]
fn a_corrupt_batch_in_run_2_leaves_runs_1_and_3_listed_audited_and_exported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = three_runs(tmp.path());
    flip_byte(&segment_1(&store, "r2"), FIRST_PAYLOAD_BYTE);

    // The default listing reads each run's summary and last batch only (format/SPEC.md §10):
    // a flipped byte in an earlier batch is found by `--check` (every event), verify, audit,
    // export and reads. It still lists every run.
    let quick = runlog(&store, &["runs", "--json"]);
    assert_eq!(code(&quick), 0, "{}", stderr(&quick));
    assert_eq!(stdout(&quick).lines().count(), 3, "{}", stdout(&quick));

    let runs = runlog(&store, &["runs", "--json", "--check"]);
    assert_eq!(
        code(&runs),
        5,
        "corruption, after all rows: {}",
        stderr(&runs)
    );
    let (named, error) = runs_and_error(&runs, "run", "r2");
    assert_eq!(named, RUNS, "{}", stdout(&runs));
    assert_corrupt_row(&error, "r2");
    assert!(stderr(&runs).contains("1 of 3 runs could not be read"));

    let table = runlog(&store, &["runs", "--check"]);
    assert_eq!(code(&table), 5);
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "header and three rows: {text}");
    assert!(lines[0].ends_with("ERROR"), "{text}");
    assert!(
        lines[1].starts_with("r1 ") && lines[3].starts_with("r3 "),
        "{text}"
    );
    assert!(
        lines[2].starts_with("r2 ") && lines[2].contains("error"),
        "{text}"
    );
    assert!(lines[2].contains("corrupt run r2"), "{text}");
    let status_column = lines[0].find("STATUS");
    assert_eq!(lines[1].find("completed"), status_column, "aligned: {text}");
    assert_eq!(lines[2].find("error"), status_column, "aligned: {text}");

    let audit = runlog(&store, &["audit", "--json"]);
    assert_eq!(code(&audit), 5, "{}", stderr(&audit));
    let (named, error) = runs_and_error(&audit, "run", "r2");
    assert_eq!(named, RUNS, "{}", stdout(&audit));
    assert_corrupt_row(&error, "r2");
    let audit_table = stdout(&runlog(&store, &["audit"]));
    assert!(
        audit_table
            .lines()
            .any(|l| l.starts_with("r2 ") && l.contains(" error ")),
        "{audit_table}"
    );

    let export = runlog(&store, &["export"]);
    assert_eq!(code(&export), 5, "{}", stderr(&export));
    let (named, error) = runs_and_error(&export, "runId", "r2");
    assert_eq!(named, RUNS, "{}", stdout(&export));
    assert_corrupt_row(&error, "r2");
    let events = json_lines(&export);
    for run in ["r1", "r3"] {
        let seqs: Vec<&Value> = events
            .iter()
            .filter(|e| e["runId"] == run)
            .map(|e| &e["seq"])
            .collect();
        assert_eq!(seqs, [1, 2, 3], "every event of {run}");
    }

    // verify always went on; it still does, and a storage fault stays exit 1 there.
    let verify = runlog(&store, &["verify", "--json"]);
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    assert_eq!(json_lines(&verify).len(), 3);
}

#[test]
fn a_run_whose_header_cannot_be_read_is_a_row_not_the_end_of_the_listing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = three_runs(tmp.path());
    // The salt field of segment 1's header: the header checksum no longer matches, so even
    // listing the run (which reads only headers and counters) fails.
    flip_byte(&segment_1(&store, "r2"), 20);

    for args in [&["runs", "--json"][..], &["audit", "--json"], &["export"]] {
        let out = runlog(&store, args);
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        let key = if args[0] == "export" { "runId" } else { "run" };
        let (named, error) = runs_and_error(&out, key, "r2");
        assert_eq!(named, RUNS, "{args:?}: {}", stdout(&out));
        assert!(error["error"].is_string(), "{args:?}: {}", stdout(&out));
    }
}
