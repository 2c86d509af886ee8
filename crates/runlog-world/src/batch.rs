//! The members the 5.0.0-beta.37 `World` adds on slot runs (spec 6 and later):
//! `events.createBatch` (through the run's group commit: one fenced, atomic append), and the
//! reads `runs.getMany` and `runs.waitForTerminalStatus` (which waits on the run's log).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runlog::RunLog;

use crate::error::WorldError;
use crate::group::{AbortUnanswered, GROUP_MEMBERS_MAX, Queued, Slot};
use crate::ids;
use crate::model::{
    CreateEventParams, EventRequest, EventResult, EventType, ResolveData, WorkflowRun,
};
use crate::rules::Checked;
use crate::world::{World, not_found};

/// Events one `createBatch` takes at most (the runtime sends at most 32); a larger batch
/// is refused as a whole. At most one group commit's members, so a batch is one append.
pub const BATCH_EVENTS_MAX: usize = GROUP_MEMBERS_MAX;

/// Event types a batch may not carry (`Storage.events.createBatch` of `@workflow/world`
/// 5.0.0-beta.37): they need barriers (a hook token claim, the run's lifecycle, attributes)
/// a batch cannot express.
const NOT_BATCHABLE: [EventType; 6] = [
    EventType::RunCreated,
    EventType::RunStarted,
    EventType::RunCancelled,
    EventType::HookCreated,
    EventType::HookDisposed,
    EventType::AttrSet,
];

/// Refuses, as a whole, a batch the reference refuses: too many events, a type of
/// [`NOT_BATCHABLE`], or more than one event per entity other than `step_created` followed
/// by a `step_started` of the same step that carries no `input`.
fn check_batch(requests: &[EventRequest]) -> Result<(), WorldError> {
    if requests.len() > BATCH_EVENTS_MAX {
        return Err(WorldError::invalid(
            "events",
            format!(
                "{} events; a batch holds at most {BATCH_EVENTS_MAX}",
                requests.len()
            ),
        ));
    }
    let mut by_entity: HashMap<(&str, &str), Vec<(usize, &EventRequest)>> = HashMap::new();
    for (i, r) in requests.iter().enumerate() {
        let ty = r.event_type;
        if NOT_BATCHABLE.contains(&ty) {
            return Err(WorldError::invalid(
                format!("events[{i}].eventType"),
                format!("{ty} cannot be written in a batch"),
            ));
        }
        let kind = ty.as_str().split('_').next().unwrap_or_default();
        let corr = r.correlation_id.as_deref().unwrap_or_default();
        by_entity.entry((kind, corr)).or_default().push((i, r));
    }
    for ((kind, corr), events) in by_entity {
        match events.as_slice() {
            [_] => {}
            [(_, a), (i, b)]
                if a.event_type == EventType::StepCreated
                    && b.event_type == EventType::StepStarted =>
            {
                if b.event_data
                    .as_ref()
                    .is_some_and(|d| carries_step_input(d.as_str()))
                {
                    return Err(WorldError::invalid(
                        format!("events[{i}].eventData.input"),
                        "a batched step_started creates its step running: the input rides the step_created, the step_started carries none",
                    ));
                }
            }
            _ => {
                return Err(WorldError::invalid(
                    "events",
                    format!(
                        "{} events target {kind} {corr:?}; a batch holds one per entity (or step_created + step_started of one step)",
                        events.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether a batched `step_started`'s data carries the step's payload (`input`, the one
/// member `@workflow/world`'s event metadata names for it), or is no object at all. The
/// runtime's born-running pair stamps its claim there (`stepName`, `ownerMessageId`), which
/// is no payload.
fn carries_step_input(data: &str) -> bool {
    serde_json::from_str::<crate::data::StepStartedData>(data).map_or(true, |d| d.input.is_some())
}

impl<B: RunLog> World<B> {
    /// `events.createBatch(runId, events, params)` on a slot run (spec ≥ 6): the events
    /// are decided in request order, each against the run's state advanced by the ones
    /// before it, and the accepted ones appended at consecutive seqs in one fenced, atomic,
    /// durable append (the run's group commit, `docs/WORLD.md` §2): a lost race re-decides
    /// the whole batch, so it never leaves part of itself behind. Returns one answer per
    /// event, in request order: its result, or the error its single `create` would have
    /// failed with (nothing of it written). A batch carries no `eventCount` and gets no
    /// skipped-event report.
    ///
    /// # Errors
    /// The batch as a whole, nothing written: [`WorldError::InvalidRequest`] for a batch
    /// the reference refuses (see [`BATCH_EVENTS_MAX`] and the types it may not carry) or
    /// a run of spec < 6; [`WorldError::RunNotFound`] (also for an id that is no
    /// `wrun_<ULID>`: no run can have it, as for every other write about a run); storage
    /// errors reading the run.
    pub fn create_batch(
        &self,
        run_id: &str,
        requests: Vec<EventRequest>,
        params: &CreateEventParams,
    ) -> Result<Vec<Result<EventResult, WorldError>>, WorldError> {
        check_batch(&requests)?;
        let run = self.run_id(run_id)?;
        let entry = self.entry(&run);
        {
            let state = self.load(&entry, &run)?;
            if state.run().is_none() {
                return Err(WorldError::RunNotFound {
                    run_id: run_id.to_string(),
                });
            }
            if !ids::uses_slot_ids(state.spec_version()) {
                return Err(WorldError::invalid(
                    "runId",
                    format!(
                        "{run_id:?} is of spec version {:?}; createBatch is for runs of spec 6 and later",
                        state.spec_version()
                    ),
                ));
            }
        }
        let item_params = CreateEventParams {
            resolve_data: params.resolve_data,
            ..CreateEventParams::default()
        };
        let mut members = Vec::with_capacity(requests.len());
        let mut answers: Vec<Result<Slot, WorldError>> = Vec::with_capacity(requests.len());
        for r in requests {
            match Checked::new(Some(run_id), r, &item_params, &self.config) {
                Ok(req) => {
                    let slot: Slot = Arc::default();
                    members.push(Queued {
                        req,
                        params: item_params.clone(),
                        slot: slot.clone(),
                    });
                    answers.push(Ok(slot));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        if !members.is_empty() {
            // The batch is one group of its own: no request queued by another caller
            // lands between its events.
            let writer = entry.writer.lock();
            let abort = AbortUnanswered::new(&members);
            self.commit_group(&entry, members);
            drop(abort);
            drop(writer);
            if let Some(next) = entry.queue.lock().first() {
                next.slot.nudge();
            }
        }
        Ok(answers
            .into_iter()
            .map(|a| {
                a.and_then(|slot| {
                    slot.take().unwrap_or_else(|| {
                        Err(WorldError::GroupAborted {
                            run_id: run_id.to_string(),
                        })
                    })
                })
                .and_then(|result| self.result_attributes(&entry, result))
            })
            .collect())
    }

    /// `runs.getMany(ids, {resolveData})`: each run as `runs.get` returns it, `None` for a
    /// run that does not exist, in input order.
    ///
    /// # Errors
    /// Storage errors (a run whose log cannot be read to its end fails the call, as
    /// `runs.get` of it does). An id that is no `wrun_<ULID>` names no run: `None`.
    pub fn get_runs(
        &self,
        run_ids: &[String],
        resolve: ResolveData,
    ) -> Result<Vec<Option<WorkflowRun>>, WorldError> {
        run_ids
            .iter()
            .map(|id| match self.get_run(id, resolve) {
                Ok(run) => Ok(Some(run)),
                Err(WorldError::RunNotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            })
            .collect()
    }

    /// `runs.waitForTerminalStatus(id, {timeoutMs, resolveData})`: the run once it is
    /// terminal, or as it is when `timeout` passes (never an error on timeout). Waits on
    /// the run's log (`RunLog::wait`: woken by commits in this process, the counter polled
    /// for other processes'), never by re-reading the run.
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] as `runs.get` (an id that is no `wrun_<ULID>` too);
    /// storage errors.
    pub fn wait_for_terminal_run(
        &self,
        run_id: &str,
        timeout: Duration,
        resolve: ResolveData,
    ) -> Result<WorkflowRun, WorldError> {
        let deadline = Instant::now() + timeout;
        let run = self.run_id(run_id)?;
        loop {
            let entry = self.entry(&run);
            let (found, seq) = {
                let state = self.load(&entry, &run)?;
                (state.run().cloned(), state.seq())
            };
            let found = found.ok_or_else(|| WorldError::RunNotFound {
                run_id: run_id.to_string(),
            })?;
            let now = Instant::now();
            if found.status.is_terminal() || now >= deadline {
                // The run as `runs.get` gives it (attributes of both logs merged, data
                // resolved as asked); its error, if any, is the caller's, never hidden
                // behind the fold's unmerged copy.
                return self.get_run(run_id, resolve);
            }
            self.backend
                .wait(&run, seq, deadline - now)
                .map_err(|e| not_found(&run, e))?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ty: EventType, corr: &str) -> EventRequest {
        EventRequest::new(ty).correlation_id(corr)
    }

    #[test]
    fn batch_shapes_the_reference_refuses_are_refused_whole() {
        let ok = [
            req(EventType::StepCreated, "s1"),
            req(EventType::StepStarted, "s1"),
            req(EventType::WaitCreated, "w1"),
        ];
        assert!(check_batch(&ok).is_ok());
        for ty in NOT_BATCHABLE {
            assert!(check_batch(&[req(ty, "x")]).is_err(), "{ty}");
        }
        let twice = [
            req(EventType::StepCreated, "s1"),
            req(EventType::StepCreated, "s1"),
        ];
        assert!(check_batch(&twice).is_err());
        let reversed = [
            req(EventType::StepStarted, "s1"),
            req(EventType::StepCreated, "s1"),
        ];
        assert!(check_batch(&reversed).is_err());
        let with_payload = [
            req(EventType::StepCreated, "s1"),
            req(EventType::StepStarted, "s1")
                .data(r#"{"stepName":"step//./wf//add","input":[1,2]}"#)
                .unwrap(),
        ];
        assert!(check_batch(&with_payload).is_err());
        let not_an_object = [
            req(EventType::StepCreated, "s1"),
            req(EventType::StepStarted, "s1").data("[1]").unwrap(),
        ];
        assert!(check_batch(&not_an_object).is_err());
        // The runtime's born-running pair (two or more inline steps of one suspension):
        // the started row stamps the claim, which is no payload.
        let claimed = [
            req(EventType::StepCreated, "s1"),
            req(EventType::StepStarted, "s1")
                .data(r#"{"stepName":"step//./wf//add","ownerMessageId":"msg_01"}"#)
                .unwrap(),
        ];
        assert!(check_batch(&claimed).is_ok());
        let too_many: Vec<_> = (0..=BATCH_EVENTS_MAX)
            .map(|i| req(EventType::WaitCreated, &format!("w{i}")))
            .collect();
        assert!(check_batch(&too_many).is_err());
    }
}
