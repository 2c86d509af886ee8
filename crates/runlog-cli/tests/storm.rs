//! The storm gate at CI size: fenced runs never corrupt (with rejections, every one
//! classified), unfenced runs do, in both storm scenarios, with threads and with processes.

use std::process::Command;

use runlog_cli::storm::{Scenario, StormConfig, StormReport, Transport, run_storm};

const RUNS: u32 = 12;
const REPLAYERS: u32 = 8;

fn storm(scenario: Scenario, fenced: bool) -> StormReport {
    let dir = tempfile::tempdir().unwrap();
    let config = StormConfig {
        fenced,
        runs: RUNS,
        replayers: REPLAYERS,
        seed: 7,
        ..StormConfig::new(dir.path().join("store"), scenario)
    };
    run_storm(&config, &Transport::Threads).unwrap()
}

fn assert_fenced_clean(r: &StormReport) {
    let ctx = format!("{r:#?}");
    assert_eq!(r.corrupted, 0, "{ctx}");
    assert_eq!(r.completed, r.runs, "{ctx}");
    assert_eq!(r.replay.errors, 0, "{ctx}");
    assert!(r.replay.rejections > 0, "{ctx}");
    assert_eq!(r.replay.unclassified, 0, "{ctx}");
    let classified = r.replay.true_positives + r.replay.false_positives;
    assert_eq!(classified, r.replay.rejections, "{ctx}");
    let by_invocation: u64 = r.replay.restarts.values().sum();
    assert_eq!(by_invocation, r.replay.invocations, "{ctx}");
    assert!(r.ok(), "{ctx}");
}

fn assert_unfenced_corrupts(r: &StormReport) {
    let ctx = format!("{r:#?}");
    assert!(!r.fenced);
    assert!(r.corrupted > 0, "{ctx}");
    assert_eq!(r.replay.rejections, 0, "{ctx}");
    assert_eq!(r.replay.errors, 0, "{ctx}");
    assert!(r.ok(), "{ctx}");
}

#[test]
fn fenced_step_storm_over_threads_never_corrupts() {
    let r = storm(Scenario::StepStorm, true);
    assert_eq!((r.runs, r.replayers), (RUNS, REPLAYERS));
    assert_fenced_clean(&r);
}

#[test]
fn fenced_hook_storm_over_threads_never_corrupts() {
    assert_fenced_clean(&storm(Scenario::HookStorm, true));
}

#[test]
fn unfenced_step_storm_over_threads_corrupts() {
    assert_unfenced_corrupts(&storm(Scenario::StepStorm, false));
}

#[test]
fn unfenced_hook_storm_over_threads_corrupts() {
    assert_unfenced_corrupts(&storm(Scenario::HookStorm, false));
}

#[test]
fn fenced_control_with_one_invocation_completes_clean() {
    let r = storm(Scenario::Control, true);
    assert_eq!(r.replayers, 1);
    assert_eq!((r.corrupted, r.completed), (0, r.runs), "{r:#?}");
    assert_eq!(r.replay.unclassified, 0);
    assert!(r.ok(), "{r:#?}");
}

#[test]
fn fenced_storm_with_runner_claims_never_corrupts_and_skips_contended_invocations() {
    let dir = tempfile::tempdir().unwrap();
    let config = StormConfig {
        runs: RUNS,
        replayers: REPLAYERS,
        claim: true,
        ..StormConfig::new(dir.path().join("store"), Scenario::StepStorm)
    };
    let r = run_storm(&config, &Transport::Threads).unwrap();
    assert!(r.claim);
    assert_eq!((r.corrupted, r.completed), (0, r.runs), "{r:#?}");
    assert_eq!((r.replay.errors, r.replay.unclassified), (0, 0), "{r:#?}");
    assert!(r.replay.claim_skips > 0, "{r:#?}");
    assert!(dir.path().join("store/claims/storm-00000.lock").exists());
}

/// Runs `runlog storm --processes ... --json` and returns its reports.
fn storm_processes(extra: &[&str]) -> Vec<StormReport> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .args(["storm", "--processes", "--json", "--seed", "11"])
        .args(["--scenario", "step-storm,hook-storm"])
        .args([
            "--runs",
            &RUNS.to_string(),
            "--replayers",
            &REPLAYERS.to_string(),
        ])
        .arg("--dir")
        .arg(dir.path())
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}\n{stdout}\n{stderr}",
        out.status
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["ok"], true, "{stdout}");
    serde_json::from_value(doc["reports"].clone()).unwrap()
}

#[test]
fn fenced_storms_over_processes_never_corrupt() {
    let reports = storm_processes(&[]);
    assert_eq!(reports.len(), 2);
    for r in &reports {
        assert_eq!(r.transport, "processes");
        assert_fenced_clean(r);
    }
}

#[test]
fn unfenced_storms_over_processes_corrupt() {
    let reports = storm_processes(&["--unfenced"]);
    assert_eq!(reports.len(), 2);
    for r in &reports {
        assert_eq!(r.transport, "processes");
        assert_unfenced_corrupts(r);
    }
}
