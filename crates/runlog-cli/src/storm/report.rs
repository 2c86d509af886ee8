//! The storm's report: verdict counts, replay counters, and the human table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::storm::verdict::{ProblemKind, RunVerdict};
use crate::storm::{ReplayStats, Scenario, StormConfig};

/// Corrupted runs quoted in a report.
const EXAMPLES_MAX: usize = 3;

/// The outcome of one storm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StormReport {
    /// The workload.
    pub scenario: Scenario,
    /// `threads` or `processes`.
    pub transport: String,
    /// Decisions were fenced (false: the unfenced baseline).
    pub fenced: bool,
    /// Replayers took the runner claim.
    pub claim: bool,
    /// Runs.
    pub runs: u32,
    /// Replaying invocations per run.
    pub replayers: u32,
    /// Seed.
    pub seed: u64,
    /// Runs that reached `run_completed`.
    pub completed: u32,
    /// Runs with at least one problem.
    pub corrupted: u32,
    /// Runs with at least one problem of each kind.
    pub problems: BTreeMap<ProblemKind, u32>,
    /// The first problem of the first few corrupted runs (`storm-00007: seq 12: ...`).
    pub examples: Vec<String>,
    /// Replay counters, including the rejection classification.
    pub replay: ReplayStats,
    /// Wall time of the whole storm, in milliseconds.
    pub elapsed_ms: u64,
}

impl StormReport {
    pub(crate) fn new(
        config: &StormConfig,
        transport: &str,
        replay: ReplayStats,
        verdicts: &[RunVerdict],
        elapsed: Duration,
    ) -> StormReport {
        let mut problems = BTreeMap::new();
        let mut examples = Vec::new();
        for (index, v) in verdicts.iter().enumerate() {
            let kinds: std::collections::BTreeSet<ProblemKind> =
                v.problems.iter().map(|p| p.kind).collect();
            for kind in kinds {
                *problems.entry(kind).or_default() += 1;
            }
            if let Some(p) = v.problems.first().filter(|_| examples.len() < EXAMPLES_MAX) {
                examples.push(format!("storm-{index:05}: seq {}: {}", p.seq, p.detail));
            }
        }
        let count = |f: fn(&RunVerdict) -> bool| verdicts.iter().filter(|v| f(v)).count() as u32;
        StormReport {
            scenario: config.scenario,
            transport: transport.to_string(),
            fenced: config.fenced,
            claim: config.claim,
            runs: config.runs,
            replayers: config.scenario.replayers(config.replayers),
            seed: config.seed,
            completed: count(|v| v.completed),
            corrupted: count(RunVerdict::corrupted),
            problems,
            examples,
            replay,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Rejections whose batch would still have been right, over all classified rejections
    /// (`None` without rejections).
    pub fn false_positive_rate(&self) -> Option<f64> {
        let classified = self.replay.true_positives + self.replay.false_positives;
        (classified > 0).then(|| self.replay.false_positives as f64 / classified as f64)
    }

    /// Whether the storm showed what its mode promises. Fenced: every run completed, none
    /// corrupted, no errors, every rejection classified, and (except `control`) at least one
    /// rejection. Unfenced: no errors and (except `control`) at least one corrupted run.
    pub fn ok(&self) -> bool {
        let storm = self.scenario != Scenario::Control;
        let clean = self.replay.errors == 0;
        match self.fenced {
            true => {
                clean
                    && self.corrupted == 0
                    && self.completed == self.runs
                    && self.replay.unclassified == 0
                    && (!storm || self.replay.rejections > 0)
            }
            false => clean && (!storm || self.corrupted > 0),
        }
    }
}

fn restarts_cell(stats: &ReplayStats) -> String {
    let at = |k: u32| stats.restarts.get(&k).copied().unwrap_or(0);
    let more: u64 = stats.restarts.range(4..).map(|(_, v)| v).sum();
    format!("{}/{}/{}/{}/{}", at(0), at(1), at(2), at(3), more)
}

/// A Markdown table with one row per report.
pub fn render_table(reports: &[StormReport]) -> String {
    let mut out = String::from(
        "| scenario | transport | fence | runs × replayers | completed | corrupted | \
         rejections | true + | false + | FP rate | restarts 0/1/2/3/4+ | requeues | ok | time |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let fp = r
            .false_positive_rate()
            .map_or_else(|| "-".to_string(), |f| format!("{:.1} %", f * 100.0));
        let fence = match (r.fenced, r.claim) {
            (true, true) => "fenced+claim",
            (true, false) => "fenced",
            (false, _) => "unfenced",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {fence} | {} × {} | {} | {} | {} | {} | {} | {fp} | {} | {} | {} | {:.1} s |",
            r.scenario,
            r.transport,
            r.runs,
            r.replayers,
            r.completed,
            r.corrupted,
            r.replay.rejections,
            r.replay.true_positives,
            r.replay.false_positives,
            restarts_cell(&r.replay),
            r.replay.requeues,
            if r.ok() { "yes" } else { "NO" },
            r.elapsed_ms as f64 / 1000.0,
        );
    }
    out
}
