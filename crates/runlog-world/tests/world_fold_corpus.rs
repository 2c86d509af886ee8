//! The fold against the reference's own materialized entities: the events of real runs
//! written by `@workflow/world-local` 5.0.0-beta.29 (the whole corpus in
//! `tests/fixtures/world-local-5.0.0-beta.29/`, and its seven-run subset
//! `tests/fixtures/world-local/`) are folded in that store's
//! order, (`createdAt`, `eventId`), and every run, step and live hook is compared, field by
//! field as JSON values (dates as instants), with the store's own `runs/`, `steps/` and
//! `hooks/` files. Steps and hooks are equal everywhere; the runs that differ are the ones
//! whose files disagree with their own logs (`KNOWN`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

mod common;

use common::corpus::{read_json, repo_root, runs_of};
use runlog_world::{HookIdentity, RunState, parse_iso_ms};
use serde_json::Value;

/// Differences between `ours` and `theirs`, one `entity.field` per differing member.
fn diff(entity: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    let (Some(a), Some(b)) = (ours.as_object(), theirs.as_object()) else {
        return;
    };
    for key in a.keys().chain(b.keys()) {
        // Dates compare as instants; the rest as JSON values.
        let (x, y) = (a.get(key), b.get(key));
        let same = match (x.and_then(Value::as_str), y.and_then(Value::as_str)) {
            (Some(p), Some(q)) => parse_iso_ms(p)
                .zip(parse_iso_ms(q))
                .map_or(p == q, |(p, q)| p == q),
            _ => x == y,
        };
        if !same && !out.contains(&format!("{entity}.{key}")) {
            out.push(format!("{entity}.{key}"));
        }
    }
}

/// Compares the fold of every run of `dir` with the store's files; returns the differences
/// by class (`run.status`, `step.attempt`, ...) with the runs they occur in.
fn compare(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let identity = Arc::new(HookIdentity::default());
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut note = |class: String, run: &str| found.entry(class).or_default().push(run.to_string());
    for (run, events) in runs_of(dir) {
        // Every run of these stores is of spec version 5 (the importer checks one per run).
        let state = RunState::fold(&run, Some(5), identity.clone(), &events);
        let mut diffs = Vec::new();
        let run_file = dir.join("runs").join(format!("{run}.json"));
        match (state.run(), run_file.exists()) {
            (Some(r), true) => diff(
                "run",
                &serde_json::to_value(r).unwrap(),
                &read_json(&run_file),
                &mut diffs,
            ),
            (None, false) => {}
            (ours, _) => diffs.push(format!("run.exists(ours={})", ours.is_some())),
        }
        let steps_dir = dir.join("steps");
        let mut theirs: HashMap<String, Value> = HashMap::new();
        if steps_dir.exists() {
            for entry in std::fs::read_dir(&steps_dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if let Some(step) = name
                    .strip_prefix(&format!("{run}-"))
                    .and_then(|s| s.strip_suffix(".json"))
                {
                    theirs.insert(step.to_string(), read_json(&path));
                }
            }
            for (_, step) in state.steps() {
                match theirs.remove(&step.step_id) {
                    Some(t) => diff("step", &serde_json::to_value(step).unwrap(), &t, &mut diffs),
                    None => diffs.push("step.exists(theirs=false)".into()),
                }
            }
            for _ in theirs {
                diffs.push("step.exists(ours=false)".into());
            }
        }
        let hooks_dir = dir.join("hooks");
        if hooks_dir.exists() {
            for entry in std::fs::read_dir(&hooks_dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                let t = read_json(&path);
                if t["runId"] != run.as_str() {
                    continue;
                }
                match state.hook(t["hookId"].as_str().unwrap()) {
                    Some(h) => diff("hook", &serde_json::to_value(h).unwrap(), &t, &mut diffs),
                    None => diffs.push("hook.live(ours=false)".into()),
                }
            }
        }
        if state.anomalies() > 0 {
            diffs.push("fold.anomalies".into());
        }
        for d in diffs {
            note(d, &run);
        }
    }
    found
}

/// Runs whose store files disagree with their own logs, and why (read from the files).
const KNOWN: [(&str, &str); 4] = [
    (
        "wrun_01M8N4BGVC6PBGA4VZWAQRRZ87",
        "13 run_completed events: the fold keeps the first, the store's run file the last write",
    ),
    (
        "wrun_01M8N4C12X6NPQN7EKS11B9DF1",
        "the run file was rewritten by a second run_completed whose event is not in the log",
    ),
    (
        "wrun_01M8N4C2DGSWHERV3FE801SFQV",
        "the run file says running, but no run_started event is in the log",
    ),
    (
        "wrun_01M8N4CDBBNAEFXAFM1D09YPHW",
        "its run_completed never left its temp file (events/*.json.tmp.*)",
    ),
];

fn check(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let found = compare(dir);
    for (class, runs) in &found {
        assert!(
            class.starts_with("run.") || class == "fold.anomalies",
            "{class}: {runs:?}"
        );
        for run in runs {
            assert!(
                KNOWN.iter().any(|(k, _)| k == run),
                "{class} differs in {run}, which is no documented anomaly"
            );
        }
    }
    found
}

#[test]
fn the_fold_of_the_fixture_equals_the_reference_entities_but_for_two_documented_runs() {
    let found = check(&repo_root().join("tests/fixtures/world-local"));
    let runs: std::collections::BTreeSet<&String> = found.values().flatten().collect();
    assert_eq!(
        runs.into_iter().cloned().collect::<Vec<_>>(),
        [
            "wrun_01M8N4BGVC6PBGA4VZWAQRRZ87",
            "wrun_01M8N4CDBBNAEFXAFM1D09YPHW"
        ]
    );
    assert_eq!(found["fold.anomalies"], ["wrun_01M8N4BGVC6PBGA4VZWAQRRZ87"]);
}

/// The whole corpus (30 runs, 94 steps, 2 live hooks), shipped in the repository.
#[test]
fn the_fold_of_the_whole_corpus_equals_the_reference_entities_but_for_documented_runs() {
    let dir = repo_root().join("tests/fixtures/world-local-5.0.0-beta.29");
    assert!(dir.join("events").is_dir(), "{} is missing", dir.display());
    let found = check(&dir);
    let runs: std::collections::BTreeSet<&String> = found.values().flatten().collect();
    assert_eq!(runs.len(), KNOWN.len(), "{found:?}");
}
