//! The pure decision of a group: which appends are accepted (at which seqs), which are
//! rejected by their fence or as a duplicate decision, and which facts are deduplicated. No
//! I/O, no clock, no randomness: the same group against the same stored state decides the
//! same way on every backend.

use std::collections::HashMap;
use std::ops::Range;

use ulid::Ulid;

use super::queue::{Weigh, Written};
use crate::error::{Error, Result};
use crate::event::{NewEvent, Seq};
use crate::types::Appended;

/// Fact (unfenced, deduplicated by key and caller event id) or decision (fenced at
/// `expected`, rule 2 of INVARIANTS.md; never deduplicated: a known key or id rejects it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendKind {
    /// `append_facts`.
    Facts,
    /// `append_decisions` at `expected`, the caller's `expected_seq`.
    Decisions {
        /// The last seq the caller saw; the batch is accepted only when it still is.
        expected: Seq,
    },
}

/// One append call, validated by its backend, waiting in a group.
#[derive(Debug)]
pub struct Append {
    /// Facts or decisions.
    pub kind: AppendKind,
    /// The batch: 1 ..= the backend's `batch_events_max` events, all or nothing. Shared, so
    /// a caller can submit the same batch again after a commit that wrote nothing (the file
    /// store's append to a cached run found deleted at commit).
    pub events: std::sync::Arc<Vec<NewEvent>>,
    /// The backend's size of the batch, in bytes, for bounding a group ([`super::Bounds`]):
    /// the encoded length for the file store, the payload bytes for PostgreSQL.
    pub len_bytes: usize,
}

impl Weigh for Append {
    fn events(&self) -> usize {
        self.events.len()
    }

    fn len_bytes(&self) -> usize {
        self.len_bytes
    }
}

/// What an accepted append gets back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// One answer per fact, in order: its new seq, or the stored seq of its duplicate.
    Facts(Vec<Appended>),
    /// The seqs of the decisions, consecutive.
    Decisions(Vec<Seq>),
}

/// The stored events a group is decided against: the seq of the event holding a key or an
/// event id (minted or the caller's), if one does. A backend answers from what it holds
/// under its commit lock (the file store: its maps and sealed-segment indexes; PostgreSQL:
/// one lookup of the group's keys and ids under the run's row lock).
pub trait Known {
    /// The seq of the stored event with idempotency key `key`.
    fn seq_of_key(&self, key: &str) -> Option<Seq>;
    /// The seq of the stored event with id `id`.
    fn seq_of_id(&self, id: Ulid) -> Option<Seq>;
}

/// [`Known`] as two maps.
#[derive(Clone, Debug, Default)]
pub struct KnownMaps {
    /// Keys of stored events.
    pub by_key: HashMap<String, Seq>,
    /// Event ids of stored events.
    pub by_id: HashMap<Ulid, Seq>,
}

impl KnownMaps {
    /// The stored seq of `e` when its key or caller id is known, with what matched: the key
    /// is asked first, then the id.
    fn find(&self, e: &NewEvent) -> Option<(Seq, String)> {
        find(self, e)
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

impl Known for KnownMaps {
    fn seq_of_key(&self, key: &str) -> Option<Seq> {
        self.by_key.get(key).copied()
    }

    fn seq_of_id(&self, id: Ulid) -> Option<Seq> {
        self.by_id.get(&id).copied()
    }
}

/// Stored events, then those accepted earlier in the group (never both for one key or id).
impl<A: Known, B: Known> Known for (&A, &B) {
    fn seq_of_key(&self, key: &str) -> Option<Seq> {
        self.0.seq_of_key(key).or_else(|| self.1.seq_of_key(key))
    }

    fn seq_of_id(&self, id: Ulid) -> Option<Seq> {
        self.0.seq_of_id(id).or_else(|| self.1.seq_of_id(id))
    }
}

fn find(known: &impl Known, e: &NewEvent) -> Option<(Seq, String)> {
    if let Some(k) = &e.key
        && let Some(s) = known.seq_of_key(k)
    {
        return Some((s, k.clone()));
    }
    let id = e.event_id?;
    known.seq_of_id(id).map(|s| (s, id.to_string()))
}

/// A decided group: one result per member, and the accepted events, to be written at
/// `first_seq ..= last_seq` in this order (dense: `accepted[i]` gets `first_seq + i`).
#[derive(Debug)]
pub struct Plan<'g> {
    /// One result per member, in arrival order.
    pub results: Vec<Result<Outcome>>,
    /// Per member, its events' range in `accepted` (empty when it writes nothing: rejected,
    /// or every fact a duplicate). Members' ranges follow each other in arrival order.
    pub writes: Vec<Range<usize>>,
    /// The accepted events, in seq order.
    pub accepted: Vec<&'g NewEvent>,
    /// Per member, its kind when its answer was decided against members accepted before it
    /// in this group (a duplicate of one of their keys or ids, or a fence checked against
    /// the seq they advanced) instead of against the stored log alone: if the group's write
    /// fails, that answer fails with it ([`Plan::failed`]). `None`: decided on the stored log.
    pub dependent: Vec<Option<AppendKind>>,
    /// The run, for the errors [`Plan::failed`] answers with.
    run: String,
    /// Seq of `accepted[0]`: the stored last seq + 1.
    pub first_seq: Seq,
    /// The run's last seq once the group is written (the stored one when nothing is).
    pub last_seq: Seq,
}

impl Plan<'_> {
    /// The results after the write failed with `e`: every member with events in the group
    /// gets `e` (a batch is all or nothing, and the group is written at once). A member that
    /// wrote nothing keeps its answer when it was decided on the stored log alone (a
    /// duplicate of a stored event, a rejection). One decided against members accepted
    /// before it ([`Plan::dependent`]) cannot keep it, since they were never written: a
    /// decision whose `expected` differs from the stored last seq is still fenced, now
    /// against that seq; any other answer becomes `e`, the caller's cue to try again.
    pub fn failed(mut self, e: &Error) -> Vec<Result<Outcome>> {
        let stored = self.first_seq - 1;
        let members = self
            .results
            .iter_mut()
            .zip(&self.writes)
            .zip(&self.dependent);
        for ((res, writes), dependent) in members {
            *res = match (writes.is_empty(), dependent) {
                (true, None) => continue,
                (true, Some(AppendKind::Decisions { expected })) if *expected != stored => {
                    Err(Error::Fenced {
                        run: self.run.clone(),
                        expected: *expected,
                        actual: stored,
                    })
                }
                _ => Err(e.replicate()),
            };
        }
        self.results
    }

    /// What the group write returns once the backend wrote the plan with `outcome`: the
    /// members' results and the events written, or [`Plan::failed`]'s and none.
    pub fn written(self, outcome: &Result<()>) -> Written<Outcome> {
        match outcome {
            Ok(()) => Written {
                events: self.accepted.len() as u64,
                results: self.results,
            },
            Err(e) => Written {
                results: self.failed(e),
                events: 0,
            },
        }
    }
}

/// Decides `group` in arrival order against the stored last seq `last_seq` and the stored
/// events `known`:
///
/// - a decision is fenced against the last seq as advanced by the members before it
///   ([`Error::Fenced`]) and rejected when one of its events has a known key or id, or
///   repeats a key or id of its own batch ([`Error::DuplicateDecision`], with the seq of the
///   first holder);
/// - a fact whose key or id is known (stored, or accepted earlier in this group, also earlier
///   in its own batch) reports that seq as a duplicate and appends nothing.
///
/// A rejected member changes nothing: the members after it are decided as if it had not
/// been there. `run` names the run in the errors.
pub fn plan<'g>(run: &str, last_seq: Seq, known: &impl Known, group: &[&'g Append]) -> Plan<'g> {
    let mut p = Planner {
        run,
        known,
        new: KnownMaps::default(),
        plan: Plan {
            results: Vec::with_capacity(group.len()),
            writes: Vec::with_capacity(group.len()),
            accepted: Vec::new(),
            dependent: Vec::with_capacity(group.len()),
            run: run.to_string(),
            first_seq: last_seq + 1,
            last_seq,
        },
        dependent: false,
    };
    for a in group {
        let before = p.plan.accepted.len();
        p.dependent = false;
        let res = match a.kind {
            AppendKind::Facts => Ok(Outcome::Facts(p.facts(&a.events))),
            AppendKind::Decisions { expected } => {
                p.decisions(expected, &a.events).map(Outcome::Decisions)
            }
        };
        p.plan.writes.push(before..p.plan.accepted.len());
        p.plan.results.push(res);
        p.plan.dependent.push(p.dependent.then_some(a.kind));
    }
    p.plan
}

/// The state of one [`plan`] call.
struct Planner<'k, 'g, K> {
    run: &'k str,
    known: &'k K,
    /// Keys and ids accepted earlier in this group.
    new: KnownMaps,
    plan: Plan<'g>,
    /// Whether the member being decided met anything accepted earlier in this group.
    dependent: bool,
}

impl<'g, K: Known> Planner<'_, 'g, K> {
    /// The seq of `e`'s key, stored or accepted earlier in this group; else of its id. A
    /// seq past the stored log's is one accepted in this group: the member depends on it.
    fn existing(&mut self, e: &NewEvent) -> Option<(Seq, String)> {
        let found = find(&(self.known, &self.new), e);
        if found
            .as_ref()
            .is_some_and(|(seq, _)| *seq >= self.plan.first_seq)
        {
            self.dependent = true;
        }
        found
    }

    fn accept(&mut self, e: &'g NewEvent) -> Seq {
        self.plan.last_seq += 1;
        self.new.add(e, self.plan.last_seq);
        self.plan.accepted.push(e);
        self.plan.last_seq
    }

    fn facts(&mut self, events: &'g [NewEvent]) -> Vec<Appended> {
        let mut out = Vec::with_capacity(events.len());
        for e in events {
            let (seq, duplicate) = match self.existing(e) {
                Some((seq, _)) => (seq, true),
                None => (self.accept(e), false),
            };
            out.push(Appended { seq, duplicate });
        }
        out
    }

    fn decisions(&mut self, expected: Seq, events: &'g [NewEvent]) -> Result<Vec<Seq>> {
        let last = self.plan.last_seq;
        // Fenced against a seq the members before it advanced, whatever the outcome.
        self.dependent |= last != self.plan.first_seq - 1;
        if expected != last {
            return Err(Error::Fenced {
                run: self.run.to_string(),
                expected,
                actual: last,
            });
        }
        // Checked whole before anything is accepted: a rejected batch leaves no trace.
        let mut own = KnownMaps::default();
        for (i, e) in events.iter().enumerate() {
            if let Some((seq, key)) = self.existing(e).or_else(|| own.find(e)) {
                return Err(Error::DuplicateDecision {
                    run: self.run.to_string(),
                    key,
                    seq,
                });
            }
            own.add(e, last + 1 + i as u64);
        }
        Ok(events.iter().map(|e| self.accept(e)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(key: &str) -> NewEvent {
        NewEvent::new("step_completed", b"x".to_vec()).key(key)
    }

    fn append(kind: AppendKind, events: Vec<NewEvent>) -> Append {
        Append {
            kind,
            events: std::sync::Arc::new(events),
            len_bytes: 0,
        }
    }

    fn facts_of(r: &Result<Outcome>) -> Vec<(Seq, bool)> {
        match r {
            Ok(Outcome::Facts(a)) => a.iter().map(|a| (a.seq, a.duplicate)).collect(),
            other => panic!("expected facts, got {other:?}"),
        }
    }

    #[test]
    fn facts_are_deduplicated_within_the_group_to_the_first_seq() {
        let known = KnownMaps {
            by_key: HashMap::from([("old".to_string(), 3)]),
            by_id: HashMap::new(),
        };
        let group = [
            append(AppendKind::Facts, vec![fact("a"), fact("old"), fact("a")]),
            append(AppendKind::Facts, vec![fact("b"), fact("a")]),
        ];
        let refs: Vec<&Append> = group.iter().collect();
        let p = plan("r", 5, &known, &refs);
        assert_eq!(facts_of(&p.results[0]), [(6, false), (3, true), (6, true)]);
        assert_eq!(facts_of(&p.results[1]), [(7, false), (6, true)]);
        assert_eq!(p.writes, [0..1, 1..2]);
        assert_eq!((p.first_seq, p.last_seq), (6, 7));
        let keys: Vec<_> = p.accepted.iter().map(|e| e.key.as_deref()).collect();
        assert_eq!(keys, [Some("a"), Some("b")]);
    }

    #[test]
    fn decisions_are_fenced_against_the_seq_advanced_by_earlier_members() {
        let d = |expected| AppendKind::Decisions { expected };
        let group = [
            append(AppendKind::Facts, vec![fact("f")]),
            append(d(2), vec![fact("late")]),
            append(d(3), vec![fact("d1"), fact("d2")]),
            append(d(5), vec![fact("f")]),
            append(d(5), vec![fact("x"), fact("x")]),
            append(AppendKind::Facts, vec![fact("x")]),
        ];
        let refs: Vec<&Append> = group.iter().collect();
        let p = plan("r", 2, &KnownMaps::default(), &refs);
        assert_eq!(facts_of(&p.results[0]), [(3, false)]);
        assert!(matches!(
            p.results[1],
            Err(Error::Fenced {
                expected: 2,
                actual: 3,
                ..
            })
        ));
        assert_eq!(
            p.results[2].as_ref().ok(),
            Some(&Outcome::Decisions(vec![4, 5]))
        );
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
        assert_eq!(p.writes, [0..1, 1..1, 1..3, 3..3, 3..3, 3..4]);
        assert_eq!(p.last_seq, 6);
    }

    #[test]
    fn a_failed_write_fails_the_writing_members_and_keeps_the_rejections() {
        let known = KnownMaps {
            by_key: HashMap::from([("old".to_string(), 1)]),
            by_id: HashMap::new(),
        };
        let group = [
            append(AppendKind::Facts, vec![fact("new")]),
            append(AppendKind::Facts, vec![fact("old")]),
            append(AppendKind::Decisions { expected: 0 }, vec![fact("z")]),
        ];
        let refs: Vec<&Append> = group.iter().collect();
        let p = plan("r", 1, &known, &refs);
        let err = Error::InvalidConfig("disk on fire".into());
        let results = p.failed(&err);
        assert!(matches!(&results[0], Err(Error::InvalidConfig(m)) if m == "disk on fire"));
        assert_eq!(facts_of(&results[1]), [(1, true)]);
        assert!(matches!(
            results[2],
            Err(Error::Fenced {
                expected: 0,
                actual: 1,
                ..
            })
        ));
    }

    /// The answers decided against a member that was never written do not stand: a fact
    /// deduplicated to it, a decision fenced because of it or rejected as its duplicate get
    /// the write's error; a decision fenced against the seq it advanced (whether it passed
    /// that fence or not) is fenced against the stored seq when its `expected` is not that
    /// seq; answers decided on the stored log alone stand.
    #[test]
    fn a_failed_write_fails_the_answers_that_depend_on_its_members() {
        let known = KnownMaps {
            by_key: HashMap::from([("old".to_string(), 1)]),
            by_id: HashMap::new(),
        };
        let d = |expected| AppendKind::Decisions { expected };
        let group = [
            // Decided on the stored log alone: its own key twice.
            append(d(1), vec![fact("y"), fact("y")]),
            append(AppendKind::Facts, vec![fact("new")]),
            // Decided against the member above.
            append(AppendKind::Facts, vec![fact("new")]),
            append(AppendKind::Facts, vec![fact("old"), fact("new")]),
            append(d(1), vec![fact("a")]),
            append(d(2), vec![fact("new")]),
            append(d(3), vec![fact("b")]),
            append(d(2), vec![fact("z"), fact("z")]),
            // Decided on the stored log alone.
            append(AppendKind::Facts, vec![fact("old")]),
        ];
        let refs: Vec<&Append> = group.iter().collect();
        let p = plan("r", 1, &known, &refs);
        assert!(matches!(
            p.results[0],
            Err(Error::DuplicateDecision { seq: 2, .. })
        ));
        assert_eq!(facts_of(&p.results[2]), [(2, true)]);
        assert!(matches!(p.results[4], Err(Error::Fenced { actual: 2, .. })));
        assert!(matches!(
            p.results[5],
            Err(Error::DuplicateDecision { seq: 2, .. })
        ));
        assert!(matches!(p.results[6], Err(Error::Fenced { actual: 2, .. })));
        assert!(matches!(
            p.results[7],
            Err(Error::DuplicateDecision { seq: 3, .. })
        ));
        assert_eq!(
            p.dependent.iter().map(Option::is_some).collect::<Vec<_>>(),
            [false, false, true, true, true, true, true, true, false]
        );
        let err = Error::InvalidConfig("disk on fire".into());
        let results = p.failed(&err);
        assert!(matches!(
            &results[0],
            Err(Error::DuplicateDecision { key, .. }) if key == "y"
        ));
        let is_err = |r: &Result<Outcome>| matches!(r, Err(Error::InvalidConfig(_)));
        for i in [1, 2, 3, 4] {
            assert!(is_err(&results[i]), "member {i}: {:?}", results[i]);
        }
        for (i, expected) in [(5, 2), (6, 3), (7, 2)] {
            assert!(
                matches!(results[i], Err(Error::Fenced { expected: e, actual: 1, .. }) if e == expected),
                "member {i}: {:?}",
                results[i]
            );
        }
        assert_eq!(facts_of(&results[8]), [(1, true)]);
    }
}
