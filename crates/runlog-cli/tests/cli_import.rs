//! `runlog import` on real world-local data: the whole corpus in
//! `tests/fixtures/world-local-5.0.0-beta.29` (and the seven-run fixture beside it).

mod cli_support;

use std::fs;
use std::process::Command;

use cli_support::*;
use serde_json::Value;

#[test]
fn import_lands_every_event_file_except_the_temp_file_in_source_order_dense_from_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = tmp.path().join("store");
    let out = import(&store, &src);

    assert_eq!(code(&out), 1, "the temp file is reported: {}", stdout(&out));
    let report = stdout(&out);
    assert!(report.contains(TEMP_FILE), "{report}");
    assert!(report.contains("leftover temp file"), "{report}");
    assert!(report.contains("not imported (1):"), "{report}");

    let source = source_runs(&src);
    let files: usize = source.values().map(Vec::len).sum();
    assert_eq!(files, 392);
    assert!(
        report.contains(&format!(
            "imported {0} of {0} runs: {files} events appended, 0 already present",
            source.len()
        )),
        "{report}"
    );

    // `runs --all` also lists the logs of the imported streams (a chunk log and an index log
    // per stream, `stream-…`), 4 streams in the corpus.
    let (streams, workflow): (Vec<String>, Vec<String>) = run_names(&store)
        .into_iter()
        .partition(|r| r.starts_with("stream-"));
    assert_eq!(workflow, source.keys().cloned().collect::<Vec<_>>());
    assert_eq!(streams.len(), 8);
    for (run, events) in &source {
        let exported = export(&store, run);
        assert_eq!(exported.len(), events.len(), "{run}");
        for (i, (got, want)) in exported.iter().zip(events).enumerate() {
            assert_eq!(got["seq"], Value::from(i as u64 + 1), "{run}: dense from 1");
            let mut got = got.clone();
            got.as_object_mut().expect("object").remove("seq");
            assert_eq!(
                &got,
                want,
                "{run} seq {}: export equals the source file",
                i + 1
            );
        }
    }
}

#[test]
fn re_import_is_idempotent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = tmp.path().join("store");
    import(&store, &src);
    let before = runlog(&store, &["export"]);

    let again = runlog(&store, &["import", src.to_str().expect("utf-8"), "--json"]);
    assert_eq!(code(&again), 1, "the temp file is still reported");
    let lines = json_lines(&again);
    let runs: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("result").is_some() && l.get("stream").is_none())
        .collect();
    assert_eq!(runs.len(), source_runs(&src).len());
    for r in &runs {
        assert_eq!(r["result"], "unchanged", "{r}");
        assert_eq!(r["appended"], 0, "{r}");
    }
    let already: u64 = runs
        .iter()
        .map(|r| r["already_present"].as_u64().expect("n"))
        .sum();
    assert_eq!(already, 392);
    let after = runlog(&store, &["export"]);
    assert_eq!(stdout(&after), stdout(&before));
}

/// Writes run `run` as `events` world-local event files into `src/events`: `run_created`, then
/// `step_completed` facts, one millisecond apart.
fn write_synthetic_run(src: &std::path::Path, run: &str, events: usize) {
    const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    for i in 0..events {
        let mut n = i + 1;
        let mut tail = [b'0'; 16];
        for c in tail.iter_mut().rev() {
            *c = CROCKFORD[n % 32];
            n /= 32;
        }
        let id = format!(
            "evnt_01M8N4BJ00{}",
            std::str::from_utf8(&tail).expect("ascii")
        );
        let kind = if i == 0 {
            "run_created"
        } else {
            "step_completed"
        };
        let event = serde_json::json!({
            "eventType": kind, "eventData": {"i": i}, "runId": run, "eventId": id,
            "createdAt": format!("2026-11-30T02:26:{:02}.{:03}Z", 10 + i / 1000, i % 1000),
            "specVersion": 5,
        });
        let path = src.join("events").join(format!("{run}-{id}.json"));
        fs::write(path, event.to_string()).expect("write event file");
    }
}

/// README "Whole runs": if an append fails, the run created by this import is deleted again.
/// A real `runlog import` under strace, whose second fdatasync of one run's segment (its
/// second batch, after the first was acknowledged) fails with EIO.
#[test]
fn an_append_failing_mid_import_deletes_the_run_it_created_and_the_others_import() {
    if !Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return runlog_conformance::skip::skip("strace is not installed");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("world-local");
    copy_dir(&fixture_dir(), &src);
    let failing = "wrun_01M8N4BJ000000000000000000";
    // More events than one import batch holds: the append fails after a committed batch.
    let events = runlog_cli::import::BatchLimits::default().events_max + 44;
    write_synthetic_run(&src, failing, events);
    let reference = tmp.path().join("reference");
    assert_eq!(code(&import(&reference, &src)), 1, "the temp file");

    let store = tmp.path().join("store");
    let segment = store.join("runs").join(failing).join("seg-00000001.log");
    let out = Command::new("strace")
        .args(["-f", "-o", "/dev/null", "-P"])
        .arg(&segment)
        .args([
            "-e",
            "trace=fdatasync",
            "-e",
            "inject=fdatasync:error=EIO:when=2",
        ])
        .arg(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["import", src.to_str().expect("utf-8"), "--json"])
        .env_remove("RUNLOG_STORE")
        .output()
        .expect("run strace");
    if stderr(&out).contains("ptrace") || stderr(&out).contains("PTRACE") {
        return runlog_conformance::skip::skip(format!("ptrace not permitted: {}", stderr(&out)));
    }
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let lines = json_lines(&out);
    let line = lines
        .iter()
        .find(|l| l["run"] == failing)
        .unwrap_or_else(|| panic!("{failing} reported: {lines:?}"));
    assert_eq!(line["result"], "failed", "{line}");
    let reason = line["problems"][0]["reason"].as_str().expect("a reason");
    assert!(reason.contains("Input/output error"), "{reason}");
    assert!(!reason.contains("rollback failed"), "{reason}");

    // The run is gone, directory and all; every other run is as a clean import makes it.
    assert!(!store.join("runs").join(failing).exists());
    let leftovers: Vec<String> = fs::read_dir(store.join("runs"))
        .expect("list runs")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(failing))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
    let mut others = run_names(&reference);
    others.retain(|r| r != failing);
    assert_eq!(run_names(&store), others);
    for run in &others {
        assert_eq!(export(&store, run), export(&reference, run), "{run}");
    }
    assert_eq!(code(&runlog(&store, &["verify"])), 0);

    // Without the fault, the next import creates it whole and leaves the others unchanged.
    let again = json_lines(&runlog(
        &store,
        &["import", src.to_str().expect("utf-8"), "--json"],
    ));
    for l in again.iter().filter(|l| l.get("result").is_some()) {
        let want = if l["run"] == failing {
            "created"
        } else {
            "unchanged"
        };
        assert_eq!(l["result"], want, "{l}");
    }
    assert_eq!(export(&store, failing).len(), events);
    assert_eq!(
        stdout(&runlog(&store, &["export"])),
        stdout(&runlog(&reference, &["export"]))
    );
}

#[test]
fn a_malformed_event_file_fails_its_run_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("world-local");
    copy_dir(&fixture_dir(), &src);
    let bad_run = "wrun_01M8N4BRV2KFM4M7AG01H68PJ8";
    let bad_file = src
        .join("events")
        .join(format!("{bad_run}-evnt_01M8N4BSZQJTBNV9G9BCSFD0P2.json"));
    let text = fs::read_to_string(&bad_file).expect("read");
    fs::write(&bad_file, &text[..text.len() / 2]).expect("truncate");
    let store = tmp.path().join("store");

    let out = import(&store, &src);
    assert_eq!(code(&out), 1);
    let report = stdout(&out);
    let line = report
        .lines()
        .find(|l| l.contains(bad_file.to_str().expect("utf-8")))
        .unwrap_or_else(|| panic!("bad file reported: {report}"));
    assert!(line.contains("not valid JSON"), "{line}");
    assert!(
        line.contains(&format!("(run {bad_run} not imported)")),
        "{line}"
    );
    assert!(
        report.contains("imported 6 of 7 runs: 111 events appended"),
        "{report}"
    );

    let listed = run_names(&store);
    assert_eq!(listed.len(), 6);
    assert!(!listed.iter().any(|r| r == bad_run));
    let missing = runlog(&store, &["events", bad_run]);
    assert_eq!(code(&missing), 2, "{}", stderr(&missing));
}

#[test]
fn verify_is_clean_after_import_and_names_segment_and_offset_of_a_flipped_byte() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = copy_corpus(tmp.path());
    let store = tmp.path().join("store");
    import(&store, &src);
    let clean = runlog(&store, &["verify", "--json"]);
    assert_eq!(code(&clean), 0, "{}", stdout(&clean));
    let reports = json_lines(&clean);
    // Every workflow run, and the chunk and index logs of the imported streams (4 in the
    // corpus): verify is the storage view.
    let streams = 8;
    assert_eq!(reports.len(), source_runs(&src).len() + streams);
    assert!(
        reports
            .iter()
            .all(|r| r["ok"] == true && r["problems"] == Value::Array(vec![]))
    );

    let run = THIRTEEN_TERMINALS_RUN;
    let segment = store.join("runs").join(run).join("seg-00000001.log");
    let mut bytes = fs::read(&segment).expect("read segment");
    // format/SPEC.md §4b: the first batch starts at 4096 with the magic `R3`, then its `len`
    // as a varint; its crc is at len-4.
    let batch_at = 4096usize;
    assert_eq!(&bytes[batch_at..batch_at + 2], b"R3");
    let (mut batch_len, mut shift) = (0usize, 0);
    for &b in &bytes[batch_at + 2..batch_at + 7] {
        batch_len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    assert!(batch_at + batch_len <= bytes.len());
    bytes[batch_at + batch_len / 2] ^= 0x40;
    fs::write(&segment, &bytes).expect("write segment");

    let out = runlog(&store, &["verify", run, "--json"]);
    assert_eq!(code(&out), 1);
    let report = &json_lines(&out)[0];
    assert_eq!(report["ok"], false);
    let problem = &report["problems"][0];
    assert_eq!(problem["segment"], "seg-00000001.log");
    assert_eq!(
        problem["offset"], batch_at as u64,
        "the start of the batch holding the flip"
    );
    assert_eq!(
        problem["detail"],
        format!("batch checksum mismatch (batch of {batch_len} bytes)")
    );

    let table = stdout(&runlog(&store, &["verify", run]));
    assert!(
        table.contains(&format!("seg-00000001.log  {batch_at}")),
        "{table}"
    );
    let read = runlog(&store, &["events", run]);
    assert_eq!(
        code(&read),
        5,
        "a corrupt store is exit 5 for readers: {}",
        stderr(&read)
    );
    assert!(stderr(&read).contains("seg-00000001.log"));
}
