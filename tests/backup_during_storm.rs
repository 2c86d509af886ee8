//! Online backup with real processes (issue 25, format/SPEC.md §12): 16 writers (4 processes
//! × 4 threads) append to shared runs throughout, each recording every acknowledged seq with
//! the wall-clock time it was acknowledged. A backup taken during the storm verifies clean,
//! every run in it is a prefix of its source run, and it holds every event acknowledged before
//! it started; an incremental backup during the storm does too; one after the storm equals
//! the source. And the backup process itself, killed with SIGKILL at random moments while the
//! writers run, leaves a backup whose runs are all clean prefixes, and the next backup
//! completes it.
//!
//! Children are this test binary re-executed on its ignored `child_entry` test with
//! `RUNLOG_BACKUP_CHILD` set (tests/common).

#[path = "backup/check.rs"]
mod check;
mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runlog::backup::BACKUP_FILE;
use runlog::{Config, NewEvent, RunId, Seq, Store};

const PROCESSES: usize = 4;
const THREADS: usize = 4;
const SHARED_RUNS: usize = 8;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn run_id(i: usize) -> RunId {
    RunId::new(format!("storm-{i:02}")).unwrap()
}

/// Writers' segments are small, so segments are sealed and created while backups copy them.
fn writer_config() -> Config {
    Config {
        segment_len_bytes_max: 64 << 10,
        ..Config::default()
    }
}

/// The child side. Never a passing test: ignored, and it fails without `RUNLOG_BACKUP_CHILD`.
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    let Ok(mode) = std::env::var("RUNLOG_BACKUP_CHILD") else {
        common::not_started_as_a_child("RUNLOG_BACKUP_CHILD");
    };
    let store = PathBuf::from(std::env::var("RUNLOG_BACKUP_STORE").unwrap());
    match mode.as_str() {
        "writer" => child_writer(&store),
        "backup" => {
            let dst = std::env::var("RUNLOG_BACKUP_DST").unwrap();
            let src = Store::open_read_only(&store, Config::default()).unwrap();
            // Paced: a line and a pause after each run, so the parent can kill between runs.
            let pace = std::env::var("RUNLOG_BACKUP_PACE_MS")
                .ok()
                .map(|ms| Duration::from_millis(ms.parse().unwrap()));
            println!("started");
            let report = src
                .backup(&dst, &mut |run| {
                    if let Some(pace) = pace {
                        println!("copied {}", run.run);
                        std::thread::sleep(pace);
                    }
                })
                .unwrap();
            println!("done complete={}", report.complete);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// `THREADS` writers appending to the shared runs until `<store>.stop` exists; each ack is
/// a line `run seq acked_at_ms` in `<store>.acks-<pid>-<thread>`, written after the append
/// returned (so the time is at or after the acknowledgement).
fn child_writer(store_dir: &Path) {
    let store = Store::open(store_dir, writer_config()).unwrap();
    let stop = store_dir.with_extension("stop");
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, stop) = (store.clone(), stop.clone());
            let log = store_dir.with_extension(format!("acks-{}-{t}", std::process::id()));
            std::thread::spawn(move || {
                let mut out = std::io::BufWriter::new(std::fs::File::create(log).unwrap());
                let mut i = t;
                while !stop.exists() {
                    let run = run_id(i % SHARED_RUNS);
                    let payload = format!("{} {t} {i} {}", std::process::id(), "w".repeat(64));
                    let ev = NewEvent::new("step_completed", payload);
                    let seq = store.append_facts(&run, vec![ev]).unwrap()[0].seq;
                    writeln!(out, "{run} {seq} {}", now_ms()).unwrap();
                    i += 1;
                }
                out.flush().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    println!("stopped");
}

/// The storm: the store with its shared runs, and the writer processes.
struct Storm {
    store: PathBuf,
    writers: Vec<Child>,
}

impl Storm {
    fn start(dir: &Path) -> Storm {
        let store = dir.join("src");
        let s = Store::open(&store, writer_config()).unwrap();
        for i in 0..SHARED_RUNS {
            s.create_run(&run_id(i)).unwrap();
        }
        let writers = (0..PROCESSES)
            .map(|_| {
                common::child_command()
                    .env("RUNLOG_BACKUP_CHILD", "writer")
                    .env("RUNLOG_BACKUP_STORE", &store)
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let storm = Storm { store, writers };
        storm.wait_for_events(SHARED_RUNS as u64 * 20);
        storm
    }

    fn total_events(&self) -> u64 {
        let s = Store::open_read_only(&self.store, Config::default()).unwrap();
        check::last_seqs(&s).values().sum()
    }

    /// Waits until the shared runs hold `n` more events than now.
    fn wait_for_events(&self, n: u64) {
        let target = self.total_events() + n;
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.total_events() < target {
            assert!(Instant::now() < deadline, "the writers made no progress");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the writers and returns every acknowledgement: per run, `(seq, acked_at_ms)`.
    fn stop(mut self) -> BTreeMap<RunId, Vec<(Seq, u64)>> {
        std::fs::write(self.store.with_extension("stop"), b"").unwrap();
        for mut w in std::mem::take(&mut self.writers) {
            assert!(w.wait().unwrap().success());
        }
        let mut acks: BTreeMap<RunId, Vec<(Seq, u64)>> = BTreeMap::new();
        let dir = self.store.parent().unwrap();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if !path.to_string_lossy().contains(".acks-") {
                continue;
            }
            for line in std::io::BufReader::new(std::fs::File::open(&path).unwrap()).lines() {
                let line = line.unwrap();
                let f: Vec<&str> = line.split(' ').collect();
                let run = RunId::new(f[0]).unwrap();
                acks.entry(run)
                    .or_default()
                    .push((f[1].parse().unwrap(), f[2].parse().unwrap()));
            }
        }
        acks
    }
}

impl Drop for Storm {
    /// A failed test must not leave writers appending to a removed directory.
    fn drop(&mut self) {
        for w in &mut self.writers {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Every event acknowledged before `started_at_ms` is in the backup whose last seqs are
/// `seqs`; returns how many acknowledgements came before and after the start.
fn assert_holds_acked_before(
    acks: &BTreeMap<RunId, Vec<(Seq, u64)>>,
    seqs: &BTreeMap<RunId, Seq>,
    started_at_ms: u64,
) -> (usize, usize) {
    let (mut before, mut after) = (0, 0);
    for (run, list) in acks {
        for &(seq, at) in list {
            if at < started_at_ms {
                before += 1;
                let held = seqs.get(run).copied().unwrap_or(0);
                assert!(
                    held >= seq,
                    "{run}: seq {seq} acked at {at} ms, before the backup started at {started_at_ms} ms, is not in it (it holds {held})"
                );
            } else {
                after += 1;
            }
        }
    }
    (before, after)
}

#[test]
fn a_backup_during_a_16_writer_storm_verifies_clean_and_holds_every_event_acked_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let storm = Storm::start(tmp.path());
    let dst = tmp.path().join("backup");
    let src = Store::open_read_only(&storm.store, Config::default()).unwrap();

    let first = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(first.complete);
    assert!(first.runs.iter().all(|r| r.result.name() == "new"));
    let seqs_first = check::assert_clean_prefix(&src, &dst);
    storm.wait_for_events(400);

    let second = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(second.complete);
    assert!(
        second.runs.iter().all(|r| r.result.name() == "extended"),
        "{:?}",
        second.runs
    );
    let seqs_second = check::assert_clean_prefix(&src, &dst);
    storm.wait_for_events(200);

    let acks = storm.stop();
    let (before, after) = assert_holds_acked_before(&acks, &seqs_first, first.started_at_ms);
    assert!(
        before > 0 && after > 0,
        "writers ran throughout: {before} before, {after} after"
    );
    let (before2, after2) = assert_holds_acked_before(&acks, &seqs_second, second.started_at_ms);
    assert!(before2 > before && after2 > 0, "{before2} {after2}");
    // Writers were running while each backup copied: runs grew past what it holds.
    let final_seqs = check::last_seqs(&src);
    assert!(seqs_second.iter().any(|(r, s)| final_seqs[r] > *s));

    // After the storm: the backup equals the source, and takes appends like any store.
    let last = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(last.complete);
    assert_eq!(check::assert_clean_prefix(&src, &dst), final_seqs);
    let copy = Store::open(&dst, Config::default()).unwrap();
    let next = copy
        .append_facts(&run_id(0), vec![NewEvent::new("after_backup", "{}")])
        .unwrap();
    assert_eq!(next[0].seq, final_seqs[&run_id(0)] + 1);
}

/// Spawns a backup child of `store` into `dst` (paced by `pace_ms` per run when given);
/// returns it once it printed `started`.
fn spawn_backup(store: &Path, dst: &Path, pace_ms: Option<u64>) -> common::Piped {
    let mut cmd = common::child_command();
    cmd.env("RUNLOG_BACKUP_CHILD", "backup")
        .env("RUNLOG_BACKUP_STORE", store)
        .env("RUNLOG_BACKUP_DST", dst);
    if let Some(ms) = pace_ms {
        cmd.env("RUNLOG_BACKUP_PACE_MS", ms.to_string());
    }
    let piped = common::spawn_piped(&mut cmd);
    // The test harness prints its own lines first.
    while !piped
        .lines
        .recv_timeout(Duration::from_secs(60))
        .unwrap()
        .ends_with("started")
    {}
    piped
}

/// Fills the source with `runs` extra runs of `events` events each (so a backup takes a while).
fn fill(store: &Path, runs: usize, events: usize) {
    let s = Store::open(store, Config::default()).unwrap();
    for r in 0..runs {
        let run = RunId::new(format!("fill-{r:04}")).unwrap();
        s.create_run(&run).unwrap();
        let batch = (0..events)
            .map(|i| NewEvent::new("step_completed", format!("{r} {i} {}", "f".repeat(200))))
            .collect();
        s.append_facts(&run, batch).unwrap();
    }
}

#[test]
fn kill9_of_the_backup_at_random_moments_leaves_clean_prefixes_and_the_next_backup_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let storm = Storm::start(tmp.path());
    fill(&storm.store, 300, 40);
    let dst = tmp.path().join("backup");
    let src = Store::open_read_only(&storm.store, Config::default()).unwrap();

    // How long a whole backup takes here, to kill within it.
    let timing = tmp.path().join("timing");
    let mut probe = spawn_backup(&storm.store, &timing, None);
    let t = Instant::now();
    assert!(probe.child.wait().unwrap().success());
    let full = t.elapsed();

    // Odd rounds kill at a random time within a whole backup's duration, so kills land inside
    // a run's copy; but once a backup completed, the next ones are incremental and quick, and
    // such a kill may land after the end. Even rounds are paced (1 ms after each of the 308
    // runs) and killed right after the line of a random run among the first 250, so they
    // are killed between runs with the backup unfinished, wherever the previous round left it.
    let mut killed_incomplete = 0;
    for round in 0..8 {
        let paced = round % 2 == 0;
        let mut child = spawn_backup(&storm.store, &dst, paced.then_some(1));
        let at = if paced {
            let k = 1 + rand::random::<u32>() % 250;
            for _ in 0..k {
                let line = child.lines.recv_timeout(Duration::from_secs(60)).unwrap();
                assert!(line.starts_with("copied "), "{line}");
            }
            Duration::ZERO
        } else {
            let at = full.mul_f64(rand::random::<f64>());
            std::thread::sleep(at);
            at
        };
        child.child.kill().unwrap(); // SIGKILL
        child.child.wait().unwrap();
        if !dst.join(BACKUP_FILE).exists() {
            continue; // killed before its manifest: nothing else written either
        }
        let copy = Store::open_read_only(&dst, Config::default()).unwrap();
        let manifest = copy.backup_manifest().unwrap().unwrap();
        killed_incomplete += usize::from(!manifest.complete);
        // Every run there is a prefix of its source, its committed region clean (an
        // interrupted extension may leave a noted tail past its counter, never a problem).
        for (run, _) in check::last_seqs(&copy) {
            let report = copy.verify_run(&run).unwrap();
            assert!(
                report.problems.is_empty(),
                "round {round} ({at:?}): {report:?}"
            );
            let copied = check::events(&copy, &run);
            assert_eq!(
                copied[..],
                check::events(&src, &run)[..copied.len()],
                "{run}"
            );
        }
        storm.wait_for_events(50);
    }
    eprintln!("{killed_incomplete} of 8 kills left the backup incomplete");
    assert!(killed_incomplete > 0, "no kill landed inside a backup");
    let done = src.backup(&dst, &mut |_| {}).unwrap();
    assert!(done.complete);
    let seqs = check::assert_clean_prefix(&src, &dst);
    assert_eq!(seqs.len(), SHARED_RUNS + 300);
    let acks = storm.stop();
    let (before, _) = assert_holds_acked_before(&acks, &seqs, done.started_at_ms);
    assert!(before > 0);
    let copy = Store::open_read_only(&dst, Config::default()).unwrap();
    assert!(copy.backup_manifest().unwrap().unwrap().complete);
}
