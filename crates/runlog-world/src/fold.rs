//! The materialized entities of one run as a pure fold over its log (`docs/WORLD.md` §1):
//! `state(seq N) = apply(state(seq N-1), event N)`. Nothing here reads or writes storage;
//! the World caches one [`RunState`] per open run and advances it with the events after
//! its seq, and anything cached can be rebuilt by folding the log from seq 1.
//!
//! `apply` is total: an event that does not fit the state (a second terminal event, a
//! transition out of a terminal state, data that does not parse; logs written by a lax
//! store hold such events) changes no entity and is counted in [`RunState::anomalies`]. A
//! World never appends such an event: its rules ([`crate::World::create_event`]) admit
//! exactly the transitions `apply` performs.
//!
//! Two orderings of logs written by the reference store are folded as it materialized them:
//! a `run_started` before its run's `run_created`, and a `step_started` before its step's
//! `step_created` (its resilient and lazy starts store the start first); the start is
//! applied right after the creation.

use std::sync::Arc;

// Persistent (structure-sharing) maps and vectors: a clone of a `RunState` (a fold
// snapshot, `run_at`) costs O(1) and shares every entity with the original until either
// changes it, so resuming a fold from a snapshot costs the events since it, not a copy of
// the run's entities and event index.
use imbl::{HashMap, HashSet, Vector};

/// When a log last set or removed each attribute key, in ms ([`RunState::attr_changed_at_ms`]).
pub(crate) type ChangedAt = HashMap<String, u64>;

use runlog::{EventRef, Seq};
use ulid::Ulid;

use crate::attrs;
use crate::data::{
    AttrSetData, AttrWriter, HookCreatedData, RunCompletedData, RunCreatedData, RunFailedData,
    StepCompletedData, StepCreatedData, StepErrorData, WaitCreatedData, view,
};
use crate::json::RawJson;
use crate::model::{EventType, Hook, RunStatus, Step, Wait, WaitStatus, WorkflowRun};
use crate::resume;

/// The fixed fields of every hook of a World (`ownerId`, `projectId`, `environment`); the
/// reference's local store writes `local-owner`, `local-project`, `local`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookIdentity {
    /// `ownerId`.
    pub owner_id: String,
    /// `projectId`.
    pub project_id: String,
    /// `environment`.
    pub environment: String,
}

impl Default for HookIdentity {
    fn default() -> HookIdentity {
        HookIdentity {
            owner_id: "local-owner".to_string(),
            project_id: "local-project".to_string(),
            environment: "local".to_string(),
        }
    }
}

#[derive(Clone, Debug)]
struct StepSlot {
    step: Step,
    created_seq: Seq,
}

/// A resume the run recorded: the `hook_received` keyed `resume/<id>` (`src/resume.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResumeSlot {
    /// The seq of its `hook_received`.
    pub seq: Seq,
    /// The hook it resumed.
    pub hook_id: String,
    /// Its `resumePayloadDigest`, if it was given one.
    pub digest: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct HookSlot {
    pub hook: Hook,
    pub created_seq: Seq,
    /// Created, not disposed, its run not ended: it may be received.
    pub live: bool,
    /// Live when its run ended with a `tokenRetentionUntil`: it stays available (readable,
    /// holding its token) until then, though it is no longer live.
    pub retained_until_ms: Option<u64>,
}

impl HookSlot {
    /// Whether the hook is available at `now_ms`: live, or retained past its run's end and
    /// `now_ms` before its `tokenRetentionUntil`.
    pub(crate) fn available_at(&self, now_ms: u64) -> bool {
        self.live || self.retained_until_ms.is_some_and(|t| now_ms < t)
    }
}

/// What identifies an event of a log to a fold ([`RunState::continues`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FoldedEvent {
    event_id: Ulid,
    created_at_ms: u64,
}

impl FoldedEvent {
    fn of(e: &EventRef<'_>) -> FoldedEvent {
        FoldedEvent {
            event_id: e.event_id,
            created_at_ms: e.created_at_ms,
        }
    }
}

/// Runs, steps, hooks, waits and attributes of one run as of seq [`RunState::seq`], plus
/// the indexes the World's rules and queries need (event ids, correlation ids).
#[derive(Clone, Debug)]
pub struct RunState {
    run_id: String,
    spec_version: Option<u32>,
    identity: Arc<HookIdentity>,
    seq: Seq,
    run: Option<WorkflowRun>,
    steps: HashMap<String, StepSlot>,
    step_order: Vector<String>,
    hooks: HashMap<String, HookSlot>,
    hook_order: Vector<String>,
    conflicts: HashMap<String, Seq>,
    resumes: HashMap<String, ResumeSlot>,
    waits: HashMap<String, Wait>,
    wait_order: Vector<String>,
    terminal: Option<(Seq, Ulid)>,
    /// The event at [`RunState::seq`] (none at seq 0): what [`RunState::continues`] checks
    /// a log against.
    last: Option<FoldedEvent>,
    attr_ids: HashSet<String>,
    /// When each attribute key was last set or removed by this log (`run_created`,
    /// `attr_set`), in ms: what the attribute log's changes are ordered against.
    attr_changed_at_ms: ChangedAt,
    event_seqs: HashMap<Ulid, Seq>,
    by_correlation: HashMap<String, Arc<Vec<Seq>>>,
    newest_created_at_ms: u64,
    pending_run_start_ms: Option<u64>,
    pending_step_starts: HashMap<String, u64>,
    anomalies: u64,
}

impl RunState {
    /// The state of an empty log of run `run_id` whose spec version (from the run's
    /// metadata) is `spec_version`.
    pub fn new(run_id: &str, spec_version: Option<u32>, identity: Arc<HookIdentity>) -> RunState {
        RunState {
            run_id: run_id.to_string(),
            spec_version,
            identity,
            seq: 0,
            run: None,
            steps: HashMap::new(),
            step_order: Vector::new(),
            hooks: HashMap::new(),
            hook_order: Vector::new(),
            conflicts: HashMap::new(),
            resumes: HashMap::new(),
            waits: HashMap::new(),
            wait_order: Vector::new(),
            terminal: None,
            last: None,
            attr_ids: HashSet::new(),
            attr_changed_at_ms: HashMap::new(),
            event_seqs: HashMap::new(),
            by_correlation: HashMap::new(),
            newest_created_at_ms: 0,
            pending_run_start_ms: None,
            pending_step_starts: HashMap::new(),
            anomalies: 0,
        }
    }

    /// Folds `events` (a run's log from seq 1, in order) from the empty state.
    pub fn fold<'a>(
        run_id: &str,
        spec_version: Option<u32>,
        identity: Arc<HookIdentity>,
        events: impl IntoIterator<Item = &'a runlog::Event>,
    ) -> RunState {
        let mut state = RunState::new(run_id, spec_version, identity);
        for e in events {
            state.apply(&e.as_event_ref());
        }
        state
    }

    /// Applies the event at seq [`RunState::seq`] + 1: the state after it.
    pub fn apply(&mut self, e: &EventRef<'_>) {
        self.seq = e.seq;
        self.last = Some(FoldedEvent::of(e));
        self.event_seqs.insert(e.event_id, e.seq);
        if let Some(c) = e.correlation_id {
            Arc::make_mut(self.by_correlation.entry(c.to_string()).or_default()).push(e.seq);
        }
        self.newest_created_at_ms = self.newest_created_at_ms.max(e.created_at_ms);
        let data = match e.payload {
            [] => None,
            bytes => match RawJson::from_bytes(bytes) {
                Ok(raw) => Some(raw),
                Err(_) => {
                    self.anomalies += 1;
                    return;
                }
            },
        };
        let applied = match EventType::parse(e.kind) {
            Some(ty) if ty.is_terminal_run() => self.end_run(ty, e, data.as_ref()),
            Some(ty) if matches!(ty, EventType::RunCreated | EventType::RunStarted) => {
                self.run_event(ty, e, data.as_ref())
            }
            Some(EventType::AttrSet) => self.set_attributes(e, data.as_ref()),
            Some(ty) => match e.correlation_id {
                Some(corr) => self.child_event(ty, corr, e, data.as_ref()),
                None => false,
            },
            None => false,
        };
        if !applied {
            self.anomalies += 1;
        }
    }

    fn run_event(&mut self, ty: EventType, e: &EventRef<'_>, data: Option<&RawJson>) -> bool {
        let t = e.created_at_ms;
        if ty == EventType::RunStarted {
            return match self.run.as_mut() {
                None if self.pending_run_start_ms.is_none() => {
                    self.pending_run_start_ms = Some(t);
                    true
                }
                Some(run) if run.status == RunStatus::Pending => {
                    start_run(run, t);
                    true
                }
                _ => false,
            };
        }
        if self.run.is_some() {
            return false;
        }
        let Some(d) = view::<RunCreatedData>(data) else {
            return false;
        };
        let mut run = WorkflowRun {
            run_id: self.run_id.clone(),
            status: RunStatus::Pending,
            deployment_id: d.deployment_id,
            workflow_name: d.workflow_name,
            spec_version: self.spec_version,
            execution_context: d.execution_context,
            input: d.input,
            output: None,
            error: None,
            error_code: None,
            attributes: d.attributes.unwrap_or_default(),
            expired_at_ms: None,
            started_at_ms: None,
            completed_at_ms: None,
            created_at_ms: t,
            updated_at_ms: t,
            storage_error: None,
        };
        if let Some(start) = self.pending_run_start_ms.take() {
            start_run(&mut run, start.max(t));
        }
        for key in run.attributes.keys() {
            self.attr_changed_at_ms.insert(key.clone(), t);
        }
        self.run = Some(run);
        true
    }

    fn end_run(&mut self, ty: EventType, e: &EventRef<'_>, data: Option<&RawJson>) -> bool {
        let Some(run) = self.run.as_mut().filter(|r| !r.status.is_terminal()) else {
            return false;
        };
        let (status, output, error, code) = match ty {
            EventType::RunCompleted => {
                let output = view::<RunCompletedData>(data).and_then(|d| d.output);
                (RunStatus::Completed, output, None, None)
            }
            EventType::RunFailed => {
                let d = view::<RunFailedData>(data);
                let (error, code) = d.map_or((None, None), |d| (d.error, d.error_code));
                (RunStatus::Failed, None, error, code)
            }
            _ => (RunStatus::Cancelled, None, None, None),
        };
        run.status = status;
        run.output = output;
        run.error = error;
        run.error_code = code;
        run.completed_at_ms = Some(e.created_at_ms);
        run.updated_at_ms = e.created_at_ms;
        self.terminal = Some((e.seq, e.event_id));
        // The reference's retention rule: a run's end disposes its hooks (releasing their
        // tokens) without writing hook_disposed events, except that a hook created with a
        // `tokenRetentionUntil` stays available until then.
        for (_, slot) in self.hooks.iter_mut() {
            if slot.live {
                slot.retained_until_ms = slot.hook.token_retention_until_ms;
            }
            slot.live = false;
        }
        true
    }

    fn set_attributes(&mut self, e: &EventRef<'_>, data: Option<&RawJson>) -> bool {
        let Some(run) = self.run.as_mut().filter(|r| !r.status.is_terminal()) else {
            return false;
        };
        let Some(d) = view::<AttrSetData>(data) else {
            return false;
        };
        let changes = d
            .changes
            .iter()
            .map(|c| (c.key.as_str(), c.value.as_deref()));
        attrs::merge(&mut run.attributes, changes);
        run.updated_at_ms = e.created_at_ms;
        for c in &d.changes {
            self.attr_changed_at_ms
                .insert(c.key.clone(), e.created_at_ms);
        }
        if let (Some(corr), AttrWriter::Workflow) = (e.correlation_id, &d.writer) {
            self.attr_ids.insert(corr.to_string());
        }
        true
    }

    fn child_event(
        &mut self,
        ty: EventType,
        corr: &str,
        e: &EventRef<'_>,
        data: Option<&RawJson>,
    ) -> bool {
        match ty {
            EventType::StepCreated => self.create_step(corr, e, data),
            EventType::StepStarted => self.start_step(corr, e.created_at_ms),
            EventType::StepCompleted | EventType::StepFailed | EventType::StepRetrying => {
                self.finish_step(ty, corr, e.created_at_ms, data)
            }
            EventType::HookCreated => self.create_hook(corr, e, data),
            EventType::HookConflict => self.conflicts.insert(corr.to_string(), e.seq).is_none(),
            EventType::HookReceived => self.receive_hook(corr, e),
            EventType::HookDisposed => match self.hooks.get_mut(corr) {
                Some(slot) if slot.live => {
                    slot.live = false;
                    true
                }
                _ => false,
            },
            EventType::WaitCreated => self.create_wait(corr, e.created_at_ms, data),
            EventType::WaitCompleted => match self.waits.get_mut(corr) {
                Some(w) if w.status == WaitStatus::Waiting => {
                    w.status = WaitStatus::Completed;
                    w.completed_at_ms = Some(e.created_at_ms);
                    w.updated_at_ms = e.created_at_ms;
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// A `hook_received` of live hook `corr`; keyed as a resume, it records the resume
    /// (the first event of a resume id counts; the World never writes a second).
    fn receive_hook(&mut self, corr: &str, e: &EventRef<'_>) -> bool {
        if self.hook(corr).is_none() {
            return false;
        }
        if let Some((id, digest)) = e.key.and_then(resume::parse_key) {
            self.resumes
                .entry(id.to_string())
                .or_insert_with(|| ResumeSlot {
                    seq: e.seq,
                    hook_id: corr.to_string(),
                    digest: digest.map(str::to_owned),
                });
        }
        true
    }

    fn create_step(&mut self, corr: &str, e: &EventRef<'_>, data: Option<&RawJson>) -> bool {
        if self.steps.contains_key(corr) {
            return false;
        }
        let Some(d) = view::<StepCreatedData>(data) else {
            return false;
        };
        let t = e.created_at_ms;
        let step = Step {
            run_id: self.run_id.clone(),
            step_id: corr.to_string(),
            step_name: d.step_name,
            status: RunStatus::Pending,
            input: d.input,
            output: None,
            error: None,
            attempt: 0,
            started_at_ms: None,
            completed_at_ms: None,
            created_at_ms: t,
            updated_at_ms: t,
            retry_after_ms: None,
            spec_version: self.spec_version,
        };
        self.steps.insert(
            corr.to_string(),
            StepSlot {
                step,
                created_seq: e.seq,
            },
        );
        self.step_order.push_back(corr.to_string());
        if let Some(start) = self.pending_step_starts.remove(corr) {
            self.start_step(corr, start.max(t));
        }
        true
    }

    fn start_step(&mut self, corr: &str, t: u64) -> bool {
        match self.steps.get_mut(corr) {
            Some(slot) if !slot.step.status.is_terminal() => {
                let step = &mut slot.step;
                step.status = RunStatus::Running;
                step.attempt += 1;
                step.started_at_ms.get_or_insert(t);
                step.retry_after_ms = None;
                step.updated_at_ms = t;
                true
            }
            Some(_) => false,
            None => self
                .pending_step_starts
                .insert(corr.to_string(), t)
                .is_none(),
        }
    }

    fn finish_step(&mut self, ty: EventType, corr: &str, t: u64, data: Option<&RawJson>) -> bool {
        let Some(step) = self
            .steps
            .get_mut(corr)
            .map(|s| &mut s.step)
            .filter(|s| !s.status.is_terminal())
        else {
            return false;
        };
        match ty {
            EventType::StepCompleted => {
                step.status = RunStatus::Completed;
                step.output = view::<StepCompletedData>(data).and_then(|d| d.result);
                step.completed_at_ms = Some(t);
            }
            EventType::StepFailed => {
                step.status = RunStatus::Failed;
                step.error = view::<StepErrorData>(data).and_then(|d| d.error);
                step.completed_at_ms = Some(t);
            }
            _ => {
                let d = view::<StepErrorData>(data);
                step.status = RunStatus::Pending;
                step.retry_after_ms = d.as_ref().and_then(|d| d.retry_after.as_ref()?.to_ms());
                step.error = d.and_then(|d| d.error);
            }
        }
        step.updated_at_ms = t;
        true
    }

    fn create_hook(&mut self, corr: &str, e: &EventRef<'_>, data: Option<&RawJson>) -> bool {
        let run_live = self.run.as_ref().is_some_and(|r| !r.status.is_terminal());
        if !run_live || self.hook_used(corr) {
            return false;
        }
        let Some(d) = view::<HookCreatedData>(data) else {
            return false;
        };
        let hook = Hook {
            run_id: self.run_id.clone(),
            hook_id: corr.to_string(),
            token: d.token,
            owner_id: self.identity.owner_id.clone(),
            project_id: self.identity.project_id.clone(),
            environment: self.identity.environment.clone(),
            metadata: d.metadata,
            created_at_ms: e.created_at_ms,
            spec_version: self.spec_version,
            is_webhook: Some(d.is_webhook.unwrap_or(false)),
            is_system: Some(d.is_system.unwrap_or(false)),
            token_retention_until_ms: d.token_retention_until.and_then(|t| t.to_ms()),
            storage_error: None,
        };
        let slot = HookSlot {
            hook,
            created_seq: e.seq,
            live: true,
            retained_until_ms: None,
        };
        self.hooks.insert(corr.to_string(), slot);
        self.hook_order.push_back(corr.to_string());
        true
    }

    fn create_wait(&mut self, corr: &str, t: u64, data: Option<&RawJson>) -> bool {
        if self.waits.contains_key(corr) {
            return false;
        }
        let Some(d) = view::<WaitCreatedData>(data) else {
            return false;
        };
        let wait = Wait {
            wait_id: format!("{}-{corr}", self.run_id),
            run_id: self.run_id.clone(),
            status: WaitStatus::Waiting,
            resume_at_ms: d.resume_at.to_ms(),
            completed_at_ms: None,
            created_at_ms: t,
            updated_at_ms: t,
            spec_version: self.spec_version,
        };
        self.waits.insert(corr.to_string(), wait);
        self.wait_order.push_back(corr.to_string());
        true
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The seq of the last event applied (0 for the empty log).
    pub fn seq(&self) -> Seq {
        self.seq
    }

    /// Sets the seq of an empty state (the snapshot bookkeeping's unit tests).
    #[cfg(test)]
    pub(crate) fn set_seq_for_test(&mut self, seq: Seq) {
        self.seq = seq;
        self.last = Some(FoldedEvent {
            event_id: Ulid::from_parts(seq, 0),
            created_at_ms: seq,
        });
    }

    /// Whether `e`, read back from a log, is the event this state was last advanced by (its
    /// seq, id and `createdAt`): then the log's events up to it are the ones folded here,
    /// and its later events continue this state. Event ids carry 80 random bits, so a log
    /// cut back by a repair and written again, or a run deleted and created anew under the
    /// same id, holds another event at that seq. (The state at seq 0 has no such event: any
    /// log continues it.)
    pub(crate) fn continues(&self, e: &EventRef<'_>) -> bool {
        e.seq == self.seq && self.last == Some(FoldedEvent::of(e))
    }

    /// The run's spec version (from its runlog metadata).
    pub fn spec_version(&self) -> Option<u32> {
        self.spec_version
    }

    /// The run, once `run_created` is applied.
    pub fn run(&self) -> Option<&WorkflowRun> {
        self.run.as_ref()
    }

    /// A step by id.
    pub fn step(&self, step_id: &str) -> Option<&Step> {
        self.steps.get(step_id).map(|s| &s.step)
    }

    /// Steps in creation order, each with the seq of its creation.
    pub fn steps(&self) -> impl DoubleEndedIterator<Item = (Seq, &Step)> {
        self.step_order
            .iter()
            .filter_map(|id| self.steps.get(id).map(|s| (s.created_seq, &s.step)))
    }

    /// A live hook by id (`None` once disposed or its run ended).
    pub fn hook(&self, hook_id: &str) -> Option<&Hook> {
        self.hooks.get(hook_id).filter(|s| s.live).map(|s| &s.hook)
    }

    /// Live hooks in creation order, each with the seq of its `hook_created`.
    pub fn live_hooks(&self) -> impl DoubleEndedIterator<Item = (Seq, &Hook)> {
        self.hook_order
            .iter()
            .filter_map(|id| self.hooks.get(id))
            .filter(|s| s.live)
            .map(|s| (s.created_seq, &s.hook))
    }

    /// An available hook by id at `now_ms`: live, or retained past its run's end until its
    /// `tokenRetentionUntil` (what `hooks.get`, `hooks.getByToken` and the token claims go
    /// by; only a live hook may be received or disposed).
    pub fn available_hook(&self, hook_id: &str, now_ms: u64) -> Option<&Hook> {
        self.hooks
            .get(hook_id)
            .filter(|s| s.available_at(now_ms))
            .map(|s| &s.hook)
    }

    /// Available hooks at `now_ms` in creation order, each with the seq of its
    /// `hook_created` (see [`RunState::available_hook`]).
    pub fn available_hooks(&self, now_ms: u64) -> impl DoubleEndedIterator<Item = (Seq, &Hook)> {
        self.hook_order
            .iter()
            .filter_map(|id| self.hooks.get(id))
            .filter(move |s| s.available_at(now_ms))
            .map(|s| (s.created_seq, &s.hook))
    }

    pub(crate) fn hook_slot(&self, hook_id: &str) -> Option<&HookSlot> {
        self.hooks.get(hook_id)
    }

    /// Whether `hook_id` was ever used by this run (a `hook_created` or a `hook_conflict`).
    pub fn hook_used(&self, hook_id: &str) -> bool {
        self.hooks.contains_key(hook_id) || self.conflicts.contains_key(hook_id)
    }

    /// The resume the run recorded under `resume_id` (`params.resumeId` of a
    /// `hook_received`).
    pub(crate) fn resume(&self, resume_id: &str) -> Option<&ResumeSlot> {
        self.resumes.get(resume_id)
    }

    /// A wait by its correlation id.
    pub fn wait(&self, correlation_id: &str) -> Option<&Wait> {
        self.waits.get(correlation_id)
    }

    /// Waits in creation order, each with its correlation id.
    pub fn waits(&self) -> impl DoubleEndedIterator<Item = (&str, &Wait)> {
        self.wait_order
            .iter()
            .filter_map(|id| self.waits.get(id).map(|w| (id.as_str(), w)))
    }

    /// Seq and event id of the run's (first) terminal event.
    pub fn terminal_event(&self) -> Option<(Seq, Ulid)> {
        self.terminal
    }

    /// Whether an `attr_set` of the workflow writer used this correlation id.
    pub fn attr_set_seen(&self, correlation_id: &str) -> bool {
        self.attr_ids.contains(correlation_id)
    }

    /// The seq of the event with this id.
    pub fn event_seq(&self, event_id: Ulid) -> Option<Seq> {
        self.event_seqs.get(&event_id).copied()
    }

    /// Seqs of the events with this correlation id, ascending.
    pub fn correlation_seqs(&self, correlation_id: &str) -> &[Seq] {
        self.by_correlation
            .get(correlation_id)
            .map_or(&[], |seqs| seqs.as_slice())
    }

    /// The newest `createdAt` of the log, ms since the Unix epoch (0 when empty).
    pub fn newest_created_at_ms(&self) -> u64 {
        self.newest_created_at_ms
    }

    /// When this log last set or removed each attribute key, in ms (keys it never touched
    /// are absent).
    pub(crate) fn attr_changed_at_ms(&self) -> &ChangedAt {
        &self.attr_changed_at_ms
    }

    /// Events that changed no entity because they did not fit the state (never written by
    /// a World; found in logs of lax stores).
    pub fn anomalies(&self) -> u64 {
        self.anomalies
    }

    /// A state holding only the run and the entities of `corr`, with the same seq: what
    /// the World applies its planned events to, to return the entities as of its own
    /// events (cheap: payloads are shared).
    pub(crate) fn scratch(&self, corr: Option<&str>) -> RunState {
        let mut s = RunState::new(&self.run_id, self.spec_version, self.identity.clone());
        s.seq = self.seq;
        s.run = self.run.clone();
        s.terminal = self.terminal;
        if let Some(c) = corr {
            if let Some(slot) = self.steps.get(c) {
                s.steps.insert(c.to_string(), slot.clone());
                s.step_order.push_back(c.to_string());
            }
            if let Some(slot) = self.hooks.get(c) {
                s.hooks.insert(c.to_string(), slot.clone());
                s.hook_order.push_back(c.to_string());
            }
            if let Some(seq) = self.conflicts.get(c) {
                s.conflicts.insert(c.to_string(), *seq);
            }
            if let Some(w) = self.waits.get(c) {
                s.waits.insert(c.to_string(), w.clone());
                s.wait_order.push_back(c.to_string());
            }
        }
        s
    }
}

fn start_run(run: &mut WorkflowRun, t: u64) {
    run.status = RunStatus::Running;
    run.started_at_ms.get_or_insert(t);
    run.updated_at_ms = t;
}
