//! `open_target` hands the limits of `runlog::Config` to PostgreSQL (issue 21: the CLI's
//! path passed none, the Node binding's both): a payload or a batch over a limit set in the
//! `Config` is refused with `InvalidEvent` by a store opened for writing, and by one opened
//! read-only before the server is asked. Needs `RUNLOG_PG_URL` as a `postgres://` URL.

mod common;

use runlog::{Config, Error, NewEvent, RunId, RunLog};
use runlog_conformance::skip::skip;
use runlog_pg::{Access, Opened, open_target};

use common::DropSchema;

/// A `postgres://` URL of a fresh schema on the test server, and the guard that drops it;
/// `None` (the skip reported) when no server is set or its URL is libpq-style.
fn fresh_target() -> Option<(String, DropSchema)> {
    if !common::ready() {
        return None;
    }
    let url = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        skip("RUNLOG_PG_URL is not a postgres:// URL (open_target takes only URLs)");
        return None;
    }
    let schema = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let sep = if url.contains('?') { '&' } else { '?' };
    let target = format!("{url}{sep}schema={schema}");
    Some((target, DropSchema::new(&url, &schema)))
}

fn run() -> RunId {
    RunId::new("wrun_01M8RD6VDN78DRZESK20KEMJWK").expect("id")
}

fn limited() -> Config {
    Config {
        payload_len_bytes_max: 1024,
        batch_events_max: 3,
        ..Config::default()
    }
}

fn open(target: &str, config: Config, access: Access) -> runlog_pg::PgLog {
    match open_target(target, config, access).expect("open") {
        Opened::Postgres(pg) => pg,
        Opened::File(_) => panic!("{target} opened as a file store"),
    }
}

fn assert_invalid_event(result: runlog::Result<impl std::fmt::Debug>, field: &str, limit: &str) {
    match result {
        Err(Error::InvalidEvent { field: f, reason }) => {
            assert_eq!(f, field, "{reason}");
            assert!(reason.contains(limit), "{field}: {reason}");
        }
        other => panic!("{field}: expected InvalidEvent, got {other:?}"),
    }
}

#[test]
fn a_payload_over_the_configs_limit_is_refused_by_a_postgres_store_opened_by_target() {
    let Some((target, _drop)) = fresh_target() else {
        return;
    };
    let pg = open(&target, limited(), Access::Write);
    pg.create_run(&run(), b"").expect("create");
    let big = NewEvent::new("step_completed", vec![b'x'; 1025]);
    assert_invalid_event(pg.append_facts(&run(), vec![big]), "payload", "1024");
    let four = vec![NewEvent::new("step_started", "{}"); 4];
    assert_invalid_event(pg.append_facts(&run(), four), "batch", "1..=3");
    // At the limit both pass, and nothing of the refused appends was written.
    let at = NewEvent::new("step_completed", vec![b'x'; 1024]);
    pg.append_facts(&run(), vec![at]).expect("1024 bytes");
    let three = vec![NewEvent::new("step_started", "{}"); 3];
    pg.append_facts(&run(), three).expect("3 events");
    assert_eq!(pg.last_seq(&run()).expect("last seq"), 4);
    // The default limit (16 MiB) would take the 1025-byte payload.
    let default = open(&target, Config::default(), Access::Write);
    let big = NewEvent::new("step_completed", vec![b'x'; 1025]);
    default
        .append_facts(&run(), vec![big])
        .expect("default limit");
}

#[test]
fn a_read_only_postgres_store_opened_by_target_checks_the_configs_limits_first() {
    let Some((target, _drop)) = fresh_target() else {
        return;
    };
    open(&target, Config::default(), Access::Write)
        .create_run(&run(), b"")
        .expect("create");
    let pg = open(&target, limited(), Access::ReadOnly);
    let big = NewEvent::new("step_completed", vec![b'x'; 1025]);
    assert_invalid_event(pg.append_facts(&run(), vec![big]), "payload", "1024");
    assert_eq!(pg.last_seq(&run()).expect("last seq"), 0);
}
