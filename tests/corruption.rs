//! Every byte of a small real segment flipped, one at a time (issue 4 §4; rule 5 of
//! INVARIANTS.md).
//!
//! The segment (`seg-00000001.log`, ≈ 4.6 KiB) holds run metadata and four batches: a keyed
//! fact with a correlation id, a three-event batch, a fenced two-event decision, a single
//! fact. For each byte offset and each mask (0xFF, then 0x01) the test writes a copy of the
//! file with that byte XORed with the mask into a copy of the store, opens the store afresh, runs `verify_run`, then reads the
//! whole run. What must happen depends on where the byte is (offsets from format/SPEC.md
//! §2–§4, found by parsing the file, not by asking the store):
//!
//! | bytes | covered by | expected |
//! |---|---|---|
//! | 0–7 magic | magic check | `Corrupt` at 0 (verify and read) |
//! | 12–511 fixed header, reserved zeros, header crc | header crc (bytes 0–507) | `Corrupt` at 508 |
//! | newest header counter slot (64 bytes), when it is the run's newest counter | slot crc | slot invalid, indistinguishable from a slot torn by a crash (SPEC §3): the older slot counts; verify reports no problem and one note (an uncommitted tail, adopted on the next open); reads return every event |
//! | older header counter slot (64 bytes), or either one when the lock file's commit slot is newer (the case here: 4 commits, no checkpoint yet) | slot crc | slot invalid, a newer counter counts; verify clean; reads return every event |
//! | metadata (1536 .. 1536 + meta_len) | meta crc | `Corrupt` at 1536 |
//! | 576–1023, 1088–1535 (rest of the slot sectors), 1536 + meta_len – 4095 (rest of the header region) | nothing: zero padding that no reader interprets | verify clean, no note; reads return every event |
//! | a batch's length field | range check or batch crc | `Corrupt` at the batch start or at its length field (start + 4) |
//! | any other batch byte | magic or batch crc | `Corrupt` at the batch start |
//!
//! In every case reads return either exactly the original events or a typed error, nothing
//! panics, and a `Corrupt` run's file is left exactly as it was (never repaired by truncation).
//!
//! The run's lock file gets the same treatment: a flip in its newest commit slot makes the
//! older commit slot count (a note, then adoption), anything else in it is harmless.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runlog::{Config, Error, Event, NewEvent, RunId, Store};

const SEGMENT: &str = "seg-00000001.log";
/// Each byte is flipped whole (0xFF) and in its lowest bit (0x01), one at a time.
const MASKS: [u8; 2] = [0xFF, 0x01];
const META: &[u8] = b"provenance: os_corruption test v1";

/// What flipping one byte must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Expect {
    /// `Corrupt` at exactly this offset.
    CorruptAt(u64),
    /// `Corrupt` at this batch start or at its length field (the second offset).
    CorruptBatchLen(u64, u64),
    /// The newest counter slot: verify notes the tail after the older slot's committed length.
    NewestSlot { older_committed_len: u64 },
    /// The older counter slot: no effect.
    OlderSlot,
    /// Padding covered by nothing: no effect.
    Uncovered,
    /// The lock file's entries record (SPEC §3): a damaged one is ignored (the next writer
    /// syncs the directories again), no effect on what is read.
    EntriesRecord,
    /// Preallocated zeros past the last batch (SPEC §5): a flip there is indistinguishable
    /// from a torn tail: verify notes it, the next open truncates it, reads are unaffected.
    Preallocated,
}

impl Expect {
    fn class(self) -> &'static str {
        match self {
            Expect::CorruptAt(0) => "magic",
            Expect::CorruptAt(508) => "fixed header",
            Expect::CorruptAt(1536) => "metadata",
            Expect::CorruptAt(_) | Expect::CorruptBatchLen(..) => "batches",
            Expect::NewestSlot { .. } => "newest slot",
            Expect::OlderSlot => "older slot",
            Expect::Uncovered => "uncovered padding",
            Expect::EntriesRecord => "entries record",
            Expect::Preallocated => "preallocated zeros",
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Generation of the counter slot at `at` of `image` (0 when no slot magic is there).
fn generation_at(image: &[u8], at: usize) -> u64 {
    match image.get(at..at + 16) {
        Some(slot) if slot[..4] == *b"SLOT" => u64_at(slot, 8),
        _ => 0,
    }
}

/// The two slot positions (512, 1024) as (newest, older) by generation.
fn newest_and_older(image: &[u8]) -> (usize, usize) {
    if generation_at(image, 512) > generation_at(image, 1024) {
        (512, 1024)
    } else {
        (1024, 512)
    }
}

/// The expectation for every byte of the lock file image `lock` (SPEC §1, §3): its newest
/// commit slot is the run's counter when its generation beats `header_generation`.
fn lock_expectations(lock: &[u8], header_generation: u64) -> Vec<Expect> {
    let (newest, older) = newest_and_older(lock);
    let counts = generation_at(lock, newest) > header_generation;
    let older_committed_len = u64_at(lock, older + 24);
    (0..lock.len())
        .map(|i| match i {
            _ if counts && (newest..newest + 64).contains(&i) => Expect::NewestSlot {
                older_committed_len,
            },
            _ if (512..576).contains(&i) || (1024..1088).contains(&i) => Expect::OlderSlot,
            _ if (1536..1600).contains(&i) => Expect::EntriesRecord,
            _ => Expect::Uncovered,
        })
        .collect()
}

/// The expectation for every byte of the segment `image`, from the layout in
/// format/SPEC.md; `lock_generation` is the newest commit slot's generation in the run's
/// lock file (a header slot only matters when it is newer).
fn expectations(image: &[u8], lock_generation: u64) -> Vec<Expect> {
    let meta_end = 1536 + u16::from_le_bytes([image[50], image[51]]) as usize;
    let (newest, older) = newest_and_older(image);
    let newest = if generation_at(image, newest) > lock_generation {
        newest
    } else {
        usize::MAX - 64
    };
    let older_committed_len = u64_at(image, older + 24);
    let mut batches = Vec::new();
    let mut at = 4096;
    // The batches of the segment's frame (format/SPEC.md §4b; new segments are version 3).
    while let Some(len) = common::batch_len_at(image, at) {
        batches.push(at);
        at += len;
    }
    let batches_end = at;
    assert!(
        image[batches_end..].iter().all(|&b| b == 0),
        "batches, then preallocated zeros"
    );
    (0..image.len())
        .map(|i| match i {
            0..8 => Expect::CorruptAt(0),
            8..512 => Expect::CorruptAt(508),
            _ if (newest..newest + 64).contains(&i) => Expect::NewestSlot {
                older_committed_len,
            },
            _ if (512..576).contains(&i) || (1024..1088).contains(&i) => Expect::OlderSlot,
            _ if (1536..meta_end).contains(&i) => Expect::CorruptAt(1536),
            _ if i < 4096 => Expect::Uncovered,
            _ if i >= batches_end => Expect::Preallocated,
            _ => {
                let start = batches[batches.partition_point(|&b| b <= i) - 1];
                let len_field = common::batch_len_field(image, start);
                if len_field.contains(&i) {
                    Expect::CorruptBatchLen(start as u64, len_field.start as u64)
                } else {
                    Expect::CorruptAt(start as u64)
                }
            }
        })
        .collect()
}

/// A store with one run of four batches; returns its directory, the run and its events.
fn build_original(dir: &Path) -> (RunId, Vec<Event>) {
    // Without preallocation: every byte of the file is the header's, a slot's or a batch's
    // (zeros past the batches are the last test's).
    let config = Config {
        preallocate_from_bytes: u64::MAX,
        ..Config::default()
    };
    let store = Store::open(dir, config).unwrap();
    let run = RunId::new("flip").unwrap();
    store.create_run_with_meta(&run, META).unwrap();
    let hook = NewEvent::new("hook_received", "{\"ok\":true}")
        .key("hook-1")
        .correlation_id("hook_1");
    store.append_facts(&run, vec![hook]).unwrap();
    let steps = (0..3).map(|i| NewEvent::new("step_completed", format!("{{\"step\":{i}}}")));
    let steps: Vec<NewEvent> = steps
        .enumerate()
        .map(|(i, e)| if i == 1 { e.key("s1") } else { e })
        .collect();
    store.append_facts(&run, steps).unwrap();
    let decisions = vec![
        NewEvent::new("step_created", "{\"step\":\"a\"}").correlation_id("step_a"),
        NewEvent::new("wait_created", "{\"ms\":1000}").correlation_id("wait_a"),
    ];
    store.append_decisions(&run, 4, decisions).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("run_completed", "{}")])
        .unwrap();
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(events.len(), 7);
    (run, events)
}

/// Where the flipped copies live: memory-backed `/dev/shm` when present, since every flip
/// opens the store afresh and `Store::open` syncs the store directory (on a disk that is
/// ~10,000 directory fsyncs); the flips test content checks, not durability.
fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Everything one flip produced.
struct Outcome {
    verify: runlog::VerifyReport,
    read: Result<Vec<Event>, Error>,
    verify_after_read: runlog::VerifyReport,
    file_after: Vec<u8>,
}

/// Every event of the run, page after page; the first error ends it (a damaged run returns
/// the events before the damage, then fails where the next read starts).
fn read_all(store: &Store, run: &RunId) -> Result<Vec<Event>, Error> {
    let mut events = Vec::new();
    loop {
        let page = store.read(run, events.len() as u64, usize::MAX)?;
        events.extend(page.events);
        if !page.has_more {
            return Ok(events);
        }
    }
}

fn flip_and_open(store_dir: &Path, run: &RunId, segment: &Path, image: &[u8]) -> Outcome {
    std::fs::write(segment, image).unwrap();
    let store = Store::open(store_dir, Config::default()).unwrap();
    let verify = store.verify_run(run).unwrap();
    let read = read_all(&store, run);
    let verify_after_read = store.verify_run(run).unwrap();
    drop(store);
    Outcome {
        verify,
        read,
        verify_after_read,
        file_after: std::fs::read(segment).unwrap(),
    }
}

#[test]
fn every_byte_of_a_segment_flipped_is_reported_at_its_offset_or_provably_harmless() {
    let original_dir = tempfile::tempdir().unwrap();
    let (run, events) = build_original(original_dir.path());
    let copy_dir = scratch_dir();
    common::copy_tree(original_dir.path(), copy_dir.path());
    let segment: PathBuf = copy_dir
        .path()
        .join("runs")
        .join(run.as_str())
        .join(SEGMENT);
    let original = std::fs::read(&segment).unwrap();
    let plan = expectations(&original, lock_generation(copy_dir.path(), &run));
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, &expect) in plan.iter().enumerate() {
        for mask in MASKS {
            let mut image = original.clone();
            image[i] ^= mask;
            let out = flip_and_open(copy_dir.path(), &run, &segment, &image);
            check_flip(i, expect, &out, &image, &events);
        }
        *counts.entry(expect.class()).or_default() += 1;
    }
    let committed_len = lock_committed_len(copy_dir.path(), &run);
    let (batches, meta_len) = (committed_len - 4096, META.len());
    // Built without preallocation (SPEC §5); the last test covers that space.
    assert_eq!(original.len(), committed_len);
    let flips = plan.len() * MASKS.len();
    println!(
        "byte flips: {flips} ({} bytes × {MASKS:?}), bytes by class: {counts:?}",
        plan.len()
    );
    let want: BTreeMap<&str, usize> = [
        ("magic", 8),
        ("fixed header", 504),
        ("older slot", 128),
        ("metadata", meta_len),
        ("uncovered padding", 448 + 448 + (2560 - meta_len)),
        ("batches", batches),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, want);
}

fn lock_path(store: &Path, run: &RunId) -> PathBuf {
    store.join("runs").join(run.as_str()).join("lock")
}

/// Committed length named by the newest commit slot in the run's lock file.
fn lock_committed_len(store: &Path, run: &RunId) -> usize {
    let lock = std::fs::read(lock_path(store, run)).unwrap();
    let (newest, _) = newest_and_older(&lock);
    u64_at(&lock, newest + 24) as usize
}

/// Generation of the newest commit slot in the run's lock file.
fn lock_generation(store: &Path, run: &RunId) -> u64 {
    let lock = std::fs::read(lock_path(store, run)).unwrap();
    generation_at(&lock, 512).max(generation_at(&lock, 1024))
}

#[test]
fn every_byte_of_the_lock_file_flipped_is_harmless_or_falls_back_to_the_older_commit_slot() {
    let original_dir = tempfile::tempdir().unwrap();
    let (run, events) = build_original(original_dir.path());
    let copy_dir = scratch_dir();
    common::copy_tree(original_dir.path(), copy_dir.path());
    let segment = copy_dir
        .path()
        .join("runs")
        .join(run.as_str())
        .join(SEGMENT);
    let header = std::fs::read(&segment).unwrap();
    let header_generation = generation_at(&header, 512).max(generation_at(&header, 1024));
    let lock = lock_path(copy_dir.path(), &run);
    let original = std::fs::read(&lock).unwrap();
    assert_eq!(
        original.len(),
        1600,
        "pid record, two commit slots, the entries record"
    );
    let plan = lock_expectations(&original, header_generation);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, &expect) in plan.iter().enumerate() {
        for mask in MASKS {
            let mut image = original.clone();
            image[i] ^= mask;
            std::fs::write(&segment, &header).unwrap();
            let out = flip_and_open(copy_dir.path(), &run, &lock, &image);
            check_flip(i, expect, &out, &image, &events);
        }
        *counts.entry(expect.class()).or_default() += 1;
    }
    let want: BTreeMap<&str, usize> = [
        ("newest slot", 64),
        ("older slot", 64),
        ("entries record", 64),
        ("uncovered padding", 1600 - 192),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, want);
}

fn check_flip(i: usize, expect: Expect, out: &Outcome, image: &[u8], events: &[Event]) {
    let ctx = format!("byte {i} ({expect:?})");
    match expect {
        Expect::CorruptAt(offset) => check_corrupt(&ctx, out, image, &[offset]),
        Expect::CorruptBatchLen(start, len_at) => check_corrupt(&ctx, out, image, &[start, len_at]),
        Expect::NewestSlot {
            older_committed_len,
        } => {
            assert!(out.verify.problems.is_empty(), "{ctx}: {:?}", out.verify);
            let notes = &out.verify.notes;
            assert!(
                notes.len() == 1 && notes[0].offset == older_committed_len,
                "{ctx}: {notes:?}"
            );
            check_reads_right(&ctx, out, events);
        }
        Expect::Preallocated => {
            assert!(out.verify.problems.is_empty(), "{ctx}: {:?}", out.verify);
            let notes = &out.verify.notes;
            assert!(
                notes.len() == 1 && notes[0].detail.contains("torn bytes"),
                "{ctx}: {notes:?}"
            );
            check_reads_right(&ctx, out, events);
        }
        Expect::OlderSlot | Expect::Uncovered | Expect::EntriesRecord => {
            assert!(
                out.verify.problems.is_empty() && out.verify.notes.is_empty(),
                "{ctx}: {:?}",
                out.verify
            );
            check_reads_right(&ctx, out, events);
        }
    }
}

/// Verify and read both name the segment and one of `offsets` (the same one), and the file
/// is left exactly as it was.
fn check_corrupt(ctx: &str, out: &Outcome, image: &[u8], offsets: &[u64]) {
    let p = &out.verify.problems;
    assert!(
        p.len() == 1 && p[0].segment == SEGMENT,
        "{ctx}: verify found {p:?}"
    );
    assert!(
        offsets.contains(&p[0].offset),
        "{ctx}: verify offset {} not in {offsets:?}",
        p[0].offset
    );
    match &out.read {
        Err(Error::Corrupt {
            run,
            segment,
            offset,
            ..
        }) => {
            assert_eq!((run.as_str(), segment.as_str()), ("flip", SEGMENT), "{ctx}");
            assert_eq!(
                *offset, p[0].offset,
                "{ctx}: read and verify name the same offset"
            );
        }
        other => panic!("{ctx}: expected Corrupt, got {other:?}"),
    }
    assert_eq!(
        out.verify_after_read, out.verify,
        "{ctx}: nothing repaired or hidden"
    );
    assert!(
        out.file_after == image,
        "{ctx}: a corrupt segment is never truncated or rewritten"
    );
}

fn check_reads_right(ctx: &str, out: &Outcome, events: &[Event]) {
    match &out.read {
        Ok(got) => assert!(
            got == events,
            "{ctx}: reads return exactly the original events"
        ),
        Err(e) => panic!("{ctx}: read failed: {e}"),
    }
    let after = &out.verify_after_read;
    assert!(
        after.problems.is_empty() && after.notes.is_empty(),
        "{ctx}: {after:?}"
    );
    assert_eq!(after.events, events.len() as u64, "{ctx}");
}

/// Rule 5 on every read, not only on open: a byte of a committed batch flipped in place under
/// a store that has the run open and cached makes the next read fail with `Corrupt` at that
/// batch (start, or length field), and restoring the byte makes the same store read the
/// original events again. A flipped counter slot under the live store changes nothing read.
#[test]
fn a_byte_flipped_under_a_live_store_fails_the_next_read_at_its_batch() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (run, events) = build_original(dir.path());
    let path = dir.path().join("runs").join(run.as_str()).join(SEGMENT);
    let original = std::fs::read(&path).unwrap();
    let plan = expectations(&original, lock_generation(dir.path(), &run));
    let store = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(store.read(&run, 0, usize::MAX).unwrap().events, events);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut flips = 0;
    for (i, &expect) in plan.iter().enumerate() {
        let offsets = match expect {
            Expect::CorruptAt(start) if i >= 4096 => vec![start],
            Expect::CorruptBatchLen(start, len_at) => vec![start, len_at],
            Expect::NewestSlot { .. } | Expect::OlderSlot | Expect::Preallocated => vec![],
            _ => continue,
        };
        for mask in MASKS {
            file.write_all_at(&[original[i] ^ mask], i as u64).unwrap();
            let read = store.read(&run, 0, usize::MAX).map(|p| p.events);
            match (&read, offsets.is_empty()) {
                (Ok(got), true) => assert!(got == &events, "byte {i}: right events"),
                (Err(Error::Corrupt { offset, .. }), false) => {
                    assert!(
                        offsets.contains(offset),
                        "byte {i}: offset {offset} not in {offsets:?}"
                    )
                }
                _ => panic!("byte {i} ({expect:?}): got {read:?}"),
            }
            file.write_all_at(&original[i..=i], i as u64).unwrap();
            assert_eq!(
                store.read(&run, 0, usize::MAX).unwrap().events,
                events,
                "byte {i} restored"
            );
            flips += 1;
        }
    }
    println!("live byte flips: {flips}");
    assert_eq!(flips, (original.len() - 4096 + 128) * MASKS.len());
}

/// SPEC §5–§6: a segment past 64 KiB is followed by preallocated zeros. They are not a torn
/// tail (verify is clean), a flipped byte there is one (verify notes it, the next open
/// truncates it), and reads are unaffected either way.
#[test]
fn preallocated_zeros_are_clean_and_a_flip_in_them_is_a_torn_tail_truncated_at_open() {
    let dir = scratch_dir();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("big").unwrap();
    store.create_run(&run).unwrap();
    // Past 64 KiB, until the preallocated zeros after the last batch are at least 4 KiB
    // (where the last extension fell depends on the frame's sizes).
    let segment = dir.path().join("runs").join(run.as_str()).join(SEGMENT);
    for i in 0..400 {
        let e = NewEvent::new("step_completed", vec![b'x'; 1000 + i]);
        store.append_facts(&run, vec![e]).unwrap();
        let committed = 4096 + store.run_info(&run).unwrap().committed_bytes;
        let file_len = std::fs::metadata(&segment).unwrap().len();
        if i >= 79 && file_len >= committed + 4096 {
            break;
        }
    }
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    drop(store);
    let original = std::fs::read(&segment).unwrap();
    let committed_len = lock_committed_len(dir.path(), &run);
    assert!(committed_len > 64 << 10);
    let zeros = &original[committed_len..];
    assert!(
        zeros.len() >= 4096 && zeros.iter().all(|&b| b == 0),
        "{}",
        zeros.len()
    );
    let clean = Store::open(dir.path(), Config::default()).unwrap();
    let report = clean.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    drop(clean);
    for i in [0, 1, 3, 4, 100, zeros.len() / 2, zeros.len() - 1] {
        let mut image = original.clone();
        image[committed_len + i] = 0x5A;
        let out = flip_and_open(dir.path(), &run, &segment, &image);
        check_flip(
            committed_len + i,
            Expect::Preallocated,
            &out,
            &image,
            &events,
        );
        assert_eq!(
            out.file_after.len(),
            committed_len,
            "truncated at the last batch"
        );
    }
}
