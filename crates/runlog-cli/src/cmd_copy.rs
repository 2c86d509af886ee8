//! `runlog copy SRC DST`: every run of one store into another, of any two backends (a file
//! store directory or a PostgreSQL URL each), seqs exact (`runlog_cli::copy`).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use runlog_cli::copy::{CopyError, RunCopy, copy_run};
use runlog_cli::import::BatchLimits;
use serde_json::json;

use crate::output::{Table, error_text, escape_text, json_line};
use crate::support::{CliError, RunFailures, all_runs, open_for_reading, open_store};

/// Extra `--help` text of `copy`.
pub const COPY_HELP: &str = "\
SRC and DST are each a store directory or a PostgreSQL URL (postgres://…?schema=NAME); the
global --store is not used. SRC is opened read-only; DST is created if missing. Every run of
SRC (the World's own stream and hook-token logs too) is copied with its metadata and every
event with its seq, event id, created_at, kind, correlation id, key and payload, appended in
seq order and fenced at the destination's last seq, so each event lands at its source seq or
not at all. Each run is copied to the end of its log as SRC's reads return it (so a damaged
batch fails the run loudly even where its counter says less).

Copying again is idempotent: a run DST already holds whole is `unchanged`; one DST holds a
prefix of (an interrupted copy, or a run that grew in SRC since) is `extended`; a run DST holds
with other metadata, other events or more events is a `conflict`: left alone, reported, exit 1.
A run created by this copy that cannot be finished (a SRC or DST error) is deleted again.
The run's creation time in DST is the copy's (a backend takes none from its caller); `runs`
shows the times of the first and last events, which are copied.

A SRC run that cannot be read (damaged, or a permission error) is reported as `failed` with its
error, the other runs are still copied, and the exit code is that of the first such run (5
corrupt, 6 environment) at the end. --verify reads every copied run back from both stores and
compares metadata and every event (`mismatch`, exit 1, on any difference).";

/// Arguments of `runlog copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy from: a directory or a postgres:// URL (opened read-only).
    src: PathBuf,
    /// The store to copy into: a directory or a postgres:// URL (created if missing).
    dst: PathBuf,
    /// After copying each run, read it back from both stores and compare every event.
    #[arg(long)]
    verify: bool,
    /// One JSON object per run instead of the report.
    #[arg(long)]
    json: bool,
}

/// How one run went.
enum Outcome {
    Copied(RunCopy),
    /// Conflict or mismatch: left alone (exit 1).
    Skipped(&'static str, String),
    /// A store error (the exit code of the first one).
    Failed(String),
}

/// `runlog copy SRC DST`.
pub fn run(args: CopyArgs) -> Result<bool, CliError> {
    let src = open_for_reading(&args.src)?;
    let dst = open_store(&args.dst)?;
    let mut failures = RunFailures::default();
    let mut outcomes = Vec::new();
    let listed = all_runs(&src)?;
    let total = listed.len();
    for entry in listed {
        let (run, outcome) = match entry {
            Ok(info) => {
                let copied = copy_run(&*src, &*dst, &info.run, BatchLimits::default(), args.verify);
                (info.run, outcome(copied, &mut failures))
            }
            Err((run, e)) => {
                let text = format!("source: {}", error_text(&e));
                failures.record(e);
                (run, Outcome::Failed(text))
            }
        };
        outcomes.push((run.to_string(), outcome));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    if args.json {
        print_json(&mut out, &outcomes)?;
    } else {
        print_report(&mut out, &outcomes)?;
    }
    out.flush()?;
    let skipped = outcomes
        .iter()
        .any(|(_, o)| matches!(o, Outcome::Skipped(..)));
    failures.finish(total, skipped)
}

fn outcome(copied: Result<RunCopy, CopyError>, failures: &mut RunFailures) -> Outcome {
    match copied {
        Ok(done) => Outcome::Copied(done),
        Err(e @ CopyError::Conflict(_)) => Outcome::Skipped("conflict", e.to_string()),
        Err(e @ CopyError::Mismatch(_)) => Outcome::Skipped("mismatch", e.to_string()),
        Err(e) => {
            let text = match e.store_error() {
                Some(error) => runlog::error::with_causes(e.to_string(), error),
                None => e.to_string(),
            };
            if let Ok(error) = e.into_store_error() {
                failures.record(error);
            }
            Outcome::Failed(text)
        }
    }
}

fn result_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Copied(c) => c.result.name(),
        Outcome::Skipped(name, _) => name,
        Outcome::Failed(_) => "failed",
    }
}

fn print_json(out: &mut impl Write, outcomes: &[(String, Outcome)]) -> io::Result<()> {
    for (run, o) in outcomes {
        let line = match o {
            Outcome::Copied(c) => json!({"run": run, "result": c.result.name(),
                "appended": c.appended, "already_present": c.already_present}),
            Outcome::Skipped(_, detail) => {
                json!({"run": run, "result": result_name(o), "detail": detail})
            }
            Outcome::Failed(error) => json!({"run": run, "result": "failed", "error": error}),
        };
        json_line(out, &line)?;
    }
    Ok(())
}

fn print_report(out: &mut impl Write, outcomes: &[(String, Outcome)]) -> io::Result<()> {
    let mut table = Table::new(&["RUN", "RESULT", "APPENDED", "ALREADY_PRESENT"]);
    let (mut copied, mut appended, mut already) = (0, 0, 0);
    let mut problems = Vec::new();
    for (run, o) in outcomes {
        let (a, p) = match o {
            Outcome::Copied(c) => (c.appended.to_string(), c.already_present.to_string()),
            _ => ("-".into(), "-".into()),
        };
        table.row(vec![run.clone(), result_name(o).into(), a, p]);
        match o {
            Outcome::Copied(c) => {
                (copied, appended, already) = (
                    copied + 1,
                    appended + c.appended,
                    already + c.already_present,
                );
            }
            Outcome::Skipped(name, detail) => {
                problems.push(format!("run {run} ({name}): {detail}"))
            }
            Outcome::Failed(error) => problems.push(format!("run {run} (failed): {error}")),
        }
    }
    if !table.is_empty() {
        table.print(out)?;
    }
    writeln!(
        out,
        "copied {copied} of {} runs: {appended} events appended, {already} already present",
        outcomes.len()
    )?;
    if !problems.is_empty() {
        writeln!(out, "not copied ({}):", problems.len())?;
        for p in problems {
            writeln!(out, "  {}", escape_text(&p))?;
        }
    }
    Ok(())
}
