//! Files generated from Rust and checked in (the error table's JavaScript constants,
//! TypeScript union and `docs/ERRORS.md`; the event page's constants and fixture): each
//! source has a test that compares every file with what the source gives and fails naming
//! the stale ones; with `RUNLOG_WRITE_GENERATED=1` the same test rewrites them instead.

use std::path::PathBuf;

/// The environment variable that turns the checks into rewrites (when it is `1`).
const WRITE_VAR: &str = "RUNLOG_WRITE_GENERATED";

/// The note a generated file starts with: where it comes from, which file of this crate
/// writes it and the command that rewrites it (`test`: the cargo test filter).
pub(crate) fn header(source: &str, generator: &str, test: &str) -> String {
    format!(
        "Generated from {source} by {generator}; do not edit. Rewrite with \
         {WRITE_VAR}=1 cargo test -p runlog-node {test}"
    )
}

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Checks that each of `files` (a path from the repository's root and the text it must
/// hold) holds exactly its text, or writes them all when `RUNLOG_WRITE_GENERATED=1`.
///
/// # Panics
/// When a file differs or is missing (the message names them, `source`, the origin, and
/// `test`, the filter that rewrites them), or a rewrite fails.
pub(crate) fn check_files(files: &[(&str, String)], source: &str, test: &str) {
    let write = std::env::var_os(WRITE_VAR).is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, want) in files {
        let full = repo().join(path);
        if write {
            if let Err(e) = std::fs::write(&full, want) {
                panic!("cannot write {}: {e}", full.display());
            }
        } else if std::fs::read_to_string(&full).ok().as_deref() != Some(want.as_str()) {
            stale.push(*path);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from {source}; rewrite them with {WRITE_VAR}=1 cargo test -p \
         runlog-node {test}"
    );
}

#[test]
fn the_check_names_a_stale_file_and_passes_on_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    std::fs::write(&path, "old\n").unwrap();
    // An absolute path replaces the root in `join`.
    let name = path.to_str().unwrap();
    if std::env::var_os(WRITE_VAR).is_some() {
        return; // the check is a write under RUNLOG_WRITE_GENERATED
    }
    let stale = std::panic::catch_unwind(|| check_files(&[(name, "new\n".into())], "src", "t"));
    let message = stale.unwrap_err();
    let message = message.downcast_ref::<String>().unwrap();
    assert!(
        message.starts_with(&format!("[{name:?}] differ from src; rewrite them with")),
        "{message}"
    );
    check_files(&[(name, "old\n".into())], "src", "t");
    assert_eq!(
        header("a", "b", "c"),
        "Generated from a by b; do not edit. Rewrite with RUNLOG_WRITE_GENERATED=1 cargo \
         test -p runlog-node c"
    );
}
