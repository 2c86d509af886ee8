//! Verifying a run: its events dense from seq 1 and the counters matching them, in one
//! read-only repeatable-read snapshot.

use postgres::fallible_iterator::FallibleIterator;
use runlog::{Problem, Result, RunId, Seq, VerifyReport};

use crate::PgLog;
use crate::error::{not_found, pg_err};

pub(crate) fn verify_run(log: &PgLog, run: &RunId) -> Result<VerifyReport> {
    let mut c = log.inner.conn()?;
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
