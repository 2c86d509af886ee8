//! Segments of format version 2 (format/SPEC.md §4a) stay readable by a build that writes
//! a later version: a store written by the last version-2 build (`tests/fixtures/format-v2/`,
//! made by `write_v2_fixture` below at commit `b64d522`) is read, verified, appended to and
//! read again, with every field of every event checked, the ids the store minted included
//! (listed in `tests/fixtures/format-v2.ids` when the fixture was written).

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, Event, NewEvent, RunId, Store};
use ulid::Ulid;

/// Events in the fixture: sealed segments of 8 KiB with their indexes and an active one.
const FIXTURE_EVENTS: u64 = 150;
const T0: u64 = 1_700_000_000_000;
const RUN: &str = "v2run";

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v2")
}

fn minted_ids_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v2.ids")
}

/// Event `i` (0-based): every field a function of `i`, but the id of one event in five,
/// which the store mints (and a read checks against `format-v2.ids`).
fn event(i: u64) -> NewEvent {
    let kind = [
        "run_created",
        "step_started",
        "step_completed",
        "hook_received",
        "a_kind_of_the_callers_own",
    ][i as usize % 5];
    let mut e = NewEvent::new(
        kind,
        format!("{{\"i\":{i},\"pad\":\"{}\"}}", "y".repeat(12)),
    )
    .created_at_ms(T0 + i);
    if i % 5 != 4 {
        e = e.event_id(Ulid::from_parts(T0 + i, u128::from(i) * 7919 + 1));
    }
    if !i.is_multiple_of(3) {
        e = e.correlation_id(format!("step_{}", i / 3));
    }
    if i.is_multiple_of(2) {
        e = e.key(format!("key-{i}"));
    }
    e
}

/// Writes the fixture with the build at hand. Run once, by hand, with a version-2 build:
/// `RUNLOG_WRITE_V2_FIXTURE=1 cargo nextest run -p runlog --test format_v2_still_read --run-ignored only`.
#[test]
#[ignore = "writes tests/fixtures/format-v2; run by hand with a version-2 build"]
fn write_v2_fixture() {
    if std::env::var_os("RUNLOG_WRITE_V2_FIXTURE").is_none() {
        return;
    }
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, small()).unwrap();
    let run = RunId::new(RUN).unwrap();
    store.create_run(&run).unwrap();
    // Facts one by one and in fours, a fenced decision of two, facts again.
    let mut i = 0;
    while i < FIXTURE_EVENTS {
        if i == 70 {
            store
                .append_decisions(&run, i, vec![event(i), event(i + 1)])
                .unwrap();
            i += 2;
        } else if i % 10 < 4 {
            store.append_facts(&run, vec![event(i)]).unwrap();
            i += 1;
        } else {
            let n = 4
                .min(FIXTURE_EVENTS - i)
                .min(if i < 70 { 70 - i } else { 4 });
            store
                .append_facts(&run, (i..i + n).map(event).collect())
                .unwrap();
            i += n;
        }
    }
    let page = store.read(&run, 0, usize::MAX).unwrap();
    let ids: Vec<String> = page.events.iter().map(|e| e.event_id.to_string()).collect();
    std::fs::write(minted_ids_file(), ids.join("\n") + "\n").unwrap();
}

/// The fixture copied into a temp dir (the committed files are never opened for writing).
fn fixture_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    common::copy_tree(&fixture_dir(), tmp.path());
    tmp
}

/// The ids the version-2 build gave the fixture's events, by seq − 1.
fn fixture_ids() -> Vec<Ulid> {
    let text = std::fs::read_to_string(minted_ids_file()).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

/// The format version in the header of segment `n` of the run (bytes 8..12, SPEC §2).
fn segment_version(dir: &Path, n: u32) -> u32 {
    let path = dir.join(format!("runs/{RUN}/seg-{n:08}.log"));
    let b = std::fs::read(&path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

fn segment_count(dir: &Path) -> u32 {
    std::fs::read_dir(dir.join(format!("runs/{RUN}")))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".log")
        })
        .count() as u32
}

fn assert_event(got: &Event, i: u64, id: Option<Ulid>) {
    let want = event(i);
    assert_eq!(got.seq, i + 1);
    if let Some(id) = id.or(want.event_id) {
        assert_eq!(got.event_id, id, "event id of seq {}", i + 1);
    }
    assert_eq!(Some(got.created_at_ms), want.created_at_ms);
    assert_eq!(got.kind, want.kind);
    assert_eq!(
        got.correlation_id.as_deref(),
        want.correlation_id.as_deref()
    );
    assert_eq!(got.key.as_deref(), want.key.as_deref());
    assert_eq!(got.payload, want.payload);
}

/// Reads the whole run, checks every field of every event (the fixture's minted ids against
/// the list), verifies it, and returns the ids of the events past the fixture.
fn assert_run_is(store: &Store, events: u64) -> Vec<Ulid> {
    let run = RunId::new(RUN).unwrap();
    let ids = fixture_ids();
    assert_eq!(ids.len() as u64, FIXTURE_EVENTS);
    let page = store.read(&run, 0, usize::MAX).unwrap();
    assert_eq!(page.events.len() as u64, events);
    for (i, got) in page.events.iter().enumerate() {
        assert_event(got, i as u64, ids.get(i).copied());
    }
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.events, events);
    page.events[ids.len()..]
        .iter()
        .map(|e| e.event_id)
        .collect()
}

#[test]
fn a_version_2_store_reads_verifies_and_keeps_its_events_and_minted_ids() {
    let tmp = fixture_copy();
    let segments = segment_count(tmp.path());
    assert!(segments >= 3, "the fixture seals segments: {segments}");
    for n in 1..=segments {
        assert_eq!(segment_version(tmp.path(), n), 2, "fixture segment {n}");
    }
    let store = Store::open_read_only(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let store = Store::open(tmp.path(), small()).unwrap();
    assert_run_is(&store, FIXTURE_EVENTS);
    let run = RunId::new(RUN).unwrap();
    let page = store.read(&run, 70, 2).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [71, 72]
    );
}

#[test]
fn appends_to_a_version_2_run_deduplicate_against_it_and_keep_every_id() {
    let tmp = fixture_copy();
    let run = RunId::new(RUN).unwrap();
    let ids = fixture_ids();
    let total = FIXTURE_EVENTS + 150;
    let fixture_segments = segment_count(tmp.path());
    {
        let store = Store::open(tmp.path(), small()).unwrap();
        // A key, a caller id, and an id the version-2 build minted (presented again as the
        // caller's) still deduplicate at their seqs.
        let minted_again = NewEvent::new("other", "x").event_id(ids[4]);
        let dup = store
            .append_facts(&run, vec![event(0), event(148), minted_again])
            .unwrap();
        assert_eq!(
            dup.iter().map(|a| (a.seq, a.duplicate)).collect::<Vec<_>>(),
            [(1, true), (149, true), (5, true)]
        );
        for i in FIXTURE_EVENTS..total {
            let a = store.append_facts(&run, vec![event(i)]).unwrap();
            assert_eq!((a[0].seq, a[0].duplicate), (i + 1, false));
        }
        assert_run_is(&store, total);
    }
    // The active version-2 segment was filled in version 2; the segments after it are of the
    // version this build creates (SPEC §2 *Versions*).
    let segments = segment_count(tmp.path());
    assert!(
        segments > fixture_segments,
        "the appends rolled: {segments}"
    );
    for n in 1..=segments {
        let want = if n <= fixture_segments { 2 } else { 3 };
        assert_eq!(segment_version(tmp.path(), n), want, "segment {n}");
    }
    let store = Store::open(tmp.path(), small()).unwrap();
    let after = assert_run_is(&store, total);
    let store = Store::open_read_only(tmp.path(), small()).unwrap();
    assert_eq!(assert_run_is(&store, total), after);
    // Every id is unique, and each id the store minted sorts after every earlier one.
    let page = store.read(&run, 0, usize::MAX).unwrap();
    let mut seen = std::collections::HashSet::new();
    assert!(page.events.iter().all(|e| seen.insert(e.event_id)));
    let mut newest = Ulid::nil();
    for (i, e) in page.events.iter().enumerate() {
        if i % 5 == 4 {
            assert!(e.event_id > newest, "minted id of seq {}", e.seq);
        }
        newest = newest.max(e.event_id);
    }
}
