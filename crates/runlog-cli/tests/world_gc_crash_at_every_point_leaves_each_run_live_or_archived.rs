//! A World gc (`World::collect_finished`) and a restore (`runlog_cli::restore::restore_run`)
//! over the crash simulator (`runlog::io::sim::SimFs`, cargo feature `sim`): the store and
//! its archive directory on one simulated file system, a power loss at every op and at every
//! sync point of the gc (and of the restore), each crash explored as the durable image, the
//! live image and random outcomes (each unsynced write kept, dropped, torn or garbled, each
//! unsynced directory operation kept or dropped), and EIO / ENOSPC at every op.
//!
//! After every crash, for each run gc may collect: either its archive is in place, decodes
//! (every checksum, the density of every log) and holds every log of the run exactly as it
//! was (metadata, seqs, event ids, times, kinds, correlation ids, keys, payloads), or every
//! log of it is live exactly as it was; no log is live with other content; and once the run's
//! own log is gone from the store none of its logs is (a listing shows the run whole or not
//! at all, never a remnant the next gc could not find). The runs gc must keep (running,
//! retained hook, waiting wait) and every other log are untouched (the hook-token log may
//! only have gained releases). A second gc then collects every candidate with no failure,
//! and restoring each gives every log back byte-exact. A restore crashed at any point leaves
//! the archive whole, every live log of the run a prefix of its archived copy, until every
//! log is back; running it again finishes.
//!
//! In runlog-cli and not runlog-world because the restore is the CLI's.
//! `cargo nextest run -p runlog-cli --all-features --test
//! world_gc_crash_at_every_point_leaves_each_run_live_or_archived --no-capture` prints the
//! counts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use runlog::archive::{self, Archive};
use runlog::io::Fs;
use runlog::io::sim::{CrashPolicy, Fault, FaultKind, SimFs, Trigger};
use runlog::{Config, Event, RunId, RunLog, Store};
use runlog_cli::restore::restore_run;
use runlog_world::{
    COLLECTED_RUNS_LOG, Clock, CreateEventParams, EventRequest, EventType, GcParams, GcReport,
    HOOK_TOKENS_RUN, Kept, Streams, World, WorldConfig, parse_iso_ms,
};

const ROOT: &str = "/store";
/// `runlog gc`'s default: `<store>/archive`.
const ARCHIVE_DIR: &str = "/store/archive";

/// One log: its metadata and events.
type Log = (Vec<u8>, Vec<Event>);
/// Every log: id → (metadata, events).
type Logs = BTreeMap<String, Log>;
type SimWorld = World<Arc<Store>>;

/// 8 KiB segments (the big run rolls), preallocation from 2 KiB, as `tests/crash_sim`.
fn config() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        preallocate_from_bytes: 2 << 10,
        lock_timeout: Duration::from_millis(500),
        ..Config::default()
    }
}

/// Past every event (events are stamped by the system clock).
fn cut_ms() -> u64 {
    parse_iso_ms("2999-01-01T00:00:00Z").unwrap()
}

fn params() -> GcParams {
    GcParams {
        finished_before_ms: cut_ms(),
        archive_dir: ARCHIVE_DIR.into(),
        dry_run: false,
    }
}

fn open(fs: &SimFs) -> (Arc<Store>, SimWorld) {
    let store = Arc::new(Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()).expect("open"));
    let world = World::new(Arc::clone(&store), WorldConfig::default());
    (store, world)
}

/// Every log of `store` but gc's record of the runs it archived (`COLLECTED_RUNS_LOG`: it
/// only grows, and names only runs gc archived; [`assert_record_names_only_candidates`]).
fn snapshot(store: &Store) -> Logs {
    let page = RunLog::list_runs(store, None, 10_000).expect("list");
    assert!(page.damaged.is_empty(), "damaged: {:?}", page.damaged);
    assert!(!page.has_more);
    page.runs
        .iter()
        .filter(|info| info.run.as_str() != COLLECTED_RUNS_LOG)
        .map(|info| {
            let meta = RunLog::run_meta(store, &info.run).expect("meta");
            let mut events: Vec<Event> = Vec::new();
            loop {
                let after = events.last().map_or(0, |e| e.seq);
                let page = store.read(&info.run, after, 64).expect("read");
                events.extend(page.events);
                if !page.has_more {
                    break;
                }
            }
            (info.run.to_string(), (meta, events))
        })
        .collect()
}

/// A `Uint8Array` of `len` bytes `fill` in the SDK's JSON shape (base64 of a repeated byte
/// triple is a repeated quad).
fn bin(len: usize) -> String {
    format!(
        r#"{{"__type":"Uint8Array","data":"{}"}}"#,
        "QUJD".repeat(len / 3)
    )
}

fn ev(w: &SimWorld, run: &str, ty: EventType, corr: Option<&str>, data: Option<&str>) {
    let mut r = EventRequest::new(ty).spec_version(5);
    if let Some(c) = corr {
        r = r.correlation_id(c);
    }
    if let Some(d) = data {
        r = r.data(d).expect("JSON");
    }
    w.create_event(Some(run), r, &CreateEventParams::default())
        .unwrap_or_else(|e| panic!("{ty:?} on {run}: {e}"));
}

fn running_run(w: &SimWorld) -> String {
    let run = runlog_world::mint_run_id();
    let created = format!(
        r#"{{"deploymentId":"dpl_1","workflowName":"workflow//./wf//main","input":{},"executionContext":{{}}}}"#,
        bin(3)
    );
    ev(w, &run, EventType::RunCreated, None, Some(&created));
    ev(w, &run, EventType::RunStarted, None, None);
    run
}

fn completed(w: &SimWorld, run: &str) {
    let out = format!(r#"{{"output":{}}}"#, bin(3));
    ev(w, run, EventType::RunCompleted, None, Some(&out));
}

/// The store before the gc: two runs gc collects and three it keeps, all acknowledged.
struct Fixture {
    /// The file system after the workload, nothing open.
    fs: SimFs,
    before: Logs,
    /// The runs gc collects: a big one (steps rolling segments, two streams, attributes, a
    /// disposed hook whose claim gc releases) and a small one.
    candidates: Vec<String>,
    /// The runs gc keeps, with why.
    kept: Vec<(String, Kept)>,
}

fn fixture() -> Fixture {
    let fs = SimFs::new(25);
    fs.create_dir(Path::new(ROOT)).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    let (store, w) = open(&fs);
    let streams = Streams::new(Arc::clone(&store));

    let big = running_run(&w);
    for i in 0..4 {
        let step = format!("step_{i}");
        let input = format!(r#"{{"stepName":"step//./wf//add","input":{}}}"#, bin(2400));
        ev(&w, &big, EventType::StepCreated, Some(&step), Some(&input));
        ev(&w, &big, EventType::StepStarted, Some(&step), None);
        let result = format!(r#"{{"result":{}}}"#, bin(1500));
        ev(
            &w,
            &big,
            EventType::StepCompleted,
            Some(&step),
            Some(&result),
        );
    }
    let hook = format!(r#"{{"token":"tok-big","metadata":{}}}"#, bin(3));
    ev(
        &w,
        &big,
        EventType::HookCreated,
        Some("hook_1"),
        Some(&hook),
    );
    ev(&w, &big, EventType::HookDisposed, Some("hook_1"), None);
    let id = RunId::new(&big).unwrap();
    streams.write(&id, "out", &b"\x00first\xff"[..]).unwrap();
    streams.write(&id, "out", vec![7u8; 3000]).unwrap();
    streams.close(&id, "out").unwrap();
    streams.write(&id, "logs", &b"line\n"[..]).unwrap();
    let attrs = [("team".to_string(), Some("core".to_string()))];
    w.set_run_attributes(&big, &attrs, false).unwrap();
    completed(&w, &big);

    let small = running_run(&w);
    completed(&w, &small);

    let running = running_run(&w);
    streams
        .write(&RunId::new(&running).unwrap(), "out", &b"live"[..])
        .unwrap();
    let hooked = running_run(&w);
    // Retained 20 days (the World's limit is 30), past every crash case of this file.
    let until = runlog_world::format_iso_ms(Clock::system().now_ms() + 20 * 86_400_000);
    let retained = format!(
        r#"{{"token":"tok-kept","metadata":{},"tokenRetentionUntil":"{until}"}}"#,
        bin(3)
    );
    ev(
        &w,
        &hooked,
        EventType::HookCreated,
        Some("hook_2"),
        Some(&retained),
    );
    completed(&w, &hooked);
    let waiting = running_run(&w);
    let wait = r#"{"resumeAt":"2998-01-01T00:00:00.000Z"}"#;
    ev(
        &w,
        &waiting,
        EventType::WaitCreated,
        Some("wait_1"),
        Some(wait),
    );
    completed(&w, &waiting);

    let before = snapshot(&store);
    drop((w, streams, store));
    let mut candidates = vec![big, small];
    candidates.sort();
    let mut kept = vec![
        (running, Kept::NotFinished),
        (hooked, Kept::LiveHook),
        (waiting, Kept::PendingWait),
    ];
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    let fx = Fixture {
        fs,
        before,
        candidates,
        kept,
    };
    assert_eq!(
        fx.logs_of(&fx.candidates[0]).len() + fx.logs_of(&fx.candidates[1]).len(),
        6
    );
    fx
}

impl Fixture {
    /// The logs of run `run` (its own, its attributes, its streams) as they were.
    fn logs_of(&self, run: &str) -> Vec<(&String, &Log)> {
        let ulid = &run[5..];
        self.before
            .iter()
            .filter(|(id, _)| id.contains(ulid))
            .collect()
    }

    fn owner(&self, id: &str) -> Option<&String> {
        self.candidates.iter().find(|r| id.contains(&r[5..]))
    }
}

fn read_archive(fs: &SimFs, run: &str) -> Option<Archive> {
    match archive::read_archive(fs, Path::new(ARCHIVE_DIR), &RunId::new(run).unwrap()) {
        Ok(a) => Some(a),
        Err(runlog::Error::RunNotFound { .. }) => None,
        Err(e) => panic!("the archive of {run} in place but unreadable: {e}"),
    }
}

/// Asserts the archive holds exactly the logs `run` had, each exactly.
fn assert_archive_whole(fx: &Fixture, run: &str, a: &Archive, when: &str) {
    let mine = fx.logs_of(run);
    assert_eq!(
        a.logs.len(),
        mine.len(),
        "{when}: {run}'s archive holds other logs"
    );
    assert_eq!(
        a.logs[0].run.as_str(),
        run,
        "{when}: the run's own log first"
    );
    for (id, (meta, events)) in mine {
        let log = a
            .log(id)
            .unwrap_or_else(|| panic!("{when}: {id} not in the archive"));
        assert!(
            &log.meta == meta && &log.events == events,
            "{when}: {id} archived with other content"
        );
    }
}

/// Every log not of a candidate is as it was; the hook-token log may have gained releases.
/// Every log of the collectable runs is back byte-exact, and nothing else changed.
fn assert_restored_whole(fx: &Fixture, now: &Logs, when: &str) {
    for (id, log) in &fx.before {
        if fx.owner(id).is_some() {
            assert_eq!(
                now.get(id),
                Some(log),
                "{when}: {id} not restored byte-exact"
            );
        }
    }
    assert_others_untouched(fx, now, when);
}

/// gc's record of archived runs names candidates only (a run may be recorded again by the gc
/// that finishes what a crashed one began).
fn assert_record_names_only_candidates(fx: &Fixture, store: &Store, when: &str) {
    let Ok(page) = store.read(&RunId::new(COLLECTED_RUNS_LOG).unwrap(), 0, 10_000) else {
        return;
    };
    for e in &page.events {
        let run = e.correlation_id.as_deref().unwrap_or_default();
        assert_eq!(e.kind, "collected", "{when}: {e:?}");
        assert!(
            fx.candidates.iter().any(|c| c == run),
            "{when}: {run} recorded as collected"
        );
    }
}

fn assert_others_untouched(fx: &Fixture, now: &Logs, when: &str) {
    for (id, log) in &fx.before {
        if fx.owner(id).is_some() {
            continue;
        }
        let live = now
            .get(id)
            .unwrap_or_else(|| panic!("{when}: {id} (not collected) is gone"));
        if id == HOOK_TOKENS_RUN {
            assert!(
                live.0 == log.0 && live.1.starts_with(&log.1),
                "{when}: the hook-token log lost events"
            );
        } else {
            assert_eq!(live, log, "{when}: {id} (not collected) changed");
        }
    }
    for id in now.keys() {
        assert!(fx.before.contains_key(id), "{when}: a new log {id}");
    }
}

/// The property after a crash of a gc: each candidate archived whole, or live whole; no log
/// live with other content; none live once the run's own log is gone.
fn assert_live_or_archived(fx: &Fixture, fs: &SimFs, when: &str) -> Outcome {
    let (store, _) = open(fs);
    let now = snapshot(&store);
    assert_record_names_only_candidates(fx, &store, when);
    let mut outcome = Outcome::default();
    for run in &fx.candidates {
        let mine = fx.logs_of(run);
        for (id, log) in &mine {
            if let Some(live) = now.get(*id) {
                assert_eq!(live, *log, "{when}: {id} live with other content");
            }
        }
        let live_logs = mine.iter().filter(|(id, _)| now.contains_key(*id)).count();
        match read_archive(fs, run) {
            Some(a) => {
                assert_archive_whole(fx, run, &a, when);
                outcome.archived += 1;
            }
            None => assert_eq!(
                live_logs,
                mine.len(),
                "{when}: {run} neither live nor archived"
            ),
        }
        if !now.contains_key(run.as_str()) {
            assert_eq!(
                live_logs, 0,
                "{when}: {run} gone from the store but logs of it are live"
            );
        }
        outcome.live_logs += live_logs;
    }
    let listed = archive::list_archives(fs, Path::new(ARCHIVE_DIR)).unwrap();
    for run in &listed {
        assert!(
            fx.candidates.contains(&run.to_string()),
            "{when}: an archive of {run}"
        );
    }
    assert_others_untouched(fx, &now, when);
    outcome
}

/// What one crash left: candidates with an archive in place, and their logs still live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Outcome {
    archived: usize,
    live_logs: usize,
    /// Temporary files the crash left that the second gc removed.
    temp_files_removed: usize,
}

fn kept_of(report: &GcReport) -> Vec<(String, Kept)> {
    let mut kept = report.kept.clone();
    kept.sort_by(|a, b| a.0.cmp(&b.0));
    kept
}

/// The temporary files in the archive directory (an interrupted archive write).
fn temp_files(fs: &SimFs) -> Vec<String> {
    let mut names = fs.read_dir(Path::new(ARCHIVE_DIR)).unwrap_or_default();
    names.retain(|n| n.starts_with(".tmp-"));
    names
}

/// A second gc after recovery completes (every candidate archived whole, none of its logs
/// live, nothing failed, every temporary file an interrupted archive write left removed and
/// reported), then restoring each puts every log back byte-exact. Returns how many
/// temporary files the second gc removed.
fn assert_second_gc_and_restore(fx: &Fixture, fs: &SimFs, when: &str) -> usize {
    let left = temp_files(fs);
    let (store, world) = open(fs);
    let report = world
        .collect_finished(fs, &params(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{when}: second gc: {e}"));
    assert!(
        report.failed.is_empty(),
        "{when}: second gc: {:?}",
        report.failed
    );
    assert_eq!(kept_of(&report), fx.kept, "{when}: second gc kept");
    assert_eq!(
        temp_files(fs),
        Vec::<String>::new(),
        "{when}: left by the second gc"
    );
    let mut removed: Vec<String> = report
        .collected
        .iter()
        .flat_map(|r| r.removed_temp_files.iter())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    removed.sort();
    let mut left = left;
    left.sort();
    assert_eq!(
        removed, left,
        "{when}: the temporary files the second gc reports"
    );
    let now = snapshot(&store);
    for run in &fx.candidates {
        let a = read_archive(fs, run).unwrap_or_else(|| panic!("{when}: {run} not archived"));
        assert_archive_whole(fx, run, &a, when);
        for (id, _) in fx.logs_of(run) {
            assert!(
                !now.contains_key(id),
                "{when}: {id} live after the second gc"
            );
        }
        restore_run(
            fs,
            Path::new(ARCHIVE_DIR),
            &RunId::new(run).unwrap(),
            &*store,
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{when}: restore {run}: {e}"));
        assert!(
            read_archive(fs, run).is_none(),
            "{when}: the archive stays after restore"
        );
    }
    let now = snapshot(&store);
    assert_restored_whole(fx, &now, when);
    for id in now.keys() {
        let report = store.verify_run(&RunId::new(id).unwrap()).unwrap();
        assert!(
            report.problems.is_empty(),
            "{when}: verify {id}: {:?}",
            report.problems
        );
    }
    removed.len()
}

/// Arms `fault` counted from now (`Trigger::Op(0)` is the next op).
fn arm(fs: &SimFs, fault: Fault) {
    let mut f = fault;
    f.at = match f.at {
        Trigger::Op(k) => Trigger::Op(fs.op_count() + k),
        Trigger::Sync(k) => Trigger::Sync(fs.sync_count() + k),
        Trigger::Call(kind, k) => Trigger::Call(kind, fs.call_count(kind) + k),
    };
    fs.inject(f);
}

/// Ops and sync points of a gc of the fixture (without faults).
fn gc_size(fx: &Fixture) -> (u64, u64) {
    let fs = fx.fs.fork();
    let (_store, world) = open(&fs);
    let (ops, syncs) = (fs.op_count(), fs.sync_count());
    let report = world.collect_finished(&fs, &params(), &mut |_| {}).unwrap();
    let mut collected: Vec<String> = report.collected.iter().map(|r| r.run_id.clone()).collect();
    collected.sort();
    assert_eq!(collected, fx.candidates);
    assert_eq!(kept_of(&report), fx.kept);
    assert!(report.failed.is_empty());
    (fs.op_count() - ops, fs.sync_count() - syncs)
}

fn policies(point: u64, randoms: u64) -> Vec<CrashPolicy> {
    let mut v = vec![CrashPolicy::DropUnsynced, CrashPolicy::KeepUnsynced];
    v.extend((0..randoms).map(|r| CrashPolicy::Random(point * 1000 + r)));
    v
}

/// A gc with `fault` armed, then each crash of that moment checked and finished. With a
/// fault other than a power loss, the state before the crash is checked too (the gc went on
/// past the failed call). Returns what each crash left.
fn gc_with_fault(fx: &Fixture, fault: Fault, policies: &[CrashPolicy]) -> Vec<Outcome> {
    let fs = fx.fs.fork();
    {
        let (_store, world) = open(&fs);
        arm(&fs, fault);
        let _ = world.collect_finished(&fs, &params(), &mut |_| {});
    }
    let mut seen = Vec::new();
    if fault.kind != FaultKind::PowerLoss {
        fs.clear_faults();
        let when = format!("{fault:?}, no crash");
        let now = fs.fork();
        assert_live_or_archived(fx, &now, &when);
        assert_second_gc_and_restore(fx, &now, &when);
    }
    for policy in policies {
        let crashed = fs.fork();
        crashed.crash_with(*policy);
        let when = format!("{fault:?} then crash {policy:?}");
        let mut outcome = assert_live_or_archived(fx, &crashed, &when);
        outcome.temp_files_removed = assert_second_gc_and_restore(fx, &crashed, &when);
        seen.push(outcome);
    }
    seen
}

#[test]
fn gc_power_loss_at_every_op_leaves_each_run_live_or_archived() {
    let fx = fixture();
    let (ops, _) = gc_size(&fx);
    assert!(ops > 30, "a gc of the fixture is only {ops} ops");
    let mut outcomes = Vec::new();
    for k in 0..=ops {
        outcomes.extend(gc_with_fault(
            &fx,
            Fault::power_loss(Trigger::Op(k)),
            &policies(k, 4),
        ));
    }
    // The crashes reach every state: nothing archived, one run archived and live, both
    // gone; and some leave a temporary archive file, which the second gc removes.
    let logs = fx
        .candidates
        .iter()
        .map(|r| fx.logs_of(r).len())
        .sum::<usize>();
    let reached = |archived, live_logs| {
        outcomes
            .iter()
            .any(|o| o.archived == archived && o.live_logs == live_logs)
    };
    assert!(reached(0, logs) && reached(2, 0));
    assert!(outcomes.iter().any(|o| o.archived == 1 && o.live_logs > 0));
    let removed: usize = outcomes.iter().map(|o| o.temp_files_removed).sum();
    assert!(removed > 0, "no crash left a temporary archive file");
    eprintln!(
        "power loss at every op of a gc: {} ops, {} crashes checked, {removed} temporary files removed by the second gc",
        ops + 1,
        outcomes.len()
    );
}

#[test]
fn gc_power_loss_at_every_sync_point_leaves_each_run_live_or_archived() {
    let fx = fixture();
    let (_, syncs) = gc_size(&fx);
    assert!(
        syncs > 8,
        "a gc of the fixture has only {syncs} sync points"
    );
    let mut checked = 0;
    for k in 0..=syncs {
        checked += gc_with_fault(&fx, Fault::power_loss(Trigger::Sync(k)), &policies(k, 16)).len();
    }
    eprintln!(
        "power loss at every sync point of a gc: {} sync points, {checked} crashes checked",
        syncs + 1
    );
}

#[test]
fn gc_with_eio_or_enospc_at_every_op_leaves_each_run_live_or_archived() {
    let fx = fixture();
    let (ops, _) = gc_size(&fx);
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
            checked += gc_with_fault(&fx, fault, &policies).len();
        }
    }
    eprintln!("EIO/ENOSPC at every op of a gc: {ops} ops x 3 faults, {checked} crashes checked");
}

/// The fixture after a complete gc: every candidate archived, none of its logs live.
fn archived_fixture(fx: &Fixture) -> SimFs {
    let fs = fx.fs.fork();
    let (_store, world) = open(&fs);
    let report = world.collect_finished(&fs, &params(), &mut |_| {}).unwrap();
    assert_eq!(report.collected.len(), fx.candidates.len());
    fs
}

/// After a crash of a restore: each candidate's archive is in place and whole, with every
/// live log of it a prefix of the archived copy; or the archive is gone and every log is live
/// whole. Running the restore again (where an archive is left) gives every log back
/// byte-exact.
fn assert_restore_resumable(fx: &Fixture, fs: &SimFs, when: &str) -> usize {
    let (store, _) = open(fs);
    let now = snapshot(&store);
    let mut left = 0;
    for run in &fx.candidates {
        let mine = fx.logs_of(run);
        match read_archive(fs, run) {
            Some(a) => {
                assert_archive_whole(fx, run, &a, when);
                for (id, (meta, events)) in &mine {
                    if let Some((m, e)) = now.get(*id) {
                        assert!(
                            m == meta && events.starts_with(e),
                            "{when}: {id} live and not a prefix of its archive"
                        );
                    }
                }
                restore_run(
                    fs,
                    Path::new(ARCHIVE_DIR),
                    &RunId::new(run).unwrap(),
                    &*store,
                    &mut |_| {},
                )
                .unwrap_or_else(|e| panic!("{when}: restore {run} again: {e}"));
                left += 1;
            }
            None => {
                for (id, log) in &mine {
                    assert_eq!(
                        now.get(*id),
                        Some(*log),
                        "{when}: {id} not back whole, archive gone"
                    );
                }
            }
        }
    }
    let now = snapshot(&store);
    assert_restored_whole(fx, &now, when);
    left
}

/// Restores every candidate, `fault` armed once the store is open.
fn restore_all(fx: &Fixture, fs: &SimFs, fault: Option<Fault>) {
    let (store, _) = open(fs);
    if let Some(f) = fault {
        arm(fs, f);
    }
    for run in &fx.candidates {
        let _ = restore_run(
            fs,
            Path::new(ARCHIVE_DIR),
            &RunId::new(run).unwrap(),
            &*store,
            &mut |_| {},
        );
    }
}

#[test]
fn restore_power_loss_at_every_op_and_sync_point_is_finished_by_running_it_again() {
    let fx = fixture();
    let base = archived_fixture(&fx);
    let (ops, syncs) = {
        let fs = base.fork();
        let (ops, syncs) = (fs.op_count(), fs.sync_count());
        restore_all(&fx, &fs, None);
        assert_eq!(assert_restore_resumable(&fx, &fs, "no fault"), 0);
        (fs.op_count() - ops, fs.sync_count() - syncs)
    };
    let mut checked = 0;
    let mut left = 0;
    let faults = (0..=ops)
        .map(|k| (k, Fault::power_loss(Trigger::Op(k))))
        .chain((0..=syncs).map(|k| (k, Fault::power_loss(Trigger::Sync(k)))));
    for (k, fault) in faults {
        let fs = base.fork();
        restore_all(&fx, &fs, Some(fault));
        for policy in policies(k, 2) {
            let crashed = fs.fork();
            crashed.crash_with(policy);
            left += assert_restore_resumable(
                &fx,
                &crashed,
                &format!("{fault:?} then crash {policy:?}"),
            );
            checked += 1;
        }
    }
    assert!(left > 0, "no crash interrupted a restore");
    eprintln!(
        "power loss at every op and sync point of a restore: {ops} ops, {syncs} sync points, {checked} crashes checked"
    );
}
