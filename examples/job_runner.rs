//! A durable job runner, as a desktop or command-line tool would embed runlog: every job is a
//! run, every step's decision is appended fenced through [`runlog::replay`], and every step's
//! result is a fact. Kill it at any point (`kill -9`, a power cut of the process) and start it
//! again: it resumes each job where its log stops and finishes every job exactly once.
//!
//! ```text
//! cargo run --example job_runner -- --store /tmp/jobs.runlog              # run (or resume) the jobs
//! cargo run --example job_runner -- --store /tmp/jobs.runlog --check      # check what the store holds
//! ```
//!
//! Options: `--jobs N` (default 8), `--steps N` per job (default 5), `--step-ms MS` of work
//! per step (default 50), `--workers N` threads (default 2), `--journal FILE` (default
//! `<store>.effects`; see below).
//!
//! # The log of one job (`job-000`, `job-001`, …)
//!
//! | event | class | payload |
//! |---|---|---|
//! | `job_created` | fact, key `created` | `steps=S` |
//! | `step_started` | decision, correlation id `step-I` | `step=I` |
//! | `step_completed` | fact, key `done/I` | `step=I attempt=A result=R` |
//! | `job_completed` | decision, key `completed` | `result=R` |
//!
//! An *attempt* at a step is the `step_started` decision that allowed it, named by its seq
//! `A`. The runner derives the next decision from the log alone (`derive`): the next step's
//! `step_started`, another `step_started` for a step whose last attempt has no completion (that
//! attempt's process died: the runner holds the job's [`RunnerClaim`], a lock the kernel drops
//! with its holder), or `job_completed` once every step is done. The [`Driver`] appends it
//! fenced at the log length it was derived from, so two runners that raced on one job cannot
//! both decide; only the runner whose attempt committed runs the step, then appends
//! `step_completed` naming that attempt. The result of step `I` is computed from the result of
//! step `I - 1` as read back from the log.
//!
//! What this guarantees after any number of `kill -9`: a step whose completion fact was
//! acknowledged (fdatasync'd) is never run again — every restart reads that fact first — and a
//! job is completed once (the fence, and the key `completed`). A step that was running when its
//! process died is run again: its effect must be idempotent or checked, as with any
//! at-least-once executor.
//!
//! # The journal, and `--check`
//!
//! Before it runs an attempt the runner appends `start JOB STEP ATTEMPT PID` to the journal, a
//! plain file standing for the step's side effect (a `kill -9` does not lose a completed
//! `write(2)`, so it needs no fsync here). `--check` opens the store read-only and checks every
//! job: one `job_created`, steps in order, each completed once by its last attempt, no attempt
//! after a completion, one `job_completed` last, every result recomputed; and, in the journal,
//! that the attempt which completed a step was the last one that started it. It prints what it
//! found and exits 1 on any violation.

use std::collections::{BTreeMap, VecDeque};
use std::error::Error;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use runlog::replay::{Driver, Outcome, ReplayConfig, ReplayLog, RunnerClaim};
use runlog::{Config, Event, NewEvent, RunId, Store};

type BoxError = Box<dyn Error + Send + Sync>;

/// Most jobs, steps per job and workers: bounds on what the command line may ask.
const JOBS_MAX: usize = 1000;
const STEPS_MAX: usize = 1000;
const WORKERS_MAX: usize = 64;

#[derive(Clone, Debug)]
struct Args {
    store: PathBuf,
    journal: PathBuf,
    jobs: usize,
    steps: usize,
    step_ms: u64,
    workers: usize,
    check: bool,
}

fn main() {
    let args = match parse_args(std::env::args().skip(1).collect()) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("job_runner: {e}");
            eprintln!(
                "usage: job_runner --store DIR [--jobs N] [--steps N] [--step-ms MS] [--workers N] [--journal FILE] [--check]"
            );
            std::process::exit(2);
        }
    };
    let result = match args.check {
        true => check(&args),
        false => run(&args),
    };
    if let Err(e) = result {
        eprintln!("job_runner: {e}");
        std::process::exit(1);
    }
}

fn parse_args(argv: Vec<String>) -> Result<Args, String> {
    let mut store = None;
    let mut journal = None;
    let mut args = Args {
        store: PathBuf::new(),
        journal: PathBuf::new(),
        jobs: 8,
        steps: 5,
        step_ms: 50,
        workers: 2,
        check: false,
    };
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        if flag == "--check" {
            args.check = true;
            continue;
        }
        let value = it.next().ok_or(format!("{flag} wants a value"))?;
        let number = |max: usize| match value.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(format!("{flag} wants a number in 1..={max}, got {value:?}")),
        };
        match flag.as_str() {
            "--store" => store = Some(PathBuf::from(&value)),
            "--journal" => journal = Some(PathBuf::from(&value)),
            "--jobs" => args.jobs = number(JOBS_MAX)?,
            "--steps" => args.steps = number(STEPS_MAX)?,
            "--workers" => args.workers = number(WORKERS_MAX)?,
            "--step-ms" => args.step_ms = number(60_000)? as u64,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    args.store = store.ok_or("--store DIR is required")?;
    let default_journal = || {
        let mut name = args.store.clone().into_os_string();
        name.push(".effects");
        PathBuf::from(name)
    };
    args.journal = journal.unwrap_or_else(default_journal);
    Ok(args)
}

// ---------------------------------------------------------------------------------------
// The job's state, folded from its log.

/// One `key=value` field of a payload (`step=2 attempt=7 result=…`).
fn field(payload: &[u8], name: &str) -> Option<u64> {
    let text = std::str::from_utf8(payload).ok()?;
    let value = text
        .split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?;
    match name {
        "result" => u64::from_str_radix(value, 16).ok(),
        _ => value.parse().ok(),
    }
}

/// What a job's log says, as the runner needs it.
#[derive(Debug, Default)]
struct JobState {
    /// Steps of the job (from `job_created`; 0 before it).
    steps: usize,
    /// Completed steps, in order: (attempt seq, result).
    done: Vec<(u64, u64)>,
    /// The last attempt at step `done.len()`, if one started.
    open_attempt: Option<u64>,
    /// Attempts at step `done.len()` so far.
    open_attempts: usize,
    /// `job_completed`'s result, once decided.
    completed: Option<u64>,
}

impl JobState {
    fn fold(events: &[Event]) -> JobState {
        let mut s = JobState::default();
        for ev in events {
            let step = field(&ev.payload, "step").map(|n| n as usize);
            match &*ev.kind {
                "job_created" => s.steps = field(&ev.payload, "steps").unwrap_or(0) as usize,
                "step_started" if step == Some(s.done.len()) => {
                    s.open_attempt = Some(ev.seq);
                    s.open_attempts += 1;
                }
                "step_completed" if step == Some(s.done.len()) => {
                    let attempt = field(&ev.payload, "attempt").unwrap_or(0);
                    s.done
                        .push((attempt, field(&ev.payload, "result").unwrap_or(0)));
                    s.open_attempt = None;
                    s.open_attempts = 0;
                }
                "job_completed" => s.completed = field(&ev.payload, "result"),
                _ => {}
            }
        }
        s
    }
}

/// The next decision for a job, from its log alone (deterministic, as the driver requires).
fn derive(events: &[Event]) -> Result<Vec<NewEvent>, std::convert::Infallible> {
    let s = JobState::fold(events);
    if s.steps == 0 || s.completed.is_some() {
        return Ok(Vec::new());
    }
    if s.done.len() == s.steps {
        let result = s.done.last().map_or(0, |d| d.1);
        let done = NewEvent::new("job_completed", format!("result={result:016x}")).key("completed");
        return Ok(vec![done]);
    }
    // The next step, or another attempt at a step whose last attempt died before completing.
    let step = s.done.len();
    let start = NewEvent::new("step_started", format!("step={step}"))
        .correlation_id(format!("step-{step}"));
    Ok(vec![start])
}

/// The result of step `step` of job `job` given its input: a stand-in for real work
/// (splitmix64 of the three), deterministic so that `--check` can recompute the chain.
fn step_result(job: usize, step: usize, input: u64) -> u64 {
    let mut z = input ^ ((job as u64) << 32 | step as u64);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The input of job `job`'s first step.
fn job_seed(job: usize) -> u64 {
    step_result(job, usize::MAX, 0)
}

fn job_id(job: usize) -> Result<RunId, BoxError> {
    Ok(RunId::new(format!("job-{job:03}"))?)
}

// ---------------------------------------------------------------------------------------
// Running.

/// What one process did, summed over its workers.
#[derive(Debug, Default)]
struct Report {
    completed_now: usize,
    complete_already: usize,
    steps_run: usize,
    steps_rerun: usize,
    fenced: usize,
}

struct Runner {
    store: Store,
    journal: Mutex<File>,
    step: Duration,
    report: Mutex<Report>,
}

impl Runner {
    fn say(&self, line: String) {
        let mut out = std::io::stdout().lock();
        // A closed stdout (the reader went away) must not stop the jobs.
        let _ = writeln!(out, "{line}");
    }

    /// Appends the journal line of an attempt before it runs.
    fn journal_start(&self, run: &RunId, step: usize, attempt: u64) -> Result<(), BoxError> {
        let line = format!("start {run} {step} {attempt} {}\n", std::process::id());
        let mut journal = self.journal.lock().map_err(|_| "journal lock poisoned")?;
        journal.write_all(line.as_bytes())?;
        Ok(())
    }
}

fn run(args: &Args) -> Result<(), BoxError> {
    let store = Store::open(&args.store, Config::default())?;
    for job in 0..args.jobs {
        create_job(&store, &job_id(job)?, args.steps)?;
    }
    let journal = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.journal)?;
    let runner = Arc::new(Runner {
        store,
        journal: Mutex::new(journal),
        step: Duration::from_millis(args.step_ms),
        report: Mutex::new(Report::default()),
    });
    let queue = Arc::new(Mutex::new((0..args.jobs).collect::<VecDeque<_>>()));
    let workers: Vec<_> = (0..args.workers.min(args.jobs))
        .map(|_| {
            let (runner, queue) = (runner.clone(), queue.clone());
            std::thread::spawn(move || work(&runner, &queue))
        })
        .collect();
    for worker in workers {
        worker.join().map_err(|_| "a worker panicked")??;
    }
    let r = runner.report.lock().map_err(|_| "report lock poisoned")?;
    runner.say(format!(
        "job_runner: {} jobs: {} completed by this process, {} complete already; {} steps run ({} again after an interrupted attempt), {} fenced decisions re-derived",
        args.jobs, r.completed_now, r.complete_already, r.steps_run, r.steps_rerun, r.fenced
    ));
    Ok(())
}

/// Creates the job's run and its `job_created` fact, both idempotent (a restart that died
/// between them finishes the job's creation).
fn create_job(store: &Store, run: &RunId, steps: usize) -> Result<(), BoxError> {
    match store.create_run(run) {
        Ok(()) | Err(runlog::Error::RunExists { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let created = NewEvent::new("job_created", format!("steps={steps}")).key("created");
    store.append_facts(run, vec![created])?;
    Ok(())
}

/// A worker: takes jobs off the queue until it is empty; a job another runner holds goes
/// back to the end of the queue.
fn work(runner: &Runner, queue: &Mutex<VecDeque<usize>>) -> Result<(), BoxError> {
    loop {
        let job = queue.lock().map_err(|_| "queue lock poisoned")?.pop_front();
        let Some(job) = job else { return Ok(()) };
        let run = job_id(job)?;
        let Some(claim) = RunnerClaim::try_acquire(runner.store.path(), &run)? else {
            queue
                .lock()
                .map_err(|_| "queue lock poisoned")?
                .push_back(job);
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        run_job(runner, job, &run)?;
        drop(claim);
    }
}

/// Drives one job to its completion (the caller holds its claim).
fn run_job(runner: &Runner, job: usize, run: &RunId) -> Result<(), BoxError> {
    let mut driver = Driver::new(runner.store.clone(), ReplayConfig::default());
    let mut log = ReplayLog::new(run.clone());
    let page = driver.config().read_page_events_max;
    let mut carried = 0;
    let mut first = true;
    loop {
        let invocation = driver.drive(&mut log, carried, derive)?;
        let fenced = invocation.rejections.len();
        runner
            .report
            .lock()
            .map_err(|_| "report lock poisoned")?
            .fenced += fenced;
        log.catch_up(&runner.store, page)?;
        let state = JobState::fold(log.events());
        match invocation.outcome {
            Outcome::Committed { first_seq, .. } => {
                carried = 0;
                if let Some(result) = state.completed {
                    runner.say(format!("{run}: completed, result {result:016x}"));
                    runner
                        .report
                        .lock()
                        .map_err(|_| "report lock poisoned")?
                        .completed_now += 1;
                    return Ok(());
                }
                if state.open_attempt == Some(first_seq) {
                    run_step(runner, job, run, &state, first_seq)?;
                }
            }
            Outcome::Idle { .. } | Outcome::Adopted { .. } if state.completed.is_some() => {
                if first {
                    runner.say(format!("{run}: complete already"));
                    runner
                        .report
                        .lock()
                        .map_err(|_| "report lock poisoned")?
                        .complete_already += 1;
                }
                return Ok(());
            }
            Outcome::Idle { last_seq } => {
                return Err(format!(
                    "{run}: nothing to decide at seq {last_seq}, and not complete"
                )
                .into());
            }
            // Another runner (one without the claim) decided first: derive again.
            Outcome::Adopted { .. } => carried = 0,
            Outcome::Requeue { restarts, backoff } => {
                carried = restarts;
                std::thread::sleep(backoff);
            }
        }
        first = false;
    }
}

/// Runs the attempt `attempt` (the seq of its committed `step_started`) at the job's next
/// step, then appends its completion fact.
fn run_step(
    runner: &Runner,
    job: usize,
    run: &RunId,
    state: &JobState,
    attempt: u64,
) -> Result<(), BoxError> {
    let step = state.done.len();
    let input = state.done.last().map_or_else(|| job_seed(job), |d| d.1);
    if state.open_attempts > 1 {
        runner.say(format!(
            "{run} step {step}: an earlier attempt stopped before its completion was stored; running it again (attempt @{attempt})"
        ));
    }
    runner.journal_start(run, step, attempt)?;
    std::thread::sleep(runner.step);
    let result = step_result(job, step, input);
    let payload = format!("step={step} attempt={attempt} result={result:016x}");
    let done = NewEvent::new("step_completed", payload)
        .correlation_id(format!("step-{step}"))
        .key(format!("done/{step}"));
    let appended = runner.store.append_facts(run, vec![done])?;
    if appended.first().is_some_and(|a| a.duplicate) {
        return Err(format!("{run} step {step}: completed twice (attempt @{attempt})").into());
    }
    runner.say(format!(
        "{run} step {step}: done (attempt @{attempt}), result {result:016x}"
    ));
    let mut report = runner.report.lock().map_err(|_| "report lock poisoned")?;
    report.steps_run += 1;
    report.steps_rerun += usize::from(state.open_attempts > 1);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Checking.

/// Journal lines per (job, step): the attempts in the order they started.
type Journal = BTreeMap<(String, usize), Vec<u64>>;

fn read_journal(path: &Path) -> Result<Journal, BoxError> {
    let mut journal = Journal::new();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("reading {}: {e}", path.display()).into()),
    };
    for (n, line) in text.lines().enumerate() {
        let parts: Vec<&str> = line.split(' ').collect();
        let parsed = match parts.as_slice() {
            ["start", job, step, attempt, _pid] => step
                .parse::<usize>()
                .ok()
                .zip(attempt.parse::<u64>().ok())
                .map(|(s, a)| (job.to_string(), s, a)),
            _ => None,
        };
        let (job, step, attempt) =
            parsed.ok_or_else(|| format!("journal line {}: cannot read {line:?}", n + 1))?;
        journal.entry((job, step)).or_default().push(attempt);
    }
    Ok(journal)
}

/// What `--check` found in one job.
#[derive(Debug, Default)]
struct JobCheck {
    steps: usize,
    attempts: usize,
    problems: Vec<String>,
}

/// Walks one job's log as a state machine and checks it against the journal.
fn check_job(job: usize, events: &[Event], journal: &Journal) -> JobCheck {
    let run = format!("job-{job:03}");
    let mut c = JobCheck::default();
    let problem = |c: &mut JobCheck, seq: u64, what: String| {
        c.problems.push(format!("{run} seq {seq}: {what}"));
    };
    let mut starts: Vec<Vec<u64>> = Vec::new();
    let mut results: Vec<u64> = Vec::new();
    let mut completed = 0;
    for ev in events {
        let step = field(&ev.payload, "step").map(|n| n as usize);
        if completed > 0 {
            problem(&mut c, ev.seq, format!("{} after job_completed", ev.kind));
        }
        match (&*ev.kind, step) {
            ("job_created", _) if ev.seq == 1 => {
                c.steps = field(&ev.payload, "steps").unwrap_or(0) as usize;
                starts.resize(c.steps, Vec::new());
            }
            ("step_started", Some(i)) if i == results.len() && i < c.steps => {
                starts[i].push(ev.seq);
                c.attempts += 1;
            }
            ("step_completed", Some(i))
                if i == results.len() && starts.get(i).is_some_and(|s| !s.is_empty()) =>
            {
                let attempt = field(&ev.payload, "attempt");
                if attempt != starts[i].last().copied() {
                    let last = starts[i].last();
                    problem(
                        &mut c,
                        ev.seq,
                        format!(
                            "step {i} completed by attempt {attempt:?}, its last attempt is {last:?}"
                        ),
                    );
                }
                let input = results.last().copied().unwrap_or_else(|| job_seed(job));
                if field(&ev.payload, "result") != Some(step_result(job, i, input)) {
                    problem(&mut c, ev.seq, format!("step {i}: wrong result"));
                }
                results.push(field(&ev.payload, "result").unwrap_or(0));
            }
            ("job_completed", _) if results.len() == c.steps && c.steps > 0 => {
                completed += 1;
                if field(&ev.payload, "result") != results.last().copied() {
                    problem(&mut c, ev.seq, "job_completed: wrong result".to_string());
                }
            }
            (kind, _) => problem(
                &mut c,
                ev.seq,
                format!(
                    "{kind} out of order (payload {:?})",
                    String::from_utf8_lossy(&ev.payload)
                ),
            ),
        }
    }
    if completed != 1 || results.len() != c.steps {
        let what = format!(
            "{} of {} steps completed, job_completed {completed} times",
            results.len(),
            c.steps
        );
        c.problems.push(format!("{run}: {what}"));
    }
    check_journal(&run, &starts, journal, &mut c);
    c
}

/// Every attempt in the journal was decided in the log and ran once, and the attempt that
/// completed a step is the last one the journal shows starting it: nothing ran after a
/// completion.
fn check_journal(run: &str, starts: &[Vec<u64>], journal: &Journal, c: &mut JobCheck) {
    for (step, decided) in starts.iter().enumerate() {
        let ran = journal
            .get(&(run.to_string(), step))
            .map_or(&[][..], Vec::as_slice);
        let mut seen = std::collections::BTreeSet::new();
        if let Some(twice) = ran.iter().find(|a| !seen.insert(**a)) {
            c.problems.push(format!(
                "{run} step {step}: attempt @{twice} ran more than once"
            ));
        }
        if let Some(undecided) = ran.iter().find(|a| !decided.contains(a)) {
            c.problems.push(format!(
                "{run} step {step}: attempt @{undecided} ran without a committed step_started"
            ));
        }
        let (Some(last_decided), Some(last_ran)) = (decided.last(), ran.last()) else {
            continue;
        };
        if last_ran != last_decided {
            c.problems.push(format!("{run} step {step}: attempt @{last_ran} ran after the completing attempt @{last_decided}"));
        }
    }
}

fn check(args: &Args) -> Result<(), BoxError> {
    let store = Store::open_read_only(&args.store, Config::default())?;
    let journal = read_journal(&args.journal)?;
    let (mut steps, mut attempts, mut problems) = (0, 0, Vec::new());
    for job in 0..args.jobs {
        let run = job_id(job)?;
        let mut log = ReplayLog::new(run.clone());
        if let Err(e) = log.catch_up(&store, 1024) {
            problems.push(format!("{run}: {e}"));
            continue;
        }
        let c = check_job(job, log.events(), &journal);
        steps += c.steps;
        attempts += c.attempts;
        problems.extend(c.problems);
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "check: {} jobs, {steps} steps, {attempts} attempts ({} re-runs of an interrupted attempt)",
        args.jobs,
        attempts.saturating_sub(steps)
    );
    if problems.is_empty() {
        println!(
            "{out}: every job completed once, every step completed once by its last attempt, none run after its completion"
        );
        return Ok(());
    }
    println!("{out}: {} problems", problems.len());
    for p in &problems {
        println!("  {p}");
    }
    Err(format!("{} problems", problems.len()).into())
}
