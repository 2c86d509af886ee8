//! Multi-process storm (issue 4 §4): 4 processes × 4 threads over 8 shared runs, mixing
//! unkeyed facts, keyed facts whose keys repeat across processes, and fenced decisions
//! (read `last_seq`, then `append_decisions` at it). Children print every answer they get;
//! the parent then checks, per run: the log is dense, no key is stored twice, the log holds
//! exactly the acknowledged new events at their acknowledged seqs, every duplicate answer
//! points at the event holding that key, every decision batch sits right after the seq it was
//! fenced at, and every `Fenced` rejection was real (`actual > expected`, the log holds events
//! at `expected + 1 ..= actual`, none of them the rejected op's, and the op wrote nothing).
//! Rules 1–3 and 6 of INVARIANTS.md across real processes.

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runlog::{Config, Error, Event, NewEvent, RunId, Seq, Store};

const PROCESSES: usize = 4;
const THREADS: usize = 4;
const RUNS: usize = 8;
const OPS_PER_THREAD: usize = 150;
/// Keys of keyed facts are drawn from this many per run, shared by every process.
const KEYS_PER_RUN: usize = 12;

fn run_name(i: usize) -> RunId {
    RunId::new(format!("storm-{i}")).unwrap()
}

/// One op of one thread: which run, what kind, and its events.
struct Op {
    run: usize,
    kind: OpKind,
    events: Vec<NewEvent>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpKind {
    Fact,
    KeyedFact,
    Decision,
}

/// Deterministic program of thread `(p, t)`: op `n % 3` picks fact, keyed fact, decision.
fn program(p: usize, t: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64((p * THREADS + t) as u64);
    (0..OPS_PER_THREAD)
        .map(|n| {
            let run = rng.random_range(0..RUNS);
            let tag = |j: usize| format!("p{p}.t{t}.n{n}.j{j}");
            match n % 3 {
                0 => Op {
                    run,
                    kind: OpKind::Fact,
                    events: vec![NewEvent::new("step_completed", tag(0))],
                },
                1 => {
                    let key = format!("hook-{}", rng.random_range(0..KEYS_PER_RUN));
                    let events = vec![NewEvent::new("hook_received", tag(0)).key(key)];
                    Op {
                        run,
                        kind: OpKind::KeyedFact,
                        events,
                    }
                }
                _ => {
                    let count = rng.random_range(1..=3);
                    let events = (0..count)
                        .map(|j| NewEvent::new("step_created", tag(j)).correlation_id(tag(j)))
                        .collect();
                    Op {
                        run,
                        kind: OpKind::Decision,
                        events,
                    }
                }
            }
        })
        .collect()
}

/// The child side, started by `spawn_stormer`. Never a passing test: ignored, and it fails
/// when run without `RUNLOG_STORM_STORE`.
#[test]
#[ignore = "entry point of child processes"]
fn child_entry() {
    let Ok(store_dir) = std::env::var("RUNLOG_STORM_STORE") else {
        common::not_started_as_a_child("RUNLOG_STORM_STORE");
    };
    let p: usize = std::env::var("RUNLOG_STORM_PROCESS")
        .unwrap()
        .parse()
        .unwrap();
    let store = Store::open(store_dir, Config::default()).unwrap();
    say("@ready".to_string());
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || storm_thread(&store, p, t))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    say("@done".to_string());
}

fn storm_thread(store: &Store, p: usize, t: usize) {
    for (n, op) in program(p, t).into_iter().enumerate() {
        let run = run_name(op.run);
        match op.kind {
            OpKind::Fact | OpKind::KeyedFact => {
                let acks = store.append_facts(&run, op.events).unwrap();
                let words: Vec<String> = acks
                    .iter()
                    .map(|a| format!("{}{}", a.seq, if a.duplicate { '=' } else { '+' }))
                    .collect();
                say(format!("@ack {p} {t} {n} {}", words.join(" ")));
            }
            OpKind::Decision => decide(store, &run, op.events, (p, t, n)),
        }
    }
}

/// Derives at the log's length, then appends fenced at it.
fn decide(store: &Store, run: &RunId, events: Vec<NewEvent>, (p, t, n): (usize, usize, usize)) {
    let expected = store.last_seq(run).unwrap();
    match store.append_decisions(run, expected, events) {
        Ok(seqs) => {
            let words: Vec<String> = seqs.iter().map(|s| format!("{s}+")).collect();
            say(format!("@ack {p} {t} {n} {}", words.join(" ")));
            say(format!("@decided {p} {t} {n} {expected}"));
        }
        Err(Error::Fenced {
            expected: e,
            actual,
            ..
        }) => {
            assert_eq!(e, expected);
            say(format!("@fenced {p} {t} {n} {expected} {actual}"));
        }
        Err(other) => panic!("decision failed: {other}"),
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{line}\n").as_bytes()).unwrap();
    out.flush().unwrap();
}

struct Stormer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

fn spawn_stormer(store: &Path, p: usize) -> Stormer {
    let mut cmd = common::child_command();
    cmd.env("RUNLOG_STORM_STORE", store)
        .env("RUNLOG_STORM_PROCESS", p.to_string());
    let common::Piped {
        child,
        stdin,
        lines,
    } = common::spawn_piped(&mut cmd);
    Stormer {
        child,
        stdin,
        lines,
    }
}

/// Every answer the children printed.
#[derive(Default)]
struct Answers {
    /// `(p, t, n)` → `(seq, duplicate)` per event.
    acks: HashMap<(usize, usize, usize), Vec<(Seq, bool)>>,
    /// `(p, t, n)` → `(expected, actual)`.
    fenced: HashMap<(usize, usize, usize), (Seq, Seq)>,
    /// `(p, t, n)` → the `expected_seq` an accepted decision was fenced at.
    decided: HashMap<(usize, usize, usize), Seq>,
}

fn numbers(rest: &str) -> Vec<u64> {
    rest.split(' ').map(|w| w.parse().unwrap()).collect()
}

fn parse_line(line: &str, answers: &mut Answers) {
    if let Some((_, rest)) = line.split_once("@ack ") {
        let words: Vec<&str> = rest.split(' ').collect();
        let id = (
            words[0].parse().unwrap(),
            words[1].parse().unwrap(),
            words[2].parse().unwrap(),
        );
        let seqs = words[3..]
            .iter()
            .map(|w| {
                let (n, flag) = w.split_at(w.len() - 1);
                (n.parse().unwrap(), flag == "=")
            })
            .collect();
        answers.acks.insert(id, seqs);
    } else if let Some((_, rest)) = line.split_once("@fenced ") {
        let n = numbers(rest);
        answers
            .fenced
            .insert((n[0] as usize, n[1] as usize, n[2] as usize), (n[3], n[4]));
    } else if let Some((_, rest)) = line.split_once("@decided ") {
        let n = numbers(rest);
        answers
            .decided
            .insert((n[0] as usize, n[1] as usize, n[2] as usize), n[3]);
    }
}

#[test]
fn four_processes_of_four_threads_over_eight_runs_keep_dense_logs_and_real_fences() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    for r in 0..RUNS {
        store.create_run(&run_name(r)).unwrap();
    }
    let mut stormers: Vec<Stormer> = (0..PROCESSES)
        .map(|p| spawn_stormer(dir.path(), p))
        .collect();
    for s in &mut stormers {
        s.lines
            .iter()
            .find(|l| l.ends_with("@ready"))
            .expect("child ready");
    }
    for s in &mut stormers {
        s.stdin.write_all(b"go\n").unwrap();
    }
    let mut answers = Answers::default();
    for s in &mut stormers {
        let mut done = false;
        for line in s.lines.iter() {
            done |= line.ends_with("@done");
            parse_line(&line, &mut answers);
        }
        assert!(done, "child finished its program");
        assert!(s.child.wait().unwrap().success());
    }
    let programs: HashMap<(usize, usize), Vec<Op>> = (0..PROCESSES)
        .flat_map(|p| (0..THREADS).map(move |t| ((p, t), program(p, t))))
        .collect();
    let ops = PROCESSES * THREADS * OPS_PER_THREAD;
    assert_eq!(
        answers.acks.len() + answers.fenced.len(),
        ops,
        "every op answered once"
    );
    let decisions = programs
        .values()
        .flatten()
        .filter(|o| o.kind == OpKind::Decision)
        .count();
    assert_eq!(answers.decided.len() + answers.fenced.len(), decisions);
    let logs: Vec<Vec<Event>> = (0..RUNS).map(|r| check_run(&store, r)).collect();
    check_acks(&programs, &answers, &logs);
    check_fences(&programs, &answers, &logs);
    let events: usize = logs.iter().map(Vec::len).sum();
    let duplicates = answers
        .acks
        .values()
        .flatten()
        .filter(|(_, dup)| *dup)
        .count();
    println!(
        "storm summary: {ops} ops, {} acknowledged ({duplicates} duplicate answers), {} fenced, {events} events in {RUNS} runs",
        answers.acks.len(),
        answers.fenced.len()
    );
    assert!(
        duplicates > 0,
        "keys repeated across processes were deduplicated"
    );
    assert!(!answers.fenced.is_empty(), "racing decisions were fenced");
}

/// Dense, keys unique, verify clean; returns the log.
fn check_run(store: &Store, r: usize) -> Vec<Event> {
    let run = run_name(r);
    let events = store.read(&run, 0, usize::MAX).unwrap().events;
    let seqs: Vec<Seq> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as Seq).collect::<Vec<_>>(),
        "{run} dense"
    );
    let keys: Vec<&str> = events.iter().filter_map(|e| e.key.as_deref()).collect();
    let unique: HashSet<&&str> = keys.iter().collect();
    assert_eq!(keys.len(), unique.len(), "{run}: no key stored twice");
    let report = store.verify_run(&run).unwrap();
    assert!(
        report.problems.is_empty() && report.notes.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.events, events.len() as u64);
    events
}

/// The logs hold exactly the acknowledged new events, each equal to what was issued at its
/// acknowledged seq; a duplicate answer names the event holding its key; a decision batch
/// sits at its fence + 1.
fn check_acks(programs: &HashMap<(usize, usize), Vec<Op>>, answers: &Answers, logs: &[Vec<Event>]) {
    let mut expected: Vec<BTreeMap<Seq, &NewEvent>> = vec![BTreeMap::new(); RUNS];
    for (&(p, t, n), seqs) in &answers.acks {
        let op = &programs[&(p, t)][n];
        assert_eq!(seqs.len(), op.events.len());
        for (e, &(seq, dup)) in op.events.iter().zip(seqs) {
            let stored = logs[op.run]
                .get(seq as usize - 1)
                .expect("acknowledged seq exists");
            if dup {
                assert_eq!(op.kind, OpKind::KeyedFact);
                assert_eq!(
                    stored.key.as_deref(),
                    e.key.as_deref(),
                    "a duplicate answer names the event with its key"
                );
                assert_ne!(
                    stored.payload, e.payload,
                    "the duplicate itself was not written"
                );
                continue;
            }
            assert!(
                expected[op.run].insert(seq, e).is_none(),
                "seq {seq} acknowledged twice"
            );
        }
        if op.kind == OpKind::Decision {
            let first = answers.decided[&(p, t, n)] + 1;
            let at_fence: Vec<Seq> = (first..first + seqs.len() as Seq).collect();
            let got: Vec<Seq> = seqs.iter().map(|s| s.0).collect();
            assert_eq!(got, at_fence, "decision batch whole, right after its fence");
        }
    }
    for (r, log) in logs.iter().enumerate() {
        assert_eq!(
            log.len(),
            expected[r].len(),
            "{}: only acknowledged events",
            run_name(r)
        );
        for (e, (seq, issued)) in log.iter().zip(&expected[r]) {
            assert_eq!(e.seq, *seq);
            let got = (
                &*e.kind,
                e.key.as_deref(),
                e.correlation_id.as_deref(),
                &e.payload,
            );
            assert_eq!(
                got,
                (
                    issued.kind.as_str(),
                    issued.key.as_deref(),
                    issued.correlation_id.as_deref(),
                    &issued.payload
                )
            );
        }
    }
}

/// Every rejection real: the log had grown past `expected` to `actual`, by events that are
/// not the rejected op's, and the rejected op wrote nothing anywhere.
fn check_fences(
    programs: &HashMap<(usize, usize), Vec<Op>>,
    answers: &Answers,
    logs: &[Vec<Event>],
) {
    let payloads: HashSet<&[u8]> = logs.iter().flatten().map(|e| e.payload.as_ref()).collect();
    for (&(p, t, n), &(expected, actual)) in &answers.fenced {
        let op = &programs[&(p, t)][n];
        assert_eq!(op.kind, OpKind::Decision);
        assert!(
            actual > expected,
            "fenced at {expected} though the log was at {actual}"
        );
        let log = &logs[op.run];
        assert!(
            log.len() as Seq >= actual,
            "the log really reached {actual}"
        );
        let grown = &log[expected as usize..actual as usize];
        for e in op.events.iter() {
            assert!(
                !payloads.contains(e.payload.as_ref()),
                "rejected op {p}.{t}.{n} wrote nothing"
            );
            assert!(grown.iter().all(|g| g.payload != e.payload));
        }
    }
}
