//! Segment indexes of older versions (format/SPEC.md §9) stay in use by a build that writes
//! version 4 (batch entries as spans of batches): the version-2 indexes of
//! `tests/fixtures/format-v1/` (one entry per event id and per batch, written at commit
//! `0ae8ae1`) and the version-3 indexes of `tests/fixtures/format-v2/` (runs of ids, one
//! entry per batch, written at commit `b64d522`) serve a fresh open's reads at every seq and
//! its deduplication by key and by caller id, `verify` checks them page by page against the
//! encoding of their segments in their own version and ignores none, a writer leaves them as
//! they are, and the segments it seals get version-4 indexes.

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

const T0: u64 = 1_700_000_000_000;
/// The version this build writes.
const INDEX_VERSION: u32 = 4;

/// A fixture store of one run whose sealed segments carry indexes of an older version.
struct Fixture {
    /// Directory under `tests/fixtures/`.
    dir: &'static str,
    run: &'static str,
    /// Version of its indexes.
    version: u32,
    /// Its indexed (sealed) segments: `seg-00000001.idx` and on.
    indexes: u32,
    events: u64,
    /// 0-based events in the indexed segments with a caller id and no key.
    caller_ids: [u64; 3],
}

const V2_INDEXES: Fixture = Fixture {
    dir: "format-v1",
    run: "v1run",
    version: 2,
    indexes: 3,
    events: 120,
    caller_ids: [1, 5, 31],
};

const V3_INDEXES: Fixture = Fixture {
    dir: "format-v2",
    run: "v2run",
    version: 3,
    indexes: 2,
    events: 150,
    caller_ids: [1, 7, 31],
};

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

impl Fixture {
    fn run_dir(&self, root: &Path) -> PathBuf {
        root.join("runs").join(self.run)
    }

    /// The version field (bytes 4..8) of each index of the run, by file name.
    fn index_versions(&self, root: &Path) -> Vec<(String, u32)> {
        let mut out: Vec<(String, u32)> = std::fs::read_dir(self.run_dir(root))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, u32::from_le_bytes(b[4..8].try_into().unwrap()))
            })
            .collect();
        out.sort();
        out
    }

    fn copy(&self) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(self.dir);
        common::copy_tree(&fixture, tmp.path());
        tmp
    }
}

/// The caller id both fixtures gave event `i` (tests/format_v1_still_read.rs,
/// tests/format_v2_still_read.rs).
fn fixture_id(i: u64) -> Ulid {
    Ulid::from_parts(T0 + i, u128::from(i) * 7919 + 1)
}

/// Every seq of the run read alone (a read of one event from each cursor) and in one page.
fn assert_every_seq_reads(store: &Store, run: &RunId, events: u64) {
    let all = store.read(run, 0, usize::MAX).unwrap();
    let seqs: Vec<u64> = all.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events).collect::<Vec<_>>());
    for after in 0..events {
        let page = store.read(run, after, 1).unwrap();
        assert_eq!(page.events.len(), 1, "read after {after}");
        assert_eq!(page.events[0].event_id, all.events[after as usize].event_id);
        assert_eq!((page.next, page.has_more), (after + 1, after + 1 < events));
    }
}

fn older_indexes_serve_reads_dedupe_and_verify_and_new_seals_write_the_current_version(
    f: &Fixture,
) {
    let tmp = f.copy();
    let old: Vec<(String, u32)> = (1..=f.indexes)
        .map(|n| (format!("seg-{n:08}.idx"), f.version))
        .collect();
    assert_eq!(f.index_versions(tmp.path()), old, "the fixture's indexes");
    let before: Vec<Vec<u8>> = old
        .iter()
        .map(|(name, _)| std::fs::read(f.run_dir(tmp.path()).join(name)).unwrap())
        .collect();
    let run = RunId::new(f.run).unwrap();
    let store = Store::open(tmp.path(), small()).unwrap();
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report.notes.is_empty(),
        "no index ignored: {:?}",
        report.notes
    );
    assert_every_seq_reads(&store, &run, f.events);
    // Events with caller ids and no key in the sealed, indexed segments; event 0 has the key
    // `key-0`.
    for i in f.caller_ids {
        let again = NewEvent::new("step_started", "again").event_id(fixture_id(i));
        let a = store.append_facts(&run, vec![again]).unwrap();
        assert_eq!(
            (a[0].seq, a[0].duplicate),
            (i + 1, true),
            "caller id of {i}"
        );
    }
    let again = NewEvent::new("run_created", "again").key("key-0");
    let a = store.append_facts(&run, vec![again]).unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (1, true));
    // Appends roll past the fixture's last segment: its seal and the next get the current
    // version.
    for i in 0..200u64 {
        let e = NewEvent::new("step_completed", format!("{{\"new\":{i}}}"));
        let seq = store.append_facts(&run, vec![e]).unwrap()[0].seq;
        assert_eq!(seq, f.events + 1 + i);
    }
    drop(store);
    let versions = f.index_versions(tmp.path());
    let n = old.len();
    assert_eq!(versions[..n], old[..], "older indexes kept: {versions:?}");
    assert!(versions.len() >= n + 2, "{versions:?}");
    assert!(
        versions[n..].iter().all(|(_, v)| *v == INDEX_VERSION),
        "{versions:?}"
    );
    for ((name, _), bytes) in old.iter().zip(&before) {
        let now = std::fs::read(f.run_dir(tmp.path()).join(name)).unwrap();
        assert!(now == *bytes, "{name} unchanged");
    }
    let store = Store::open(tmp.path(), small()).unwrap();
    let report = store.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.events, f.events + 200);
    assert_every_seq_reads(&store, &run, f.events + 200);
    let last = f.caller_ids[2];
    let a = store
        .append_facts(
            &run,
            vec![NewEvent::new("x", "y").event_id(fixture_id(last))],
        )
        .unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (last + 1, true));
}

#[test]
fn version_2_indexes_serve_reads_dedupe_and_verify_and_new_seals_write_version_4() {
    older_indexes_serve_reads_dedupe_and_verify_and_new_seals_write_the_current_version(
        &V2_INDEXES,
    );
}

#[test]
fn version_3_indexes_serve_reads_dedupe_and_verify_and_new_seals_write_version_4() {
    older_indexes_serve_reads_dedupe_and_verify_and_new_seals_write_the_current_version(
        &V3_INDEXES,
    );
}
