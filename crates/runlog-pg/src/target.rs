//! A store named by one string, as the CLI's `--store` and the Node World's data option take
//! it: a `postgres://` or `postgresql://` URL names a PostgreSQL store, anything else the
//! directory of a file store.

use std::path::Path;
use std::sync::Arc;

use runlog::{Config, Result, RunLog, Store};

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

/// Opens the store `target` names for writing: the file store with `config` (creating it
/// when missing), or PostgreSQL with default [`Options`] (migrating the schema).
///
/// # Errors
/// Those of [`Store::open`] and [`PgLog::connect_with`].
pub fn open_target(target: &str, config: Config) -> Result<Arc<dyn RunLog>> {
    Ok(match Target::parse(target) {
        Target::File(dir) => Arc::new(Store::open(dir, config)?),
        Target::Postgres(url) => Arc::new(PgLog::connect_with(url, Options::default())?),
    })
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
}
