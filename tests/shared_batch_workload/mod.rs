//! A concurrent workload of facts and decisions on one run, and the checks of what a log read
//! back must hold given what each append was answered: used by the shared-batch tests (group
//! commit writes consecutive appends of one class as one batch, SPEC §5 step 5).
//!
//! Every issued event carries a unique payload `t<thread>.o<op>.j<index>|pad`, so an event in
//! the log names the append that issued it.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use runlog::{Appended, Config, Error, Event, NewEvent, RunId, Seq, Store};
use ulid::Ulid;

/// Keys and caller ids shared by all threads: they collide across appends and groups.
pub const POOL: u64 = 24;

/// Small limits: segments roll every few groups, and shared batches are split by both the
/// event and the byte bound.
pub fn config() -> Config {
    Config {
        segment_len_bytes_max: 8 << 10,
        payload_len_bytes_max: 600,
        batch_len_bytes_max: 1400,
        batch_events_max: 4,
        lock_timeout: std::time::Duration::from_secs(30),
        ..Config::default()
    }
}

pub fn pool_key(k: u64) -> String {
    format!("pk{k}")
}

pub fn pool_id(k: u64) -> Ulid {
    Ulid::from_parts(1_700_000_000_000 + k, u128::from(k) * 7 + 1)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Facts,
    /// Fenced at the run's last seq as just read.
    Decision {
        expected: Seq,
    },
    /// Fenced at a seq already passed: must be rejected.
    StaleDecision {
        expected: Seq,
    },
}

#[derive(Clone, Debug)]
pub enum Answer {
    Facts(Vec<Appended>),
    Decisions(Vec<Seq>),
    Fenced {
        expected: Seq,
        actual: Seq,
    },
    DuplicateDecision {
        key: String,
        seq: Seq,
    },
    /// Any other error (I/O, poisoned, ...): the outcome on disk is unknown to the caller.
    Failed(String),
}

#[derive(Clone, Debug)]
pub struct Issued {
    pub thread: usize,
    pub op: usize,
    pub kind: Kind,
    pub events: Vec<NewEvent>,
    pub answer: Answer,
}

impl Issued {
    pub fn acked(&self) -> bool {
        matches!(self.answer, Answer::Facts(_) | Answer::Decisions(_))
    }
}

fn payload(thread: usize, op: usize, j: usize, rng: &mut StdRng) -> String {
    let pad = "x".repeat(rng.random_range(0..300));
    format!("t{thread}.o{op}.j{j}|{pad}")
}

pub fn parse(payload: &[u8]) -> Option<(usize, usize, usize)> {
    let text = std::str::from_utf8(payload).ok()?;
    let (head, _) = text.split_once('|')?;
    let mut it = head.split('.');
    let t = it.next()?.strip_prefix('t')?.parse().ok()?;
    let o = it.next()?.strip_prefix('o')?.parse().ok()?;
    let j = it.next()?.strip_prefix('j')?.parse().ok()?;
    Some((t, o, j))
}

/// The events of op `op` of `thread`: 1–3 events, unkeyed, keyed from the pool (sometimes
/// twice in one append), with a pool caller id, or with a fresh unique key.
fn events(thread: usize, op: usize, rng: &mut StdRng) -> Vec<NewEvent> {
    let n = rng.random_range(1..=3);
    (0..n)
        .map(|j| {
            let e = NewEvent::new(
                if rng.random_bool(0.5) {
                    "step_completed"
                } else {
                    "hook_received"
                },
                payload(thread, op, j, rng),
            );
            match rng.random_range(0..6) {
                0 | 1 => e,
                2 => e.key(pool_key(rng.random_range(0..POOL))),
                3 => e.event_id(pool_id(rng.random_range(0..POOL))),
                4 => e.key(format!("u{thread}.{op}.{j}")),
                _ => e.correlation_id(format!("c{thread}")),
            }
        })
        .collect()
}

/// Appends from `threads` threads, `ops` appends each (or until `stop`), and returns every
/// append with its answer.
pub fn run_threads(
    store: &Store,
    run: &RunId,
    threads: usize,
    ops: usize,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> Vec<Issued> {
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, run, barrier, stop) =
                (store.clone(), run.clone(), barrier.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = thread_rng(seed, t);
                barrier.wait();
                let mut out = Vec::new();
                for op in 0..ops {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    out.push(one(&store, &run, t, op, &mut rng));
                }
                out
            })
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

/// The rng of thread `t` of a workload seeded `seed`.
pub fn thread_rng(seed: u64, t: usize) -> StdRng {
    StdRng::seed_from_u64(seed ^ (t as u64 * 0x9e37_79b9))
}

/// What op `op` of thread `t` issues, drawn from `rng` (the same draws as [`one`]): its
/// events, and its roll (< 6 facts, 9 a stale decision when the run is not empty, else a
/// decision).
pub fn draw(t: usize, op: usize, rng: &mut StdRng) -> (Vec<NewEvent>, u32) {
    let events = events(t, op, rng);
    (events, rng.random_range(0..10))
}

pub fn one(store: &Store, run: &RunId, t: usize, op: usize, rng: &mut StdRng) -> Issued {
    let (events, roll) = draw(t, op, rng);
    let kind = if roll < 6 {
        Kind::Facts
    } else {
        match store.last_seq(run) {
            Ok(last) if roll == 9 && last > 0 => Kind::StaleDecision { expected: last - 1 },
            Ok(last) => Kind::Decision { expected: last },
            Err(e) => {
                return Issued {
                    thread: t,
                    op,
                    kind: Kind::Facts,
                    events: Vec::new(),
                    answer: Answer::Failed(format!("last_seq: {e}")),
                };
            }
        }
    };
    let res = match &kind {
        Kind::Facts => store.append_facts(run, events.clone()).map(Answer::Facts),
        Kind::Decision { expected } | Kind::StaleDecision { expected } => store
            .append_decisions(run, *expected, events.clone())
            .map(Answer::Decisions),
    };
    let answer = match res {
        Ok(a) => a,
        Err(Error::Fenced {
            expected, actual, ..
        }) => Answer::Fenced { expected, actual },
        Err(Error::DuplicateDecision { key, seq, .. }) => Answer::DuplicateDecision { key, seq },
        Err(e) => Answer::Failed(e.to_string()),
    };
    Issued {
        thread: t,
        op,
        kind,
        events,
        answer,
    }
}

/// What a check may assume of appends whose answer was an error other than a rejection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Nothing of them is in the log (a failed group is cut back: SPEC §5).
    Absent,
    /// Each is wholly present or wholly absent (a power loss may have kept its write).
    AllOrNothing,
}

fn same_event(e: &Event, n: &NewEvent) -> bool {
    &*e.kind == n.kind.as_str()
        && e.key.as_deref() == n.key.as_deref()
        && e.correlation_id.as_deref() == n.correlation_id.as_deref()
        && e.payload[..] == n.payload[..]
        && n.event_id.is_none_or(|id| id == e.event_id)
}

/// Checks `log` (every event of the run, read from seq 1) against `issued`; returns how many
/// events of unacknowledged (failed) appends it holds. `where_` names the check in messages.
pub fn check(log: &[Event], issued: &[Issued], failed: Failed, where_: &str) -> usize {
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "{where_}: seqs dense from 1");
    }
    let at = |seq: Seq| -> &Event {
        log.get((seq as usize).wrapping_sub(1))
            .unwrap_or_else(|| panic!("{where_}: seq {seq} past the log ({})", log.len()))
    };
    // Keys and caller ids unique in the log.
    let mut keys = HashSet::new();
    let mut ids = HashSet::new();
    for e in log {
        if let Some(k) = &e.key {
            assert!(keys.insert(k.to_string()), "{where_}: key {k} twice");
        }
        assert!(ids.insert(e.event_id), "{where_}: id {} twice", e.event_id);
    }
    let by_payload: HashMap<(usize, usize, usize), &Event> = log
        .iter()
        .map(|e| {
            let id =
                parse(&e.payload).unwrap_or_else(|| panic!("{where_}: seq {} not issued", e.seq));
            (id, e)
        })
        .collect();
    assert_eq!(by_payload.len(), log.len(), "{where_}: a payload twice");
    let issued_by: HashMap<(usize, usize), &Issued> =
        issued.iter().map(|i| ((i.thread, i.op), i)).collect();
    for e in log {
        let (t, o, j) = parse(&e.payload).unwrap();
        let i = issued_by
            .get(&(t, o))
            .unwrap_or_else(|| panic!("{where_}: seq {} of no issued append", e.seq));
        assert!(
            same_event(e, &i.events[j]),
            "{where_}: seq {} differs from its issue",
            e.seq
        );
    }
    let mut unacked_present = 0;
    for i in issued {
        let present: Vec<&Event> = (0..i.events.len())
            .filter_map(|j| by_payload.get(&(i.thread, i.op, j)).copied())
            .collect();
        let ctx = format!(
            "{where_}: t{} o{} {:?} -> {:?}",
            i.thread, i.op, i.kind, i.answer
        );
        match &i.answer {
            Answer::Facts(acks) => {
                assert!(matches!(i.kind, Kind::Facts), "{ctx}");
                assert_eq!(acks.len(), i.events.len(), "{ctx}");
                let mut new_seqs = Vec::new();
                for (a, n) in acks.iter().zip(&i.events) {
                    if a.duplicate {
                        let held = log.get((a.seq as usize).wrapping_sub(1));
                        let by_key = n.key.is_some()
                            && held.is_some_and(|e| e.key.as_deref() == n.key.as_deref());
                        let by_id = held.is_some_and(|e| n.event_id == Some(e.event_id));
                        let e = held;
                        assert!(
                            by_key || by_id,
                            "{ctx}: duplicate answered with seq {} ({e:?})",
                            a.seq
                        );
                        assert!(
                            !by_payload.contains_key(&parse(&n.payload).unwrap()),
                            "{ctx}: a duplicate was written too"
                        );
                    } else {
                        let e = at(a.seq);
                        assert!(same_event(e, n), "{ctx}: seq {} holds {e:?}", a.seq);
                        new_seqs.push(a.seq);
                    }
                }
                assert!(
                    new_seqs.windows(2).all(|w| w[1] == w[0] + 1),
                    "{ctx}: an append's new events are contiguous"
                );
            }
            Answer::Decisions(seqs) => {
                let Kind::Decision { expected } = i.kind else {
                    panic!("{ctx}: a stale decision was accepted");
                };
                let want: Vec<Seq> = (expected + 1..=expected + i.events.len() as u64).collect();
                assert_eq!(seqs, &want, "{ctx}");
                for (s, n) in seqs.iter().zip(&i.events) {
                    assert!(same_event(at(*s), n), "{ctx}: seq {s}");
                }
            }
            Answer::Fenced { expected, actual } => {
                assert_ne!(expected, actual, "{ctx}");
                assert!(present.is_empty(), "{ctx}: a fenced append was written");
            }
            Answer::DuplicateDecision { key, seq } => {
                let e = log.get((*seq as usize).wrapping_sub(1));
                let holds = e.is_some_and(|e| {
                    e.key.as_deref() == Some(key.as_str()) || e.event_id.to_string() == *key
                });
                // A key or id repeated in the decision's own batch names the seq its first
                // holder would have had (plan.rs), never written.
                let own_repeat = i
                    .events
                    .iter()
                    .filter(|n| {
                        n.key.as_deref() == Some(key.as_str())
                            || n.event_id.map(|u| u.to_string()).as_deref() == Some(key.as_str())
                    })
                    .count()
                    > 1;
                if !holds && own_repeat {
                    assert!(present.is_empty(), "{ctx}: a rejected decision was written");
                    continue;
                }
                if !holds {
                    let carriers: Vec<String> = issued
                        .iter()
                        .filter(|j| {
                            j.events.iter().any(|n| {
                                n.key.as_deref() == Some(key.as_str())
                                    || n.event_id.map(|u| u.to_string()).as_deref()
                                        == Some(key.as_str())
                            })
                        })
                        .map(|j| format!("t{} o{} {:?} -> {:?}", j.thread, j.op, j.kind, j.answer))
                        .collect();
                    panic!(
                        "{ctx}: duplicate decision names seq {seq}: {e:?}; appends carrying it: {carriers:#?}"
                    );
                }
                assert!(present.is_empty(), "{ctx}: a rejected decision was written");
            }
            Answer::Failed(_) => {
                if i.events.is_empty() {
                    continue;
                }
                match failed {
                    Failed::Absent => {
                        assert!(
                            present.is_empty(),
                            "{ctx}: a failed append is in the log: {:?}",
                            present.iter().map(|e| e.seq).collect::<Vec<_>>()
                        );
                    }
                    Failed::AllOrNothing => {
                        // A fact append may have had duplicates that wrote nothing; the others
                        // must all be there, or none. Without the dedupe answer, only a
                        // decision (never deduplicated) demands every event.
                        if !present.is_empty() {
                            unacked_present += 1;
                            let seqs: Vec<Seq> = present.iter().map(|e| e.seq).collect();
                            assert!(
                                seqs.windows(2).all(|w| w[1] == w[0] + 1),
                                "{ctx}: partial or split {seqs:?}"
                            );
                            if !matches!(i.kind, Kind::Facts) {
                                assert_eq!(present.len(), i.events.len(), "{ctx}: partial");
                            }
                        }
                    }
                }
            }
        }
    }
    unacked_present
}

/// Every event of `run` as `store` reads it.
pub fn read_all(store: &Store, run: &RunId) -> Vec<Event> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = store.read(run, after, 1000).unwrap();
        if page.events.is_empty() {
            return out;
        }
        after = page.events.last().unwrap().seq;
        out.extend(page.events);
    }
}

/// A summary of answers, for messages and for asserting the workload did what it meant to.
pub fn tally(issued: &[Issued]) -> BTreeMap<&'static str, usize> {
    let mut m = BTreeMap::new();
    for i in issued {
        let k = match &i.answer {
            Answer::Facts(a) if a.iter().any(|a| a.duplicate) => "facts_with_duplicates",
            Answer::Facts(_) => "facts",
            Answer::Decisions(_) => "decisions",
            Answer::Fenced { .. } => "fenced",
            Answer::DuplicateDecision { .. } => "duplicate_decision",
            Answer::Failed(_) => "failed",
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// One line for an answered append (`@A <thread> <op> <kind> <answer>`), for a parent process.
pub fn encode(i: &Issued) -> String {
    let kind = match i.kind {
        Kind::Facts => "f".to_string(),
        Kind::Decision { expected } => format!("d{expected}"),
        Kind::StaleDecision { expected } => format!("s{expected}"),
    };
    let answer = match &i.answer {
        Answer::Facts(a) => {
            let v: Vec<String> = a
                .iter()
                .map(|a| format!("{}{}", a.seq, if a.duplicate { '=' } else { '+' }))
                .collect();
            format!("F {}", v.join(" "))
        }
        Answer::Decisions(s) => {
            let v: Vec<String> = s.iter().map(|s| s.to_string()).collect();
            format!("D {}", v.join(" "))
        }
        Answer::Fenced { expected, actual } => format!("X {expected} {actual}"),
        Answer::DuplicateDecision { key, seq } => format!("Y {seq} {key}"),
        Answer::Failed(m) => format!("E {}", m.replace('\n', " ")),
    };
    format!("@A {} {} {kind} {answer}", i.thread, i.op)
}

/// The answered appends of a child's `@A` lines, with their events drawn again from `seed`;
/// each thread's next op (in flight when the child died) as [`Answer::Failed`].
pub fn decode(lines: &[String], seed: u64, threads: usize) -> Vec<Issued> {
    let mut answered: Vec<BTreeMap<usize, (Kind, Answer)>> = vec![BTreeMap::new(); threads];
    for l in lines {
        let Some(rest) = l.strip_prefix("@A ") else {
            continue;
        };
        let f: Vec<&str> = rest.splitn(5, ' ').collect();
        let (t, op): (usize, usize) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let kind = match &f[2][..1] {
            "f" => Kind::Facts,
            "d" => Kind::Decision {
                expected: f[2][1..].parse().unwrap(),
            },
            _ => Kind::StaleDecision {
                expected: f[2][1..].parse().unwrap(),
            },
        };
        let (tag, body) = f[3..].join(" ").split_at(1).clone_pair();
        let nums = |b: &str| -> Vec<String> { b.split_whitespace().map(str::to_string).collect() };
        let answer = match tag.as_str() {
            "F" => Answer::Facts(
                nums(&body)
                    .iter()
                    .map(|a| Appended {
                        seq: a[..a.len() - 1].parse().unwrap(),
                        duplicate: a.ends_with('='),
                    })
                    .collect(),
            ),
            "D" => Answer::Decisions(nums(&body).iter().map(|s| s.parse().unwrap()).collect()),
            "X" => {
                let n = nums(&body);
                Answer::Fenced {
                    expected: n[0].parse().unwrap(),
                    actual: n[1].parse().unwrap(),
                }
            }
            "Y" => {
                let n = nums(&body);
                Answer::DuplicateDecision {
                    seq: n[0].parse().unwrap(),
                    key: n[1].clone(),
                }
            }
            _ => Answer::Failed(body.trim().to_string()),
        };
        answered[t].insert(op, (kind, answer));
    }
    let mut out = Vec::new();
    for (t, ops) in answered.into_iter().enumerate() {
        let mut rng = thread_rng(seed, t);
        let next = ops.keys().next_back().map_or(0, |o| o + 1);
        for op in 0..=next {
            let (events, roll) = draw(t, op, &mut rng);
            let (kind, answer) = ops.get(&op).cloned().unwrap_or_else(|| {
                assert_eq!(op, next, "thread {t}: op {op} unanswered before op {next}");
                let kind = if roll < 6 {
                    Kind::Facts
                } else {
                    Kind::Decision { expected: 0 }
                };
                (
                    kind,
                    Answer::Failed("in flight when the process died".into()),
                )
            });
            out.push(Issued {
                thread: t,
                op,
                kind,
                events,
                answer,
            });
        }
    }
    out
}

trait ClonePair {
    fn clone_pair(self) -> (String, String);
}

impl ClonePair for (&str, &str) {
    fn clone_pair(self) -> (String, String) {
        (self.0.to_string(), self.1.to_string())
    }
}
