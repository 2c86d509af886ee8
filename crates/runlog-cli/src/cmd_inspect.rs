//! `runlog inspect runs|steps|hooks|events|streams [RUN]`: the World's view of the store (the
//! names the SDK's own CLI uses), computed from the logs by `runlog-world` over the store
//! opened read-only. Tables, or `--json` with one entity per line in the SDK schemas' own
//! field names (`runId`, `status`, `workflowName`, `stepId`, `attempt`, …).

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use runlog::{RunId, RunLog};
use runlog_world::{
    Pagination, ResolveData, RunState, Streams, World, WorldConfig, WorldError, format_iso_ms,
    parse_run_id,
};
use serde_json::{Value, json};

use crate::output::{Table, json_line, payload_preview};
use crate::support::{Backend, CliError, RunFailures, all_runs, open_for_reading};

/// Extra `--help` text of `inspect`.
pub const INSPECT_HELP: &str = "\
runs: every workflow run (`wrun_…`), oldest first. steps RUN: the run's steps in creation order.
hooks [RUN]: the live hooks of RUN, or of every run. events RUN: the run's events in seq order.
streams RUN: the run's streams by name, with their chunk count and whether they are closed.

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
    /// A run's steps.
    Steps,
    /// Live hooks (of RUN, or of every run).
    Hooks,
    /// A run's events.
    Events,
    /// A run's streams.
    Streams,
}

impl What {
    fn name(self) -> &'static str {
        match self {
            What::Runs => "runs",
            What::Steps => "steps",
            What::Hooks => "hooks",
            What::Events => "events",
            What::Streams => "streams",
        }
    }
}

/// Arguments of `runlog inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// What to list.
    what: What,
    /// The workflow run (`wrun_…`): required for steps, events and streams.
    run: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
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
    let store = open_for_reading(store_dir)?;
    let world = World::new(store.log(), WorldConfig::default());
    let mut out = BufWriter::new(io::stdout().lock());
    let what = args.what;
    let need_run = || {
        args.run
            .clone()
            .ok_or_else(|| CliError::Input(format!("inspect {} needs a RUN", what.name())))
    };
    match args.what {
        What::Runs => runs(&world, &store, &mut out, args.json),
        What::Hooks => hooks(&world, &store, args.run.as_deref(), &mut out, args.json),
        What::Steps => steps(&world, &need_run()?, &mut out, args.json),
        What::Events => events(&world, &need_run()?, &mut out, args.json),
        What::Streams => streams(store.log(), &need_run()?, &mut out, args.json),
    }
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
    let headers = vec![
        "RUN",
        "STATUS",
        "WORKFLOW",
        "DEPLOYMENT",
        "CREATED",
        "STARTED",
        "COMPLETED",
    ];
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
            Ok(r) => list.entity(
                value(&r),
                vec![
                    r.run_id.clone(),
                    value(&r.status).as_str().unwrap_or("").to_string(),
                    r.workflow_name.clone(),
                    r.deployment_id.clone(),
                    date(Some(r.created_at_ms)),
                    date(r.started_at_ms),
                    date(r.completed_at_ms),
                ],
            )?,
            Err(e) => list.error(&id, e)?,
        }
    }
    list.finish(5)
}

fn steps(
    world: &StoreWorld,
    run: &str,
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let state = world.run_state(run).map_err(cli_error)?;
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
    for (_, s) in state.steps() {
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
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let all = match run {
        Some(run) => vec![(
            run.to_string(),
            Ok(world.run_state(run).map_err(cli_error)?),
        )],
        None => world_runs(world, store)?,
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
                for (_, h) in state.live_hooks() {
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
    out: &mut impl Write,
    json: bool,
) -> Result<bool, CliError> {
    let mut table = Table::new(&[
        "SEQ",
        "CREATED",
        "EVENT_TYPE",
        "CORRELATION_ID",
        "EVENT_ID",
        "EVENT_DATA",
    ]);
    let mut pagination = Pagination {
        limit: Some(runlog_world::PAGE_LIMIT_MAX),
        ..Pagination::default()
    };
    loop {
        let page = world
            .list_events(run, &pagination, ResolveData::All)
            .map_err(cli_error)?;
        for e in &page.data {
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
            (true, Some(c)) => pagination.cursor = Some(c),
            _ => break,
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
