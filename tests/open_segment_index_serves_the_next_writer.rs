//! The open segment's index (format/SPEC.md §9): a writer that built the dedupe maps leaves an
//! index of its last, unsealed segment when it closes the run, and the next view takes that
//! segment's first batches from it — their locations, keys and ids — instead of decoding
//! them. What it must never change: every duplicate is still found (by key and by caller id,
//! in the indexed prefix and in the batches after it), reads give the same events, damage is
//! reported as without it, and an index that no longer fits its segment (cut by a repair,
//! replaced by the seal's) is not used.

use std::path::{Path, PathBuf};

mod common;

use runlog::{Config, Error, NewEvent, RunId, Store};
use ulid::Ulid;

fn config() -> Config {
    Config {
        open_segment_index_events: 16,
        ..Config::default()
    }
}

fn no_index_writes() -> Config {
    Config {
        open_segment_index_events: u64::MAX,
        ..Config::default()
    }
}

fn run() -> RunId {
    RunId::new("r").unwrap()
}

fn index_file(root: &Path) -> PathBuf {
    root.join("runs/r/seg-00000001.idx")
}

fn segment_file(root: &Path) -> PathBuf {
    root.join("runs/r/seg-00000001.log")
}

fn fact(i: usize) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}")).key(format!("k{i}"))
}

/// Appends facts `from..to` with keys `k{i}`, ten per batch.
fn append(store: &Store, from: usize, to: usize) {
    let mut i = from;
    while i < to {
        let n = (to - i).min(10);
        let batch: Vec<NewEvent> = (i..i + n).map(fact).collect();
        let got = store.append_facts(&run(), batch).unwrap();
        assert!(got.iter().all(|a| !a.duplicate));
        i += n;
    }
}

/// A run of 100 keyed facts written by a writer that closed it: the open segment's index
/// covers seqs 1..=100. Returns their event ids.
fn indexed_run(root: &Path) -> Vec<Ulid> {
    let store = Store::open(root, config()).unwrap();
    store.create_run(&run()).unwrap();
    append(&store, 0, 100);
    ids(&store)
}

/// Facts `from..to` appended by a writer that writes no index: past the index's counter.
fn append_unindexed(root: &Path, from: usize, to: usize) {
    let store = Store::open(root, no_index_writes()).unwrap();
    append(&store, from, to);
}

/// Flips a bit of the payload of the fact `{"i":<i>` (a batch past the index for i ≥ 100).
fn flip_payload_of(root: &Path, i: usize) {
    let needle = format!("{{\"i\":{i}");
    let mut bytes = std::fs::read(segment_file(root)).unwrap();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap();
    bytes[at + needle.len() - 1] ^= 0x01;
    std::fs::write(segment_file(root), &bytes).unwrap();
}

fn ids(store: &Store) -> Vec<Ulid> {
    let page = store.read(&run(), 0, 10_000).unwrap();
    page.events.iter().map(|e| e.event_id).collect()
}

#[test]
fn the_next_writer_finds_every_duplicate_through_the_index_and_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let first_ids = indexed_run(root);
    assert!(
        index_file(root).exists(),
        "closing left the open segment's index"
    );
    // Another writer that writes no index appends 20 more: the index covers 1..=100 only.
    append_unindexed(root, 100, 120);
    let store = Store::open(root, config()).unwrap();
    // By key: in the prefix the index covers, and in the batches after it.
    for (i, seq) in [(0, 1), (57, 58), (99, 100), (100, 101), (119, 120)] {
        let got = store.append_facts(&run(), vec![fact(i)]).unwrap();
        assert!(got[0].duplicate, "key k{i}");
        assert_eq!(got[0].seq, seq, "key k{i}");
    }
    // By caller id: an id of the prefix presented again is the event it names.
    let again = NewEvent::new("step_completed", "{}").event_id(first_ids[41]);
    let got = store.append_facts(&run(), vec![again]).unwrap();
    assert!(got[0].duplicate);
    assert_eq!(got[0].seq, 42);
    // A new key is new, at the next seq; the reads give every event once, dense.
    let got = store.append_facts(&run(), vec![fact(500)]).unwrap();
    assert_eq!((got[0].seq, got[0].duplicate), (121, false));
    let page = store.read(&run(), 0, 10_000).unwrap();
    assert_eq!(page.events.len(), 121);
    for (n, e) in page.events.iter().enumerate() {
        assert_eq!(e.seq, n as u64 + 1);
    }
    assert_eq!(&ids(&store)[..100], &first_ids[..]);
    let report = store.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

#[test]
fn the_indexed_prefix_is_not_decoded_and_its_damage_is_reported_by_the_read_that_reaches_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    indexed_run(root);
    // A flipped bit in the first batch's payload, inside the prefix the index covers.
    flip_payload_of(root, 3);

    let store = Store::open(root, config()).unwrap();
    // The writer's first keyed append is served by the index: nothing of the prefix is
    // decoded, so it succeeds (a sealed segment's index works the same way).
    let got = store.append_facts(&run(), vec![fact(77)]).unwrap();
    assert!(got[0].duplicate);
    assert_eq!(got[0].seq, 78);
    // The read that reaches the damaged batch fails loudly, at that batch.
    let read = store.read(&run(), 0, 10);
    assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
    let report = store.verify_run(&run()).unwrap();
    assert!(!report.problems.is_empty(), "verify reports the flip");
}

#[test]
fn damage_after_the_indexed_prefix_is_reported_as_without_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let built = tmp.path().join("built");
    indexed_run(&built);
    append_unindexed(&built, 100, 130);
    // A flip in a batch written after the index's counter.
    flip_payload_of(&built, 115);
    // The same files twice, one copy without the index.
    let outcome = |keep_index: bool| {
        let root = tmp.path().join(format!("copy-{keep_index}"));
        common::copy_tree(&built, &root);
        if !keep_index {
            std::fs::remove_file(index_file(&root)).unwrap();
        }
        let store = Store::open(&root, config()).unwrap();
        let append = store.append_facts(&run(), vec![fact(999)]);
        let Err(Error::Corrupt { offset, detail, .. }) = append else {
            panic!("{append:?}");
        };
        let read = store.read(&run(), 0, 1000).map(|p| p.events.len());
        (offset, detail, format!("{read:?}"))
    };
    let with = outcome(true);
    assert_eq!(with, outcome(false));
    assert_eq!(
        with.2, "Ok(110)",
        "the events before the damaged batch read"
    );
}

#[test]
fn a_repair_removes_the_index_and_a_seal_replaces_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    indexed_run(root);
    append_unindexed(root, 100, 130);
    flip_payload_of(root, 115);
    let store = Store::open(root, config()).unwrap();
    let repair = store.repair_run(&run()).unwrap().expect("damaged");
    assert_eq!(repair.last_seq, 110);
    assert!(!index_file(root).exists(), "the repair removed the index");
    // Writes go on after the cut; the next view finds them all and no stale index.
    append(&store, 110, 140);
    drop(store);
    let store = Store::open(root, config()).unwrap();
    let got = store.append_facts(&run(), vec![fact(120)]).unwrap();
    assert_eq!((got[0].seq, got[0].duplicate), (121, true));
    assert_eq!(store.read(&run(), 0, 1000).unwrap().events.len(), 140);
    drop(store);

    // Rolled: the sealed segment's index replaces the open one, and keys are still found.
    let small = Config {
        segment_len_bytes_max: 8 << 10,
        ..config()
    };
    let store = Store::open(root, small.clone()).unwrap();
    append(&store, 140, 400);
    drop(store);
    let store = Store::open(root, small).unwrap();
    assert!(store.run_info(&run()).unwrap().segment_count >= 2);
    for (i, seq) in [(3, 4), (139, 140), (399, 400)] {
        let got = store.append_facts(&run(), vec![fact(i)]).unwrap();
        assert_eq!((got[0].seq, got[0].duplicate), (seq, true), "key k{i}");
    }
    let report = store.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

#[test]
fn a_damaged_page_of_the_open_segments_index_is_reported_by_verify_and_costs_a_writer_a_decode() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    indexed_run(root);
    let store = Store::open_read_only(root, config()).unwrap();
    let clean = store.verify_run(&run()).unwrap();
    assert!(
        clean.problems.is_empty() && clean.notes.is_empty(),
        "{clean:?}"
    );
    drop(store);
    // A flipped byte in the last page (the key tree's only page, which taking the index up
    // reads nothing of): a writer would take the index up, so verify names the index and page.
    let mut bytes = std::fs::read(index_file(root)).unwrap();
    let pages = bytes.len() / 4096;
    assert!(pages >= 4, "{pages} pages");
    bytes[(pages - 1) * 4096 + 10] ^= 0x40;
    std::fs::write(index_file(root), &bytes).unwrap();
    let store = Store::open_read_only(root, config()).unwrap();
    let report = store.verify_run(&run()).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:?}");
    assert_eq!(report.problems[0].segment, "seg-00000001.idx", "{report:?}");
    let page = format!("index page {}", pages - 1);
    assert!(report.problems[0].detail.contains(&page), "{report:?}");
    // The index is derived: the writer whose keyed lookup reads that page reads the
    // segment's batches instead, and finds every key where it is, a new one new.
    drop(store);
    let store = Store::open(root, config()).unwrap();
    for (i, seq, duplicate) in [(7, 8, true), (99, 100, true), (500, 101, false)] {
        let got = store.append_facts(&run(), vec![fact(i)]).unwrap();
        assert_eq!((got[0].seq, got[0].duplicate), (seq, duplicate), "key k{i}");
    }
    assert_eq!(store.read(&run(), 0, 1000).unwrap().events.len(), 101);
    drop(store);
    // Its close wrote the index anew: verify is clean, and the next writer is served by it.
    let report = Store::open_read_only(root, config())
        .unwrap()
        .verify_run(&run())
        .unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    let store = Store::open(root, no_index_writes()).unwrap();
    let got = store.append_facts(&run(), vec![fact(57)]).unwrap();
    assert_eq!((got[0].seq, got[0].duplicate), (58, true));
}

/// Damage that makes the open segment's index unfit for adoption (its header page, which a
/// reader checks before taking it up): readers read the segment's batches instead, and verify
/// says so in a note, as it does for a sealed segment's ignored index (SPEC §9; found by a
/// breaker: 1,639 of 9,831 such flips gave verify nothing to say).
#[test]
fn an_open_segments_index_that_readers_ignore_is_a_note_of_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    indexed_run(root);
    let mut bytes = std::fs::read(index_file(root)).unwrap();
    bytes[30] ^= 0x01;
    std::fs::write(index_file(root), &bytes).unwrap();
    let store = Store::open_read_only(root, config()).unwrap();
    assert_eq!(store.read(&run(), 0, 1000).unwrap().events.len(), 100);
    let report = store.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, 100);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.segment == "seg-00000001.idx" && n.detail.contains("ignored")),
        "{report:?}"
    );
}

/// An index left from before a cut (an older build's repair, or a copy put back by hand) over
/// batches written again after it: not adopted, and every lookup answers what the batches
/// alone say.
#[test]
fn an_index_of_bytes_cut_and_written_again_is_not_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    indexed_run(root);
    let stale = std::fs::read(index_file(root)).unwrap();
    // Damage inside the indexed prefix, in the batch of seqs 51..=60, cut by a repair.
    flip_payload_of(root, 55);
    let store = Store::open(root, config()).unwrap();
    let repair = store.repair_run(&run()).unwrap().expect("damaged");
    assert_eq!(repair.last_seq, 50);
    // Written again past the old length, other keys, batches of the same shape.
    append(&store, 1050, 1100);
    drop(store);
    std::fs::write(index_file(root), &stale).unwrap();

    let store = Store::open(root, no_index_writes()).unwrap();
    for (i, seq, duplicate) in [
        (10, 11, true),    // before the cut
        (1060, 61, true),  // written again after it
        (55, 101, false),  // cut: new again
        (99, 102, false),  // cut: new again
        (1099, 100, true), // the last one written again
    ] {
        let got = store.append_facts(&run(), vec![fact(i)]).unwrap();
        assert_eq!((got[0].seq, got[0].duplicate), (seq, duplicate), "key k{i}");
    }
    assert_eq!(store.read(&run(), 0, 1000).unwrap().events.len(), 102);
    assert!(store.verify_run(&run()).unwrap().problems.is_empty());
}

/// Facts `from..to` in one batch, with the caller's ids `ids[i]` and keys `{prefix}{i}` (the
/// same lengths for every one-letter prefix).
fn with_ids(store: &Store, ids: &[Ulid], prefix: &str, from: usize, to: usize) -> Vec<(u64, bool)> {
    let batch = (from..to)
        .map(|i| {
            NewEvent::new("step_completed", format!("{{\"{prefix}\":{i}}}"))
                .key(format!("{prefix}{i}"))
                .event_id(ids[i])
        })
        .collect();
    let got = store.append_facts(&run(), batch).unwrap();
    got.iter().map(|a| (a.seq, a.duplicate)).collect()
}

#[test]
fn an_index_of_bytes_written_again_with_the_same_ids_and_length_is_not_adopted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let ids: Vec<Ulid> = (0..20)
        .map(|n| Ulid::from_parts(1_700_000_000_000, n))
        .collect();
    let store = Store::open(root, config()).unwrap();
    store.create_run(&run()).unwrap();
    with_ids(&store, &ids, "k", 0, 10);
    with_ids(&store, &ids, "k", 10, 20);
    let bytes = store.run_info(&run()).unwrap().committed_bytes;
    drop(store);
    let stale = std::fs::read(index_file(root)).unwrap();
    // Damage in the second batch, cut by a repair; the client sends the lost events again
    // with their ids, other keys and payloads of the same lengths: the segment ends where it
    // ended, and the batch the index ends at has the ids it had.
    let mut seg = std::fs::read(segment_file(root)).unwrap();
    let at = seg.windows(7).position(|w| w == b"{\"k\":15").unwrap();
    seg[at + 6] ^= 0x01;
    std::fs::write(segment_file(root), &seg).unwrap();
    let store = Store::open(root, no_index_writes()).unwrap();
    assert_eq!(
        store.repair_run(&run()).unwrap().expect("damaged").last_seq,
        10
    );
    assert!(
        with_ids(&store, &ids, "x", 10, 20)
            .iter()
            .all(|&(_, dup)| !dup)
    );
    assert_eq!(store.run_info(&run()).unwrap().committed_bytes, bytes);
    drop(store);
    std::fs::write(index_file(root), &stale).unwrap();

    let store = Store::open(root, no_index_writes()).unwrap();
    let report = store.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    // The keys written again are found where they are; the cut ones are new.
    for (key, seq, duplicate) in [("x12", 13, true), ("k12", 21, false)] {
        let fact = NewEvent::new("step_completed", "{}").key(key);
        let got = store.append_facts(&run(), vec![fact]).unwrap();
        assert_eq!(
            (got[0].seq, got[0].duplicate),
            (seq, duplicate),
            "key {key}"
        );
    }
    let keys: Vec<Option<String>> = store
        .read(&run(), 0, 100)
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.key.map(String::from))
        .collect();
    assert_eq!(
        keys.iter().filter(|k| k.as_deref() == Some("x12")).count(),
        1
    );
    assert_eq!(keys.len(), 21);
}
