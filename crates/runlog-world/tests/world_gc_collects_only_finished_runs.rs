//! Retention (`World::collect_finished`, the World option `retention`): a finished run whose
//! terminal event is older than the cut goes into an archive with its attribute log and its
//! stream logs, and out of the store; a run still running, one with a hook retained by
//! `tokenRetentionUntil` (until the World's clock passes it), or one with a waiting wait is
//! kept, and nothing of another run is taken. Time is the World's clock, moved by hand.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use runlog::io::StdFs;
use runlog::{Config, RunId, RunLog, Store};
use runlog_world::{
    Clock, EventType, GcParams, Kept, Retention, Streams, World, WorldConfig, parse_iso_ms,
};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

fn world_at(path: &Path, now: &Arc<AtomicU64>, retention: Option<Retention>) -> TestWorld {
    let store = Store::open(path, Config::default()).expect("open store");
    let now = Arc::clone(now);
    let config = WorldConfig {
        clock: Clock::from_fn(move || now.load(Ordering::SeqCst)),
        retention,
        ..WorldConfig::default()
    };
    World::new(Arc::new(store), config)
}

fn log_ids(w: &TestWorld) -> Vec<String> {
    let page = w.backend().list_runs(None, 1000).expect("list");
    page.runs.iter().map(|r| r.run.to_string()).collect()
}

/// A completed run with a stream `out` (2 chunks, closed) and one attribute.
fn finished_with_logs(w: &TestWorld) -> String {
    let run = running_run(w);
    let streams = Streams::new(Arc::clone(w.backend()));
    let id = RunId::new(&run).unwrap();
    streams.write(&id, "out", &b"chunk-1"[..]).expect("write");
    streams
        .write(&id, "out", &b"\xffchunk-2"[..])
        .expect("write");
    streams.close(&id, "out").expect("close");
    let attr = [("team".to_string(), Some("core".to_string()))];
    w.set_run_attributes(&run, &attr, false).expect("attrs");
    terminal(w, &run, EventType::RunCompleted).expect("run_completed");
    run
}

fn params(dir: &Path, cut_ms: u64) -> GcParams {
    GcParams {
        finished_before_ms: cut_ms,
        archive_dir: dir.join("archive"),
        dry_run: false,
    }
}

#[test]
fn a_finished_run_goes_with_its_own_logs_and_the_others_stay() {
    let dir = tempfile::tempdir().unwrap();
    let now = Arc::new(AtomicU64::new(
        parse_iso_ms("2030-01-01T00:00:00Z").unwrap(),
    ));
    let w = world_at(dir.path(), &now, None);
    let done = finished_with_logs(&w);
    let running = running_run(&w);
    Streams::new(Arc::clone(w.backend()))
        .write(&RunId::new(&running).unwrap(), "out", &b"live"[..])
        .unwrap();
    let waiting = running_run(&w);
    wait_created(&w, &waiting, "wait_1").unwrap();
    terminal(&w, &waiting, EventType::RunCompleted).unwrap();
    let before = log_ids(&w);
    let mine: Vec<String> = before
        .iter()
        .filter(|id| id.contains(&done[5..]))
        .cloned()
        .collect();
    assert_eq!(
        mine.len(),
        4,
        "run, attrs, stream index, stream chunks: {before:?}"
    );

    let report = w
        .collect_finished(
            &StdFs,
            &params(dir.path(), now.load(Ordering::SeqCst)),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(report.collected.len(), 1, "{report:?}");
    assert_eq!(report.collected[0].run_id, done);
    assert_eq!(report.collected[0].logs.len(), 4);
    let mut kept = report.kept.clone();
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (running.clone(), Kept::NotFinished),
        (waiting.clone(), Kept::PendingWait),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(kept, want);
    let after = log_ids(&w);
    let gone: Vec<&String> = before.iter().filter(|id| !after.contains(id)).collect();
    assert_eq!(
        gone,
        mine.iter().collect::<Vec<_>>(),
        "exactly the run's own logs left the store"
    );

    let archive = runlog::archive::read_archive(
        &StdFs,
        &dir.path().join("archive"),
        &RunId::new(&done).unwrap(),
    )
    .unwrap();
    let mut archived: Vec<String> = archive.logs.iter().map(|l| l.run.to_string()).collect();
    archived.sort();
    let mut expected = mine.clone();
    expected.sort();
    assert_eq!(archived, expected);
    assert_eq!(
        archive.logs[0].run.as_str(),
        done,
        "the run's own log comes first"
    );
    let chunk_events: u64 = archive
        .logs
        .iter()
        .filter(|l| l.run.as_str().contains("-n"))
        .map(|l| l.events.len() as u64)
        .sum();
    assert_eq!(chunk_events, 3, "two chunks and the close");
}

#[test]
fn a_retained_hook_keeps_its_run_until_the_clock_passes_it_and_then_its_token_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let start = parse_iso_ms("2026-12-01T12:00:00Z").unwrap();
    let now = Arc::new(AtomicU64::new(start));
    let w = world_at(dir.path(), &now, None);
    let run = running_run(&w);
    let data = format!(
        r#"{{"token":"tok","metadata":{},"tokenRetentionUntil":"2026-12-02T12:00:00.000Z"}}"#,
        bin(b"m")
    );
    ev(
        &w,
        &run,
        EventType::HookCreated,
        Some("hook_1"),
        Some(&data),
    )
    .unwrap();
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    // Events are stamped by the system clock; the cut lies past all of them, the World's
    // clock judges the retention.
    let cut = parse_iso_ms("2030-01-01T00:00:00Z").unwrap();
    now.store(start + DAY_MS / 2, Ordering::SeqCst);
    let report = w
        .collect_finished(&StdFs, &params(dir.path(), cut), &mut |_| {})
        .unwrap();
    assert_eq!(report.kept, vec![(run.clone(), Kept::LiveHook)]);
    let other = running_run(&w);
    assert!(
        hook_created(&w, &other, "hook_2", "tok")
            .unwrap()
            .event
            .is_some_and(|e| e.event_type == EventType::HookConflict),
        "the retained hook still holds its token"
    );

    now.store(start + 2 * DAY_MS, Ordering::SeqCst);
    let report = w
        .collect_finished(&StdFs, &params(dir.path(), cut), &mut |_| {})
        .unwrap();
    assert_eq!(
        report
            .collected
            .iter()
            .map(|r| r.run_id.clone())
            .collect::<Vec<_>>(),
        vec![run.clone()]
    );
    let third = running_run(&w);
    let created = hook_created(&w, &third, "hook_3", "tok").unwrap();
    assert_eq!(
        created.event.map(|e| e.event_type),
        Some(EventType::HookCreated),
        "a collected run's claim blocks nothing"
    );
}

#[test]
fn the_retention_option_collects_in_the_background_once_the_clock_moves() {
    let dir = tempfile::tempdir().unwrap();
    // The World's clock starts at the system's (which stamps the events), then moves by hand.
    let now = Arc::new(AtomicU64::new(Clock::system().now_ms()));
    let retention = Retention {
        finished_older_than_ms: DAY_MS,
        interval_ms: 5,
        archive_dir: dir.path().join("archive"),
    };
    let w = Arc::new(world_at(dir.path(), &now, Some(retention)));
    let run = finished_with_logs(&w);
    let task = w.start_retention().expect("retention is on");
    let passes = task.passes();
    wait_for(|| task.passes() >= passes + 2);
    assert_eq!(task.collected(), 0, "not older than a day yet");
    assert!(log_ids(&w).contains(&run));

    now.fetch_add(2 * DAY_MS, Ordering::SeqCst);
    wait_for(|| task.collected() == 1);
    assert!(
        !log_ids(&w).iter().any(|id| id.contains(&run[5..])),
        "{:?}",
        log_ids(&w)
    );
    assert!(
        dir.path()
            .join("archive")
            .join(format!("{run}.rla"))
            .is_file()
    );
    // Requests go on while it runs.
    let next = running_run(&w);
    terminal(&w, &next, EventType::RunCompleted).unwrap();
    drop(task);
    assert!(
        World::start_retention(&Arc::new(world_at(&dir.path().join("other"), &now, None)))
            .is_none(),
        "off by default"
    );
}

/// Polls `done` until it holds (at most 30 s: a liveness bound, not a speed assertion).
fn wait_for(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the retention thread made no progress"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A retention thread whose archive directory cannot be created (a regular file is in its
/// way) fails every pass: each failure is counted with its message, and the run stays live
/// with every log; once a directory is there the next pass collects it.
#[test]
fn a_retention_pass_that_cannot_archive_counts_the_failure_and_keeps_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"a file where the archive directory should be").unwrap();
    let now = Arc::new(AtomicU64::new(Clock::system().now_ms()));
    let retention = Retention {
        finished_older_than_ms: DAY_MS,
        interval_ms: 5,
        archive_dir: blocker.join("archive"),
    };
    let w = Arc::new(world_at(&dir.path().join("store"), &now, Some(retention)));
    let run = finished_with_logs(&w);
    let before = log_ids(&w);
    now.fetch_add(2 * DAY_MS, Ordering::SeqCst);
    let task = w.start_retention().expect("retention is on");
    assert_eq!((task.failures(), task.last_error()), (0, None));
    wait_for(|| task.failures() >= 2);
    assert_eq!(task.collected(), 0);
    let message = task.last_error().expect("the failure's message is kept");
    assert!(message.contains("not-a-dir"), "names the path: {message}");
    assert_eq!(log_ids(&w), before, "nothing left the store");

    std::fs::remove_file(&blocker).unwrap();
    std::fs::create_dir(&blocker).unwrap();
    wait_for(|| task.collected() == 1);
    assert!(!log_ids(&w).contains(&run));
    assert!(blocker.join("archive").join(format!("{run}.rla")).is_file());
}
