//! The storm: a deterministic simulated workflow engine over a real store directory that
//! shows, with numbers, that fenced runs never corrupt while unfenced ones do.
//!
//! Per run: R replaying invocations (threads, or one per worker process) drive the run with
//! the [replay driver](runlog::replay); step executors append `step_completed` facts, hook
//! senders append `hook_received` facts at random moments and a timer ends the sleep. With
//! `fenced: false` the replayers append their decisions as plain facts (no fence): the
//! baseline that must show corruption, proving the [detector](verdict) works.
//!
//! Everything random (workflow shapes, delays, jitter) comes from seeded RNGs, so a scenario
//! and seed reproduce the same workload; thread interleavings still vary run to run, which is
//! the point.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use runlog::Error;
use runlog::replay::{DriveError, Invocation, Outcome, ReplayConfig};

mod actors;
mod harness;
mod report;
pub mod verdict;
pub mod workflow;

pub use harness::{
    Launcher, Transport, WorkerSpec, open_storm_store, run_storm, run_storm_on, run_worker,
};
pub use report::{StormReport, render_table};

use verdict::{Classification, classify};
use workflow::{Params, WorkflowError, mix};

/// A selectable workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Wide fan-out with chains of follow-up steps; three executors race on completions.
    StepStorm,
    /// Few steps, many hooks with several receipts each from three racing senders.
    HookStorm,
    /// The step-storm workload with a single replaying invocation.
    Control,
}

impl Scenario {
    /// All scenarios.
    pub const ALL: [Scenario; 3] = [Scenario::StepStorm, Scenario::HookStorm, Scenario::Control];

    /// The CLI name (`step-storm`, `hook-storm`, `control`).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::StepStorm => "step-storm",
            Scenario::HookStorm => "hook-storm",
            Scenario::Control => "control",
        }
    }

    /// Replaying invocations per run: `requested` (at least 1), or 1 for `control`.
    pub fn replayers(self, requested: u32) -> u32 {
        match self {
            Scenario::Control => 1,
            _ => requested.max(1),
        }
    }

    /// The shape of run `index` under `seed`.
    pub fn params(self, seed: u64, index: u32) -> Params {
        let mut rng = StdRng::seed_from_u64(mix(seed, u64::from(index)));
        let salt = rng.random();
        match self {
            Scenario::StepStorm | Scenario::Control => Params {
                salt,
                fan_out: rng.random_range(4..=8),
                depth: rng.random_range(2..=3),
                hooks: rng.random_range(0..=1),
                receipts: rng.random_range(1..=2),
                sleep_ms: rng.random_range(1..=4),
            },
            Scenario::HookStorm => Params {
                salt,
                fan_out: rng.random_range(1..=2),
                depth: 1,
                hooks: rng.random_range(3..=5),
                receipts: rng.random_range(2..=4),
                sleep_ms: rng.random_range(1..=4),
            },
        }
    }

    fn executors(self) -> u32 {
        match self {
            Scenario::HookStorm => 2,
            _ => 3,
        }
    }

    fn hook_senders(self) -> u32 {
        match self {
            Scenario::HookStorm => 3,
            _ => 1,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;
    fn from_str(s: &str) -> Result<Scenario, String> {
        Scenario::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?} (step-storm, hook-storm, control)"))
    }
}

/// One storm: a scenario over `runs` runs in a fresh store directory (or a fresh PostgreSQL
/// schema, with `store`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StormConfig {
    /// Store directory (created if missing; must not hold another storm's runs). With `store`,
    /// it holds only the runner claims.
    pub dir: PathBuf,
    /// A PostgreSQL URL (`postgres://…?schema=NAME`, see [`crate::target::open`]) to run the
    /// storm on instead of the file store at `dir`; its schema must not hold another storm's
    /// runs. Worker processes open the same URL.
    #[serde(default)]
    pub store: Option<String>,
    /// The workload.
    pub scenario: Scenario,
    /// `false`: decisions are appended as plain facts (the corruption baseline).
    pub fenced: bool,
    /// Number of runs.
    pub runs: u32,
    /// Replaying invocations per run (see [`Scenario::replayers`]).
    pub replayers: u32,
    /// Runs driven at the same time.
    pub lanes: u32,
    /// Seed of every RNG.
    pub seed: u64,
    /// Replayers take the optional runner claim before each invocation.
    pub claim: bool,
    /// A run still incomplete this long after its replayers start is abandoned.
    pub run_deadline: Duration,
}

impl StormConfig {
    /// A config with the defaults: 20 runs × 8 replayers, 2 lanes, seed 1, fenced, no
    /// claim, a 30 s deadline per run.
    pub fn new(dir: impl Into<PathBuf>, scenario: Scenario) -> StormConfig {
        StormConfig {
            dir: dir.into(),
            store: None,
            scenario,
            fenced: true,
            runs: 20,
            replayers: 8,
            lanes: 2,
            seed: 1,
            claim: false,
            run_deadline: Duration::from_secs(30),
        }
    }
}

/// The replay settings of storm replayers: default budget, short backoffs (1 ms base,
/// 20 ms cap) so a storm finishes quickly.
pub fn storm_replay_config() -> ReplayConfig {
    ReplayConfig {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(20),
        ..ReplayConfig::default()
    }
}

/// Counters of the replaying invocations (summed over replayers, runs and processes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayStats {
    /// Invocations of the driver (or of the unfenced append path).
    pub invocations: u64,
    /// Invocations that appended their batch.
    pub committed: u64,
    /// Invocations with nothing to decide.
    pub idle: u64,
    /// Invocations that adopted another invocation's decisions after a rejection.
    pub adopted: u64,
    /// Invocations that ended in `Requeue`.
    pub requeues: u64,
    /// Fenced rejections.
    pub rejections: u64,
    /// Rejections of batches that would have been wrong where they would have landed.
    pub true_positives: u64,
    /// Rejections of batches that would still have been right.
    pub false_positives: u64,
    /// Rejections that could not be classified (should stay 0).
    pub unclassified: u64,
    /// Invocations by the number of rejections each saw.
    pub restarts: BTreeMap<u32, u64>,
    /// Invocations skipped because another held the runner claim.
    pub claim_skips: u64,
    /// Errors of replayers and fact writers (should stay 0).
    pub errors: u64,
    /// The first error, for the report.
    pub first_error: Option<String>,
}

impl ReplayStats {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: ReplayStats) {
        self.invocations += other.invocations;
        self.committed += other.committed;
        self.idle += other.idle;
        self.adopted += other.adopted;
        self.requeues += other.requeues;
        self.rejections += other.rejections;
        self.true_positives += other.true_positives;
        self.false_positives += other.false_positives;
        self.unclassified += other.unclassified;
        for (k, v) in other.restarts {
            *self.restarts.entry(k).or_default() += v;
        }
        self.claim_skips += other.claim_skips;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Counts an error.
    pub fn error(&mut self, e: impl fmt::Display) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }

    /// Counts one invocation; classifies its rejections against `log` (which must hold the
    /// run up to the last rejection's `actual` seq).
    fn record(&mut self, inv: &Invocation, log: &[runlog::Event]) {
        self.invocations += 1;
        match inv.outcome {
            Outcome::Committed { .. } => self.committed += 1,
            Outcome::Idle { .. } => self.idle += 1,
            Outcome::Adopted { .. } => self.adopted += 1,
            Outcome::Requeue { .. } => self.requeues += 1,
        }
        let seen = u32::try_from(inv.rejections.len()).unwrap_or(u32::MAX);
        *self.restarts.entry(seen).or_default() += 1;
        for r in &inv.rejections {
            self.rejections += 1;
            match classify(log, r.actual, &r.decisions) {
                Classification::TruePositive => self.true_positives += 1,
                Classification::FalsePositive => self.false_positives += 1,
                Classification::Unclassified => self.unclassified += 1,
            }
        }
    }
}

/// Why a storm could not run (the verdicts themselves are in the report, not errors).
#[derive(Debug, thiserror::Error)]
pub enum StormError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] Error),
    /// The workflow could not read a log.
    #[error("workflow: {0}")]
    Workflow(#[from] WorkflowError),
    /// A worker process failed to start, exited non-zero or printed no report.
    #[error("storm worker {worker}: {detail}")]
    Worker {
        /// The worker index.
        worker: u32,
        /// What went wrong.
        detail: String,
    },
}

impl From<DriveError<WorkflowError>> for StormError {
    fn from(e: DriveError<WorkflowError>) -> StormError {
        match e {
            DriveError::Store(e) => StormError::Store(e),
            DriveError::Derive(e) => StormError::Workflow(e),
        }
    }
}
