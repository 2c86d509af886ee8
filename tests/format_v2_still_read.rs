//! Segments of format version 2 (format/SPEC.md §4a) stay readable by a build that writes
//! a later version: a store written by the last version-2 build (`tests/fixtures/format-v2/`,
//! made by `write_v2_fixture` below at commit `b64d522`) is read, verified, appended to and
//! read again, with every field of every event checked, the ids the store minted included
//! (listed in `tests/fixtures/format-v2.ids` when the fixture was written).

mod common;

use common::fixture;

use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

/// Events in the fixture: sealed segments of 8 KiB with their indexes and an active one.
const FIXTURE_EVENTS: u64 = 150;
const T0: u64 = 1_700_000_000_000;
const RUN: &str = "v2run";
const FIXTURE: &str = "format-v2";

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn minted_ids_file() -> PathBuf {
    fixture::dir("format-v2.ids")
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
    let dir = fixture::dir(FIXTURE);
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, small()).unwrap();
    let run = RunId::new(RUN).unwrap();
    store.create_run(&run).unwrap();
    // Facts one by one and in fours, a fenced decision of two, facts again.
    fixture::fill(&store, &run, FIXTURE_EVENTS, (4, 4, 70), event);
    let page = store.read(&run, 0, usize::MAX).unwrap();
    let ids: Vec<String> = page.events.iter().map(|e| e.event_id.to_string()).collect();
    std::fs::write(minted_ids_file(), ids.join("\n") + "\n").unwrap();
}

/// The ids the version-2 build gave the fixture's events, by seq − 1.
fn fixture_ids() -> Vec<Ulid> {
    let text = std::fs::read_to_string(minted_ids_file()).unwrap();
    text.lines().map(|l| l.parse().unwrap()).collect()
}

fn segment_version(dir: &Path, n: u32) -> u32 {
    fixture::segment_version(dir, RUN, n)
}

fn segment_count(dir: &Path) -> u32 {
    fixture::segment_count(dir, RUN)
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
        fixture::assert_event(got, i as u64, &event(i as u64), ids.get(i).copied());
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
    let tmp = fixture::copy(FIXTURE);
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
    let tmp = fixture::copy(FIXTURE);
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
