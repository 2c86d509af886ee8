//! The group planner (`runlog::group::plan`) against a model: deciding a whole group at once
//! answers every member exactly as appending the members one at a time to a plain list
//! does (fences against the list's length, facts deduplicated by key then caller id,
//! decisions rejected on any known or repeated key or id), accepts exactly the events the
//! list gains, in order, and a rejected member changes nobody else's answer.

use std::collections::HashMap;

use proptest::prelude::*;
use runlog::group::{Append, AppendKind, KnownMaps, Outcome, Plan, plan};
use runlog::{Error, NewEvent, Result, Seq};
use ulid::Ulid;

const KEYS: usize = 5;
const IDS: u64 = 6;

/// One event of the model: its key and caller id (None for a minted one).
#[derive(Clone, Debug, PartialEq)]
struct Stored {
    key: Option<String>,
    id: Option<Ulid>,
}

fn stored(e: &NewEvent) -> Stored {
    Stored {
        key: e.key.clone(),
        id: e.event_id,
    }
}

/// An answer, comparable.
#[derive(Debug, PartialEq)]
enum Answer {
    Facts(Vec<(Seq, bool)>),
    Decisions(Vec<Seq>),
    Fenced { expected: Seq, actual: Seq },
    Duplicate { key: String, seq: Seq },
}

fn answer(r: &Result<Outcome>) -> Answer {
    match r {
        Ok(Outcome::Facts(a)) => Answer::Facts(a.iter().map(|a| (a.seq, a.duplicate)).collect()),
        Ok(Outcome::Decisions(s)) => Answer::Decisions(s.clone()),
        Err(Error::Fenced {
            expected, actual, ..
        }) => Answer::Fenced {
            expected: *expected,
            actual: *actual,
        },
        Err(Error::DuplicateDecision { key, seq, .. }) => Answer::Duplicate {
            key: key.clone(),
            seq: *seq,
        },
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// The seq of the first event of `log` (seq = index + 1) matching `e`'s key, else its id.
fn find(log: &[Stored], e: &NewEvent) -> Option<(Seq, String)> {
    let at = |i: usize| i as Seq + 1;
    if let Some(k) = &e.key
        && let Some(i) = log.iter().position(|s| s.key.as_ref() == Some(k))
    {
        return Some((at(i), k.clone()));
    }
    let id = e.event_id?;
    let i = log.iter().position(|s| s.id == Some(id))?;
    Some((at(i), id.to_string()))
}

/// One append applied to the model log, on its own.
fn apply(log: &mut Vec<Stored>, kind: AppendKind, events: &[NewEvent]) -> Answer {
    match kind {
        AppendKind::Facts => Answer::Facts(
            events
                .iter()
                .map(|e| match find(log, e) {
                    Some((seq, _)) => (seq, true),
                    None => {
                        log.push(stored(e));
                        (log.len() as Seq, false)
                    }
                })
                .collect(),
        ),
        AppendKind::Decisions { expected } => {
            let actual = log.len() as Seq;
            if expected != actual {
                return Answer::Fenced { expected, actual };
            }
            for (i, e) in events.iter().enumerate() {
                let own = find(&log_with(log, &events[..i]), e).filter(|(seq, _)| *seq > actual);
                if let Some((seq, key)) = find(log, e).or(own) {
                    return Answer::Duplicate { key, seq };
                }
            }
            log.extend(events.iter().map(stored));
            Answer::Decisions((actual + 1..=log.len() as Seq).collect())
        }
    }
}

/// `log` followed by `events`.
fn log_with(log: &[Stored], events: &[NewEvent]) -> Vec<Stored> {
    log.iter()
        .cloned()
        .chain(events.iter().map(stored))
        .collect()
}

fn known(log: &[Stored]) -> KnownMaps {
    let mut k = KnownMaps::default();
    for (i, s) in log.iter().enumerate() {
        let seq = i as Seq + 1;
        if let Some(key) = &s.key {
            k.by_key.insert(key.clone(), seq);
        }
        if let Some(id) = s.id {
            k.by_id.insert(id, seq);
        }
    }
    k
}

fn event() -> impl Strategy<Value = NewEvent> {
    (
        proptest::option::weighted(0.6, 0..KEYS),
        proptest::option::weighted(0.3, 0..IDS),
    )
        .prop_map(|(key, id)| {
            let mut e = NewEvent::new("k", b"p".to_vec());
            if let Some(k) = key {
                e = e.key(format!("k{k}"));
            }
            if let Some(i) = id {
                e = e.event_id(Ulid::from_parts(1, u128::from(i)));
            }
            e
        })
}

/// A member: facts, or decisions at `stored - 1 ..= stored + 3` (resolved against the
/// stored length by the test).
fn member() -> impl Strategy<Value = (Option<u64>, Vec<NewEvent>)> {
    (
        proptest::option::weighted(0.5, 0..5u64),
        proptest::collection::vec(event(), 1..4),
    )
}

fn plan_of<'g>(log: &[Stored], group: &'g [Append]) -> Plan<'g> {
    let refs: Vec<&Append> = group.iter().collect();
    plan("r", log.len() as Seq, &known(log), &refs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_group_decides_as_its_members_appended_one_at_a_time(
        prefix in proptest::collection::vec(event(), 0..6),
        members in proptest::collection::vec(member(), 1..9),
    ) {
        // The stored log: the prefix appended as facts (so it is a valid log).
        let mut log = Vec::new();
        apply(&mut log, AppendKind::Facts, &prefix);
        let base = log.len() as Seq;
        let group: Vec<Append> = members
            .into_iter()
            .map(|(fence, events)| Append {
                kind: match fence {
                    None => AppendKind::Facts,
                    Some(d) => AppendKind::Decisions { expected: (base + d).saturating_sub(1) },
                },
                events: events.into(),
                len_bytes: 0,
            })
            .collect();
        let p = plan_of(&log, &group);

        let mut model = log.clone();
        let mut gained_by = Vec::new();
        for (a, got) in group.iter().zip(&p.results) {
            let before = model.len();
            let want = apply(&mut model, a.kind, &a.events);
            prop_assert_eq!(answer(got), want);
            gained_by.push(before - base as usize..model.len() - base as usize);
        }
        // The accepted events are the ones the model gained, in order, at dense seqs.
        prop_assert_eq!(&p.writes, &gained_by);
        let accepted: Vec<Stored> = p.accepted.iter().map(|e| stored(e)).collect();
        prop_assert_eq!(&accepted[..], &model[base as usize..]);
        prop_assert_eq!((p.first_seq, p.last_seq), (base + 1, model.len() as Seq));

        // Without its rejected members the group answers everyone else the same.
        let rejected: Vec<bool> = p.results.iter().map(|r| r.is_err()).collect();
        let answers: HashMap<usize, Answer> = p.results.iter().map(answer).enumerate().collect();
        let kept_at: Vec<usize> = (0..group.len()).filter(|i| !rejected[*i]).collect();
        let kept: Vec<Append> = kept_at
            .iter()
            .map(|&i| Append { kind: group[i].kind, events: group[i].events.clone(), len_bytes: 0 })
            .collect();
        let q = plan_of(&log, &kept);
        for (r, i) in q.results.iter().zip(&kept_at) {
            prop_assert_eq!(&answer(r), &answers[i]);
        }
    }
}

#[test]
fn a_fact_repeating_a_key_accepted_earlier_in_the_group_reports_that_seq_before_a_stored_id() {
    // The event's key was accepted at seq 2 by the first member; its caller id is stored at
    // seq 1. The key is asked first, across stored and group events alike.
    let id = Ulid::from_parts(1, 1);
    let log = vec![Stored {
        key: None,
        id: Some(id),
    }];
    let group = [
        Append {
            kind: AppendKind::Facts,
            events: vec![NewEvent::new("k", b"p".to_vec()).key("a")].into(),
            len_bytes: 0,
        },
        Append {
            kind: AppendKind::Facts,
            events: vec![NewEvent::new("k", b"p".to_vec()).key("a").event_id(id)].into(),
            len_bytes: 0,
        },
    ];
    let p = plan_of(&log, &group);
    assert_eq!(answer(&p.results[1]), Answer::Facts(vec![(2, true)]));
}
