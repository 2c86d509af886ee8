//! Hook retention (`capabilities.hookRetention`, the SDK's `experimental_minRetention`): a
//! hook created with `eventData.tokenRetentionUntil` outlives its run's end until then, as
//! in world-local 5.0.0-beta.46 — `hooks.get`, `hooks.getByToken` and `hooks.list` still
//! return it (metadata and `tokenRetentionUntil` included), its token stays held (another
//! run's `hook_created` for it is a `hook_conflict`), it can no longer be received; once
//! the time passes it is gone and its token free. A retention beyond
//! `WorldConfig::hook_retention_max_ms` (30 days by default) is a 400 with nothing written.
//! Time is the World's clock (`WorldConfig::clock`), moved by hand here.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use runlog::{Config, Store};
use runlog_world::{
    Clock, EventType, HOOK_RETENTION_MAX_MS, Pagination, ResolveData, World, WorldConfig,
    format_iso_ms,
};

const HOUR_MS: u64 = 60 * 60 * 1000;

/// A World whose rules' clock is `now`, on the store at `path`.
fn world_at(path: &std::path::Path, now: &Arc<AtomicU64>, max_ms: u64) -> TestWorld {
    let store = Store::open(path, Config::default()).expect("open store");
    let now = Arc::clone(now);
    let config = WorldConfig {
        clock: Clock::from_fn(move || now.load(Ordering::SeqCst)),
        hook_retention_max_ms: max_ms,
        ..WorldConfig::default()
    };
    World::new(Arc::new(store), config)
}

struct Fixture {
    _dir: tempfile::TempDir,
    now: Arc<AtomicU64>,
    w: TestWorld,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_max(HOOK_RETENTION_MAX_MS)
    }

    fn with_max(max_ms: u64) -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let now = Arc::new(AtomicU64::new(
            runlog_world::parse_iso_ms("2026-12-01T12:00:00.000Z").unwrap(),
        ));
        let w = world_at(dir.path(), &now, max_ms);
        Fixture { _dir: dir, now, w }
    }

    fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

/// `hook_created` of `hook` with `token`, metadata `meta` and `tokenRetentionUntil` `until`.
fn retained_hook(
    w: &TestWorld,
    run: &str,
    hook: &str,
    token: &str,
    until: &str,
) -> Result<runlog_world::EventResult, runlog_world::WorldError> {
    let data = format!(
        r#"{{"token":"{token}","metadata":{},"tokenRetentionUntil":"{until}"}}"#,
        bin(b"meta")
    );
    ev(w, run, EventType::HookCreated, Some(hook), Some(&data))
}

fn listed(w: &TestWorld, run: Option<&str>) -> Vec<String> {
    w.list_hooks(run, &Pagination::default(), ResolveData::All)
        .unwrap()
        .data
        .into_iter()
        .map(|h| h.hook_id)
        .collect()
}

#[test]
fn a_retained_hook_outlives_its_run_until_its_retention_ends() {
    let f = Fixture::new();
    let run = running_run(&f.w);
    let until = format_iso_ms(f.now() + HOUR_MS);
    let created = retained_hook(&f.w, &run, "hook_r", "tok-kept", &until).unwrap();
    assert_eq!(
        created.hook.as_ref().unwrap().token_retention_until_ms,
        Some(f.now() + HOUR_MS)
    );
    terminal(&f.w, &run, EventType::RunCompleted).unwrap();

    // Readable by id, by token and in both listings, with its metadata and retention.
    let by_token = f.w.get_hook_by_token("tok-kept").unwrap();
    assert_eq!(
        (by_token.run_id.as_str(), by_token.hook_id.as_str()),
        (run.as_str(), "hook_r")
    );
    assert_eq!(by_token.token_retention_until_ms, Some(f.now() + HOUR_MS));
    assert_eq!(by_token.metadata.as_ref().unwrap().as_str(), bin(b"meta"));
    let by_id = f.w.get_hook("hook_r", ResolveData::All).unwrap();
    assert_eq!(by_id, by_token);
    let json = serde_json::to_value(&by_id).unwrap();
    assert_eq!(json["tokenRetentionUntil"], until.as_str());
    assert_eq!(listed(&f.w, Some(&run)), ["hook_r"]);
    assert_eq!(listed(&f.w, None), ["hook_r"]);

    // Not receivable nor disposable (its run ended: RunExpiredError, as world-local), and
    // its token still held.
    assert_class(hook_received(&f.w, &run, "hook_r"), "RunExpiredError", 410);
    assert_class(hook_disposed(&f.w, &run, "hook_r"), "RunExpiredError", 410);
    let other = running_run(&f.w);
    let r = hook_created(&f.w, &other, "hook_o", "tok-kept").unwrap();
    let e = r.event.unwrap();
    assert_eq!(e.event_type, EventType::HookConflict);
    assert_eq!(
        e.event_data.unwrap().as_str(),
        format!(r#"{{"token":"tok-kept","conflictingRunId":"{run}"}}"#)
    );

    // A millisecond before the end it is still there; at the end it is gone.
    f.advance(HOUR_MS - 1);
    assert_eq!(f.w.get_hook_by_token("tok-kept").unwrap().hook_id, "hook_r");
    f.advance(1);
    assert_class(f.w.get_hook_by_token("tok-kept"), "HookNotFoundError", 404);
    assert_class(
        f.w.get_hook("hook_r", ResolveData::All),
        "HookNotFoundError",
        404,
    );
    assert!(listed(&f.w, Some(&run)).is_empty());
    assert!(listed(&f.w, None).is_empty());
    assert_class(
        hook_received(&f.w, &run, "hook_r"),
        "HookNotFoundError",
        404,
    );

    // The token is free: a third run takes it over.
    let third = running_run(&f.w);
    let r = hook_created(&f.w, &third, "hook_t", "tok-kept").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
    assert_eq!(f.w.get_hook_by_token("tok-kept").unwrap().run_id, third);
}

#[test]
fn a_hook_without_retention_or_with_its_retention_over_ends_with_its_run() {
    let f = Fixture::new();
    let run = running_run(&f.w);
    hook_created(&f.w, &run, "hook_plain", "tok-plain").unwrap();
    let soon = format_iso_ms(f.now() + 1000);
    retained_hook(&f.w, &run, "hook_short", "tok-short", &soon).unwrap();
    f.advance(1000);
    terminal(&f.w, &run, EventType::RunFailed).unwrap();
    for token in ["tok-plain", "tok-short"] {
        assert_class(f.w.get_hook_by_token(token), "HookNotFoundError", 404);
    }
    assert!(listed(&f.w, None).is_empty());
    let other = running_run(&f.w);
    for (hook, token) in [("a", "tok-plain"), ("b", "tok-short")] {
        let r = hook_created(&f.w, &other, hook, token).unwrap();
        assert_eq!(
            r.event.unwrap().event_type,
            EventType::HookCreated,
            "{token}"
        );
    }
}

#[test]
fn a_disposed_hook_is_gone_whatever_its_retention() {
    let f = Fixture::new();
    let run = running_run(&f.w);
    let until = format_iso_ms(f.now() + HOUR_MS);
    retained_hook(&f.w, &run, "hook_d", "tok-disposed", &until).unwrap();
    hook_disposed(&f.w, &run, "hook_d").unwrap();
    assert_class(
        f.w.get_hook_by_token("tok-disposed"),
        "HookNotFoundError",
        404,
    );
    terminal(&f.w, &run, EventType::RunCancelled).unwrap();
    assert_class(
        f.w.get_hook("hook_d", ResolveData::All),
        "HookNotFoundError",
        404,
    );
    let other = running_run(&f.w);
    let r = hook_created(&f.w, &other, "hook_o", "tok-disposed").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
}

#[test]
fn a_retention_beyond_the_limit_is_refused_before_anything_is_written() {
    let f = Fixture::new();
    let run = running_run(&f.w);
    let seq = f.w.run_state(&run).unwrap().seq();
    let too_far = format_iso_ms(f.now() + HOOK_RETENTION_MAX_MS + 1);
    let e = assert_class(
        retained_hook(&f.w, &run, "hook_far", "tok-far", &too_far),
        "WorkflowWorldError",
        400,
    );
    let text = e.to_string();
    assert!(text.contains("eventData.tokenRetentionUntil"), "{text}");
    assert!(text.contains("30 days"), "{text}");
    assert_eq!(f.w.run_state(&run).unwrap().seq(), seq);
    // Nothing claimed: another run takes the token.
    let other = running_run(&f.w);
    let r = hook_created(&f.w, &other, "hook_o", "tok-far").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
    // Exactly the limit is accepted.
    let at_limit = format_iso_ms(f.now() + HOOK_RETENTION_MAX_MS);
    let r = retained_hook(&f.w, &run, "hook_limit", "tok-limit", &at_limit).unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
}

#[test]
fn the_limit_is_the_worlds_setting_and_a_non_date_is_refused() {
    let f = Fixture::with_max(2 * HOUR_MS);
    let run = running_run(&f.w);
    let e = assert_class(
        retained_hook(
            &f.w,
            &run,
            "h1",
            "tok-1",
            &format_iso_ms(f.now() + 3 * HOUR_MS),
        ),
        "WorkflowWorldError",
        400,
    );
    assert!(e.to_string().contains("2 hours"), "{e}");
    retained_hook(
        &f.w,
        &run,
        "h2",
        "tok-2",
        &format_iso_ms(f.now() + 2 * HOUR_MS),
    )
    .unwrap();
    let e = assert_class(
        retained_hook(&f.w, &run, "h3", "tok-3", "soon"),
        "WorkflowWorldError",
        400,
    );
    assert!(
        e.to_string().contains("eventData.tokenRetentionUntil"),
        "{e}"
    );
}

#[test]
fn retention_is_read_from_the_log_by_a_reopened_world_and_a_claims_rebuild() {
    let f = Fixture::new();
    let run = running_run(&f.w);
    let until = format_iso_ms(f.now() + HOUR_MS);
    retained_hook(&f.w, &run, "hook_r", "tok-reopen", &until).unwrap();
    terminal(&f.w, &run, EventType::RunCompleted).unwrap();

    // Another World on the same store (another process, say) folds the log afresh.
    let again = world_at(f._dir.path(), &f.now, HOOK_RETENTION_MAX_MS);
    assert_eq!(
        again.get_hook_by_token("tok-reopen").unwrap().hook_id,
        "hook_r"
    );
    // A rebuild of the claims from the run logs keeps the retained hook's claim.
    let report = again.rebuild_hook_tokens().unwrap();
    assert_eq!(report.live_hooks, 1);
    let other = running_run(&again);
    let r = hook_created(&again, &other, "hook_o", "tok-reopen").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookConflict);

    // Past the retention a rebuild claims nothing for it.
    f.advance(HOUR_MS);
    assert_eq!(again.rebuild_hook_tokens().unwrap().live_hooks, 0);
    let r = hook_created(&again, &other, "hook_o2", "tok-reopen").unwrap();
    assert_eq!(r.event.unwrap().event_type, EventType::HookCreated);
}
