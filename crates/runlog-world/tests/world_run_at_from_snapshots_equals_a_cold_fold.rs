//! Fold snapshots (issue 25): `World::run_at` on a World that keeps fold snapshots of a run
//! (taken by its earlier calls, at multiples of 4,096 events on a run of this length) answers exactly
//! what a fresh World folding from seq 1 answers, at every seq around and between the
//! snapshots; a run deleted and created anew under its id (other events at the snapshots'
//! seqs) is folded from its own log, not from the old snapshots. And `run_at` merges the
//! run's attribute log (`runs.experimentalSetAttributes`) as it stood at the seq's time.

use std::sync::Arc;
use std::time::Duration;

use runlog::{Config, NewEvent, RunId, RunLog, Store};
use runlog_world::{
    At, CreateEventParams, EventRequest, EventType, World, WorldConfig, mint_run_id,
};

type TestWorld = World<Arc<Store>>;

/// Events of the test run: `run_created`, `run_started`, then steps of three events each.
const EVENTS: u64 = 10_000;

fn store(dir: &std::path::Path) -> Arc<Store> {
    Arc::new(Store::open(dir, Config::default()).unwrap())
}

/// Creates `run` through `w` and fills it to [`EVENTS`] events of steps named `tag-<i>`.
fn fill(w: &TestWorld, run: &str, tag: &str) {
    let p = CreateEventParams::default();
    let created = r#"{"deploymentId":"dpl","workflowName":"wf","input":[1]}"#;
    let req = EventRequest::new(EventType::RunCreated)
        .data(created)
        .unwrap();
    w.create_event(Some(run), req, &p).unwrap();
    w.create_event(Some(run), EventRequest::new(EventType::RunStarted), &p)
        .unwrap();
    let id = RunId::new(run).unwrap();
    let mut batch = Vec::new();
    for seq in 3..=EVENTS {
        let step = format!("step_{}", (seq - 3) / 3);
        let e = match (seq - 3) % 3 {
            0 => NewEvent::new(
                "step_created",
                format!(r#"{{"stepName":"{tag}-{seq}","input":[{seq}]}}"#),
            ),
            1 => NewEvent::new("step_started", Vec::new()),
            _ => NewEvent::new("step_completed", format!(r#"{{"result":{seq}}}"#)),
        };
        batch.push(e.correlation_id(step));
        if batch.len() == 1000 {
            w.backend()
                .append_facts(&id, std::mem::take(&mut batch))
                .unwrap();
        }
    }
    w.backend().append_facts(&id, batch).unwrap();
    assert_eq!(w.backend().last_seq(&id).unwrap(), EVENTS);
}

fn cold(store: &Arc<Store>) -> TestWorld {
    World::new(store.clone(), WorldConfig::default())
}

#[test]
fn run_at_from_a_snapshot_equals_a_fresh_worlds_fold() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let warm = cold(&store);
    let run = mint_run_id();
    fill(&warm, &run, "a");
    assert_eq!(warm.fold_snapshot_seqs(&run).unwrap(), Vec::<u64>::new());
    let whole = warm.run_at(&run, At::Seq(EVENTS)).unwrap();
    assert_eq!(whole.steps.len(), 3333);
    assert_eq!(
        warm.fold_snapshot_seqs(&run).unwrap(),
        vec![8192],
        "the last multiple"
    );
    warm.run_at(&run, At::Seq(8000)).unwrap();
    assert_eq!(warm.fold_snapshot_seqs(&run).unwrap(), vec![4096, 8192]);
    for seq in [1, 2, 4095, 4096, 4097, 6000, 8191, 8192, 8193, 9999, EVENTS] {
        let fresh = cold(&store).run_at(&run, At::Seq(seq)).unwrap();
        assert_eq!(warm.run_at(&run, At::Seq(seq)).unwrap(), fresh, "seq {seq}");
        assert_eq!(fresh.seq, seq);
    }
    let diff = warm.run_diff(&run, At::Seq(8192), At::Seq(8195)).unwrap();
    let fresh = cold(&store)
        .run_diff(&run, At::Seq(8192), At::Seq(8195))
        .unwrap();
    assert_eq!(diff, fresh);
    let changed: Vec<&str> = diff.changes.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(changed, ["step_2730"], "{diff:?}");
}

#[test]
fn a_run_created_anew_under_its_id_is_not_folded_from_the_old_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let warm = cold(&store);
    let run = mint_run_id();
    fill(&warm, &run, "old");
    warm.run_at(&run, At::Seq(5000)).unwrap();
    warm.run_at(&run, At::Seq(EVENTS)).unwrap();
    assert_eq!(warm.fold_snapshot_seqs(&run).unwrap(), vec![4096, 8192]);

    store.delete_run(&RunId::new(&run).unwrap()).unwrap();
    let writer = cold(&store);
    fill(&writer, &run, "new");
    let at = warm.run_at(&run, At::Seq(9000)).unwrap();
    assert_eq!(at, cold(&store).run_at(&run, At::Seq(9000)).unwrap());
    let names: Vec<&str> = at.steps.iter().map(|s| s.step_name.as_str()).collect();
    assert_eq!(names.len(), 3000);
    assert!(
        names.iter().all(|n| n.starts_with("new-")),
        "{:?}",
        &names[..3]
    );
    assert_eq!(
        warm.fold_snapshot_seqs(&run).unwrap(),
        vec![8192],
        "the old ones dropped, the new fold's kept"
    );
}

#[test]
fn run_at_merges_the_attribute_changes_made_by_then() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let w = cold(&store);
    let run = mint_run_id();
    let p = CreateEventParams::default();
    let created = r#"{"deploymentId":"dpl","workflowName":"wf","input":[1]}"#;
    let req = EventRequest::new(EventType::RunCreated)
        .data(created)
        .unwrap();
    w.create_event(Some(&run), req, &p).unwrap();
    let later = || std::thread::sleep(Duration::from_millis(3));
    later();
    w.set_run_attributes(&run, &[("phase".into(), Some("one".into()))], false)
        .unwrap();
    later();
    w.create_event(Some(&run), EventRequest::new(EventType::RunStarted), &p)
        .unwrap();
    later();
    w.set_run_attributes(&run, &[("phase".into(), Some("two".into()))], false)
        .unwrap();
    let phase = |at: At| {
        let found = w.run_at(&run, at).unwrap().run.unwrap();
        found.attributes.get("phase").cloned()
    };
    assert_eq!(phase(At::Seq(1)), None, "the change came after run_created");
    assert_eq!(phase(At::Seq(2)), Some("one".into()));
    assert_eq!(
        w.get_run(&run, runlog_world::ResolveData::All)
            .unwrap()
            .attributes
            .get("phase")
            .map(String::as_str),
        Some("two")
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(phase(At::Time(now)), Some("two".into()));
}
