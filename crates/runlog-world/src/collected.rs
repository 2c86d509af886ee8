//! The runs gc collected and the runs restored since: one World log, [`COLLECTED_RUNS_LOG`],
//! of facts `collected` (appended by gc once a run's archive is durable, before any of its
//! logs is deleted, `gc.rs`) and `restored` (appended by `runlog restore` once every log of
//! the archive is back, before the archive is removed), each naming its run in the
//! correlation id. A run's latest record says whether it is collected now.
//!
//! It is what lets the streams and the attribute log tell a run that never existed (yet)
//! from one whose logs are in an archive: the SDK writes stream chunks before the run's
//! `run_created` commits (a `ReadableStream` argument of `start()`) and to runs that never
//! exist (`wrun_hc_…`, the health check), so "no such run" cannot refuse a stream; "collected"
//! does ([`crate::StreamError::RunCollected`], `RunExpired` for attributes), from the moment
//! gc recorded it, so that no log of the run is started again at seq 1 while gc deletes the
//! others, after a gc killed in between, or after it: such a log could neither be merged into
//! the archive nor restored. Only the *creation* of a log is refused; a log that still exists
//! (gc has not reached it, or its delete was fenced) takes writes, and the next gc archives
//! what it holds (a live log that extends its archived copy).
//!
//! A restored run takes logs again; gc collects it only once its restore is older than the
//! cut (`gc.rs`), so a run put back is not taken away at the next pass.
//!
//! Each handle reads the log incrementally ([`CollectedRuns`]): a lookup costs a read of the
//! last event it folded when nothing was appended since. A log that cannot be read refuses
//! nothing (the streams and attributes of a run not yet created must not fail store-wide on
//! it; `runlog verify` reports it), so a log created meanwhile is at worst one the next gc
//! sweeps.

use std::collections::HashMap;

use bytes::Bytes;
use parking_lot::Mutex;
use runlog::{EventRef, NewEvent, RunId, RunLog};

use crate::incremental::{Folded, LogFold};

/// The id of the log of collected runs (a name no SDK run id can take: those are
/// `wrun_<ULID>`).
pub const COLLECTED_RUNS_LOG: &str = "_world-collected-runs";

/// The event kind recording that a run was archived.
const COLLECTED_KIND: &str = "collected";

/// The event kind recording that an archived run was put back.
const RESTORED_KIND: &str = "restored";

/// Events read per call.
const READ_PAGE_LEN: usize = 4096;

pub(crate) fn collected_runs_log() -> RunId {
    RunId::new(COLLECTED_RUNS_LOG).unwrap_or_else(|_| unreachable!())
}

/// Records that `run` was archived (durably, before this returns).
pub(crate) fn mark_collected<B: RunLog + ?Sized>(log: &B, run: &RunId) -> runlog::Result<()> {
    append(log, run, COLLECTED_KIND)
}

/// Records that archived run `run` was put back into `log` (`runlog restore`, after every log
/// of its archive is back and before the archive is removed): its logs take writes again,
/// and gc collects it only once this record is older than the cut.
///
/// # Errors
/// The store's.
pub fn record_restored<B: RunLog + ?Sized>(log: &B, run: &RunId) -> runlog::Result<()> {
    append(log, run, RESTORED_KIND)
}

fn append<B: RunLog + ?Sized>(log: &B, run: &RunId, kind: &str) -> runlog::Result<()> {
    let id = collected_runs_log();
    crate::logs::ensure_log(log, &id, b"")?;
    let fact = NewEvent::new(kind, Bytes::new()).correlation_id(run.as_str());
    log.append_facts(&id, vec![fact]).map(|_| ())
}

/// A run's latest record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Collected (else restored).
    pub collected: bool,
    /// When it was recorded, ms since the Unix epoch.
    pub at_ms: u64,
}

/// Each run's latest record in [`COLLECTED_RUNS_LOG`].
#[derive(Debug, Default)]
struct Latest(HashMap<String, Record>);

impl LogFold for Latest {
    fn apply(&mut self, e: &EventRef<'_>) {
        // The run in the correlation id (an earlier build of this module used the key).
        if let Some(run) = e.correlation_id.or(e.key) {
            let collected = e.kind != RESTORED_KIND;
            let at_ms = e.created_at_ms;
            self.0.insert(run.to_owned(), Record { collected, at_ms });
        }
    }
}

/// [`COLLECTED_RUNS_LOG`] as far as this handle has read it: each lookup first reads what
/// was appended since (by any process), so it is as current as a read of the whole log; a
/// log deleted and made again since is read afresh ([`Folded::advance`]).
#[derive(Debug, Default)]
pub(crate) struct CollectedRuns {
    seen: Mutex<Folded<Latest>>,
}

impl CollectedRuns {
    /// `run`'s latest record; `None` when there is none, or when the log cannot be read
    /// (the module's rule).
    pub(crate) fn latest<B: RunLog + ?Sized>(&self, log: &B, run: &RunId) -> Option<Record> {
        let mut seen = self.seen.lock();
        match seen.advance(log, &collected_runs_log(), READ_PAGE_LEN) {
            Ok(()) => seen.0.get(run.as_str()).copied(),
            Err(_) => None,
        }
    }

    /// Whether `run` is collected now: its latest record says so.
    pub(crate) fn is_collected<B: RunLog + ?Sized>(&self, log: &B, run: &RunId) -> bool {
        self.latest(log, run).is_some_and(|r| r.collected)
    }
}
