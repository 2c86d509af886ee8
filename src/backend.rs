//! The backend-neutral contract: [`RunLog`], the operations every runlog backend gives (the
//! file [`Store`](crate::Store) today, PostgreSQL next), held to one conformance suite
//! (`crates/runlog-conformance`).
//!
//! Every implementation keeps the rules of `docs/INVARIANTS.md`: seqs are assigned densely per
//! run at commit (rule 6), a decision commits only at the `expected_seq` it was derived from
//! and a rejection writes nothing (rules 1–2), a batch is atomic (rule 3), an acknowledged
//! append is durable (rule 4), and reads check density and fail loudly (rule 5).

use std::time::Duration;

use crate::error::Result;
use crate::event::{EventRef, NewEvent, RunId, Seq};
use crate::types::{Appended, ReadPage, RunInfo, RunPage};
use crate::verify::VerifyReport;

/// A store of per-run, append-only event logs. Implementations are `Send + Sync` and are
/// shared across threads by reference (or cheaply cloned handles).
///
/// Errors are [`crate::Error`] variants with the same meaning in every backend:
/// `InvalidRunId`/`InvalidEvent` (bad input, nothing written), `RunNotFound`, `RunExists`,
/// `Fenced`, `DuplicateDecision`, `Busy`, `Corrupt`, `DiskFull`, `Io`.
pub trait RunLog: Send + Sync {
    /// Creates an empty run with an opaque metadata blob (at most 2048 bytes); durable when
    /// this returns.
    ///
    /// # Errors
    /// `RunExists`; `InvalidEvent` (field `meta`) when `meta` is too long.
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()>;

    /// Appends facts (unfenced): events whose key or caller event id already exists in the run
    /// append nothing and report the original seq; the others commit as one atomic batch at
    /// the next seqs. One [`Appended`] per input, in order.
    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>>;

    /// Appends a decision batch fenced at `expected_seq`: committed atomically at
    /// `expected_seq + 1 ..` iff the run's last seq equals `expected_seq` at commit.
    ///
    /// # Errors
    /// `Fenced { expected, actual }` when the log is elsewhere (nothing written);
    /// `DuplicateDecision` when a key or caller event id already exists.
    fn append_decisions(
        &self,
        run: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>>;

    /// Up to `limit` committed events after seq `after`, in seq order, complete by density.
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage>;

    /// [`RunLog::read`] handing each event to `f` borrowed instead of collecting owned events.
    /// Returns `(next, has_more)`: the last seq handed to `f` (or `after`), and whether more
    /// events were committed past it.
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)>;

    /// The run's last committed seq (0 when empty).
    ///
    /// # Errors
    /// `RunNotFound`; `Corrupt` when the run is damaged: never the seq its readable events
    /// end at (rule 5 of INVARIANTS.md), though reads return every event before the damage.
    fn last_seq(&self, run: &RunId) -> Result<Seq>;

    /// Blocks until the run's last seq exceeds `after` or `timeout` passes; returns the last
    /// seq (at most `after` on timeout).
    ///
    /// # Errors
    /// `RunNotFound` when the run does not exist or is deleted while waiting; `Corrupt` when
    /// it is damaged (as [`RunLog::last_seq`]).
    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq>;

    /// Last seq, committed bytes, creation and update times, segment (or partition) count.
    /// `Corrupt` for a damaged run, as [`RunLog::last_seq`].
    fn run_info(&self, run: &RunId) -> Result<RunInfo>;

    /// The metadata blob given at creation (empty if none).
    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>>;

    /// Runs in id order after `after` (exclusive), at most `limit`; takes no run lock.
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage>;

    /// Deletes a run and all its events.
    fn delete_run(&self, run: &RunId) -> Result<()>;

    /// Deletes a run and all its events only while its last seq is `expected_last_seq`,
    /// checked under the run's write lock, the one every append takes: an append that
    /// commits before the delete makes it [`crate::Error::Fenced`] (nothing deleted), and
    /// none can commit between the check and the delete. What `runlog gc` deletes an
    /// archived log with, so that an event appended after its archive was written is never
    /// lost.
    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()>;

    /// Checks every stored byte of a run (checksums, density, counters); problems are in the
    /// report, not errors.
    fn verify_run(&self, run: &RunId) -> Result<VerifyReport>;

    /// Takes the store's collector lock, at once: one collector (a `runlog gc` pass, a
    /// World's retention thread) of this store at a time, in any process and whatever
    /// archive directory each writes to. Two collectors of one run could otherwise both
    /// archive it, one of the copies without the logs the other had already deleted. Held
    /// until the returned guard drops; the system releases it when the holder dies.
    ///
    /// # Errors
    /// `Busy` when another collector holds it (naming the holder where the backend knows
    /// it); `ReadOnly`; `Io`.
    fn lock_collector(&self) -> Result<CollectorLock>;
}

/// A held collector lock ([`RunLog::lock_collector`]); released on drop.
pub struct CollectorLock {
    _held: Box<dyn Send>,
}

impl CollectorLock {
    /// A lock held by `held` (a lock file's guard, a database session) until it drops.
    pub fn new(held: impl Send + 'static) -> CollectorLock {
        CollectorLock {
            _held: Box::new(held),
        }
    }
}

impl std::fmt::Debug for CollectorLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CollectorLock")
    }
}

/// A shared backend (the World layer and the Node binding hold one behind an `Arc`).
impl<T: RunLog + ?Sized> RunLog for std::sync::Arc<T> {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        (**self).create_run(run, meta)
    }
    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        (**self).append_facts(run, events)
    }
    fn append_decisions(
        &self,
        run: &RunId,
        expected: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        (**self).append_decisions(run, expected, events)
    }
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        (**self).read(run, after, limit)
    }
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        (**self).read_each(run, after, limit, f)
    }
    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        (**self).last_seq(run)
    }
    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        (**self).wait(run, after, timeout)
    }
    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        (**self).run_info(run)
    }
    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        (**self).run_meta(run)
    }
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        (**self).list_runs(after, limit)
    }
    fn delete_run(&self, run: &RunId) -> Result<()> {
        (**self).delete_run(run)
    }
    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()> {
        (**self).delete_run_at(run, expected_last_seq)
    }
    fn verify_run(&self, run: &RunId) -> Result<VerifyReport> {
        (**self).verify_run(run)
    }
    fn lock_collector(&self) -> Result<CollectorLock> {
        (**self).lock_collector()
    }
}
