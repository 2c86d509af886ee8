//! What a log of a World's store is, by its id alone: a workflow run's event log, or one of
//! the World's own logs (streams, the 4.x stream owner index, the hook token claims, a run's
//! attribute log). The one
//! place that rule lives: the CLI's store-wide views (`runs`, `audit`, `export`) ask it.
//!
//! | id                          | kind                                   |
//! |-----------------------------|----------------------------------------|
//! | `stream-owner-…`            | [`LogKind::StreamOwner`] (`packages/world-runlog/src/streams-v4.js`) |
//! | `stream-<R>-i`              | [`LogKind::StreamIndex`] ([`crate::streams`]) |
//! | `stream-<R>-n…`, `-h…`      | [`LogKind::StreamChunks`]              |
//! | [`HOOK_TOKENS_RUN`]         | [`LogKind::HookTokens`]                |
//! | [`COLLECTED_RUNS_LOG`]      | [`LogKind::CollectedRuns`] (`collected.rs`) |
//! | `attrs-wrun_<ULID>`         | [`LogKind::Attributes`] ([`crate::World::set_run_attributes`]) |
//! | anything else               | [`LogKind::Run`]                       |
//!
//! `R` starts with a digit or `h` (`streams/id.rs`), never `o`, so an owner index is never
//! mistaken for a chunk log. An attribute log is `attrs-` and a whole `wrun_<ULID>`, so a plain
//! store's run that merely starts with `attrs-` stays a run. Every other id is a run: the SDK's `wrun_…`, and the runs of a
//! plain runlog store, which a storage view must not hide.

use crate::collected::COLLECTED_RUNS_LOG;
use crate::ids::parse_run_id;
use crate::streams::LOG_ID_PREFIX;
use crate::tokens::HOOK_TOKENS_RUN;

/// The prefix of the 4.x stream owner index logs (one per stream name).
pub const STREAM_OWNER_PREFIX: &str = "stream-owner-";

/// The prefix of a run's attribute log (`attrs-<runId>`, `runs.experimentalSetAttributes`).
pub const ATTRIBUTE_LOG_PREFIX: &str = "attrs-";

/// What a log holds, by its id ([`log_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogKind {
    /// A run's event log: a workflow run, or a run of a plain runlog store.
    Run,
    /// A stream's chunks (`stream-<R>-n…` or `stream-<R>-h…`).
    StreamChunks,
    /// A workflow run's stream index (`stream-<R>-i`).
    StreamIndex,
    /// The 4.x stream owner index of one stream name (`stream-owner-…`).
    StreamOwner,
    /// The hook token claims ([`HOOK_TOKENS_RUN`]).
    HookTokens,
    /// The runs gc archived ([`COLLECTED_RUNS_LOG`]).
    CollectedRuns,
    /// A workflow run's attribute log (`attrs-wrun_<ULID>`): the changes of
    /// `runs.experimentalSetAttributes`, kept out of the run's own log.
    Attributes,
}

impl LogKind {
    /// Whether this is one of the World's own logs rather than a run.
    pub fn is_internal(self) -> bool {
        self != LogKind::Run
    }

    /// A short lowercase name: `run`, `stream`, `stream-index`, `stream-owner`,
    /// `token-claims`, `collected-runs`, `attributes`.
    pub fn name(self) -> &'static str {
        match self {
            LogKind::Run => "run",
            LogKind::StreamChunks => "stream",
            LogKind::StreamIndex => "stream-index",
            LogKind::StreamOwner => "stream-owner",
            LogKind::HookTokens => "token-claims",
            LogKind::CollectedRuns => "collected-runs",
            LogKind::Attributes => "attributes",
        }
    }
}

/// Creates the log `id` with `meta` unless it exists (then it is used as it is): the World's
/// own logs and a run's log are made on first use.
pub(crate) fn ensure_log<B: runlog::RunLog + ?Sized>(
    backend: &B,
    id: &runlog::RunId,
    meta: &[u8],
) -> runlog::Result<()> {
    match backend.create_run(id, meta) {
        Ok(()) | Err(runlog::Error::RunExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The kind of the log with id `id` (the table of this module).
pub fn log_kind(id: &str) -> LogKind {
    if id == HOOK_TOKENS_RUN {
        return LogKind::HookTokens;
    }
    if id == COLLECTED_RUNS_LOG {
        return LogKind::CollectedRuns;
    }
    if id.starts_with(STREAM_OWNER_PREFIX) {
        return LogKind::StreamOwner;
    }
    if id
        .strip_prefix(ATTRIBUTE_LOG_PREFIX)
        .is_some_and(|run| parse_run_id(run).is_ok())
    {
        return LogKind::Attributes;
    }
    if id.starts_with(LOG_ID_PREFIX) {
        return match id.ends_with("-i") {
            true => LogKind::StreamIndex,
            false => LogKind::StreamChunks,
        };
    }
    LogKind::Run
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::RunId;

    #[test]
    fn every_log_a_world_writes_has_its_kind() {
        let run = RunId::new("wrun_01M8RD6VDN78DRZESK20KEMJWK").expect("id");
        let chunks = crate::streams::id::chunk_log(&run, "out-i");
        assert_eq!(log_kind(chunks.as_str()), LogKind::StreamChunks);
        let long = "x".repeat(200);
        let hashed = crate::streams::id::chunk_log(&run, &long);
        assert_eq!(log_kind(hashed.as_str()), LogKind::StreamChunks);
        let index = crate::streams::id::index_log(&run);
        assert_eq!(log_kind(index.as_str()), LogKind::StreamIndex);
        assert_eq!(log_kind("stream-owner-nout"), LogKind::StreamOwner);
        assert_eq!(log_kind(HOOK_TOKENS_RUN), LogKind::HookTokens);
        assert_eq!(log_kind(COLLECTED_RUNS_LOG), LogKind::CollectedRuns);
        assert!(LogKind::CollectedRuns.is_internal());
        assert_eq!(log_kind(run.as_str()), LogKind::Run);
        assert_eq!(log_kind("r1"), LogKind::Run);
        let attrs = crate::attr_log::attr_log_id(&run);
        assert_eq!(log_kind(attrs.as_str()), LogKind::Attributes);
        assert!(LogKind::Attributes.is_internal());
        assert_eq!(LogKind::Attributes.name(), "attributes");
        // Only a whole run id after the prefix: a plain store's run keeps its kind.
        assert_eq!(log_kind("attrs-r1"), LogKind::Run);
        assert!(!LogKind::Run.is_internal());
        assert!(LogKind::StreamOwner.is_internal());
    }
}
