//! A run whose view adopts its open segment's index (format/SPEC.md §9) keeps the batches it
//! found there, not the index pages it read to find and check them (4 KiB each, five for
//! this run: 31,984 bytes of heap held before the fix, 10,040 after). The live heap of the
//! open run is counted by the benches' counting allocator.

#[allow(dead_code)]
#[path = "../benches/open_support.rs"]
mod open_support;

use open_support::Footprint;
use runlog::{Config, NewEvent, RunId, Store};

fn config(index_events: u64) -> Config {
    Config {
        open_segment_index_events: index_events,
        ..Config::default()
    }
}

/// Writes `events` keyed facts to run `r`, 100 per batch, through a store whose close leaves
/// (or not) the open segment's index; returns the heap held by run `r` opened afresh and
/// its last event read.
fn heap_of_open_run(events: u64, index_events: u64) -> (u64, bool) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    {
        let store = Store::open(dir.path(), config(index_events)).unwrap();
        store.create_run(&run).unwrap();
        for b in 0..events / 100 {
            let batch = (b * 100..b * 100 + 100)
                .map(|i| {
                    NewEvent::new("step_completed", format!("{{\"i\":{i:08}}}"))
                        .key(format!("k{i}"))
                })
                .collect();
            store.append_facts(&run, batch).unwrap();
        }
    }
    let indexed = dir.path().join("runs/r/seg-00000001.idx").exists();
    let store = Store::open_read_only(dir.path(), config(index_events)).unwrap();
    // One-off costs of the first run of a process, paid before measuring.
    let warm = RunId::new("w").unwrap();
    let _ = store.last_seq(&warm);
    let before = Footprint::of(dir.path()).heap;
    let last = store.last_seq(&run).unwrap();
    assert_eq!(last, events);
    let got = store.read(&run, last - 1, 1).unwrap();
    assert_eq!(got.events.len(), 1);
    assert_eq!(got.events[0].seq, events);
    let heap = Footprint::of(dir.path()).heap - before;
    drop(got);
    (heap, indexed)
}

#[test]
fn an_adopted_open_segment_index_keeps_none_of_its_pages() {
    let (heap, indexed) = heap_of_open_run(20_000, 16);
    assert!(indexed, "the writer left the open segment's index");
    // The view keeps 200 batch locations (32 bytes each, in a vector grown by doubling: 8 KiB)
    // and less than one index page besides.
    assert!(
        heap < 8192 + 4096,
        "the open run holds {heap} bytes of heap"
    );
}
