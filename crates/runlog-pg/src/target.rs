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

fn pg_options(url: &str, read_only: bool) -> (String, Options) {
    let (url, schema) = split_schema(url);
    (
        url,
        Options {
            schema,
            read_only,
            ..Options::default()
        },
    )
}

/// Opens the store `target` names for writing: the file store with `config` (creating it
/// when missing), or PostgreSQL (migrating the schema; `?schema=NAME` picks it).
///
/// # Errors
/// Those of [`Store::open`] and [`PgLog::connect_with`].
pub fn open_target(target: &str, config: Config) -> Result<Arc<dyn RunLog>> {
    Ok(match Target::parse(target) {
        Target::File(dir) => Arc::new(Store::open(dir, config)?),
        Target::Postgres(url) => {
            let (url, options) = pg_options(url, false);
            Arc::new(PgLog::connect_with(&url, options)?)
        }
    })
}

/// Opens the store `target` names for reading only: [`Store::open_read_only`] (no lock, no
/// recovery, nothing written) or [`PgLog::connect_read_only`] (no migration; the server
/// refuses writes).
///
/// # Errors
/// Those of [`Store::open_read_only`] and [`PgLog::connect_read_only`].
pub fn open_target_read_only(target: &str, config: Config) -> Result<Arc<dyn RunLog>> {
    Ok(match Target::parse(target) {
        Target::File(dir) => Arc::new(Store::open_read_only(dir, config)?),
        Target::Postgres(url) => {
            let (url, options) = pg_options(url, true);
            Arc::new(PgLog::connect_read_only(&url, options)?)
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
