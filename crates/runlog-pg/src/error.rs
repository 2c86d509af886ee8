//! PostgreSQL failures and missing runs as `runlog::Error`s, as every part of the store reports them.

use std::io;
use std::path::PathBuf;

use runlog::{Error, RunId};

/// A PostgreSQL failure as `Io` with path `postgres`. The server's own words (severity,
/// SQLSTATE, message: "ERROR 57014: canceling statement due to statement timeout") are in the
/// message: the client error alone says only "db error".
pub(crate) fn pg_err(op: &'static str, e: postgres::Error) -> Error {
    let source = match e.as_db_error() {
        Some(db) => io::Error::other(format!(
            "{} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        )),
        None => io::Error::other(e),
    };
    Error::Io {
        op,
        path: PathBuf::from("postgres"),
        source,
    }
}

pub(crate) fn not_found(run: &RunId) -> Error {
    Error::RunNotFound {
        run: run.to_string(),
    }
}
