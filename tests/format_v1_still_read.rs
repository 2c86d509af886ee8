//! Segments of format version 1 (format/SPEC.md §4) stay readable by a build that writes
//! version 2 (§4a): a store written by the version-1 build (`tests/fixtures/format-v1/`, made
//! by `write_v1_fixture` below at commit `0ae8ae1`, before the version-2 frame existed) is
//! read, verified, appended to and read again, with every field of every event checked.

use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

/// Events in the fixture: 3 sealed segments of 8 KiB and an active one, all version 1.
const FIXTURE_EVENTS: u64 = 120;
const T0: u64 = 1_700_000_000_000;

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1")
}

/// Event `i` (0-based) of the fixture and of the appends after it: every field a function
/// of `i`, so a read can check each one.
fn event(i: u64) -> NewEvent {
    let kind = ["run_created", "step_started", "step_completed", "hook_received"][i as usize % 4];
    let mut e = NewEvent::new(kind, format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(20)))
        .event_id(Ulid::from_parts(T0 + i, u128::from(i) * 7919 + 1))
        .created_at_ms(T0 + i);
    if i % 3 != 0 {
        e = e.correlation_id(format!("step_{}", i / 3));
    }
    if i % 2 == 0 {
        e = e.key(format!("key-{i}"));
    }
    e
}

/// Writes the fixture with the build at hand. Run once, by hand, with a version-1 build:
/// `RUNLOG_WRITE_V1_FIXTURE=1 cargo nextest run -p runlog --test format_v1_still_read --run-ignored only`.
#[test]
#[ignore = "writes tests/fixtures/format-v1; run by hand with a version-1 build"]
fn write_v1_fixture() {
    if std::env::var_os("RUNLOG_WRITE_V1_FIXTURE").is_none() {
        return;
    }
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, small()).unwrap();
    let run = RunId::new("v1run").unwrap();
    store.create_run(&run).unwrap();
    // Facts one by one and in threes, then a fenced decision of two, then facts again.
    let mut i = 0;
    while i < FIXTURE_EVENTS {
        if i == 60 {
            store
                .append_decisions(&run, i, vec![event(i), event(i + 1)])
                .unwrap();
            i += 2;
        } else if i % 10 < 3 {
            store.append_facts(&run, vec![event(i)]).unwrap();
            i += 1;
        } else {
            let n = 3.min(FIXTURE_EVENTS - i).min(if i < 60 { 60 - i } else { 3 });
            store.append_facts(&run, (i..i + n).map(event).collect()).unwrap();
            i += n;
        }
    }
    assert_eq!(store.last_seq(&run).unwrap(), FIXTURE_EVENTS);
}
