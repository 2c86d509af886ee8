//! Issue 24's "flat at scale" figures, each on a named store shape built once into a temp dir
//! (prints JSON lines, like the other benches):
//!
//! - `runs_listing`: wall time and peak RSS of `runlog runs --json` (a child process; the
//!   binaries named by `RUNLOG_CLI` and, when set, `RUNLOG_CLI_BEFORE`, so an older build can
//!   be measured on the very same stores in the same sitting), on 1,000 runs × 1 event,
//!   1,000 runs × 1,000 events and 1 run × 1,000,000 events;
//! - `fresh_first_op`: a fresh `Store` on the 1M-event run, then its first read (10 events
//!   after seq 500,000) or its first append (one fact with a key);
//! - `rss_per_open_run`: memory added per open run (fresh read-only `Store`, one read of each
//!   run's last event) on 1,000 runs × 1,000 events and on the 1M-event run: its live heap
//!   (counted by the allocator, `open_support::Footprint`) and the resident pages of its
//!   maps of the store's files; both after one 1,000-event run of another `Store` was opened
//!   and read and is kept open (the process's one-off costs of a first run);
//! - `warm_keyed_append`: on the 1M-event run, a store warmed by one append, then appends of
//!   one fact with a new key (dedupe checked against every segment: a miss), with no key (the
//!   peer, in the same sitting, alternating), and with a key the run already holds (a dedupe
//!   hit on a random earlier event: a lookup, nothing written), and a decision with a new key
//!   rejected by its fence (the key looked up in every segment, nothing written).
//! - `random_appends`: on 1,000 runs × 1,000 events (the listing's store), appends of one fact
//!   (no key) to a random run through a `Store` with the default open-run cache
//!   (`open_runs_max` 256, so most appends reopen their run), against appends to one warm run
//!   through a second `Store` on the same directory (a run of its own, always open),
//!   interleaved, medians; and in the same interleaving the device's own figures, no store:
//!   a 52-byte `pwrite` and its `fdatasync` into one of 1,000 files (8 KiB each, written and
//!   synced beforehand) picked at random, and into one file every time (`raw_*`).
//!
//! `cargo bench --bench scale_cost` (sizes: RUNLOG_SCALE_RUNS, RUNLOG_SCALE_BIG; defaults
//! 1,000 / 1,000,000). `RUNLOG_SCALE_ONLY=deep`: only the 1M-event run's figures;
//! `RUNLOG_SCALE_ONLY=random`: only `random_appends`.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "open_support.rs"]
mod open_support;

use open_support::{Footprint, env, fill_with};
use runlog::{Config, NewEvent, RunId, Store};

fn config() -> Config {
    Config {
        open_runs_max: 4096,
        ..Config::default()
    }
}

fn fill(store: &Store, run: &RunId, events: u64) {
    fill_with(store, run, events, |j| match j {
        0 => "run_created",
        1 => "run_started",
        _ => "step_completed",
    });
}

fn build(dir: &Path, runs: u64, events: u64) -> Vec<RunId> {
    let store = Store::open(dir, config()).unwrap();
    let ids: Vec<RunId> = (0..runs)
        .map(|i| RunId::new(format!("r{i:05}")).unwrap())
        .collect();
    for id in &ids {
        fill(&store, id, events);
    }
    drop(store);
    let _ = Command::new("sync").status();
    ids
}

/// One `runlog runs --json` of `cli` on `dir`: (wall ms, peak RSS KiB of the child, as
/// `/usr/bin/time` reports it: a child forked from this large process would count the
/// parent's pages before its exec).
fn cli_runs_once(cli: &Path, dir: &Path) -> (f64, u64) {
    let rss_file = dir.with_extension("rss");
    let t = Instant::now();
    let status = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(cli)
        .arg("--store")
        .arg(dir)
        .args(["runs", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(status.success());
    let kib = std::fs::read_to_string(&rss_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    (ms, kib)
}

fn cli_runs(label: &str, cli: &Path, shape: &str, dir: &Path) {
    cli_runs_once(cli, dir);
    let mut samples: Vec<(f64, u64)> = (0..5).map(|_| cli_runs_once(cli, dir)).collect();
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (ms, _) = samples[2];
    let rss = samples.iter().map(|s| s.1).max().unwrap_or(0);
    println!(
        "{{\"bench\":\"runs_listing\",\"cli\":\"{label}\",\"shape\":\"{shape}\",\"median_ms\":{ms:.1},\"max_rss_mib\":{:.1}}}",
        rss as f64 / 1024.0
    );
}

/// Median of 7 timed calls after an untimed one (`RUNLOG_SCALE_SAMPLES` for more, e.g. to
/// profile).
fn median_us(mut f: impl FnMut() -> f64) -> f64 {
    f();
    let n = env("RUNLOG_SCALE_SAMPLES", 7).max(1) as usize;
    let mut times: Vec<f64> = (0..n).map(|_| f()).collect();
    times.sort_by(f64::total_cmp);
    times[n / 2]
}

fn fresh_first_op(dir: &Path, run: &RunId, events: u64) {
    let read_us = median_us(|| {
        let t = Instant::now();
        let store = Store::open(dir, config()).unwrap();
        let page = store.read(run, events / 2, 10).unwrap();
        assert_eq!(page.events.len(), 10);
        t.elapsed().as_secs_f64() * 1e6
    });
    let mut n = 0u64;
    let append_us = median_us(|| {
        n += 1;
        let t = Instant::now();
        let store = Store::open(dir, config()).unwrap();
        let e = NewEvent::new("step_completed", "{}").key(format!("extra{n}"));
        store.append_facts(run, vec![e]).unwrap();
        t.elapsed().as_secs_f64() * 1e6
    });
    println!(
        "{{\"bench\":\"fresh_first_op\",\"shape\":\"1 run x {events} events\",\"read_10_us\":{read_us:.0},\"append_1_us\":{append_us:.0}}}"
    );
}

/// Median µs of `RUNLOG_SCALE_WARM` (default 301) calls of each of `fs`, interleaved (one
/// of each in turn), after one untimed round.
fn interleaved_medians<const N: usize>(mut fs: [&mut dyn FnMut(u64); N]) -> [f64; N] {
    let n = env("RUNLOG_SCALE_WARM", 301).max(1);
    let mut times: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    for i in 0..=n {
        for (f, t) in fs.iter_mut().zip(times.iter_mut()) {
            let start = Instant::now();
            f(i);
            if i > 0 {
                t.push(start.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    })
}

fn warm_keyed_append(dir: &Path, run: &RunId, events: u64) {
    let store = Store::open(dir, config()).unwrap();
    store
        .append_facts(run, vec![NewEvent::new("step_completed", "{}")])
        .unwrap();
    let fact = |key: Option<String>| {
        let e = NewEvent::new("step_completed", "{\"warm\":1}");
        vec![match key {
            Some(k) => e.key(k),
            None => e,
        }]
    };
    // Keys of the fill (`k{j}`), spread over the whole run by a fixed multiplier.
    let held = |i: u64| format!("k{}", (i * 7_919_993) % events);
    let [keyed, plain, hit, fenced] = interleaved_medians([
        &mut |i| {
            let out = store
                .append_facts(run, fact(Some(format!("warm{i}"))))
                .unwrap();
            assert!(!out[0].duplicate);
        },
        &mut |_| {
            store.append_facts(run, fact(None)).unwrap();
        },
        &mut |i| {
            let out = store.append_facts(run, fact(Some(held(i)))).unwrap();
            assert!(out[0].duplicate);
        },
        // A decision with a new key and a stale fence: the group's keys are looked up (a
        // miss in every segment) before the fence rejects it, so this is the lookup alone.
        &mut |i| {
            let e = fact(Some(format!("fenced{i}")));
            store.append_decisions(run, 0, e).unwrap_err();
        },
    ]);
    println!(
        "{{\"bench\":\"warm_keyed_append\",\"shape\":\"1 run x {events} events\",\"new_key_us\":{keyed:.0},\"no_key_us\":{plain:.0},\"held_key_us\":{hit:.0},\"new_key_fenced_us\":{fenced:.0},\"new_key_vs_no_key\":{:.2}}}",
        keyed / plain
    );
}

/// A read-only `Store` on `dir` with `id`'s last event read, kept open by the caller: the
/// process's one-off costs of a first open run, paid before [`rss_per_open_run`] measures.
fn warm_up(dir: &Path, id: &RunId) -> Store {
    let store = Store::open_read_only(dir, config()).unwrap();
    read_last(&store, id);
    store
}

/// Reads `id`'s last event (opening the run).
fn read_last(store: &Store, id: &RunId) {
    let last = store.last_seq(id).unwrap();
    store.read(id, last - 1, 1).unwrap();
}

fn rss_per_open_run(dir: &Path, ids: &[RunId], shape: &str) {
    let before = Footprint::of(dir);
    let store = Store::open_read_only(dir, config()).unwrap();
    for id in ids {
        read_last(&store, id);
    }
    let (heap, mapped) = Footprint::of(dir).since(before);
    drop(store);
    let kib = |b: u64| b as f64 / 1024.0 / ids.len() as f64;
    println!(
        "{{\"bench\":\"rss_per_open_run\",\"shape\":\"{shape}\",\"runs\":{},\"per_run_kib\":{:.1},\"heap_kib\":{:.1},\"mapped_kib\":{:.1}}}",
        ids.len(),
        kib(heap + mapped),
        kib(heap),
        kib(mapped)
    );
}

/// Appends of one fact to a random run of `ids` through a `Store` with the default cache,
/// interleaved with appends to a warm run through a `Store` of its own (same directory).
fn random_appends(dir: &Path, ids: &[RunId]) {
    let cold = Store::open(dir, Config::default()).unwrap();
    let warm_store = Store::open(dir, config()).unwrap();
    let warm = RunId::new("warm").unwrap();
    fill(&warm_store, &warm, 1000);
    let fact = || vec![NewEvent::new("step_completed", "{\"random\":1}")];
    // The device alone: as many files as runs, each written and synced beforehand.
    let raw_dir = tempfile::tempdir_in(dir.parent().unwrap_or(Path::new("."))).unwrap();
    let raw: Vec<std::fs::File> = (0..ids.len())
        .map(|i| {
            let f = std::fs::File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(raw_dir.path().join(format!("f{i}")))
                .unwrap();
            f.write_all_at(&[0u8; 8192], 0).unwrap();
            f.sync_all().unwrap();
            f
        })
        .collect();
    let record = [b'x'; 52];
    let raw_write = |f: &std::fs::File, i: u64| {
        f.write_all_at(&record, 4200 + (i % 64) * 52).unwrap();
        f.sync_data().unwrap();
    };
    // A fixed LCG: the same sequence of runs (and files) in every sitting.
    let lcg = |x: &mut u64, n: usize| {
        *x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((*x >> 33) % n as u64) as usize
    };
    let (mut x, mut y) = (0x9e37_79b9_7f4a_7c15_u64, 0x9e37_79b9_7f4a_7c15_u64);
    let [random, one, raw_random, raw_one] = interleaved_medians([
        &mut |_| {
            let run = &ids[lcg(&mut x, ids.len())];
            cold.append_facts(run, fact()).unwrap();
        },
        &mut |_| {
            warm_store.append_facts(&warm, fact()).unwrap();
        },
        &mut |i| raw_write(&raw[lcg(&mut y, raw.len())], i),
        &mut |i| raw_write(&raw[0], i),
    ]);
    println!(
        "{{\"bench\":\"random_appends\",\"shape\":\"{} runs x 1000 events\",\"open_runs_max\":{},\"random_us\":{random:.0},\"warm_us\":{one:.0},\"random_vs_warm\":{:.2},\"raw_random_us\":{raw_random:.0},\"raw_warm_us\":{raw_one:.0},\"raw_random_vs_warm\":{:.2},\"random_vs_raw_random\":{:.2}}}",
        ids.len(),
        Config::default().open_runs_max,
        random / one,
        raw_random / raw_one,
        random / raw_random
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runs = env("RUNLOG_SCALE_RUNS", 1000);
    let big = env("RUNLOG_SCALE_BIG", 1_000_000);
    let clis: Vec<(&str, PathBuf)> = [("before", "RUNLOG_CLI_BEFORE"), ("now", "RUNLOG_CLI")]
        .into_iter()
        .filter_map(|(l, v)| std::env::var_os(v).map(|p| (l, PathBuf::from(p))))
        .collect();
    // `RUNLOG_SCALE_ONLY=deep`: only the 1M-event run's figures (no listing, no wide store).
    let only = std::env::var("RUNLOG_SCALE_ONLY").unwrap_or_default();
    let only_deep = only == "deep";
    let root = tempfile::tempdir_in(".").unwrap();
    let small = root.path().join("small");
    let wide = root.path().join("wide");
    let deep = root.path().join("deep");
    let spread = root.path().join("spread");
    if only == "random" {
        let ids = build(&spread, runs, 1000);
        random_appends(&spread, &ids);
        return;
    }
    let deep_ids = build(&deep, 1, big);
    if only_deep {
        let warm_ids = build(&wide, 1, 1000);
        let warm = warm_up(&wide, &warm_ids[0]);
        rss_per_open_run(&deep, &deep_ids, &format!("1 run x {big} events"));
        drop(warm);
        fresh_first_op(&deep, &deep_ids[0], big);
        warm_keyed_append(&deep, &deep_ids[0], big);
        return;
    }
    build(&small, runs, 1);
    let wide_ids = build(&wide, runs, 1000);
    let shapes = [
        (format!("{runs} runs x 1 event"), &small),
        (format!("{runs} runs x 1000 events"), &wide),
        (format!("1 run x {big} events"), &deep),
    ];
    for (label, cli) in &clis {
        for (shape, dir) in &shapes {
            cli_runs(label, cli, shape, dir);
        }
    }
    let warm = warm_up(&wide, &wide_ids[0]);
    rss_per_open_run(&deep, &deep_ids, &format!("1 run x {big} events"));
    rss_per_open_run(&wide, &wide_ids, &format!("{runs} runs x 1000 events"));
    drop(warm);
    fresh_first_op(&deep, &deep_ids[0], big);
    warm_keyed_append(&deep, &deep_ids[0], big);
    random_appends(&wide, &wide_ids);
}
