//! Rule 5 against a segment file truncated behind the back of a handle that already read (and
//! mapped) the run: the next read through that handle checks the file length before touching
//! its mapping and fails with `Error::Corrupt`, as a fresh handle would, instead of reading
//! mapped pages past end of file (SIGBUS).
//!
//! The damage is done in a child process (this test binary re-executed on its `child_entry`,
//! in `main.rs`, which calls [`child`]) so that a signal would not take the test harness down.

use runlog::{Config, Error, NewEvent, RunId, Store};

/// The line the child prints once every check passed.
const CHECKED: &str = "@truncation-checked";

#[test]
fn read_through_open_handle_after_external_truncation_is_corrupt_not_sigbus() {
    let out = crate::common::child_command()
        .env(crate::CHILD, "truncation")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "child: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.ends_with(CHECKED)),
        "the child ran its checks: {stdout}"
    );
}

/// The child side: a 20,000-byte event read through a handle, the segment cut to its
/// 4096-byte header by another descriptor, then the same handle reads again.
pub fn child() {
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
    println!("{CHECKED}");
}
