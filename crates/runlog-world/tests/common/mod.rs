//! Shared by the World tests: a World on a fresh store, request builders with realistic
//! payloads (binary values in the reference's `{"__type":"Uint8Array","data":...}` shape),
//! assertions on the SDK error class and status, and [`Interposed`], a backend whose appends a
//! test intercepts.
// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

pub mod corpus;
mod interposed;
#[allow(unused_imports)] // as `dead_code` above
pub use interposed::{Decisions, Facts, Interposed, Interposer};

use std::io::BufRead;
use std::process::{Child, Command};
use std::sync::Arc;

use runlog::{Config, Store};
use runlog_world::{
    CreateEventParams, EventRequest, EventResult, EventType, World, WorldConfig, WorldError,
};

pub type TestWorld = World<Arc<Store>>;

/// A World on a new store in a temporary directory (kept alive by the returned guard).
pub fn world() -> (tempfile::TempDir, TestWorld) {
    let dir = tempfile::tempdir().expect("temp dir");
    let w = open(dir.path());
    (dir, w)
}

/// A World on the store at `path` (created if missing).
pub fn open(path: &std::path::Path) -> TestWorld {
    let store = Store::open(path, Config::default()).expect("open store");
    World::new(Arc::new(store), WorldConfig::default())
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `Uint8Array` in the reference's JSON shape.
pub fn bin(bytes: &[u8]) -> String {
    format!(r#"{{"__type":"Uint8Array","data":"{}"}}"#, base64(bytes))
}

pub fn params() -> CreateEventParams {
    CreateEventParams::default()
}

/// A request of `ty` with correlation id `corr` and data `data` (JSON text).
pub fn req(ty: EventType, corr: Option<&str>, data: Option<&str>) -> EventRequest {
    let mut r = EventRequest::new(ty).spec_version(5);
    if let Some(c) = corr {
        r = r.correlation_id(c);
    }
    match data {
        Some(d) => r.data(d).expect("test data is JSON"),
        None => r,
    }
}

/// Creates and starts a run stamped with spec version `spec`; its id.
pub fn running_run_at(w: &TestWorld, spec: u32) -> String {
    let run = runlog_world::mint_run_id();
    let created = EventRequest::new(EventType::RunCreated)
        .spec_version(spec)
        .data(run_created_data("workflow//./wf//main"))
        .unwrap();
    w.create_event(Some(&run), created, &params()).unwrap();
    ev(w, &run, EventType::RunStarted, None, None).unwrap();
    run
}

pub fn run_created_data(workflow: &str) -> String {
    format!(
        r#"{{"deploymentId":"dpl_test","workflowName":"{workflow}","input":{},"executionContext":{{"traceCarrier":{{}}}}}}"#,
        bin(b"devl[1,2]")
    )
}

/// Creates a run (fresh id) of workflow `wf`; returns its id.
pub fn create_run_of(w: &TestWorld, wf: &str) -> String {
    let run = runlog_world::mint_run_id();
    w.create_event(
        Some(&run),
        req(EventType::RunCreated, None, Some(&run_created_data(wf))),
        &params(),
    )
    .expect("run_created");
    run
}

pub fn create_run(w: &TestWorld) -> String {
    create_run_of(w, "workflow//./wf//main")
}

/// Creates and starts a run.
pub fn running_run(w: &TestWorld) -> String {
    let run = create_run(w);
    ev(w, &run, EventType::RunStarted, None, None).expect("run_started");
    run
}

/// `create_event` with default params.
pub fn ev(
    w: &TestWorld,
    run: &str,
    ty: EventType,
    corr: Option<&str>,
    data: Option<&str>,
) -> Result<EventResult, WorldError> {
    w.create_event(Some(run), req(ty, corr, data), &params())
}

pub fn step_created(w: &TestWorld, run: &str, step: &str) -> Result<EventResult, WorldError> {
    let data = format!(
        r#"{{"stepName":"step//./wf//add","input":{}}}"#,
        bin(b"[1,2]")
    );
    ev(w, run, EventType::StepCreated, Some(step), Some(&data))
}

pub fn step_started(w: &TestWorld, run: &str, step: &str) -> Result<EventResult, WorldError> {
    ev(w, run, EventType::StepStarted, Some(step), None)
}

pub fn lazy_start(w: &TestWorld, run: &str, step: &str) -> Result<EventResult, WorldError> {
    let data = format!(
        r#"{{"stepName":"step//./wf//add","input":{},"ownerMessageId":"msg_1"}}"#,
        bin(b"[3]")
    );
    ev(w, run, EventType::StepStarted, Some(step), Some(&data))
}

pub fn step_completed(w: &TestWorld, run: &str, step: &str) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"result":{}}}"#, bin(b"3"));
    ev(w, run, EventType::StepCompleted, Some(step), Some(&data))
}

pub fn step_failed(w: &TestWorld, run: &str, step: &str) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"error":{}}}"#, bin(b"boom"));
    ev(w, run, EventType::StepFailed, Some(step), Some(&data))
}

pub fn step_retrying(
    w: &TestWorld,
    run: &str,
    step: &str,
    retry_after: Option<&str>,
) -> Result<EventResult, WorldError> {
    let data = match retry_after {
        Some(at) => format!(r#"{{"error":{},"retryAfter":"{at}"}}"#, bin(b"again")),
        None => format!(r#"{{"error":{}}}"#, bin(b"again")),
    };
    ev(w, run, EventType::StepRetrying, Some(step), Some(&data))
}

pub fn hook_created(
    w: &TestWorld,
    run: &str,
    hook: &str,
    token: &str,
) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"token":"{token}","metadata":{}}}"#, bin(b"meta"));
    ev(w, run, EventType::HookCreated, Some(hook), Some(&data))
}

pub fn hook_received(w: &TestWorld, run: &str, hook: &str) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"payload":{}}}"#, bin(b"hello"));
    ev(w, run, EventType::HookReceived, Some(hook), Some(&data))
}

pub fn hook_disposed(w: &TestWorld, run: &str, hook: &str) -> Result<EventResult, WorldError> {
    ev(w, run, EventType::HookDisposed, Some(hook), None)
}

pub fn wait_created(w: &TestWorld, run: &str, wait: &str) -> Result<EventResult, WorldError> {
    ev(
        w,
        run,
        EventType::WaitCreated,
        Some(wait),
        Some(r#"{"resumeAt":"2030-01-01T00:00:00.000Z"}"#),
    )
}

pub fn wait_completed(w: &TestWorld, run: &str, wait: &str) -> Result<EventResult, WorldError> {
    ev(w, run, EventType::WaitCompleted, Some(wait), None)
}

pub fn terminal(w: &TestWorld, run: &str, ty: EventType) -> Result<EventResult, WorldError> {
    let data = match ty {
        EventType::RunCompleted => format!(r#"{{"output":{}}}"#, bin(b"done")),
        EventType::RunFailed => format!(r#"{{"error":{},"errorCode":"USER_ERROR"}}"#, bin(b"e")),
        _ => r#"{"cancelReason":"stop"}"#.to_string(),
    };
    ev(w, run, ty, None, Some(&data))
}

/// Asserts the SDK class name and status of an error.
#[track_caller]
pub fn assert_class<T: std::fmt::Debug>(
    r: Result<T, WorldError>,
    class: &str,
    status: u16,
) -> WorldError {
    let e = r.expect_err("expected an error");
    assert_eq!(
        (e.class_name(), e.status()),
        (class, status),
        "unexpected error: {e}"
    );
    e
}

/// Flips one byte of `marker` in run `run`'s first segment in the store at `dir`: the batch
/// holding it fails its checksum.
pub fn flip_marker(dir: &std::path::Path, run: &str, marker: &str) {
    let seg = dir.join("runs").join(run).join("seg-00000001.log");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .expect("the marker is in the segment");
    bytes[at] ^= 0x20;
    std::fs::write(&seg, bytes).unwrap();
}

/// The kinds of a run's stored events, in seq order (read straight from the store).
pub fn kinds(w: &TestWorld, run: &str) -> Vec<String> {
    let run = runlog::RunId::new(run).unwrap();
    let page = w.backend().read(&run, 0, 100_000).unwrap();
    page.events
        .into_iter()
        .map(|e| e.kind.to_string())
        .collect()
}

/// A command that runs this test binary's ignored `child_entry` test, alone, with its output
/// uncaptured (the caller adds `env`, `stdout` and spawns).
pub fn child_command() -> Command {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "child_entry",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    cmd
}

/// The `ACK a b c` lines the children print (their words after `ACK`, in each child's
/// order, child after child), once every child has exited successfully. A line may start
/// with the harness's "test child_entry ... " before the `ACK`.
pub fn acked_lines(children: Vec<Child>) -> Vec<Vec<String>> {
    let mut acked = Vec::new();
    for mut child in children {
        let out = child.stdout.take().expect("the child's stdout is piped");
        for line in std::io::BufReader::new(out).lines() {
            let line = line.unwrap();
            if let Some(rest) = line.find("ACK ").map(|at| &line[at + 4..]) {
                acked.push(rest.split(' ').map(str::to_string).collect());
            }
        }
        assert!(child.wait().unwrap().success());
    }
    acked
}
