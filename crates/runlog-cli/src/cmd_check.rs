//! Checking commands: `verify` (storage invariants) and `audit` (workflow anomalies). Both
//! open the store read-only (`support::open_for_reading`).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use clap::Args;
use runlog::{Problem, RunId, VerifyReport};
use runlog_cli::audit::audit_run;
use serde_json::json;

use crate::output::{Table, json_line};
use crate::support::{CliError, open_for_reading, read_all, selected_runs};

/// Extra `--help` text of `verify`.
pub const VERIFY_HELP: &str = "\
A storage fault: bytes on disk that break runlog's own invariants (a bad checksum, a gap or
duplicate seq, counter slots that disagree with the content, a broken segment chain). Each is
reported with run, segment file and byte offset. Exit 1 when any is found.";

/// Extra `--help` text of `audit`.
pub const AUDIT_HELP: &str = "\
A workflow anomaly: an intact log whose events say something impossible about the workflow.
Classes: multiple_terminal, event_after_terminal, duplicate_creation, creation_later,
creation_missing, run_created_not_first (see the README). Exit 1 when any is found; exit 5 when
a log cannot be read (a storage fault: run `runlog verify`).";

/// Arguments of `runlog verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The run (default: every run).
    run: Option<RunId>,
    /// One JSON object per run instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `runlog audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The run (default: every run).
    run: Option<RunId>,
    /// One JSON object per finding instead of a table.
    #[arg(long)]
    json: bool,
}

/// `runlog verify`: exit 1 when any run has a problem.
pub fn verify(store_dir: &Path, args: VerifyArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["RUN", "SEGMENTS", "EVENTS", "SEGMENT", "OFFSET", "PROBLEM"]);
    let mut bad_runs = 0;
    let runs = selected_runs(&store, args.run)?;
    for run in &runs {
        let report = store.verify_run(run)?;
        bad_runs += usize::from(!report.problems.is_empty());
        if args.json {
            json_line(&mut out, &report_json(&report))?;
        } else {
            report_rows(&report, &mut table);
        }
    }
    if !args.json {
        table.print(&mut out)?;
    }
    out.flush()?;
    eprintln!("verified {} runs: {bad_runs} with problems", runs.len());
    Ok(bad_runs > 0)
}

fn report_json(r: &VerifyReport) -> serde_json::Value {
    let list = |ps: &[Problem]| -> Vec<serde_json::Value> {
        ps.iter()
            .map(|p| json!({"segment": p.segment, "offset": p.offset, "detail": p.detail}))
            .collect()
    };
    json!({"run": r.run.as_str(), "segments": r.segments, "events": r.events,
           "ok": r.problems.is_empty(), "problems": list(&r.problems), "notes": list(&r.notes)})
}

fn report_rows(r: &VerifyReport, table: &mut Table) {
    let head = |t: &mut Table, segment: String, offset: String, detail: String| {
        t.row(vec![
            r.run.to_string(),
            r.segments.to_string(),
            r.events.to_string(),
            segment,
            offset,
            detail,
        ]);
    };
    if r.problems.is_empty() && r.notes.is_empty() {
        head(table, "-".into(), "-".into(), "ok".into());
    }
    for p in &r.problems {
        head(
            table,
            p.segment.clone(),
            p.offset.to_string(),
            p.detail.clone(),
        );
    }
    for p in &r.notes {
        let detail = format!("note (recoverable, not corruption): {}", p.detail);
        head(table, p.segment.clone(), p.offset.to_string(), detail);
    }
}

/// `runlog audit`: exit 1 when anything is found.
pub fn audit(store_dir: &Path, args: AuditArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["RUN", "CLASS", "SEQS", "DETAIL"]);
    let runs = selected_runs(&store, args.run)?;
    let (mut findings, mut runs_with) = (0, 0);
    for run in &runs {
        let found = audit_run(run, &read_all(&store, run)?);
        findings += found.len();
        runs_with += usize::from(!found.is_empty());
        for f in found {
            if args.json {
                json_line(
                    &mut out,
                    &json!({"run": f.run.as_str(), "class": f.class.name(), "seqs": f.seqs, "detail": f.detail}),
                )?;
            } else {
                let seqs: Vec<String> = f.seqs.iter().map(u64::to_string).collect();
                table.row(vec![
                    f.run.to_string(),
                    f.class.name().to_string(),
                    seqs.join(","),
                    f.detail,
                ]);
            }
        }
    }
    if !args.json && !table.is_empty() {
        table.print(&mut out)?;
    }
    out.flush()?;
    eprintln!(
        "audited {} runs: {findings} findings in {runs_with} runs",
        runs.len()
    );
    Ok(findings > 0)
}
