//! Runs one measurement cell: N writer threads, each with its own session, released together
//! by a barrier and stopped by a deadline; counts events, latencies and sync syscalls.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::support::fsyncs::SyncCounter;
use crate::support::stats::Latencies;
use crate::support::sys::{CpuOf, cpu_secs};
use crate::support::{BenchResult, GroupStats, Peer, Session, open_peer};

/// One operation of one thread: `(thread index, op index, session, thread state)` → events
/// appended or read. The state carries e.g. the fenced writer's last seq between ops.
pub type Op<'a> = dyn Fn(usize, u64, &mut dyn Session, &mut u64) -> BenchResult<u64> + Sync + 'a;

/// What one cell measured.
#[derive(Debug, Default)]
pub struct Cell {
    /// Events appended or read in total.
    pub events: u64,
    /// Operations (appends or reads) in total.
    pub ops: u64,
    /// Wall time from the barrier to the last thread's stop, seconds.
    pub secs: f64,
    /// Per-operation latencies of all threads.
    pub latencies: Latencies,
    /// Sync syscalls issued during the cell (`None` when not countable).
    pub syncs: Option<u64>,
    /// The peer's own group-commit counters for the cell, when it keeps them.
    pub groups: Option<GroupStats>,
    /// CPU time (user + system) the cell's threads used, seconds: the whole process from the
    /// barrier to the last thread's stop, or the lane's own thread in its bursts (`None`
    /// when not readable).
    pub cpu_secs: Option<f64>,
}

impl Cell {
    /// Events per second.
    pub fn events_per_sec(&self) -> f64 {
        self.events as f64 / self.secs.max(1e-9)
    }

    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
}

/// Per-thread result: events, ops, latencies.
type ThreadOut = (u64, u64, Latencies);

/// Runs `op` on `threads` threads against `peer` for `secs`; each thread starts with its own
/// session and the state `init(thread)`.
pub fn run_threads(
    peer: &Arc<dyn Peer>,
    threads: usize,
    secs: Duration,
    init: &(dyn Fn(usize) -> u64 + Sync),
    op: &Op<'_>,
) -> BenchResult<Cell> {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                scope.spawn(move || -> BenchResult<ThreadOut> {
                    let session = peer.session();
                    barrier.wait();
                    thread_loop(&mut *session?, t, secs, init(t), op)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let cpu_before = cpu_secs(CpuOf::Process);
        let mut cell = Cell::default();
        for handle in handles {
            let (events, ops, latencies) =
                handle.join().map_err(|_| "writer thread panicked")??;
            cell.events += events;
            cell.ops += ops;
            cell.latencies.extend(latencies);
        }
        cell.secs = start.elapsed().as_secs_f64();
        cell.cpu_secs = cpu_before.zip(cpu_secs(CpuOf::Process)).map(|(b, a)| a - b);
        Ok(cell)
    })
}

fn thread_loop(
    session: &mut dyn Session,
    t: usize,
    secs: Duration,
    mut state: u64,
    op: &Op<'_>,
) -> BenchResult<ThreadOut> {
    let deadline = Instant::now() + secs;
    let (mut events, mut ops) = (0u64, 0u64);
    let mut latencies = Latencies::default();
    loop {
        let started = Instant::now();
        if started >= deadline {
            return Ok((events, ops, latencies));
        }
        events += op(t, ops, session, &mut state)?;
        latencies.push(started.elapsed());
        ops += 1;
    }
}

/// A whole cell on a fresh peer in a fresh temp directory under `root`: open, `setup`
/// (create runs, load fixtures; not measured), run the threads, drop the peer, count syncs.
pub fn fresh_cell(
    root: &Path,
    peer_name: &str,
    threads: usize,
    secs: Duration,
    setup: &dyn Fn(&Arc<dyn Peer>) -> BenchResult<()>,
    init: &(dyn Fn(usize) -> u64 + Sync),
    op: &Op<'_>,
) -> BenchResult<Cell> {
    let dir = tempfile::tempdir_in(root)?;
    let mut counter = SyncCounter::start();
    let peer = open_peer(peer_name, dir.path())?;
    setup(&peer)?;
    let before = counter.as_mut().and_then(SyncCounter::read);
    let groups_before = peer.commit_groups();
    let mut cell = run_threads(&peer, threads, secs, init, op)?;
    cell.groups = peer
        .commit_groups()
        .zip(groups_before)
        .map(|(a, b)| a.since(&b));
    drop(peer);
    let after = counter.as_mut().and_then(SyncCounter::read);
    cell.syncs = before.zip(after).map(|(b, a)| a.saturating_sub(b));
    Ok(cell)
}

/// One lane of an interleaved measurement: a session on some peer and run.
pub struct Lane {
    /// Column or case name.
    pub name: String,
    /// The session the lane's ops run on.
    pub session: Box<dyn Session>,
    /// The lane's op state (e.g. the fenced writer's last seq).
    pub state: u64,
    /// What the lane measured so far (`secs` = time spent in its own bursts).
    pub cell: Cell,
}

/// Ops per burst of an interleaved measurement.
const BURST_OPS: u64 = 16;

/// Single-writer measurement that is fair on a noisy machine: the lanes take turns in bursts
/// of [`BURST_OPS`] ops for `total` seconds, so every lane sees the same device regimes
/// (this machine's fsync latency flips between ~0.1 ms and ~4 ms within seconds). Each lane's
/// rate is its ops over the time spent in its own bursts; its syncs are the counter's delta
/// across its bursts. `op` gets the lane index as its thread index.
pub fn interleave(lanes: &mut [Lane], total: Duration, op: &Op<'_>) -> BenchResult<()> {
    let mut counter = SyncCounter::start();
    let deadline = Instant::now() + total;
    let mut i = 0u64;
    while Instant::now() < deadline {
        for (t, lane) in lanes.iter_mut().enumerate() {
            let before = counter.as_mut().and_then(SyncCounter::read);
            let cpu_before = cpu_secs(CpuOf::Thread);
            let started = Instant::now();
            for k in 0..BURST_OPS {
                let t0 = Instant::now();
                lane.cell.events += op(t, i + k, &mut *lane.session, &mut lane.state)?;
                lane.cell.latencies.push(t0.elapsed());
            }
            lane.cell.secs += started.elapsed().as_secs_f64();
            let cpu = cpu_before.zip(cpu_secs(CpuOf::Thread)).map(|(b, a)| a - b);
            lane.cell.cpu_secs = match (lane.cell.ops == 0, lane.cell.cpu_secs, cpu) {
                (true, _, c) => c,
                (false, Some(s), Some(c)) => Some(s + c),
                _ => None,
            };
            lane.cell.ops += BURST_OPS;
            let after = counter.as_mut().and_then(SyncCounter::read);
            let delta = before.zip(after).map(|(b, a)| a.saturating_sub(b));
            lane.cell.syncs = match (lane.cell.ops == BURST_OPS, lane.cell.syncs, delta) {
                (true, _, d) => d,
                (false, Some(s), Some(d)) => Some(s + d),
                _ => None,
            };
        }
        i += BURST_OPS;
    }
    Ok(())
}
