//! The one error table: every error kind of the store ([`runlog::Error`]), the World
//! ([`WorldError`]), streams ([`StreamError`]) and the Node binding, with its stable
//! [`Code`] (what `err.code` says in JavaScript), the HTTP-like status, the Workflow SDK
//! error class (`@workflow/errors`) and whether the SDK runtime retries it.
//!
//! Everything else is derived from here: [`WorldError::status`] and
//! [`WorldError::class_name`], [`StreamError::status`] and [`StreamError::class_name`],
//! the binding's rejections (`crates/runlog-node/src/errors.rs`), the JavaScript constants
//! (`packages/world-runlog/src/error-codes.js`), the TypeScript union (`error-codes.d.ts`)
//! and `docs/ERRORS.md`; the last three are generated from this module by a test of
//! `runlog-node` that fails when they differ (`RUNLOG_WRITE_GENERATED=1` rewrites them).
//!
//! The status is a property of the code, never of the call that failed: a store's
//! `InvalidEvent` is `INVALID_INPUT` 400 whether it comes through the World, the streams or
//! a bare store call. The class is a property of the kind: `NOT_FOUND` is
//! `WorkflowRunNotFoundError` for a run, `HookNotFoundError` for a hook and
//! `WorkflowWorldError` 404 for a step.
//!
//! The statuses are the ones a remote World answers with (`@workflow/world-vercel`'s
//! mapping): bad input 400, not found 404, conflict 409, gone 410, precondition 412, too
//! early 425, a write on a read-only store 403, and 5xx for storage trouble. The runtime
//! retries a `WorkflowWorldError` of status 5xx (its `isRetryableWorldError`), replays on
//! 412 and waits `retryAfter` on 425; [`Code::retryable`] says which.

use crate::{StreamError, WorldError};

/// A stable error code: the `code` of a rejection of the Node binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `INVALID_INPUT`
    InvalidInput,
    /// `NOT_FOUND`
    NotFound,
    /// `EXISTS`
    Exists,
    /// `FENCED`
    Fenced,
    /// `DUPLICATE`
    Duplicate,
    /// `BUSY`
    Busy,
    /// `CORRUPT`
    Corrupt,
    /// `UNSUPPORTED_VERSION`
    UnsupportedVersion,
    /// `NOT_A_STORE`
    NotAStore,
    /// `READ_ONLY`
    ReadOnly,
    /// `DISK_FULL`
    DiskFull,
    /// `POISONED`
    Poisoned,
    /// `IO`
    Io,
    /// `PANICKED`
    Panicked,
    /// `CLOSED`
    Closed,
    /// `OUT_OF_RANGE`
    OutOfRange,
    /// `INTERNAL`
    Internal,
    /// `UNKNOWN`
    Unknown,
    /// `UNSUPPORTED`
    Unsupported,
    /// `CONFLICT`
    Conflict,
    /// `GONE`
    Gone,
    /// `PRECONDITION_FAILED`
    PreconditionFailed,
    /// `TOO_EARLY`
    TooEarly,
    /// `STREAM_CLOSED`
    StreamClosed,
    /// `ABORTED`
    Aborted,
}

impl Code {
    /// Every code, in the order the generated files list them.
    pub const ALL: [Code; 25] = [
        Code::InvalidInput,
        Code::NotFound,
        Code::Exists,
        Code::Fenced,
        Code::Duplicate,
        Code::Busy,
        Code::Corrupt,
        Code::UnsupportedVersion,
        Code::NotAStore,
        Code::ReadOnly,
        Code::DiskFull,
        Code::Poisoned,
        Code::Io,
        Code::Panicked,
        Code::Closed,
        Code::OutOfRange,
        Code::Internal,
        Code::Unknown,
        Code::Unsupported,
        Code::Conflict,
        Code::Gone,
        Code::PreconditionFailed,
        Code::TooEarly,
        Code::StreamClosed,
        Code::Aborted,
    ];

    /// The code as JavaScript sees it (`"INVALID_INPUT"`).
    pub const fn as_str(self) -> &'static str {
        self.row().0
    }

    /// The HTTP-like status a World error of this code carries; `None` for `CLOSED` (the
    /// World itself was closed: no retry in this process can succeed, and it is not the
    /// store's fault either, so the runtime gets a `WorkflowWorldError` without status).
    pub const fn status(self) -> Option<u16> {
        match self.row().1 {
            0 => None,
            s => Some(s),
        }
    }

    /// Whether the Workflow runtime retries a call that failed with this code: a 5xx
    /// status (redelivered), 412 (replayed from a fresh log) or 425 (after `retryAfter`).
    pub const fn retryable(self) -> bool {
        self.row().2
    }

    /// What the code means, with the fields its rejection carries.
    pub const fn meaning(self) -> &'static str {
        self.row().3
    }

    /// The code named `s` (`"CORRUPT"`), if there is one.
    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// (code, status or 0, retryable, meaning).
    const fn row(self) -> (&'static str, u16, bool, &'static str) {
        match self {
            Code::InvalidInput => (
                "INVALID_INPUT",
                400,
                false,
                "an argument or request is malformed or out of bounds (field names it; reason); nothing was written",
            ),
            Code::NotFound => (
                "NOT_FOUND",
                404,
                false,
                "the run does not exist, or the step, hook, wait or event a World call names (runId, stepId, hook, waitId, eventId)",
            ),
            Code::Exists => (
                "EXISTS",
                409,
                false,
                "createRun on a run that exists (runId)",
            ),
            Code::Fenced => (
                "FENCED",
                409,
                false,
                "appendDecisions: the log is not at expectedSeq (runId, expected, actual); nothing was written",
            ),
            Code::Duplicate => (
                "DUPLICATE",
                409,
                false,
                "appendDecisions: a key or event id already stored (runId, key, seq); nothing was written",
            ),
            Code::Busy => (
                "BUSY",
                503,
                true,
                "another process held the run's lock past the timeout (holder, waitedMs), or concurrent writers won every fenced attempt; nothing was written",
            ),
            Code::Corrupt => (
                "CORRUPT",
                500,
                true,
                "stored bytes failed validation (runId, segment, offset, detail), or a log holds an event the World never writes there",
            ),
            Code::UnsupportedVersion => (
                "UNSUPPORTED_VERSION",
                500,
                true,
                "the store was written by another format version (path, found, supported)",
            ),
            Code::NotAStore => (
                "NOT_A_STORE",
                500,
                true,
                "the directory is not a runlog store (path, detail)",
            ),
            Code::ReadOnly => (
                "READ_ONLY",
                403,
                false,
                "a write on a read-only store (openReadOnly, or openOrReadOnly on a store this process cannot write) (op, path); nothing was written",
            ),
            Code::DiskFull => (
                "DISK_FULL",
                507,
                true,
                "the file system is full (op, path); nothing a reader can see was written",
            ),
            Code::Poisoned => (
                "POISONED",
                500,
                true,
                "an earlier fsync of the run failed; it refuses writes until the store is reopened (runId, cause)",
            ),
            Code::Io => (
                "IO",
                500,
                true,
                "the operating system failed a call (op, path, errno), or PostgreSQL did (path `postgres`: server unreachable, connection lost, statement refused)",
            ),
            Code::Panicked => (
                "PANICKED",
                500,
                true,
                "a panic in the store or the binding was caught (detail); the process goes on",
            ),
            Code::Closed => ("CLOSED", 0, false, "the store (or its World) was closed"),
            Code::OutOfRange => (
                "OUT_OF_RANGE",
                500,
                true,
                "a value the store returned exceeds Number.MAX_SAFE_INTEGER (value)",
            ),
            Code::Internal => (
                "INTERNAL",
                500,
                true,
                "a Node-API call, or the serialization of a result, failed",
            ),
            Code::Unknown => (
                "UNKNOWN",
                500,
                true,
                "a store error this binding does not know yet",
            ),
            Code::Unsupported => (
                "UNSUPPORTED",
                501,
                true,
                "the call does not exist on this backend (op): commitStats on a PostgreSQL store",
            ),
            Code::Conflict => (
                "CONFLICT",
                409,
                false,
                "World: the request conflicts with the run (a terminal run, an entity created twice, a repeated event id), or a stream's log belongs to another stream",
            ),
            Code::Gone => (
                "GONE",
                410,
                false,
                "World: the run ended; streams: gc archived the run",
            ),
            Code::PreconditionFailed => (
                "PRECONDITION_FAILED",
                412,
                true,
                "World: an event newer than stateUpdatedAt",
            ),
            Code::TooEarly => (
                "TOO_EARLY",
                425,
                true,
                "World: the step may not start before its retryAfter (retryAfter, in seconds)",
            ),
            Code::StreamClosed => (
                "STREAM_CLOSED",
                409,
                false,
                "World streams: a write to a closed stream (runId, name); nothing was written",
            ),
            Code::Aborted => (
                "ABORTED",
                500,
                true,
                "World: the group commit holding the request stopped before answering it (runId); read the run to learn whether it was written",
            ),
        }
    }
}

/// Where an error kind is raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    /// `runlog::Error`, through any caller (a store call, the World, the streams).
    Store,
    /// `runlog_world::WorldError` (its `Storage` variant is the store's kind).
    World,
    /// `runlog_world::StreamError` (its `Store` variant is the store's kind).
    Streams,
    /// The Node binding's own failures (`crates/runlog-node`).
    Binding,
}

impl Surface {
    /// The surface's name in the generated documents.
    pub const fn as_str(self) -> &'static str {
        match self {
            Surface::Store => "store",
            Surface::World => "world",
            Surface::Streams => "streams",
            Surface::Binding => "binding",
        }
    }
}

/// The code of a kind: fixed, or taken from the fault it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KindCode {
    /// Always this code.
    Is(Code),
    /// The code of the first unreadable run's fault ([`WorldError::Unreadable`]).
    OfFirstFault,
}

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorKind {
    /// Where it is raised.
    pub surface: Surface,
    /// The variant (`InvalidEvent`), or the binding's name for its own failure.
    pub name: &'static str,
    /// Its code.
    pub code: KindCode,
    /// The `name` of the `@workflow/errors` (or `@workflow/world`) class the World throws.
    pub class_name: &'static str,
    /// When it happens.
    pub when: &'static str,
}

const WWE: &str = "WorkflowWorldError";

const fn kind(
    surface: Surface,
    name: &'static str,
    code: Code,
    class_name: &'static str,
    when: &'static str,
) -> ErrorKind {
    ErrorKind {
        surface,
        name,
        code: KindCode::Is(code),
        class_name,
        when,
    }
}

/// Every error kind, by surface.
#[rustfmt::skip]
pub const ERROR_KINDS: &[ErrorKind] = &[
    kind(Surface::Store, "InvalidRunId", Code::InvalidInput, WWE, "a run id the store cannot hold"),
    kind(Surface::Store, "InvalidEvent", Code::InvalidInput, WWE, "an event field out of bounds (a payload above the store's limit)"),
    kind(Surface::Store, "InvalidConfig", Code::InvalidInput, WWE, "unusable store options"),
    kind(Surface::Store, "RunIdCaseConflict", Code::InvalidInput, WWE, "a run id differing only in case from an existing run's, on a file system that does not distinguish case"),
    kind(Surface::Store, "RunNotFound", Code::NotFound, "WorkflowRunNotFoundError", "the run's log does not exist"),
    kind(Surface::Store, "RunExists", Code::Exists, "EntityConflictError", "createRun of a run that exists"),
    kind(Surface::Store, "Fenced", Code::Fenced, WWE, "a fenced append lost to another writer"),
    kind(Surface::Store, "DuplicateDecision", Code::Duplicate, "EntityConflictError", "a decision repeating a stored key or event id"),
    kind(Surface::Store, "Busy", Code::Busy, WWE, "another process held the run's lock past the timeout"),
    kind(Surface::Store, "Corrupt", Code::Corrupt, WWE, "stored bytes failed validation"),
    kind(Surface::Store, "UnsupportedVersion", Code::UnsupportedVersion, WWE, "a store or segment of another format version"),
    kind(Surface::Store, "NotAStore", Code::NotAStore, WWE, "a directory that is not a runlog store"),
    kind(Surface::Store, "DiskFull", Code::DiskFull, WWE, "the file system is full"),
    kind(Surface::Store, "Poisoned", Code::Poisoned, WWE, "an earlier sync of the run failed"),
    kind(Surface::Store, "Panicked", Code::Panicked, WWE, "a panic in the store's group commit"),
    kind(Surface::Store, "ReadOnly", Code::ReadOnly, WWE, "a write on a read-only store"),
    kind(Surface::Store, "Io", Code::Io, WWE, "the operating system or PostgreSQL failed a call"),
    kind(Surface::Store, "Unknown", Code::Unknown, WWE, "a store error this build does not know (runlog::Error is non_exhaustive)"),
    kind(Surface::World, "RunNotFound", Code::NotFound, "WorkflowRunNotFoundError", "the workflow run does not exist"),
    kind(Surface::World, "StepNotFound", Code::NotFound, WWE, "a step event names a step never created"),
    kind(Surface::World, "HookNotFound", Code::NotFound, "HookNotFoundError", "no live hook has the id or token"),
    kind(Surface::World, "WaitNotFound", Code::NotFound, WWE, "wait_completed names a wait never created"),
    kind(Surface::World, "EventNotFound", Code::NotFound, WWE, "events.get of an event id the run does not hold"),
    kind(Surface::World, "EntityConflict", Code::Conflict, "EntityConflictError", "a transition the state does not allow"),
    kind(Surface::World, "DuplicateEventId", Code::Conflict, "EntityConflictError", "an event id the run already holds"),
    kind(Surface::World, "RunExpired", Code::Gone, "RunExpiredError", "the run is terminal and the request needs a live one"),
    kind(Surface::World, "TooEarly", Code::TooEarly, "TooEarlyError", "step_started before the step's retryAfter"),
    kind(Surface::World, "PreconditionFailed", Code::PreconditionFailed, "PreconditionFailedError", "an event newer than the caller's stateUpdatedAt"),
    kind(Surface::World, "RunNotSupported", Code::InvalidInput, "RunNotSupportedError", "a spec version newer than this World's"),
    kind(Surface::World, "LegacySpecVersion", Code::InvalidInput, WWE, "a spec version before event sourcing"),
    kind(Surface::World, "InvalidRequest", Code::InvalidInput, WWE, "a malformed request"),
    kind(Surface::World, "AtOutOfRange", Code::InvalidInput, WWE, "a state asked of a seq or time the run's log does not hold"),
    kind(Surface::World, "AttributeValidation", Code::InvalidInput, "AttributeValidationError", "attributes breaking the SDK's rules"),
    kind(Surface::World, "Busy", Code::Busy, WWE, "every fenced retry lost to concurrent writers"),
    kind(Surface::World, "GroupAborted", Code::Aborted, WWE, "the group commit holding the request stopped (its leader panicked)"),
    kind(Surface::World, "InvalidStoredEvent", Code::Corrupt, WWE, "a stored event that is not a World event"),
    ErrorKind {
        surface: Surface::World,
        name: "Unreadable",
        code: KindCode::OfFirstFault,
        class_name: WWE,
        when: "a store-wide read whose answer may lie in runs that cannot be read",
    },
    kind(Surface::Streams, "InvalidName", Code::InvalidInput, WWE, "an empty or too long stream name"),
    kind(Surface::Streams, "InvalidLimit", Code::InvalidInput, WWE, "a page limit out of range"),
    kind(Surface::Streams, "InvalidCursor", Code::InvalidInput, WWE, "a cursor no page returned"),
    kind(Surface::Streams, "Closed", Code::StreamClosed, WWE, "a write to a closed stream"),
    kind(Surface::Streams, "Contended", Code::Busy, WWE, "other writers won the stream's next index every time"),
    kind(Surface::Streams, "Collision", Code::Conflict, WWE, "the stream's log records another owner"),
    kind(Surface::Streams, "RunCollected", Code::Gone, WWE, "a stream of a run gc archived (and nobody restored)"),
    kind(Surface::Streams, "Malformed", Code::Corrupt, WWE, "a stream log holds an event the streams never write"),
    kind(Surface::Binding, "InvalidInput", Code::InvalidInput, WWE, "an argument the binding cannot read"),
    kind(Surface::Binding, "Closed", Code::Closed, WWE, "a call after Store.close()"),
    kind(Surface::Binding, "Panicked", Code::Panicked, WWE, "a panic caught in the binding"),
    kind(Surface::Binding, "OutOfRange", Code::OutOfRange, WWE, "a result beyond Number.MAX_SAFE_INTEGER"),
    kind(Surface::Binding, "ThreadSpawn", Code::Io, WWE, "no worker thread could be started"),
    kind(Surface::Binding, "Internal", Code::Internal, WWE, "a Node-API call or a result's serialization failed"),
    kind(Surface::Binding, "Unsupported", Code::Unsupported, WWE, "commitStats on a PostgreSQL store"),
];

/// The row of `surface` named `name`; evaluated in a `const` block, a name not in the
/// table fails the build.
pub const fn error_kind(surface: Surface, name: &str) -> &'static ErrorKind {
    let mut i = 0;
    while i < ERROR_KINDS.len() {
        let k = &ERROR_KINDS[i];
        if k.surface as u8 == surface as u8 && str_eq(k.name, name) {
            return k;
        }
        i += 1;
    }
    panic!("no such error kind in ERROR_KINDS");
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

macro_rules! row {
    ($surface:ident, $name:literal) => {
        const { error_kind(Surface::$surface, $name) }
    };
}

/// The row of a store error.
pub fn store_kind(e: &runlog::Error) -> &'static ErrorKind {
    use runlog::Error as E;
    match e {
        E::InvalidRunId { .. } => row!(Store, "InvalidRunId"),
        E::InvalidEvent { .. } => row!(Store, "InvalidEvent"),
        E::InvalidConfig(_) => row!(Store, "InvalidConfig"),
        E::RunIdCaseConflict { .. } => row!(Store, "RunIdCaseConflict"),
        E::RunNotFound { .. } => row!(Store, "RunNotFound"),
        E::RunExists { .. } => row!(Store, "RunExists"),
        E::Fenced { .. } => row!(Store, "Fenced"),
        E::DuplicateDecision { .. } => row!(Store, "DuplicateDecision"),
        E::Busy { .. } => row!(Store, "Busy"),
        E::Corrupt { .. } => row!(Store, "Corrupt"),
        E::UnsupportedVersion { .. } => row!(Store, "UnsupportedVersion"),
        E::NotAStore { .. } => row!(Store, "NotAStore"),
        E::DiskFull { .. } => row!(Store, "DiskFull"),
        E::Poisoned { .. } => row!(Store, "Poisoned"),
        E::Panicked { .. } => row!(Store, "Panicked"),
        E::ReadOnly { .. } => row!(Store, "ReadOnly"),
        E::Io { .. } => row!(Store, "Io"),
        // `runlog::Error` is non_exhaustive: a variant added later still has a row.
        _ => row!(Store, "Unknown"),
    }
}

/// The code of a store error.
pub fn store_code(e: &runlog::Error) -> Code {
    match store_kind(e).code {
        KindCode::Is(c) => c,
        KindCode::OfFirstFault => Code::Unknown,
    }
}

/// The status of `code` for an error that has one (every kind but the binding's `Closed`).
fn status_of(code: Code) -> u16 {
    code.status().unwrap_or(500)
}

impl WorldError {
    /// The row of this error ([`WorldError::Storage`]: the store error's row).
    pub fn kind(&self) -> &'static ErrorKind {
        match self {
            WorldError::RunNotFound { .. } => row!(World, "RunNotFound"),
            WorldError::StepNotFound { .. } => row!(World, "StepNotFound"),
            WorldError::HookNotFound { .. } => row!(World, "HookNotFound"),
            WorldError::WaitNotFound { .. } => row!(World, "WaitNotFound"),
            WorldError::EventNotFound { .. } => row!(World, "EventNotFound"),
            WorldError::EntityConflict { .. } => row!(World, "EntityConflict"),
            WorldError::DuplicateEventId { .. } => row!(World, "DuplicateEventId"),
            WorldError::RunExpired { .. } => row!(World, "RunExpired"),
            WorldError::TooEarly { .. } => row!(World, "TooEarly"),
            WorldError::PreconditionFailed { .. } => row!(World, "PreconditionFailed"),
            WorldError::RunNotSupported { .. } => row!(World, "RunNotSupported"),
            WorldError::LegacySpecVersion { .. } => row!(World, "LegacySpecVersion"),
            WorldError::InvalidRequest { .. } => row!(World, "InvalidRequest"),
            WorldError::AttributeValidation { .. } => row!(World, "AttributeValidation"),
            WorldError::AtOutOfRange { .. } => row!(World, "AtOutOfRange"),
            WorldError::Busy { .. } => row!(World, "Busy"),
            WorldError::GroupAborted { .. } => row!(World, "GroupAborted"),
            WorldError::InvalidStoredEvent { .. } => row!(World, "InvalidStoredEvent"),
            WorldError::Unreadable { .. } => row!(World, "Unreadable"),
            WorldError::Storage(e) => store_kind(e),
        }
    }

    /// The stable code ([`WorldError::Unreadable`]: its first run's fault's).
    pub fn code(&self) -> Code {
        match (self.kind().code, self) {
            (KindCode::Is(c), _) => c,
            (KindCode::OfFirstFault, WorldError::Unreadable { runs, .. }) => runs
                .first()
                .and_then(|f| Code::parse(&f.code))
                .unwrap_or(Code::Unknown),
            (KindCode::OfFirstFault, _) => Code::Unknown,
        }
    }

    /// The `name` of the SDK error class (`@workflow/errors`) this error stands for.
    pub fn class_name(&self) -> &'static str {
        self.kind().class_name
    }

    /// The HTTP-like status of its code: 400, 403, 404, 409, 410, 412, 425, or 5xx for
    /// storage trouble (the table of [`Code`]).
    pub fn status(&self) -> u16 {
        status_of(self.code())
    }
}

impl StreamError {
    /// The row of this error ([`StreamError::Store`]: the store error's row).
    pub fn kind(&self) -> &'static ErrorKind {
        match self {
            StreamError::InvalidName { .. } => row!(Streams, "InvalidName"),
            StreamError::InvalidLimit { .. } => row!(Streams, "InvalidLimit"),
            StreamError::InvalidCursor { .. } => row!(Streams, "InvalidCursor"),
            StreamError::Closed { .. } => row!(Streams, "Closed"),
            StreamError::Contended { .. } => row!(Streams, "Contended"),
            StreamError::Collision { .. } => row!(Streams, "Collision"),
            StreamError::RunCollected { .. } => row!(Streams, "RunCollected"),
            StreamError::Malformed { .. } => row!(Streams, "Malformed"),
            StreamError::Store(e) => store_kind(e),
        }
    }

    /// The stable code.
    pub fn code(&self) -> Code {
        match self.kind().code {
            KindCode::Is(c) => c,
            KindCode::OfFirstFault => Code::Unknown,
        }
    }

    /// The `name` of the SDK error class the World throws for it.
    pub fn class_name(&self) -> &'static str {
        self.kind().class_name
    }

    /// The HTTP-like status of its code.
    pub fn status(&self) -> u16 {
        status_of(self.code())
    }
}
