//! A `runlog gc` (and a `runlog restore`) killed with SIGKILL at every step
//! (`RUNLOG_GC_KILL_AT_STEP=N`: after each archive is durable, after each log is deleted,
//! after each run is collected; after each log is restored): after every kill each
//! candidate run's every log is live or archived with every event (or both), never neither;
//! a second gc completes the work (every candidate archived whole, none of its logs live),
//! and a restore run again after its kill gives every log back exactly.

mod cli_support;
mod gc_support;

use std::path::Path;
use std::process::Command;

use cli_support::{code, copy_dir, fixture_dir, import};
use gc_support::{Logs, add_world_runs, archived, snapshot};

const CUT: &str = "2999-01-01T00:00:00Z";

fn runlog_killed_at(store: &Path, step: u64, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env("RUNLOG_GC_KILL_AT_STEP", step.to_string())
        .output()
        .expect("spawn runlog")
}

fn killed(out: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    out.status.signal().is_some()
}

/// Every log of every candidate run is live exactly as before, or in the run's archive
/// exactly as before; returns how many are archived.
fn assert_live_or_archived(
    store: &Path,
    before: &Logs,
    candidates: &[String],
    when: &str,
) -> usize {
    let now = snapshot(store);
    let mut in_archive = 0;
    for run in candidates {
        let archive = archived(&store.join("archive"), run);
        for (id, log) in before.iter().filter(|(id, _)| id.contains(&run[5..])) {
            let live = now.get(id) == Some(log);
            let kept = archive
                .as_ref()
                .and_then(|a| a.log(id))
                .is_some_and(|l| (&l.meta, &l.events) == (&log.0, &log.1));
            assert!(
                live || kept,
                "{when}: log {id} of {run} is neither live nor archived whole"
            );
            assert!(
                live || !now.contains_key(id),
                "{when}: log {id} live with other content"
            );
            in_archive += usize::from(kept);
        }
    }
    in_archive
}

#[test]
fn a_gc_killed_at_any_step_leaves_every_run_live_or_archived_and_a_second_gc_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    import(&base, &fixture_dir());
    let (done, _) = add_world_runs(&base);
    let before = snapshot(&base);
    let dry = cli_support::runlog(
        &base,
        &["gc", "--finished-before", CUT, "--dry-run", "--json"],
    );
    let lines = cli_support::json_lines(&dry);
    let candidates: Vec<String> = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["run"].as_str().unwrap().to_string())
        .collect();
    assert!(
        candidates.contains(&done) && candidates.len() >= 5,
        "{candidates:?}"
    );

    let mut steps = 0;
    for step in 1.. {
        let store = tmp.path().join(format!("s{step}"));
        copy_dir(&base, &store);
        let out = runlog_killed_at(&store, step, &["gc", "--finished-before", CUT]);
        if !killed(&out) {
            assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
            break;
        }
        steps += 1;
        let when = format!("gc killed at step {step}");
        assert_live_or_archived(&store, &before, &candidates, &when);
        let again = cli_support::runlog(&store, &["gc", "--finished-before", CUT]);
        assert_eq!(
            code(&again),
            0,
            "{when}, second gc: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        let now = snapshot(&store);
        for run in &candidates {
            assert!(
                !now.keys().any(|id| id.contains(&run[5..])),
                "{when}: {run} left logs behind"
            );
        }
        let total: usize = before
            .keys()
            .filter(|id| candidates.iter().any(|r| id.contains(&r[5..])))
            .count();
        assert_eq!(
            assert_live_or_archived(&store, &before, &candidates, &when),
            total
        );
        std::fs::remove_dir_all(&store).unwrap();
    }
    // Each candidate: archived, each log deleted, collected.
    let logs = before
        .keys()
        .filter(|id| candidates.iter().any(|r| id.contains(&r[5..])))
        .count();
    assert_eq!(
        steps,
        2 * candidates.len() + logs,
        "a kill at every step was tried"
    );
}

#[test]
fn a_restore_killed_at_any_step_is_finished_by_running_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let (done, _) = add_world_runs(&base);
    let before = snapshot(&base);
    assert_eq!(
        code(&cli_support::runlog(
            &base,
            &["gc", "--finished-before", CUT]
        )),
        0
    );
    let logs = before.keys().filter(|id| id.contains(&done[5..])).count();
    assert_eq!(logs, 5, "run, attributes, stream index, two streams");
    for step in 1..=logs as u64 {
        let store = tmp.path().join(format!("r{step}"));
        copy_dir(&base, &store);
        let out = runlog_killed_at(&store, step, &["restore", &done]);
        assert!(
            killed(&out),
            "step {step}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let when = format!("restore killed at step {step}");
        let now = snapshot(&store);
        let mine = before.iter().filter(|(id, _)| id.contains(&done[5..]));
        let restored = mine.filter(|(id, log)| now.get(*id) == Some(*log)).count();
        assert!(restored >= step as usize, "{when}: {restored} logs back");
        assert!(
            archived(&store.join("archive"), &done).is_some(),
            "{when}: the archive stays until the end"
        );
        let again = cli_support::runlog(&store, &["restore", &done]);
        assert_eq!(
            code(&again),
            0,
            "{when}: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert_eq!(snapshot(&store), before, "{when}");
        assert!(archived(&store.join("archive"), &done).is_none());
    }
}
