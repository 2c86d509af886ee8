//! The rules of INVARIANTS.md, one test (or more) each, on real files with real fdatasync:
//! the fence (rules 1, 2), atomic batches (3), idempotent facts by key and by event id, dense
//! reads after a cursor (6), segment rolls, `wait`, `list_runs` and delete, several handles on
//! one store, and the per-run state kept in the run's files (10).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use runlog::{Config, Error, NewEvent, RunId, Store};
use ulid::Ulid;

fn setup(config: Config) -> (tempfile::TempDir, Store, RunId) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store"), config).unwrap();
    let run = RunId::new("wrun_test").unwrap();
    store.create_run(&run).unwrap();
    (dir, store, run)
}

fn ev(kind: &str, payload: &str) -> NewEvent {
    NewEvent::new(kind, payload.as_bytes().to_vec())
}

/// Every file under `dir` with its bytes, for byte-for-byte comparisons.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn seqs(store: &Store, run: &RunId) -> Vec<u64> {
    let page = store.read(run, 0, usize::MAX).unwrap();
    page.events.iter().map(|e| e.seq).collect()
}

/// The core API end to end on a real directory: a keyed fact, a fenced two-event decision, a
/// stale decision rejected with `Fenced { expected, actual }` (rule 1), a repeated key answered
/// with the original seq, a read after a cursor, and the same answers after a reopen with
/// `verify_run` clean.
#[test]
fn append_read_fence_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    let run = RunId::new("wrun_1").unwrap();
    store.create_run(&run).unwrap();
    let a = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert_eq!(a[0].seq, 1);
    let seqs = store
        .append_decisions(
            &run,
            1,
            vec![
                NewEvent::new("step_created", "a"),
                NewEvent::new("step_created", "b"),
            ],
        )
        .unwrap();
    assert_eq!(seqs, vec![2, 3]);
    let err = store
        .append_decisions(&run, 1, vec![NewEvent::new("x", "")])
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Fenced {
                expected: 1,
                actual: 3,
                ..
            }
        ),
        "{err}"
    );
    let dup = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert_eq!((dup[0].seq, dup[0].duplicate), (1, true));
    let page = store.read(&run, 1, 10).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(&page.events[1].payload[..], b"b");
    drop(store);
    let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
    assert_eq!(store.last_seq(&run).unwrap(), 3);
    let dup = store
        .append_facts(&run, vec![NewEvent::new("run_created", "{}").key("k1")])
        .unwrap();
    assert!(dup[0].duplicate);
    let report = store.verify_run(&run).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(report.events, 3);
}

/// Rule 2: a decision fenced at 1 after the log grew to 2 is rejected with
/// `Fenced { expected: 1, actual: 2 }` and every file of the store is byte-identical.
#[test]
fn fenced_append_after_log_grew_is_rejected_and_run_dir_is_byte_identical() {
    let (dir, store, run) = setup(Config::default());
    store
        .append_decisions(&run, 0, vec![ev("run_created", "{}")])
        .unwrap();
    store
        .append_facts(&run, vec![ev("hook_received", "{}")])
        .unwrap();
    let before = snapshot(&dir.path().join("store"));
    let err = store
        .append_decisions(
            &run,
            1,
            vec![ev("step_created", "a"), ev("wait_created", "b")],
        )
        .unwrap_err();
    match err {
        Error::Fenced {
            expected, actual, ..
        } => assert_eq!((expected, actual), (1, 2)),
        other => panic!("expected Fenced, got {other}"),
    }
    assert_eq!(
        snapshot(&dir.path().join("store")),
        before,
        "a rejected append changed files"
    );
    assert_eq!(seqs(&store, &run), vec![1, 2]);
}

/// Rule 2: a rejected terminal decision leaves the run exactly as it was (`run_info` equal).
#[test]
fn rejected_terminal_decision_leaves_run_info_unchanged() {
    let (_dir, store, run) = setup(Config::default());
    store
        .append_decisions(&run, 0, vec![ev("run_created", "{}")])
        .unwrap();
    store
        .append_decisions(&run, 1, vec![ev("run_completed", "{}")])
        .unwrap();
    let info = store.run_info(&run).unwrap();
    let err = store.append_decisions(&run, 1, vec![ev("run_completed", "{}")]);
    assert!(matches!(err, Err(Error::Fenced { actual: 2, .. })));
    assert_eq!(store.run_info(&run).unwrap(), info);
}

/// Rule 3: a decision batch whose third event repeats a stored key is refused whole; the same
/// batch without the repeat is appended whole at consecutive seqs.
#[test]
fn decision_batch_is_all_or_nothing() {
    let (_dir, store, run) = setup(Config::default());
    store
        .append_facts(&run, vec![ev("run_created", "{}").key("created")])
        .unwrap();
    // The third event repeats an existing key: the whole batch is refused.
    let batch = vec![
        ev("hook_created", "h"),
        ev("step_created", "s"),
        ev("wait_created", "w").key("created"),
    ];
    let err = store.append_decisions(&run, 1, batch).unwrap_err();
    assert!(
        matches!(err, Error::DuplicateDecision { seq: 1, .. }),
        "{err}"
    );
    assert_eq!(seqs(&store, &run), vec![1]);
    let batch = vec![
        ev("hook_created", "h"),
        ev("step_created", "s"),
        ev("wait_created", "w"),
    ];
    assert_eq!(
        store.append_decisions(&run, 1, batch).unwrap(),
        vec![2, 3, 4]
    );
    let kinds: Vec<String> = store
        .read(&run, 1, 10)
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.kind.to_string())
        .collect();
    assert_eq!(kinds, ["hook_created", "step_created", "wait_created"]);
}

/// Facts are idempotent by key and by caller-supplied event id, also after a reopen: a repeat
/// answers the original seq with `duplicate`, appends nothing, and the original is kept.
#[test]
fn idempotent_facts_by_key_and_by_event_id_survive_reopen() {
    let (dir, store, run) = setup(Config::default());
    let id = Ulid::from_parts(1_700_000_000_000, 42);
    let first = store
        .append_facts(
            &run,
            vec![
                ev("step_completed", "a").key("step_1"),
                ev("hook_received", "b").event_id(id),
            ],
        )
        .unwrap();
    assert_eq!(
        first
            .iter()
            .map(|a| (a.seq, a.duplicate))
            .collect::<Vec<_>>(),
        [(1, false), (2, false)]
    );
    drop(store);
    let store = Store::open(dir.path().join("store"), Config::default()).unwrap();
    let again = store
        .append_facts(
            &run,
            vec![
                ev("step_completed", "a2").key("step_1"),
                ev("x", "new"),
                ev("hook_received", "b2").event_id(id),
            ],
        )
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|a| (a.seq, a.duplicate))
            .collect::<Vec<_>>(),
        [(1, true), (3, false), (2, true)]
    );
    let events = store.read(&run, 0, 10).unwrap().events;
    assert_eq!(events.len(), 3);
    assert_eq!(&events[0].payload[..], b"a", "the original is kept");
    assert_eq!(events[1].event_id, id);
}

/// An event id is an event's identity whoever minted it (`eventId` in `runlog export`): a fact
/// carrying the id the store minted for an existing event is a duplicate of that event, not a
/// second event with the same id.
#[test]
fn fact_with_event_id_of_a_stored_minted_event_appends_nothing() {
    let (_dir, store, run) = setup(Config::default());
    store.append_facts(&run, vec![ev("a", "p")]).unwrap();
    let minted = store.read(&run, 0, 1).unwrap().events[0].event_id;

    let got = store
        .append_facts(&run, vec![ev("b", "q").event_id(minted)])
        .unwrap();

    assert_eq!(got[0].seq, 1);
    assert!(got[0].duplicate);
    assert_eq!(store.last_seq(&run).unwrap(), 1);
}

/// A key repeated inside one fact batch is appended once; the repeat answers its seq.
#[test]
fn duplicate_keys_within_one_fact_batch_append_once() {
    let (_dir, store, run) = setup(Config::default());
    let out = store
        .append_facts(
            &run,
            vec![ev("a", "1").key("k"), ev("b", "2").key("k"), ev("c", "3")],
        )
        .unwrap();
    assert_eq!(
        out.iter().map(|a| (a.seq, a.duplicate)).collect::<Vec<_>>(),
        [(1, false), (1, true), (2, false)]
    );
}

/// Dense seqs under concurrency: 8 threads × 2,000 appends give exactly seqs 1..=16,000, each
/// read back equal to what its appender was acknowledged for, with store-minted ids monotonic
/// and fewer group commits than appends.
#[test]
fn eight_threads_two_thousand_appends_each_are_dense_and_read_back_equal() {
    let (_dir, store, run) = setup(Config::default());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (store, run) = (store.clone(), run.clone());
            std::thread::spawn(move || {
                (0..2000)
                    .map(|i| {
                        let payload = format!("t{t}-i{i}");
                        let a = store
                            .append_facts(&run, vec![ev("step_completed", &payload)])
                            .unwrap();
                        (a[0].seq, payload)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut acked: Vec<(u64, String)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    acked.sort();
    assert_eq!(
        acked.iter().map(|a| a.0).collect::<Vec<_>>(),
        (1..=16_000).collect::<Vec<_>>()
    );
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    assert_eq!(events.len(), 16_000);
    for (e, (seq, payload)) in events.iter().zip(&acked) {
        assert_eq!((e.seq, &e.payload[..]), (*seq, payload.as_bytes()));
    }
    let ids: Vec<Ulid> = events.iter().map(|e| e.event_id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "store-minted ids are monotonic within the run"
    );
    let stats = store.commit_stats();
    assert_eq!(stats.events, 16_000);
    assert!(
        stats.groups < 16_000,
        "concurrent appenders share group commits: {stats:?}"
    );
}

/// Rule 6: a read after seq N returns everything above N in seq order, pages through
/// three-event batches with the cursor (`next`) and `has_more`, and ends with an empty page.
#[test]
fn read_after_n_is_complete_by_density_with_cursor_and_has_more() {
    let (_dir, store, run) = setup(Config::default());
    for i in 0..10 {
        let batch = (0..3).map(|j| ev("e", &format!("{i}.{j}"))).collect();
        store.append_facts(&run, batch).unwrap();
    }
    let page = store.read(&run, 4, 7).unwrap();
    assert_eq!(
        page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (5..=11).collect::<Vec<_>>()
    );
    assert_eq!((page.next, page.has_more), (11, true));
    let rest = store.read(&run, page.next, 100).unwrap();
    assert_eq!(rest.events.first().map(|e| e.seq), Some(12));
    assert_eq!((rest.next, rest.has_more), (30, false));
    let empty = store.read(&run, 30, 5).unwrap();
    assert_eq!(
        (empty.events.len(), empty.next, empty.has_more),
        (0, 30, false)
    );
}

/// Segments roll at `segment_len_bytes_max`; reads cross segments, `run_info` and `verify_run`
/// agree after a reopen, and appends continue at last + 1.
#[test]
fn segments_roll_at_the_threshold_and_reads_cross_them() {
    let config = Config {
        segment_len_bytes_max: 8 * 1024,
        ..Config::default()
    };
    let (dir, store, run) = setup(config.clone());
    let payload = "x".repeat(500);
    for _ in 0..60 {
        store
            .append_facts(&run, vec![ev("step_completed", &payload)])
            .unwrap();
    }
    let info = store.run_info(&run).unwrap();
    assert_eq!(info.last_seq, 60);
    assert!(info.segment_count >= 4, "{info:?}");
    assert_eq!(seqs(&store, &run), (1..=60).collect::<Vec<_>>());
    drop(store);
    let store = Store::open(dir.path().join("store"), config).unwrap();
    assert_eq!(store.run_info(&run).unwrap(), info);
    let report = store.verify_run(&run).unwrap();
    assert_eq!(
        (report.problems.len(), report.events, report.segments),
        (0, 60, info.segment_count)
    );
    assert_eq!(
        store.append_facts(&run, vec![ev("x", "y")]).unwrap()[0].seq,
        61
    );
}

/// `wait` answers the last seq at its timeout when nothing is committed, and is woken by a
/// commit of another thread before its timeout.
#[test]
fn wait_is_woken_by_an_in_process_commit_and_times_out_otherwise() {
    let (_dir, store, run) = setup(Config::default());
    assert_eq!(store.wait(&run, 0, Duration::from_millis(30)).unwrap(), 0);
    let (s2, r2) = (store.clone(), run.clone());
    let waiter = std::thread::spawn(move || s2.wait(&r2, 0, Duration::from_secs(30)).unwrap());
    std::thread::sleep(Duration::from_millis(50));
    store.append_facts(&run, vec![ev("a", "b")]).unwrap();
    assert_eq!(waiter.join().unwrap(), 1);
}

/// `list_runs` pages in run id order with `next`/`has_more`; `create_run` of an existing id is
/// `RunExists`; `delete_run` removes the run and its directory (no tombstone), and the id can
/// be created again empty.
#[test]
fn list_runs_pages_in_id_order_and_delete_removes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    for i in 0..5 {
        store
            .create_run(&RunId::new(format!("r{i}")).unwrap())
            .unwrap();
    }
    store
        .append_facts(&RunId::new("r3").unwrap(), vec![ev("a", "b")])
        .unwrap();
    let p1 = store.list_runs(None, 2).unwrap();
    assert_eq!(
        p1.runs.iter().map(|r| r.run.as_str()).collect::<Vec<_>>(),
        ["r0", "r1"]
    );
    let p2 = store.list_runs(p1.next.as_ref(), 10).unwrap();
    assert_eq!(
        p2.runs
            .iter()
            .map(|r| (r.run.as_str(), r.last_seq))
            .collect::<Vec<_>>(),
        [("r2", 0), ("r3", 1), ("r4", 0)]
    );
    assert_eq!(
        (p2.next.as_ref().map(RunId::as_str), p2.has_more),
        (Some("r4"), false)
    );
    assert!(p1.has_more);
    let r3 = RunId::new("r3").unwrap();
    assert!(matches!(
        store.create_run(&r3),
        Err(Error::RunExists { .. })
    ));
    store.delete_run(&r3).unwrap();
    assert!(!store.run_exists(&r3).unwrap());
    assert!(matches!(
        store.read(&r3, 0, 1),
        Err(Error::RunNotFound { .. })
    ));
    assert_eq!(store.list_runs(None, 10).unwrap().runs.len(), 4);
    let names: Vec<_> = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 4, "no tombstone left behind: {names:?}");
    store.create_run(&r3).unwrap();
    assert_eq!(store.last_seq(&r3).unwrap(), 0);
}

/// Two handles on one store (rules 1, 6): each sees the other's commits, keys and fence.
#[test]
fn a_second_store_handle_sees_and_continues_the_first_ones_appends() {
    let (dir, a, run) = setup(Config::default());
    let b = Store::open(dir.path().join("store"), Config::default()).unwrap();
    a.append_facts(&run, vec![ev("a", "1").key("k")]).unwrap();
    assert_eq!(b.last_seq(&run).unwrap(), 1);
    assert!(b.append_facts(&run, vec![ev("a", "1").key("k")]).unwrap()[0].duplicate);
    b.append_decisions(&run, 1, vec![ev("b", "2")]).unwrap();
    assert!(matches!(
        a.append_decisions(&run, 1, vec![ev("c", "3")]),
        Err(Error::Fenced { actual: 2, .. })
    ));
    assert_eq!(seqs(&a, &run), [1, 2]);
    assert_eq!(a.wait(&run, 1, Duration::from_millis(1)).unwrap(), 2);
}

/// Rule 1: 8 threads deciding at the last seq they read; exactly one decision wins each
/// position, every loser gets `Fenced` with `actual > expected`, and the log is dense.
#[test]
fn concurrent_deciders_exactly_one_wins_each_position() {
    let (_dir, store, run) = setup(Config::default());
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (store, run) = (store.clone(), run.clone());
            std::thread::spawn(move || {
                let mut wins = 0;
                for _ in 0..50 {
                    let last = store.last_seq(&run).unwrap();
                    match store.append_decisions(
                        &run,
                        last,
                        vec![ev("step_created", &format!("{t}"))],
                    ) {
                        Ok(s) => {
                            assert_eq!(s, vec![last + 1]);
                            wins += 1;
                        }
                        Err(Error::Fenced {
                            expected, actual, ..
                        }) => assert!(actual > expected),
                        Err(e) => panic!("{e}"),
                    }
                }
                wins
            })
        })
        .collect();
    let wins: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(store.last_seq(&run).unwrap(), wins);
    assert_eq!(seqs(&store, &run), (1..=wins).collect::<Vec<_>>());
}

/// Rule 10: 20 runs through a cache of 4 open runs; runs closed and reopened keep their seqs
/// and their key index (state rebuilt from the run's files).
#[test]
fn runs_closed_past_open_runs_max_reopen_with_their_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        open_runs_max: 4,
        ..Config::default()
    };
    let store = Store::open(dir.path(), config).unwrap();
    let ids: Vec<RunId> = (0..20)
        .map(|i| RunId::new(format!("r{i:02}")).unwrap())
        .collect();
    for round in 0..3u64 {
        for id in &ids {
            if round == 0 {
                store.create_run(id).unwrap();
            }
            let key = format!("{id}-{round}");
            let a = store
                .append_facts(id, vec![ev("step_completed", &key).key(&key)])
                .unwrap();
            assert_eq!(a[0].seq, round + 1);
        }
    }
    for id in &ids {
        let dup = store
            .append_facts(id, vec![ev("x", "y").key(format!("{id}-0"))])
            .unwrap();
        assert_eq!(
            (dup[0].seq, dup[0].duplicate),
            (1, true),
            "dedupe survives close/reopen"
        );
        assert_eq!(seqs(&store, id), [1, 2, 3]);
    }
}

/// `(generation, committed_len)` of the newest valid-looking slot at 512 or 1024 of `image`.
fn newest_slot(image: &[u8]) -> (u64, u64) {
    let slot = |at: usize| {
        let b = &image[at..at + 64];
        let g = u64::from_le_bytes(b[8..16].try_into().unwrap());
        let len = u64::from_le_bytes(b[24..32].try_into().unwrap());
        if &b[..4] == b"SLOT" { (g, len) } else { (0, 0) }
    };
    slot(512).max(slot(1024))
}

/// Rule 10 with SPEC §3/§5: commits publish their counter in the run's lock file and leave the
/// segment header page alone, except for a checkpoint every 64 commits written into the
/// header slot that does not hold its newest counter; a store whose lock file is lost (as a
/// crash can lose its unsynced page) still opens with every acknowledged event.
#[test]
fn commits_leave_the_header_alone_between_checkpoints_and_the_lock_file_is_not_needed() {
    let (dir, store, run) = setup(Config::default());
    let run_dir = dir.path().join("store").join("runs").join(run.as_str());
    let seg = run_dir.join("seg-00000001.log");
    let header = |p: &Path| std::fs::read(p).unwrap()[..4096].to_vec();
    let created = header(&seg);
    assert_eq!(
        newest_slot(&created),
        (2, 4096),
        "both slots valid at creation"
    );
    for i in 0..63 {
        store
            .append_facts(&run, vec![ev("tick", &format!("{i}"))])
            .unwrap();
    }
    assert_eq!(header(&seg), created, "63 commits: header bytes untouched");
    let lock = std::fs::read(run_dir.join("lock")).unwrap();
    let committed = |s: &Store| 4096 + s.run_info(&run).unwrap().committed_bytes;
    let file_len = committed(&store);
    assert_eq!(
        newest_slot(&lock),
        (65, file_len),
        "commit counter in the lock file"
    );
    store.append_facts(&run, vec![ev("tick", "63")]).unwrap();
    assert_eq!(
        header(&seg),
        created,
        "generation 66: not an odd distance from 2"
    );
    store.append_facts(&run, vec![ev("tick", "64")]).unwrap();
    let after = header(&seg);
    let file_len = committed(&store);
    assert_eq!(
        newest_slot(&after),
        (67, file_len),
        "checkpoint at generation 67"
    );
    assert_eq!(
        &after[1024..1088],
        &created[1024..1088],
        "slot B (gen 2) kept"
    );
    assert_ne!(&after[512..576], &created[512..576], "slot A rewritten");
    for i in 65..70 {
        store
            .append_facts(&run, vec![ev("tick", &format!("{i}"))])
            .unwrap();
    }
    drop(store);
    std::fs::remove_file(run_dir.join("lock")).unwrap();
    let store = Store::open(dir.path().join("store"), Config::default()).unwrap();
    assert_eq!(seqs(&store, &run), (1..=70).collect::<Vec<_>>());
    assert!(
        store.verify_run(&run).unwrap().notes.is_empty(),
        "tail adopted"
    );
}
