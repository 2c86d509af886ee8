//! gc deletes an archived log only while it holds exactly what its archive holds
//! (`RunLog::delete_run_at`, checked under the run's write lock): an event appended to one of
//! a finished run's logs after its archive was written (here a chunk of its stream, appended
//! at the last moment before the delete) keeps the log live and the run in the report's
//! `failed`, nothing lost; the next gc archives the log with that event and deletes it.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use runlog::io::StdFs;
use runlog::{Config, NewEvent, Result, RunId, RunLog, Seq, Store};
use runlog_world::{EventType, GcParams, Streams, World, WorldConfig, WorldError};

/// Appends one event to the first stream chunk log gc deletes, just before the delete.
#[derive(Default)]
struct LateChunk {
    done: AtomicBool,
}

impl Interposer for LateChunk {
    fn delete_run_at(&self, inner: &dyn RunLog, run: &RunId, expected: Seq) -> Result<()> {
        if run.as_str().contains("-n") && !self.done.swap(true, Ordering::SeqCst) {
            inner.append_facts(run, vec![NewEvent::new("chunk", &b"late"[..])])?;
        }
        inner.delete_run_at(run, expected)
    }
}

#[test]
fn an_event_appended_after_the_archive_keeps_its_log_live_until_the_next_gc() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let w = World::new(
        Interposed::new(store.clone(), LateChunk::default()),
        WorldConfig::default(),
    );
    let run = {
        let plain = World::new(store.clone(), WorldConfig::default());
        let run = running_run(&plain);
        let streams = Streams::new(store.clone());
        streams
            .write(&RunId::new(&run).unwrap(), "out", &b"early"[..])
            .unwrap();
        terminal(&plain, &run, EventType::RunCompleted).unwrap();
        run
    };
    let params = GcParams {
        finished_before_ms: u64::MAX,
        archive_dir: dir.path().join("archive"),
        dry_run: false,
    };
    let chunk_log = || {
        let page = store.list_runs(None, 100).unwrap();
        page.runs
            .iter()
            .map(|r| r.run.clone())
            .find(|id| id.as_str().contains("-n"))
    };
    let chunks = chunk_log().expect("the stream's chunk log");

    let first = w.collect_finished(&StdFs, &params, &mut |_| {}).unwrap();
    assert!(first.collected.is_empty(), "{first:?}");
    assert_eq!(first.failed.len(), 1, "{first:?}");
    assert_eq!(first.failed[0].0, run);
    assert!(
        matches!(
            first.failed[0].1,
            WorldError::Storage(runlog::Error::Fenced {
                expected: 1,
                actual: 2,
                ..
            })
        ),
        "{:?}",
        first.failed[0].1
    );
    let page = store.read(&chunks, 0, 10).unwrap();
    let payloads: Vec<&[u8]> = page.events.iter().map(|e| &e.payload[..]).collect();
    assert_eq!(
        payloads,
        [&b"early"[..], &b"late"[..]],
        "the late chunk is kept"
    );

    let second = w.collect_finished(&StdFs, &params, &mut |_| {}).unwrap();
    assert_eq!(second.collected.len(), 1, "{second:?}");
    assert_eq!(chunk_log(), None, "gone from the store");
    let archive =
        runlog::archive::read_archive(&StdFs, &params.archive_dir, &RunId::new(&run).unwrap())
            .unwrap();
    let log = archive
        .log(chunks.as_str())
        .expect("the chunk log archived");
    let archived: Vec<&[u8]> = log.events.iter().map(|e| &e.payload[..]).collect();
    assert_eq!(archived, [&b"early"[..], &b"late"[..]]);
}
