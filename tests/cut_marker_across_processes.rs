//! The `cut-pending` marker with real processes and real injected faults (issue 26 §2,
//! format/SPEC.md §5): a child writer runs under `strace`, which fails its `fdatasync`
//! (and its `ftruncate`) with `EIO`. Its append fails, its cut-back fails, and it leaves the
//! marker; its own next append is `Poisoned`. A second child whose cut fails too refuses to
//! write and adopts nothing. Then this process, unfaulted, opens the store: it cuts the
//! segment first, so the failed group's bytes are gone (never adopted), the marker is
//! removed, and the log is every acknowledged event, dense, continued at the next seq. And a
//! child whose only failure is the group's first `fdatasync` (`when=1`) cuts back, stays
//! writable, and appends at the seq the failed group would have had.
//!
//! Children are this test binary re-executed on its ignored `child_entry` test with
//! `RUNLOG_CUT_CHILD` set (tests/common). Without `strace` or ptrace, the tests skip
//! (`runlog_conformance::skip`, a failure under `RUNLOG_NO_SKIP=1`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use runlog::{Config, Error, NewEvent, RunId, Store};

const RUN: &str = "r";

/// Payloads of the group whose sync fails: long and unique, so stale bytes are found.
fn failed_group() -> Vec<String> {
    (0..2)
        .map(|i| format!("failed group event {i} {}", "#".repeat(300)))
        .collect()
}

/// The child side, started by `run_child`. Never a passing test: ignored, and it fails when
/// run without `RUNLOG_CUT_CHILD`.
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    let Ok(mode) = std::env::var("RUNLOG_CUT_CHILD") else {
        common::not_started_as_a_child("RUNLOG_CUT_CHILD");
    };
    let store = Store::open(
        std::env::var("RUNLOG_CUT_STORE").unwrap(),
        Config::default(),
    )
    .unwrap();
    let run = RunId::new(RUN).unwrap();
    let one = |payload: &str| vec![NewEvent::new("k", payload.to_string())];
    match mode.as_str() {
        // The group's fdatasync and its cut-back fail: Io, then Poisoned on the same handle.
        "cut-fails" => {
            let group = failed_group().into_iter().map(|p| NewEvent::new("k", p));
            let err = store.append_facts(&run, group.collect()).unwrap_err();
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
            println!("failed: {err}");
            match store.append_facts(&run, one("refused")) {
                Err(Error::Poisoned { cause, .. }) => println!("poisoned: {cause}"),
                other => panic!("the same handle after a failed cut-back: {other:?}"),
            }
        }
        // The marker cannot be applied: the append is refused.
        "refused" => {
            let err = store.append_facts(&run, one("refused")).unwrap_err();
            assert!(err.to_string().contains("cut marker"), "{err}");
            println!("refused: {err}");
        }
        // Only the group's fdatasync fails; the cut-back succeeds.
        "cut-succeeds" => {
            let group = failed_group().into_iter().map(|p| NewEvent::new("k", p));
            let err = store.append_facts(&run, group.collect()).unwrap_err();
            assert!(matches!(err, Error::Io { .. }), "{err:?}");
            let again = store.append_facts(&run, one("same handle")).unwrap();
            println!("appended: {}", again[0].seq);
        }
        other => panic!("unknown mode {other}"),
    }
}

/// Runs the child `mode` on `store` under `strace -f` with `inject` (each an `-e inject=`
/// spec), tracing fdatasync, ftruncate and fsync into `trace`. Returns its output and the
/// trace; panics (after killing it) if it runs for over a minute.
fn run_child(mode: &str, store: &Path, inject: &[&str], trace: &Path) -> (Output, String) {
    let child = common::child_command();
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-qq", "-o"])
        .arg(trace)
        .args(["-e", "trace=fdatasync,ftruncate,fsync"]);
    for spec in inject {
        cmd.arg("-e").arg(format!("inject={spec}"));
    }
    cmd.arg(child.get_program())
        .args(child.get_args())
        .env("RUNLOG_CUT_CHILD", mode)
        .env("RUNLOG_CUT_STORE", store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut proc = cmd.spawn().expect("spawn strace");
    let started = Instant::now();
    while proc.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = proc.kill();
            panic!("child {mode} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = proc.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {mode}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (out, std::fs::read_to_string(trace).unwrap())
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A store with run `r` holding two acknowledged facts; returns its path.
fn store_with_two_events(dir: &Path) -> PathBuf {
    let path = dir.join("store");
    let store = Store::open(&path, Config::default()).unwrap();
    let run = RunId::new(RUN).unwrap();
    store.create_run(&run).unwrap();
    for p in ["acked 1", "acked 2"] {
        store
            .append_facts(&run, vec![NewEvent::new("k", p)])
            .unwrap();
    }
    path
}

fn run_file(store: &Path, name: &str) -> PathBuf {
    store.join("runs").join(RUN).join(name)
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

/// Every event of the run as `(seq, payload)`, and a clean verify.
fn log(store: &Store) -> Vec<(u64, String)> {
    let run = RunId::new(RUN).unwrap();
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    store
        .read(&run, 0, 100)
        .unwrap()
        .events
        .iter()
        .map(|e| (e.seq, String::from_utf8_lossy(&e.payload).into_owned()))
        .collect()
}

#[test]
fn a_failed_fdatasync_and_cut_back_in_one_process_are_finished_by_the_next_process() {
    if let Some(why) = common::strace_unusable() {
        runlog_conformance::skip::skip(why);
        return;
    }
    let eio_fdatasync = "fdatasync:error=EIO";
    let eio_ftruncate = "ftruncate:error=EIO";
    // (the cut's truncate fails, so the group's bytes stay in the file) and (the truncate
    // succeeds, its fdatasync fails: the file is cut in the page cache only).
    for (what, faults) in [
        ("ftruncate fails", vec![eio_fdatasync, eio_ftruncate]),
        ("cut's fdatasync fails", vec![eio_fdatasync]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = store_with_two_events(dir.path());
        let segment = run_file(&path, "seg-00000001.log");
        let marker = run_file(&path, "cut-pending");
        // The header and the two batches (the block's preallocated zeros follow, SPEC §5).
        let committed = {
            let store = Store::open_read_only(&path, Config::default()).unwrap();
            4096 + store
                .run_info(&RunId::new(RUN).unwrap())
                .unwrap()
                .committed_bytes
        };
        let failed = failed_group();

        let (out, trace) = run_child("cut-fails", &path, &faults, &dir.path().join("t1"));
        let said = stdout(&out);
        assert!(
            said.contains("poisoned: ") && said.contains("cut marker") && said.contains("written"),
            "{what}: {said}"
        );
        let injected = |call: &str| {
            trace
                .lines()
                .filter(|l| l.contains(&format!("{call}(")) && l.contains("(INJECTED)"))
                .count()
        };
        assert!(injected("fdatasync") >= 1, "{what}: {trace}");
        if faults.contains(&eio_ftruncate) {
            assert_eq!(injected("ftruncate"), 1, "{what}: {trace}");
            assert!(
                holds(&std::fs::read(&segment).unwrap(), &failed[1]),
                "{what}: the failed group is in the file (adoptable without the marker)"
            );
        } else {
            assert_eq!(
                injected("fdatasync"),
                2,
                "{what}: the group's and the cut's: {trace}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            format!("seg-00000001.log {committed}\n"),
            "{what}"
        );

        // A next writer that cannot cut refuses, writes nothing and leaves the marker.
        let before = std::fs::read(&segment).unwrap();
        let faults = [eio_fdatasync, eio_ftruncate];
        let (out, _) = run_child("refused", &path, &faults, &dir.path().join("t2"));
        assert!(stdout(&out).contains("refused: "), "{what}");
        assert!(
            marker.exists(),
            "{what}: the marker stays while it cannot be applied"
        );
        assert_eq!(std::fs::read(&segment).unwrap(), before, "{what}");

        // This process is the next writer: it cuts first, then appends.
        let store = Store::open(&path, Config::default()).unwrap();
        let want = [(1, "acked 1"), (2, "acked 2")].map(|(s, p)| (s, p.to_string()));
        assert_eq!(
            log(&store),
            want,
            "{what}: the failed group must not be adopted"
        );
        assert!(!marker.exists(), "{what}: marker removed");
        let run = RunId::new(RUN).unwrap();
        let next = store
            .append_facts(&run, vec![NewEvent::new("k", "after")])
            .unwrap();
        assert_eq!(next[0].seq, 3, "{what}");
        assert_eq!(log(&store)[2], (3, "after".to_string()), "{what}");
        assert!(
            !holds(&std::fs::read(&segment).unwrap(), &failed[1]),
            "{what}: bytes of the failed group left in the segment"
        );
    }
}

#[test]
fn a_failed_fdatasync_whose_cut_back_succeeds_leaves_the_process_writable_at_the_same_seq() {
    if let Some(why) = common::strace_unusable() {
        runlog_conformance::skip::skip(why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = store_with_two_events(dir.path());
    // Only the first fdatasync of the child (the group's) fails.
    let faults = ["fdatasync:error=EIO:when=1"];
    let (out, trace) = run_child("cut-succeeds", &path, &faults, &dir.path().join("t"));
    assert!(stdout(&out).contains("appended: 3"), "{}", stdout(&out));
    let injected = trace.lines().filter(|l| l.contains("(INJECTED)")).count();
    assert_eq!(injected, 1, "{trace}");
    assert!(
        !run_file(&path, "cut-pending").exists(),
        "no marker after a good cut"
    );
    // Before any recovery could tidy up: the cut removed the group's bytes.
    let segment = std::fs::read(run_file(&path, "seg-00000001.log")).unwrap();
    assert!(
        !holds(&segment, &failed_group()[1]),
        "the group was not cut back"
    );
    let store = Store::open(&path, Config::default()).unwrap();
    let want = [(1, "acked 1"), (2, "acked 2"), (3, "same handle")];
    assert_eq!(log(&store), want.map(|(s, p)| (s, p.to_string())));
}
