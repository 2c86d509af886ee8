//! Group commit of one run's `events.create` requests (`docs/WORLD.md` §2).
//!
//! Requests to one run queue on the run's cache entry; whoever holds the run's writer lock
//! (the leader) takes up to [`GROUP_MEMBERS_MAX`] of them and decides each, in queue order,
//! against the run's state at seq N advanced by the events of the members before it, then
//! appends every accepted member's events as **one** decision batch fenced at N. The batch
//! is atomic, so the group is exactly the serial execution of its members in queue order:
//! a member rejected by the rules is rejected as it would have been after the members
//! before it, and writes nothing; the others commit with one fdatasync instead of one each.
//!
//! When the fence fails (another process wrote the run), the whole group is decided again
//! against the new state, through the World's one fenced retry (`world/fenced.rs`), as is
//! a member whose World-minted event id met an existing one (minted afresh). A storage fault fails the members whose events were in the batch
//! with that fault (as each would have failed alone; never retried, since a lost reply may
//! hide a commit), and the others commit on their own; a duplicate minted id makes every
//! member commit on its own. A member that
//! claims a hook token (`hook_created`) commits on its own after the group, because its
//! claim is a write to another log that must precede its append.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use runlog::{NewEvent, RunLog, Seq};

use crate::error::WorldError;
use crate::fenced::{Attempt, Attempted};
use crate::model::{CreateEventParams, EventResult};
use crate::rules::{self, Checked, Decision, Plan};
use crate::world::{RunEntry, World, map_append_error, result_of};

/// Requests one group commit takes at most; the rest wait for the next group.
pub(crate) const GROUP_MEMBERS_MAX: usize = 64;

/// How long a queued request waits for its answer before it looks again whether it should
/// lead (a safety net: a leader nudges the next queued request when it is done).
const QUEUED_WAIT: Duration = Duration::from_millis(100);

/// Where a request's answer is left for its caller, who waits on it without taking the
/// run's writer lock (so answering a group is not a convoy through that lock).
pub(crate) type Slot = Arc<SlotCell>;

/// A queued request's mailbox: its answer, or a nudge to try leading the next group.
#[derive(Default)]
pub(crate) struct SlotCell {
    state: Mutex<SlotState>,
    cond: Condvar,
}

#[derive(Default)]
struct SlotState {
    answer: Option<Result<EventResult, WorldError>>,
    nudged: bool,
}

impl SlotCell {
    /// Leaves the answer and wakes the caller.
    pub(crate) fn answer(&self, answer: Result<EventResult, WorldError>) {
        let mut s = self.state.lock();
        if s.answer.is_none() {
            s.answer = Some(answer);
        }
        self.cond.notify_one();
    }

    /// Wakes the caller to try to lead (the previous leader is done).
    pub(crate) fn nudge(&self) {
        self.state.lock().nudged = true;
        self.cond.notify_one();
    }

    /// The answer, if there is one.
    pub(crate) fn take(&self) -> Option<Result<EventResult, WorldError>> {
        self.state.lock().answer.take()
    }

    /// Waits until answered (the answer), nudged or [`QUEUED_WAIT`] passed (`None`).
    pub(crate) fn wait(&self) -> Option<Result<EventResult, WorldError>> {
        let mut s = self.state.lock();
        if s.answer.is_none() && !s.nudged {
            self.cond.wait_for(&mut s, QUEUED_WAIT);
        }
        s.nudged = false;
        s.answer.take()
    }
}

/// Answers every member a group leader took but did not answer (it panicked) with
/// [`WorldError::GroupAborted`], when dropped.
pub(crate) struct AbortUnanswered {
    slots: Vec<Slot>,
    run_id: String,
}

impl AbortUnanswered {
    pub(crate) fn new(members: &[Queued]) -> AbortUnanswered {
        AbortUnanswered {
            slots: members.iter().map(|m| m.slot.clone()).collect(),
            run_id: members
                .first()
                .map(|m| m.req.run.to_string())
                .unwrap_or_default(),
        }
    }
}

impl Drop for AbortUnanswered {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.answer(Err(WorldError::GroupAborted {
                run_id: self.run_id.clone(),
            }));
        }
    }
}

/// A request waiting for its run's next group commit.
pub(crate) struct Queued {
    pub(crate) req: Checked,
    pub(crate) params: CreateEventParams,
    pub(crate) slot: Slot,
}

/// What the leader decided for one member.
enum Outcome {
    /// Rejected by the rules; nothing of it is written.
    Rejected(WorldError),
    /// Nothing to write; the answer (the stored event at `event_seq`) once the group commits.
    Done {
        result: Box<EventResult>,
        event_seq: Option<Seq>,
        spec_version: Option<u32>,
    },
    /// Its events are in the group's batch; `result` is its answer as of those events.
    Planned {
        plan: Plan,
        result: Box<EventResult>,
    },
    /// Claims a hook token: commits on its own after the group.
    Alone,
}

/// The group's decisions at seq `base`.
struct Decided {
    base: Seq,
    outcomes: Vec<Outcome>,
    events: Vec<NewEvent>,
    /// The run's state at `base` advanced by the batch: the cache's next state.
    after: crate::fold::RunState,
}

/// How a group's fenced retry ended; each is answered to the members after it.
enum GroupEnd {
    /// Committed (or nothing to write): each member's outcome.
    Committed(Vec<Outcome>),
    /// Each member commits on its own (the group could not be decided, or a minted id met
    /// an existing one in the store).
    Each,
    /// The batch failed with a storage fault.
    Failed(Vec<Outcome>, runlog::Error),
    /// Committed, but not at the seqs the fence said.
    Misplaced { seq: Seq, reason: String },
}

impl<B: RunLog> World<B> {
    /// Commits `members` (all of one run, in queue order) and leaves each one's answer in
    /// its slot. The caller holds the run's writer lock.
    pub(crate) fn commit_group(&self, entry: &RunEntry, mut members: Vec<Queued>) {
        if members.len() == 1 {
            let m = members.pop().unwrap_or_else(|| unreachable!());
            let answer = self.commit_one(entry, m.req, &m.params);
            m.slot.answer(answer);
            return;
        }
        let run = members[0].req.run.to_string();
        let Ok(ended) = self.run_fenced(|attempt| {
            Ok::<_, std::convert::Infallible>(self.attempt_group(entry, &mut members, attempt))
        });
        match ended {
            Some(GroupEnd::Committed(outcomes)) => self.answer(entry, members, outcomes),
            Some(GroupEnd::Each) => self.commit_each(entry, members),
            Some(GroupEnd::Failed(outcomes, e)) => self.fail_planned(entry, members, outcomes, &e),
            Some(GroupEnd::Misplaced { seq, reason }) => {
                for m in members {
                    m.slot.answer(Err(WorldError::InvalidStoredEvent {
                        run_id: run.clone(),
                        seq,
                        reason: reason.clone(),
                    }));
                }
            }
            None => {
                for m in members {
                    m.slot.answer(Err(self.busy(&run)));
                }
            }
        }
    }

    /// One attempt of a group commit: decide every member, append the batch fenced.
    fn attempt_group(
        &self,
        entry: &RunEntry,
        members: &mut [Queued],
        attempt: Attempt,
    ) -> Attempted<GroupEnd> {
        let decided = match self.decide_group(entry, members, attempt) {
            Ok(Some(decided)) => decided,
            Ok(None) => return Attempted::Again,
            Err(_) => return Attempted::Done(GroupEnd::Each),
        };
        if decided.events.is_empty() {
            return Attempted::Done(GroupEnd::Committed(decided.outcomes));
        }
        let run = &members[0].req.run;
        let n = decided.events.len() as u64;
        let end = match self
            .backend
            .append_decisions(run, decided.base, decided.events)
        {
            Ok(seqs) if seqs.first() == Some(&(decided.base + 1)) && seqs.len() as u64 == n => {
                let mut cached = entry.state.lock();
                if cached.as_ref().is_some_and(|s| s.seq() == decided.base) {
                    *cached = Some(decided.after);
                }
                GroupEnd::Committed(decided.outcomes)
            }
            // Committed, but not where the fence said: report, never guess.
            Ok(seqs) => GroupEnd::Misplaced {
                seq: decided.base + 1,
                reason: format!(
                    "the backend acknowledged seqs {:?} for a batch of {n} fenced at {}",
                    seqs.first()..seqs.last(),
                    decided.base
                ),
            },
            Err(runlog::Error::Fenced { .. }) => return Attempted::Fenced,
            // A minted id met an existing one: each member on its own mints afresh.
            Err(runlog::Error::DuplicateDecision { .. }) => GroupEnd::Each,
            // A storage fault: what a member appending alone would get. Whether the batch is
            // in the log may be unknown (a lost reply), so it is not retried member by
            // member, which could turn an ambiguous outcome into a misleading conflict.
            Err(e) => GroupEnd::Failed(decided.outcomes, e),
        };
        Attempted::Done(end)
    }

    /// Decides every member against the run's state, each seeing the events of the
    /// members before it. `Ok(None)`: a member's World-minted event id met an existing one
    /// and was minted afresh (unless this is the last attempt): decide the group again.
    fn decide_group(
        &self,
        entry: &RunEntry,
        members: &mut [Queued],
        attempt: Attempt,
    ) -> Result<Option<Decided>, WorldError> {
        let run = members[0].req.run.clone();
        let mut work = self.load(entry, &run)?.clone();
        let base = work.seq();
        let mut outcomes = Vec::with_capacity(members.len());
        let mut events = Vec::new();
        let at = self.decide_at();
        for m in members.iter_mut() {
            self.merge_for_decision(entry, &work, &mut m.req)?;
            let decision = match rules::decide(&work, &m.req, &m.params, at) {
                Err(WorldError::DuplicateEventId { .. })
                    if !m.req.caller_event_id && !attempt.is_last() =>
                {
                    m.req.remint();
                    return Ok(None);
                }
                decision => decision,
            };
            let outcome = match decision {
                Err(e) => Outcome::Rejected(e),
                Ok(Decision::Done {
                    result,
                    event_seq,
                    spec_version,
                }) => Outcome::Done {
                    result,
                    event_seq,
                    spec_version,
                },
                Ok(Decision::Append(plan)) if plan.claim.is_some() => Outcome::Alone,
                Ok(Decision::Append(plan)) => {
                    let first = base + events.len() as u64 + 1;
                    let seqs: Vec<Seq> = (first..first + plan.events.len() as u64).collect();
                    for (p, seq) in plan.events.iter().zip(&seqs) {
                        work.apply(&p.event_ref(*seq));
                    }
                    match result_of(&m.req, &m.params, &plan, base, &seqs, &work) {
                        Ok(result) => {
                            events.extend(plan.events.iter().map(|p| p.to_new_event()));
                            Outcome::Planned {
                                plan,
                                result: Box::new(result),
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            outcomes.push(outcome);
        }
        Ok(Some(Decided {
            base,
            outcomes,
            events,
            after: work,
        }))
    }

    /// Answers every member once its group committed (or had nothing to write).
    fn answer(&self, entry: &RunEntry, members: Vec<Queued>, outcomes: Vec<Outcome>) {
        for (m, outcome) in members.into_iter().zip(outcomes) {
            let answer = match outcome {
                Outcome::Rejected(e) => Err(e),
                Outcome::Done {
                    result,
                    event_seq,
                    spec_version,
                } => self.finish_done(&m.req, &m.params, *result, event_seq, spec_version),
                Outcome::Planned { plan, mut result } => self
                    .attach_events(&m.req, &m.params, &mut result)
                    .map(|()| {
                        if !plan.releases.is_empty() {
                            self.release_tokens(m.req.run.as_str(), &plan.releases);
                        }
                        *result
                    }),
                Outcome::Alone => self.commit_one(entry, m.req, &m.params),
            };
            m.slot.answer(answer);
        }
    }

    /// A group whose batch failed with `e`: the members with events in it get `e`; the
    /// others were decided against the batch's events, so each commits on its own.
    fn fail_planned(
        &self,
        entry: &RunEntry,
        members: Vec<Queued>,
        outcomes: Vec<Outcome>,
        e: &runlog::Error,
    ) {
        for (m, outcome) in members.into_iter().zip(outcomes) {
            let answer = match outcome {
                Outcome::Planned { .. } => Err(map_append_error(&m.req, e.replicate())),
                _ => self.commit_one(entry, m.req, &m.params),
            };
            m.slot.answer(answer);
        }
    }

    /// Each member on its own, in queue order.
    fn commit_each(&self, entry: &RunEntry, members: Vec<Queued>) {
        for m in members {
            let answer = self.commit_one(entry, m.req, &m.params);
            m.slot.answer(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EventRequest, EventType, RunStatus, StepStatus};
    use crate::world::WorldConfig;
    use runlog::{Config, Store};

    fn queued(w: &World<Store>, run: &str, ty: EventType, corr: Option<&str>) -> Queued {
        let mut r = EventRequest::new(ty);
        if let Some(c) = corr {
            r = r.correlation_id(c);
        }
        r = match ty {
            EventType::StepCreated => r.data(r#"{"stepName":"s","input":[1]}"#).unwrap(),
            EventType::RunCompleted => r.data(r#"{"output":2}"#).unwrap(),
            _ => r,
        };
        let params = CreateEventParams::default();
        Queued {
            req: Checked::new(Some(run), r, &params, &w.config).unwrap(),
            params,
            slot: Arc::default(),
        }
    }

    #[test]
    fn one_group_is_its_members_in_queue_order_in_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let w = World::new(store, WorldConfig::default());
        let run = crate::ids::mint_run_id();
        let p = CreateEventParams::default();
        let created = EventRequest::new(EventType::RunCreated)
            .data(r#"{"deploymentId":"d","workflowName":"wf","input":[]}"#)
            .unwrap();
        w.create_event(Some(&run), created, &p).unwrap();
        w.create_event(Some(&run), EventRequest::new(EventType::RunStarted), &p)
            .unwrap();
        let members = vec![
            queued(&w, &run, EventType::StepCreated, Some("s1")),
            queued(&w, &run, EventType::StepStarted, Some("s1")),
            queued(&w, &run, EventType::StepCreated, Some("s1")),
            queued(&w, &run, EventType::RunCompleted, None),
            queued(&w, &run, EventType::StepCreated, Some("s2")),
        ];
        let slots: Vec<Slot> = members.iter().map(|m| m.slot.clone()).collect();
        let before = w.backend().commit_stats();
        let entry = w.entry(&runlog::RunId::new(&run).unwrap());
        {
            let _writer = entry.writer.lock();
            let _abort = AbortUnanswered::new(&members);
            w.commit_group(&entry, members);
        }
        let after = w.backend().commit_stats();
        let mut answers: Vec<_> = slots.iter().map(|s| s.take().unwrap()).collect();
        // Each answer is its member's, as of its own event: s1 pending, then running.
        let a0 = answers.remove(0).unwrap();
        assert_eq!(a0.event.as_ref().unwrap().seq, 3);
        assert_eq!(a0.step.as_ref().unwrap().status, StepStatus::Pending);
        let a1 = answers.remove(0).unwrap();
        assert_eq!(a1.event.as_ref().unwrap().seq, 4);
        assert_eq!(a1.step.as_ref().unwrap().status, StepStatus::Running);
        assert_eq!(a1.step.as_ref().unwrap().attempt, 1);
        // The duplicate step sees the member before it: a conflict, nothing written.
        assert_eq!(answers.remove(0).unwrap_err().status(), 409);
        let a3 = answers.remove(0).unwrap();
        assert_eq!(a3.event.as_ref().unwrap().seq, 5);
        assert_eq!(a3.run.as_ref().unwrap().status, RunStatus::Completed);
        // After the terminal member, creating a step is refused as on a completed run.
        let e4 = answers.remove(0).unwrap_err();
        assert!([409, 410].contains(&e4.status()), "{e4}");
        // One fenced batch of three events, one store commit.
        assert_eq!(
            (after.groups - before.groups, after.events - before.events),
            (1, 3)
        );
        assert_eq!(
            w.backend()
                .last_seq(&runlog::RunId::new(&run).unwrap())
                .unwrap(),
            5
        );
        // The cached fold is the committed state.
        let state = w.run_state(&run).unwrap();
        assert_eq!(state.seq(), 5);
        assert_eq!(state.run().unwrap().status, RunStatus::Completed);
    }
}
