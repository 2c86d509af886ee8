//! Workloads 6 and 7 and the memory figure, runlog only (the targets compare runlog with
//! itself): append cost vs run length and vs store size, opening a large store, RSS per open
//! idle run (in a child process, so earlier workloads' allocations do not blur it).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use runlog::{Config, RunId, Store};
use serde::{Deserialize, Serialize};

use crate::Ctx;
use crate::drive::{Cell, Lane, interleave};
use crate::report::{Better, Row};
use crate::support::runlog_peer::{RunlogPeer, new_event};
use crate::support::stats::median;
use crate::support::{BenchResult, Peer, Session, sys};

/// Events in the short run of the run-length comparison.
const SHORT_RUN_EVENTS: usize = 1_000;
/// Runs in the small store of the store-size comparison.
const SMALL_STORE_RUNS: usize = 10;
/// Threads creating fixture runs (create_run is fsync-bound; overlap the waits).
const CREATE_THREADS: usize = 4;
/// Store opens timed per store.
const OPEN_REPS: usize = 7;
/// Bulk loads go in slices of this many events.
const LOAD_SLICE_EVENTS: usize = 10_000;

/// Fixture run name `i`.
pub fn run_name(i: usize) -> String {
    format!("r{i:07}")
}

/// Measures single-writer append rates on each `(label, peer, run)` case, interleaved in
/// bursts (see [`interleave`]); returns (events/s, p50 us) per case.
fn alternate_appends(
    ctx: &Ctx,
    cases: &[(&str, &Arc<dyn Peer>, String)],
) -> BenchResult<Vec<(f64, f64)>> {
    let mut lanes = Vec::new();
    for (label, peer, _) in cases {
        lanes.push(Lane {
            name: (*label).to_string(),
            session: peer.session()?,
            state: 0,
            cell: Cell::default(),
        });
    }
    let total = ctx.cell * u32::try_from(ctx.rounds.max(2) * cases.len())?;
    eprintln!(
        "  {} cases interleaved for {:.1} s",
        cases.len(),
        total.as_secs_f64()
    );
    let op = |t: usize, n: u64, s: &mut dyn Session, _: &mut u64| {
        s.append_fact(&cases[t].2, ctx.payloads.get(n as usize))?;
        Ok(1)
    };
    interleave(&mut lanes, total, &op)?;
    Ok(lanes
        .iter_mut()
        .map(|l| {
            (
                l.cell.events_per_sec(),
                l.cell.latencies.quantile_us(0.5).unwrap_or(f64::NAN),
            )
        })
        .collect())
}

/// Workload 6a: append rate to a 1k-event run vs a long run in the same store.
pub fn w6_run_length(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let dir = tempfile::tempdir_in(&ctx.root)?;
    let peer: Arc<dyn Peer> = Arc::new(RunlogPeer::open(dir.path())?);
    let slice = ctx.payloads.take(LOAD_SLICE_EVENTS);
    peer.create_run("short")?;
    peer.bulk_load("short", &slice[..SHORT_RUN_EVENTS])?;
    peer.create_run("long")?;
    eprintln!("  w6 run length: loading {} events", ctx.large_run_events);
    let started = Instant::now();
    for start in (0..ctx.large_run_events).step_by(LOAD_SLICE_EVENTS) {
        let n = LOAD_SLICE_EVENTS.min(ctx.large_run_events - start);
        peer.bulk_load("long", &slice[..n])?;
    }
    let load_rate = ctx.large_run_events as f64 / started.elapsed().as_secs_f64();
    let long_label = format!("w6 run length: long ({} events)", ctx.large_run_events);
    let cases = [
        (
            "w6 run length: short (1k events)",
            &peer,
            "short".to_string(),
        ),
        (long_label.as_str(), &peer, "long".to_string()),
    ];
    let measured = alternate_appends(ctx, &cases)?;
    let mut rows = case_rows(&cases, &measured);
    rows.push(
        Row::new(
            "w6 bulk load (1-event appends, 32 threads)",
            "events/s",
            Better::Higher,
            &[("runlog", load_rate)],
        )
        .note("fixture build; informative"),
    );
    Ok(rows)
}

fn case_rows(cases: &[(&str, &Arc<dyn Peer>, String)], measured: &[(f64, f64)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for ((label, _, _), (rate, p50)) in cases.iter().zip(measured) {
        rows.push(
            Row::new(label, "events/s", Better::Higher, &[("runlog", *rate)])
                .note("1 writer, facts"),
        );
        rows.push(Row::new(
            label,
            "p50 us/append",
            Better::Lower,
            &[("runlog", *p50)],
        ));
    }
    rows
}

/// Creates runs `0..n` in `peer` with a few threads; returns runs created per second.
fn create_runs(peer: &Arc<dyn Peer>, n: usize) -> BenchResult<f64> {
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..CREATE_THREADS)
            .map(|_| {
                scope.spawn(|| -> BenchResult<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        peer.create_run(&run_name(i))?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| "create thread panicked")?)
    })?;
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// Workloads 6b and 7: append rate in a 10-run vs a large store; opening each store; then the
/// memory figure on the large store.
pub fn w6_store_size_w7_open(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let small_dir = tempfile::tempdir_in(&ctx.root)?;
    let big_dir = tempfile::tempdir_in(&ctx.root)?;
    let small: Arc<dyn Peer> = Arc::new(RunlogPeer::open(small_dir.path())?);
    let big: Arc<dyn Peer> = Arc::new(RunlogPeer::open(big_dir.path())?);
    create_runs(&small, SMALL_STORE_RUNS)?;
    eprintln!("  w6 store size: creating {} runs", ctx.big_store_runs);
    let create_rate = create_runs(&big, ctx.big_store_runs)?;
    let big_label = format!("w6 store size: big ({} runs)", ctx.big_store_runs);
    let cases = [
        (
            "w6 store size: small (10 runs)",
            &small,
            run_name(SMALL_STORE_RUNS / 2),
        ),
        (big_label.as_str(), &big, run_name(ctx.big_store_runs / 2)),
    ];
    let measured = alternate_appends(ctx, &cases)?;
    let mut rows = case_rows(&cases, &measured);
    rows.push(
        Row::new(
            "w6 create_run, 4 threads",
            "runs/s",
            Better::Higher,
            &[("runlog", create_rate)],
        )
        .note("fixture build; informative"),
    );
    drop(cases);
    drop((small, big));
    rows.extend(open_rows(
        ctx,
        &small_dir.path().join("store"),
        &big_dir.path().join("store"),
    )?);
    rows.extend(memory_rows(ctx, &big_dir.path().join("store"))?);
    Ok(rows)
}

/// Times `Store::open` (and open + first append to one run) on both stores, alternating.
fn open_rows(ctx: &Ctx, small: &Path, big: &Path) -> BenchResult<Vec<Row>> {
    let stores = [
        ("w7 open: small (10 runs)", small, SMALL_STORE_RUNS),
        ("w7 open: big (N runs)", big, ctx.big_store_runs),
    ];
    let mut rows = Vec::new();
    for (label, path, runs) in stores {
        let (mut open_ms, mut first_ms) = (Vec::new(), Vec::new());
        for rep in 0..OPEN_REPS {
            let started = Instant::now();
            let store = Store::open(path, Config::default())?;
            open_ms.push(started.elapsed().as_secs_f64() * 1e3);
            let run = RunId::new(run_name((runs / 2 + rep) % runs))?;
            store.append_facts(&run, vec![new_event(ctx.payloads.get(rep))])?;
            first_ms.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let label = label.replace("(N ", &format!("({runs} "));
        let open = median(&open_ms).unwrap_or(f64::NAN);
        let first = median(&first_ms).unwrap_or(f64::NAN);
        rows.push(
            Row::new(&label, "open ms", Better::Lower, &[("runlog", open)])
                .note("median of 7, warm page cache"),
        );
        rows.push(Row::new(
            &label,
            "open + 1st append ms",
            Better::Lower,
            &[("runlog", first)],
        ));
    }
    Ok(rows)
}

/// What the memory child reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Runs asked for.
    pub runs_wanted: usize,
    /// Runs opened and left idle (fewer than wanted when opening one failed).
    pub runs: usize,
    /// The error that stopped opening more runs, if any (e.g. too many open files).
    pub stopped_by: Option<String>,
    /// The soft open-file limit in force.
    pub nofile_limit: u64,
    /// VmRSS after `Store::open`, KiB.
    pub rss_open_kib: u64,
    /// VmRSS after `last_seq` on every run (opened, never written), KiB.
    pub rss_read_kib: u64,
    /// VmRSS after every run also got one append and went idle, KiB.
    pub rss_written_kib: u64,
    /// Open file descriptors after `Store::open`.
    pub fds_open: usize,
    /// Open file descriptors with the runs open.
    pub fds_runs: usize,
}

/// Descriptors kept free in the memory child for the appends' directory syncs.
const FD_HEADROOM: u64 = 600;

/// Threads appending in the memory child (different runs: their fsyncs overlap).
const MEMORY_WRITERS: usize = 16;

/// Raises the soft open-file limit to the hard limit (runlog keeps descriptors per open
/// run); returns the soft limit now in force.
fn raise_nofile() -> BenchResult<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
    }
    Ok(lim.rlim_cur)
}

fn fd_count() -> BenchResult<usize> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count())
}

/// Appends one event to each of runs `0..runs` from [`MEMORY_WRITERS`] threads.
fn append_one_each(store: &Store, runs: usize) -> BenchResult<()> {
    let payloads = crate::support::corpus::Payloads::load();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..MEMORY_WRITERS)
            .map(|_| {
                scope.spawn(|| -> BenchResult<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= runs {
                            return Ok(());
                        }
                        store.append_facts(
                            &RunId::new(run_name(i))?,
                            vec![new_event(payloads.get(i))],
                        )?;
                    }
                })
            })
            .collect();
        writers
            .into_iter()
            .try_for_each(|w| w.join().map_err(|_| "memory writer panicked")?)
    })
}

/// Child-process entry: open the store at `path` with `open_runs_max = runs`, touch runs
/// `0..runs` (`last_seq`; stops early if a run cannot be opened, e.g. out of descriptors),
/// then append one event to each opened run; report RSS and descriptors as one JSON line.
pub fn memory_child(path: &Path, runs_wanted: usize) -> BenchResult<()> {
    let nofile_limit = raise_nofile()?;
    // Keep every touched run open (the default cache closes idle runs past 4,096).
    let config = Config {
        open_runs_max: runs_wanted.max(1),
        ..Config::default()
    };
    let store = Store::open(path, config)?;
    let rss_open_kib = sys::rss_kib().ok_or("no VmRSS")?;
    let fds_open = fd_count()?;
    let (mut runs, mut stopped_by) = (0, None);
    while runs < runs_wanted {
        if runs % 256 == 0 && fd_count()? as u64 + FD_HEADROOM > nofile_limit {
            stopped_by = Some(format!("descriptor headroom: {} fds open", fd_count()?));
            break;
        }
        if let Err(e) = store.last_seq(&RunId::new(run_name(runs))?) {
            stopped_by = Some(e.to_string());
            break;
        }
        runs += 1;
    }
    let rss_read_kib = sys::rss_kib().ok_or("no VmRSS")?;
    append_one_each(&store, runs)?;
    std::thread::sleep(Duration::from_millis(100));
    let report = MemoryReport {
        runs_wanted,
        runs,
        stopped_by,
        nofile_limit,
        rss_open_kib,
        rss_read_kib,
        rss_written_kib: sys::rss_kib().ok_or("no VmRSS")?,
        fds_open,
        fds_runs: fd_count()?,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// Runs the memory child on the large store (which holds at least `ctx.memory_runs` runs).
fn memory_rows(ctx: &Ctx, big: &Path) -> BenchResult<Vec<Row>> {
    let runs = ctx.memory_runs.min(ctx.big_store_runs);
    eprintln!("  memory: child process holding {runs} open idle runs");
    let out = Command::new(std::env::current_exe()?)
        .arg("--child-memory")
        .arg(big)
        .arg(runs.to_string())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "memory child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let line = String::from_utf8(out.stdout)?;
    let report: MemoryReport =
        serde_json::from_str(line.lines().last().ok_or("memory child printed nothing")?)?;
    let per_run =
        |kib: u64| kib.saturating_sub(report.rss_open_kib) as f64 * 1024.0 / report.runs as f64;
    let fds_per_run = report.fds_runs.saturating_sub(report.fds_open) as f64 / report.runs as f64;
    let label = format!("memory: {} open idle runs", report.runs);
    let stopped = report.stopped_by.as_ref().map_or(String::new(), |e| {
        format!(
            "; STOPPED at {} of {} runs (RLIMIT_NOFILE {}): {e}",
            report.runs, report.runs_wanted, report.nofile_limit
        )
    });
    Ok(vec![
        Row::new(
            &label,
            "RSS bytes/run, read only",
            Better::Lower,
            &[("runlog", per_run(report.rss_read_kib))],
        )
        .note(format!(
            "VmRSS {} KiB after Store::open, {} KiB after last_seq on each run",
            report.rss_open_kib, report.rss_read_kib
        )),
        Row::new(
            &label,
            "RSS bytes/run, written",
            Better::Lower,
            &[("runlog", per_run(report.rss_written_kib))],
        )
        .note(format!(
            "{} KiB after one append to each",
            report.rss_written_kib
        )),
        Row::new(&label, "fds/run", Better::Lower, &[("runlog", fds_per_run)])
            .note(format!("held while the Store lives{stopped}")),
    ])
}
