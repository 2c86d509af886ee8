//! The lock file's commit slots (SPEC §3) when they are lost, stale or forged, as seen by
//! fresh openers and by handles that are already open (rules 4, 6, 7, 10, 11).
//!
//! Several `Store` handles on one directory stand in for several processes: each handle opens
//! its own descriptor of the run's `lock` file, so `flock` excludes them from each other
//! exactly as it excludes processes, and each keeps its own cached view of the run.
//!
//! SPEC §3: a lock file that is "missing, short or stale (a crash can lose its unsynced page)
//! only makes the header the newest counter". A fresh opener that recovers from the header
//! numbers its counters from the header's generation, possibly *below* the generation an open
//! handle has cached; open handles therefore judge a counter by its content (committed length,
//! sealed) before its generation, so they keep seeing every commit and seal of the others.

use std::path::{Path, PathBuf};

use runlog::format::{CounterSlot, HEADER_LEN, SegmentHeader};
use runlog::{Config, Error, NewEvent, RunId, Store};

fn ev(tag: &str) -> NewEvent {
    // Fixed-size payloads: every batch has the same length.
    NewEvent::new("step_completed", format!("{tag:>100}"))
}

fn payload_of(store: &Store, run: &RunId, seq: u64) -> String {
    let page = store.read(run, seq - 1, 1).unwrap();
    assert_eq!(page.events.len(), 1, "seq {seq} missing");
    String::from_utf8(page.events[0].payload.to_vec())
        .unwrap()
        .trim()
        .to_string()
}

fn lock_path(dir: &Path, run: &RunId) -> PathBuf {
    dir.join("runs").join(run.as_str()).join("lock")
}

fn seg_path(dir: &Path, run: &RunId, index: u32) -> PathBuf {
    dir.join("runs")
        .join(run.as_str())
        .join(format!("seg-{index:08}.log"))
}

/// Truncates the lock file in place (same inode: every open handle keeps sharing it).
fn truncate_lock(dir: &Path, run: &RunId) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(lock_path(dir, run))
        .unwrap();
    f.set_len(0).unwrap();
}

/// A store with `n` events `e1..en` in one run; returns the run's committed batch bytes.
fn setup(n: usize) -> (tempfile::TempDir, RunId, u64) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("wrun_lockslots").unwrap();
    let a = Store::open(dir.path(), Config::default()).unwrap();
    a.create_run(&run).unwrap();
    for i in 1..=n {
        let got = a.append_facts(&run, vec![ev(&format!("e{i}"))]).unwrap();
        assert_eq!(got[0].seq, i as u64);
    }
    let bytes = a.run_info(&run).unwrap().committed_bytes;
    (dir, run, bytes)
}

/// Rules 6, 7: an open handle sees what another handle committed and acknowledged. After the
/// lock file is truncated (same inode), a fresh writer recovers from the header (generation
/// 2) and commits seq 7 at generation 4, below the generation 8 the open handle has cached;
/// the open handle still sees seq 7.
#[test]
fn open_handle_sees_commits_made_after_the_lock_file_was_truncated() {
    let (dir, run, _) = setup(6);
    let b = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(b.last_seq(&run).unwrap(), 6);
    truncate_lock(dir.path(), &run);
    let c = Store::open(dir.path(), Config::default()).unwrap();
    let acked = c.append_facts(&run, vec![ev("e7")]).unwrap();
    assert_eq!(acked[0].seq, 7);
    assert_eq!(
        b.last_seq(&run).unwrap(),
        7,
        "an open handle does not see seq 7, committed and acknowledged by another handle"
    );
    let page = b.read(&run, 6, 10).unwrap();
    assert_eq!(
        page.events.len(),
        1,
        "read after 6 is not complete (rule 6)"
    );
}

/// Rules 6, 7 with an *old copy* of the lock file written back over it (`cp lock.bak lock`:
/// same inode, same salt, older generations), which SPEC §3 calls harmless: a fresh opener
/// adopts the events past the stale counter, and the open handles see its next commit.
#[test]
fn open_handle_sees_commits_made_after_an_old_lock_file_was_copied_back() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("wrun_oldcopy").unwrap();
    let a = Store::open(dir.path(), Config::default()).unwrap();
    a.create_run(&run).unwrap();
    a.append_facts(&run, vec![ev("e1")]).unwrap();
    a.append_facts(&run, vec![ev("e2")]).unwrap();
    let old = std::fs::read(lock_path(dir.path(), &run)).unwrap();
    for i in 3..=10 {
        a.append_facts(&run, vec![ev(&format!("e{i}"))]).unwrap();
    }
    let b = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(b.last_seq(&run).unwrap(), 10);
    std::fs::write(lock_path(dir.path(), &run), &old).unwrap();
    let c = Store::open(dir.path(), Config::default()).unwrap();
    // The fresh opener is fine: recovery adopts e3..e10 past the stale counter.
    assert_eq!(c.last_seq(&run).unwrap(), 10);
    assert_eq!(c.append_facts(&run, vec![ev("e11")]).unwrap()[0].seq, 11);
    assert_eq!(
        b.last_seq(&run).unwrap(),
        11,
        "an open handle does not see seq 11 after a stale lock file was restored"
    );
    assert_eq!(
        a.last_seq(&run).unwrap(),
        11,
        "the original writer does not see seq 11 either"
    );
}

/// Rules 4, 11 and density: a writer whose cached view is stale never replaces a segment that
/// holds acknowledged events, and never hands out a seq twice. With the lock file truncated:
/// - handle C recovers (header generation 3) and its append rolls: seg 1 is sealed at
///   generation 4, seg 2 is created and holds C's acknowledged `e7` at seq 7;
/// - handle B (seg 1 cached unsealed at generation 8) appends: it follows the seal although
///   its generation is lower (a seal outranks an unsealed counter), and segment creation
///   never renames over an existing segment; so `e7` stays at seq 7 and B's event, if
///   accepted, is seq 8.
#[test]
fn a_stale_cached_writer_never_replaces_a_segment_holding_acked_events() {
    let (dir, run, bytes) = setup(6);
    // Segment 1 is full exactly at e6: the next append rolls.
    let cfg = Config {
        segment_len_bytes_max: HEADER_LEN + bytes,
        ..Config::default()
    };
    let b = Store::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(b.last_seq(&run).unwrap(), 6);
    truncate_lock(dir.path(), &run);
    let c = Store::open(dir.path(), cfg.clone()).unwrap();
    let acked = c.append_facts(&run, vec![ev("e7")]).unwrap();
    assert_eq!(acked[0].seq, 7);
    assert!(seg_path(dir.path(), &run, 2).exists());
    drop(c);

    let got = b.append_facts(&run, vec![ev("e8")]);
    let d = Store::open(dir.path(), cfg).unwrap();
    let page = d.read(&run, 0, 100).unwrap();
    let payloads: Vec<String> = page
        .events
        .iter()
        .map(|e| {
            String::from_utf8(e.payload.to_vec())
                .unwrap()
                .trim()
                .to_string()
        })
        .collect();
    assert!(
        payloads.iter().any(|p| p == "e7"),
        "acknowledged e7 (seq 7) is gone: {payloads:?}; B's append returned {got:?}"
    );
    assert_eq!(payload_of(&d, &run, 7), "e7");
    if let Ok(a) = got {
        assert_eq!(a[0].seq, 8, "seq 7 was handed out twice");
    }
    let report = d.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// The segment's salt, read from its header.
fn salt_of(path: &Path) -> u32 {
    let bytes = std::fs::read(path).unwrap();
    SegmentHeader::decode(&bytes[..HEADER_LEN as usize])
        .unwrap()
        .salt
}

/// Writes a correctly salted commit slot into the lock file.
fn forge_commit_slot(dir: &Path, run: &RunId, slot: CounterSlot) {
    let salt = salt_of(&seg_path(dir, run, 1));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(lock_path(dir, run))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &slot.encode(salt), slot.offset()).unwrap();
}

/// No panic on any input: a correctly salted commit slot with generation `u64::MAX` (above
/// `GENERATION_MAX`, so invalid) and an otherwise true counter gives either a typed `Corrupt`
/// or a working append at seq 3 that another handle sees, never a panic or a wrapped
/// generation.
#[test]
fn commit_slot_with_generation_u64_max_gives_no_panic() {
    let (dir, run, bytes) = setup(2);
    forge_commit_slot(
        dir.path(),
        &run,
        CounterSlot {
            generation: u64::MAX,
            last_seq: 2,
            committed_len: HEADER_LEN + bytes,
            updated_at_ms: 0,
            sealed: false,
            repair_epoch: 0,
        },
    );
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.append_facts(&run, vec![ev("e3")])
    }));
    match got {
        Err(_) => panic!("append panicked on a commit slot of generation u64::MAX"),
        Ok(Ok(a)) => {
            assert_eq!(a[0].seq, 3);
            let other = Store::open(dir.path(), Config::default()).unwrap();
            assert_eq!(other.last_seq(&run).unwrap(), 3);
        }
        Ok(Err(e)) => assert!(matches!(e, Error::Corrupt { .. }), "{e:?}"),
    }
}

/// Rule 5 and rule 11 for forged counters: a correctly salted commit slot with a higher
/// generation whose committed length lies past the end of the file, or inside a batch, is a
/// typed `Corrupt` for a fresh opener's reads and writes and a problem for `verify_run`, and
/// nothing is truncated or overwritten: once the lock file is emptied again, every acked event
/// reads back.
#[test]
fn forged_commit_slot_past_eof_or_mid_batch_is_corrupt_and_harmless() {
    let (dir, run, bytes) = setup(3);
    let end = HEADER_LEN + bytes;
    let batch = bytes / 3;
    // The file goes on past `end` with the zeros preallocated to the end of its block.
    let file_len = std::fs::metadata(seg_path(dir.path(), &run, 1))
        .unwrap()
        .len();
    assert_eq!(file_len, end.next_multiple_of(4096));
    let past_eof = file_len + 4096;
    for (committed_len, last_seq) in [(past_eof, 4), (end + 1, 3), (end - batch / 2, 3)] {
        forge_commit_slot(
            dir.path(),
            &run,
            CounterSlot {
                generation: 1001,
                last_seq,
                committed_len,
                updated_at_ms: 0,
                sealed: false,
                repair_epoch: 0,
            },
        );
        let store = Store::open(dir.path(), Config::default());
        let store = match store {
            Ok(s) => s,
            Err(e) => panic!("Store::open is lazy: {e:?}"),
        };
        // The events before the bad counter's claim stay readable; the read that reaches it
        // fails (rule 5).
        let head = store.read(&run, 0, 10).unwrap();
        // Every batch wholly inside the claimed committed length (two of three when it ends
        // mid-batch).
        let whole = if committed_len < end { 2 } else { 3 };
        assert_eq!(head.events.len(), whole, "committed_len {committed_len}");
        assert!(head.has_more, "committed_len {committed_len}");
        let read = store.read(&run, head.next, 10);
        assert!(
            matches!(read, Err(Error::Corrupt { .. })),
            "committed_len {committed_len}: {read:?}"
        );
        let append = store.append_facts(&run, vec![ev("x")]);
        assert!(
            matches!(append, Err(Error::Corrupt { .. })),
            "committed_len {committed_len}: {append:?}"
        );
        let report = store.verify_run(&run).unwrap();
        assert!(!report.problems.is_empty(), "verify must report the slot");
        assert_eq!(
            std::fs::metadata(seg_path(dir.path(), &run, 1))
                .unwrap()
                .len(),
            file_len,
            "the segment was truncated or extended"
        );
        truncate_lock(dir.path(), &run);
    }
    let store = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 3);
    assert_eq!(payload_of(&store, &run, 3), "e3");
}

/// Rule 6 with the lock file deleted, or replaced by a fresh empty file (a new inode), while
/// handles are open: each handle sees its old lock file unlinked and reopens the run, so the
/// open handles see each other's acknowledged commits, keep appending densely, and
/// `verify_run` is clean.
#[test]
fn lock_file_deleted_or_replaced_while_open_keeps_handles_in_step() {
    for replace in [false, true] {
        let (dir, run, _) = setup(4);
        let b = Store::open(dir.path(), Config::default()).unwrap();
        assert_eq!(b.last_seq(&run).unwrap(), 4);
        let lock = lock_path(dir.path(), &run);
        if replace {
            let tmp = lock.with_extension("new");
            std::fs::write(&tmp, b"").unwrap();
            std::fs::rename(&tmp, &lock).unwrap();
        } else {
            std::fs::remove_file(&lock).unwrap();
        }
        let c = Store::open(dir.path(), Config::default()).unwrap();
        assert_eq!(c.append_facts(&run, vec![ev("e5")]).unwrap()[0].seq, 5);
        assert_eq!(b.last_seq(&run).unwrap(), 5, "replace={replace}");
        assert_eq!(b.append_facts(&run, vec![ev("e6")]).unwrap()[0].seq, 6);
        assert_eq!(c.last_seq(&run).unwrap(), 6, "replace={replace}");
        assert_eq!(payload_of(&c, &run, 5), "e5");
        assert_eq!(payload_of(&b, &run, 6), "e6");
        let report = c.verify_run(&run).unwrap();
        assert!(report.problems.is_empty(), "{report:?}");
    }
}

/// Rules 10, 11 with SPEC §3/§5 header checkpoints: 200 commits (three checkpoints), then the
/// lock file emptied with no handle open, as a power loss that lost its unsynced page would
/// leave it: `verify_run` reports no problem (only a note on the batches past the
/// checkpoint), a fresh opener sees all 200 events and appends at 201, and another fresh
/// opener then agrees.
#[test]
fn lost_commit_slots_fall_back_to_the_header_checkpoint() {
    let (dir, run, _) = setup(200);
    truncate_lock(dir.path(), &run);
    let probe = Store::open(dir.path(), Config::default()).unwrap();
    let report = probe.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(
        report.events < 200 && report.events >= 200 - 64,
        "the header checkpoint should count all but the last < 64 commits: {report:?}"
    );
    assert_eq!(report.notes.len(), 1, "{report:?}");
    let c = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(c.last_seq(&run).unwrap(), 200);
    assert_eq!(c.append_facts(&run, vec![ev("e201")]).unwrap()[0].seq, 201);
    let d = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(d.last_seq(&run).unwrap(), 201);
    assert_eq!(payload_of(&d, &run, 200), "e200");
    assert_eq!(payload_of(&d, &run, 201), "e201");
    let report = d.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.events, 201);
}

/// Rules 6–7 with a stale commit slot of a *newer* generation (an old lock file whose slots
/// were renumbered, or forged): the counter is behind every open handle's content, so they
/// ignore it, and the next commit must outrank it by generation or the other open handles
/// would keep picking the stale slot and never see that commit.
#[test]
fn a_commit_after_a_stale_slot_of_newer_generation_is_seen_by_open_handles() {
    let (dir, run, bytes) = setup(4);
    let b = Store::open(dir.path(), Config::default()).unwrap();
    let d = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(
        (b.last_seq(&run).unwrap(), d.last_seq(&run).unwrap()),
        (4, 4)
    );
    // Generation 100 naming the state after event 2 (both slots, so it is the newest).
    let per_batch = bytes / 4;
    for generation in [100, 99] {
        forge_commit_slot(
            dir.path(),
            &run,
            CounterSlot {
                generation,
                last_seq: 2,
                committed_len: HEADER_LEN + 2 * per_batch,
                updated_at_ms: 0,
                sealed: false,
                repair_epoch: 0,
            },
        );
    }
    assert_eq!(
        d.last_seq(&run).unwrap(),
        4,
        "a counter behind the view is ignored"
    );
    assert_eq!(b.append_facts(&run, vec![ev("e5")]).unwrap()[0].seq, 5);
    assert_eq!(
        d.last_seq(&run).unwrap(),
        5,
        "the open handle sees the commit"
    );
    assert_eq!(payload_of(&d, &run, 5), "e5");
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    assert_eq!(fresh.last_seq(&run).unwrap(), 5);
    assert!(fresh.verify_run(&run).unwrap().problems.is_empty());
}
