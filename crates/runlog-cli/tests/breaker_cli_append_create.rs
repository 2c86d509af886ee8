//! `runlog append --create` with an invalid event exits 2 but leaves a new store and an empty
//! run behind: the run is created before the event is validated (README: limits are "checked
//! before anything is written"). Found by the breaker review.

use std::path::Path;
use std::process::{Command, Output};

fn runlog(store: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn append_create_with_empty_kind_exits_2_and_creates_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let out = runlog(&store, &["append", "newrun", "--kind", "", "--create"]);
    assert_eq!(out.status.code(), Some(2));
    // Actual: s/runs/newrun/ exists with an empty segment and `runlog runs` lists it.
    assert!(!store.join("runs/newrun").exists());
}

#[test]
fn append_create_with_oversized_payload_exits_2_and_creates_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let payload = dir.path().join("big.bin");
    std::fs::write(&payload, vec![0u8; (16 << 20) + 1]).unwrap();
    let out = runlog(
        &store,
        &[
            "append",
            "newrun",
            "--kind",
            "k",
            "--payload-file",
            payload.to_str().unwrap(),
            "--create",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!store.join("runs/newrun").exists());
}
