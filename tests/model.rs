//! Model test: random sequences of create / append fact / append decision / read / reopen
//! against an in-memory model of the contract (INVARIANTS.md rules 1, 2, 3, 5, 6 and the
//! idempotency of facts), on a real store directory. 1,000 cases by default
//! (`PROPTEST_CASES` overrides).

use std::collections::HashMap;

use proptest::prelude::*;
use runlog::{Config, Error, NewEvent, RunId, Store};

#[derive(Clone, Debug)]
struct Ev {
    kind: u8,
    key: Option<u8>,
    payload: Vec<u8>,
}

#[derive(Clone, Debug)]
enum Op {
    Create(u8),
    Facts(u8, Vec<Ev>),
    /// Decision batch with `expected = last + skew`.
    Decisions(u8, i8, Vec<Ev>),
    Read(u8, u8, u8),
    Reopen,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        0u8..4,
        proptest::option::weighted(0.4, 0u8..6),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(kind, key, payload)| Ev { kind, key, payload })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0u8..3).prop_map(Op::Create),
        4 => (0u8..3, proptest::collection::vec(ev(), 1..4)).prop_map(|(r, e)| Op::Facts(r, e)),
        3 => (0u8..3, -1i8..=1, proptest::collection::vec(ev(), 1..4)).prop_map(|(r, s, e)| Op::Decisions(r, s, e)),
        2 => (0u8..3, any::<u8>(), 0u8..8).prop_map(|(r, a, l)| Op::Read(r, a, l)),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Default)]
struct ModelRun {
    events: Vec<(String, Option<String>, Vec<u8>)>,
    keys: HashMap<String, u64>,
}

fn new_event(e: &Ev) -> NewEvent {
    let mut n = NewEvent::new(format!("kind{}", e.kind), e.payload.clone());
    if let Some(k) = e.key {
        n = n.key(format!("key{k}"));
    }
    n
}

fn key_of(e: &Ev) -> Option<String> {
    e.key.map(|k| format!("key{k}"))
}

struct World {
    dir: tempfile::TempDir,
    store: Store,
    model: HashMap<u8, ModelRun>,
}

impl World {
    fn run_id(r: u8) -> RunId {
        RunId::new(format!("run{r}")).unwrap()
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Create(r) => {
                let res = self.store.create_run(&Self::run_id(*r));
                if self.model.contains_key(r) {
                    prop_assert!(matches!(res, Err(Error::RunExists { .. })), "{res:?}");
                } else {
                    prop_assert!(res.is_ok(), "{res:?}");
                    self.model.insert(*r, ModelRun::default());
                }
            }
            Op::Facts(r, evs) => self.facts(*r, evs)?,
            Op::Decisions(r, skew, evs) => self.decisions(*r, *skew, evs)?,
            Op::Read(r, after, limit) => {
                self.read(*r, u64::from(*after % 16), usize::from(*limit))?
            }
            Op::Reopen => {
                self.store = Store::open(self.dir.path(), Config::default()).unwrap();
            }
        }
        Ok(())
    }

    fn facts(&mut self, r: u8, evs: &[Ev]) -> Result<(), TestCaseError> {
        let res = self
            .store
            .append_facts(&Self::run_id(r), evs.iter().map(new_event).collect());
        let Some(m) = self.model.get_mut(&r) else {
            prop_assert!(matches!(res, Err(Error::RunNotFound { .. })), "{res:?}");
            return Ok(());
        };
        let got = res.unwrap();
        let mut want = Vec::new();
        for e in evs {
            if let Some(seq) = key_of(e).and_then(|k| m.keys.get(&k).copied()) {
                want.push((seq, true));
                continue;
            }
            m.events
                .push((format!("kind{}", e.kind), key_of(e), e.payload.clone()));
            let seq = m.events.len() as u64;
            if let Some(k) = key_of(e) {
                m.keys.insert(k, seq);
            }
            want.push((seq, false));
        }
        prop_assert_eq!(
            got.iter().map(|a| (a.seq, a.duplicate)).collect::<Vec<_>>(),
            want
        );
        Ok(())
    }

    fn decisions(&mut self, r: u8, skew: i8, evs: &[Ev]) -> Result<(), TestCaseError> {
        let last = self.model.get(&r).map_or(0, |m| m.events.len() as u64);
        let expected = last.saturating_add_signed(i64::from(skew));
        let res = self.store.append_decisions(
            &Self::run_id(r),
            expected,
            evs.iter().map(new_event).collect(),
        );
        let Some(m) = self.model.get_mut(&r) else {
            prop_assert!(matches!(res, Err(Error::RunNotFound { .. })), "{res:?}");
            return Ok(());
        };
        if expected != last {
            let fenced = matches!(res, Err(Error::Fenced { expected: e, actual: a, .. }) if e == expected && a == last);
            prop_assert!(fenced, "{res:?}");
            return Ok(());
        }
        let mut seen = std::collections::HashSet::new();
        let dup = evs
            .iter()
            .filter_map(key_of)
            .any(|k| m.keys.contains_key(&k) || !seen.insert(k));
        if dup {
            prop_assert!(
                matches!(res, Err(Error::DuplicateDecision { .. })),
                "{res:?}"
            );
            return Ok(());
        }
        let seqs = res.unwrap();
        prop_assert_eq!(
            seqs,
            (last + 1..=last + evs.len() as u64).collect::<Vec<_>>()
        );
        for e in evs {
            m.events
                .push((format!("kind{}", e.kind), key_of(e), e.payload.clone()));
            if let Some(k) = key_of(e) {
                m.keys.insert(k, m.events.len() as u64);
            }
        }
        Ok(())
    }

    fn read(&self, r: u8, after: u64, limit: usize) -> Result<(), TestCaseError> {
        let res = self.store.read(&Self::run_id(r), after, limit);
        let Some(m) = self.model.get(&r) else {
            prop_assert!(matches!(res, Err(Error::RunNotFound { .. })), "{res:?}");
            return Ok(());
        };
        let page = res.unwrap();
        let total = m.events.len() as u64;
        let want: Vec<_> = (after + 1..=total).take(limit).collect();
        prop_assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            want.clone()
        );
        for e in &page.events {
            let (kind, key, payload) = &m.events[(e.seq - 1) as usize];
            prop_assert_eq!(&e.kind, kind);
            prop_assert_eq!(e.key.as_deref(), key.as_deref());
            prop_assert_eq!(&e.payload[..], &payload[..]);
        }
        prop_assert_eq!(page.next, want.last().copied().unwrap_or(after));
        prop_assert_eq!(page.has_more, page.next < total);
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn store_matches_the_model(ops in proptest::collection::vec(op(), 1..25)) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), Config::default()).unwrap();
        let mut w = World { dir, store, model: HashMap::new() };
        for op in &ops {
            w.apply(op)?;
        }
        for r in w.model.keys() {
            let report = w.store.verify_run(&World::run_id(*r)).unwrap();
            prop_assert!(report.problems.is_empty() && report.notes.is_empty(), "{report:?}");
            prop_assert_eq!(report.events, w.model[r].events.len() as u64);
        }
    }
}
