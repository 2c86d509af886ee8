//! `runs.experimentalSetAttributes`: a run's attributes changed outside its event log.
//!
//! The reference (`@workflow/world-local` 5.0.0-beta.46) rewrites the run's file and writes no
//! event, also on a terminal run. Here the changes go to an attribute log of the run's own,
//! `attrs-<runId>` ([`crate::LogKind::Attributes`]), never to the run's log: an event there
//! would move the run's slots and `eventCount`, and the runtime's replay would meet an event
//! no workflow wrote. Each call is a decision: validated (`validateAttributeChanges` of
//! `@workflow/world`) against the run's attributes as the two logs hold them at the attribute
//! log's seq N, and appended fenced at N, so two writers cannot both pass the per-run limit;
//! a lost fence re-reads and re-validates ([`World::retry_fenced`]).
//!
//! A run's `attributes`, wherever the World returns the run, are the changes of both logs
//! in commit-time order (`created_at_ms`; on a tie the run's own log first): per key, the
//! latest change wins, as the reference's one run file gives. A run whose store holds no
//! attribute log keeps its own attributes as they are.

use std::collections::BTreeMap;

use bytes::Bytes;
use parking_lot::MutexGuard;
use runlog::{EventRef, NewEvent, RunId, RunLog};
use serde::Serialize;

use crate::attrs;
use crate::error::WorldError;
use crate::fenced::Attempted;
use crate::ids::now_ms;
use crate::incremental::{Folded, LogFold};
use crate::json::RawJson;
use crate::logs::ATTRIBUTE_LOG_PREFIX;
use crate::model::WorkflowRun;
use crate::world::{RunEntry, World};

/// The kind of every event of an attribute log.
const CHANGES_KIND: &str = "attributes_set";
/// Events read per batch while advancing an attribute log's fold.
const ADVANCE_BATCH: usize = 4096;

/// The id of `run`'s attribute log: `attrs-<runId>`.
pub(crate) fn attr_log_id(run: &RunId) -> RunId {
    RunId::new(format!("{ATTRIBUTE_LOG_PREFIX}{}", run.as_str()))
        .unwrap_or_else(|_| unreachable!("a wrun_<ULID> id with the prefix is a valid run id"))
}

/// One change of an attribute log: the value set (`None`: removed) and when.
#[derive(Clone, Debug)]
struct LastChange {
    at_ms: u64,
    value: Option<String>,
}

/// An attribute log folded (its seq kept by [`Folded`]): per key, its latest change.
#[derive(Clone, Debug, Default)]
pub(crate) struct AttrLog {
    last: BTreeMap<String, LastChange>,
    updated_at_ms: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ChangesRecord<'a> {
    changes: Vec<ChangeRecord<'a>>,
    allow_reserved_attributes: bool,
}

#[derive(Serialize)]
struct ChangeRecord<'a> {
    key: &'a str,
    value: Option<&'a str>,
}

#[derive(serde::Deserialize)]
struct StoredChanges {
    changes: Vec<crate::data::AttrChange>,
}

impl LogFold for AttrLog {
    /// Applies the log's next event (an event that is no change record, which a World never
    /// writes, changes nothing).
    fn apply(&mut self, e: &EventRef<'_>) {
        let parsed = (e.kind == CHANGES_KIND)
            .then(|| RawJson::from_bytes(e.payload).ok())
            .flatten()
            .and_then(|raw| serde_json::from_str::<StoredChanges>(raw.as_str()).ok());
        let Some(record) = parsed else {
            return;
        };
        for c in record.changes {
            let change = LastChange {
                at_ms: e.created_at_ms,
                value: c.value,
            };
            self.last.insert(c.key, change);
        }
        self.updated_at_ms = self.updated_at_ms.max(e.created_at_ms);
    }
}

impl AttrLog {
    /// `run` (as its own log holds it, whose keys were last changed at `run_changed_at_ms`)
    /// with this log's changes merged in commit-time order: a key's latest change wins, the
    /// run's own on a tie at the same ms applied first. `updatedAt` is the later of both.
    pub(crate) fn overlay(
        &self,
        run: &mut WorkflowRun,
        run_changed_at_ms: &crate::fold::ChangedAt,
    ) {
        for (key, change) in &self.last {
            if run_changed_at_ms
                .get(key)
                .is_some_and(|&at| at > change.at_ms)
            {
                continue;
            }
            match &change.value {
                Some(v) => {
                    run.attributes.insert(key.clone(), v.clone());
                }
                None => {
                    run.attributes.remove(key);
                }
            }
        }
        run.updated_at_ms = run.updated_at_ms.max(self.updated_at_ms);
    }
}

impl<B: RunLog> World<B> {
    /// `runs.experimentalSetAttributes(runId, changes, {allowReservedAttributes})`: applies
    /// `changes` (`(key, value)`, `None` removes the key) to the run's attributes and returns
    /// the attributes after them, as `runs.get` shows them from then on. Accepted on a run of
    /// any status, terminal included; nothing is written to the run's own log (its seqs,
    /// event ids and `eventCount` do not move). The changes are validated against the run's
    /// attributes as both of its logs hold them (see the module documentation).
    ///
    /// # Errors
    /// [`WorldError::RunNotFound`] (no `run_created`, or an id that is no `wrun_<ULID>`),
    /// checked first; [`WorldError::AttributeValidation`] for changes breaking the SDK's
    /// rules (nothing written); [`WorldError::Busy`] when other writers kept moving the
    /// attribute log for [`crate::WorldConfig::fence_retries_max`] attempts; storage errors.
    pub fn set_run_attributes(
        &self,
        run_id: &str,
        changes: &[(String, Option<String>)],
        allow_reserved: bool,
    ) -> Result<BTreeMap<String, String>, WorldError> {
        let run = self.run_id(run_id)?;
        let log = attr_log_id(&run);
        let entry = self.entry(&run);
        let record = ChangesRecord {
            changes: changes
                .iter()
                .map(|(key, value)| ChangeRecord {
                    key,
                    value: value.as_deref(),
                })
                .collect(),
            allow_reserved_attributes: allow_reserved,
        };
        let payload = Bytes::from(serde_json::to_vec(&record).unwrap_or_default());
        let _live = self.deletions.read();
        self.retry_fenced(log.as_str(), |_| {
            // The run's own log first, then the attribute log (the lock order of every read).
            let (own, changed_at) = self.own_run(&entry, &run)?;
            let mut current = own.clone();
            let mut attrs = self.attr_log(&entry, &run)?;
            attrs.overlay(&mut current, &changed_at);
            let pairs = changes.iter().map(|(k, v)| (k.as_str(), v.as_deref()));
            attrs::validate(pairs, &current.attributes, allow_reserved)?;
            if attrs.seq() == 0 {
                // No attribute log (yet, or any more): not one started again at seq 1 for a
                // run gc collected, which neither its archive nor a restore could take.
                if self.collected.is_collected(&self.backend, &run) {
                    return Err(WorldError::RunExpired {
                        run_id: run.to_string(),
                        message: format!(
                            "run {run} was collected by gc into its archive (runlog restore puts it back); its attributes take no changes"
                        ),
                    });
                }
                self.ensure_attr_log(&run, &log)?;
            }
            let event = NewEvent::new(CHANGES_KIND, payload.clone()).created_at_ms(now_ms());
            match self
                .backend
                .append_decisions(&log, attrs.seq(), vec![event.clone()])
            {
                Ok(_) => {
                    // Read back: the fold holds the change as stored.
                    self.advance_attr_log(&log, &mut attrs)?;
                    let mut after = own;
                    attrs.overlay(&mut after, &changed_at);
                    Ok(Attempted::Done(after.attributes))
                }
                Err(runlog::Error::Fenced { .. } | runlog::Error::RunNotFound { .. }) => {
                    *attrs = Folded::default();
                    Ok(Attempted::Fenced)
                }
                Err(e) => Err(WorldError::from(e)),
            }
        })
    }

    /// The run as its own log holds it and when that log last changed each attribute key.
    fn own_run(
        &self,
        entry: &RunEntry,
        run: &RunId,
    ) -> Result<(WorkflowRun, crate::fold::ChangedAt), WorldError> {
        let state = self.load(entry, run)?;
        let found = state
            .run()
            .cloned()
            .ok_or_else(|| WorldError::RunNotFound {
                run_id: run.to_string(),
            })?;
        Ok((found, state.attr_changed_at_ms().clone()))
    }

    /// Creates `run`'s attribute log if it does not exist yet.
    fn ensure_attr_log(&self, run: &RunId, log: &RunId) -> Result<(), WorldError> {
        let meta =
            serde_json::json!({ "source": "world", "kind": "attributes", "run": run.as_str() });
        Ok(crate::logs::ensure_log(
            &self.backend,
            log,
            meta.to_string().as_bytes(),
        )?)
    }

    /// `run`'s attribute log folded to its last committed event (empty when the store has
    /// none), folded afresh when the log is not the one the cached fold was read from
    /// ([`Folded::advance`]).
    ///
    /// # Errors
    /// Storage errors reading it.
    pub(crate) fn attr_log<'a>(
        &self,
        entry: &'a RunEntry,
        run: &RunId,
    ) -> Result<MutexGuard<'a, Folded<AttrLog>>, WorldError> {
        let mut folded = entry.attrs.lock();
        self.advance_attr_log(&attr_log_id(run), &mut folded)?;
        Ok(folded)
    }

    /// Advances `folded` to the last committed event of attribute log `log`; a log that is
    /// gone (or never made) leaves it empty, so that a new log starts from seq 1.
    fn advance_attr_log(
        &self,
        log: &RunId,
        folded: &mut Folded<AttrLog>,
    ) -> Result<(), WorldError> {
        match folded.advance(&self.backend, log, ADVANCE_BATCH) {
            Ok(()) | Err(runlog::Error::RunNotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `run`'s attribute log folded over its changes whose `createdAt` is at or before
    /// `until_ms` (empty when the store has none): the attribute log as it stood then, for
    /// [`World::run_at`]. Reads the whole log (a World writes it in commit-time order, but
    /// nothing here depends on that).
    ///
    /// # Errors
    /// Storage errors reading it.
    pub(crate) fn attr_log_until(&self, run: &RunId, until_ms: u64) -> Result<AttrLog, WorldError> {
        let log = attr_log_id(run);
        let mut folded = AttrLog::default();
        let mut after = 0;
        loop {
            let read = self
                .backend
                .read_each(&log, after, ADVANCE_BATCH, &mut |e| {
                    after = e.seq;
                    if e.created_at_ms <= until_ms {
                        folded.apply(&e);
                    }
                });
            match read {
                Ok((_, true)) => {}
                Ok((_, false)) | Err(runlog::Error::RunNotFound { .. }) => return Ok(folded),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sets `req.merged_attributes` for an `attr_set` (the run's attributes as `state` and
    /// the attribute log hold them, which its changes are validated against, so that the
    /// per-run limit counts both logs); nothing for other requests. The caller may hold the
    /// run's state lock (the attribute log's is taken after it).
    ///
    /// # Errors
    /// Storage errors reading the attribute log.
    pub(crate) fn merge_for_decision(
        &self,
        entry: &RunEntry,
        state: &crate::fold::RunState,
        req: &mut crate::rules::Checked,
    ) -> Result<(), WorldError> {
        if req.ty != crate::model::EventType::AttrSet {
            return Ok(());
        }
        req.merged_attributes = match state.run() {
            Some(own) => {
                let mut merged = own.clone();
                self.attr_log(entry, &req.run)?
                    .overlay(&mut merged, state.attr_changed_at_ms());
                Some(merged.attributes)
            }
            None => None,
        };
        Ok(())
    }

    /// `found` (`run` as its own log's fold holds it, whose keys changed at
    /// `run_changed_at_ms`) with its attribute log merged in: the one step from a run's
    /// fold to the run the World returns. `has_log: Some(false)` (a store-wide listing
    /// that saw no attribute log of the run) skips the read.
    ///
    /// # Errors
    /// Storage errors reading the attribute log.
    pub(crate) fn with_attr_log(
        &self,
        entry: &RunEntry,
        mut found: WorkflowRun,
        run_changed_at_ms: &crate::fold::ChangedAt,
        has_log: Option<bool>,
    ) -> Result<WorkflowRun, WorldError> {
        if has_log == Some(false) {
            return Ok(found);
        }
        let run = self.run_id(&found.run_id)?;
        self.attr_log(entry, &run)?
            .overlay(&mut found, run_changed_at_ms);
        Ok(found)
    }
}
