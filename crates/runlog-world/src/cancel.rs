//! `runs.cancelMany` of `@workflow/world` 5.0.0-beta.37 (`BulkCancelWorkflowRunsRequest`
//! → `BulkCancelWorkflowRunsResult`): one `run_cancelled` per live run, all queued at once so
//! that each run's write is one group commit, and one outcome per requested run id, in
//! request order.

use std::collections::HashSet;

use crate::data::CANCEL_REASON_LEN_MAX;
use crate::error::WorldError;
use crate::model::{CreateEventParams, EventRequest, EventType, ResolveData, RunStatus};
use crate::world::World;
use runlog::RunLog;

/// Run ids one `cancelMany` takes at most (`BULK_CANCEL_MAX_RUN_IDS` of `@workflow/world`
/// 5.0.0-beta.37); a larger request is refused as a whole.
pub const BULK_CANCEL_RUN_IDS_MAX: usize = 500;

/// What `cancelMany` did to one run (`BulkCancelWorkflowRunResult`'s `outcome`).
#[derive(Debug)]
pub enum CancelOutcome {
    /// This request moved the run to `cancelled` (its `run_cancelled` is in the log).
    Cancelled,
    /// The run was cancelled before this request; nothing was written.
    AlreadyCancelled,
    /// The run ended otherwise (`completed` or `failed`, the status given); nothing written.
    NotCancellable(RunStatus),
    /// No run has this id (also an id that is no `wrun_<ULID>`).
    NotFound,
    /// The cancellation failed with this error (a storage error, a run whose log cannot be
    /// read to its end); nothing of it was written.
    Failed(WorldError),
}

/// Refuses, as a whole, a request the SDK's `BulkCancelWorkflowRunsRequestSchema` refuses:
/// no run id, more than [`BULK_CANCEL_RUN_IDS_MAX`], an id twice, or a `cancelReason` over
/// [`CANCEL_REASON_LEN_MAX`] characters (UTF-16 units, as JavaScript counts).
fn check_request(run_ids: &[String], cancel_reason: Option<&str>) -> Result<(), WorldError> {
    if run_ids.is_empty() || run_ids.len() > BULK_CANCEL_RUN_IDS_MAX {
        return Err(WorldError::invalid(
            "runIds",
            format!(
                "{} run ids; a request holds 1 to {BULK_CANCEL_RUN_IDS_MAX}",
                run_ids.len()
            ),
        ));
    }
    let mut seen = HashSet::with_capacity(run_ids.len());
    if let Some(at) = run_ids.iter().position(|id| !seen.insert(id.as_str())) {
        return Err(WorldError::invalid(
            format!("runIds[{at}]"),
            "runIds must not contain duplicates",
        ));
    }
    let reason_len = cancel_reason.map_or(0, |r| r.encode_utf16().count());
    if reason_len > CANCEL_REASON_LEN_MAX {
        return Err(WorldError::invalid(
            "cancelReason",
            format!("{reason_len} characters > {CANCEL_REASON_LEN_MAX}"),
        ));
    }
    Ok(())
}

/// The outcome for a run found ended or missing instead of cancelled by this request;
/// `live` when it is found live after all.
fn settled(found: Result<RunStatus, WorldError>, live: CancelOutcome) -> CancelOutcome {
    match found {
        Ok(RunStatus::Cancelled) => CancelOutcome::AlreadyCancelled,
        Ok(status) if status.is_terminal() => CancelOutcome::NotCancellable(status),
        Ok(_) => live,
        Err(WorldError::RunNotFound { .. }) => CancelOutcome::NotFound,
        Err(e) => CancelOutcome::Failed(e),
    }
}

impl<B: RunLog> World<B> {
    /// `runs.cancelMany({runIds, cancelReason?})`: each live run gets the `run_cancelled`
    /// its single cancellation writes (`cancelRun` of `@workflow/core`: the run's own spec
    /// version, `eventData.cancelReason` when given), through the run's rules and group
    /// commit like any `events.create`; a run already ended or missing is reported and not
    /// written to. Returns one outcome per id, in request order.
    ///
    /// A run that another writer ends between the read and the write is classified by what
    /// the log then holds: cancelled by someone else is `AlreadyCancelled`, completed or
    /// failed is `NotCancellable`. A concurrent cancellation the rules answer as the
    /// idempotent re-cancel (nothing written) is reported `Cancelled`: the run is cancelled
    /// and holds exactly one `run_cancelled`.
    ///
    /// # Errors
    /// [`WorldError::InvalidRequest`] for a request refused as a whole (see
    /// `check_request`); nothing is written then. Per-run failures are outcomes.
    pub fn cancel_runs(
        &self,
        run_ids: &[String],
        cancel_reason: Option<&str>,
    ) -> Result<Vec<CancelOutcome>, WorldError> {
        check_request(run_ids, cancel_reason)?;
        let data = cancel_reason.map(|r| serde_json::json!({ "cancelReason": r }).to_string());
        let mut outcomes: Vec<CancelOutcome> = Vec::with_capacity(run_ids.len());
        let mut writes = Vec::new();
        let mut places = Vec::new();
        for id in run_ids {
            match self.get_run(id, ResolveData::None) {
                Ok(run) if !run.status.is_terminal() => {
                    let mut req = EventRequest::new(EventType::RunCancelled);
                    if let Some(v) = run.spec_version {
                        req = req.spec_version(v);
                    }
                    if let Some(d) = &data {
                        req = req.data(d)?;
                    }
                    places.push(outcomes.len());
                    // Replaced below by the write's answer.
                    outcomes.push(CancelOutcome::Cancelled);
                    writes.push((Some(id.clone()), req, CreateEventParams::default()));
                }
                // Ended or missing (`live` does not apply).
                found => outcomes.push(settled(found.map(|r| r.status), CancelOutcome::Cancelled)),
            }
        }
        let answers = self.create_events(writes);
        for (place, answer) in places.into_iter().zip(answers) {
            outcomes[place] = match answer {
                Ok(_) => CancelOutcome::Cancelled,
                // Ended (or gone) since it was read: say what the log holds now.
                Err(e @ (WorldError::EntityConflict { .. } | WorldError::RunNotFound { .. })) => {
                    let now = self.get_run(&run_ids[place], ResolveData::None);
                    settled(now.map(|r| r.status), CancelOutcome::Failed(e))
                }
                Err(e) => CancelOutcome::Failed(e),
            };
        }
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("wrun_{i}")).collect()
    }

    #[test]
    fn requests_the_sdk_schema_refuses_are_refused_whole() {
        assert!(check_request(&ids(1), None).is_ok());
        assert!(check_request(&ids(BULK_CANCEL_RUN_IDS_MAX), Some("why")).is_ok());
        for (run_ids, reason, field) in [
            (ids(0), None, "runIds"),
            (ids(BULK_CANCEL_RUN_IDS_MAX + 1), None, "runIds"),
            (
                vec!["wrun_a".into(), "wrun_b".into(), "wrun_a".into()],
                None,
                "runIds[2]",
            ),
        ] {
            match check_request(&run_ids, reason) {
                Err(WorldError::InvalidRequest { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{other:?}"),
            }
        }
        let long = "é".repeat(CANCEL_REASON_LEN_MAX + 1);
        assert!(check_request(&ids(1), Some(&"é".repeat(CANCEL_REASON_LEN_MAX))).is_ok());
        match check_request(&ids(1), Some(&long)) {
            Err(WorldError::InvalidRequest { field, .. }) => assert_eq!(field, "cancelReason"),
            other => panic!("{other:?}"),
        }
    }
}
