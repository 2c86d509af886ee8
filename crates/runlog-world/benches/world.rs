//! Criterion benches of the World layer: `cargo bench -p runlog-world --bench world
//! [-- FILTER]`.
//!
//! - `append/*`: the cost of `create_event` against a bare fenced append of the same bytes
//!   to the same run (both one durable, fenced commit; the difference is the World's work:
//!   validation, the fold, the rules, the result entities). `step_created` adds an
//!   idempotency key; `hook_received` appends no key.
//! - `append/world_work_*`: `create_event` minus the time its append spent in the store,
//!   i.e. the World's own work. The fdatasync time of this machine swings by an order of
//!   magnitude between runs, so the absolute latencies above compare only when taken side
//!   by side; this figure does not depend on the disk.
//! - `get/*`: entity reads after warm-up (a cached fold advanced by the empty delta), and
//!   one page of `events.list` on a 1,000-event run.
//! - `at/*`: `World::run_at` on a 100,000-event run (33,333 steps, each `step_created` with
//!   the step payload below, `step_started`, `step_completed`) at seq 1,000, 50,000 and
//!   100,000, and at a time (a scan of the log, then the fold), against its peer, a fresh
//!   World's fold of the whole log (`run_state` with nothing cached); each seq warm (the
//!   World's fold snapshots taken by the calls before) and `_cold` (a fresh World).
//!
//! A failing operation aborts the bench (`expect`): a benchmark of a broken store is no
//! benchmark.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use runlog::{Config, NewEvent, RunId, RunLog, Seq, Store};
use runlog_world::{
    At, CreateEventParams, EventRequest, EventType, Pagination, ResolveData, World, WorldConfig,
    mint_run_id,
};

/// The step payload of the benches: a 300-byte binary input in the SDK's JSON shape (the
/// corpus' events average ~400 bytes).
fn step_data() -> String {
    let data = "QUJD".repeat(100);
    format!(r#"{{"stepName":"step//./wf//add","input":{{"__type":"Uint8Array","data":"{data}"}}}}"#)
}

struct Fixture {
    world: World<Arc<Store>>,
    run: String,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path(), Config::default()).expect("store");
    let world = World::new(Arc::new(store), WorldConfig::default());
    let run = mint_run_id();
    let created = r#"{"deploymentId":"dpl","workflowName":"wf","input":{"__type":"Uint8Array","data":"AA=="}}"#;
    let p = CreateEventParams::default();
    world
        .create_event(
            Some(&run),
            EventRequest::new(EventType::RunCreated)
                .data(created)
                .expect("json"),
            &p,
        )
        .expect("run_created");
    world
        .create_event(Some(&run), EventRequest::new(EventType::RunStarted), &p)
        .expect("run_started");
    Fixture {
        world,
        run,
        _dir: dir,
    }
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    let data = step_data();
    let p = CreateEventParams::default();

    let fx = fixture();
    let run = RunId::new(&fx.run).expect("run id");
    let store = fx.world.backend().clone();
    let mut seq = store.last_seq(&run).expect("seq");
    group.bench_function("bare_fenced_append", |b| {
        b.iter(|| {
            let e = NewEvent::new("step_created", data.clone()).correlation_id("s");
            seq = store.append_decisions(&run, seq, vec![e]).expect("append")[0];
            black_box(seq)
        })
    });

    let fx = fixture();
    let mut i = 0u64;
    group.bench_function("create_event_step_created", |b| {
        b.iter(|| {
            i += 1;
            let req = EventRequest::new(EventType::StepCreated)
                .correlation_id(format!("step_{i}"))
                .data(&data)
                .expect("json");
            black_box(
                fx.world
                    .create_event(Some(&fx.run), req, &p)
                    .expect("create"),
            )
        })
    });

    let fx = fixture();
    let hook = r#"{"token":"bench-token"}"#;
    fx.world
        .create_event(
            Some(&fx.run),
            EventRequest::new(EventType::HookCreated)
                .correlation_id("h")
                .data(hook)
                .expect("json"),
            &p,
        )
        .expect("hook");
    let received = data.replace("stepName\":\"step//./wf//add\",\"input", "payload");
    group.bench_function("create_event_hook_received", |b| {
        b.iter(|| {
            let req = EventRequest::new(EventType::HookReceived)
                .correlation_id("h")
                .data(&received)
                .expect("json");
            black_box(
                fx.world
                    .create_event(Some(&fx.run), req, &p)
                    .expect("create"),
            )
        })
    });
    group.finish();
    world_work(c);
}

/// A backend that adds up the time spent inside `append_decisions`, so that a bench can
/// subtract the store's commit (its fdatasync above all) from `create_event` and time the
/// World's own work: request checks, the delta read, the rules, the result.
struct Timed {
    inner: Arc<Store>,
    append_ns: AtomicU64,
}

impl RunLog for Timed {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> runlog::Result<()> {
        self.inner.create_run_with_meta(run, meta)
    }
    fn append_facts(
        &self,
        run: &RunId,
        events: Vec<NewEvent>,
    ) -> runlog::Result<Vec<runlog::Appended>> {
        self.inner.append_facts(run, events)
    }
    fn append_decisions(
        &self,
        run: &RunId,
        expected: Seq,
        events: Vec<NewEvent>,
    ) -> runlog::Result<Vec<Seq>> {
        let t = Instant::now();
        let r = self.inner.append_decisions(run, expected, events);
        self.append_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> runlog::Result<runlog::ReadPage> {
        self.inner.read(run, after, limit)
    }
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(runlog::EventRef<'_>),
    ) -> runlog::Result<(Seq, bool)> {
        self.inner.read_each(run, after, limit, f)
    }
    fn last_seq(&self, run: &RunId) -> runlog::Result<Seq> {
        self.inner.last_seq(run)
    }
    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> runlog::Result<Seq> {
        self.inner.wait(run, after, timeout)
    }
    fn run_info(&self, run: &RunId) -> runlog::Result<runlog::RunInfo> {
        self.inner.run_info(run)
    }
    fn run_meta(&self, run: &RunId) -> runlog::Result<Vec<u8>> {
        self.inner.run_meta(run)
    }
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> runlog::Result<runlog::RunPage> {
        self.inner.list_runs(after, limit)
    }
    fn delete_run(&self, run: &RunId) -> runlog::Result<()> {
        self.inner.delete_run(run)
    }
    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> runlog::Result<()> {
        self.inner.delete_run_at(run, expected_last_seq)
    }
    fn verify_run(&self, run: &RunId) -> runlog::Result<runlog::VerifyReport> {
        self.inner.verify_run(run)
    }
    fn lock_collector(&self) -> runlog::Result<runlog::CollectorLock> {
        self.inner.lock_collector()
    }
}

/// `create_event` minus the time its fenced append spent in the store.
fn world_work(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    let fx = fixture();
    let timed = Timed {
        inner: fx.world.backend().clone(),
        append_ns: AtomicU64::new(0),
    };
    let world = World::new(timed, WorldConfig::default());
    let data = step_data();
    let p = CreateEventParams::default();
    let mut i = 0u64;
    group.bench_function("world_work_of_create_event_step_created", |b| {
        b.iter_custom(|iters| {
            let before = world.backend().append_ns.load(Ordering::Relaxed);
            let t = Instant::now();
            for _ in 0..iters {
                i += 1;
                let req = EventRequest::new(EventType::StepCreated)
                    .correlation_id(format!("step_{i}"))
                    .data(&data)
                    .expect("json");
                black_box(world.create_event(Some(&fx.run), req, &p).expect("create"));
            }
            let total = t.elapsed();
            let appending = world.backend().append_ns.load(Ordering::Relaxed) - before;
            total.saturating_sub(Duration::from_nanos(appending))
        })
    });
    group.finish();
}

fn get(c: &mut Criterion) {
    let mut group = c.benchmark_group("get");
    let fx = fixture();
    let p = CreateEventParams::default();
    for i in 0..998 {
        let req = EventRequest::new(EventType::StepCreated)
            .correlation_id(format!("step_{i}"))
            .data(step_data())
            .expect("json");
        fx.world
            .create_event(Some(&fx.run), req, &p)
            .expect("create");
    }
    fx.world
        .get_run(&fx.run, ResolveData::All)
        .expect("warm-up");
    group.bench_function("run", |b| {
        b.iter(|| black_box(fx.world.get_run(&fx.run, ResolveData::All).expect("get")))
    });
    group.bench_function("step", |b| {
        b.iter(|| {
            black_box(
                fx.world
                    .get_step(&fx.run, "step_500", ResolveData::All)
                    .expect("get"),
            )
        })
    });
    let page = Pagination {
        limit: Some(100),
        cursor: Some("seq:500".into()),
        sort_order: None,
    };
    group.bench_function("events_list_100_of_1000", |b| {
        b.iter(|| {
            black_box(
                fx.world
                    .list_events(&fx.run, &page, ResolveData::All)
                    .expect("list"),
            )
        })
    });
    let cold = World::new(fx.world.backend().clone(), WorldConfig::default());
    group.bench_function("run_cold_fold_of_1000_events", |b| {
        b.iter_batched(
            || World::new(cold.backend().clone(), WorldConfig::default()),
            |w| black_box(w.get_run(&fx.run, ResolveData::All).expect("get")),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Events of the `at/*` run.
const AT_EVENTS: u64 = 100_000;

fn at(c: &mut Criterion) {
    let mut group = c.benchmark_group("at");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    let fx = fixture();
    let run = RunId::new(&fx.run).expect("run id");
    let store = fx.world.backend().clone();
    let mut next = 3;
    let mut i = 0u64;
    while next <= AT_EVENTS {
        let mut batch = Vec::new();
        while batch.len() < 999 && next + (batch.len() as u64) <= AT_EVENTS {
            let step = format!("step_{i}");
            let e = match (next + batch.len() as u64) % 3 {
                0 => NewEvent::new("step_created", step_data()),
                1 => NewEvent::new("step_started", Vec::new()),
                _ => {
                    i += 1;
                    NewEvent::new(
                        "step_completed",
                        r#"{"result":{"__type":"Uint8Array","data":"AQID"}}"#,
                    )
                }
            };
            batch.push(e.correlation_id(step));
        }
        next += batch.len() as u64;
        store.append_facts(&run, batch).expect("append");
    }
    assert_eq!(store.last_seq(&run).expect("last"), AT_EVENTS);
    let last_ms = store.read(&run, AT_EVENTS - 1, 1).expect("read").events[0].created_at_ms;
    let end = fx.world.run_at(&fx.run, At::Seq(AT_EVENTS)).expect("at");
    assert_eq!(end.steps.len(), 33_333);
    // Warm: fx.world keeps the fold snapshots its earlier calls took (every 16,384 events on
    // this run); cold: a fresh World, whose first call folds from seq 1.
    for seq in [1_000, 50_000, AT_EVENTS] {
        group.bench_function(format!("run_at_seq_{seq}_of_100k"), |b| {
            b.iter(|| black_box(fx.world.run_at(&fx.run, At::Seq(seq)).expect("at")))
        });
        group.bench_function(format!("run_at_seq_{seq}_of_100k_cold"), |b| {
            b.iter_batched(
                || World::new(store.clone(), WorldConfig::default()),
                |w| black_box(w.run_at(&fx.run, At::Seq(seq)).expect("at")),
                criterion::BatchSize::SmallInput,
            )
        });
    }
    group.bench_function("run_at_time_of_last_event_of_100k", |b| {
        b.iter(|| black_box(fx.world.run_at(&fx.run, At::Time(last_ms)).expect("at")))
    });
    group.bench_function("peer_cold_fold_of_100k", |b| {
        b.iter_batched(
            || World::new(store.clone(), WorldConfig::default()),
            |w| black_box(w.run_state(&fx.run).expect("fold")),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = append, get, at
}
criterion_main!(benches);
