//! The one error table (`runlog_world::error_table`, issue 21): every error kind of the
//! store, the World and the streams has its row; a code has one status whichever surface
//! meets it (a store's `InvalidEvent` was 500 through the World and 400 through the
//! streams); the runtime's retry rule holds for every code.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use runlog::{Config, RunId, Store};
use runlog_world::error_table::{Code, ERROR_KINDS, KindCode, Surface, store_kind};
use runlog_world::{
    EventType, Pagination, ResolveData, StorageFault, StreamError, Streams, World, WorldConfig,
    WorldError,
};

fn store_samples() -> Vec<runlog::Error> {
    use runlog::Error as E;
    let p = || PathBuf::from("/s");
    vec![
        E::InvalidRunId {
            id: "a/b".into(),
            reason: "only [A-Za-z0-9_-] allowed",
        },
        E::InvalidEvent {
            field: "payload",
            reason: "too big".into(),
        },
        E::InvalidConfig("x".into()),
        E::RunIdCaseConflict {
            requested: "Run".into(),
            existing: "run".into(),
        },
        E::RunNotFound { run: "r".into() },
        E::RunExists { run: "r".into() },
        E::Fenced {
            run: "r".into(),
            expected: 1,
            actual: 2,
        },
        E::DuplicateDecision {
            run: "r".into(),
            key: "k".into(),
            seq: 1,
        },
        E::Busy {
            run: "r".into(),
            holder: "pid 1".into(),
            waited_ms: 10,
        },
        E::corrupt("r", "seg-00000001.log", 4096, "crc"),
        E::UnsupportedVersion {
            path: p(),
            found: 9,
            supported: 1,
        },
        E::NotAStore {
            path: p(),
            detail: "no FORMAT".into(),
        },
        E::DiskFull {
            op: "writing",
            path: p(),
        },
        E::Poisoned {
            run: "r".into(),
            cause: "EIO".into(),
        },
        E::Panicked {
            run: "r".into(),
            detail: "boom".into(),
        },
        E::ReadOnly {
            op: "append".into(),
            path: p(),
        },
        E::Io {
            op: "reading",
            path: p(),
            source: std::io::Error::from_raw_os_error(5),
        },
    ]
}

fn fault(run: &str, code: &str) -> StorageFault {
    StorageFault {
        run_id: run.into(),
        code: code.into(),
        message: "m".into(),
        readable_seq: 0,
        segment: None,
        offset: None,
    }
}

fn world_samples() -> Vec<WorldError> {
    let run = || "wrun_1".to_string();
    vec![
        WorldError::RunNotFound { run_id: run() },
        WorldError::StepNotFound {
            run_id: run(),
            step_id: "s".into(),
        },
        WorldError::HookNotFound { hook: "h".into() },
        WorldError::WaitNotFound {
            run_id: run(),
            wait_id: "w".into(),
        },
        WorldError::EventNotFound {
            run_id: run(),
            event_id: "e".into(),
        },
        WorldError::EntityConflict {
            run_id: run(),
            message: "m".into(),
        },
        WorldError::DuplicateEventId {
            run_id: run(),
            event_id: "e".into(),
        },
        WorldError::RunExpired {
            run_id: run(),
            message: "m".into(),
        },
        WorldError::TooEarly {
            run_id: run(),
            step_id: "s".into(),
            retry_after_s: 3,
        },
        WorldError::PreconditionFailed {
            run_id: run(),
            state_updated_at_ms: 1,
            newest_event_ms: 2,
        },
        WorldError::RunNotSupported {
            run_id: run(),
            found: 9,
            supported: 7,
        },
        WorldError::LegacySpecVersion {
            run_id: run(),
            found: None,
        },
        WorldError::InvalidRequest {
            field: "f".into(),
            reason: "r".into(),
        },
        WorldError::AtOutOfRange {
            run_id: run(),
            at: runlog_world::At::Seq(9),
            last: 8,
        },
        WorldError::AttributeValidation { reason: "r".into() },
        WorldError::Busy {
            run_id: run(),
            attempts: 3,
        },
        WorldError::GroupAborted { run_id: run() },
        WorldError::InvalidStoredEvent {
            run_id: run(),
            seq: 1,
            reason: "r".into(),
        },
        WorldError::Unreadable {
            what: "hooks.list",
            runs: vec![fault("wrun_1", "CORRUPT")],
        },
    ]
}

fn stream_samples() -> Vec<StreamError> {
    vec![
        StreamError::InvalidName {
            name: String::new(),
            reason: "empty",
        },
        StreamError::InvalidLimit { limit: 0, max: 10 },
        StreamError::InvalidCursor { cursor: "x".into() },
        StreamError::Closed {
            run: "wrun_1".into(),
            name: "s".into(),
        },
        StreamError::Contended {
            run: "wrun_1".into(),
            name: "s".into(),
            attempts: 8,
        },
        StreamError::Collision {
            log: "stream-x".into(),
            wanted: "a/b".into(),
            found: "c/d".into(),
        },
        StreamError::RunCollected {
            run: "wrun_1".into(),
            name: "s".into(),
        },
        StreamError::Malformed {
            log: "stream-x".into(),
            seq: 1,
            detail: "d".into(),
        },
    ]
}

#[test]
fn every_row_of_the_store_world_and_streams_is_the_row_of_some_error() {
    let mut reached: BTreeSet<(&str, &str)> = BTreeSet::new();
    for e in store_samples() {
        reached.insert((store_kind(&e).surface.as_str(), store_kind(&e).name));
    }
    for e in world_samples() {
        reached.insert((e.kind().surface.as_str(), e.kind().name));
    }
    for e in stream_samples() {
        reached.insert((e.kind().surface.as_str(), e.kind().name));
    }
    let rows: BTreeSet<(&str, &str)> = ERROR_KINDS
        .iter()
        .filter(|k| k.surface != Surface::Binding && k.name != "Unknown")
        .map(|k| (k.surface.as_str(), k.name))
        .collect();
    assert_eq!(reached, rows);
    // Each error's row is the one of its own variant (the row's name is the variant's).
    for e in world_samples() {
        assert!(format!("{e:?}").starts_with(e.kind().name), "{e:?}");
    }
    for e in stream_samples() {
        assert!(format!("{e:?}").starts_with(e.kind().name), "{e:?}");
    }
    for e in store_samples() {
        assert!(format!("{e:?}").starts_with(store_kind(&e).name), "{e:?}");
    }
}

#[test]
fn a_store_error_has_its_own_code_class_and_status_through_the_world_and_the_streams() {
    for e in store_samples() {
        let shown = format!("{e:?}");
        let row = store_kind(&e);
        let through_world = WorldError::Storage(e.replicate());
        let through_streams = StreamError::Store(e.replicate());
        let KindCode::Is(code) = row.code else {
            panic!("{shown}: a store row has a fixed code")
        };
        assert_eq!(
            (
                through_world.code(),
                through_world.status(),
                through_world.class_name()
            ),
            (code, code.status().unwrap(), row.class_name),
            "{shown}"
        );
        assert_eq!(
            (
                through_streams.code(),
                through_streams.status(),
                through_streams.class_name()
            ),
            (code, code.status().unwrap(), row.class_name),
            "{shown}"
        );
    }
}

#[test]
fn the_cases_that_disagreed_now_agree() {
    let invalid = || runlog::Error::InvalidEvent {
        field: "payload",
        reason: "too big".into(),
    };
    // Was 500 through the World, 400 through the streams.
    assert_eq!(WorldError::Storage(invalid()).status(), 400);
    assert_eq!(StreamError::Store(invalid()).status(), 400);
    // Bad input the store refuses is 400 (was 500 through the World, UNKNOWN in the binding).
    let case = WorldError::Storage(runlog::Error::RunIdCaseConflict {
        requested: "Run".into(),
        existing: "run".into(),
    });
    assert_eq!((case.code(), case.status()), (Code::InvalidInput, 400));
    // A missing log is NOT_FOUND 404 with the run's class (was NOT_FOUND with status 500).
    let missing = WorldError::Storage(runlog::Error::RunNotFound { run: "r".into() });
    assert_eq!(
        (missing.code(), missing.status(), missing.class_name()),
        (Code::NotFound, 404, "WorkflowRunNotFoundError")
    );
    // A lost fence that escapes is FENCED 409 (was 500 through the World, 409 in JavaScript).
    let fenced = WorldError::Storage(runlog::Error::Fenced {
        run: "r".into(),
        expected: 1,
        actual: 2,
    });
    assert_eq!((fenced.code(), fenced.status()), (Code::Fenced, 409));
    // An unreadable answer takes its fault's code and that code's status (a busy lock: 503).
    let busy = WorldError::Unreadable {
        what: "hooks.list",
        runs: vec![fault("wrun_1", "BUSY"), fault("wrun_2", "CORRUPT")],
    };
    assert_eq!((busy.code(), busy.status()), (Code::Busy, 503));
    // Codes of their own instead of INTERNAL (a failed Node-API call).
    let aborted = WorldError::GroupAborted { run_id: "r".into() };
    assert_eq!((aborted.code(), aborted.status()), (Code::Aborted, 500));
    let foreign = WorldError::InvalidStoredEvent {
        run_id: "r".into(),
        seq: 1,
        reason: "not JSON".into(),
    };
    assert_eq!((foreign.code(), foreign.status()), (Code::Corrupt, 500));
    // Streams have a status and a class of their own now.
    let closed = StreamError::Closed {
        run: "wrun_1".into(),
        name: "s".into(),
    };
    assert_eq!(
        (closed.code(), closed.status(), closed.class_name()),
        (Code::StreamClosed, 409, "WorkflowWorldError")
    );
}

#[test]
fn the_runtime_retries_exactly_the_5xx_412_and_425_codes() {
    for c in Code::ALL {
        let want = match c.status() {
            Some(s) => s >= 500 || s == 412 || s == 425,
            None => false,
        };
        assert_eq!(c.retryable(), want, "{}", c.as_str());
        assert_eq!(Code::parse(c.as_str()), Some(c));
    }
    assert_eq!(Code::Closed.status(), None);
    let names: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(names.len(), Code::ALL.len(), "codes are distinct");
}

#[test]
fn a_payload_above_the_stores_limit_is_400_through_the_world_and_the_streams_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        payload_len_bytes_max: 512,
        ..Config::default()
    };
    let store = Arc::new(Store::open(dir.path(), config).unwrap());
    let w = World::new(store.clone(), WorldConfig::default());
    let run = running_run(&w);
    let big = format!(
        r#"{{"stepName":"step//./wf//add","input":"{}"}}"#,
        "x".repeat(600)
    );
    // The World checks the store's limit itself (`InvalidRequest`); the store's own refusal
    // (`Storage(InvalidEvent)`) has the same code and status.
    let e = ev(&w, &run, EventType::StepCreated, Some("step_1"), Some(&big)).unwrap_err();
    assert_eq!(
        (e.code(), e.status(), e.class_name()),
        (Code::InvalidInput, 400, "WorkflowWorldError")
    );
    let streams = Streams::new(store.clone());
    let id = RunId::new(&run).unwrap();
    let s = streams.write(&id, "strm_1", vec![0u8; 600]).unwrap_err();
    assert_eq!((s.code(), s.status()), (Code::InvalidInput, 400));
    let steps = w.list_steps(&run, &Pagination::default(), ResolveData::None);
    assert!(steps.unwrap().data.is_empty());
}
