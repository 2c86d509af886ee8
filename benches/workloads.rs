//! Criterion benches of the issue-5 workloads, every peer where the workload applies:
//! `cargo bench --bench workloads [-- FILTER]`. The side-by-side table with ratios and
//! targets is the `peers` bench; these give criterion's statistics and history per workload.
//!
//! A failing operation aborts the bench (`expect`): a benchmark of a broken store is no
//! benchmark.

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tempfile::TempDir;

use support::corpus::Payloads;
use support::runlog_peer::RunlogPeer;
use support::{Ev, PEER_NAMES, Peer, open_peer};

const READ_RUN_EVENTS: usize = 10_000;
const LONG_RUN_EVENTS: usize = 100_000;
const OPEN_STORE_RUNS: usize = 2_000;

/// A peer in its own temp directory (kept alive as long as the peer).
struct Fixture {
    peer: Arc<dyn Peer>,
    _dir: TempDir,
}

fn fixture(name: &str, runs: &[&str]) -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let peer = open_peer(name, dir.path()).expect("open peer");
    for run in runs {
        peer.create_run(run).expect("create run");
    }
    Fixture { peer, _dir: dir }
}

fn config(c: &mut Criterion) -> &mut Criterion {
    c
}

fn w1_facts(c: &mut Criterion) {
    let payloads = Payloads::load();
    let mut group = config(c).benchmark_group("w1_facts_1_writer");
    group.throughput(Throughput::Elements(1));
    for name in PEER_NAMES {
        let fx = fixture(name, &["w1"]);
        let mut session = fx.peer.session().expect("session");
        let mut i = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                black_box(session.append_fact("w1", payloads.get(i)).expect("append"))
            })
        });
    }
    group.finish();
}

fn w2_decisions(c: &mut Criterion) {
    let payloads = Payloads::load();
    let batches: Vec<Vec<Ev>> = (0..64)
        .map(|b| payloads.take(3 * (b + 1))[3 * b..].to_vec())
        .collect();
    let mut group = c.benchmark_group("w2_decisions_x3");
    group.throughput(Throughput::Elements(3));
    for name in PEER_NAMES {
        let fx = fixture(name, &["w2"]);
        let mut session = fx.peer.session().expect("session");
        let (mut last, mut i) = (0u64, 0usize);
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                let batch = &batches[i % batches.len()];
                last = session.append_decisions("w2", last, batch).expect("decide");
            })
        });
    }
    group.finish();
}

/// `threads` writers each append `iters / threads` facts (at least one) to `run_of(thread)`;
/// returns the wall time of the slowest.
fn parallel_appends(
    peer: &Arc<dyn Peer>,
    payloads: &Payloads,
    threads: usize,
    iters: u64,
    run_of: &(dyn Fn(usize) -> String + Sync),
) -> Duration {
    let per_thread = (iters as usize).div_ceil(threads).max(1);
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let barrier = &barrier;
            scope.spawn(move || {
                let mut session = peer.session().expect("session");
                let run = run_of(t);
                barrier.wait();
                for i in 0..per_thread {
                    session
                        .append_fact(&run, payloads.get(t * 31 + i))
                        .expect("append");
                }
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}

fn w3_w4_concurrent(c: &mut Criterion) {
    let payloads = Payloads::load();
    let many: Vec<String> = (0..64).map(|t| format!("w3-{t:02}")).collect();
    let many_refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("w3_64_runs_x_1_writer");
    group.throughput(Throughput::Elements(1)).sample_size(10);
    for name in PEER_NAMES {
        let fx = fixture(name, &many_refs);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                parallel_appends(&fx.peer, &payloads, 64, iters, &|t| many[t].clone())
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("w4_1_run_x_16_writers");
    group.throughput(Throughput::Elements(1)).sample_size(10);
    for name in PEER_NAMES {
        let fx = fixture(name, &["hot"]);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                parallel_appends(&fx.peer, &payloads, 16, iters, &|_| "hot".to_string())
            })
        });
    }
    group.finish();
}

fn w5_reads(c: &mut Criterion) {
    let events = Payloads::load().take(READ_RUN_EVENTS);
    let mut group = c.benchmark_group("w5_reads");
    for name in PEER_NAMES {
        let fx = fixture(name, &["read"]);
        fx.peer.bulk_load("read", &events).expect("load");
        let mut session = fx.peer.session().expect("session");
        group.throughput(Throughput::Elements(READ_RUN_EVENTS as u64));
        group.bench_function(BenchmarkId::new("full_10k", name), |b| {
            b.iter(|| black_box(session.read_all("read").expect("read all")))
        });
        if session.read_after("read", 0, 1).expect("probe").is_none() {
            continue;
        }
        let mut after = 0u64;
        group.throughput(Throughput::Elements(10));
        group.bench_function(BenchmarkId::new("after_n_10", name), |b| {
            b.iter(|| {
                after = (after + 7_919) % (READ_RUN_EVENTS as u64 - 10);
                black_box(session.read_after("read", after, 10).expect("read after"))
            })
        });
    }
    group.finish();
}

fn w6_run_length(c: &mut Criterion) {
    let payloads = Payloads::load();
    let fx = fixture("runlog", &["short", "long"]);
    let slice = payloads.take(10_000);
    fx.peer
        .bulk_load("short", &slice[..1_000])
        .expect("load short");
    for _ in 0..LONG_RUN_EVENTS / slice.len() {
        fx.peer.bulk_load("long", &slice).expect("load long");
    }
    let mut group = c.benchmark_group("w6_append_vs_run_length");
    group.throughput(Throughput::Elements(1));
    let mut session = fx.peer.session().expect("session");
    for (label, run) in [("1k", "short"), ("100k", "long")] {
        let mut i = 0usize;
        group.bench_function(label, |b| {
            b.iter(|| {
                i += 1;
                black_box(session.append_fact(run, payloads.get(i)).expect("append"))
            })
        });
    }
    group.finish();
}

fn w7_open(c: &mut Criterion) {
    let mut group = c.benchmark_group("w7_open_store");
    for runs in [10, OPEN_STORE_RUNS] {
        let dir = tempfile::tempdir().expect("temp dir");
        let peer = RunlogPeer::open(dir.path()).expect("open");
        for i in 0..runs {
            peer.create_run(&format!("r{i:07}")).expect("create run");
        }
        let path = peer.path().to_path_buf();
        drop(peer);
        group.bench_function(BenchmarkId::from_parameter(runs), |b| {
            b.iter(|| {
                black_box(runlog::Store::open(&path, runlog::Config::default()).expect("open"))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = w1_facts, w2_decisions, w3_w4_concurrent, w5_reads, w6_run_length, w7_open
}
criterion_main!(benches);
