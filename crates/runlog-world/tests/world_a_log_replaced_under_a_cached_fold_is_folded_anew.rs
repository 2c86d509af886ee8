//! A World's cached fold of a run is never served once the run's log is another one: the run
//! deleted by another handle (another process, in production) and created anew under the same
//! id, or cut back by `repair` there and written again. Before, the World went on from its
//! cached seq: it answered with the deleted run's state, acknowledged events the new log's
//! rules forbid (a step started after `run_completed`), refused every write to a log shorter
//! than its fold (`BUSY` after its fenced retries), and never folded the events written after
//! a repair's cut at seqs it had folded before.
//!
//! Each test: World `a` on one store handle folds a run; World `b`, on a second handle of the
//! same directory, replaces the run's log; then `a` is asked.

mod common;

use std::path::Path;

use common::*;
use runlog::RunId;
use runlog_world::{EventType, Pagination, ResolveData, RunStatus, StepStatus};

fn run_id(run: &str) -> RunId {
    RunId::new(run).unwrap()
}

/// Creates `run` (the given id) of workflow `wf` in `w`.
fn create_run_with_id(w: &TestWorld, run: &str, wf: &str) {
    ev(
        w,
        run,
        EventType::RunCreated,
        None,
        Some(&run_created_data(wf)),
    )
    .unwrap();
}

fn step_ids(w: &TestWorld, run: &str) -> Vec<String> {
    let all = Pagination {
        limit: Some(1000),
        ..Pagination::default()
    };
    let page = w.list_steps(run, &all, ResolveData::None).unwrap();
    assert!(!page.has_more);
    let mut ids: Vec<String> = page.data.into_iter().map(|s| s.step_id).collect();
    ids.sort();
    ids
}

/// A World on a second handle of the store at `dir`: another process's view.
fn other(dir: &Path) -> TestWorld {
    open(dir)
}

/// Deletes `run` through another handle and creates it anew there, of workflow `wf`; that
/// handle's World.
fn replaced_by_another(dir: &Path, run: &str, wf: &str) -> TestWorld {
    let b = other(dir);
    b.backend().delete_run(&run_id(run)).unwrap();
    create_run_with_id(&b, run, wf);
    b
}

fn status(w: &TestWorld, run: &str) -> RunStatus {
    w.get_run(run, ResolveData::None).unwrap().status
}

#[test]
fn a_run_deleted_and_created_anew_by_another_handle_is_read_from_its_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let run = running_run(&a);
    step_created(&a, &run, "A1").unwrap();
    assert_eq!(status(&a, &run), RunStatus::Running);

    let b = replaced_by_another(dir.path(), &run, "workflow//./wf//B");
    ev(&b, &run, EventType::RunStarted, None, None).unwrap();
    step_created(&b, &run, "B1").unwrap();
    terminal(&b, &run, EventType::RunCompleted).unwrap();

    let got = a.get_run(&run, ResolveData::None).unwrap();
    assert_eq!(
        (got.status, got.workflow_name.as_str()),
        (RunStatus::Completed, "workflow//./wf//B")
    );
    assert_eq!(step_ids(&a, &run), vec!["B1".to_string()]);
    // The deleted run's step is not in the new log, and the new run has ended: nothing of
    // it may be written.
    assert!(step_started(&a, &run, "A1").is_err());
    assert_eq!(
        kinds(&a, &run),
        [
            "run_created",
            "run_started",
            "step_created",
            "run_completed"
        ]
    );
    assert_eq!(a.folds_dropped(), 1);
}

#[test]
fn a_run_created_anew_with_a_shorter_log_than_the_fold_takes_writes() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let run = running_run(&a);
    for s in ["s1", "s2", "s3"] {
        step_created(&a, &run, s).unwrap();
    }
    assert_eq!(status(&a, &run), RunStatus::Running);

    let _b = replaced_by_another(dir.path(), &run, "workflow//./wf//B");

    let got = a.get_run(&run, ResolveData::None).unwrap();
    assert_eq!(
        (got.status, got.workflow_name.as_str()),
        (RunStatus::Pending, "workflow//./wf//B")
    );
    assert!(step_ids(&a, &run).is_empty());
    // Before, every write here was fenced at the fold's seq 5 against a log at seq 1.
    let started = ev(&a, &run, EventType::RunStarted, None, None).unwrap();
    assert_eq!(started.event.unwrap().seq, 2);
    assert_eq!(a.folds_dropped(), 1);
}

#[test]
fn a_run_cut_back_by_another_handles_repair_is_folded_from_the_cut_log() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let run = running_run(&a);
    step_created(&a, &run, "s1").unwrap();
    step_started(&a, &run, "s1").unwrap();
    // The event at seq 5 carries a marker to damage.
    let data = format!(r#"{{"result":{}}}"#, bin(b"CUT_HERE"));
    ev(&a, &run, EventType::StepCompleted, Some("s1"), Some(&data)).unwrap();
    let s1 = a.get_step(&run, "s1", ResolveData::None).unwrap();
    assert_eq!(s1.status, StepStatus::Completed);

    // Damage the batch at seq 5 (the marker is base64 in the payload) and cut it off.
    flip_marker(dir.path(), &run, &common::base64(b"CUT_HERE"));
    let b = other(dir.path());
    let repair = b
        .backend()
        .repair_run(&run_id(&run))
        .unwrap()
        .expect("repaired");
    assert_eq!(repair.last_seq, 4);

    // `a` folds the cut log: s1 is running again, and its completion can be written.
    let s1 = a.get_step(&run, "s1", ResolveData::None).unwrap();
    assert_eq!(s1.status, StepStatus::Running);
    let done = step_completed(&a, &run, "s1").unwrap();
    assert_eq!(done.event.unwrap().seq, 5);

    // And once more: `b` cuts nothing now, but writes at seqs `a` has folded before.
    step_created(&b, &run, "fromB").unwrap();
    assert_eq!(
        step_ids(&a, &run),
        vec!["fromB".to_string(), "s1".to_string()]
    );
    assert_eq!(a.folds_dropped(), 1);
}

#[test]
fn writes_of_this_world_and_of_another_handle_continue_the_fold_and_never_drop_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let b = other(dir.path());
    let run = running_run(&a);
    // Alone, in groups from several threads, and interleaved with the other handle.
    std::thread::scope(|s| {
        for t in 0..4 {
            let (a, run) = (&a, &run);
            s.spawn(move || {
                for i in 0..20 {
                    step_created(a, run, &format!("a{t}-{i}")).unwrap();
                    a.get_run(run, ResolveData::None).unwrap();
                }
            });
        }
    });
    for i in 0..20 {
        step_created(&b, &run, &format!("b{i}")).unwrap();
        step_started(&a, &run, &format!("b{i}")).unwrap();
        step_completed(&b, &run, &format!("b{i}")).unwrap();
        assert_eq!(
            a.get_step(&run, &format!("b{i}"), ResolveData::None)
                .unwrap()
                .status,
            StepStatus::Completed
        );
    }
    assert_eq!(step_ids(&a, &run).len(), 100);
    assert_eq!(step_ids(&b, &run).len(), 100);
    assert_eq!((a.folds_dropped(), b.folds_dropped()), (0, 0));
}

#[test]
fn a_fold_whose_last_event_is_damaged_reports_the_fault_with_the_state_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let run = running_run(&a);
    step_created(&a, &run, "s1").unwrap();
    let data = format!(
        r#"{{"stepName":"step//./wf//{}","input":{}}}"#,
        "LAST_ONE",
        bin(b"[1]")
    );
    ev(&a, &run, EventType::StepCreated, Some("s2"), Some(&data)).unwrap();
    assert_eq!(step_ids(&a, &run), vec!["s1".to_string(), "s2".to_string()]);

    flip_marker(dir.path(), &run, "LAST_ONE");

    // The fold had read seq 4 before it was damaged; reading it back fails loudly.
    let e = a.get_run(&run, ResolveData::None).unwrap_err();
    assert_eq!(e.status(), 500, "{e}");
    assert!(e.to_string().contains("seg-00000001.log"), "{e}");
    assert_eq!(a.folds_dropped(), 1);
}
