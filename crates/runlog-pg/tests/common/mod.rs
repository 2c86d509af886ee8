//! A fresh schema on the server named by `RUNLOG_PG_URL`, for every PostgreSQL test.
#![allow(dead_code)]

use runlog_pg::{Options, PgLog};

/// Drops the fixture's schema when the case ends.
pub struct DropSchema {
    url: String,
    schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

/// Whether a server is configured; prints the skip, or fails when one is required.
pub fn ready() -> bool {
    match std::env::var("RUNLOG_PG_URL") {
        Ok(u) if !u.is_empty() => true,
        _ if std::env::var("RUNLOG_REQUIRE_PG").as_deref() == Ok("1") => panic!(
            "RUNLOG_REQUIRE_PG=1 but RUNLOG_PG_URL is not set: start a server with .ci/pg.sh \
             or set RUNLOG_PG_URL (e.g. 'host=/tmp/pg user=postgres dbname=postgres')"
        ),
        _ => {
            eprintln!("skipped: RUNLOG_PG_URL not set");
            false
        }
    }
}

/// A store on a fresh schema `t_<ulid>`, and the guard that drops it.
pub fn fresh_schema() -> (PgLog, DropSchema) {
    let url = std::env::var("RUNLOG_PG_URL").expect("checked by ready()");
    let schema = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let log = PgLog::connect_with(
        &url,
        Options {
            schema: Some(schema.clone()),
            ..Options::default()
        },
    )
    .unwrap_or_else(|e| panic!("connecting to RUNLOG_PG_URL={url}: {e}"));
    (log, DropSchema { url, schema })
}
