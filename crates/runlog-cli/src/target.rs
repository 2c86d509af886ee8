//! A store named by one string (`--store`, `RUNLOG_STORE`, the storm's `--store`): a
//! `postgres://`/`postgresql://` URL names PostgreSQL, anything else a file store directory.
//! Every store the tool opens by name is opened here, through `runlog_pg::open_target` (the
//! one opener the Node binding uses too), so a `Config`'s limits reach both backends.
//!
//! Built without the `postgres` cargo feature, `runlog-pg` is not compiled in: a PostgreSQL
//! URL is refused with [`Error::InvalidConfig`] saying so, and file stores open as before.

use std::path::Path;
use std::sync::Arc;

use runlog::{Config, Error, Result, RunLog, Store};

/// How [`open`] opens a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// For writing: a file store created if missing and recovered, PostgreSQL migrated.
    Write,
    /// For reading only: a file store with no lock, no recovery and nothing written;
    /// PostgreSQL with no migration and every write refused by the server.
    ReadOnly,
}

/// A store [`open`] opened: every call goes through `log`; `file` is the same store when it
/// is a file store (for what only a file store has: its directory layout, repair).
#[derive(Clone)]
pub struct Opened {
    /// The store behind the backend-neutral contract.
    pub log: Arc<dyn RunLog>,
    /// The file store, `None` on PostgreSQL.
    pub file: Option<Store>,
}

impl Opened {
    /// A file store.
    pub fn file(store: Store) -> Opened {
        Opened {
            log: Arc::new(store.clone()),
            file: Some(store),
        }
    }
}

/// The PostgreSQL URL `target` is, or `None` for a file store directory (the rule of
/// `runlog_pg::Target::parse`: a `postgres://` or `postgresql://` prefix, any case; a path
/// that is not UTF-8 is always a directory).
pub fn postgres_url(target: &Path) -> Option<&str> {
    let text = target.to_str()?;
    #[cfg(feature = "postgres")]
    {
        match runlog_pg::Target::parse(text) {
            runlog_pg::Target::Postgres(url) => Some(url),
            runlog_pg::Target::File(_) => None,
        }
    }
    #[cfg(not(feature = "postgres"))]
    {
        // runlog-pg is not compiled in: its rule, so that a URL is refused, not taken for a
        // directory.
        let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
        (lower.starts_with("postgres://") || lower.starts_with("postgresql://")).then_some(text)
    }
}

/// The error of a PostgreSQL target in a build without the `postgres` feature (the URL is
/// not repeated: it may hold a password).
pub fn no_postgres() -> Error {
    Error::InvalidConfig(
        "a postgres:// store, but this runlog was built without PostgreSQL support \
         (the `postgres` cargo feature of runlog-cli)"
            .into(),
    )
}

/// Opens the store `target` names as `access` says, with `config` on either backend (on
/// PostgreSQL its payload and batch limits; `?schema=NAME` picks the schema).
///
/// # Errors
/// Those of `runlog_pg::open_target` (a file store's `Store::open` / `open_read_only`, a
/// PostgreSQL connection's); [`no_postgres`] for a PostgreSQL URL in a build without the
/// `postgres` feature.
pub fn open(target: &Path, config: Config, access: Access) -> Result<Opened> {
    #[cfg(feature = "postgres")]
    {
        let access = match access {
            Access::Write => runlog_pg::Access::Write,
            Access::ReadOnly => runlog_pg::Access::ReadOnly,
        };
        Ok(match runlog_pg::open_target(target, config, access)? {
            runlog_pg::Opened::File(store) => Opened::file(store),
            runlog_pg::Opened::Postgres(pg) => Opened {
                log: Arc::new(pg),
                file: None,
            },
        })
    }
    #[cfg(not(feature = "postgres"))]
    {
        if postgres_url(target).is_some() {
            return Err(no_postgres());
        }
        Ok(Opened::file(match access {
            Access::Write => Store::open(target, config)?,
            Access::ReadOnly => Store::open_read_only(target, config)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_any_case_are_postgres_and_everything_else_a_directory() {
        let url = |s: &'static str| postgres_url(Path::new(s));
        assert_eq!(url("postgres://u@h/db"), Some("postgres://u@h/db"));
        assert_eq!(url("PostgreSQL:///db"), Some("PostgreSQL:///db"));
        assert_eq!(url("./postgres://x"), None);
        assert_eq!(url("data"), None);
        assert_eq!(url(""), None);
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn without_the_postgres_feature_a_url_is_refused_naming_the_feature() {
        for url in ["postgres://u@h/db", "POSTGRESQL:///db?schema=s"] {
            match open(Path::new(url), Config::default(), Access::Write) {
                Err(Error::InvalidConfig(m)) => {
                    assert!(m.contains("built without PostgreSQL support"), "{m}");
                    assert!(m.contains("`postgres` cargo feature"), "{m}");
                    assert!(!m.contains("u@h"), "{m}");
                }
                other => panic!("{url}: {:?}", other.map(|_| ())),
            }
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let opened = open(&tmp.path().join("s"), Config::default(), Access::Write)
            .expect("a file store opens");
        assert!(opened.file.is_some());
    }
}
