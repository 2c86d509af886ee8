//! Shared batches (SPEC §5 step 5) with real processes and real faults: a child process runs
//! the concurrent workload of `shared_batch_workload` (six threads: facts unkeyed, keyed from
//! a shared pool, with pool caller ids; decisions fenced at the last seq they read or a stale
//! one) on a real store with small segments and batch limits, printing every answer.
//!
//! - kill -9 at a random moment: the reopened log holds every acknowledged event at its seq,
//!   each in-flight append whole or not at all, every duplicate answer true, no rejected
//!   append; `verify_run` clean; the next append at last + 1.
//! - under `strace -f -e inject=fdatasync:error=EIO:when=…` (the kernel's own fdatasync
//!   failing every few calls): no failed append readable afterwards, every acknowledged one
//!   there.
//!
//! The child is this binary re-executed on its ignored `child_entry` test.

mod common;
mod shared_batch_workload;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use runlog::{NewEvent, RunId, Store};
use shared_batch_workload as w;

const THREADS: usize = 6;

fn run() -> RunId {
    RunId::new("shared").unwrap()
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

#[test]
#[ignore = "child process entry point"]
fn child_entry() {
    let Ok(mode) = std::env::var("RUNLOG_SB_CHILD") else {
        common::not_started_as_a_child("RUNLOG_SB_CHILD");
    };
    let dir = std::env::var("RUNLOG_SB_STORE").unwrap();
    let seed: u64 = std::env::var("RUNLOG_SB_SEED").unwrap().parse().unwrap();
    let ops: usize = if mode == "kill" { usize::MAX } else { 80 };
    let store = Store::open(dir, w::config()).unwrap();
    say("@ready".into());
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut rng = w::thread_rng(seed, t);
                for op in 0..ops {
                    say(w::encode(&w::one(&store, &run(), t, op, &mut rng)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    say("@done".into());
}

fn child(dir: &Path, mode: &str, seed: u64) -> Command {
    let mut cmd = common::child_command();
    cmd.env("RUNLOG_SB_CHILD", mode)
        .env("RUNLOG_SB_STORE", dir)
        .env("RUNLOG_SB_SEED", seed.to_string());
    cmd
}

fn new_store(dir: &Path) {
    let store = Store::open(dir, w::config()).unwrap();
    store.create_run(&run()).unwrap();
}

/// Opens `dir`, checks the run against `issued`, verify and the next append. Returns the
/// number of unacknowledged appends found whole in the log.
fn check_store(dir: &Path, issued: &[w::Issued], failed: w::Failed, ctx: &str) -> usize {
    let store = Store::open(dir, w::config()).unwrap();
    let log = w::read_all(&store, &run());
    let kept = w::check(&log, issued, failed, ctx);
    let report = store.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{ctx}: {report:?}");
    assert_eq!(report.events, log.len() as u64, "{ctx}");
    let next = store
        .append_facts(&run(), vec![NewEvent::new("after", "after")])
        .unwrap();
    assert_eq!(next[0].seq, log.len() as u64 + 1, "{ctx}");
    kept
}

#[test]
fn kill_9_mid_concurrent_groups_keeps_every_ack_and_each_append_whole() {
    let iterations: u64 = std::env::var("RUNLOG_SB_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let mut rng = rand::rng();
    let (mut kept, mut answers) = (0, 0);
    for it in 0..iterations {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        new_store(&dir);
        let seed = rng.random::<u64>();
        let mut p = common::spawn_piped(child(&dir, "kill", seed).stderr(Stdio::inherit()));
        let mut lines = Vec::new();
        let want = rng.random_range(0..400);
        let deadline = Instant::now() + Duration::from_secs(60);
        while lines.len() < want + 1 && Instant::now() < deadline {
            match p.lines.recv_timeout(Duration::from_secs(10)) {
                Ok(l) if l.starts_with('@') => lines.push(l),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_micros(rng.random_range(0..3000)));
        p.child.kill().unwrap();
        p.child.wait().unwrap();
        while let Ok(l) = p.lines.recv_timeout(Duration::from_millis(200)) {
            if l.starts_with('@') {
                lines.push(l);
            }
        }
        // (libtest's "test child_entry ... " has no newline: "@ready" ends that line.)
        let issued = w::decode(&lines, seed, THREADS);
        answers += lines.len();
        let ctx = format!("kill {it} (seed {seed}, {} answers)", lines.len());
        kept += check_store(&dir, &issued, w::Failed::AllOrNothing, &ctx);
    }
    eprintln!("{iterations} kills, {answers} answers, {kept} in-flight appends kept whole");
}

#[test]
fn fdatasyncs_failed_by_the_kernel_fail_whole_groups_and_leave_nothing_readable() {
    if let Some(why) = common::strace_unusable() {
        runlog_conformance::skip::skip(why);
        return;
    }
    for (n, when) in ["12+7", "5+3", "30+11"].iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        new_store(&dir);
        let seed = 77 + n as u64;
        let inner = child(&dir, "strace", seed);
        let mut cmd = Command::new("strace");
        cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync"])
            .arg("-e")
            .arg(format!("inject=fdatasync:error=EIO:when={when}"))
            .arg(inner.get_program())
            .args(inner.get_args());
        for (k, v) in inner.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        let out = cmd.stderr(Stdio::inherit()).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        assert!(
            lines.iter().any(|l| l == "@done"),
            "the child finished: {:?}\n{text}",
            out.status
        );
        let issued = w::decode(&lines, seed, THREADS);
        let tally = w::tally(&issued);
        let ctx = format!("strace when={when}: {tally:?}");
        assert!(tally.get("failed").copied().unwrap_or(0) > 0, "{ctx}");
        assert!(
            tally.get("facts").copied().unwrap_or(0) > 0,
            "some groups commit: {ctx}"
        );
        // SPEC §5: with only fdatasync failing, every failed group is cut back (the cut's
        // own fdatasync is not one of the failing ones) or its marker is written (fsync).
        check_store(&dir, &issued, w::Failed::Absent, &ctx);
        eprintln!("{ctx}");
    }
}
