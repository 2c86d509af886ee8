//! The corruption detector and the classification of fenced rejections.
//!
//! A run is **corrupted** when any of these holds for its stored log:
//! - density fails (`seq[i] != i + 1`);
//! - `run_created` is not exactly the event at seq 1;
//! - an entity (step, hook, wait, or the run's terminal) is created twice;
//! - anything follows the terminal `run_completed`;
//! - a decision batch is torn (its marked events are not contiguous) or
//! - a decision batch differs from what [`derive()`] gives for the log prefix before it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::storm::workflow::{
    BatchMark, DECISION_KINDS, Decision, RUN_COMPLETED, RUN_CREATED, decode_decision, derive,
};
use runlog::{Event, NewEvent, Seq};

/// What is wrong with a run's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A seq is not its index + 1.
    Density,
    /// `run_created` missing at seq 1 or present elsewhere.
    RunCreated,
    /// A step, hook, wait or `run_completed` appears twice.
    DuplicateEntity,
    /// An event follows `run_completed`.
    AfterTerminal,
    /// A batch's marked events are not contiguous, or a decision is unreadable.
    TornBatch,
    /// A batch differs from the derivation of the prefix before it.
    StaleBatch,
}

/// One problem found in a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// What.
    pub kind: ProblemKind,
    /// Where (the first seq involved).
    pub seq: Seq,
    /// Details for a human.
    pub detail: String,
}

/// The verdict on one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunVerdict {
    /// The log holds `run_completed`.
    pub completed: bool,
    /// Every problem found (empty = not corrupted).
    pub problems: Vec<Problem>,
}

impl RunVerdict {
    /// Whether any problem was found.
    pub fn corrupted(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// Checks a run's whole stored log (see the module docs).
pub fn check_run(log: &[Event]) -> RunVerdict {
    let mut problems = Vec::new();
    check_density(log, &mut problems);
    check_entities(log, &mut problems);
    check_batches(log, &mut problems);
    RunVerdict {
        completed: log.iter().any(|e| e.kind == RUN_COMPLETED),
        problems,
    }
}

fn problem(kind: ProblemKind, seq: Seq, detail: impl Into<String>) -> Problem {
    let detail = detail.into();
    Problem { kind, seq, detail }
}

fn check_density(log: &[Event], problems: &mut Vec<Problem>) {
    let gap = (1..).zip(log).find(|(want, e)| e.seq != *want);
    if let Some((want, e)) = gap {
        let detail = format!("seq {} where {want} was due", e.seq);
        problems.push(problem(ProblemKind::Density, want, detail));
    }
}

fn check_entities(log: &[Event], problems: &mut Vec<Problem>) {
    let mut seen = BTreeSet::new();
    let mut terminal = None;
    for e in log {
        let first = e.seq == 1;
        if (e.kind == RUN_CREATED) != first {
            let detail = format!("{} at seq {}", e.kind, e.seq);
            problems.push(problem(ProblemKind::RunCreated, e.seq, detail));
        }
        if let Some(t) = terminal {
            let detail = format!("{} after run_completed at seq {t}", e.kind);
            problems.push(problem(ProblemKind::AfterTerminal, e.seq, detail));
        }
        if DECISION_KINDS.contains(&&*e.kind) {
            let entity = (e.kind.clone(), e.correlation_id.clone());
            if !seen.insert(entity) {
                let id = e.correlation_id.as_deref().unwrap_or("-");
                let detail = format!("{} {id} created again", e.kind);
                problems.push(problem(ProblemKind::DuplicateEntity, e.seq, detail));
            }
        }
        if e.kind == RUN_COMPLETED && terminal.is_none() {
            terminal = Some(e.seq);
        }
    }
}

/// A stored decision batch: its first position and its decisions.
struct StoredBatch {
    start: usize,
    mark: BatchMark,
    decisions: Vec<Decision>,
}

fn check_batches(log: &[Event], problems: &mut Vec<Problem>) {
    for batch in split_batches(log, problems) {
        let stored_at = batch.start as Seq + 1;
        let prefix = log.get(..batch.start).unwrap_or_default();
        match derive(prefix) {
            Ok(expected) if expected == batch.decisions => {}
            Ok(expected) => {
                let detail = format!(
                    "batch of {} by replayer {} (derived at {}) stored at {stored_at}; \
                     the prefix derives {} decision(s) {}",
                    batch.mark.n,
                    batch.mark.by,
                    batch.mark.base,
                    expected.len(),
                    describe(&expected)
                );
                problems.push(problem(ProblemKind::StaleBatch, stored_at, detail));
            }
            Err(e) => {
                let detail = format!("prefix before the batch is underivable: {e}");
                problems.push(problem(ProblemKind::StaleBatch, stored_at, detail));
            }
        }
    }
}

fn describe(decisions: &[Decision]) -> String {
    let names: Vec<String> = decisions
        .iter()
        .map(|d| format!("{}:{}", d.kind, d.id.as_deref().unwrap_or("-")))
        .collect();
    format!("[{}]", names.join(", "))
}

/// Groups the decision events into batches by their marks; torn batches become problems.
fn split_batches(log: &[Event], problems: &mut Vec<Problem>) -> Vec<StoredBatch> {
    let mut batches: Vec<StoredBatch> = Vec::new();
    let mut open: Option<StoredBatch> = None;
    for (index, e) in log.iter().enumerate() {
        if !DECISION_KINDS.contains(&&*e.kind) {
            if let Some(b) = open.take() {
                torn(problems, &b, e.seq);
            }
            continue;
        }
        let id = e.correlation_id.as_deref();
        let (decision, mark) = match decode_decision(e.seq, &e.kind, id, &e.payload) {
            Ok(d) => d,
            Err(err) => {
                problems.push(problem(ProblemKind::TornBatch, e.seq, err.to_string()));
                continue;
            }
        };
        if mark.i == 0 {
            if let Some(b) = open.take() {
                torn(problems, &b, e.seq);
            }
            open = Some(StoredBatch {
                start: index,
                mark,
                decisions: Vec::new(),
            });
        }
        match open.as_mut() {
            Some(b) if continues(b, mark) => b.decisions.push(decision),
            _ => {
                let detail = format!("decision {}/{} outside its batch", mark.i, mark.n);
                problems.push(problem(ProblemKind::TornBatch, e.seq, detail));
                open = None;
                continue;
            }
        }
        if let Some(b) = open.take_if(|b| b.decisions.len() as u64 == u64::from(b.mark.n)) {
            batches.push(b);
        }
    }
    if let Some(b) = open {
        torn(problems, &b, log.len() as Seq + 1);
    }
    batches
}

fn continues(batch: &StoredBatch, mark: BatchMark) -> bool {
    let next = batch.decisions.len() as u64 == u64::from(mark.i);
    let same = (batch.mark.base, batch.mark.n, batch.mark.by) == (mark.base, mark.n, mark.by);
    next && same
}

fn torn(problems: &mut Vec<Problem>, batch: &StoredBatch, at: Seq) {
    let detail = format!(
        "batch of {} starting at seq {} interrupted at seq {at} after {} event(s)",
        batch.mark.n,
        batch.start + 1,
        batch.decisions.len()
    );
    problems.push(problem(
        ProblemKind::TornBatch,
        batch.start as Seq + 1,
        detail,
    ));
}

/// Whether a fenced rejection stopped a wrong batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// The rejected batch differs from the derivation at the position it would have taken:
    /// the fence prevented corruption.
    TruePositive,
    /// The rejected batch equals that derivation: appending it would still have been right.
    FalsePositive,
    /// The log at hand is shorter than the rejection's position or the batch is unreadable.
    Unclassified,
}

/// Classifies a batch rejected when the run's last seq was `actual`, using `log` (any
/// prefix of the run that holds at least `actual` events).
pub fn classify(log: &[Event], actual: Seq, rejected: &[NewEvent]) -> Classification {
    let Some(prefix) = usize::try_from(actual).ok().and_then(|n| log.get(..n)) else {
        return Classification::Unclassified;
    };
    let decoded: Result<Vec<Decision>, _> = rejected
        .iter()
        .map(|e| {
            let id = e.correlation_id.as_deref();
            decode_decision(actual, &e.kind, id, &e.payload).map(|(d, _)| d)
        })
        .collect();
    match (decoded, derive(prefix)) {
        (Ok(rejected), Ok(expected)) if rejected == expected => Classification::FalsePositive,
        (Ok(_), Ok(_)) => Classification::TruePositive,
        _ => Classification::Unclassified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storm::Scenario;
    use crate::storm::actors::{due_receipts, due_steps, due_wait};
    use crate::storm::workflow::{Params, encode_batch, params_of, run_created};
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Appends `ev` to an in-memory log as the store would: next seq; a repeated key
    /// appends nothing.
    fn push(log: &mut Vec<Event>, ev: NewEvent) {
        if ev.key.is_some() && log.iter().any(|e| e.key.as_deref() == ev.key.as_deref()) {
            return;
        }
        log.push(Event {
            seq: log.len() as Seq + 1,
            event_id: ulid::Ulid::nil(),
            created_at_ms: 0,
            kind: ev.kind.into(),
            correlation_id: ev.correlation_id.map(Into::into),
            key: ev.key.map(Into::into),
            payload: ev.payload,
        });
    }

    fn due_facts(log: &[Event]) -> Vec<NewEvent> {
        let params = params_of(log.first()).unwrap();
        let mut due = due_steps(&params, log).unwrap();
        due.extend(due_receipts(&params, log));
        due.extend(due_wait(log));
        due
    }

    /// A fact or a fresh decision batch, chosen at random.
    fn step(log: &mut Vec<Event>, rng: &mut StdRng) {
        let mut facts = due_facts(log);
        if facts.is_empty() || rng.random_bool(0.4) {
            let decisions = derive(log).unwrap();
            if !decisions.is_empty() {
                let base = log.len() as Seq;
                encode_batch(decisions, base, 0)
                    .into_iter()
                    .for_each(|e| push(log, e));
                return;
            }
        }
        if !facts.is_empty() {
            let pick = rng.random_range(0..facts.len());
            push(log, facts.swap_remove(pick));
        }
    }

    fn new_log(params: &Params) -> Vec<Event> {
        let mut log = Vec::new();
        push(&mut log, run_created(params));
        log
    }

    fn simulate(params: &Params, rng: &mut StdRng) -> Vec<Event> {
        let mut log = new_log(params);
        for _ in 0..10_000 {
            if log.iter().any(|e| e.kind == RUN_COMPLETED) {
                break;
            }
            step(&mut log, rng);
        }
        log
    }

    fn scenario_params(s: Scenario, seed: u64) -> Params {
        s.params(seed, (seed % 1000) as u32)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fresh_decisions_in_any_interleaving_complete_clean(seed: u64, hooks: bool) {
            let scenario = if hooks { Scenario::HookStorm } else { Scenario::StepStorm };
            let params = scenario_params(scenario, seed);
            let log = simulate(&params, &mut StdRng::seed_from_u64(seed));
            let verdict = check_run(&log);
            prop_assert!(verdict.completed, "{:?}", verdict);
            prop_assert!(verdict.problems.is_empty(), "{:?}", verdict);
        }

        #[test]
        fn a_stale_batch_is_flagged_exactly_when_classified_true_positive(
            seed: u64,
            lead in 0usize..40,
            lag in 1usize..6,
        ) {
            let params = scenario_params(Scenario::StepStorm, seed);
            let mut rng = StdRng::seed_from_u64(seed);
            let mut log = new_log(&params);
            (0..lead).for_each(|_| step(&mut log, &mut rng));
            let base = log.len() as Seq;
            let stale = encode_batch(derive(&log).unwrap(), base, 9);
            prop_assume!(!stale.is_empty() && !log.iter().any(|e| e.kind == RUN_COMPLETED));
            (0..lag).for_each(|_| step(&mut log, &mut rng));
            let actual = log.len() as Seq;
            prop_assume!(actual > base);
            let class = classify(&log, actual, &stale);
            stale.into_iter().for_each(|e| push(&mut log, e));
            let flagged = check_run(&log)
                .problems
                .iter()
                .any(|p| p.kind == ProblemKind::StaleBatch && p.seq == actual + 1);
            prop_assert_ne!(class, Classification::Unclassified);
            prop_assert_eq!(flagged, class == Classification::TruePositive);
        }
    }

    #[test]
    fn a_decision_repeated_by_a_second_replayer_is_a_duplicate_and_stale() {
        let params = scenario_params(Scenario::StepStorm, 5);
        let mut log = new_log(&params);
        let first = derive(&log).unwrap();
        encode_batch(first.clone(), 1, 0)
            .into_iter()
            .for_each(|e| push(&mut log, e));
        encode_batch(first, 1, 1)
            .into_iter()
            .for_each(|e| push(&mut log, e));
        let v = check_run(&log);
        let kinds: BTreeSet<ProblemKind> = v.problems.iter().map(|p| p.kind).collect();
        let want = BTreeSet::from([ProblemKind::DuplicateEntity, ProblemKind::StaleBatch]);
        assert_eq!(kinds, want, "{v:?}");
        let stale = v
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::StaleBatch)
            .unwrap();
        let batch_len = (params.hooks + params.fan_out + 1) as Seq;
        assert_eq!(stale.seq, 2 + batch_len);
    }

    #[test]
    fn an_event_after_run_completed_is_flagged() {
        let params = scenario_params(Scenario::StepStorm, 9);
        let mut log = simulate(&params, &mut StdRng::seed_from_u64(9));
        let terminal = log.len() as Seq;
        assert_eq!(log.last().unwrap().kind, RUN_COMPLETED);
        push(&mut log, crate::storm::workflow::wait_completed("w9"));
        let v = check_run(&log);
        assert!(v.completed);
        assert_eq!(v.problems.len(), 1, "{v:?}");
        assert_eq!(
            (v.problems[0].kind, v.problems[0].seq),
            (ProblemKind::AfterTerminal, terminal + 1)
        );
    }

    #[test]
    fn a_torn_batch_and_a_gap_are_flagged() {
        let params = scenario_params(Scenario::HookStorm, 3);
        let mut log = new_log(&params);
        let batch = encode_batch(derive(&log).unwrap(), 1, 0);
        let n = batch.len();
        assert!(n >= 3);
        batch
            .into_iter()
            .take(n - 1)
            .for_each(|e| push(&mut log, e));
        push(&mut log, crate::storm::workflow::wait_completed("w1"));
        log[2].seq = 9;
        let kinds: BTreeSet<ProblemKind> =
            check_run(&log).problems.iter().map(|p| p.kind).collect();
        assert!(kinds.contains(&ProblemKind::TornBatch), "{kinds:?}");
        assert!(kinds.contains(&ProblemKind::Density), "{kinds:?}");
    }

    #[test]
    fn derive_is_a_pure_function_of_the_prefix() {
        let params = scenario_params(Scenario::HookStorm, 21);
        let log = simulate(&params, &mut StdRng::seed_from_u64(21));
        for end in 1..=log.len() {
            assert_eq!(derive(&log[..end]).unwrap(), derive(&log[..end]).unwrap());
        }
        assert!(derive(&log).unwrap().is_empty());
    }
}
