//! An event's payload is a view of the mapped segment. A handle that read events and kept
//! them, while another handle (or process: the CLI's `runlog repair --cut`) repairs the run
//! and cuts those events away, must not die touching them: the repair writes zeros over the
//! bytes it cuts and keeps the file's length. It used to truncate the segment, and touching a
//! kept payload whose page lay wholly past the new end killed the process with SIGBUS (a
//! failure of this test shows as that signal). The cut events' payloads then read zeros;
//! every read of the run returns the repaired run.

mod common;

use std::os::unix::fs::FileExt;

use runlog::{Config, NewEvent, RunId, Store};

const PAYLOAD: usize = 8 << 10;

#[test]
fn a_kept_payload_of_a_cut_event_reads_zeros_instead_of_killing_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    let reader = Store::open(dir.path(), Config::default()).unwrap();
    reader.create_run(&run).unwrap();
    reader
        .append_facts(&run, vec![NewEvent::new("small", &b"{}"[..])])
        .unwrap();
    for i in 0..16u8 {
        reader
            .append_facts(&run, vec![NewEvent::new("big", vec![i + 1; PAYLOAD])])
            .unwrap();
    }
    let kept = reader.read(&run, 0, 100).unwrap().events;
    assert_eq!(kept.len(), 17);
    let last = kept.last().unwrap().payload.clone();
    assert!(last.iter().all(|&b| b == 16));

    // Damage in the second batch (the first big event): a repair keeps only seq 1, and the
    // bytes of the later payloads lie pages past the cut.
    let seg = dir.path().join("runs/r/seg-00000001.log");
    let at = common::batch_offsets(&seg)[1] + 40;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x20], at).unwrap();
    drop(f);

    let repairer = Store::open(dir.path(), Config::default()).unwrap();
    let repair = repairer.repair_run(&run).unwrap().expect("damaged");
    assert_eq!(repair.last_seq, 1);

    // The kept payload: still there to touch, now zeros (its batch was cut).
    assert_eq!(last.len(), PAYLOAD);
    assert!(last.iter().all(|&b| b == 0), "a cut payload reads zeros");
    // The reader's next read sees the repaired run, and the run takes writes at seq 2.
    let page = reader.read(&run, 0, 100).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1]
    );
    let seqs = reader
        .append_facts(&run, vec![NewEvent::new("after", &b"{}"[..])])
        .unwrap();
    assert_eq!(seqs[0].seq, 2);
    assert!(repairer.verify_run(&run).unwrap().problems.is_empty());
}
