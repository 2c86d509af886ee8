//! runlog's [`RunLog`] contract on PostgreSQL ≥ 14: the same per-run, append-only event logs
//! as the file store (dense store-assigned seqs, decisions fenced at `expected_seq`, facts
//! idempotent by key and event id, atomic batches), held to the same conformance suite
//! (`crates/runlog-conformance`, `tests/conformance.rs`).
//!
//! # Schema
//! `migrations/001_init.sql`, applied idempotently at [`PgLog::connect`]: a `runs` row per run
//! carrying `last_seq` (the seq counter), `committed_bytes`, times and the metadata blob;
//! `events` keyed `(run_id, seq)` with unique `(run_id, event_id)` and `(run_id, key)`.
//!
//! # Appends: group commit
//! Concurrent appends to one run through one [`PgLog`] (threads sharing it or its clones)
//! meet in one transaction. The queue and the decision are the core's group-commit engine,
//! shared with the file store (`runlog::group`); what is PostgreSQL's own is the write
//! (`src/commit.rs`). Each append queues in its run's queue; the first becomes the leader,
//! takes what is queued (at most 100,000 events or 64 MiB of payload), and runs one
//! transaction for all of it:
//!
//! 1. `BEGIN; SELECT last_seq FROM runs WHERE run_id = '…' FOR UPDATE` in one round trip —
//!    serializes the writers of one run (and only of that run) across handles and processes;
//! 2. one lookup of the stored events sharing a key or caller event id with any member;
//! 3. every member decided in arrival order, in memory (`runlog::group::plan`): facts
//!    idempotent by key and event id (also against earlier members of the group: a repeat
//!    reports the first one's seq and appends nothing); decisions fenced at `expected_seq`
//!    against the counter as advanced by the members before them (`Fenced`) and rejected on
//!    an existing key or id (`DuplicateDecision`);
//! 4. one `INSERT … SELECT FROM unnest(…)` of every accepted event at `last_seq + 1 ..`, the
//!    counter advanced (one statement), one `COMMIT`; the notification follows (see *Wait*).
//!
//! The lookup and the insert are prepared once per pooled connection.
//!
//! Each member gets its own result, the one the file store gives for the same interleaving
//! (the same planner decides both). A rejected member (fenced, duplicate) writes nothing and
//! never affects the others; an invalid one is refused before it queues. When the
//! transaction fails (I/O, statement timeout, server gone) none of the group is applied: a
//! failure up to the lookup fails every member; a later one fails every member with events in
//! the group, while a member already rejected or wholly deduplicated keeps that answer
//! (decided on committed state under the row lock, as the file store keeps it when its write
//! fails). A batch is all or nothing: it is one transaction's rows. The oldest request still
//! queued then leads the next group. A leader whose write panics answers its whole group
//! `Panicked` (the unwinding drops its transaction, which rolls it back) and hands the queue
//! on; the run then refuses appends through this handle with `Poisoned`, as the file store
//! does, until a new [`PgLog`] is connected. [`PgLog::commit_stats`] counts transactions
//! (`groups`), appends and events. Event ids absent from the input are ULIDs minted by a
//! process-wide monotonic generator.
//!
//! An error from `COMMIT` itself is ambiguous, as with any database: the server may have
//! committed before the connection broke. Every append that returned `Ok` is durable
//! (`fsync`, `synchronous_commit` as configured on the server); one that failed is either
//! wholly applied or not at all.
//!
//! # Wait
//! Every commit (and delete) is announced with `NOTIFY runlog_<schema>` carrying the run id.
//! Deletes notify inside their transaction; appends after their commit, from a notifier
//! thread that batches the runs committed meanwhile into one transaction with
//! `synchronous_commit = off` (`src/notify.rs` says why: a `NOTIFY` inside the append
//! transaction serializes the commits of all runs). `wait` blocks on a condition variable fed
//! by one dedicated `LISTEN` connection per [`PgLog`] (started at the first `wait`), and
//! re-reads `last_seq` on every notification, and at least every 250 ms in case a
//! notification was lost (a reconnect of the listener or the notifier, a process that died
//! between a commit and its notification); without a listener it polls every 5 ms.
//!
//! # Client and pool
//! The synchronous [`postgres`] crate (the maintained blocking wrapper of `tokio-postgres`):
//! the `RunLog` trait is synchronous, like the file store, so an async client (or `sqlx`) would
//! only add a runtime to block on. Connections are kept in a small `Mutex<Vec<Client>>` pool
//! rather than `r2d2_postgres`: the pool needs exactly "take an idle client or connect, give
//! it back unless it broke", which is 40 lines here, and avoids a dependency whose releases
//! trail `postgres`'s; a connection that saw an I/O error is dropped, not returned.
//!
//! # Errors
//! The `runlog::Error` variants of the file store with the same meaning; a PostgreSQL failure
//! (connection lost, statement timeout, server restart) is [`Error::Io`] with path
//! `postgres` and the server's message; the transaction is rolled back, so nothing of the
//! batch is visible.
#![deny(missing_docs)]

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls, Row, SimpleQueryMessage, Statement};
use runlog::{
    Appended, Error, EventRef, NewEvent, Problem, ReadPage, Result, RunId, RunInfo, RunLog,
    RunPage, Seq, VerifyReport,
};
use ulid::{Generator, Ulid};

mod commit;
mod notify;
mod target;
use commit::Queues;
use notify::Notifier;
pub use runlog::CommitStatsSnapshot;
use runlog::group::{AppendKind, Outcome};
pub use target::{Access, Opened, Target, drop_schema, open_target, pg_options, split_schema};

/// The schema migration, applied at connect.
pub const MIGRATION_001: &str = include_str!("../migrations/001_init.sql");

/// Largest run metadata blob, in bytes (as the file store).
pub const META_LEN_MAX: usize = 2048;

/// Settings of a [`PgLog`].
#[derive(Clone, Debug)]
pub struct Options {
    /// PostgreSQL schema holding the tables (created if missing); `None` uses the
    /// connection's default search path (normally `public`). Only `[a-z0-9_]`, 1–63 bytes, and not
    /// a system schema (`pg_*`, `information_schema`).
    pub schema: Option<String>,
    /// Largest event payload, in bytes (default 16 MiB, as the file store).
    pub payload_len_bytes_max: usize,
    /// Most events in one append call (default 100,000).
    pub batch_events_max: usize,
    /// Idle connections kept for reuse (default 16).
    pub idle_connections_max: usize,
    /// Read-only: no migration at connect, and every connection runs with
    /// `default_transaction_read_only = on`, so the server refuses any write (default false;
    /// see [`PgLog::connect_read_only`]).
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            schema: None,
            payload_len_bytes_max: 16 << 20,
            batch_events_max: 100_000,
            idle_connections_max: 16,
            read_only: false,
        }
    }
}

/// A runlog store on PostgreSQL. Cheap to clone (one shared pool).
#[derive(Clone)]
pub struct PgLog {
    inner: Arc<Inner>,
}

struct Inner {
    config: postgres::Config,
    options: Options,
    channel: String,
    idle: Mutex<Vec<Pooled>>,
    ids: Mutex<Generator>,
    wake: Wake,
    queues: Queues,
    notifier: Notifier,
}

/// What `wait` blocks on: a generation bumped by the listener on every notification.
struct Wake {
    state: Mutex<WakeState>,
    cond: Condvar,
}

#[derive(Default)]
struct WakeState {
    generation: u64,
    listener: ListenerState,
}

#[derive(Default, PartialEq, Eq, Clone, Copy)]
enum ListenerState {
    #[default]
    NotStarted,
    Running,
    Failed,
}

/// A PostgreSQL failure as `Io` with path `postgres`. The server's own words (severity,
/// SQLSTATE, message: "ERROR 57014: canceling statement due to statement timeout") are in the
/// message: the client error alone says only "db error".
fn pg_err(op: &'static str, e: postgres::Error) -> Error {
    let source = match e.as_db_error() {
        Some(db) => io::Error::other(format!(
            "{} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        )),
        None => io::Error::other(e),
    };
    Error::Io {
        op,
        path: PathBuf::from("postgres"),
        source,
    }
}

/// The answer of a request of the other kind: unreachable by construction, reported as an
/// error rather than a panic.
fn mixed_up() -> Error {
    Error::InvalidConfig("group commit answered with the other request kind".to_string())
}

/// `s` as an SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn not_found(run: &RunId) -> Error {
    Error::RunNotFound {
        run: run.to_string(),
    }
}

/// A client with the statements prepared on its connection, by SQL text: the append path's
/// statements are parsed and planned once per connection, not once per transaction (each
/// unprepared `query` costs a Parse round trip and server CPU).
struct Pooled {
    client: Client,
    prepared: HashMap<&'static str, Statement>,
}

/// A pooled client, given back on drop unless its connection broke.
struct Conn<'a> {
    client: Option<Pooled>,
    inner: &'a Inner,
    /// Whether it came from the idle pool (it may have died there unnoticed).
    pooled: bool,
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
    fn prepared(&mut self, sql: &'static str) -> Result<Statement> {
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
struct Tx<'a> {
    conn: Conn<'a>,
    open: bool,
}

impl Tx<'_> {
    fn commit(&mut self) -> Result<()> {
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
    fn connect_one(&self) -> Result<Client> {
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

    /// A read-only handle's check that the schema holds runlog's tables.
    fn check_schema(&self) -> Result<()> {
        let mut client = self.connect_one()?;
        let row = client
            .query_one(
                "SELECT to_regclass('runs') IS NOT NULL AND to_regclass('events') IS NOT NULL",
                &[],
            )
            .map_err(|e| pg_err("checking the schema of", e))?;
        if row.get::<_, bool>(0) {
            Ok(())
        } else {
            Err(Error::NotAStore {
                path: PathBuf::from(format!(
                    "postgres (schema {})",
                    self.options
                        .schema
                        .as_deref()
                        .unwrap_or("on the search path")
                )),
                detail: "no runlog tables (runs, events); open it for writing once to create them"
                    .into(),
            })
        }
    }

    fn conn(&self) -> Result<Conn<'_>> {
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
    fn begin_locked(&self, run: &RunId) -> Result<(Tx<'_>, Seq)> {
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

impl PgLog {
    /// Connects to the server named by `params` (a libpq-style `host=… user=… dbname=…` string
    /// or a `postgres://` URL) with default [`Options`] and applies the migration.
    ///
    /// # Errors
    /// `Io` (path `postgres`) when the server cannot be reached or the migration fails.
    pub fn connect(params: &str) -> Result<PgLog> {
        PgLog::connect_with(params, Options::default())
    }

    /// Connects for reading only: applies no migration, and the server refuses writes on
    /// every connection of this handle (`default_transaction_read_only`); appends, creates and
    /// deletes fail with `Io` (path `postgres`, "read-only transaction").
    ///
    /// # Errors
    /// `NotAStore` when the schema holds no runlog tables; `Io` when the server cannot be
    /// reached.
    pub fn connect_read_only(params: &str, options: Options) -> Result<PgLog> {
        PgLog::connect_with(
            params,
            Options {
                read_only: true,
                ..options
            },
        )
    }

    /// [`PgLog::connect`] with explicit [`Options`]; creates `options.schema` if missing
    /// (unless `options.read_only`).
    ///
    /// # Errors
    /// `InvalidConfig` for a bad schema name or connection string; `Io` as [`PgLog::connect`].
    pub fn connect_with(params: &str, options: Options) -> Result<PgLog> {
        let config: postgres::Config = params
            .parse()
            .map_err(|e| Error::InvalidConfig(format!("postgres connection string: {e}")))?;
        if let Some(problem) = options.schema.as_deref().and_then(schema_name_problem) {
            return Err(Error::InvalidConfig(problem));
        }
        let channel = channel_name(options.schema.as_deref());
        let inner = Inner {
            config,
            options,
            channel,
            idle: Mutex::new(Vec::new()),
            ids: Mutex::new(Generator::new()),
            wake: Wake {
                state: Mutex::new(WakeState::default()),
                cond: Condvar::new(),
            },
            queues: Queues::default(),
            notifier: Notifier::default(),
        };
        if inner.options.read_only {
            inner.check_schema()?;
        } else {
            let mut client = inner
                .config
                .connect(NoTls)
                .map_err(|e| pg_err("connecting to", e))?;
            let mut tx = client.transaction().map_err(|e| pg_err("migrating", e))?;
            // One migrator at a time per database; the lock ends with the transaction.
            tx.execute("SELECT pg_advisory_xact_lock(7247083462)", &[])
                .map_err(|e| pg_err("migrating", e))?;
            if let Some(schema) = &inner.options.schema {
                // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
                // schema exists: a role granted only its tables must still connect.
                let exists = tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                        &[schema],
                    )
                    .map_err(|e| pg_err("migrating", e))?
                    .get::<_, bool>(0);
                if !exists {
                    tx.batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
                        .map_err(|e| pg_err("migrating", e))?;
                }
                tx.batch_execute(&format!("SET LOCAL search_path TO \"{schema}\""))
                    .map_err(|e| pg_err("migrating", e))?;
            }
            // Likewise CREATE TABLE IF NOT EXISTS needs CREATE on the schema: a migrated
            // schema is left as it is.
            let migrated = tx
                .query_one(
                    "SELECT to_regclass('runs') IS NOT NULL AND to_regclass('events') IS NOT NULL \
                     AND to_regclass('runlog_schema_version') IS NOT NULL",
                    &[],
                )
                .map_err(|e| pg_err("migrating", e))?
                .get::<_, bool>(0)
                && tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM runlog_schema_version WHERE version = 1)",
                        &[],
                    )
                    .map_err(|e| pg_err("migrating", e))?
                    .get::<_, bool>(0);
            if !migrated {
                tx.batch_execute(MIGRATION_001)
                    .map_err(|e| pg_err("migrating", e))?;
            }
            tx.commit().map_err(|e| pg_err("migrating", e))?;
        }
        Ok(PgLog {
            inner: Arc::new(inner),
        })
    }

    /// Counters of this handle's group commits (shared by its clones): `groups` is the number
    /// of append transactions, `requests` the append calls they decided, `events` the events
    /// they inserted; `events / groups` is the group-commit factor.
    pub fn commit_stats(&self) -> CommitStatsSnapshot {
        self.inner.queues.stats()
    }

    /// The schema this store uses (`None`: the default search path).
    pub fn schema(&self) -> Option<&str> {
        self.inner.options.schema.as_deref()
    }

    /// Checks the batch against the limits; returns its payload bytes (what bounds a group).
    fn validate(&self, events: &[NewEvent]) -> Result<usize> {
        let o = &self.inner.options;
        if events.is_empty() || events.len() > o.batch_events_max {
            return Err(Error::InvalidEvent {
                field: "batch",
                reason: format!(
                    "{} events, allowed 1..={}",
                    events.len(),
                    o.batch_events_max
                ),
            });
        }
        for e in events {
            e.validate(o.payload_len_bytes_max)?;
        }
        Ok(events.iter().map(|e| e.payload.len()).sum())
    }

    fn read_rows(&self, run: &RunId, after: Seq, limit: usize) -> Result<(Seq, Vec<Row>)> {
        let mut c = self.inner.conn()?;
        // One statement, one snapshot: the counter and the events it covers.
        let rows = c
            .query(
                "SELECT r.last_seq, e.seq, e.event_id, e.created_at_ms, e.kind, e.correlation_id, e.key, e.payload \
                 FROM runs r LEFT JOIN LATERAL ( \
                   SELECT * FROM events e WHERE e.run_id = r.run_id AND e.seq > $2 AND e.seq <= r.last_seq \
                   ORDER BY e.seq LIMIT $3) e ON true \
                 WHERE r.run_id = $1",
                &[&run.as_str(), &(after.min(i64::MAX as u64) as i64), &(limit.min(i64::MAX as usize) as i64)],
            )
            .map_err(|e| pg_err("reading", e))?;
        let Some(first) = rows.first() else {
            return Err(not_found(run));
        };
        let last = first.get::<_, i64>(0) as Seq;
        let rows: Vec<Row> = rows
            .into_iter()
            .filter(|r| r.get::<_, Option<i64>>(1).is_some())
            .collect();
        // Density (rule 5): the page is after+1, after+2, … and as long as the counter says.
        let want = (last.saturating_sub(after)).min(limit as u64) as usize;
        for (i, r) in rows.iter().enumerate() {
            let seq = r.get::<_, i64>(1) as Seq;
            if seq != after + 1 + i as u64 {
                return Err(corrupt(
                    run,
                    after + 1 + i as u64,
                    format!("found seq {seq}"),
                ));
            }
        }
        if rows.len() != want {
            let at = after + 1 + rows.len() as u64;
            return Err(corrupt(
                run,
                at,
                format!("seq {at} missing (last_seq {last})"),
            ));
        }
        Ok((last, rows))
    }
}

/// Why `name` cannot be runlog's schema, if it cannot: only `[a-z0-9_]`, 1–63 bytes, and not
/// a system schema (`pg_*`, `information_schema`: PostgreSQL refuses the first, and
/// `pg_dump` leaves both out of backups).
pub(crate) fn schema_name_problem(name: &str) -> Option<String> {
    if name.is_empty()
        || name.len() > 63
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Some(format!("schema {name:?}: only [a-z0-9_], 1-63 bytes"));
    }
    if name.starts_with("pg_") || name == "information_schema" {
        return Some(format!(
            "schema {name:?}: a PostgreSQL system schema (pg_*, information_schema); pick another"
        ));
    }
    None
}

/// The `LISTEN`/`NOTIFY` channel of a schema's commits: `runlog_<schema>`, or, where that
/// would pass PostgreSQL's 63-byte identifier limit (schemas of 57–63 bytes), the schema's
/// first 39 bytes and a 64-bit FNV-1a hash of the whole name: the same in every process.
fn channel_name(schema: Option<&str>) -> String {
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

fn corrupt(run: &RunId, seq: Seq, detail: String) -> Error {
    Error::Corrupt {
        run: run.to_string(),
        segment: "events".to_string(),
        offset: seq,
        detail,
    }
}

fn event_ref<'r>(run: &RunId, r: &'r Row) -> Result<EventRef<'r>> {
    let seq = r.get::<_, i64>(1) as Seq;
    let id: [u8; 16] = r
        .get::<_, &[u8]>(2)
        .try_into()
        .map_err(|_| corrupt(run, seq, "event_id is not 16 bytes".into()))?;
    Ok(EventRef {
        seq,
        event_id: Ulid::from_bytes(id),
        created_at_ms: r.get::<_, i64>(3) as u64,
        kind: r.get(4),
        correlation_id: r.get(5),
        key: r.get(6),
        payload: r.get(7),
    })
}

impl RunLog for PgLog {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        if meta.len() > META_LEN_MAX {
            return Err(Error::InvalidEvent {
                field: "meta",
                reason: format!("{} bytes > limit {META_LEN_MAX}", meta.len()),
            });
        }
        let now = now_ms() as i64;
        let n = self
            .inner
            .conn()?
            .execute(
                "INSERT INTO runs (run_id, last_seq, committed_bytes, created_at_ms, updated_at_ms, meta) \
                 VALUES ($1, 0, 0, $2, $2, $3) ON CONFLICT (run_id) DO NOTHING",
                &[&run.as_str(), &now, &meta],
            )
            .map_err(|e| pg_err("creating a run in", e))?;
        if n == 0 {
            return Err(Error::RunExists {
                run: run.to_string(),
            });
        }
        Ok(())
    }

    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        match self.submit(run, AppendKind::Facts, events)? {
            Outcome::Facts(out) => Ok(out),
            Outcome::Decisions(_) => Err(mixed_up()),
        }
    }

    fn append_decisions(
        &self,
        run: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        let kind = AppendKind::Decisions {
            expected: expected_seq,
        };
        match self.submit(run, kind, events)? {
            Outcome::Decisions(seqs) => Ok(seqs),
            Outcome::Facts(_) => Err(mixed_up()),
        }
    }

    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        let (last, rows) = self.read_rows(run, after, limit)?;
        let mut events = Vec::with_capacity(rows.len());
        for r in &rows {
            let e = event_ref(run, r)?;
            events.push(e.to_event());
        }
        let next = after + events.len() as u64;
        Ok(ReadPage {
            events,
            next,
            has_more: last > next,
        })
    }

    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        let (last, rows) = self.read_rows(run, after, limit)?;
        let refs = rows
            .iter()
            .map(|r| event_ref(run, r))
            .collect::<Result<Vec<_>>>()?;
        let next = after + refs.len() as u64;
        for e in refs {
            f(e);
        }
        Ok((next, last > next))
    }

    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        let row = self
            .inner
            .conn()?
            .query_opt(
                "SELECT last_seq FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
            .map_err(|e| pg_err("reading the counter in", e))?;
        row.map(|r| r.get::<_, i64>(0) as Seq)
            .ok_or_else(|| not_found(run))
    }

    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        let deadline = Instant::now() + timeout;
        let listening = self.ensure_listener();
        loop {
            let generation = self.inner.wake.state.lock().generation;
            let last = self.last_seq(run)?;
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
            let mut st = self.inner.wake.state.lock();
            while st.generation == generation && Instant::now() < until {
                self.inner.wake.cond.wait_until(&mut st, until);
            }
        }
    }

    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        let row = self
            .inner
            .conn()?
            .query_opt(
                "SELECT last_seq, committed_bytes, created_at_ms, updated_at_ms FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
            .map_err(|e| pg_err("reading run info in", e))?
            .ok_or_else(|| not_found(run))?;
        Ok(info(run.clone(), &row, 0))
    }

    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        let row = self
            .inner
            .conn()?
            .query_opt("SELECT meta FROM runs WHERE run_id = $1", &[&run.as_str()])
            .map_err(|e| pg_err("reading run metadata in", e))?
            .ok_or_else(|| not_found(run))?;
        Ok(row.get(0))
    }

    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        let rows = self
            .inner
            .conn()?
            .query(
                "SELECT run_id, last_seq, committed_bytes, created_at_ms, updated_at_ms FROM runs \
                 WHERE $1::text IS NULL OR run_id > $1 ORDER BY run_id LIMIT $2",
                &[
                    &after.map(RunId::as_str),
                    &(limit.saturating_add(1).min(i64::MAX as usize) as i64),
                ],
            )
            .map_err(|e| pg_err("listing runs in", e))?;
        let has_more = rows.len() > limit;
        let mut runs = Vec::with_capacity(rows.len().min(limit));
        for r in rows.iter().take(limit) {
            let id: &str = r.get(0);
            let id = RunId::new(id)?;
            runs.push(info(id, r, 1));
        }
        Ok(RunPage {
            next: runs.last().map(|r| r.run.clone()),
            runs,
            has_more,
            damaged: Vec::new(),
        })
    }

    fn delete_run(&self, run: &RunId) -> Result<()> {
        let mut c = self.inner.conn()?;
        let mut tx = c.transaction().map_err(|e| pg_err("deleting from", e))?;
        // Events go with the run (ON DELETE CASCADE).
        let n = tx
            .execute("DELETE FROM runs WHERE run_id = $1", &[&run.as_str()])
            .map_err(|e| pg_err("deleting from", e))?;
        if n == 0 {
            return Err(not_found(run));
        }
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&self.inner.channel, &run.as_str()],
        )
        .map_err(|e| pg_err("notifying", e))?;
        tx.commit().map_err(|e| pg_err("deleting from", e))
    }

    fn verify_run(&self, run: &RunId) -> Result<VerifyReport> {
        let mut c = self.inner.conn()?;
        let mut tx = c
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(|e| pg_err("verifying", e))?;
        let row = tx
            .query_opt(
                "SELECT last_seq, committed_bytes FROM runs WHERE run_id = $1",
                &[&run.as_str()],
            )
            .map_err(|e| pg_err("verifying", e))?
            .ok_or_else(|| not_found(run))?;
        let last = row.get::<_, i64>(0) as Seq;
        let committed = row.get::<_, i64>(1);
        let mut report = VerifyReport {
            run: run.clone(),
            segments: 1,
            events: 0,
            problems: Vec::new(),
            notes: Vec::new(),
        };
        let problem = |offset: Seq, detail: String| Problem {
            segment: "events".to_string(),
            offset,
            detail,
        };
        let mut expect: Seq = 1;
        let mut bytes: i64 = 0;
        let mut max: Seq = 0;
        {
            let mut it = tx
                .query_raw(
                    "SELECT seq, length(event_id), length(payload) FROM events WHERE run_id = $1 ORDER BY seq",
                    [run.as_str()],
                )
                .map_err(|e| pg_err("verifying", e))?;
            while let Some(r) = it.next().map_err(|e| pg_err("verifying", e))? {
                let seq = r.get::<_, i64>(0) as Seq;
                let id_len: i32 = r.get(1);
                bytes += i64::from(r.get::<_, i32>(2));
                max = seq;
                if seq != expect {
                    report
                        .problems
                        .push(problem(seq, format!("seq {seq} where {expect} was due")));
                } else if id_len != 16 {
                    report
                        .problems
                        .push(problem(seq, format!("event_id of {id_len} bytes")));
                } else {
                    report.events += 1;
                }
                expect = seq + 1;
            }
        }
        if max != last {
            report.problems.push(problem(
                max,
                format!("last_seq is {last} but the last event is at seq {max}"),
            ));
        }
        if bytes != committed {
            report.problems.push(problem(
                0,
                format!("committed_bytes is {committed} but the payloads sum to {bytes}"),
            ));
        }
        tx.commit().map_err(|e| pg_err("verifying", e))?;
        Ok(report)
    }
}

fn info(run: RunId, r: &Row, from: usize) -> RunInfo {
    RunInfo {
        run,
        last_seq: r.get::<_, i64>(from) as Seq,
        committed_bytes: r.get::<_, i64>(from + 1) as u64,
        created_at_ms: r.get::<_, i64>(from + 2) as u64,
        updated_at_ms: r.get::<_, i64>(from + 3) as u64,
        segment_count: 1,
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
