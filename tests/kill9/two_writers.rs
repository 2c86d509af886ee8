//! kill -9 of two writer processes appending to the same run at once, with preallocation
//! from the first byte (`preallocate_from_bytes: 0`) and 48 KiB segments, so kills land in
//! preallocated space, in rolls and in seal-time truncations, and batches (up to ~15 KiB)
//! span pages.
//!
//! After each round (and at the end): every acknowledged event is at its acknowledged seq with
//! its payload (rules 4, 11), seqs are dense, `verify_run` reports no problem, appends go on at
//! last + 1, and a handle of the parent process that stayed open throughout sees every
//! acknowledged event (rule 6). The writers are this test binary re-executed on its ignored
//! `child_entry` test (in `main.rs`), which calls [`child`].

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::Piped;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runlog::{Config, NewEvent, RunId, Store};

const ROUNDS: usize = 8;

fn config() -> Config {
    Config {
        segment_len_bytes_max: 48 << 10,
        preallocate_from_bytes: 0,
        ..Config::default()
    }
}

fn run_id() -> RunId {
    RunId::new("wrun_kill9").unwrap()
}

/// The child side, started by `spawn` (through `child_entry`).
pub fn child() {
    let store_dir = std::env::var("RUNLOG_TWO_WRITERS_STORE").unwrap();
    let seed: u64 = std::env::var("RUNLOG_TWO_WRITERS_SEED")
        .unwrap()
        .parse()
        .unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let store = Store::open(&store_dir, config()).unwrap();
    let run = run_id();
    let pid = std::process::id();
    for i in 0.. {
        let n = rng.random_range(1..=3);
        // Up to ~3 x 5 KiB: batches span pages, so a kill can tear one.
        let events: Vec<NewEvent> = (0..n)
            .map(|j| {
                let tag = format!("{pid}-{i}-{j}");
                let pad = "x".repeat(rng.random_range(0..5000));
                NewEvent::new("step_completed", format!("{tag} {pad}"))
            })
            .collect();
        let tags: Vec<String> = (0..n).map(|j| format!("{pid}-{i}-{j}")).collect();
        let acked = store.append_facts(&run, events).unwrap();
        for (a, tag) in acked.iter().zip(tags) {
            println!("ack {} {tag}", a.seq);
        }
    }
}

fn spawn(dir: &std::path::Path, seed: u64) -> Piped {
    crate::common::spawn_piped(
        crate::common::child_command()
            .env(crate::CHILD, "two_writers")
            .env("RUNLOG_TWO_WRITERS_STORE", dir)
            .env("RUNLOG_TWO_WRITERS_SEED", seed.to_string()),
    )
}

/// Checks the whole log against the acknowledged events; returns the last seq.
fn check(store: &Store, acked: &BTreeMap<u64, String>) -> u64 {
    let run = run_id();
    let mut after = 0;
    let mut got = BTreeMap::new();
    loop {
        let page = store.read(&run, after, 500).unwrap();
        for e in &page.events {
            assert_eq!(e.seq, after + 1, "density");
            after = e.seq;
            let text = String::from_utf8(e.payload.to_vec()).unwrap();
            let tag = text.split(' ').next().unwrap().to_string();
            got.insert(e.seq, tag);
        }
        if !page.has_more {
            break;
        }
    }
    for (seq, tag) in acked {
        assert_eq!(
            got.get(seq),
            Some(tag),
            "acknowledged seq {seq} lost or changed"
        );
    }
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    after
}

#[test]
fn kill_nine_with_preallocation_keeps_every_acked_event() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_id();
    Store::open(dir.path(), config())
        .unwrap()
        .create_run(&run)
        .unwrap();
    // A long-lived handle of this process: it must see every acknowledged event (rule 6).
    let watcher = Store::open(dir.path(), config()).unwrap();
    let mut rng = StdRng::seed_from_u64(0xb2ea_4e12);
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    for round in 0..ROUNDS {
        let mut kids: Vec<Piped> = (0..2)
            .map(|k| spawn(dir.path(), (round * 2 + k) as u64))
            .collect();
        let want = rng.random_range(5..60);
        let mut seen = 0;
        while seen < want {
            let mut any = false;
            for kid in &kids {
                while let Ok(line) = kid.lines.try_recv() {
                    any = true;
                    let mut f = line.split(' ');
                    if f.next() == Some("ack") {
                        seen += 1;
                        let seq: u64 = f.next().unwrap().parse().unwrap();
                        let tag = f.next().unwrap().to_string();
                        if let Some(old) = acked.insert(seq, tag.clone()) {
                            panic!("seq {seq} acknowledged twice: {old} and {tag}");
                        }
                    }
                }
            }
            if !any {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Kill both at whatever point they reached (SIGKILL).
        for kid in &mut kids {
            kid.child.kill().unwrap();
            kid.child.wait().unwrap();
        }
        // Lines printed before the kill still count as acknowledged.
        for kid in &kids {
            while let Ok(line) = kid.lines.recv_timeout(Duration::from_millis(200)) {
                let mut f = line.split(' ');
                if f.next() == Some("ack") {
                    let seq: u64 = f.next().unwrap().parse().unwrap();
                    let tag = f.next().unwrap().to_string();
                    if let Some(old) = acked.insert(seq, tag.clone()) {
                        panic!("seq {seq} acknowledged twice: {old} and {tag}");
                    }
                }
            }
        }
        let max_acked = acked.keys().next_back().copied().unwrap_or(0);
        let seen_by_watcher = watcher.last_seq(&run).unwrap();
        assert!(
            seen_by_watcher >= max_acked,
            "round {round}: open handle sees last seq {seen_by_watcher}, seq {max_acked} was acknowledged"
        );
        let fresh = Store::open(dir.path(), config()).unwrap();
        let last = check(&fresh, &acked);
        assert!(last >= max_acked);
        check(&watcher, &acked);
    }
    let store = Store::open(dir.path(), config()).unwrap();
    let last = check(&store, &acked);
    let next = store
        .append_facts(&run, vec![NewEvent::new("step_completed", "final")])
        .unwrap();
    assert_eq!(next[0].seq, last + 1);
    let info = store.run_info(&run).unwrap();
    assert!(info.segment_count > 1, "no roll happened");
    assert!(acked.len() >= ROUNDS * 5, "only {} acks", acked.len());
    eprintln!("{} acked, {info:?}", acked.len());
}
