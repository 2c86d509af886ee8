//! The World layer: the storage half of the Workflow SDK's `World` interface (spec versions
//! 2–7; runs of spec ≥ 6 are slot runs, `docs/WORLD.md` §7) on any [`runlog::RunLog`]
//! backend. Every state change is an event of the run's log; runs,
//! steps, hooks, waits and attributes are a fold over that log, and every rule is checked
//! against the run's state at seq N and appended fenced at N (`docs/WORLD.md`).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod error_table;
pub mod streams;

mod at;
mod attr_log;
mod attrs;
mod batch;
mod cancel;
mod clock;
mod collected;
mod cursor;
mod data;
mod error;
mod fenced;
mod fold;
mod gc;
mod group;
mod ids;
mod incremental;
mod json;
mod logs;
mod model;
mod query;
mod resume;
mod retention;
mod rules;
mod snapshots;
mod tokens;
mod world;

pub use at::{At, Change, DiffEvent, Entity, EntityChange, EntityKind, RunAt, RunDiff};
pub use attrs::{
    ATTRIBUTE_KEY_LEN_MAX, ATTRIBUTE_VALUE_LEN_BYTES_MAX, ATTRIBUTES_PER_RUN_MAX,
    RESERVED_ATTRIBUTE_PREFIX,
};
pub use batch::BATCH_EVENTS_MAX;
pub use cancel::{BULK_CANCEL_RUN_IDS_MAX, CancelOutcome};
pub use clock::Clock;
pub use collected::{COLLECTED_RUNS_LOG, record_restored};
pub use data::{CANCEL_REASON_LEN_MAX, HOOK_TOKEN_LEN_MAX};
pub use error::WorldError;
pub use fold::{HookIdentity, RunState};
pub use gc::{GcParams, GcReport, GcRun, GcStep, Kept};
pub use ids::{
    CORRELATION_ID_LEN_MAX, EVENT_ID_PREFIX, RUN_ID_PREFIX, event_id_for, event_id_string,
    mint_run_id, mint_ulid, parse_event_id, parse_run_id, parse_slot_event_id, slot_event_id,
    uses_slot_ids,
};
pub use json::{RawJson, format_iso_ms, parse_iso_ms};
pub use logs::{ATTRIBUTE_LOG_PREFIX, LogKind, STREAM_OWNER_PREFIX, log_kind};
pub use model::{
    CreateEventParams, Event, EventRequest, EventResult, EventType, EventView, Hook,
    ListRunsParams, PAGE_LIMIT_MAX, Page, Pagination, ResolveData, RunStatus, SPEC_VERSION_CURRENT,
    SPEC_VERSION_EVENT_SOURCING, SPEC_VERSION_MAX_SUPPORTED, SPEC_VERSION_SLOT_IDENTITY, SortOrder,
    Step, StepStatus, StorageFault, Wait, WaitStatus, WorkflowRun,
};
pub use query::{ENTITIES_PAGE_DEFAULT, RUNS_PAGE_DEFAULT};
pub use resume::{RESUME_DIGEST_LEN_MAX, RESUME_ID_LEN_MAX, resume_id_of_stored};
pub use retention::{Retention, RetentionTask};
pub use streams::{StreamError, Streams};
pub use tokens::{HOOK_TOKENS_RUN, RebuildReport, TokenClaim};
pub use world::{
    EVENTS_PAGE_DEFAULT, HOOK_RETENTION_MAX_MS, PAGE_TEXT_BUDGET_BYTES, PRELOAD_EVENTS_MAX, World,
    WorldConfig,
};
