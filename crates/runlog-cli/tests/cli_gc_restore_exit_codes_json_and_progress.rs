//! `runlog gc` and `runlog restore` as a script sees them: the exit codes of docs/EXIT-CODES.md
//! (2 bad usage, 5 a damaged archive where gc would write, 6 an archive directory it cannot
//! write, 1 a restore into a store holding one of the logs with other content), `--json` rows
//! on success and on failure, a progress line per run (gc) and per log (restore) on stderr,
//! and the temporary archive files of an interrupted earlier gc removed and reported. A run
//! gc could not collect stays live, exactly as it was.

mod cli_support;
mod gc_support;

use cli_support::{code, json_lines, runlog, stderr, stdout};
use gc_support::{add_world_runs, archived, snapshot};

const CUT: &str = "2999-01-01T00:00:00Z";

#[test]
fn gc_removes_and_reports_leftover_temp_files_and_prints_a_line_per_run() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, live) = add_world_runs(&store);
    let dir = store.join("archive");
    std::fs::create_dir(&dir).unwrap();
    let mine = dir.join(format!(".tmp-{done}-{}", ulid::Ulid::generate()));
    let other = dir.join(format!(".tmp-{live}-{}", ulid::Ulid::generate()));
    std::fs::write(&mine, b"half an archive").unwrap();
    std::fs::write(&other, b"not gc's to judge").unwrap();

    let bad = runlog(&store, &["gc", "--finished-before", "yesterday"]);
    assert_eq!(code(&bad), 2, "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("--finished-before"),
        "{}",
        stderr(&bad)
    );

    let out = runlog(&store, &["gc", "--finished-before", CUT, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["run"], done.as_str());
    assert_eq!(
        lines[0]["removed_temp_files"],
        serde_json::json!([mine.display().to_string()])
    );
    assert!(
        !mine.exists(),
        "the leftover of the collected run is removed"
    );
    assert!(other.exists(), "another run's temporary file is left alone");
    let err = stderr(&out);
    assert!(
        err.contains(&format!("gc: removed {}", mine.display())),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("gc: archived "))
            .count(),
        1,
        "{err}"
    );
    assert!(archived(&dir, &done).is_some());
}

#[test]
fn gc_into_an_unwritable_archive_dir_exits_6_and_a_damaged_archive_exits_5_run_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    let before = snapshot(&store);

    let not_a_dir = tmp.path().join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let args = ["gc", "--finished-before", CUT, "--json", "--archive"];
    let mut with = args.to_vec();
    with.push(not_a_dir.to_str().unwrap());
    let out = runlog(&store, &with);
    // The pass fails before any run: it takes the archive directory's lock first.
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(not_a_dir.to_str().unwrap()),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&store), before, "the run stays live, unchanged");

    let dir = tmp.path().join("archive");
    std::fs::create_dir(&dir).unwrap();
    let damaged = dir.join(format!("{done}.rla"));
    std::fs::write(&damaged, b"RLA? no").unwrap();
    let mut with = args.to_vec();
    with.push(dir.to_str().unwrap());
    let out = runlog(&store, &with);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["result"], "failed");
    assert!(
        lines[0]["error"].as_str().unwrap().contains(".rla"),
        "{lines:?}"
    );
    assert_eq!(snapshot(&store), before, "the run stays live, unchanged");
    assert_eq!(std::fs::read(&damaged).unwrap(), b"RLA? no", "left alone");
}

#[test]
fn restore_prints_a_line_per_log_and_a_conflict_exits_1_with_a_json_row() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    assert_eq!(code(&runlog(&store, &["gc", "--finished-before", CUT])), 0);
    let dir = store.join("archive");

    let missing = runlog(&store, &["restore", "wrun_01M8VW27CSRMHNA9VZB2BTH6ZW"]);
    assert_eq!(code(&missing), 2, "{}", stderr(&missing));

    // The store holds the run's attribute log with other content.
    let attrs = format!("attrs-{done}");
    let made = runlog(&store, &["append", &attrs, "--create", "--kind", "other"]);
    assert_eq!(code(&made), 0, "{}", stderr(&made));
    let before = snapshot(&store);
    let out = runlog(&store, &["restore", &done, "--json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{}", stdout(&out));
    assert_eq!(lines[0]["run"], done.as_str());
    assert_eq!(lines[0]["result"], "conflict");
    assert!(
        lines[0]["error"].as_str().unwrap().contains(&attrs),
        "names the log: {lines:?}"
    );
    assert!(archived(&dir, &done).is_some(), "the archive stays");
    let after = snapshot(&store);
    assert_eq!(
        after.get(&attrs),
        before.get(&attrs),
        "nothing written to it"
    );

    // The conflicting log removed (the CLI has no delete), the restore goes through.
    let opened = runlog::Store::open(&store, runlog::Config::default()).unwrap();
    opened
        .delete_run(&runlog::RunId::new(&attrs).unwrap())
        .unwrap();
    drop(opened);
    let out = runlog(&store, &["restore", &done, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 5, "a row per log: {rows:?}");
    let err = stderr(&out);
    assert_eq!(
        err.lines().filter(|l| l.starts_with("restore: ")).count(),
        5,
        "a progress line per log: {err}"
    );
    assert!(archived(&dir, &done).is_none());
}
