//! Read commands: `runs`, `events`, `tail`, `export`. Each opens the store read-only
//! (`support::open_for_reading`): no lock, nothing written, the committed view only.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use runlog::{Event, RunId, RunInfo, Seq, Store};
use runlog_cli::audit::RunStatus;
use runlog_cli::import::{RunStamp, event_id_text, format_created_at};
use serde::Serialize;
use serde_json::{Value, json};

use crate::output::{EVENT_HEADERS, Table, event_cells, event_json, json_line, payload_value};
use crate::support::{
    CliError, all_runs, for_each_event, open_for_reading, order_of, selected_runs, stamp_of,
};

/// How long one `wait` call of `tail --follow` blocks before checking for Ctrl-C.
const FOLLOW_WAIT: Duration = Duration::from_millis(250);

/// Arguments of `runlog runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
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

/// `runlog runs`.
pub fn runs(store_dir: &Path, args: RunsArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&["RUN", "LAST_SEQ", "EVENTS", "STATUS", "CREATED", "UPDATED"]);
    for info in all_runs(&store)? {
        let s = summarize(&store, &info)?;
        if args.json {
            json_line(
                &mut out,
                &json!({"run": info.run.as_str(), "last_seq": info.last_seq, "events": s.events,
                        "status": s.status.name(), "created_at": s.created_at, "updated_at": s.updated_at}),
            )?;
        } else {
            table.row(vec![
                info.run.to_string(),
                info.last_seq.to_string(),
                s.events.to_string(),
                s.status.name().to_string(),
                s.created_at,
                s.updated_at,
            ]);
        }
    }
    if !args.json {
        table.print(&mut out)?;
    }
    out.flush()?;
    Ok(false)
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
fn summarize(store: &Store, info: &RunInfo) -> Result<Summary, CliError> {
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

/// `runlog events`.
pub fn events(store_dir: &Path, args: EventsArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let order = order_of(stamp_of(&store, &args.run)?.as_ref());
    let mut out = BufWriter::new(io::stdout().lock());
    let mut table = Table::new(&EVENT_HEADERS);
    for_each_event(&store, &args.run, args.after, args.limit, |e| {
        if args.json {
            json_line(&mut out, &event_json(&args.run, order, e))?;
        } else {
            table.row(event_cells(order, e));
        }
        Ok(())
    })?;
    if !args.json {
        table.print(&mut out)?;
    }
    out.flush()?;
    Ok(false)
}

/// `runlog tail`.
pub fn tail(store_dir: &Path, args: TailArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let order = order_of(stamp_of(&store, &args.run)?.as_ref());
    let start = match args.after {
        Some(after) => after,
        None => store.last_seq(&args.run)?.saturating_sub(args.lines),
    };
    let stop = if args.follow {
        ctrl_c_flag()?
    } else {
        Arc::default()
    };
    let mut out = io::stdout().lock();
    let mut print = |e: &Event| -> Result<(), CliError> {
        if args.json {
            json_line(&mut out, &event_json(&args.run, order, e))?;
        } else {
            writeln!(out, "{}", event_cells(order, e).join("  ").trim_end())?;
        }
        Ok(())
    };
    let mut cursor = for_each_event(&store, &args.run, start, None, &mut print)?;
    while args.follow && !stop.load(Ordering::SeqCst) {
        if store.wait(&args.run, cursor, FOLLOW_WAIT)? > cursor {
            cursor = for_each_event(&store, &args.run, cursor, None, &mut print)?;
        }
    }
    Ok(false)
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
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    spec_version: Option<u64>,
    seq: Seq,
}

/// `runlog export`.
pub fn export(store_dir: &Path, args: ExportArgs) -> Result<bool, CliError> {
    let store = open_for_reading(store_dir)?;
    let mut out = BufWriter::new(io::stdout().lock());
    for run in selected_runs(&store, args.run)? {
        let stamp = stamp_of(&store, &run)?;
        for_each_event(&store, &run, 0, None, |e| {
            let line = world_local_event(&run, stamp.as_ref(), e);
            serde_json::to_writer(&mut out, &line).map_err(io::Error::from)?;
            writeln!(out)?;
            Ok(())
        })?;
    }
    out.flush()?;
    Ok(false)
}

fn world_local_event<'a>(
    run: &'a RunId,
    stamp: Option<&RunStamp>,
    e: &'a Event,
) -> WorldLocalEvent<'a> {
    WorldLocalEvent {
        run_id: run.as_str(),
        event_id: event_id_text(order_of(stamp), e.event_id),
        event_type: &e.kind,
        correlation_id: e.correlation_id.as_deref(),
        event_data: payload_value(&e.payload),
        created_at: format_created_at(e.created_at_ms),
        spec_version: stamp.and_then(|s| s.spec_version),
        seq: e.seq,
    }
}
