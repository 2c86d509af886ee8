//! The storm on PostgreSQL (issue 14): the same simulated workflows as `runlog storm`, racing
//! replayers over threads through the replay driver on a `PgLog`: fenced runs never corrupt,
//! unfenced ones do. Skips (or fails under `RUNLOG_REQUIRE_PG=1`) as the conformance suite.

mod common;

use runlog_cli::storm::{Scenario, StormConfig, StormReport, Transport, run_storm_on};

fn storm(scenario: Scenario, fenced: bool) -> StormReport {
    let (log, _guard) = common::fresh_schema();
    let claims = tempfile::tempdir().unwrap();
    let config = StormConfig {
        fenced,
        runs: 8,
        replayers: 8,
        seed: 11,
        ..StormConfig::new(claims.path().join("claims"), scenario)
    };
    run_storm_on(&log, &config, &Transport::Threads).unwrap()
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn fenced_storms_on_postgres_never_corrupt() {
    if !common::ready() {
        return;
    }
    for scenario in [Scenario::StepStorm, Scenario::HookStorm] {
        let r = storm(scenario, true);
        let ctx = format!("{r:#?}");
        assert_eq!(r.corrupted, 0, "{ctx}");
        assert_eq!(r.completed, r.runs, "{ctx}");
        assert_eq!(r.replay.errors, 0, "{ctx}");
        assert!(r.replay.rejections > 0, "{ctx}");
    }
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn unfenced_storm_on_postgres_corrupts() {
    if !common::ready() {
        return;
    }
    let r = storm(Scenario::StepStorm, false);
    assert!(r.corrupted > 0, "{r:#?}");
    assert_eq!(r.replay.rejections, 0, "{r:#?}");
}
