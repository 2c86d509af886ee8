//! `runs.experimentalSetAttributes` (`World::set_run_attributes`): the changes live in the
//! run's attribute log (`attrs-<runId>`), never in its own log; every run the World returns
//! merges both in commit-time order; the per-run limit holds under concurrent writers of
//! separate Worlds (separate processes in all but address space); the log is hidden from
//! listings and from `log_kind`-based views.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use bytes::Bytes;
use common::*;
use runlog::{NewEvent, RunId, RunLog};
use runlog_world::{
    ATTRIBUTES_PER_RUN_MAX, EventType, ListRunsParams, LogKind, ResolveData, World, WorldConfig,
    log_kind,
};

fn set(
    w: &TestWorld,
    run: &str,
    changes: &[(&str, Option<&str>)],
) -> Result<BTreeMap<String, String>, runlog_world::WorldError> {
    let owned: Vec<(String, Option<String>)> = changes
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect();
    w.set_run_attributes(run, &owned, false)
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn attr_set(w: &TestWorld, run: &str, changes: &str) {
    let data = format!(r#"{{"changes":{changes},"writer":{{"type":"workflow"}}}}"#);
    ev(w, run, EventType::AttrSet, None, Some(&data)).expect("attr_set");
}

fn attrs_log(run: &str) -> RunId {
    RunId::new(format!("attrs-{run}")).unwrap()
}

/// Appends a change record to the run's attribute log straight through the store, stamped
/// `at_ms` (as another process's clock might stamp it).
fn append_change_at(w: &TestWorld, run: &str, key: &str, value: Option<&str>, at_ms: u64) {
    let log = attrs_log(run);
    let last = w.backend().last_seq(&log).unwrap();
    let body = serde_json::json!({
        "changes": [{ "key": key, "value": value }],
        "allowReservedAttributes": false,
    });
    let e = NewEvent::new("attributes_set", Bytes::from(body.to_string())).created_at_ms(at_ms);
    w.backend().append_decisions(&log, last, vec![e]).unwrap();
}

#[test]
fn changes_merge_with_the_run_log_and_null_removes_a_key() {
    let (_d, w) = world();
    let run = running_run(&w);
    attr_set(
        &w,
        &run,
        r#"[{"key":"a","value":"1"},{"key":"b","value":"2"}]"#,
    );
    let after = set(&w, &run, &[("b", None), ("c", Some("3"))]).unwrap();
    assert_eq!(after, map(&[("a", "1"), ("c", "3")]));
    let got = w.get_run(&run, ResolveData::All).unwrap();
    assert_eq!(got.attributes, after);
    // A later attr_set in the run's own log wins over the older attribute-log change of c.
    // Later by the clock: in the same millisecond the attribute log's change would be
    // applied last (the tie rule of the next test), so wait for the next one.
    let changed = w.get_run(&run, ResolveData::None).unwrap().updated_at_ms;
    let now_ms = || {
        let since = std::time::UNIX_EPOCH.elapsed().unwrap();
        u64::try_from(since.as_millis()).unwrap()
    };
    while now_ms() <= changed {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    attr_set(&w, &run, r#"[{"key":"c","value":"from-log"}]"#);
    let got = w.get_run(&run, ResolveData::None).unwrap();
    assert_eq!(got.attributes, map(&[("a", "1"), ("c", "from-log")]));
    // And a later attribute-log removal wins over it.
    let after = set(&w, &run, &[("c", None)]).unwrap();
    assert_eq!(after, map(&[("a", "1")]));
}

#[test]
fn merge_order_is_commit_time_across_both_logs_with_the_run_log_first_on_a_tie() {
    let (_d, w) = world();
    let run = running_run(&w);
    set(&w, &run, &[("seed", Some("x"))]).unwrap();
    attr_set(&w, &run, r#"[{"key":"k","value":"run"}]"#);
    let t = w.run_state(&run).unwrap().run().unwrap().updated_at_ms;
    // Stamped before the run's change of k: the run's value stays.
    append_change_at(&w, &run, "k", Some("older"), t - 1);
    assert_eq!(
        w.get_run(&run, ResolveData::None).unwrap().attributes["k"],
        "run"
    );
    // The same ms: the run's own log first, so the attribute log's change is applied last.
    append_change_at(&w, &run, "k", Some("tie"), t);
    assert_eq!(
        w.get_run(&run, ResolveData::None).unwrap().attributes["k"],
        "tie"
    );
    // A removal stamped later removes it.
    append_change_at(&w, &run, "k", None, t + 1);
    let got = w.get_run(&run, ResolveData::None).unwrap();
    assert_eq!(got.attributes, map(&[("seed", "x")]));
    // updatedAt is the later of both logs' last changes.
    assert_eq!(got.updated_at_ms, t + 1);
}

#[test]
fn a_terminal_run_accepts_changes_and_every_run_view_shows_them() {
    let (_d, w) = world();
    let run = running_run(&w);
    terminal(&w, &run, EventType::RunCompleted).unwrap();
    let after = set(&w, &run, &[("done", Some("yes"))]).unwrap();
    assert_eq!(after, map(&[("done", "yes")]));
    let want = Some(after);
    assert_eq!(
        w.get_run(&run, ResolveData::All).ok().map(|r| r.attributes),
        want
    );
    let many = w
        .get_runs(std::slice::from_ref(&run), ResolveData::None)
        .unwrap();
    assert_eq!(many[0].as_ref().map(|r| r.attributes.clone()), want);
    let waited = w
        .wait_for_terminal_run(&run, std::time::Duration::ZERO, ResolveData::None)
        .unwrap();
    assert_eq!(Some(waited.attributes), want);
    let listed = w.list_runs(&ListRunsParams::default()).unwrap();
    assert_eq!(
        listed.data.len(),
        1,
        "the attribute log is no run of the listing"
    );
    assert_eq!(Some(listed.data[0].attributes.clone()), want);
}

#[test]
fn an_events_create_result_carries_the_merged_attributes() {
    let (_d, w) = world();
    let run = running_run(&w);
    set(&w, &run, &[("from", Some("attrs-log"))]).unwrap();
    let done = terminal(&w, &run, EventType::RunCompleted).unwrap();
    assert_eq!(done.run.unwrap().attributes, map(&[("from", "attrs-log")]));
}

#[test]
fn an_unknown_run_is_refused_as_not_found_and_nothing_is_created() {
    let (_d, w) = world();
    let missing = runlog_world::mint_run_id();
    assert_class(
        set(&w, &missing, &[("a", Some("1"))]),
        "WorkflowRunNotFoundError",
        404,
    );
    assert_class(
        set(&w, "not-a-run", &[("a", Some("1"))]),
        "WorkflowRunNotFoundError",
        404,
    );
    assert!(matches!(
        w.backend().last_seq(&attrs_log(&missing)),
        Err(runlog::Error::RunNotFound { .. })
    ));
}

#[test]
fn bad_changes_are_attribute_validation_errors_and_write_nothing() {
    let (_d, w) = world();
    let run = running_run(&w);
    let long = "v".repeat(257);
    let cases: Vec<Vec<(&str, Option<&str>)>> = vec![
        vec![("", Some("1"))],
        vec![("$reserved", Some("1"))],
        vec![("a", Some(long.as_str()))],
        vec![("a", Some("1")), ("a", Some("2"))],
    ];
    for changes in cases {
        assert_class(set(&w, &run, &changes), "AttributeValidationError", 400);
    }
    // The reserved prefix is allowed when asked for.
    let ok = w
        .set_run_attributes(&run, &[("$fw".into(), Some("1".into()))], true)
        .unwrap();
    assert_eq!(ok, map(&[("$fw", "1")]));
    assert_eq!(w.backend().last_seq(&attrs_log(&run)).unwrap(), 1);
}

#[test]
fn the_limit_counts_both_logs() {
    let (_d, w) = world();
    let run = running_run(&w);
    attr_set(&w, &run, r#"[{"key":"own","value":"1"}]"#);
    let keys: Vec<String> = (1..ATTRIBUTES_PER_RUN_MAX)
        .map(|i| format!("k{i}"))
        .collect();
    let changes: Vec<(String, Option<String>)> =
        keys.iter().map(|k| (k.clone(), Some("v".into()))).collect();
    assert_eq!(
        w.set_run_attributes(&run, &changes, false).unwrap().len(),
        ATTRIBUTES_PER_RUN_MAX
    );
    assert_class(
        set(&w, &run, &[("one-more", Some("v"))]),
        "AttributeValidationError",
        400,
    );
    // Replacing a value or removing a key stays within the limit.
    set(&w, &run, &[("own", Some("2")), ("k1", None)]).unwrap();
    assert_eq!(set(&w, &run, &[("one-more", Some("v"))]).unwrap().len(), 64);
}

#[test]
fn two_concurrent_writers_cannot_both_pass_the_limit() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(runlog::Store::open(dir.path(), runlog::Config::default()).unwrap());
        // Two Worlds on one store: no cache or lock is shared, only the store's fence.
        let a = World::new(store.clone(), WorldConfig::default());
        let b = World::new(store.clone(), WorldConfig::default());
        let run = running_run(&a);
        let fill: Vec<(String, Option<String>)> = (0..ATTRIBUTES_PER_RUN_MAX - 1)
            .map(|i| (format!("k{i}"), Some("v".into())))
            .collect();
        a.set_run_attributes(&run, &fill, false).unwrap();
        // Both World caches are warm at the same seq before the race.
        b.get_run(&run, ResolveData::None).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let outcomes: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = [(&a, "last-a"), (&b, "last-b")]
                .into_iter()
                .map(|(w, key)| {
                    let barrier = barrier.clone();
                    let run = run.clone();
                    s.spawn(move || {
                        barrier.wait();
                        w.set_run_attributes(&run, &[(key.into(), Some("v".into()))], false)
                            .is_ok()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            outcomes.iter().filter(|ok| **ok).count(),
            1,
            "round {round}: exactly one of the two fits"
        );
        for w in [&a, &b] {
            let got = w.get_run(&run, ResolveData::None).unwrap();
            assert_eq!(
                got.attributes.len(),
                ATTRIBUTES_PER_RUN_MAX,
                "round {round}"
            );
        }
    }
}

#[test]
fn the_run_log_events_slots_and_event_count_do_not_move() {
    let (_d, w) = world();
    let run = running_run_at(&w, 7);
    let before = kinds(&w, &run);
    let seq_before = w.run_state(&run).unwrap().seq();
    for i in 0..5 {
        set(&w, &run, &[("n", Some(&i.to_string()))]).unwrap();
    }
    assert_eq!(kinds(&w, &run), before);
    assert_eq!(w.run_state(&run).unwrap().seq(), seq_before);
    let page = w
        .list_events(&run, &Default::default(), ResolveData::None)
        .unwrap();
    assert_eq!(page.data.len() as u64, seq_before);
    assert!(page.data.iter().all(|e| e.event_type != EventType::AttrSet));
    // The next slot of the run is still seq_before + 1.
    let r = step_created(&w, &run, "step_1").unwrap();
    assert_eq!(r.event.unwrap().seq, seq_before + 1);
    assert_eq!(w.backend().last_seq(&attrs_log(&run)).unwrap(), 5);
}

#[test]
fn the_attribute_log_is_hidden_from_listings_and_log_kind_views() {
    let (_d, w) = world();
    let run = running_run(&w);
    set(&w, &run, &[("a", Some("1"))]).unwrap();
    let log = attrs_log(&run);
    assert_eq!(log_kind(log.as_str()), LogKind::Attributes);
    assert!(log_kind(log.as_str()).is_internal());
    let store_ids: Vec<String> = w
        .backend()
        .list_runs(None, 100)
        .unwrap()
        .runs
        .into_iter()
        .map(|i| i.run.to_string())
        .collect();
    assert!(store_ids.contains(&log.to_string()), "{store_ids:?}");
    let visible: Vec<&String> = store_ids
        .iter()
        .filter(|id| !log_kind(id).is_internal())
        .collect();
    assert_eq!(visible, vec![&run]);
    let listed = w.list_runs(&ListRunsParams::default()).unwrap();
    let ids: Vec<&str> = listed.data.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, vec![run.as_str()]);
    assert_eq!(listed.data[0].attributes, map(&[("a", "1")]));
    // Reads cannot address it as a run.
    assert_class(
        w.get_run(log.as_str(), ResolveData::None),
        "WorkflowRunNotFoundError",
        404,
    );
}

#[test]
fn a_listing_without_attribute_logs_shows_the_runs_own_attributes() {
    let (_d, w) = world();
    let with = running_run(&w);
    let without = running_run(&w);
    attr_set(&w, &without, r#"[{"key":"own","value":"1"}]"#);
    set(&w, &with, &[("extra", Some("2"))]).unwrap();
    let listed = w.list_runs(&ListRunsParams::default()).unwrap();
    let by_id: BTreeMap<&str, &BTreeMap<String, String>> = listed
        .data
        .iter()
        .map(|r| (r.run_id.as_str(), &r.attributes))
        .collect();
    assert_eq!(by_id[without.as_str()], &map(&[("own", "1")]));
    assert_eq!(by_id[with.as_str()], &map(&[("extra", "2")]));
}

#[test]
fn another_world_on_the_store_sees_the_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(runlog::Store::open(dir.path(), runlog::Config::default()).unwrap());
    let a = World::new(store.clone(), WorldConfig::default());
    let run = running_run(&a);
    let b = World::new(store, WorldConfig::default());
    assert!(
        b.get_run(&run, ResolveData::None)
            .unwrap()
            .attributes
            .is_empty()
    );
    set(&a, &run, &[("x", Some("1"))]).unwrap();
    assert_eq!(
        b.get_run(&run, ResolveData::None).unwrap().attributes,
        map(&[("x", "1")])
    );
}

#[test]
fn an_attr_set_event_is_validated_against_both_logs() {
    let (_d, w) = world();
    let run = running_run(&w);
    let fill: Vec<(String, Option<String>)> = (0..ATTRIBUTES_PER_RUN_MAX)
        .map(|i| (format!("k{i}"), Some("v".into())))
        .collect();
    w.set_run_attributes(&run, &fill, false).unwrap();
    let data = r#"{"changes":[{"key":"one-more","value":"v"}],"writer":{"type":"workflow"}}"#;
    let over = ev(&w, &run, EventType::AttrSet, None, Some(data));
    assert_class(over, "AttributeValidationError", 400);
    // Replacing a key the attribute log set stays within the limit, and the event, a later
    // ms (a tie would go to the attribute log), wins.
    std::thread::sleep(std::time::Duration::from_millis(2));
    let data = r#"{"changes":[{"key":"k0","value":"event"}],"writer":{"type":"workflow"}}"#;
    let r = ev(&w, &run, EventType::AttrSet, None, Some(data)).unwrap();
    let attrs = r.run.unwrap().attributes;
    assert_eq!(
        (attrs.len(), attrs["k0"].as_str()),
        (ATTRIBUTES_PER_RUN_MAX, "event")
    );
}

/// Commits another writer's change to a run's attribute log (through a World of its own on
/// the same store) right before the first attribute-log append it sees goes on: that append
/// was validated against a log that has moved since.
struct OtherWriterFirst {
    store: Arc<runlog::Store>,
    fired: std::sync::atomic::AtomicBool,
}

impl OtherWriterFirst {
    fn before(&self, log: &RunId) {
        let owner = log.as_str().strip_prefix("attrs-").map(str::to_string);
        if let Some(run) = owner
            && !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let other = World::new(self.store.clone(), WorldConfig::default());
            other
                .set_run_attributes(&run, &[("last-b".into(), Some("v".into()))], false)
                .expect("the other writer's change fits");
        }
    }
}

impl Interposer for OtherWriterFirst {
    fn append_decisions(
        &self,
        inner: &dyn RunLog,
        call: Decisions<'_>,
    ) -> runlog::Result<Vec<runlog::Seq>> {
        self.before(call.run);
        call.pass(inner)
    }

    // An unfenced append would land here: the same race.
    fn append_facts(
        &self,
        inner: &dyn RunLog,
        call: Facts<'_>,
    ) -> runlog::Result<Vec<runlog::Appended>> {
        self.before(call.run);
        call.pass(inner)
    }
}

#[test]
fn a_change_validated_against_a_log_that_moved_is_revalidated_and_refused_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(runlog::Store::open(dir.path(), runlog::Config::default()).unwrap());
    let plain = World::new(store.clone(), WorldConfig::default());
    let run = running_run(&plain);
    let fill: Vec<(String, Option<String>)> = (0..ATTRIBUTES_PER_RUN_MAX - 1)
        .map(|i| (format!("k{i}"), Some("v".into())))
        .collect();
    plain.set_run_attributes(&run, &fill, false).unwrap();
    let racer = OtherWriterFirst {
        store: store.clone(),
        fired: Default::default(),
    };
    let a = World::new(
        Interposed::new(store.clone(), racer),
        WorldConfig::default(),
    );
    let mine = a.set_run_attributes(&run, &[("last-a".into(), Some("v".into()))], false);
    assert_class(mine, "AttributeValidationError", 400);
    let got = plain.get_run(&run, ResolveData::None).unwrap().attributes;
    assert_eq!(got.len(), ATTRIBUTES_PER_RUN_MAX);
    assert!(got.contains_key("last-b") && !got.contains_key("last-a"));
}
