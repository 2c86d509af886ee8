//! The replay driver: drives one decision step of a run the way a durable workflow engine
//! must when several invocations may replay the same run at once.
//!
//! One call of [`Driver::drive`] is one invocation:
//!
//! 1. load the log — only the delta above what the caller's [`ReplayLog`] already holds,
//!    complete by density (rule 6 of INVARIANTS.md);
//! 2. call the caller's deterministic `derive(&log) -> decisions`;
//! 3. append them fenced at `expected_seq = loaded length` ([`Store::append_decisions`]);
//! 4. on [`Error::Fenced`]: **discard** the derived decisions (they are never re-posted),
//!    load the delta, derive again on the longer log and retry. When the longer log needs
//!    nothing more (another invocation already appended what this one would decide), the
//!    invocation ends with [`Outcome::Adopted`]: the winner's decisions stand.
//!
//! Restarts are bounded ([`ReplayConfig::restarts_max`], default 3) by a budget that spans
//! invocations: the caller passes the restart count it got back from its previous invocation
//! (carried in its queue message) and only the remainder of the budget is spent in-process.
//! Past it the invocation returns [`Outcome::Requeue`] with the new count and a non-zero,
//! exponential, full-jitter, capped backoff ([`backoff`]), so a persistent conflict can never
//! turn into a zero-delay loop.
//!
//! [`RunnerClaim`] is optional admission control: a best-effort, per-run kernel advisory lock
//! so that usually one invocation replays a run at a time. The fence stays the correctness
//! mechanism; a claim only saves wasted derivations.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::backend::RunLog;
use crate::error::{Error, Result};
use crate::event::{Event, NewEvent, RunId, Seq};
use crate::store::Store;

/// Directory, inside the store directory, holding the runner claim files.
pub const CLAIMS_DIR: &str = "claims";

/// Settings of the replay driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Restart budget (fenced rejections answered by an in-process re-derive), counted
    /// across invocations through the carried count (default 3).
    pub restarts_max: u32,
    /// Backoff ceiling for the first requeue; doubles per restart (default 10 ms).
    pub backoff_base: Duration,
    /// Largest backoff ceiling (default 5 s).
    pub backoff_max: Duration,
    /// Events per read page while loading the log (default 1024; 0 counts as 1).
    pub read_page_events_max: usize,
}

impl Default for ReplayConfig {
    fn default() -> ReplayConfig {
        ReplayConfig {
            restarts_max: 3,
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_secs(5),
            read_page_events_max: 1024,
        }
    }
}

/// The caller's copy of a run's log: events `1..=last_seq`, dense. Keep it across
/// invocations to load only the delta.
#[derive(Clone, Debug)]
pub struct ReplayLog {
    run: RunId,
    events: Vec<Event>,
}

impl ReplayLog {
    /// An empty copy of `run`'s log (nothing loaded yet).
    pub fn new(run: RunId) -> ReplayLog {
        ReplayLog {
            run,
            events: Vec::new(),
        }
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The loaded events, seq 1 first.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The last loaded seq (0 when nothing is loaded): the log length.
    pub fn last_seq(&self) -> Seq {
        self.events.len() as Seq
    }

    /// Loads every event committed above [`ReplayLog::last_seq`], page by page of
    /// `page_len` events, checking that each continues the log densely. Returns how many
    /// events were added.
    ///
    /// # Errors
    /// The errors of [`Store::read`]; [`Error::Corrupt`] if a page does not continue the log
    /// densely (the store checks this too; this is the reader's paired assertion).
    pub fn catch_up<L: RunLog + ?Sized>(&mut self, store: &L, page_len: usize) -> Result<usize> {
        let before = self.events.len();
        loop {
            let page = store.read(&self.run, self.last_seq(), page_len.max(1))?;
            for ev in page.events {
                let want = self.last_seq() + 1;
                if ev.seq != want {
                    let detail = format!("read returned seq {} where {want} was due", ev.seq);
                    return Err(Error::corrupt(self.run.as_str(), "(read)", 0, detail));
                }
                self.events.push(ev);
            }
            if !page.has_more {
                return Ok(self.events.len() - before);
            }
        }
    }
}

/// A fenced rejection seen by an invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The log length the rejected batch was derived from.
    pub expected: Seq,
    /// The run's last seq when the store rejected it.
    pub actual: Seq,
    /// The discarded batch (never re-posted).
    pub decisions: Vec<NewEvent>,
}

/// How an invocation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// This invocation's batch was committed at `first_seq..=last_seq`.
    Committed {
        /// Seq of the batch's first event.
        first_seq: Seq,
        /// Seq of the batch's last event.
        last_seq: Seq,
    },
    /// `derive` had nothing to decide on the first look at the log.
    Idle {
        /// The log length derived from.
        last_seq: Seq,
    },
    /// After at least one rejection, the longer log needed nothing more: another
    /// invocation already decided, and its decisions stand.
    Adopted {
        /// The log length derived from.
        last_seq: Seq,
    },
    /// The restart budget is spent: put the work back on the queue, carrying `restarts`
    /// to the next invocation, not before `backoff` (always > 0). The work is still to do:
    /// run it again after the backoff even if the log has not grown since (a caller that
    /// only wakes on growth would strand the run).
    Requeue {
        /// Restarts so far, including the carried count; pass it to the next invocation.
        restarts: u32,
        /// Delay before the next invocation.
        backoff: Duration,
    },
}

/// What one invocation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// How it ended.
    pub outcome: Outcome,
    /// Every fenced rejection it saw, in order (empty for a clean commit).
    pub rejections: Vec<Rejection>,
}

/// An invocation failed for a reason other than a fenced rejection.
#[derive(Debug, thiserror::Error)]
pub enum DriveError<E: std::error::Error + 'static> {
    /// The store failed (read or append); nothing of this invocation is half-written.
    #[error(transparent)]
    Store(#[from] Error),
    /// The caller's `derive` failed.
    #[error("derive failed: {0}")]
    Derive(#[source] E),
}

/// The backoff before requeued invocation number `restarts`: uniform in
/// `(0, min(backoff_max, backoff_base · 2^(restarts-1))]` at microsecond resolution (full
/// jitter), never zero even if the configured durations are.
pub fn backoff<R: Rng + ?Sized>(config: &ReplayConfig, restarts: u32, rng: &mut R) -> Duration {
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    let exponent = restarts.saturating_sub(1).min(63);
    let ceiling = micros(config.backoff_base)
        .saturating_mul(1u64 << exponent)
        .min(micros(config.backoff_max));
    Duration::from_micros(rng.random_range(1..=ceiling))
}

/// [`backoff`] drawn from the calling thread's generator (seeded from the OS), for a caller
/// that retries in process and keeps no generator of its own (the World's fenced retries).
pub fn thread_backoff(config: &ReplayConfig, restarts: u32) -> Duration {
    backoff(config, restarts, &mut rand::rng())
}

/// Drives decision steps against one backend (any [`RunLog`]; the file [`Store`] by
/// default). Holds the jitter RNG; one per worker thread.
#[derive(Debug)]
pub struct Driver<L: RunLog = Store> {
    store: L,
    config: ReplayConfig,
    rng: StdRng,
}

impl<L: RunLog> Driver<L> {
    /// A driver whose backoff jitter is seeded from the OS.
    pub fn new(store: L, config: ReplayConfig) -> Driver<L> {
        Driver::with_rng(store, config, StdRng::from_os_rng())
    }

    /// A driver with a reproducible jitter sequence.
    pub fn with_seed(store: L, config: ReplayConfig, seed: u64) -> Driver<L> {
        Driver::with_rng(store, config, StdRng::seed_from_u64(seed))
    }

    fn with_rng(store: L, config: ReplayConfig, rng: StdRng) -> Driver<L> {
        Driver { store, config, rng }
    }

    /// The settings in force.
    pub fn config(&self) -> &ReplayConfig {
        &self.config
    }

    /// One invocation for `log`'s run (see the module docs). `carried_restarts` is the
    /// `restarts` of the caller's previous [`Outcome::Requeue`] for this work, or 0.
    /// `derive` must be deterministic: the same log gives the same batch; an empty batch
    /// means nothing to decide.
    ///
    /// On return `log` holds at least the log the last derivation saw; a committed batch is
    /// not added to it (the next call loads it with the delta).
    ///
    /// # Errors
    /// [`DriveError::Store`] for any store error other than [`Error::Fenced`] (for example
    /// [`Error::DuplicateDecision`] or [`Error::Busy`]); [`DriveError::Derive`] when `derive`
    /// fails.
    pub fn drive<F, E>(
        &mut self,
        log: &mut ReplayLog,
        carried_restarts: u32,
        mut derive: F,
    ) -> std::result::Result<Invocation, DriveError<E>>
    where
        F: FnMut(&[Event]) -> std::result::Result<Vec<NewEvent>, E>,
        E: std::error::Error + 'static,
    {
        let budget = self.config.restarts_max.saturating_sub(carried_restarts);
        let page_len = self.config.read_page_events_max;
        let mut rejections = Vec::new();
        log.catch_up(&self.store, page_len)?;
        loop {
            let decisions = derive(log.events()).map_err(DriveError::Derive)?;
            let last_seq = log.last_seq();
            if decisions.is_empty() {
                let outcome = match rejections.is_empty() {
                    true => Outcome::Idle { last_seq },
                    false => Outcome::Adopted { last_seq },
                };
                return Ok(Invocation {
                    outcome,
                    rejections,
                });
            }
            let rejection = match self.append(log.run(), last_seq, decisions)? {
                Ok(outcome) => {
                    return Ok(Invocation {
                        outcome,
                        rejections,
                    });
                }
                Err(rejection) => rejection,
            };
            rejections.push(rejection);
            let spent = u32::try_from(rejections.len()).unwrap_or(u32::MAX);
            if spent > budget {
                let restarts = carried_restarts.saturating_add(spent);
                let backoff = backoff(&self.config, restarts, &mut self.rng);
                let outcome = Outcome::Requeue { restarts, backoff };
                return Ok(Invocation {
                    outcome,
                    rejections,
                });
            }
            log.catch_up(&self.store, page_len)?;
        }
    }

    /// One fenced append: `Ok(Ok(Committed))`, `Ok(Err(rejection))` on [`Error::Fenced`].
    fn append(
        &self,
        run: &RunId,
        expected: Seq,
        decisions: Vec<NewEvent>,
    ) -> Result<std::result::Result<Outcome, Rejection>> {
        match self
            .store
            .append_decisions(run, expected, decisions.clone())
        {
            Ok(seqs) => {
                let first_seq = seqs.first().copied().unwrap_or(expected);
                let last_seq = seqs.last().copied().unwrap_or(expected);
                Ok(Ok(Outcome::Committed {
                    first_seq,
                    last_seq,
                }))
            }
            Err(Error::Fenced { actual, .. }) => Ok(Err(Rejection {
                expected,
                actual,
                decisions,
            })),
            Err(e) => Err(e),
        }
    }
}

/// A held runner claim: an exclusive kernel advisory lock (`flock`) on
/// `<store>/claims/<run>.lock`. Released when dropped or when the holding process dies;
/// never stolen, never waited for.
#[derive(Debug)]
pub struct RunnerClaim {
    _file: File,
    path: PathBuf,
}

impl RunnerClaim {
    /// Tries to claim `run` of the store at `store_dir` without waiting. `Ok(None)` when
    /// another invocation (in any process) holds it.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::DiskFull`] when the claims directory or file cannot be
    /// created or locked.
    pub fn try_acquire(store_dir: &Path, run: &RunId) -> Result<Option<RunnerClaim>> {
        let dir = store_dir.join(CLAIMS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("creating", &dir, e))?;
        let path = dir.join(format!("{run}.lock"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("opening", &path, e))?;
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => Ok(Some(RunnerClaim { _file: file, path })),
            Err(fs4::TryLockError::WouldBlock) => Ok(None),
            Err(fs4::TryLockError::Error(e)) => Err(Error::io("locking", &path, e)),
        }
    }

    /// The claim file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Config;

    fn store() -> (tempfile::TempDir, Store, RunId) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let run = RunId::new("wrun_replay").unwrap();
        store.create_run(&run).unwrap();
        (dir, store, run)
    }

    fn kinds(store: &Store, run: &RunId) -> Vec<String> {
        let page = store.read(run, 0, 100).unwrap();
        page.events
            .into_iter()
            .map(|e| e.kind.to_string())
            .collect()
    }

    fn ev(kind: &str) -> NewEvent {
        NewEvent::new(kind, "")
    }

    /// Decides `step_<n>` where n is the log length, until the log holds `len` events.
    fn derive_up_to(len: usize) -> impl FnMut(&[Event]) -> Result<Vec<NewEvent>> {
        move |log: &[Event]| match log.len() < len {
            true => Ok(vec![ev(&format!("step_{}", log.len()))]),
            false => Ok(Vec::new()),
        }
    }

    #[test]
    fn commits_at_loaded_length() {
        let (_d, store, run) = store();
        store.append_facts(&run, vec![ev("a"), ev("b")]).unwrap();
        let mut driver = Driver::with_seed(store.clone(), ReplayConfig::default(), 1);
        let mut log = ReplayLog::new(run.clone());
        let inv = driver.drive(&mut log, 0, derive_up_to(3)).unwrap();
        let committed = Outcome::Committed {
            first_seq: 3,
            last_seq: 3,
        };
        assert_eq!(inv.outcome, committed);
        assert!(inv.rejections.is_empty());
        assert_eq!(log.last_seq(), 2);
        let inv = driver.drive(&mut log, 0, derive_up_to(3)).unwrap();
        assert_eq!(inv.outcome, Outcome::Idle { last_seq: 3 });
        assert_eq!(kinds(&store, &run), ["a", "b", "step_2"]);
    }

    #[test]
    fn fenced_batch_is_discarded_and_rederived_on_the_longer_log() {
        let (_d, store, run) = store();
        let mut driver = Driver::with_seed(store.clone(), ReplayConfig::default(), 1);
        let mut log = ReplayLog::new(run.clone());
        let other = store.clone();
        let mut calls = Vec::new();
        let inv = driver
            .drive(&mut log, 0, |events: &[Event]| {
                calls.push(events.len());
                if calls.len() == 1 {
                    other.append_facts(&run, vec![ev("fact")]).unwrap();
                    return Ok::<_, Error>(vec![ev("stale")]);
                }
                Ok(vec![ev("fresh")])
            })
            .unwrap();
        assert_eq!(calls, [0, 1]);
        assert_eq!(inv.rejections.len(), 1);
        assert_eq!(
            (inv.rejections[0].expected, inv.rejections[0].actual),
            (0, 1)
        );
        let committed = Outcome::Committed {
            first_seq: 2,
            last_seq: 2,
        };
        assert_eq!(inv.outcome, committed);
        assert_eq!(kinds(&store, &run), ["fact", "fresh"]);
    }

    #[test]
    fn winner_is_adopted_when_the_longer_log_needs_nothing() {
        let (_d, store, run) = store();
        let mut driver = Driver::with_seed(store.clone(), ReplayConfig::default(), 1);
        let mut log = ReplayLog::new(run.clone());
        let winner = store.clone();
        let inv = driver
            .drive(&mut log, 0, |events: &[Event]| {
                if events.is_empty() {
                    winner
                        .append_decisions(&run, 0, vec![ev("step_0")])
                        .unwrap();
                    return Ok::<_, Error>(vec![ev("step_0")]);
                }
                Ok(Vec::new())
            })
            .unwrap();
        assert_eq!(inv.outcome, Outcome::Adopted { last_seq: 1 });
        assert_eq!(inv.rejections.len(), 1);
        assert_eq!(kinds(&store, &run), ["step_0"]);
    }

    fn always_conflicting(
        store: &Store,
        run: &RunId,
    ) -> impl FnMut(&[Event]) -> Result<Vec<NewEvent>> {
        let (store, run) = (store.clone(), run.clone());
        move |_: &[Event]| {
            store.append_facts(&run, vec![ev("fact")]).unwrap();
            Ok(vec![ev("decision")])
        }
    }

    #[test]
    fn persistent_conflict_requeues_with_nonzero_backoff_and_carried_count() {
        let (_d, store, run) = store();
        let config = ReplayConfig::default();
        let mut driver = Driver::with_seed(store.clone(), config.clone(), 7);
        let mut log = ReplayLog::new(run.clone());
        let inv = driver
            .drive(&mut log, 0, always_conflicting(&store, &run))
            .unwrap();
        assert_eq!(inv.rejections.len(), 4);
        let Outcome::Requeue { restarts, backoff } = inv.outcome else {
            panic!("expected requeue, got {:?}", inv.outcome);
        };
        assert_eq!(restarts, 4);
        assert!(backoff > Duration::ZERO && backoff <= Duration::from_millis(80));
        let inv = driver
            .drive(&mut log, restarts, always_conflicting(&store, &run))
            .unwrap();
        assert_eq!(inv.rejections.len(), 1);
        assert!(matches!(inv.outcome, Outcome::Requeue { restarts: 5, .. }));
        assert!(!kinds(&store, &run).contains(&"decision".to_string()));
    }

    #[test]
    fn backoff_is_never_zero_and_never_above_the_cap() {
        let mut rng = StdRng::seed_from_u64(3);
        let config = ReplayConfig {
            backoff_base: Duration::ZERO,
            backoff_max: Duration::ZERO,
            ..ReplayConfig::default()
        };
        assert_eq!(backoff(&config, 0, &mut rng), Duration::from_micros(1));
        let config = ReplayConfig::default();
        for restarts in [1, 2, 10, 40, u32::MAX] {
            let ceiling = (config.backoff_base * 2u32.saturating_pow(restarts - 1).min(1 << 20))
                .min(config.backoff_max);
            for _ in 0..200 {
                let b = backoff(&config, restarts, &mut rng);
                assert!(b > Duration::ZERO && b <= ceiling, "{restarts}: {b:?}");
            }
        }
    }

    #[test]
    fn thread_backoff_doubles_its_ceiling_per_restart_up_to_the_cap() {
        let config = ReplayConfig {
            backoff_base: Duration::from_micros(200),
            backoff_max: Duration::from_millis(4),
            ..ReplayConfig::default()
        };
        for (restarts, ceiling_us) in [(1, 200), (2, 400), (5, 3200), (6, 4000), (60, 4000)] {
            let drawn: Vec<Duration> = (0..300)
                .map(|_| thread_backoff(&config, restarts))
                .collect();
            let ceiling = Duration::from_micros(ceiling_us);
            assert!(
                drawn.iter().all(|b| *b > Duration::ZERO && *b <= ceiling),
                "{restarts}"
            );
            // Full jitter: the draws spread over the range, not one value.
            assert!(
                drawn.iter().any(|b| *b > ceiling / 2),
                "{restarts}: {drawn:?}"
            );
            assert!(
                drawn.iter().any(|b| *b <= ceiling / 2),
                "{restarts}: {drawn:?}"
            );
        }
    }

    #[test]
    fn claim_is_exclusive_and_released_on_drop() {
        let (dir, _store, run) = store();
        let held = RunnerClaim::try_acquire(dir.path(), &run).unwrap().unwrap();
        assert!(held.path().ends_with("claims/wrun_replay.lock"));
        assert!(
            RunnerClaim::try_acquire(dir.path(), &run)
                .unwrap()
                .is_none()
        );
        drop(held);
        assert!(
            RunnerClaim::try_acquire(dir.path(), &run)
                .unwrap()
                .is_some()
        );
    }
}
