//! A store named by one string, as the CLI's `--store` and the Node World's data option take
//! it: a `postgres://` or `postgresql://` URL names a PostgreSQL store, anything else the
//! directory of a file store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use runlog::{Config, Error, Result, RunLog, Store};

use crate::{Options, PgLog};

/// Where a store named by a string lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// A file store directory.
    File(&'a Path),
    /// A PostgreSQL connection URL (`postgres://…` or `postgresql://…`).
    Postgres(&'a str),
}

impl<'a> Target<'a> {
    /// Classifies `s`: a `postgres://`/`postgresql://` prefix (any case) is PostgreSQL,
    /// everything else a file store path.
    pub fn parse(s: &'a str) -> Target<'a> {
        let lower = s.get(..13).unwrap_or(s).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Target::Postgres(s)
        } else {
            Target::File(Path::new(s))
        }
    }
}

/// Splits runlog's own `schema=NAME` query parameter off a PostgreSQL URL (the client does
/// not know it): `postgres://h/db?schema=s&sslmode=disable` → (`postgres://h/db?sslmode=disable`,
/// `Some("s")`). The schema holds runlog's tables (created if missing by a writer); without it
/// the connection's search path decides (normally `public`).
pub fn split_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("schema=") {
            Some(v) => {
                schema = Some(v.to_string());
                false
            }
            None => !kv.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, schema)
}

/// How [`open_target`] opens a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// For writing: the file store created if missing and recovered ([`Store::open`]), or
    /// PostgreSQL with the schema migrated ([`PgLog::connect_with`]).
    Write,
    /// For reading only: the file store with no lock, no recovery and nothing written
    /// ([`Store::open_read_only`]), or PostgreSQL with no migration and every write refused
    /// by the server ([`PgLog::connect_read_only`]).
    ReadOnly,
}

/// A store [`open_target`] opened, with its concrete type (the file store's commit counters
/// and read-only state are not part of [`RunLog`]).
#[derive(Clone)]
pub enum Opened {
    /// A file store directory.
    File(Store),
    /// A PostgreSQL store.
    Postgres(PgLog),
}

impl Opened {
    /// The store behind the backend-neutral contract.
    pub fn log(&self) -> Arc<dyn RunLog> {
        match self {
            Opened::File(store) => Arc::new(store.clone()),
            Opened::Postgres(pg) => Arc::new(pg.clone()),
        }
    }

    /// The file store, or `None` on PostgreSQL.
    pub fn file(&self) -> Option<&Store> {
        match self {
            Opened::File(store) => Some(store),
            Opened::Postgres(_) => None,
        }
    }
}

/// The connection URL and [`Options`] of a PostgreSQL target: `?schema=NAME` split off
/// ([`split_schema`]), and the limits both backends enforce taken from `config`
/// (`payload_len_bytes_max`, `batch_events_max`); the rest of `config` is the file store's.
pub fn pg_options(url: &str, config: &Config, access: Access) -> (String, Options) {
    let (url, schema) = split_schema(url);
    let options = Options {
        schema,
        payload_len_bytes_max: config.payload_len_bytes_max,
        batch_events_max: config.batch_events_max,
        read_only: access == Access::ReadOnly,
        ..Options::default()
    };
    (url, options)
}

/// Opens the store `target` names ([`Target::parse`]; a path that is not UTF-8 is a
/// directory) as `access` says: the file store with
/// `config`, or PostgreSQL with `config`'s payload and batch limits ([`pg_options`];
/// `?schema=NAME` picks the schema). The one way the CLI and the Node binding open a store
/// by name.
///
/// # Errors
/// Those of [`Store::open`], [`Store::open_read_only`], [`PgLog::connect_with`] and
/// [`PgLog::connect_read_only`].
pub fn open_target(target: impl AsRef<Path>, config: Config, access: Access) -> Result<Opened> {
    let target = target.as_ref();
    // A path that is not UTF-8 is not a URL: always a directory.
    let parsed = target.to_str().map_or(Target::File(target), Target::parse);
    Ok(match (parsed, access) {
        (Target::File(dir), Access::Write) => Opened::File(Store::open(dir, config)?),
        (Target::File(dir), Access::ReadOnly) => Opened::File(Store::open_read_only(dir, config)?),
        (Target::Postgres(url), Access::Write) => {
            let (url, options) = pg_options(url, &config, access);
            Opened::Postgres(PgLog::connect_with(&url, options)?)
        }
        (Target::Postgres(url), Access::ReadOnly) => {
            let (url, options) = pg_options(url, &config, access);
            Opened::Postgres(PgLog::connect_read_only(&url, options)?)
        }
    })
}

/// Drops the schema a PostgreSQL URL names with `?schema=NAME`, with everything in it (a
/// storm's or a test's throwaway schema); nothing when it does not exist.
///
/// # Errors
/// `InvalidConfig` when the URL names no schema or not a valid one (see [`crate::Options::schema`]),
/// or is not a PostgreSQL URL; `Io` (path `postgres`) when the server cannot be reached or
/// refuses.
pub fn drop_schema(target: &str) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidConfig(m));
    let Target::Postgres(url) = Target::parse(target) else {
        return bad(format!("{target:?} is not a postgres:// URL"));
    };
    let (url, schema) = split_schema(url);
    let Some(schema) = schema else {
        return bad("drop_schema needs a URL with ?schema=NAME".into());
    };
    if let Some(problem) = crate::schema_name_problem(&schema) {
        return bad(problem);
    }
    let io = |op: &'static str| {
        move |e: postgres::Error| Error::Io {
            op,
            path: PathBuf::from("postgres"),
            source: std::io::Error::other(e),
        }
    };
    let config: postgres::Config = url
        .parse()
        .map_err(|e| Error::InvalidConfig(format!("postgres connection string: {e}")))?;
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(io("connecting to"))?;
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .map_err(io("dropping a schema on"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_everything_else_a_directory() {
        assert_eq!(
            Target::parse("postgres://u@h/db"),
            Target::Postgres("postgres://u@h/db")
        );
        assert_eq!(
            Target::parse("PostgreSQL:///db?host=/tmp/s"),
            Target::Postgres("PostgreSQL:///db?host=/tmp/s")
        );
        assert_eq!(
            Target::parse("./postgres://x"),
            Target::File(Path::new("./postgres://x"))
        );
        assert_eq!(Target::parse("data"), Target::File(Path::new("data")));
        assert_eq!(Target::parse(""), Target::File(Path::new("")));
    }

    #[test]
    fn drop_schema_refuses_urls_without_a_valid_schema_before_connecting() {
        for bad in [
            "data",
            "postgres://h/db",
            "postgres://h/db?schema=",
            "postgres://h/db?schema=X;DROP",
        ] {
            assert!(
                matches!(drop_schema(bad), Err(Error::InvalidConfig(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_schema_parameter_is_runlogs_and_the_rest_goes_to_the_client() {
        assert_eq!(
            split_schema("postgres://h/db?schema=t_1&sslmode=disable"),
            (
                "postgres://h/db?sslmode=disable".to_string(),
                Some("t_1".to_string())
            )
        );
        assert_eq!(
            split_schema("postgresql:///db?host=/tmp/s&schema=x"),
            (
                "postgresql:///db?host=/tmp/s".to_string(),
                Some("x".to_string())
            )
        );
        assert_eq!(
            split_schema("postgres://h/db?schema=x"),
            ("postgres://h/db".to_string(), Some("x".to_string()))
        );
        assert_eq!(
            split_schema("postgres://h/db"),
            ("postgres://h/db".to_string(), None)
        );
    }
}
