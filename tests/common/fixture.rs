//! A store written by an older build and committed under `tests/fixtures/` (the format
//! versions still read: `format_v1_still_read.rs`, `format_v2_still_read.rs`): how its writer
//! filled it, a copy to open, and what its segment files say.

use std::path::{Path, PathBuf};

use runlog::{Event, NewEvent, RunId, Store};

/// `tests/fixtures/<name>`.
pub fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture `name` copied into a temp dir (the committed files are never opened for
/// writing).
pub fn copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    super::copy_tree(&dir(name), tmp.path());
    tmp
}

/// How a fixture's writer appends `events` events of `event` to `run`: facts one by one
/// (where `i % 10 < singles`) and in groups of `group`, a fenced decision of two at
/// `decision_at`, facts again.
pub fn fill(
    store: &Store,
    run: &RunId,
    events: u64,
    (singles, group, decision_at): (u64, u64, u64),
    event: fn(u64) -> NewEvent,
) {
    let mut i = 0;
    while i < events {
        if i == decision_at {
            store
                .append_decisions(run, i, vec![event(i), event(i + 1)])
                .unwrap();
            i += 2;
        } else if i % 10 < singles {
            store.append_facts(run, vec![event(i)]).unwrap();
            i += 1;
        } else {
            let before = if i < decision_at {
                decision_at - i
            } else {
                group
            };
            let n = group.min(events - i).min(before);
            store
                .append_facts(run, (i..i + n).map(event).collect())
                .unwrap();
            i += n;
        }
    }
    assert_eq!(store.last_seq(run).unwrap(), events);
}

/// The format version in the header of segment `n` of `run` (bytes 8..12, SPEC §2).
pub fn segment_version(dir: &Path, run: &str, n: u32) -> u32 {
    let path = dir.join(format!("runs/{run}/seg-{n:08}.log"));
    let b = std::fs::read(&path).unwrap();
    u32::from_le_bytes(b[8..12].try_into().unwrap())
}

/// The segment files of `run`.
pub fn segment_count(dir: &Path, run: &str) -> u32 {
    super::names_ending(&dir.join(format!("runs/{run}")), ".log").len() as u32
}

/// Every field of `got` (event `i`, 0-based) against `want`, its id against `id` when the
/// caller knows it (else `want`'s, when it has one).
pub fn assert_event(got: &Event, i: u64, want: &NewEvent, id: Option<ulid::Ulid>) {
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
