//! The segment index (format/SPEC.md §9): written at seal, it lets an open skip decoding
//! sealed segments and keeps their keys and ids out of memory, while reads and idempotency
//! behave exactly as without it. An index is never a source of truth: missing, stale or
//! damaged, it is ignored (and rewritten by a writer).

mod common;

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};
use ulid::Ulid;

fn small() -> Config {
    Config {
        segment_len_bytes_max: 6 << 10,
        ..Config::default()
    }
}

fn run_dir(dir: &Path) -> PathBuf {
    dir.join("runs").join("ix")
}

fn indexes(dir: &Path) -> Vec<String> {
    common::names_ending(&run_dir(dir), ".idx")
}

/// 300 keyed facts with caller ids over several 8 KiB segments.
fn build(dir: &Path) -> (RunId, Vec<Ulid>) {
    let store = Store::open(dir, small()).unwrap();
    let run = RunId::new("ix").unwrap();
    store.create_run(&run).unwrap();
    let mut ids = Vec::new();
    for i in 0..300u64 {
        let id = Ulid::from_parts(1_700_000_000_000 + i, u128::from(i) + 1);
        ids.push(id);
        let e = NewEvent::new("step_completed", format!("{{\"i\":{i}}}"))
            .key(format!("key-{i}"))
            .event_id(id);
        assert_eq!(store.append_facts(&run, vec![e]).unwrap()[0].seq, i + 1);
    }
    assert!(store.run_info(&run).unwrap().segment_count >= 5);
    (run, ids)
}

fn check_everything(store: &Store, run: &RunId, ids: &[Ulid]) {
    let page = store.read(run, 0, 1000).unwrap();
    assert_eq!(page.events.len(), 300);
    for (i, e) in page.events.iter().enumerate() {
        assert_eq!((e.seq, e.event_id), (i as u64 + 1, ids[i]));
    }
    for after in [0u64, 1, 37, 150, 298, 299] {
        let p = store.read(run, after, 3).unwrap();
        let want: Vec<u64> = (after + 1..=(after + 3).min(300)).collect();
        assert_eq!(p.events.iter().map(|e| e.seq).collect::<Vec<_>>(), want);
    }
    // Idempotency reaches into sealed segments: by key, by caller id, and for decisions.
    let again = NewEvent::new("step_completed", "x").key("key-3");
    let a = store.append_facts(run, vec![again]).unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (4, true));
    let by_id = NewEvent::new("step_completed", "x").event_id(ids[10]);
    let a = store.append_facts(run, vec![by_id]).unwrap();
    assert_eq!((a[0].seq, a[0].duplicate), (11, true));
    let last = store.last_seq(run).unwrap();
    match store.append_decisions(run, last, vec![NewEvent::new("d", "x").key("key-0")]) {
        Err(Error::DuplicateDecision { seq, .. }) => assert_eq!(seq, 1),
        other => panic!("expected DuplicateDecision, got {other:?}"),
    }
}

#[test]
fn sealed_segments_get_an_index_and_a_fresh_open_serves_reads_and_dedupe_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let (run, ids) = build(dir.path());
    let segments = Store::open(dir.path(), small())
        .unwrap()
        .run_info(&run)
        .unwrap()
        .segment_count;
    assert_eq!(
        indexes(dir.path()).len() as u32,
        segments - 1,
        "one index per sealed segment"
    );
    let store = Store::open(dir.path(), small()).unwrap();
    check_everything(&store, &run, &ids);
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn a_missing_stale_or_damaged_index_is_ignored_and_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let (run, ids) = build(dir.path());
    let names = indexes(dir.path());
    let rd = run_dir(dir.path());
    // Missing (a store written before indexes existed), damaged, and of another segment.
    std::fs::remove_file(rd.join(&names[0])).unwrap();
    let mut bytes = std::fs::read(rd.join(&names[1])).unwrap();
    bytes[40] ^= 1;
    std::fs::write(rd.join(&names[1]), bytes).unwrap();
    std::fs::copy(rd.join(&names[2]), rd.join(&names[3 % names.len()])).ok();
    {
        let ro = Store::open_read_only(dir.path(), small()).unwrap();
        let page = ro.read(&run, 0, 1000).unwrap();
        assert_eq!(page.events.len(), 300);
        assert!(
            !rd.join(&names[0]).exists(),
            "a read-only open writes no index"
        );
    }
    let store = Store::open(dir.path(), small()).unwrap();
    check_everything(&store, &run, &ids);
    assert_eq!(
        indexes(dir.path()),
        names,
        "a writer wrote the missing index back"
    );
    let fresh = Store::open(dir.path(), small()).unwrap();
    check_everything(&fresh, &run, &ids);
}

/// Flips one byte of page `page` (past its header page) of index `name`.
fn damage_page(dir: &Path, name: &str, page: usize) {
    let path = run_dir(dir).join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() >= (page + 1) * 4096, "{name} has page {page}");
    bytes[page * 4096 + 10] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
}

fn expect_index_corrupt<T: std::fmt::Debug>(got: runlog::Result<T>, name: &str, page: u64) {
    match got {
        Err(Error::Corrupt {
            segment,
            offset,
            detail,
            ..
        }) => {
            assert_eq!(segment, name);
            assert_eq!(offset / 4096, page, "offset {offset} in page {page}");
            assert!(detail.contains(&format!("index page {page}")), "{detail}");
            assert!(detail.contains("checksum"), "{detail}");
        }
        other => panic!("expected Corrupt naming {name}, got {other:?}"),
    }
}

#[test]
fn a_damaged_index_page_fails_the_read_and_the_append_that_reach_it_and_verify_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = build(dir.path());
    let names = indexes(dir.path());
    // An 8 KiB segment's index: page 0 the header, 1 the batch tree, 2 the ids, 3 the keys.
    damage_page(dir.path(), &names[0], 1);
    damage_page(dir.path(), &names[1], 3);
    let store = Store::open(dir.path(), small()).unwrap();
    // The open checked only page 0 of each index: it succeeds; what reaches a damaged page
    // fails with the file, page and offset, and reads elsewhere still work.
    expect_index_corrupt(store.read(&run, 0, 10), &names[0], 1);
    let tail = store.read(&run, 290, 10).unwrap();
    assert_eq!(tail.events.len(), 10);
    let keyed = NewEvent::new("step_completed", "{}").key("a-new-key");
    expect_index_corrupt(store.append_facts(&run, vec![keyed]), &names[1], 3);
    assert_eq!(store.last_seq(&run).unwrap(), 300, "nothing written");
    let report = store.verify_run(&run).unwrap();
    let idx: Vec<&str> = report.problems.iter().map(|p| p.segment.as_str()).collect();
    assert_eq!(idx, [names[0].as_str(), names[1].as_str()], "{report:?}");
    assert_eq!(report.problems[0].offset / 4096, 1);
    // Derived data: removing the damaged indexes has them rebuilt, and all is served again.
    drop(store);
    for n in &names[..2] {
        std::fs::remove_file(run_dir(dir.path()).join(n)).unwrap();
    }
    let store = Store::open(dir.path(), small()).unwrap();
    assert_eq!(store.read(&run, 0, 1000).unwrap().events.len(), 300);
    assert_eq!(indexes(dir.path()), names);
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

/// Rewrites index `name` in the layout of index version 1 (one checksum over the whole file):
/// the header fields the two versions share, no entries.
fn write_v1_index(dir: &Path, name: &str) {
    let path = run_dir(dir).join(name);
    let current = std::fs::read(&path).unwrap();
    let salt = u32::from_le_bytes(current[8..12].try_into().unwrap());
    let mut v1 = current[..56].to_vec();
    v1[4..8].copy_from_slice(&1u32.to_le_bytes());
    v1.extend_from_slice(&[0u8; 16]);
    let mut h = crc32fast::Hasher::new_with_initial(salt);
    h.update(&v1);
    v1.extend_from_slice(&h.finalize().to_le_bytes());
    std::fs::write(&path, v1).unwrap();
}

#[test]
fn an_index_of_the_old_layout_is_ignored_read_from_the_segment_and_rebuilt_by_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let (run, ids) = build(dir.path());
    let names = indexes(dir.path());
    for n in &names {
        write_v1_index(dir.path(), n);
    }
    let version = |n: &str| {
        let b = std::fs::read(run_dir(dir.path()).join(n)).unwrap();
        u32::from_le_bytes(b[4..8].try_into().unwrap())
    };
    {
        let ro = Store::open_read_only(dir.path(), small()).unwrap();
        let page = ro.read(&run, 0, 1000).unwrap();
        assert_eq!(page.events.len(), 300);
        assert!(
            names.iter().all(|n| version(n) == 1),
            "a reader writes nothing"
        );
        let report = ro.verify_run(&run).unwrap();
        assert!(report.problems.is_empty(), "{report:?}");
        assert_eq!(report.notes.len(), names.len(), "{report:?}");
    }
    let store = Store::open(dir.path(), small()).unwrap();
    check_everything(&store, &run, &ids);
    assert!(
        names.iter().all(|n| version(n) == 4),
        "a writer rebuilt them, in the version it writes"
    );
    let fresh = Store::open(dir.path(), small()).unwrap();
    check_everything(&fresh, &run, &ids);
    assert!(fresh.verify_run(&run).unwrap().problems.is_empty());
}
