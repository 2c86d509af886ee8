//! Checking commands: `verify` (storage invariants) and `audit` (workflow anomalies). Both
//! open the store read-only (`support::open_for_reading`).

use std::io::{self, BufWriter, Write};
use std::path::Path;

use clap::Args;
use runlog::{Problem, RunId, RunLog, VerifyReport};
use runlog_cli::audit::{Finding, audit_imported_run};
use serde_json::json;

use crate::output::{Table, error_json, error_text, json_line};
use crate::support::{
    CliError, RunFailures, open_for_reading, per_run, postgres_url, read_all, selected_runs,
    selected_workflow_runs, stamp_of,
};

/// Extra `--help` text of `verify`.
pub const VERIFY_HELP: &str = "\
A storage fault: bytes on disk that break runlog's own invariants (a bad checksum, a gap or
duplicate seq, counter slots that disagree with the content, a broken segment chain). Each is
reported with run, segment file and byte offset. Exit 1 when any is found. A run that cannot
be verified at all (e.g. permission denied) gets a row with its error, and the exit code of that
error (6 for an environment error) after all runs.";

/// Extra `--help` text of `audit`.
pub const AUDIT_HELP: &str = "\
A workflow anomaly: an intact log whose events say something impossible about the workflow.
Classes: multiple_terminal, event_after_terminal, duplicate_creation, creation_later,
creation_missing, run_created_not_first, missing_slots (an imported slot run whose source
skipped slot numbers; see docs/IMPORT.md). Exit 1 when any is found. A log that cannot be read gets
a row of class `error` (in --json: {\"run\", \"error\"}) and the audit goes on with the other runs,
then exits 5 (a storage fault: run `runlog verify`) or 6 (an environment error).";

/// Arguments of `runlog verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The run (default: every run).
    run: Option<RunId>,
    /// One JSON object per run instead of a table.
    #[arg(long)]
    json: bool,
    /// Verify the archives in DIR (`runlog gc`) instead of the store.
    #[arg(long, value_name = "DIR")]
    archive: Option<std::path::PathBuf>,
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

/// `runlog verify`: exit 1 when any run has a problem; a run that cannot be verified at all
/// (e.g. permission denied) gets a row with its error, and the exit code of that error.
pub fn verify(store_dir: &Path, args: VerifyArgs) -> Result<bool, CliError> {
    if let Some(dir) = &args.archive {
        return crate::cmd_gc::verify_archives(dir, args.run, args.json);
    }
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["RUN", "SEGMENTS", "EVENTS", "SEGMENT", "OFFSET", "PROBLEM"]);
    let mut bad_runs = 0;
    let mut failures = RunFailures::default();
    let runs = selected_runs(&store, args.run)?;
    let total = runs.len();
    let mut world_logs = 0;
    for entry in runs {
        let id = entry.as_ref().unwrap_or_else(|(run, _)| run);
        world_logs += usize::from(runlog_world::log_kind(id.as_str()).is_internal());
        let verified = match entry {
            Ok(run) => {
                per_run(store.verify_run(&run).map_err(CliError::from))?.map_err(|e| (run, e))
            }
            Err(failed) => Err(failed),
        };
        match verified {
            Ok(report) => {
                bad_runs += usize::from(!report.problems.is_empty());
                if args.json {
                    json_line(&mut out, &report_json(&report))?;
                } else {
                    report_rows(&report, &mut table);
                }
            }
            Err((run, e)) => {
                if args.json {
                    json_line(&mut out, &error_json(&run, &e))?;
                } else {
                    let dash = || "-".to_string();
                    table.row(vec![
                        run.to_string(),
                        dash(),
                        dash(),
                        dash(),
                        dash(),
                        format!("error: {}", error_text(&e)),
                    ]);
                }
                failures.record(e);
            }
        }
    }
    let backup = crate::cmd_backup::incomplete_backup(&store)?;
    if let Some(problem) = &backup {
        match args.json {
            true => json_line(
                &mut out,
                &json!({"backup": false, "ok": false, "problem": problem}),
            )?,
            false => table.row(
                ["-", "-", "-", "BACKUP", "0", problem]
                    .map(String::from)
                    .to_vec(),
            ),
        }
    }
    if !args.json {
        table.print(&mut out)?;
    }
    out.flush()?;
    eprintln!("{}", verified_line(total, world_logs, bad_runs));
    failures.finish(total, bad_runs > 0 || backup.is_some())
}

/// `verified 3 runs: 0 with problems`, or with the World's own logs (stream chunks, attribute
/// logs, token claims: `runlog_world::log_kind`) counted apart, `verified 5 logs (2 runs, 3
/// World logs): 0 with problems`, so that a count of runs is one of workflow runs.
fn verified_line(total: usize, world_logs: usize, bad: usize) -> String {
    if world_logs == 0 {
        return format!("verified {total} runs: {bad} with problems");
    }
    let runs = total - world_logs;
    format!("verified {total} logs ({runs} runs, {world_logs} World logs): {bad} with problems")
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

/// `runlog audit`: exit 1 when anything is found; a run whose log cannot be read gets a row
/// (class `error`) and the audit goes on, exiting with that run's error code at the end.
pub fn audit(store_dir: &Path, args: AuditArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["RUN", "CLASS", "SEQS", "DETAIL"]);
    let mut failures = RunFailures::default();
    let runs = selected_workflow_runs(&store, args.run)?;
    let total = runs.len();
    let (mut findings, mut runs_with) = (0, 0);
    for entry in runs {
        let audited = match entry {
            Ok(run) => per_run(audit_one(&*store, &run))?.map_err(|e| (run, e)),
            Err(failed) => Err(failed),
        };
        let found = match audited {
            Ok(found) => found,
            Err((run, e)) => {
                if args.json {
                    json_line(&mut out, &error_json(&run, &e))?;
                } else {
                    let detail = format!("cannot read the log: {}", error_text(&e));
                    table.row(vec![run.to_string(), "error".into(), "-".into(), detail]);
                }
                failures.record(e);
                continue;
            }
        };
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
    eprintln!("audited {total} runs: {findings} findings in {runs_with} runs");
    failures.finish(total, findings > 0)
}

/// The findings of one run: its events, and the holes its import recorded.
fn audit_one(store: &dyn RunLog, run: &RunId) -> Result<Vec<Finding>, CliError> {
    let events = read_all(store, run)?;
    let stamp = stamp_of(store, run)?;
    Ok(audit_imported_run(run, stamp.as_ref(), &events))
}

/// Arguments of `runlog repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The damaged run.
    run: RunId,
    /// Required: cut the run at its first bad batch (nothing is ever cut without it).
    #[arg(long)]
    cut: bool,
}

/// What `runlog repair` prints after its usage.
pub const REPAIR_HELP: &str = "\
Cuts a damaged run at its first bad batch so that it holds exactly the events before the
damage and takes writes again. The bytes cut away are first copied, synced, into
<store>/repair/<run>-<ulid>.cut (named in the output; never deleted). Without --cut the damage
is described and never cut; the store is opened as a writer, so the recovery every writer runs
happens first (a complete tail past the counter is adopted, a torn one with nothing valid after
it is cut) — that is how damage past a lost counter is found at all. Exit 0 when repaired (or
nothing to repair), 1 without --cut on a damaged run, 5 when the damage cannot be cut here (in a
sealed segment). A sealed segment's lost seal (its header slot damaged, zeroed or an older copy
while its events and the segments after it are intact) is written again first, with or without --cut: it is found from
the segment's batches, and nothing is cut or lost.";

/// Why `repair` refuses a PostgreSQL store (exit 2).
const REPAIR_ON_POSTGRES: &str = "repair works on a file store only: it cuts the bytes of a \
damaged segment file, and a PostgreSQL store has none (a transaction commits a batch whole or \
not at all; `runlog --store URL verify` checks density and the counters)";

/// `runlog repair RUN --cut`.
///
/// # Errors
/// Store errors (exit codes of `CliError`).
pub fn repair(store_dir: &Path, args: RepairArgs) -> Result<bool, CliError> {
    if postgres_url(store_dir).is_some() {
        return Err(CliError::Input(REPAIR_ON_POSTGRES.into()));
    }
    let backend = crate::support::open_existing(store_dir)?;
    let store = backend
        .file_store()
        .ok_or_else(|| CliError::Input(REPAIR_ON_POSTGRES.into()))?;
    let restored = store.restore_seals(&args.run)?;
    for s in &restored {
        println!(
            "run {}: the seal of {} was lost; written again from its batches (last seq {}, \
             length {})",
            args.run, s.segment, s.last_seq, s.committed_len
        );
    }
    let undamaged = match restored.is_empty() {
        true => "not damaged; nothing to repair",
        false => "no other damage",
    };
    if !args.cut {
        let mut after = 0;
        loop {
            match store.read(&args.run, after, 4096) {
                Ok(page) if page.has_more => after = page.next,
                Ok(_) => {
                    println!("run {}: {undamaged}", args.run);
                    return Ok(false);
                }
                Err(e) => {
                    let message = e.to_string();
                    let text = crate::output::escape_text(&message);
                    println!("run {}: {text}; events 1..={after} are intact", args.run);
                    println!(
                        "run `runlog repair {} --cut` to cut the run there",
                        args.run
                    );
                    return Ok(true);
                }
            }
        }
    }
    match store.repair_run(&args.run)? {
        None => println!("run {}: {undamaged}", args.run),
        Some(r) => println!(
            "run {}: cut {} at offset {}; last seq {}; {} bytes kept in {}",
            args.run,
            r.segment,
            r.offset,
            r.last_seq,
            r.saved_bytes,
            r.saved.display()
        ),
    }
    Ok(false)
}
