//! Segment indexes of version 2 (one entry per event id, format/SPEC.md §9) stay in use by a
//! build that writes version 3 (runs of ids): the indexes of `tests/fixtures/format-v1/`
//! (written at commit `0ae8ae1`, before version 3 existed) serve a fresh open's reads and
//! its deduplication by key and by caller id, `verify` checks them page by page against the
//! version-2 encoding of their segments and ignores none, a writer leaves them as they are,
//! and the segments it seals get version-3 indexes.

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, NewEvent, RunId, Store};
use ulid::Ulid;

const T0: u64 = 1_700_000_000_000;

fn small() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn run_dir(root: &Path) -> PathBuf {
    root.join("runs/v1run")
}

/// The version field (bytes 4..8) of each index of the run, by file name.
fn index_versions(root: &Path) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = std::fs::read_dir(run_dir(root))
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

fn fixture_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1");
    common::copy_tree(&fixture, tmp.path());
    tmp
}

/// The caller id the fixture gave event `i` (tests/format_v1_still_read.rs).
fn fixture_id(i: u64) -> Ulid {
    Ulid::from_parts(T0 + i, u128::from(i) * 7919 + 1)
}

#[test]
fn version_2_indexes_serve_dedupe_and_verify_and_new_seals_write_version_3() {
    let tmp = fixture_copy();
    let v2: Vec<(String, u32)> = (1..=3).map(|n| (format!("seg-{n:08}.idx"), 2)).collect();
    assert_eq!(index_versions(tmp.path()), v2, "the fixture's indexes");
    let before: Vec<Vec<u8>> = v2
        .iter()
        .map(|(name, _)| std::fs::read(run_dir(tmp.path()).join(name)).unwrap())
        .collect();
    let run = RunId::new("v1run").unwrap();
    let store = Store::open(tmp.path(), small()).unwrap();
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(
        report.notes.is_empty(),
        "no index ignored: {:?}",
        report.notes
    );
    // Events 1, 5 and 31 (0-based) have caller ids and no key (odd i), in the sealed,
    // version-2 indexed segments; event 0 has the key `key-0`.
    for i in [1u64, 5, 31] {
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
    // Appends roll past the fixture's last segment: its seal and the next get version 3.
    for i in 0..200u64 {
        let e = NewEvent::new("step_completed", format!("{{\"new\":{i}}}"));
        assert_eq!(store.append_facts(&run, vec![e]).unwrap()[0].seq, 121 + i);
    }
    drop(store);
    let versions = index_versions(tmp.path());
    assert_eq!(
        versions[..3],
        v2[..],
        "version-2 indexes kept: {versions:?}"
    );
    assert!(versions.len() >= 5, "{versions:?}");
    assert!(versions[3..].iter().all(|(_, v)| *v == 3), "{versions:?}");
    for ((name, _), bytes) in v2.iter().zip(&before) {
        let now = std::fs::read(run_dir(tmp.path()).join(name)).unwrap();
        assert!(now == *bytes, "{name} unchanged");
    }
    let store = Store::open(tmp.path(), small()).unwrap();
    let report = store.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.events, 320);
    let a = store
        .append_facts(&run, vec![NewEvent::new("x", "y").event_id(fixture_id(31))])
        .unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (32, true));
}
