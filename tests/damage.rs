//! Torn tail vs corruption, and damage contained to where it is (format/SPEC.md §6; rules 5
//! and 11 of INVARIANTS.md): only a tail with nothing valid after its first bad byte may be
//! cut; a bad batch followed by a valid one is `Corrupt`, nothing is truncated, the events
//! before it stay readable and a read fails only when it reaches it.

use std::path::{Path, PathBuf};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn seg(dir: &Path, run: &str) -> PathBuf {
    dir.join("runs").join(run).join("seg-00000001.log")
}

fn lock(dir: &Path, run: &str) -> PathBuf {
    dir.join("runs").join(run).join("lock")
}

/// A run of `n` single-event facts appended and acknowledged one by one; returns the offset
/// of each batch (they are all the same length).
fn run_of_single_facts(dir: &Path, run: &RunId, n: usize) -> Vec<u64> {
    let store = Store::open(dir, Config::default()).unwrap();
    store.create_run(run).unwrap();
    let mut offsets = Vec::new();
    let mut before = store.run_info(run).unwrap().committed_bytes;
    for i in 0..n {
        offsets.push(4096 + before);
        let e = NewEvent::new("step_completed", format!("{{\"i\":{i:04}}}"));
        assert_eq!(
            store.append_facts(run, vec![e]).unwrap()[0].seq,
            i as u64 + 1
        );
        before = store.run_info(run).unwrap().committed_bytes;
    }
    offsets
}

/// Where the run's committed batches end in its one segment (its header, then the batches).
fn committed_len(dir: &Path, run: &RunId) -> u64 {
    let store = Store::open_read_only(dir, Config::default()).unwrap();
    4096 + store.run_info(run).unwrap().committed_bytes
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

fn all_kinds(store: &Store, run: &RunId) -> Result<Vec<u64>, Error> {
    let mut seqs = Vec::new();
    loop {
        let page = store.read(run, seqs.len() as u64, 5)?;
        seqs.extend(page.events.iter().map(|e| e.seq));
        if !page.has_more {
            return Ok(seqs);
        }
    }
}

#[test]
fn a_lost_counter_and_a_flipped_byte_past_it_is_corrupt_not_a_shorter_log() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let offsets = run_of_single_facts(dir.path(), &run, 20);
    // Power loss as it may leave things: the unsynced commit slots of the lock file are gone
    // (the header checkpoint lags: it counts no batch), and a byte in the middle of batch 13 is bad.
    std::fs::write(lock(dir.path(), "r1"), b"").unwrap();
    flip(&seg(dir.path(), "r1"), (offsets[12] + offsets[13]) / 2);
    let len_before = std::fs::metadata(seg(dir.path(), "r1")).unwrap().len();

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let first = store.read(&run, 0, 100).unwrap();
    assert_eq!(first.events.len(), 12, "the valid prefix is readable");
    assert!(
        first.has_more,
        "a read that stops at damage says more follows"
    );
    match store.read(&run, 12, 100) {
        Err(Error::Corrupt {
            run,
            segment,
            offset,
            ..
        }) => {
            assert_eq!((run.as_str(), segment.as_str()), ("r1", "seg-00000001.log"));
            assert_eq!(offset, offsets[12]);
        }
        other => panic!("expected Corrupt at batch 13, got {other:?}"),
    }
    assert!(matches!(
        store.append_facts(&run, vec![NewEvent::new("k", "x")]),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(
        std::fs::metadata(seg(dir.path(), "r1")).unwrap().len(),
        len_before,
        "nothing truncated"
    );
    let report = store.verify_run(&run).unwrap();
    assert_eq!(
        report.problems.len(),
        1,
        "verify reports the corruption: {report:?}"
    );
    assert_eq!(report.problems[0].offset, offsets[12]);
}

#[test]
fn a_bad_batch_inside_the_committed_region_keeps_the_events_before_it_readable() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r2").unwrap();
    let offsets = run_of_single_facts(dir.path(), &run, 10);
    flip(&seg(dir.path(), "r2"), (offsets[5] + offsets[6]) / 2);
    let bytes_before = std::fs::read(seg(dir.path(), "r2")).unwrap();

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let head = store.read(&run, 0, 3).unwrap();
    assert_eq!(
        head.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(head.has_more);
    let page = store.read(&run, 3, 100).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [4, 5]
    );
    assert!(page.has_more);
    assert!(
        matches!(all_kinds(&store, &run), Err(Error::Corrupt { offset, .. }) if offset == offsets[5])
    );
    assert!(matches!(
        store.append_decisions(&run, 5, vec![NewEvent::new("k", "x")]),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(
        std::fs::read(seg(dir.path(), "r2")).unwrap(),
        bytes_before,
        "no byte changed"
    );
}

#[test]
fn a_torn_tail_with_nothing_valid_after_it_is_still_cut() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r3").unwrap();
    run_of_single_facts(dir.path(), &run, 5);
    let path = seg(dir.path(), "r3");
    let len = committed_len(dir.path(), &run);
    // A torn write at the committed length (over the preallocated zeros of the block, SPEC
    // §5): the start of a batch (its magic, version 3 as the segment: SPEC §4b) and garbage,
    // nothing valid after it.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(len as usize);
    bytes.extend_from_slice(b"R3");
    bytes.extend((0..300u32).map(|i| (i * 7 + 3) as u8));
    std::fs::write(&path, bytes).unwrap();

    let store = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(all_kinds(&store, &run).unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        len,
        "the torn tail was cut"
    );
    assert_eq!(
        store
            .append_facts(&run, vec![NewEvent::new("k", "x")])
            .unwrap()[0]
            .seq,
        6
    );
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn repair_cuts_at_the_first_bad_batch_only_when_asked_and_keeps_the_cut_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r4").unwrap();
    let offsets = run_of_single_facts(dir.path(), &run, 20);
    std::fs::write(lock(dir.path(), "r4"), b"").unwrap();
    let path = seg(dir.path(), "r4");
    flip(&path, (offsets[12] + offsets[13]) / 2);
    let original = std::fs::read(&path).unwrap();

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let healthy = RunId::new("ok").unwrap();
    store.create_run(&healthy).unwrap();
    assert_eq!(
        store.repair_run(&healthy).unwrap(),
        None,
        "nothing to repair"
    );
    let done = store
        .repair_run(&run)
        .unwrap()
        .expect("the run was damaged");
    assert_eq!(
        (done.segment.as_str(), done.offset, done.last_seq),
        ("seg-00000001.log", offsets[12], 12)
    );
    let kept = std::fs::read(&done.saved).unwrap();
    assert_eq!(
        kept,
        original[offsets[12] as usize..],
        "the cut bytes are kept whole"
    );
    assert_eq!(done.saved_bytes, kept.len() as u64);
    assert!(done.saved.starts_with(dir.path().join("repair")));

    assert_eq!(
        all_kinds(&store, &run).unwrap(),
        (1..=12).collect::<Vec<_>>()
    );
    assert_eq!(
        store
            .append_facts(&run, vec![NewEvent::new("k", "x")])
            .unwrap()[0]
            .seq,
        13
    );
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(fresh.last_seq(&run).unwrap(), 13);
    assert!(fresh.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn a_damaged_run_is_listed_with_its_error_and_hides_no_other_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    for name in ["a", "b", "c", "d"] {
        let run = RunId::new(name).unwrap();
        store.create_run(&run).unwrap();
        store
            .append_facts(&run, vec![NewEvent::new("k", name)])
            .unwrap();
    }
    drop(store);
    // b: its first segment is gone; c: a flipped byte in its segment header.
    std::fs::remove_file(seg(dir.path(), "b")).unwrap();
    flip(&seg(dir.path(), "c"), 100);

    let store = Store::open(dir.path(), Config::default()).unwrap();
    let page = store.list_runs(None, 10).unwrap();
    let healthy: Vec<&str> = page.runs.iter().map(|r| r.run.as_str()).collect();
    assert_eq!(healthy, ["a", "d"]);
    let damaged: Vec<(&str, bool)> = page
        .damaged
        .iter()
        .map(|d| (d.run.as_str(), d.corrupt))
        .collect();
    assert_eq!(damaged, [("b", true), ("c", true)]);
    assert!(
        page.damaged[0].error.contains("first segment is missing"),
        "{}",
        page.damaged[0].error
    );
    let small = store.list_runs(None, 2).unwrap();
    assert_eq!(
        (small.runs.len(), small.damaged.len(), small.has_more),
        (1, 1, true)
    );
    assert_eq!(small.next.as_ref().map(RunId::as_str), Some("b"));

    let b = RunId::new("b").unwrap();
    assert!(matches!(store.read(&b, 0, 10), Err(Error::Corrupt { .. })));
    assert!(matches!(
        store.append_facts(&b, vec![NewEvent::new("k", "x")]),
        Err(Error::Corrupt { .. })
    ));
    assert!(matches!(store.create_run(&b), Err(Error::RunExists { .. })));
}
