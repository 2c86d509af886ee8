//! What every subcommand shares: the error type and its exit codes, opening the store, and
//! paging through runs and events.

use std::io;
use std::path::Path;

use runlog::{Config, Error, Event, RunId, RunInfo, Seq, Store};
use runlog_cli::import::{OrderScheme, RunStamp};

/// Events or runs fetched per store call while paging.
pub const PAGE_LEN: usize = 1024;

/// Why a subcommand stopped. Each maps to one exit code (see `EXIT_CODES` in main.rs).
#[derive(Debug)]
pub enum CliError {
    /// The store refused or failed.
    Store(Error),
    /// Bad input that the store never saw (missing store directory, unreadable file).
    Input(String),
    /// Writing to stdout failed (a closed pipe ends the command quietly).
    Output(io::Error),
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError::Store(e)
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> CliError {
        CliError::Output(e)
    }
}

impl CliError {
    /// The process exit code; the one place runlog errors map to exit codes.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Store(e) => store_exit_code(e),
            CliError::Input(_) => 2,
            CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
            CliError::Output(_) => 2,
        }
    }

    /// The message for stderr; `None` for a closed output pipe.
    pub fn message(&self) -> Option<String> {
        match self {
            CliError::Store(e) => Some(e.to_string()),
            CliError::Input(m) => Some(m.clone()),
            CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => None,
            CliError::Output(e) => Some(format!("writing output: {e}")),
        }
    }
}

/// Exit code of an environment error: the operating system refused or failed (permission,
/// read-only or full file system, I/O error); the stored bytes are not known to be bad.
pub const EXIT_ENVIRONMENT: u8 = 6;

/// 2 bad input · 3 fenced append rejected · 4 busy · 5 corrupt or foreign store ·
/// 6 environment (see [`Error::is_environment`]).
pub fn store_exit_code(e: &Error) -> u8 {
    match e {
        Error::InvalidRunId { .. }
        | Error::InvalidEvent { .. }
        | Error::InvalidConfig(_)
        | Error::RunNotFound { .. }
        | Error::RunExists { .. } => 2,
        Error::Fenced { .. } | Error::DuplicateDecision { .. } => 3,
        Error::Busy { .. } => 4,
        e if e.is_environment() => EXIT_ENVIRONMENT,
        // Corrupt, UnsupportedVersion, NotAStore, and variants added later: the safe reading
        // of an unknown failure is that the store cannot be trusted.
        _ => 5,
    }
}

/// Opens (creating if missing) the store for a writing command.
pub fn open_store(dir: &Path) -> Result<Store, CliError> {
    Ok(Store::open(dir, Config::default())?)
}

/// Opens an existing store for a reading command; a missing directory is bad input rather
/// than a reason to create an empty store.
pub fn open_existing(dir: &Path) -> Result<Store, CliError> {
    if !dir.is_dir() {
        return Err(CliError::Input(format!(
            "no store at {} (pass --store DIR or set RUNLOG_STORE; `runlog import` creates one)",
            dir.display()
        )));
    }
    open_store(dir)
}

/// Every run of the store, sorted by id.
pub fn all_runs(store: &Store) -> Result<Vec<RunInfo>, CliError> {
    let mut runs = Vec::new();
    let mut after: Option<RunId> = None;
    loop {
        let page = store.list_runs(after.as_ref(), PAGE_LEN)?;
        runs.extend(page.runs);
        match page.next {
            Some(next) if page.has_more => after = Some(next),
            _ => return Ok(runs),
        }
    }
}

/// `run` alone (checked to exist), or every run of the store.
pub fn selected_runs(store: &Store, run: Option<RunId>) -> Result<Vec<RunId>, CliError> {
    match run {
        Some(run) if store.run_exists(&run)? => Ok(vec![run]),
        Some(run) => Err(Error::RunNotFound {
            run: run.to_string(),
        }
        .into()),
        None => Ok(all_runs(store)?.into_iter().map(|i| i.run).collect()),
    }
}

/// Calls `f` on each event of `run` above `after`, at most `limit` of them; returns the seq
/// of the last event visited (or `after`).
pub fn for_each_event(
    store: &Store,
    run: &RunId,
    after: Seq,
    limit: Option<usize>,
    mut f: impl FnMut(&Event) -> Result<(), CliError>,
) -> Result<Seq, CliError> {
    let mut cursor = after;
    let mut left = limit.unwrap_or(usize::MAX);
    while left > 0 {
        let page = store.read(run, cursor, left.min(PAGE_LEN))?;
        for event in &page.events {
            f(event)?;
        }
        left = left.saturating_sub(page.events.len());
        cursor = page.next;
        if !page.has_more || page.events.is_empty() {
            break;
        }
    }
    Ok(cursor)
}

/// All events of `run`, in seq order.
pub fn read_all(store: &Store, run: &RunId) -> Result<Vec<Event>, CliError> {
    let mut events = Vec::new();
    for_each_event(store, run, 0, None, |e| {
        events.push(e.clone());
        Ok(())
    })?;
    Ok(events)
}

/// The import stamp of `run`, if it was imported from a world-local directory.
pub fn stamp_of(store: &Store, run: &RunId) -> Result<Option<RunStamp>, CliError> {
    Ok(RunStamp::from_bytes(&store.run_meta(run)?))
}

/// The id scheme to render `run`'s event ids with.
pub fn order_of(stamp: Option<&RunStamp>) -> Option<OrderScheme> {
    stamp.map(|s| s.order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_errors_exit_6_and_corruption_exits_5() {
        let path = Path::new("/store/runs/r/lock");
        for errno in [
            libc::EACCES,
            libc::EPERM,
            libc::EROFS,
            libc::EIO,
            libc::ENOSPC,
            libc::EDQUOT,
        ] {
            let e = Error::io("opening", path, io::Error::from_raw_os_error(errno));
            assert_eq!(store_exit_code(&e), EXIT_ENVIRONMENT, "errno {errno}: {e}");
            let message = CliError::Store(e).message().unwrap_or_default();
            assert!(message.contains("/store/runs/r/lock"), "{message}");
        }
        let poisoned = Error::Poisoned {
            run: "r".into(),
            cause: "fdatasync: EIO".into(),
        };
        assert_eq!(store_exit_code(&poisoned), EXIT_ENVIRONMENT);
        let corrupt = Error::corrupt("r", "seg-00000001.log", 4096, "batch checksum mismatch");
        let foreign = Error::NotAStore {
            path: path.into(),
            detail: "no FORMAT".into(),
        };
        let newer = Error::UnsupportedVersion {
            path: path.into(),
            found: 9,
            supported: 1,
        };
        for e in [corrupt, foreign, newer] {
            assert_eq!(store_exit_code(&e), 5, "{e}");
        }
    }
}
