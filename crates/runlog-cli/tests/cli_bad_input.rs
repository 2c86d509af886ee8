//! The command-line tool takes run ids as text: every malformed one is refused with exit
//! code 2 (bad input) and nothing is created.

use std::path::Path;
use std::process::Command;

const BAD_RUN_IDS: [&str; 14] = [
    "..",
    ".",
    "../escape",
    "a/b",
    "/abs",
    "a\\b",
    "nul\0byte",
    "caf\u{e9}",
    "\u{1f600}",
    "-leading-dash",
    "",
    "with space",
    ".hidden",
    "tab\there",
];

#[test]
fn malformed_run_ids_exit_2_and_create_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let store_dir = parent.path().join("store");
    let too_long = "a".repeat(129);
    for id in BAD_RUN_IDS.iter().copied().chain([too_long.as_str()]) {
        if !id.contains('\0') {
            cli_append_is_rejected(&store_dir, id);
        }
    }
    assert!(!store_dir.exists(), "no store was created");
}

/// The command-line tool takes run ids as text: exit code 2 (bad input), nothing created.
fn cli_append_is_rejected(store: &Path, id: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args([
            "append",
            "--create",
            "--kind",
            "step_completed",
            "--payload",
            "{}",
            "--",
            id,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{id:?}: {stderr}");
    assert!(stderr.contains("invalid run id"), "{id:?}: {stderr}");
}
