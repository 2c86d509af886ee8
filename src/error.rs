//! The one error type of the crate.
//!
//! Every fallible public function returns [`Result<T>`]. Variants carry the context a user
//! needs to act (run, segment file, byte offset, expected vs actual seq); none is a bare
//! string except where the detail is free-form diagnostic text.

use std::io;
use std::path::PathBuf;

use crate::event::Seq;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in runlog.
///
/// `#[non_exhaustive]`: match with a wildcard arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A run id failed validation (1–128 bytes of `[A-Za-z0-9_-]`, not starting with `-`).
    /// Raised before any file is touched.
    #[error("invalid run id {id:?}: {reason}")]
    InvalidRunId {
        /// The rejected id, lossily printable.
        id: String,
        /// Which rule it broke.
        reason: &'static str,
    },

    /// An event field is out of bounds (kind length, correlation id, key, payload size,
    /// batch size, metadata size). Nothing was written.
    #[error("invalid event: {field}: {reason}")]
    InvalidEvent {
        /// Name of the offending field (`kind`, `payload`, `key`, ...).
        field: &'static str,
        /// What was wrong, with the limit that applies.
        reason: String,
    },

    /// A configuration value is unusable.
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// The run does not exist (or was deleted).
    #[error("run {run} does not exist")]
    RunNotFound {
        /// The run.
        run: String,
    },

    /// `create_run` on a run that already exists.
    #[error("run {run} already exists")]
    RunExists {
        /// The run.
        run: String,
    },

    /// The run id differs only in case from the id of an existing run, and the store's file
    /// system does not distinguish case (APFS and NTFS by default), so both would share one
    /// directory (`format/SPEC.md` §1). Raised by `create_run` instead of creating, and by
    /// every read, write, wait, verify or delete through `requested` (its directory's segment
    /// header names `existing`), before anything of `existing` is changed. Bad input, not
    /// corruption: use the existing id, or a store on a case-sensitive file system.
    #[error(
        "run id {requested} differs only in case from existing run {existing}; this file system does not distinguish case, so they would share one directory"
    )]
    RunIdCaseConflict {
        /// The run id the caller passed.
        requested: String,
        /// The id of the run that owns the directory (as stored in its segment header).
        existing: String,
    },

    /// A fenced append (decision) was rejected because the run's last seq was not
    /// `expected`. Nothing was written (rule 2 of INVARIANTS.md).
    #[error("fenced append to run {run} rejected: expected last seq {expected}, actual {actual}")]
    Fenced {
        /// The run.
        run: String,
        /// The `expected_seq` the caller passed.
        expected: Seq,
        /// The run's last committed seq at the moment of the check.
        actual: Seq,
    },

    /// A decision batch carried an idempotency key or event id that already exists in the
    /// run. Decisions are not deduplicated; nothing was written.
    #[error("decision for run {run} repeats key {key:?} already stored at seq {seq}")]
    DuplicateDecision {
        /// The run.
        run: String,
        /// The repeated key (or event id).
        key: String,
        /// Where the original lives.
        seq: Seq,
    },

    /// The cross-process lock of a run was not acquired within the configured timeout.
    /// The holder is never robbed (rule 9 of INVARIANTS.md).
    #[error("run {run} is busy: lock held by {holder} (waited {waited_ms} ms)")]
    Busy {
        /// The run.
        run: String,
        /// The holder as recorded in the lock file (`pid 1234`), for the message only.
        holder: String,
        /// How long we waited, in milliseconds.
        waited_ms: u64,
    },

    /// Stored bytes failed validation: a checksum, a magic number, density, the segment chain,
    /// or a length that points outside the file. Never silently truncated (rule 5).
    #[error("corrupt run {run}: segment {segment}, offset {offset}: {detail}")]
    Corrupt {
        /// The run.
        run: String,
        /// Segment file name (`seg-00000001.log`) or other file name.
        segment: String,
        /// Byte offset in that file where validation failed.
        offset: u64,
        /// What failed.
        detail: String,
    },

    /// The store or a segment was written by a format version this build does not know.
    #[error("unsupported format version {found} in {path} (this build reads version {supported})")]
    UnsupportedVersion {
        /// The file carrying the version.
        path: PathBuf,
        /// Version found on disk.
        found: u32,
        /// Version this build supports.
        supported: u32,
    },

    /// The directory is not a runlog store (missing or foreign `FORMAT` file).
    #[error("{path} is not a runlog store: {detail}")]
    NotAStore {
        /// The directory.
        path: PathBuf,
        /// Why.
        detail: String,
    },

    /// `Store::backup` refused its destination before writing anything: a non-empty
    /// directory that is no backup, a directory inside the source store, or one held by
    /// another backup (format/SPEC.md §12).
    #[error("backup refused: {path}: {detail}")]
    BackupRefused {
        /// The destination.
        path: PathBuf,
        /// Why.
        detail: String,
    },

    /// The file system is full (ENOSPC or EDQUOT). The append wrote nothing that a reader can
    /// see; appends succeed again once space is freed.
    #[error("disk full while {op} {path}")]
    DiskFull {
        /// What we were doing (`writing`, `creating`, ...).
        op: &'static str,
        /// The file.
        path: PathBuf,
    },

    /// This process could not bring the run back to a known state after an I/O failure: a
    /// failed write or fdatasync whose cut-back failed too (the `cause` names both and the
    /// `cut-pending` marker that makes the next writer finish the cut, format/SPEC.md §5), a
    /// counter write that failed after a durable commit, or an I/O failure in recovery. The run
    /// refuses writes in this process until the store is reopened. A failed write or fdatasync
    /// whose cut-back succeeds is not this: its appends get the I/O error and the run stays
    /// writable.
    #[error("run {run} refuses writes after an earlier I/O failure; reopen the store: {cause}")]
    Poisoned {
        /// The run.
        run: String,
        /// The original failure.
        cause: String,
    },

    /// A group commit panicked (a bug, or a panicking file-system layer), on either backend
    /// (`crate::group`). Every append of that group gets this error; the run refuses writes
    /// in this process until the store is reopened (as after [`Error::Poisoned`]); nothing is
    /// acknowledged that was not durable.
    #[error(
        "run {run}: a group commit panicked ({detail}); the run refuses writes until the store is reopened"
    )]
    Panicked {
        /// The run.
        run: String,
        /// The panic message.
        detail: String,
    },

    /// A write (create, append, delete, repair) on a store opened with [`crate::Store::open_read_only`].
    /// Refused before anything is touched: nothing was written, no lock was taken.
    #[error(
        "cannot {op}: store {path} is open read-only (Store::open_read_only); nothing was written"
    )]
    ReadOnly {
        /// The refused operation (`append to run wrun_1`, `create run wrun_1`, ...).
        op: String,
        /// The store directory.
        path: PathBuf,
    },

    /// Any other I/O error, with what we were doing and on which path.
    #[error("I/O error while {op} {path}: {source}")]
    Io {
        /// What we were doing.
        op: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// Wraps an `io::Error` with context, mapping ENOSPC/EDQUOT to [`Error::DiskFull`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::DiskFull { op, path },
            _ if source.kind() == io::ErrorKind::StorageFull => Error::DiskFull { op, path },
            _ => Error::Io { op, path, source },
        }
    }

    /// Whether the operating system refused or failed an operation (permission denied, a
    /// read-only or full file system, an I/O error, an earlier failed fsync), as opposed to
    /// stored bytes that failed validation ([`Error::Corrupt`], [`Error::UnsupportedVersion`],
    /// [`Error::NotAStore`]). An environment error says nothing about the stored data; the
    /// same call may succeed once the environment is fixed.
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            Error::Io { .. } | Error::DiskFull { .. } | Error::Poisoned { .. }
        )
    }

    /// Shorthand for [`Error::RunIdCaseConflict`]: `requested` was asked for, `existing` is
    /// the id stored in the header of the run directory it led to.
    pub(crate) fn case_conflict(requested: &str, existing: &str) -> Error {
        Error::RunIdCaseConflict {
            requested: requested.to_string(),
            existing: existing.to_string(),
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(
        run: &str,
        segment: impl Into<String>,
        offset: u64,
        detail: impl Into<String>,
    ) -> Error {
        Error::Corrupt {
            run: run.to_string(),
            segment: segment.into(),
            offset,
            detail: detail.into(),
        }
    }
}

/// `text` (a message about `e`) followed by each cause in `e`'s source chain that the text
/// does not already say. A PostgreSQL client error's `Display` says only "db error" while
/// the server's own reason is further down the chain; every front end (the CLI, the Node
/// binding) shows errors through this, so the reason is never lost.
pub fn with_causes(mut text: String, e: &(dyn std::error::Error + 'static)) -> String {
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

impl Error {
    /// This error's message followed by the causes it leaves out ([`with_causes`]).
    pub fn message_with_causes(&self) -> String {
        with_causes(self.to_string(), self)
    }

    /// A copy of this error for fan-out to every request of a failed group commit (the
    /// store's, and the World's in `runlog-world`); `io::Error` is not `Clone`, so its kind
    /// and message are kept.
    pub fn replicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::InvalidRunId { id, reason } => Error::InvalidRunId {
                id: id.clone(),
                reason,
            },
            Error::InvalidEvent { field, reason } => Error::InvalidEvent {
                field,
                reason: reason.clone(),
            },
            Error::InvalidConfig(s) => Error::InvalidConfig(s.clone()),
            Error::RunNotFound { run } => Error::RunNotFound { run: run.clone() },
            Error::RunExists { run } => Error::RunExists { run: run.clone() },
            Error::RunIdCaseConflict {
                requested,
                existing,
            } => Error::RunIdCaseConflict {
                requested: requested.clone(),
                existing: existing.clone(),
            },
            Error::Fenced {
                run,
                expected,
                actual,
            } => Error::Fenced {
                run: run.clone(),
                expected: *expected,
                actual: *actual,
            },
            Error::DuplicateDecision { run, key, seq } => Error::DuplicateDecision {
                run: run.clone(),
                key: key.clone(),
                seq: *seq,
            },
            Error::Busy {
                run,
                holder,
                waited_ms,
            } => Error::Busy {
                run: run.clone(),
                holder: holder.clone(),
                waited_ms: *waited_ms,
            },
            Error::Corrupt {
                run,
                segment,
                offset,
                detail,
            } => Error::corrupt(run, segment.clone(), *offset, detail.clone()),
            Error::UnsupportedVersion {
                path,
                found,
                supported,
            } => Error::UnsupportedVersion {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            Error::BackupRefused { path, detail } => Error::BackupRefused {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::NotAStore { path, detail } => Error::NotAStore {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::DiskFull { op, path } => Error::DiskFull {
                op,
                path: path.clone(),
            },
            Error::Poisoned { run, cause } => Error::Poisoned {
                run: run.clone(),
                cause: cause.clone(),
            },
            Error::Panicked { run, detail } => Error::Panicked {
                run: run.clone(),
                detail: detail.clone(),
            },
            Error::ReadOnly { op, path } => Error::ReadOnly {
                op: op.clone(),
                path: path.clone(),
            },
        }
    }
}
