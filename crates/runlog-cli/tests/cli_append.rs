//! `runlog append`: facts, fenced decisions, exit codes.

mod cli_support;

use cli_support::*;

#[test]
fn append_with_stale_expected_seq_exits_3_and_leaves_the_run_files_unchanged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    for kind in ["run_created", "run_started"] {
        assert_eq!(
            code(&runlog(
                &store,
                &["append", "wrun_a", "--create", "--kind", kind]
            )),
            0
        );
    }
    let run_dir = store.join("runs").join("wrun_a");
    let before = snapshot(&run_dir);

    let out = runlog(
        &store,
        &[
            "append",
            "wrun_a",
            "--kind",
            "run_completed",
            "--expected-seq",
            "1",
            "--payload",
            "{}",
        ],
    );
    assert_eq!(code(&out), 3);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out)
            .contains("fenced append to run wrun_a rejected: expected last seq 1, actual 2"),
        "{}",
        stderr(&out)
    );
    let after = snapshot(&run_dir);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &before {
        if name == "lock" {
            // The lock file only records the pid of the last lock holder (for messages).
            assert_eq!(after[name].len(), bytes.len());
        } else {
            assert!(after[name] == *bytes, "{name} changed");
        }
    }
    let events = json_lines(&runlog(&store, &["events", "wrun_a", "--json"]));
    assert_eq!(events.len(), 2);
}

#[test]
fn append_prints_the_seq_of_facts_decisions_and_duplicate_keys() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    let seq = |args: &[&str]| {
        let out = runlog(&store, args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    assert_eq!(
        seq(&[
            "append",
            "r",
            "--create",
            "--kind",
            "run_created",
            "--payload",
            "{\"a\":1}"
        ]),
        "1"
    );
    assert_eq!(
        seq(&[
            "append",
            "r",
            "--kind",
            "step_created",
            "--expected-seq",
            "1",
            "--correlation-id",
            "s1"
        ]),
        "2"
    );
    assert_eq!(
        seq(&["append", "r", "--kind", "hook_received", "--key", "k"]),
        "3"
    );
    let dup = runlog(
        &store,
        &["append", "r", "--kind", "hook_received", "--key", "k"],
    );
    assert_eq!((code(&dup), stdout(&dup).trim()), (0, "3"));
    assert!(stderr(&dup).contains("duplicate key"));

    let payload = tmp.path().join("payload.bin");
    std::fs::write(&payload, b"\x00raw").expect("write");
    assert_eq!(
        seq(&[
            "append",
            "r",
            "--kind",
            "blob",
            "--payload-file",
            payload.to_str().expect("utf-8")
        ]),
        "4"
    );
    let events = json_lines(&runlog(&store, &["events", "r", "--json"]));
    assert_eq!(events[0]["payload"], serde_json::json!({"a": 1}));
    assert_eq!(events[1]["correlation_id"], "s1");
    assert_eq!(events[2]["key"], "k");
    assert_eq!(events[3]["payload"], "\u{0}raw");
}

#[test]
fn append_to_a_missing_run_or_with_bad_input_exits_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("store");
    assert_eq!(
        code(&runlog(&store, &["append", "r", "--create", "--kind", "a"])),
        0
    );
    let missing = runlog(&store, &["append", "nope", "--kind", "a"]);
    assert_eq!(code(&missing), 2);
    assert!(stderr(&missing).contains("run nope does not exist"));
    assert_eq!(
        code(&runlog(
            &store,
            &["append", "bad/id", "--kind", "a", "--create"]
        )),
        2
    );
    assert_eq!(code(&runlog(&store, &["append", "r", "--kind", ""])), 2);
    assert_eq!(
        code(&runlog(
            &store,
            &[
                "append",
                "r",
                "--kind",
                "a",
                "--payload",
                "x",
                "--payload-file",
                "f"
            ]
        )),
        2
    );
    let no_file = runlog(
        &store,
        &[
            "append",
            "r",
            "--kind",
            "a",
            "--payload-file",
            "/nonexistent/f",
        ],
    );
    assert_eq!(code(&no_file), 2);
}
