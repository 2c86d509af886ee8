//! The World layer (`runlog_world::World` and `Streams`, generic over `RunLog`) on PostgreSQL
//! (issue 14): the rules that rest on the backend's fence hold on the real server, and a
//! run's entities folded from PostgreSQL equal those folded from the same events on a file
//! store.
//!
//! "Two processes" are two `World`s, each on its own `PgLog` (its own pool and caches) on one
//! schema: a `World` serializes its own writers of a run in memory, so only separate handles
//! reach the server's fence concurrently, as separate processes do. Skips (or fails under
//! `RUNLOG_REQUIRE_PG=1`) as the conformance suite.

mod common;

use std::sync::{Arc, Barrier};

use runlog::{Config, NewEvent, RunId, RunLog, Store};
use runlog_pg::{Options, PgLog};
use runlog_world::{
    CreateEventParams, EventRequest, EventResult, EventType, Pagination, ResolveData, Streams,
    World, WorldConfig, WorldError,
};
use serde_json::Value;

type PgWorld = World<PgLog>;

/// A second, independent handle on the schema of `log` (another pool, as another process).
fn another_handle(log: &PgLog) -> PgLog {
    let url = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
    PgLog::connect_with(
        &url,
        Options {
            schema: log.schema().map(str::to_string),
            ..Options::default()
        },
    )
    .expect("second handle")
}

fn world_on(log: PgLog) -> PgWorld {
    World::new(log, WorldConfig::default())
}

fn req(ty: EventType, corr: Option<&str>, data: Option<&str>) -> EventRequest {
    let mut r = EventRequest::new(ty).spec_version(5);
    if let Some(c) = corr {
        r = r.correlation_id(c);
    }
    match data {
        Some(d) => r.data(d).expect("test data is JSON"),
        None => r,
    }
}

fn ev<B: RunLog>(
    w: &World<B>,
    run: &str,
    ty: EventType,
    corr: Option<&str>,
    data: Option<&str>,
) -> Result<EventResult, WorldError> {
    w.create_event(
        Some(run),
        req(ty, corr, data),
        &CreateEventParams::default(),
    )
}

/// A `Uint8Array` in the SDK's JSON shape (`data` is base64 of the bytes).
fn bin(base64: &str) -> String {
    format!(r#"{{"__type":"Uint8Array","data":"{base64}"}}"#)
}

fn running_run<B: RunLog>(w: &World<B>) -> String {
    let run = runlog_world::mint_run_id();
    let data = format!(
        r#"{{"deploymentId":"dpl_pg","workflowName":"workflow//./wf//main","input":{}}}"#,
        bin("WzEsMl0=")
    );
    ev(w, &run, EventType::RunCreated, None, Some(&data)).expect("run_created");
    ev(w, &run, EventType::RunStarted, None, None).expect("run_started");
    run
}

/// The kinds of a run's stored events, in seq order.
fn kinds(log: &dyn RunLog, run: &str) -> Vec<String> {
    let run = RunId::new(run).unwrap();
    let page = log.read(&run, 0, 10_000).unwrap();
    page.events
        .into_iter()
        .map(|e| e.kind.to_string())
        .collect()
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn two_handles_racing_run_completed_on_one_run_one_wins_and_the_other_conflicts() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let worlds = Arc::new([world_on(another_handle(&log)), world_on(log.clone())]);
    for round in 0..8 {
        let run = running_run(&worlds[0]);
        // The second World folds the run first, so both decide from the same seq.
        worlds[1].get_run(&run, ResolveData::None).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (worlds, run, barrier) = (worlds.clone(), run.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let data = format!(r#"{{"output":"writer {i}"}}"#);
                    barrier.wait();
                    ev(&worlds[i], &run, EventType::RunCompleted, None, Some(&data))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<usize> = (0..2).filter(|i| results[*i].is_ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let loser = results[1 - winners[0]].as_ref().unwrap_err();
        assert_eq!(
            (loser.class_name(), loser.status()),
            ("EntityConflictError", 409),
            "round {round}: {loser}"
        );
        assert_eq!(
            kinds(&log, &run),
            ["run_created", "run_started", "run_completed"],
            "round {round}"
        );
        let expected_output = format!("\"writer {}\"", winners[0]);
        for w in worlds.iter() {
            let r = w.get_run(&run, ResolveData::All).unwrap();
            assert_eq!(r.status.as_str(), "completed");
            assert_eq!(r.output.unwrap().as_str(), expected_output);
        }
    }
}

/// `(hook_created, hook_conflict)` events carrying `token` over `runs`.
fn token_outcomes(log: &dyn RunLog, runs: &[String], token: &str) -> (usize, usize) {
    let needle = format!(r#""token":"{token}""#);
    let (mut created, mut conflicts) = (0, 0);
    for run in runs {
        let page = log.read(&RunId::new(run).unwrap(), 0, 10_000).unwrap();
        for e in page.events {
            if !String::from_utf8_lossy(&e.payload).contains(&needle) {
                continue;
            }
            match &*e.kind {
                "hook_created" => created += 1,
                "hook_conflict" => conflicts += 1,
                _ => {}
            }
        }
    }
    (created, conflicts)
}

fn hook_created<B: RunLog>(
    w: &World<B>,
    run: &str,
    hook: &str,
    token: &str,
) -> Result<EventResult, WorldError> {
    let data = format!(r#"{{"token":"{token}","metadata":{}}}"#, bin("bWV0YQ=="));
    ev(w, run, EventType::HookCreated, Some(hook), Some(&data))
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn hook_tokens_are_unique_across_runs_and_handles_and_free_again_after_disposal() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let worlds = Arc::new([world_on(log.clone()), world_on(another_handle(&log))]);
    let runs: Vec<String> = (0..4).map(|_| running_run(&worlds[0])).collect();
    for round in 0..4 {
        let token = format!("pg-token-{round}");
        let barrier = Arc::new(Barrier::new(runs.len()));
        let handles: Vec<_> = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let (worlds, run, token, barrier) =
                    (worlds.clone(), run.clone(), token.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let r = hook_created(&worlds[i % 2], &run, &format!("hook_{round}"), &token);
                    (run, r.unwrap().event.unwrap().event_type)
                })
            })
            .collect();
        let results: Vec<(String, EventType)> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<&String> = results
            .iter()
            .filter(|(_, t)| *t == EventType::HookCreated)
            .map(|(run, _)| run)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(token_outcomes(&log, &runs, &token), (1, runs.len() - 1));
        for w in worlds.iter() {
            let holder = w.get_hook_by_token(&token).unwrap();
            assert_eq!(
                (&holder.run_id, holder.hook_id.as_str()),
                (winners[0], format!("hook_{round}").as_str())
            );
        }
    }
    // Disposing of the holder frees its token for another run (through the other handle).
    let holder = worlds[0].get_hook_by_token("pg-token-0").unwrap();
    ev(
        &worlds[0],
        &holder.run_id,
        EventType::HookDisposed,
        Some(&holder.hook_id),
        None,
    )
    .unwrap();
    let other = runs.iter().find(|r| **r != holder.run_id).unwrap();
    let r = hook_created(&worlds[1], other, "hook_again", "pg-token-0").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
    let now = worlds[0].get_hook_by_token("pg-token-0").unwrap();
    assert_eq!((&now.run_id, now.hook_id.as_str()), (other, "hook_again"));
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn a_stream_written_through_one_handle_reads_back_exactly_through_another() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let writer = Streams::new(log.clone());
    let reader = Streams::new(another_handle(&log));
    let run = RunId::new(runlog_world::mint_run_id()).unwrap();
    let chunks: [&[u8]; 4] = [b"first", b"", b"nul\0byte", &[0xff, 0x00, 0x7f]];
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(writer.write(&run, "out", c.to_vec()).unwrap(), i as u64);
    }
    assert_eq!(
        writer
            .write_many(&run, "out", [b"five".to_vec(), b"six".to_vec()])
            .unwrap(),
        4..6
    );
    let info = reader.info(&run, "out").unwrap();
    assert_eq!((info.tail_index, info.done), (5, false));
    // A reader waiting for chunk 6 is woken by the close (LISTEN/NOTIFY across handles).
    let waiter = {
        let (url_log, run) = (another_handle(&log), run.clone());
        std::thread::spawn(move || {
            Streams::new(url_log)
                .wait(&run, "out", 6, std::time::Duration::from_secs(10))
                .unwrap()
        })
    };
    writer.close(&run, "out").unwrap();
    let woke = waiter.join().unwrap();
    assert_eq!((woke.tail_index, woke.done), (5, true));

    let all = reader.read(&run, "out", 0, 100).unwrap();
    let got: Vec<&[u8]> = all.chunks.iter().map(|c| &c.data[..]).collect();
    assert_eq!(
        got,
        [&chunks[..], &[&b"five"[..], &b"six"[..]]].concat(),
        "every byte round-trips"
    );
    assert_eq!((all.next_index, all.has_more, all.done), (6, false, true));
    let tail = reader.read(&run, "out", -2, 100).unwrap();
    assert_eq!(tail.chunks[0].index, 4);
    assert_eq!(&tail.chunks[1].data[..], b"six");
    let page = reader.get_chunks(&run, "out", None, Some(4)).unwrap();
    assert_eq!(
        (page.data.len(), page.has_more, page.done),
        (4, true, false)
    );
    let rest = reader
        .get_chunks(&run, "out", page.cursor.as_deref(), Some(4))
        .unwrap();
    assert_eq!(
        (rest.data.len(), rest.has_more, rest.done),
        (2, false, true)
    );
    assert_eq!(reader.list(&run).unwrap(), ["out"]);
    let closed = writer.write(&run, "out", b"late".to_vec());
    assert!(
        matches!(closed, Err(runlog_world::StreamError::Closed { .. })),
        "{closed:?}"
    );
}

/// One run through every kind of entity: steps (one retried), a wait, hooks (one disposed),
/// an attribute, a completion.
fn rich_run(w: &PgWorld) -> String {
    let run = running_run(w);
    let step =
        r#"{"stepName":"step//./wf//add","input":{"__type":"Uint8Array","data":"WzEsMl0="}}"#;
    let ok = |ty, corr, data: Option<&str>| {
        ev(w, &run, ty, corr, data).unwrap_or_else(|e| panic!("{ty:?} {corr:?}: {e}"));
    };
    ok(EventType::StepCreated, Some("step_a"), Some(step));
    ok(EventType::StepStarted, Some("step_a"), None);
    ok(
        EventType::StepRetrying,
        Some("step_a"),
        Some(r#"{"error":{"message":"again"}}"#),
    );
    ok(EventType::StepStarted, Some("step_a"), None);
    ok(
        EventType::StepCompleted,
        Some("step_a"),
        Some(&format!(r#"{{"result":{}}}"#, bin("Mw=="))),
    );
    ok(EventType::StepCreated, Some("step_b"), Some(step));
    ok(
        EventType::WaitCreated,
        Some("wait_w"),
        Some(r#"{"resumeAt":"2030-01-01T00:00:00.000Z"}"#),
    );
    ok(EventType::WaitCompleted, Some("wait_w"), None);
    hook_created(w, &run, "hook_live", &format!("live-{run}")).unwrap();
    hook_created(w, &run, "hook_gone", &format!("gone-{run}")).unwrap();
    ok(
        EventType::HookReceived,
        Some("hook_gone"),
        Some(&format!(r#"{{"payload":{}}}"#, bin("aGVsbG8="))),
    );
    ok(EventType::HookDisposed, Some("hook_gone"), None);
    ok(
        EventType::AttrSet,
        Some("attr_a"),
        Some(r#"{"changes":[{"key":"k","value":"v"}],"writer":{"type":"workflow"}}"#),
    );
    run
}

/// Copies every log of `from` (World runs, the hook token claims) into `to`, byte for byte:
/// same metadata, kinds, payloads, correlation ids, keys, event ids and creation times.
fn copy_store(from: &dyn RunLog, to: &dyn RunLog) {
    let page = from.list_runs(None, 10_000).unwrap();
    assert!(!page.has_more);
    for info in page.runs {
        to.create_run(&info.run, &from.run_meta(&info.run).unwrap())
            .unwrap();
        let events: Vec<NewEvent> = from
            .read(&info.run, 0, 100_000)
            .unwrap()
            .events
            .into_iter()
            .map(|e| {
                let mut n = NewEvent::new(e.kind, e.payload)
                    .event_id(e.event_id)
                    .created_at_ms(e.created_at_ms);
                if let Some(c) = e.correlation_id {
                    n = n.correlation_id(c);
                }
                if let Some(k) = e.key {
                    n = n.key(k);
                }
                n
            })
            .collect();
        let n = events.len();
        let appended = to.append_facts(&info.run, events).unwrap();
        assert_eq!(appended.len(), n);
        assert_eq!(to.last_seq(&info.run).unwrap(), info.last_seq);
    }
}

/// Everything the World answers about `run`, as the SDK's JSON.
fn entities<B: RunLog>(w: &World<B>, run: &str) -> Value {
    let all = Pagination {
        limit: Some(1000),
        ..Pagination::default()
    };
    let r = ResolveData::All;
    serde_json::json!({
        "run": serde_json::to_value(w.get_run(run, r).unwrap()).unwrap(),
        "steps": serde_json::to_value(w.list_steps(run, &all, r).unwrap()).unwrap(),
        "hooks": serde_json::to_value(w.list_hooks(Some(run), &all, r).unwrap()).unwrap(),
        "events": serde_json::to_value(w.list_events(run, &all, r).unwrap()).unwrap(),
        "liveHook": serde_json::to_value(w.get_hook_by_token(&format!("live-{run}")).unwrap()).unwrap(),
    })
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn entities_folded_on_postgres_equal_the_same_events_folded_on_a_file_store() {
    if !common::ready() {
        return;
    }
    let (log, _guard) = common::fresh_schema();
    let pg = world_on(log.clone());
    let runs = [rich_run(&pg), rich_run(&pg)];
    let terminal = format!(r#"{{"output":{}}}"#, bin("ZG9uZQ=="));
    ev(
        &pg,
        &runs[1],
        EventType::RunCompleted,
        None,
        Some(&terminal),
    )
    .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Config::default()).unwrap();
    copy_store(&log, &store);
    let file = World::new(store, WorldConfig::default());

    // A fresh World on PostgreSQL folds from the log, not from the writer's cache.
    let pg_fresh = world_on(another_handle(&log));
    let open = entities(&pg_fresh, &runs[0]);
    assert_eq!(open, entities(&file, &runs[0]));
    assert_eq!(open["run"]["status"], "running");
    assert_eq!(open["steps"]["data"].as_array().unwrap().len(), 2);
    assert_eq!(open["hooks"]["data"].as_array().unwrap().len(), 1);
    assert_eq!(open["hooks"]["data"][0]["hookId"], "hook_live");
    assert_eq!(open["events"]["data"].as_array().unwrap().len(), 15);

    // A completed run's hooks are gone on both: get_hook_by_token is not found.
    for w in [&pg_fresh as &dyn ByToken, &file] {
        let e = w.by_token(&format!("live-{}", runs[1])).unwrap_err();
        assert_eq!((e.class_name(), e.status()), ("HookNotFoundError", 404));
    }
    let r1 = |w: &dyn ByToken| w.run_json(&runs[1]);
    assert_eq!(r1(&pg_fresh), r1(&file));
    assert_eq!(r1(&file)["status"], "completed");
}

/// The two Worlds of the fold test behind one interface (different backends).
trait ByToken {
    fn by_token(&self, token: &str) -> Result<runlog_world::Hook, WorldError>;
    fn run_json(&self, run: &str) -> Value;
}

impl<B: RunLog> ByToken for World<B> {
    fn by_token(&self, token: &str) -> Result<runlog_world::Hook, WorldError> {
        self.get_hook_by_token(token)
    }
    fn run_json(&self, run: &str) -> Value {
        serde_json::to_value(self.get_run(run, ResolveData::All).unwrap()).unwrap()
    }
}
