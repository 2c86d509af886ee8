//! `runlog storm`: the fence gate. Runs the simulated workflow engine with many concurrent
//! replayers per run and reports corrupted/completed runs, fenced rejections (true and false
//! positives), restarts and requeues. Exit 0 when every storm showed what its mode promises
//! (fenced: clean; unfenced storm scenarios: corruption), 1 when not, 2 on a setup error.
//!
//! With `--store postgres://…` every storm runs on PostgreSQL, in a schema of its own
//! (`<base>_<step|hook|ctl>_<thr|proc>_<fenced|unfenced>`, base the URL's `?schema=` or a
//! fresh `storm_<16 random chars>` dropped afterwards unless `--keep`); worker processes
//! connect to it too.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runlog_cli::storm::{
    Scenario, StormConfig, StormReport, Transport, WorkerSpec, render_table, run_storm, run_worker,
};

#[cfg(feature = "postgres")]
use crate::storm_pg::PgStorms;
use crate::support::postgres_url;

/// A build without the `postgres` feature runs no storm on PostgreSQL: [`PgStorms::new`]
/// refuses the URL, so there is no value of this type.
#[cfg(not(feature = "postgres"))]
enum PgStorms {}

#[cfg(not(feature = "postgres"))]
impl PgStorms {
    fn new(_url: &str) -> Result<PgStorms, String> {
        Err(runlog_cli::target::no_postgres().to_string())
    }

    fn store(&self, _name: &str) -> Result<String, String> {
        match *self {}
    }

    fn drop_temporary(&self, _names: &[String]) -> Result<(), String> {
        match *self {}
    }
}

/// What `runlog storm --help` adds about PostgreSQL.
pub const STORM_HELP: &str = "\
With --store postgres://…?schema=S, each storm runs on PostgreSQL in a schema of its own,
S_<step|hook|ctl>_<thr|proc>_<fenced|unfenced> (kept; it must hold no runs yet); without
?schema=, the base is a fresh storm_<random> and the schemas are dropped afterwards unless
--keep. Worker processes (--processes) connect to the same schema.";

/// Arguments of `runlog storm`.
#[derive(Debug, clap::Args)]
pub struct StormArgs {
    /// Scenarios to run, comma-separated: step-storm, hook-storm, control.
    #[arg(long, value_delimiter = ',', default_value = "step-storm,hook-storm")]
    scenario: Vec<Scenario>,
    /// Runs per storm.
    #[arg(long, default_value_t = 20)]
    runs: u32,
    /// Concurrent replaying invocations per run (control always uses 1).
    #[arg(long, default_value_t = 8)]
    replayers: u32,
    /// Replayers are separate OS processes (one per replayer) instead of threads.
    #[arg(long)]
    processes: bool,
    /// Append decisions as plain facts, without the fence: the baseline that must corrupt.
    #[arg(long)]
    unfenced: bool,
    /// Run every scenario over threads and processes, fenced and unfenced.
    #[arg(long, conflicts_with_all = ["processes", "unfenced"])]
    matrix: bool,
    /// Runs driven at the same time.
    #[arg(long, default_value_t = 2)]
    lanes: u32,
    /// Seed of every random choice (workflow shapes, delays, jitter).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replayers take the best-effort runner claim before each invocation.
    #[arg(long)]
    claim: bool,
    /// Seconds after which a still incomplete run is abandoned.
    #[arg(long, default_value_t = 30)]
    run_deadline_secs: u64,
    /// Directory for the storms' stores (default: a new temporary directory, removed after).
    /// With a PostgreSQL --store the storms run in schemas of their own (see below) and this
    /// holds only the runner claims.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the stores after the run.
    #[arg(long)]
    keep: bool,
    /// Print the reports as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Internal: run as storm worker process (JSON worker spec).
    #[arg(long, hide = true)]
    worker: Option<String>,
}

/// Runs the storm on the file store (under `--dir`), or on PostgreSQL when `store` is a
/// `postgres://` URL; returns the process exit code.
pub fn run(store: &Path, args: StormArgs) -> ExitCode {
    if let Some(spec) = &args.worker {
        return worker(spec);
    }
    let pg = postgres_url(store).map(PgStorms::new).transpose();
    match pg.and_then(|pg| storms(&args, pg.as_ref())) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("runlog storm: {e}");
            ExitCode::from(2)
        }
    }
}

fn worker(spec: &str) -> ExitCode {
    let stats = serde_json::from_str::<WorkerSpec>(spec)
        .map_err(|e| format!("bad worker spec: {e}"))
        .and_then(|spec| run_worker(&spec).map_err(|e| e.to_string()))
        .and_then(|stats| serde_json::to_string(&stats).map_err(|e| e.to_string()));
    match stats {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("runlog storm worker: {e}");
            ExitCode::from(2)
        }
    }
}

fn storms(args: &StormArgs, pg: Option<&PgStorms>) -> Result<bool, String> {
    let (root, temporary) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => (temp_root(), true),
    };
    let reports = run_all(args, &root, pg);
    if temporary && !args.keep && root.exists() {
        std::fs::remove_dir_all(&root).map_err(|e| format!("removing {}: {e}", root.display()))?;
    }
    if let Some(pg) = pg.filter(|_| !args.keep) {
        pg.drop_temporary(&storm_names(args))?;
    }
    let reports = reports?;
    print_reports(args, &reports);
    Ok(reports.iter().all(StormReport::ok))
}

fn temp_root() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!("runlog-storm-{}-{nanos}", std::process::id()))
}

/// `(processes, fenced)` of every storm per scenario.
fn modes(args: &StormArgs) -> Vec<(bool, bool)> {
    match args.matrix {
        true => vec![(false, true), (false, false), (true, true), (true, false)],
        false => vec![(args.processes, !args.unfenced)],
    }
}

/// `<scenario>-<transport>-<fence>`: one storm's directory (and schema suffix).
pub(crate) fn storm_name(scenario: Scenario, processes: bool, fenced: bool) -> String {
    let transport = if processes { "processes" } else { "threads" };
    let fence = if fenced { "fenced" } else { "unfenced" };
    format!("{scenario}-{transport}-{fence}")
}

fn storm_names(args: &StormArgs) -> Vec<String> {
    let modes = modes(args);
    args.scenario
        .iter()
        .flat_map(|&s| modes.iter().map(move |&(p, f)| storm_name(s, p, f)))
        .collect()
}

fn run_all(
    args: &StormArgs,
    root: &Path,
    pg: Option<&PgStorms>,
) -> Result<Vec<StormReport>, String> {
    let mut reports = Vec::new();
    for &scenario in &args.scenario {
        for (processes, fenced) in modes(args) {
            let transport = transport(processes)?;
            let name = storm_name(scenario, processes, fenced);
            let dir = root.join(&name);
            if dir.exists() {
                return Err(format!("{} exists; pick another --dir", dir.display()));
            }
            let store = pg.map(|pg| pg.store(&name)).transpose()?;
            if store.is_some() {
                // The file store is not used: the directory holds only the runner claims.
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            }
            let config = StormConfig {
                store,
                fenced,
                runs: args.runs,
                replayers: args.replayers,
                lanes: args.lanes,
                seed: args.seed,
                claim: args.claim,
                run_deadline: Duration::from_secs(args.run_deadline_secs),
                ..StormConfig::new(dir, scenario)
            };
            let report = run_storm(&config, &transport).map_err(|e| e.to_string())?;
            if !args.json {
                eprintln!("{}", one_line(&report));
            }
            reports.push(report);
        }
    }
    Ok(reports)
}

fn transport(processes: bool) -> Result<Transport, String> {
    if !processes {
        return Ok(Transport::Threads);
    }
    let exe = std::env::current_exe().map_err(|e| format!("locating this executable: {e}"))?;
    Ok(Transport::Processes(Arc::new(move |spec: &WorkerSpec| {
        let mut cmd = Command::new(&exe);
        let json = serde_json::to_string(spec).unwrap_or_default();
        cmd.arg("storm").arg("--worker").arg(json);
        cmd
    })))
}

fn one_line(r: &StormReport) -> String {
    format!(
        "{} {} {}: {} runs, {} completed, {} corrupted, {} rejections ({} true +, {} false +), {} requeues, {:.1} s",
        r.scenario,
        r.transport,
        if r.fenced { "fenced" } else { "unfenced" },
        r.runs,
        r.completed,
        r.corrupted,
        r.replay.rejections,
        r.replay.true_positives,
        r.replay.false_positives,
        r.replay.requeues,
        r.elapsed_ms as f64 / 1000.0
    )
}

fn print_reports(args: &StormArgs, reports: &[StormReport]) {
    if args.json {
        let ok = reports.iter().all(StormReport::ok);
        let doc = serde_json::json!({ "ok": ok, "reports": reports });
        println!("{doc}");
        return;
    }
    print!("{}", render_table(reports));
    for r in reports
        .iter()
        .filter(|r| !r.examples.is_empty() || r.replay.errors > 0)
    {
        println!(
            "\n{} {} {}:",
            r.scenario,
            r.transport,
            if r.fenced { "fenced" } else { "unfenced" }
        );
        for e in &r.examples {
            println!("  corrupted {e}");
        }
        if let Some(e) = &r.replay.first_error {
            println!("  {} error(s), first: {e}", r.replay.errors);
        }
    }
}
