//! Fuzz target `model` (issue 4 §3): arbitrary operations (create, delete, keyed and
//! caller-id facts, fenced and stale decisions, reopen, paged reads, run listing, info)
//! against a store over the simulated file system and an in-memory model of the contract.
//! Every answer must equal the model's: appended seqs and duplicates, `Fenced` with the
//! right expected/actual, `DuplicateDecision`, `RunExists`, `RunNotFound`, pages, cursors,
//! listings; after every reopen every run reads back exactly as modelled.

#![no_main]

#[path = "../../tests/crash_sim/harness.rs"]
mod harness;
mod ops;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arbitrary::{Result, Unstructured};
use harness::{Ev, KEYS, Op, PAYLOAD_LEN_MAX, ROOT, RUNS, config, prepare_root, run_id};
use libfuzzer_sys::fuzz_target;
use runlog::io::sim::SimFs;
use runlog::{Appended, Error, Event, NewEvent, RunId, Seq, Store};
use ulid::Ulid;

/// A harness op, or a read-side op.
#[derive(Debug)]
enum Step {
    Write(Op),
    Read { run: u8, after: Seq, limit: usize },
    List { after: Option<u8>, limit: usize },
    Info(u8),
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let mut steps = Vec::new();
    for _ in 0..u.int_in_range(0..=40)? {
        steps.push(step(u)?);
    }
    let fs = SimFs::new(0);
    prepare_root(&fs);
    let mut t = Tester {
        store: open(&fs),
        fs,
        model: BTreeMap::new(),
        tag: 0,
    };
    for s in &steps {
        t.step(s);
    }
    t.reopen_and_compare();
    Ok(())
}

fn step(u: &mut Unstructured<'_>) -> Result<Step> {
    Ok(match u.int_in_range(0..=9)? {
        0..=5 => Step::Write(ops::op(u, false)?),
        6 | 7 => Step::Read {
            run: u.int_in_range(0..=RUNS - 1)?,
            after: u.int_in_range(0..=40)?,
            limit: u.int_in_range(0..=12)?,
        },
        8 => Step::List {
            after: if u.arbitrary()? {
                Some(u.int_in_range(0..=RUNS - 1)?)
            } else {
                None
            },
            limit: u.int_in_range(1..=4)?,
        },
        _ => Step::Info(u.int_in_range(0..=RUNS - 1)?),
    })
}

fn open(fs: &SimFs) -> Store {
    Store::open_with_fs(Arc::new(fs.clone()), ROOT, config()).expect("open store")
}

#[derive(Clone, Debug)]
struct MEvent {
    kind: &'static str,
    payload: Vec<u8>,
    key: Option<String>,
    id: Option<Ulid>,
    corr: Option<String>,
}

impl MEvent {
    fn new_event(&self) -> NewEvent {
        let mut n = NewEvent::new(self.kind, self.payload.clone());
        if let Some(k) = &self.key {
            n = n.key(k.clone());
        }
        if let Some(id) = self.id {
            n = n.event_id(id);
        }
        if let Some(c) = &self.corr {
            n = n.correlation_id(c.clone());
        }
        n
    }

    fn assert_is(&self, e: &Event, seq: Seq) {
        assert_eq!(e.seq, seq);
        assert_eq!(e.kind, self.kind, "seq {seq}");
        assert_eq!(e.payload.as_ref(), self.payload.as_slice(), "seq {seq}");
        assert_eq!(e.key.as_deref(), self.key.as_deref(), "seq {seq}");
        assert_eq!(
            e.correlation_id.as_deref(),
            self.corr.as_deref(),
            "seq {seq}"
        );
        if let Some(id) = self.id {
            assert_eq!(e.event_id, id, "seq {seq}");
        }
    }
}

#[derive(Default, Debug)]
struct MRun {
    events: Vec<MEvent>,
    keys: HashMap<String, Seq>,
    ids: HashMap<Ulid, Seq>,
}

impl MRun {
    fn last(&self) -> Seq {
        self.events.len() as Seq
    }

    /// The seq an event repeats (key first, then caller id), like the store.
    fn existing(&self, e: &MEvent) -> Option<Seq> {
        let by_key = e.key.as_ref().and_then(|k| self.keys.get(k));
        by_key
            .or_else(|| e.id.and_then(|id| self.ids.get(&id)))
            .copied()
    }

    fn push(&mut self, e: MEvent) -> Seq {
        let seq = self.last() + 1;
        if let Some(k) = &e.key {
            self.keys.insert(k.clone(), seq);
        }
        if let Some(id) = e.id {
            self.ids.insert(id, seq);
        }
        self.events.push(e);
        seq
    }
}

struct Tester {
    fs: SimFs,
    store: Store,
    model: BTreeMap<u8, MRun>,
    tag: u64,
}

impl Tester {
    fn step(&mut self, s: &Step) {
        match s {
            Step::Write(op) => self.write(op),
            Step::Read { run, after, limit } => self.read(*run, *after, *limit),
            Step::List { after, limit } => self.list(*after, *limit),
            Step::Info(run) => self.info(*run),
        }
    }

    fn write(&mut self, op: &Op) {
        match op {
            Op::CreateRun(n) => self.create(*n),
            Op::DeleteRun(n) => self.delete(*n),
            Op::Facts(n, evs) => self.facts(*n, evs),
            Op::Decisions(n, stale, evs) => self.decisions(*n, *stale, evs),
            Op::Reopen | Op::Crash(_) => self.reopen_and_compare(),
        }
    }

    fn events(&mut self, kind: &'static str, evs: &[Ev]) -> Vec<MEvent> {
        evs.iter()
            .map(|ev| {
                self.tag += 1;
                let mut payload = format!("tag {} |", self.tag).into_bytes();
                payload.resize(
                    payload.len() + usize::from(ev.payload_len.min(PAYLOAD_LEN_MAX)),
                    b'.',
                );
                MEvent {
                    kind,
                    payload,
                    key: ev.key.map(|k| format!("k{}", k % KEYS)),
                    id: ev.id.map(|i| Ulid::from_parts(1, u128::from(i % KEYS))),
                    corr: ev.corr.then(|| format!("corr-{}", self.tag)),
                }
            })
            .collect()
    }

    fn create(&mut self, n: u8) {
        let n = n % RUNS;
        let got = self.store.create_run(&run_id(n));
        match self.model.entry(n) {
            Entry::Occupied(_) => assert!(
                matches!(got, Err(Error::RunExists { .. })),
                "create existing: {got:?}"
            ),
            Entry::Vacant(v) => {
                got.expect("create_run");
                v.insert(MRun::default());
            }
        }
    }

    fn delete(&mut self, n: u8) {
        let n = n % RUNS;
        let got = self.store.delete_run(&run_id(n));
        if self.model.remove(&n).is_some() {
            got.expect("delete_run");
        } else {
            assert!(
                matches!(got, Err(Error::RunNotFound { .. })),
                "delete absent: {got:?}"
            );
        }
    }

    fn facts(&mut self, n: u8, evs: &[Ev]) {
        let n = n % RUNS;
        let events = self.events("step_completed", evs);
        let got = self
            .store
            .append_facts(&run_id(n), events.iter().map(MEvent::new_event).collect());
        let Some(m) = self.model.get_mut(&n) else {
            assert!(
                matches!(got, Err(Error::RunNotFound { .. })),
                "facts to absent run: {got:?}"
            );
            return;
        };
        let want: Vec<Appended> = events
            .into_iter()
            .map(|e| match m.existing(&e) {
                Some(seq) => Appended {
                    seq,
                    duplicate: true,
                },
                None => Appended {
                    seq: m.push(e),
                    duplicate: false,
                },
            })
            .collect();
        assert_eq!(got.expect("append_facts"), want);
    }

    fn decisions(&mut self, n: u8, stale: bool, evs: &[Ev]) {
        let n = n % RUNS;
        let events = self.events("step_created", evs);
        let last = self.model.get(&n).map_or(0, MRun::last);
        let expected = match (stale, last) {
            (false, _) => last,
            (true, 0) => 1,
            (true, _) => last - 1,
        };
        let run = run_id(n);
        let got = self.store.append_decisions(
            &run,
            expected,
            events.iter().map(MEvent::new_event).collect(),
        );
        let Some(m) = self.model.get_mut(&n) else {
            assert!(
                matches!(got, Err(Error::RunNotFound { .. })),
                "decision to absent run: {got:?}"
            );
            return;
        };
        if expected != last {
            match got {
                Err(Error::Fenced {
                    expected: e,
                    actual,
                    ..
                }) => assert_eq!((e, actual), (expected, last)),
                other => panic!("stale decision at {expected} (last {last}) answered {other:?}"),
            }
            return;
        }
        if repeats(m, &events) {
            assert!(
                matches!(got, Err(Error::DuplicateDecision { .. })),
                "duplicate decision: {got:?}"
            );
            return;
        }
        let want: Vec<Seq> = events.into_iter().map(|e| m.push(e)).collect();
        assert_eq!(got.expect("append_decisions"), want);
    }

    fn read(&self, n: u8, after: Seq, limit: usize) {
        let n = n % RUNS;
        let got = self.store.read(&run_id(n), after, limit);
        let Some(m) = self.model.get(&n) else {
            assert!(
                matches!(got, Err(Error::RunNotFound { .. })),
                "read of absent run: {got:?}"
            );
            return;
        };
        let page = got.expect("read");
        let from = (after as usize).min(m.events.len());
        let to = from.saturating_add(limit).min(m.events.len());
        assert_eq!(
            page.events.len(),
            to - from,
            "read after {after} limit {limit}"
        );
        for (i, e) in page.events.iter().enumerate() {
            m.events[from + i].assert_is(e, (from + i) as Seq + 1);
        }
        let next = page.events.last().map_or(after, |e| e.seq);
        assert_eq!(page.next, next);
        assert_eq!(
            page.has_more,
            next < m.last(),
            "has_more after {after} limit {limit}"
        );
    }

    fn list(&self, after: Option<u8>, limit: usize) {
        let ids: Vec<RunId> = self.model.keys().map(|n| run_id(*n)).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        let after_id = after.map(run_id);
        let rest: Vec<&RunId> = sorted
            .iter()
            .filter(|id| after_id.as_ref().is_none_or(|a| *id > a))
            .collect();
        let page = self
            .store
            .list_runs(after_id.as_ref(), limit)
            .expect("list_runs");
        let want: Vec<&RunId> = rest.iter().take(limit).copied().collect();
        let got: Vec<&RunId> = page.runs.iter().map(|r| &r.run).collect();
        assert_eq!(got, want, "list_runs after {after_id:?} limit {limit}");
        let next = want.last().map(|id| (*id).clone());
        assert_eq!(page.next, next, "list_runs cursor: the last returned id");
        assert_eq!(page.has_more, rest.len() > limit, "list_runs has_more");
        for info in &page.runs {
            let n = self
                .model
                .iter()
                .find(|(n, _)| run_id(**n) == info.run)
                .map(|(_, m)| m.last());
            assert_eq!(Some(info.last_seq), n, "{}: listed last seq", info.run);
        }
    }

    fn info(&self, n: u8) {
        let n = n % RUNS;
        let got = self.store.run_info(&run_id(n));
        match self.model.get(&n) {
            Some(m) => {
                let info = got.expect("run_info");
                assert_eq!(info.last_seq, m.last());
                assert!(info.segment_count >= 1);
                assert_eq!(self.store.last_seq(&run_id(n)).expect("last_seq"), m.last());
            }
            None => assert!(
                matches!(got, Err(Error::RunNotFound { .. })),
                "info of absent run: {got:?}"
            ),
        }
    }

    /// A new `Store` on the same files reads every run back exactly, and verify is clean.
    fn reopen_and_compare(&mut self) {
        self.store = open(&self.fs);
        for n in 0..RUNS {
            let run = run_id(n);
            let Some(m) = self.model.get(&n) else {
                assert!(
                    !self.store.run_exists(&run).expect("run_exists"),
                    "{run}: deleted run exists"
                );
                continue;
            };
            let page = self
                .store
                .read(&run, 0, m.events.len() + 1)
                .expect("read after reopen");
            assert_eq!(
                page.events.len(),
                m.events.len(),
                "{run}: events after reopen"
            );
            for (i, e) in page.events.iter().enumerate() {
                m.events[i].assert_is(e, i as Seq + 1);
            }
            let report = self.store.verify_run(&run).expect("verify_run");
            assert!(
                report.problems.is_empty(),
                "{run}: verify: {:?}",
                report.problems
            );
            assert_eq!(report.events, m.last());
        }
    }
}

/// Whether a decision batch repeats an existing key or caller id, or one of its own.
fn repeats(m: &MRun, events: &[MEvent]) -> bool {
    let mut keys = Vec::new();
    let mut ids = Vec::new();
    events.iter().any(|e| {
        let again = e.key.as_ref().is_some_and(|k| keys.contains(k))
            || e.id.is_some_and(|id| ids.contains(&id));
        keys.extend(e.key.clone());
        ids.extend(e.id);
        m.existing(e).is_some() || again
    })
}
