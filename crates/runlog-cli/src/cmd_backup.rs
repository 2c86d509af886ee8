//! `runlog backup DST`: an online, incremental backup of the file store `--store` into the
//! directory DST (`Store::backup`, format/SPEC.md §12).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use runlog::{BackupReport, Error, RunBackup, RunBackupResult};
use serde_json::json;

use crate::output::{Table, error_text, json_line};
use crate::support::{Backend, CliError, RunFailures, open_for_reading, postgres_url};

/// Extra `--help` text of `backup`.
pub const BACKUP_HELP: &str = "\
Backs the file store --store up into the directory DST while writers (threads and other
processes) keep appending: no writer is stopped. Each run is copied byte for byte up to the
committed length its counter names, every batch checked on the way (checksums, density), with
counters written for exactly what was copied; every file is fdatasync'd and every directory
fsync'd before DST's manifest (DST/BACKUP) says `complete`. Every run in DST is then a prefix
of its source run and holds every event acknowledged before the backup started; DST is a store
like any other (`runlog --store DST verify` is clean; it opens and takes appends).

DST is created if missing; an existing DST must be empty or an earlier backup. Backing up into
it again is incremental: a run DST holds a prefix of is `extended` by what grew (the rest of
its last segment, new segments), `unchanged` if nothing did, after checking that DST's copy
is still a prefix of the source (the same segment files, and its last batch's checksum). A run
that is not (deleted and recreated, repaired, or appended to in DST) is `recopied` whole. A run
deleted from the source is kept in DST and listed as `gone`; a run new in the source is `new`.

An interrupted backup (kill -9, power loss) leaves DST's manifest `incomplete`, which `verify`
reports, and each run in DST either as the previous backup left it or a longer prefix; the next
backup completes it. Progress goes to stderr. A source run that cannot be read is `failed`
(the others are still backed up, the manifest stays `incomplete`, exit 5 or 6 at the end).
PostgreSQL stores are refused (exit 2): back them up with pg_dump.";

/// Arguments of `runlog backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The backup directory (created if missing; else empty or an earlier backup).
    dst: PathBuf,
    /// One JSON object per run, then one for the whole backup, instead of the report.
    #[arg(long)]
    json: bool,
}

/// Progress lines on stderr: at most one a second, and one at the end.
struct Progress {
    started: Instant,
    last: Instant,
    runs: usize,
    bytes: u64,
}

impl Progress {
    fn new() -> Progress {
        let now = Instant::now();
        Progress {
            started: now,
            last: now,
            runs: 0,
            bytes: 0,
        }
    }

    fn add(&mut self, r: &RunBackup) {
        self.runs += 1;
        self.bytes += r.bytes_copied;
        if self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            self.print();
        }
    }

    fn print(&self) {
        eprintln!(
            "backup: {} runs done, {} bytes copied, {} ms",
            self.runs,
            self.bytes,
            self.started.elapsed().as_millis()
        );
    }
}

/// `runlog backup DST`.
pub fn run(store: &Path, args: BackupArgs) -> Result<bool, CliError> {
    if postgres_url(store).is_some() {
        return Err(Error::BackupRefused {
            path: store.to_path_buf(),
            detail: "a PostgreSQL store: back it up with pg_dump".to_string(),
        }
        .into());
    }
    let src = open_for_reading(store)?;
    let Some(file_store) = src.file_store() else {
        return Err(CliError::Input(format!(
            "{} is not a file store",
            store.display()
        )));
    };
    let mut progress = Progress::new();
    let report = file_store.backup(&args.dst, &mut |r| progress.add(r))?;
    progress.print();
    let mut out = BufWriter::new(io::stdout().lock());
    if args.json {
        print_json(&mut out, &report)?;
    } else {
        print_report(&mut out, &report)?;
    }
    out.flush()?;
    let mut failures = RunFailures::default();
    let total = report.runs.len();
    for r in report.runs {
        if let RunBackupResult::Failed { error } = r.result {
            failures.record(error);
        }
    }
    failures.finish(total, false)
}

/// The detail column of a run: why it was recopied, or its error.
fn detail(r: &RunBackup) -> Option<String> {
    match &r.result {
        RunBackupResult::Recopied { reason } => Some(reason.clone()),
        RunBackupResult::Failed { error } => Some(error_text(error)),
        _ => None,
    }
}

fn print_json(out: &mut impl Write, report: &BackupReport) -> io::Result<()> {
    for r in &report.runs {
        let mut line = json!({"run": r.run.as_str(), "result": r.result.name(),
            "last_seq": r.last_seq, "bytes_copied": r.bytes_copied});
        let key = match r.result {
            RunBackupResult::Failed { .. } => "error",
            _ => "reason",
        };
        if let Some(d) = detail(r) {
            line[key] = json!(d);
        }
        json_line(out, &line)?;
    }
    let summary = json!({"backup": report.dst.display().to_string(),
        "complete": report.complete, "started_at_ms": report.started_at_ms,
        "finished_at_ms": report.finished_at_ms, "runs": report.runs.len(),
        "bytes_copied": report.bytes_copied()});
    json_line(out, &summary)
}

fn print_report(out: &mut impl Write, report: &BackupReport) -> io::Result<()> {
    let mut table = Table::new(&["RUN", "RESULT", "LAST_SEQ", "BYTES", "DETAIL"]);
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for r in &report.runs {
        *counts.entry(r.result.name()).or_default() += 1;
        let d = detail(r).unwrap_or_else(|| "-".to_string());
        table.row(vec![
            r.run.to_string(),
            r.result.name().to_string(),
            r.last_seq.to_string(),
            r.bytes_copied.to_string(),
            d,
        ]);
    }
    if !table.is_empty() {
        table.print(out)?;
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let state = if report.complete {
        "complete"
    } else {
        "incomplete"
    };
    writeln!(
        out,
        "backed up {} runs into {}: {}; {} bytes copied in {} ms; {state}",
        report.runs.len(),
        report.dst.display(),
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        },
        report.bytes_copied(),
        report.finished_at_ms.saturating_sub(report.started_at_ms)
    )
}

/// `verify`'s check of a backup directory: the problem to report when `store` is a backup
/// whose manifest says `incomplete` (an interrupted backup; format/SPEC.md §12).
///
/// # Errors
/// A manifest that cannot be read or is not one.
pub fn incomplete_backup(store: &Backend) -> Result<Option<String>, CliError> {
    let Some(file_store) = store.file_store() else {
        return Ok(None);
    };
    Ok(file_store
        .backup_manifest()?
        .filter(|m| !m.complete)
        .map(|m| {
            format!(
                "incomplete backup of {} (started at {} ms, interrupted): run `runlog backup` \
                 into it again to complete it",
                m.source.display(),
                m.started_at_ms
            )
        }))
}
