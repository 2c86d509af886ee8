//! What opening a run costs, and what open runs hold in memory (issue 11 §6, format/SPEC.md
//! §9): a fresh `Store` reading 10 events in the middle of a 1M-event run, and the memory
//! of 256 open 100k-event runs (live heap and the resident pages of their maps,
//! `open_support::Footprint`), each with segment indexes and with them removed (the
//! fallback that decodes every segment, i.e. the behaviour before indexes). Prints JSON lines.
//!
//! `cargo bench --bench open_cost` (sizes: RUNLOG_OPEN_EVENTS, RUNLOG_OPEN_RUNS,
//! RUNLOG_OPEN_RUN_EVENTS; defaults 1,000,000 / 256 / 100,000).

use std::path::Path;
use std::time::Instant;

#[path = "open_support.rs"]
mod open_support;

use open_support::{Footprint, env, fill_with};
use runlog::{Config, RunId, Store};

fn config(segment_len: u64) -> Config {
    Config {
        segment_len_bytes_max: segment_len,
        open_runs_max: 1024,
        ..Config::default()
    }
}

fn fill(store: &Store, run: &RunId, events: u64) {
    fill_with(store, run, events, |_| "step_completed");
}

fn remove_indexes(dir: &Path) {
    for run in std::fs::read_dir(dir.join("runs")).unwrap() {
        for f in std::fs::read_dir(run.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "idx") {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
}

/// Flushes the writes of the fill so that background writeback does not land in a timing,
/// and warms the page cache with one untimed pass.
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

/// Median time of a fresh open + a 10-event read after `after`, in µs.
fn fresh_read_us(dir: &Path, run: &RunId, after: u64, segment_len: u64) -> f64 {
    let store = Store::open_read_only(dir, config(segment_len)).unwrap();
    store.read(run, after, 10).unwrap();
    drop(store);
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            let store = Store::open_read_only(dir, config(segment_len)).unwrap();
            let page = store.read(run, after, 10).unwrap();
            assert_eq!(page.events.len(), 10);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[3]
}

fn big_run(events: u64, segment_len: u64) {
    let dir = tempfile::tempdir_in(".").unwrap();
    let run = RunId::new("big").unwrap();
    fill(
        &Store::open(dir.path(), config(segment_len)).unwrap(),
        &run,
        events,
    );
    let after = events / 2;
    settle();
    let with = fresh_read_us(dir.path(), &run, after, segment_len);
    remove_indexes(dir.path());
    settle();
    let without = fresh_read_us(dir.path(), &run, after, segment_len);
    println!(
        "{{\"bench\":\"fresh_open_read_10\",\"events\":{events},\"segment_len_bytes\":{segment_len},\"with_index_us\":{with:.0},\"without_index_us\":{without:.0},\"ratio\":{:.1}}}",
        without / with
    );
}

fn open_runs(runs: u64, events: u64, segment_len: u64) {
    let dir = tempfile::tempdir_in(".").unwrap();
    let store = Store::open(dir.path(), config(segment_len)).unwrap();
    let ids: Vec<RunId> = (0..runs)
        .map(|i| RunId::new(format!("r{i:04}")).unwrap())
        .collect();
    for id in &ids {
        fill(&store, id, events);
    }
    drop(store);
    let measure = |dir: &Path| {
        let before = Footprint::of(dir);
        let store = Store::open_read_only(dir, config(segment_len)).unwrap();
        for id in &ids {
            store.read(id, events - 1, 1).unwrap();
        }
        let (heap, mapped) = Footprint::of(dir).since(before);
        drop(store);
        heap + mapped
    };
    let with = measure(dir.path());
    remove_indexes(dir.path());
    let without = measure(dir.path());
    println!(
        "{{\"bench\":\"rss_open_runs\",\"runs\":{runs},\"events_per_run\":{events},\"segment_len_bytes\":{segment_len},\"with_index_mib\":{:.1},\"without_index_mib\":{:.1}}}",
        with as f64 / 1048576.0,
        without as f64 / 1048576.0
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let events = env("RUNLOG_OPEN_EVENTS", 1_000_000);
    let default_segment = Config::default().segment_len_bytes_max;
    big_run(events, default_segment);
    big_run(events, 64 << 20);
    let (runs, per_run) = (
        env("RUNLOG_OPEN_RUNS", 256),
        env("RUNLOG_OPEN_RUN_EVENTS", 100_000),
    );
    open_runs(runs, per_run, default_segment);
}
