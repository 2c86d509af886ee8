//! The run summary file (format/SPEC.md §10) is an accelerator, never a source of truth:
//! `Store::run_summary` always equals the fold of a full read, whether the summary is
//! current, missing, damaged, stale (behind the log), or another run's; a writable store
//! rebuilds it when it closes the run; a bit flip in the batch it is anchored to is reported
//! (`Corrupt`, from the scan it falls back to), not papered over.

use std::path::Path;

use runlog::{Config, Error, NewEvent, RunId, RunSummary, Store};

fn kinds_for(n: u64) -> Vec<&'static str> {
    let mut v = vec!["run_created", "run_started"];
    v.extend(std::iter::repeat_n("step_completed", n as usize));
    v.push("run_completed");
    v.push("step_completed");
    v
}

/// The summary of a full read: what `Store::run_summary` must always equal.
fn scanned(store: &Store, run: &RunId) -> RunSummary {
    let last = store.last_seq(run).unwrap();
    let events = store.read(run, 0, usize::MAX).unwrap().events;
    assert_eq!(events.len() as u64, last);
    let mut kinds: Vec<(String, u64)> = Vec::new();
    for e in &events {
        if !kinds.iter().any(|(k, _)| **k == *e.kind) {
            kinds.push((e.kind.to_string(), e.seq));
        }
    }
    RunSummary {
        last_seq: last,
        first_created_at_ms: events.first().map(|e| e.created_at_ms),
        last_created_at_ms: events.last().map(|e| e.created_at_ms),
        kinds: (kinds.len() <= 64).then_some(kinds),
    }
}

fn append(store: &Store, run: &RunId, kinds: &[&str]) {
    for chunk in kinds.chunks(3) {
        let batch = chunk.iter().map(|k| NewEvent::new(*k, "{}")).collect();
        store.append_facts(run, batch).unwrap();
    }
}

fn summary_path(dir: &Path, run: &str) -> std::path::PathBuf {
    dir.join("runs").join(run).join("summary")
}

/// A writable open of `run` and its close (which writes the summary).
fn reopen_and_close(dir: &Path, run: &RunId) {
    let store = Store::open(dir, Config::default()).unwrap();
    store.last_seq(run).unwrap();
}

fn check(dir: &Path, run: &RunId) -> RunSummary {
    let ro = Store::open_read_only(dir, Config::default()).unwrap();
    let last = ro.last_seq(run).unwrap();
    let got = ro.run_summary(run, last).unwrap();
    assert_eq!(got, scanned(&ro, run));
    got
}

#[test]
fn written_at_close_and_equal_to_a_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    append(&store, &run, &kinds_for(10));
    assert!(
        !summary_path(dir.path(), "r1").exists(),
        "4 appends: not yet due"
    );
    drop(store);
    assert!(summary_path(dir.path(), "r1").exists(), "written at close");
    let s = check(dir.path(), &run);
    assert_eq!(s.last_seq, 14);
    let kinds: Vec<&str> = s
        .kinds
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "run_created",
            "run_started",
            "step_completed",
            "run_completed"
        ]
    );
    assert_eq!(s.kinds.unwrap()[3].1, 13);
    // A prefix of the log (a listing bounded by an older counter) folds that prefix.
    let ro = Store::open_read_only(dir.path(), Config::default()).unwrap();
    let prefix = ro.run_summary(&run, 2).unwrap();
    assert_eq!(prefix.last_seq, 2);
    assert_eq!(prefix.kinds.unwrap().len(), 2);
}

#[test]
fn written_every_64_appends_by_a_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("live").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    for _ in 0..63 {
        store
            .append_facts(&run, vec![NewEvent::new("step_completed", "{}")])
            .unwrap();
    }
    assert!(!summary_path(dir.path(), "live").exists());
    store
        .append_facts(&run, vec![NewEvent::new("run_failed", "{}")])
        .unwrap();
    assert!(
        summary_path(dir.path(), "live").exists(),
        "the 64th append writes it"
    );
    store
        .append_facts(&run, vec![NewEvent::new("step_completed", "{}")])
        .unwrap();
    // The store is still open and the summary is one append behind: the tail is folded.
    let s = check(dir.path(), &run);
    assert_eq!(s.last_seq, 65);
    drop(store);
}

#[test]
fn missing_damaged_stale_or_foreign_summary_is_ignored_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (r1, r2) = (RunId::new("r1").unwrap(), RunId::new("r2").unwrap());
    let store = Store::open(dir.path(), Config::default()).unwrap();
    for r in [&r1, &r2] {
        store.create_run(r).unwrap();
        append(&store, r, &kinds_for(4));
    }
    drop(store);
    let p1 = summary_path(dir.path(), "r1");
    let good = std::fs::read(&p1).unwrap();

    // Missing: scanned; a writable open and close writes it again, byte for byte.
    std::fs::remove_file(&p1).unwrap();
    let want = check(dir.path(), &r1);
    reopen_and_close(dir.path(), &r1);
    assert_eq!(
        std::fs::read(&p1).unwrap(),
        good,
        "rebuilt equal to the lost one"
    );

    // Every single flipped byte is ignored (checksum, binding), and the result is the scan's.
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&p1, &bad).unwrap();
        assert_eq!(check(dir.path(), &r1), want, "flipped byte {at}");
    }
    // Truncated.
    std::fs::write(&p1, &good[..good.len() / 2]).unwrap();
    assert_eq!(check(dir.path(), &r1), want);
    // Another run's summary (bound to r2's segment 1 salt).
    std::fs::copy(summary_path(dir.path(), "r2"), &p1).unwrap();
    assert_eq!(check(dir.path(), &r1), want);
    // A writable close replaces the bad one.
    reopen_and_close(dir.path(), &r1);
    assert_eq!(std::fs::read(&p1).unwrap(), good);

    // Stale: the log grew past it (e.g. the newer one was lost in a crash). The tail is folded.
    let store = Store::open(dir.path(), Config::default()).unwrap();
    append(&store, &r1, &["run_cancelled", "hook_created"]);
    std::mem::forget(store); // no close: the summary stays behind the log
    std::fs::write(&p1, &good).unwrap();
    let s = check(dir.path(), &r1);
    assert_eq!(s.last_seq, 10);
    assert_eq!(s.kinds.unwrap().last().unwrap().0, "hook_created");
}

#[test]
fn a_flipped_bit_in_the_anchor_batch_is_reported_not_summarized() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r1").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    append(&store, &run, &kinds_for(4));
    drop(store);
    let seg = dir.path().join("runs/r1/seg-00000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    // The last batch holds `step_completed` with payload `{}`: flip a bit of that payload.
    let end = bytes.iter().rposition(|&b| b == b'}').unwrap();
    bytes[end] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    let ro = Store::open_read_only(dir.path(), Config::default()).unwrap();
    // What a listing passes: the counter's last seq (the damaged batch is inside it).
    let last = ro.list_runs(None, 10).unwrap().runs[0].last_seq;
    assert_eq!(last, 8);
    match ro.run_summary(&run, last) {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn more_than_64_kinds_keeps_no_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("many").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    let names: Vec<String> = (0..70).map(|i| format!("kind_{i}")).collect();
    let batch = names
        .iter()
        .map(|k| NewEvent::new(k.as_str(), "{}"))
        .collect();
    store.append_facts(&run, batch).unwrap();
    drop(store);
    let s = check(dir.path(), &run);
    assert_eq!(s.kinds, None);
    assert_eq!(s.last_seq, 70);
}

#[test]
fn empty_run_has_an_empty_summary_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("empty").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    drop(store);
    assert!(!summary_path(dir.path(), "empty").exists());
    let s = check(dir.path(), &run);
    assert_eq!(s.last_seq, 0);
    assert_eq!(s.kinds, Some(vec![]));
}

#[test]
fn deleting_a_run_removes_its_summary_with_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("gone").unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.create_run(&run).unwrap();
    append(&store, &run, &kinds_for(1));
    drop(store);
    assert!(summary_path(dir.path(), "gone").exists());
    let store = Store::open(dir.path(), Config::default()).unwrap();
    store.delete_run(&run).unwrap();
    drop(store);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A writer rewrites the summary in place (the same file, no rename: SPEC §10), and a summary
/// caught half overwritten — the new bytes over the start of the old ones, as a reader racing
/// the write or a crash can find it — fails its checksum and is ignored: the listing still
/// equals a full scan.
#[test]
fn the_summary_is_rewritten_in_place_and_a_half_overwritten_one_is_ignored() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("inplace").unwrap();
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        store.create_run(&run).unwrap();
        append(&store, &run, &kinds_for(5));
    }
    let path = summary_path(dir.path(), "inplace");
    let old = std::fs::read(&path).unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    {
        let store = Store::open(dir.path(), Config::default()).unwrap();
        append(&store, &run, &["hook_received", "step_completed"]);
    }
    let new = std::fs::read(&path).unwrap();
    assert_ne!(new, old, "rewritten at close");
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "in place");
    assert_eq!(check(dir.path(), &run).last_seq, 11);
    let half = new.len().min(old.len()) / 2;
    let mut mixed = new[..half].to_vec();
    mixed.extend_from_slice(&old[half..]);
    std::fs::write(&path, &mixed).unwrap();
    assert_eq!(check(dir.path(), &run).last_seq, 11);
}
