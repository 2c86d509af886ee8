//! Cross-process rules with real OS processes: two writer processes get dense seqs with no
//! duplicate (each sees the other's commits through the run's shared counters, rule 6),
//! listing and reads do not wait for a lock holder (rule 8), and kernel advisory locks are
//! never stolen from a live holder and are free the moment it dies (rule 9).
//!
//! Child processes are this test binary re-executed on the ignored `child_entry` test with
//! `RUNLOG_CHILD_MODE` set.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use runlog::{Config, Error, NewEvent, RunId, Store};

fn spawn_child(mode: &str, store: &Path, run: &str, count: usize) -> Child {
    common::child_command()
        .env("RUNLOG_CHILD_MODE", mode)
        .env("RUNLOG_CHILD_STORE", store)
        .env("RUNLOG_CHILD_RUN", run)
        .env("RUNLOG_CHILD_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child side, started by `spawn_child`. Never a passing test: ignored, and it fails when
/// run without `RUNLOG_CHILD_MODE`.
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    let Ok(mode) = std::env::var("RUNLOG_CHILD_MODE") else {
        common::not_started_as_a_child("RUNLOG_CHILD_MODE");
    };
    let store_dir = std::env::var("RUNLOG_CHILD_STORE").unwrap();
    let run = RunId::new(std::env::var("RUNLOG_CHILD_RUN").unwrap()).unwrap();
    let count: usize = std::env::var("RUNLOG_CHILD_COUNT")
        .unwrap()
        .parse()
        .unwrap();
    match mode.as_str() {
        "append" => child_append(&store_dir, &run, count),
        "hold" => child_hold(&store_dir, &run),
        other => panic!("unknown mode {other}"),
    }
}

fn child_append(store_dir: &str, run: &RunId, count: usize) {
    let store = Store::open(store_dir, Config::default()).unwrap();
    let pid = std::process::id();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (store, run) = (store.clone(), run.clone());
            std::thread::spawn(move || {
                for i in (t..count).step_by(4) {
                    let e = NewEvent::new("step_completed", format!("{pid}-{i}"))
                        .key(format!("{pid}-{i}"));
                    store.append_facts(&run, vec![e]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!("done");
}

/// Holds the run's kernel lock like a writer stuck in a long commit would, then sleeps.
fn child_hold(store_dir: &str, run: &RunId) {
    let path = Path::new(store_dir)
        .join("runs")
        .join(run.as_str())
        .join("lock");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    fs4::FileExt::lock(&file).unwrap();
    std::os::unix::fs::FileExt::write_all_at(
        &file,
        format!("pid {:<16}\n", std::process::id()).as_bytes(),
        0,
    )
    .unwrap();
    println!("locked");
    std::thread::sleep(Duration::from_secs(600));
}

/// Reads the child's stdout (which also carries the test harness's lines) until `want`.
fn wait_for_line(child: &mut Child, want: &str) {
    let mut reader = BufReader::new(child.stdout.as_mut().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "child ended before printing {want:?}"
        );
        if line.trim().ends_with(want) {
            return;
        }
    }
}

/// A store with run `held` (one event) whose lock a live child process holds.
fn held_run(dir: &Path, config: Config) -> (Store, RunId, Child) {
    let store = Store::open(dir, config).unwrap();
    let run = RunId::new("held").unwrap();
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}")])
        .unwrap();
    let mut holder = spawn_child("hold", dir, "held", 0);
    wait_for_line(&mut holder, "locked");
    (store, run, holder)
}

#[test]
fn two_processes_appending_five_thousand_each_give_dense_one_to_ten_thousand() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    let run = RunId::new("shared").unwrap();
    store.create_run(&run).unwrap();
    let mut children: Vec<Child> = (0..2)
        .map(|_| spawn_child("append", dir.path(), "shared", 5000))
        .collect();
    for c in &mut children {
        wait_for_line(c, "done");
        assert!(c.wait().unwrap().success());
    }
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=10_000).collect::<Vec<_>>()
    );
    let payloads: HashSet<_> = events.iter().map(|e| e.payload.clone()).collect();
    assert_eq!(payloads.len(), 10_000, "no duplicates");
    let keys: HashSet<_> = events.iter().map(|e| e.key.clone().unwrap()).collect();
    assert_eq!(keys.len(), 10_000);
    assert!(store.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn a_live_holder_is_never_robbed_and_its_lock_is_free_the_moment_it_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        lock_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let (store, run, mut holder) = held_run(dir.path(), config);
    for _ in 0..3 {
        match store.append_facts(&run, vec![NewEvent::new("x", "y")]) {
            Err(Error::Busy {
                holder: h,
                waited_ms,
                ..
            }) => {
                assert_eq!(h, format!("pid {}", holder.id()));
                assert!(waited_ms >= 300);
            }
            other => panic!("expected Busy, got {other:?}"),
        }
    }
    assert_eq!(
        store.last_seq(&run).unwrap(),
        1,
        "readers are not blocked and nothing was written"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let start = Instant::now();
    let a = store
        .append_facts(&run, vec![NewEvent::new("x", "y")])
        .unwrap();
    assert_eq!(a[0].seq, 2);
    assert!(
        start.elapsed() < Duration::from_millis(300),
        "the lock was free at once, not after a timeout"
    );
}

#[test]
fn list_runs_and_reads_do_not_wait_for_a_lock_holder() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        lock_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    let (_writer, run, mut holder) = held_run(dir.path(), config.clone());
    let fresh = Store::open(dir.path(), config).unwrap();
    let start = Instant::now();
    let page = fresh.list_runs(None, 10).unwrap();
    assert_eq!(page.runs.len(), 1);
    assert_eq!(
        (page.runs[0].run.as_str(), page.runs[0].last_seq),
        ("held", 1)
    );
    assert_eq!(
        fresh.read(&run, 0, 10).unwrap().events.len(),
        1,
        "readers do not wait either"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    holder.kill().unwrap();
    holder.wait().unwrap();
}
