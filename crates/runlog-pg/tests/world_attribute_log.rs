//! `runs.experimentalSetAttributes` (`runlog_world::World::set_run_attributes`) on
//! PostgreSQL: the World is generic over `RunLog`, so the attribute log (`attrs-<runId>`) is a
//! log of the same schema, fenced by the server. Two `World`s on two handles (as two
//! processes) racing for the last attribute under the per-run limit: exactly one fits; the
//! run's own log does not move, and the attribute log is hidden from `runs.list`. Skips (or
//! fails under `RUNLOG_REQUIRE_PG=1`) as the conformance suite.

mod common;

use std::sync::{Arc, Barrier};

use runlog::{RunId, RunLog};
use runlog_world::{
    ATTRIBUTES_PER_RUN_MAX, CreateEventParams, EventRequest, EventType, ListRunsParams, LogKind,
    ResolveData, World, WorldConfig, log_kind,
};

fn running_run<B: RunLog>(w: &World<B>) -> String {
    let run = runlog_world::mint_run_id();
    let created = EventRequest::new(EventType::RunCreated)
        .spec_version(7)
        .data(r#"{"deploymentId":"dpl_pg","workflowName":"wf","input":null}"#)
        .unwrap();
    let p = CreateEventParams::default();
    w.create_event(Some(&run), created, &p).unwrap();
    w.create_event(Some(&run), EventRequest::new(EventType::RunStarted), &p)
        .unwrap();
    run
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn attribute_log_on_postgres_is_fenced_merged_and_hidden() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let worlds = Arc::new([
        World::new(common::second_handle(&log), WorldConfig::default()),
        World::new(log.clone(), WorldConfig::default()),
    ]);
    for round in 0..4 {
        let run = running_run(&worlds[0]);
        let fill: Vec<(String, Option<String>)> = (0..ATTRIBUTES_PER_RUN_MAX - 1)
            .map(|i| (format!("k{i}"), Some("v".into())))
            .collect();
        let after = worlds[0].set_run_attributes(&run, &fill, false).unwrap();
        assert_eq!(after.len(), ATTRIBUTES_PER_RUN_MAX - 1);
        worlds[1].get_run(&run, ResolveData::None).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (worlds, run, barrier) = (worlds.clone(), run.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    worlds[i].set_run_attributes(
                        &run,
                        &[(format!("last-{i}"), Some("v".into()))],
                        false,
                    )
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {results:?}");
        let refused = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert_eq!(
            refused.class_name(),
            "AttributeValidationError",
            "round {round}"
        );
        for w in worlds.iter() {
            let got = w.get_run(&run, ResolveData::None).unwrap();
            assert_eq!(
                got.attributes.len(),
                ATTRIBUTES_PER_RUN_MAX,
                "round {round}"
            );
        }
        // The run's own log holds its two events only.
        let own = log.read(&RunId::new(&run).unwrap(), 0, 100).unwrap();
        assert_eq!(own.events.len(), 2, "round {round}");
    }
    let store_ids: Vec<String> = log
        .list_runs(None, 100)
        .unwrap()
        .runs
        .into_iter()
        .map(|i| i.run.to_string())
        .collect();
    let attr_logs = store_ids
        .iter()
        .filter(|id| log_kind(id) == LogKind::Attributes)
        .count();
    assert_eq!(attr_logs, 4, "{store_ids:?}");
    let listed = worlds[1].list_runs(&ListRunsParams::default()).unwrap();
    assert_eq!(listed.data.len(), 4);
    assert!(
        listed
            .data
            .iter()
            .all(|r| r.attributes.len() == ATTRIBUTES_PER_RUN_MAX)
    );
}
