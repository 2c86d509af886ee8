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
//! (connection lost, statement timeout, server restart) is [`Error::Io`](runlog::Error::Io) with path
//! `postgres` and the server's message; the transaction is rolled back, so nothing of the
//! batch is visible.
//!
//! # Layout
//! One module per concern: `pool` (idle clients, prepared statements, the run-locking
//! transaction), `connect` (options checked, schema created and migrated), `append` (limits,
//! then `commit`: group commit), `read` (pages of events, checked dense), `runs` (create,
//! describe, list, delete), `verify`, `listen` (`wait` and the `LISTEN` connection), `notify`
//! (commit notifications), `target` (opening a store by URL) and `error` (PostgreSQL failures as
//! `runlog::Error`).

#![deny(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use runlog::{
    Appended, EventRef, NewEvent, ReadPage, Result, RunId, RunInfo, RunLog, RunPage, Seq,
    VerifyReport,
};
use ulid::Generator;

mod append;
mod commit;
mod connect;
mod error;
mod listen;
mod notify;
mod pool;
mod read;
mod runs;
mod target;
mod verify;
use commit::Queues;
use connect::schema_name_problem;
use error::{not_found, pg_err};
use listen::Wake;
use notify::Notifier;
use pool::{Pooled, Tx, literal};
pub use runlog::CommitStatsSnapshot;
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl PgLog {
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
}

impl RunLog for PgLog {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        runs::create_run(self, run, meta)
    }

    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        append::append_facts(self, run, events)
    }

    fn append_decisions(
        &self,
        run: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        append::append_decisions(self, run, expected_seq, events)
    }

    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        read::read(self, run, after, limit)
    }

    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        read::read_each(self, run, after, limit, f)
    }

    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        read::last_seq(self, run)
    }

    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        listen::wait(self, run, after, timeout)
    }

    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        runs::run_info(self, run)
    }

    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        runs::run_meta(self, run)
    }

    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        runs::list_runs(self, after, limit)
    }

    fn delete_run(&self, run: &RunId) -> Result<()> {
        runs::delete_run(self, run, None)
    }

    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()> {
        runs::delete_run(self, run, Some(expected_last_seq))
    }

    fn verify_run(&self, run: &RunId) -> Result<VerifyReport> {
        verify::verify_run(self, run)
    }
    fn lock_collector(&self) -> Result<runlog::CollectorLock> {
        connect::lock_collector(&self.inner)
    }
}
