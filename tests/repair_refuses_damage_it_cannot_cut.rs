//! `repair_run` on damage in a sealed segment: refused as `Corrupt` naming the segment and
//! offset (the damage is not cut: that would orphan the segments after it), never
//! `Ok(None)` ("nothing to repair") while `verify_run` and `read` report the damage. A sealed
//! segment with an index is taken from its index by the repair's catch-up, not decoded, so
//! before the fix the repair did not see damage in its batches.

mod common;

use std::path::Path;

use runlog::{Config, Error, NewEvent, RunId, Store};

fn config() -> Config {
    Config {
        segment_len_bytes_max: 64 << 10,
        ..Config::default()
    }
}

/// A run of `n` single facts of 1,000 B, in sealed segments of 64 KiB and an open one.
fn run_over_segments(dir: &Path, run: &RunId, n: usize) {
    let s = Store::open(dir, config()).unwrap();
    s.create_run(run).unwrap();
    for i in 0..n {
        s.append_facts(run, vec![NewEvent::new(format!("k{i}"), vec![b'x'; 1000])])
            .unwrap();
    }
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn damage_in_an_indexed_sealed_segment_is_refused_as_corrupt_not_nothing_to_repair() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    run_over_segments(dir.path(), &run, 200);
    let run_dir = dir.path().join("runs").join("r");
    assert!(
        run_dir.join("seg-00000003.log").exists(),
        "want 3 segments or more"
    );
    assert!(
        run_dir.join("seg-00000001.idx").exists(),
        "segment 1 is sealed and indexed"
    );
    // A byte inside the middle batch of segment 1.
    let seg1 = run_dir.join("seg-00000001.log");
    let batches: Vec<usize> = common::batch_offsets(&seg1)
        .into_iter()
        .map(|at| at as usize)
        .collect();
    assert!(
        batches.len() > 10,
        "segment 1 holds {} batches",
        batches.len()
    );
    flip(&seg1, batches[batches.len() / 2] as u64 + 40);

    let s = Store::open(dir.path(), config()).unwrap();
    let report = s.verify_run(&run).unwrap();
    let problem = report
        .problems
        .first()
        .unwrap_or_else(|| panic!("verify reports the damage: {report:?}"));
    assert_eq!(problem.segment, "seg-00000001.log");

    match s.repair_run(&run) {
        Err(Error::Corrupt {
            segment, detail, ..
        }) => {
            assert_eq!(segment, "seg-00000001.log");
            assert!(detail.contains("sealed segment"), "{detail}");
        }
        other => panic!("repair of sealed damage: {other:?}"),
    }
    // Nothing was cut: the segment files are all there and the damage is still reported.
    assert!(run_dir.join("seg-00000003.log").exists());
    assert_eq!(
        s.verify_run(&run).unwrap().problems.len(),
        report.problems.len()
    );
    assert!(
        !dir.path().join("repair").exists()
            || std::fs::read_dir(dir.path().join("repair"))
                .unwrap()
                .next()
                .is_none()
    );
}
