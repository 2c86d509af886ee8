//! Read commands: `runs`, `events`, `tail`, `export`. Each opens the store read-only
//! (`support::open_for_reading`): no lock, nothing written, the committed view only (on
//! PostgreSQL: no migration, and the server refuses writes).

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use runlog::{Event, RunId, RunInfo, RunLog, Seq};
use runlog_cli::audit::RunStatus;
use runlog_cli::import::{OrderScheme, RunStamp, event_id_text, format_created_at};
use runlog_world::{LogKind, log_kind};
use serde::Serialize;
use serde_json::{Value, json};

use crate::output::{
    EVENT_HEADERS, Payload, Table, base64, error_json, error_text, escape_text, event_cells,
    event_json, json_line,
};
use crate::support::{
    Backend, CliError, RunFailures, all_runs, for_each_event, open_for_reading, order_of, per_run,
    selected_workflow_runs, stamp_of,
};

/// Extra `--help` text of `runs`.
pub const RUNS_HELP: &str = "\
Each row comes from the run's summary file when it is current (a few hundred bytes and the
run's last batch, checksum checked), else from reading the run's events; --check always reads
every event, so a bad checksum anywhere in a run is found (so do `verify`, `events`, `audit`).
A run that cannot be read (a bad checksum, a damaged header, a permission error) is a row with
status `error` and its error (in --json: {\"run\", \"error\"}); the listing goes on with the
other runs and then exits with that run's code (5 corrupt, 6 environment).";

/// Extra `--help` text of `events` and `tail`.
pub const EVENTS_HELP: &str = "\
Tables show control characters escaped (\\n, \\t, \\x1b, \\u{9b}). With --json, `payload` is the
payload's JSON value, its text when it is UTF-8 but not JSON, or null when empty; a payload that
is not UTF-8 has `payload_base64` (its exact bytes, standard base64) instead of `payload`.";

/// Extra `--help` text of `export`.
pub const EXPORT_HELP: &str = "\
`eventData` is the stored payload as a JSON value (every imported payload is JSON). A payload
that is not JSON (text, or bytes that are not UTF-8) is carried as `eventDataBase64` (its exact
bytes, standard base64) instead, never quoted or replaced. Without RUN, a run that cannot be read gets a line {\"run\", \"error\"} after the
events it could read, the export goes on with the next run, and exits with that run's code (5
corrupt, 6 environment).";

/// How long one `wait` call of `tail --follow` blocks before checking for Ctrl-C.
const FOLLOW_WAIT: Duration = Duration::from_millis(250);

/// Arguments of `runlog runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Also list the World's own logs (streams, stream indexes, stream owners, the hook
    /// token claims), with their kind instead of a status.
    #[arg(long)]
    all: bool,
    /// Read every event of every run (each batch's checksum checked) instead of each run's
    /// summary: finds damage anywhere in a run, at the cost of reading the whole store.
    #[arg(long)]
    check: bool,
}

/// Arguments of `runlog events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// The run.
    run: RunId,
    /// Start after this seq (0: from the first event).
    #[arg(long, default_value_t = 0)]
    after: Seq,
    /// Print at most this many events.
    #[arg(long)]
    limit: Option<usize>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Read the run from its archive in DIR (`runlog gc`) instead of the store.
    #[arg(long, value_name = "DIR")]
    archive: Option<std::path::PathBuf>,
}

/// Arguments of `runlog tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The run.
    run: RunId,
    /// Start after this seq (default: show the last --lines events).
    #[arg(long)]
    after: Option<Seq>,
    /// How many of the last events to show when --after is not given.
    #[arg(short = 'n', long, default_value_t = 10)]
    lines: u64,
    /// Keep waiting for new events and print them as they commit; Ctrl-C ends (exit 0).
    #[arg(short, long)]
    follow: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// Arguments of `runlog export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run (default: every run, one after another).
    run: Option<RunId>,
}

/// Columns of `runs`; `--all` adds `KIND` after `RUN`, and a store with runs that cannot be
/// read gets a trailing `ERROR` column.
const RUNS_HEADERS: [&str; 7] = [
    "RUN", "LAST_SEQ", "EVENTS", "STATUS", "CREATED", "UPDATED", "ERROR",
];

/// `runlog runs`: the runs of the store; the World's own logs (`runlog_world::log_kind`) are
/// counted in a line after the table, or listed with their kind under `--all`. A log that
/// cannot be read gets a row with its error (status `error`) whatever its kind, and the
/// listing goes on; the exit code then is that of the first such log.
pub fn runs(store_dir: &Path, args: RunsArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut rows = Vec::new();
    let mut failures = RunFailures::default();
    let mut hidden = BTreeMap::<&'static str, usize>::new();
    let listed = all_runs(&store)?;
    let total = listed.len();
    for entry in listed {
        let id = match &entry {
            Ok(info) => &info.run,
            Err((run, _)) => run,
        };
        let kind = log_kind(id.as_str());
        let summary = match entry {
            Ok(info) => match per_run(summarize(&store, &info, args.check))? {
                Ok(s) => Ok((info, s)),
                Err(e) => Err((info.run, e)),
            },
            Err(failed) => Err(failed),
        };
        // An internal log is left out only when it reads whole: a failure is never hidden.
        if kind.is_internal() && !args.all && summary.is_ok() {
            *hidden.entry(kind.name()).or_default() += 1;
            continue;
        }
        match summary {
            Ok((info, s)) => {
                let status = (!kind.is_internal()).then(|| s.status.name());
                if args.json {
                    let mut line = json!({"run": info.run.as_str(), "kind": kind.name(),
                        "last_seq": info.last_seq, "events": s.events, "status": status,
                        "created_at": s.created_at, "updated_at": s.updated_at});
                    if !args.all {
                        line.as_object_mut().map(|m| m.remove("kind"));
                    }
                    json_line(&mut out, &line)?;
                } else {
                    let status = status.unwrap_or("-").to_string();
                    let cells = [info.last_seq.to_string(), s.events.to_string(), status];
                    rows.push(runs_row(
                        &args,
                        &info.run,
                        kind,
                        cells,
                        [s.created_at, s.updated_at],
                        None,
                    ));
                }
            }
            Err((run, e)) => {
                if args.json {
                    json_line(&mut out, &error_json(&run, &e))?;
                } else {
                    let dash = || "-".to_string();
                    let cells = [dash(), dash(), "error".to_string()];
                    rows.push(runs_row(
                        &args,
                        &run,
                        kind,
                        cells,
                        [dash(), dash()],
                        Some(error_text(&e)),
                    ));
                }
                failures.record(e);
            }
        }
    }
    if !args.json {
        let columns = if failures.any() { 7 } else { 6 };
        let mut headers = RUNS_HEADERS[..columns].to_vec();
        if args.all {
            headers.insert(1, "KIND");
        }
        let mut table = Table::new(&headers);
        rows.into_iter().for_each(|row| table.row(row));
        table.print(&mut out)?;
        if let Some(line) = hidden_line(&hidden) {
            writeln!(out, "{line}")?;
        }
    }
    out.flush()?;
    failures.finish(total, false)
}

/// One row of `runs`: the run, its kind under `--all`, then `cells` (last seq, events,
/// status), the times, and the error, if any.
fn runs_row(
    args: &RunsArgs,
    run: &RunId,
    kind: LogKind,
    cells: [String; 3],
    times: [String; 2],
    error: Option<String>,
) -> Vec<String> {
    let mut row = vec![run.to_string()];
    if args.all {
        row.push(kind.name().to_string());
    }
    row.extend(cells);
    row.extend(times);
    row.extend(error);
    row
}

/// The line after the `runs` table counting the World's own logs it left out, e.g.
/// `+3 internal logs (2 stream, 1 stream-index); --all to show`.
fn hidden_line(hidden: &BTreeMap<&'static str, usize>) -> Option<String> {
    let total: usize = hidden.values().sum();
    if total == 0 {
        return None;
    }
    let each: Vec<String> = hidden.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let noun = if total == 1 { "log" } else { "logs" };
    Some(format!(
        "+{total} internal {noun} ({}); --all to show",
        each.join(", ")
    ))
}

/// What `runs` shows of one run, derived from its log.
struct Summary {
    events: u64,
    status: RunStatus,
    created_at: String,
    updated_at: String,
}

/// Reads the log up to `info.last_seq`: event count, status, and the times of its first and
/// last events (the store's own times for an empty run). Bounded by the listed last seq, so a
/// row's columns describe one view even while a writer appends.
///
/// A file store answers from the run's summary (`Store::run_summary`: O(1) bytes per run when
/// its summary file is current, format/SPEC.md §10); the status is then the fold of the kinds
/// in order of first occurrence, which is the fold of every event (`RunStatus::after` changes
/// only at the first `run_started` and the first terminal event).
fn summarize(store: &Backend, info: &RunInfo, check: bool) -> Result<Summary, CliError> {
    if let Some(files) = store.file_store().filter(|_| !check) {
        let s = files.run_summary(&info.run, info.last_seq)?;
        if let Some(kinds) = &s.kinds {
            return Ok(Summary {
                events: s.last_seq,
                status: RunStatus::of(kinds.iter().map(|(k, _)| k.as_str())),
                created_at: format_created_at(s.first_created_at_ms.unwrap_or(info.created_at_ms)),
                updated_at: format_created_at(s.last_created_at_ms.unwrap_or(info.updated_at_ms)),
            });
        }
    }
    summarize_scan(&**store, info)
}

/// [`summarize`] by reading every event.
fn summarize_scan(store: &dyn RunLog, info: &RunInfo) -> Result<Summary, CliError> {
    let mut events = 0;
    let mut status = RunStatus::Pending;
    let (mut first_ms, mut last_ms) = (None, info.updated_at_ms);
    let limit = usize::try_from(info.last_seq).unwrap_or(usize::MAX);
    for_each_event(store, &info.run, 0, Some(limit), |e| {
        events += 1;
        status = status.after(&e.kind);
        first_ms.get_or_insert(e.created_at_ms);
        last_ms = e.created_at_ms;
        Ok(())
    })?;
    Ok(Summary {
        events,
        status,
        created_at: format_created_at(first_ms.unwrap_or(info.created_at_ms)),
        updated_at: format_created_at(last_ms),
    })
}

/// `runlog events`: on a run that cannot be read to its end, the events before the fault
/// are printed (the table too), then the error is returned.
pub fn events(store_dir: &Path, args: EventsArgs) -> Result<bool, CliError> {
    let store = crate::cmd_gc::reader(store_dir, args.archive.as_deref(), Some(args.run.as_str()))?;
    let order = order_of(stamp_of(&*store, &args.run)?.as_ref());
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&EVENT_HEADERS);
    let read = for_each_event(&*store, &args.run, args.after, args.limit, |e| {
        if args.json {
            json_line(&mut out, &event_json(&args.run, order, e))?;
        } else {
            table.row(event_cells(order, e));
        }
        Ok(())
    });
    if !args.json {
        table.print(&mut out)?;
    }
    out.flush()?;
    read?;
    Ok(false)
}

/// Where `tail` prints: JSON lines, or the event table, printed after each read (the rows
/// of a read aligned with each other and with what was printed before).
struct TailSink<'a, W: Write> {
    out: W,
    table: Table,
    json: bool,
    run: &'a RunId,
    order: Option<OrderScheme>,
    printed: Seq,
}

impl<W: Write> TailSink<'_, W> {
    fn event(&mut self, e: &Event) -> Result<(), CliError> {
        if self.json {
            json_line(&mut self.out, &event_json(self.run, self.order, e))?;
        } else {
            self.table.row(event_cells(self.order, e));
        }
        self.printed = e.seq;
        Ok(())
    }

    /// Prints the rows read since the last call (the header the first time).
    fn flush(&mut self) -> Result<(), CliError> {
        if !self.json {
            self.table.print(&mut self.out)?;
        }
        self.out.flush()?;
        Ok(())
    }
}

/// `runlog tail`.
pub fn tail(store_dir: &Path, args: TailArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let order = order_of(stamp_of(&*store, &args.run)?.as_ref());
    let start = match args.after {
        Some(after) => after,
        None => match store.last_seq(&args.run) {
            Ok(last) => last,
            // A damaged run has no last seq (rule 5): its tail is the last events before the
            // damage, and the read below ends with the damage's error (exit 5).
            Err(runlog::Error::Corrupt { .. }) => readable_end(&*store, &args.run),
            Err(e) => return Err(e.into()),
        }
        .saturating_sub(args.lines),
    };
    let stop = if args.follow {
        ctrl_c_flag()?
    } else {
        Arc::default()
    };
    let mut sink = TailSink {
        out: io::stdout().lock(),
        table: Table::new(&EVENT_HEADERS),
        json: args.json,
        run: &args.run,
        order,
        printed: start,
    };
    let read = for_each_event(&*store, &args.run, start, None, |e| sink.event(e));
    sink.flush()?;
    let mut cursor = read?;
    let mut lost = false;
    while args.follow && !stop.load(Ordering::SeqCst) {
        let read = follow_once(&*store, &args.run, cursor, &mut |e| sink.event(e));
        sink.flush()?;
        match read {
            Ok(next) => {
                cursor = next;
                if std::mem::take(&mut lost) {
                    eprintln!("runlog: connected again");
                }
            }
            // A server restart or a dropped connection is not the end of a follow (the file
            // store has no such passing failure): say so once, and keep trying until Ctrl-C.
            Err(CliError::Store(e)) if is_connection_loss(&e) => {
                cursor = cursor.max(sink.printed);
                if !std::mem::replace(&mut lost, true) {
                    eprintln!(
                        "runlog: warning: {}; retrying until Ctrl-C",
                        escape_text(&e.to_string())
                    );
                }
                std::thread::sleep(FOLLOW_WAIT);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// The seq of the last event a damaged run's log can be read to (from its start; the
/// read's error is left to the read that follows it).
fn readable_end(store: &dyn RunLog, run: &RunId) -> Seq {
    let mut last = 0;
    let _ = for_each_event(store, run, 0, None, |e| {
        last = e.seq;
        Ok(())
    });
    last
}

/// One wait of `tail --follow` and the events committed above `cursor`; the new cursor.
fn follow_once(
    store: &dyn RunLog,
    run: &RunId,
    cursor: Seq,
    print: &mut dyn FnMut(&Event) -> Result<(), CliError>,
) -> Result<Seq, CliError> {
    if store.wait(run, cursor, FOLLOW_WAIT)? > cursor {
        for_each_event(store, run, cursor, None, print)
    } else {
        Ok(cursor)
    }
}

/// Whether `e` is a failure of the PostgreSQL connection (`Io` on path `postgres`), which a
/// later call may not meet.
fn is_connection_loss(e: &runlog::Error) -> bool {
    matches!(e, runlog::Error::Io { path, .. } if path == Path::new("postgres"))
}

/// A flag set by Ctrl-C (SIGINT/SIGTERM).
fn ctrl_c_flag() -> Result<Arc<AtomicBool>, CliError> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    ctrlc::set_handler(move || set.store(true, Ordering::SeqCst))
        .map_err(|e| CliError::Input(format!("cannot install the Ctrl-C handler: {e}")))?;
    Ok(flag)
}

/// One event in the world-local shape, plus `seq`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WorldLocalEvent<'a> {
    run_id: &'a str,
    event_id: String,
    event_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_data: Option<Value>,
    /// A payload that is not JSON (so cannot be `eventData` unaltered): its exact bytes,
    /// standard base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    event_data_base64: Option<String>,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec_version: Option<u64>,
    /// A `hook_received` a World wrote for `params.resumeId`: that id (from the event's key,
    /// `resume/<resumeId>[ <digest>]`), as world-local writes it on the event.
    #[serde(skip_serializing_if = "Option::is_none")]
    resume_id: Option<&'a str>,
    seq: Seq,
}

/// `runlog export`: a run that cannot be read (or read to its end) gets a line
/// `{"run", "error"}` after the events it could read, and the export goes on with the next.
pub fn export(store_dir: &Path, args: ExportArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut failures = RunFailures::default();
    let selected = selected_workflow_runs(&store, args.run)?;
    let total = selected.len();
    for entry in selected {
        let failed = match entry {
            Ok(run) => per_run(export_run(&*store, &run, &mut out))?
                .err()
                .map(|e| (run, e)),
            Err(failed) => Some(failed),
        };
        if let Some((run, e)) = failed {
            json_line(&mut out, &error_json(&run, &e))?;
            failures.record(e);
        }
    }
    out.flush()?;
    failures.finish(total, false)
}

/// Writes every event of `run` as a world-local JSON line.
fn export_run(store: &dyn RunLog, run: &RunId, out: &mut impl Write) -> Result<(), CliError> {
    let stamp = stamp_of(store, run)?;
    for_each_event(store, run, 0, None, |e| {
        let line = world_local_event(run, stamp.as_ref(), e);
        serde_json::to_writer(&mut *out, &line).map_err(io::Error::from)?;
        writeln!(out)?;
        Ok(())
    })?;
    Ok(())
}

/// The world-local shape of `e`. `eventData` is the payload's JSON value (every imported
/// payload is JSON); a payload that is not JSON goes to `eventDataBase64` instead: quoting
/// text into a JSON string, or replacing bytes that are not UTF-8, would change it.
fn world_local_event<'a>(
    run: &'a RunId,
    stamp: Option<&RunStamp>,
    e: &'a Event,
) -> WorldLocalEvent<'a> {
    let (event_data, event_data_base64) = match Payload::of(&e.payload) {
        Payload::Empty => (None, None),
        Payload::Json(v) => (Some(v), None),
        Payload::Text(_) | Payload::Binary(_) => (None, Some(base64(&e.payload))),
    };
    WorldLocalEvent {
        run_id: run.as_str(),
        event_id: event_id_text(order_of(stamp), e.event_id),
        event_type: &e.kind,
        correlation_id: e.correlation_id.as_deref(),
        event_data,
        event_data_base64,
        created_at: format_created_at(e.created_at_ms),
        spec_version: stamp.and_then(|s| s.spec_version),
        resume_id: runlog_world::resume_id_of_stored(&e.kind, e.key.as_deref()),
        seq: e.seq,
    }
}
