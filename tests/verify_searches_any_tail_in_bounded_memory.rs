//! `verify_run` reads what lies past a segment's counter to tell a torn tail (the next
//! writer cuts it) from corruption (a valid batch follows the bad bytes). It does so in
//! bounded memory, whatever the tail's bytes claim and however long the file: before, a
//! torn tail starting with a batch magic sized a buffer by the length it claimed (as far as
//! the file goes: 200 MiB here), and the search past it held the whole rest of the file
//! (256 MiB here; on a larger file enough to abort the process, a Node process with the
//! addon). Now a claimed length sizes a buffer only once the bytes hold their checksum.
//!
//! The largest single allocation is measured by a counting allocator around the system one.

use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::Ordering;

use runlog::{Config, NewEvent, RunId, Store};

#[path = "common/largest_allocation.rs"]
mod largest_allocation;

use largest_allocation::LARGEST;

const EXTRA: u64 = 256 << 20;

/// A run of 20 single facts, then bytes past its counter: `torn` at the committed length,
/// and the file made `EXTRA` longer (sparse) with `far` written near its new end.
fn run_with_tail(dir: &std::path::Path, torn: &[u8], far: &[u8]) -> (RunId, u64) {
    let run = RunId::new("r").unwrap();
    let committed = {
        let store = Store::open(dir, Config::default()).unwrap();
        store.create_run(&run).unwrap();
        for i in 0..20 {
            let e = NewEvent::new("step_completed", format!("{{\"i\":{i:04}}}"));
            store.append_facts(&run, vec![e]).unwrap();
        }
        4096 + store.run_info(&run).unwrap().committed_bytes
    };
    let path = dir.join("runs/r/seg-00000001.log");
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(committed)).unwrap();
    f.write_all(torn).unwrap();
    let len = f.metadata().unwrap().len() + EXTRA;
    f.set_len(len).unwrap();
    f.seek(SeekFrom::Start(len - far.len() as u64 - 1)).unwrap();
    f.write_all(far).unwrap();
    (run, committed)
}

#[test]
fn a_torn_tail_claiming_four_gib_before_a_sparse_extension_is_verified_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    // A batch magic claiming 200 MiB (within the file), then garbage: a torn write, as a
    // power loss leaves it; past it a second one claiming 4 GiB - 1.
    // (A version-3 batch: its magic `R3`, then its length as a varint, SPEC §4b.)
    let varint = |mut v: u64, out: &mut Vec<u8>| {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    };
    let mut torn = b"R3".to_vec();
    varint(200 << 20, &mut torn);
    torn.extend_from_slice(&[0x5a; 200]);
    torn.extend_from_slice(b"R3");
    varint(u64::from(u32::MAX), &mut torn);
    torn.extend_from_slice(&[0x5a; 200]);
    let (run, committed) = run_with_tail(dir.path(), &torn, b"far bytes");
    let store = Store::open_read_only(dir.path(), Config::default()).unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    let report = store.verify_run(&run).unwrap();
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < 8 << 20, "an allocation of {largest} bytes");
    assert_eq!(report.events, 20);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // The torn tail is noted where it starts.
    assert!(
        report.notes.iter().any(|n| n.offset == committed),
        "{:?}",
        report.notes
    );
}
