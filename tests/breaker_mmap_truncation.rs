//! A segment truncated behind the back of a process that already read the run kills that
//! process with SIGBUS on its next read: `Segment::view` reuses the cached mapping without
//! checking the file length, so reads touch mapped pages past end of file. A fresh process
//! gets `Error::Corrupt` for the same files. Found by the breaker review.
//!
//! The damage is done in a child process (this test binary re-run with an env var) so the
//! signal does not take the test harness down.

use std::process::Command;

use runlog::{Config, Error, NewEvent, RunId, Store};

const CHILD: &str = "BREAKER_MMAP_CHILD";

#[test]
fn read_through_open_handle_after_external_truncation_is_corrupt_not_sigbus() {
    if std::env::var_os(CHILD).is_some() {
        child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "read_through_open_handle_after_external_truncation_is_corrupt_not_sigbus",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    // Actual: killed by signal 7 (SIGBUS), no exit code.
    assert_eq!(
        out.status.code(),
        Some(0),
        "child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn child() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", vec![1u8; 20_000])])
        .unwrap();
    assert_eq!(store.read(&run, 0, 10).unwrap().events.len(), 1);

    let seg = dir.path().join("runs/r/seg-00000001.log");
    let file = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
    file.set_len(4096).unwrap();

    assert!(matches!(
        store.read(&run, 0, 10),
        Err(Error::Corrupt { .. })
    ));
}
