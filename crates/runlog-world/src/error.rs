//! [`WorldError`]: every rejection with the Workflow SDK's error class name and HTTP-like
//! status (`docs/WORLD.md` §5), and storage faults kept as runlog's typed errors.

use crate::model::StorageFault;

/// Everything a World call can fail with.
///
/// [`WorldError::class_name`] is the `name` of the `@workflow/errors` class the SDK runtime
/// dispatches on (`EntityConflictError`, `RunExpiredError`, ...); [`WorldError::code`] the
/// stable code and [`WorldError::status`] the HTTP status a remote World would answer with
/// (the mapping of `@workflow/world-vercel`'s `errorForResponse`: 404, 409, 410, 412, 425;
/// 400 for bad input; 5xx for storage trouble, which the runtime treats as retryable).
/// All three come from the one error table, [`crate::error_table`]. `#[non_exhaustive]`:
/// match with a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// The workflow run does not exist (no `run_created` in its log, or no log).
    /// `WorkflowRunNotFoundError`, 404.
    #[error("workflow run {run_id:?} not found")]
    RunNotFound {
        /// The run id asked for.
        run_id: String,
    },

    /// A step event names a step that was never created. `WorkflowWorldError`, 404 (the
    /// reference throws a `WorkflowWorldError` without status: `Step "<id>" not found`).
    #[error("step {step_id:?} not found in run {run_id:?}")]
    StepNotFound {
        /// The run.
        run_id: String,
        /// The step (the event's correlation id).
        step_id: String,
    },

    /// The hook does not exist or is no longer live (disposed, or its run ended), or no live
    /// hook holds the token. `HookNotFoundError`, 404.
    #[error("hook {hook:?} not found")]
    HookNotFound {
        /// The hook id or token asked for.
        hook: String,
    },

    /// `wait_completed` names a wait that was never created. `WorkflowWorldError`, 404 (the
    /// reference: `Wait "<id>" not found`, no status).
    #[error("wait {wait_id:?} not found in run {run_id:?}")]
    WaitNotFound {
        /// The run.
        run_id: String,
        /// The wait (the event's correlation id).
        wait_id: String,
    },

    /// `events.get` of an event id the run does not hold. `WorkflowWorldError`, 404.
    #[error("event {event_id:?} not found in run {run_id:?}")]
    EventNotFound {
        /// The run.
        run_id: String,
        /// The event id asked for.
        event_id: String,
    },

    /// The transition is not allowed from the current state: creating what exists, moving
    /// an entity out of a terminal state, creating an entity on a terminal run, losing a
    /// creation race. `EntityConflictError`, 409.
    #[error("conflict in run {run_id:?}: {message}")]
    EntityConflict {
        /// The run.
        run_id: String,
        /// What conflicted.
        message: String,
    },

    /// The request carried an event id the run already holds. `EntityConflictError`, 409
    /// (the reference's `Event "<id>" already exists for run "<run>"`).
    #[error("event {event_id} already exists in run {run_id:?}")]
    DuplicateEventId {
        /// The run.
        run_id: String,
        /// The repeated event id (`evnt_<ULID>`).
        event_id: String,
    },

    /// The run is in a terminal state and the request needs a live one (`run_started`, or a
    /// step or wait event that can no longer matter). `RunExpiredError`, 410.
    #[error("run {run_id:?} expired: {message}")]
    RunExpired {
        /// The run.
        run_id: String,
        /// Why.
        message: String,
    },

    /// `step_started` before the step's `retryAfter`. `TooEarlyError`, 425, with
    /// `retryAfter` in whole seconds (rounded up, at least 1).
    #[error("step {step_id:?} of run {run_id:?} cannot start yet: retry after {retry_after_s} s")]
    TooEarly {
        /// The run.
        run_id: String,
        /// The step.
        step_id: String,
        /// Seconds until `retryAfter`, rounded up.
        retry_after_s: u64,
    },

    /// The `stateUpdatedAt` guard: the run holds an event newer than the state the caller
    /// derived its request from. `PreconditionFailedError`, 412.
    #[error(
        "precondition failed for run {run_id:?}: an event of {newest_event_ms} ms is newer than stateUpdatedAt {state_updated_at_ms} ms"
    )]
    PreconditionFailed {
        /// The run.
        run_id: String,
        /// The caller's `stateUpdatedAt`, ms since the Unix epoch.
        state_updated_at_ms: u64,
        /// The newest event's `createdAt`, ms since the Unix epoch.
        newest_event_ms: u64,
    },

    /// The run (or the request creating it) has a spec version newer than this World's
    /// ([`crate::SPEC_VERSION_MAX_SUPPORTED`]). `RunNotSupportedError`, 400.
    #[error("run {run_id:?} has spec version {found}; this World supports up to {supported}")]
    RunNotSupported {
        /// The run.
        run_id: String,
        /// Its spec version.
        found: u32,
        /// [`crate::SPEC_VERSION_MAX_SUPPORTED`].
        supported: u32,
    },

    /// The run (or the request creating it) is of a legacy spec version (missing or ≤ 1,
    /// before event sourcing), which this World reads but does not write.
    /// `WorkflowWorldError`, 400.
    #[error(
        "run {run_id:?} has legacy spec version {found:?}; runlog writes spec 2 and later only"
    )]
    LegacySpecVersion {
        /// The run.
        run_id: String,
        /// Its spec version, if any.
        found: Option<u32>,
    },

    /// The request is malformed: a missing or mistyped field, a bad id, a bad cursor, a
    /// payload that is not JSON or exceeds a limit. Nothing was written.
    /// `WorkflowWorldError`, 400.
    #[error("invalid request: {field}: {reason}")]
    InvalidRequest {
        /// The offending field (`runId`, `eventData.input`, `pagination.cursor`, ...).
        field: String,
        /// What is wrong, with the limit that applies.
        reason: String,
    },

    /// Attribute keys or values break the SDK's rules (key 1–256 characters, no `$` prefix
    /// without `allowReservedAttributes`, value ≤ 256 bytes, no key twice in one batch, at
    /// most 64 per run). `AttributeValidationError`, 400.
    #[error("invalid attributes: {reason}")]
    AttributeValidation {
        /// Which rule was broken.
        reason: String,
    },

    /// Every retry of a fenced append lost to concurrent writers
    /// ([`crate::WorldConfig::fence_retries_max`]). Nothing was written by this call.
    /// `WorkflowWorldError`, 503 (retryable).
    #[error("run {run_id:?} busy: {attempts} fenced attempts lost to concurrent writers")]
    Busy {
        /// The run (or the hook token claims log).
        run_id: String,
        /// Attempts made.
        attempts: u32,
    },

    /// The group commit that took this request stopped before answering it (its leader
    /// panicked): whether its event was written is unknown; read the run to learn it.
    /// `WorkflowWorldError`, 500, code `ABORTED`.
    #[error(
        "run {run_id:?}: the group commit holding this request was aborted; read the run to learn whether it was written"
    )]
    GroupAborted {
        /// The run.
        run_id: String,
    },

    /// A state asked of a point the run's log does not hold ([`crate::World::run_at`],
    /// [`crate::World::run_diff`]): seq 0, a seq past the log's last, or a time before its
    /// first event. `WorkflowWorldError`, 400.
    #[error("run {run_id:?} holds no state at {at}: its log ends at seq {last}")]
    AtOutOfRange {
        /// The run.
        run_id: String,
        /// The seq or time asked for.
        at: crate::at::At,
        /// The log's last seq.
        last: u64,
    },

    /// A stored event could not be read as a World event (its payload is not JSON): the
    /// run was written by something other than a World. `WorkflowWorldError`, 500, code
    /// `CORRUPT`.
    #[error("run {run_id:?}: event at seq {seq} is not a World event: {reason}")]
    InvalidStoredEvent {
        /// The run.
        run_id: String,
        /// The event's seq.
        seq: u64,
        /// What is wrong.
        reason: String,
    },

    /// A store-wide read whose answer may lie where the store cannot read: past the fault of
    /// a damaged or unreadable run. `hooks.list` without a run id, when a claim names a hook
    /// past its run's readable part; `events.listByCorrelationId` without a run id, when it
    /// finds nothing in what can be read while some run cannot be read to its end, or finds
    /// events in such a run. Rather than a silently incomplete answer, the read fails naming
    /// every such run with its fault (the other store-wide reads list a damaged run with its
    /// [`StorageFault`] instead). `WorkflowWorldError` with the code and status of the
    /// first such run's fault (`CORRUPT` 500, `BUSY` 503, ...).
    #[error("{what}: the answer may lie in runs that cannot be read: {}", faults_text(.runs))]
    Unreadable {
        /// The read (`hooks.list`, `events.listByCorrelationId`).
        what: &'static str,
        /// Each run that could not be read to its end, in run id order, with its fault.
        runs: Vec<StorageFault>,
    },

    /// A store error, unchanged: corruption, an environment error, a busy run lock, a full
    /// disk, bad input the store refused. Its code, class and status are the store error's
    /// own ([`crate::error_table::store_kind`]): 400 for bad input (a payload above the
    /// store's limit), 404 `WorkflowRunNotFoundError` for a missing log, 503 for a busy lock,
    /// 507 for a full disk, 403 for a write on a read-only store
    /// (`runlog::Store::open_read_only`: no retry can succeed), 500 for corruption and I/O.
    #[error("storage: {0}")]
    Storage(#[from] runlog::Error),
}

fn faults_text(runs: &[StorageFault]) -> String {
    let each: Vec<String> = runs
        .iter()
        .map(|f| {
            format!(
                "{} (readable through seq {}: {})",
                f.run_id, f.readable_seq, f.message
            )
        })
        .collect();
    each.join("; ")
}

impl WorldError {
    /// `retryAfter` in seconds, for [`WorldError::TooEarly`].
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            WorldError::TooEarly { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> WorldError {
        WorldError::InvalidRequest {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn conflict(run_id: &str, message: impl Into<String>) -> WorldError {
        WorldError::EntityConflict {
            run_id: run_id.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn expired(run_id: &str, message: impl Into<String>) -> WorldError {
        WorldError::RunExpired {
            run_id: run_id.to_string(),
            message: message.into(),
        }
    }
}
