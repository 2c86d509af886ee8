//! `World::run_at` (issue 25): a run as of seq N is the World's state on its log truncated at N,
//! for every N of every run of the whole corpus of real world-local runs
//! (`tests/fixtures/world-local-5.0.0-beta.29/`): the run (`runs.get`), its steps
//! (`steps.list`), live hooks (`hooks.list`) and waits, each compared with what a fresh World
//! answers on a second store holding only events 1..=N. A time names the last seq whose
//! `createdAt` is at or before it; seq 0, a seq past the end and a time before the first event
//! are typed errors. `World::run_diff` between N-1 and N names exactly the entities that differ
//! between the two states, with event N.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::corpus::{repo_root, runs_with_spec};
use runlog::{Config, RunId, RunLog, Store};
use runlog_world::{
    At, Change, Entity, EntityKind, Pagination, ResolveData, RunAt, SortOrder, World, WorldConfig,
    WorldError,
};

type TestWorld = World<Arc<Store>>;
/// A corpus run: its spec version and events.
type Corpus = (Option<u32>, Vec<runlog::Event>);

fn meta(spec: Option<u32>) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({"source": "world-local", "spec_version": spec})).unwrap()
}

fn all() -> Pagination {
    Pagination {
        limit: Some(runlog_world::PAGE_LIMIT_MAX),
        sort_order: Some(SortOrder::Asc),
        ..Pagination::default()
    }
}

/// What a World on `store` (fresh: nothing cached) answers for `run` through its reads.
fn truncated_view(store: &Arc<Store>, run: &str, seq: u64) -> RunAt {
    let w = World::new(store.clone(), WorldConfig::default());
    let found = match w.get_run(run, ResolveData::All) {
        Ok(r) => Some(r),
        Err(WorldError::RunNotFound { .. }) => None,
        Err(e) => panic!("{run} at {seq}: {e}"),
    };
    let steps = w.list_steps(run, &all(), ResolveData::All).unwrap();
    let hooks = w.list_hooks(Some(run), &all(), ResolveData::All).unwrap();
    assert!(!steps.has_more && !hooks.has_more);
    let state = w.run_state(run).unwrap();
    RunAt {
        seq: state.seq(),
        last_seq: seq,
        run: found,
        steps: steps.data,
        hooks: hooks.data,
        waits: state.waits().map(|(_, w)| w.clone()).collect(),
    }
}

/// The whole corpus in one store (each run whole), as a World.
fn corpus_world(dir: &std::path::Path) -> (TestWorld, BTreeMap<String, Corpus>) {
    let store = Arc::new(Store::open(dir, Config::default()).unwrap());
    let mut runs = BTreeMap::new();
    for (run, (spec, events)) in runs_with_spec(&repo_root().join(CORPUS)) {
        let id = RunId::new(&run).unwrap();
        store.create_run(&id, &meta(spec)).unwrap();
        store
            .append_facts(
                &id,
                events.iter().map(runlog::Event::to_new_event).collect(),
            )
            .unwrap();
        runs.insert(run, (spec, events));
    }
    (World::new(store, WorldConfig::default()), runs)
}

const CORPUS: &str = "tests/fixtures/world-local-5.0.0-beta.29";

#[test]
fn run_at_every_seq_of_the_corpus_equals_a_world_on_the_log_truncated_there() {
    let tmp = tempfile::tempdir().unwrap();
    let (world, runs) = corpus_world(&tmp.path().join("whole"));
    let mut checked = 0;
    let mut with = [0usize; 4]; // states holding a run, a step, a hook, a wait
    for (run, (spec, events)) in &runs {
        // A second store growing one event at a time: at each N it holds the log truncated at N.
        let truncated = Arc::new(Store::open(tmp.path().join(run), Config::default()).unwrap());
        let id = RunId::new(run).unwrap();
        truncated.create_run(&id, &meta(*spec)).unwrap();
        for (i, e) in events.iter().enumerate() {
            let n = i as u64 + 1;
            truncated.append_facts(&id, vec![e.to_new_event()]).unwrap();
            let at = world.run_at(run, At::Seq(n)).unwrap();
            let want = truncated_view(&truncated, run, events.len() as u64);
            assert_eq!(want.seq, n);
            // The truncated World's hooks are those available now; a corpus hook carries no
            // tokenRetentionUntil, so they are the live ones.
            assert_eq!(at, want, "{run} at seq {n}");
            with[0] += usize::from(at.run.is_some());
            with[1] += usize::from(!at.steps.is_empty());
            with[2] += usize::from(!at.hooks.is_empty());
            with[3] += usize::from(!at.waits.is_empty());
            // A time names the last seq created at or before it.
            let by_time = world.run_at(run, At::Time(e.created_at_ms)).unwrap();
            let last_same = events
                .iter()
                .rposition(|x| x.created_at_ms <= e.created_at_ms)
                .unwrap() as u64
                + 1;
            assert_eq!(by_time.seq, last_same, "{run} at {}", e.created_at_ms);
            assert_eq!(by_time, world.run_at(run, At::Seq(last_same)).unwrap());
            checked += 1;
        }
    }
    assert_eq!((runs.len(), checked), (30, 392), "the whole corpus");
    assert!(
        with.iter().all(|&c| c > 0),
        "states with each entity: {with:?}"
    );
}

#[test]
fn seq_zero_a_seq_past_the_end_and_a_time_before_the_first_event_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let (world, runs) = corpus_world(tmp.path());
    let (run, (_, events)) = runs.iter().next().unwrap();
    let last = events.len() as u64;
    let first_ms = events[0].created_at_ms;
    for at in [At::Seq(0), At::Seq(last + 1), At::Time(first_ms - 1)] {
        let e = world.run_at(run, at).unwrap_err();
        match &e {
            WorldError::AtOutOfRange {
                run_id,
                at: got,
                last: l,
            } => assert_eq!((run_id.as_str(), *got, *l), (run.as_str(), at, last)),
            other => panic!("{at}: {other}"),
        }
        assert_eq!((e.class_name(), e.status()), ("WorkflowWorldError", 400));
        assert_eq!(e.code().as_str(), "INVALID_INPUT");
        assert!(
            e.to_string().contains(&format!("ends at seq {last}")),
            "{e}"
        );
    }
    assert_eq!(world.run_at(run, At::Seq(last)).unwrap().seq, last);
    assert_eq!(world.run_at(run, At::Time(u64::MAX)).unwrap().seq, last);
    let missing = "wrun_01M8N4BGVC6PBGA4VZWAQRRZ00";
    assert!(matches!(
        world.run_at(missing, At::Seq(1)),
        Err(WorldError::RunNotFound { .. })
    ));
    assert!(matches!(
        world.run_diff(run, At::Seq(3), At::Seq(2)),
        Err(WorldError::InvalidRequest { .. })
    ));
    assert!(matches!(
        world.run_diff(run, At::Seq(0), At::Seq(last + 1)),
        Err(WorldError::AtOutOfRange { .. })
    ));
    // Parsing: digits are a seq, anything else an ISO-8601 time.
    assert_eq!("12".parse::<At>().unwrap(), At::Seq(12));
    assert_eq!(
        "2026-11-30T02:25:44.946Z".parse::<At>().unwrap(),
        At::Time(runlog_world::parse_iso_ms("2026-11-30T02:25:44.946Z").unwrap())
    );
    assert!(matches!(
        "yesterday".parse::<At>(),
        Err(WorldError::InvalidRequest { .. })
    ));
}

/// The entities of a state, keyed as `run_diff` keys them.
fn keyed(at: &RunAt) -> BTreeMap<(EntityKind, String), Entity> {
    let mut out = BTreeMap::new();
    if let Some(r) = &at.run {
        out.insert(
            (EntityKind::Run, r.run_id.clone()),
            Entity::Run(Box::new(r.clone())),
        );
    }
    for s in &at.steps {
        out.insert(
            (EntityKind::Step, s.step_id.clone()),
            Entity::Step(Box::new(s.clone())),
        );
    }
    for h in &at.hooks {
        out.insert(
            (EntityKind::Hook, h.hook_id.clone()),
            Entity::Hook(Box::new(h.clone())),
        );
    }
    for w in &at.waits {
        out.insert(
            (EntityKind::Wait, w.wait_id.clone()),
            Entity::Wait(Box::new(w.clone())),
        );
    }
    out
}

#[test]
fn diff_of_each_event_names_exactly_the_entities_it_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let (world, runs) = corpus_world(tmp.path());
    let mut quiet = 0;
    for (run, (_, events)) in &runs {
        let mut before = keyed(&RunAt {
            seq: 0,
            last_seq: 0,
            run: None,
            steps: vec![],
            hooks: vec![],
            waits: vec![],
        });
        for n in 1..=events.len() as u64 {
            let after = keyed(&world.run_at(run, At::Seq(n)).unwrap());
            let d = world.run_diff(run, At::Seq(n - 1), At::Seq(n)).unwrap();
            assert_eq!((d.from, d.to), (n - 1, n));
            let mut want: Vec<(EntityKind, String)> = before
                .keys()
                .chain(after.keys())
                .filter(|k| before.get(*k) != after.get(*k))
                .cloned()
                .collect();
            want.sort();
            want.dedup();
            let got: Vec<(EntityKind, String)> =
                d.changes.iter().map(|c| (c.entity, c.id.clone())).collect();
            assert_eq!(got, want, "{run} {}..{n}", n - 1);
            let kind = &events[n as usize - 1].kind;
            for c in &d.changes {
                let key = (c.entity, c.id.clone());
                assert_eq!(c.before.as_ref(), before.get(&key));
                assert_eq!(c.after.as_ref(), after.get(&key));
                let change = match (&c.before, &c.after) {
                    (None, Some(_)) => Change::Created,
                    (Some(_), None) => Change::Removed,
                    _ => Change::Changed,
                };
                assert_eq!(c.change, change);
                // Every change is event N's: its own, or (a hook gone) the run's end.
                assert_eq!(c.events.len(), 1, "{run} {n}: {c:?}");
                assert_eq!((c.events[0].seq, &*c.events[0].event_type), (n, &**kind));
            }
            if d.changes.is_empty() {
                assert_eq!(d.unchanged.len(), 1);
                assert_eq!(
                    (d.unchanged[0].seq, &*d.unchanged[0].event_type),
                    (n, &**kind)
                );
                quiet += 1;
            }
            before = after;
        }
        // The whole log at once: every entity of the end state, created.
        let last = events.len() as u64;
        let whole = world.run_diff(run, At::Seq(0), At::Seq(last)).unwrap();
        let end = keyed(&world.run_at(run, At::Seq(last)).unwrap());
        assert_eq!(whole.changes.len(), end.len(), "{run}");
        assert!(whole.changes.iter().all(|c| c.change == Change::Created));
        let listed: usize =
            whole.changes.iter().map(|c| c.events.len()).sum::<usize>() + whole.unchanged.len();
        assert!(listed <= events.len());
    }
    assert!(
        quiet > 0,
        "some events change no entity (a step_started before its step_created, a hook_received)"
    );
}

#[test]
fn a_start_stored_before_its_creation_changes_nothing_until_the_step_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let (world, _) = corpus_world(tmp.path());
    // This run's log holds step_started of A1 at seq 5 and its step_created at seq 8.
    let run = "wrun_01M8N4BGVC6PBGA4VZWAQRRZ87";
    let a1 = "step_01M8N4BGVC4E5GE9N01QR2A8A1";
    let d = world.run_diff(run, At::Seq(2), At::Seq(8)).unwrap();
    let c = d.changes.iter().find(|c| c.id == a1).expect("A1 changed");
    let seqs: Vec<(u64, &str)> = c
        .events
        .iter()
        .map(|e| (e.seq, e.event_type.as_str()))
        .collect();
    assert_eq!(
        seqs,
        [(8, "step_created")],
        "the event that created it, its start applied"
    );
    let Some(Entity::Step(s)) = &c.after else {
        panic!("a step: {c:?}")
    };
    assert_eq!((s.attempt, s.status), (1, runlog_world::RunStatus::Running));
    let unchanged: Vec<u64> = d.unchanged.iter().map(|e| e.seq).collect();
    assert_eq!(
        unchanged,
        [5, 6, 7],
        "starts of steps not yet created when applied"
    );
}

#[test]
fn a_hook_gone_with_its_runs_end_is_removed_by_the_terminal_event() {
    let (_dir, w) = common::world();
    let run = common::running_run(&w);
    common::hook_created(&w, &run, "hook_a", "tok-a").unwrap();
    common::wait_created(&w, &run, "wait_a").unwrap();
    common::hook_received(&w, &run, "hook_a").unwrap();
    common::terminal(&w, &run, runlog_world::EventType::RunCompleted).unwrap();
    // seqs: 1 run_created, 2 run_started, 3 hook_created, 4 wait_created, 5 hook_received,
    // 6 run_completed.
    let at4 = w.run_at(&run, At::Seq(4)).unwrap();
    assert_eq!((at4.hooks.len(), at4.waits.len(), at4.last_seq), (1, 1, 6));
    assert_eq!(at4.waits[0].wait_id, format!("{run}-wait_a"));
    assert!(w.run_at(&run, At::Seq(6)).unwrap().hooks.is_empty());
    let d = w.run_diff(&run, At::Seq(4), At::Seq(6)).unwrap();
    let rows: Vec<(EntityKind, &str, Change, Vec<u64>)> = d
        .changes
        .iter()
        .map(|c| {
            let seqs = c.events.iter().map(|e| e.seq).collect();
            (c.entity, c.id.as_str(), c.change, seqs)
        })
        .collect();
    assert_eq!(
        rows,
        [
            (EntityKind::Run, run.as_str(), Change::Changed, vec![6]),
            (EntityKind::Hook, "hook_a", Change::Removed, vec![6]),
        ]
    );
    // hook_received changed no entity; the wait did not change.
    assert_eq!(d.unchanged.len(), 1);
    assert_eq!(
        (d.unchanged[0].seq, d.unchanged[0].event_type.as_str()),
        (5, "hook_received")
    );
}
