//! Issue 24's "bytes on disk per event" figure: a store of a named shape is built through
//! the public API into a temp dir, then its run directory's files are summed by kind and
//! divided by the events (prints one JSON line per shape, like the other benches):
//!
//! - `frame`: the segment files (`seg-*.log`) less their 4096-byte headers, per event;
//! - `header`: the segment headers, per event;
//! - `index`: the segment indexes (`seg-*.idx`: a sealed segment's, and the open segment's
//!   that a writer which deduplicated leaves at close, SPEC §9) per event they cover
//!   (`index_events`: each index's `last_seq - base_seq + 1`, from its page 0);
//! - `other`: the lock file and the run summary, per event;
//! - `total`: every byte of the run directory, per event.
//!
//! Shapes (`RUNLOG_DISK_EVENTS`, default 1,000,000 events; one run, kind `step_completed`,
//! payload 17 bytes, default `Config`): `batch1000` (1,000 facts per append, no key),
//! `batch1000-key` (the same with a key `k{j}`, as `open_support::fill_with`), `single`
//! (one fact per append from 8 threads; a third of the events, so that it seals segments and
//! their indexes are counted). The appends that wait in one group commit share a batch
//! (`src/run/commit.rs`, `Frames`): `events_per_group` says how many they were, on average,
//! in this run (1 for the batched shapes' single appender). `single-1`: the same from one
//! thread (a fifth of the events, so that it seals a segment of the version-3 frame, about
//! 38 bytes an event): every batch holds one event.
//!
//! `cargo bench --bench disk_bytes`

use std::path::Path;

use runlog::{Config, NewEvent, RunId, Store};

fn event(j: u64, key: bool) -> NewEvent {
    let e = NewEvent::new("step_completed", format!("{j:017}"));
    if key { e.key(format!("k{j}")) } else { e }
}

fn build(dir: &Path, events: u64, per_append: u64, key: bool, threads: u64) -> u64 {
    let store = Store::open(dir, Config::default()).unwrap();
    let run = RunId::new("r").unwrap();
    store.create_run(&run).unwrap();
    if per_append > 1 {
        let mut i = 0;
        while i < events {
            let n = per_append.min(events - i);
            let batch = (i..i + n).map(|j| event(j, key)).collect();
            store.append_facts(&run, batch).unwrap();
            i += n;
        }
        return store.commit_stats().groups;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let (store, run) = (&store, &run);
            s.spawn(move || {
                for j in (t..events).step_by(threads as usize) {
                    store.append_facts(run, vec![event(j, key)]).unwrap();
                }
            });
        }
    });
    assert_eq!(store.last_seq(&run).unwrap(), events);
    store.commit_stats().groups
}

/// Bytes of the run directory by kind: (segment files, segment count, indexes, other,
/// events the indexes cover).
fn sizes(run_dir: &Path) -> (u64, u64, u64, u64, u64) {
    let (mut logs, mut segs, mut idx, mut other, mut covered) = (0, 0, 0, 0, 0);
    for entry in std::fs::read_dir(run_dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let len = entry.metadata().unwrap().len();
        if name.ends_with(".log") {
            logs += len;
            segs += 1;
        } else if name.ends_with(".idx") {
            idx += len;
            // Page 0 (SPEC §9): base_seq at 16, last_seq at 24.
            let b = std::fs::read(entry.path()).unwrap();
            let seq_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
            covered += seq_at(24) + 1 - seq_at(16);
        } else {
            other += len;
        }
    }
    (logs, segs, idx, other, covered)
}

fn measure(shape: &str, events: u64, per_append: u64, key: bool, threads: u64) {
    let root = tempfile::tempdir_in(".").unwrap();
    let groups = build(root.path(), events, per_append, key, threads);
    let (logs, segs, idx, other, covered) = sizes(&root.path().join("runs/r"));
    let per = |b: u64, n: u64| if n == 0 { 0.0 } else { b as f64 / n as f64 };
    let header = segs * 4096;
    println!(
        "{{\"bench\":\"disk_bytes\",\"shape\":\"{shape}\",\"events\":{events},\"payload\":17,\
         \"segments\":{segs},\"frame\":{:.2},\"header\":{:.2},\"index\":{:.2},\
         \"index_events\":{},\"other\":{:.3},\"total\":{:.2},\
         \"events_per_group\":{:.2}}}",
        per(logs - header, events),
        per(header, events),
        per(idx, covered),
        covered,
        per(other, events),
        per(logs + idx + other, events),
        per(events, groups),
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let events = std::env::var("RUNLOG_DISK_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000u64);
    measure("batch1000", events, 1000, false, 1);
    measure("batch1000-key", events, 1000, true, 1);
    measure("single", events / 3, 1, false, 8);
    measure("single-1", events / 5, 1, false, 1);
}
