//! `runlog runs` from run summaries (format/SPEC.md §10): the rows equal those of reading every
//! event (`--check`), with the summaries current, missing (a store written before them) or
//! damaged; a flipped byte in the batch a summary ends with is still a corrupt row (exit 5).

mod cli_support;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use cli_support::*;

fn append(store: &Path, run: &str, kind: &str) {
    let out = runlog(
        store,
        &["append", run, "--create", "--kind", kind, "--payload", "{}"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

fn listing(store: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["runs", "--json"];
    args.extend_from_slice(extra);
    let out = runlog(store, &args);
    (code(&out), stdout(&out))
}

#[test]
fn rows_from_summaries_equal_rows_from_every_event() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    for k in [
        "run_created",
        "run_started",
        "step_completed",
        "run_completed",
        "run_failed",
    ] {
        append(&store, "a", k);
    }
    for k in ["run_created", "run_started", "step_started"] {
        append(&store, "b", k);
    }
    append(&store, "c", "run_created");
    let summary = |run: &str| store.join("runs").join(run).join("summary");
    assert!(summary("a").exists() && summary("c").exists());
    let checked = listing(&store, &["--check"]);
    assert_eq!(checked.0, 0);
    assert!(
        checked.1.contains(r#""status":"completed""#),
        "{}",
        checked.1
    );
    assert!(checked.1.contains(r#""status":"running""#), "{}", checked.1);
    assert_eq!(listing(&store, &[]), checked);
    // A store written before summaries: none at all.
    for run in ["a", "b", "c"] {
        std::fs::remove_file(summary(run)).unwrap();
    }
    assert_eq!(listing(&store, &[]), checked);
    // Damaged summaries are ignored; the next writer's close writes them again.
    std::fs::write(summary("b"), b"RLSM garbage").unwrap();
    assert_eq!(listing(&store, &[]), checked);
    append(&store, "b", "run_cancelled");
    let checked = listing(&store, &["--check"]);
    assert!(
        checked.1.contains(r#""status":"cancelled""#),
        "{}",
        checked.1
    );
    assert_eq!(listing(&store, &[]), checked);
}

#[test]
fn a_flipped_byte_in_the_last_batch_is_a_corrupt_row() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    append(&store, "a", "run_created");
    append(&store, "a", "run_started");
    let seg = store.join("runs/a/seg-00000001.log");
    let bytes = std::fs::read(&seg).unwrap();
    let at = bytes.iter().rposition(|&b| b == b'}').unwrap();
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(&[bytes[at] ^ 1], at as u64).unwrap();
    let (code, out) = listing(&store, &[]);
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("error"), "{out}");
}
