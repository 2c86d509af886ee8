//! A backup destination is a store like any other: a process may hold it open and write to
//! it. An incremental backup that extends one of its runs writes under the run's lock, and a
//! writer of the destination must see what it wrote before its next commit.
//!
//! A warm writer skips its refresh while the lock file's commit slots are as its last commit
//! left them and the 4 bytes at its committed length are zero (format/SPEC.md §5, the
//! unchanged-slots shortcut). A backup that only seals the destination's last segment at the
//! length it already had (the source rolled right there) and adds the next segment changes
//! neither: found by reading the shortcut's list of writers against the backup's writes.
//! Before the fix, the writer appended into the sealed segment, past its seal, and
//! acknowledged: the event was lost to every reader (a sealed slot wins), and its seq was
//! the new segment's first.

use runlog::{Config, Error, NewEvent, RunId, Store};

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
    let run = RunId::new("r1").unwrap();
    let fill = appends_before_the_roll(&run);
    assert!(fill > 10, "segment 1 holds {fill} events");

    let src_dir = tempfile::tempdir().unwrap();
    let dst_parent = tempfile::tempdir().unwrap();
    let dst_dir = dst_parent.path().join("backup");
    let src = Store::open(src_dir.path(), small_segments()).unwrap();
    src.create_run(&run).unwrap();
    for i in 0..fill {
        src.append_facts(&run, vec![ev("src", i)]).unwrap();
    }
    assert_eq!(src.run_info(&run).unwrap().segment_count, 1);
    assert!(src.backup(&dst_dir, &mut |_| {}).unwrap().complete);

    // A writer of the destination, warm after a commit that wrote nothing (a fenced
    // decision): it holds the commit slots it read and the committed length.
    let writer = Store::open(&dst_dir, Config::default()).unwrap();
    let fenced = writer.append_decisions(&run, 1, vec![ev("fenced", 0)]);
    assert!(matches!(fenced, Err(Error::Fenced { .. })), "{fenced:?}");

    // The source rolls: segment 1 sealed at the length the destination holds, the event in
    // segment 2. The backup seals the destination's segment 1 and adds segment 2.
    src.append_facts(&run, vec![ev("src", fill)]).unwrap();
    assert_eq!(src.run_info(&run).unwrap().segment_count, 2);
    let report = src.backup(&dst_dir, &mut |_| {}).unwrap();
    assert!(report.complete);
    assert_eq!(report.runs[0].result.name(), "extended", "{report:?}");

    let source_last = fill as u64 + 1;
    let committed = writer.append_facts(&run, vec![ev("dst", 0)]).unwrap();
    assert_eq!(
        committed[0].seq,
        source_last + 1,
        "the writer's event goes after the backup's"
    );

    let fresh = Store::open(&dst_dir, Config::default()).unwrap();
    let events = fresh.read(&run, 0, 10_000).unwrap().events;
    assert_eq!(events.len() as u64, source_last + 1);
    assert_eq!(
        events.last().unwrap().payload,
        ev("dst", 0).payload,
        "the acknowledged event is read back"
    );
    assert!(fresh.verify_run(&run).unwrap().problems.is_empty());
}
