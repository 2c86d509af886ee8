//! Appends: the batch checked against the limits, then handed to group commit (`commit.rs`).

use runlog::group::{AppendKind, Outcome};
use runlog::{Appended, Error, NewEvent, Result, RunId, Seq};

use crate::PgLog;

/// The answer of a request of the other kind: unreachable by construction, reported as an
/// error rather than a panic.
fn mixed_up() -> Error {
    Error::InvalidConfig("group commit answered with the other request kind".to_string())
}

impl PgLog {
    /// Checks the batch against the limits; returns its payload bytes (what bounds a group).
    pub(crate) fn validate(&self, events: &[NewEvent]) -> Result<usize> {
        let o = &self.inner.options;
        if events.is_empty() || events.len() > o.batch_events_max {
            return Err(Error::InvalidEvent {
                field: "batch",
                reason: format!(
                    "{} events, allowed 1..={}",
                    events.len(),
                    o.batch_events_max
                ),
            });
        }
        for e in events {
            e.validate(o.payload_len_bytes_max)?;
        }
        Ok(events.iter().map(|e| e.payload.len()).sum())
    }
}

pub(crate) fn append_facts(
    log: &PgLog,
    run: &RunId,
    events: Vec<NewEvent>,
) -> Result<Vec<Appended>> {
    match log.submit(run, AppendKind::Facts, events)? {
        Outcome::Facts(out) => Ok(out),
        Outcome::Decisions(_) => Err(mixed_up()),
    }
}

pub(crate) fn append_decisions(
    log: &PgLog,
    run: &RunId,
    expected_seq: Seq,
    events: Vec<NewEvent>,
) -> Result<Vec<Seq>> {
    let kind = AppendKind::Decisions {
        expected: expected_seq,
    };
    match log.submit(run, kind, events)? {
        Outcome::Decisions(seqs) => Ok(seqs),
        Outcome::Facts(_) => Err(mixed_up()),
    }
}
