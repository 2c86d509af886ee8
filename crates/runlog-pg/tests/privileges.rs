//! Who may open a PostgreSQL store: a role granted only the tables of an existing store
//! appends (opening migrates nothing it may not create), and system schemas are refused as
//! bad configuration before anything is sent. Skips (or fails under `RUNLOG_REQUIRE_PG=1`)
//! as the conformance suite.

mod common;

use runlog::{Error, NewEvent, RunId, RunLog};
use runlog_pg::{Options, PgLog};

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn a_role_with_table_privileges_only_appends_to_an_existing_store() {
    if !common::ready() {
        return;
    }
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    let (owner, _guard) = common::fresh_schema();
    let schema = owner.schema().unwrap().to_string();
    let role = format!("rw_{}", &schema[2..14]);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA \"{schema}\" TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \"{schema}\" TO {role};"
        ))
        .unwrap();
    let as_role = url.replacen("://postgres@", &format!("://{role}@"), 1);
    assert_ne!(as_role, url, "RUNLOG_PG_URL names the postgres user: {url}");
    let opened = PgLog::connect_with(
        &as_role,
        Options {
            schema: Some(schema.clone()),
            ..Options::default()
        },
    );
    let outcome = opened.and_then(|log| {
        let run = RunId::new("wrun_rw").unwrap();
        log.create_run(&run, b"")?;
        log.append_facts(&run, vec![NewEvent::new("k", b"{}".to_vec())])
    });
    admin
        .batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role};"))
        .unwrap();
    assert_eq!(outcome.expect("the role appends").len(), 1);
    assert_eq!(owner.last_seq(&RunId::new("wrun_rw").unwrap()).unwrap(), 1);
}

#[test]
#[cfg_attr(
    runlog_no_pg_server,
    ignore = "needs a PostgreSQL server (RUNLOG_PG_URL)"
)]
fn system_schemas_are_refused_as_configuration() {
    if !common::ready() {
        return;
    }
    let url = std::env::var("RUNLOG_PG_URL").unwrap();
    for schema in ["pg_runlog", "pg_catalog", "information_schema"] {
        let e = PgLog::connect_with(
            &url,
            Options {
                schema: Some(schema.into()),
                ..Options::default()
            },
        )
        .err()
        .unwrap_or_else(|| panic!("{schema} accepted"));
        assert!(
            matches!(&e, Error::InvalidConfig(m) if m.contains("system schema")),
            "{schema}: {e}"
        );
    }
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let created: i64 = admin
        .query_one(
            "SELECT count(*) FROM information_schema.tables \
             WHERE table_schema = 'information_schema' AND table_name = 'runlog_schema_version'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(created, 0);
}
