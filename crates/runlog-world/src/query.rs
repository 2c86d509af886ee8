//! `runs`, `steps`, `hooks` and `events` reads: every answer is computed from the logs
//! (a cached fold advanced to the last committed event, or the events themselves).

use std::collections::HashSet;

use runlog::{RunId, RunLog, Seq};

use crate::cursor;
use crate::error::WorldError;
use crate::ids::{parse_event_id, parse_run_id};
use crate::json::RawJson;
use crate::logs::ATTRIBUTE_LOG_PREFIX;
use crate::model::{
    Event, EventView, Hook, ListRunsParams, PAGE_LIMIT_MAX, Page, Pagination, ResolveData,
    RunStatus, SortOrder, Step, StorageFault, WorkflowRun,
};
use crate::tokens::TokenClaim;
use crate::world::{EVENTS_PAGE_DEFAULT, World, event_view, owned_event, stored_event};

/// A hook with its key in the store-wide list: its run, and its creation seq there.
type KeyedHook = ((String, Seq), Hook);

/// Default page of `runs.list` (the reference's).
pub const RUNS_PAGE_DEFAULT: usize = 200;
/// Default page of `steps.list` and `hooks.list` (the reference's).
pub const ENTITIES_PAGE_DEFAULT: usize = 20;

fn limit(p: &Pagination, default: usize) -> usize {
    p.limit.unwrap_or(default).clamp(1, PAGE_LIMIT_MAX)
}

fn shape_run(mut run: WorkflowRun, resolve: ResolveData) -> WorkflowRun {
    if resolve == ResolveData::None {
        run.input = None;
        run.output = None;
    }
    run
}

fn shape_step(mut step: Step, resolve: ResolveData) -> Step {
    if resolve == ResolveData::None {
        step.input = None;
        step.output = None;
    }
    step
}

fn shape_hook(mut hook: Hook, resolve: ResolveData) -> Hook {
    if resolve == ResolveData::None {
        hook.metadata = None;
    }
    hook
}

/// The JSON text an item of a listing carries, in bytes, for
/// [`crate::WorldConfig::page_text_budget_bytes`].
pub(crate) trait PageText {
    /// The bytes of its JSON values (the rest of an item is small and bounded).
    fn text_bytes(&self) -> usize;
}

fn json_bytes<'a>(values: impl IntoIterator<Item = &'a Option<RawJson>>) -> usize {
    values
        .into_iter()
        .map(|v| v.as_ref().map_or(0, |v| v.as_str().len()))
        .sum()
}

impl PageText for WorkflowRun {
    fn text_bytes(&self) -> usize {
        json_bytes([
            &self.execution_context,
            &self.input,
            &self.output,
            &self.error,
        ])
    }
}

impl PageText for Step {
    fn text_bytes(&self) -> usize {
        json_bytes([&self.input, &self.output, &self.error])
    }
}

impl PageText for Hook {
    fn text_bytes(&self) -> usize {
        json_bytes([&self.metadata])
    }
}

impl PageText for Event {
    fn text_bytes(&self) -> usize {
        json_bytes([&self.event_data])
    }
}

/// A hit of `events.listByCorrelationId` before its event is read: run, seq, spec version.
struct Hit(String, Seq, Option<u32>);

impl PageText for Hit {
    fn text_bytes(&self) -> usize {
        0
    }
}

/// Whether a page holding `bytes` of JSON (`has_items`: in one item or more) is full by `budget`: never before
/// its first item.
fn over_budget(has_items: bool, bytes: usize, budget: usize) -> bool {
    has_items && bytes >= budget
}

/// Pages `items` (already in the list's order: ascending by key, or descending when
/// `desc`) after the cursor key `after`: up to `limit` items, fewer once their JSON reaches
/// `budget` bytes, the last one's key as the cursor, and whether more follow. A cursor whose
/// item is gone still positions the page.
fn page_of<T: PageText, K: Ord>(
    items: impl Iterator<Item = (K, T)>,
    after: Option<&K>,
    desc: bool,
    (limit, budget): (usize, usize),
    encode: impl Fn(&K) -> String,
) -> Page<T> {
    let mut items = items
        .skip_while(|(k, _)| match after {
            Some(a) if desc => k >= a,
            Some(a) => k <= a,
            None => false,
        })
        .peekable();
    let mut data = Vec::new();
    let mut last = None;
    let mut bytes = 0;
    while data.len() < limit && !over_budget(!data.is_empty(), bytes, budget) {
        let Some((k, item)) = items.next() else {
            break;
        };
        bytes += item.text_bytes();
        data.push(item);
        last = Some(k);
    }
    Page {
        data,
        cursor: last.as_ref().map(encode),
        has_more: items.peek().is_some(),
    }
}

/// Whether a run whose readable part is in status `from` may be in status `to` once the rest
/// of its log is read: the same status or a later one (pending, running, then a terminal
/// status, which is final).
fn may_reach(from: RunStatus, to: RunStatus) -> bool {
    let rank = |s: RunStatus| match s {
        RunStatus::Pending => 0,
        RunStatus::Running => 1,
        _ => 2,
    };
    from == to || (!from.is_terminal() && rank(to) > rank(from))
}

/// A run of which not even `run_created` could be read, as `runs.list` shows it: its id, its
/// creation time (its id's ULID), status `pending` (every run's first; nothing later is
/// known), empty workflow and deployment names, and the fault.
fn unread_run(run: &RunId, spec_version: Option<u32>, fault: StorageFault) -> WorkflowRun {
    let created = parse_run_id(run.as_str()).map_or(0, |(_, ulid)| ulid.timestamp_ms());
    WorkflowRun {
        run_id: run.to_string(),
        status: RunStatus::Pending,
        deployment_id: String::new(),
        workflow_name: String::new(),
        spec_version,
        execution_context: None,
        input: None,
        output: None,
        error: None,
        error_code: None,
        attributes: Default::default(),
        expired_at_ms: None,
        started_at_ms: None,
        completed_at_ms: None,
        created_at_ms: created,
        updated_at_ms: created,
        storage_error: Some(fault),
    }
}

impl<B: RunLog> World<B> {
    /// The runlog run of a run id given to a read. An id that is no `wrun_<ULID>` names no
    /// run a World can hold, so reads answer [`WorldError::RunNotFound`] for it (as the
    /// reference does for an id it has no file for, and as `getRun(id).exists` expects);
    /// only a write that would store the id refuses it with a 400 (`events.create`).
    pub(crate) fn run_id(&self, run_id: &str) -> Result<RunId, WorldError> {
        parse_run_id(run_id)
            .map(|(run, _)| run)
            .map_err(|_| WorldError::RunNotFound {
                run_id: run_id.to_string(),
            })
    }

    /// `runs.get`: the run as of its last event.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] (no `run_created`, or an id that is no `wrun_<ULID>`);
    /// storage errors (a run whose log cannot be read to its end is its fault, never a
    /// state short of its end).
    pub fn get_run(&self, run_id: &str, resolve: ResolveData) -> Result<WorkflowRun, WorldError> {
        let run = self.run_id(run_id)?;
        let entry = self.entry(&run);
        let (found, changed_at) = {
            let state = self.load(&entry, &run)?;
            let found = state
                .run()
                .cloned()
                .ok_or_else(|| WorldError::RunNotFound {
                    run_id: run_id.to_string(),
                })?;
            (found, state.attr_changed_at_ms().clone())
        };
        let found = self.with_attr_log(&entry, found, &changed_at, None)?;
        Ok(shape_run(found, resolve))
    }

    /// `runs.list`: runs filtered by workflow name and status, newest first by default,
    /// ordered by run id (a `wrun_<ULID>` sorts by its creation time), 200 per page by
    /// default. Cursor: the last run id returned.
    ///
    /// A run is never dropped because it cannot be read: a run whose log cannot be read to
    /// its end (a damaged segment, an unreadable file) is listed as the state of the part
    /// that can be read, with [`WorkflowRun::storage_error`] saying where and why reading
    /// stopped, and it is listed by every filter its unreadable part could still make it
    /// pass (its status or a later one; any filter when not even its `run_created` could be
    /// read, see `unread_run`). Runs of the store's listing that cannot be opened at all
    /// are listed the same way.
    ///
    /// Cost: one listing of the store's run ids (descending order lists them all; ascending
    /// pages through them) and one (cached) fold per run examined.
    ///
    /// # Errors
    /// `InvalidRequest` for a bad cursor; storage errors of the store's listing itself.
    pub fn list_runs(&self, params: &ListRunsParams) -> Result<Page<WorkflowRun>, WorldError> {
        let p = &params.pagination;
        let limit = limit(p, RUNS_PAGE_DEFAULT);
        let after = p
            .cursor
            .as_deref()
            .map(|c| cursor::decode(c, "run").map(str::to_string))
            .transpose()?;
        let (mut ids, with_attrs) = self.listed_world_runs()?;
        let desc = p.sort_order.unwrap_or(SortOrder::Desc) == SortOrder::Desc;
        if desc {
            ids.reverse();
        }
        let matching = ids.into_iter().filter_map(|run| {
            let has_log = with_attrs.contains(&run);
            self.listed_run(&run, params, has_log)
                .map(|r| (run.to_string(), r))
        });
        let bounds = (limit, self.config.page_text_budget_bytes);
        Ok(page_of(matching, after.as_ref(), desc, bounds, |id| {
            cursor::encode("run", id)
        }))
    }

    /// `run` as `runs.list` shows it, if it passes the filters of `params` (see
    /// [`World::list_runs`]); `None` for a run that is gone or holds no `run_created`.
    /// `has_attr_log`: whether the store's listing holds the run's attribute log (read and
    /// merged only then).
    fn listed_run(
        &self,
        run: &RunId,
        params: &ListRunsParams,
        has_attr_log: bool,
    ) -> Option<WorkflowRun> {
        let entry = self.entry(run);
        let (state, fault) = match self.load_readable(&entry, run) {
            Ok(loaded) => loaded,
            Err(WorldError::Storage(e)) => {
                return Some(unread_run(
                    run,
                    None,
                    StorageFault::new(run.as_str(), &e, 0),
                ));
            }
            Err(_) => return None,
        };
        let fault = fault.map(|e| StorageFault::new(run.as_str(), &e, state.seq()));
        let Some(r) = state.run() else {
            return fault.map(|f| unread_run(run, state.spec_version(), f));
        };
        let name_ok = params
            .workflow_name
            .as_ref()
            .is_none_or(|n| *n == r.workflow_name);
        let status_ok = params.status.is_none_or(|s| match fault {
            None => s == r.status,
            Some(_) => may_reach(r.status, s),
        });
        if !(name_ok && status_ok) {
            return None;
        }
        let (found, changed_at) = (r.clone(), state.attr_changed_at_ms().clone());
        drop(state);
        let mut listed =
            match self.with_attr_log(&entry, found.clone(), &changed_at, Some(has_attr_log)) {
                Ok(merged) => merged,
                // Its attribute log cannot be read: the run as its own log holds it, with the
                // fault (unless its own log has one to report).
                Err(WorldError::Storage(e)) => {
                    let mut own = found;
                    let log = crate::attr_log::attr_log_id(run);
                    own.storage_error = Some(StorageFault::new(log.as_str(), &e, 0));
                    own
                }
                Err(_) => found,
            };
        if fault.is_some() {
            listed.storage_error = fault;
        }
        Some(shape_run(listed, params.resolve_data))
    }

    /// Run ids of the store that are `wrun_<ULID>`, ascending, those the store's listing
    /// could not open included (they are listed with their fault, never dropped).
    fn world_run_ids(&self) -> Result<Vec<RunId>, WorldError> {
        self.listed_world_runs().map(|(ids, _)| ids)
    }

    /// [`World::world_run_ids`], and the runs among them whose attribute log the same
    /// listing holds.
    fn listed_world_runs(&self) -> Result<(Vec<RunId>, HashSet<RunId>), WorldError> {
        let mut with_attrs = HashSet::new();
        let mut ids = Vec::new();
        let mut after: Option<RunId> = None;
        loop {
            let page = self.backend.list_runs(after.as_ref(), PAGE_LIMIT_MAX)?;
            let listed = page.runs.iter().map(|i| &i.run);
            let damaged = page.damaged.iter().map(|d| &d.run);
            for id in listed.chain(damaged) {
                if let Some(owner) = id.as_str().strip_prefix(ATTRIBUTE_LOG_PREFIX) {
                    if let Ok((run, _)) = parse_run_id(owner) {
                        with_attrs.insert(run);
                    }
                } else if parse_run_id(id.as_str()).is_ok() {
                    ids.push(id.clone());
                }
            }
            match (page.has_more, page.next) {
                (true, Some(next)) => after = Some(next),
                _ => break,
            }
        }
        ids.sort();
        Ok((ids, with_attrs))
    }

    /// `steps.get`.
    ///
    /// # Errors
    /// [`WorldError::StepNotFound`]; [`WorldError::RunNotFound`]; storage errors.
    pub fn get_step(
        &self,
        run_id: &str,
        step_id: &str,
        resolve: ResolveData,
    ) -> Result<Step, WorldError> {
        let run = self.run_id(run_id)?;
        let entry = self.entry(&run);
        let state = self.load(&entry, &run)?;
        let step = state
            .step(step_id)
            .cloned()
            .ok_or_else(|| WorldError::StepNotFound {
                run_id: run_id.to_string(),
                step_id: step_id.to_string(),
            })?;
        Ok(shape_step(step, resolve))
    }

    /// `steps.list({runId})`: the run's steps by creation order, newest first by default,
    /// 20 per page. Cursor: the step's creation seq.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`]; `InvalidRequest` for a bad cursor; storage errors.
    pub fn list_steps(
        &self,
        run_id: &str,
        pagination: &Pagination,
        resolve: ResolveData,
    ) -> Result<Page<Step>, WorldError> {
        let run = self.run_id(run_id)?;
        let after = decode_seq_cursor(pagination, "step")?;
        let entry = self.entry(&run);
        let state = self.load(&entry, &run)?;
        let steps: Vec<(Seq, Step)> = state
            .steps()
            .map(|(seq, s)| (seq, shape_step(s.clone(), resolve)))
            .collect();
        Ok(ordered_page(
            steps,
            pagination,
            SortOrder::Desc,
            after,
            (ENTITIES_PAGE_DEFAULT, self.config.page_text_budget_bytes),
            "step",
        ))
    }

    /// `hooks.get`: an available hook by id (disposed hooks, and hooks of ended runs, are
    /// gone, except a hook retained until its `tokenRetentionUntil`).
    ///
    /// # Errors
    /// [`WorldError::HookNotFound`]; storage errors.
    pub fn get_hook(&self, hook_id: &str, resolve: ResolveData) -> Result<Hook, WorldError> {
        let not_found = || WorldError::HookNotFound {
            hook: hook_id.to_string(),
        };
        let claim = self.claim_of_hook(hook_id)?.ok_or_else(not_found)?;
        let hook = self
            .available_hook(&claim.run_id, hook_id)?
            .ok_or_else(not_found)?;
        Ok(shape_hook(hook, resolve))
    }

    /// `hooks.getByToken`: the available hook holding `token` (payloads always included, as
    /// in the reference): live, or retained past its run's end.
    ///
    /// # Errors
    /// [`WorldError::HookNotFound`]; storage errors.
    pub fn get_hook_by_token(&self, token: &str) -> Result<Hook, WorldError> {
        let not_found = || WorldError::HookNotFound {
            hook: token.to_string(),
        };
        let claim = self.claim_of_token(token)?.ok_or_else(not_found)?;
        self.available_hook(&claim.run_id, &claim.hook_id)?
            .filter(|h| h.token == token)
            .ok_or_else(not_found)
    }

    fn available_hook(&self, run_id: &str, hook_id: &str) -> Result<Option<Hook>, WorldError> {
        let Ok(run) = self.run_id(run_id) else {
            return Ok(None);
        };
        let entry = self.entry(&run);
        match self.load(&entry, &run) {
            Ok(state) => Ok(state.available_hook(hook_id, self.now_ms()).cloned()),
            Err(WorldError::RunNotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `hooks.list`: available hooks (live, or retained past their run's end until their
    /// `tokenRetentionUntil`) of one run (by creation order), or of the whole store (by run
    /// id, then creation order), oldest first by default, 20 per page.
    ///
    /// Store-wide, the runs listed are those holding a token claim; one whose log cannot be
    /// read to its end contributes the live hooks of its readable part, each with
    /// [`Hook::storage_error`], as long as every claim of the run is settled there. A claim
    /// whose hook would lie past the fault (its `hook_created` not in the readable part,
    /// which ends at or before the claim's seq), or a claimed run that cannot be opened,
    /// fails the listing with [`WorldError::Unreadable`] naming those runs: the answer may
    /// lie where nothing can be read.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] for an unknown run; `InvalidRequest` for a bad cursor;
    /// [`WorldError::Unreadable`] (store-wide); storage errors.
    pub fn list_hooks(
        &self,
        run_id: Option<&str>,
        pagination: &Pagination,
        resolve: ResolveData,
    ) -> Result<Page<Hook>, WorldError> {
        let after = pagination
            .cursor
            .as_deref()
            .map(|c| cursor::decode_pair(c, "hook"))
            .transpose()?;
        let mut hooks: Vec<KeyedHook> = match run_id {
            Some(id) => {
                let run = self.run_id(id)?;
                let entry = self.entry(&run);
                let state = self.load(&entry, &run)?;
                state
                    .available_hooks(self.now_ms())
                    .map(|(seq, h)| ((run.to_string(), seq), shape_hook(h.clone(), resolve)))
                    .collect()
            }
            None => self.store_hooks(resolve)?,
        };
        let desc = pagination.sort_order == Some(SortOrder::Desc);
        if desc {
            hooks.reverse();
        }
        let bounds = (
            limit(pagination, ENTITIES_PAGE_DEFAULT),
            self.config.page_text_budget_bytes,
        );
        Ok(page_of(
            hooks.into_iter(),
            after.as_ref(),
            desc,
            bounds,
            |(r, s)| cursor::encode_pair("hook", r, *s),
        ))
    }

    /// The live hooks of every run holding a token claim, by run id then creation order
    /// (the store-wide `hooks.list`, see [`World::list_hooks`]).
    fn store_hooks(&self, resolve: ResolveData) -> Result<Vec<KeyedHook>, WorldError> {
        let mut claims = self.all_claims()?;
        claims.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        let now_ms = self.now_ms();
        let mut hooks = Vec::new();
        let mut unreadable = Vec::new();
        for group in claims.chunk_by(|a, b| a.run_id == b.run_id) {
            let id = group[0].run_id.as_str();
            let Ok((run, _)) = parse_run_id(id) else {
                continue;
            };
            let entry = self.entry(&run);
            let (state, fault) = match self.load_readable(&entry, &run) {
                Ok(loaded) => loaded,
                Err(WorldError::RunNotFound { .. }) => continue,
                Err(WorldError::Storage(e)) => {
                    unreadable.push(StorageFault::new(id, &e, 0));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let fault = fault.map(|e| StorageFault::new(id, &e, state.seq()));
            if let Some(f) = &fault
                && group.iter().any(|c| past_readable(&state, c))
            {
                unreadable.push(f.clone());
                continue;
            }
            hooks.extend(state.available_hooks(now_ms).map(|(seq, h)| {
                let mut hook = shape_hook(h.clone(), resolve);
                hook.storage_error = fault.clone();
                ((id.to_string(), seq), hook)
            }));
        }
        if !unreadable.is_empty() {
            return Err(WorldError::Unreadable {
                what: "hooks.list",
                runs: unreadable,
            });
        }
        Ok(hooks)
    }

    /// `events.get`.
    ///
    /// # Errors
    /// [`WorldError::EventNotFound`] (an id that is neither a slot id nor `evnt_<ULID>`
    /// too, and an id of the other scheme than the run's); [`WorldError::RunNotFound`];
    /// storage errors. Slot runs (spec ≥ 6) are addressed by slot id, older runs by
    /// `evnt_<ULID>`.
    pub fn get_event(
        &self,
        run_id: &str,
        event_id: &str,
        resolve: ResolveData,
    ) -> Result<Event, WorldError> {
        let run = self.run_id(run_id)?;
        let not_found = || WorldError::EventNotFound {
            run_id: run_id.to_string(),
            event_id: event_id.to_string(),
        };
        // An id that is neither a slot id nor `evnt_<ULID>` names no event: not found, as
        // for a run id.
        let slot = crate::ids::parse_slot_event_id(event_id);
        let ulid = match slot {
            Some(_) => None,
            None => Some(parse_event_id(event_id).map_err(|_| not_found())?),
        };
        let entry = self.entry(&run);
        let (seq, spec) = {
            let state = self.load(&entry, &run)?;
            let spec = state.spec_version();
            // A run answers to the scheme it was created under only: slots from spec 6
            // (the seq itself, dense up to the last commit), `evnt_<ULID>` before.
            let seq = match (crate::ids::uses_slot_ids(spec), slot, ulid) {
                (true, Some(seq), _) => Some(seq).filter(|&s| s <= state.seq()),
                (false, _, Some(id)) => state.event_seq(id),
                _ => None,
            };
            (seq, spec)
        };
        let seq = seq.ok_or_else(not_found)?;
        let page = self.backend.read(&run, seq - 1, 1)?;
        let e = page.events.first().ok_or_else(not_found)?;
        stored_event(&run, spec, e, resolve)
    }

    /// `events.list({runId})`: the run's events in seq order (oldest first by default), 100
    /// per page by default. Cursor: the last seq returned; a page after it is complete by
    /// density.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] (no log); `InvalidRequest` for a bad cursor; storage
    /// errors.
    pub fn list_events(
        &self,
        run_id: &str,
        pagination: &Pagination,
        resolve: ResolveData,
    ) -> Result<Page<Event>, WorldError> {
        let mut data = Vec::new();
        let (cursor, has_more) = self.list_events_each(run_id, pagination, |v| {
            data.push(owned_event(v, resolve)?);
            Ok::<(), WorldError>(())
        })?;
        Ok(Page {
            data,
            cursor,
            has_more,
        })
    }

    /// `events.list({runId})` with `resolveData: 'all'`, each event handed to `f` borrowed
    /// from the log (nothing copied per event; payloads not parsed): the events
    /// [`World::list_events`] lists, in its order, then `(cursor, has_more)` of that page.
    /// For callers that turn a page into another form (the Node binding writes its wire
    /// text this way) without building [`Event`]s first.
    ///
    /// # Errors
    /// As [`World::list_events`]; [`WorldError::InvalidStoredEvent`] for an event whose kind
    /// is no event type or whose payload is not UTF-8 (JSON is the caller's to check). The
    /// first error `f` returns stops the listing and is returned.
    pub fn list_events_each<E: From<WorldError>>(
        &self,
        run_id: &str,
        pagination: &Pagination,
        mut f: impl FnMut(&EventView<'_>) -> Result<(), E>,
    ) -> Result<(Option<String>, bool), E> {
        let run = self.run_id(run_id)?;
        let limit = limit(pagination, EVENTS_PAGE_DEFAULT);
        let cursor = pagination
            .cursor
            .as_deref()
            .map(|c| cursor::decode_seq(c, "pagination.cursor"))
            .transpose()?;
        let entry = self.entry(&run);
        let (last, spec) = {
            let state = self.load(&entry, &run)?;
            (state.seq(), state.spec_version())
        };
        let budget = self.config.page_text_budget_bytes;
        let mut visit = |e: runlog::EventRef<'_>| -> Result<u64, E> {
            f(&event_view(&run, spec, &e)?)?;
            Ok(e.seq)
        };
        if pagination.sort_order == Some(SortOrder::Desc) {
            let before = cursor.unwrap_or(last + 1).min(last + 1);
            let low = before.saturating_sub(limit as u64).max(1);
            let count = before.saturating_sub(low) as usize;
            let page = self
                .backend
                .read(&run, low - 1, count)
                .map_err(WorldError::from)?;
            let (mut lowest, mut bytes) = (None, 0);
            for e in page.events.iter().rev() {
                if over_budget(lowest.is_some(), bytes, budget) {
                    break;
                }
                bytes += e.payload.len();
                lowest = Some(visit(e.as_event_ref())?);
            }
            return Ok((
                lowest.map(cursor::encode_seq),
                lowest.is_some_and(|s| s > 1),
            ));
        }
        let mut failed = None;
        let mut highest = None;
        let (mut bytes, mut cut) = (0, false);
        let (_, has_more) = self
            .backend
            .read_each(&run, cursor.unwrap_or(0), limit, &mut |e| {
                if failed.is_some() || cut {
                    return;
                }
                if over_budget(highest.is_some(), bytes, budget) {
                    // The page ends here: what follows is the next page's.
                    cut = true;
                    return;
                }
                bytes += e.payload.len();
                match visit(e) {
                    Ok(seq) => highest = Some(seq),
                    Err(err) => failed = Some(err),
                }
            })
            .map_err(WorldError::from)?;
        if let Some(err) = failed {
            return Err(err);
        }
        Ok((highest.map(cursor::encode_seq), has_more || cut))
    }

    /// `events.listByCorrelationId`: events with this correlation id, within one run (in
    /// seq order) or, with `run_id: None`, across the store (by run id, then seq; one
    /// cached fold per run), oldest first by default, 100 per page.
    ///
    /// Store-wide, runs whose logs cannot be read to their end do not break the lookup, but
    /// it never answers from the readable part alone where the answer may lie past a fault:
    /// when it finds nothing while some run cannot be read to its end, or finds events in
    /// such a run (more of that entity's events may follow the fault), it fails with
    /// [`WorldError::Unreadable`] naming every such run. Events found only in intact runs
    /// are the answer: the SDK's correlation ids (`step_…`, `hook_…`, `wait_…`) are minted
    /// ULIDs, each one entity's, and an entity lives in one run.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] for an unknown run; `InvalidRequest` for a bad cursor;
    /// [`WorldError::Unreadable`] (store-wide); storage errors.
    pub fn list_events_by_correlation_id(
        &self,
        correlation_id: &str,
        run_id: Option<&str>,
        pagination: &Pagination,
        resolve: ResolveData,
    ) -> Result<Page<Event>, WorldError> {
        let after = pagination
            .cursor
            .as_deref()
            .map(|c| cursor::decode_pair(c, "evc"))
            .transpose()?;
        let mut hits = match run_id {
            Some(id) => {
                let run = self.run_id(id)?;
                let entry = self.entry(&run);
                let state = self.load(&entry, &run)?;
                let spec = state.spec_version();
                state
                    .correlation_seqs(correlation_id)
                    .iter()
                    .map(|s| (run.to_string(), *s, spec))
                    .collect()
            }
            None => self.store_correlation_hits(correlation_id)?,
        };
        let desc = pagination.sort_order == Some(SortOrder::Desc);
        if desc {
            hits.reverse();
        }
        let limit = limit(pagination, EVENTS_PAGE_DEFAULT);
        let keyed = hits
            .into_iter()
            .map(|(r, s, spec)| ((r.clone(), s), Hit(r, s, spec)));
        // The hits weigh nothing until read: the budget is applied as they are read.
        let page = page_of(
            keyed,
            after.as_ref(),
            desc,
            (limit, usize::MAX),
            |(r, s)| cursor::encode_pair("evc", r, *s),
        );
        let (mut data, mut bytes) = (Vec::with_capacity(page.data.len()), 0);
        let (mut included, mut cut) = (None, false);
        for (i, Hit(r, seq, spec)) in page.data.into_iter().enumerate() {
            if over_budget(i > 0, bytes, self.config.page_text_budget_bytes) {
                cut = true;
                break;
            }
            let run = self.run_id(&r)?;
            let read = self.backend.read(&run, seq - 1, 1)?;
            if let Some(e) = read.events.first() {
                let e = stored_event(&run, spec, e, resolve)?;
                bytes += e.text_bytes();
                data.push(e);
            }
            included = Some((r, seq));
        }
        // A page cut by the budget ends after its last hit: that hit's key is the cursor.
        let (cursor, has_more) = match cut {
            true => (
                included.map(|(r, s)| cursor::encode_pair("evc", &r, s)),
                true,
            ),
            false => (page.cursor, page.has_more),
        };
        Ok(Page {
            data,
            cursor,
            has_more,
        })
    }

    /// `(run, seq, spec version)` of every event of the store with `correlation_id`, by run
    /// id then seq (the store-wide lookup, see [`World::list_events_by_correlation_id`]).
    fn store_correlation_hits(
        &self,
        correlation_id: &str,
    ) -> Result<Vec<(String, Seq, Option<u32>)>, WorldError> {
        let mut hits = Vec::new();
        let mut unreadable = Vec::new();
        let mut hit_unreadable = false;
        for run in self.world_run_ids()? {
            let entry = self.entry(&run);
            let (state, fault) = match self.load_readable(&entry, &run) {
                Ok(loaded) => loaded,
                Err(WorldError::RunNotFound { .. }) => continue,
                Err(WorldError::Storage(e)) => {
                    unreadable.push(StorageFault::new(run.as_str(), &e, 0));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let spec = state.spec_version();
            let seqs = state.correlation_seqs(correlation_id);
            if let Some(e) = fault {
                unreadable.push(StorageFault::new(run.as_str(), &e, state.seq()));
                hit_unreadable |= !seqs.is_empty();
            }
            hits.extend(seqs.iter().map(|s| (run.to_string(), *s, spec)));
        }
        if !unreadable.is_empty() && (hits.is_empty() || hit_unreadable) {
            return Err(WorldError::Unreadable {
                what: "events.listByCorrelationId",
                runs: unreadable,
            });
        }
        Ok(hits)
    }
}

/// Whether the hook of claim `c` may lie past the readable part of its run, which `state`
/// folds: the hook is not in it, and its `hook_created` would sit at seq `c.at_seq + 1`,
/// which the readable part does not reach.
fn past_readable(state: &crate::fold::RunState, c: &TokenClaim) -> bool {
    !state.hook_used(&c.hook_id) && c.at_seq >= state.seq()
}

fn decode_seq_cursor(p: &Pagination, tag: &str) -> Result<Option<Seq>, WorldError> {
    p.cursor
        .as_deref()
        .map(|c| {
            cursor::decode(c, tag)?.parse().map_err(|_| {
                WorldError::invalid(
                    "pagination.cursor",
                    format!("{c:?} is not a cursor of this list"),
                )
            })
        })
        .transpose()
}

/// A page of `items` (ascending by key) in the requested order after the cursor key.
fn ordered_page<T: PageText>(
    mut items: Vec<(Seq, T)>,
    p: &Pagination,
    default_order: SortOrder,
    after: Option<Seq>,
    (default_limit, budget): (usize, usize),
    tag: &'static str,
) -> Page<T> {
    let desc = p.sort_order.unwrap_or(default_order) == SortOrder::Desc;
    if desc {
        items.reverse();
    }
    page_of(
        items.into_iter(),
        after.as_ref(),
        desc,
        (limit(p, default_limit), budget),
        |k| cursor::encode(tag, &k.to_string()),
    )
}
