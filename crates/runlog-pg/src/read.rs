//! Reading events: one statement per page (the counter and the events it covers in one
//! snapshot), checked dense before it is returned.

use postgres::Row;
use runlog::{Error, EventRef, ReadPage, Result, RunId, Seq};
use ulid::Ulid;

use crate::PgLog;
use crate::error::{not_found, pg_err};

impl PgLog {
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

pub(crate) fn read(log: &PgLog, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
    let (last, rows) = log.read_rows(run, after, limit)?;
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

pub(crate) fn read_each(
    log: &PgLog,
    run: &RunId,
    after: Seq,
    limit: usize,
    f: &mut dyn FnMut(EventRef<'_>),
) -> Result<(Seq, bool)> {
    let (last, rows) = log.read_rows(run, after, limit)?;
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

pub(crate) fn last_seq(log: &PgLog, run: &RunId) -> Result<Seq> {
    let row = log
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
