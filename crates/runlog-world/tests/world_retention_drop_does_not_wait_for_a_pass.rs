//! Dropping a World's retention task (as the Node binding does when a `Store` is garbage
//! collected without `close()`, in a finalizer on the event loop's thread) tells the thread
//! to stop and returns at once, even while a gc pass is under way; the pass finishes (the run
//! it was collecting is archived whole) and the thread ends. `RetentionTask::stop` is the
//! call that waits.

mod common;

use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use runlog::{Config, RunId, RunLog, Seq, Store};
use runlog_world::{Clock, EventType, Retention, World, WorldConfig};

/// Holds the first fenced delete of a gc until released.
struct Stall {
    entered: Mutex<Option<Sender<()>>>,
    release: Mutex<Receiver<()>>,
}

impl Interposer for Stall {
    fn delete_run_at(&self, inner: &dyn RunLog, run: &RunId, expected: Seq) -> runlog::Result<()> {
        let first = self.entered.lock().unwrap().take();
        if let Some(entered) = first {
            entered.send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
        }
        inner.delete_run_at(run, expected)
    }
}

/// This process's threads named as the retention thread (`runlog-retention`, 15 bytes kept).
fn retention_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "runlog-retentio")
        .count()
}

fn within(what: &str, secs: u64, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn finished_run(dir: &Path) -> String {
    let w = open(dir);
    let run = running_run(&w);
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    run
}

#[test]
fn dropping_the_task_mid_pass_returns_at_once_and_the_pass_still_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let run = finished_run(dir.path());
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel();
    let stall = Stall {
        entered: Mutex::new(Some(entered_tx)),
        release: Mutex::new(release_rx),
    };
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let archive = dir.path().join("archive");
    let config = WorldConfig {
        clock: Clock::system(),
        retention: Some(Retention {
            finished_older_than_ms: 1,
            interval_ms: 5,
            archive_dir: archive.clone(),
        }),
        ..WorldConfig::default()
    };
    let w = Arc::new(World::new(Interposed::new(Arc::new(store), stall), config));
    let task = w.start_retention().expect("retention is on");
    entered
        .recv_timeout(Duration::from_secs(30))
        .expect("the pass reaches its first delete");
    assert_eq!(retention_threads(), 1);

    // The drop, on a thread of its own: joined, it would wait for the stalled pass forever.
    let (dropped_tx, dropped) = mpsc::channel();
    std::thread::spawn(move || {
        drop(task);
        dropped_tx.send(()).unwrap();
    });
    dropped
        .recv_timeout(Duration::from_secs(10))
        .expect("drop returns while the pass is stalled");
    drop(w);

    release.send(()).unwrap();
    within("the retention thread to end", 30, || {
        retention_threads() == 0
    });
    let a = runlog::archive::read_archive(&runlog::io::StdFs, &archive, &RunId::new(&run).unwrap())
        .expect("the pass archived the run");
    assert_eq!(a.logs[0].run.as_str(), run);
    let left = open(dir.path())
        .backend()
        .list_runs(None, 100)
        .unwrap()
        .runs;
    assert!(
        !left.iter().any(|r| r.run.as_str() == run),
        "the pass deleted it"
    );
}
