//! A backup destination is a store like any other: a process may hold it open and write to
//! it. A backup that changes one of its runs must leave a writer of the destination that
//! holds the run open either committing before the change or seeing it: never acknowledging
//! an append that no reader finds, or a seq that a fresh writer gives out again.
//!
//! - *Extended.* A warm writer skips its refresh while the lock file's commit slots are as
//!   its last commit left them and the 4 bytes at its committed length are zero
//!   (format/SPEC.md §5, the unchanged-slots shortcut). A backup that only seals the
//!   destination's last segment at the length it already had (the source rolled right there)
//!   and adds the next segment changed neither: found by reading the shortcut's list of
//!   writers against the backup's writes. The writer appended into the sealed segment, past
//!   its seal, and acknowledged: the event was lost to every reader (a sealed slot wins), and
//!   its seq was the new segment's first. A first fix announced after the backup's writes; a
//!   breaker then failed the backup after the seal (a damaged source segment, ENOSPC in the
//!   destination), which skipped the announcement. The backup now announces before its
//!   first write, as a writer does before it seals.
//! - *Recopied.* The backup renamed the old copy away and the new one into place without the
//!   run lock. A writer mid-commit that rolled made its next segment by path in the new
//!   copy's directory and acknowledged a seq the copy did not hold (found by a breaker). The
//!   swap now holds the run lock, as a delete does.

mod common;

use std::sync::Arc;
use std::sync::mpsc::channel;

use common::OpenHookFs;
use runlog::{Config, Error, NewEvent, RunId, Store};

/// How long a test waits for a paused thread to reach its hook (a failure, not a hang, when
/// the hook's file is never opened).
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn small_segments() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        ..Config::default()
    }
}

fn ev(tag: &str, i: usize) -> NewEvent {
    NewEvent::new("step_completed", format!("{tag} {i} {}", "p".repeat(100)))
}

/// How many single-event appends fill segment 1 of a run in a store of `small_segments`
/// without rolling: the next append is the one that seals it and starts segment 2.
fn appends_before_the_roll(run: &RunId) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), small_segments()).unwrap();
    store.create_run(run).unwrap();
    for i in 0.. {
        store.append_facts(run, vec![ev("src", i)]).unwrap();
        if store.run_info(run).unwrap().segment_count == 2 {
            return i;
        }
    }
    unreachable!()
}

#[test]
fn a_warm_writer_of_the_destination_appends_after_the_segment_the_backup_added() {
    let (s, src) = sealed_at_the_same_length(Arc::new(runlog::io::StdFs));
    assert!(s.fill > 10, "segment 1 holds {} events", s.fill);
    let report = src.backup(&s.dst_dir, &mut |_| {}).unwrap();
    assert!(report.complete);
    assert_eq!(report.runs[0].result.name(), "extended", "{report:?}");

    let source_last = s.fill as u64 + 1;
    let committed = s.writer.append_facts(&s.run, vec![ev("dst", 0)]).unwrap();
    assert_eq!(
        committed[0].seq,
        source_last + 1,
        "the writer's event goes after the backup's"
    );
    let fresh = Store::open(&s.dst_dir, Config::default()).unwrap();
    let events = fresh.read(&s.run, 0, 10_000).unwrap().events;
    assert_eq!(events.len() as u64, source_last + 1);
    assert_eq!(
        events.last().unwrap().payload,
        ev("dst", 0).payload,
        "the acknowledged event is read back"
    );
    assert!(fresh.verify_run(&s.run).unwrap().problems.is_empty());
}

/// The source filled to one append before its roll and backed up, a writer of the backup
/// warmed by a fenced decision (nothing written), and the source rolled: the next backup
/// seals the destination's segment 1 at the length it has, then copies segment 2.
struct SealedAtTheSameLength {
    run: RunId,
    fill: usize,
    src_dir: tempfile::TempDir,
    _dst_parent: tempfile::TempDir,
    dst_dir: std::path::PathBuf,
    writer: Store,
}

fn sealed_at_the_same_length(fs: Arc<dyn runlog::io::Fs>) -> (SealedAtTheSameLength, Store) {
    let run = RunId::new("r1").unwrap();
    let fill = appends_before_the_roll(&run);
    let src_dir = tempfile::tempdir().unwrap();
    let dst_parent = tempfile::tempdir().unwrap();
    let dst_dir = dst_parent.path().join("backup");
    let src = Store::open_with_fs(fs, src_dir.path(), small_segments()).unwrap();
    src.create_run(&run).unwrap();
    for i in 0..fill {
        src.append_facts(&run, vec![ev("src", i)]).unwrap();
    }
    assert!(src.backup(&dst_dir, &mut |_| {}).unwrap().complete);
    let writer = Store::open(&dst_dir, Config::default()).unwrap();
    let fenced = writer.append_decisions(&run, 1, vec![ev("fenced", 0)]);
    assert!(matches!(fenced, Err(Error::Fenced { .. })), "{fenced:?}");
    src.append_facts(&run, vec![ev("src", fill)]).unwrap();
    assert_eq!(src.run_info(&run).unwrap().segment_count, 2);
    let setup = SealedAtTheSameLength {
        run,
        fill,
        src_dir,
        _dst_parent: dst_parent,
        dst_dir,
        writer,
    };
    (setup, src)
}

/// After a backup that failed once it had sealed the destination's segment 1: the warm
/// writer's append is read back exactly once at the seq it was given, and a fresh writer
/// gets the next one.
fn check_after_a_failed_backup(s: &SealedAtTheSameLength) {
    let acked = s.writer.append_facts(&s.run, vec![ev("dst", 0)]).unwrap();
    let seq = acked[0].seq;
    assert_eq!(
        seq,
        s.fill as u64 + 1,
        "after the destination's {} events",
        s.fill
    );
    let fresh = Store::open(&s.dst_dir, Config::default()).unwrap();
    let events = fresh.read(&s.run, 0, 10_000).unwrap().events;
    let found: Vec<u64> = events
        .iter()
        .filter(|e| e.payload == ev("dst", 0).payload)
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        found,
        [seq],
        "the acknowledged event, read back (before the fix: none)"
    );
    assert_eq!(events.len() as u64, seq);
    let next = fresh.append_facts(&s.run, vec![ev("fresh", 0)]).unwrap();
    assert_eq!(
        next[0].seq,
        seq + 1,
        "a fresh writer's seq (before the fix: {seq} again)"
    );
    assert!(fresh.verify_run(&s.run).unwrap().problems.is_empty());
}

#[test]
fn a_backup_failing_on_the_source_after_the_seal_still_tells_the_warm_writer() {
    let (s, src) = sealed_at_the_same_length(Arc::new(runlog::io::StdFs));
    // A bit flipped in segment 2's first batch: the backup meets it copying segment 2,
    // after it sealed the destination's segment 1. The same source handle backs up, so its
    // own refresh reads no batch again.
    let seg2 = s.src_dir.path().join("runs/r1/seg-00000002.log");
    let mut bytes = std::fs::read(&seg2).unwrap();
    bytes[4096 + 60] ^= 0x01;
    std::fs::write(&seg2, &bytes).unwrap();
    let report = src.backup(&s.dst_dir, &mut |_| {}).unwrap();
    assert!(!report.complete);
    assert_eq!(report.runs[0].result.name(), "failed", "{report:?}");
    check_after_a_failed_backup(&s);
}

#[test]
fn a_backup_failing_on_the_destination_after_the_seal_still_tells_the_warm_writer() {
    let fs = Arc::new(OpenHookFs::default());
    let (s, src) = sealed_at_the_same_length(fs.clone());
    let dst_run = s.dst_dir.join("runs/r1");
    *fs.hook.lock() = Some(Box::new(move |path, _| {
        let creating_seg2 =
            path.starts_with(&dst_run) && path.to_string_lossy().contains("seg-00000002.log.tmp");
        creating_seg2.then(|| Err(std::io::Error::from_raw_os_error(libc::ENOSPC)))
    }));
    let failed = src.backup(&s.dst_dir, &mut |_| {});
    assert!(matches!(failed, Err(Error::DiskFull { .. })), "{failed:?}");
    check_after_a_failed_backup(&s);
}

/// A writer of the destination in the middle of a commit that rolls (its run lock held, its
/// deletion check passed), paused as it creates its next segment, while a backup recopies
/// the run (the destination holds an event the source does not).
#[test]
fn a_recopy_swaps_the_run_after_a_writer_mid_commit_has_finished() {
    let run = RunId::new("r1").unwrap();
    let src_dir = tempfile::tempdir().unwrap();
    let dst_parent = tempfile::tempdir().unwrap();
    let dst_dir = dst_parent.path().join("backup");
    let sfs = Arc::new(OpenHookFs::default());
    let src =
        Arc::new(Store::open_with_fs(sfs.clone(), src_dir.path(), Config::default()).unwrap());
    src.create_run(&run).unwrap();
    for i in 0..20 {
        src.append_facts(&run, vec![ev("src", i)]).unwrap();
    }
    assert!(src.backup(&dst_dir, &mut |_| {}).unwrap().complete);
    // A writer of the destination whose every commit rolls (a segment per batch).
    let wfs = Arc::new(OpenHookFs::default());
    let one_batch_segments = Config {
        segment_len_bytes_max: 1,
        ..Config::default()
    };
    let writer = Arc::new(Store::open_with_fs(wfs.clone(), &dst_dir, one_batch_segments).unwrap());
    assert_eq!(
        writer.append_facts(&run, vec![ev("dst", 0)]).unwrap()[0].seq,
        21
    );
    src.append_facts(&run, vec![ev("src", 20)]).unwrap();

    // The backup pauses while it builds the copy; the writer, as it creates its next segment.
    let (backup_paused_tx, backup_paused) = channel::<()>();
    let (backup_go, backup_go_rx) = channel::<()>();
    *sfs.hook.lock() = Some(Box::new(move |path, _| {
        let p = path.to_string_lossy();
        let building = p.contains("/runs/.backup-r1-") && p.ends_with("/lock");
        building.then(|| {
            backup_paused_tx.send(()).unwrap();
            backup_go_rx.recv().unwrap();
            Ok(())
        })
    }));
    let (writer_paused_tx, writer_paused) = channel::<()>();
    let (writer_go, writer_go_rx) = channel::<()>();
    *wfs.hook.lock() = Some(Box::new(move |path, _| {
        path.to_string_lossy().ends_with(".log.tmp").then(|| {
            writer_paused_tx.send(()).unwrap();
            writer_go_rx.recv().unwrap();
            Ok(())
        })
    }));
    let backup = {
        let (src, dst_dir) = (src.clone(), dst_dir.clone());
        std::thread::spawn(move || src.backup(&dst_dir, &mut |_| {}))
    };
    backup_paused
        .recv_timeout(WAIT)
        .expect("the backup reaches its build");
    let append = {
        let (writer, run) = (writer.clone(), run.clone());
        std::thread::spawn(move || writer.append_facts(&run, vec![ev("dst", 1)]))
    };
    writer_paused
        .recv_timeout(WAIT)
        .expect("the writer reaches its roll");
    // The backup goes on to its swap, which waits for the run lock the writer holds.
    backup_go.send(()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    writer_go.send(()).unwrap();
    // Committed into the copy being replaced (the destination's own appends are what a
    // recopy replaces, SPEC §12).
    assert_eq!(append.join().unwrap().unwrap()[0].seq, 22);
    let report = backup.join().unwrap().unwrap();
    assert!(report.complete);
    assert_eq!(report.runs[0].result.name(), "recopied", "{report:?}");

    // The new copy is the source's, whole: no file of the writer's in its directory.
    let mut names: Vec<String> = std::fs::read_dir(dst_dir.join("runs/r1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("seg-"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["seg-00000001.log"],
        "before the fix: seg-00000003.log of the writer's too"
    );
    let fresh = Store::open(&dst_dir, Config::default()).unwrap();
    assert!(fresh.verify_run(&run).unwrap().problems.is_empty());
    assert_eq!(fresh.last_seq(&run).unwrap(), 21);

    // The writer's next append reaches the new copy, at the seq after it, and is read back.
    let next = writer.append_facts(&run, vec![ev("dst", 2)]).unwrap();
    assert_eq!(next[0].seq, 22);
    let events = fresh.read(&run, 0, 100).unwrap().events;
    assert_eq!(events.len(), 22);
    assert_eq!(events[21].payload, ev("dst", 2).payload);
    assert_eq!(
        fresh.append_facts(&run, vec![ev("fresh", 0)]).unwrap()[0].seq,
        23
    );
}
