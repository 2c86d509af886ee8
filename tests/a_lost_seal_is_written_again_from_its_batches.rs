//! A bit flipped in a sealed segment's seal leaves its events and the segments after it intact,
//! and every reader fails `Corrupt` (`a_lost_seal_is_corruption_not_a_shorter_run.rs`).
//! `Store::restore_seals` writes the seal again from the segment's batches: the same last seq
//! and length the lost seal held, after which the whole run reads, verifies clean and takes
//! writes. When the batches do not give the seal (damaged too), nothing is written.

mod common;

use std::path::Path;

use runlog::format::{CounterSlot, HEADER_LEN, SegmentHeader};
use runlog::{Config, Error, NewEvent, RunId, Store};

fn config() -> Config {
    Config {
        segment_len_bytes_max: 4096 + 1500,
        ..Config::default()
    }
}

fn run() -> RunId {
    RunId::new("r").unwrap()
}

/// A run of four segments or more; its events.
fn build(dir: &Path) -> u64 {
    let store = Store::open(dir, config()).unwrap();
    store.create_run(&run()).unwrap();
    let mut i = 0;
    while store.run_info(&run()).unwrap().segment_count < 4 {
        let e = NewEvent::new("step_completed", format!("{{\"i\":{i}}}"));
        store.append_facts(&run(), vec![e]).unwrap();
        i += 1;
    }
    store.last_seq(&run()).unwrap()
}

fn segment(dir: &Path, n: u32) -> std::path::PathBuf {
    dir.join(format!("runs/r/seg-{n:08}.log"))
}

/// The seal of segment `n` as written, and the offset of its slot.
fn seal_of(dir: &Path, n: u32) -> (CounterSlot, u64) {
    let bytes = std::fs::read(segment(dir, n)).unwrap();
    let salt = SegmentHeader::decode(&bytes[..HEADER_LEN as usize])
        .unwrap()
        .salt;
    (0..2)
        .filter_map(|i| {
            let at = 512 + 512 * i;
            let slot = CounterSlot::decode(&bytes[at..], salt, i)?;
            slot.sealed.then_some((slot, at as u64))
        })
        .next()
        .expect("a sealed segment has a seal")
}

fn read_all(store: &Store) -> Result<(u64, bool), Error> {
    store
        .read(&run(), 0, usize::MAX)
        .map(|p| (p.events.len() as u64, p.has_more))
}

#[test]
fn each_lost_seal_is_written_again_with_what_it_held_and_the_run_reads_whole() {
    let built = tempfile::tempdir().unwrap();
    let n = build(built.path());
    for lost in [1u32, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        common::copy_tree(built.path(), dir.path());
        let (seal, at) = seal_of(dir.path(), lost);
        let next_base = SegmentHeader::decode(
            &std::fs::read(segment(dir.path(), lost + 1)).unwrap()[..HEADER_LEN as usize],
        )
        .unwrap()
        .base_seq;
        assert_eq!(seal.last_seq + 1, next_base, "segment {lost}");
        let len = std::fs::metadata(segment(dir.path(), lost)).unwrap().len();
        common::flip(&segment(dir.path(), lost), at + 9, 0x04);

        let store = Store::open(dir.path(), config()).unwrap();
        assert!(
            matches!(read_all(&store), Err(Error::Corrupt { .. })),
            "segment {lost}: the lost seal is loud before the restore"
        );
        let restored = store.restore_seals(&run()).unwrap();
        assert_eq!(restored.len(), 1, "segment {lost}: {restored:?}");
        let r = &restored[0];
        assert_eq!(r.segment, format!("seg-{lost:08}.log"));
        assert_eq!(
            (r.last_seq, r.committed_len),
            (seal.last_seq, seal.committed_len),
            "segment {lost}: what the lost seal held"
        );
        assert_eq!(r.committed_len, len, "a sealed segment ends at its seal");
        // The same handle (it failed on the lost seal) and a fresh read-only one see all of it.
        assert_eq!(read_all(&store).unwrap(), (n, false), "segment {lost}");
        assert_eq!(store.last_seq(&run()).unwrap(), n);
        let ro = Store::open_read_only(dir.path(), config()).unwrap();
        assert_eq!(read_all(&ro).unwrap(), (n, false));
        let report = ro.verify_run(&run()).unwrap();
        assert!(report.problems.is_empty(), "{report:?}");
        assert_eq!(report.events, n);
        assert!(
            report
                .notes
                .iter()
                .all(|note| !note.detail.contains("index")),
            "the segment's index is bound to the same seal again: {report:?}"
        );
        drop(ro);
        let seq = store
            .append_facts(&run(), vec![NewEvent::new("after", "x")])
            .unwrap()[0]
            .seq;
        assert_eq!(seq, n + 1);
        assert!(
            store.restore_seals(&run()).unwrap().is_empty(),
            "nothing lost any more"
        );
    }
}

/// A slot never written (zeros), or the older unsealed slot damaged, is no lost seal: nothing
/// is written and the run reads as before.
#[test]
fn a_damaged_older_slot_is_not_a_lost_seal_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let n = build(dir.path());
    let (_, seal_at) = seal_of(dir.path(), 2);
    let older = if seal_at == 512 { 1024 } else { 512 };
    common::flip(&segment(dir.path(), 2), older + 9, 0x04);
    let before = std::fs::read(segment(dir.path(), 2)).unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    assert!(store.restore_seals(&run()).unwrap().is_empty());
    assert_eq!(std::fs::read(segment(dir.path(), 2)).unwrap(), before);
    assert_eq!(read_all(&store).unwrap(), (n, false));
}

/// A lost seal over a damaged batch: the batches cannot say where the segment ended, so the
/// restore refuses `Corrupt` naming the batch, writes nothing, and the run stays loud.
#[test]
fn a_lost_seal_over_a_damaged_batch_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (_, at) = seal_of(dir.path(), 2);
    let seg = segment(dir.path(), 2);
    let len = std::fs::metadata(&seg).unwrap().len();
    common::flip(&seg, at + 9, 0x04);
    // A byte in the middle of the segment's batches.
    common::flip(&seg, HEADER_LEN + (len - HEADER_LEN) / 2, 0x10);
    let before = std::fs::read(&seg).unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let detail = refused_at_segment_2(&store);
    assert!(detail.contains("cannot be written again"), "{detail}");
    assert_eq!(std::fs::read(&seg).unwrap(), before, "nothing written");
    assert!(matches!(read_all(&store), Err(Error::Corrupt { .. })));
}

/// A read-only store refuses, as it refuses every write.
#[test]
fn a_read_only_store_refuses_to_restore() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let ro = Store::open_read_only(dir.path(), config()).unwrap();
    assert!(matches!(
        ro.restore_seals(&run()),
        Err(Error::ReadOnly { .. })
    ));
}

/// A seal slot that reads back as zeros (the slot, or its whole sector) or as an older valid
/// copy is no damaged slot, but no crash leaves a segment unsealed while the next exists (a
/// roll syncs the seal before it makes the next segment): every reader and verify report it
/// `Corrupt` instead of a run that ends early (found by a breaker: 26 of 49 events, verify
/// clean), and `restore_seals` writes the seal again with what it held.
#[test]
fn a_zeroed_or_stale_seal_slot_is_loud_and_written_again() {
    let built = tempfile::tempdir().unwrap();
    let n = build(built.path());
    let (seal, at) = seal_of(built.path(), 2);
    let stale = CounterSlot {
        generation: seal.generation - 2,
        last_seq: seal.last_seq - 3,
        committed_len: seal.committed_len - 60,
        sealed: false,
        ..seal
    };
    assert_eq!(stale.offset(), at, "an older generation of the same slot");
    let salt = SegmentHeader::decode(
        &std::fs::read(segment(built.path(), 2)).unwrap()[..HEADER_LEN as usize],
    )
    .unwrap()
    .salt;
    let cases: [(&str, u64, Vec<u8>); 3] = [
        ("slot zeroed", at, vec![0; 64]),
        ("sector zeroed", at, vec![0; 512]),
        ("older copy", at, stale.encode(salt).to_vec()),
    ];
    for (what, offset, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        common::copy_tree(built.path(), dir.path());
        {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(segment(dir.path(), 2))
                .unwrap();
            f.write_all_at(&bytes, offset).unwrap();
        }
        let loud = |e: Result<(u64, bool), Error>, who: &str| match e {
            Err(Error::Corrupt {
                segment, detail, ..
            }) => {
                assert_eq!(segment, "seg-00000002.log", "{what}, {who}: {detail}");
                assert!(detail.contains("seal is lost"), "{what}, {who}: {detail}");
            }
            other => panic!("{what}, {who}: {other:?}, not Corrupt"),
        };
        let ro = Store::open_read_only(dir.path(), config()).unwrap();
        loud(read_all(&ro), "read-only read");
        loud(
            ro.last_seq(&run()).map(|s| (s, false)),
            "read-only last_seq",
        );
        let report = ro.verify_run(&run()).unwrap();
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.segment == "seg-00000002.log" && p.detail.contains("seal is lost")),
            "{what}: {report:?}"
        );
        drop(ro);
        let store = Store::open(dir.path(), config()).unwrap();
        loud(read_all(&store), "writer read");
        assert!(
            store
                .append_facts(&run(), vec![NewEvent::new("after", "x")])
                .is_err(),
            "{what}: an append past a lost seal"
        );
        let restored = store.restore_seals(&run()).unwrap();
        assert_eq!(restored.len(), 1, "{what}");
        assert_eq!(
            (restored[0].last_seq, restored[0].committed_len),
            (seal.last_seq, seal.committed_len),
            "{what}"
        );
        assert_eq!(read_all(&store).unwrap(), (n, false), "{what}");
        // On disk: one slot sealed with what the lost seal held, the other still checking
        // (the newer of the two valid ones is kept, the seal takes the other's place).
        let bytes = std::fs::read(segment(dir.path(), 2)).unwrap();
        let slots: Vec<CounterSlot> = (0..2)
            .filter_map(|i| CounterSlot::decode(&bytes[512 + 512 * i..], salt, i))
            .collect();
        assert_eq!(slots.len(), 2, "{what}: both slots check");
        let sealed: Vec<_> = slots.iter().filter(|s| s.sealed).collect();
        assert_eq!(sealed.len(), 1, "{what}");
        assert_eq!(
            (sealed[0].last_seq, sealed[0].committed_len),
            (seal.last_seq, seal.committed_len)
        );
        let ro = Store::open_read_only(dir.path(), config()).unwrap();
        assert!(ro.verify_run(&run()).unwrap().problems.is_empty(), "{what}");
    }
}

/// Both slots of a sealed segment damaged: nothing to take the seal's generation and repair
/// epoch from; refused with a message that does not send the user back to the same command.
#[test]
fn both_slots_damaged_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    common::flip(&segment(dir.path(), 2), 512 + 9, 0x04);
    common::flip(&segment(dir.path(), 2), 1024 + 9, 0x04);
    let before = std::fs::read(segment(dir.path(), 2)).unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    let detail = refused_at_segment_2(&store);
    assert!(detail.contains("neither counter slot checks"), "{detail}");
    assert!(!detail.contains("runlog repair"), "{detail}");
    assert_eq!(std::fs::read(segment(dir.path(), 2)).unwrap(), before);
}

/// Seals lost in segments 1 and 2, and a batch of segment 2 damaged too: segment 1's seal is
/// written, and the refusal for segment 2 says so.
#[test]
fn a_refusal_after_a_written_seal_names_it() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    for n in [1, 2] {
        let (_, at) = seal_of(dir.path(), n);
        common::flip(&segment(dir.path(), n), at + 9, 0x04);
    }
    let seg = segment(dir.path(), 2);
    let len = std::fs::metadata(&seg).unwrap().len();
    common::flip(&seg, HEADER_LEN + (len - HEADER_LEN) / 2, 0x10);
    let store = Store::open(dir.path(), config()).unwrap();
    let detail = refused_at_segment_2(&store);
    assert!(
        detail.contains("the seals of seg-00000001.log were written again first"),
        "{detail}"
    );
    assert!(seal_of_checks(dir.path(), 1), "segment 1's seal is on disk");
}

fn seal_of_checks(dir: &Path, n: u32) -> bool {
    let bytes = std::fs::read(segment(dir, n)).unwrap();
    let salt = SegmentHeader::decode(&bytes[..HEADER_LEN as usize])
        .unwrap()
        .salt;
    (0..2).any(|i| CounterSlot::decode(&bytes[512 + 512 * i..], salt, i).is_some_and(|s| s.sealed))
}

/// The detail of `restore_seals`'s refusal, which must be `Corrupt` naming segment 2.
fn refused_at_segment_2(store: &Store) -> String {
    match store.restore_seals(&run()) {
        Err(Error::Corrupt {
            segment, detail, ..
        }) => {
            assert_eq!(segment, "seg-00000002.log", "{detail}");
            detail
        }
        other => panic!("{other:?}"),
    }
}

/// A run deleted while `restore_seals` waits for its lock (its directory renamed away, as a
/// delete does, by another hand that held the lock) is `RunNotFound`, not "no seal lost".
#[test]
fn a_run_deleted_while_the_restore_waits_is_not_found() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let lock = std::fs::File::open(dir.path().join("runs/r/lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let store = Store::open(
        dir.path(),
        Config {
            lock_timeout: std::time::Duration::from_secs(20),
            ..config()
        },
    )
    .unwrap();
    let restore = std::thread::spawn(move || store.restore_seals(&run()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::rename(dir.path().join("runs/r"), dir.path().join("gone-r")).unwrap();
    drop(lock);
    match restore.join().unwrap() {
        Err(Error::RunNotFound { run }) => assert_eq!(run, "r"),
        other => panic!("{other:?}"),
    }
}

/// A walker of the chain looks for the next segment with one `open`. When that open fails
/// for another reason than "no such file" or "not this user's" (no descriptor left, an I/O
/// error), the answer is unknown: an I/O error naming the file, which a later read retries,
/// never a lost seal (found by a breaker: the failure was taken for "exists", so a healthy
/// one-segment run read `Corrupt`, "seal is lost", and a backup recopied it).
#[test]
fn a_failed_look_for_the_next_segment_is_an_io_error_not_a_lost_seal() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), config()).unwrap();
    store.create_run(&run()).unwrap();
    let e = NewEvent::new("step_completed", "x");
    store.append_facts(&run(), vec![e]).unwrap();
    drop(store);

    let fs = std::sync::Arc::new(common::OpenHookFs::default());
    let seg2 = segment(dir.path(), 2);
    *fs.hook.lock() = Some(Box::new(move |path, _| {
        (path == seg2).then(|| Err(std::io::Error::from_raw_os_error(libc::EMFILE)))
    }));
    let fresh = Store::open_with_fs(fs, dir.path(), config()).unwrap();
    match fresh.read(&run(), 0, 10) {
        Err(e @ Error::Io { .. }) => {
            assert!(e.to_string().contains("seg-00000002.log"), "{e}");
            assert!(e.is_environment(), "{e:?}");
        }
        other => panic!("a failed look for segment 2 (before the fix: seal lost): {other:?}"),
    }
    // The hook fired once: the next read looks again, finds no segment 2 and reads the run.
    assert_eq!(fresh.read(&run(), 0, 10).unwrap().events.len(), 1);
    assert!(fresh.verify_run(&run()).unwrap().problems.is_empty());
}
