//! Connecting: the options checked, the schema created and migrated (or, read-only, checked).

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use postgres::NoTls;
use runlog::{Error, Result};
use ulid::Generator;

use crate::commit::Queues;
use crate::error::pg_err;
use crate::listen::{Wake, WakeState, channel_name};
use crate::notify::Notifier;
use crate::{Inner, MIGRATION_001, Options, PgLog};

impl PgLog {
    /// Connects to the server named by `params` (a libpq-style `host=… user=… dbname=…` string
    /// or a `postgres://` URL) with default [`Options`] and applies the migration.
    ///
    /// # Errors
    /// `Io` (path `postgres`) when the server cannot be reached or the migration fails.
    pub fn connect(params: &str) -> Result<PgLog> {
        PgLog::connect_with(params, Options::default())
    }

    /// Connects for reading only: applies no migration, and the server refuses writes on
    /// every connection of this handle (`default_transaction_read_only`); appends, creates and
    /// deletes fail with `Io` (path `postgres`, "read-only transaction").
    ///
    /// # Errors
    /// `NotAStore` when the schema holds no runlog tables; `Io` when the server cannot be
    /// reached.
    pub fn connect_read_only(params: &str, options: Options) -> Result<PgLog> {
        PgLog::connect_with(
            params,
            Options {
                read_only: true,
                ..options
            },
        )
    }

    /// [`PgLog::connect`] with explicit [`Options`]; creates `options.schema` if missing
    /// (unless `options.read_only`).
    ///
    /// # Errors
    /// `InvalidConfig` for a bad schema name or connection string; `Io` as [`PgLog::connect`].
    pub fn connect_with(params: &str, options: Options) -> Result<PgLog> {
        let config: postgres::Config = params
            .parse()
            .map_err(|e| Error::InvalidConfig(format!("postgres connection string: {e}")))?;
        if let Some(problem) = options.schema.as_deref().and_then(schema_name_problem) {
            return Err(Error::InvalidConfig(problem));
        }
        let channel = channel_name(options.schema.as_deref());
        let inner = Inner {
            config,
            options,
            channel,
            idle: Mutex::new(Vec::new()),
            ids: Mutex::new(Generator::new()),
            wake: Wake {
                state: Mutex::new(WakeState::default()),
                cond: Condvar::new(),
            },
            queues: Queues::default(),
            notifier: Notifier::default(),
        };
        if inner.options.read_only {
            inner.check_schema()?;
        } else {
            let mut client = inner
                .config
                .connect(NoTls)
                .map_err(|e| pg_err("connecting to", e))?;
            let mut tx = client.transaction().map_err(|e| pg_err("migrating", e))?;
            // One migrator at a time per database; the lock ends with the transaction.
            tx.execute("SELECT pg_advisory_xact_lock(7247083462)", &[])
                .map_err(|e| pg_err("migrating", e))?;
            if let Some(schema) = &inner.options.schema {
                // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the
                // schema exists: a role granted only its tables must still connect.
                let exists = tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                        &[schema],
                    )
                    .map_err(|e| pg_err("migrating", e))?
                    .get::<_, bool>(0);
                if !exists {
                    tx.batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
                        .map_err(|e| pg_err("migrating", e))?;
                }
                tx.batch_execute(&format!("SET LOCAL search_path TO \"{schema}\""))
                    .map_err(|e| pg_err("migrating", e))?;
            }
            // Likewise CREATE TABLE IF NOT EXISTS needs CREATE on the schema: a migrated
            // schema is left as it is.
            let migrated = tx
                .query_one(
                    "SELECT to_regclass('runs') IS NOT NULL AND to_regclass('events') IS NOT NULL \
                     AND to_regclass('runlog_schema_version') IS NOT NULL",
                    &[],
                )
                .map_err(|e| pg_err("migrating", e))?
                .get::<_, bool>(0)
                && tx
                    .query_one(
                        "SELECT EXISTS (SELECT 1 FROM runlog_schema_version WHERE version = 1)",
                        &[],
                    )
                    .map_err(|e| pg_err("migrating", e))?
                    .get::<_, bool>(0);
            if !migrated {
                tx.batch_execute(MIGRATION_001)
                    .map_err(|e| pg_err("migrating", e))?;
            }
            tx.commit().map_err(|e| pg_err("migrating", e))?;
        }
        Ok(PgLog {
            inner: Arc::new(inner),
        })
    }
}

impl Inner {
    /// A read-only handle's check that the schema holds runlog's tables.
    fn check_schema(&self) -> Result<()> {
        let mut client = self.connect_one()?;
        let row = client
            .query_one(
                "SELECT to_regclass('runs') IS NOT NULL AND to_regclass('events') IS NOT NULL",
                &[],
            )
            .map_err(|e| pg_err("checking the schema of", e))?;
        if row.get::<_, bool>(0) {
            Ok(())
        } else {
            Err(Error::NotAStore {
                path: PathBuf::from(format!(
                    "postgres (schema {})",
                    self.options
                        .schema
                        .as_deref()
                        .unwrap_or("on the search path")
                )),
                detail: "no runlog tables (runs, events); open it for writing once to create them"
                    .into(),
            })
        }
    }
}

/// Why `name` cannot be runlog's schema, if it cannot: only `[a-z0-9_]`, 1–63 bytes, and not
/// a system schema (`pg_*`, `information_schema`: PostgreSQL refuses the first, and
/// `pg_dump` leaves both out of backups).
pub(crate) fn schema_name_problem(name: &str) -> Option<String> {
    if name.is_empty()
        || name.len() > 63
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Some(format!("schema {name:?}: only [a-z0-9_], 1-63 bytes"));
    }
    if name.starts_with("pg_") || name == "information_schema" {
        return Some(format!(
            "schema {name:?}: a PostgreSQL system schema (pg_*, information_schema); pick another"
        ));
    }
    None
}

/// The first key of the collector lock (`pg_try_advisory_lock(key, hashtext(schema))`): one
/// collector per schema of a database, on a session of its own held by the guard, so the
/// server releases it when the holder's connection ends (a killed process included).
const COLLECTOR_LOCK_KEY: i32 = 1_919_380_332;

/// [`runlog::RunLog::lock_collector`] on PostgreSQL: a session-level advisory lock on a
/// connection of its own (not the pool's), kept open by the returned guard.
pub(crate) fn lock_collector(inner: &Inner) -> Result<runlog::CollectorLock> {
    if inner.options.read_only {
        return Err(runlog::Error::ReadOnly {
            op: "collect runs".to_string(),
            path: "postgres".into(),
        });
    }
    let schema = inner.options.schema.as_deref().unwrap_or("public");
    let mut client = inner.connect_one()?;
    let got: bool = client
        .query_one(
            "SELECT pg_try_advisory_lock($1, hashtext($2))",
            &[&COLLECTOR_LOCK_KEY, &schema],
        )
        .map_err(|e| pg_err("locking the collector on", e))?
        .get(0);
    if got {
        return Ok(runlog::CollectorLock::new(client));
    }
    // For the message only: the server's backend pid of the holder's session.
    let holder = client
        .query_opt(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid \
             AND objsubid = 2 LIMIT 1",
            &[&i64::from(COLLECTOR_LOCK_KEY), &schema],
        )
        .ok()
        .flatten()
        .map_or_else(
            || "another session".to_string(),
            |row| format!("server backend pid {}", row.get::<_, i32>(0)),
        );
    Err(runlog::Error::Busy {
        run: format!("collector of schema {schema} (another gc of this PostgreSQL store)"),
        holder,
        waited_ms: 0,
    })
}
