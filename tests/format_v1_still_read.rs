//! Segments of format version 1 (format/SPEC.md §4) stay readable by a build that writes
//! a later version (§4a, §4b): a store written by the version-1 build (`tests/fixtures/format-v1/`, made
//! by `write_v1_fixture` below at commit `0ae8ae1`, before the version-2 frame existed) is
//! read, verified, appended to and read again, with every field of every event checked.

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

/// The version this build creates new segments in (format/SPEC.md §2, §4b).
const NEWEST: u32 = 3;
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
            let n = 3
                .min(FIXTURE_EVENTS - i)
                .min(if i < 60 { 60 - i } else { 3 });
            store
                .append_facts(&run, (i..i + n).map(event).collect())
                .unwrap();
            i += n;
        }
    }
    assert_eq!(store.last_seq(&run).unwrap(), FIXTURE_EVENTS);
}

/// The fixture copied into a temp dir (the committed files are never opened for writing).
fn fixture_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    common::copy_tree(&fixture_dir(), tmp.path());
    tmp
}

/// The format version in the header of segment `n` of the run (bytes 8..12, SPEC §2).
fn segment_version(dir: &Path, n: u32) -> u32 {
    let path = dir.join(format!("runs/v1run/seg-{n:08}.log"));
    let b = std::fs::read(&path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn segment_count(dir: &Path) -> u32 {
    std::fs::read_dir(dir.join("runs/v1run"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".log")
        })
        .count() as u32
}

/// Reads the whole run and checks every field of every event against `event(i)`.
fn assert_run_is(store: &Store, events: u64) {
    let run = RunId::new("v1run").unwrap();
    let page = store.read(&run, 0, usize::MAX).unwrap();
    assert_eq!(page.events.len() as u64, events);
    for (i, got) in page.events.iter().enumerate() {
        let i = i as u64;
        let want = event(i);
        assert_eq!(got.seq, i + 1);
        assert_eq!(
            Some(got.event_id),
            want.event_id,
            "event id of seq {}",
            i + 1
        );
        assert_eq!(Some(got.created_at_ms), want.created_at_ms);
        assert_eq!(got.kind, want.kind);
        assert_eq!(
            got.correlation_id.as_deref(),
            want.correlation_id.as_deref()
        );
        assert_eq!(got.key.as_deref(), want.key.as_deref());
        assert_eq!(got.payload, want.payload);
    }
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.events, events);
}

#[test]
fn a_version_1_store_reads_verifies_and_keeps_its_events() {
    let tmp = fixture_copy();
    for n in 1..=4 {
        assert_eq!(segment_version(tmp.path(), n), 1, "fixture segment {n}");
    }
    let store = Store::open_read_only(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let store = Store::open(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let run = RunId::new("v1run").unwrap();
    let page = store.read(&run, 60, 2).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [61, 62]
    );
}

#[test]
fn appends_to_a_version_1_run_fill_its_segment_in_version_1_then_roll_to_the_newest_version() {
    let tmp = fixture_copy();
    let run = RunId::new("v1run").unwrap();
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
    let segments = segment_count(tmp.path());
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
