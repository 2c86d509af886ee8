//! Two writers racing one log through the World: writer A's fenced appends are each
//! preceded, a given number of times, by a write of writer B (another World on the same
//! store: its own caches and locks, as another process). Every such append of A loses its
//! fence, is read again, decided again and retried (`world/fenced.rs`), past the immediate
//! retries into the backoff; A's answer is decided against B's writes, B's answers stand,
//! and A's attempts are counted at the store: one append per attempt, each lost fence a
//! `Fenced` from the store. One test per fenced loop of the World: a request alone, a group
//! commit, the attribute log, the hook token claims log.

mod common;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use common::*;
use parking_lot::Mutex;
use runlog::{Config, RunId, RunLog, Seq, Store};
use runlog_world::{EventRequest, EventType, StepStatus, World, WorldConfig};

/// One write of writer B, made just before one of A's fenced appends reaches the store.
type Intrusion = Box<dyn FnOnce() + Send>;

/// A's backend hook: runs the next queued intrusion before each append, and counts A's
/// appends and the store's `Fenced` answers to them.
#[derive(Default)]
struct Racer {
    intrusions: Mutex<VecDeque<Intrusion>>,
    appends: AtomicU32,
    fenced: AtomicU32,
}

impl Interposer for Racer {
    fn append_decisions(
        &self,
        inner: &dyn RunLog,
        call: Decisions<'_>,
    ) -> runlog::Result<Vec<Seq>> {
        let intrusion = self.intrusions.lock().pop_front();
        if let Some(intrude) = intrusion {
            intrude();
        }
        self.appends.fetch_add(1, Ordering::SeqCst);
        let answer = call.pass(inner);
        if matches!(answer, Err(runlog::Error::Fenced { .. })) {
            self.fenced.fetch_add(1, Ordering::SeqCst);
        }
        answer
    }
}

type RacingWorld = World<Interposed<Arc<Store>, Racer>>;

/// Writer A (through a [`Racer`]) and writer B on one new store, and a run B started.
fn writers() -> (tempfile::TempDir, RacingWorld, Arc<TestWorld>, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path(), Config::default()).unwrap());
    let a = World::new(
        Interposed::new(store.clone(), Racer::default()),
        WorldConfig::default(),
    );
    let b = Arc::new(World::new(store, WorldConfig::default()));
    let run = running_run(&b);
    (dir, a, b, run)
}

/// Queues `n` intrusions on A: intrusion `i` is `write(&b, i)`, which must succeed.
fn intrude<T: std::fmt::Debug + Send + 'static>(
    a: &RacingWorld,
    b: &Arc<TestWorld>,
    n: usize,
    write: impl Fn(&TestWorld, usize) -> Result<T, runlog_world::WorldError> + Send + Sync + 'static,
) -> Arc<Mutex<Vec<T>>> {
    let answers = Arc::new(Mutex::new(Vec::new()));
    let write = Arc::new(write);
    let mut queue = a.backend().hooks.intrusions.lock();
    for i in 0..n {
        let (b, write, answers) = (b.clone(), write.clone(), answers.clone());
        queue.push_back(Box::new(move || {
            let answer = write(&b, i).expect("writer B's write");
            answers.lock().push(answer);
        }));
    }
    answers
}

fn step_req(corr: &str) -> EventRequest {
    let data = format!(
        r#"{{"stepName":"step//./wf//add","input":{}}}"#,
        bin(b"[1]")
    );
    req(EventType::StepCreated, Some(corr), Some(&data))
}

/// (appends, fenced) A made so far.
fn counted(a: &RacingWorld) -> (u32, u32) {
    let hooks = &a.backend().hooks;
    (
        hooks.appends.load(Ordering::SeqCst),
        hooks.fenced.load(Ordering::SeqCst),
    )
}

fn stored(store: &Store, run: &str) -> Vec<(String, Option<String>)> {
    let page = store.read(&RunId::new(run).unwrap(), 0, 100).unwrap();
    page.events
        .into_iter()
        .map(|e| (e.kind.into(), e.correlation_id.map(String::from)))
        .collect()
}

#[test]
fn a_request_losing_its_fence_six_times_to_another_world_commits_after_its_writes() {
    let (_d, a, b, run) = writers();
    // Six: past the four immediate retries, so the backoff sleeps twice.
    let b_answers = intrude(&a, &b, 6, {
        let run = run.clone();
        move |b, i| step_created(b, &run, &format!("step_b{i}"))
    });
    let answer = a
        .create_event(Some(&run), step_req("step_a"), &params())
        .expect("A's step");

    assert_eq!(counted(&a), (7, 6), "7 appends, the first 6 fenced");
    let event = answer.event.expect("the event");
    assert_eq!(event.seq, 9);
    assert_eq!(event.correlation_id.as_deref(), Some("step_a"));
    assert_eq!(answer.step.expect("the step").status, StepStatus::Pending);
    let b_seqs: Vec<u64> = b_answers
        .lock()
        .iter()
        .map(|r| r.event.as_ref().unwrap().seq)
        .collect();
    assert_eq!(b_seqs, [3, 4, 5, 6, 7, 8]);
    let log = stored(&a.backend().inner, &run);
    assert_eq!(log.len(), 9);
    assert_eq!(log[8], ("step_created".into(), Some("step_a".into())));
    // Both Worlds see all seven steps, A's decided after B's.
    for state in [a.run_state(&run).unwrap(), b.run_state(&run).unwrap()] {
        assert_eq!(state.seq(), 9);
        assert_eq!(state.anomalies(), 0);
    }
}

#[test]
fn a_group_losing_its_fence_is_decided_again_against_the_other_worlds_steps() {
    let (_d, a, b, run) = writers();
    // B first takes step_c, which A's group also asks for, then step_d.
    intrude(&a, &b, 2, {
        let run = run.clone();
        move |b, i| step_created(b, &run, ["step_c", "step_d"][i])
    });
    let requests = ["step_a", "step_c"]
        .map(|s| (Some(run.clone()), step_req(s), params()))
        .to_vec();
    let mut answers = a.create_events(requests).into_iter();

    assert_eq!(counted(&a), (3, 2), "one batch per attempt, two fenced");
    let step_a = answers.next().unwrap().expect("step_a commits");
    assert_eq!(step_a.event.unwrap().seq, 5);
    // Decided again after B's step_c: A's is a duplicate now, and nothing of it is written.
    let step_c = answers.next().unwrap().expect_err("B holds step_c");
    assert_eq!(step_c.status(), 409, "{step_c}");
    let corrs: Vec<_> = stored(&a.backend().inner, &run)
        .into_iter()
        .skip(2)
        .map(|(_, c)| c.unwrap())
        .collect();
    assert_eq!(corrs, ["step_c", "step_d", "step_a"]);
}

#[test]
fn an_attribute_change_losing_its_fence_keeps_the_other_worlds_changes() {
    let (_d, a, b, run) = writers();
    let b_answers = intrude(&a, &b, 5, {
        let run = run.clone();
        move |b, i| b.set_run_attributes(&run, &[(format!("b{i}"), Some("B".into()))], false)
    });
    let after = a
        .set_run_attributes(&run, &[("a".into(), Some("A".into()))], false)
        .expect("A's change");

    assert_eq!(counted(&a), (6, 5));
    let keys: Vec<_> = after.keys().map(String::as_str).collect();
    assert_eq!(keys, ["a", "b0", "b1", "b2", "b3", "b4"]);
    assert_eq!(after["a"], "A");
    // Each of B's answers saw B's earlier changes, and none of A's.
    let b_lens: Vec<usize> = b_answers.lock().iter().map(|m| m.len()).collect();
    assert_eq!(b_lens, [1, 2, 3, 4, 5]);
    let seen_by_b = b.get_run(&run, Default::default()).unwrap().attributes;
    assert_eq!(seen_by_b, after);
}

#[test]
fn a_token_claim_losing_its_fence_to_another_worlds_claims_is_retried_then_commits() {
    let (_d, a, b, run) = writers();
    let other_run = running_run(&b);
    // B's hooks live in another run: only the shared claims log is contested.
    intrude(&a, &b, 3, move |b, i| {
        hook_created(b, &other_run, &format!("hook_b{i}"), &format!("tok-b{i}"))
    });
    let data = format!(r#"{{"token":"tok-a","metadata":{}}}"#, bin(b"m"));
    let answer = a
        .create_event(
            Some(&run),
            req(EventType::HookCreated, Some("hook_a"), Some(&data)),
            &params(),
        )
        .expect("A's hook");

    // Claims log: 3 fenced claims and the fourth; then the run's own append.
    assert_eq!(counted(&a), (5, 3));
    assert_eq!(answer.event.unwrap().seq, 3);
    assert_eq!(answer.hook.expect("the hook").token, "tok-a");
    for (token, hook) in [
        ("tok-a", "hook_a"),
        ("tok-b0", "hook_b0"),
        ("tok-b2", "hook_b2"),
    ] {
        assert_eq!(a.get_hook_by_token(token).unwrap().hook_id, hook);
    }
}
