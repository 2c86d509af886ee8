//! Crashes around the run summary (format/SPEC.md §10) on the simulated file system: a power
//! loss at a random moment of a workload that appends, closes runs (the summary is written,
//! never synced) and reopens them. After every crash, and again after a writer's recovery
//! and close, `Store::run_summary` at the listed counter equals the fold of a full read: it
//! never claims an event the reader's view does not hold (a summary that survived while the
//! commit slots that counted its events were lost is past the counter and not used), and it
//! never misses an acknowledged one (every acknowledged append is in the view).

use std::path::Path;
use std::sync::Arc;

use runlog::io::sim::SimFs;
use runlog::io::{Fs, OpenMode};
use runlog::{Config, NewEvent, RunId, RunSummary, Store};

const KINDS: [&str; 5] = [
    "run_started",
    "step_completed",
    "run_completed",
    "hook_created",
    "run_failed",
];

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn scanned(store: &Store, run: &RunId, upto: u64) -> RunSummary {
    let events = store
        .read(run, 0, usize::try_from(upto).unwrap())
        .unwrap()
        .events;
    assert_eq!(
        events.len() as u64,
        upto,
        "the listed counter's events are readable"
    );
    let mut kinds: Vec<(String, u64)> = Vec::new();
    for e in &events {
        if !kinds.iter().any(|(k, _)| **k == *e.kind) {
            kinds.push((e.kind.to_string(), e.seq));
        }
    }
    RunSummary {
        last_seq: upto,
        first_created_at_ms: events.first().map(|e| e.created_at_ms),
        last_created_at_ms: events.last().map(|e| e.created_at_ms),
        kinds: Some(kinds),
    }
}

/// The listed last seq and the summary at it, checked against a full read; returns the seq.
fn check(fs: &SimFs, run: &RunId, seed: u64) -> u64 {
    let ro = Store::open_read_only_with_fs(Arc::new(fs.clone()), "/s", Config::default()).unwrap();
    let info = ro.list_runs(None, 10).unwrap().runs.remove(0);
    let got = ro.run_summary(run, info.last_seq).unwrap();
    assert_eq!(got, scanned(&ro, run, info.last_seq), "seed {seed}");
    info.last_seq
}

/// The summary file's own claim, for counting the interesting cases (read past its crc:
/// bytes 40..48 are its last seq; a torn or missing file counts as none).
fn summary_claim(fs: &SimFs) -> Option<u64> {
    let f = fs
        .open(Path::new("/s/runs/r/summary"), OpenMode::Read)
        .ok()?;
    let mut b = [0u8; 8];
    f.read_at(&mut b, 40).ok()?;
    Some(u64::from_le_bytes(b))
}

#[test]
fn a_crash_around_summary_writes_never_makes_it_claim_or_miss_an_event() {
    let mut ahead = 0;
    let mut behind = 0;
    for seed in 0..150u64 {
        let fs = SimFs::new(seed);
        let run = RunId::new("r").unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        {
            let store = Store::open_with_fs(Arc::new(fs.clone()), "/s", Config::default()).unwrap();
            store.create_run(&run).unwrap();
            store
                .append_facts(&run, vec![NewEvent::new("run_created", "{}")])
                .unwrap();
        }
        let mut acked = 1u64;
        let rounds = 1 + rng.below(4);
        for _ in 0..rounds {
            let store = Store::open_with_fs(Arc::new(fs.clone()), "/s", Config::default()).unwrap();
            let appends = 1 + rng.below(80);
            for _ in 0..appends {
                let n = 1 + rng.below(3);
                let batch = (0..n)
                    .map(|_| NewEvent::new(KINDS[rng.below(5) as usize], "{}"))
                    .collect();
                acked += store.append_facts(&run, batch).unwrap().len() as u64;
            }
            if rng.below(3) == 0 {
                std::mem::forget(store); // no close: no summary write
            }
        }
        fs.crash(seed);
        let listed = check(&fs, &run, seed);
        if let Some(claim) = summary_claim(&fs) {
            if claim > listed {
                ahead += 1;
            } else if claim < listed {
                behind += 1;
            }
        }
        // A writer recovers (adopting what the lost commit slots counted), closes and writes
        // the summary of its view; every acknowledged event is in it.
        {
            let store = Store::open_with_fs(Arc::new(fs.clone()), "/s", Config::default()).unwrap();
            assert!(
                store.last_seq(&run).unwrap() >= acked,
                "seed {seed}: acknowledged lost"
            );
            store
                .append_facts(&run, vec![NewEvent::new("step_completed", "{}")])
                .unwrap();
            acked += 1;
        }
        let listed = check(&fs, &run, seed);
        assert!(listed >= acked, "seed {seed}");
        assert_eq!(
            summary_claim(&fs),
            Some(listed),
            "seed {seed}: rewritten at close"
        );
    }
    eprintln!("summary past the reader's counter: {ahead}, behind it: {behind}");
    assert!(
        behind > 0,
        "some crashes must leave the summary behind the log"
    );
    assert!(
        ahead > 0,
        "some crashes must leave the summary past the reader's counter"
    );
}
