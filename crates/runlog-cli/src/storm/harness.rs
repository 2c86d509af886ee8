//! Orchestration: creating the runs, driving them in lanes with threads or worker
//! processes, and judging every stored log at the end.

use std::fmt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::storm::actors::{FactWriter, RunCtx, replay, write_facts};
use crate::storm::report::StormReport;
use crate::storm::verdict::{Problem, ProblemKind, RunVerdict, check_run};
use crate::storm::workflow;
use crate::storm::{ReplayStats, StormConfig, StormError};
use crate::target::Access;
use runlog::RunId;
use runlog::replay::ReplayLog;
use runlog::{Config, RunLog};

/// Builds the command that starts worker process `spec.worker` (for example the current
/// executable with a hidden worker flag carrying `spec` as JSON). The worker must print the
/// JSON of [`run_worker`]'s [`ReplayStats`] on stdout and exit 0.
pub type Launcher = Arc<dyn Fn(&WorkerSpec) -> Command + Send + Sync>;

/// Where the replaying invocations of a run live.
#[derive(Clone)]
pub enum Transport {
    /// Threads of this process.
    Threads,
    /// One worker process per replayer; each drives every run in turn.
    Processes(Launcher),
}

impl Transport {
    /// `threads` or `processes`.
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Threads => "threads",
            Transport::Processes(_) => "processes",
        }
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a worker process needs: the storm and which replayer it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The storm (its runs already exist).
    pub config: StormConfig,
    /// This worker's replayer index, `0..replayers`.
    pub worker: u32,
}

/// Runs the storm `config` over `transport` and judges every run.
///
/// # Errors
/// [`StormError::Store`] when the store cannot be opened or the runs created;
/// [`StormError::Worker`] when a worker process fails. Replayer and fact-writer errors are
/// counted in the report instead.
pub fn run_storm(config: &StormConfig, transport: &Transport) -> Result<StormReport, StormError> {
    let store = open_storm_store(config)?;
    run_storm_on(&store, config, transport)
}

/// The store of the storm `config`: PostgreSQL at `config.store` (migrated), else the file
/// store at `config.dir` (created if missing).
///
/// # Errors
/// Those of [`crate::target::open`].
pub fn open_storm_store(config: &StormConfig) -> Result<Arc<dyn RunLog>, StormError> {
    let target = config.store.as_deref().map_or(&*config.dir, Path::new);
    Ok(crate::target::open(target, Config::default(), Access::Write)?.log)
}

/// [`run_storm`] on any backend: creates the runs in `store`, drives them, judges them.
/// Worker processes (the `Processes` transport) open the store of `config`
/// ([`open_storm_store`]), which must be `store`.
///
/// # Errors
/// As [`run_storm`].
pub fn run_storm_on<L: RunLog + Clone>(
    store: &L,
    config: &StormConfig,
    transport: &Transport,
) -> Result<StormReport, StormError> {
    let started = Instant::now();
    create_runs(store, config)?;
    let replay = match transport {
        Transport::Threads => in_lanes(config, |index| drive_run(store, config, index, true)),
        Transport::Processes(launch) => drive_processes(store, config, launch)?,
    };
    let verdicts = judge(store, config)?;
    let elapsed = started.elapsed();
    Ok(StormReport::new(
        config,
        transport.name(),
        replay,
        &verdicts,
        elapsed,
    ))
}

/// The body of worker process `spec.worker`: replays every run of the storm as that one
/// replayer and returns its counters.
///
/// # Errors
/// [`StormError::Store`] when the store cannot be opened.
pub fn run_worker(spec: &WorkerSpec) -> Result<ReplayStats, StormError> {
    let store = open_storm_store(&spec.config)?;
    let config = &spec.config;
    Ok(in_lanes(config, |index| {
        let run = run_id(index);
        match run {
            Ok(run) => replay(&ctx(&store, config, run, index), spec.worker),
            Err(e) => error_stats(e),
        }
    }))
}

fn run_id(index: u32) -> Result<RunId, StormError> {
    Ok(RunId::new(format!("storm-{index:05}"))?)
}

fn ctx<'a, L>(store: &'a L, config: &'a StormConfig, run: RunId, index: u32) -> RunCtx<'a, L> {
    let deadline = Instant::now() + config.run_deadline;
    RunCtx {
        store,
        config,
        run,
        index,
        deadline,
    }
}

fn error_stats(e: impl fmt::Display) -> ReplayStats {
    let mut stats = ReplayStats::default();
    stats.error(e);
    stats
}

fn create_runs(store: &impl RunLog, config: &StormConfig) -> Result<(), StormError> {
    for index in 0..config.runs {
        let run = run_id(index)?;
        store.create_run(&run, &[])?;
        let params = config.scenario.params(config.seed, index);
        store.append_decisions(&run, 0, vec![workflow::run_created(&params)])?;
    }
    Ok(())
}

/// Runs `work(index)` for every run, `config.lanes` runs at a time; sums the counters.
fn in_lanes<F>(config: &StormConfig, work: F) -> ReplayStats
where
    F: Fn(u32) -> ReplayStats + Sync,
{
    let lanes = config.lanes.clamp(1, config.runs.max(1));
    let work = &work;
    thread::scope(|s| {
        let handles: Vec<_> = (0..lanes)
            .map(|lane| {
                s.spawn(move || {
                    let mut stats = ReplayStats::default();
                    for index in (lane..config.runs).step_by(lanes as usize) {
                        stats.merge(work(index));
                    }
                    stats
                })
            })
            .collect();
        join_all(handles)
    })
}

fn join_all(handles: Vec<thread::ScopedJoinHandle<'_, ReplayStats>>) -> ReplayStats {
    let mut total = ReplayStats::default();
    for h in handles {
        match h.join() {
            Ok(stats) => total.merge(stats),
            Err(_) => total.error("a storm thread panicked"),
        }
    }
    total
}

/// Drives run `index` with its fact writers and, if `with_replayers`, its replayer threads.
fn drive_run<L: RunLog + Clone>(
    store: &L,
    config: &StormConfig,
    index: u32,
    with_replayers: bool,
) -> ReplayStats {
    let run = match run_id(index) {
        Ok(run) => run,
        Err(e) => return error_stats(e),
    };
    let ctx = ctx(store, config, run, index);
    let ctx = &ctx;
    let scenario = config.scenario;
    let replayers = if with_replayers {
        scenario.replayers(config.replayers)
    } else {
        0
    };
    let mut writers = vec![(FactWriter::Timer, 1000)];
    writers.extend((0..scenario.executors()).map(|e| (FactWriter::Executor, 1100 + u64::from(e))));
    writers.extend(
        (0..scenario.hook_senders()).map(|h| (FactWriter::HookSender, 1200 + u64::from(h))),
    );
    thread::scope(|s| {
        let mut handles: Vec<_> = (0..replayers)
            .map(|by| s.spawn(move || replay(ctx, by)))
            .collect();
        handles.extend(
            writers
                .into_iter()
                .map(|(w, actor)| s.spawn(move || write_facts(ctx, w, actor))),
        );
        join_all(handles)
    })
}

/// Starts one worker process per replayer, drives the fact writers here, and sums the
/// workers' counters.
fn drive_processes<L: RunLog + Clone>(
    store: &L,
    config: &StormConfig,
    launch: &Launcher,
) -> Result<ReplayStats, StormError> {
    let children = spawn_workers(config, launch)?;
    let mut stats = in_lanes(config, |index| drive_run(store, config, index, false));
    for (worker, child) in children {
        let out = child
            .wait_with_output()
            .map_err(|e| worker_error(worker, format!("cannot collect: {e}")))?;
        if !out.status.success() {
            return Err(worker_error(worker, format!("exited with {}", out.status)));
        }
        let worker_stats: ReplayStats = serde_json::from_slice(&out.stdout)
            .map_err(|e| worker_error(worker, format!("unreadable report: {e}")))?;
        stats.merge(worker_stats);
    }
    Ok(stats)
}

fn spawn_workers(config: &StormConfig, launch: &Launcher) -> Result<Vec<(u32, Child)>, StormError> {
    let mut children = Vec::new();
    for worker in 0..config.scenario.replayers(config.replayers) {
        let spec = WorkerSpec {
            config: config.clone(),
            worker,
        };
        let spawned = launch(&spec)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => children.push((worker, child)),
            Err(e) => {
                for (_, mut child) in children {
                    // Best effort: the storm fails with the spawn error either way.
                    let _ = child.kill().and_then(|()| child.wait());
                }
                return Err(worker_error(worker, format!("cannot start: {e}")));
            }
        }
    }
    Ok(children)
}

fn worker_error(worker: u32, detail: String) -> StormError {
    StormError::Worker { worker, detail }
}

/// Reads every run back and checks it.
fn judge(store: &impl RunLog, config: &StormConfig) -> Result<Vec<RunVerdict>, StormError> {
    let mut verdicts = Vec::new();
    for index in 0..config.runs {
        let mut log = ReplayLog::new(run_id(index)?);
        let verdict = match log.catch_up(store, 4096) {
            Ok(_) => check_run(log.events()),
            Err(e) => RunVerdict {
                completed: false,
                problems: vec![Problem {
                    kind: ProblemKind::Density,
                    seq: log.last_seq() + 1,
                    detail: format!("unreadable: {e}"),
                }],
            },
        };
        verdicts.push(verdict);
    }
    Ok(verdicts)
}
