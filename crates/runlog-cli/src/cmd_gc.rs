//! `runlog gc` (finished runs into archives), `runlog restore` (one back), and reading
//! archives: `verify --archive DIR`, `events --archive DIR RUN`, `inspect … --archive DIR`
//! (`runlog_world::World::collect_finished`, `runlog::archive`, `runlog_cli::restore`).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use runlog::archive::{self, ArchiveView};
use runlog::io::StdFs;
use runlog::{Error, RunId};
use runlog_cli::copy::CopyError;
use runlog_cli::restore::{RestoredLog, restore_run};
use runlog_cli::target::postgres_url;
use runlog_world::{GcParams, GcReport, GcStep, World, WorldConfig, WorldError, parse_iso_ms};
use serde_json::json;

use crate::output::{Table, error_text, escape_text, json_line};
use crate::support::{Backend, CliError, RunFailures, open_existing, open_for_reading};

/// Extra `--help` text of `gc`.
pub const GC_HELP: &str = "\
Collects workflow runs (wrun_…) that are over: status completed, failed or cancelled (the
World's rule), terminal event older than --finished-before, no available hook (live, or
retained by tokenRetentionUntil), no waiting wait, no running step. Each is written with its
attribute log and its stream logs into DIR/<run>.rla (format/SPEC.md §11: every event with
its seq, id, created_at, kind, correlation id, key and payload), synced, renamed, read back,
and only then deleted from the store, its own log last. A crash at any point leaves each run
live or archived (or both: the next gc finishes it). --finished-before takes a duration back
from now (30d, 12h, 90m, 45s, 500ms) or an ISO-8601 time. DIR defaults to <store>/archive
(required on PostgreSQL). A line per collected run goes to stderr as it is done, and one
per temporary file of an interrupted earlier gc of the run that it removed. Each archived
run is recorded in the store (_world-collected-runs) before its logs are deleted, so a
stream write to it is refused (GONE) rather than starting a log no run owns; a stream log
of an archived run found in the store anyway (an older gc, a write racing this one) is
merged into its archive and deleted (result swept).

Exit: 0 done (or nothing to do); 5/6 when a run could not be collected (the first such run's
code: corrupt or environment; 3 when a log grew after it was archived), the others are
still collected; 2 bad usage.";

/// Extra `--help` text of `restore`.
pub const RESTORE_HELP: &str = "\
Puts an archived run back: every log of DIR/<RUN>.rla (the run's, its attribute and stream
logs) copied into the store with the same seqs, event ids, created_at, payloads and metadata
(as `copy`), each read back and compared, and only then the archive removed (unlink and
directory fsync). Running it again after an interruption extends what is there. A line per
log goes to stderr as it is restored. Exit 1 when the store holds one of the logs with other
content (the log named, with --json a row {run, result: \"conflict\", error}; nothing
written, the archive stays); 2 no such archive; 5 a damaged archive.";

/// Arguments of `runlog gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Collect runs whose terminal event is older than this: a duration back from now
    /// (`30d`, `12h`, `90m`, `45s`, `500ms`) or an ISO-8601 time.
    #[arg(long, value_name = "TIME|DURATION")]
    finished_before: String,
    /// Where archives go (default: `<store>/archive`; required on PostgreSQL).
    #[arg(long, value_name = "DIR")]
    archive: Option<PathBuf>,
    /// Report what would be collected; write and delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// One JSON object per collected or failed run, then a summary object.
    #[arg(long)]
    json: bool,
}

/// Arguments of `runlog restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The archived run.
    run: RunId,
    /// Where its archive is (default: `<store>/archive`; required on PostgreSQL).
    #[arg(long, value_name = "DIR")]
    archive: Option<PathBuf>,
    /// One JSON object per restored log.
    #[arg(long)]
    json: bool,
}

/// The archive directory: the one given, else `<store>/archive` of a file store.
fn archive_dir(store: &Path, given: Option<&Path>) -> Result<PathBuf, CliError> {
    match (given, postgres_url(store)) {
        (Some(dir), _) => Ok(dir.to_path_buf()),
        (None, None) => Ok(store.join("archive")),
        (None, Some(_)) => Err(CliError::Input(
            "a PostgreSQL store has no archive directory of its own: pass --archive DIR".into(),
        )),
    }
}

/// `--finished-before`: a duration back from `now_ms`, or an ISO-8601 time.
pub fn parse_cut(text: &str, now_ms: u64) -> Result<u64, CliError> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit_ms = match &text[digits.len()..] {
        "ms" => Some(1),
        "s" => Some(1000),
        "m" => Some(60_000),
        "h" => Some(3_600_000),
        "d" => Some(86_400_000),
        _ => None,
    };
    if let (Some(unit), Ok(n)) = (unit_ms, digits.parse::<u64>()) {
        return Ok(now_ms.saturating_sub(n.saturating_mul(unit)));
    }
    parse_iso_ms(text).ok_or_else(|| {
        CliError::Input(format!(
            "--finished-before {text:?}: neither a duration (30d, 12h, 90m, 45s, 500ms) nor an ISO-8601 time"
        ))
    })
}

/// `runlog gc`.
pub fn gc(store_dir: &Path, args: GcArgs) -> Result<bool, CliError> {
    let cut = parse_cut(
        &args.finished_before,
        runlog_world::Clock::system().now_ms(),
    )?;
    let params = GcParams {
        finished_before_ms: cut,
        archive_dir: archive_dir(store_dir, args.archive.as_deref())?,
        dry_run: args.dry_run,
    };
    let store = match args.dry_run {
        true => open_for_reading(store_dir)?,
        false => open_existing(store_dir)?,
    };
    let world = World::new(store.log(), WorldConfig::default());
    let (verb, swept) = match args.dry_run {
        true => ("would archive", "would sweep"),
        false => ("archived", "swept"),
    };
    let mut kill_at = kill_at_step();
    let report = world
        .collect_finished(&StdFs, &params, &mut |step| {
            if let GcStep::Collected(r) = step {
                for tmp in &r.removed_temp_files {
                    let line = format!(
                        "gc: removed {} (left by an interrupted archive write of {})",
                        tmp.display(),
                        r.run_id
                    );
                    progress_line(&line);
                }
                let verb = if r.swept { swept } else { verb };
                let line = format!(
                    "gc: {verb} {} ({} logs, {} events)",
                    r.run_id,
                    r.logs.len(),
                    r.events
                );
                progress_line(&line);
            }
            kill_at.step();
        })
        .map_err(world_error)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let failures = print_gc(&mut out, &report, args.json, args.dry_run)?;
    out.flush()?;
    failures.finish(report.scanned as usize, false)
}

/// Test hooks at the steps of a gc or restore (each archive written, each log deleted, each
/// run collected; each log restored), counted from 1:
/// - `RUNLOG_GC_KILL_AT_STEP=N` (the kill -9 tests, `tests/gc_kill9_live_or_archived.rs`):
///   the process kills itself with SIGKILL at step N, as a crash there would;
/// - `RUNLOG_GC_PAUSE_AT_STEP=N` with `RUNLOG_GC_PAUSE_FILE=P` (a writer racing the gc,
///   `tests/cli_gc_exit_3_when_a_log_grows_after_its_archive.rs`): at step N it creates
///   `P.paused` and waits until `P` exists (at most 60 s).
struct KillAt {
    kill: Option<u64>,
    pause: Option<(u64, PathBuf)>,
    steps: u64,
}

fn kill_at_step() -> KillAt {
    let step = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let file = std::env::var_os("RUNLOG_GC_PAUSE_FILE").map(PathBuf::from);
    KillAt {
        kill: step("RUNLOG_GC_KILL_AT_STEP"),
        pause: step("RUNLOG_GC_PAUSE_AT_STEP").zip(file),
        steps: 0,
    }
}

impl KillAt {
    fn step(&mut self) {
        self.steps += 1;
        if self.kill == Some(self.steps) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &std::process::id().to_string()])
                .status();
            std::process::abort();
        }
        if let Some((_, file)) = self.pause.as_ref().filter(|(at, _)| *at == self.steps) {
            let _ = std::fs::write(format!("{}.paused", file.display()), b"");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !file.exists() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

/// A progress line on stderr; one that cannot be written (a closed pipe, a full disk) is
/// dropped, not a reason to stop a gc or restore half way (`eprintln!` would panic).
fn progress_line(line: &str) {
    let _ = writeln!(io::stderr().lock(), "{}", escape_text(line));
}

fn world_error(e: WorldError) -> CliError {
    match e {
        WorldError::Storage(e) => CliError::Store(e),
        other => CliError::Input(other.to_string()),
    }
}

fn print_gc(
    out: &mut impl Write,
    report: &GcReport,
    json: bool,
    dry_run: bool,
) -> Result<RunFailures, CliError> {
    let mut failures = RunFailures::of("collected");
    let mut table = Table::new(&["RUN", "RESULT", "LOGS", "EVENTS", "ARCHIVE"]);
    let result = if dry_run { "would-archive" } else { "archived" };
    let swept = if dry_run { "would-sweep" } else { "swept" };
    let rows = report.collected.iter().map(|r| (r, result));
    for (r, result) in rows.chain(report.swept.iter().map(|r| (r, swept))) {
        let path = r.archive.display().to_string();
        match json {
            true => json_line(
                out,
                &json!({"run": r.run_id, "result": result, "logs": r.logs,
                "events": r.events, "archive": path, "archive_bytes": r.archive_bytes,
                "removed_temp_files": r.removed_temp_files.iter()
                    .map(|p| p.display().to_string()).collect::<Vec<_>>()}),
            )?,
            false => table.row(vec![
                r.run_id.clone(),
                result.into(),
                r.logs.len().to_string(),
                r.events.to_string(),
                path,
            ]),
        }
    }
    for (run, e) in &report.failed {
        let text = e.to_string();
        match json {
            true => json_line(out, &json!({"run": run, "result": "failed", "error": text}))?,
            false => table.row(vec![
                run.clone(),
                "failed".into(),
                "-".into(),
                "-".into(),
                text,
            ]),
        }
        failures.record(match e {
            WorldError::Storage(e) => e.replicate(),
            other => Error::InvalidConfig(other.to_string()),
        });
    }
    let events: u64 = report.collected.iter().map(|r| r.events).sum();
    let swept_runs = report.swept.len();
    let summary = (
        report.scanned,
        report.collected.len(),
        report.kept.len(),
        report.failed.len(),
    );
    let mut kept_by = std::collections::BTreeMap::<&str, u64>::new();
    for (_, why) in &report.kept {
        *kept_by.entry(why.name()).or_default() += 1;
    }
    if json {
        json_line(
            out,
            &json!({"summary": {"scanned": summary.0, "collected": summary.1,
            "events": events, "swept": swept_runs, "kept": summary.2, "kept_by": kept_by,
            "failed": summary.3, "dry_run": dry_run}}),
        )?;
    } else {
        if !table.is_empty() {
            table.print(out)?;
        }
        writeln!(
            out,
            "gc: {} of {} workflow runs {result} ({events} events), {} kept{}, {} failed",
            summary.1,
            summary.0,
            summary.2,
            match kept_by.is_empty() {
                true => String::new(),
                false => format!(
                    " ({})",
                    kept_by
                        .iter()
                        .map(|(why, n)| format!("{why} {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            summary.3
        )?;
        if swept_runs > 0 {
            writeln!(
                out,
                "gc: {swept_runs} archived runs had stream logs left in the store: {swept} into their archives"
            )?;
        }
    }
    Ok(failures)
}

/// `runlog restore RUN`.
pub fn restore(store_dir: &Path, args: RestoreArgs) -> Result<bool, CliError> {
    let dir = archive_dir(store_dir, args.archive.as_deref())?;
    let store = open_existing(store_dir)?;
    let mut kill_at = kill_at_step();
    let mut progress = |d: &RestoredLog| {
        progress_line(&format!("restore: {} {}", d.log, d.copy.result.name()));
        kill_at.step();
    };
    let done = match restore_run(&StdFs, &dir, &args.run, &*store, &mut progress) {
        Ok(done) => done,
        Err(e @ (CopyError::Conflict(_) | CopyError::Mismatch(_))) => {
            eprintln!(
                "runlog: restore {}: {}",
                args.run,
                escape_text(&e.to_string())
            );
            if args.json {
                let result = match e {
                    CopyError::Conflict(_) => "conflict",
                    _ => "mismatch",
                };
                let mut out = io::stdout().lock();
                json_line(
                    &mut out,
                    &json!({"run": args.run.as_str(), "result": result, "error": e.to_string()}),
                )?;
                out.flush()?;
            }
            return Ok(true);
        }
        Err(e) => {
            return Err(e
                .into_store_error()
                .map_err(|e| CliError::Input(e.to_string()))?
                .into());
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["LOG", "RESULT", "APPENDED", "ALREADY_PRESENT"]);
    for d in &done {
        let c = d.copy;
        match args.json {
            true => json_line(
                &mut out,
                &json!({"run": args.run.as_str(), "log": d.log.as_str(),
                "result": c.result.name(), "appended": c.appended, "already_present": c.already_present}),
            )?,
            false => table.row(vec![
                d.log.to_string(),
                c.result.name().into(),
                c.appended.to_string(),
                c.already_present.to_string(),
            ]),
        }
    }
    if !args.json {
        table.print(&mut out)?;
        writeln!(
            out,
            "restored {} ({} logs); archive removed",
            args.run,
            done.len()
        )?;
    }
    out.flush()?;
    Ok(false)
}

/// The store a read command reads: the store itself, or with `--archive DIR` the archive of
/// `run` there, read as a store ([`ArchiveView`]).
pub fn reader(
    store_dir: &Path,
    archive: Option<&Path>,
    run: Option<&str>,
) -> Result<Backend, CliError> {
    let Some(dir) = archive else {
        return open_for_reading(store_dir);
    };
    let run = run.ok_or_else(|| CliError::Input("--archive needs a RUN".into()))?;
    let run = RunId::new(run)?;
    let read = archive::read_archive(&StdFs, dir, &run)?;
    let view = ArchiveView::new(read, archive::archive_path(dir, &run));
    Ok(Backend::from_log(Arc::new(view)))
}

/// `runlog verify --archive DIR [RUN]`: every archive (or RUN's) decoded whole: header,
/// every record checksum, the density of every log. A damaged archive is a finding (exit
/// 1); one that cannot be read (permission, I/O) is an error with its exit code (6), and a
/// RUN without an archive is bad input (2).
pub fn verify_archives(dir: &Path, run: Option<RunId>, json: bool) -> Result<bool, CliError> {
    let runs = match run {
        Some(r) => vec![r],
        None => archive::list_archives(&StdFs, dir)?,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["ARCHIVE", "LOGS", "EVENTS", "PROBLEM"]);
    let (mut failures, mut damaged) = (RunFailures::default(), 0);
    for run in &runs {
        let file = archive::archive_path(dir, run).display().to_string();
        let (logs, events, problem) = match archive::read_archive(&StdFs, dir, run) {
            Ok(a) => (a.logs.len().to_string(), a.event_count().to_string(), None),
            Err(e) => {
                let text = error_text(&e);
                match e {
                    Error::Corrupt { .. } => damaged += 1,
                    e => failures.record(e),
                }
                ("-".into(), "-".into(), Some(text))
            }
        };
        match json {
            true => json_line(
                &mut out,
                &json!({"archive": file, "run": run.as_str(),
                "logs": logs.parse::<u64>().ok(), "events": events.parse::<u64>().ok(),
                "problems": problem.iter().collect::<Vec<_>>()}),
            )?,
            false => table.row(vec![
                file,
                logs,
                events,
                problem.unwrap_or_else(|| "-".into()),
            ]),
        }
    }
    if !json {
        table.print(&mut out)?;
        writeln!(
            out,
            "verified {} archives in {}: {damaged} damaged",
            runs.len(),
            dir.display()
        )?;
    }
    out.flush()?;
    failures.finish(runs.len(), damaged > 0)
}
