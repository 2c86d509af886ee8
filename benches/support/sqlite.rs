//! SQLite (bundled) the way the field does it on a SQL database: WAL, `synchronous=FULL`, a
//! per-run counter row bumped inside the insert transaction
//! (`UPDATE runs SET last_seq = last_seq + n … RETURNING`), events clustered by
//! `(run_id, seq)`. One connection per session; writers serialise on SQLite's write lock
//! (`BEGIN IMMEDIATE`, 10 s busy timeout).

use std::path::{Path, PathBuf};
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

/// One database file `runs.db` in the peer's directory.
pub struct SqlitePeer {
    path: PathBuf,
}

impl SqlitePeer {
    /// Creates the database and schema in `dir`.
    pub fn open(dir: &Path) -> BenchResult<SqlitePeer> {
        let peer = SqlitePeer {
            path: dir.join("runs.db"),
        };
        peer.connect()?.execute_batch(SCHEMA)?;
        Ok(peer)
    }

    fn connect(&self) -> BenchResult<Connection> {
        let conn = Connection::open(&self.path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(conn)
    }
}

impl Peer for SqlitePeer {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn create_run(&self, run: &str) -> BenchResult<()> {
        self.connect()?
            .execute("INSERT INTO runs (run_id, last_seq) VALUES (?1, 0)", [run])?;
        Ok(())
    }

    fn session(&self) -> BenchResult<Box<dyn Session>> {
        Ok(Box::new(SqliteSession {
            conn: self.connect()?,
        }))
    }

    fn bulk_load(&self, run: &str, events: &[Ev]) -> BenchResult<()> {
        let mut conn = self.connect()?;
        for chunk in events.chunks(10_000) {
            append(&mut conn, run, None, chunk)?;
        }
        Ok(())
    }
}

struct SqliteSession {
    conn: Connection,
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
        append(&mut self.conn, run, None, std::slice::from_ref(ev))
    }

    fn append_decisions(&mut self, run: &str, expected: u64, evs: &[Ev]) -> BenchResult<u64> {
        append(&mut self.conn, run, Some(expected), evs)
    }

    fn read_all(&mut self, run: &str) -> BenchResult<ReadStat> {
        read(&self.conn, run, 0, i64::MAX)
    }

    fn read_after(&mut self, run: &str, after: u64, limit: usize) -> BenchResult<Option<ReadStat>> {
        read(&self.conn, run, after, i64::try_from(limit)?).map(Some)
    }

    fn read_all_borrowed(&mut self, run: &str) -> BenchResult<Option<ReadStat>> {
        read_borrowed(&self.conn, run).map(Some)
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
