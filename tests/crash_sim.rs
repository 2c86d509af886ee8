//! Simulated power loss (issue 4 §1–§2): the store over `SimFs`, crashed at every sync point
//! and every op of short workloads, at random points of random workloads (proptest), and
//! with EIO / ENOSPC injected at every op. After every crash the harness checks that each
//! run's log is a whole-batch prefix of what was issued holding every acknowledged append,
//! dense, stable across a second recovery and a second crash, and writable at last + 1.
//!
//! Run with `cargo test --features sim --test crash_sim -- --nocapture` to see the counts.

#[path = "crash_sim/harness.rs"]
mod harness;

use std::collections::BTreeMap;

use harness::{Counts, Ev, Harness, KEYS, Op, PAYLOAD_LEN_MAX, RUNS};
use proptest::prelude::*;
use runlog::NewEvent;
use runlog::io::sim::{CrashPolicy, Fault, FaultKind, SimFs, Trigger};

fn ev(key: Option<u8>, payload_len: u16) -> Ev {
    Ev {
        key,
        id: None,
        corr: false,
        payload_len,
    }
}

/// A short workload touching every write path: run creation, keyed and duplicate facts,
/// caller event ids, an accepted and a fenced decision, a duplicate decision, segment rolls
/// (8 KiB segments), a delete and re-create, and a reopen.
fn scenario() -> Vec<Op> {
    let with_id = Ev {
        id: Some(1),
        corr: true,
        ..ev(None, 10)
    };
    vec![
        Op::CreateRun(0),
        Op::Facts(0, vec![ev(Some(1), 20), ev(None, 30)]),
        Op::CreateRun(1),
        Op::Facts(0, vec![ev(Some(1), 5), ev(Some(2), 1200), with_id.clone()]),
        Op::Decisions(0, false, vec![ev(None, 40), ev(None, 1400), ev(None, 1400)]),
        Op::Decisions(0, true, vec![ev(None, 50)]),
        Op::Decisions(1, false, vec![ev(Some(3), 60)]),
        Op::Facts(0, vec![ev(None, 1500), ev(None, 1500), ev(None, 1500)]),
        Op::Decisions(1, false, vec![ev(Some(3), 70)]),
        Op::Facts(0, vec![ev(Some(2), 1), with_id, ev(None, 1500)]),
        Op::DeleteRun(1),
        Op::Facts(1, vec![ev(None, 5)]),
        Op::CreateRun(1),
        Op::Reopen,
        // Key 2 again, and a new key: looked up in run 0's open-segment index (SPEC §9).
        Op::Facts(0, vec![ev(Some(2), 1), ev(Some(5), 30)]),
        Op::Facts(1, vec![ev(Some(4), 1500), ev(None, 1500)]),
        Op::Decisions(0, false, vec![ev(None, 80)]),
    ]
}

/// How one crash moment is explored: the exact durable image, the exact live image, and
/// random outcomes.
fn policies(point: u64, randoms: u64) -> Vec<CrashPolicy> {
    let mut v = vec![CrashPolicy::DropUnsynced, CrashPolicy::KeepUnsynced];
    v.extend((0..randoms).map(|r| CrashPolicy::Random(point * 1000 + r)));
    v
}

/// Runs `ops` on a fresh file system with `fault` armed, then crashes a fork of the final
/// moment under every policy and checks. Returns the checks done.
fn crash_after(
    ops: &[Op],
    fault: Option<Fault>,
    policies: &[CrashPolicy],
    tolerate: bool,
) -> Counts {
    let mut h = Harness::start(42, fault);
    h.tolerate_errors = tolerate;
    within(&format!("{fault:?}"), || h.apply_all(ops));
    let mut total = h.counts;
    total.crashes_checked = 0;
    for policy in policies {
        let mut fork = h.fork();
        within(&format!("{fault:?} then crash {policy:?}"), || {
            fork.crash_and_check(*policy)
        });
        total.crashes_checked += 1;
    }
    total
}

/// Runs `f`, prefixing a failure's message with `context` (which fault, which crash).
fn within(context: &str, f: impl FnOnce()) {
    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{context}: {msg}");
    }
}

/// Sync points and ops of the whole scenario, store opening included (fault triggers count
/// from the same origin, see `Harness::start`).
fn scenario_size() -> (u64, u64) {
    let mut h = Harness::start(42, None);
    h.apply_all(&scenario());
    (h.fs.sync_count() - h.origin.0, h.fs.op_count() - h.origin.1)
}

#[test]
fn scenario_without_faults_passes_every_check() {
    let c = crash_after(&scenario(), None, &policies(0, 8), false);
    assert_eq!(c.crashes_checked, 10);
    assert_eq!(c.acked, 9);
    assert_eq!(c.fenced, 1);
}

/// The crash tests below exercise preallocation (SPEC §5): the scenario's live segments end in
/// zero-filled space past their last batch, and sealed ones were cut back to it.
#[test]
fn scenario_writes_into_preallocated_space() {
    let mut h = Harness::start(42, None);
    h.apply_all(&scenario());
    let segments: Vec<(String, Vec<u8>)> =
        h.fs.live_files()
            .into_iter()
            .filter(|(path, _)| path.ends_with(".log"))
            .collect();
    let trailing_zeros = |b: &[u8]| b.iter().rev().take_while(|&&x| x == 0).count();
    let preallocated = segments
        .iter()
        .filter(|(_, b)| trailing_zeros(b) >= 1024)
        .count();
    assert!(
        preallocated >= 1,
        "no preallocated segment among {}",
        segments.len()
    );
    assert!(
        segments.len() > preallocated,
        "sealed segments end at their last batch"
    );
}

/// The crash tests below also meet the open segment's index (SPEC §9): the scenario's
/// reopen closes a run that built the dedupe maps, which leaves an index of its segment not
/// yet sealed, in which the keyed fact after it looks its keys up.
#[test]
fn scenario_leaves_an_index_of_an_open_segment() {
    let mut h = Harness::start(42, None);
    let ops = scenario();
    let reopen = ops.iter().position(|op| matches!(op, Op::Reopen)).unwrap();
    h.apply_all(&ops[..=reopen]);
    let files = h.fs.live_files();
    let open_indexed = files
        .iter()
        .filter(|(path, _)| path.ends_with(".idx"))
        .filter(|(path, _)| {
            // Its segment is the last of its run: none with the next number exists.
            let n: u32 = path[path.len() - 12..path.len() - 4].parse().unwrap();
            let next = format!("{}{:08}.log", &path[..path.len() - 12], n + 1);
            !files.contains_key(&next)
        })
        .count();
    assert!(
        open_indexed >= 1,
        "no index of an open segment among {:?}",
        files.keys()
    );
}

#[test]
fn power_loss_at_every_sync_point() {
    let (syncs, _) = scenario_size();
    assert!(syncs > 20, "scenario has only {syncs} sync points");
    let mut checked = 0;
    for k in 0..=syncs {
        let fault = Fault::power_loss(Trigger::Sync(k));
        checked += crash_after(&scenario(), Some(fault), &policies(k, 6), false).crashes_checked;
    }
    eprintln!(
        "power loss at every sync point: {} sync points, {checked} crashes checked",
        syncs + 1
    );
}

#[test]
fn power_loss_at_every_op() {
    let (_, ops) = scenario_size();
    let mut checked = 0;
    for k in 0..=ops {
        let fault = Fault::power_loss(Trigger::Op(k));
        checked += crash_after(&scenario(), Some(fault), &policies(k, 2), false).crashes_checked;
    }
    eprintln!(
        "power loss at every op: {} ops, {checked} crashes checked",
        ops + 1
    );
}

#[test]
fn eio_or_enospc_at_every_op_then_crash() {
    let (_, ops) = scenario_size();
    let mut checked = 0;
    for k in 0..ops {
        for (kind, sticky) in [
            (FaultKind::Eio, false),
            (FaultKind::Enospc, false),
            (FaultKind::Enospc, true),
        ] {
            let fault = Fault {
                at: Trigger::Op(k),
                kind,
                sticky,
            };
            let policies = [CrashPolicy::KeepUnsynced, CrashPolicy::Random(k)];
            checked += crash_after(&scenario(), Some(fault), &policies, true).crashes_checked;
        }
    }
    eprintln!("EIO/ENOSPC at every op: {ops} ops x 3 faults, {checked} crashes checked");
}

#[test]
fn repeated_crashes_in_one_workload() {
    let mut ops = Vec::new();
    for (i, op) in scenario().into_iter().enumerate() {
        ops.push(op);
        ops.push(Op::Crash(i as u64));
    }
    let mut h = Harness::start(7, None);
    h.apply_all(&ops);
    assert_eq!(h.counts.crashes_checked, scenario().len() as u64);
}

/// A fact repeating the key of an earlier event of its own batch and the caller id of a
/// committed event is a duplicate of the former (key first, like the store), and the crash
/// checks agree. Input: `fuzz/regressions/crash_recovery/facts-duplicate-key-before-id.bin`.
#[test]
fn fact_repeating_a_batch_key_and_a_logged_caller_id_is_a_duplicate_by_key() {
    let mut h = Harness::start(1, None);
    let with = |key, id| Ev {
        key,
        id,
        ..ev(None, 3)
    };
    h.apply_all(&[
        Op::CreateRun(2),
        Op::Facts(2, vec![with(None, Some(4))]),
        Op::Facts(2, vec![with(Some(1), None), with(Some(1), Some(4))]),
    ]);
    assert_eq!(h.counts.acked, 2);
    h.crash_and_check(CrashPolicy::KeepUnsynced);
    assert_eq!(h.counts.crashes_checked, 1);
}

/// Length and checksum of every file of run 0, its lock file (pid record and commit slots)
/// included.
fn run0_files(fs: &SimFs) -> BTreeMap<String, (usize, u32)> {
    fs.live_files()
        .into_iter()
        .filter(|(path, _)| path.starts_with("/db/runs/run-0/"))
        .map(|(path, bytes)| (path, (bytes.len(), crc32fast::hash(&bytes))))
        .collect()
}

#[test]
fn fenced_append_on_a_full_segment_writes_no_byte_and_creates_no_file() {
    let mut h = Harness::start(3, None);
    // Fill segment 1 past the roll threshold (8 KiB), so the next commit rolls.
    h.apply_all(&[
        Op::CreateRun(0),
        Op::Facts(0, vec![ev(None, PAYLOAD_LEN_MAX); 6]),
    ]);
    let before = run0_files(&h.fs);
    h.apply(&Op::Decisions(0, true, vec![ev(None, 1)]));
    assert_eq!(h.counts.fenced, 1);
    assert_eq!(
        run0_files(&h.fs),
        before,
        "a fenced append changed the run's files (rule 2)"
    );
}

#[test]
fn rejected_decisions_write_no_byte_to_the_run_files() {
    let mut h = Harness::start(3, None);
    h.apply_all(&[Op::CreateRun(0), Op::Facts(0, vec![ev(Some(1), 10)])]);
    let before = run0_files(&h.fs);
    h.apply(&Op::Decisions(0, true, vec![ev(None, 1)]));
    h.apply(&Op::Decisions(0, false, vec![ev(Some(1), 1)]));
    assert_eq!((h.counts.fenced, h.counts.acked), (1, 1));
    assert_eq!(
        run0_files(&h.fs),
        before,
        "a rejected append changed the run's files (rule 2)"
    );
}

/// Opens a store at `dir` on `fs` with the harness config.
fn store_at(fs: &SimFs, dir: &str) -> runlog::Store {
    runlog::Store::open_with_fs(std::sync::Arc::new(fs.clone()), dir, harness::config()).unwrap()
}

#[test]
fn store_directory_created_by_open_survives_power_loss() {
    let fs = SimFs::new(5);
    let run = harness::run_id(0);
    store_at(&fs, "/fresh").create_run(&run).unwrap();
    fs.crash_with(CrashPolicy::DropUnsynced);
    let store = store_at(&fs, "/fresh");
    assert!(
        store.run_exists(&run).unwrap(),
        "acknowledged run lost with its store directory"
    );
}

#[test]
fn acknowledged_append_is_readable_right_after_power_loss() {
    let fs = SimFs::new(5);
    harness::prepare_root(&fs);
    let store = store_at(&fs, harness::ROOT);
    let run = harness::run_id(0);
    store.create_run(&run).unwrap();
    let acks = store
        .append_facts(&run, vec![NewEvent::new("k", "v")])
        .unwrap();
    assert_eq!(acks[0].seq, 1);
    drop(store);
    fs.crash_with(CrashPolicy::DropUnsynced);
    let store = store_at(&fs, harness::ROOT);
    assert_eq!(
        store.last_seq(&run).unwrap(),
        1,
        "acknowledged append invisible after reopen"
    );
    let page = store.read(&run, 0, 10).unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(page.events[0].payload, "v");
}

#[test]
fn store_init_interrupted_by_power_loss_leaves_a_usable_store() {
    for seed in 0..64 {
        let fs = SimFs::new(seed);
        harness::prepare_root(&fs);
        // Sync points of the first open: FORMAT.tmp, then the store directory.
        fs.inject(Fault::power_loss(Trigger::Sync(fs.sync_count() + 1)));
        let open =
            runlog::Store::open_with_fs(std::sync::Arc::new(fs.clone()), "/db", harness::config());
        assert!(open.is_err());
        fs.crash(seed);
        let store = store_at(&fs, harness::ROOT);
        let listed = store.list_runs(None, 10);
        assert!(
            listed.is_ok(),
            "seed {seed}: list_runs after an interrupted init: {listed:?}"
        );
        store.create_run(&harness::run_id(0)).unwrap();
    }
}

/// Rule 4 for the store layout: when the first `Store::open` fails at the sync of the store
/// directory, the next open makes the layout durable before it creates runs, so a run created
/// then survives power loss. Input:
/// `fuzz/regressions/crash_recovery/open-after-failed-format-sync.bin`.
#[test]
fn open_after_a_failed_format_sync_makes_the_layout_durable() {
    let fs = SimFs::new(14);
    harness::prepare_root(&fs);
    // Sync points of the first open: FORMAT.tmp, then the store directory (fails here).
    fs.inject(Fault::once(
        Trigger::Sync(fs.sync_count() + 1),
        FaultKind::Eio,
    ));
    let first =
        runlog::Store::open_with_fs(std::sync::Arc::new(fs.clone()), "/db", harness::config());
    assert!(first.is_err());
    let run = harness::run_id(0);
    store_at(&fs, harness::ROOT).create_run(&run).unwrap();
    fs.crash_with(CrashPolicy::DropUnsynced);
    let store = store_at(&fs, harness::ROOT);
    assert!(
        store.run_exists(&run).unwrap(),
        "acknowledged run lost with runs/"
    );
}

/// A fresh store over a prepared `SimFs` (root directory durable).
fn fresh_store(seed: u64) -> (SimFs, runlog::Store) {
    let fs = SimFs::new(seed);
    harness::prepare_root(&fs);
    let store = store_at(&fs, harness::ROOT);
    (fs, store)
}

/// Appends facts of 1500-byte payloads until segment 1 reaches the roll threshold.
fn fill_segment_1(store: &runlog::Store, run: &runlog::RunId) -> u64 {
    let batch = || vec![NewEvent::new("fill", vec![b'.'; 1500]); 6];
    store
        .append_facts(run, batch())
        .unwrap()
        .last()
        .unwrap()
        .seq
}

/// Fills segment 1, fails the rolling commit at its `sync_offset`-th sync (0: the seal, 1: the
/// new segment file, 2: the run directory), appends through a reopened store, crashes, and
/// checks that the acknowledged append is the only thing after segment 1.
fn ack_after_failed_roll_survives_power_loss(seed: u64, sync_offset: u64, what: &str) {
    let (fs, store) = fresh_store(seed);
    let run = harness::run_id(0);
    store.create_run(&run).unwrap();
    let last = fill_segment_1(&store, &run);
    fs.inject(Fault::once(
        Trigger::Sync(fs.sync_count() + sync_offset),
        FaultKind::Eio,
    ));
    assert!(
        store
            .append_facts(&run, vec![NewEvent::new("lost", "x")])
            .is_err()
    );
    drop(store);
    let store = store_at(&fs, harness::ROOT);
    let acked = store
        .append_facts(&run, vec![NewEvent::new("acked", "y")])
        .unwrap();
    drop(store);
    fs.crash_with(CrashPolicy::DropUnsynced);
    let store = store_at(&fs, harness::ROOT);
    let events = store.read(&run, last, 10).unwrap().events;
    assert_eq!(
        events.iter().map(|e| (e.seq, &*e.kind)).collect::<Vec<_>>(),
        [(acked[0].seq, "acked")],
        "acknowledged append {what}"
    );
}

#[test]
fn append_after_failed_seal_sync_survives_power_loss() {
    ack_after_failed_roll_survives_power_loss(11, 0, "after the failed seal");
}

#[test]
fn append_into_segment_with_unsynced_entry_survives_power_loss() {
    ack_after_failed_roll_survives_power_loss(12, 2, "into the reused segment");
}

#[test]
fn append_to_run_whose_create_failed_at_dir_sync_survives_power_loss() {
    let (fs, store) = fresh_store(13);
    let run = harness::run_id(0);
    // Syncs of create_run: segment file, run directory, run directory, runs/ (fails here).
    fs.inject(Fault::once(
        Trigger::Sync(fs.sync_count() + 3),
        FaultKind::Eio,
    ));
    assert!(store.create_run(&run).is_err());
    assert!(matches!(
        store.create_run(&run),
        Err(runlog::Error::RunExists { .. })
    ));
    let acked = store
        .append_facts(&run, vec![NewEvent::new("acked", "y")])
        .unwrap();
    assert_eq!(acked[0].seq, 1);
    drop(store);
    fs.crash_with(CrashPolicy::DropUnsynced);
    let store = store_at(&fs, harness::ROOT);
    assert!(
        store.run_exists(&run).unwrap(),
        "run with an acknowledged append vanished"
    );
    assert_eq!(store.last_seq(&run).unwrap(), 1);
}

/// Overwrites the counter slot of segment file `path` with a forged one (valid checksum,
/// generation 99 so it wins) claiming `committed_len`.
fn forge_slot(fs: &SimFs, path: &str, sealed: bool, committed_len: u64) {
    use runlog::format::{CounterSlot, HEADER_LEN, SegmentHeader};
    use runlog::io::{Fs, OpenMode, read_exact_at};
    let f = fs
        .open(std::path::Path::new(path), OpenMode::ReadWrite)
        .unwrap();
    let mut header = vec![0u8; HEADER_LEN as usize];
    read_exact_at(f.as_ref(), &mut header, 0).unwrap();
    let salt = SegmentHeader::decode(&header).unwrap().salt;
    let slot = CounterSlot {
        generation: 99,
        last_seq: 7,
        committed_len,
        updated_at_ms: 0,
        sealed,
        repair_epoch: 0,
    };
    f.write_all_at(&slot.encode(salt), slot.offset()).unwrap();
}

/// No panic on forged counters: sealed and live segments whose counter slots claim a committed
/// length of `u64::MAX` give `list_runs` either a typed `Corrupt` or counters no larger than
/// the files, and reads a typed `Corrupt` (no overflow in the sums). Input:
/// `fuzz/regressions/decode/list-runs-committed-bytes-overflow.bin`.
#[test]
fn list_runs_over_forged_huge_counters_does_not_panic() {
    let (fs, store) = fresh_store(15);
    let run = harness::run_id(0);
    store.create_run(&run).unwrap();
    fill_segment_1(&store, &run);
    store
        .append_facts(&run, vec![NewEvent::new("rolls", "x")])
        .unwrap();
    drop(store);
    let dir = format!("{}/runs/{run}", harness::ROOT);
    forge_slot(&fs, &format!("{dir}/seg-00000001.log"), true, u64::MAX);
    forge_slot(&fs, &format!("{dir}/seg-00000002.log"), false, u64::MAX);
    let file_bytes: u64 = fs
        .live_files()
        .iter()
        .filter(|(p, _)| p.starts_with(&dir))
        .map(|(_, b)| b.len() as u64)
        .sum();
    let store = store_at(&fs, harness::ROOT);
    // Either a typed error, or counters no larger than the files they count.
    match store.list_runs(None, 10) {
        Ok(page) => assert!(
            page.runs.iter().all(|r| r.committed_bytes <= file_bytes),
            "{page:?}"
        ),
        Err(e) => assert!(matches!(e, runlog::Error::Corrupt { .. }), "{e:?}"),
    }
    // The events before the forged counter's claim may be read; the read that reaches it fails.
    let mut after = 0;
    let end = loop {
        match store.read(&run, after, 10) {
            Ok(page) if page.has_more => after = page.next,
            other => break other,
        }
    };
    assert!(matches!(end, Err(runlog::Error::Corrupt { .. })), "{end:?}");
}

fn ev_strategy() -> impl Strategy<Value = Ev> {
    (
        proptest::option::weighted(0.4, 0..KEYS),
        proptest::option::weighted(0.15, 0..KEYS),
        any::<bool>(),
        prop_oneof![3 => 0..64u16, 1 => 0..=PAYLOAD_LEN_MAX],
    )
        .prop_map(|(key, id, corr, payload_len)| Ev {
            key,
            id,
            corr,
            payload_len,
        })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let evs = || proptest::collection::vec(ev_strategy(), 1..5);
    prop_oneof![
        2 => (0..RUNS).prop_map(Op::CreateRun),
        1 => (0..RUNS).prop_map(Op::DeleteRun),
        6 => (0..RUNS, evs()).prop_map(|(r, e)| Op::Facts(r, e)),
        4 => (0..RUNS, proptest::bool::weighted(0.3), evs()).prop_map(|(r, s, e)| Op::Decisions(r, s, e)),
        1 => Just(Op::Reopen),
        1 => any::<u64>().prop_map(Op::Crash),
    ]
}

proptest! {
    // 128 cases by default; PROPTEST_CASES=N for a longer soak.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]

    /// Random workloads with crashes inside, then a power loss at a random op and a final
    /// crash with a random seed.
    #[test]
    fn random_workloads_recover_a_prefix(
        ops in proptest::collection::vec(op_strategy(), 1..40),
        power_loss in proptest::option::of(0u64..400),
        seed in any::<u64>(),
    ) {
        let fault = power_loss.map(|at| Fault::power_loss(Trigger::Op(at)));
        let mut h = Harness::start(seed, fault);
        h.apply_all(&ops);
        h.crash_and_check(CrashPolicy::Random(seed));
    }
}
