//! An owned event stays what it was read as: a handle reads events and keeps them while
//! another handle (or process: `runlog repair --cut`) repairs the run, cutting those events
//! away, and the run then grows again over the cut bytes and seals its segment. The kept
//! payloads still read their own bytes, and touching them never kills the process.
//!
//! Payloads used to be views of the mapped segment: a repair that truncated the segment made
//! touching a kept payload a SIGBUS; writing zeros over the cut bytes instead made it read
//! zeros, then the bytes of the new events written over them, and the SIGBUS came back at the
//! segment's seal, which truncates (found by breakers, branches break-index and
//! break-repair-2). `read` now copies a page's payloads out of the map into one buffer of
//! its own. A failure of the sealing test shows as that signal.

mod common;

use runlog::{Config, NewEvent, RunId, Store};

/// A run of one small event and `big` events of `len` bytes (`i + 1` each), kept by a
/// reader; then the second batch damaged and the run repaired by another `Store` (1 kept).
fn keep_then_repair(
    config: &Config,
    big: u8,
    len: usize,
) -> (tempfile::TempDir, Store, Vec<runlog::Event>) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    let reader = Store::open(dir.path(), config.clone()).unwrap();
    reader.create_run(&run).unwrap();
    reader
        .append_facts(&run, vec![NewEvent::new("small", &b"{}"[..])])
        .unwrap();
    for i in 0..big {
        reader
            .append_facts(&run, vec![NewEvent::new("big", vec![i + 1; len])])
            .unwrap();
    }
    let kept = reader.read(&run, 0, 1000).unwrap().events;
    assert_eq!(kept.len(), usize::from(big) + 1);
    let seg = dir.path().join("runs/r/seg-00000001.log");
    let bytes = std::fs::read(&seg).unwrap();
    let second = common::batch_offsets_in(&bytes)[1] as usize;
    common::flip(&seg, common::middle_of_batch(&bytes, second) as u64, 0x20);
    let repairer = Store::open(dir.path(), config.clone()).unwrap();
    let repair = repairer.repair_run(&run).unwrap().expect("damaged");
    assert_eq!(repair.last_seq, 1);
    // The reader's next read sees the repaired run.
    let page = reader.read(&run, 0, 100).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1]
    );
    (dir, repairer, kept)
}

/// Each kept payload still holds its own bytes.
#[track_caller]
fn intact(kept: &[runlog::Event], len: usize) {
    assert_eq!(&kept[0].payload[..], b"{}");
    for (i, e) in kept[1..].iter().enumerate() {
        assert_eq!(e.payload.len(), len);
        assert!(
            e.payload.iter().all(|&b| usize::from(b) == i + 1),
            "payload of seq {} changed",
            e.seq
        );
    }
}

#[test]
fn kept_payloads_of_cut_events_keep_their_bytes_after_the_repair() {
    let (_dir, s, kept) = keep_then_repair(&Config::default(), 16, 8 << 10);
    intact(&kept, 8 << 10);
    let run = RunId::new("r").unwrap();
    assert_eq!(
        s.append_facts(&run, vec![NewEvent::new("after", &b"{}"[..])])
            .unwrap()[0]
            .seq,
        2
    );
    assert!(s.verify_run(&run).unwrap().problems.is_empty());
}

#[test]
fn kept_payloads_never_turn_into_the_bytes_of_the_events_written_over_the_cut() {
    let (_dir, s, kept) = keep_then_repair(&Config::default(), 16, 8 << 10);
    let run = RunId::new("r").unwrap();
    for _ in 0..16 {
        s.append_facts(&run, vec![NewEvent::new("new", vec![0x77u8; 8 << 10])])
            .unwrap();
    }
    intact(&kept, 8 << 10);
}

#[test]
fn kept_payloads_never_fault_after_the_repaired_segment_seals() {
    let config = Config {
        segment_len_bytes_max: 256 << 10,
        ..Config::default()
    };
    // 3 payloads of 100 KiB in segment 1 (~300 KiB: the third goes past the 256 KiB
    // maximum); the repaired run seals at ~256 KiB, below the last one's last pages.
    let (dir, s, kept) = keep_then_repair(&config, 3, 100 << 10);
    let run = RunId::new("r").unwrap();
    let mut n = 0;
    while !dir.path().join("runs/r/seg-00000002.log").exists() {
        s.append_facts(&run, vec![NewEvent::new("new", vec![1u8; 4 << 10])])
            .unwrap();
        n += 1;
    }
    assert!(n > 10, "sealed after {n} appends");
    // Touch every byte (what a caller serializing them would do).
    intact(&kept, 100 << 10);
}
