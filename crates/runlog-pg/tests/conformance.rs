//! The conformance suite on PostgreSQL: every case gets a fresh schema (`t_<ulid>`) in the
//! database named by `RUNLOG_PG_URL`, so the cases run in parallel on one server, and drops it
//! afterwards. `.ci/pg.sh` starts a throwaway server and sets `RUNLOG_REQUIRE_PG=1`.
//!
//! Without `RUNLOG_PG_URL` each case skips (`runlog_conformance::skip::skip`: prints
//! `skipped: <case>: RUNLOG_PG_URL not set …` and passes), unless `RUNLOG_NO_SKIP=1` or
//! `RUNLOG_REQUIRE_PG=1`, where it fails: CI never skips silently.

mod common;

use runlog_conformance::{Fixture, conformance_tests};
use runlog_pg::PgLog;

use common::ready;

fn fresh() -> Fixture<PgLog> {
    let (log, guard) = common::fresh_schema();
    Fixture::new(log, guard)
}

conformance_tests!(
    fresh,
    when ready,
    #[cfg_attr(runlog_no_pg_server, ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)")]
);
