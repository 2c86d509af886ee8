//! A writer whose previous commit left the run's lock file in a state it knows skips its
//! refresh when the commit slots are unchanged (format/SPEC.md §5, the unchanged-slots
//! shortcut). These cases prove what that may not skip: a seal made by another writer that
//! failed before it created the next segment, and a cut marker left by another writer whose
//! cut-back sync failed. Both writers are two stores on one simulated file system (two open
//! file descriptions, so their run locks exclude each other as two processes' would).

use std::sync::Arc;

use runlog::io::sim::{CallKind, CrashPolicy, Fault, FaultKind, SimFs, Trigger};
use runlog::{Config, NewEvent, RunId, Store};

const ROOT: &str = "/store";
const SEGMENT_MAX: u64 = 16 << 10;

fn open(fs: &SimFs) -> Store {
    open_rolling_at(fs, SEGMENT_MAX)
}

fn open_rolling_at(fs: &SimFs, segment_len_bytes_max: u64) -> Store {
    let config = Config {
        segment_len_bytes_max,
        ..Config::default()
    };
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, config).unwrap()
}

fn run() -> RunId {
    RunId::new("r1").unwrap()
}

fn fact(payload: String) -> Vec<NewEvent> {
    vec![NewEvent::new("step_completed", payload)]
}

fn segment_len(fs: &SimFs, index: u32) -> Option<usize> {
    let path = format!("{ROOT}/runs/r1/seg-{index:08}.log");
    fs.live_files().get(&path).map(Vec::len)
}

fn payloads(store: &Store) -> Vec<String> {
    let page = store.read(&run(), 0, 1000).unwrap();
    assert!(!page.has_more);
    page.events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
        .collect()
}

/// Writer B (segments of 16 KiB) seals the full segment 1, after announcing it in the lock
/// file, and fails to create segment 2. Writer A (segments of 1 MiB: a process with another
/// config, so nothing in its own view says a roll is due) committed last before B: at its
/// next commit it must see the seal and write segment 2, not past segment 1's seal, where no
/// reader would ever find its acknowledged event.
#[test]
fn a_warm_writer_sees_a_seal_whose_writer_failed_before_the_next_segment() {
    let fs = SimFs::new(11);
    let a = open_rolling_at(&fs, 1 << 20);
    a.create_run(&run()).unwrap();
    let b = open(&fs);
    let mut n = 0;
    let body = "x".repeat(1000);
    // Segment 1's committed length (the header and its batches; the file goes on with the
    // zeros of its block, SPEC §5) reaches the roll.
    while 4096 + b.run_info(&run()).unwrap().committed_bytes < SEGMENT_MAX {
        b.append_facts(&run(), fact(format!("{n} {body}"))).unwrap();
        n += 1;
    }
    // A's commit: its view is now current, and its copy of the commit slots too.
    a.append_facts(&run(), fact("a-before-seal".into()))
        .unwrap();
    // B's next commit rolls: seal synced, then the new segment's fsync fails.
    let fsync = fs.call_count(CallKind::SyncAll);
    fs.inject(Fault::once(
        Trigger::Call(CallKind::SyncAll, fsync),
        FaultKind::Eio,
    ));
    b.append_facts(&run(), fact("b-rolls".into())).unwrap_err();
    assert_eq!(segment_len(&fs, 2), None, "segment 2 was not created");
    drop(b);
    let after = a.append_facts(&run(), fact("a-after-seal".into())).unwrap();
    assert_eq!(after[0].seq, n + 2);
    assert!(segment_len(&fs, 2).is_some(), "A's event went to segment 2");
    drop(a);
    let fresh = open(&fs);
    let got = payloads(&fresh);
    assert_eq!(got.len() as u64, n + 2);
    assert_eq!(got.last().map(String::as_str), Some("a-after-seal"));
    let report = fresh.verify_run(&run()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Writer B's group write fails its fdatasync, and so does the sync of its cut back (the
/// truncation itself succeeded): B leaves a cut marker. Writer A, warm, must apply and remove
/// the marker at its next commit. Were the marker left, a power loss that takes the lock
/// file's unsynced commit slots would have recovery apply it against the older header
/// checkpoint and cut A's acknowledged event.
#[test]
fn a_warm_writer_applies_a_cut_marker_before_committing_past_it() {
    let fs = SimFs::new(12);
    let a = open(&fs);
    a.create_run(&run()).unwrap();
    a.append_facts(&run(), fact("a1".into())).unwrap();
    a.append_facts(&run(), fact("a2".into())).unwrap();
    let b = open(&fs);
    let sync = fs.call_count(CallKind::SyncData);
    for at in [sync, sync + 1] {
        fs.inject(Fault::once(
            Trigger::Call(CallKind::SyncData, at),
            FaultKind::Eio,
        ));
    }
    b.append_facts(&run(), fact("b-failed".into())).unwrap_err();
    let marker = format!("{ROOT}/runs/r1/cut-pending");
    assert!(fs.live_files().contains_key(&marker), "B left a cut marker");
    let acked = a.append_facts(&run(), fact("a3".into())).unwrap();
    assert_eq!(acked[0].seq, 3);
    assert!(
        !fs.live_files().contains_key(&marker),
        "A applied and removed the marker"
    );
    drop((a, b));
    fs.crash_with(CrashPolicy::DropUnsynced);
    let fresh = open(&fs);
    assert_eq!(payloads(&fresh), ["a1", "a2", "a3"]);
}
