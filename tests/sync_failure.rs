//! A failed write or fdatasync is never acknowledged by anyone (issue 11 §2, format/SPEC.md
//! §5): the failing append gets an error, its bytes are cut back under the run lock, the next
//! opener does not adopt them, and a keyless retry appends once. Where the cut-back fails too
//! (issue 26 §2), the durable `cut-pending` marker makes every later writer — another handle
//! that had checked the tail long before, or the next opener — cut there before anything else,
//! and power loss at any later sync point never brings the failed group back nor takes an
//! acknowledged event away. On the crash simulator, whose failed sync leaves the bytes in the
//! page cache (the live image) as a kernel may.

use std::sync::Arc;

use runlog::io::sim::{CallKind, CrashPolicy, Fault, FaultKind, SimFs, Trigger};
use runlog::{Config, Error, NewEvent, RunId, Store};

const ROOT: &str = "/store";
const SEGMENT: &str = "/store/runs/r/seg-00000001.log";
const MARKER: &str = "/store/runs/r/cut-pending";

fn open(fs: &SimFs) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).unwrap()
}

/// A fresh simulated file system (seed `seed`) holding run `run` with one committed event,
/// `one`, and the store that wrote it.
fn one_committed(seed: u64, run: &str) -> (SimFs, RunId, Store) {
    let fs = SimFs::new(seed);
    let run = RunId::new(run).unwrap();
    let store = open(&fs);
    store.create_run(&run).unwrap();
    store
        .append_facts(&run, vec![NewEvent::new("k", "one")])
        .unwrap();
    (fs, run, store)
}

fn payloads(store: &Store, run: &RunId) -> Vec<String> {
    let page = store.read(run, 0, 100).unwrap();
    for (i, e) in page.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "seqs dense from 1");
    }
    page.events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.payload).into_owned())
        .collect()
}

/// The live bytes of `path`, if it exists.
fn file(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
    fs.live_files().remove(path)
}

fn holds(bytes: &[u8], text: &str) -> bool {
    bytes.windows(text.len()).any(|w| w == text.as_bytes())
}

/// Payloads of a failed group: long and unique, so stale bytes of it are found in a file.
fn group(tag: &str) -> Vec<String> {
    (0..2)
        .map(|i| format!("failed group {tag} event {i} {}", "#".repeat(300)))
        .collect()
}

fn facts(payloads: &[String]) -> Vec<NewEvent> {
    payloads
        .iter()
        .map(|p| NewEvent::new("k", p.clone()))
        .collect()
}

/// Fails call `n` of `kind` (an absolute index, see `SimFs::call_count`) with EIO.
fn fail_call(fs: &SimFs, kind: CallKind, n: u64) {
    fs.inject(Fault::once(Trigger::Call(kind, n), FaultKind::Eio));
}

/// How the cut-back after the group's failed fdatasync fails.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// The truncate fails: the group's bytes stay in the file.
    Truncate,
    /// The truncate succeeds but its fdatasync fails: the file is cut in the page cache only.
    Sync,
}

/// Arms the faults of the next append: its fdatasync fails, then its cut-back as `cut` says;
/// the marker's own writes (`fsync` of the marker and of the run directory) succeed unless
/// `marker_fails`.
fn fail_group_and_cut(fs: &SimFs, cut: Cut, marker_fails: bool) {
    let sync = fs.call_count(CallKind::SyncData);
    fail_call(fs, CallKind::SyncData, sync);
    match cut {
        Cut::Truncate => fail_call(fs, CallKind::SetLen, fs.call_count(CallKind::SetLen)),
        Cut::Sync => fail_call(fs, CallKind::SyncData, sync + 1),
    }
    if marker_fails {
        fail_call(fs, CallKind::SyncAll, fs.call_count(CallKind::SyncAll));
    }
}

/// The cut marker's text for segment 1 cut back to `len`.
fn marker_for(len: usize) -> Vec<u8> {
    format!("seg-00000001.log {len}\n").into_bytes()
}

#[test]
fn a_failed_fdatasync_is_cut_back_and_never_adopted() {
    for crash_seed in [None, Some(1), Some(2), Some(3)] {
        let (fs, run, store) = one_committed(7, "r");
        fs.inject(Fault::once(Trigger::Sync(fs.sync_count()), FaultKind::Eio));
        let failed = store.append_facts(&run, vec![NewEvent::new("k", "two")]);
        assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
        drop(store);
        if let Some(seed) = crash_seed {
            fs.crash(seed);
        }
        let store = open(&fs);
        assert_eq!(payloads(&store, &run), ["one"], "crash {crash_seed:?}");
        let retry = store
            .append_facts(&run, vec![NewEvent::new("k", "two")])
            .unwrap();
        assert_eq!(retry[0].seq, 2);
        assert_eq!(payloads(&store, &run), ["one", "two"]);
        assert!(store.verify_run(&run).unwrap().problems.is_empty());
    }
}

#[test]
fn a_failed_write_is_cut_back_and_the_run_stays_writable() {
    let (fs, run, store) = one_committed(9, "w");
    fs.inject(Fault::once(Trigger::Op(fs.op_count()), FaultKind::Eio));
    assert!(
        store
            .append_facts(&run, vec![NewEvent::new("k", "two")])
            .is_err()
    );
    let again = store.append_facts(&run, vec![NewEvent::new("k", "three")]);
    assert_eq!(again.unwrap()[0].seq, 2);
    let fresh = open(&fs);
    assert_eq!(payloads(&fresh, &run), ["one", "three"]);
}

#[test]
fn after_a_failed_fdatasync_whose_cut_back_succeeds_the_same_handle_appends_at_the_same_seq() {
    let (fs, run, store) = one_committed(21, "r");
    let failed = group("cut back");
    fail_call(&fs, CallKind::SyncData, fs.call_count(CallKind::SyncData));
    let err = store.append_facts(&run, facts(&failed)).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    // SPEC §5: the cut succeeded, so the run stays writable in this process.
    let again = store
        .append_facts(&run, vec![NewEvent::new("k", "two")])
        .unwrap();
    assert_eq!(again[0].seq, 2, "the seq the failed group would have had");
    assert_eq!(payloads(&store, &run), ["one", "two"]);
    let segment = file(&fs, SEGMENT).unwrap();
    assert!(
        !holds(&segment, &failed[1]),
        "bytes of the failed group are still in the segment"
    );
    assert_eq!(file(&fs, MARKER), None, "a successful cut leaves no marker");
    for seed in 0..8 {
        let crashed = fs.fork();
        crashed.crash(seed);
        assert_eq!(
            payloads(&open(&crashed), &run),
            ["one", "two"],
            "crash {seed}"
        );
    }
}

#[test]
fn a_failed_cut_back_poisons_the_handle_with_context_and_the_next_opener_honours_the_marker() {
    for cut in [Cut::Truncate, Cut::Sync] {
        let (fs, run, store) = one_committed(22, "r");
        // The header and the batch (the block's preallocated zeros follow it, SPEC §5).
        let committed = 4096 + store.run_info(&run).unwrap().committed_bytes as usize;
        assert!(file(&fs, SEGMENT).unwrap().len() > committed);
        let failed = group("poison");
        fail_group_and_cut(&fs, cut, false);
        let err = store.append_facts(&run, facts(&failed)).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{cut:?}: {err:?}");
        assert_eq!(
            file(&fs, MARKER),
            Some(marker_for(committed)),
            "{cut:?}: the marker names the segment and its committed length"
        );
        let poisoned = store
            .append_facts(&run, vec![NewEvent::new("k", "refused")])
            .unwrap_err();
        let Error::Poisoned { cause, .. } = &poisoned else {
            panic!("{cut:?}: the same handle's next append: {poisoned:?}");
        };
        for part in [
            "syncing",
            &format!("back to {committed} bytes failed"),
            "cut marker /store/runs/r/cut-pending written",
        ] {
            assert!(cause.contains(part), "{cut:?}: {part:?} not in {cause:?}");
        }
        // Another process (a fresh store on the same file system) cuts first, then appends.
        let next = open(&fs);
        assert_eq!(payloads(&next, &run), ["one"], "{cut:?}");
        assert_eq!(file(&fs, MARKER), None, "{cut:?}: marker removed");
        assert_eq!(file(&fs, SEGMENT).unwrap().len(), committed, "{cut:?}");
        let after = next
            .append_facts(&run, vec![NewEvent::new("k", "two")])
            .unwrap();
        assert_eq!(after[0].seq, 2, "{cut:?}");
        assert_eq!(payloads(&next, &run), ["one", "two"], "{cut:?}");
        assert!(!holds(&file(&fs, SEGMENT).unwrap(), &failed[1]), "{cut:?}");
        assert!(next.verify_run(&run).unwrap().problems.is_empty());
    }
}

#[test]
fn a_writer_refuses_to_write_while_it_cannot_apply_a_cut_marker() {
    let (fs, run, store) = one_committed(23, "r");
    let failed = group("refused");
    fail_group_and_cut(&fs, Cut::Truncate, false);
    assert!(store.append_facts(&run, facts(&failed)).is_err());
    drop(store);
    // The next writer's cut fails as well: it writes nothing and adopts nothing.
    fail_call(&fs, CallKind::SetLen, fs.call_count(CallKind::SetLen));
    let next = open(&fs);
    let err = next
        .append_facts(&run, vec![NewEvent::new("k", "two")])
        .unwrap_err();
    assert!(err.to_string().contains("cut marker"), "{err}");
    assert!(file(&fs, MARKER).is_some(), "the marker stays");
    assert!(holds(&file(&fs, SEGMENT).unwrap(), &failed[1]));
    let fresh = open(&fs);
    assert_eq!(payloads(&fresh, &run), ["one"]);
    fresh
        .append_facts(&run, vec![NewEvent::new("k", "two")])
        .unwrap();
    assert_eq!(payloads(&fresh, &run), ["one", "two"]);
    assert_eq!(file(&fs, MARKER), None);
}

/// A store that has already committed (its handle checked the run's tail) before another
/// handle's group fails.
fn store_with_history(fs: &SimFs, run: &RunId) -> Store {
    let store = open(fs);
    store
        .append_facts(run, vec![NewEvent::new("k", "other handle")])
        .unwrap();
    store
}

/// A handle that checked the tail before the failure sees nothing past the committed length
/// when the truncate of the cut-back succeeded (only its sync failed); it must still honour the
/// marker before it writes, or the marker outlives its commit and, after a power loss that
/// loses the lock file's unsynced commit slots, cuts that acknowledged commit away.
#[test]
fn a_handle_that_checked_the_tail_before_the_failure_honours_the_marker_at_its_next_commit() {
    for cut in [Cut::Sync, Cut::Truncate] {
        let (fs, run, a) = one_committed(24, "r");
        let b = store_with_history(&fs, &run);
        fail_group_and_cut(&fs, cut, false);
        assert!(a.append_facts(&run, facts(&group("early"))).is_err());
        assert!(file(&fs, MARKER).is_some());
        let acked = b
            .append_facts(&run, vec![NewEvent::new("k", "acked")])
            .unwrap();
        assert_eq!(acked[0].seq, 3, "{cut:?}");
        let crashed = fs.fork();
        crashed.crash_with(CrashPolicy::DropUnsynced);
        assert_eq!(
            payloads(&open(&crashed), &run),
            ["one", "other handle", "acked"],
            "{cut:?}: an acknowledged event was lost"
        );
        assert_eq!(file(&fs, MARKER), None, "{cut:?}: honoured by the commit");
    }
}

/// Removing the marker needs the run directory synced; when that sync fails and a crash brings
/// the marker back, it must cut nothing committed since (the marker is emptied durably before
/// it is removed).
#[test]
fn a_marker_whose_removal_was_lost_cuts_nothing_committed_after_it() {
    let (fs, run, a) = one_committed(25, "r");
    let b = store_with_history(&fs, &run);
    let d = store_with_history(&fs, &run);
    fail_group_and_cut(&fs, Cut::Truncate, false);
    assert!(a.append_facts(&run, facts(&group("lost removal"))).is_err());
    // B applies the marker; the sync of the run directory after its removal fails.
    fail_call(&fs, CallKind::SyncDir, fs.call_count(CallKind::SyncDir));
    let err = b
        .append_facts(&run, vec![NewEvent::new("k", "not acked")])
        .unwrap_err();
    assert!(err.to_string().contains("cut-pending"), "{err}");
    let acked = d
        .append_facts(&run, vec![NewEvent::new("k", "acked")])
        .unwrap();
    assert_eq!(acked[0].seq, 4);
    drop((a, b, d));
    fs.crash_with(CrashPolicy::DropUnsynced);
    assert_eq!(
        payloads(&open(&fs), &run),
        ["one", "other handle", "other handle", "acked"],
        "an acknowledged event was lost"
    );
}

/// The truncation of a cut-back whose sync failed may live in the page cache only: the writer
/// that finds the marker syncs the segment before it removes the marker, even when the file is
/// already at the marker's length, so no crash after it brings the group back.
#[test]
fn a_marker_is_removed_only_after_its_cut_is_durable() {
    for seed in 0..32 {
        let (fs, run, a) = one_committed(26, "r");
        let failed = group("cached cut");
        fail_group_and_cut(&fs, Cut::Sync, false);
        assert!(a.append_facts(&run, facts(&failed)).is_err());
        drop(a);
        // The next opener applies the marker (the file is already at its length) and removes it.
        assert_eq!(payloads(&open(&fs), &run), ["one"]);
        assert_eq!(file(&fs, MARKER), None);
        fs.crash(seed);
        assert_eq!(payloads(&open(&fs), &run), ["one"], "crash seed {seed}");
    }
}

/// What the appends of [`failed_cut_workload`] were told.
#[derive(Debug, Default)]
struct Told {
    /// Payloads of the acknowledged appends, in seq order.
    acked: Vec<String>,
    /// Groups whose append failed and that may be in the log (each whole or absent): issued
    /// when the power went, or a failed group whose marker could not be written.
    maybe: Vec<Vec<String>>,
    /// Payloads that must never be in the log: the failed group, once its marker was written.
    never: Vec<String>,
    /// Sync points from the arming of the faults to the end of the workload.
    syncs: u64,
}

/// Appends `payloads` as one group; records the answer in `told`.
fn append_told(store: Option<&Store>, run: &RunId, payloads: Vec<String>, told: &mut Told) {
    match store.map(|s| s.append_facts(run, facts(&payloads))) {
        Some(Ok(_)) => told.acked.extend(payloads),
        _ => told.maybe.push(payloads),
    }
}

/// Handle A commits, handle B commits (so it has checked the tail), then A's group fails as
/// `cut` says (its marker written unless `marker_fails`), A's next append is refused, B
/// appends, and a fresh store C appends. `power_loss`: the sync point, counted from the arming
/// of the faults, where the machine halts.
fn failed_cut_workload(fs: &SimFs, cut: Cut, marker_fails: bool, power_loss: Option<u64>) -> Told {
    let run = RunId::new("r").unwrap();
    let mut told = Told::default();
    let a = open(fs);
    a.create_run(&run).unwrap();
    append_told(Some(&a), &run, vec!["one".into()], &mut told);
    let b = open(fs);
    append_told(Some(&b), &run, vec!["b before".into()], &mut told);
    let armed = fs.sync_count();
    if let Some(k) = power_loss {
        fs.inject(Fault::power_loss(Trigger::Sync(armed + k)));
    }
    fail_group_and_cut(fs, cut, marker_fails);
    let failed = group("workload");
    assert!(a.append_facts(&run, facts(&failed)).is_err());
    // The poisoned handle says whether the marker was written (once the power is gone, any
    // call may fail first, and the marker may not have been written).
    let written = match a.append_facts(&run, vec![NewEvent::new("k", "refused")]) {
        Err(Error::Poisoned { cause, .. }) => {
            cause.contains("cut marker") && cause.contains(" written:")
        }
        Err(_) if fs.is_halted() => false,
        other => panic!("after a failed cut-back: {other:?}"),
    };
    if written {
        told.never.extend(failed);
    } else {
        told.maybe.push(failed);
    }
    append_told(Some(&b), &run, vec!["b after".into()], &mut told);
    let c = Store::open_with_fs(Arc::new(fs.clone()), ROOT, Config::default()).ok();
    append_told(c.as_ref(), &run, vec!["c after".into()], &mut told);
    told.syncs = fs.sync_count() - armed;
    told
}

/// After a crash: the log holds every acknowledged event in order, each `maybe` group whole or
/// not at all, nothing `never`, densely; the run is writable at last + 1 and no marker remains.
fn check_recovered(fs: &SimFs, told: &Told, ctx: &str) {
    let run = RunId::new("r").unwrap();
    let store = Store::open_with_fs(Arc::new(fs.clone()), ROOT, Config::default())
        .unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    let log = payloads(&store, &run);
    for p in &told.never {
        assert!(
            !log.contains(p),
            "{ctx}: the failed group came back: {log:?}"
        );
    }
    let mut rest = log.clone();
    for g in &told.maybe {
        let present = g.iter().filter(|p| rest.contains(p)).count();
        assert!(present == 0 || present == g.len(), "{ctx}: partial {g:?}");
        rest.retain(|p| !g.contains(p));
    }
    assert_eq!(rest, told.acked, "{ctx}: acknowledged events");
    let next = store
        .append_facts(&run, vec![NewEvent::new("k", "after crash")])
        .unwrap_or_else(|e| panic!("{ctx}: append after recovery: {e}"));
    assert_eq!(next[0].seq, log.len() as u64 + 1, "{ctx}");
    assert_eq!(file(fs, MARKER), None, "{ctx}: marker left after a commit");
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{ctx}: {:?}", report.problems);
}

#[test]
fn power_loss_at_every_sync_point_after_a_failed_cut_back_never_brings_the_group_back() {
    let mut checked = 0;
    for (cut, marker_fails) in [
        (Cut::Truncate, false),
        (Cut::Sync, false),
        (Cut::Truncate, true),
        (Cut::Sync, true),
    ] {
        let span = failed_cut_workload(&SimFs::new(30), cut, marker_fails, None).syncs;
        assert!(span >= 6, "{cut:?}: only {span} sync points");
        for power_loss in (0..span).map(Some).chain([None]) {
            let fs = SimFs::new(30);
            let told = failed_cut_workload(&fs, cut, marker_fails, power_loss);
            assert!(
                marker_fails || power_loss.is_some() || !told.never.is_empty(),
                "{cut:?}: the marker was not written"
            );
            let mut policies = vec![CrashPolicy::DropUnsynced, CrashPolicy::KeepUnsynced];
            policies
                .extend((0..6).map(|r| CrashPolicy::Random(r + 100 * power_loss.unwrap_or(99))));
            for policy in policies {
                let crashed = fs.fork();
                crashed.crash_with(policy);
                let ctx = format!(
                    "{cut:?}, marker fails {marker_fails}, power loss at {power_loss:?}, {policy:?}"
                );
                check_recovered(&crashed, &told, &ctx);
                checked += 1;
            }
        }
    }
    eprintln!("{checked} crashes checked after a failed cut-back");
}
