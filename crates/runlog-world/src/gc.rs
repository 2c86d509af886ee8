//! Retention: moving finished workflow runs, with every log of theirs, into archives
//! (`runlog::archive`, `format/SPEC.md` §11) and out of the live store (`docs/CLI.md`,
//! `runlog gc`).
//!
//! A run is collected when the World's fold says it is over and nothing can still write to
//! it: its status is terminal (`run_completed`, `run_failed`, `run_cancelled`: the fold's
//! one rule, [`crate::RunStatus::is_terminal`]), its terminal event is older than the cut,
//! no hook of it is available (live, or retained past its end by `tokenRetentionUntil`,
//! judged by [`crate::WorldConfig::clock`]), no wait of it is waiting and no step of it is
//! running. With those, every request the World's rules could take on the run is refused,
//! so its logs no longer change through a World.
//!
//! A run's logs are its own log, its attribute log (`attrs-<runId>`) and its stream logs
//! (`stream-<R>-…`, each checked to name the run as its owner in its metadata, so nothing of
//! another run is taken). The order makes a crash at any point leave each run live or
//! archived, never neither: the archive is written whole and read back
//! ([`runlog::archive::write_archive`]) before the first log is deleted; the auxiliary logs
//! are deleted before the run's own log, whose presence makes the next gc finish the work.
//! That next gc merges the archive it finds with what is still live (a log in both: the
//! longer, when one is a prefix of the other; otherwise the run is refused), rewrites the
//! archive and deletes the rest.
//!
//! Stream logs of a run no longer live: the SDK may write a stream of a run while gc collects
//! it (a writer that found the run live before gc deleted its logs), and a writer to a
//! collected run is refused (`collected.rs`: each archived run is recorded before any log of
//! it is deleted). A stream log that slipped in between, or one an earlier crash left, has
//! an owner that is not live: when that owner's archive is in the archive directory, gc merges
//! the log into it (the rules above) and deletes it ([`GcReport::swept`]); with no archive
//! there, it is left alone and reported ([`Kept::RunNotLive`]).
//!
//! Hook token claims: a collected run's claims are dead by the claims' own rule (their run
//! is gone, `tokens.rs`), so they never block a token; gc also appends their releases (a
//! hint that keeps the claims log small). A restored run is terminal with no available
//! hook, so its claims stay dead: nothing is resurrected.

use std::path::PathBuf;

use runlog::archive::{self, Archive, ArchivedLog};
use runlog::io::Fs;
use runlog::{RunId, RunLog};

use crate::attr_log::attr_log_id;
use crate::error::WorldError;
use crate::logs::{LogKind, log_kind};
use crate::model::{RunStatus, WaitStatus};
use crate::streams::id as stream_id;
use crate::world::World;

/// Run ids listed per call while scanning the store.
const LIST_PAGE_LEN: usize = 512;

/// What [`World::collect_finished`] does.
#[derive(Clone, Debug)]
pub struct GcParams {
    /// Runs whose terminal event is older than this (ms since the Unix epoch) are collected.
    pub finished_before_ms: u64,
    /// Where archives are written (`<run id>.rla`, created if missing).
    pub archive_dir: PathBuf,
    /// Decide and report only: nothing is written or deleted.
    pub dry_run: bool,
}

/// One run that was (or, with `dry_run`, would be) collected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GcRun {
    /// The workflow run.
    pub run_id: String,
    /// Every log archived with it (its own first), by id.
    pub logs: Vec<String>,
    /// Events in those logs.
    pub events: u64,
    /// The archive file.
    pub archive: PathBuf,
    /// The archive's length in bytes (0 for a dry run).
    pub archive_bytes: u64,
    /// Temporary files of an interrupted earlier archive write of this run
    /// (`.tmp-<run>-<ULID>` in the archive directory) that this gc removed
    /// ([`runlog::archive::remove_temp_files`]; none for a dry run).
    pub removed_temp_files: Vec<PathBuf>,
    /// The run's own log was not live: only its stream or attribute logs were left in the
    /// store, now merged into its archive ([`GcReport::swept`]).
    pub swept: bool,
}

/// A step of [`World::collect_finished`], reported as it is done (progress lines; the
/// CLI's kill -9 tests stop the process at each one).
#[derive(Clone, Copy, Debug)]
pub enum GcStep<'a> {
    /// The run's archive is written, synced, renamed and read back.
    Archived(&'a RunId),
    /// Log `.1` of run `.0` was deleted from the store.
    Deleted(&'a RunId, &'a RunId),
    /// The run is collected (or, with `dry_run`, would be).
    Collected(&'a GcRun),
}

/// Why a run was kept live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Not in a terminal state.
    NotFinished,
    /// Its terminal event is not older than the cut.
    FinishedAfterCut,
    /// A hook of it is available (live, or retained by `tokenRetentionUntil`).
    LiveHook,
    /// A wait of it is waiting.
    PendingWait,
    /// A step of it is running (its completion may still be appended).
    RunningStep,
    /// Stream logs of it are live but the run is not, and the archive directory holds no
    /// archive of it (a stream written before its run was created, or one of a run
    /// archived elsewhere): left alone.
    RunNotLive,
    /// It was restored (`runlog restore`) after the cut: a run put back stays until its
    /// restore is older than the cut.
    RestoredAfterCut,
}

impl Kept {
    /// A short name: `not-finished`, `finished-after-cut`, `live-hook`, `pending-wait`,
    /// `running-step`, `run-not-live`, `restored-after-cut`.
    pub fn name(self) -> &'static str {
        match self {
            Kept::NotFinished => "not-finished",
            Kept::FinishedAfterCut => "finished-after-cut",
            Kept::LiveHook => "live-hook",
            Kept::PendingWait => "pending-wait",
            Kept::RunningStep => "running-step",
            Kept::RunNotLive => "run-not-live",
            Kept::RestoredAfterCut => "restored-after-cut",
        }
    }
}

/// What [`World::collect_finished`] did.
#[derive(Debug, Default)]
pub struct GcReport {
    /// Workflow runs looked at: those whose own log is live, and those with only stream or
    /// attribute logs left in the store.
    pub scanned: u64,
    /// Runs collected (or that would be, with `dry_run`), in id order.
    pub collected: Vec<GcRun>,
    /// Runs already archived (not live) whose stream logs still in the store were merged
    /// into their archive and deleted (or would be, with `dry_run`), in id order.
    pub swept: Vec<GcRun>,
    /// Runs kept live, with why.
    pub kept: Vec<(String, Kept)>,
    /// Runs that could not be judged or collected, with the error; each is still live (and
    /// possibly archived too, which the next gc resolves).
    pub failed: Vec<(String, WorldError)>,
}

impl GcReport {
    /// Files the outcome of collecting `run`: collected, swept (its own log was not live) or
    /// failed; a run with nothing live left is nothing.
    fn add(
        &mut self,
        run: &RunId,
        done: Result<Option<GcRun>, WorldError>,
        progress: &mut dyn FnMut(GcStep<'_>),
    ) {
        match done {
            Ok(Some(done)) => {
                progress(GcStep::Collected(&done));
                match done.swept {
                    true => self.swept.push(done),
                    false => self.collected.push(done),
                }
            }
            Ok(None) => {}
            Err(e) => self.failed.push((run.to_string(), e)),
        }
    }
}

impl<B: RunLog> World<B> {
    /// Collects every finished workflow run whose terminal event is older than
    /// `params.finished_before_ms` (the rules of this module), calling `progress` after each
    /// step ([`GcStep`]). Plain runs (ids other than `wrun_<ULID>`) and the World's own logs
    /// are never collected.
    ///
    /// # Errors
    /// Listing the store's runs failed; a run that fails alone is in
    /// [`GcReport::failed`] and the others go on.
    pub fn collect_finished(
        &self,
        fs: &dyn Fs,
        params: &GcParams,
        progress: &mut dyn FnMut(GcStep<'_>),
    ) -> Result<GcReport, WorldError> {
        // One collector of the store ([`RunLog::lock_collector`], whatever its archive
        // directory) and one user of the archive directory (a `runlog restore` from it,
        // `runlog::archive::lock_archive_dir`) at a time: held for the whole pass, `Busy` at
        // once when another holds either.
        let _locks = match params.dry_run {
            true => None,
            false => Some((
                self.backend.lock_collector()?,
                runlog::archive::lock_archive_dir(fs, &params.archive_dir)?,
            )),
        };
        let mut report = GcReport::default();
        let (runs, not_live) = self.workflow_runs()?;
        for run in runs {
            report.scanned += 1;
            match self.gc_verdict(&run, params.finished_before_ms) {
                Ok(Some(kept)) => report.kept.push((run.to_string(), kept)),
                Ok(None) => {
                    let done = self.collect_run(fs, &run, params, progress);
                    report.add(&run, done, progress);
                }
                Err(WorldError::RunNotFound { .. }) => {}
                Err(e) => report.failed.push((run.to_string(), e)),
            }
        }
        for run in not_live {
            report.scanned += 1;
            if !archive::archive_path(&params.archive_dir, &run).is_file() {
                report.kept.push((run.to_string(), Kept::RunNotLive));
                continue;
            }
            let done = self.collect_run(fs, &run, params, progress);
            report.add(&run, done, progress);
        }
        Ok(report)
    }

    /// Every `wrun_<ULID>` log of the store, and every workflow run not live whose stream
    /// logs are (named so by their ids; their metadata is checked before one is taken), each
    /// in id order.
    fn workflow_runs(&self) -> Result<(Vec<RunId>, Vec<RunId>), WorldError> {
        let (mut runs, mut owners) = (Vec::new(), Vec::new());
        let mut after: Option<RunId> = None;
        loop {
            let page = self.backend.list_runs(after.as_ref(), LIST_PAGE_LEN)?;
            let ids = page.runs.iter().map(|i| &i.run);
            for id in ids.chain(page.damaged.iter().map(|d| &d.run)) {
                match is_workflow_run(id) {
                    true => runs.push(id.clone()),
                    false => owners.extend(auxiliary_owner(id)),
                }
            }
            if !page.has_more {
                break;
            }
            after = page.next.or(after);
        }
        runs.sort();
        owners.retain(|o| is_workflow_run(o) && runs.binary_search(o).is_err());
        owners.sort();
        owners.dedup();
        Ok((runs, owners))
    }

    /// `None` when `run` may be collected at a cut of `cut_ms`, else why it is kept.
    fn gc_verdict(&self, run: &RunId, cut_ms: u64) -> Result<Option<Kept>, WorldError> {
        let state = self.run_state(run.as_str())?;
        let Some(wr) = state.run().filter(|r| r.status.is_terminal()) else {
            return Ok(Some(Kept::NotFinished));
        };
        if wr.completed_at_ms.is_none_or(|t| t >= cut_ms) {
            return Ok(Some(Kept::FinishedAfterCut));
        }
        if state.available_hooks(self.now_ms()).next().is_some() {
            return Ok(Some(Kept::LiveHook));
        }
        if state.waits().any(|(_, w)| w.status == WaitStatus::Waiting) {
            return Ok(Some(Kept::PendingWait));
        }
        if state.steps().any(|(_, s)| s.status == RunStatus::Running) {
            return Ok(Some(Kept::RunningStep));
        }
        let restored = self.collected.latest(&self.backend, run);
        if restored.is_some_and(|r| !r.collected && r.at_ms >= cut_ms) {
            return Ok(Some(Kept::RestoredAfterCut));
        }
        Ok(None)
    }

    /// Archives `run` with its auxiliary logs, then deletes them, the run's own log last;
    /// `None` when none of its logs is live (nothing to do).
    fn collect_run(
        &self,
        fs: &dyn Fs,
        run: &RunId,
        params: &GcParams,
        progress: &mut dyn FnMut(GcStep<'_>),
    ) -> Result<Option<GcRun>, WorldError> {
        let earlier = match archive::read_archive(fs, &params.archive_dir, run) {
            Ok(a) => Some(a),
            Err(runlog::Error::RunNotFound { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        // The run's own log; absent for a run already archived whose stream logs are swept.
        let mut logs = match archive::gather_log(&self.backend, run) {
            Ok(own) => vec![own],
            Err(runlog::Error::RunNotFound { .. }) if earlier.is_some() => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let own_live = !logs.is_empty();
        for id in self.auxiliary_logs(run)? {
            match archive::gather_log(&self.backend, &id) {
                Ok(log) => logs.push(log),
                Err(runlog::Error::RunNotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Each live log with the length it was gathered at: it is deleted only at that length.
        let live: Vec<(RunId, u64)> = logs
            .iter()
            .map(|l| (l.run.clone(), l.events.len() as u64))
            .collect();
        if live.is_empty() {
            return Ok(None);
        }
        let logs = merge(earlier.map(|a| a.logs).unwrap_or_default(), logs, run)?;
        let bundle = Archive {
            archived_at_ms: self.now_ms(),
            salt: rand_salt(),
            logs,
        };
        let mut done = GcRun {
            run_id: run.to_string(),
            logs: bundle.logs.iter().map(|l| l.run.to_string()).collect(),
            events: bundle.event_count(),
            archive: archive::archive_path(&params.archive_dir, run),
            archive_bytes: 0,
            removed_temp_files: Vec::new(),
            swept: !own_live,
        };
        if params.dry_run {
            return Ok(Some(done));
        }
        done.removed_temp_files = archive::remove_temp_files(fs, &params.archive_dir, run)?;
        let (_, len) = archive::write_archive(fs, &params.archive_dir, run, &bundle)?;
        done.archive_bytes = len;
        progress(GcStep::Archived(run));
        // Before any log is deleted: from here a stream write to the run, once it is not
        // live, is refused instead of starting a log no run owns.
        crate::collected::mark_collected(&self.backend, run)?;
        // The run's own log is first in `live`: delete it last.
        for (id, held) in live.iter().rev() {
            self.delete_archived(id, *held)?;
            progress(GcStep::Deleted(run, id));
        }
        self.forget(run);
        self.release_claims_of(run);
        Ok(Some(done))
    }

    /// Deletes workflow run `run` with every log of it, no archive kept: its stream logs and
    /// attribute log first, its own log last (a crash between leaves the run, which a
    /// second call deletes), then forgets it and releases its hook token claims. A run
    /// created again under the id starts with no attribute, stream or claim of the deleted
    /// one. `Store.deleteRun` on a World's store calls it. An attribute change of this World
    /// in flight is appended first (it holds the World's `deletions` lock shared); one
    /// checked after finds no run. A stream write may still make a stream log of the run
    /// again (streams take any run id), as of a run gc collects; another process's writes
    /// are not held.
    ///
    /// # Errors
    /// `Storage(InvalidRunId)` for the id of one of the World's own logs (an attribute,
    /// stream or claims log: [`log_kind`]), nothing deleted; `Storage(RunNotFound)` when the
    /// run's own log does not exist (its leftover logs are deleted all the same); other
    /// storage errors, each log deleted before it staying so.
    pub fn delete_run(&self, run: &RunId) -> Result<(), WorldError> {
        if log_kind(run.as_str()) != LogKind::Run {
            return Err(runlog::Error::InvalidRunId {
                id: run.to_string(),
                reason: "it names one of the World's own logs, not a run (delete the run it belongs to; a plain Store deletes any log)",
            }
            .into());
        }
        let _held = self.deletions.write();
        for id in self.auxiliary_logs(run)? {
            match self.backend.delete_run(&id) {
                Ok(()) | Err(runlog::Error::RunNotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let own = self.backend.delete_run(run);
        self.forget(run);
        own?;
        self.release_claims_of(run);
        Ok(())
    }

    /// Deletes log `id` if it still holds exactly the `held` events gathered from it into
    /// the archive: checked by the store under the run's write lock
    /// ([`RunLog::delete_run_at`]), so an event a writer appends after the archive was
    /// written (a stream chunk, a `runlog append`) keeps the log live, `Fenced`, and the
    /// next gc archives it again; none is lost.
    fn delete_archived(&self, id: &RunId, held: u64) -> Result<(), WorldError> {
        match self.backend.delete_run_at(id, held) {
            Ok(()) | Err(runlog::Error::RunNotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The auxiliary logs of workflow run `run` that exist: its attribute log and the
    /// stream logs whose metadata names it as their owner.
    fn auxiliary_logs(&self, run: &RunId) -> Result<Vec<RunId>, WorldError> {
        let mut ids = vec![attr_log_id(run)];
        let prefix = stream_id::run_logs_prefix(run);
        let mut after = RunId::new(&prefix)?;
        loop {
            let page = self.backend.list_runs(Some(&after), LIST_PAGE_LEN)?;
            let listed = page.runs.iter().map(|i| &i.run);
            let listed = listed.chain(page.damaged.iter().map(|d| &d.run));
            let mut past = false;
            for id in listed {
                match id.as_str().starts_with(&prefix) {
                    true if self.owns_stream_log(run, id)? => ids.push(id.clone()),
                    true => {}
                    false => past = true,
                }
            }
            match page.next {
                Some(next) if page.has_more && !past => after = next,
                _ => return Ok(ids),
            }
        }
    }

    fn owns_stream_log(&self, run: &RunId, log: &RunId) -> Result<bool, WorldError> {
        let meta = self.backend.run_meta(log)?;
        Ok(stream_id::owner_of_meta(&meta).as_ref() == Some(run))
    }

    /// Appends releases of `run`'s token claims (a hint, `tokens.rs`).
    fn release_claims_of(&self, run: &RunId) {
        // No claims log: nothing to release (and none is created here).
        if self.backend.last_seq(&crate::tokens::tokens_run()).is_err() {
            return;
        }
        let Ok(claims) = self.all_claims() else {
            return;
        };
        let pairs: Vec<(String, String)> = claims
            .into_iter()
            .filter(|c| c.run_id == run.as_str())
            .map(|c| (c.token, c.hook_id))
            .collect();
        if !pairs.is_empty() {
            self.release_tokens(run.as_str(), &pairs);
        }
    }
}

/// `archived` followed by the events of `live` whose key it does not hold, at the seqs after
/// its own.
fn union_by_key(mut archived: ArchivedLog, live: &ArchivedLog) -> ArchivedLog {
    let held: std::collections::HashSet<Option<runlog::Text>> =
        archived.events.iter().map(|e| e.key.clone()).collect();
    let extra: Vec<_> = live
        .events
        .iter()
        .filter(|e| !held.contains(&e.key))
        .cloned()
        .collect();
    for mut e in extra {
        e.seq = archived.events.len() as u64 + 1;
        archived.events.push(e);
    }
    archived
}

/// The workflow run an auxiliary log's id names: a stream or stream index log's, or an
/// attribute log's. Only a hint (the metadata of a stream log is checked before it is taken).
fn auxiliary_owner(id: &RunId) -> Option<RunId> {
    if let Some(run) = id.as_str().strip_prefix(crate::logs::ATTRIBUTE_LOG_PREFIX) {
        return RunId::new(run).ok();
    }
    stream_id::owner_of_log_id(id.as_str())
}

/// Whether `id` is a workflow run's own log (`wrun_<ULID>`).
fn is_workflow_run(id: &RunId) -> bool {
    log_kind(id.as_str()) == LogKind::Run && crate::ids::parse_run_id(id.as_str()).is_ok()
}

fn rand_salt() -> u32 {
    (ulid::Ulid::generate().random() as u32) | 1
}

/// The logs of an earlier archive of `run` merged with the live ones: a log in only one
/// is taken from there; a log in both, the longer, when the other is a prefix of it. A
/// stream index log in both (facts keyed by the stream's log id, which a late stream of
/// the run may have started again from seq 1) is the archived one followed by the live
/// entries whose key it lacks.
///
/// # Errors
/// A log whose archived and live events disagree (neither a prefix of the other).
fn merge(
    earlier: Vec<ArchivedLog>,
    live: Vec<ArchivedLog>,
    run: &RunId,
) -> Result<Vec<ArchivedLog>, WorldError> {
    let mut out = live;
    for old in earlier {
        let Some(i) = out.iter().position(|l| l.run == old.run) else {
            out.push(old);
            continue;
        };
        let now = &out[i];
        if old.meta == now.meta && log_kind(old.run.as_str()) == LogKind::StreamIndex {
            out[i] = union_by_key(old, now);
            continue;
        }
        let (short, long) = match old.events.len() <= now.events.len() {
            true => (&old, now),
            false => (now, &old),
        };
        if short.meta != long.meta || long.events[..short.events.len()] != short.events[..] {
            return Err(WorldError::Storage(runlog::Error::corrupt(
                run.as_str(),
                format!("{}{}", run.as_str(), archive::ARCHIVE_EXT),
                0,
                format!(
                    "log {} differs between the archive and the live store; gc leaves both alone",
                    old.run
                ),
            )));
        }
        if old.events.len() > out[i].events.len() {
            out[i] = old;
        }
    }
    if let Some(pos) = out.iter().position(|l| &l.run == run) {
        out.swap(0, pos);
    }
    Ok(out)
}
