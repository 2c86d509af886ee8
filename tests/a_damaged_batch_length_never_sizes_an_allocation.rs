//! A batch's length field read from a file is bounded by the committed length it lies within
//! before it sizes a buffer: a damaged length (here `u32::MAX`) in a batch that an open
//! segment's index names, or in a batch a live writer reads again to confirm a key, is
//! reported as the damage it is (`Error::Corrupt` naming the batch), never a 4 GiB allocation
//! (the `decode` fuzzer's 512 MiB allocation limit found the first) nor an I/O error.
//!
//! A counter that claims more than its file holds (a checksum-valid slot, as a writer's bug
//! would leave) sizes no buffer of a backup either: the file's length is checked first, and
//! the run's backup fails naming it.
//!
//! The largest single allocation is measured by a counting allocator around the system one.

mod common;

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use runlog::{Config, Error, NewEvent, RunBackupResult, RunId, Store};

#[path = "common/largest_allocation.rs"]
mod largest_allocation;

use largest_allocation::LARGEST;

/// No buffer of the store may be near a damaged length: the run's files are a few KiB.
const ALLOCATION_MAX: usize = 64 << 20;

fn run() -> RunId {
    RunId::new("r").unwrap()
}

fn fact(i: usize) -> NewEvent {
    NewEvent::new("step_completed", format!("{{\"i\":{i}}}")).key(format!("k{i}"))
}

/// The offset of the batch holding the fact `{"i":<i>`.
fn batch_of(bytes: &[u8], i: usize) -> usize {
    let needle = format!("{{\"i\":{i}}}");
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap();
    common::batch_holding(bytes, at)
}

/// Writes `u32::MAX` over the length field of the batch holding fact `i`.
fn damage_length_of(root: &Path, i: usize) -> u64 {
    let path = root.join("runs/r/seg-00000001.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = batch_of(&bytes, i);
    common::set_batch_len(&mut bytes, at, u32::MAX);
    std::fs::write(&path, &bytes).unwrap();
    at as u64
}

/// Runs `f`, returning its result and the largest allocation made meanwhile (one measure at
/// a time: the tests of this file run in parallel, and only the damaged reads are large).
fn largest_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    LARGEST.store(0, Ordering::Relaxed);
    let out = f();
    (out, LARGEST.load(Ordering::Relaxed))
}

fn assert_corrupt_at(got: Result<impl std::fmt::Debug, Error>, batch: u64) {
    match got {
        Err(Error::Corrupt { offset, detail, .. }) => assert_eq!(offset, batch, "{detail}"),
        other => panic!("expected Corrupt at the damaged batch {batch}, got {other:?}"),
    }
}

#[test]
fn a_damaged_batch_length_is_corruption_not_an_allocation_of_its_size() {
    // 1. A writer adopting the open segment's index checks the last batch it names: that
    //    batch's length is damaged. The index is not adopted; the batches are decoded, and the
    //    damage is found there.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    {
        let config = Config {
            open_segment_index_events: 1,
            ..Config::default()
        };
        let store = Store::open(root, config).unwrap();
        store.create_run(&run()).unwrap();
        for i in 0..3 {
            store.append_facts(&run(), vec![fact(i)]).unwrap();
        }
        // Reading a key builds the dedupe maps, so closing leaves the open segment's index.
        assert!(store.append_facts(&run(), vec![fact(0)]).unwrap()[0].duplicate);
    }
    assert!(root.join("runs/r/seg-00000001.idx").exists());
    let batch = damage_length_of(root, 2);
    let (got, largest) = largest_during(|| {
        let store = Store::open(root, Config::default()).unwrap();
        store.append_facts(&run(), vec![fact(9)])
    });
    assert!(largest < ALLOCATION_MAX, "an allocation of {largest} bytes");
    assert_corrupt_at(got, batch);

    // 2. A live writer confirms a key's hit by reading its event's batch again: the batch's
    //    length was damaged since it was scanned.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let store = Store::open(root, Config::default()).unwrap();
    store.create_run(&run()).unwrap();
    for i in 0..3 {
        store.append_facts(&run(), vec![fact(i)]).unwrap();
    }
    assert!(store.append_facts(&run(), vec![fact(1)]).unwrap()[0].duplicate);
    let batch = damage_length_of(root, 1);
    let (got, largest) = largest_during(|| store.append_facts(&run(), vec![fact(1)]));
    assert!(largest < ALLOCATION_MAX, "an allocation of {largest} bytes");
    assert_corrupt_at(got, batch);
}

/// Rewrites the newest counter slot of the sealed segment 1 of run `r` with `committed_len`
/// (a valid checksum: damage no checksum catches, as a writer's bug would leave).
fn forge_committed_len(root: &Path, committed_len: u64) {
    use runlog::format::{CounterSlot, SLOT_OFFSETS, SegmentHeader, pick_slot};
    let path = root.join("runs/r/seg-00000001.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let salt = SegmentHeader::decode(&bytes).unwrap().salt;
    let slot = |i: usize| {
        let at = SLOT_OFFSETS[i] as usize;
        CounterSlot::decode(&bytes[at..], salt, i)
    };
    let newest = pick_slot(slot(0), slot(1)).unwrap();
    assert!(newest.sealed);
    let forged = CounterSlot {
        committed_len,
        ..newest
    };
    let at = forged.offset() as usize;
    bytes[at..at + forged.encode(salt).len()].copy_from_slice(&forged.encode(salt));
    std::fs::write(&path, &bytes).unwrap();
}

#[test]
fn a_backup_of_a_counter_claiming_more_than_its_file_allocates_no_more_than_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    let config = Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    };
    {
        let store = Store::open(&root, config.clone()).unwrap();
        store.create_run(&run()).unwrap();
        for i in 0..400 {
            store.append_facts(&run(), vec![fact(i)]).unwrap();
        }
        assert!(root.join("runs/r/seg-00000002.log").exists());
    }
    forge_committed_len(&root, 4 << 30);
    let (report, largest) = largest_during(|| {
        let store = Store::open(&root, config).unwrap();
        store.backup(tmp.path().join("dst"), &mut |_| {}).unwrap()
    });
    assert!(largest < ALLOCATION_MAX, "an allocation of {largest} bytes");
    assert!(!report.complete, "{report:?}");
    let [one] = &report.runs[..] else {
        panic!("{report:?}")
    };
    match &one.result {
        RunBackupResult::Failed {
            error: Error::Corrupt { offset, detail, .. },
        } => {
            let len = std::fs::metadata(root.join("runs/r/seg-00000001.log"))
                .unwrap()
                .len();
            assert_eq!(*offset, len, "{detail}");
            assert!(
                detail.contains("committed length is 4294967296"),
                "{detail}"
            );
        }
        other => panic!("{other:?}"),
    }
}
