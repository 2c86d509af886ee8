//! Issue 25's online backup figures (prints JSON lines, like the other benches), on a store
//! shape built once into a temp dir: RUNLOG_BACKUP_RUNS runs (default 1,000) × 100 events
//! (10 appends of 10 events, payloads of 200 bytes), page cache warm:
//!
//! - `cp_r`: `cp -r` of the quiesced store, the peer (not consistent under writers);
//! - `full`: `Store::backup` into an empty directory;
//! - `incremental_10pct`: after 10 more events in every 10th run, a backup into the `full`
//!   one (copies what grew);
//! - `incremental_none`: again, nothing grew.
//!
//! Each is the median of 3 in this sitting, with the bytes written (`bytes_copied` for the
//! backups, the copy's file bytes for `cp -r`). `cargo bench --bench backup_cost`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use runlog::{Config, NewEvent, RunId, Store};

const EVENTS_PER_APPEND: usize = 10;
const APPENDS: usize = 10;

fn run_ids(runs: usize) -> Vec<RunId> {
    (0..runs)
        .map(|i| RunId::new(format!("r{i:05}")).unwrap())
        .collect()
}

fn append(store: &Store, run: &RunId, tag: usize) {
    let batch = (0..EVENTS_PER_APPEND)
        .map(|j| {
            NewEvent::new(
                "step_completed",
                format!("{tag:06} {j:04} {}", "x".repeat(188)),
            )
        })
        .collect();
    store.append_facts(run, batch).unwrap();
}

fn build(dir: &Path, runs: usize) {
    let store = Store::open(dir, Config::default()).unwrap();
    for id in run_ids(runs) {
        store.create_run(&id).unwrap();
        for a in 0..APPENDS {
            append(&store, &id, a);
        }
    }
}

/// File bytes under `dir`.
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let meta = e.metadata().unwrap();
        total += match meta.is_dir() {
            true => tree_bytes(&e.path()),
            false => meta.len(),
        };
    }
    total
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn line(name: &str, ms: f64, bytes: u64, runs: usize) {
    println!(
        "{{\"bench\":\"backup_cost\",\"figure\":\"{name}\",\"runs\":{runs},\"events_per_run\":{},\"median_ms\":{ms:.1},\"bytes\":{bytes}}}",
        EVENTS_PER_APPEND * APPENDS
    );
}

fn main() {
    let runs: usize = std::env::var("RUNLOG_BACKUP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let tmp = tempfile::tempdir().unwrap();
    let src_dir = tmp.path().join("src");
    build(&src_dir, runs);
    let _ = Command::new("sync").status();

    let (mut times, mut bytes) = (Vec::new(), 0);
    for i in 0..3 {
        let peer = tmp.path().join(format!("cp-{i}"));
        let t = Instant::now();
        assert!(
            Command::new("cp")
                .arg("-r")
                .arg(&src_dir)
                .arg(&peer)
                .status()
                .unwrap()
                .success()
        );
        let _ = Command::new("sync").arg("-f").arg(&peer).status();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = tree_bytes(&peer);
    }
    line("cp_r", median(times), bytes, runs);

    let src = Store::open_read_only(&src_dir, Config::default()).unwrap();
    let backup = |dst: &Path| {
        let t = Instant::now();
        let report = src.backup(dst, &mut |_| {}).unwrap();
        assert!(report.complete);
        (t.elapsed().as_secs_f64() * 1e3, report.bytes_copied())
    };
    let (mut times, mut bytes) = (Vec::new(), 0);
    for i in 0..3 {
        let (ms, b) = backup(&tmp.path().join(format!("full-{i}")));
        times.push(ms);
        bytes = b;
    }
    line("full", median(times), bytes, runs);

    let writer = Store::open(&src_dir, Config::default()).unwrap();
    let (mut grown, mut none) = ((Vec::new(), 0), (Vec::new(), 0));
    for i in 0..3 {
        for id in run_ids(runs).iter().step_by(10) {
            append(&writer, id, 1000 + i);
        }
        let (ms, b) = backup(&tmp.path().join("full-0"));
        grown.0.push(ms);
        grown.1 = b;
        let (ms, b) = backup(&tmp.path().join("full-0"));
        none.0.push(ms);
        none.1 = b;
    }
    line("incremental_10pct", median(grown.0), grown.1, runs);
    line("incremental_none", median(none.0), none.1, runs);
}
