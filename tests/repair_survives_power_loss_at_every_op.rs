//! A repair cut short at any of its file operations — power loss under five crash policies
//! (the durable image, the live one, three random fates of the unsynced writes), or an EIO or
//! ENOSPC there without a crash — never loses or invents an event: a fresh open reads exactly
//! the events before the damaged batch (or, without a crash, at least those, unchanged); a
//! repair again then succeeds or finds nothing, the run verifies, holds exactly those events
//! and takes the next seq. With the damage in segment 1 and in a later segment. (The repair
//! writes zeros over the bytes it cuts instead of truncating them, and announces itself in
//! the commit slots first, format/SPEC.md §6.)

mod common;

use std::path::Path;
use std::sync::Arc;

use runlog::io::sim::{CrashPolicy, Fault, FaultKind, SimFs, Trigger};
use runlog::io::{Fs, OpenMode};
use runlog::{Config, NewEvent, RunId, Store};

fn run() -> RunId {
    RunId::new("cut").unwrap()
}

fn keyed(i: u64) -> NewEvent {
    NewEvent::new(format!("kind_{i}"), format!("{{\"i\":{i}}}")).key(format!("key_{i}"))
}

/// What a handle reads: (seq, kind) of every event, or the error.
fn listing(store: &Store) -> Result<Vec<(u64, String)>, String> {
    store
        .read(&run(), 0, usize::MAX)
        .map(|p| {
            p.events
                .iter()
                .map(|e| (e.seq, e.kind.to_string()))
                .collect()
        })
        .map_err(|e| e.to_string())
}

#[test]
fn power_loss_or_an_error_at_every_op_of_a_repair_of_segment_1() {
    sweep(Config::default(), 1);
}

#[test]
fn power_loss_or_an_error_at_every_op_of_a_repair_of_a_later_segment() {
    let config = Config {
        segment_len_bytes_max: 4096 + 600,
        ..Config::default()
    };
    sweep(config, 2);
}

fn sweep(config: Config, min_segments: usize) {
    let root = Path::new("/s");
    let fs = SimFs::new(11);
    let open =
        |fs: &SimFs| Store::open_with_fs(Arc::new(fs.clone()), root, config.clone()).unwrap();
    let s = open(&fs);
    s.create_run(&run()).unwrap();
    for i in 0..20 {
        s.append_facts(&run(), vec![keyed(i)]).unwrap();
    }
    drop(s);
    let last = (1..100)
        .take_while(|n| {
            fs.open(
                &root.join(format!("runs/cut/seg-{n:08}.log")),
                OpenMode::Read,
            )
            .is_ok()
        })
        .count();
    assert!(last >= min_segments, "{last} segments");
    // One bit flipped inside a batch of the last segment.
    let seg = root.join(format!("runs/cut/seg-{last:08}.log"));
    let f = fs.open(&seg, OpenMode::ReadWrite).unwrap();
    let b = f.map(f.len().unwrap()).unwrap().to_vec();
    let batches: Vec<usize> = common::batch_offsets_in(&b)
        .iter()
        .map(|&o| o as usize)
        .collect();
    let k = if last == 1 { 5 } else { 1 };
    f.write_all_at(&[b[batches[k] + 30] ^ 1], (batches[k] + 30) as u64)
        .unwrap();
    f.sync_data().unwrap();
    drop(f);
    // The events before the damaged batch, and the ops of one whole repair.
    let probe = fs.fork();
    let repairer = open(&probe);
    let start = probe.op_count();
    let kept = repairer
        .repair_run(&run())
        .unwrap()
        .expect("damaged")
        .last_seq;
    let ops = probe.op_count() - start;
    assert!((1..20).contains(&kept), "kept {kept}");
    let want: Vec<(u64, String)> = (0..kept).map(|i| (i + 1, format!("kind_{i}"))).collect();

    let policies = [
        CrashPolicy::DropUnsynced,
        CrashPolicy::KeepUnsynced,
        CrashPolicy::Random(1),
        CrashPolicy::Random(2),
        CrashPolicy::Random(3),
    ];
    let mut cases = 0;
    let mut bad = Vec::new();
    for op in start..=start + ops {
        for (pi, policy) in policies.iter().enumerate() {
            for kind in [None, Some(FaultKind::Eio), Some(FaultKind::Enospc)] {
                if kind.is_some() && pi > 0 {
                    continue;
                }
                cases += 1;
                let sim = fs.fork();
                match kind {
                    None => sim.inject(Fault::power_loss(Trigger::Op(op))),
                    Some(k) => sim.inject(Fault::once(Trigger::Op(op), k)),
                }
                let first = open(&sim);
                let r1 = first.repair_run(&run()).map(|r| r.map(|r| r.last_seq));
                let mut problems = Vec::new();
                if kind.is_some() {
                    // No crash: the same handle tries again, then appends; what it was
                    // acknowledged, a fresh open reads.
                    let again = first.repair_run(&run()).map(|r| r.map(|r| r.last_seq));
                    let a = first.append_facts(&run(), vec![NewEvent::new("same_handle", "{}")]);
                    if let Ok(a) = &a {
                        let fl = listing(&open(&sim));
                        if !fl
                            .as_ref()
                            .is_ok_and(|v| v.contains(&(a[0].seq, "same_handle".into())))
                        {
                            problems.push(format!(
                                "again {again:?}: append acked {a:?}, a fresh open reads {fl:?}"
                            ));
                        }
                    }
                    let l = listing(&first);
                    if l.as_ref()
                        .is_ok_and(|v| v.len() < want.len() || v[..want.len()] != want[..])
                    {
                        problems.push(format!("the same handle reads {l:?}"));
                    }
                    drop(first);
                } else {
                    drop(first);
                    sim.crash_with(*policy);
                }
                let s = open(&sim);
                match listing(&s) {
                    Ok(v) if kind.is_none() && v[..] != want[..] => {
                        problems.push(format!("after the crash reads {v:?}"))
                    }
                    Ok(v) if v.len() < want.len() || v[..want.len()] != want[..] => {
                        problems.push(format!("reads {v:?}"))
                    }
                    Err(e) => problems.push(format!("after the crash the read fails: {e}")),
                    Ok(_) => {}
                }
                if kind.is_none() {
                    if let Err(e) = s.repair_run(&run()) {
                        problems.push(format!("repair again: {e}"));
                    }
                    let s = open(&sim);
                    let after = listing(&s);
                    if after.as_ref().ok() != Some(&want) {
                        problems.push(format!("after a repair again reads {after:?}"));
                    }
                    let v = s.verify_run(&run()).unwrap();
                    if !v.problems.is_empty() {
                        problems.push(format!("verify: {:?}", v.problems));
                    }
                    match s.append_facts(&run(), vec![NewEvent::new("after", "{}")]) {
                        Ok(a) if a[0].seq == kept + 1 => {}
                        other => problems.push(format!("append after: {other:?}")),
                    }
                }
                if !problems.is_empty() {
                    bad.push(format!(
                        "op +{} {policy:?} {kind:?}, first repair {r1:?}: {problems:?}",
                        op - start
                    ));
                }
            }
        }
    }
    eprintln!("segment {last}, {kept} events kept, {ops} ops of a repair, {cases} cases");
    assert!(
        ops >= 8 && cases > 5 * ops as usize,
        "{cases} cases over {ops} ops"
    );
    assert!(
        bad.is_empty(),
        "{} of {cases} cases broke:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
