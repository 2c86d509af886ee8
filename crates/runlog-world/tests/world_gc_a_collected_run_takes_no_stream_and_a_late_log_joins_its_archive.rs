//! After gc archived a workflow run, a stream write or read of it is refused with
//! `RunCollected` (GONE, 410) instead of starting a stream log no run owns (which `runlog
//! restore` would then meet as a conflict, and gc would never take); streams of runs that
//! are not created yet (the SDK writes a `start()` argument's stream before `run_created`
//! commits) and of the SDK's health-check ids (`wrun_hc_…`) are taken as before, and a
//! restored run takes streams again. A stream log of a run no longer live that is in the
//! store anyway (a store collected before runs were recorded, a write that raced the gc) is
//! merged into the run's archive by the next gc and deleted; with no archive of its run in
//! the archive directory it is left alone and reported.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use runlog::io::StdFs;
use runlog::{RunId, RunLog};
use runlog_world::error_table::Code;
use runlog_world::{COLLECTED_RUNS_LOG, EventType, GcParams, GcReport, Kept, StreamError, Streams};

const STREAM: &str = "strm_01ARZ3NDEKTSV4RRFFQ69G5FAV_user";

fn gc(w: &TestWorld, archive: &Path) -> GcReport {
    let params = GcParams {
        finished_before_ms: u64::MAX,
        archive_dir: archive.to_path_buf(),
        dry_run: false,
    };
    w.collect_finished(&StdFs, &params, &mut |_| {})
        .expect("gc")
}

fn log_ids(w: &TestWorld) -> Vec<String> {
    let page = w.backend().list_runs(None, 10_000).expect("list");
    page.runs.iter().map(|r| r.run.to_string()).collect()
}

/// A completed run with stream `STREAM` holding `chunk-1` (open).
fn finished_with_stream(w: &TestWorld, streams: &Streams<Arc<runlog::Store>>) -> RunId {
    let run = running_run(w);
    let id = RunId::new(&run).unwrap();
    streams.write(&id, STREAM, &b"chunk-1"[..]).expect("write");
    terminal(w, &run, EventType::RunCompleted).expect("run_completed");
    id
}

/// A store whose one run (a completed run with stream `STREAM` holding `chunk-1`) gc
/// collected into the returned archive dir.
fn collected() -> (
    tempfile::TempDir,
    TestWorld,
    PathBuf,
    Streams<Arc<runlog::Store>>,
    RunId,
) {
    let (dir, w) = world();
    let archive = dir.path().join("archive");
    let streams = Streams::new(Arc::clone(w.backend()));
    let run = finished_with_stream(&w, &streams);
    assert_eq!(gc(&w, &archive).collected.len(), 1);
    (dir, w, archive, streams, run)
}

fn chunks_in_archive(archive: &Path, run: &RunId) -> Vec<Vec<u8>> {
    let a = runlog::archive::read_archive(&StdFs, archive, run).expect("archive");
    let log = Streams::<Arc<runlog::Store>>::chunk_log_id(run, STREAM).unwrap();
    let stream = a.log(log.as_str()).expect("the stream's log is archived");
    stream.events.iter().map(|e| e.payload.to_vec()).collect()
}

#[test]
fn a_collected_run_refuses_stream_writes_and_reads_but_uncreated_and_health_check_runs_take_them() {
    let (dir, w) = world();
    let archive = dir.path().join("archive");
    let streams = Streams::new(Arc::clone(w.backend()));
    let run = finished_with_stream(&w, &streams);
    let report = gc(&w, &archive);
    assert_eq!(report.collected.len(), 1, "{report:?}");
    let before = log_ids(&w);
    assert!(
        !before.iter().any(|id| id.contains(&run.as_str()[5..])),
        "{before:?}"
    );

    let write = streams.write(&run, STREAM, &b"late"[..]).unwrap_err();
    assert!(
        matches!(&write, StreamError::RunCollected { run: r, name } if r == run.as_str() && name == STREAM),
        "{write:?}"
    );
    assert_eq!((write.code(), write.status()), (Code::Gone, 410));
    assert!(write.to_string().contains("runlog restore"), "{write}");
    let other = streams.write(&run, "another", &b"x"[..]).unwrap_err();
    assert!(
        matches!(other, StreamError::RunCollected { .. }),
        "{other:?}"
    );
    let close = streams.close(&run, STREAM).unwrap_err();
    assert!(
        matches!(close, StreamError::RunCollected { .. }),
        "{close:?}"
    );
    let read = streams.read(&run, STREAM, 0, 10).unwrap_err();
    assert!(matches!(read, StreamError::RunCollected { .. }), "{read:?}");
    let mut now = log_ids(&w);
    now.retain(|id| id != COLLECTED_RUNS_LOG);
    let mut was = before.clone();
    was.retain(|id| id != COLLECTED_RUNS_LOG);
    assert_eq!(now, was, "nothing was created for the collected run");
    assert_eq!(chunks_in_archive(&archive, &run), [b"chunk-1".to_vec()]);

    // A run not created yet (a start() argument's stream) and a health check's id.
    let uncreated = RunId::new("wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
    assert_eq!(streams.write(&uncreated, STREAM, &b"arg"[..]).unwrap(), 0);
    let health = RunId::new("wrun_hc_01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
    assert_eq!(streams.write(&health, "hc", &b"{}"[..]).unwrap(), 0);
    streams.close(&health, "hc").unwrap();
    assert_eq!(
        streams
            .read(&uncreated, STREAM, 0, 10)
            .unwrap()
            .chunks
            .len(),
        1
    );
}

#[test]
fn a_restored_run_takes_streams_again() {
    let (_dir, w, archive, streams, run) = collected();
    let a = runlog::archive::read_archive(&StdFs, &archive, &run).unwrap();
    for log in &a.logs {
        w.backend().create_run(&log.run, &log.meta).unwrap();
        let events = log.events.iter().map(|e| {
            let mut n = runlog::NewEvent::new(e.kind.clone(), e.payload.clone());
            n.event_id = Some(e.event_id);
            n
        });
        w.backend()
            .append_facts(&log.run, events.collect())
            .unwrap();
    }
    // Every log back but not yet recorded as restored (a restore killed there): a new
    // stream is still refused, an existing one takes writes.
    let refused = streams.write(&run, "new", &b"x"[..]).unwrap_err();
    assert!(
        matches!(refused, StreamError::RunCollected { .. }),
        "{refused:?}"
    );
    runlog_world::record_restored(w.backend(), &run).unwrap();
    assert_eq!(
        streams.write(&run, STREAM, &b"after restore"[..]).unwrap(),
        1
    );
    assert_eq!(streams.write(&run, "new", &b"x"[..]).unwrap(), 0);
}

#[test]
fn a_stream_log_of_a_collected_run_joins_its_archive_at_the_next_gc_and_one_of_no_archive_stays() {
    let (_dir, w, archive, streams, run) = collected();
    // As in a store collected before gc recorded the runs it archived: the late write lands.
    w.backend()
        .delete_run(&RunId::new(COLLECTED_RUNS_LOG).unwrap())
        .unwrap();
    streams.write(&run, "late", &b"late-1"[..]).unwrap();
    streams.close(&run, "late").unwrap();
    let late_log = Streams::<Arc<runlog::Store>>::chunk_log_id(&run, "late").unwrap();
    assert!(log_ids(&w).contains(&late_log.to_string()));
    // And a stream of a run never created, whose archive is nowhere.
    let uncreated = RunId::new("wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
    streams.write(&uncreated, STREAM, &b"arg"[..]).unwrap();

    let report = gc(&w, &archive);
    assert!(report.collected.is_empty(), "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(report.swept.len(), 1, "{report:?}");
    assert_eq!(report.swept[0].run_id, run.as_str());
    assert_eq!(
        report.kept,
        [(uncreated.to_string(), Kept::RunNotLive)],
        "the uncreated run's stream stays"
    );
    let left = log_ids(&w);
    assert!(
        !left.iter().any(|id| id.contains(&run.as_str()[5..])),
        "{left:?}"
    );
    assert!(
        left.iter().any(|id| id.contains(&uncreated.as_str()[5..])),
        "{left:?}"
    );

    let a = runlog::archive::read_archive(&StdFs, &archive, &run).unwrap();
    assert_eq!(a.logs[0].run, run, "the run's own log stays first");
    let late = a
        .log(late_log.as_str())
        .expect("the late stream joined the archive");
    let kinds: Vec<&str> = late.events.iter().map(|e| &*e.kind).collect();
    assert_eq!(kinds.len(), 2, "the chunk and the close: {kinds:?}");
    assert_eq!(&late.events[0].payload[..], b"late-1");
    assert_eq!(chunks_in_archive(&archive, &run), [b"chunk-1".to_vec()]);
    // The run is recorded again: a write now is refused.
    let again = streams.write(&run, "late", &b"x"[..]).unwrap_err();
    assert!(
        matches!(again, StreamError::RunCollected { .. }),
        "{again:?}"
    );
    // A third gc finds nothing to do.
    let third = gc(&w, &archive);
    assert!(
        third.swept.is_empty() && third.collected.is_empty(),
        "{third:?}"
    );
}

/// Fails the fenced delete of one log (as a gc killed there, or one whose delete lost to a
/// writer, leaves it): every delete before it happened.
struct FailDeleteOf(String);

impl Interposer for FailDeleteOf {
    fn delete_run_at(&self, inner: &dyn RunLog, run: &RunId, expected: u64) -> runlog::Result<()> {
        if run.as_str() == self.0 {
            return Err(runlog::Error::Io {
                op: "deleting (injected)",
                path: run.as_str().into(),
                source: std::io::Error::other("injected"),
            });
        }
        inner.delete_run_at(run, expected)
    }
}

/// A gc that stopped after deleting a run's stream logs and before its own log: the run is
/// live but recorded as collected, and a stream or attribute log of it is not started again
/// (at seq 1, which neither the archive nor a restore could take): writes, closes and reads
/// of its streams are GONE, an attribute change is RunExpired (410); the next gc finishes,
/// with the archive as the first one wrote it.
#[test]
fn a_run_half_collected_takes_no_new_stream_or_attribute_log_and_the_next_gc_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let plain = open(dir.path());
    let streams = Streams::new(Arc::clone(plain.backend()));
    let run = finished_with_stream(&plain, &streams);
    streams.write(&run, "second", &b"two"[..]).unwrap();
    let attrs = [("team".to_string(), Some("core".to_string()))];
    plain
        .set_run_attributes(run.as_str(), &attrs, false)
        .unwrap();
    let before = log_ids(&plain);

    let store = runlog::Store::open(dir.path(), runlog::Config::default()).unwrap();
    let failing = runlog_world::World::new(
        Interposed::new(Arc::new(store), FailDeleteOf(run.to_string())),
        runlog_world::WorldConfig::default(),
    );
    let params = GcParams {
        finished_before_ms: u64::MAX,
        archive_dir: archive.clone(),
        dry_run: false,
    };
    let report = failing
        .collect_finished(&StdFs, &params, &mut |_| {})
        .unwrap();
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let left = log_ids(&plain);
    assert!(left.contains(&run.to_string()), "its own log is live");
    assert!(
        !left
            .iter()
            .any(|id| id.starts_with("stream-") && id.contains(&run.as_str()[5..])),
        "its stream logs are deleted: {left:?}"
    );

    for name in [STREAM, "second", "new"] {
        let write = streams.write(&run, name, &b"late"[..]).unwrap_err();
        assert!(
            matches!(write, StreamError::RunCollected { .. }),
            "{name}: {write:?}"
        );
        let close = streams.close(&run, name).unwrap_err();
        assert!(
            matches!(close, StreamError::RunCollected { .. }),
            "{name}: {close:?}"
        );
        let read = streams.read(&run, name, 0, 10).unwrap_err();
        assert!(
            matches!(read, StreamError::RunCollected { .. }),
            "{name}: {read:?}"
        );
        let info = streams.info(&run, name).unwrap_err();
        assert!(
            matches!(info, StreamError::RunCollected { .. }),
            "{name}: {info:?}"
        );
    }
    let list = streams.list(&run).unwrap_err();
    assert!(matches!(list, StreamError::RunCollected { .. }), "{list:?}");
    let attr = plain
        .set_run_attributes(run.as_str(), &attrs, false)
        .unwrap_err();
    assert_eq!(attr.status(), 410, "{attr:?}");
    assert_eq!(log_ids(&plain), left, "nothing was created");

    let second = gc(&plain, &archive);
    assert_eq!(second.collected.len(), 1, "{second:?}");
    assert!(second.failed.is_empty(), "{second:?}");
    let a = runlog::archive::read_archive(&StdFs, &archive, &run).unwrap();
    let mut archived: Vec<String> = a.logs.iter().map(|l| l.run.to_string()).collect();
    archived.sort();
    let mut mine: Vec<String> = before
        .into_iter()
        .filter(|id| id.contains(&run.as_str()[5..]))
        .collect();
    mine.sort();
    assert_eq!(archived, mine, "every log of the run, once");
    assert_eq!(chunks_in_archive(&archive, &run), [b"chunk-1".to_vec()]);
}
