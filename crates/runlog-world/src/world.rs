//! [`World`]: `events.create` on a [`RunLog`] backend. Every request is validated against
//! the run's state folded to seq N and appended fenced at N; a fenced rejection means the
//! log moved, so the delta is read, the request re-validated, and the append retried
//! (`docs/WORLD.md` §2). The per-run fold is cached and advanced by the delta only.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use runlog::{RunId, RunLog, Seq};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::error::WorldError;
use crate::fenced::{Attempt, Attempted};
use crate::fold::{HookIdentity, RunState};
use crate::group::{AbortUnanswered, GROUP_MEMBERS_MAX, Queued, Slot};
use crate::ids;
use crate::json::{Members, RawJson};
use crate::model::{
    CreateEventParams, Event, EventRequest, EventResult, EventType, EventView, ResolveData,
};
use crate::rules::{self, Checked, Decision, Plan};
use crate::tokens::{ClaimOutcome, Claims};

mod fenced;

/// Events a `run_started` preload returns at most (the reference's 1000).
pub const PRELOAD_EVENTS_MAX: usize = 1000;
/// Default page of `events.list` and of the `sinceCursor` delta.
pub const EVENTS_PAGE_DEFAULT: usize = 100;
/// Events read per batch while advancing a cached fold.
pub(crate) const ADVANCE_BATCH: usize = 4096;

/// Settings of a [`World`].
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// `ownerId`, `projectId`, `environment` of every hook.
    pub hook_identity: HookIdentity,
    /// Fenced appends one `create_event` tries before [`WorldError::Busy`] (default 100,
    /// at least 1). Each failure means another writer committed to the run meanwhile.
    pub fence_retries_max: u32,
    /// Runs whose fold stays cached (default 1024, at least 1); the least recently used are
    /// dropped beyond it and folded again from their logs on next use.
    pub cached_runs_max: usize,
    /// How far in the past a client-supplied `wrun_<ULID>` of `run_created` may lie, in ms
    /// (default 24 h, the reference's threshold).
    pub run_id_past_ms: u64,
    /// How far in the future, in ms (default 5 min).
    pub run_id_future_ms: u64,
    /// How long a hook token claim whose `hook_created` is not (yet) in its run's log is
    /// waited for before another run's `hook_created` takes the token over, in ms (default
    /// 2000): its claimant may be about to append. A claim is never honoured past it: the
    /// claimant's run is fenced with its hook's `hook_conflict` and the token changes hands
    /// (`tokens.rs`). Correctness does not depend on it, only who wins a close race.
    pub pending_claim_grace_ms: u64,
    /// How far past now a hook's `tokenRetentionUntil` may lie, in ms (default
    /// [`HOOK_RETENTION_MAX_MS`], 30 days, the reference's local limit): a `hook_created`
    /// asking for more is an [`WorldError::InvalidRequest`] (400), nothing written.
    pub hook_retention_max_ms: u64,
    /// The time the World's rules are judged at ([`Clock::system`] by default).
    pub clock: Clock,
    /// Collect finished runs in the background ([`crate::Retention`],
    /// [`World::start_retention`]); `None` (the default): never.
    pub retention: Option<crate::Retention>,
    /// A listing's page ends early (with `hasMore` and the cursor of its last item) once the
    /// JSON its items carry (event data; a run's, step's or hook's input, output, error,
    /// metadata) reaches this many bytes; a page always holds one item at least. Default
    /// [`PAGE_TEXT_BUDGET_BYTES`].
    pub page_text_budget_bytes: usize,
}

/// The default [`WorldConfig::page_text_budget_bytes`]: 64 MiB. A page goes to JavaScript as
/// one string, which V8 caps at 2^29 − 24 characters (about 512 MiB): a budget of 64 MiB
/// plus one item (a payload is at most 16 MiB by default) stays far below it.
pub const PAGE_TEXT_BUDGET_BYTES: usize = 64 << 20;

/// The default [`WorldConfig::hook_retention_max_ms`]: 30 days.
pub const HOOK_RETENTION_MAX_MS: u64 = 30 * 24 * 60 * 60 * 1000;

impl Default for WorldConfig {
    fn default() -> WorldConfig {
        WorldConfig {
            hook_identity: HookIdentity::default(),
            fence_retries_max: 100,
            cached_runs_max: 1024,
            run_id_past_ms: 24 * 60 * 60 * 1000,
            run_id_future_ms: 5 * 60 * 1000,
            pending_claim_grace_ms: 2000,
            hook_retention_max_ms: HOOK_RETENTION_MAX_MS,
            clock: Clock::system(),
            retention: None,
            page_text_budget_bytes: PAGE_TEXT_BUDGET_BYTES,
        }
    }
}

/// The runlog metadata of a World run: `{"source":"world","spec_version":N}` (the importer
/// writes `"source":"world-local"` and the same `spec_version`). The run's spec version
/// lives here, once per run, and stamps its events, steps and hooks.
#[derive(Serialize, Deserialize)]
struct RunMeta {
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    spec_version: Option<u32>,
}

pub(crate) struct RunEntry {
    /// Held by the member committing a group of this run's requests (its leader).
    pub(crate) writer: Mutex<()>,
    /// Requests waiting for the next group commit of this run.
    pub(crate) queue: Mutex<Vec<Queued>>,
    pub(crate) state: Mutex<Option<RunState>>,
    /// The run's attribute log folded (`attr_log.rs`); taken after `state` when both are.
    pub(crate) attrs: Mutex<crate::incremental::Folded<crate::attr_log::AttrLog>>,
    last_used: AtomicU64,
}

#[derive(Default)]
struct RunCache {
    entries: HashMap<RunId, Arc<RunEntry>>,
    tick: u64,
}

/// The storage half of the Workflow SDK's `World` (spec 2–7) on a runlog backend: runs,
/// steps, hooks, waits and attributes materialized from per-run event logs, every rule
/// checked atomically with the append. `Send + Sync`; share it across threads by
/// reference or `Arc`. Any number of Worlds, in any number of processes, may share one
/// store: correctness rests on the store's fenced appends, never on the caches.
///
/// ```
/// use runlog_world::{CreateEventParams, EventRequest, EventType, ResolveData, World};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let store = runlog::Store::open(dir.path(), runlog::Config::default())?;
/// let world = World::new(store, Default::default());
/// let p = CreateEventParams::default();
/// let created = world.create_event(
///     None, // run_created mints wrun_<ULID>
///     EventRequest::new(EventType::RunCreated)
///         .data(r#"{"deploymentId":"dpl","workflowName":"wf","input":null}"#)?,
///     &p,
/// )?;
/// let run_id = created.run.expect("the run").run_id;
/// world.create_event(Some(&run_id), EventRequest::new(EventType::RunStarted), &p)?;
/// let done = world.create_event(
///     Some(&run_id),
///     EventRequest::new(EventType::RunCompleted).data(r#"{"output":[1]}"#)?,
///     &p,
/// )?;
/// assert_eq!(done.run.expect("the run").output.expect("output").as_str(), "[1]");
/// // A second terminal event is refused with the SDK's class and status.
/// let again = world.create_event(
///     Some(&run_id),
///     EventRequest::new(EventType::RunFailed).data(r#"{"error":"x"}"#)?,
///     &p,
/// );
/// let e = again.expect_err("terminal run");
/// assert_eq!((e.class_name(), e.status()), ("EntityConflictError", 409));
/// assert_eq!(world.get_run(&run_id, ResolveData::None)?.output, None);
/// # Ok(()) }
/// ```
pub struct World<B: RunLog> {
    pub(crate) backend: B,
    pub(crate) config: WorldConfig,
    pub(crate) identity: Arc<HookIdentity>,
    runs: Mutex<RunCache>,
    pub(crate) claims: Mutex<crate::incremental::Folded<Claims>>,
    /// Folds of runs at earlier seqs, for [`World::run_at`] (`src/snapshots.rs`).
    pub(crate) fold_snapshots: Mutex<crate::snapshots::FoldSnapshots>,
    /// Cached folds found to be of a log the run no longer has ([`World::folds_dropped`]).
    folds_dropped: AtomicU64,
    /// What this World has read of the runs gc collected and restored (`collected.rs`).
    pub(crate) collected: crate::collected::CollectedRuns,
    /// The core's backoff settings for the fenced retries (`world/fenced.rs`).
    backoff: runlog::replay::ReplayConfig,
    /// Taken shared by an attribute change from its check that the run exists to its
    /// append, exclusive by [`World::delete_run`]: a change this World checked against a
    /// live run is appended before the run's logs are deleted, never after (it would make
    /// the deleted run's attribute log again, for a run created later under the id).
    pub(crate) deletions: parking_lot::RwLock<()>,
}

impl<B: RunLog> World<B> {
    /// A World on `backend` (for example a `runlog::Store`, or an `Arc` of one). Nothing is
    /// read until the first call.
    pub fn new(backend: B, mut config: WorldConfig) -> World<B> {
        config.fence_retries_max = config.fence_retries_max.max(1);
        config.cached_runs_max = config.cached_runs_max.max(1);
        World {
            backend,
            identity: Arc::new(config.hook_identity.clone()),
            backoff: fenced::backoff_config(&config),
            config,
            runs: Mutex::new(RunCache::default()),
            claims: Mutex::default(),
            fold_snapshots: Mutex::new(crate::snapshots::FoldSnapshots::default()),
            folds_dropped: AtomicU64::new(0),
            collected: Default::default(),
            deletions: parking_lot::RwLock::new(()),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Now by [`WorldConfig::clock`]: the time retention and `retryAfter` are judged at.
    pub(crate) fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    /// What a decision is taken at: now, and the World's limits.
    pub(crate) fn decide_at(&self) -> rules::DecideAt {
        rules::DecideAt {
            now_ms: self.now_ms(),
            hook_retention_max_ms: self.config.hook_retention_max_ms,
        }
    }

    /// `events.create(runId, request, params)`: validates `request` against the run's state
    /// and appends its event(s) in one fenced, atomic, durable append; returns the event
    /// and the entity as of that event (`docs/WORLD.md` §2).
    ///
    /// `run_id` is `wrun_<ULID>`; `None` (or empty) only for `run_created`, which then mints
    /// one. Every rule, its error class, and where this World is stricter than the
    /// reference, are in `docs/WORLD-RULES.md` §3–4. A fenced rejection is retried against
    /// the new state up to [`WorldConfig::fence_retries_max`] times.
    ///
    /// # Errors
    /// A [`WorldError`] with the SDK's class and status; nothing was written. Storage faults
    /// are [`WorldError::Storage`].
    pub fn create_event(
        &self,
        run_id: Option<&str>,
        request: EventRequest,
        params: &CreateEventParams,
    ) -> Result<EventResult, WorldError> {
        let (entry, slot) = self.enqueue(run_id, request, params)?;
        let result = self.drive(&entry, &slot)?;
        self.result_attributes(&entry, result)
    }

    /// `events.create` for several requests at once, as one caller: each request is
    /// queued on its run (the requests of one run together and in the order given), then
    /// their runs' groups are committed, so that the requests of one run meet in one group
    /// commit without a thread each. Returns each request's answer, in the order given:
    /// what [`World::create_event`] would have returned had the requests been made one after
    /// another in that order, each allowed to join the same group.
    ///
    /// # Errors
    /// Per request, as [`World::create_event`].
    pub fn create_events(
        &self,
        requests: Vec<(Option<String>, EventRequest, CreateEventParams)>,
    ) -> Vec<Result<EventResult, WorldError>> {
        let mut queued: Vec<Result<(Arc<RunEntry>, Slot), WorldError>> =
            Vec::with_capacity(requests.len());
        for (run_id, request, params) in requests {
            queued.push(self.enqueue(run_id.as_deref(), request, &params));
        }
        queued
            .into_iter()
            .map(|q| {
                q.and_then(|(entry, slot)| {
                    let result = self.drive(&entry, &slot)?;
                    self.result_attributes(&entry, result)
                })
            })
            .collect()
    }

    /// `result` with its run's attributes as the World returns them: its attribute log
    /// merged in (`attr_log.rs`).
    pub(crate) fn result_attributes(
        &self,
        entry: &RunEntry,
        mut result: EventResult,
    ) -> Result<EventResult, WorldError> {
        if let Some(found) = result.run.take() {
            let run = self.run_id(&found.run_id)?;
            let changed_at = self.load(entry, &run)?.attr_changed_at_ms().clone();
            result.run = Some(self.with_attr_log(entry, found, &changed_at, None)?);
        }
        Ok(result)
    }

    /// Checks `request` and queues it on its run: the run's entry and the slot where its
    /// answer will be left.
    fn enqueue(
        &self,
        run_id: Option<&str>,
        request: EventRequest,
        params: &CreateEventParams,
    ) -> Result<(Arc<RunEntry>, Slot), WorldError> {
        let req = Checked::new(run_id, request, params, &self.config)?;
        if req.creation_data().is_some() {
            self.ensure_run_log(&req)?;
        }
        let entry = self.entry(&req.run);
        let slot: Slot = Arc::default();
        entry.queue.lock().push(Queued {
            req,
            params: params.clone(),
            slot: slot.clone(),
        });
        Ok((entry, slot))
    }

    /// Waits for the answer in `slot`, leading the run's next group commit whenever the
    /// run's writer lock is free (the leader commits the requests queued before and with
    /// this one, up to [`GROUP_MEMBERS_MAX`]).
    fn drive(&self, entry: &RunEntry, slot: &Slot) -> Result<EventResult, WorldError> {
        loop {
            if let Some(answer) = slot.take() {
                return answer;
            }
            if let Some(writer) = entry.writer.try_lock() {
                let members = {
                    let mut queue = entry.queue.lock();
                    let n = queue.len().min(GROUP_MEMBERS_MAX);
                    queue.drain(..n).collect::<Vec<_>>()
                };
                if !members.is_empty() {
                    let _abort = AbortUnanswered::new(&members);
                    self.commit_group(entry, members);
                }
                drop(writer);
                // Whoever queued meanwhile leads the next group.
                if let Some(next) = entry.queue.lock().first() {
                    next.slot.nudge();
                }
                continue;
            }
            if let Some(answer) = slot.wait() {
                return answer;
            }
        }
    }

    /// One request on its own: decided against the run's state at seq N and appended
    /// fenced at N; a fenced rejection re-reads, re-decides and retries
    /// ([`World::retry_fenced`]). The caller holds the run's writer lock.
    pub(crate) fn commit_one(
        &self,
        entry: &RunEntry,
        mut req: Checked,
        params: &CreateEventParams,
    ) -> Result<EventResult, WorldError> {
        let run = req.run.clone();
        self.retry_fenced(run.as_str(), |attempt| {
            self.attempt_one(entry, &mut req, params, attempt)
        })
    }

    /// One attempt of [`World::commit_one`]: decide, claim the hook token if the plan has
    /// one, append fenced. A World-minted id that met another writer's is minted afresh
    /// ([`Attempted::Again`]), unless this is the last attempt.
    fn attempt_one(
        &self,
        entry: &RunEntry,
        req: &mut Checked,
        params: &CreateEventParams,
        attempt: Attempt,
    ) -> Result<Attempted<EventResult>, WorldError> {
        let (plan, base, scratch) = {
            let state = self.load(entry, &req.run)?;
            self.merge_for_decision(entry, &state, req)?;
            let decision = match rules::decide(&state, req, params, self.decide_at()) {
                Err(WorldError::DuplicateEventId { .. })
                    if !req.caller_event_id && !attempt.is_last() =>
                {
                    req.remint();
                    return Ok(Attempted::Again);
                }
                decision => decision?,
            };
            match decision {
                Decision::Done {
                    result,
                    event_seq,
                    spec_version,
                } => {
                    drop(state);
                    return self
                        .finish_done(req, params, *result, event_seq, spec_version)
                        .map(Attempted::Done);
                }
                Decision::Append(plan) => (plan, state.seq(), state.scratch(req.corr.as_deref())),
            }
        };
        let plan = match plan.claim.clone() {
            Some(token) => match self.claim_token(req, &token, base)? {
                ClaimOutcome::Claimed => plan,
                ClaimOutcome::Conflict { holder_run } => plan.into_conflict(&token, &holder_run),
            },
            None => plan,
        };
        let events = plan.events.iter().map(|p| p.to_new_event()).collect();
        match self.backend.append_decisions(&req.run, base, events) {
            Ok(seqs) => self
                .finish_append(entry, req, params, plan, base, &seqs, scratch)
                .map(Attempted::Done),
            Err(runlog::Error::Fenced { .. }) => Ok(Attempted::Fenced),
            // A minted id met another writer's (see `Checked::remint`); the synthetic
            // events' ids are minted afresh by the next decision.
            Err(runlog::Error::DuplicateDecision { key, .. })
                if !attempt.is_last() && minted_id(req, &plan, &key) =>
            {
                if key == req.event_id.to_string() {
                    req.remint();
                }
                Ok(Attempted::Again)
            }
            Err(e) => Err(map_append_error(req, e)),
        }
    }

    /// Creates the runlog run of a run-creating request (its metadata carries the spec
    /// version); an existing one is used as is.
    fn ensure_run_log(&self, req: &Checked) -> Result<(), WorldError> {
        let meta = RunMeta {
            source: Some("world".into()),
            spec_version: Some(req.spec_version),
        };
        let meta = serde_json::to_vec(&meta).unwrap_or_default();
        Ok(crate::logs::ensure_log(&self.backend, &req.run, &meta)?)
    }

    pub(crate) fn finish_done(
        &self,
        req: &Checked,
        params: &CreateEventParams,
        mut result: EventResult,
        event_seq: Option<Seq>,
        spec: Option<u32>,
    ) -> Result<EventResult, WorldError> {
        if let Some(seq) = event_seq {
            let page = self.backend.read(&req.run, seq - 1, 1)?;
            result.event = page
                .events
                .first()
                .map(|e| stored_event(&req.run, spec, e, params.resolve_data))
                .transpose()?;
            if params.since_cursor.is_none() {
                self.report_skipped(req, params, spec, &mut result)?;
            }
        }
        Ok(result)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_append(
        &self,
        entry: &RunEntry,
        req: &Checked,
        params: &CreateEventParams,
        plan: Plan,
        base: Seq,
        seqs: &[Seq],
        mut scratch: RunState,
    ) -> Result<EventResult, WorldError> {
        for (p, seq) in plan.events.iter().zip(seqs) {
            scratch.apply(&p.event_ref(*seq));
        }
        if let Some(state) = entry.state.lock().as_mut().filter(|s| s.seq() == base) {
            for (p, seq) in plan.events.iter().zip(seqs) {
                state.apply(&p.event_ref(*seq));
            }
        }
        let mut result = result_of(req, params, &plan, base, seqs, &scratch)?;
        self.attach_events(req, params, &mut result)?;
        if !plan.releases.is_empty() {
            self.release_tokens(req.run.as_str(), &plan.releases);
        }
        Ok(result)
    }

    /// The `run_started` preload and the `sinceCursor` delta.
    pub(crate) fn attach_events(
        &self,
        req: &Checked,
        params: &CreateEventParams,
        result: &mut EventResult,
    ) -> Result<(), WorldError> {
        let spec = result
            .run
            .as_ref()
            .and_then(|r| r.spec_version)
            .or(result.event.as_ref().and_then(|e| e.spec_version));
        let slots = ids::uses_slot_ids(spec);
        let (after, limit, resolve, delta) = match (req.ty, req.since_seq) {
            (EventType::StepCompleted | EventType::StepFailed, Some(since)) => {
                (since, EVENTS_PAGE_DEFAULT, params.resolve_data, true)
            }
            // Spec 6: any write may ask for the delta, `hook_created` too (and so the
            // `hook_conflict` committed in its place, which keeps the requested type).
            (_, Some(since)) if slots && !req.ty.is_terminal_run() => {
                (since, EVENTS_PAGE_DEFAULT, params.resolve_data, true)
            }
            (EventType::RunStarted, _) if !params.skip_preload => {
                (0, PRELOAD_EVENTS_MAX, ResolveData::All, false)
            }
            _ => return self.report_skipped(req, params, spec, result),
        };
        let page = self.backend.read(&req.run, after, limit)?;
        let events = page
            .events
            .iter()
            .map(|e| stored_event(&req.run, spec, e, resolve))
            .collect::<Result<Vec<_>, _>>()?;
        result.cursor = events.last().map(|e| crate::cursor::encode_seq(e.seq));
        result.events = Some(events);
        result.has_more = Some(page.has_more);
        if delta {
            // The delta wins over the skipped-event report: it is a superset and the
            // only one of the two that moves the caller's cursor.
            return Ok(());
        }
        self.report_skipped(req, params, spec, result)
    }

    /// Bump-and-report (spec 6 `eventCount`): the request was decided against the current
    /// state and committed at the next seq; when that seq is past `eventCount + 1`, the
    /// result carries the events at `eventCount + 1 …` below it, exactly (seq is commit
    /// order), at most [`PRELOAD_EVENTS_MAX`], with `cursor: null` (the report does not move
    /// the caller's read position) and `hasMore` when truncated.
    pub(crate) fn report_skipped(
        &self,
        req: &Checked,
        params: &CreateEventParams,
        spec: Option<u32>,
        result: &mut EventResult,
    ) -> Result<(), WorldError> {
        let (Some(asked), Some(committed)) = (
            params.event_count.filter(|&n| n >= 1),
            result.event.as_ref().map(|e| e.seq),
        ) else {
            return Ok(());
        };
        if committed <= asked + 1 {
            return Ok(());
        }
        let span = committed - asked - 1;
        let limit = usize::try_from(span).map_or(PRELOAD_EVENTS_MAX, |n| n.min(PRELOAD_EVENTS_MAX));
        let page = self.backend.read(&req.run, asked, limit)?;
        let events = page
            .events
            .iter()
            .filter(|e| e.seq < committed)
            .map(|e| stored_event(&req.run, spec, e, params.resolve_data))
            .collect::<Result<Vec<_>, _>>()?;
        result.has_more = Some((events.len() as u64) < span);
        result.cursor = None;
        result.events = Some(events);
        Ok(())
    }

    /// The cache entry of `run`, created if absent; drops the least recently used entries
    /// past [`WorldConfig::cached_runs_max`].
    pub(crate) fn entry(&self, run: &RunId) -> Arc<RunEntry> {
        let mut cache = self.runs.lock();
        cache.tick += 1;
        let tick = cache.tick;
        if let Some(e) = cache.entries.get(run) {
            e.last_used.store(tick, Ordering::Relaxed);
            return e.clone();
        }
        let max = self.config.cached_runs_max;
        if cache.entries.len() >= max {
            let mut ages: Vec<u64> = cache
                .entries
                .values()
                .map(|e| e.last_used.load(Ordering::Relaxed))
                .collect();
            ages.sort_unstable();
            let cut = ages[(max / 8).min(ages.len() - 1)];
            cache
                .entries
                .retain(|_, e| e.last_used.load(Ordering::Relaxed) > cut);
        }
        let entry = Arc::new(RunEntry {
            writer: Mutex::new(()),
            queue: Mutex::new(Vec::new()),
            state: Mutex::new(None),
            attrs: Mutex::default(),
            last_used: AtomicU64::new(tick),
        });
        cache.entries.insert(run.clone(), entry.clone());
        entry
    }

    /// Drops `run`'s cache entry (after gc deleted its logs): its next use reads the store.
    pub(crate) fn forget(&self, run: &RunId) {
        self.runs.lock().entries.remove(run);
    }

    /// How many cached folds this World dropped because the run's log no longer held the
    /// event a fold was last advanced by (the run deleted and created anew, or cut back by a
    /// repair, behind this World), or could not read it back (for tests and diagnostics: a
    /// World's own writes never cause one).
    #[doc(hidden)]
    pub fn folds_dropped(&self) -> u64 {
        self.folds_dropped.load(Ordering::Relaxed)
    }

    /// The run's fold, advanced to the log's last committed event.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] when the store has no such run; storage errors.
    pub(crate) fn load<'a>(
        &self,
        entry: &'a RunEntry,
        run: &RunId,
    ) -> Result<MappedMutexGuard<'a, RunState>, WorldError> {
        match self.load_readable(entry, run)? {
            (state, None) => Ok(state),
            (_, Some(fault)) => Err(WorldError::Storage(fault)),
        }
    }

    /// The run's fold advanced as far as its log can be read, and the fault that stopped the
    /// read before the log's end, if any (a damaged batch, an unreadable segment): the state
    /// is then exactly that of the events before the fault (runlog returns every event
    /// before a damage and fails only a read that starts there), which store-wide listings
    /// show with the fault rather than drop the run.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] when the store has no such run; the storage error when
    /// not even the run's metadata can be read (no state at all).
    pub(crate) fn load_readable<'a>(
        &self,
        entry: &'a RunEntry,
        run: &RunId,
    ) -> Result<(MappedMutexGuard<'a, RunState>, Option<runlog::Error>), WorldError> {
        let mut guard = entry.state.lock();
        if guard.is_none() {
            *guard = Some(self.empty_state(run)?);
        }
        let mut state = MutexGuard::map(guard, |s| s.get_or_insert_with(|| unreachable!()));
        // The cached fold is this log's only if the log still holds the event the fold was
        // last advanced by: the first read starts at that event and checks it. Another
        // handle or process may have deleted the run and created it anew under its id, or
        // cut it back with a repair (the log then ends before that seq, or holds another
        // event there): the fold is then dropped and the log folded from seq 1.
        let mut checked = state.seq() == 0;
        loop {
            let after = state.seq();
            let (from, limit) = match checked {
                true => (after, ADVANCE_BATCH),
                false => (after - 1, ADVANCE_BATCH + 1),
            };
            let mut other_log = !checked;
            let read = self.backend.read_each(run, from, limit, &mut |e| {
                if !checked {
                    checked = true;
                    other_log = !state.continues(&e);
                } else if !other_log {
                    state.apply(&e);
                }
            });
            match read {
                Ok(_) if other_log => {
                    self.folds_dropped.fetch_add(1, Ordering::Relaxed);
                    *state = self.empty_state(run)?;
                    self.fold_snapshots.lock().drop_run(run);
                    checked = true;
                }
                Ok((_, true)) => {}
                Ok((_, false)) => return Ok((state, None)),
                Err(e @ runlog::Error::RunNotFound { .. }) => return Err(not_found(run, e)),
                // The event the fold was last advanced by could not be read back: the fold
                // may hold events the log no longer gives, so the state returned with the
                // fault is the log's own, folded from seq 1 up to the fault.
                Err(_) if !checked => {
                    self.folds_dropped.fetch_add(1, Ordering::Relaxed);
                    *state = self.empty_state(run)?;
                    checked = true;
                }
                Err(fault) => return Ok((state, Some(fault))),
            }
        }
    }

    /// The state of `run`'s empty log: its spec version read from the run's metadata.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] when the store has no such run; storage errors.
    pub(crate) fn empty_state(&self, run: &RunId) -> Result<RunState, WorldError> {
        let meta = self.backend.run_meta(run).map_err(|e| not_found(run, e))?;
        let spec = serde_json::from_slice::<RunMeta>(&meta)
            .ok()
            .and_then(|m| m.spec_version);
        Ok(RunState::new(run.as_str(), spec, self.identity.clone()))
    }

    /// The run's fold at its last committed event (for tests and tools: what the World's
    /// rules see).
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`]; storage errors.
    pub fn run_state(&self, run_id: &str) -> Result<RunState, WorldError> {
        let run = self.run_id(run_id)?;
        let entry = self.entry(&run);
        let state = self.load(&entry, &run)?;
        Ok(state.clone())
    }
}

/// Whether `key` (of a `DuplicateDecision`) is an event id the World minted for `plan`.
pub(crate) fn minted_id(req: &Checked, plan: &Plan, key: &str) -> bool {
    plan.events
        .iter()
        .filter(|p| !(req.caller_event_id && p.event_id == req.event_id))
        .any(|p| p.event_id.to_string() == key)
}

/// The result of `req` whose `plan` was appended at `seqs` (after `base`), with its entity
/// as `state` holds it once the plan's events are applied (and nothing later).
pub(crate) fn result_of(
    req: &Checked,
    params: &CreateEventParams,
    plan: &Plan,
    base: Seq,
    seqs: &[Seq],
    state: &RunState,
) -> Result<EventResult, WorldError> {
    let (Some(primary), Some(&seq)) = (plan.events.get(plan.primary), seqs.get(plan.primary))
    else {
        return Err(WorldError::InvalidStoredEvent {
            run_id: req.run.to_string(),
            seq: base + 1,
            reason: format!(
                "the backend acknowledged {} seqs for {} events",
                seqs.len(),
                plan.events.len()
            ),
        });
    };
    let event = Event {
        run_id: req.run.to_string(),
        event_id: ids::event_id_for(state.spec_version(), primary.event_id, seq),
        event_type: primary.ty,
        correlation_id: primary.corr.clone(),
        event_data: strip(primary.ty, primary.data.clone(), params.resolve_data),
        created_at_ms: primary.created_at_ms,
        spec_version: state.spec_version(),
        resume_id: crate::resume::resume_id_of(primary.ty, primary.key.as_deref())
            .map(str::to_owned),
        seq,
    };
    let corr = req.corr.as_deref().unwrap_or_default();
    let mut result = EventResult {
        event: Some(event),
        step_created: plan.step_created,
        ..EventResult::default()
    };
    match primary.ty {
        EventType::RunCreated
        | EventType::RunStarted
        | EventType::RunCompleted
        | EventType::RunFailed
        | EventType::RunCancelled
        | EventType::AttrSet => result.run = state.run().cloned(),
        EventType::StepCreated
        | EventType::StepStarted
        | EventType::StepCompleted
        | EventType::StepFailed
        | EventType::StepRetrying => result.step = state.step(corr).cloned(),
        EventType::HookCreated => result.hook = state.hook(corr).cloned(),
        EventType::WaitCreated | EventType::WaitCompleted => {
            result.wait = state.wait(corr).cloned();
        }
        _ => {}
    }
    Ok(result)
}

pub(crate) fn not_found(run: &RunId, e: runlog::Error) -> WorldError {
    match e {
        runlog::Error::RunNotFound { .. } => WorldError::RunNotFound {
            run_id: run.to_string(),
        },
        e => WorldError::Storage(e),
    }
}

pub(crate) fn map_append_error(req: &Checked, e: runlog::Error) -> WorldError {
    match e {
        runlog::Error::DuplicateDecision { key, .. } if key == req.event_id.to_string() => {
            WorldError::DuplicateEventId {
                run_id: req.run.to_string(),
                event_id: ids::event_id_string(req.event_id),
            }
        }
        runlog::Error::DuplicateDecision { key, seq, .. } => WorldError::conflict(
            req.run.as_str(),
            format!("the run already holds an event keyed {key:?} (seq {seq})"),
        ),
        runlog::Error::InvalidEvent { field, reason } => {
            WorldError::invalid(format!("event.{field}"), reason)
        }
        e => not_found(&req.run, e),
    }
}

/// `stripEventDataRefs`: with `resolveData: 'none'`, removes the type's payload member
/// from the event data (and the data itself when nothing is left, or when it is not an
/// object).
pub(crate) fn strip(ty: EventType, data: Option<RawJson>, resolve: ResolveData) -> Option<RawJson> {
    let data = data?;
    if resolve == ResolveData::All {
        return Some(data);
    }
    if !data.is_object() {
        return None;
    }
    let Some(field) = ty.payload_field() else {
        return Some(data);
    };
    let mut members = Members::parse(data.as_str()).ok()?;
    members.0.retain(|(k, _)| k != field);
    (!members.0.is_empty()).then(|| members.to_json())
}

/// A stored runlog event borrowed in the SDK's terms.
///
/// # Errors
/// [`WorldError::InvalidStoredEvent`] when its kind is no event type or its payload is not
/// UTF-8.
pub(crate) fn event_view<'a>(
    run: &'a RunId,
    spec_version: Option<u32>,
    e: &runlog::EventRef<'a>,
) -> Result<EventView<'a>, WorldError> {
    let bad = |reason: String| WorldError::InvalidStoredEvent {
        run_id: run.to_string(),
        seq: e.seq,
        reason,
    };
    let event_type =
        EventType::parse(e.kind).ok_or_else(|| bad(format!("unknown kind {:?}", e.kind)))?;
    let event_data = match e.payload {
        [] => None,
        bytes => Some(
            std::str::from_utf8(bytes).map_err(|err| bad(format!("payload is not JSON: {err}")))?,
        ),
    };
    Ok(EventView {
        run_id: run.as_str(),
        event_id: e.event_id,
        event_type,
        correlation_id: e.correlation_id,
        event_data,
        created_at_ms: e.created_at_ms,
        spec_version,
        resume_id: crate::resume::resume_id_of(event_type, e.key),
        seq: e.seq,
    })
}

/// A stored event as an owned [`Event`], its payload checked as JSON and shaped by
/// `resolve`.
///
/// # Errors
/// [`WorldError::InvalidStoredEvent`] when its payload is not JSON.
pub(crate) fn owned_event(v: &EventView<'_>, resolve: ResolveData) -> Result<Event, WorldError> {
    let data = v
        .event_data
        .map(|text| {
            RawJson::from_text(text).map_err(|err| WorldError::InvalidStoredEvent {
                run_id: v.run_id.to_string(),
                seq: v.seq,
                reason: format!("payload is not JSON: {err}"),
            })
        })
        .transpose()?;
    Ok(Event {
        run_id: v.run_id.to_string(),
        event_id: ids::event_id_for(v.spec_version, v.event_id, v.seq),
        event_type: v.event_type,
        correlation_id: v.correlation_id.map(str::to_owned),
        event_data: strip(v.event_type, data, resolve),
        created_at_ms: v.created_at_ms,
        spec_version: v.spec_version,
        resume_id: v.resume_id.map(str::to_owned),
        seq: v.seq,
    })
}

/// A stored runlog event in the SDK's shape.
///
/// # Errors
/// [`WorldError::InvalidStoredEvent`] when its kind is no event type or its payload is not
/// JSON.
pub(crate) fn stored_event(
    run: &RunId,
    spec_version: Option<u32>,
    e: &runlog::Event,
    resolve: ResolveData,
) -> Result<Event, WorldError> {
    owned_event(&event_view(run, spec_version, &e.as_event_ref())?, resolve)
}
