//! Commit notifications, sent off the append path by one thread per [`crate::PgLog`].
//!
//! Not inside the append's transaction: PostgreSQL serializes the commits of all transactions
//! that issued `NOTIFY` (a database-wide lock held from before the commit record to the end of
//! the commit, its WAL flush included), so a notifying append transaction would forbid the
//! server's own group commit across runs (measured: 16 runs × 1 writer at a fifth of the
//! plain client's throughput). Not on the appender's thread either: it would add a
//! transaction's round trips to every append. The leader hands the run id to [`Notifier`]
//! after its commit; the notifier thread sends every pending run's `pg_notify` in one
//! statement on its own connection, whose session runs with `synchronous_commit = off` (a
//! lost notification costs nothing durable), so under load one notification transaction
//! covers many commits.
//!
//! A notification is lost when the notifier's connection breaks or the process dies right
//! after a commit; waiters re-read `last_seq` at least every 250 ms, so that only delays them.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use postgres::Client;

use crate::{Inner, literal};

/// Most runs named in one notification transaction.
const NOTIFY_RUNS_MAX: usize = 1024;

/// Runs committed but not yet notified, and whether the thread runs.
#[derive(Default)]
pub(crate) struct Notifier {
    state: Mutex<State>,
    cond: Condvar,
}

#[derive(Default)]
struct State {
    pending: Vec<String>,
    running: bool,
}

impl Notifier {
    /// Queues a notification of `run` (starting the thread at the first one).
    pub(crate) fn committed(&self, inner: &Arc<Inner>, run: &str) {
        let mut st = self.state.lock();
        if !st.pending.iter().any(|r| r == run) {
            st.pending.push(run.to_string());
        }
        if !st.running {
            let weak = Arc::downgrade(inner);
            st.running = std::thread::Builder::new()
                .name("runlog-pg-notify".into())
                .spawn(move || notify_loop(&weak))
                .is_ok();
        }
        drop(st);
        self.cond.notify_one();
    }
}

/// Sends what is pending, until the store is dropped.
fn notify_loop(weak: &Weak<Inner>) {
    let mut client: Option<Client> = None;
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let runs = {
            let mut st = inner.notifier.state.lock();
            if st.pending.is_empty() {
                // Bounded, so a dropped store is noticed.
                inner
                    .notifier
                    .cond
                    .wait_for(&mut st, Duration::from_millis(200));
            }
            let n = st.pending.len().min(NOTIFY_RUNS_MAX);
            st.pending.drain(..n).collect::<Vec<_>>()
        };
        if runs.is_empty() {
            continue;
        }
        if client.as_ref().is_none_or(Client::is_closed) {
            client = connect(&inner);
        }
        let Some(c) = client.as_mut() else {
            continue;
        };
        if c.batch_execute(&notify_sql(&inner.channel, &runs)).is_err() {
            client = None;
        }
    }
}

/// The notifier's own connection: every statement on it is a notification, none of which
/// needs to wait for a WAL flush.
fn connect(inner: &Inner) -> Option<Client> {
    let mut c = inner.connect_one().ok()?;
    c.batch_execute("SET synchronous_commit = off").ok()?;
    Some(c)
}

/// One simple-query round trip and one implicit transaction (the session commits
/// asynchronously, see [`connect`]). The channel is `runlog_[a-z0-9_]` and run ids are
/// `[A-Za-z0-9_-]` (both validated), quoted as literals all the same.
fn notify_sql(channel: &str, runs: &[String]) -> String {
    let calls: Vec<String> = runs
        .iter()
        .map(|r| format!("pg_notify({}, {})", literal(channel), literal(r)))
        .collect();
    format!("SELECT {}", calls.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn notify_sql_quotes_and_names_every_run_once_in_one_transaction() {
        let sql = super::notify_sql("runlog_t1", &["a".into(), "o'b".into()]);
        assert_eq!(
            sql,
            "SELECT pg_notify('runlog_t1', 'a'), pg_notify('runlog_t1', 'o''b')"
        );
    }
}
