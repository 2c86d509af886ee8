//! `runlog storm`: the fence gate. Runs the simulated workflow engine with many concurrent
//! replayers per run and reports corrupted/completed runs, fenced rejections (true and false
//! positives), restarts and requeues. Exit 0 when every storm showed what its mode promises
//! (fenced: clean; unfenced storm scenarios: corruption), 1 when not, 2 on a setup error.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runlog_cli::storm::{
    Scenario, StormConfig, StormReport, Transport, WorkerSpec, render_table, run_storm, run_worker,
};

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

/// Runs the storm; returns the process exit code.
pub fn run(args: StormArgs) -> ExitCode {
    if let Some(spec) = &args.worker {
        return worker(spec);
    }
    match storms(&args) {
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

fn storms(args: &StormArgs) -> Result<bool, String> {
    let (root, temporary) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => (temp_root(), true),
    };
    let reports = run_all(args, &root);
    if temporary && !args.keep {
        std::fs::remove_dir_all(&root).map_err(|e| format!("removing {}: {e}", root.display()))?;
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

fn run_all(args: &StormArgs, root: &Path) -> Result<Vec<StormReport>, String> {
    let modes = match args.matrix {
        true => vec![(false, true), (false, false), (true, true), (true, false)],
        false => vec![(args.processes, !args.unfenced)],
    };
    let mut reports = Vec::new();
    for &scenario in &args.scenario {
        for &(processes, fenced) in &modes {
            let transport = transport(processes)?;
            let fence = if fenced { "fenced" } else { "unfenced" };
            let dir = root.join(format!("{scenario}-{}-{fence}", transport.name()));
            if dir.exists() {
                return Err(format!("{} exists; pick another --dir", dir.display()));
            }
            let config = StormConfig {
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
