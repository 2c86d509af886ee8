//! A run as of any seq of its log (`docs/WORLD.md` §1: `state(seq N)` is the fold of events
//! 1..=N): [`World::run_at`], the entities a truncated log would give, and [`World::run_diff`],
//! which entities changed between two seqs and by which events.
//!
//! Cost: the events from the nearest fold snapshot at or before the seq asked for
//! (`src/snapshots.rs`; seq 1 when there is none) up to it, read and folded by
//! [`RunState::apply`] into a copy of that snapshot (the World's cache, which holds the
//! newest state only, is neither used nor changed); nothing past that seq is read. A fold
//! keeps its state at the last multiple of the run's snapshot interval it passes as a
//! snapshot. A time is resolved to a seq by one scan of the log's events (their
//! `createdAt`), payloads not parsed.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use runlog::{EventRef, RunId, RunLog, Seq};
use serde::Serialize;

use crate::error::WorldError;
use crate::fold::RunState;
use crate::json::{format_iso_ms, parse_iso_ms};
use crate::model::{Hook, Step, Wait, WorkflowRun};
use crate::snapshots::{self, Snapshot};
use crate::world::{ADVANCE_BATCH, World, not_found};

/// A point of a run's log: a seq, or a time (the last seq whose event's `createdAt` is at or
/// before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// A seq: 1 up to the log's last.
    Seq(Seq),
    /// A time, ms since the Unix epoch.
    Time(u64),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Seq(seq) => write!(f, "seq {seq}"),
            At::Time(ms) => write!(f, "time {}", format_iso_ms(*ms)),
        }
    }
}

impl FromStr for At {
    type Err = WorldError;

    /// Digits are a seq; anything else must be an ISO-8601 time
    /// ([`crate::parse_iso_ms`]: `2026-11-30`, `2026-11-30T02:25:44.946Z`, `…+01:00`).
    fn from_str(s: &str) -> Result<At, WorldError> {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s.parse().map(At::Seq).map_err(|_| {
                WorldError::invalid("at", format!("{s:?}: a seq is at most {}", u64::MAX))
            });
        }
        parse_iso_ms(s).map(At::Time).ok_or_else(|| {
            WorldError::invalid(
                "at",
                format!("{s:?} is neither a seq nor an ISO-8601 time (2026-11-30T02:25:44.946Z)"),
            )
        })
    }
}

/// A run's entities as of [`RunAt::seq`]: what the World's reads return on its log
/// truncated there (payloads included).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAt {
    /// The seq the state is of.
    pub seq: Seq,
    /// The log's last seq when it was read.
    pub last_seq: Seq,
    /// The run; `None` while its `run_created` is not yet applied (a reference log that
    /// starts with `run_started`).
    pub run: Option<WorkflowRun>,
    /// Steps in creation order.
    pub steps: Vec<Step>,
    /// Live hooks (created, not disposed, their run not ended) in creation order.
    pub hooks: Vec<Hook>,
    /// Waits in creation order.
    pub waits: Vec<Wait>,
}

impl RunAt {
    /// The entities of `state` (at its seq) of a log whose last seq is `last_seq`.
    pub fn of(state: &RunState, last_seq: Seq) -> RunAt {
        RunAt {
            seq: state.seq(),
            last_seq,
            run: state.run().cloned(),
            steps: state.steps().map(|(_, s)| s.clone()).collect(),
            hooks: state.live_hooks().map(|(_, h)| h.clone()).collect(),
            waits: state.waits().map(|(_, w)| w.clone()).collect(),
        }
    }
}

/// What kind of entity an [`EntityChange`] is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    /// The workflow run.
    Run,
    /// A step.
    Step,
    /// A (live) hook.
    Hook,
    /// A wait.
    Wait,
}

/// One entity as of one seq.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Entity {
    /// The run.
    Run(Box<WorkflowRun>),
    /// A step.
    Step(Box<Step>),
    /// A live hook.
    Hook(Box<Hook>),
    /// A wait.
    Wait(Box<Wait>),
}

/// How an entity differs between the two seqs of a [`RunDiff`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Absent at `from`, present at `to`.
    Created,
    /// Present at both, not equal.
    Changed,
    /// Present at `from`, absent at `to` (a hook disposed, or gone with its run's end).
    Removed,
}

/// An event of a [`RunDiff`]: its seq and its stored type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its type as stored (`step_completed`, ...).
    pub event_type: String,
}

/// One entity that changed between the two seqs, and the events that changed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntityChange {
    /// The kind of entity.
    pub entity: EntityKind,
    /// Its id (`runId`, `stepId`, `hookId`, `waitId`).
    pub id: String,
    /// Created, changed or removed.
    pub change: Change,
    /// The events between the two seqs that changed it when applied, ascending: its own
    /// (its correlation id's; the run's `run_*` and `attr_set`), or for a hook gone with its
    /// run's end, the run's terminal event. A `step_started` stored before its step's
    /// `step_created` changed nothing when applied (the step did not exist yet): it is in
    /// [`RunDiff::unchanged`], and the `step_created` that applied it is the step's.
    pub events: Vec<DiffEvent>,
    /// The entity at `from`.
    pub before: Option<Entity>,
    /// The entity at `to`.
    pub after: Option<Entity>,
}

/// Which entities of a run changed from seq [`RunDiff::from`] to seq [`RunDiff::to`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunDiff {
    /// The run.
    pub run_id: String,
    /// The earlier seq (0: the empty log).
    pub from: Seq,
    /// The later seq.
    pub to: Seq,
    /// Changed entities: the run, then steps, hooks and waits, each by id.
    pub changes: Vec<EntityChange>,
    /// Events after `from` up to `to` that changed no entity when applied (a
    /// `hook_received`, a `hook_conflict`, an event the fold counts as an anomaly), or whose
    /// change did not last to `to`, ascending.
    pub unchanged: Vec<DiffEvent>,
}

type Entities = BTreeMap<(EntityKind, String), Entity>;

/// The entities of `state`, keyed by kind and correlation id (the run by its id).
fn entities(state: &RunState) -> Entities {
    let mut out = Entities::new();
    if let Some(run) = state.run() {
        let key = (EntityKind::Run, run.run_id.clone());
        out.insert(key, Entity::Run(Box::new(run.clone())));
    }
    for (_, s) in state.steps() {
        let key = (EntityKind::Step, s.step_id.clone());
        out.insert(key, Entity::Step(Box::new(s.clone())));
    }
    for (_, h) in state.live_hooks() {
        let key = (EntityKind::Hook, h.hook_id.clone());
        out.insert(key, Entity::Hook(Box::new(h.clone())));
    }
    for (corr, w) in state.waits() {
        let key = (EntityKind::Wait, corr.to_string());
        out.insert(key, Entity::Wait(Box::new(w.clone())));
    }
    out
}

/// The entity key event `e` is about: the run for `run_*` and `attr_set`, else its kind's
/// entity under its correlation id.
fn entity_of(run_id: &str, e: &EventRef<'_>) -> Option<(EntityKind, String)> {
    let kind = e.kind;
    if kind.starts_with("run_") || kind == "attr_set" {
        return Some((EntityKind::Run, run_id.to_string()));
    }
    let entity = match kind.split('_').next() {
        Some("step") => EntityKind::Step,
        Some("hook") => EntityKind::Hook,
        Some("wait") => EntityKind::Wait,
        _ => return None,
    };
    e.correlation_id.map(|c| (entity, c.to_string()))
}

/// The entity `key` names in `state`, if it holds it.
fn entity(state: &RunState, key: &(EntityKind, String)) -> Option<Entity> {
    let id = key.1.as_str();
    match key.0 {
        EntityKind::Run => state.run().map(|r| Entity::Run(Box::new(r.clone()))),
        EntityKind::Step => state.step(id).map(|s| Entity::Step(Box::new(s.clone()))),
        EntityKind::Hook => state.hook(id).map(|h| Entity::Hook(Box::new(h.clone()))),
        EntityKind::Wait => state.wait(id).map(|w| Entity::Wait(Box::new(w.clone()))),
    }
}

/// The log of `run` ended at `last` before seq `to`, which it held a moment before: only a
/// log shortened under the reader (a `repair --cut`) does that.
fn shortened(run: &RunId, to: Seq, last: Seq) -> WorldError {
    WorldError::AtOutOfRange {
        run_id: run.to_string(),
        at: At::Seq(to),
        last,
    }
}

fn entity_id(entity: &Entity) -> &str {
    match entity {
        Entity::Run(r) => &r.run_id,
        Entity::Step(s) => &s.step_id,
        Entity::Hook(h) => &h.hook_id,
        Entity::Wait(w) => &w.wait_id,
    }
}

impl<B: RunLog> World<B> {
    /// The seq `at` names in `run_id`'s log: `at` itself for a seq from 1 to the log's last;
    /// for a time, the last seq whose event's `createdAt` is at or before it (the whole log
    /// is scanned: a log written by a lax store need not be in `createdAt` order). Also
    /// returns the log's last seq.
    ///
    /// # Errors
    /// [`WorldError::AtOutOfRange`] for seq 0, a seq past the log's last, or a time before
    /// every event; [`WorldError::RunNotFound`]; storage errors.
    pub fn seq_at(&self, run_id: &str, at: At) -> Result<(Seq, Seq), WorldError> {
        let run = self.run_id(run_id)?;
        let last = self
            .backend
            .last_seq(&run)
            .map_err(|e| not_found(&run, e))?;
        let out_of_range = || WorldError::AtOutOfRange {
            run_id: run_id.to_string(),
            at,
            last,
        };
        let seq = match at {
            At::Seq(seq) if (1..=last).contains(&seq) => seq,
            At::Seq(_) => return Err(out_of_range()),
            At::Time(ms) => {
                let mut found = 0;
                self.each_event(&run, 0, last, &mut |e| {
                    if e.created_at_ms <= ms {
                        found = e.seq;
                    }
                })?;
                if found == 0 {
                    return Err(out_of_range());
                }
                found
            }
        };
        Ok((seq, last))
    }

    /// The run's entities as of `at` (a seq, or the last seq at or before a time): the run,
    /// its steps, live hooks and waits, equal to what the World's reads return on its log
    /// truncated there. The run's attributes are its own log's at that seq merged with the
    /// changes of its attribute log (`runs.experimentalSetAttributes`, which lie outside the
    /// run's seqs) made by then: those whose `createdAt` is at or before the time asked for,
    /// or for a seq, at or before that event's `createdAt` (the merge of `runs.get`, cut
    /// there). Cost: the events from the nearest fold snapshot up to that seq (`O(events up
    /// to it)` for the first call on a run), and the attribute log when the run has one.
    ///
    /// # Errors
    /// [`WorldError::AtOutOfRange`]; [`WorldError::RunNotFound`]; storage errors (of the
    /// events up to that seq only).
    pub fn run_at(&self, run_id: &str, at: At) -> Result<RunAt, WorldError> {
        let (seq, last_seq) = self.seq_at(run_id, at)?;
        let run = self.run_id(run_id)?;
        let mut state = self.snapshot_before(&run, seq)?;
        let at_ms = self.fold_to(&run, &mut state, seq, last_seq)?;
        let mut out = RunAt::of(&state, last_seq);
        if let Some(found) = out.run.as_mut() {
            let until_ms = match at {
                At::Time(ms) => ms,
                At::Seq(_) => at_ms,
            };
            self.attr_log_until(&run, until_ms)?
                .overlay(found, state.attr_changed_at_ms());
        }
        Ok(out)
    }

    /// Which entities changed from `from` to `to` (each a seq or a time; `from` may be seq 0,
    /// the empty log), each with its state at both and the events between that are its
    /// own. The run's attributes are its own log's (the attribute log's changes have no seq
    /// between the two). Cost: the events from the nearest fold snapshot up to `to`, read
    /// and folded once.
    ///
    /// # Errors
    /// [`WorldError::AtOutOfRange`] (`to` as for [`World::run_at`]; `from` the same but for
    /// seq 0); [`WorldError::InvalidRequest`] when `from` lies after `to`;
    /// [`WorldError::RunNotFound`]; storage errors.
    pub fn run_diff(&self, run_id: &str, from: At, to: At) -> Result<RunDiff, WorldError> {
        let (to_seq, last_seq) = self.seq_at(run_id, to)?;
        let from_seq = match from {
            At::Seq(0) => 0,
            at => self.seq_at(run_id, at)?.0,
        };
        if from_seq > to_seq {
            return Err(WorldError::invalid(
                "from",
                format!("{from} (seq {from_seq}) lies after {to} (seq {to_seq})"),
            ));
        }
        let run = self.run_id(run_id)?;
        let mut state = self.snapshot_before(&run, from_seq)?;
        self.fold_to(&run, &mut state, from_seq, last_seq)?;
        let before = entities(&state);
        let mut changed_by: BTreeMap<(EntityKind, String), Vec<DiffEvent>> = BTreeMap::new();
        let mut unchanged = Vec::new();
        self.each_event(&run, from_seq, to_seq, &mut |e| {
            // The entities `e` may change: its own, and the live hooks for a run event (a
            // run's end disposes them without events of their own).
            let mut keys: Vec<(EntityKind, String)> =
                entity_of(run.as_str(), &e).into_iter().collect();
            if e.kind.starts_with("run_") {
                keys.extend(
                    state
                        .live_hooks()
                        .map(|(_, h)| (EntityKind::Hook, h.hook_id.clone())),
                );
            }
            let was: Vec<Option<Entity>> = keys.iter().map(|k| entity(&state, k)).collect();
            state.apply(&e);
            let event = DiffEvent {
                seq: e.seq,
                event_type: e.kind.to_string(),
            };
            let mut changed = false;
            for (key, was) in keys.into_iter().zip(was) {
                if entity(&state, &key) != was {
                    changed = true;
                    changed_by.entry(key).or_default().push(event.clone());
                }
            }
            if !changed {
                unchanged.push(event);
            }
        })?;
        if state.seq() < to_seq {
            return Err(shortened(&run, to_seq, state.seq()));
        }
        let after = entities(&state);
        let mut keys: Vec<&(EntityKind, String)> = before.keys().chain(after.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut changes = Vec::new();
        for key in keys {
            let (b, a) = (before.get(key), after.get(key));
            let change = match (b, a) {
                (None, Some(_)) => Change::Created,
                (Some(_), None) => Change::Removed,
                (Some(x), Some(y)) if x != y => Change::Changed,
                _ => continue,
            };
            let id = a.or(b).map_or(key.1.as_str(), entity_id).to_string();
            changes.push(EntityChange {
                entity: key.0,
                id,
                change,
                events: changed_by.remove(key).unwrap_or_default(),
                before: b.cloned(),
                after: a.cloned(),
            });
        }
        // Changes that did not last (an entity changed and changed back).
        unchanged.extend(changed_by.into_values().flatten());
        unchanged.sort_by_key(|e| e.seq);
        unchanged.dedup();
        Ok(RunDiff {
            run_id: run_id.to_string(),
            from: from_seq,
            to: to_seq,
            changes,
            unchanged,
        })
    }

    /// The seqs of the fold snapshots this World keeps of `run_id`, ascending (for tests and
    /// benchmarks: which folds [`World::run_at`] can start from).
    #[doc(hidden)]
    pub fn fold_snapshot_seqs(&self, run_id: &str) -> Result<Vec<Seq>, WorldError> {
        Ok(self.fold_snapshots.lock().seqs(&self.run_id(run_id)?))
    }

    /// A fold of `run` to the greatest seq at or before `seq` that a fold snapshot holds and
    /// the log still holds the same event at (the empty state without one: seq 0); a
    /// snapshot whose event the log no longer holds drops the run's snapshots.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`]; storage errors.
    fn snapshot_before(&self, run: &RunId, seq: Seq) -> Result<RunState, WorldError> {
        let Some(found) = self.fold_snapshots.lock().nearest(run, seq) else {
            return self.empty_state(run);
        };
        let at = found.state.seq();
        let mut same = false;
        self.each_event(run, at - 1, at, &mut |e| same = found.state.continues(&e))?;
        if same {
            return Ok(found.state);
        }
        self.fold_snapshots.lock().drop_run(run);
        self.empty_state(run)
    }

    /// Applies the events after `state`'s seq up to `to` to `state`, keeping the state at
    /// the last multiple of the snapshot interval of a log of `last` events it passes as a
    /// fold snapshot (one copy of the state per fold at most: a snapshot costs a copy, so a
    /// fold that kept one at every multiple would cost several); returns the `createdAt`
    /// of the event at `to` (0 when `to` is `state`'s seq and no event was read).
    fn fold_to(
        &self,
        run: &RunId,
        state: &mut RunState,
        to: Seq,
        last: Seq,
    ) -> Result<u64, WorldError> {
        let from = state.seq();
        if from == to && to > 0 {
            let mut at_ms = 0;
            self.each_event(run, to - 1, to, &mut |e| at_ms = e.created_at_ms)?;
            return Ok(at_ms);
        }
        let every = snapshots::interval(last);
        let keep_at = to - to % every;
        let (mut taken, mut at_ms) = (None, 0);
        self.each_event(run, from, to, &mut |e| {
            state.apply(&e);
            at_ms = e.created_at_ms;
            if e.seq == keep_at {
                taken = Some(Snapshot {
                    state: state.clone(),
                });
            }
        })?;
        if state.seq() < to {
            return Err(shortened(run, to, state.seq()));
        }
        if let Some(snapshot) = taken {
            self.fold_snapshots.lock().keep(run, snapshot);
        }
        Ok(at_ms)
    }

    /// Hands each event after seq `after` up to seq `to` to `f`, in seq order.
    fn each_event(
        &self,
        run: &RunId,
        mut after: Seq,
        to: Seq,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(), WorldError> {
        while after < to {
            let want = usize::try_from(to - after).map_or(ADVANCE_BATCH, |n| n.min(ADVANCE_BATCH));
            let mut seen = after;
            let (_, more) = self
                .backend
                .read_each(run, after, want, &mut |e| {
                    seen = e.seq;
                    f(e)
                })
                .map_err(|e| not_found(run, e))?;
            if seen == after || !more && seen < to {
                break;
            }
            after = seen;
        }
        Ok(())
    }
}
