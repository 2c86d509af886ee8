//! What every subcommand shares: the error type and its exit codes, opening the store, and
//! paging through runs and events.

use std::io;
use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use runlog::{Config, Error, Event, RunId, RunInfo, RunLog, Seq, Store};
use runlog_cli::import::{OrderScheme, RunStamp};

use crate::output::error_text;
pub use runlog_cli::target::postgres_url;
use runlog_cli::target::{self, Access, Opened};

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
    /// A store-wide command printed every run it could read and a row for each it could not;
    /// `first` is the error of the first run that failed, and sets the exit code.
    RunsFailed {
        /// Runs that failed.
        failed: usize,
        /// Runs the command went through.
        total: usize,
        /// The first failure.
        first: Error,
        /// What failed to be done to each (`read`, or `collected` for `gc`).
        what: &'static str,
    },
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
            CliError::RunsFailed { first, .. } => store_exit_code(first),
        }
    }

    /// The message for stderr; `None` for a closed output pipe.
    pub fn message(&self) -> Option<String> {
        match self {
            CliError::Store(e) => Some(error_text(e)),
            CliError::Input(m) => Some(m.clone()),
            CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => None,
            CliError::Output(e) => Some(format!("writing output: {e}")),
            CliError::RunsFailed {
                failed,
                total,
                first,
                what,
            } => Some(format!(
                "{failed} of {total} runs could not be {what} (each has a row above); first: {}",
                error_text(first)
            )),
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
        | Error::RunExists { .. }
        | Error::RunIdCaseConflict { .. }
        | Error::BackupRefused { .. } => 2,
        Error::Fenced { .. } | Error::DuplicateDecision { .. } => 3,
        Error::Busy { .. } => 4,
        e if e.is_environment() => EXIT_ENVIRONMENT,
        // Corrupt, UnsupportedVersion, NotAStore, and variants added later: the safe reading
        // of an unknown failure is that the store cannot be trusted.
        _ => 5,
    }
}

/// An open store: the file store or PostgreSQL, behind the backend-neutral [`RunLog`] (every
/// command but `repair` goes through it), and the file store itself when it is one.
pub struct Backend {
    log: Arc<dyn RunLog>,
    file: Option<Store>,
}

impl Deref for Backend {
    type Target = dyn RunLog;
    fn deref(&self) -> &(dyn RunLog + 'static) {
        &*self.log
    }
}

impl From<Opened> for Backend {
    fn from(opened: Opened) -> Backend {
        Backend {
            log: opened.log,
            file: opened.file,
        }
    }
}

impl Backend {
    /// A backend that is not a file store (an archive read as a store, `cmd_gc::reader`).
    pub fn from_log(log: Arc<dyn RunLog>) -> Backend {
        Backend { log, file: None }
    }

    /// A shared handle on the backend (for the World and its streams).
    pub fn log(&self) -> Arc<dyn RunLog> {
        Arc::clone(&self.log)
    }

    /// The file store, when the target is one (`None` on PostgreSQL).
    pub fn file_store(&self) -> Option<&Store> {
        self.file.as_ref()
    }

    /// Whether `run` exists. On the file store this looks at its directory only, so a run
    /// whose files are damaged exists (and its command reports the damage).
    pub fn run_exists(&self, run: &RunId) -> Result<bool, Error> {
        if let Some(store) = &self.file {
            return store.run_exists(run);
        }
        match self.log.last_seq(run) {
            Ok(_) => Ok(true),
            Err(Error::RunNotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// How long a writing command waits for a run lock another process holds (`--lock-timeout-ms`,
/// `RUNLOG_LOCK_TIMEOUT_MS`), set once by `main`; `Config::lock_timeout` (10 s) when unset.
static LOCK_TIMEOUT: OnceLock<Duration> = OnceLock::new();

/// Sets the lock wait of every store this process opens for writing (called once, by `main`,
/// before any command runs).
pub fn set_lock_timeout(timeout: Duration) {
    let _ = LOCK_TIMEOUT.set(timeout);
}

/// The configuration of a file store opened for writing: the defaults, with the lock wait of
/// [`set_lock_timeout`] (past it, an append is `Error::Busy`, exit 4).
fn writer_config() -> Config {
    let mut config = Config::default();
    if let Some(timeout) = LOCK_TIMEOUT.get() {
        config.lock_timeout = *timeout;
    }
    config
}

/// Opens (creating if missing) the store `target` names for a writing command: a file store
/// directory, or PostgreSQL for a `postgres://`/`postgresql://` URL (`?schema=NAME` picks the
/// schema, created with runlog's tables if missing), with [`writer_config`] on either
/// ([`target::open`]).
pub fn open_store(target: &Path) -> Result<Backend, CliError> {
    Ok(target::open(target, writer_config(), Access::Write)?.into())
}

/// Opens an existing store for a writing command that must not create it (`append` without
/// `--create`); a missing directory is bad input rather than a reason to create a store. On
/// PostgreSQL, a schema without runlog's tables is bad input too (nothing is created).
pub fn open_existing(target: &Path) -> Result<Backend, CliError> {
    match postgres_url(target) {
        None => require_dir(target)?,
        // Checks the schema without migrating it.
        Some(_) => drop(open_for_reading(target)?),
    }
    open_store(target)
}

/// Opens an existing store for a reading command. The file store with
/// [`Store::open_read_only`]: no lock taken, nothing created, written, truncated or recovered,
/// every file opened read-only (so another user's store or a read-only mount reads), and every
/// command sees the same committed view. PostgreSQL read-only ([`target::open`]): no
/// migration, and the server refuses every write of the connection. A missing directory, or a
/// schema without runlog's tables, is bad input.
pub fn open_for_reading(target: &Path) -> Result<Backend, CliError> {
    if postgres_url(target).is_none() {
        require_dir(target)?;
    }
    match target::open(target, Config::default(), Access::ReadOnly) {
        Ok(opened) => Ok(opened.into()),
        Err(Error::NotAStore { path, detail }) if postgres_url(target).is_some() => {
            Err(CliError::Input(format!(
                "no store at {} ({detail}; `runlog import` or `runlog append --create` creates one)",
                path.display()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

fn require_dir(dir: &Path) -> Result<(), CliError> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(CliError::Input(format!(
        "no store at {} (pass --store DIR or set RUNLOG_STORE; `runlog import` creates one)",
        dir.display()
    )))
}

/// The directory under the store root holding one directory per run (`format/SPEC.md` §1).
const RUNS_DIR: &str = "runs";

/// One run of a store-wide command: listed with its info, or named by the error that kept it
/// from being listed.
pub type Listed = Result<RunInfo, (RunId, Error)>;

/// Every run of the store, sorted by id. A run that cannot be listed (a damaged header, a
/// permission error) becomes an `Err` entry naming it, and the listing goes on past it, so one
/// damaged run never hides the others. Fails only when the failing run cannot be told from
/// the error, or for a store-level error (the runs directory cannot be listed).
pub fn all_runs(store: &Backend) -> Result<Vec<Listed>, CliError> {
    let mut runs = Vec::new();
    let mut after: Option<RunId> = None;
    // A failed page returns none of its healthy runs: retry it one run at a time, where a
    // failure belongs to the next run after the cursor.
    let mut page_len = PAGE_LEN;
    loop {
        match store.list_runs(after.as_ref(), page_len) {
            Ok(page) => {
                let mut listed: Vec<Listed> = page.runs.into_iter().map(Ok).collect();
                // A damaged run comes back beside the healthy ones: its typed error is the
                // one its info gives (`Corrupt` naming the damage, never the info of the
                // events before it: rule 5). `Ok` only when it was repaired in between.
                for d in page.damaged {
                    listed.push(match store.run_info(&d.run) {
                        Ok(info) => Ok(info),
                        Err(e) => Err((d.run, e)),
                    });
                }
                listed.sort_by(|a, b| listed_id(a).cmp(listed_id(b)));
                runs.extend(listed);
                match page.next {
                    Some(next) if page.has_more => after = Some(next),
                    _ => return Ok(runs),
                }
            }
            Err(_) if page_len > 1 => page_len = 1,
            Err(e) => {
                let run = failed_run(store, &e).filter(|r| after.as_ref() < Some(r));
                let Some(run) = run else {
                    return Err(e.into());
                };
                after = Some(run.clone());
                runs.push(Err((run, e)));
            }
        }
    }
}

fn listed_id(l: &Listed) -> &RunId {
    match l {
        Ok(info) => &info.run,
        Err((run, _)) => run,
    }
}

/// The run an error of `list_runs` is about: named in the error, or the run directory its
/// path lies in.
fn failed_run(store: &Backend, e: &Error) -> Option<RunId> {
    let path = match e {
        Error::Corrupt { run, .. } | Error::Busy { run, .. } | Error::Poisoned { run, .. } => {
            return RunId::new(run.as_str()).ok();
        }
        Error::Io { path, .. }
        | Error::DiskFull { path, .. }
        | Error::UnsupportedVersion { path, .. }
        | Error::NotAStore { path, .. } => path,
        _ => return None,
    };
    let below = path
        .strip_prefix(store.file_store()?.path().join(RUNS_DIR))
        .ok()?;
    let dir = below.components().next()?.as_os_str().to_str()?;
    RunId::new(dir).ok()
}

/// A run selected by a store-wide command: its id, or the id and why it could not be listed.
pub type Selected = Result<RunId, (RunId, Error)>;

/// `run` alone (checked to exist), or every run of the store (see [`all_runs`]). A run listed
/// as damaged (its stored bytes, not the environment) is selected as a run named alone is:
/// the command examines it and reports what it finds (`verify` its problems, `export` the
/// events before the damage and then the error); one that cannot be read for an environment
/// error (permission denied) stays an `Err` entry.
pub fn selected_runs(store: &Backend, run: Option<RunId>) -> Result<Vec<Selected>, CliError> {
    match run {
        Some(run) => match store.run_exists(&run) {
            Ok(true) => Ok(vec![Ok(run)]),
            Ok(false) => Err(Error::RunNotFound {
                run: run.to_string(),
            }
            .into()),
            Err(e) => Ok(vec![Err((run, e))]),
        },
        None => Ok(all_runs(store)?
            .into_iter()
            .map(|listed| match listed {
                Ok(info) => Ok(info.run),
                Err((run, e)) if !e.is_environment() => Ok(run),
                Err(failed) => Err(failed),
            })
            .collect()),
    }
}

/// Whether `run` is one of the World's own logs rather than a run's event log: a stream's
/// chunk log, a run's stream index, a 4.x stream owner index, or the hook token claims
/// (`runlog_world::log_kind`, the one rule). `audit` and `export` without RUN skip them (they
/// hold no workflow events); `runs` counts them apart (`--all` lists them with their kind);
/// `verify`, the storage check, checks them like any run.
pub fn is_world_internal(run: &RunId) -> bool {
    runlog_world::log_kind(run.as_str()).is_internal()
}

/// [`selected_runs`] for a workflow-level command: without RUN, the World's own logs
/// ([`is_world_internal`]) are left out.
pub fn selected_workflow_runs(
    store: &Backend,
    run: Option<RunId>,
) -> Result<Vec<Selected>, CliError> {
    let explicit = run.is_some();
    let mut runs = selected_runs(store, run)?;
    if !explicit {
        runs.retain(|s| {
            let id = match s {
                Ok(id) => id,
                Err((id, _)) => id,
            };
            !is_world_internal(id)
        });
    }
    Ok(runs)
}

/// Splits the outcome of one run's work in a store-wide command: a store error is that run's
/// failure (`Ok(Err)`: print its row and go on); anything else, such as a closed output pipe,
/// ends the command.
pub fn per_run<T>(result: Result<T, CliError>) -> Result<Result<T, Error>, CliError> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(CliError::Store(e)) => Ok(Err(e)),
        Err(other) => Err(other),
    }
}

/// The failed runs of a store-wide command, counted as its rows are printed.
#[derive(Debug, Default)]
pub struct RunFailures {
    failed: usize,
    first: Option<Error>,
    /// What failed to be done to a run, for the message (`read` when `None`).
    what: Option<&'static str>,
}

impl RunFailures {
    /// Failures of a command that does `what` to each run (`collected`), for the message.
    pub fn of(what: &'static str) -> RunFailures {
        RunFailures {
            what: Some(what),
            ..RunFailures::default()
        }
    }

    /// Counts one failed run.
    pub fn record(&mut self, e: Error) {
        self.failed += 1;
        self.first.get_or_insert(e);
    }

    /// Whether any run failed so far.
    pub fn any(&self) -> bool {
        self.first.is_some()
    }

    /// The command's result after all `total` runs: `Ok(found_problems)` when every run was
    /// read, else [`CliError::RunsFailed`] (its exit code outranks "found problems").
    pub fn finish(self, total: usize, found_problems: bool) -> Result<bool, CliError> {
        match self.first {
            None => Ok(found_problems),
            Some(first) => Err(CliError::RunsFailed {
                failed: self.failed,
                total,
                first,
                what: self.what.unwrap_or("read"),
            }),
        }
    }
}

/// Calls `f` on each event of `run` above `after`, at most `limit` of them; returns the seq
/// of the last event visited (or `after`).
pub fn for_each_event(
    store: &dyn RunLog,
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
pub fn read_all(store: &dyn RunLog, run: &RunId) -> Result<Vec<Event>, CliError> {
    let mut events = Vec::new();
    for_each_event(store, run, 0, None, |e| {
        events.push(e.clone());
        Ok(())
    })?;
    Ok(events)
}

/// The import stamp of `run`, if it was imported from a world-local directory.
pub fn stamp_of(store: &dyn RunLog, run: &RunId) -> Result<Option<RunStamp>, CliError> {
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

    #[test]
    fn a_run_id_that_differs_only_in_case_from_an_existing_run_is_bad_input() {
        let e = Error::RunIdCaseConflict {
            requested: "run1".into(),
            existing: "Run1".into(),
        };
        assert_eq!(store_exit_code(&e), 2);
        let message = CliError::Store(e).message().unwrap_or_default();
        assert!(
            message.contains("run1") && message.contains("Run1"),
            "{message}"
        );
    }
}
