//! Archive files on a file system ([`Fs`]): written whole under a temporary name, synced,
//! renamed into place, the directory synced, then read back and compared before anyone may
//! delete what it holds (`format/SPEC.md` §11).

use std::path::{Path, PathBuf};

use crate::archive::codec::{self, Archive, ArchivedLog};
use crate::backend::RunLog;
use crate::error::{Error, Result};
use crate::event::RunId;
use crate::io::{Fs, OpenMode};

/// The file name extension of an archive: `<run id>.rla`.
pub const ARCHIVE_EXT: &str = ".rla";
/// Events read per call while gathering a log.
const READ_PAGE_LEN: usize = 1024;

/// The path of run `run`'s archive in `dir`.
pub fn archive_path(dir: &Path, run: &RunId) -> PathBuf {
    dir.join(format!("{}{ARCHIVE_EXT}", run.as_str()))
}

/// Every log `log` holds: its metadata and all its events, read through the store's read
/// API (every checksum and the density checked by the store).
///
/// # Errors
/// The store's read errors (`RunNotFound`, `Corrupt`, …).
pub fn gather_log(log: &dyn RunLog, run: &RunId) -> Result<ArchivedLog> {
    let meta = log.run_meta(run)?;
    let mut events = Vec::new();
    loop {
        let page = log.read(run, events.len() as u64, READ_PAGE_LEN)?;
        let more = page.has_more && !page.events.is_empty();
        events.extend(page.events);
        if !more {
            break;
        }
    }
    Ok(ArchivedLog {
        run: run.clone(),
        meta,
        events,
    })
}

/// Writes `archive` as run `run`'s archive file in `dir` (created if missing), replacing
/// any earlier one atomically: temp file, fdatasync, rename, directory fsync, then a full
/// read-back decode compared with `archive`. Returns the file's path and length.
///
/// # Errors
/// `Io`/`DiskFull` with the path; `Corrupt` when the read-back differs (the file is left
/// for inspection, and nothing may be deleted on its strength).
pub fn write_archive(
    fs: &dyn Fs,
    dir: &Path,
    run: &RunId,
    archive: &Archive,
) -> Result<(PathBuf, u64)> {
    ensure_dir(fs, dir)?;
    let bytes = codec::encode(archive)?;
    let tmp = dir.join(format!(".tmp-{}-{}", run.as_str(), ulid::Ulid::generate()));
    let file = fs
        .open(&tmp, OpenMode::CreateNew)
        .map_err(|e| Error::io("creating", &tmp, e))?;
    let written = file
        .write_all_at(&bytes, 0)
        .and_then(|()| file.sync_data())
        .map_err(|e| Error::io("writing", &tmp, e));
    drop(file);
    if let Err(e) = written {
        let _ = fs.remove_file(&tmp);
        return Err(e);
    }
    let path = archive_path(dir, run);
    fs.rename(&tmp, &path)
        .map_err(|e| Error::io("renaming", &path, e))?;
    fs.sync_dir(dir)
        .map_err(|e| Error::io("syncing directory", dir, e))?;
    let back = read_archive(fs, dir, run)?;
    if &back != archive {
        return Err(Error::corrupt(
            run.as_str(),
            file_name(&path),
            0,
            "the archive read back differs from what was written",
        ));
    }
    Ok((path, bytes.len() as u64))
}

/// The name of the lock file of an archive directory ([`lock_archive_dir`]).
pub const GC_LOCK_FILE: &str = ".gc.lock";

/// The exclusive lock of an archive directory, held while a gc or a restore writes or
/// deletes on the strength of its archives; released on drop (and by the kernel when the
/// holder dies). A run lock's mechanism (`crate::lock`) on another file.
#[derive(Debug)]
pub struct ArchiveDirLock {
    _guard: crate::lock::LockGuard,
}

/// Takes the exclusive lock of archive directory `dir` (created if missing): two
/// collectors of one store must not gc the same run at once, or one may read a run's
/// logs while the other deletes them and write an archive without them over the other's.
///
/// # Errors
/// [`Error::Busy`] at once when another gc or restore holds it (its pid in the message);
/// `Io` with the path.
pub fn lock_archive_dir(fs: &dyn Fs, dir: &Path) -> Result<ArchiveDirLock> {
    ensure_dir(fs, dir)?;
    let what = "another gc or restore of this archive directory";
    let guard = crate::lock::lock_file_now(fs, &dir.join(GC_LOCK_FILE), what)?;
    Ok(ArchiveDirLock { _guard: guard })
}

/// Creates `dir` if missing and makes its entry durable: the parent is synced also when
/// `dir` already exists, because whoever created it may have failed to sync it (a failed
/// `fsync`, a process killed in between). An archive in a directory a crash can take away
/// is no archive, and its logs are deleted on its strength.
fn ensure_dir(fs: &dyn Fs, dir: &Path) -> Result<()> {
    match fs.create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io("creating", dir, e)),
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    fs.sync_dir(parent)
        .map_err(|e| Error::io("syncing directory", parent, e))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Reads and validates run `run`'s archive in `dir` ([`codec::decode`]).
///
/// # Errors
/// `RunNotFound` when `dir` holds no archive of `run`; `Io` with the path; `Corrupt` with
/// the file name and byte offset.
pub fn read_archive(fs: &dyn Fs, dir: &Path, run: &RunId) -> Result<Archive> {
    let path = archive_path(dir, run);
    let file = match fs.open(&path, OpenMode::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::RunNotFound {
                run: run.to_string(),
            });
        }
        Err(e) => return Err(Error::io("opening", &path, e)),
    };
    let len = file.len().map_err(|e| Error::io("reading", &path, e))?;
    let len = usize::try_from(len)
        .map_err(|_| Error::corrupt(run.as_str(), file_name(&path), 0, "too large"))?;
    let mut bytes = vec![0u8; len];
    crate::io::read_exact_at(file.as_ref(), &mut bytes, 0)
        .map_err(|e| Error::io("reading", &path, e))?;
    let archive = codec::decode(&bytes, &file_name(&path), run.as_str())?;
    if archive.logs.first().map(|l| &l.run) != Some(run) {
        return Err(Error::corrupt(
            run.as_str(),
            file_name(&path),
            codec::HEADER_LEN as u64,
            "the archive's first log is not the run it is named after",
        ));
    }
    Ok(archive)
}

/// Removes run `run`'s archive from `dir` and syncs the directory (the run's restore is
/// then durable as done).
///
/// # Errors
/// `Io` with the path (`RunNotFound` when there is none).
pub fn remove_archive(fs: &dyn Fs, dir: &Path, run: &RunId) -> Result<()> {
    let path = archive_path(dir, run);
    match fs.remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::RunNotFound {
                run: run.to_string(),
            });
        }
        Err(e) => return Err(Error::io("removing", &path, e)),
    }
    fs.sync_dir(dir)
        .map_err(|e| Error::io("syncing directory", dir, e))
}

/// Removes the temporary files an interrupted [`write_archive`] of run `run` left in `dir`
/// (`.tmp-<run>-<ULID>`: a crash or kill between their creation and their rename; a write
/// that fails removes its own), then syncs the directory if it removed any. Returns their
/// paths, in name order. Nothing else is touched: another run's temporary files, archives,
/// other names. `runlog gc` calls it for each run it is about to archive, holding the archive
/// directory's lock ([`lock_archive_dir`]), so no other gc is writing one of them.
///
/// # Errors
/// `Io` with the path.
pub fn remove_temp_files(fs: &dyn Fs, dir: &Path, run: &RunId) -> Result<Vec<PathBuf>> {
    let names = match fs.read_dir(dir) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", dir, e)),
    };
    let prefix = format!(".tmp-{}-", run.as_str());
    let mut removed: Vec<PathBuf> = names
        .iter()
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|rest| ulid::Ulid::from_string(rest).is_ok())
        })
        .map(|n| dir.join(n))
        .collect();
    removed.sort();
    for path in &removed {
        match fs.remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("removing", path, e)),
        }
    }
    if !removed.is_empty() {
        fs.sync_dir(dir)
            .map_err(|e| Error::io("syncing directory", dir, e))?;
    }
    Ok(removed)
}

/// The runs `dir` holds archives of, in id order (empty when `dir` does not exist).
/// Temporary files (`.tmp-…`, an interrupted write) are not archives and are left out.
///
/// # Errors
/// `Io` with the path.
pub fn list_archives(fs: &dyn Fs, dir: &Path) -> Result<Vec<RunId>> {
    let names = match fs.read_dir(dir) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", dir, e)),
    };
    let mut runs: Vec<RunId> = names
        .iter()
        .filter(|n| !n.starts_with('.'))
        .filter_map(|n| n.strip_suffix(ARCHIVE_EXT))
        .filter_map(|id| RunId::new(id).ok())
        .collect();
    runs.sort();
    Ok(runs)
}
