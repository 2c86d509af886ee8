//! The World's fenced retry: every write of the World is decided against a log as it
//! reads it at seq N and appended fenced at N; a lost fence (the log moved) means the
//! decision is discarded, the log read again and the write decided again. The loop is the
//! crate's one ([`crate::fenced::retry`], shared with streams); this module gives it the
//! World's budget and backoff and answers a spent budget with `Busy`. `events.create` alone
//! ([`World::commit_one`]) and as a group (`group.rs`), the attribute log (`attr_log.rs`),
//! and the hook token claims log (`tokens.rs`: claim, release, rebuild) each give it one
//! attempt as a closure.
//!
//! The budget is [`WorldConfig::fence_retries_max`] attempts per call; past it the caller
//! gets [`WorldError::Busy`] naming the contested log and the attempts made. The backoff
//! between attempts is the core's ([`runlog::replay::backoff`]: exponential, full jitter,
//! capped) with a [`ReplayConfig`] derived from the World's config
//! ([`backoff_config`]), after [`IMMEDIATE_RETRIES`](fenced::IMMEDIATE_RETRIES) attempts that retry at
//! once.
//!
//! # Why not `runlog::replay::Driver`
//! The driver's shape is the durable-workflow invocation, and the World's loop does not fit
//! it at four points, so only its backoff policy is shared:
//! - **What a decision reads.** `Driver::drive` derives from `&[Event]`, a full in-memory copy
//!   of the log ([`runlog::replay::ReplayLog`]). The World decides on its cached fold of the
//!   run (`RunState`, advanced by the delta), shared by every request to the run; holding
//!   each run's events as well would double its memory for nothing the rules read.
//! - **What a decision is.** The driver's `derive` returns the events to append and nothing
//!   else; an empty batch ends the invocation `Idle`. A World decision is a `Plan` (the
//!   primary event, the token releases, a claim) whose answer is built from the fold, or a
//!   `Done` answer (an idempotent request: nothing to append, a stored event to return).
//! - **A write between decide and append.** A `hook_created` first claims its token in
//!   another log (the claims log, itself fenced), and the claim's outcome may turn the plan
//!   into a `hook_conflict`; the driver goes straight from `derive` to the append.
//! - **Re-mints and the budget's end.** A World-minted event id meeting another writer's
//!   (`DuplicateEventId` from the rules, `DuplicateDecision` from the store) is minted
//!   afresh and the attempt made again at once; the driver ends the invocation with that
//!   store error. And the driver's spent budget is `Outcome::Requeue` (a queue message
//!   carrying the restart count); the World has no queue: its caller gets `Busy` (503,
//!   retryable) after the in-process attempts.
//!
//! The driver stays where it is used: the storm (`runlog-cli`) and `examples/job_runner.rs`.

use std::time::Duration;

use runlog::RunLog;
use runlog::replay::ReplayConfig;

use super::{ADVANCE_BATCH, World, WorldConfig};
use crate::error::WorldError;
use crate::fenced::{self, Attempt, Attempted};

/// The first backoff's ceiling (attempt `IMMEDIATE_RETRIES + 1`); doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_micros(200);

/// The largest backoff between two attempts.
const BACKOFF_MAX: Duration = Duration::from_millis(4);

/// The core's backoff settings for the World's fenced retries: every restart is in process
/// (`restarts_max` is the World's whole budget), 200 µs doubling to at most 4 ms.
pub(crate) fn backoff_config(config: &WorldConfig) -> ReplayConfig {
    ReplayConfig {
        restarts_max: config.fence_retries_max,
        backoff_base: BACKOFF_BASE,
        backoff_max: BACKOFF_MAX,
        read_page_events_max: ADVANCE_BATCH,
    }
}

impl<B: RunLog> World<B> {
    /// Runs `attempt` until it is [`Attempted::Done`], at most
    /// [`WorldConfig::fence_retries_max`] times, sleeping the core's backoff after each lost
    /// fence past the first [`IMMEDIATE_RETRIES`](fenced::IMMEDIATE_RETRIES).
    ///
    /// # Errors
    /// The first error of `attempt`; [`WorldError::Busy`] naming `log_id` when no attempt
    /// was done.
    pub(crate) fn retry_fenced<T>(
        &self,
        log_id: &str,
        attempt: impl FnMut(Attempt) -> Result<Attempted<T>, WorldError>,
    ) -> Result<T, WorldError> {
        self.run_fenced(attempt)?.ok_or_else(|| self.busy(log_id))
    }

    /// [`World::retry_fenced`] for a caller that answers the spent budget itself (a group
    /// answers each member): `Ok(None)` when no attempt was done.
    ///
    /// # Errors
    /// The first error of `attempt`.
    pub(crate) fn run_fenced<T, E>(
        &self,
        attempt: impl FnMut(Attempt) -> Result<Attempted<T>, E>,
    ) -> Result<Option<T>, E> {
        fenced::retry(self.config.fence_retries_max, Some(&self.backoff), attempt)
    }

    /// [`WorldError::Busy`] for `log_id` after the whole budget.
    pub(crate) fn busy(&self, log_id: &str) -> WorldError {
        WorldError::Busy {
            run_id: log_id.to_string(),
            attempts: self.config.fence_retries_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::{Config, Store};

    fn world(fence_retries_max: u32) -> (tempfile::TempDir, World<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let config = WorldConfig {
            fence_retries_max,
            ..WorldConfig::default()
        };
        (dir, World::new(store, config))
    }

    #[test]
    fn lost_fences_are_retried_until_done_and_counted() {
        let (_d, w) = world(10);
        let mut seen = Vec::new();
        let answer = w.retry_fenced("wrun_x", |a| {
            seen.push((a.number, a.is_last()));
            Ok(match a.number {
                1 | 2 => Attempted::Fenced,
                3 => Attempted::Again,
                _ => Attempted::Done("won"),
            })
        });
        assert_eq!(answer.unwrap(), "won");
        assert_eq!(seen, [(1, false), (2, false), (3, false), (4, false)]);
    }

    #[test]
    fn a_spent_budget_is_busy_with_every_attempt_counted() {
        let (_d, w) = world(7);
        let mut calls = 0;
        let e = w
            .retry_fenced("wrun_y", |a| {
                calls += 1;
                assert_eq!(a.is_last(), calls == 7);
                Ok::<Attempted<()>, _>(Attempted::Fenced)
            })
            .unwrap_err();
        assert_eq!(calls, 7);
        assert!(
            matches!(&e, WorldError::Busy { run_id, attempts: 7 } if run_id == "wrun_y"),
            "{e:?}"
        );
    }

    #[test]
    fn an_attempts_error_ends_the_retry_at_once() {
        let (_d, w) = world(5);
        let mut calls = 0;
        let e = w
            .retry_fenced("wrun_z", |_| -> Result<Attempted<()>, WorldError> {
                calls += 1;
                Err(WorldError::RunNotFound {
                    run_id: "wrun_z".into(),
                })
            })
            .unwrap_err();
        assert_eq!(calls, 1);
        assert!(matches!(e, WorldError::RunNotFound { .. }), "{e:?}");
    }

    #[test]
    fn the_backoff_is_the_cores_with_the_worlds_budget() {
        let config = WorldConfig {
            fence_retries_max: 42,
            ..WorldConfig::default()
        };
        let replay = backoff_config(&config);
        assert_eq!(replay.restarts_max, 42);
        assert_eq!(
            (replay.backoff_base, replay.backoff_max),
            (Duration::from_micros(200), Duration::from_millis(4))
        );
        // The World's own copy is the derived one, its budget clamped to at least 1.
        let (_d, w) = world(0);
        assert_eq!(w.backoff, backoff_config(&w.config));
        assert_eq!(w.backoff.restarts_max, 1);
    }
}
