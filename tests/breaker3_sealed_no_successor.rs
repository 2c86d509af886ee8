//! Breaker round 3: a segment sealed (and truncated: preallocation on) whose successor was
//! never created — the state a writer killed between seal and next-segment creation leaves
//! (SPEC §5 step 3). Made deterministic with an `Fs` wrapper that fails the creation of
//! `seg-00000002.log.tmp` once, in handle A; handle B (another "process", own lock-file
//! descriptor, seg 1 cached as unsealed) then continues.
//!
//! Pins (passes on the current code): while seg 1 is sealed without successor, a fenced
//! rejection creates no file and changes no byte (rule 2) and readers see the full log; the
//! next accepted append (from B, whose cached view predates the seal) re-seals, creates seg 2
//! and continues the seqs densely; A, which failed mid-roll, continues afterwards too.

mod common;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::OpenHookFs;
use runlog::{Config, Error, NewEvent, RunId, Store};

fn cfg() -> Config {
    Config {
        segment_len_bytes_max: 4096 + 600,
        preallocate_from_bytes: 0,
        ..Config::default()
    }
}

fn ev(i: u64) -> NewEvent {
    NewEvent::new("step_completed", format!("{i:>60}"))
}

fn seg(dir: &Path, run: &RunId, i: u32) -> PathBuf {
    dir.join("runs")
        .join(run.as_str())
        .join(format!("seg-{i:08}.log"))
}

fn snapshot(dir: &Path, run: &RunId) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("runs").join(run.as_str()))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "lock")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn seqs(store: &Store, run: &RunId) -> Vec<u64> {
    let page = store.read(run, 0, 1000).unwrap();
    for e in &page.events {
        assert_eq!(e.payload, format!("{:>60}", e.seq).as_bytes());
    }
    page.events.iter().map(|e| e.seq).collect()
}

#[test]
fn a_seal_without_successor_is_continued_by_another_handle() {
    let dir = tempfile::tempdir().unwrap();
    let run = RunId::new("wrun_sealonly").unwrap();
    let fs = Arc::new(OpenHookFs::default());
    let a = Store::open_with_fs(fs.clone(), dir.path(), cfg()).unwrap();
    a.create_run(&run).unwrap();
    let b = Store::open(dir.path(), cfg()).unwrap();
    let mut n = 0;
    // Fill seg 1 past the threshold; B caches it (unsealed).
    while a.run_info(&run).unwrap().committed_bytes < 600 {
        n += 1;
        assert_eq!(a.append_facts(&run, vec![ev(n)]).unwrap()[0].seq, n);
    }
    assert_eq!(b.last_seq(&run).unwrap(), n);
    let seg1_len = std::fs::metadata(seg(dir.path(), &run, 1)).unwrap().len();
    assert!(seg1_len > 4096 + 600, "seg 1 is preallocated ({seg1_len})");
    *fs.hook.lock() = Some(Box::new(|path: &Path, _| {
        let hit = path
            .file_name()
            .is_some_and(|n| n == "seg-00000002.log.tmp");
        hit.then(|| Err(io::Error::other("injected: killed before the next segment")))
    }));
    let failed = a.append_facts(&run, vec![ev(n + 1)]);
    assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
    assert!(fs.hook.lock().is_none());
    // Sealed and cut to its committed length, no successor.
    assert!(!seg(dir.path(), &run, 2).exists());
    let sealed_len = std::fs::metadata(seg(dir.path(), &run, 1)).unwrap().len();
    assert!(sealed_len < seg1_len);
    assert_eq!(b.last_seq(&run).unwrap(), n);
    assert_eq!(seqs(&b, &run), (1..=n).collect::<Vec<_>>());
    // A rejected decision changes nothing (rule 2).
    let before = snapshot(dir.path(), &run);
    let fenced = b.append_decisions(&run, n - 1, vec![ev(n + 1)]);
    assert!(matches!(fenced, Err(Error::Fenced { .. })), "{fenced:?}");
    assert_eq!(snapshot(dir.path(), &run), before);
    // B continues: re-seal, seg 2, seq n+1.
    assert_eq!(
        b.append_decisions(&run, n, vec![ev(n + 1)]).unwrap(),
        [n + 1]
    );
    assert!(seg(dir.path(), &run, 2).exists());
    // A continues after its failed roll.
    assert_eq!(a.append_facts(&run, vec![ev(n + 2)]).unwrap()[0].seq, n + 2);
    assert_eq!(b.append_facts(&run, vec![ev(n + 3)]).unwrap()[0].seq, n + 3);
    let want: Vec<u64> = (1..=n + 3).collect();
    assert_eq!(seqs(&a, &run), want);
    assert_eq!(seqs(&b, &run), want);
    let fresh = Store::open(dir.path(), cfg()).unwrap();
    assert_eq!(seqs(&fresh, &run), want);
    assert_eq!(fresh.verify_run(&run).unwrap().problems, vec![]);
}
