//! An open run's memory does not grow with its sealed segments: once the chain has grown past
//! a sealed segment served by its index, the view keeps only what opens that segment again
//! and checks it (its position, salt and base seq, its counter), not the segment's file,
//! header and index (`RunState::compact`, "parked"). A read or a key lookup that reaches it
//! opens it again; a file removed or replaced since is refused (`Io`, `NotFound`), never read;
//! a full read keeps only the last few segments it opened again, with their maps.
//!
//! The heap is counted by this binary's allocator (`common/largest_allocation.rs`): its tests
//! take turns (`SERIAL`), so that one's allocations never land in another's count.

#[path = "common/largest_allocation.rs"]
mod largest_allocation;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use largest_allocation::LIVE;
use runlog::{Config, Error, NewEvent, RunId, Store};

static SERIAL: Mutex<()> = Mutex::new(());

const PER_BATCH: u64 = 100;

fn config() -> Config {
    Config {
        segment_len_bytes_max: 64 << 10,
        ..Config::default()
    }
}

fn batch(b: u64) -> Vec<NewEvent> {
    (0..PER_BATCH)
        .map(|j| {
            NewEvent::new("step_completed", format!("{{\"b\":{b},\"j\":{j:08}}}"))
                .key(format!("k{b}-{j}"))
        })
        .collect()
}

/// Creates `run` and appends batches until it has `sealed` sealed segments, then three more
/// batches: every run made so has the same last segment (the batch that opened it and three
/// more), whatever `sealed` is. Returns the run's segment count after each batch.
fn fill(store: &Store, run: &RunId, sealed: u32) -> Vec<u32> {
    store.create_run(run).unwrap();
    let mut counts: Vec<u32> = Vec::new();
    while counts.iter().filter(|&&n| n == sealed + 1).count() < 4 {
        store.append_facts(run, batch(counts.len() as u64)).unwrap();
        let n = store.run_info(run).unwrap().segment_count;
        assert!(n <= sealed + 1, "a segment held fewer than four batches");
        counts.push(n);
    }
    counts
}

/// Heap bytes a fresh read-only `Store` holds once it has opened `run` and read its last event.
fn heap_of_open_run(dir: &Path, run: &RunId) -> (isize, Store) {
    let before = LIVE.load(Ordering::Relaxed);
    let store = Store::open_read_only(dir, config()).unwrap();
    let last = store.last_seq(run).unwrap();
    let page = store.read(run, last - 1, 1).unwrap();
    assert_eq!(page.events[0].seq, last);
    let after = LIVE.load(Ordering::Relaxed);
    (after as isize - before as isize, store)
}

#[test]
fn the_heap_of_an_open_run_does_not_grow_with_its_sealed_segments() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (warm, short, long) = (
        RunId::new("warm").unwrap(),
        RunId::new("short").unwrap(),
        RunId::new("long").unwrap(),
    );
    {
        let store = Store::open(dir.path(), config()).unwrap();
        fill(&store, &warm, 2);
        fill(&store, &short, 2);
        fill(&store, &long, 12);
    }
    // The process's one-off costs of a first open run, paid before anything is counted.
    let (_, _warm) = heap_of_open_run(dir.path(), &warm);
    let (short_heap, short_store) = heap_of_open_run(dir.path(), &short);
    drop(short_store);
    let (long_heap, long_store) = heap_of_open_run(dir.path(), &long);
    let per_segment = (long_heap - short_heap) / 10;
    // Each sealed segment held its `Segment` (header, paths, descriptor record) and its
    // index, some 2 KiB, before parking; what is left is its entry in the chain.
    assert!(
        per_segment <= 256,
        "an open run holds {per_segment} more bytes per sealed segment \
         (2 sealed: {short_heap} B, 12 sealed: {long_heap} B)"
    );
    // The parked segments still serve: the whole run, read from its start.
    let mut after = 0;
    loop {
        let page = long_store.read(&long, after, 1000).unwrap();
        for e in &page.events {
            assert_eq!(e.seq, after + 1);
            after = e.seq;
        }
        if !page.has_more {
            break;
        }
    }
    assert_eq!(after, long_store.last_seq(&long).unwrap());
    // And do not all come back: the view keeps the last few it opened again (4), besides the
    // first and the last segment, each with its map.
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains("/runs/long/seg-"))
        .count();
    assert!(
        maps <= 6,
        "a full read left {maps} maps of the run's 13 segments"
    );
}

#[test]
fn a_parked_segment_serves_reads_and_key_lookups_and_one_replaced_is_refused() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (run, other) = (RunId::new("run").unwrap(), RunId::new("other").unwrap());
    let counts = {
        let store = Store::open(dir.path(), config()).unwrap();
        fill(&store, &other, 3);
        fill(&store, &run, 6)
    };
    // The same run made in another store: the same events at the same seqs, in segments of
    // the same names and base seqs, each with a salt of its own. (A batch's header counts its
    // commit time from its segment's creation, SPEC §4b, so a batch may take a byte more in
    // one store than in the other and move a roll: made again until the rolls agree.)
    let twin = (0..8)
        .map(|_| {
            let twin = tempfile::tempdir().unwrap();
            let got = fill(&Store::open(twin.path(), config()).unwrap(), &run, 6);
            (twin, got)
        })
        .find(|(_, got)| *got == counts)
        .map(|(twin, _)| twin)
        .expect("a twin whose segments roll where the run's do");
    let store = Store::open(dir.path(), config()).unwrap();
    let last = store.last_seq(&run).unwrap();
    assert_eq!(last, counts.len() as u64 * PER_BATCH);
    // Event 50 of the first batch of segment 2, parked since the open walked past it.
    let b = counts.iter().position(|&n| n == 2).unwrap() as u64;
    let (seq, key) = (b * PER_BATCH + 50, format!("k{b}-49"));
    let page = store.read(&run, seq - 1, 1).unwrap();
    assert_eq!(page.events[0].seq, seq);
    assert_eq!(page.events[0].key.as_deref(), Some(key.as_str()));
    // A key held in a parked segment is found there: a duplicate at its seq, nothing written.
    let again = store
        .append_facts(&run, vec![NewEvent::new("step_completed", "x").key(key)])
        .unwrap();
    assert_eq!((again[0].seq, again[0].duplicate), (seq, true));
    let new = store
        .append_facts(
            &run,
            vec![NewEvent::new("step_completed", "x").key("fresh")],
        )
        .unwrap();
    assert_eq!((new[0].seq, new[0].duplicate), (last + 1, false));

    // Another `Store`'s view, parked, then segment 2 replaced by the twin's segment 2.
    let reader = Store::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(reader.last_seq(&run).unwrap(), last + 1);
    let seg2 = dir.path().join("runs/run/seg-00000002.log");
    let kept = std::fs::read(&seg2).unwrap();
    std::fs::write(
        &seg2,
        std::fs::read(twin.path().join("runs/run/seg-00000002.log")).unwrap(),
    )
    .unwrap();
    match reader.read(&run, seq - 1, 1) {
        Err(Error::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{source}");
            assert!(source.to_string().contains("replaced"), "{source}");
        }
        other => panic!("a replaced parked segment was read: {other:?}"),
    }
    // By another run's segment: its header names that run.
    std::fs::write(
        &seg2,
        std::fs::read(dir.path().join("runs/other/seg-00000002.log")).unwrap(),
    )
    .unwrap();
    match reader.read(&run, seq - 1, 1) {
        Err(Error::Corrupt {
            segment, detail, ..
        }) => {
            assert_eq!(segment, "seg-00000002.log");
            assert!(detail.contains("\"other\""), "{detail}");
        }
        other => panic!("another run's segment was read as this run's: {other:?}"),
    }
    // Put back, it serves again; removed, it is refused.
    std::fs::write(&seg2, &kept).unwrap();
    assert_eq!(reader.read(&run, seq - 1, 1).unwrap().events[0].seq, seq);
    // A parked segment's index damaged since the open (a byte of its page 0 flipped): the
    // read that needs it fails `Corrupt` naming it; removed, `Io` `NotFound`; put back whole,
    // it serves.
    let b3 = counts.iter().position(|&n| n == 3).unwrap() as u64;
    let seq3 = b3 * PER_BATCH + 50;
    let idx3 = dir.path().join("runs/run/seg-00000003.idx");
    let whole = std::fs::read(&idx3).unwrap();
    let index_reader = Store::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(index_reader.last_seq(&run).unwrap(), last + 1);
    let mut flipped = whole.clone();
    flipped[100] ^= 0x10;
    std::fs::write(&idx3, &flipped).unwrap();
    match index_reader.read(&run, seq3 - 1, 1) {
        Err(Error::Corrupt { segment, .. }) => assert_eq!(segment, "seg-00000003.idx"),
        other => panic!("a damaged index of a parked segment served: {other:?}"),
    }
    std::fs::remove_file(&idx3).unwrap();
    match index_reader.read(&run, seq3 - 1, 1) {
        Err(Error::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{source}")
        }
        other => panic!("a removed index of a parked segment served: {other:?}"),
    }
    std::fs::write(&idx3, &whole).unwrap();
    assert_eq!(
        index_reader.read(&run, seq3 - 1, 1).unwrap().events[0].seq,
        seq3
    );
    let reader = Store::open_read_only(dir.path(), config()).unwrap();
    assert_eq!(reader.last_seq(&run).unwrap(), last + 1);
    std::fs::remove_file(&seg2).unwrap();
    assert!(
        matches!(reader.read(&run, seq - 1, 1), Err(Error::Io { .. })),
        "a removed parked segment was read"
    );
}
