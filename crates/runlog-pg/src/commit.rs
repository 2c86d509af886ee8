//! Group commit on PostgreSQL: the core's engine (`runlog::group`: the leader/follower queue
//! and the fence/dedupe planner) with PostgreSQL's own part, how a decided group is written:
//! one transaction holding the run's row lock, one lookup of the group's keys and ids, one
//! `INSERT` of the accepted events that also advances the counter, one `COMMIT`.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use runlog::group::{
    Append, AppendKind, Bounds, CommitStats, GroupQueue, KnownMaps, Outcome, Written, plan,
};
use runlog::{CommitStatsSnapshot, NewEvent, Result, RunId, Seq};
use ulid::Ulid;

use super::{PgLog, Tx, not_found, now_ms, pg_err};

/// The bounds of one group (at least one append): the arrays bound into the
/// `INSERT … unnest(…)` stay bounded under a flood of appenders. Bytes are payload bytes.
pub(crate) const GROUP_BOUNDS: Bounds = Bounds {
    events_max: 100_000,
    len_bytes_max: 64 << 20,
};

/// The append path's statements, prepared once per connection (`Pooled`).
const SQL_LOOKUP: &str = "SELECT seq, key, event_id FROM events WHERE run_id = $1 \
     AND (key = ANY($2::text[]) OR event_id = ANY($3::bytea[]))";
/// The group's events and the counter in one statement (one round trip).
const SQL_INSERT: &str = "WITH inserted AS (INSERT INTO events \
     (run_id, seq, event_id, created_at_ms, kind, correlation_id, key, payload) \
     SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bigint[], $5::text[], $6::text[], \
     $7::text[], $8::bytea[])) \
     UPDATE runs SET last_seq = $9, committed_bytes = committed_bytes + $10, updated_at_ms = $11 \
     WHERE run_id = $1";

type Queue = GroupQueue<Append, Outcome>;

/// The group-commit queues of the runs with appends in flight through one [`PgLog`]: an idle
/// run keeps no queue, except one poisoned by a panic (its refusal must last).
#[derive(Default)]
pub(crate) struct Queues {
    runs: Mutex<HashMap<String, Arc<Queue>>>,
    stats: Arc<CommitStats>,
}

impl Queues {
    /// Queues `append` in `run`'s queue and blocks until its group is decided; a leader
    /// writes its group with `write`.
    fn submit(
        &self,
        run: &str,
        append: Append,
        write: impl FnOnce(&[&Append]) -> Written<Outcome>,
    ) -> Result<Outcome> {
        let queue = {
            let mut runs = self.runs.lock();
            match runs.get(run) {
                Some(q) => q.clone(),
                None => {
                    let q = Arc::new(Queue::new(run, GROUP_BOUNDS, self.stats.clone()));
                    runs.insert(run.to_string(), q.clone());
                    q
                }
            }
        };
        let res = queue.submit(append, write);
        // Queues are handed out under the map's lock: one held by the map alone is idle.
        let mut runs = self.runs.lock();
        drop(queue);
        if runs
            .get(run)
            .is_some_and(|q| Arc::strong_count(q) == 1 && q.poisoned().is_none())
        {
            runs.remove(run);
        }
        res
    }

    /// Counters of the groups committed so far.
    pub(crate) fn stats(&self) -> CommitStatsSnapshot {
        self.stats.snapshot()
    }
}

impl PgLog {
    /// Queues an append of `run` and waits for the group that decides it.
    pub(crate) fn submit(
        &self,
        run: &RunId,
        kind: AppendKind,
        events: Vec<NewEvent>,
    ) -> Result<Outcome> {
        let len_bytes = self.validate(&events)?;
        let append = Append {
            kind,
            events: Arc::new(events),
            len_bytes,
        };
        self.inner
            .queues
            .submit(run.as_str(), append, |group| self.commit_group(run, group))
    }

    /// One transaction for a whole group: lock the run's row once, look up the group's keys
    /// and ids once, decide every member (`runlog::group::plan`), insert the accepted events
    /// with one statement, advance the counter, commit, notify. A failure before the plan
    /// (connection, lock, lookup) fails every member; a later one every member with events
    /// in the group (none of it is applied).
    fn commit_group(&self, run: &RunId, group: &[&Append]) -> Written<Outcome> {
        self.try_commit_group(run, group)
            .unwrap_or_else(|e| Written {
                results: group.iter().map(|_| Err(e.replicate())).collect(),
                events: 0,
            })
    }

    fn try_commit_group(&self, run: &RunId, group: &[&Append]) -> Result<Written<Outcome>> {
        let (mut tx, last) = self.inner.begin_locked(run)?;
        let known = Self::existing(&mut tx, run, group)?;
        let plan = plan(run.as_str(), last, &known, group);
        if plan.accepted.is_empty() {
            // Nothing to write: the transaction (only a row lock) is rolled back on drop.
            return Ok(Written {
                results: plan.results,
                events: 0,
            });
        }
        let done = self
            .insert(&mut tx, run, last, &plan.accepted)
            .and_then(|()| {
                #[cfg(test)]
                tests::before_commit();
                tx.commit()
            });
        if done.is_ok() {
            self.inner.notifier.committed(&self.inner, run.as_str());
        }
        Ok(plan.written(&done))
    }

    /// Stored events of the run sharing a key or event id with any event of `group`: one
    /// statement for the whole group.
    fn existing(tx: &mut Tx<'_>, run: &RunId, group: &[&Append]) -> Result<KnownMaps> {
        let events = || group.iter().flat_map(|a| a.events.iter());
        let keys: Vec<&str> = events().filter_map(|e| e.key.as_deref()).collect();
        let ids: Vec<Vec<u8>> = events()
            .filter_map(|e| e.event_id.map(|id| id.to_bytes().to_vec()))
            .collect();
        let mut known = KnownMaps::default();
        if keys.is_empty() && ids.is_empty() {
            return Ok(known);
        }
        let lookup = tx.conn.prepared(SQL_LOOKUP)?;
        let rows = tx
            .query(&lookup, &[&run.as_str(), &keys, &ids])
            .map_err(|e| pg_err("looking up keys in", e))?;
        for r in rows {
            let seq = r.get::<_, i64>(0) as Seq;
            if let Some(k) = r.get::<_, Option<String>>(1) {
                known.by_key.insert(k, seq);
            }
            if let Ok(b) = <[u8; 16]>::try_from(r.get::<_, &[u8]>(2)) {
                known.by_id.insert(Ulid::from_bytes(b), seq);
            }
        }
        Ok(known)
    }

    /// Inserts `events` at `last + 1 ..` and advances the counter, inside `tx`.
    fn insert(&self, tx: &mut Tx<'_>, run: &RunId, last: Seq, events: &[&NewEvent]) -> Result<()> {
        let now = now_ms();
        let n = events.len();
        let mut seqs = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        let mut kinds = Vec::with_capacity(n);
        let mut corrs = Vec::with_capacity(n);
        let mut keys = Vec::with_capacity(n);
        let mut payloads = Vec::with_capacity(n);
        let mut bytes: i64 = 0;
        {
            let mut minter = self.inner.ids.lock();
            for (i, e) in events.iter().enumerate() {
                seqs.push((last + 1 + i as u64) as i64);
                let id = match e.event_id {
                    Some(id) => id,
                    None => minter.generate().unwrap_or_else(|_| Ulid::generate()),
                };
                ids.push(id.to_bytes().to_vec());
                times.push(e.created_at_ms.unwrap_or(now) as i64);
                kinds.push(e.kind.as_str());
                corrs.push(e.correlation_id.as_deref());
                keys.push(e.key.as_deref());
                payloads.push(&e.payload[..]);
                bytes += e.payload.len() as i64;
            }
        }
        let insert = tx.conn.prepared(SQL_INSERT)?;
        let advanced = tx
            .execute(
                &insert,
                &[
                    &run.as_str(),
                    &seqs,
                    &ids,
                    &times,
                    &kinds,
                    &corrs,
                    &keys,
                    &payloads,
                    &((last + n as u64) as i64),
                    &bytes,
                    &(now as i64),
                ],
            )
            .map_err(|e| pg_err("inserting events into", e))?;
        if advanced != 1 {
            // The row is locked by this transaction: it cannot have gone.
            return Err(not_found(run));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Needs a server (`RUNLOG_PG_URL`); skips as the integration suites do.
    use std::cell::RefCell;
    use std::sync::mpsc;
    use std::time::Duration;

    use runlog::{Error, RunLog};

    use super::*;
    use crate::Options;

    thread_local! {
        /// Run by this thread's write of a group, after its insert and before `COMMIT`.
        static BEFORE_COMMIT: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    pub(super) fn before_commit() {
        if let Some(f) = BEFORE_COMMIT.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    fn set_before_commit(f: impl FnOnce() + 'static) {
        BEFORE_COMMIT.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    /// A handle on a fresh schema, the URL and the schema (dropped by the caller).
    fn fresh() -> Option<(PgLog, String, String)> {
        let url = match std::env::var("RUNLOG_PG_URL") {
            Ok(u) if !u.is_empty() => u,
            _ if std::env::var("RUNLOG_REQUIRE_PG").as_deref() == Ok("1") => {
                panic!("RUNLOG_REQUIRE_PG=1 but RUNLOG_PG_URL is not set")
            }
            _ => {
                runlog_conformance::skip::skip("RUNLOG_PG_URL not set");
                return None;
            }
        };
        let schema = format!("t_{}", Ulid::generate().to_string().to_lowercase());
        let log = connect(&url, &schema);
        Some((log, url, schema))
    }

    fn connect(url: &str, schema: &str) -> PgLog {
        let options = Options {
            schema: Some(schema.to_string()),
            ..Options::default()
        };
        PgLog::connect_with(url, options).unwrap()
    }

    fn fact(key: &str) -> Vec<NewEvent> {
        vec![NewEvent::new("step_completed", key.as_bytes().to_vec()).key(key)]
    }

    fn wait_pending(log: &PgLog, run: &str, n: usize) {
        let pending = || {
            let runs = log.inner.queues.runs.lock();
            runs.get(run).map_or(0, |q| q.pending_len())
        };
        while pending() < n {
            std::thread::yield_now();
        }
    }

    /// The same panic contract as the file store (`tests/commit_faults.rs`): every member of
    /// the panicking group gets `Panicked` (none waits forever), nothing of it is committed,
    /// and the run refuses appends through this handle until a new one is connected.
    #[test]
    fn a_panicking_write_answers_its_group_panicked_commits_nothing_and_poisons_the_run() {
        let Some((log, url, schema)) = fresh() else {
            return;
        };
        let _drop = DropSchema(url.clone(), schema.clone());
        let run = RunId::new("p").unwrap();
        log.create_run(&run, b"").unwrap();
        let (led_tx, led_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let (first, led, followed) = std::thread::scope(|s| {
            let (log, run) = (&log, &run);
            let first = s.spawn(move || {
                set_before_commit(move || {
                    led_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                });
                log.append_facts(run, fact("a"))
            });
            led_rx.recv().unwrap();
            // Two appends queue behind the first group; the second group (both) panics
            // after its insert, before its COMMIT.
            let panicking = s.spawn(move || {
                set_before_commit(|| panic!("injected panic before COMMIT"));
                log.append_facts(run, fact("b"))
            });
            wait_pending(log, "p", 1);
            s.spawn(move || done_tx.send(log.append_facts(run, fact("c"))).unwrap());
            wait_pending(log, "p", 2);
            go_tx.send(()).unwrap();
            let followed = done_rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the follower was answered, not left waiting");
            let first = first.join().unwrap();
            (
                first,
                panicking.join().expect("the panic was caught"),
                followed,
            )
        });
        assert_eq!(first.unwrap()[0].seq, 1);
        for r in [led, followed] {
            match r {
                Err(Error::Panicked { run, detail }) => {
                    assert_eq!(
                        (run.as_str(), detail.as_str()),
                        ("p", "injected panic before COMMIT")
                    )
                }
                other => panic!("expected Panicked, got {other:?}"),
            }
        }
        let later = log.append_facts(&run, fact("d"));
        assert!(
            matches!(&later, Err(Error::Poisoned { cause, .. }) if cause.contains("injected")),
            "{later:?}"
        );
        assert_eq!(
            log.last_seq(&run).unwrap(),
            1,
            "the panicked group rolled back"
        );
        // A new handle appends at once, densely after the only committed event.
        let again = connect(&url, &schema);
        assert_eq!(again.append_facts(&run, fact("b")).unwrap()[0].seq, 2);
        let keys: Vec<_> = again
            .read(&run, 0, 10)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.key.map(String::from))
            .collect();
        assert_eq!(keys, [Some("a".to_string()), Some("b".to_string())]);
    }

    /// Drops the test's schema.
    struct DropSchema(String, String);

    impl Drop for DropSchema {
        fn drop(&mut self) {
            if let Ok(mut c) = postgres::Client::connect(&self.0, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.1));
            }
        }
    }
}
