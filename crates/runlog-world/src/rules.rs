//! The rules of `events.create`: a validated request ([`Checked`]) and the decision taken
//! against a run's state at seq N ([`decide`]): the events to append fenced at N (or the
//! answer when nothing is to be written), or the rejection with the SDK's error class.
//! Pure: no storage access; the World runs it again on every fenced retry.

use bytes::Bytes;
use runlog::{EventRef, NewEvent, RunId, Seq};
use serde::Serialize;
use ulid::Ulid;

use crate::attrs;
use crate::cursor;
use crate::data::{
    self, AttrSetData, AttrWriter, HookCreatedData, HookReceivedData, RunCreatedData,
    RunStartedData, StepStartedData, view,
};
use crate::error::WorldError;
use crate::fold::RunState;
use crate::ids::{
    self, check_correlation_id, check_run_id_time, mint_ulid, parse_event_id, parse_run_id,
};
use crate::json::{Members, RawJson};
use crate::model::{
    CreateEventParams, EventRequest, EventResult, EventType, RunStatus, SPEC_VERSION_CURRENT,
    SPEC_VERSION_EVENT_SOURCING, SPEC_VERSION_MAX_SUPPORTED,
};
use crate::resume::ResumeClaim;
use crate::world::WorldConfig;

/// A request that passed every check that needs no state.
pub(crate) struct Checked {
    pub run: RunId,
    pub ty: EventType,
    pub corr: Option<String>,
    pub data: Option<RawJson>,
    pub spec_version: u32,
    pub event_id: Ulid,
    /// Whether the caller chose the event id (else the World minted it).
    pub caller_event_id: bool,
    pub created_at_ms: u64,
    pub since_seq: Option<Seq>,
    /// For an `attr_set`: the run's attributes with its attribute log merged in
    /// (`attr_log.rs`), what its changes are validated against; set by the World right
    /// before each decision (the run's own attributes when `None`).
    pub merged_attributes: Option<std::collections::BTreeMap<String, String>>,
    /// A `hook_received`'s resume identity (`params.resumeId`, `src/resume.rs`).
    pub resume: Option<ResumeClaim>,
}

impl Checked {
    /// Checks ids, the data's schema, the spec version of a run-creating request and the
    /// `sinceCursor`; mints the run id of a `run_created` without one, and the event id.
    pub(crate) fn new(
        run_id: Option<&str>,
        req: EventRequest,
        params: &CreateEventParams,
        config: &WorldConfig,
    ) -> Result<Checked, WorldError> {
        let ty = req.event_type;
        data::check(ty, req.event_data.as_ref())?;
        let run = match run_id.filter(|id| !id.is_empty()) {
            Some(id) => {
                let (run, ulid) = parse_run_id(id).map_err(|e| unstorable(id, ty, &req, e))?;
                if ty == EventType::RunCreated {
                    check_run_id_time(id, ulid, config.run_id_past_ms, config.run_id_future_ms)?;
                }
                run
            }
            None if ty == EventType::RunCreated => parse_run_id(&ids::mint_run_id())?.0,
            None => {
                return Err(WorldError::invalid(
                    "runId",
                    format!("required for {ty} (only run_created may omit it)"),
                ));
            }
        };
        let corr = req
            .correlation_id
            .filter(|c| !c.is_empty() || ty.needs_correlation_id());
        match &corr {
            Some(c) => check_correlation_id(c)?,
            None if ty.needs_correlation_id() => {
                return Err(WorldError::invalid(
                    "correlationId",
                    format!("required for {ty}"),
                ));
            }
            None => {}
        }
        let spec_version = req.spec_version.unwrap_or(SPEC_VERSION_CURRENT);
        let caller_event_id = req.event_id.is_some();
        let (event_id, created_at_ms) = match req.event_id {
            Some(id) => (parse_event_id(&id)?, ids::now_ms()),
            None => {
                let id = mint_ulid();
                (id, id.timestamp_ms())
            }
        };
        // Step outcomes have taken `sinceCursor` since spec 5 (a bad one is refused); on
        // slot runs any write may carry one (spec 6), and one this World cannot read is
        // simply not answered there.
        let since_seq = match (&params.since_cursor, ty) {
            (Some(c), EventType::StepCompleted | EventType::StepFailed) => {
                Some(cursor::decode_seq(c, "sinceCursor")?)
            }
            (Some(c), _) => cursor::decode_seq(c, "sinceCursor").ok(),
            _ => None,
        };
        let checked = Checked {
            run,
            ty,
            corr,
            data: req.event_data,
            spec_version,
            event_id,
            caller_event_id,
            created_at_ms,
            since_seq,
            merged_attributes: None,
            resume: ResumeClaim::of(ty, params)?,
        };
        if checked.creation_data().is_some() {
            checked.check_creation()?;
        }
        Ok(checked)
    }

    /// The data that creates the run: `run_created`'s, or a resilient `run_started`'s.
    pub(crate) fn creation_data(&self) -> Option<RunCreatedData> {
        match self.ty {
            EventType::RunCreated => view(self.data.as_ref()),
            EventType::RunStarted => {
                let d: RunStartedData = view(self.data.as_ref())?;
                Some(RunCreatedData {
                    deployment_id: d.deployment_id?,
                    workflow_name: d.workflow_name?,
                    input: Some(d.input?),
                    execution_context: d.execution_context,
                    attributes: d.attributes,
                    allow_reserved_attributes: d.allow_reserved_attributes,
                })
            }
            _ => None,
        }
    }

    /// A run-creating request must be of a supported spec version with valid attributes.
    fn check_creation(&self) -> Result<(), WorldError> {
        check_spec(self.run.as_str(), Some(self.spec_version))?;
        let d = self.creation_data();
        let attributes = d.as_ref().and_then(|d| d.attributes.as_ref());
        let allow = d.as_ref().and_then(|d| d.allow_reserved_attributes) == Some(true);
        let changes = attributes
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())));
        attrs::validate(changes, &Default::default(), allow)
    }

    /// A fresh event id for a minted one that met an id already in the run (another
    /// writer's mint in the same millisecond: runlog mints the successor of a run's last
    /// id, which is what a monotonic generator mints next too).
    pub(crate) fn remint(&mut self) {
        self.event_id = mint_ulid();
        self.created_at_ms = self.event_id.timestamp_ms();
    }

    fn corr(&self) -> &str {
        self.corr.as_deref().unwrap_or_default()
    }

    fn planned(&self, key: Option<String>) -> Planned {
        Planned {
            ty: self.ty,
            corr: self.corr.clone(),
            data: self.data.clone(),
            key,
            event_id: self.event_id,
            created_at_ms: self.created_at_ms,
        }
    }
}

/// The error for a run id that is no `wrun_<ULID>` (`invalid`, the 400): kept for a request
/// that would create the run under that id (`run_created`, a `run_started` carrying the
/// creation data), which cannot be stored; any other request is about a run that cannot
/// exist, which is not found (404), as the reference answers for a run it has no file for.
fn unstorable(id: &str, ty: EventType, req: &EventRequest, invalid: WorldError) -> WorldError {
    let creates = match ty {
        EventType::RunCreated => true,
        EventType::RunStarted => view::<RunStartedData>(req.event_data.as_ref())
            .is_some_and(|d| d.deployment_id.is_some() || d.workflow_name.is_some()),
        _ => false,
    };
    if creates {
        return invalid;
    }
    WorldError::RunNotFound {
        run_id: id.to_string(),
    }
}

/// Rejects spec versions this World does not write: newer than
/// [`SPEC_VERSION_MAX_SUPPORTED`], or legacy (missing or below 2).
pub(crate) fn check_spec(run_id: &str, spec: Option<u32>) -> Result<(), WorldError> {
    match spec {
        Some(v) if v > SPEC_VERSION_MAX_SUPPORTED => Err(WorldError::RunNotSupported {
            run_id: run_id.to_string(),
            found: v,
            supported: SPEC_VERSION_MAX_SUPPORTED,
        }),
        Some(v) if v >= SPEC_VERSION_EVENT_SOURCING => Ok(()),
        found => Err(WorldError::LegacySpecVersion {
            run_id: run_id.to_string(),
            found,
        }),
    }
}

/// One event to append.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub ty: EventType,
    pub corr: Option<String>,
    pub data: Option<RawJson>,
    pub key: Option<String>,
    pub event_id: Ulid,
    pub created_at_ms: u64,
}

impl Planned {
    pub(crate) fn to_new_event(&self) -> NewEvent {
        let payload = self
            .data
            .as_ref()
            .map_or_else(Bytes::new, |d| Bytes::copy_from_slice(d.as_bytes()));
        NewEvent {
            kind: self.ty.as_str().to_string(),
            correlation_id: self.corr.clone(),
            payload,
            key: self.key.clone(),
            event_id: Some(self.event_id),
            created_at_ms: Some(self.created_at_ms),
        }
    }

    pub(crate) fn event_ref(&self, seq: Seq) -> EventRef<'_> {
        EventRef {
            seq,
            event_id: self.event_id,
            created_at_ms: self.created_at_ms,
            kind: self.ty.as_str(),
            correlation_id: self.corr.as_deref(),
            key: self.key.as_deref(),
            payload: self.data.as_ref().map_or(&[], |d| d.as_bytes()),
        }
    }
}

/// What to append, and what to do around it.
pub(crate) struct Plan {
    pub events: Vec<Planned>,
    /// Index of the event returned as the result's `event`.
    pub primary: usize,
    /// `hook_created`: the token to claim store-wide before appending.
    pub claim: Option<String>,
    /// (token, hook id) whose claims to release once the append commits.
    pub releases: Vec<(String, String)>,
    /// The lazy `step_started` that creates its step.
    pub step_created: bool,
}

impl Plan {
    fn one(event: Planned) -> Plan {
        Plan {
            events: vec![event],
            primary: 0,
            claim: None,
            releases: Vec::new(),
            step_created: false,
        }
    }

    /// The token is held by a live hook of `holder_run`: the request becomes a
    /// `hook_conflict` event (same correlation id, key and event id), which the reference
    /// stores and returns as a normal result.
    pub(crate) fn into_conflict(self, token: &str, holder_run: &str) -> Plan {
        let mut event = self
            .events
            .into_iter()
            .next()
            .unwrap_or_else(|| unreachable!());
        event.ty = EventType::HookConflict;
        event.data = Some(conflict_data(token, holder_run));
        Plan::one(event)
    }
}

/// `hook_conflict`'s data: `{token, conflictingRunId}`.
fn conflict_data(token: &str, holder_run: &str) -> RawJson {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ConflictData<'a> {
        token: &'a str,
        conflicting_run_id: &'a str,
    }
    RawJson::from_value(&ConflictData {
        token,
        conflicting_run_id: holder_run,
    })
}

/// The `hook_conflict` that settles hook `hook_id`'s pending claim on `token` for good
/// when run `holder_run` takes the token over (`tokens.rs`): keyed like the hook's
/// `hook_created` (`hook/<id>`), so that the run holds one outcome for the hook, whoever
/// wrote it.
pub(crate) fn settling_conflict(hook_id: &str, token: &str, holder_run: &str) -> NewEvent {
    let id = mint_ulid();
    Planned {
        ty: EventType::HookConflict,
        corr: Some(hook_id.to_string()),
        data: Some(conflict_data(token, holder_run)),
        key: Some(format!("hook/{hook_id}")),
        event_id: id,
        created_at_ms: id.timestamp_ms(),
    }
    .to_new_event()
}

/// The outcome of [`decide`].
pub(crate) enum Decision {
    /// Nothing is written; the result as is (`event_seq`: the stored event to return).
    Done {
        result: Box<EventResult>,
        event_seq: Option<Seq>,
        /// The run's spec version (how the stored event's id is written).
        spec_version: Option<u32>,
    },
    /// Append the plan fenced at the state's seq.
    Append(Plan),
}

/// What a decision is taken at besides the run's state: the rules' time
/// ([`crate::WorldConfig::clock`]) and the World's limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DecideAt {
    /// Now, in ms since the epoch.
    pub now_ms: u64,
    /// [`crate::WorldConfig::hook_retention_max_ms`].
    pub hook_retention_max_ms: u64,
}

/// Decides `req` against `state` (the run's log folded to seq N) at `at`.
///
/// # Errors
/// The rejection, with the SDK's class (see [`WorldError`]).
pub(crate) fn decide(
    state: &RunState,
    req: &Checked,
    params: &CreateEventParams,
    at: DecideAt,
) -> Result<Decision, WorldError> {
    let run_id = req.run.as_str();
    if state.run().is_some() {
        check_spec(run_id, state.spec_version())?;
    }
    if state.event_seq(req.event_id).is_some() {
        return Err(WorldError::DuplicateEventId {
            run_id: run_id.to_string(),
            event_id: ids::event_id_string(req.event_id),
        });
    }
    if let Some(t) = params.state_updated_at_ms
        && state.newest_created_at_ms() > t
    {
        return Err(WorldError::PreconditionFailed {
            run_id: run_id.to_string(),
            state_updated_at_ms: t,
            newest_event_ms: state.newest_created_at_ms(),
        });
    }
    match req.ty {
        EventType::RunCreated => run_created(state, req).map(Decision::Append),
        EventType::RunStarted => run_started(state, req),
        EventType::RunCompleted | EventType::RunFailed | EventType::RunCancelled => {
            end_run(state, req, at.now_ms)
        }
        EventType::AttrSet => attr_set(state, req).map(Decision::Append),
        EventType::StepCreated => step_created(state, req).map(Decision::Append),
        EventType::StepStarted => step_started(state, req, at.now_ms).map(Decision::Append),
        EventType::StepCompleted | EventType::StepFailed | EventType::StepRetrying => {
            step_outcome(state, req).map(Decision::Append)
        }
        EventType::HookCreated => hook_created(state, req, at).map(Decision::Append),
        EventType::HookReceived | EventType::HookDisposed => hook_event(state, req, at.now_ms),
        EventType::WaitCreated | EventType::WaitCompleted => {
            wait_event(state, req).map(Decision::Append)
        }
        EventType::HookConflict => Err(WorldError::invalid(
            "eventType",
            "hook_conflict is written by the World, never requested",
        )),
    }
}

fn no_run(req: &Checked) -> WorldError {
    WorldError::RunNotFound {
        run_id: req.run.to_string(),
    }
}

fn live_run<'a>(state: &'a RunState, req: &Checked) -> Result<&'a crate::WorkflowRun, WorldError> {
    state.run().ok_or_else(|| no_run(req))
}

/// An entity may not be created on a terminal run (409).
fn creatable(run: &crate::WorkflowRun, req: &Checked) -> Result<(), WorldError> {
    if run.status.is_terminal() {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!(
                "cannot create a new entity ({}) on a run in terminal state {:?}",
                req.ty,
                run.status.as_str()
            ),
        ));
    }
    Ok(())
}

fn world_created(state: &RunState, req: &Checked) -> Result<(), WorldError> {
    if state.spec_version().is_none() {
        return Err(WorldError::conflict(
            req.run.as_str(),
            "the store holds a run of this id that no World created (no spec version in its metadata)",
        ));
    }
    Ok(())
}

fn run_created(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    if state.run().is_some() {
        return Err(WorldError::conflict(
            req.run.as_str(),
            "workflow run already exists",
        ));
    }
    world_created(state, req)?;
    Ok(Plan::one(req.planned(Some("run_created".into()))))
}

fn run_started(state: &RunState, req: &Checked) -> Result<Decision, WorldError> {
    let Some(run) = state.run() else {
        return resilient_start(state, req).map(Decision::Append);
    };
    match run.status {
        RunStatus::Pending => {
            let mut start = req.planned(None);
            // The reference stores run_started without its data (it belongs on run_created).
            start.data = None;
            Ok(Decision::Append(Plan::one(start)))
        }
        // Already running: the reference returns the run and stores nothing.
        RunStatus::Running => Ok(Decision::Done {
            result: Box::new(EventResult {
                run: Some(run.clone()),
                ..EventResult::default()
            }),
            event_seq: None,
            spec_version: state.spec_version(),
        }),
        status => Err(WorldError::expired(
            req.run.as_str(),
            format!(
                "workflow run is already in terminal state {:?}",
                status.as_str()
            ),
        )),
    }
}

/// `run_started` on a run that does not exist, carrying the creation data: a synthetic
/// `run_created` and the `run_started`, appended as one batch.
fn resilient_start(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Created<'a> {
        deployment_id: &'a str,
        workflow_name: &'a str,
        input: &'a serde_json::value::RawValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        execution_context: Option<&'a serde_json::value::RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        attributes: Option<&'a std::collections::BTreeMap<String, String>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        allow_reserved_attributes: Option<bool>,
    }
    let d = req.creation_data().ok_or_else(|| no_run(req))?;
    world_created(state, req)?;
    let input = d.input.as_ref().ok_or_else(|| no_run(req))?;
    let created = RawJson::from_value(&Created {
        deployment_id: &d.deployment_id,
        workflow_name: &d.workflow_name,
        input: input.as_raw(),
        execution_context: d.execution_context.as_ref().map(RawJson::as_raw),
        attributes: d.attributes.as_ref(),
        allow_reserved_attributes: d.allow_reserved_attributes.filter(|a| *a),
    });
    let synthetic = Planned {
        ty: EventType::RunCreated,
        corr: None,
        data: Some(created),
        key: Some("run_created".into()),
        event_id: mint_ulid(),
        created_at_ms: req.created_at_ms,
    };
    let mut start = req.planned(None);
    start.data = None;
    Ok(Plan {
        events: vec![synthetic, start],
        primary: 1,
        claim: None,
        releases: Vec::new(),
        step_created: false,
    })
}

fn end_run(state: &RunState, req: &Checked, now_ms: u64) -> Result<Decision, WorldError> {
    let run = live_run(state, req)?;
    if run.status.is_terminal() {
        if req.ty == EventType::RunCancelled && run.status == RunStatus::Cancelled {
            // Idempotent, as in the reference, but without a second terminal event: the
            // original run_cancelled is returned.
            return Ok(Decision::Done {
                result: Box::new(EventResult {
                    run: Some(run.clone()),
                    ..EventResult::default()
                }),
                event_seq: state.terminal_event().map(|(seq, _)| seq),
                spec_version: state.spec_version(),
            });
        }
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!(
                "cannot transition run from terminal state {:?}",
                run.status.as_str()
            ),
        ));
    }
    let mut plan = Plan::one(req.planned(Some("run_terminal".into())));
    // A hook retained past the run's end keeps its token until its tokenRetentionUntil
    // (after which its claim is dead by the liveness rule, `tokens.rs`).
    plan.releases = state
        .live_hooks()
        .filter(|(_, h)| h.token_retention_until_ms.is_none_or(|t| t <= now_ms))
        .map(|(_, h)| (h.token.clone(), h.hook_id.clone()))
        .collect();
    Ok(Decision::Append(plan))
}

fn attr_set(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    let run = live_run(state, req)?;
    if run.status.is_terminal() {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!(
                "cannot set attributes on a run in terminal state {:?}",
                run.status.as_str()
            ),
        ));
    }
    let d: AttrSetData = view(req.data.as_ref())
        .ok_or_else(|| WorldError::invalid("eventData", "does not match the attr_set schema"))?;
    let changes = d
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.value.as_deref()));
    attrs::validate(
        changes,
        req.merged_attributes.as_ref().unwrap_or(&run.attributes),
        d.allow_reserved_attributes == Some(true),
    )?;
    let deduped = matches!(d.writer, AttrWriter::Workflow) && req.corr.is_some();
    if deduped && state.attr_set_seen(req.corr()) {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!("attribute event {:?} already exists", req.corr()),
        ));
    }
    let key = deduped.then(|| format!("attr/{}", req.corr()));
    Ok(Plan::one(req.planned(key)))
}

fn step_created(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    creatable(live_run(state, req)?, req)?;
    if state.step(req.corr()).is_some() {
        return Err(step_exists(req));
    }
    Ok(Plan::one(req.planned(Some(format!("step/{}", req.corr())))))
}

fn step_exists(req: &Checked) -> WorldError {
    WorldError::conflict(
        req.run.as_str(),
        format!("step {:?} already created", req.corr()),
    )
}

fn step_started(state: &RunState, req: &Checked, now_ms: u64) -> Result<Plan, WorldError> {
    let run = live_run(state, req)?;
    let d: Option<StepStartedData> = view(req.data.as_ref());
    if let Some((step_name, input)) = d.as_ref().and_then(StepStartedData::lazy) {
        return lazy_start(state, req, run, step_name, input);
    }
    let step = existing_step(state, req)?;
    if run.status.is_terminal() {
        return Err(WorldError::expired(
            req.run.as_str(),
            format!(
                "cannot start step {:?}: the run is in terminal state {:?}",
                req.corr(),
                run.status.as_str()
            ),
        ));
    }
    if let Some(at) = step.retry_after_ms
        && at > now_ms
    {
        return Err(WorldError::TooEarly {
            run_id: req.run.to_string(),
            step_id: req.corr().to_string(),
            retry_after_s: (at - now_ms).div_ceil(1000),
        });
    }
    Ok(Plan::one(req.planned(None)))
}

/// A `step_started` carrying `stepName` and `input` creates its step: a synthetic
/// `step_created` and the `step_started` (without `input`) as one batch; the winner of a
/// race gets `stepCreated`, a loser the conflict.
fn lazy_start(
    state: &RunState,
    req: &Checked,
    run: &crate::WorkflowRun,
    step_name: &str,
    input: &RawJson,
) -> Result<Plan, WorldError> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Created<'a> {
        step_name: &'a str,
        input: &'a serde_json::value::RawValue,
    }
    creatable(run, req)?;
    if state.step(req.corr()).is_some() {
        return Err(step_exists(req));
    }
    let created = Planned {
        ty: EventType::StepCreated,
        corr: req.corr.clone(),
        data: Some(RawJson::from_value(&Created {
            step_name,
            input: input.as_raw(),
        })),
        key: Some(format!("step/{}", req.corr())),
        event_id: mint_ulid(),
        created_at_ms: req.created_at_ms,
    };
    let mut start = req.planned(None);
    if let Some(data) = &req.data {
        let mut members = Members::parse(data.as_str())
            .map_err(|e| WorldError::invalid("eventData", e.to_string()))?;
        members.0.retain(|(k, _)| k != "input");
        start.data = Some(members.to_json());
    }
    Ok(Plan {
        events: vec![created, start],
        primary: 1,
        claim: None,
        releases: Vec::new(),
        step_created: true,
    })
}

fn existing_step<'a>(state: &'a RunState, req: &Checked) -> Result<&'a crate::Step, WorldError> {
    let step = state
        .step(req.corr())
        .ok_or_else(|| WorldError::StepNotFound {
            run_id: req.run.to_string(),
            step_id: req.corr().to_string(),
        })?;
    if step.status.is_terminal() {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!(
                "cannot modify step {:?} in terminal state {:?}",
                req.corr(),
                step.status.as_str()
            ),
        ));
    }
    Ok(step)
}

fn step_outcome(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    let run = live_run(state, req)?;
    let step = existing_step(state, req)?;
    // Stricter than the reference: a step must have started to complete or retry. A step
    // may fail before it ever started (the runtime fails unregistered steps and steps past
    // their delivery budget that way).
    if step.attempt == 0 && req.ty != EventType::StepFailed {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!(
                "step {:?} was never started ({} needs a step_started first)",
                req.corr(),
                req.ty
            ),
        ));
    }
    let too_late = match req.ty {
        EventType::StepRetrying => run.status.is_terminal(),
        _ => run.status.is_terminal() && step.status != RunStatus::Running,
    };
    if too_late {
        return Err(WorldError::expired(
            req.run.as_str(),
            format!(
                "cannot {} step {:?} ({}) of a run in terminal state {:?}",
                req.ty,
                req.corr(),
                step.status.as_str(),
                run.status.as_str()
            ),
        ));
    }
    let key = (req.ty != EventType::StepRetrying).then(|| format!("step_terminal/{}", req.corr()));
    Ok(Plan::one(req.planned(key)))
}

fn hook_created(state: &RunState, req: &Checked, at: DecideAt) -> Result<Plan, WorldError> {
    creatable(live_run(state, req)?, req)?;
    if state.hook_used(req.corr()) {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!("hook {:?} already created", req.corr()),
        ));
    }
    let d: HookCreatedData = view(req.data.as_ref()).ok_or_else(|| {
        WorldError::invalid("eventData", "does not match the hook_created schema")
    })?;
    if let Some(until) = d.token_retention_until.as_ref().and_then(|t| t.to_ms())
        && until > at.now_ms.saturating_add(at.hook_retention_max_ms)
    {
        return Err(WorldError::invalid(
            "eventData.tokenRetentionUntil",
            format!(
                "a hook's minimum retention cannot exceed {} in this World (WorldConfig::hook_retention_max_ms)",
                retention_span(at.hook_retention_max_ms)
            ),
        ));
    }
    let mut plan = Plan::one(req.planned(Some(format!("hook/{}", req.corr()))));
    plan.claim = Some(d.token);
    Ok(plan)
}

/// `ms` as whole days (`30 days`), else hours, minutes or seconds, for messages.
fn retention_span(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "day"),
        (3_600_000, "hour"),
        (60_000, "minute"),
        (1000, "second"),
    ];
    UNITS
        .iter()
        .find(|(unit, _)| ms >= *unit && ms.is_multiple_of(*unit))
        .map_or_else(
            || format!("{ms} ms"),
            |(unit, name)| {
                let n = ms / unit;
                format!("{n} {name}{}", if n == 1 { "" } else { "s" })
            },
        )
}

fn hook_event(state: &RunState, req: &Checked, now_ms: u64) -> Result<Decision, WorldError> {
    let run = live_run(state, req)?;
    if let Some(claim) = &req.resume
        && let Some(done) = resumed(state, req, claim)?
    {
        return Ok(done);
    }
    // A hook retained past its run's end is readable but the run takes no more events:
    // RunExpiredError, as world-local 5.0.0-beta.46 answers a resume of a retained hook.
    if run.status.is_terminal() && state.available_hook(req.corr(), now_ms).is_some() {
        return Err(WorldError::expired(
            req.run.as_str(),
            format!(
                "hook {:?} is retained past the run's end (tokenRetentionUntil) but the run is in terminal state {:?}",
                req.corr(),
                run.status.as_str()
            ),
        ));
    }
    let hook = state
        .hook(req.corr())
        .ok_or_else(|| WorldError::HookNotFound {
            hook: req.corr().to_string(),
        })?;
    if req.ty == EventType::HookDisposed {
        let mut plan = Plan::one(req.planned(Some(format!("hook_disposed/{}", req.corr()))));
        plan.releases = vec![(hook.token.clone(), hook.hook_id.clone())];
        return Ok(Decision::Append(plan));
    }
    let d: Option<HookReceivedData> = view(req.data.as_ref());
    if let Some(token) = d.and_then(|d| d.token)
        && token != hook.token
    {
        return Err(WorldError::invalid(
            "eventData.token",
            format!("does not match the token of hook {:?}", req.corr()),
        ));
    }
    let key = req.resume.as_ref().map(ResumeClaim::key);
    Ok(Decision::Append(Plan::one(req.planned(key))))
}

/// A resume the run already recorded: the same hook with a matching digest is answered
/// with the recorded event (even once the hook is gone: that resume was accepted while it
/// lived, as world-local answers a redelivery); else the hook must be live (404) and the
/// request conflicts with the recorded one (409). `None`: a resume id the run has not seen.
fn resumed(
    state: &RunState,
    req: &Checked,
    claim: &ResumeClaim,
) -> Result<Option<Decision>, WorldError> {
    let Some(prior) = state.resume(&claim.id) else {
        return Ok(None);
    };
    let same_hook = prior.hook_id == req.corr();
    if same_hook && claim.digest_matches(prior.digest.as_deref()) {
        return Ok(Some(Decision::Done {
            result: Box::default(),
            event_seq: Some(prior.seq),
            spec_version: state.spec_version(),
        }));
    }
    if state.hook(req.corr()).is_none() {
        return Err(WorldError::HookNotFound {
            hook: req.corr().to_string(),
        });
    }
    let what = if same_hook {
        "with a different payload"
    } else {
        "for a different hook"
    };
    Err(WorldError::conflict(
        req.run.as_str(),
        format!(
            "hook_received resumeId {:?} already recorded {what} (seq {})",
            claim.id, prior.seq
        ),
    ))
}

fn wait_event(state: &RunState, req: &Checked) -> Result<Plan, WorldError> {
    let run = live_run(state, req)?;
    let corr = req.corr();
    if req.ty == EventType::WaitCreated {
        creatable(run, req)?;
        if state.wait(corr).is_some() {
            return Err(WorldError::conflict(
                req.run.as_str(),
                format!("wait {corr:?} already exists"),
            ));
        }
        return Ok(Plan::one(req.planned(Some(format!("wait/{corr}")))));
    }
    if run.status.is_terminal() {
        return Err(WorldError::expired(
            req.run.as_str(),
            format!(
                "cannot complete wait {corr:?}: the run is in terminal state {:?}",
                run.status.as_str()
            ),
        ));
    }
    let wait = state.wait(corr).ok_or_else(|| WorldError::WaitNotFound {
        run_id: req.run.to_string(),
        wait_id: corr.to_string(),
    })?;
    if wait.status == crate::WaitStatus::Completed {
        return Err(WorldError::conflict(
            req.run.as_str(),
            format!("wait {corr:?} already completed"),
        ));
    }
    Ok(Plan::one(
        req.planned(Some(format!("wait_completed/{corr}"))),
    ))
}
