//! A delete's commit point is the rename of the run's directory to `runs/.deleted-…` (synced,
//! under the run lock); it unlinks the files after. When the deleting process dies in
//! between (kill -9 of a `runlog gc`), a writer that held the run open must see the run as
//! deleted: before, it checked only whether its lock file was unlinked, kept appending into
//! the renamed-away directory and acknowledged every append (found by a tester: thousands of
//! acknowledged stream chunks lost after gc + restore). Now each append is `RunNotFound` and
//! writes nothing, whether the files are still in the renamed directory or already unlinked,
//! and a run created again under the same id is a new run to that writer's store too.

use runlog::{Config, Error, NewEvent, RunId, Store};

fn ev(i: u32) -> NewEvent {
    NewEvent::new("chunk", format!("c{i}").into_bytes())
}

/// A delete that died after its rename: the directory renamed away (and the rename synced),
/// with `unlink_segments`, its segment files unlinked too (the lock file, unlinked last,
/// stays).
fn delete_killed_after_rename(store_dir: &std::path::Path, run: &RunId, unlink_segments: bool) {
    let runs = store_dir.join("runs");
    let grave = runs.join(format!(".deleted-{run}-01ARZ3NDEKTSV4RRFFQ69G5FAV"));
    std::fs::rename(runs.join(run.as_str()), &grave).unwrap();
    std::fs::File::open(&runs).unwrap().sync_all().unwrap();
    if unlink_segments {
        for entry in std::fs::read_dir(&grave).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n != "lock") {
                std::fs::remove_file(path).unwrap();
            }
        }
    }
}

fn check(unlink_segments: bool) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let writer = Store::open(dir.path(), Config::default()).unwrap();
    writer.create_run(&run).unwrap();
    writer.append_facts(&run, vec![ev(1), ev(2)]).unwrap();

    delete_killed_after_rename(dir.path(), &run, unlink_segments);

    let after = writer.append_facts(&run, vec![ev(3)]);
    assert!(
        matches!(after, Err(Error::RunNotFound { .. })),
        "an append after the delete's commit point: {after:?}"
    );
    let decision = writer.append_decisions(&run, 2, vec![ev(4)]);
    assert!(
        matches!(decision, Err(Error::RunNotFound { .. })),
        "{decision:?}"
    );
    let fresh = Store::open(dir.path(), Config::default()).unwrap();
    assert!(matches!(
        fresh.last_seq(&run),
        Err(Error::RunNotFound { .. })
    ));

    // The id created again: a new, empty run, to the old writer's store as well.
    fresh.create_run(&run).unwrap();
    fresh.append_facts(&run, vec![ev(10)]).unwrap();
    let seq = writer.append_facts(&run, vec![ev(11)]).unwrap();
    assert_eq!(seq[0].seq, 2, "appended to the new run");
    let events = fresh.read(&run, 0, 10).unwrap().events;
    let payloads: Vec<&[u8]> = events.iter().map(|e| &e.payload[..]).collect();
    assert_eq!(payloads, [&b"c10"[..], b"c11"]);
}

#[test]
fn a_writer_holding_the_run_sees_a_delete_killed_right_after_its_rename() {
    check(false);
}

#[test]
fn a_writer_holding_the_run_sees_a_delete_killed_after_unlinking_the_segments() {
    check(true);
}
