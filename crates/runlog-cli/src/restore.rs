//! Putting an archived run back (`runlog restore`): every log of its archive
//! (`runlog::archive`, `format/SPEC.md` §11) copied into the store byte-exact through the
//! copy mechanism ([`crate::copy::copy_run`], reading the archive as a store through
//! [`ArchiveView`]), each verified, and only then the archive removed.
//!
//! Crash-safe at every point: the archive is removed (unlink, directory fsync) only after
//! every log is in the store whole; a restore interrupted before that left each log absent,
//! a prefix, or whole, and running it again extends each (`extended`, `unchanged`) and then
//! removes the archive. The auxiliary logs go first and the run's own log last, as `gc`
//! deletes them in the other order. Before anything is written every log is checked
//! against the store, so a conflict writes nothing; a log the store holds with more events
//! than its archive (one restored by an interrupted restore and written since) holds every
//! archived event and is done. Once every log is back the run is recorded as restored
//! (`runlog_world::record_restored`): its streams and attributes take writes again, and gc
//! keeps it until that record is older than its cut.

use std::path::Path;

use runlog::archive::{self, ArchiveView};
use runlog::io::Fs;
use runlog::{RunId, RunLog};

use crate::copy::{CopyError, Longer, RunCopy, check_copy, copy_run_to};
use crate::import::BatchLimits;

/// What [`restore_run`] did to one log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredLog {
    /// The log's id.
    pub log: RunId,
    /// What the copy did.
    pub copy: RunCopy,
}

/// Restores run `run` from its archive in `dir` into `dst`, then removes the archive.
/// Returns one row per log, the run's own last; `progress` sees each as it is restored.
///
/// # Errors
/// [`CopyError::Source`] when the archive is missing (`RunNotFound`) or damaged
/// (`Corrupt`, with its file and offset); [`CopyError::Conflict`] when `dst` holds one of
/// the logs with other content (the message names the log; nothing of it written; the
/// archive stays);
/// [`CopyError::Destination`] for the store's errors (the archive stays).
pub fn restore_run(
    fs: &dyn Fs,
    dir: &Path,
    run: &RunId,
    dst: &dyn RunLog,
    progress: &mut dyn FnMut(&RestoredLog),
) -> Result<Vec<RestoredLog>, CopyError> {
    let source = |error| CopyError::Source {
        error,
        rollback: None,
    };
    // Under the archive directory's lock, held until the archive is removed, so no gc
    // rewrites it meanwhile; a directory that does not exist is not created (the read
    // below is then `RunNotFound`).
    let _lock = match fs.is_dir(dir) {
        Ok(true) => Some(archive::lock_archive_dir(fs, dir).map_err(source)?),
        _ => None,
    };
    let read = archive::read_archive(fs, dir, run).map_err(source)?;
    let mut order: Vec<RunId> = read.logs.iter().map(|l| l.run.clone()).collect();
    // The archive holds the run's own log first: restore it last.
    order.rotate_left(1);
    let view = ArchiveView::new(read, archive::archive_path(dir, run));
    fn named(log: &RunId) -> impl Fn(CopyError) -> CopyError + '_ {
        move |e| match e {
            CopyError::Conflict(m) => CopyError::Conflict(format!("log {log}: {m}")),
            CopyError::Mismatch(m) => CopyError::Mismatch(format!("log {log}: {m}")),
            other => other,
        }
    }
    // Every log checked before any is written: a conflict in one leaves the store as it was.
    // A log the store holds longer than its archive (restored earlier, written since) holds
    // every archived event: it is done.
    for log in &order {
        check_copy(&view, dst, log, Longer::Holds).map_err(named(log))?;
    }
    let mut done = Vec::with_capacity(order.len());
    for log in order {
        let limits = BatchLimits::default();
        let copy =
            copy_run_to(&view, dst, &log, limits, true, Longer::Holds).map_err(named(&log))?;
        let restored = RestoredLog { log, copy };
        progress(&restored);
        done.push(restored);
    }
    let destination = |error| CopyError::Destination {
        error,
        rollback: None,
    };
    // The run takes logs again, and gc keeps it until this is older than its cut.
    runlog_world::record_restored(dst, run).map_err(destination)?;
    archive::remove_archive(fs, dir, run).map_err(destination)?;
    Ok(done)
}
