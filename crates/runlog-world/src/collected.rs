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
//! The log is asked only when a stream log is missing for a workflow run that is not live (a
//! path the SDK's writers take once per stream of a run not yet created, and a reader polling
//! such a stream at each poll), and each handle reads only what was appended since it last
//! looked ([`CollectedRuns`]).

use std::collections::HashSet;

use bytes::Bytes;
use parking_lot::Mutex;
use runlog::{NewEvent, RunId, RunLog, Seq};

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

/// The runs [`COLLECTED_RUNS_LOG`] names, as far as this handle has read it: each lookup
/// first reads what was appended since (by any process), so it is as current as a read of
/// the whole log, at the cost of one `last_seq` when nothing was.
#[derive(Debug, Default)]
pub(crate) struct CollectedRuns {
    /// The seq read up to and the run ids up to it.
    seen: Mutex<(Seq, HashSet<String>)>,
}

impl CollectedRuns {
    /// Whether gc archived `run` and it is not live now (not restored since).
    pub(crate) fn holds_dead<B: RunLog + ?Sized>(
        &self,
        log: &B,
        run: &RunId,
    ) -> runlog::Result<bool> {
        match log.last_seq(run) {
            Ok(_) => return Ok(false),
            Err(runlog::Error::RunNotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let id = collected_runs_log();
        let mut seen = self.seen.lock();
        let last = match log.last_seq(&id) {
            Ok(last) => last,
            Err(runlog::Error::RunNotFound { .. }) => {
                *seen = Default::default();
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        if last < seen.0 {
            // Deleted and made again since (by hand): read it afresh.
            *seen = Default::default();
        }
        while seen.0 < last {
            let mut keys = Vec::new();
            let (next, _) = log.read_each(&id, seen.0, READ_PAGE_LEN, &mut |e| {
                keys.extend(e.key.map(str::to_owned));
            })?;
            if next == seen.0 {
                break;
            }
            seen.1.extend(keys);
            seen.0 = next;
        }
        Ok(seen.1.contains(run.as_str()))
    }
}
