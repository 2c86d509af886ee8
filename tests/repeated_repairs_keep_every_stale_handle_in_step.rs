//! Repeated repairs of one run (repair epochs 1, 2, 3, …), of segment 1 and of a later
//! segment, with and without preallocation, each followed by growth past the old committed
//! and file length and by seals and rolls: a stale handle of every epoch (one opened before
//! each repair) is fenced with the actual tail, appends at the next seq and reads the
//! repaired run; a fresh read and `verify` are clean after every repair. (Written by a
//! breaker, branch break-repair-2: it held.)

mod common;

use std::path::Path;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("cut").unwrap()
}

fn seg_path(dir: &Path, n: u32) -> std::path::PathBuf {
    dir.join(format!("runs/cut/seg-{n:08}.log"))
}

fn last_segment(dir: &Path) -> u32 {
    (1..1000).take_while(|&n| seg_path(dir, n).exists()).count() as u32
}

fn seqs_and_tags(store: &Store) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let p = store.read(&run(), after, 1000).unwrap();
        out.extend(
            p.events
                .iter()
                .map(|e| (e.seq, String::from_utf8_lossy(&e.payload).to_string())),
        );
        after = p.next;
        if !p.has_more {
            break;
        }
    }
    out
}

fn scenario(config: Config, rounds: usize, grow: usize, payload: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let w = Store::open(d, config.clone()).unwrap();
    w.create_run(&run()).unwrap();
    // What the run must hold: (seq, tag).
    let mut model: Vec<(u64, String)> = Vec::new();
    let mut stale: Vec<(Store, u64)> = Vec::new();
    let mut checks = 0;
    let pad = "p".repeat(payload);
    for round in 0..rounds {
        for i in 0..grow {
            let tag = format!("r{round}-{i}-{pad}");
            let seq = w
                .append_facts(&run(), vec![NewEvent::new("e", tag.clone())])
                .unwrap()[0]
                .seq;
            assert_eq!(seq, model.len() as u64 + 1);
            model.push((seq, tag));
        }
        // A handle opened now (reads the whole run), stale after the repair below.
        let h = Store::open(d, config.clone()).unwrap();
        assert_eq!(seqs_and_tags(&h), model);
        stale.push((h, model.len() as u64));
        // Bit rot in the last segment's batch at 3/4 of it.
        let last = last_segment(d);
        let offs = common::batch_offsets(&seg_path(d, last));
        if offs.len() < 2 {
            continue;
        }
        let k = offs.len() * 3 / 4;
        common::flip(&seg_path(d, last), offs[k] + 30, 1);
        let r = Store::open(d, config.clone()).unwrap();
        let done = r.repair_run(&run()).unwrap().expect("damaged");
        drop(r);
        model.truncate(done.last_seq as usize);
        let fresh = Store::open_read_only(d, config.clone()).unwrap();
        assert_eq!(seqs_and_tags(&fresh), model, "round {round}: fresh read");
        let rep = fresh.verify_run(&run()).unwrap();
        assert!(
            rep.problems.is_empty(),
            "round {round}: verify {:?}",
            rep.problems
        );
        checks += 2;
        // Every stale handle: fenced at its old tail, then a fact at the next seq, read whole.
        for (j, (h, old_tail)) in stale.iter().enumerate() {
            let actual = model.len() as u64;
            if *old_tail != actual {
                let got = h.append_decisions(&run(), *old_tail, vec![NewEvent::new("d", "x")]);
                assert!(
                    matches!(got, Err(Error::Fenced { actual: a, .. }) if a == actual),
                    "round {round} handle {j}: fenced at {old_tail} on a run at {actual}: {got:?}"
                );
                checks += 1;
            }
            let tag = format!("stale{j}-round{round}");
            let seq = h
                .append_facts(&run(), vec![NewEvent::new("e", tag.clone())])
                .unwrap()[0]
                .seq;
            assert_eq!(seq, model.len() as u64 + 1, "round {round} handle {j}");
            model.push((seq, tag));
            assert_eq!(seqs_and_tags(h), model, "round {round} handle {j}: read");
            checks += 2;
        }
        for (_, t) in stale.iter_mut() {
            *t = model.len() as u64;
        }
        // The writer too (it opened before every repair).
        assert_eq!(seqs_and_tags(&w), model, "round {round}: writer's read");
        checks += 1;
    }
    let fresh = Store::open(d, config.clone()).unwrap();
    assert_eq!(seqs_and_tags(&fresh), model);
    assert!(fresh.verify_run(&run()).unwrap().problems.is_empty());
    checks + 2
}

#[test]
fn repeated_repairs_one_segment_preallocated() {
    let n = scenario(Config::default(), 6, 40, 50);
    eprintln!("checks held: {n}");
}

#[test]
fn repeated_repairs_no_preallocation() {
    let config = Config {
        preallocate_from_bytes: u64::MAX,
        ..Config::default()
    };
    let n = scenario(config, 6, 40, 50);
    eprintln!("checks held: {n}");
}

#[test]
fn repeated_repairs_with_rolls_and_growth_past_the_old_length() {
    // Small segments: every round rolls; the repaired (last) segment is a later one; the
    // regrowth goes past the old committed and file lengths, and seals the repaired segment.
    let config = Config {
        segment_len_bytes_max: 16 << 10,
        preallocate_from_bytes: 4 << 10,
        ..Config::default()
    };
    let n = scenario(config, 8, 120, 200);
    eprintln!("checks held: {n}");
}
