//! Waiting for commits: one `LISTEN` connection per [`PgLog`] feeding a condition variable,
//! and a poll of the counter in case a notification is lost.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use runlog::{Result, RunId, RunLog, Seq};

use crate::error::pg_err;
use crate::{Inner, PgLog};

/// What `wait` blocks on: a generation bumped by the listener on every notification.
pub(crate) struct Wake {
    pub(crate) state: Mutex<WakeState>,
    pub(crate) cond: Condvar,
}

#[derive(Default)]
pub(crate) struct WakeState {
    generation: u64,
    listener: ListenerState,
}

#[derive(Default, PartialEq, Eq, Clone, Copy)]
pub(crate) enum ListenerState {
    #[default]
    NotStarted,
    Running,
    Failed,
}

pub(crate) fn wait(log: &PgLog, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
    let deadline = Instant::now() + timeout;
    let listening = log.ensure_listener();
    loop {
        let generation = log.inner.wake.state.lock().generation;
        let last = log.last_seq(run)?;
        let now = Instant::now();
        if last > after || now >= deadline {
            return Ok(last);
        }
        let nap = if listening {
            Duration::from_millis(250)
        } else {
            Duration::from_millis(5)
        };
        let until = deadline.min(now + nap);
        let mut st = log.inner.wake.state.lock();
        while st.generation == generation && Instant::now() < until {
            log.inner.wake.cond.wait_until(&mut st, until);
        }
    }
}

impl PgLog {
    /// Starts the `LISTEN` connection once; whether one is running.
    fn ensure_listener(&self) -> bool {
        let mut st = self.inner.wake.state.lock();
        match st.listener {
            ListenerState::Running => return true,
            ListenerState::Failed => return false,
            ListenerState::NotStarted => {}
        }
        let client = self.inner.connect_one().and_then(|mut c| {
            c.batch_execute(&format!("LISTEN \"{}\"", self.inner.channel))
                .map_err(|e| pg_err("listening on", e))?;
            Ok(c)
        });
        let Ok(client) = client else {
            st.listener = ListenerState::Failed;
            return false;
        };
        st.listener = ListenerState::Running;
        let weak = Arc::downgrade(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("runlog-pg-listen".into())
            .spawn(move || listen(client, weak));
        if spawned.is_err() {
            st.listener = ListenerState::Failed;
            return false;
        }
        true
    }
}

/// The listener: bumps the wake generation on every notification; ends when the store is
/// dropped or the connection breaks (waiters then fall back to polling).
fn listen(mut client: Client, inner: Weak<Inner>) {
    loop {
        let got = {
            let mut n = client.notifications();
            let mut it = n.timeout_iter(Duration::from_millis(200));
            match it.next() {
                Ok(Some(_)) => true,
                Ok(None) => false,
                Err(_) => {
                    if let Some(inner) = inner.upgrade() {
                        let mut st = inner.wake.state.lock();
                        st.listener = ListenerState::Failed;
                        st.generation += 1;
                        inner.wake.cond.notify_all();
                    }
                    return;
                }
            }
        };
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if got {
            let mut st = inner.wake.state.lock();
            st.generation += 1;
            inner.wake.cond.notify_all();
        }
    }
}

/// The `LISTEN`/`NOTIFY` channel of a schema's commits: `runlog_<schema>`, or, where that
/// would pass PostgreSQL's 63-byte identifier limit (schemas of 57–63 bytes), the schema's
/// first 39 bytes and a 64-bit FNV-1a hash of the whole name: the same in every process.
pub(crate) fn channel_name(schema: Option<&str>) -> String {
    let schema = schema.unwrap_or("default");
    let plain = format!("runlog_{schema}");
    if plain.len() <= 63 {
        return plain;
    }
    let hash = schema.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("runlog_{}_{hash:016x}", &schema[..39])
}

#[cfg(test)]
mod tests {
    use super::channel_name;

    #[test]
    fn channel_names_fit_postgres_identifiers_and_keep_schemas_apart() {
        assert_eq!(channel_name(None), "runlog_default");
        assert_eq!(channel_name(Some("t_1")), "runlog_t_1");
        let a = "a".repeat(56);
        assert_eq!(channel_name(Some(&a)), format!("runlog_{a}"));
        let long1 = format!("{}_x", "s".repeat(61));
        let long2 = format!("{}_y", "s".repeat(61));
        for s in [&long1, &long2] {
            assert!(
                channel_name(Some(s)).len() <= 63,
                "{}",
                channel_name(Some(s))
            );
        }
        assert_ne!(channel_name(Some(&long1)), channel_name(Some(&long2)));
        assert_eq!(channel_name(Some(&long1)), channel_name(Some(&long1)));
    }
}
