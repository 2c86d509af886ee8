//! Group commit: a per-run leader/follower queue and the in-memory decision of a group.
//!
//! Appenders of one run in one [`crate::PgLog`] enqueue a [`Request`]; the first becomes the
//! leader, takes what is queued (bounded by [`GROUP_EVENTS_MAX`] and [`GROUP_LEN_BYTES_MAX`]),
//! runs one transaction for the whole group (the caller's `commit` function) and hands every
//! member its own result; then the oldest request still queued leads the next group. Nothing
//! here talks to PostgreSQL: [`plan`] decides every member in arrival order against the state
//! read under the row lock, exactly as the file store's planner (`src/run/commit.rs`) does.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};
use runlog::{Appended, CommitStatsSnapshot, Error, NewEvent, Result, Seq};
use ulid::Ulid;

/// Most events one group inserts (at least one request): the arrays bound into the
/// `INSERT … unnest(…)` stay bounded under a flood of appenders.
pub(crate) const GROUP_EVENTS_MAX: usize = 100_000;
/// Most payload bytes one group inserts (at least one request).
pub(crate) const GROUP_LEN_BYTES_MAX: usize = 64 << 20;

/// Fact (unfenced, deduplicated) or decision (fenced at `expected`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ReqKind {
    Facts,
    Decisions { expected: Seq },
}

/// What an accepted request gets back.
#[derive(Debug)]
pub(crate) enum Outcome {
    Facts(Vec<Appended>),
    Decisions(Vec<Seq>),
}

enum Turn {
    Waiting,
    Lead,
    Done(Result<Outcome>),
}

/// One append call waiting in its run's queue.
pub(crate) struct Request {
    pub(crate) kind: ReqKind,
    pub(crate) events: Vec<NewEvent>,
    turn: Mutex<Turn>,
    cv: Condvar,
}

impl Request {
    fn set(&self, t: Turn) {
        *self.turn.lock() = t;
        self.cv.notify_one();
    }

    fn len_bytes(&self) -> usize {
        self.events.iter().map(|e| e.payload.len()).sum()
    }
}

#[derive(Default)]
struct RunQueue {
    pending: VecDeque<Arc<Request>>,
    leading: bool,
}

/// The queues of every run with appends in flight (an idle run has no entry).
#[derive(Default)]
pub(crate) struct Queues {
    runs: Mutex<HashMap<String, RunQueue>>,
    stats: Stats,
}

impl Queues {
    /// Queues `events` for `run` and blocks until a group holding them is decided. When this
    /// call leads, `commit` runs the group's transaction and returns one result per member.
    pub(crate) fn submit(
        &self,
        run: &str,
        kind: ReqKind,
        events: Vec<NewEvent>,
        commit: impl FnOnce(&[Arc<Request>]) -> Vec<Result<Outcome>>,
    ) -> Result<Outcome> {
        let req = Arc::new(Request {
            kind,
            events,
            turn: Mutex::new(Turn::Waiting),
            cv: Condvar::new(),
        });
        let lead = {
            let mut runs = self.runs.lock();
            let q = runs.entry(run.to_string()).or_default();
            q.pending.push_back(req.clone());
            !std::mem::replace(&mut q.leading, true)
        };
        if !lead {
            let mut t = req.turn.lock();
            while matches!(*t, Turn::Waiting) {
                req.cv.wait(&mut t);
            }
            if let Turn::Done(_) = &*t {
                return take_result(&mut t);
            }
        }
        let mut leading = Leading {
            queues: self,
            run,
            group: self.take_group(run),
            delivered: false,
        };
        let results = commit(&leading.group);
        let events: usize = results
            .iter()
            .map(|r| match r {
                Ok(Outcome::Facts(a)) => a.iter().filter(|a| !a.duplicate).count(),
                Ok(Outcome::Decisions(s)) => s.len(),
                Err(_) => 0,
            })
            .sum();
        self.stats.record(leading.group.len(), events as u64);
        for (r, res) in leading.group.iter().zip(results) {
            r.set(Turn::Done(res));
        }
        leading.delivered = true;
        drop(leading);
        take_result(&mut req.turn.lock())
    }

    /// The oldest queued requests of `run`, up to the group bounds (at least one).
    fn take_group(&self, run: &str) -> Vec<Arc<Request>> {
        let mut runs = self.runs.lock();
        let Some(q) = runs.get_mut(run) else {
            return Vec::new();
        };
        let (mut events, mut bytes, mut n) = (0usize, 0usize, 0usize);
        for r in &q.pending {
            events += r.events.len();
            bytes += r.len_bytes();
            if n > 0 && (events > GROUP_EVENTS_MAX || bytes > GROUP_LEN_BYTES_MAX) {
                break;
            }
            n += 1;
        }
        q.pending.drain(..n).collect()
    }

    /// Counters of the groups committed so far.
    pub(crate) fn stats(&self) -> CommitStatsSnapshot {
        self.stats.snapshot()
    }
}

/// The leader's duty, done on drop so that a panic inside `commit` cannot wedge the queue:
/// members not yet answered get an error, and the next queued request leads (or the run's
/// queue is removed when none is).
struct Leading<'q> {
    queues: &'q Queues,
    run: &'q str,
    group: Vec<Arc<Request>>,
    delivered: bool,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if !self.delivered {
            for r in &self.group {
                r.set(Turn::Done(Err(panicked(self.run))));
            }
        }
        let mut runs = self.queues.runs.lock();
        let Some(q) = runs.get_mut(self.run) else {
            return;
        };
        match q.pending.front() {
            Some(next) => next.set(Turn::Lead),
            None => {
                runs.remove(self.run);
            }
        }
    }
}

/// The error of the members of a group whose leader panicked: their transaction was never
/// committed (an unwinding leader drops it, which rolls it back), but the caller cannot tell
/// from here, so it is an I/O failure, as a lost connection is.
fn panicked(run: &str) -> Error {
    Error::Io {
        op: "committing to",
        path: "postgres".into(),
        source: std::io::Error::other(format!(
            "run {run}: the thread leading this group commit panicked before answering"
        )),
    }
}

fn take_result(t: &mut Turn) -> Result<Outcome> {
    match std::mem::replace(t, Turn::Waiting) {
        Turn::Done(r) => r,
        // Unreachable by construction: a leader answers its own request before returning.
        _ => Err(Error::InvalidConfig("commit result missing".to_string())),
    }
}

/// Keys and caller event ids of the run's stored events, with their seqs.
#[derive(Debug, Default)]
pub(crate) struct Known {
    pub(crate) by_key: HashMap<String, Seq>,
    pub(crate) by_id: HashMap<Ulid, Seq>,
}

impl Known {
    /// The stored seq of `e` when its key or caller id is known, with what matched.
    fn find(&self, e: &NewEvent) -> Option<(Seq, String)> {
        if let Some(k) = &e.key
            && let Some(&s) = self.by_key.get(k)
        {
            return Some((s, k.clone()));
        }
        let id = e.event_id?;
        self.by_id.get(&id).map(|&s| (s, id.to_string()))
    }

    fn add(&mut self, e: &NewEvent, seq: Seq) {
        if let Some(k) = &e.key {
            self.by_key.insert(k.clone(), seq);
        }
        if let Some(id) = e.event_id {
            self.by_id.insert(id, seq);
        }
    }
}

/// A group decided in memory: one result per member, and the accepted events to insert at
/// `first_seq ..= last_seq`, in seq order.
pub(crate) struct Plan<'g> {
    pub(crate) results: Vec<Result<Outcome>>,
    /// Whether member i has events among `accepted` (it fails if the transaction does).
    pub(crate) writes: Vec<bool>,
    pub(crate) accepted: Vec<&'g NewEvent>,
    pub(crate) last_seq: Seq,
}

/// Decides every member of `group` in order, starting from the locked counter `last_seq` and
/// the stored keys and ids `known`: a decision is fenced against the counter as advanced by
/// the members before it and rejected on a known key or id (also one repeated inside its own
/// batch); a fact already known (stored, or accepted earlier in this group) reports the seq
/// of the first and appends nothing. Rejections touch nothing, so they never affect others.
pub(crate) fn plan<'g>(
    run: &str,
    last_seq: Seq,
    mut known: Known,
    group: &'g [Arc<Request>],
) -> Plan<'g> {
    let mut p = Plan {
        results: Vec::with_capacity(group.len()),
        writes: Vec::with_capacity(group.len()),
        accepted: Vec::new(),
        last_seq,
    };
    for req in group {
        let before = p.accepted.len();
        let res = match req.kind {
            ReqKind::Facts => Ok(Outcome::Facts(facts(&mut p, &mut known, &req.events))),
            ReqKind::Decisions { expected } => {
                decisions(run, &mut p, &mut known, expected, &req.events).map(Outcome::Decisions)
            }
        };
        p.writes.push(p.accepted.len() > before);
        p.results.push(res);
    }
    p
}

fn facts<'g>(p: &mut Plan<'g>, known: &mut Known, events: &'g [NewEvent]) -> Vec<Appended> {
    let mut out = Vec::with_capacity(events.len());
    for e in events {
        if let Some((seq, _)) = known.find(e) {
            out.push(Appended {
                seq,
                duplicate: true,
            });
            continue;
        }
        p.last_seq += 1;
        known.add(e, p.last_seq);
        p.accepted.push(e);
        out.push(Appended {
            seq: p.last_seq,
            duplicate: false,
        });
    }
    out
}

fn decisions<'g>(
    run: &str,
    p: &mut Plan<'g>,
    known: &mut Known,
    expected: Seq,
    events: &'g [NewEvent],
) -> Result<Vec<Seq>> {
    if expected != p.last_seq {
        return Err(Error::Fenced {
            run: run.to_string(),
            expected,
            actual: p.last_seq,
        });
    }
    // Checked whole before anything is accepted: a rejected batch leaves `known` untouched.
    let mut own = Known::default();
    for (i, e) in events.iter().enumerate() {
        if let Some((seq, key)) = known.find(e).or_else(|| own.find(e)) {
            return Err(Error::DuplicateDecision {
                run: run.to_string(),
                key,
                seq,
            });
        }
        own.add(e, p.last_seq + 1 + i as u64);
    }
    let first = p.last_seq + 1;
    for e in events {
        p.last_seq += 1;
        known.add(e, p.last_seq);
        p.accepted.push(e);
    }
    Ok((first..=p.last_seq).collect())
}

/// Number of power-of-two buckets of the group-size histogram: the length of
/// [`CommitStatsSnapshot::group_sizes`] (the file store's histogram).
const GROUP_BUCKETS: usize = 16;

/// Live counters of committed groups.
#[derive(Default)]
struct Stats {
    groups: AtomicU64,
    requests: AtomicU64,
    events: AtomicU64,
    group_sizes: [AtomicU64; GROUP_BUCKETS],
}

impl Stats {
    fn record(&self, requests: usize, events: u64) {
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(requests as u64, Ordering::Relaxed);
        self.events.fetch_add(events, Ordering::Relaxed);
        let bucket = (usize::BITS - requests.saturating_sub(1).leading_zeros()) as usize;
        self.group_sizes[bucket.min(GROUP_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> CommitStatsSnapshot {
        CommitStatsSnapshot {
            groups: self.groups.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
            group_sizes: std::array::from_fn(|i| self.group_sizes[i].load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn fact(key: &str) -> NewEvent {
        NewEvent::new("step_completed", b"x".to_vec()).key(key)
    }

    fn req(kind: ReqKind, events: Vec<NewEvent>) -> Arc<Request> {
        Arc::new(Request {
            kind,
            events,
            turn: Mutex::new(Turn::Waiting),
            cv: Condvar::new(),
        })
    }

    fn facts_of(r: &Result<Outcome>) -> Vec<(Seq, bool)> {
        match r {
            Ok(Outcome::Facts(a)) => a.iter().map(|a| (a.seq, a.duplicate)).collect(),
            other => panic!("expected facts, got {other:?}"),
        }
    }

    #[test]
    fn plan_dedupes_facts_within_the_group_to_the_first_seq() {
        let known = Known {
            by_key: HashMap::from([("old".to_string(), 3)]),
            by_id: HashMap::new(),
        };
        let group = [
            req(ReqKind::Facts, vec![fact("a"), fact("old"), fact("a")]),
            req(ReqKind::Facts, vec![fact("b"), fact("a")]),
        ];
        let p = plan("r", 5, known, &group);
        assert_eq!(facts_of(&p.results[0]), [(6, false), (3, true), (6, true)]);
        assert_eq!(facts_of(&p.results[1]), [(7, false), (6, true)]);
        assert_eq!(p.writes, [true, true]);
        assert_eq!(p.last_seq, 7);
        let keys: Vec<_> = p.accepted.iter().map(|e| e.key.as_deref()).collect();
        assert_eq!(keys, [Some("a"), Some("b")]);
    }

    #[test]
    fn plan_fences_decisions_against_the_counter_advanced_by_earlier_members() {
        let group = [
            req(ReqKind::Facts, vec![fact("f")]),
            req(ReqKind::Decisions { expected: 2 }, vec![fact("late")]),
            req(
                ReqKind::Decisions { expected: 3 },
                vec![fact("d1"), fact("d2")],
            ),
            req(ReqKind::Decisions { expected: 5 }, vec![fact("f")]),
            req(
                ReqKind::Decisions { expected: 5 },
                vec![fact("x"), fact("x")],
            ),
            req(ReqKind::Facts, vec![fact("x")]),
        ];
        let p = plan("r", 2, Known::default(), &group);
        assert_eq!(facts_of(&p.results[0]), [(3, false)]);
        assert!(matches!(
            p.results[1],
            Err(Error::Fenced {
                expected: 2,
                actual: 3,
                ..
            })
        ));
        assert!(matches!(&p.results[2], Ok(Outcome::Decisions(s)) if s == &[4, 5]));
        assert!(matches!(
            &p.results[3],
            Err(Error::DuplicateDecision { key, seq: 3, .. }) if key == "f"
        ));
        assert!(matches!(
            &p.results[4],
            Err(Error::DuplicateDecision { key, seq: 6, .. }) if key == "x"
        ));
        // The rejected batch left nothing behind: its key is fresh for the next member.
        assert_eq!(facts_of(&p.results[5]), [(6, false)]);
        assert_eq!(p.writes, [true, false, true, false, false, true]);
        assert_eq!(p.last_seq, 6);
    }

    #[test]
    fn a_panicking_leader_fails_its_group_and_hands_the_queue_on() {
        let queues = Arc::new(Queues::default());
        let (led_tx, led_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let q = queues.clone();
        let first = std::thread::spawn(move || {
            q.submit("r", ReqKind::Facts, vec![fact("a")], |g| {
                led_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                g.iter().map(|_| Ok(Outcome::Decisions(vec![1]))).collect()
            })
        });
        led_rx.recv().unwrap();
        // Two appends queue behind the first group; the second group (both) panics.
        let q = queues.clone();
        let panicking = std::thread::spawn(move || {
            q.submit("r", ReqKind::Facts, vec![fact("b")], |_| {
                panic!("injected leader panic")
            })
        });
        let (done_tx, done_rx) = mpsc::channel();
        let q = queues.clone();
        let follower = std::thread::spawn(move || {
            while q.runs.lock().get("r").map_or(0, |r| r.pending.len()) < 1 {
                std::thread::yield_now();
            }
            let r = q.submit("r", ReqKind::Facts, vec![fact("c")], |_| {
                panic!("the follower must not lead")
            });
            done_tx.send(r).unwrap();
        });
        while queues.runs.lock().get("r").map_or(0, |r| r.pending.len()) < 2 {
            std::thread::yield_now();
        }
        go_tx.send(()).unwrap();
        assert!(matches!(first.join().unwrap(), Ok(Outcome::Decisions(s)) if s == [1]));
        assert!(panicking.join().is_err());
        let got = done_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the follower was answered, not left waiting");
        follower.join().unwrap();
        match got {
            Err(Error::Io { source, .. }) => {
                assert!(source.to_string().contains("panicked"), "{source}")
            }
            other => panic!("expected Io, got {other:?}"),
        }
        // The run's queue is not wedged, and an idle run keeps no entry.
        let next = queues.submit("r", ReqKind::Facts, vec![fact("d")], |g| {
            g.iter().map(|_| Ok(Outcome::Decisions(vec![9]))).collect()
        });
        assert!(matches!(next, Ok(Outcome::Decisions(s)) if s == [9]));
        assert!(queues.runs.lock().is_empty());
        let stats = queues.stats();
        assert_eq!((stats.groups, stats.requests, stats.events), (2, 2, 2));
    }

    /// What an append answered, comparable across backends.
    #[derive(Debug, PartialEq)]
    enum Answer {
        Facts(Vec<(Seq, bool)>),
        Decisions(Vec<Seq>),
        Rejected(String),
    }

    fn answer(r: &Result<Outcome>) -> Answer {
        match r {
            Ok(Outcome::Facts(a)) => {
                Answer::Facts(a.iter().map(|a| (a.seq, a.duplicate)).collect())
            }
            Ok(Outcome::Decisions(s)) => Answer::Decisions(s.clone()),
            Err(e) => Answer::Rejected(e.to_string()),
        }
    }

    /// A tiny deterministic generator (xorshift64), so the cases are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn random_events(rng: &mut Rng, ids: &[Ulid]) -> Vec<NewEvent> {
        (0..1 + rng.below(3))
            .map(|_| {
                let mut e = NewEvent::new("k", b"p".to_vec());
                if rng.below(10) < 6 {
                    e = e.key(format!("k{}", rng.below(5)));
                }
                if rng.below(10) < 3 {
                    e = e.event_id(ids[rng.below(ids.len() as u64) as usize]);
                }
                e
            })
            .collect()
    }

    /// Parity with the file store: a group decided by [`plan`] answers every member exactly
    /// as the file store answers the same appends made one after another (its own groups
    /// decide in arrival order too), and accepts the same events.
    #[test]
    fn a_group_answers_as_the_file_store_does_in_arrival_order() {
        use runlog::{Config, RunId, RunLog, Store};
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let ids: Vec<Ulid> = (0..6).map(|i| Ulid::from_parts(1, i)).collect();
        let (mut fenced, mut dup_decisions, mut dup_facts) = (0, 0, 0);
        for _ in 0..60 {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path().join("s"), Config::default()).unwrap();
            let run = RunId::new("r").unwrap();
            RunLog::create_run(&store, &run, b"").unwrap();
            for _ in 0..rng.below(3) {
                store
                    .append_facts(&run, random_events(&mut rng, &ids))
                    .unwrap();
            }
            let before = store.read(&run, 0, usize::MAX).unwrap().events;
            let last = before.len() as Seq;
            let mut known = Known::default();
            for e in &before {
                if let Some(k) = &e.key {
                    known.by_key.insert(k.clone(), e.seq);
                }
                known.by_id.insert(e.event_id, e.seq);
            }
            let group: Vec<Arc<Request>> = (0..1 + rng.below(8))
                .map(|_| {
                    let kind = if rng.below(2) == 0 {
                        ReqKind::Facts
                    } else {
                        ReqKind::Decisions {
                            expected: (last + rng.below(5)).saturating_sub(1),
                        }
                    };
                    req(kind, random_events(&mut rng, &ids))
                })
                .collect();
            let p = plan("r", last, known, &group);
            for (r, got) in group.iter().zip(&p.results) {
                let want = match r.kind {
                    ReqKind::Facts => store
                        .append_facts(&run, r.events.clone())
                        .map(Outcome::Facts),
                    ReqKind::Decisions { expected } => store
                        .append_decisions(&run, expected, r.events.clone())
                        .map(Outcome::Decisions),
                };
                let want = answer(&want);
                match &want {
                    Answer::Rejected(e) if e.contains("fenced") || e.contains("expected") => {
                        fenced += 1
                    }
                    Answer::Rejected(_) => dup_decisions += 1,
                    Answer::Facts(a) => dup_facts += a.iter().filter(|a| a.1).count(),
                    Answer::Decisions(_) => {}
                }
                assert_eq!(
                    answer(got),
                    want,
                    "group {:?}",
                    group
                        .iter()
                        .map(|r| (&r.kind, &r.events))
                        .collect::<Vec<_>>()
                );
            }
            let after = store.read(&run, last, usize::MAX).unwrap().events;
            let keys = |e: &NewEvent| (e.key.clone(), e.event_id);
            let stored: Vec<_> = after
                .iter()
                .map(|e| (e.key.clone(), Some(e.event_id)))
                .collect();
            let planned: Vec<_> = p.accepted.iter().map(|e| keys(e)).collect();
            assert_eq!(planned.len(), stored.len());
            for (pl, st) in planned.iter().zip(&stored) {
                assert_eq!(pl.0, st.0);
                if pl.1.is_some() {
                    assert_eq!(pl.1, st.1);
                }
            }
            assert_eq!(p.last_seq, store.last_seq(&run).unwrap());
        }
        // The cases reach every kind of answer.
        assert!(
            fenced > 5 && dup_decisions > 5 && dup_facts > 5,
            "{fenced} {dup_decisions} {dup_facts}"
        );
    }
}
