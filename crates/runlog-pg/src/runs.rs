//! Runs: create, describe, list and delete (with its notification).

use postgres::Row;
use runlog::{Error, Result, RunId, RunInfo, RunPage, Seq};

use crate::error::{not_found, pg_err};
use crate::{META_LEN_MAX, PgLog, now_ms};

pub(crate) fn create_run(log: &PgLog, run: &RunId, meta: &[u8]) -> Result<()> {
    if meta.len() > META_LEN_MAX {
        return Err(Error::InvalidEvent {
            field: "meta",
            reason: format!("{} bytes > limit {META_LEN_MAX}", meta.len()),
        });
    }
    let now = now_ms() as i64;
    let n = log
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

pub(crate) fn run_info(log: &PgLog, run: &RunId) -> Result<RunInfo> {
    let row = log
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

pub(crate) fn run_meta(log: &PgLog, run: &RunId) -> Result<Vec<u8>> {
    let row = log
        .inner
        .conn()?
        .query_opt("SELECT meta FROM runs WHERE run_id = $1", &[&run.as_str()])
        .map_err(|e| pg_err("reading run metadata in", e))?
        .ok_or_else(|| not_found(run))?;
    Ok(row.get(0))
}

pub(crate) fn list_runs(log: &PgLog, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
    let rows = log
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

/// Deletes `run`, only while its last seq is `expected` when given: the run's row is locked
/// first (`FOR UPDATE`, as every commit's update of `last_seq` locks it), so no commit lands
/// between the check and the delete.
pub(crate) fn delete_run(log: &PgLog, run: &RunId, expected: Option<Seq>) -> Result<()> {
    let mut c = log.inner.conn()?;
    let mut tx = c.transaction().map_err(|e| pg_err("deleting from", e))?;
    let row = tx
        .query_opt(
            "SELECT last_seq FROM runs WHERE run_id = $1 FOR UPDATE",
            &[&run.as_str()],
        )
        .map_err(|e| pg_err("deleting from", e))?;
    let Some(row) = row else {
        return Err(not_found(run));
    };
    let last = row.get::<_, i64>(0) as Seq;
    if let Some(expected) = expected.filter(|&e| e != last) {
        return Err(Error::Fenced {
            run: run.to_string(),
            expected,
            actual: last,
        });
    }
    // Events go with the run (ON DELETE CASCADE).
    tx.execute("DELETE FROM runs WHERE run_id = $1", &[&run.as_str()])
        .map_err(|e| pg_err("deleting from", e))?;
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&log.inner.channel, &run.as_str()],
    )
    .map_err(|e| pg_err("notifying", e))?;
    tx.commit().map_err(|e| pg_err("deleting from", e))
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
