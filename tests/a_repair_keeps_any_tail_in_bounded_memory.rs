//! `repair_run` keeps the bytes it cuts (from the first bad batch to the segment's end) in a
//! file of their own before it cuts them. A segment an outside hand made longer (sparse,
//! 256 MiB here) is copied in chunks: the whole tail is kept, byte for byte, and no buffer
//! is sized by the file's length (before, one allocation held the whole tail: 256 MiB here,
//! on a larger file enough to abort the process, a Node process with the addon). The cut
//! writes zeros only where a byte was, so the extension is not filled with written zeros.
//!
//! The largest single allocation is measured by a counting allocator around the system one.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::Ordering;

use runlog::{Config, NewEvent, RunId, Store};

#[path = "common/largest_allocation.rs"]
mod largest_allocation;

use largest_allocation::LARGEST;

const EXTRA: u64 = 256 << 20;

/// Single facts; returns each one's batch offset.
fn run_of_single_facts(dir: &Path, run: &RunId, n: usize) -> Vec<u64> {
    let store = Store::open(dir, Config::default()).unwrap();
    store.create_run(run).unwrap();
    let mut offsets = Vec::new();
    for i in 0..n {
        offsets.push(4096 + store.run_info(run).unwrap().committed_bytes);
        let e = NewEvent::new("step_completed", format!("{{\"i\":{i:04}}}"));
        store.append_facts(run, vec![e]).unwrap();
    }
    offsets
}

#[test]
fn a_sparse_extension_past_the_damage_is_kept_whole_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("r").unwrap();
    let offsets = run_of_single_facts(dir.path(), &run, 20);
    let path = dir.path().join("runs/r/seg-00000001.log");
    // Batch 13 damaged in its middle; the file then made 256 MiB longer, a few bytes written
    // near its new end.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let at = (offsets[12] + offsets[13]) / 2;
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x20]).unwrap();
    let len = f.metadata().unwrap().len() + EXTRA;
    f.set_len(len).unwrap();
    f.seek(SeekFrom::Start(len - 10)).unwrap();
    f.write_all(b"far bytes").unwrap();
    drop(f);

    let store = Store::open(dir.path(), Config::default()).unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    let done = store
        .repair_run(&run)
        .unwrap()
        .expect("the run was damaged");
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(largest < 64 << 20, "an allocation of {largest} bytes");

    assert_eq!((done.offset, done.last_seq), (offsets[12], 12));
    assert_eq!(done.saved_bytes, len - offsets[12]);
    let mut kept = std::fs::File::open(&done.saved).unwrap();
    assert_eq!(kept.metadata().unwrap().len(), len - offsets[12]);
    // Its start is the damaged batch's, its end the bytes written 256 MiB further.
    let mut start = vec![0u8; 64];
    kept.read_exact(&mut start).unwrap();
    kept.seek(SeekFrom::End(-10)).unwrap();
    let mut end = [0u8; 10];
    kept.read_exact(&mut end).unwrap();
    assert_eq!(&end[..9], b"far bytes");
    assert_eq!(
        &start[..2],
        b"R3",
        "the cut starts at the damaged batch (its magic)"
    );
    assert_eq!(store.read(&run, 0, 100).unwrap().events.len(), 12);
    // The cut wrote zeros where bytes were, not over the holes: the segment still occupies
    // about what it did (its 64 KiB of preallocation and the far bytes' block), and so does
    // the file the tail was kept in.
    use std::os::unix::fs::MetadataExt;
    for file in [&path, &done.saved] {
        let used = std::fs::metadata(file).unwrap().blocks() * 512;
        assert!(used < 8 << 20, "{} occupies {used} bytes", file.display());
    }
}
