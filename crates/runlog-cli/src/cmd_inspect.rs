//! `runlog inspect runs|run|steps|hooks|events|streams|diff [RUN]`: the World's view of the
//! store (the names the SDK's own CLI uses), computed from the logs by `runlog-world` over the
//! store opened read-only. Tables, or `--json` with one entity per line in the SDK schemas' own
//! field names (`runId`, `status`, `workflowName`, `stepId`, `attempt`, …). `--at N|TIME`
//! shows a run as of a seq of its log ([`World::run_at`]); `diff RUN --from N --to M` which
//! of its entities changed between two seqs, and by which events ([`World::run_diff`]).

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use runlog::{RunId, RunLog};
use runlog_world::{
    At, Change, Pagination, ResolveData, RunAt, RunDiff, RunState, Streams, WorkflowRun, World,
    WorldConfig, WorldError, format_iso_ms, parse_run_id,
};
use serde_json::{Value, json};

use crate::output::{Table, json_line, payload_preview};
use crate::support::{Backend, CliError, RunFailures, all_runs};

/// Extra `--help` text of `inspect`.
pub const INSPECT_HELP: &str = "\
runs: every workflow run (`wrun_…`), oldest first. run RUN: one run. steps RUN: the run's steps
in creation order. hooks [RUN]: the live hooks of RUN, or of every run. events RUN: the run's
events in seq order. streams RUN: the run's streams by name, with their chunk count and whether
they are closed. diff RUN --from N --to M: the run's entities (run, steps, hooks, waits) that
changed from seq N to seq M, each with the events that changed it.

--at N|TIME (run, steps, hooks RUN, events): the run as of seq N of its log, as the World
computes it on the log truncated at N; a TIME (ISO 8601, 2026-11-30T02:25:44.946Z) is the last
seq whose event's createdAt is at or before it. --from and --to take the same (--from 0: the
empty log). A seq past the log's end, seq 0, or a time before its first event: exit 2.

Everything is computed from the logs by runlog-world over the store opened read-only. With
--json each line is one entity in the SDK schemas' field names (WorkflowRun, Step, Hook,
Event; a stream is {runId, name, chunks, tailIndex, done}). A run that cannot be read (or that
has no run_created) is a row with its error ({\"runId\", \"error\"} in --json); the listing goes
on and exits with that run's code (5 corrupt, 6 environment; 1 for a run without run_created).";

/// What `inspect` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// Workflow runs.
    Runs,
    /// One workflow run.
    Run,
    /// A run's steps.
    Steps,
    /// Live hooks (of RUN, or of every run).
    Hooks,
    /// A run's events.
    Events,
    /// A run's streams.
    Streams,
    /// Which entities of a run changed between two seqs.
    Diff,
}

impl What {
    fn name(self) -> &'static str {
        match self {
            What::Runs => "runs",
            What::Run => "run",
            What::Steps => "steps",
            What::Hooks => "hooks",
            What::Events => "events",
            What::Streams => "streams",
            What::Diff => "diff",
        }
    }
}

/// Arguments of `runlog inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// What to list.
    what: What,
    /// The workflow run (`wrun_…`): required for run, steps, events, streams and diff.
    run: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// The run as of this seq of its log, or of the last seq at or before this ISO-8601
    /// time (run, steps, hooks RUN, events).
    #[arg(long, value_name = "N|TIME")]
    at: Option<String>,
    /// diff: the earlier seq or time (0: the empty log).
    #[arg(long, value_name = "N|TIME")]
    from: Option<String>,
    /// diff: the later seq or time.
    #[arg(long, value_name = "N|TIME")]
    to: Option<String>,
    /// Read RUN from its archive in DIR (`runlog gc`) instead of the store.
    #[arg(long, value_name = "DIR")]
    archive: Option<std::path::PathBuf>,
}

type StoreWorld = World<Arc<dyn RunLog>>;

/// A workflow run's id and its fold (or why it could not be folded).
type FoldedRun = (String, Result<RunState, WorldError>);

/// A World error as the CLI's: storage faults keep their exit codes, a missing run is bad input.
fn cli_error(e: WorldError) -> CliError {
    match e {
        WorldError::Storage(e) => CliError::Store(e),
        other => CliError::Input(other.to_string()),
    }
}

fn date(ms: Option<u64>) -> String {
    ms.map(format_iso_ms).unwrap_or_else(|| "-".into())
}

fn value<T: serde::Serialize>(entity: &T) -> Value {
    serde_json::to_value(entity).unwrap_or(Value::Null)
}

/// Rows of a store-wide listing: entities, and the runs that could not be read.
struct Listing<'a, W: Write> {
    out: &'a mut W,
    json: bool,
    headers: Vec<&'static str>,
    table: Table,
    errors: Vec<(String, String)>,
    failures: RunFailures,
    other_errors: bool,
    total: usize,
}

impl<W: Write> Listing<'_, W> {
    fn entity(&mut self, json: Value, cells: Vec<String>) -> io::Result<()> {
        if self.json {
            json_line(self.out, &json)
        } else {
            self.table.row(cells);
            Ok(())
        }
    }

    fn error(&mut self, run: &str, e: WorldError) -> io::Result<()> {
        let text = e.to_string();
        match e {
            WorldError::Storage(e) => self.failures.record(e),
            _ => self.other_errors = true,
        }
        if self.json {
            json_line(self.out, &json!({"runId": run, "error": text}))
        } else {
            self.errors.push((run.to_string(), text));
            Ok(())
        }
    }

    fn finish(self, error_columns: usize) -> Result<bool, CliError> {
        let Listing {
            out,
            json,
            mut headers,
            mut table,
            errors,
            failures,
            other_errors,
            total,
        } = self;
        if !json {
            if !errors.is_empty() {
                headers.push("ERROR");
                table.set_headers(&headers);
            }
            for (run, e) in errors {
                let mut row = vec![run, "error".into()];
                row.extend(std::iter::repeat_n("-".to_string(), error_columns));
                row.push(e);
                table.row(row);
            }
            table.print(out)?;
        }
        out.flush()?;
        failures.finish(total, other_errors)
    }
}

/// `runlog inspect`.
pub fn run(store_dir: &Path, args: InspectArgs) -> Result<bool, CliError> {
    let what = args.what;
    let at = args.at.as_deref().map(parse_at).transpose()?;
    if at.is_some() && !matches!(what, What::Run | What::Steps | What::Hooks | What::Events) {
        return Err(CliError::Input(format!(
            "inspect {} takes no --at (run, steps, hooks and events do)",
            what.name()
        )));
    }
    if at.is_some() && what == What::Hooks && args.run.is_none() {
        return Err(CliError::Input("inspect hooks --at needs a RUN".into()));
    }
    if what != What::Diff && (args.from.is_some() || args.to.is_some()) {
        return Err(CliError::Input(format!(
            "inspect {} takes no --from or --to (diff does)",
            what.name()
        )));
    }
    let store = crate::cmd_gc::reader(store_dir, args.archive.as_deref(), args.run.as_deref())?;
    let world = World::new(store.log(), WorldConfig::default());
    let mut out = BufWriter::new(io::stdout().lock());
    let need_run = || {
        args.run
            .clone()
            .ok_or_else(|| CliError::Input(format!("inspect {} needs a RUN", what.name())))
    };
    match args.what {
        What::Runs => runs(&world, &store, &mut out, args.json),
        What::Run => one_run(&world, &need_run()?, at, &mut out, args.json),
        What::Hooks => hooks(&world, &store, args.run.as_deref(), at, &mut out, args.json),
        What::Steps => steps(&world, &need_run()?, at, &mut out, args.json),
        What::Events => events(&world, &need_run()?, at, &mut out, args.json),
        What::Streams => streams(store.log(), &need_run()?, &mut out, args.json),
        What::Diff => {
            let bound = |v: &Option<String>, name: &str| {
                v.as_deref()
                    .map(parse_at)
                    .transpose()?
                    .ok_or_else(|| CliError::Input(format!("inspect diff needs --{name} N|TIME")))
            };
            let (from, to) = (bound(&args.from, "from")?, bound(&args.to, "to")?);
            diff(&world, &need_run()?, from, to, &mut out, args.json)
        }
    }
}

/// `--at`, `--from`, `--to`: a seq or an ISO-8601 time ([`At`]'s parser).
fn parse_at(text: &str) -> Result<At, CliError> {
    text.parse::<At>().map_err(cli_error)
}

/// The run's entities: as of `at`, or as of its last committed event.
fn run_at(world: &StoreWorld, run: &str, at: Option<At>) -> Result<RunAt, CliError> {
    match at {
        Some(at) => world.run_at(run, at).map_err(cli_error),
        None => {
            let state = world.run_state(run).map_err(cli_error)?;
            Ok(RunAt::of(&state, state.seq()))
        }
    }
}

const RUN_HEADERS: [&str; 7] = [
    "RUN",
    "STATUS",
    "WORKFLOW",
    "DEPLOYMENT",
    "CREATED",
    "STARTED",
    "COMPLETED",
];

fn run_cells(r: &WorkflowRun) -> Vec<String> {
    vec![
        r.run_id.clone(),
        value(&r.status).as_str().unwrap_or("").to_string(),
        r.workflow_name.clone(),
        r.deployment_id.clone(),
        date(Some(r.created_at_ms)),
        date(r.started_at_ms),
        date(r.completed_at_ms),
    ]
}

/// `inspect run RUN [--at N|TIME]`: the run (a `WorkflowRun`); a run whose log holds no
/// `run_created` (at that seq) is not found (exit 2).
fn one_run(
    world: &StoreWorld,
    run: &str,
    at: Option<At>,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let state = run_at(world, run, at)?;
    let r = state.run.ok_or_else(|| {
        cli_error(WorldError::RunNotFound {
            run_id: run.to_string(),
        })
    })?;
    if json {
        json_line(out, &value(&r))?;
    } else {
        let mut table = Table::new(&RUN_HEADERS);
        table.row(run_cells(&r));
        table.print(out)?;
    }
    out.flush()?;
    Ok(false)
}

/// The workflow runs of the store (ids `wrun_<ULID>`), each with the result of its fold;
/// a run the store cannot even list is an error entry.
fn world_runs(world: &StoreWorld, store: &Backend) -> Result<Vec<FoldedRun>, CliError> {
    let mut runs = Vec::new();
    for listed in all_runs(store)? {
        match listed {
            Ok(info) if parse_run_id(info.run.as_str()).is_ok() => {
                let id = info.run.to_string();
                let state = world.run_state(&id);
                runs.push((id, state));
            }
            Ok(_) => {} // a stream log, the hook token claims, a non-workflow run
            Err((run, e)) if parse_run_id(run.as_str()).is_ok() => {
                runs.push((run.to_string(), Err(WorldError::Storage(e))))
            }
            Err(_) => {}
        }
    }
    Ok(runs)
}

fn runs(
    world: &StoreWorld,
    store: &Backend,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let all = world_runs(world, store)?;
    let headers = RUN_HEADERS.to_vec();
    let mut list = Listing {
        out,
        json,
        table: Table::new(&headers),
        headers,
        errors: Vec::new(),
        failures: RunFailures::default(),
        other_errors: false,
        total: all.len(),
    };
    for (id, state) in all {
        let found = state.and_then(|s| {
            s.run()
                .cloned()
                .ok_or(WorldError::RunNotFound { run_id: id.clone() })
        });
        match found {
            Ok(r) => list.entity(value(&r), run_cells(&r))?,
            Err(e) => list.error(&id, e)?,
        }
    }
    list.finish(5)
}

fn steps(
    world: &StoreWorld,
    run: &str,
    at: Option<At>,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let state = run_at(world, run, at)?;
    let mut table = Table::new(&[
        "STEP",
        "NAME",
        "STATUS",
        "ATTEMPT",
        "CREATED",
        "STARTED",
        "COMPLETED",
        "RETRY_AFTER",
    ]);
    for s in &state.steps {
        if json {
            json_line(out, &value(s))?;
        } else {
            table.row(vec![
                s.step_id.clone(),
                s.step_name.clone(),
                value(&s.status).as_str().unwrap_or("").to_string(),
                s.attempt.to_string(),
                date(Some(s.created_at_ms)),
                date(s.started_at_ms),
                date(s.completed_at_ms),
                date(s.retry_after_ms),
            ]);
        }
    }
    if !json {
        table.print(out)?;
    }
    out.flush()?;
    Ok(false)
}

fn hooks(
    world: &StoreWorld,
    store: &Backend,
    run: Option<&str>,
    at: Option<At>,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let all: Vec<(String, Result<RunAt, WorldError>)> = match run {
        Some(run) => vec![(run.to_string(), Ok(run_at(world, run, at)?))],
        None => world_runs(world, store)?
            .into_iter()
            .map(|(id, state)| (id, state.map(|s| RunAt::of(&s, s.seq()))))
            .collect(),
    };
    let mut list = Listing {
        out,
        json,
        table: Table::new(&["RUN", "HOOK", "TOKEN", "CREATED"]),
        headers: vec!["RUN", "HOOK", "TOKEN", "CREATED"],
        errors: Vec::new(),
        failures: RunFailures::default(),
        other_errors: false,
        total: all.len(),
    };
    for (id, state) in all {
        match state {
            Ok(state) => {
                for h in &state.hooks {
                    list.entity(
                        value(h),
                        vec![
                            h.run_id.clone(),
                            h.hook_id.clone(),
                            h.token.clone(),
                            date(Some(h.created_at_ms)),
                        ],
                    )?;
                }
            }
            Err(e) => list.error(&id, e)?,
        }
    }
    list.finish(2)
}

fn events(
    world: &StoreWorld,
    run: &str,
    at: Option<At>,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let last = match at {
        Some(at) => Some(world.seq_at(run, at).map_err(cli_error)?.0),
        None => None,
    };
    let mut table = Table::new(&[
        "SEQ",
        "CREATED",
        "EVENT_TYPE",
        "CORRELATION_ID",
        "EVENT_ID",
        "EVENT_DATA",
    ]);
    let limit = runlog_world::PAGE_LIMIT_MAX;
    let mut pagination = Pagination {
        limit: Some(last.map_or(limit, |n| limit.min(n.try_into().unwrap_or(limit)))),
        ..Pagination::default()
    };
    let mut done = false;
    while !done {
        let page = world
            .list_events(run, &pagination, ResolveData::All)
            .map_err(cli_error)?;
        for e in &page.data {
            if last.is_some_and(|n| e.seq > n) {
                done = true;
                break;
            }
            done = last == Some(e.seq);
            if json {
                json_line(out, &value(e))?;
            } else {
                let data = e
                    .event_data
                    .as_ref()
                    .map(|d| payload_preview(value(d).to_string().as_bytes()))
                    .unwrap_or_default();
                table.row(vec![
                    e.seq.to_string(),
                    date(Some(e.created_at_ms)),
                    value(&e.event_type).as_str().unwrap_or("").to_string(),
                    e.correlation_id.clone().unwrap_or_default(),
                    e.event_id.clone(),
                    data,
                ]);
            }
        }
        match (page.has_more, page.cursor) {
            (true, Some(c)) if !done => pagination.cursor = Some(c),
            _ => done = true,
        }
    }
    if !json {
        table.print(out)?;
    }
    out.flush()?;
    Ok(false)
}

fn streams(
    store: Arc<dyn RunLog>,
    run: &str,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let (id, _) = parse_run_id(run).map_err(cli_error)?;
    let run_id: RunId = id;
    let streams = Streams::new(store);
    let to_cli = |e: runlog_world::StreamError| match e {
        runlog_world::StreamError::Store(e) => CliError::Store(e),
        other => CliError::Input(other.to_string()),
    };
    let mut table = Table::new(&["STREAM", "CHUNKS", "TAIL_INDEX", "DONE"]);
    for name in streams.list(&run_id).map_err(to_cli)? {
        let info = streams.info(&run_id, &name).map_err(to_cli)?;
        let chunks = info.tail_index + 1;
        if json {
            json_line(
                out,
                &json!({"runId": run, "name": name, "chunks": chunks,
                        "tailIndex": info.tail_index, "done": info.done}),
            )?;
        } else {
            table.row(vec![
                name,
                chunks.to_string(),
                info.tail_index.to_string(),
                info.done.to_string(),
            ]);
        }
    }
    if !json {
        table.print(out)?;
    }
    out.flush()?;
    Ok(false)
}

/// `inspect diff RUN --from N --to M`: one row per changed entity (the run, then steps,
/// hooks and waits by id) with the events that changed it, then a row of the events that
/// changed none; `--json`: the [`RunDiff`] as one line.
fn diff(
    world: &StoreWorld,
    run: &str,
    from: At,
    to: At,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let d: RunDiff = world.run_diff(run, from, to).map_err(cli_error)?;
    if json {
        json_line(out, &value(&d))?;
        out.flush()?;
        return Ok(false);
    }
    let events = |events: &[runlog_world::DiffEvent]| {
        let each: Vec<String> = events
            .iter()
            .map(|e| format!("{} {}", e.seq, e.event_type))
            .collect();
        each.join(", ")
    };
    let mut table = Table::new(&["ENTITY", "ID", "CHANGE", "EVENTS"]);
    for c in &d.changes {
        let change = match c.change {
            Change::Created => "created",
            Change::Changed => "changed",
            Change::Removed => "removed",
        };
        table.row(vec![
            value(&c.entity).as_str().unwrap_or("").to_string(),
            c.id.clone(),
            change.to_string(),
            events(&c.events),
        ]);
    }
    if !d.unchanged.is_empty() {
        table.row(vec![
            "-".into(),
            "-".into(),
            "none".into(),
            events(&d.unchanged),
        ]);
    }
    writeln!(out, "{run}: seq {} to seq {}", d.from, d.to)?;
    table.print(out)?;
    out.flush()?;
    Ok(false)
}
