//! The SDK's shapes: event types, the `events.create` request and result, the materialized
//! entities (run, step, hook, wait), stored events, pagination. Serde field names are the
//! SDK schemas' own (`@workflow/world` `runs.d.ts`, `steps.d.ts`, `hooks.d.ts`,
//! `waits.d.ts`, `events.d.ts`); dates are held as milliseconds since the Unix epoch
//! (fields ending in `_ms`) and serialized as ISO 8601 strings (`2026-11-30T10:46:45.403Z`),
//! as the reference's JSON files hold them; payload fields are [`RawJson`], byte-exact.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::WorldError;
use crate::json::{RawJson, iso_ms, iso_ms_opt};

/// The spec version this World implements (`SPEC_VERSION_CURRENT` of `@workflow/world`).
pub const SPEC_VERSION_CURRENT: u32 = 5;
/// The first spec version whose event ids are slots (`SPEC_VERSION_SUPPORTS_SLOT_IDENTITY`).
pub const SPEC_VERSION_SLOT_IDENTITY: u32 = 6;
/// The newest spec version this World serves (`SPEC_VERSION_SUPPORTS_SEALED_LOG`): spec 7
/// holds by construction, since a seq is assigned at the commit that fills it (no hole,
/// never a `noop`).
pub const SPEC_VERSION_MAX_SUPPORTED: u32 = 7;
/// The first event-sourced spec version; older runs are legacy.
pub const SPEC_VERSION_EVENT_SOURCING: u32 = 2;

/// Every event type of spec 5 (`EventTypeSchema`); the runlog event kind is its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum EventType {
    RunCreated,
    RunStarted,
    RunCompleted,
    RunFailed,
    RunCancelled,
    AttrSet,
    StepCreated,
    StepCompleted,
    StepFailed,
    StepRetrying,
    StepStarted,
    HookCreated,
    HookReceived,
    HookDisposed,
    HookConflict,
    WaitCreated,
    WaitCompleted,
}

impl EventType {
    /// All seventeen, in the order of the SDK's enum.
    pub const ALL: [EventType; 17] = [
        EventType::RunCreated,
        EventType::RunStarted,
        EventType::RunCompleted,
        EventType::RunFailed,
        EventType::RunCancelled,
        EventType::AttrSet,
        EventType::StepCreated,
        EventType::StepCompleted,
        EventType::StepFailed,
        EventType::StepRetrying,
        EventType::StepStarted,
        EventType::HookCreated,
        EventType::HookReceived,
        EventType::HookDisposed,
        EventType::HookConflict,
        EventType::WaitCreated,
        EventType::WaitCompleted,
    ];

    /// The SDK name (`run_created`, ...), also the runlog event kind.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::RunCreated => "run_created",
            EventType::RunStarted => "run_started",
            EventType::RunCompleted => "run_completed",
            EventType::RunFailed => "run_failed",
            EventType::RunCancelled => "run_cancelled",
            EventType::AttrSet => "attr_set",
            EventType::StepCreated => "step_created",
            EventType::StepCompleted => "step_completed",
            EventType::StepFailed => "step_failed",
            EventType::StepRetrying => "step_retrying",
            EventType::StepStarted => "step_started",
            EventType::HookCreated => "hook_created",
            EventType::HookReceived => "hook_received",
            EventType::HookDisposed => "hook_disposed",
            EventType::HookConflict => "hook_conflict",
            EventType::WaitCreated => "wait_created",
            EventType::WaitCompleted => "wait_completed",
        }
    }

    /// The type of a runlog event kind, if it is one.
    pub fn parse(kind: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == kind)
    }

    /// `run_completed`, `run_failed`, `run_cancelled`.
    pub fn is_terminal_run(self) -> bool {
        matches!(
            self,
            EventType::RunCompleted | EventType::RunFailed | EventType::RunCancelled
        )
    }

    /// Step, hook and wait events, which need a correlation id (the entity's id).
    pub fn needs_correlation_id(self) -> bool {
        !matches!(
            self,
            EventType::RunCreated
                | EventType::RunStarted
                | EventType::RunCompleted
                | EventType::RunFailed
                | EventType::RunCancelled
                | EventType::AttrSet
        )
    }

    /// The `eventData` member holding the opaque payload, removed by `resolveData: 'none'`
    /// (`EVENT_DATA_PAYLOAD_FIELD_BY_EVENT_TYPE`).
    pub fn payload_field(self) -> Option<&'static str> {
        match self {
            EventType::RunCreated
            | EventType::RunStarted
            | EventType::StepCreated
            | EventType::StepStarted => Some("input"),
            EventType::RunCompleted => Some("output"),
            EventType::RunFailed | EventType::StepFailed | EventType::StepRetrying => Some("error"),
            EventType::StepCompleted => Some("result"),
            EventType::HookCreated => Some("metadata"),
            EventType::HookReceived => Some("payload"),
            _ => None,
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to `events.create` (`CreateEventRequest`): what the SDK sends, plus an optional
/// caller event id. Deserializes from the SDK's JSON (`eventType`, `correlationId`,
/// `eventData`, `specVersion`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRequest {
    /// The event type.
    pub event_type: EventType,
    /// The step, hook, wait or attribute-batch id; required for step, hook and wait events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The event data, exact JSON bytes; stored verbatim as the event's payload. Absent is
    /// not the same as `null`.
    #[serde(
        default,
        deserialize_with = "crate::json::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub event_data: Option<RawJson>,
    /// The writer's spec version (`SPEC_VERSION_CURRENT` from the runtime); defaults to 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
    /// A caller-chosen event id `evnt_<ULID>` (runlog's extension: the reference always
    /// mints one). The World mints one when absent. A repeated id is
    /// [`WorldError::DuplicateEventId`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

impl EventRequest {
    /// A request of `event_type` with no correlation id, data, spec version or event id.
    pub fn new(event_type: EventType) -> EventRequest {
        EventRequest {
            event_type,
            correlation_id: None,
            event_data: None,
            spec_version: None,
            event_id: None,
        }
    }

    /// Sets the correlation id.
    pub fn correlation_id(mut self, id: impl Into<String>) -> EventRequest {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the event data from JSON text, kept byte for byte.
    ///
    /// # Errors
    /// [`WorldError::InvalidRequest`] (field `eventData`) when `json` is not JSON.
    pub fn data(mut self, json: impl AsRef<[u8]>) -> Result<EventRequest, WorldError> {
        let raw = RawJson::from_bytes(json.as_ref())
            .map_err(|e| WorldError::invalid("eventData", format!("not JSON: {e}")))?;
        self.event_data = Some(raw);
        Ok(self)
    }

    /// Sets the spec version.
    pub fn spec_version(mut self, v: u32) -> EventRequest {
        self.spec_version = Some(v);
        self
    }

    /// Sets the caller's event id (`evnt_<ULID>`).
    pub fn event_id(mut self, id: impl Into<String>) -> EventRequest {
        self.event_id = Some(id.into());
        self
    }
}

/// `resolveData`: `All` returns payloads, `None` omits them (runs and steps: `input` and
/// `output`; hooks: `metadata`; events: the type's payload member of `eventData`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolveData {
    /// Everything (the default).
    #[default]
    All,
    /// No payloads.
    None,
}

/// `CreateEventParams`: options of `events.create`. `v1Compat`, `requestId` and
/// `occurredAt` are not taken (the reference ignores them too).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreateEventParams {
    /// Shapes the returned `event` (and a `sinceCursor` delta); returned entities are full.
    pub resolve_data: ResolveData,
    /// The optimistic guard: ms since the Unix epoch of the newest event the caller has
    /// seen; the create fails with [`WorldError::PreconditionFailed`] when the run holds an
    /// event created later (equal passes).
    pub state_updated_at_ms: Option<u64>,
    /// On `step_completed`/`step_failed`: a cursor from `events.list`; the result then
    /// carries the events after it (one page) as `events`/`cursor`/`hasMore`.
    pub since_cursor: Option<String>,
    /// On `run_started`: do not preload the run's events into the result.
    pub skip_preload: bool,
    /// `eventCount`: the writer's highest loaded slot. Never a reason to reject: when the
    /// request commits past `event_count + 1`, the result carries the events at
    /// `event_count + 1 …` below it (`events`, `cursor: null`, `hasMore` when truncated),
    /// unless a `sinceCursor` delta is returned instead.
    pub event_count: Option<u64>,
    /// On `hook_received`: the resume's identity. Every write of one `(runId, resumeId)`
    /// commits at most one event and is answered with it (`src/resume.rs`); empty is none.
    pub resume_id: Option<String>,
    /// On `hook_received` with a `resume_id`: the digest of the resume's payload; a resume
    /// id recorded with another digest is a conflict.
    pub resume_payload_digest: Option<String>,
}

/// `EventResult`: the stored event and the entity it created or changed, as of that event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventResult {
    /// The event (absent only for `run_started` on a running run, which stores nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    /// The run, for run events and `attr_set`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<WorkflowRun>,
    /// The step, for step events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    /// The hook, for `hook_created` (absent when it became `hook_conflict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<Hook>,
    /// The wait, for wait events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// The run's events (preload on `run_started`) or the delta after `sinceCursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Event>>,
    /// Cursor after the last of `events`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Whether events exist past `cursor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// True only when this `step_started` created its step (the lazy start's exactly-once
    /// ownership signal).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub step_created: bool,
}

/// A stored event in the SDK's shape (`EventSchema`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The run.
    pub run_id: String,
    /// `evnt_<ULID>`.
    pub event_id: String,
    /// The type.
    pub event_type: EventType,
    /// The correlation id, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// The stored payload, byte for byte (absent when the request had none, or stripped by
    /// `resolveData: 'none'`).
    #[serde(
        default,
        deserialize_with = "crate::json::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub event_data: Option<RawJson>,
    /// Creation time.
    #[serde(rename = "createdAt", with = "iso_ms")]
    pub created_at_ms: u64,
    /// The run's spec version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
    /// The `params.resumeId` of a `hook_received` created with one (`src/resume.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_id: Option<String>,
    /// The event's runlog seq (not part of the SDK shape; the cursor of `events.list`).
    #[serde(skip)]
    pub seq: u64,
}

/// A stored event as [`World::list_events_each`](crate::World::list_events_each) hands it
/// out: [`Event`]'s fields borrowed from the log instead of copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventView<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The event id's ULID (`evnt_<ULID>` is [`crate::event_id_string`] of it).
    pub event_id: ulid::Ulid,
    /// The type.
    pub event_type: EventType,
    /// The correlation id, if any.
    pub correlation_id: Option<&'a str>,
    /// The stored payload text, byte for byte (UTF-8; **not** parsed here: a caller that
    /// needs it to be JSON checks it, as [`Event`]'s reads do).
    pub event_data: Option<&'a str>,
    /// Creation time, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// The run's spec version.
    pub spec_version: Option<u32>,
    /// The `params.resumeId` of a `hook_received` created with one.
    pub resume_id: Option<&'a str>,
    /// The event's runlog seq.
    pub seq: u64,
}

/// A workflow run's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum RunStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    /// `completed`, `failed`, `cancelled`.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// The SDK name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// A step's status (same names as runs'; `cancelled` is never produced).
pub type StepStatus = RunStatus;

/// A workflow run (`WorkflowRunSchema`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    /// `wrun_<ULID>`.
    pub run_id: String,
    /// Status.
    pub status: RunStatus,
    /// From `run_created`.
    pub deployment_id: String,
    /// From `run_created` (`workflow//<module>//<fn>`).
    pub workflow_name: String,
    /// The run's spec version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
    /// From `run_created`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_context: Option<RawJson>,
    /// From `run_created` (omitted by `resolveData: 'none'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<RawJson>,
    /// From `run_completed` (omitted by `resolveData: 'none'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<RawJson>,
    /// From `run_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RawJson>,
    /// From `run_failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// From `run_created` and `attr_set`.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Part of the schema; set by neither this World nor the reference's local store.
    #[serde(
        rename = "expiredAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expired_at_ms: Option<u64>,
    /// First `run_started`.
    #[serde(
        rename = "startedAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at_ms: Option<u64>,
    /// The terminal event's time.
    #[serde(
        rename = "completedAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at_ms: Option<u64>,
    /// The `run_created` event's time.
    #[serde(rename = "createdAt", with = "iso_ms")]
    pub created_at_ms: u64,
    /// The last event that changed the run.
    #[serde(rename = "updatedAt", with = "iso_ms")]
    pub updated_at_ms: u64,
    /// Set only by store-wide listings ([`crate::World::list_runs`]) for a run whose log
    /// cannot be read to its end: the fields above are what its readable part holds, and
    /// this says why the rest is missing. Not part of the SDK's schema (whose parsers drop
    /// unknown fields); `runs.get` of such a run fails with the fault instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_error: Option<StorageFault>,
}

/// Why a run's log could not be read to its end (`storageError` of a listed run or hook;
/// the runs of [`crate::WorldError::Unreadable`]): a damaged segment, an unreadable file, a
/// format this build does not know. Everything up to [`StorageFault::readable_seq`] was
/// read and is what the listing shows; nothing past it is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageFault {
    /// The run.
    pub run_id: String,
    /// The store error's code ([`crate::error_table::store_code`]): `CORRUPT`,
    /// `UNSUPPORTED_VERSION`, `IO`, `BUSY`, `POISONED`, `DISK_FULL`, `NOT_FOUND`, ...
    pub code: String,
    /// The store's message (run, segment file and byte offset for corruption).
    pub message: String,
    /// The last seq read before the fault (0: nothing could be read).
    pub readable_seq: u64,
    /// `CORRUPT`: the segment file where validation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// `CORRUPT`: the byte offset in that file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl StorageFault {
    /// The fault `e` met reading run `run_id` after seq `readable_seq`.
    pub fn new(run_id: &str, e: &runlog::Error, readable_seq: u64) -> StorageFault {
        let (segment, offset) = match e {
            runlog::Error::Corrupt {
                segment, offset, ..
            } => (Some(segment.clone()), Some(*offset)),
            _ => (None, None),
        };
        StorageFault {
            run_id: run_id.to_string(),
            code: crate::error_table::store_code(e).as_str().to_string(),
            message: e.message_with_causes(),
            readable_seq,
            segment,
            offset,
        }
    }
}

/// A step (`StepSchema`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The run.
    pub run_id: String,
    /// The correlation id of its events.
    pub step_id: String,
    /// `step//<module>//<fn>`.
    pub step_name: String,
    /// Status.
    pub status: StepStatus,
    /// From `step_created` (omitted by `resolveData: 'none'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<RawJson>,
    /// `step_completed.result` (omitted by `resolveData: 'none'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<RawJson>,
    /// The latest `step_retrying` or `step_failed` error (kept after a later success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RawJson>,
    /// 0 at creation, +1 on every `step_started`.
    pub attempt: u32,
    /// First `step_started`.
    #[serde(
        rename = "startedAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at_ms: Option<u64>,
    /// `step_completed` or `step_failed`.
    #[serde(
        rename = "completedAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at_ms: Option<u64>,
    /// Creation.
    #[serde(rename = "createdAt", with = "iso_ms")]
    pub created_at_ms: u64,
    /// Last change.
    #[serde(rename = "updatedAt", with = "iso_ms")]
    pub updated_at_ms: u64,
    /// From `step_retrying`; cleared by `step_started`.
    #[serde(
        rename = "retryAfter",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after_ms: Option<u64>,
    /// The run's spec version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
}

/// A live hook (`HookSchema`); a hook exists from `hook_created` until `hook_disposed` or
/// its run's end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    /// The run.
    pub run_id: String,
    /// The correlation id of its events.
    pub hook_id: String,
    /// Unique among live hooks of the store.
    pub token: String,
    /// `ownerId` of [`crate::HookIdentity`].
    pub owner_id: String,
    /// `projectId` of [`crate::HookIdentity`].
    pub project_id: String,
    /// `environment` of [`crate::HookIdentity`].
    pub environment: String,
    /// From `hook_created` (omitted by `resolveData: 'none'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RawJson>,
    /// The `hook_created` event's time.
    #[serde(rename = "createdAt", with = "iso_ms")]
    pub created_at_ms: u64,
    /// The run's spec version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
    /// `hook_created.isWebhook`, false when absent (as the reference writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_webhook: Option<bool>,
    /// `hook_created.isSystem`, false when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_system: Option<bool>,
    /// `hook_created.tokenRetentionUntil` (`experimental_minRetention`): until then the
    /// hook outlives its run's end, readable and holding its token, though it can no longer
    /// be received (`docs/WORLD.md`, hook retention).
    #[serde(
        rename = "tokenRetentionUntil",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub token_retention_until_ms: Option<u64>,
    /// Set only by the store-wide `hooks.list` for a hook of a run whose log cannot be
    /// read to its end: the hook is live as far as the log can be read (see
    /// [`WorkflowRun::storage_error`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_error: Option<StorageFault>,
}

/// A wait's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum WaitStatus {
    Waiting,
    Completed,
}

/// A wait (`WaitSchema`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Wait {
    /// `<runId>-<correlationId>`, as the reference composes it.
    pub wait_id: String,
    /// The run.
    pub run_id: String,
    /// Status.
    pub status: WaitStatus,
    /// From `wait_created`.
    #[serde(
        rename = "resumeAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resume_at_ms: Option<u64>,
    /// `wait_completed`.
    #[serde(
        rename = "completedAt",
        default,
        with = "iso_ms_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at_ms: Option<u64>,
    /// Creation.
    #[serde(rename = "createdAt", with = "iso_ms")]
    pub created_at_ms: u64,
    /// Last change.
    #[serde(rename = "updatedAt", with = "iso_ms")]
    pub updated_at_ms: u64,
    /// The run's spec version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_version: Option<u32>,
}

/// Sort order of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    /// Oldest first.
    Asc,
    /// Newest first.
    Desc,
}

/// `PaginationOptions`: `limit` (clamped to 1..=1000; each list has its default), an opaque
/// `cursor` from a previous page, `sortOrder` (each list has its default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pagination {
    /// Most items per page.
    pub limit: Option<usize>,
    /// The `cursor` of the previous page.
    pub cursor: Option<String>,
    /// Order.
    pub sort_order: Option<SortOrder>,
}

/// Most items a page holds, whatever the caller asks (the interface's documented maximum).
pub const PAGE_LIMIT_MAX: usize = 1000;

/// `PaginatedResponse`: one page. `cursor` names the last item returned (`None` only for an
/// empty page); `has_more` says whether items exist past it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// The items.
    pub data: Vec<T>,
    /// Pass as `Pagination::cursor` for the next page.
    pub cursor: Option<String>,
    /// Whether more items follow.
    pub has_more: bool,
}

/// `ListWorkflowRunsParams`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRunsParams {
    /// Only runs of this workflow.
    pub workflow_name: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Paging (default: newest first, 100 per page).
    pub pagination: Pagination,
    /// Payloads or not.
    pub resolve_data: ResolveData,
}
