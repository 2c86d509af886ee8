//! Workloads 1–5: every peer, side by side, in rounds (peer order rotates within a round),
//! each cell on a fresh peer in a fresh temp directory.

use std::sync::Arc;

use crate::Ctx;
use crate::drive::{Cell, Lane, Op, fresh_cell, interleave, run_threads};
use crate::report::{Better, Row};
use crate::support::stats::{Latencies, median};
use crate::support::{BenchResult, Ev, GroupStats, Peer, open_peer};

/// Events in the read workload's run.
const READ_RUN_EVENTS: usize = 10_000;
/// Events per "read after N" delta.
const DELTA_EVENTS: usize = 10;
/// Writer threads of workload 3 (one run each) and workload 4 (one hot run).
const MANY_RUNS: usize = 64;
const HOT_WRITERS: usize = 16;
/// How the SQLite columns of the concurrent workloads share the database.
const SQLITE_NOTE: &str = "sqlite-mutex: one connection shared behind a mutex; sqlite-retry: \
     a connection per writer, retry sleeps of 50 µs doubling to 2 ms; sqlite-busy: a \
     connection per writer, SQLite's busy handler (1–100 ms sleeps, 10 s timeout)";

/// Per-peer aggregate over rounds.
struct Agg {
    rates: Vec<f64>,
    latencies: Latencies,
    events: u64,
    /// Sync syscalls summed over rounds; `None` once any round could not count them.
    syncs: Option<u64>,
    /// The peer's group-commit counters summed over rounds.
    groups: Option<GroupStats>,
    /// Each round's CPU time per event, µs.
    cpu_us_per_event: Vec<f64>,
}

impl Agg {
    fn new() -> Agg {
        Agg {
            rates: Vec::new(),
            latencies: Latencies::default(),
            events: 0,
            syncs: Some(0),
            groups: None,
            cpu_us_per_event: Vec::new(),
        }
    }

    fn add(&mut self, cell: Cell) {
        self.rates.push(cell.events_per_sec());
        if let Some(cpu) = cell.cpu_secs.filter(|_| cell.events > 0) {
            self.cpu_us_per_event.push(cpu * 1e6 / cell.events as f64);
        }
        self.events += cell.events;
        self.syncs = self.syncs.zip(cell.syncs).map(|(a, b)| a + b);
        self.latencies.extend(cell.latencies);
        if let Some(g) = cell.groups {
            self.groups.get_or_insert_with(GroupStats::default).add(&g);
        }
    }
}

/// One write workload on every peer: rows for events/s, p50/p99 per append, events per sync.
fn write_rows(
    ctx: &Ctx,
    label: &str,
    threads: usize,
    runs: &[String],
    op: &Op<'_>,
) -> BenchResult<Vec<Row>> {
    let mut aggs: Vec<(&str, Agg)> = ctx.peers.iter().map(|p| (*p, Agg::new())).collect();
    for round in 0..ctx.rounds {
        for k in 0..aggs.len() {
            let i = (k + round) % aggs.len();
            let name = aggs[i].0;
            eprintln!("  {label}: {name} (round {})", round + 1);
            let setup = |peer: &Arc<dyn Peer>| runs.iter().try_for_each(|r| peer.create_run(r));
            let cell = fresh_cell(&ctx.root, name, threads, ctx.cell, &setup, &|_| 0, op)?;
            aggs[i].1.add(cell);
        }
    }
    Ok(agg_rows(label, "append", "median of rounds", &mut aggs))
}

/// One single-writer workload on every peer at once, interleaved in bursts (see
/// [`interleave`]) for `cell × rounds × peers` seconds in total.
fn interleaved_rows(
    ctx: &Ctx,
    label: &str,
    op_name: &str,
    run: &str,
    op: &Op<'_>,
) -> BenchResult<Vec<Row>> {
    let (mut dirs, mut peers, mut lanes) = (Vec::new(), Vec::new(), Vec::new());
    for name in &ctx.peers {
        let dir = tempfile::tempdir_in(&ctx.root)?;
        let peer = open_peer(name, dir.path())?;
        peer.create_run(run)?;
        lanes.push(Lane {
            name: (*name).to_string(),
            session: peer.session()?,
            state: 0,
            cell: Cell::default(),
        });
        dirs.push(dir);
        peers.push(peer);
    }
    let before: Vec<Option<GroupStats>> = peers.iter().map(|p| p.commit_groups()).collect();
    let total = ctx.cell * u32::try_from(ctx.rounds * ctx.peers.len())?;
    eprintln!(
        "  {label}: {} peers interleaved for {:.1} s",
        lanes.len(),
        total.as_secs_f64()
    );
    interleave(&mut lanes, total, op)?;
    let mut aggs: Vec<(&str, Agg)> = Vec::new();
    for ((lane, peer), before) in lanes.into_iter().zip(&peers).zip(before) {
        let groups = peer.commit_groups().zip(before).map(|(a, b)| a.since(&b));
        let mut agg = Agg::new();
        agg.add(Cell {
            groups,
            ..lane.cell
        });
        let name = ctx
            .peers
            .iter()
            .copied()
            .find(|p| *p == lane.name)
            .unwrap_or("?");
        aggs.push((name, agg));
    }
    Ok(agg_rows(
        label,
        op_name,
        "interleaved 16-op bursts",
        &mut aggs,
    ))
}

/// `f` of every peer's aggregate, for the peers where it is defined.
fn per_peer<'a>(
    aggs: &mut [(&'a str, Agg)],
    f: impl Fn(&mut Agg) -> Option<f64>,
) -> Vec<(&'a str, f64)> {
    aggs.iter_mut()
        .filter_map(|(p, a)| f(a).map(|v| (*p, v)))
        .collect()
}

fn agg_rows(label: &str, op_name: &str, method: &str, aggs: &mut [(&str, Agg)]) -> Vec<Row> {
    let rates = per_peer(aggs, |a| median(&a.rates));
    let p50 = per_peer(aggs, |a| a.latencies.quantile_us(0.5));
    let p99 = per_peer(aggs, |a| a.latencies.quantile_us(0.99));
    let cpu = per_peer(aggs, |a| median(&a.cpu_us_per_event));
    let per_sync = per_peer(aggs, |a| {
        a.syncs
            .filter(|s| *s > 0)
            .map(|s| a.events as f64 / s as f64)
    });
    let per_group = per_peer(aggs, |a| {
        a.groups
            .as_ref()
            .filter(|g| g.groups > 0)
            .map(|g| g.requests as f64 / g.groups as f64)
    });
    let histogram = aggs
        .iter()
        .filter_map(|(p, a)| {
            a.groups
                .as_ref()
                .map(|g| format!("{p} groups by size: {}", g.histogram()))
        })
        .collect::<Vec<_>>()
        .join("; ");
    vec![
        Row::new(label, "events/s", Better::Higher, &rates).note(method),
        Row::new(label, &format!("p50 us/{op_name}"), Better::Lower, &p50),
        Row::new(label, &format!("p99 us/{op_name}"), Better::Lower, &p99),
        Row::new(label, "cpu us/event", Better::Lower, &cpu).note(
            "CPU time (user + system) per event, median of rounds: the whole process during a \
             threaded cell, the lane's thread in its bursts when interleaved; the kernel's own \
             threads (journal, I/O completion) not counted",
        ),
        Row::new(label, "events/sync", Better::Higher, &per_sync)
            .note("events per fsync+fdatasync+msync syscall (group commit factor)"),
        Row::new(
            label,
            &format!("{op_name}s/commit group"),
            Better::Higher,
            &per_group,
        )
        .note(histogram),
    ]
}

/// Workload 1: one writer, one run, one fact per append.
pub fn w1_facts(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let op = |_: usize, i: u64, s: &mut dyn crate::support::Session, _: &mut u64| {
        s.append_fact("w1", ctx.payloads.get(i as usize))?;
        Ok(1)
    };
    interleaved_rows(ctx, "w1 facts 1 writer", "append", "w1", &op)
}

/// Workload 2: one writer, one run, fenced decision batches of 3.
pub fn w2_decisions(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let batches: Vec<Vec<Ev>> = (0..64)
        .map(|b| {
            (0..3)
                .map(|k| ctx.payloads.get(b * 3 + k).clone())
                .collect()
        })
        .collect();
    let op = |_: usize, i: u64, s: &mut dyn crate::support::Session, last: &mut u64| {
        let batch = &batches[i as usize % batches.len()];
        *last = s.append_decisions("w2", *last, batch)?;
        Ok(batch.len() as u64)
    };
    interleaved_rows(ctx, "w2 decisions ×3", "batch", "w2", &op)
}

/// Workload 3: 64 runs, one writer thread each.
pub fn w3_many_runs(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let runs: Vec<String> = (0..MANY_RUNS).map(|t| format!("w3-{t:02}")).collect();
    let op = |t: usize, i: u64, s: &mut dyn crate::support::Session, _: &mut u64| {
        s.append_fact(&runs[t], ctx.payloads.get(t * 31 + i as usize))?;
        Ok(1)
    };
    let rows = write_rows(ctx, "w3 64 runs × 1 writer", MANY_RUNS, &runs, &op)?;
    Ok(rows
        .into_iter()
        .map(|r| {
            r.note(format!(
                "raw, raw-pre, raw-group: 64 files, one per run; {SQLITE_NOTE}"
            ))
        })
        .collect())
}

/// Workload 4: one hot run, 16 writer threads (group commit).
pub fn w4_hot_run(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let run = "hot".to_string();
    let op = |t: usize, i: u64, s: &mut dyn crate::support::Session, _: &mut u64| {
        s.append_fact(&run, ctx.payloads.get(t * 31 + i as usize))?;
        Ok(1)
    };
    let rows = write_rows(
        ctx,
        "w4 1 run × 16 writers",
        HOT_WRITERS,
        std::slice::from_ref(&run),
        &op,
    )?;
    Ok(rows
        .into_iter()
        .map(|r| {
            r.note(format!(
                "raw, raw-pre: 16 files, one per writer, one fdatasync per append (no shared \
                 log, no group commit); raw-group: one file, group commit; {SQLITE_NOTE}"
            ))
        })
        .collect())
}

/// Workload 5: read a whole 10k-event run; read "after N" deltas of 10 events.
pub fn w5_reads(ctx: &Ctx) -> BenchResult<Vec<Row>> {
    let events = ctx.payloads.take(READ_RUN_EVENTS);
    let (mut full, mut delta, mut delta_lat) = (vec![], vec![], vec![]);
    let mut borrowed = vec![];
    for name in &ctx.peers {
        eprintln!("  w5 reads: {name} (loading {READ_RUN_EVENTS} events)");
        let dir = tempfile::tempdir_in(&ctx.root)?;
        let peer = open_peer(name, dir.path())?;
        peer.create_run("read")?;
        peer.bulk_load("read", &events)?;
        let full_cell = run_threads(&peer, 1, ctx.cell, &|_| 0, &full_read_op)?;
        full.push((*name, full_cell.ops_per_sec()));
        if peer.session()?.read_all_borrowed("read")?.is_some() {
            let cell = run_threads(&peer, 1, ctx.cell, &|_| 0, &borrowed_read_op)?;
            borrowed.push((*name, cell.ops_per_sec()));
        }
        if peer.session()?.read_after("read", 0, 1)?.is_some() {
            let mut cell = run_threads(&peer, 1, ctx.cell, &|_| 0x9e37_79b9, &delta_op)?;
            delta.push((*name, cell.ops_per_sec()));
            for (q, v) in [
                (0.5, cell.latencies.quantile_us(0.5)),
                (0.99, cell.latencies.quantile_us(0.99)),
            ] {
                delta_lat.push((q, *name, v.unwrap_or(f64::NAN)));
            }
        }
    }
    let lat = |q: f64| -> Vec<(&str, f64)> {
        delta_lat
            .iter()
            .filter(|(x, _, _)| *x == q)
            .map(|(_, p, v)| (*p, *v))
            .collect()
    };
    Ok(vec![
        Row::new(
            "w5 read 10k-event run",
            "full reads/s",
            Better::Higher,
            &full,
        )
        .note(
            "owned events (runlog: Event; sqlite-*: Strings + Vec, the same read in all three); \
             raw-*: one file of frames checked and handed out as owned events (kind String, \
             payload view) in pages of 1024, the ceiling of an owned read",
        ),
        Row::new(
            "w5 read 10k-event run, borrowed",
            "full reads/s",
            Better::Higher,
            &borrowed,
        )
        .note(
            "no per-event allocation (runlog: read_each; sqlite-*: get_ref); raw-*: the frames \
             checked in place",
        ),
        Row::new(
            "w5 read after N, 10 events",
            "reads/s",
            Better::Higher,
            &delta,
        )
        .note("raw has no index: n/a"),
        Row::new(
            "w5 read after N, 10 events",
            "p50 us/read",
            Better::Lower,
            &lat(0.5),
        ),
        Row::new(
            "w5 read after N, 10 events",
            "p99 us/read",
            Better::Lower,
            &lat(0.99),
        ),
    ])
}

fn full_read_op(
    _: usize,
    _: u64,
    s: &mut dyn crate::support::Session,
    _: &mut u64,
) -> BenchResult<u64> {
    whole_run("full read", s.read_all("read")?)
}

fn borrowed_read_op(
    _: usize,
    _: u64,
    s: &mut dyn crate::support::Session,
    _: &mut u64,
) -> BenchResult<u64> {
    let stat = s
        .read_all_borrowed("read")?
        .ok_or("peer has no borrowed read")?;
    whole_run("borrowed read", stat)
}

/// The events a full read returned, or an error when it missed some.
fn whole_run(what: &str, stat: crate::support::ReadStat) -> BenchResult<u64> {
    if stat.events != READ_RUN_EVENTS as u64 {
        return Err(format!(
            "{what} returned {} events, wanted {READ_RUN_EVENTS}",
            stat.events
        )
        .into());
    }
    Ok(stat.events)
}

/// Reads 10 events after a pseudo-random N (xorshift state in `rng`).
fn delta_op(
    _: usize,
    _: u64,
    s: &mut dyn crate::support::Session,
    rng: &mut u64,
) -> BenchResult<u64> {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let after = *rng % (READ_RUN_EVENTS - DELTA_EVENTS) as u64;
    let stat = s
        .read_after("read", after, DELTA_EVENTS)?
        .ok_or("peer cannot read after N")?;
    if stat.events != DELTA_EVENTS as u64 {
        return Err(format!("read after {after} returned {} events", stat.events).into());
    }
    Ok(stat.events)
}
