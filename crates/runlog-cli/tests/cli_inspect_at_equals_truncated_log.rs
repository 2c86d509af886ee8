//! `runlog inspect run|steps|hooks|events RUN --at N` (issue 25), as real processes: for every
//! N of every run of the whole corpus imported by `runlog import`, the output equals that of
//! the same command without `--at` on a second store holding the run's log truncated at N
//! (events 1..=N with their ids, times, kinds, correlation ids, keys and payloads). `--at
//! TIME` is the last seq at or before it; seq 0, a seq past the end, a time before the first
//! event and a bad value exit 2 with the reason; `inspect diff` prints the World's
//! `run_diff`.

mod cli_support;

use std::path::Path;
use std::sync::Arc;

use cli_support::{THIRTEEN_TERMINALS_RUN, code, copy_corpus, import, runlog, stderr, stdout};
use runlog::{Config, RunId, RunLog, Store};
use runlog_world::{At, World, WorldConfig};

fn ok(store: &Path, args: &[&str]) -> String {
    let out = runlog(store, args);
    assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// `(exit code, stdout, stderr)` of a command.
fn outcome(store: &Path, args: &[&str]) -> (i32, String, String) {
    let out = runlog(store, args);
    (code(&out), stdout(&out), stderr(&out))
}

fn imported(tmp: &Path) -> std::path::PathBuf {
    let src = copy_corpus(tmp);
    let store = tmp.join("store");
    let out = import(&store, &src);
    assert_eq!(code(&out), 1, "the temp file is reported: {}", stderr(&out));
    store
}

/// The workflow runs of `store` with their events.
fn runs(store: &Path) -> Vec<(RunId, Vec<runlog::Event>)> {
    let s = Store::open_read_only(store, Config::default()).unwrap();
    let page = s.list_runs(None, 10_000).unwrap();
    assert!(!page.has_more);
    page.runs
        .iter()
        .filter(|i| i.run.as_str().starts_with("wrun_"))
        .map(|i| {
            let events = s.read(&i.run, 0, usize::MAX).unwrap().events;
            (i.run.clone(), events)
        })
        .collect()
}

#[test]
fn at_every_seq_of_the_corpus_equals_the_commands_on_the_log_truncated_there() {
    let tmp = tempfile::tempdir().unwrap();
    let store = imported(tmp.path());
    let src = Store::open_read_only(&store, Config::default()).unwrap();
    let all = runs(&store);
    let mut checked = 0;
    for (run, events) in &all {
        let dir = tmp.path().join("truncated").join(run.as_str());
        {
            let t = Store::open(&dir, Config::default()).unwrap();
            RunLog::create_run(&t, run, &src.run_meta(run).unwrap()).unwrap();
        }
        for e in events {
            {
                // The store is closed before the processes read it.
                let t = Store::open(&dir, Config::default()).unwrap();
                let appended = t.append_facts(run, vec![e.to_new_event()]).unwrap();
                assert_eq!(appended[0].seq, e.seq);
            }
            let at = e.seq.to_string();
            // Every command as JSON lines, and one of them (in turn) as a table.
            let whats = ["run", "steps", "hooks", "events"];
            let table = whats[e.seq as usize % whats.len()];
            for (what, json) in whats.iter().map(|w| (*w, true)).chain([(table, false)]) {
                {
                    let mut args = vec!["inspect", what, run.as_str()];
                    if json {
                        args.push("--json");
                    }
                    let want = outcome(&dir, &args);
                    args.extend(["--at", &at]);
                    let got = outcome(&store, &args);
                    assert_eq!(got, want, "{args:?}");
                }
            }
            checked += 1;
        }
    }
    assert_eq!((all.len(), checked), (30, 392), "the whole corpus");
}

#[test]
fn at_a_time_is_the_last_seq_at_or_before_it_and_bad_points_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let store = imported(tmp.path());
    let run = THIRTEEN_TERMINALS_RUN;
    // Seqs 5 to 10 share one createdAt, seq 11 is later.
    let t = "2026-11-30T02:25:44.937Z";
    let all = ok(&store, &["inspect", "events", run, "--json"]);
    let times: Vec<String> = all
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["createdAt"].to_string())
        .collect();
    assert_eq!(
        (times[4].as_str(), times[9].as_str()),
        (&*format!("{t:?}"), &*format!("{t:?}"))
    );
    assert_ne!(times[10], times[9]);
    let at_time = ok(&store, &["inspect", "events", run, "--at", t, "--json"]);
    assert_eq!(
        at_time,
        ok(&store, &["inspect", "events", run, "--at", "10", "--json"])
    );
    assert_eq!(at_time.lines().count(), 10);
    assert_eq!(
        ok(&store, &["inspect", "steps", run, "--at", t]),
        ok(&store, &["inspect", "steps", run, "--at", "10"]),
    );
    let last = all.lines().count();
    for (args, says) in [
        (
            vec!["inspect", "run", run, "--at", "0"],
            "no state at seq 0".to_string(),
        ),
        (
            vec!["inspect", "steps", run, "--at", &(last + 1).to_string()],
            format!("ends at seq {last}"),
        ),
        (
            vec!["inspect", "hooks", run, "--at", "2020-01-01"],
            "no state at time 2020-01-01T00:00:00.000Z".to_string(),
        ),
        (
            vec!["inspect", "events", run, "--at", "soon"],
            "neither a seq nor".to_string(),
        ),
        (
            vec!["inspect", "runs", "--at", "3"],
            "takes no --at".to_string(),
        ),
        (
            vec!["inspect", "hooks", "--at", "3"],
            "needs a RUN".to_string(),
        ),
        (
            vec!["inspect", "steps", run, "--from", "3"],
            "takes no --from".to_string(),
        ),
        (
            vec!["inspect", "diff", run, "--to", "3"],
            "needs --from".to_string(),
        ),
    ] {
        let (c, out, err) = outcome(&store, &args);
        assert_eq!(c, 2, "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains(&says), "{args:?}: {err}");
    }
}

#[test]
fn diff_prints_the_worlds_run_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let store = imported(tmp.path());
    let run = THIRTEEN_TERMINALS_RUN;
    let world = World::new(
        Arc::new(Store::open_read_only(&store, Config::default()).unwrap()),
        WorldConfig::default(),
    );
    for (from, to) in [(0, 1), (2, 8), (8, 20), (0, 75)] {
        let (f, t) = (from.to_string(), to.to_string());
        let line = ok(
            &store,
            &["inspect", "diff", run, "--from", &f, "--to", &t, "--json"],
        );
        let got: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        let want = world.run_diff(run, At::Seq(from), At::Seq(to)).unwrap();
        assert_eq!(got, serde_json::to_value(&want).unwrap(), "{from}..{to}");
        let table = ok(&store, &["inspect", "diff", run, "--from", &f, "--to", &t]);
        let rows = want.changes.len() + usize::from(!want.unchanged.is_empty());
        assert_eq!(
            table.lines().count(),
            rows + 2,
            "title, header, rows: {table}"
        );
    }
    let table = ok(
        &store,
        &["inspect", "diff", run, "--from", "2", "--to", "8"],
    );
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], format!("{run}: seq 2 to seq 8"));
    assert!(
        lines[1].starts_with("ENTITY") && lines[1].contains("EVENTS"),
        "{table}"
    );
    let a1 = lines
        .iter()
        .find(|l| l.contains("step_01M8N4BGVC4E5GE9N01QR2A8A1"))
        .expect("step A1 created");
    assert!(
        a1.contains("created") && a1.ends_with("8 step_created"),
        "{a1}"
    );
    let none = lines.last().unwrap();
    assert!(
        none.contains("none") && none.ends_with("5 step_started, 6 step_started, 7 step_started"),
        "{none}"
    );
}
