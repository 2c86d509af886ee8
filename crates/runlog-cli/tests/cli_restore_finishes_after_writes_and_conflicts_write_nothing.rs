//! `runlog restore` and the gc after it, on real processes:
//! - a restore killed after some logs are back, then a write to one of them (a stream that
//!   exists again takes chunks), is finished by running it again (exit 0, the chunk kept);
//! - a restore that would meet a conflicting log writes nothing (exit 1, no log of the run
//!   created) and leaves the archive;
//! - a restored run is kept by the next gc until its restore is older than the cut
//!   (`restored-after-cut`), then collected;
//! - gc and restore of a store that does not exist are bad usage (exit 2) and create nothing;
//! - a gc whose stderr is a closed pipe still finishes its pass (progress lines dropped).

mod cli_support;
mod gc_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use cli_support::{code, json_lines, runlog};
use gc_support::{add_world_runs, archived};
use runlog::{Config, RunId, RunLog, Store};
use runlog_world::Streams;

const CUT: &str = "2999-01-01T00:00:00Z";

fn streams(store: &Path) -> Streams<Arc<Store>> {
    Streams::new(Arc::new(Store::open(store, Config::default()).unwrap()))
}

fn logs_of(store: &Path, run: &str) -> Vec<String> {
    let s = Store::open_read_only(store, Config::default()).unwrap();
    let page = RunLog::list_runs(&s, None, 10_000).unwrap();
    let ulid = &run[5..];
    page.runs
        .iter()
        .map(|r| r.run.to_string())
        .filter(|id| id.contains(ulid))
        .collect()
}

fn iso_now() -> String {
    runlog_world::format_iso_ms(runlog_world::Clock::system().now_ms())
}

#[test]
fn a_restore_killed_then_written_to_is_finished_by_running_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    let run = RunId::new(&done).unwrap();
    assert_eq!(code(&runlog(&store, &["gc", "--finished-before", CUT])), 0);
    // Killed after its third log is back: the attribute log, the stream index and the open
    // stream `logs` (auxiliary logs first, in id order; the run's own log last).
    let killed = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["restore", &done])
        .env("RUNLOG_GC_KILL_AT_STEP", "3")
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), None, "killed by SIGKILL");
    let back = logs_of(&store, &done);
    assert_eq!(back.len(), 3, "{back:?}");
    assert!(back.iter().any(|id| id.ends_with("-nlogs")), "{back:?}");
    assert!(!back.contains(&done), "{back:?}");
    // The open stream is back: it takes a chunk before the restore is finished.
    assert_eq!(
        streams(&store).write(&run, "logs", &b"late\n"[..]).unwrap(),
        1
    );
    let again = runlog(&store, &["restore", &done, "--json"]);
    assert_eq!(
        code(&again),
        0,
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let page = streams(&store).read(&run, "logs", 0, 10).unwrap();
    let chunks: Vec<&[u8]> = page.chunks.iter().map(|c| &c.data[..]).collect();
    assert_eq!(chunks, [&b"line\n"[..], b"late\n"]);
    assert!(archived(&store.join("archive"), &done).is_none());
}

#[test]
fn a_restore_meeting_a_conflict_writes_nothing_and_keeps_the_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    assert_eq!(code(&runlog(&store, &["gc", "--finished-before", CUT])), 0);
    // The run's own log (restored last) made again with other metadata.
    {
        let s = Store::open(&store, Config::default()).unwrap();
        s.create_run_with_meta(&RunId::new(&done).unwrap(), b"other")
            .unwrap();
    }
    let out = runlog(&store, &["restore", &done]);
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        logs_of(&store, &done),
        std::slice::from_ref(&done),
        "no other log of it written"
    );
    assert!(
        archived(&store.join("archive"), &done).is_some(),
        "the archive stays"
    );
}

#[test]
fn a_restored_run_is_kept_until_its_restore_is_older_than_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let (done, _) = add_world_runs(&store);
    assert_eq!(code(&runlog(&store, &["gc", "--finished-before", CUT])), 0);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let before_restore = iso_now();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(code(&runlog(&store, &["restore", &done])), 0);
    // Finished long before the cut, restored after it: kept.
    let kept = runlog(
        &store,
        &["gc", "--finished-before", &before_restore, "--json"],
    );
    assert_eq!(code(&kept), 0, "{}", String::from_utf8_lossy(&kept.stderr));
    let summary = json_lines(&kept).last().unwrap()["summary"].clone();
    assert_eq!(summary["collected"], 0, "{summary}");
    assert_eq!(summary["kept_by"]["restored-after-cut"], 1, "{summary}");
    assert!(logs_of(&store, &done).contains(&done));
    // A cut past the restore: collected again, and a restore puts it back again.
    let again = runlog(&store, &["gc", "--finished-before", CUT, "--json"]);
    assert_eq!(
        json_lines(&again).last().unwrap()["summary"]["collected"],
        1
    );
    assert_eq!(code(&runlog(&store, &["restore", &done])), 0);
}

#[test]
fn gc_and_restore_of_a_missing_store_are_bad_usage_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-store");
    for args in [
        &["gc", "--finished-before", "30d"][..],
        &["restore", "wrun_01ARZ3NDEKTSV4RRFFQ69G5FAV"][..],
    ] {
        let out = runlog(&missing, args);
        assert_eq!(
            code(&out),
            2,
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

#[test]
fn a_gc_whose_stderr_is_closed_finishes_its_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut runs = Vec::new();
    for _ in 0..5 {
        runs.push(add_world_runs(&store).0);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(&store)
        .args(["gc", "--finished-before", CUT])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take()); // closed before the first progress line
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    for run in &runs {
        assert!(archived(&store.join("archive"), run).is_some(), "{run}");
        assert!(logs_of(&store, run).is_empty(), "{run}");
    }
}
