//! A run left mid-roll: its last segment sealed (and, with preallocation, cut to its committed
//! length) but its successor never created, the state a writer killed between the seal and
//! the next segment's creation leaves (SPEC §5 step 3).
//!
//! In that state a rejected fenced append creates no file and changes no byte (rule 2),
//! readers see the whole log, and the next accepted append, from any handle, re-seals, creates
//! the next segment and continues the seqs densely.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::OpenHookFs;
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

/// Made deterministic with `OpenHookFs`: handle A fails to create `seg-00000002.log.tmp` once,
/// after sealing segment 1. Handle B (its own lock-file descriptor, segment 1 cached as
/// unsealed, as another process would have it) is fenced without a byte changed, then
/// continues at `n + 1`; A continues after its failed roll too, and every handle and a fresh
/// one read `1..=n + 3` with `verify_run` clean.
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

/// Every file of `dir` with its bytes, the lock file included.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Rule 2 on a sealed tail without successor, left on disk by removing segment 3 after three
/// rolls (segment 2 sealed at seq 2): a fenced append that is rejected neither re-seals segment
/// 2 nor creates segment 3, and leaves the lock file as it was.
#[test]
fn rejected_fenced_append_on_sealed_tail_without_successor_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let config = Config {
        segment_len_bytes_max: 4096 + 10,
        ..Config::default()
    };
    let run = RunId::new("r").unwrap();
    {
        let store = Store::open(&path, config.clone()).unwrap();
        store.create_run(&run).unwrap();
        for kind in ["a", "b", "c"] {
            // Each append after the first rolls: seals the full segment, starts the next.
            store
                .append_facts(&run, vec![NewEvent::new(kind, "p")])
                .unwrap();
        }
    }
    let run_dir = path.join("runs/r");
    std::fs::remove_file(run_dir.join("seg-00000003.log")).unwrap();

    let store = Store::open(&path, config).unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 2);
    let before = files(&run_dir);

    let got = store.append_decisions(&run, 0, vec![NewEvent::new("d", "p")]);

    assert!(matches!(
        got,
        Err(Error::Fenced {
            expected: 0,
            actual: 2,
            ..
        })
    ));
    let after = files(&run_dir);
    let changed: BTreeSet<&String> = after
        .keys()
        .chain(before.keys())
        .filter(|name| after.get(*name) != before.get(*name))
        .collect();
    assert!(
        changed.is_empty(),
        "files changed by a rejected append: {changed:?}"
    );
}
