//! Run ids that differ only in case on a case-insensitive file system (issue 11 §7,
//! format/SPEC.md §1): APFS and NTFS by default resolve `runs/run1` to the directory created
//! as `runs/Run1`. Creating the second id fails with `RunIdCaseConflict` naming both, and
//! every call through it fails the same way without touching the existing run (its segment 1
//! header names the run that owns the directory). On the case-folding mode of the simulator,
//! on the ordinary simulator (both ids are two runs) and on the host's real file system.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use runlog::io::sim::SimFs;
use runlog::io::{Fs, FsFile, OpenMode};
use runlog::{Config, Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";

fn open(fs: &SimFs) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).unwrap()
}

fn id(s: &str) -> RunId {
    RunId::new(s).unwrap()
}

fn payloads(store: &Store, run: &RunId) -> Vec<String> {
    let page = store.read(run, 0, 100).unwrap();
    assert!(!page.has_more);
    page.events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
        .collect()
}

fn listed(store: &Store) -> Vec<String> {
    let page = store.list_runs(None, 100).unwrap();
    assert!(page.damaged.is_empty(), "{:?}", page.damaged);
    page.runs.iter().map(|r| r.run.to_string()).collect()
}

/// Asserts `result` is the case conflict of `requested` with `existing`, and that its message
/// names both.
#[track_caller]
fn assert_conflict<T: std::fmt::Debug>(result: runlog::Result<T>, requested: &str, existing: &str) {
    match result {
        Err(e @ Error::RunIdCaseConflict { .. }) => {
            let Error::RunIdCaseConflict {
                requested: r,
                existing: x,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((r.as_str(), x.as_str()), (requested, existing));
            let message = e.to_string();
            assert!(
                message.contains(&format!("run id {requested} "))
                    && message.contains(&format!("existing run {existing};")),
                "{message}"
            );
        }
        other => panic!("expected RunIdCaseConflict({requested} vs {existing}), got {other:?}"),
    }
}

/// A store on a case-insensitive simulator holding run `Run1` with three events.
fn store_with_run1(fs: &SimFs) -> Store {
    let store = open(fs);
    let run = id("Run1");
    store.create_run_with_meta(&run, b"{\"m\":1}").unwrap();
    store
        .append_facts(
            &run,
            vec![NewEvent::new("k", "one"), NewEvent::new("k", "two")],
        )
        .unwrap();
    store
        .append_decisions(&run, 2, vec![NewEvent::new("run_completed", "three")])
        .unwrap();
    store
}

/// Asserts that the simulator holds exactly the files of `before`, byte for byte, naming the
/// paths that differ.
#[track_caller]
fn assert_files_unchanged(fs: &SimFs, before: &BTreeMap<String, Vec<u8>>) {
    let after = fs.live_files();
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(
        changed.is_empty(),
        "files created, removed or changed: {changed:?}"
    );
}

/// `Run1` as `store_with_run1` left it: same files, same events, clean, the only run.
#[track_caller]
fn assert_run1_intact(fs: &SimFs, before: &BTreeMap<String, Vec<u8>>) {
    assert_files_unchanged(fs, before);
    for store in [
        open(fs),
        Store::open_read_only_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).unwrap(),
    ] {
        let run = id("Run1");
        assert_eq!(payloads(&store, &run), ["one", "two", "three"]);
        assert_eq!(store.run_meta(&run).unwrap(), b"{\"m\":1}");
        let report = store.verify_run(&run).unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.events, 3);
        assert_eq!(listed(&store), ["Run1"]);
    }
}

#[test]
fn creating_a_run_id_that_differs_only_in_case_fails_naming_both() {
    let fs = SimFs::new_case_insensitive(1);
    let store = store_with_run1(&fs);
    let before = fs.live_files();
    for other in ["run1", "RUN1", "rUN1"] {
        assert_conflict(store.create_run(&id(other)), other, "Run1");
        assert_conflict(open(&fs).create_run(&id(other)), other, "Run1");
    }
    assert!(matches!(
        store.create_run(&id("Run1")),
        Err(Error::RunExists { run }) if run == "Run1"
    ));
    assert_run1_intact(&fs, &before);
}

/// The outcome of a call, without its value.
fn ok<T>(result: runlog::Result<T>) -> runlog::Result<()> {
    result.map(|_| ())
}

/// Every call of the API through `run`, on a store that has `Run1` open (cached) or not.
fn every_call_through(store: &Store, run: &RunId) -> Vec<(&'static str, runlog::Result<()>)> {
    vec![
        ("read", ok(store.read(run, 0, 10))),
        ("read_each", ok(store.read_each(run, 0, 10, |_| {}))),
        ("last_seq", ok(store.last_seq(run))),
        ("run_info", ok(store.run_info(run))),
        ("run_meta", ok(store.run_meta(run))),
        ("wait", ok(store.wait(run, 0, Duration::from_millis(5)))),
        ("verify_run", ok(store.verify_run(run))),
        ("run_exists", ok(store.run_exists(run))),
        (
            "append_facts",
            ok(store.append_facts(run, vec![NewEvent::new("k", "x")])),
        ),
        (
            "append_decisions",
            ok(store.append_decisions(run, 3, vec![NewEvent::new("k", "x")])),
        ),
        ("repair_run", ok(store.repair_run(run))),
        ("delete_run", store.delete_run(run)),
    ]
}

#[test]
fn reads_appends_and_delete_through_the_other_case_fail_and_never_touch_the_run() {
    let fs = SimFs::new_case_insensitive(2);
    let cached = store_with_run1(&fs);
    let mut before = fs.live_files();
    for (label, store) in [("cached", cached), ("fresh", open(&fs))] {
        for other in ["run1", "RUN1"] {
            for (call, result) in every_call_through(&store, &id(other)) {
                eprintln!("{label} {call}({other})");
                assert_conflict(result, other, "Run1");
            }
        }
        assert_run1_intact(&fs, &before);
        // Closing the store closes Run1's own handle, which writes its run summary
        // (format/SPEC.md §10): Run1's change, made through its own id.
        drop(store);
        before = fs.live_files();
    }
    let read_only =
        Store::open_read_only_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).unwrap();
    assert_conflict(read_only.read(&id("run1"), 0, 10), "run1", "Run1");
    assert_conflict(read_only.verify_run(&id("run1")), "run1", "Run1");
    let store = open(&fs);
    store.delete_run(&id("Run1")).unwrap();
    assert!(
        listed(&store).is_empty(),
        "the run's own id still deletes it"
    );
    store.create_run(&id("run1")).unwrap();
    assert_eq!(
        listed(&store),
        ["run1"],
        "the id is free once the run is gone"
    );
}

#[test]
fn a_writable_open_through_the_other_case_does_not_recreate_a_lost_lock_file() {
    let fs = SimFs::new_case_insensitive(5);
    drop(store_with_run1(&fs));
    fs.remove_file(Path::new("/store/runs/Run1/lock")).unwrap();
    let before = fs.live_files();
    let store = open(&fs);
    assert_conflict(store.read(&id("run1"), 0, 10), "run1", "Run1");
    assert_conflict(
        store.append_facts(&id("run1"), vec![NewEvent::new("k", "x")]),
        "run1",
        "Run1",
    );
    assert_files_unchanged(&fs, &before);
    assert_eq!(payloads(&store, &id("Run1")), ["one", "two", "three"]);
    assert!(fs.live_files().contains_key("/store/runs/Run1/lock"));
}

#[test]
fn the_conflict_outlives_a_crash() {
    for seed in 0..20 {
        let fs = SimFs::new_case_insensitive(seed);
        store_with_run1(&fs);
        fs.crash(seed);
        let store = open(&fs);
        assert_conflict(store.create_run(&id("run1")), "run1", "Run1");
        assert_conflict(store.read(&id("RUN1"), 0, 10), "RUN1", "Run1");
        assert_eq!(payloads(&store, &id("Run1")), ["one", "two", "three"]);
    }
}

/// A [`Fs`] that answers "no such directory" for `runs/<hidden>` once, then behaves: as if
/// another creator renamed its run into place between `create_run`'s check and its rename.
#[derive(Debug)]
struct LateRename {
    fs: SimFs,
    hidden: String,
    blind: AtomicBool,
}

impl Fs for LateRename {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FsFile>> {
        self.fs.open(path, mode)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.fs.create_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.fs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.fs.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.fs.remove_dir(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.fs.read_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.fs.sync_dir(path)
    }
    fn is_dir(&self, path: &Path) -> io::Result<bool> {
        if path.ends_with(Path::new("runs").join(&self.hidden))
            && self.blind.swap(false, Ordering::SeqCst)
        {
            return Ok(false);
        }
        self.fs.is_dir(path)
    }
}

#[test]
fn the_rename_into_place_race_reports_the_case_conflict_and_cleans_up() {
    let fs = SimFs::new_case_insensitive(3);
    store_with_run1(&fs);
    let before = fs.live_files();
    for (other, expected) in [("run1", Some("Run1")), ("Run1", None)] {
        let late = Arc::new(LateRename {
            fs: fs.clone(),
            hidden: other.to_string(),
            blind: AtomicBool::new(true),
        });
        let store = Store::open_with_fs(late.clone(), ROOT, Config::default()).unwrap();
        let created = store.create_run(&id(other));
        assert!(!late.blind.load(Ordering::SeqCst), "the check was blinded");
        match expected {
            Some(existing) => assert_conflict(created, other, existing),
            None => assert!(
                matches!(created, Err(Error::RunExists { .. })),
                "{created:?}"
            ),
        }
        assert_eq!(
            fs.read_dir(Path::new("/store/runs")).unwrap(),
            ["Run1"],
            "the temporary run directory is removed"
        );
    }
    assert_run1_intact(&fs, &before);
}

#[test]
fn concurrent_creators_of_two_cases_one_wins_the_other_is_told_both_ids() {
    for round in 0..20 {
        let fs = SimFs::new_case_insensitive(round);
        let store = open(&fs);
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<(&str, runlog::Result<()>)> = std::thread::scope(|s| {
            let handles: Vec<_> = ["Run1", "run1"]
                .into_iter()
                .map(|name| {
                    let (store, barrier) = (store.clone(), barrier.clone());
                    s.spawn(move || {
                        barrier.wait();
                        (name, store.create_run(&id(name)))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&str> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0];
        for (name, result) in results {
            if name != winner {
                assert_conflict(result, name, winner);
            }
        }
        assert_eq!(listed(&store), [winner]);
        store
            .append_facts(&id(winner), vec![NewEvent::new("k", "v")])
            .unwrap();
        assert!(store.verify_run(&id(winner)).unwrap().problems.is_empty());
    }
}

/// Creates `Run1` and `run1` with different events and checks they are two runs.
fn assert_two_runs(store: &Store) {
    let (upper, lower) = (id("Run1"), id("run1"));
    store.create_run(&upper).unwrap();
    store.create_run(&lower).unwrap();
    store
        .append_facts(&upper, vec![NewEvent::new("k", "upper")])
        .unwrap();
    store
        .append_facts(
            &lower,
            vec![NewEvent::new("k", "lower 1"), NewEvent::new("k", "lower 2")],
        )
        .unwrap();
    assert_eq!(payloads(store, &upper), ["upper"]);
    assert_eq!(payloads(store, &lower), ["lower 1", "lower 2"]);
    assert_eq!(listed(store), ["Run1", "run1"]);
    for run in [&upper, &lower] {
        assert!(store.verify_run(run).unwrap().problems.is_empty());
        assert!(store.run_exists(run).unwrap());
    }
    assert!(!store.run_exists(&id("RUN1")).unwrap());
    assert!(matches!(
        store.read(&id("RUN1"), 0, 1),
        Err(Error::RunNotFound { .. })
    ));
    store.delete_run(&lower).unwrap();
    assert_eq!(listed(store), ["Run1"]);
    assert_eq!(payloads(store, &upper), ["upper"]);
}

#[test]
fn on_a_case_sensitive_simulator_ids_that_differ_in_case_are_two_runs() {
    let fs = SimFs::new(4);
    assert_two_runs(&open(&fs));
}

/// Whether the file system holding `dir` tells `a` from `A`.
fn is_case_sensitive(dir: &Path) -> bool {
    std::fs::write(dir.join("probe"), b"").unwrap();
    let sensitive = !dir.join("PROBE").exists();
    std::fs::remove_file(dir.join("probe")).unwrap();
    sensitive
}

#[test]
fn on_real_files_nothing_changes_for_a_case_sensitive_file_system() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let store = Store::open(&dir, Config::default()).unwrap();
    if is_case_sensitive(tmp.path()) {
        assert_two_runs(&store);
        let fresh = Store::open(&dir, Config::default()).unwrap();
        assert_eq!(payloads(&fresh, &id("Run1")), ["upper"]);
        assert!(matches!(
            fresh.create_run(&id("Run1")),
            Err(Error::RunExists { .. })
        ));
    } else {
        // A case-insensitive host (macOS, Windows): the real thing.
        store.create_run(&id("Run1")).unwrap();
        assert_conflict(store.create_run(&id("run1")), "run1", "Run1");
        assert_conflict(store.delete_run(&id("run1")), "run1", "Run1");
        assert_eq!(listed(&store), ["Run1"]);
    }
}
