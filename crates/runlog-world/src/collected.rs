//! The runs gc collected: one World log, [`COLLECTED_RUNS_LOG`], with a fact per workflow run
//! whose archive was written (`gc.rs`), keyed by the run id (so a second gc of the run appends
//! nothing). It is what lets the streams tell a run that never existed (yet) from one that
//! was archived: the SDK writes stream chunks before the run's `run_created` commits (a
//! `ReadableStream` argument of `start()`) and to runs that never exist (`wrun_hc_…`, the
//! health check), so "no such run" cannot refuse a stream; "collected and not live" does
//! ([`crate::StreamError::RunCollected`]), instead of leaving a stream log that no run owns
//! and that `runlog restore` would meet as a conflict.
//!
//! A restored run is live again, and the rule asks for both, so it takes streams as before.
//! The log is read only when a stream log is missing for a workflow run that is not live, a
//! path the SDK's own writers take once per stream of a run not yet created.

use bytes::Bytes;
use runlog::{NewEvent, RunId, RunLog};

/// The id of the log of collected runs (a name no SDK run id can take: those are
/// `wrun_<ULID>`).
pub const COLLECTED_RUNS_LOG: &str = "_world-collected-runs";

/// The event kind of one collected run.
const COLLECTED_KIND: &str = "collected";

/// Events read per call when looking a run up.
const READ_PAGE_LEN: usize = 4096;

pub(crate) fn collected_runs_log() -> RunId {
    RunId::new(COLLECTED_RUNS_LOG).unwrap_or_else(|_| unreachable!())
}

/// Records that `run` was archived (idempotent); the log is created on first use.
pub(crate) fn mark<B: RunLog + ?Sized>(log: &B, run: &RunId) -> runlog::Result<()> {
    let id = collected_runs_log();
    match log.create_run(&id, b"") {
        Ok(()) | Err(runlog::Error::RunExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let fact = NewEvent::new(COLLECTED_KIND, Bytes::new()).key(run.as_str());
    log.append_facts(&id, vec![fact]).map(|_| ())
}

/// Whether gc archived `run` and it is not live now (not restored since).
pub(crate) fn is_collected<B: RunLog + ?Sized>(log: &B, run: &RunId) -> runlog::Result<bool> {
    match log.last_seq(run) {
        Ok(_) => return Ok(false),
        Err(runlog::Error::RunNotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    let id = collected_runs_log();
    let mut after = 0;
    loop {
        let mut found = false;
        let read = log.read_each(&id, after, READ_PAGE_LEN, &mut |e| {
            found |= e.key == Some(run.as_str());
        });
        match read {
            Err(runlog::Error::RunNotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
            Ok(_) if found => return Ok(true),
            Ok((next, true)) => after = next,
            Ok((_, false)) => return Ok(false),
        }
    }
}
