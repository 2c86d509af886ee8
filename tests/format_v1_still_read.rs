//! Segments of format version 1 (format/SPEC.md §4) stay readable by a build that writes
//! a later version (§4a, §4b): a store written by the version-1 build (`tests/fixtures/format-v1/`, made
//! by `write_v1_fixture` below at commit `0ae8ae1`, before the version-2 frame existed) is
//! read, verified, appended to and read again, with every field of every event checked.

mod common;

use common::fixture;

use std::path::Path;

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

/// The version this build creates new segments in (format/SPEC.md §2, §4b).
const NEWEST: u32 = 3;
/// Events in the fixture: 3 sealed segments of 8 KiB and an active one, all version 1.
const FIXTURE_EVENTS: u64 = 120;
const T0: u64 = 1_700_000_000_000;
const FIXTURE: &str = "format-v1";
const RUN: &str = "v1run";

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

/// Event `i` (0-based) of the fixture and of the appends after it: every field a function
/// of `i`, so a read can check each one.
fn event(i: u64) -> NewEvent {
    let kind = [
        "run_created",
        "step_started",
        "step_completed",
        "hook_received",
    ][i as usize % 4];
    let mut e = NewEvent::new(
        kind,
        format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(20)),
    )
    .event_id(Ulid::from_parts(T0 + i, u128::from(i) * 7919 + 1))
    .created_at_ms(T0 + i);
    if !i.is_multiple_of(3) {
        e = e.correlation_id(format!("step_{}", i / 3));
    }
    if i.is_multiple_of(2) {
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
    let dir = fixture::dir(FIXTURE);
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, small()).unwrap();
    let run = RunId::new(RUN).unwrap();
    store.create_run(&run).unwrap();
    // Facts one by one and in threes, then a fenced decision of two, then facts again.
    fixture::fill(&store, &run, FIXTURE_EVENTS, (3, 3, 60), event);
}

fn segment_version(dir: &Path, n: u32) -> u32 {
    fixture::segment_version(dir, RUN, n)
}

/// Reads the whole run and checks every field of every event against `event(i)`.
fn assert_run_is(store: &Store, events: u64) {
    let run = RunId::new(RUN).unwrap();
    let page = store.read(&run, 0, usize::MAX).unwrap();
    assert_eq!(page.events.len() as u64, events);
    for (i, got) in page.events.iter().enumerate() {
        fixture::assert_event(got, i as u64, &event(i as u64), None);
    }
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.events, events);
}

#[test]
fn a_version_1_store_reads_verifies_and_keeps_its_events() {
    let tmp = fixture::copy(FIXTURE);
    for n in 1..=4 {
        assert_eq!(segment_version(tmp.path(), n), 1, "fixture segment {n}");
    }
    let store = Store::open_read_only(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let store = Store::open(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let run = RunId::new(RUN).unwrap();
    let page = store.read(&run, 60, 2).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [61, 62]
    );
}

#[test]
fn appends_to_a_version_1_run_fill_its_segment_in_version_1_then_roll_to_the_newest_version() {
    let tmp = fixture::copy(FIXTURE);
    let run = RunId::new(RUN).unwrap();
    let total = FIXTURE_EVENTS + 150;
    {
        let store = Store::open(tmp.path(), small()).unwrap();
        // The key and the caller id of fixture events still deduplicate, from the version-1
        // segments' indexes and the active segment's maps.
        let dup = store
            .append_facts(&run, vec![event(0), event(119)])
            .unwrap();
        assert_eq!(
            dup.iter().map(|a| (a.seq, a.duplicate)).collect::<Vec<_>>(),
            [(1, true), (120, true)]
        );
        for i in FIXTURE_EVENTS..total {
            let a = store.append_facts(&run, vec![event(i)]).unwrap();
            assert_eq!((a[0].seq, a[0].duplicate), (i + 1, false));
        }
        let last = store.last_seq(&run).unwrap();
        store
            .append_decisions(&run, last, vec![event(total)])
            .unwrap();
        assert_run_is(&store, total + 1);
    }
    let segments = fixture::segment_count(tmp.path(), RUN);
    assert!(segments >= 6, "150 appends roll past segment 5: {segments}");
    assert_eq!(
        segment_version(tmp.path(), 4),
        1,
        "the active v1 segment stays v1"
    );
    for n in 5..=segments {
        assert_eq!(segment_version(tmp.path(), n), NEWEST, "new segment {n}");
    }
    // Appends went into segment 4 in version 1 before it sealed.
    let seg4 = std::fs::metadata(tmp.path().join("runs/v1run/seg-00000004.log")).unwrap();
    assert!(seg4.len() > 5408, "segment 4 grew: {}", seg4.len());
    let store = Store::open(tmp.path(), small()).unwrap();
    assert_run_is(&store, total + 1);
    let store = Store::open_read_only(tmp.path(), small()).unwrap();
    assert_run_is(&store, total + 1);
}
