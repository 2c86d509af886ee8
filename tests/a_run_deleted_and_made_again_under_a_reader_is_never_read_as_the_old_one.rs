//! A run deleted and made again under the same id by another `Store` (another process), or
//! restored from a copy of its files, is never read as the run a reader held open.
//!
//! A read that began before the delete never reads the new run's files as the old run's: the sealed
//! segments it reaches after the delete are opened again by their path (their descriptors
//! were closed while idle, `src/io/pool.rs`) and are another file there, so the read ends in
//! `RunNotFound`. The old run's events it handed out before are the old run's.
//!
//! Before the fix the check that a path still holds the same file compared a CRC-32 of the
//! segment's first 512 bytes, which end with the header's own CRC-32: the same constant for
//! every segment. The new run's segment 2 passed as the old one's, and the read failed
//! `Corrupt` ("file is N bytes, committed length is M") on a healthy run.
//!
//! A read-only `Store` of a run without a lock file (SPEC §3: a lost lock file holds nothing
//! the segments do not) knows the run deleted by its segment 1 only: restored from an older
//! copy of its files while that segment's descriptor was closed, the run is read as restored.
//! Before the fix the copy's segment 1 passed as the file the `Store` had opened (the same
//! bytes, compared by CRC, not the same file), the view of the longer run was kept, and the
//! reads past the copy's end failed `Corrupt` on a healthy run.
//!
//! On the simulated file system (its set of idle descriptors holds 4, so the old run's
//! segment 2 is closed by the time the read reaches it), written and read-only `Store`s.

use std::sync::Arc;

use runlog::io::sim::SimFs;
use runlog::{Config, Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";

fn config() -> Config {
    Config {
        segment_len_bytes_max: 16 << 10,
        ..Config::default()
    }
}

fn run() -> RunId {
    RunId::new("r1").unwrap()
}

/// Makes the run and appends `events` facts, 10 per append, their payloads tagged `tag`.
fn fill(store: &Store, tag: &str, events: u64) {
    store.create_run(&run()).unwrap();
    for b in 0..events / 10 {
        let batch = (0..10)
            .map(|j| NewEvent::new("step_completed", format!("{{\"{tag}\":{:06}}}", b * 10 + j)))
            .collect();
        store.append_facts(&run(), batch).unwrap();
    }
}

fn segments(fs: &SimFs) -> usize {
    fs.live_files()
        .keys()
        .filter(|p| p.starts_with("/store/runs/r1/seg-") && p.ends_with(".log"))
        .count()
}

fn race(read_only: bool) {
    let fs = SimFs::new(5);
    let writer = Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()).unwrap();
    fill(&writer, "old", 3_000);
    assert!(
        segments(&fs) >= 4,
        "the old run spans {} segments",
        segments(&fs)
    );

    let reader = match read_only {
        true => Store::open_read_only_with_fs(Arc::new(fs.clone()), ROOT, config()),
        false => Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()),
    }
    .unwrap();
    let mut seen = Vec::new();
    let res = reader.read_each(&run(), 0, 3_000, |e| {
        let payload = String::from_utf8_lossy(e.payload).into_owned();
        seen.push((e.seq, payload));
        if e.seq == 5 {
            // Mid-read, still in segment 1: deleted and made again by another `Store`.
            writer.delete_run(&run()).unwrap();
            fill(&writer, "new", 3_000);
        }
    });
    assert!(
        matches!(res, Err(Error::RunNotFound { ref run }) if run == "r1"),
        "{res:?}"
    );
    assert!(seen.len() >= 5, "{} events before the delete", seen.len());
    for (i, (seq, payload)) in seen.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1);
        assert_eq!(*payload, format!("{{\"old\":{i:06}}}"), "seq {seq}");
    }
    // A read after the delete reads the run made again.
    let page = reader.read(&run(), 0, 2).unwrap();
    assert_eq!(page.events[1].payload.as_ref(), b"{\"new\":000001}");
}

#[test]
fn a_writable_stores_read_across_a_delete_and_remake_ends_run_not_found() {
    race(false);
}

#[test]
fn a_read_only_stores_read_across_a_delete_and_remake_ends_run_not_found() {
    race(true);
}

#[test]
fn a_read_only_store_reads_its_run_as_restored_from_an_older_copy_of_its_files() {
    let fs = SimFs::new(9);
    let writer = Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()).unwrap();
    fill(&writer, "old", 2_000);
    let copy: Vec<(String, Vec<u8>)> = fs
        .live_files()
        .into_iter()
        .filter(|(p, _)| p.starts_with("/store/runs/r1/") && !p.ends_with("/lock"))
        .collect();
    for b in 200..300u64 {
        let batch = (0..10)
            .map(|j| NewEvent::new("step_completed", format!("{{\"old\":{:06}}}", b * 10 + j)))
            .collect();
        writer.append_facts(&run(), batch).unwrap();
    }
    drop(writer);
    use runlog::io::{Fs, OpenMode};
    fs.remove_file(std::path::Path::new("/store/runs/r1/lock"))
        .unwrap();

    let reader = Store::open_read_only_with_fs(Arc::new(fs.clone()), ROOT, config()).unwrap();
    // Without the lock file's commit slots it reads to the segments' last checkpoint.
    let before = reader.last_seq(&run()).unwrap();
    assert!(before > 2_100, "{before}");
    assert_eq!(
        reader.read(&run(), before - 10, 20).unwrap().events.len(),
        10
    );
    // Its files removed and the older copy put back, as a restore by hand does.
    for p in fs
        .live_files()
        .keys()
        .filter(|p| p.starts_with("/store/runs/r1/"))
    {
        fs.remove_file(std::path::Path::new(p)).unwrap();
    }
    for (p, bytes) in &copy {
        let f = fs
            .open(std::path::Path::new(p), OpenMode::CreateNew)
            .unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f.sync_all().unwrap();
    }
    fs.sync_dir(std::path::Path::new("/store/runs/r1")).unwrap();

    // Read as a fresh `Store` reads the restored files.
    let fresh = Store::open_read_only_with_fs(Arc::new(fs.clone()), ROOT, config()).unwrap();
    let restored = fresh.last_seq(&run()).unwrap();
    assert!(restored < before && restored > 1_000, "{restored}");
    assert_eq!(reader.last_seq(&run()).unwrap(), restored);
    let page = reader.read(&run(), restored - 10, 20).unwrap();
    assert_eq!(page, fresh.read(&run(), restored - 10, 20).unwrap());
    assert_eq!(page.events.len(), 10);
    assert!(!page.has_more);
}
