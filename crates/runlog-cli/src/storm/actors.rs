//! The actors of one run: replaying invocations, step executors, hook senders and the timer.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::storm::workflow::{
    self, HOOK_CREATED, HOOK_RECEIVED, Params, RUN_COMPLETED, STEP_COMPLETED, STEP_CREATED,
    WAIT_COMPLETED, WAIT_CREATED, WorkflowError, mix,
};
use crate::storm::{ReplayStats, StormConfig, StormError, storm_replay_config};
use runlog::RunLog;
use runlog::replay::{Driver, Invocation, Outcome, ReplayLog, RunnerClaim};
use runlog::{Event, NewEvent, RunId, Seq};

/// How long an idle actor waits for the log to grow before re-checking its deadline.
const POLL: Duration = Duration::from_millis(20);
/// Events per read page.
const PAGE: usize = 1024;
/// Longest simulated workflow-code time between loading a log and appending its batch, µs.
const THINK_US_MAX: u64 = 200;
/// Longest simulated step execution, µs.
const WORK_US_MAX: u64 = 1500;
/// Longest delay of a hook sender before a receipt, µs.
const SEND_US_MAX: u64 = 3000;

/// One run as seen by its actors.
pub(crate) struct RunCtx<'a, L> {
    pub store: &'a L,
    pub config: &'a StormConfig,
    pub run: RunId,
    pub index: u32,
    pub deadline: Instant,
}

impl<L> RunCtx<'_, L> {
    fn rng(&self, actor: u64) -> StdRng {
        let seed = mix(mix(self.config.seed, u64::from(self.index)), actor);
        StdRng::seed_from_u64(seed)
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }
}

/// A log copy that notices the terminal event.
struct Follower {
    log: ReplayLog,
    scanned: usize,
    terminal: bool,
}

impl Follower {
    fn new(run: &RunId) -> Follower {
        Follower {
            log: ReplayLog::new(run.clone()),
            scanned: 0,
            terminal: false,
        }
    }

    fn catch_up(&mut self, store: &impl RunLog) -> Result<(), StormError> {
        self.log.catch_up(store, PAGE)?;
        self.scan();
        Ok(())
    }

    fn scan(&mut self) {
        let new = self.log.events().get(self.scanned..).unwrap_or_default();
        self.terminal |= new.iter().any(|e| e.kind == RUN_COMPLETED);
        self.scanned = self.log.events().len();
    }

    /// Waits up to [`POLL`] for the store to hold more than this copy; true if it does.
    fn wait(&self, store: &impl RunLog) -> Result<bool, StormError> {
        let last = self.log.last_seq();
        Ok(store.wait(self.log.run(), last, POLL)? > last)
    }

    fn live<L>(&self, ctx: &RunCtx<'_, L>) -> bool {
        !self.terminal && !ctx.past_deadline()
    }
}

fn sleep_us(rng: &mut StdRng, max_us: u64) {
    thread::sleep(Duration::from_micros(rng.random_range(0..=max_us)));
}

/// One replaying invocation loop for the run (`by` = replayer index); never fails: errors
/// are counted in the stats.
pub(crate) fn replay<L: RunLog + Clone>(ctx: &RunCtx<'_, L>, by: u32) -> ReplayStats {
    let mut stats = ReplayStats::default();
    if let Err(e) = replay_loop(ctx, by, &mut stats) {
        stats.error(format!("run {} replayer {by}: {e}", ctx.run));
    }
    stats
}

fn replay_loop<L: RunLog + Clone>(
    ctx: &RunCtx<'_, L>,
    by: u32,
    stats: &mut ReplayStats,
) -> Result<(), StormError> {
    let mut rng = ctx.rng(u64::from(by));
    let seed = rng.random();
    let mut driver = Driver::with_seed(ctx.store.clone(), storm_replay_config(), seed);
    let mut f = Follower::new(&ctx.run);
    let mut carried = 0;
    while f.live(ctx) {
        // Requeued work runs again after its backoff even if the log did not grow since.
        if carried == 0 && !f.wait(ctx.store)? {
            continue;
        }
        let claim = match ctx.config.claim {
            true => RunnerClaim::try_acquire(&ctx.config.dir, &ctx.run)?,
            false => None,
        };
        if ctx.config.claim && claim.is_none() {
            stats.claim_skips += 1;
            sleep_us(&mut rng, THINK_US_MAX);
            continue;
        }
        let inv = match ctx.config.fenced {
            true => invoke_fenced(&mut driver, &mut f, carried, by, &mut rng)?,
            false => invoke_unfenced(ctx.store, &mut f, by, &mut rng)?,
        };
        drop(claim);
        if inv.rejections.iter().any(|r| r.actual > f.log.last_seq()) {
            f.catch_up(ctx.store)?;
        }
        f.scan();
        stats.record(&inv, f.log.events());
        carried = match inv.outcome {
            Outcome::Requeue { restarts, backoff } => {
                thread::sleep(backoff);
                restarts
            }
            _ => 0,
        };
    }
    Ok(())
}

/// Derives the next batch for `events` as replayer `by`, after a little simulated
/// workflow-code time.
fn derive_batch(
    events: &[Event],
    by: u32,
    rng: &mut StdRng,
) -> Result<Vec<NewEvent>, WorkflowError> {
    let decisions = workflow::derive(events)?;
    if decisions.is_empty() {
        return Ok(Vec::new());
    }
    sleep_us(rng, THINK_US_MAX);
    Ok(workflow::encode_batch(decisions, events.len() as Seq, by))
}

fn invoke_fenced<L: RunLog>(
    driver: &mut Driver<L>,
    f: &mut Follower,
    carried: u32,
    by: u32,
    rng: &mut StdRng,
) -> Result<Invocation, StormError> {
    let derive = |events: &[Event]| derive_batch(events, by, rng);
    Ok(driver.drive(&mut f.log, carried, derive)?)
}

/// The baseline: the same load-derive-append, with the batch appended as plain facts.
fn invoke_unfenced(
    store: &impl RunLog,
    f: &mut Follower,
    by: u32,
    rng: &mut StdRng,
) -> Result<Invocation, StormError> {
    f.catch_up(store)?;
    let last_seq = f.log.last_seq();
    let batch = derive_batch(f.log.events(), by, rng)?;
    let outcome = match batch.is_empty() {
        true => Outcome::Idle { last_seq },
        false => {
            let appended = store.append_facts(f.log.run(), batch)?;
            let seq = |a: Option<&runlog::Appended>| a.map_or(last_seq, |a| a.seq);
            Outcome::Committed {
                first_seq: seq(appended.first()),
                last_seq: seq(appended.last()),
            }
        }
    };
    let rejections = Vec::new();
    Ok(Invocation {
        outcome,
        rejections,
    })
}

/// What a fact writer does: which facts are due given the log, and how long to take.
#[derive(Clone, Copy)]
pub(crate) enum FactWriter {
    /// Completes created steps.
    Executor,
    /// Delivers hook receipts.
    HookSender,
    /// Ends the sleep.
    Timer,
}

impl FactWriter {
    fn due(self, params: &Params, log: &[Event]) -> Result<Vec<NewEvent>, WorkflowError> {
        match self {
            FactWriter::Executor => due_steps(params, log),
            FactWriter::HookSender => Ok(due_receipts(params, log)),
            FactWriter::Timer => Ok(due_wait(log)),
        }
    }

    fn delay(self, params: &Params, rng: &mut StdRng) -> Duration {
        match self {
            FactWriter::Executor => Duration::from_micros(rng.random_range(0..=WORK_US_MAX)),
            FactWriter::HookSender => Duration::from_micros(rng.random_range(0..=SEND_US_MAX)),
            FactWriter::Timer => Duration::from_millis(params.sleep_ms),
        }
    }
}

/// Runs one fact writer until the run completes or its deadline passes.
pub(crate) fn write_facts<L: RunLog + Clone>(
    ctx: &RunCtx<'_, L>,
    writer: FactWriter,
    actor: u64,
) -> ReplayStats {
    let mut stats = ReplayStats::default();
    if let Err(e) = write_facts_loop(ctx, writer, actor) {
        stats.error(format!("run {} fact writer {actor}: {e}", ctx.run));
    }
    stats
}

fn write_facts_loop<L: RunLog + Clone>(
    ctx: &RunCtx<'_, L>,
    writer: FactWriter,
    actor: u64,
) -> Result<(), StormError> {
    let mut rng = ctx.rng(actor);
    let mut f = Follower::new(&ctx.run);
    f.catch_up(ctx.store)?;
    let params = workflow::params_of(f.log.events().first())?;
    while f.live(ctx) {
        let mut due = writer.due(&params, f.log.events())?;
        if due.is_empty() {
            f.wait(ctx.store)?;
        } else {
            let pick = rng.random_range(0..due.len());
            thread::sleep(writer.delay(&params, &mut rng));
            ctx.store
                .append_facts(&ctx.run, vec![due.swap_remove(pick)])?;
        }
        f.catch_up(ctx.store)?;
    }
    Ok(())
}

/// `step_completed` for every created step without one.
pub(crate) fn due_steps(params: &Params, log: &[Event]) -> Result<Vec<NewEvent>, WorkflowError> {
    let done: BTreeSet<&str> = log
        .iter()
        .filter(|e| e.kind == STEP_COMPLETED)
        .filter_map(|e| e.correlation_id.as_deref())
        .collect();
    let mut due = Vec::new();
    for e in log.iter().filter(|e| e.kind == STEP_CREATED) {
        let id = e.correlation_id.as_deref().unwrap_or_default();
        if done.contains(id) {
            continue;
        }
        let (decision, _) = workflow::decode_decision(e.seq, &e.kind, Some(id), &e.payload)?;
        let input = decision
            .body
            .get("input")
            .and_then(serde_json::Value::as_u64);
        let input = input.ok_or_else(|| WorkflowError::Malformed {
            seq: e.seq,
            detail: "step_created without input".to_string(),
        })?;
        due.push(workflow::step_completed(
            id,
            workflow::step_result(params.salt, id, input),
        ));
    }
    Ok(due)
}

/// `hook_received` for every receipt of every created hook not yet delivered.
pub(crate) fn due_receipts(params: &Params, log: &[Event]) -> Vec<NewEvent> {
    let delivered: BTreeSet<&str> = log
        .iter()
        .filter(|e| e.kind == HOOK_RECEIVED)
        .filter_map(|e| e.key.as_deref())
        .collect();
    let mut due = Vec::new();
    for e in log.iter().filter(|e| e.kind == HOOK_CREATED) {
        let hook = e.correlation_id.as_deref().unwrap_or_default();
        for k in 0..params.receipts {
            if !delivered.contains(format!("{hook}:{k}").as_str()) {
                let value = workflow::hook_value(params.salt, hook, k);
                due.push(workflow::hook_received(hook, k, value));
            }
        }
    }
    due
}

/// `wait_completed` once the wait exists and has not ended.
pub(crate) fn due_wait(log: &[Event]) -> Vec<NewEvent> {
    let created = log.iter().find(|e| e.kind == WAIT_CREATED);
    let ended = log.iter().any(|e| e.kind == WAIT_COMPLETED);
    match (created.and_then(|e| e.correlation_id.as_deref()), ended) {
        (Some(wait), false) => vec![workflow::wait_completed(wait)],
        _ => Vec::new(),
    }
}
