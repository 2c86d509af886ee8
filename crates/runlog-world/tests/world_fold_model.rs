//! Model test of the rules and the fold: random sequences of valid and invalid requests on
//! two runs go through `create_event` on a real store and through a small reference model
//! written from the rules (docs/WORLD.md, the crate's "Rules"); after every request the
//! outcome (event, hook_conflict, no event, or the error class and status) must match, and at
//! the end every entity, the event count, and a fold from seq 1 by a World with nothing
//! cached (0 anomalies) must match the model.
//!
//! Cases: `PROPTEST_CASES` (default 64).

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::*;
use proptest::prelude::*;
use runlog_world::{EventType, ResolveData, RunStatus, WaitStatus, WorldError};

#[derive(Clone, Debug)]
enum Op {
    Create,
    Start,
    End(u8),
    StepCreated(u8),
    StepStarted(u8),
    LazyStart(u8),
    StepCompleted(u8),
    StepFailed(u8),
    StepRetrying(u8),
    HookCreated(u8, u8),
    HookReceived(u8),
    HookDisposed(u8),
    WaitCreated(u8),
    WaitCompleted(u8),
    Attr(u8, Option<u8>),
    Malformed,
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u8..3;
    prop_oneof![
        3 => Just(Op::Create),
        3 => Just(Op::Start),
        2 => (0u8..3).prop_map(Op::End),
        3 => id.clone().prop_map(Op::StepCreated),
        3 => id.clone().prop_map(Op::StepStarted),
        3 => id.clone().prop_map(Op::LazyStart),
        3 => id.clone().prop_map(Op::StepCompleted),
        2 => id.clone().prop_map(Op::StepFailed),
        2 => id.clone().prop_map(Op::StepRetrying),
        3 => (id.clone(), 0u8..3).prop_map(|(h, t)| Op::HookCreated(h, t)),
        2 => id.clone().prop_map(Op::HookReceived),
        2 => id.clone().prop_map(Op::HookDisposed),
        2 => id.clone().prop_map(Op::WaitCreated),
        2 => id.clone().prop_map(Op::WaitCompleted),
        2 => (id.clone(), proptest::option::of(0u8..3)).prop_map(|(k, v)| Op::Attr(k, v)),
        1 => Just(Op::Malformed),
    ]
}

/// What a request must produce.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Events appended: the returned event's type.
    Event(EventType, usize),
    /// An answer without a new event (`run_started` on a running run, `run_cancelled` on a
    /// cancelled one).
    NoEvent,
    /// The error class and status.
    Error(&'static str, u16),
}

use Outcome::*;

#[derive(Default)]
struct MStep {
    status: Option<RunStatus>,
    attempt: u32,
}

#[derive(Default)]
struct MRun {
    status: Option<RunStatus>,
    steps: HashMap<u8, MStep>,
    hooks: HashMap<u8, bool>,
    conflicted: HashSet<u8>,
    waits: HashMap<u8, WaitStatus>,
    attrs: BTreeMap<String, String>,
    events: usize,
}

#[derive(Default)]
struct Model {
    runs: [MRun; 2],
    tokens: HashMap<u8, (usize, u8)>,
}

const NOT_FOUND: Outcome = Error("WorkflowRunNotFoundError", 404);
const CONFLICT: Outcome = Error("EntityConflictError", 409);
const EXPIRED: Outcome = Error("RunExpiredError", 410);

impl Model {
    fn apply(&mut self, r: usize, op: &Op) -> Outcome {
        let out = self.decide(r, op);
        if let Event(_, n) = out {
            self.runs[r].events += n;
        }
        out
    }

    fn decide(&mut self, r: usize, op: &Op) -> Outcome {
        if matches!(op, Op::Malformed) {
            return Error("WorkflowWorldError", 400);
        }
        let run = &mut self.runs[r];
        let Some(status) = run.status else {
            if matches!(op, Op::Create) {
                run.status = Some(RunStatus::Pending);
                return Event(EventType::RunCreated, 1);
            }
            return NOT_FOUND;
        };
        let ended = status.is_terminal();
        match *op {
            Op::Create => CONFLICT,
            Op::Start => match status {
                RunStatus::Pending => {
                    run.status = Some(RunStatus::Running);
                    Event(EventType::RunStarted, 1)
                }
                RunStatus::Running => NoEvent,
                _ => EXPIRED,
            },
            Op::End(k) => {
                let (ty, to) = [
                    (EventType::RunCompleted, RunStatus::Completed),
                    (EventType::RunFailed, RunStatus::Failed),
                    (EventType::RunCancelled, RunStatus::Cancelled),
                ][k as usize];
                if ended {
                    return if to == RunStatus::Cancelled && status == RunStatus::Cancelled {
                        NoEvent
                    } else {
                        CONFLICT
                    };
                }
                run.status = Some(to);
                for live in run.hooks.values_mut() {
                    *live = false;
                }
                self.tokens.retain(|_, (owner, _)| *owner != r);
                Event(ty, 1)
            }
            Op::StepCreated(s) | Op::LazyStart(s) => {
                if ended || run.steps.contains_key(&s) {
                    return CONFLICT;
                }
                let lazy = matches!(op, Op::LazyStart(_));
                let (status, attempt) = if lazy {
                    (RunStatus::Running, 1)
                } else {
                    (RunStatus::Pending, 0)
                };
                run.steps.insert(
                    s,
                    MStep {
                        status: Some(status),
                        attempt,
                    },
                );
                if lazy {
                    Event(EventType::StepStarted, 2)
                } else {
                    Event(EventType::StepCreated, 1)
                }
            }
            Op::StepStarted(s) | Op::StepCompleted(s) | Op::StepFailed(s) | Op::StepRetrying(s) => {
                let Some(step) = run.steps.get_mut(&s) else {
                    return Error("WorkflowWorldError", 404);
                };
                let st = step.status.unwrap_or(RunStatus::Pending);
                if st.is_terminal() {
                    return CONFLICT;
                }
                let (ty, to) = match op {
                    Op::StepStarted(_) => (EventType::StepStarted, RunStatus::Running),
                    Op::StepCompleted(_) => (EventType::StepCompleted, RunStatus::Completed),
                    Op::StepFailed(_) => (EventType::StepFailed, RunStatus::Failed),
                    _ => (EventType::StepRetrying, RunStatus::Pending),
                };
                let needs_start = matches!(ty, EventType::StepCompleted | EventType::StepRetrying);
                if needs_start && step.attempt == 0 {
                    return CONFLICT;
                }
                let too_late = match ty {
                    EventType::StepStarted | EventType::StepRetrying => ended,
                    _ => ended && st != RunStatus::Running,
                };
                if too_late {
                    return EXPIRED;
                }
                if ty == EventType::StepStarted {
                    step.attempt += 1;
                }
                step.status = Some(to);
                Event(ty, 1)
            }
            Op::HookCreated(h, t) => {
                if ended || run.hooks.contains_key(&h) || run.conflicted.contains(&h) {
                    return CONFLICT;
                }
                if self.tokens.contains_key(&t) {
                    run.conflicted.insert(h);
                    return Event(EventType::HookConflict, 1);
                }
                run.hooks.insert(h, true);
                self.tokens.insert(t, (r, h));
                Event(EventType::HookCreated, 1)
            }
            Op::HookReceived(h) | Op::HookDisposed(h) => {
                if run.hooks.get(&h) != Some(&true) {
                    return Error("HookNotFoundError", 404);
                }
                if matches!(op, Op::HookDisposed(_)) {
                    run.hooks.insert(h, false);
                    self.tokens.retain(|_, owner| *owner != (r, h));
                    return Event(EventType::HookDisposed, 1);
                }
                Event(EventType::HookReceived, 1)
            }
            Op::WaitCreated(w) => {
                if ended || run.waits.contains_key(&w) {
                    return CONFLICT;
                }
                run.waits.insert(w, WaitStatus::Waiting);
                Event(EventType::WaitCreated, 1)
            }
            Op::WaitCompleted(w) => {
                if ended {
                    return EXPIRED;
                }
                match run.waits.get(&w) {
                    None => Error("WorkflowWorldError", 404),
                    Some(WaitStatus::Completed) => CONFLICT,
                    Some(_) => {
                        run.waits.insert(w, WaitStatus::Completed);
                        Event(EventType::WaitCompleted, 1)
                    }
                }
            }
            Op::Attr(k, v) => {
                if ended {
                    return CONFLICT;
                }
                match v {
                    Some(v) => run.attrs.insert(format!("k{k}"), format!("v{v}")),
                    None => run.attrs.remove(&format!("k{k}")),
                };
                Event(EventType::AttrSet, 1)
            }
            Op::Malformed => unreachable!(),
        }
    }
}

fn send(w: &TestWorld, run: &str, op: &Op) -> Result<runlog_world::EventResult, WorldError> {
    match *op {
        Op::Create => ev(
            w,
            run,
            EventType::RunCreated,
            None,
            Some(&run_created_data("wf")),
        ),
        Op::Start => ev(w, run, EventType::RunStarted, None, None),
        Op::End(k) => terminal(
            w,
            run,
            [
                EventType::RunCompleted,
                EventType::RunFailed,
                EventType::RunCancelled,
            ][k as usize],
        ),
        Op::StepCreated(s) => step_created(w, run, &format!("step_{s}")),
        Op::StepStarted(s) => step_started(w, run, &format!("step_{s}")),
        Op::LazyStart(s) => lazy_start(w, run, &format!("step_{s}")),
        Op::StepCompleted(s) => step_completed(w, run, &format!("step_{s}")),
        Op::StepFailed(s) => step_failed(w, run, &format!("step_{s}")),
        Op::StepRetrying(s) => step_retrying(
            w,
            run,
            &format!("step_{s}"),
            Some("2000-01-01T00:00:00.000Z"),
        ),
        Op::HookCreated(h, t) => hook_created(w, run, &format!("hook_{h}"), &format!("token-{t}")),
        Op::HookReceived(h) => hook_received(w, run, &format!("hook_{h}")),
        Op::HookDisposed(h) => hook_disposed(w, run, &format!("hook_{h}")),
        Op::WaitCreated(x) => wait_created(w, run, &format!("wait_{x}")),
        Op::WaitCompleted(x) => wait_completed(w, run, &format!("wait_{x}")),
        Op::Attr(k, v) => {
            let value = v.map_or("null".to_string(), |v| format!("\"v{v}\""));
            let data = format!(
                r#"{{"changes":[{{"key":"k{k}","value":{value}}}],"writer":{{"type":"workflow"}}}}"#
            );
            ev(w, run, EventType::AttrSet, None, Some(&data))
        }
        Op::Malformed => ev(
            w,
            run,
            EventType::StepCreated,
            Some("step_0"),
            Some(r#"{"stepName":"n"}"#),
        ),
    }
}

fn outcome(r: &Result<runlog_world::EventResult, WorldError>) -> Outcome {
    match r {
        Ok(res) => match &res.event {
            // A stored event the answer carries is new unless it is the original terminal
            // event of an idempotent run_cancelled; the caller tells them apart by count.
            Some(e) => Event(e.event_type, 0),
            None => NoEvent,
        },
        Err(e) => Error(e.class_name(), e.status()),
    }
}

fn same(expected: &Outcome, got: &Outcome) -> bool {
    match (expected, got) {
        (Event(a, _), Event(b, _)) => a == b,
        // run_cancelled on a cancelled run returns its original event.
        (NoEvent, Event(EventType::RunCancelled, _)) => true,
        _ => expected == got,
    }
}

fn check_entities(w: &TestWorld, model: &Model, runs: &[String; 2]) {
    for (r, run) in runs.iter().enumerate() {
        let m = &model.runs[r];
        let Some(status) = m.status else {
            assert!(matches!(
                w.get_run(run, ResolveData::All),
                Err(WorldError::RunNotFound { .. })
            ));
            continue;
        };
        let got = w.get_run(run, ResolveData::All).unwrap();
        assert_eq!(got.status, status, "run {r}");
        let attrs: BTreeMap<String, String> = got.attributes.clone();
        assert_eq!(attrs, m.attrs, "run {r} attributes");
        for s in 0..3u8 {
            let step = w.get_step(run, &format!("step_{s}"), ResolveData::All).ok();
            let expected = m.steps.get(&s);
            assert_eq!(
                step.as_ref().map(|x| x.status),
                expected.and_then(|x| x.status),
                "step {s}"
            );
            assert_eq!(
                step.map(|x| x.attempt),
                expected.map(|x| x.attempt),
                "step {s} attempt"
            );
        }
        let state = w.run_state(run).unwrap();
        for h in 0..3u8 {
            let live = state.hook(&format!("hook_{h}")).is_some();
            assert_eq!(live, m.hooks.get(&h) == Some(&true), "run {r} hook {h}");
        }
        for x in 0..3u8 {
            let wait = state.wait(&format!("wait_{x}")).map(|w| w.status);
            assert_eq!(wait, m.waits.get(&x).copied(), "run {r} wait {x}");
        }
        assert_eq!(kinds(w, run).len(), m.events, "run {r} event count");
    }
    for (t, (r, h)) in &model.tokens {
        let hook = w.get_hook_by_token(&format!("token-{t}")).unwrap();
        assert_eq!(
            (hook.run_id.as_str(), hook.hook_id.clone()),
            (runs[*r].as_str(), format!("hook_{h}"))
        );
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn create_event_matches_the_model_and_the_fold_rebuilds_every_entity(
        ops in proptest::collection::vec((0usize..2, op()), 1..48)
    ) {
        let (dir, w) = world();
        let runs = [runlog_world::mint_run_id(), runlog_world::mint_run_id()];
        let mut model = Model::default();
        // Run 0 exists from the start in most cases, so that deeper states are reached.
        model.apply(0, &Op::Create);
        send(&w, &runs[0], &Op::Create).unwrap();
        for (r, op) in &ops {
            let expected = model.apply(*r, op);
            let got = outcome(&send(&w, &runs[*r], op));
            prop_assert!(same(&expected, &got), "{op:?} on run {r}: model {expected:?}, world {got:?}");
        }
        check_entities(&w, &model, &runs);
        // Nothing cached: every entity folded again from the logs.
        let fresh = open(dir.path());
        check_entities(&fresh, &model, &runs);
        for run in &runs {
            if let Ok(state) = fresh.run_state(run) {
                prop_assert_eq!(state.anomalies(), 0);
            }
        }
    }
}
