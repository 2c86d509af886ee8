//! `runlog`: the command-line tool over a runlog store: import world-local data directories,
//! inspect runs and events, append, verify storage, audit workflow anomalies, export.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_append;
mod cmd_backup;
mod cmd_check;
mod cmd_copy;
mod cmd_gc;
mod cmd_import;
mod cmd_inspect;
mod cmd_read;
mod output;
mod storm_cmd;
#[cfg(feature = "postgres")]
mod storm_pg;
mod support;

use support::CliError;

const EXIT_CODES: &str = "\
Exit codes:
  0  ok
  1  verify or audit found problems (verify: also an incomplete backup), or import left files
     or runs behind (or imported a run whose source lacks slots), or copy skipped a run that
     differs in the destination, or verify --archive found a damaged archive, or restore found
     the run with other content
  2  bad usage or bad input (unknown run, unreadable source, invalid id or payload, a run id
     that differs only in case from an existing run on a case-insensitive file system, a
     missing store or PostgreSQL schema, `repair` on PostgreSQL, `restore` of a run without
     an archive, `gc`/`restore` on PostgreSQL without --archive, `backup` into a directory
     that is no backup, inside the source or busy with another backup, or of PostgreSQL)
  3  fenced append rejected: the log grew past --expected-seq, or its --key already exists (nothing was written);
     gc: a log grew after it was archived (it stays live; the next gc archives it again)
  4  run busy (another process held the run's lock past the timeout, --lock-timeout-ms)
  5  store corrupt: stored bytes failed validation (checksum, gap, header), or a foreign or
     newer format, or a damaged archive (`restore`) or one that disagrees with the store (`gc`)
  6  environment: permission denied, read-only or full file system, I/O error, a PostgreSQL
     server that cannot be reached or fails (the message names the path, or `postgres`, and
     the error; the stored bytes are not known to be bad)

runs, audit, export and verify without RUN go on past a run they cannot read: it gets a row
with its error (with --json, or in export, {\"run\": ..., \"error\": ...}), and the exit code is
that of the first such run (5 or 6; 4 when busy).";

/// Inspect and fill a runlog store: per-run, append-only event logs with dense seqs.
#[derive(Debug, Parser)]
#[command(name = "runlog", version, after_help = EXIT_CODES)]
struct Cli {
    /// Store: a directory (created on first write), or a PostgreSQL URL
    /// (`postgres://…` or `postgresql://…`; `?schema=NAME` picks the schema).
    #[arg(long, global = true, env = "RUNLOG_STORE", default_value = "./.runlog")]
    store: PathBuf,

    /// How long a writing command waits for a run lock held by another process before it
    /// gives up with exit 4 (run busy), in milliseconds; the store's default (10 s) when
    /// unset. File stores only.
    #[arg(long, global = true, env = "RUNLOG_LOCK_TIMEOUT_MS", value_name = "MS")]
    lock_timeout_ms: Option<u64>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Import a world-local data directory (flat or run-scoped `events/`), run by run.
    #[command(after_help = cmd_import::AFTER_HELP)]
    Import(cmd_import::ImportArgs),
    /// List runs: last seq, event count, status derived from the log, first/last event time.
    #[command(after_help = cmd_read::RUNS_HELP)]
    Runs(cmd_read::RunsArgs),
    /// Print a run's events in seq order.
    #[command(after_help = cmd_read::EVENTS_HELP)]
    Events(cmd_read::EventsArgs),
    /// Print a run's last events; with --follow, keep printing new ones until Ctrl-C.
    #[command(after_help = cmd_read::EVENTS_HELP)]
    Tail(cmd_read::TailArgs),
    /// Append one event: a fact, or a fenced decision when --expected-seq is given.
    #[command(after_help = EXIT_CODES)]
    Append(cmd_append::AppendArgs),
    /// Check storage invariants (checksums, density, counter slots, segment chain).
    #[command(after_help = cmd_check::VERIFY_HELP)]
    Verify(cmd_check::VerifyArgs),
    /// Cut a damaged run at its first bad batch (only with --cut), keeping the cut bytes.
    #[command(after_help = cmd_check::REPAIR_HELP)]
    Repair(cmd_check::RepairArgs),
    /// Report workflow-level anomalies in the logs (not storage faults).
    #[command(after_help = cmd_check::AUDIT_HELP)]
    Audit(cmd_check::AuditArgs),
    /// Print events as world-local JSON lines (runId, eventId, eventType, ..., seq).
    #[command(after_help = cmd_read::EXPORT_HELP)]
    Export(cmd_read::ExportArgs),
    /// The World's view, computed from the logs: runs, steps, hooks, events or streams.
    #[command(after_help = cmd_inspect::INSPECT_HELP)]
    Inspect(cmd_inspect::InspectArgs),
    /// Copy every run (metadata and events, seqs exact) from the store SRC to the store DST.
    #[command(after_help = cmd_copy::COPY_HELP)]
    Copy(cmd_copy::CopyArgs),
    /// Move finished workflow runs (with their attribute and stream logs) into archives.
    #[command(after_help = cmd_gc::GC_HELP)]
    Gc(cmd_gc::GcArgs),
    /// Put an archived run back into the store, byte-exact, then remove its archive.
    #[command(after_help = cmd_gc::RESTORE_HELP)]
    Restore(cmd_gc::RestoreArgs),
    /// Back the file store up into a directory while writers run; again: only what grew.
    #[command(after_help = cmd_backup::BACKUP_HELP)]
    Backup(cmd_backup::BackupArgs),
    /// Run the concurrency storm (many writers, one run) and report what each store kept.
    #[command(after_help = storm_cmd::STORM_HELP)]
    Storm(storm_cmd::StormArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(ms) = cli.lock_timeout_ms {
        support::set_lock_timeout(std::time::Duration::from_millis(ms));
    }
    let result = match cli.command {
        Command::Import(args) => cmd_import::run(&cli.store, args),
        Command::Runs(args) => cmd_read::runs(&cli.store, args),
        Command::Events(args) => cmd_read::events(&cli.store, args),
        Command::Tail(args) => cmd_read::tail(&cli.store, args),
        Command::Append(args) => cmd_append::run(&cli.store, args),
        Command::Verify(args) => cmd_check::verify(&cli.store, args),
        Command::Audit(args) => cmd_check::audit(&cli.store, args),
        Command::Repair(args) => cmd_check::repair(&cli.store, args),
        Command::Export(args) => cmd_read::export(&cli.store, args),
        Command::Inspect(args) => cmd_inspect::run(&cli.store, args),
        Command::Copy(args) => cmd_copy::run(args),
        Command::Gc(args) => cmd_gc::gc(&cli.store, args),
        Command::Restore(args) => cmd_gc::restore(&cli.store, args),
        Command::Backup(args) => cmd_backup::run(&cli.store, args),
        Command::Storm(args) => return storm_cmd::run(&cli.store, args),
    };
    match result {
        Ok(found_problems) => ExitCode::from(u8::from(found_problems)),
        Err(e) => exit_with(e),
    }
}

fn exit_with(e: CliError) -> ExitCode {
    if let Some(message) = e.message() {
        // Messages can quote stored or source text (kinds, keys, file names).
        eprintln!("runlog: error: {}", output::escape_text(&message));
    }
    ExitCode::from(e.exit_code())
}
