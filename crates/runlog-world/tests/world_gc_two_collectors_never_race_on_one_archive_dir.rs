//! Two collectors of one store (two Worlds, as two processes or a dev server's hot reload
//! make them; a World's retention thread beside `runlog gc`) must not gc the same run at
//! once: one could read a run's logs while the other deletes them, and write an archive
//! without its stream logs over the other's. A gc pass holds the store's collector lock
//! (`RunLog::lock_collector`) and the archive directory's (`runlog::archive::lock_archive_dir`):
//! a second pass while one runs is `Busy` at once and changes nothing, whatever archive
//! directory it writes to, and collectors racing in loops archive every run whole, once.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier, mpsc};

use common::*;
use runlog::io::StdFs;
use runlog::{Config, RunId, RunLog, Store};
use runlog_world::{
    COLLECTED_RUNS_LOG, EventType, GcParams, GcStep, Streams, World, WorldConfig, WorldError,
};

fn world(path: &Path) -> TestWorld {
    World::new(
        Arc::new(Store::open(path, Config::default()).expect("open store")),
        WorldConfig::default(),
    )
}

fn params(dir: &Path) -> GcParams {
    params_into(dir, "archive")
}

fn params_into(dir: &Path, archive: &str) -> GcParams {
    GcParams {
        finished_before_ms: u64::MAX,
        archive_dir: dir.join(archive),
        dry_run: false,
    }
}

/// A completed run with a closed stream of 2 chunks: 3 logs (run, stream index, chunks).
fn finished(w: &TestWorld) -> String {
    let run = running_run(w);
    let id = RunId::new(&run).unwrap();
    let streams = Streams::new(Arc::clone(w.backend()));
    streams.write(&id, "out", &b"one"[..]).expect("write");
    streams.write(&id, "out", &b"two"[..]).expect("write");
    streams.close(&id, "out").expect("close");
    terminal(w, &run, EventType::RunCompleted).expect("run_completed");
    run
}

/// Every run of `runs` is in exactly one of the archive dirs `archives` of `dir`, with its
/// 3 logs (its streams too).
fn assert_archived_whole(dir: &Path, archives: &[&str], runs: &[String]) {
    let mut archives = archives.to_vec();
    archives.dedup();
    for run in runs {
        let id = RunId::new(run).unwrap();
        let found: Vec<_> = archives
            .iter()
            .filter_map(
                |a| match runlog::archive::read_archive(&StdFs, &dir.join(a), &id) {
                    Ok(archive) => Some(archive),
                    Err(runlog::Error::RunNotFound { .. }) => None,
                    Err(e) => panic!("{run} in {a}: {e}"),
                },
            )
            .collect();
        assert_eq!(found.len(), 1, "{run}: archived once");
        assert_eq!(
            found[0].logs.len(),
            3,
            "{run}: its stream logs archived too"
        );
    }
}

fn is_busy(e: &WorldError) -> bool {
    matches!(e, WorldError::Storage(runlog::Error::Busy { .. }))
}

#[test]
fn a_second_gc_while_one_runs_is_busy_at_once_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(world(dir.path()));
    let b = world(dir.path());
    let runs: Vec<String> = (0..3).map(|_| finished(&a)).collect();
    let logs_before = a.backend().list_runs(None, 1000).unwrap().runs.len();

    // A stops inside its pass, after its first archive, until told to go on.
    let (at_first, wait_first) = mpsc::channel();
    let (go_on, wait_go) = mpsc::channel::<()>();
    let path = dir.path().to_path_buf();
    let first = {
        let a = Arc::clone(&a);
        std::thread::spawn(move || {
            let mut paused = false;
            a.collect_finished(&StdFs, &params(&path), &mut |step| {
                if matches!(step, GcStep::Archived(_)) && !paused {
                    paused = true;
                    at_first.send(()).unwrap();
                    wait_go.recv().unwrap();
                }
            })
        })
    };
    wait_first.recv().unwrap();
    let during = b
        .collect_finished(&StdFs, &params(dir.path()), &mut |_| {})
        .expect_err("a second pass while the first holds the archive directory");
    assert!(is_busy(&during), "{during:?}");
    assert!(during.to_string().contains("gc.lock"), "{during}");
    // Into another archive directory too: the store's collector lock is one for all.
    let elsewhere = b
        .collect_finished(&StdFs, &params_into(dir.path(), "elsewhere"), &mut |_| {})
        .expect_err("a second pass into another archive directory");
    assert!(is_busy(&elsewhere), "{elsewhere:?}");
    assert!(
        elsewhere.to_string().contains("another gc of this store"),
        "{elsewhere}"
    );
    assert_eq!(
        b.backend().list_runs(None, 1000).unwrap().runs.len(),
        logs_before,
        "the busy pass deleted nothing (the first is paused before its deletes)"
    );
    go_on.send(()).unwrap();
    let report = first.join().unwrap().unwrap();
    assert_eq!(report.collected.len(), 3, "{report:?}");

    // Released: the next pass runs (and finds nothing left).
    let after = b
        .collect_finished(&StdFs, &params(dir.path()), &mut |_| {})
        .unwrap();
    assert_eq!((after.collected.len(), after.failed.len()), (0, 0));
    assert_archived_whole(dir.path(), &["archive"], &runs);
}

#[test]
fn collectors_racing_in_loops_archive_every_run_with_all_its_logs() {
    race(["archive", "archive"]);
}

#[test]
fn collectors_into_different_archive_dirs_archive_every_run_once_with_all_its_logs() {
    race(["archive", "elsewhere"]);
}

/// Two collectors, collector `i` writing into `archives[i]`, racing in loops over 150 runs.
fn race(archives: [&'static str; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let seed = world(dir.path());
    let runs: Vec<String> = (0..150).map(|_| finished(&seed)).collect();
    drop(seed);
    let start = Arc::new(Barrier::new(2));
    let collectors: Vec<_> = (0..2)
        .map(|i| {
            let (path, start) = (dir.path().to_path_buf(), Arc::clone(&start));
            let archive = archives[i];
            std::thread::spawn(move || {
                let w = world(&path);
                start.wait();
                let (mut collected, mut busy) = (0, 0);
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
                while std::time::Instant::now() < deadline {
                    match w.collect_finished(&StdFs, &params_into(&path, archive), &mut |_| {}) {
                        Ok(r) => {
                            assert!(r.failed.is_empty(), "{:?}", r.failed);
                            collected += r.collected.len();
                            if r.scanned == 0 {
                                break;
                            }
                        }
                        Err(e) if is_busy(&e) => {
                            busy += 1;
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                (collected, busy)
            })
        })
        .collect();
    let counts: Vec<(usize, usize)> = collectors.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        counts.iter().map(|c| c.0).sum::<usize>(),
        runs.len(),
        "each run collected once: {counts:?}"
    );
    let w = world(dir.path());
    let left = w.backend().list_runs(None, 1000).unwrap().runs;
    let left: Vec<&str> = left.iter().map(|r| r.run.as_str()).collect();
    assert_eq!(
        left,
        [COLLECTED_RUNS_LOG],
        "only the record of the collected runs"
    );
    assert_archived_whole(dir.path(), &archives, &runs);
}
