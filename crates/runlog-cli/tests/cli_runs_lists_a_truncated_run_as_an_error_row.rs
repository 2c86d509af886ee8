//! `runlog runs` on a store where an outside hand cut a run's segment short (rule 5 of
//! INVARIANTS.md: never a silently shorter log): the run gets a row of status `error` with the
//! `Corrupt` message naming the segment file and the offset of the cut, never a healthy row
//! of the events before the cut, and the command exits 5 (corruption) after all rows. The
//! other commands keep reporting the damage as they did: `verify` its problem (exit 1, the
//! events before the cut counted), `tail` and `export` the events before the cut, then the
//! error.

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::*;
use serde_json::Value;

const SEGMENT: &str = "seg-00000001.log";

/// A store with run `cut` of ten single-event appends (payloads `payload-number-N`) and run
/// `whole` of two.
fn store(tmp: &Path) -> PathBuf {
    let store = tmp.join("store");
    for (run, n) in [("cut", 10), ("whole", 2)] {
        for i in 1..=n {
            let payload = format!("payload-number-{i}");
            let kind = format!("k{i}");
            let args = [
                "append",
                run,
                "--create",
                "--kind",
                &kind,
                "--payload",
                &payload,
            ];
            let out = runlog(&store, &args);
            assert_eq!(code(&out), 0, "{}", stderr(&out));
        }
    }
    store
}

/// Cuts run `cut`'s segment 4 bytes before the payload of event `event` (inside the batch
/// of that event, before its payload in every frame version, so events `1..event` stay
/// whole); returns the new length.
fn cut_before_event(store: &Path, event: u32) -> u64 {
    let path = store.join("runs").join("cut").join(SEGMENT);
    let bytes = std::fs::read(&path).unwrap();
    let needle = format!("payload-number-{event}");
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("the payload is in the segment");
    let len = (at - 4) as u64;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len).unwrap();
    len
}

fn corrupt_message(cut_at: u64) -> String {
    format!("corrupt run cut: segment {SEGMENT}, offset {cut_at}: ")
}

/// `runs` and `runs --check`, as a table and as JSON: an error row for `cut`, a row for
/// `whole`, exit 5.
fn assert_runs_reports_the_cut(store: &Path, cut_at: u64) {
    for check in [&[][..], &["--check"]] {
        let table = runlog(store, &[&["runs"][..], check].concat());
        assert_eq!(code(&table), 5, "{check:?}: {}", stderr(&table));
        let text = stdout(&table);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "header and two rows: {text}");
        assert!(lines[0].ends_with("ERROR"), "{text}");
        let status_column = lines[0].find("STATUS");
        assert!(lines[1].starts_with("cut "), "{text}");
        assert_eq!(lines[1].find("error "), status_column, "{text}");
        assert!(lines[1].contains(&corrupt_message(cut_at)), "{text}");
        assert!(
            lines[2].starts_with("whole ") && !lines[2].contains("error"),
            "{text}"
        );
        assert!(
            stderr(&table).contains("1 of 2 runs could not be read"),
            "{}",
            stderr(&table)
        );

        let json = runlog(store, &[&["runs", "--json"][..], check].concat());
        assert_eq!(code(&json), 5, "{check:?}: {}", stderr(&json));
        let rows = json_lines(&json);
        assert_eq!(rows.len(), 2, "{}", stdout(&json));
        assert_eq!(rows[0]["run"], "cut");
        assert_eq!(
            rows[0].get("last_seq"),
            None,
            "no length for the cut run: {}",
            rows[0]
        );
        let error = rows[0]["error"].as_str().unwrap_or_default();
        assert!(error.starts_with(&corrupt_message(cut_at)), "{}", rows[0]);
        assert_eq!(
            (&rows[1]["run"], &rows[1]["last_seq"]),
            (&Value::from("whole"), &Value::from(2))
        );
    }
}

#[test]
fn runs_gives_a_run_cut_after_seven_events_an_error_row_and_exits_5() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let cut_at = cut_before_event(&store, 8);
    assert_runs_reports_the_cut(&store, cut_at);

    // verify: the storage fault is a problem (exit 1), the seven events before it counted.
    let verify = runlog(&store, &["verify", "--json"]);
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    let reports = json_lines(&verify);
    assert_eq!(reports[0]["run"], "cut");
    assert_eq!(reports[0]["events"], 7, "{}", reports[0]);
    assert_eq!(
        reports[0]["problems"][0]["offset"], cut_at,
        "{}",
        reports[0]
    );
    assert_eq!(reports[1]["ok"], true, "{}", reports[1]);

    // tail: the last events before the cut (the run has no last seq), then the error.
    let tail = runlog(&store, &["tail", "cut", "-n", "3", "--json"]);
    assert_eq!(code(&tail), 5, "{}", stderr(&tail));
    let seqs: Vec<u64> = json_lines(&tail)
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [5, 6, 7]);
    assert!(
        stderr(&tail).contains(&corrupt_message(cut_at)),
        "{}",
        stderr(&tail)
    );

    // export of every run: the events before the cut, then the error; exit 5.
    let export = runlog(&store, &["export"]);
    assert_eq!(code(&export), 5, "{}", stderr(&export));
    let lines = json_lines(&export);
    let seqs = |run: &str| -> Vec<u64> {
        let of = lines.iter().filter(|l| l["runId"] == run);
        of.map(|l| l["seq"].as_u64().unwrap()).collect()
    };
    assert_eq!(seqs("cut"), (1..=7).collect::<Vec<_>>());
    assert_eq!(seqs("whole"), [1, 2]);
    let error = lines
        .iter()
        .find(|l| l["run"] == "cut" && l.get("error").is_some());
    let error = error.and_then(|l| l["error"].as_str()).unwrap_or_default();
    assert!(
        error.starts_with(&corrupt_message(cut_at)),
        "{}",
        stdout(&export)
    );
}

#[test]
fn runs_gives_a_run_cut_inside_its_first_event_an_error_row_not_an_empty_run() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store(tmp.path());
    let cut_at = cut_before_event(&store, 1);
    assert_runs_reports_the_cut(&store, cut_at);
}
