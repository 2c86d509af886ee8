//! Peer comparison: runlog against the raw fdatasync ceilings (a file per writer appending,
//! `raw`, or into zero-filled preallocated space, `raw-pre`; a preallocated file per run
//! shared by its writers with group commit, `raw-group`), SQLite in three configurations
//! (`sqlite-mutex`, `sqlite-retry`, `sqlite-busy`: how concurrent writers share it) and the
//! file-per-event store, side by side in one process on one temp file system, printed as one
//! table with runlog's ratio to each peer and the targets of issue 5 (the SQLite targets
//! against the faster of `sqlite-mutex` and `sqlite-retry` in each row).
//!
//! ```text
//! cargo bench --bench peers -- [--quick] [--json] [--json-out FILE] [--only w1,w3,...]
//!                              [--peers runlog,sqlite-mutex]
//!                              [--dir PATH] [--secs S] [--rounds R] [--long-events N]
//!                              [--big-runs N]
//! ```
//! `--quick` (under a minute): 0.75 s cells, 1 round, a 100k-event long run, a 5k-run store
//! (the memory figure then covers its 5k runs).
//! Full: 2 s cells, 3 rounds, a 1M-event long run, a 100k-run store (a few minutes).
//! `--dir` defaults to the system temp dir; it must be a real disk, not tmpfs (the table
//! header names the file system). Workloads: w1 w2 w3 w4 w5 w6len w6store (includes w7 open
//! and memory). The corpus import (w7b) is the CLI crate's bench:
//! `cargo bench -p runlog-cli --bench import`.

mod compare;
mod drive;
mod report;
mod scaling;
#[path = "../support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::time::Duration;

use report::{Report, Row, Target};
use support::corpus::Payloads;
use support::sys::Machine;
use support::{BenchResult, PEER_NAMES, SQLITE_FAIR};

/// Settings every workload reads.
pub struct Ctx {
    /// Length of one measurement cell.
    pub cell: Duration,
    /// Rounds per cell (median taken).
    pub rounds: usize,
    /// Peers to compare, in column order.
    pub peers: Vec<&'static str>,
    /// Where temp directories go.
    pub root: PathBuf,
    /// The events.
    pub payloads: Payloads,
    /// Events in the long run of workload 6.
    pub large_run_events: usize,
    /// Runs in the large store of workloads 6 and 7.
    pub big_store_runs: usize,
    /// Open idle runs for the memory figure.
    pub memory_runs: usize,
}

struct Args {
    quick: bool,
    json: bool,
    json_out: Option<PathBuf>,
    only: Option<Vec<String>>,
    ctx: Ctx,
}

fn value_after(args: &[String], i: usize) -> BenchResult<&String> {
    args.get(i + 1)
        .ok_or_else(|| format!("{} needs a value", args[i]).into())
}

fn parse_args(args: &[String]) -> BenchResult<Args> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut parsed = Args {
        quick,
        json: args.iter().any(|a| a == "--json"),
        json_out: None,
        only: None,
        ctx: Ctx {
            cell: Duration::from_secs_f64(if quick { 0.75 } else { 2.0 }),
            rounds: if quick { 1 } else { 3 },
            peers: PEER_NAMES.to_vec(),
            root: std::env::temp_dir(),
            payloads: Payloads::load(),
            large_run_events: if quick { 100_000 } else { 1_000_000 },
            big_store_runs: if quick { 5_000 } else { 100_000 },
            memory_runs: 10_000,
        },
    };
    for (i, arg) in args.iter().enumerate() {
        match arg.as_str() {
            "--only" => {
                parsed.only = Some(
                    value_after(args, i)?
                        .split(',')
                        .map(str::to_string)
                        .collect(),
                )
            }
            "--json-out" => parsed.json_out = Some(PathBuf::from(value_after(args, i)?)),
            "--dir" => parsed.ctx.root = PathBuf::from(value_after(args, i)?),
            "--secs" => parsed.ctx.cell = Duration::from_secs_f64(value_after(args, i)?.parse()?),
            "--long-events" => parsed.ctx.large_run_events = value_after(args, i)?.parse()?,
            "--big-runs" => parsed.ctx.big_store_runs = value_after(args, i)?.parse()?,
            "--rounds" => parsed.ctx.rounds = value_after(args, i)?.parse::<usize>()?.max(1),
            "--peers" => {
                let wanted: Vec<String> = value_after(args, i)?
                    .split(',')
                    .map(str::to_string)
                    .collect();
                parsed.ctx.peers = PEER_NAMES
                    .iter()
                    .copied()
                    .filter(|p| wanted.iter().any(|w| w == p))
                    .collect();
            }
            _ => {}
        }
    }
    Ok(parsed)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("peers: {e}");
        std::process::exit(1);
    }
}

fn run(args: &[String]) -> BenchResult<()> {
    if let Some(i) = args.iter().position(|a| a == "--child-memory") {
        let runs = value_after(args, i + 1)?.parse()?;
        return scaling::memory_child(&PathBuf::from(value_after(args, i)?), runs);
    }
    let args = parse_args(args)?;
    let ctx = &args.ctx;
    let wanted = |w: &str| args.only.as_ref().is_none_or(|o| o.iter().any(|x| x == w));
    let mut report = Report {
        mode: if args.quick { "quick" } else { "full" }.to_string(),
        machine: Machine::describe(&ctx.root),
        payloads: format!(
            "{}, payload avg {:.0} B (corpus eventData avg {:.0} B)",
            ctx.payloads.source,
            ctx.payloads.payload_len_bytes_avg,
            ctx.payloads.event_data_len_bytes_avg
        ),
        rows: Vec::new(),
        targets: Vec::new(),
        skipped: Vec::new(),
    };
    eprintln!("peers: {} mode in {}", report.mode, report.machine.fs);
    type Workload = fn(&Ctx) -> BenchResult<Vec<Row>>;
    let workloads: [(&str, Workload); 7] = [
        ("w1", compare::w1_facts),
        ("w2", compare::w2_decisions),
        ("w3", compare::w3_many_runs),
        ("w4", compare::w4_hot_run),
        ("w5", compare::w5_reads),
        ("w6len", scaling::w6_run_length),
        ("w6store", scaling::w6_store_size_w7_open),
    ];
    for (name, workload) in workloads {
        if wanted(name) {
            eprintln!("{name}");
            report.rows.extend(workload(ctx)?);
        }
    }
    report.targets = targets(&report.rows);
    if let Some(path) = &args.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.to_markdown());
    }
    Ok(())
}

/// The targets' name for the better of the fair SQLite configurations in a row.
const SQLITE_BEST: &str = "sqlite";

/// The value of `metric` for `peer` in the first row whose workload starts with `prefix`; for
/// [`SQLITE_BEST`], the highest value of the [`SQLITE_FAIR`] peers (every metric the targets
/// compare with SQLite is a rate).
fn value(rows: &[Row], prefix: &str, metric: &str, peer: &str) -> Option<f64> {
    let row = rows
        .iter()
        .find(|r| r.workload.starts_with(prefix) && r.metric == metric)?;
    if peer == SQLITE_BEST {
        SQLITE_FAIR
            .iter()
            .filter_map(|p| row.values.get(*p).copied())
            .reduce(f64::max)
    } else {
        row.values.get(peer).copied()
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    a.zip(b).map(|(a, b)| a / b)
}

/// The issue's targets, from whatever rows were measured.
fn targets(rows: &[Row]) -> Vec<Target> {
    let rate = |w: &str| value(rows, w, "events/s", "runlog");
    let vs = |w: &str, peer: &str| ratio(rate(w), value(rows, w, "events/s", peer));
    let full_read = |peer: &str| value(rows, "w5 read 10k", "full reads/s", peer);
    let borrowed_read = |peer: &str| {
        value(
            rows,
            "w5 read 10k-event run, borrowed",
            "full reads/s",
            peer,
        )
    };
    let open_ms = |w: &str| value(rows, w, "open ms", "runlog");
    let checks = [
        ("1 facts", "≥ 0.8× raw", vs("w1", "raw"), 0.8, false),
        (
            "1 facts",
            "≥ 1.1× sqlite (faster of -mutex, -retry)",
            vs("w1", SQLITE_BEST),
            1.1,
            false,
        ),
        (
            "3 64 runs",
            "≥ 0.7× raw (64 files)",
            vs("w3", "raw"),
            0.7,
            false,
        ),
        (
            "3 64 runs",
            "≥ 10× sqlite (faster of -mutex, -retry)",
            vs("w3", SQLITE_BEST),
            10.0,
            false,
        ),
        (
            "4 hot run",
            "≥ 5× workload 1",
            ratio(rate("w4"), rate("w1")),
            5.0,
            false,
        ),
        (
            "5 full read",
            "≥ 5× sqlite (faster of -mutex, -retry)",
            ratio(full_read("runlog"), full_read(SQLITE_BEST)),
            5.0,
            false,
        ),
        (
            "5 full read, borrowed",
            "≥ 5× sqlite (both borrowed)",
            ratio(borrowed_read("runlog"), borrowed_read(SQLITE_BEST)),
            5.0,
            false,
        ),
        (
            "6 run length",
            "long/short ≥ 0.9",
            ratio(rate("w6 run length: long"), rate("w6 run length: short")),
            0.9,
            false,
        ),
        (
            "6 store size",
            "big/small ≥ 0.9",
            ratio(rate("w6 store size: big"), rate("w6 store size: small")),
            0.9,
            false,
        ),
        (
            "7 open",
            "big/small open time ≤ 2 (lazy)",
            ratio(open_ms("w7 open: big"), open_ms("w7 open: small")),
            2.0,
            true,
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(w, t, m, thr, at_most)| m.map(|m| Target::check(w, t, m, thr, at_most)))
        .collect()
}
