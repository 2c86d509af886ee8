//! The connection pool: idle clients kept for reuse with their prepared statements, given back
//! unless broken, and the run-locking transaction every append group begins with.

use std::collections::HashMap;

use postgres::{Client, NoTls, SimpleQueryMessage, Statement};
use runlog::{Result, RunId, Seq};

use crate::Inner;
use crate::error::{not_found, pg_err};

/// A client with the statements prepared on its connection, by SQL text: the append path's
/// statements are parsed and planned once per connection, not once per transaction (each
/// unprepared `query` costs a Parse round trip and server CPU).
pub(crate) struct Pooled {
    pub(crate) client: Client,
    pub(crate) prepared: HashMap<&'static str, Statement>,
}

/// A pooled client, given back on drop unless its connection broke.
pub(crate) struct Conn<'a> {
    pub(crate) client: Option<Pooled>,
    inner: &'a Inner,
    /// Whether it came from the idle pool (it may have died there unnoticed).
    pub(crate) pooled: bool,
}

impl std::ops::Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self
            .client
            .as_ref()
            .expect("client present until drop")
            .client
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self
            .client
            .as_mut()
            .expect("client present until drop")
            .client
    }
}

impl Conn<'_> {
    /// `sql` prepared on this connection (once per connection).
    pub(crate) fn prepared(&mut self, sql: &'static str) -> Result<Statement> {
        let p = self.client.as_mut().expect("client present until drop");
        if let Some(st) = p.prepared.get(sql) {
            return Ok(st.clone());
        }
        let st = p
            .client
            .prepare(sql)
            .map_err(|e| pg_err("preparing a statement on", e))?;
        p.prepared.insert(sql, st.clone());
        Ok(st)
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let mut idle = self.inner.idle.lock();
        if client.client.is_closed() {
            // A broken connection usually means a server restart or a mass termination:
            // the idle ones are suspect too, and a fresh connect is cheaper than one failed
            // call per stale connection.
            idle.clear();
        } else if idle.len() < self.inner.options.idle_connections_max {
            idle.push(client);
        }
    }
}

/// A transaction begun by [`Inner::begin_locked`]: rolled back on drop unless committed, so a
/// connection never goes back to the pool inside a transaction.
pub(crate) struct Tx<'a> {
    pub(crate) conn: Conn<'a>,
    open: bool,
}

impl Tx<'_> {
    pub(crate) fn commit(&mut self) -> Result<()> {
        self.open = false;
        self.conn
            .batch_execute("COMMIT")
            .map_err(|e| pg_err("committing to", e))
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.conn
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        let live = self
            .conn
            .client
            .as_ref()
            .is_some_and(|c| !c.client.is_closed());
        if self.open && live && self.conn.batch_execute("ROLLBACK").is_err() {
            // Its state is unknown: not pooled.
            self.conn.client = None;
        }
    }
}

impl Inner {
    pub(crate) fn connect_one(&self) -> Result<Client> {
        let mut client = self
            .config
            .connect(NoTls)
            .map_err(|e| pg_err("connecting to", e))?;
        if let Some(schema) = &self.options.schema {
            client
                .batch_execute(&format!("SET search_path TO \"{schema}\""))
                .map_err(|e| pg_err("setting search_path on", e))?;
        }
        if self.options.read_only {
            client
                .batch_execute("SET default_transaction_read_only = on")
                .map_err(|e| pg_err("making read-only", e))?;
        }
        Ok(client)
    }

    pub(crate) fn conn(&self) -> Result<Conn<'_>> {
        let idle = self.idle.lock().pop();
        let (client, pooled) = match idle {
            Some(c) if !c.client.is_closed() => (c, true),
            _ => (
                Pooled {
                    client: self.connect_one()?,
                    prepared: HashMap::new(),
                },
                false,
            ),
        };
        Ok(Conn {
            client: Some(client),
            inner: self,
            pooled,
        })
    }

    /// A transaction holding `run`'s row lock, and the run's last seq: `BEGIN` and
    /// `SELECT last_seq … FOR UPDATE` in one round trip (a simple query; run ids are
    /// `[A-Za-z0-9_-]`, validated, and quoted as a literal all the same). A pooled connection
    /// that turns out dead here (a server restart or a terminated backend while it was idle;
    /// nothing was written) is discarded with the rest of the idle pool and replaced by a
    /// fresh one, once: the first append after a server restart succeeds. A plain `ERROR`
    /// (a statement or lock timeout) is not retried.
    pub(crate) fn begin_locked(&self, run: &RunId) -> Result<(Tx<'_>, Seq)> {
        let sql = format!(
            "BEGIN; SELECT last_seq FROM runs WHERE run_id = {} FOR UPDATE",
            literal(run.as_str())
        );
        let mut retried = false;
        loop {
            let mut tx = Tx {
                conn: self.conn()?,
                open: true,
            };
            let err = match tx.simple_query(&sql) {
                Ok(msgs) => {
                    let last = msgs.iter().find_map(|m| match m {
                        SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse::<Seq>().ok()),
                        _ => None,
                    });
                    return last.map(|l| (tx, l)).ok_or_else(|| not_found(run));
                }
                Err(e) => e,
            };
            let plain_error = err.as_db_error().is_some_and(|d| d.severity() == "ERROR");
            if retried || !tx.conn.pooled || plain_error {
                return Err(pg_err("locking a run in", err));
            }
            retried = true;
            tx.conn.client = None;
            self.idle.lock().clear();
        }
    }
}

/// `s` as an SQL string literal.
pub(crate) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
