//! SQLite (bundled) the way the field does it on a SQL database: WAL, `synchronous=FULL`, a
//! per-run counter row bumped inside the insert transaction
//! (`UPDATE runs SET last_seq = last_seq + n … RETURNING`), events clustered by
//! `(run_id, seq)`, each append one `BEGIN IMMEDIATE` transaction. Three ways for concurrent
//! writers to share the database ([`SqliteMode`]); a single writer meets the same code in all
//! three, and every session reads on its own connection (WAL readers do not block).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use ulid::Ulid;

use super::{BenchResult, Ev, Peer, ReadStat, Session, now_ms};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    correlation_id TEXT,
    payload BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
";

const BUMP: &str = "UPDATE runs SET last_seq = last_seq + ?2 WHERE run_id = ?1 RETURNING last_seq";
const BUMP_FENCED: &str = "UPDATE runs SET last_seq = last_seq + ?2 WHERE run_id = ?1 AND last_seq = ?3 RETURNING last_seq";
const INSERT: &str = "INSERT INTO events (run_id, seq, event_id, created_at_ms, kind, correlation_id, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
const READ_AFTER: &str = "SELECT seq, event_id, created_at_ms, kind, correlation_id, payload FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3";

/// How long a connection waits for the write lock before `SQLITE_BUSY` reaches the caller
/// (every mode; in `sqlite-mutex` no writer ever waits on it).
const BUSY_WAIT_MAX: Duration = Duration::from_secs(10);
/// `sqlite-mutex`: a writer that has released the connection runs a passive checkpoint on its
/// own connection after every this many commits of the peer. A commit here writes 3–4 WAL
/// frames, so this is about SQLite's default auto-checkpoint threshold (1,000 frames).
const CHECKPOINT_COMMITS: u64 = 256;
/// `sqlite-retry`: the first sleep between two attempts at the write lock; each later one
/// doubles, up to [`RETRY_SLEEP_MAX`].
const RETRY_SLEEP_MIN: Duration = Duration::from_micros(50);
/// `sqlite-retry`: the longest sleep between two attempts (about one commit's `fdatasync` in
/// the device's throttled regime), short enough that the lock is retaken soon after it is
/// free, long enough that 64 waiting writers do not keep 2 vCPUs busy polling.
const RETRY_SLEEP_MAX: Duration = Duration::from_millis(2);
/// `sqlite-retry`: attempts before `SQLITE_BUSY` reaches the caller (≈ [`BUSY_WAIT_MAX`]).
const RETRY_ATTEMPTS_MAX: i32 = 5_000;

/// How concurrent writers share the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqliteMode {
    /// `sqlite-busy` (the peer of the first tables): one connection per writer and SQLite's
    /// own busy handler with a 10 s timeout, which sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25,
    /// 50, 50, then 100 ms between attempts at the write lock: under contention a writer
    /// mostly sleeps while the lock is free.
    Busy,
    /// `sqlite-retry`: one connection per writer (what works across processes too), a busy
    /// handler that retries the write lock after short sleeps ([`RETRY_SLEEP_MIN`] doubling
    /// to [`RETRY_SLEEP_MAX`]).
    Retry,
    /// `sqlite-mutex`: one write connection shared by every writer thread of the process,
    /// serialised by a mutex taken around each transaction: writers queue on the mutex, never
    /// on SQLite's lock. What a program that owns its database does. The shared connection's
    /// auto-checkpoint is off, and checkpoints run outside the mutex (every
    /// [`CHECKPOINT_COMMITS`] commits, by the writer that made the last one, on its own
    /// connection): an auto-checkpoint runs inside `COMMIT` on the committing connection
    /// after SQLite's write lock is released, so with one connection per writer the others
    /// commit meanwhile, while under the mutex it would stall every writer (measured: commits
    /// 1.4–1.6× slower, and the peer at 0.35–0.42× `sqlite-retry` in w3 and w4; see
    /// BENCHMARKS.md).
    Mutex,
}

impl SqliteMode {
    /// The peer's column name.
    pub fn name(self) -> &'static str {
        match self {
            SqliteMode::Busy => "sqlite-busy",
            SqliteMode::Retry => "sqlite-retry",
            SqliteMode::Mutex => "sqlite-mutex",
        }
    }
}

/// Opens connections to one database file with the peer's settings.
#[derive(Clone)]
struct Connector {
    path: PathBuf,
    mode: SqliteMode,
}

impl Connector {
    fn connect(&self) -> BenchResult<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        match self.mode {
            SqliteMode::Busy | SqliteMode::Mutex => conn.busy_timeout(BUSY_WAIT_MAX)?,
            SqliteMode::Retry => conn.busy_handler(Some(retry_after_short_sleep))?,
        }
        Ok(conn)
    }
}

/// `sqlite-retry`'s busy handler: sleep briefly (50 µs, doubling to 2 ms), try again.
fn retry_after_short_sleep(attempts: i32) -> bool {
    let doublings = u32::try_from(attempts.clamp(0, 16)).unwrap_or(16);
    std::thread::sleep((RETRY_SLEEP_MIN * (1 << doublings)).min(RETRY_SLEEP_MAX));
    attempts < RETRY_ATTEMPTS_MAX
}

/// A write connection; in `sqlite-mutex` one shared by every session, otherwise one per
/// session (its mutex then never contended).
struct Writer {
    conn: Mutex<Connection>,
    /// Commits on `conn` so far (counted in `sqlite-mutex` only).
    commits: AtomicU64,
    /// Whether checkpoints are the writers' job (`sqlite-mutex`) rather than SQLite's.
    checkpoints_outside: bool,
}

impl Writer {
    fn new(conn: Connection, checkpoints_outside: bool) -> Arc<Writer> {
        Arc::new(Writer {
            conn: Mutex::new(conn),
            commits: AtomicU64::new(0),
            checkpoints_outside,
        })
    }

    fn lock(&self) -> BenchResult<MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| "sqlite: a writer panicked holding the connection".into())
    }

    /// Counts a commit; whether the caller should now run a checkpoint.
    fn checkpoint_due(&self) -> bool {
        self.checkpoints_outside
            && (self.commits.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(CHECKPOINT_COMMITS)
    }
}

/// A passive checkpoint on `conn`: copies what it can of the WAL into the database without
/// waiting for anyone (a checkpoint already running makes it a no-op).
fn checkpoint(conn: &Connection) -> BenchResult<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
    Ok(())
}

/// One database file `runs.db` in the peer's directory.
pub struct SqlitePeer {
    connector: Connector,
    /// The write connection every session shares, in `sqlite-mutex`.
    shared: Option<Arc<Writer>>,
}

impl SqlitePeer {
    /// Creates the database and schema in `dir`.
    pub fn open(dir: &Path, mode: SqliteMode) -> BenchResult<SqlitePeer> {
        let connector = Connector {
            path: dir.join("runs.db"),
            mode,
        };
        let conn = connector.connect()?;
        conn.execute_batch(SCHEMA)?;
        let shared = if mode == SqliteMode::Mutex {
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
            Some(Writer::new(conn, true))
        } else {
            None
        };
        Ok(SqlitePeer { connector, shared })
    }

    /// The connection a new session writes on: the shared one, or a new one.
    fn writer(&self) -> BenchResult<Arc<Writer>> {
        match &self.shared {
            Some(shared) => Ok(Arc::clone(shared)),
            None => Ok(Writer::new(self.connector.connect()?, false)),
        }
    }
}

impl Peer for SqlitePeer {
    fn name(&self) -> &'static str {
        self.connector.mode.name()
    }

    fn create_run(&self, run: &str) -> BenchResult<()> {
        self.writer()?
            .lock()?
            .execute("INSERT INTO runs (run_id, last_seq) VALUES (?1, 0)", [run])?;
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(SqliteSession {
            writer: self.writer()?,
            connector: self.connector.clone(),
            reader: None,
        }))
    }

    /// Checkpointed before it returns, in every mode (the per-connection modes' commits
    /// checkpoint themselves), so that reads meet the same database file.
    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        let writer = self.writer()?;
        let mut conn = writer.lock()?;
        for chunk in events.chunks(10_000) {
            append(&mut conn, run, None, chunk)?;
        }
        if writer.checkpoints_outside {
            checkpoint(&conn)?;
        }
        Ok(())
    }
}

struct SqliteSession {
    writer: Arc<Writer>,
    connector: Connector,
    /// Its own connection for reads and checkpoints, opened at first use (WAL readers do not
    /// block writers).
    reader: Option<Connection>,
}

impl SqliteSession {
    /// One transaction on the writer; then, in `sqlite-mutex` when one is due, a checkpoint
    /// on this session's own connection with the shared one released.
    fn append(&mut self, run: &str, expected: Option<u64>, evs: &[Ev]) -> BenchResult<u64> {
        let last = {
            let mut conn = self.writer.lock()?;
            append(&mut conn, run, expected, evs)?
        };
        if self.writer.checkpoint_due() {
            checkpoint(self.reader()?)?;
        }
        Ok(last)
    }

    fn reader(&mut self) -> BenchResult<&Connection> {
        if self.reader.is_none() {
            self.reader = Some(self.connector.connect()?);
        }
        self.reader
            .as_ref()
            .ok_or_else(|| "sqlite: no read connection".into())
    }
}

/// One transaction: bump the counter (fenced at `expected` if given), insert `evs` at the
/// seqs it reserved. Returns the new last seq.
fn append(conn: &mut Connection, run: &str, expected: Option<u64>, evs: &[Ev]) -> BenchResult<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let n = evs.len() as i64;
    let last: Option<i64> = match expected {
        None => tx
            .prepare_cached(BUMP)?
            .query_row(params![run, n], |r| r.get(0))
            .optional()?,
        Some(e) => tx
            .prepare_cached(BUMP_FENCED)?
            .query_row(params![run, n, i64::try_from(e)?], |r| r.get(0))
            .optional()?,
    };
    let last =
        last.ok_or_else(|| format!("sqlite: run {run} missing or fenced at {expected:?}"))?;
    {
        let mut insert = tx.prepare_cached(INSERT)?;
        let created = i64::try_from(now_ms())?;
        for (i, ev) in evs.iter().enumerate() {
            insert.execute(params![
                run,
                last - n + 1 + i as i64,
                Ulid::generate().to_string(),
                created,
                ev.kind,
                ev.correlation_id,
                &ev.payload[..],
            ])?;
        }
    }
    tx.commit()?;
    Ok(u64::try_from(last)?)
}

impl Session for SqliteSession {
    fn append_fact(&mut self, run: &str, ev: &Ev) -> BenchResult<u64> {
        self.append(run, None, std::slice::from_ref(ev))
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        self.append(run, Some(expected), evs)
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        read(self.reader()?, run, 0, i64::MAX)
    }

    fn read_after(&mut self, run: &str, after: u64, limit: usize) -> BenchResult<Option<ReadStat>> {
        let limit = i64::try_from(limit)?;
        read(self.reader()?, run, after, limit).map(Some)
    }

    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        read_borrowed(self.reader()?, run).map(Some)
    }
}

/// The same query, every column borrowed from SQLite's row buffer (`get_ref`): no allocation
/// per row; text columns are still checked as UTF-8, as runlog checks its strings.
fn read_borrowed(conn: &Connection, run: &str) -> BenchResult<ReadStat> {
    let mut stmt = conn.prepare_cached(READ_AFTER)?;
    let mut rows = stmt.query(params![run, 0i64, i64::MAX])?;
    let mut stat = ReadStat::default();
    let mut expected_seq = 1i64;
    while let Some(row) = rows.next()? {
        let seq = row.get_ref(0)?.as_i64()?;
        let _event_id = row.get_ref(1)?.as_str()?;
        let _created = row.get_ref(2)?.as_i64()?;
        let _kind = row.get_ref(3)?.as_str()?;
        let _correlation = row.get_ref(4)?.as_str_or_null()?;
        let payload = row.get_ref(5)?.as_blob()?;
        if seq != expected_seq {
            return Err(format!("sqlite: gap at seq {seq}, expected {expected_seq}").into());
        }
        expected_seq += 1;
        stat.add(payload.len());
    }
    Ok(stat)
}

/// Materialises every row (owned strings and payload), as an engine would.
fn read(conn: &Connection, run: &str, after: u64, limit: i64) -> BenchResult<ReadStat> {
    let mut stmt = conn.prepare_cached(READ_AFTER)?;
    let mut rows = stmt.query(params![run, i64::try_from(after)?, limit])?;
    let mut stat = ReadStat::default();
    let mut expected_seq = i64::try_from(after)? + 1;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let _event_id: String = row.get(1)?;
        let _created: i64 = row.get(2)?;
        let _kind: String = row.get(3)?;
        let _correlation: Option<String> = row.get(4)?;
        let payload: Vec<u8> = row.get(5)?;
        if seq != expected_seq {
            return Err(format!("sqlite: gap at seq {seq}, expected {expected_seq}").into());
        }
        expected_seq += 1;
        stat.add(payload.len());
    }
    Ok(stat)
}
