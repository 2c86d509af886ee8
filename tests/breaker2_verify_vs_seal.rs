//! Breaker round 2: `verify_run` (no run lock) racing a writer whose seals truncate
//! preallocated zeros.
//!
//! Regression: `verify::verify_segment` mapped the *whole file* (`seg.file.map(file_len)`)
//! and `note_tail` read every byte past the counter to tell preallocated zeros from a torn tail. With
//! preallocation, the live segment's file is routinely longer than its counter, and sealing
//! (`commit.rs` `seal`: `set_len(committed_len)`) cuts those zeros away while another handle
//! may be verifying: touching mapped pages past the new end raised SIGBUS and killed the
//! verifying process (6 of 6 runs before the fix: verify now maps only the committed region
//! and reads the tail with `read_at`) instead of giving a report or a typed error (`segment.rs` avoids this on
//! the read path by mapping no further than the committed length).
//!
//! A race: this test can only fail, never pass wrongly; when it fails it dies of SIGBUS
//! (signal 7). Bounded: 1,500 appends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use runlog::{Config, NewEvent, RunId, Store};

#[test]
fn verify_during_seals_of_preallocated_segments_does_not_crash() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        segment_len_bytes_max: 1 << 20,
        preallocate_from_bytes: 0,
        ..Config::default()
    };
    let run = RunId::new("wrun_verify_race").unwrap();
    let writer = Store::open(dir.path(), cfg.clone()).unwrap();
    writer.create_run(&run).unwrap();
    let verifier = Store::open(dir.path(), cfg).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let v = {
        let (done, run) = (done.clone(), run.clone());
        std::thread::spawn(move || {
            let mut reports = 0u64;
            while !done.load(Ordering::Relaxed) {
                let r = verifier.verify_run(&run).unwrap();
                assert!(r.problems.is_empty(), "{r:?}");
                reports += 1;
            }
            reports
        })
    };
    for i in 0..1500 {
        let e = NewEvent::new("step_completed", vec![b'p'; 16_000 + i % 7]);
        writer.append_facts(&run, vec![e]).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let reports = v.join().unwrap();
    assert!(reports > 0);
    assert!(writer.run_info(&run).unwrap().segment_count > 5);
}
