//! The simulated workflow: its event vocabulary and `derive`, the pure function from a log
//! prefix to the decisions the workflow would make next.
//!
//! The workflow, written as the program a user would write:
//!
//! ```text
//! start:   create hooks h1..hH (each expects N receipts), steps s1..sK, and one sleep w1
//! on step_completed(s, r):  if stage(s) < depth and r % 4 != 0, create a follow-up step(input r)
//! on hook_received(h, v):   create a leaf step(input v)
//! on wait_completed(w1):    create a leaf step(input = how many steps had completed by then)
//! once every step is done, every receipt arrived and the sleep ended: run_completed(result)
//! ```
//!
//! Step ids come from a counter in the order the program creates steps, which follows the
//! order facts appear in the log, so a decision depends on which facts precede it: that is
//! why a decision batch is only right at the position it was derived for.
//!
//! `derive` replays the log like a replay-based engine: the program reacts to each fact in
//! seq order, issuing commands; each stored decision consumes the pending command of the
//! same kind and id (a stored decision matching nothing, e.g. a duplicate, is ignored, as a
//! lenient engine would). What is still pending at the end is the next decision batch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use runlog::{Event, NewEvent, Seq};

/// Kind of the first event, appended by the harness at seq 1.
pub const RUN_CREATED: &str = "run_created";
/// Decision: a step was created (correlation id = step id).
pub const STEP_CREATED: &str = "step_created";
/// Decision: a hook was created (correlation id = hook id).
pub const HOOK_CREATED: &str = "hook_created";
/// Decision: a sleep was created (correlation id = wait id).
pub const WAIT_CREATED: &str = "wait_created";
/// Decision: the terminal event.
pub const RUN_COMPLETED: &str = "run_completed";
/// Fact: a step executor finished a step (key `done:<step>`).
pub const STEP_COMPLETED: &str = "step_completed";
/// Fact: a hook sender delivered a payload (key `<hook>:<k>`).
pub const HOOK_RECEIVED: &str = "hook_received";
/// Fact: the sleep ended (key `wait:<wait>`).
pub const WAIT_COMPLETED: &str = "wait_completed";
/// The decision kinds derived by the workflow (`run_created` is the harness's).
pub const DECISION_KINDS: [&str; 4] = [STEP_CREATED, HOOK_CREATED, WAIT_CREATED, RUN_COMPLETED];
/// The one wait id of the workflow.
pub const WAIT_ID: &str = "w1";

/// The shape of one run, stored in the `run_created` payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// Seeds step results and hook values.
    pub salt: u64,
    /// Steps created at start.
    pub fan_out: u32,
    /// Longest chain of follow-up steps after an initial step.
    pub depth: u32,
    /// Hooks created at start.
    pub hooks: u32,
    /// Receipts each hook expects.
    pub receipts: u32,
    /// Length of the sleep, in milliseconds.
    pub sleep_ms: u64,
}

/// One decision as the workflow derives it: kind, correlation id and body (the payload
/// without the batch marker).
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// One of [`DECISION_KINDS`].
    pub kind: String,
    /// Correlation id (`None` only for `run_completed`).
    pub id: Option<String>,
    /// Deterministic content.
    pub body: Value,
}

/// The batch marker stored with every decision: which append it belonged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMark {
    /// The `expected_seq` (log length) the batch was derived from.
    pub base: Seq,
    /// Index of this event in its batch, from 0.
    pub i: u32,
    /// Events in the batch.
    pub n: u32,
    /// The replayer that appended it.
    pub by: u32,
}

#[derive(Serialize, Deserialize)]
struct DecisionPayload {
    batch: BatchMark,
    body: Value,
}

/// A log the workflow cannot interpret.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The log does not start with `run_created` at seq 1.
    #[error("log does not start with run_created at seq 1")]
    NoRunCreated,
    /// An event's payload or kind does not fit the workflow's vocabulary.
    #[error("event at seq {seq}: {detail}")]
    Malformed {
        /// Where.
        seq: Seq,
        /// What.
        detail: String,
    },
}

/// The splitmix64 finalizer over `a ^ b·φ`: a cheap deterministic mixer.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn mix_str(a: u64, s: &str) -> u64 {
    s.bytes().fold(a, |h, b| mix(h, u64::from(b)))
}

/// The result a step executor reports for step `id` with `input`.
pub fn step_result(salt: u64, id: &str, input: u64) -> u64 {
    mix(mix_str(salt, id), input)
}

/// The value hook sender delivers as receipt `k` of hook `hook`.
pub fn hook_value(salt: u64, hook: &str, k: u32) -> u64 {
    mix(mix_str(salt ^ 0x686F_6F6B, hook), u64::from(k))
}

/// The `run_created` event for `params` (appended by the harness at seq 1).
pub fn run_created(params: &Params) -> NewEvent {
    NewEvent::new(RUN_CREATED, json!({ "params": params }).to_string())
}

/// The `step_completed` fact for step `id`, keyed so repeats append nothing.
pub fn step_completed(id: &str, result: u64) -> NewEvent {
    NewEvent::new(STEP_COMPLETED, json!({ "result": result }).to_string())
        .correlation_id(id)
        .key(format!("done:{id}"))
}

/// The `hook_received` fact for receipt `k` of `hook`, keyed so repeats append nothing.
pub fn hook_received(hook: &str, k: u32, value: u64) -> NewEvent {
    NewEvent::new(HOOK_RECEIVED, json!({ "k": k, "value": value }).to_string())
        .correlation_id(hook)
        .key(format!("{hook}:{k}"))
}

/// The `wait_completed` fact for `wait`, keyed so repeats append nothing.
pub fn wait_completed(wait: &str) -> NewEvent {
    NewEvent::new(WAIT_COMPLETED, "{}")
        .correlation_id(wait)
        .key(format!("wait:{wait}"))
}

/// Encodes a derived batch as events, marking each with `base` (the log length it was
/// derived from), its index and the appending replayer `by`.
pub fn encode_batch(decisions: Vec<Decision>, base: Seq, by: u32) -> Vec<NewEvent> {
    let n = u32::try_from(decisions.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(decisions.len());
    for (i, d) in (0u32..).zip(decisions) {
        let batch = BatchMark { base, i, n, by };
        let payload = json!({ "batch": batch, "body": d.body }).to_string();
        let mut ev = NewEvent::new(d.kind, payload);
        if let Some(id) = d.id {
            ev = ev.correlation_id(id);
        }
        out.push(ev);
    }
    out
}

/// Decodes a stored (or about-to-be-stored) decision into the workflow's view and its mark.
///
/// # Errors
/// [`WorkflowError::Malformed`] when the payload is not a marked decision.
pub fn decode_decision(
    seq: Seq,
    kind: &str,
    id: Option<&str>,
    payload: &[u8],
) -> Result<(Decision, BatchMark), WorkflowError> {
    let p: DecisionPayload = serde_json::from_slice(payload).map_err(|e| malformed(seq, e))?;
    let decision = Decision {
        kind: kind.to_string(),
        id: id.map(str::to_string),
        body: p.body,
    };
    Ok((decision, p.batch))
}

fn malformed(seq: Seq, detail: impl std::fmt::Display) -> WorkflowError {
    WorkflowError::Malformed {
        seq,
        detail: detail.to_string(),
    }
}

/// Reads the params from a `run_created` event.
///
/// # Errors
/// [`WorkflowError::NoRunCreated`] / [`WorkflowError::Malformed`].
pub fn params_of(first: Option<&Event>) -> Result<Params, WorkflowError> {
    let ev = first.ok_or(WorkflowError::NoRunCreated)?;
    if ev.seq != 1 || ev.kind != RUN_CREATED {
        return Err(WorkflowError::NoRunCreated);
    }
    #[derive(Deserialize)]
    struct Created {
        params: Params,
    }
    let c: Created = serde_json::from_slice(&ev.payload).map_err(|e| malformed(ev.seq, e))?;
    Ok(c.params)
}

/// The decisions the workflow makes next, given the log prefix `log` (seq 1 first).
/// Pure: the same prefix always gives the same batch. Empty when nothing is left to decide
/// until new facts arrive (or after `run_completed`).
///
/// # Errors
/// [`WorkflowError`] when the log does not start with `run_created` or a payload is unreadable.
pub fn derive(log: &[Event]) -> Result<Vec<Decision>, WorkflowError> {
    let mut program = Program::start(params_of(log.first())?);
    for ev in log.iter().skip(1) {
        if program.terminal {
            break;
        }
        program.apply(ev)?;
    }
    Ok(program.pending)
}

#[derive(Debug)]
struct StepState {
    stage: u32,
    done: bool,
}

/// The workflow program's state while replaying a log.
#[derive(Debug)]
struct Program {
    params: Params,
    steps: BTreeMap<String, StepState>,
    steps_issued: u32,
    open_steps: u32,
    completed_steps: u64,
    hooks: BTreeMap<String, u32>,
    receipts_missing: u64,
    wait_done: bool,
    fold: u64,
    terminal_issued: bool,
    terminal: bool,
    pending: Vec<Decision>,
}

impl Program {
    fn start(params: Params) -> Program {
        let mut p = Program {
            params,
            steps: BTreeMap::new(),
            steps_issued: 0,
            open_steps: 0,
            completed_steps: 0,
            hooks: BTreeMap::new(),
            receipts_missing: u64::from(params.hooks) * u64::from(params.receipts),
            wait_done: false,
            fold: params.salt,
            terminal_issued: false,
            terminal: false,
            pending: Vec::new(),
        };
        for j in 1..=params.hooks {
            let id = format!("h{j}");
            p.hooks.insert(id.clone(), 0);
            p.issue(
                HOOK_CREATED,
                Some(id),
                json!({ "receipts": params.receipts }),
            );
        }
        for i in 1..=params.fan_out {
            p.issue_step(0, mix(params.salt, u64::from(i)));
        }
        let wait = Some(WAIT_ID.to_string());
        p.issue(WAIT_CREATED, wait, json!({ "ms": params.sleep_ms }));
        p
    }

    fn issue(&mut self, kind: &str, id: Option<String>, body: Value) {
        let kind = kind.to_string();
        self.pending.push(Decision { kind, id, body });
    }

    fn issue_step(&mut self, stage: u32, input: u64) {
        self.steps_issued += 1;
        self.open_steps += 1;
        let id = format!("s{}", self.steps_issued);
        self.steps
            .insert(id.clone(), StepState { stage, done: false });
        self.issue(
            STEP_CREATED,
            Some(id),
            json!({ "input": input, "stage": stage }),
        );
    }

    fn apply(&mut self, ev: &Event) -> Result<(), WorkflowError> {
        let id = ev.correlation_id.as_deref().unwrap_or_default();
        match &*ev.kind {
            STEP_COMPLETED => {
                let result = field_u64(ev, "result")?;
                self.on_step_completed(id, result);
            }
            HOOK_RECEIVED => {
                let value = field_u64(ev, "value")?;
                self.on_hook_received(id, value);
            }
            WAIT_COMPLETED => self.on_wait_completed(),
            kind if DECISION_KINDS.contains(&kind) => {
                self.on_decision(kind, ev.correlation_id.as_deref());
            }
            other => return Err(malformed(ev.seq, format!("unknown kind {other:?}"))),
        }
        Ok(())
    }

    /// A stored decision consumes the pending command of the same kind and id.
    fn on_decision(&mut self, kind: &str, id: Option<&str>) {
        let found = self
            .pending
            .iter()
            .position(|d| d.kind == kind && d.id.as_deref() == id);
        if let Some(i) = found {
            self.pending.remove(i);
        }
        if kind == RUN_COMPLETED {
            self.terminal = true;
        }
    }

    fn on_step_completed(&mut self, id: &str, result: u64) {
        let Some(step) = self.steps.get_mut(id) else {
            return;
        };
        if step.done {
            return;
        }
        step.done = true;
        let stage = step.stage;
        self.open_steps = self.open_steps.saturating_sub(1);
        self.completed_steps += 1;
        self.fold = mix(self.fold, result);
        if stage < self.params.depth && !result.is_multiple_of(4) {
            self.issue_step(stage + 1, result);
        }
        self.check_done();
    }

    fn on_hook_received(&mut self, hook: &str, value: u64) {
        let receipts = self.params.receipts;
        let Some(got) = self.hooks.get_mut(hook) else {
            return;
        };
        if *got >= receipts {
            return;
        }
        *got += 1;
        self.receipts_missing = self.receipts_missing.saturating_sub(1);
        self.issue_step(self.params.depth, value);
        self.check_done();
    }

    fn on_wait_completed(&mut self) {
        if self.wait_done {
            return;
        }
        self.wait_done = true;
        self.issue_step(self.params.depth, self.completed_steps);
        self.check_done();
    }

    fn check_done(&mut self) {
        let done = self.open_steps == 0 && self.receipts_missing == 0 && self.wait_done;
        if done && !self.terminal_issued {
            self.terminal_issued = true;
            let body = json!({ "result": self.fold, "steps": self.steps_issued });
            self.issue(RUN_COMPLETED, None, body);
        }
    }
}

fn field_u64(ev: &Event, field: &str) -> Result<u64, WorkflowError> {
    let v: Value = serde_json::from_slice(&ev.payload).map_err(|e| malformed(ev.seq, e))?;
    v.get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(ev.seq, format!("{} payload lacks {field:?}", ev.kind)))
}
