//! Cross-process advisory locks (rule 9 of INVARIANTS.md).
//!
//! A run's `lock` file is locked with flock semantics through [`FsFile::try_lock`]: the kernel
//! releases the lock when the holder dies, so no staleness rule ever exists here. A contender
//! polls with a bounded backoff until its timeout, then reports [`Error::Busy`] naming the holder
//! pid that the holder wrote into the file (for the message only; never used to decide anything).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::io::{Fs, FsFile, OpenMode};

/// Name of the per-run advisory lock file (it also holds the commit slots, SPEC §3).
pub(crate) const LOCK_FILE: &str = "lock";

/// Shortest and longest sleep between two lock attempts.
const BACKOFF_MIN: Duration = Duration::from_micros(50);
const BACKOFF_MAX: Duration = Duration::from_millis(5);

/// A held run lock; released on drop.
#[derive(Debug)]
pub(crate) struct LockGuard {
    file: Arc<dyn FsFile>,
}

impl LockGuard {
    /// The locked file.
    pub(crate) fn file(&self) -> &Arc<dyn FsFile> {
        &self.file
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // An unlock failure leaves the lock to the kernel (released when the file closes).
        let _ = self.file.unlock();
    }
}

/// Takes the exclusive lock of `file` (the run's `lock` file at `path`), waiting at most
/// `timeout`. Writes nothing: the holder pid is recorded by [`record_holder`] only by a
/// writer that is about to write (a rejected append writes no byte, rule 2).
///
/// # Errors
/// [`Error::Busy`] after `timeout` with the holder read from the file; [`Error::Io`] when the
/// lock call itself fails.
pub(crate) fn acquire(
    run: &str,
    file: &Arc<dyn FsFile>,
    path: &Path,
    timeout: Duration,
) -> Result<LockGuard> {
    let start = Instant::now();
    let mut backoff = BACKOFF_MIN;
    loop {
        if file.try_lock().map_err(|e| Error::io("locking", path, e))? {
            return Ok(LockGuard { file: file.clone() });
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(Error::Busy {
                run: run.to_string(),
                holder: holder(file.as_ref(), path),
                waited_ms: waited.as_millis() as u64,
            });
        }
        std::thread::sleep(backoff.min(timeout - waited));
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// One attempt at the lock, without waiting: `Ok(None)` when someone holds it.
pub(crate) fn try_acquire(file: &Arc<dyn FsFile>, path: &Path) -> Result<Option<LockGuard>> {
    let got = file.try_lock().map_err(|e| Error::io("locking", path, e))?;
    Ok(got.then(|| LockGuard { file: file.clone() }))
}

/// Takes the exclusive lock of the lock file at `path` (created if missing) at once, and
/// records this process as its holder: the lock of one kind of work (`what`, for the
/// message) that a second taker must not start, e.g. a gc pass.
///
/// # Errors
/// [`Error::Busy`] at once when another holds it (the holder's pid in the message, from
/// [`holder`]); `Io` with the path.
pub(crate) fn lock_file_now(fs: &dyn Fs, path: &Path, what: &str) -> Result<LockGuard> {
    let file = match fs.open(path, OpenMode::CreateNew) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            fs.open(path, OpenMode::ReadWrite)
        }
        other => other,
    }
    .map_err(|e| Error::io("opening", path, e))?;
    let Some(guard) = try_acquire(&file, path)? else {
        return Err(Error::Busy {
            run: format!("{} ({what})", path.display()),
            holder: holder(file.as_ref(), path),
            waited_ms: 0,
        });
    };
    record_holder(&file);
    Ok(guard)
}

/// Writes `pid N` padded to a fixed width, so no stale digits survive a shorter pid. Best
/// effort: the content is diagnostic only.
pub(crate) fn record_holder(file: &Arc<dyn FsFile>) {
    let text = format!("pid {:<16}\n", std::process::id());
    let _ = file.write_all_at(text.as_bytes(), 0);
}

/// Who holds the lock: the kernel's own record (`/proc/locks`, Linux) when available, else
/// the pid the last writer recorded in the file. For messages only.
pub(crate) fn holder(file: &dyn FsFile, path: &Path) -> String {
    kernel_holder(path).unwrap_or_else(|| read_holder(file))
}

/// The pid holding a `flock` on `path` according to `/proc/locks`, as `pid N`.
fn kernel_holder(path: &Path) -> Option<String> {
    let meta = crate::io::probe_path(path).ok()?;
    let want = (u64::from(meta.dev.0), u64::from(meta.dev.1), meta.ino);
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    table.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // `N: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<ino> 0 EOF`; waiters have `->` at 1.
        if f.len() < 6 || f[1] != "FLOCK" {
            return None;
        }
        let mut id = f[5].split(':');
        let maj = u64::from_str_radix(id.next()?, 16).ok()?;
        let min = u64::from_str_radix(id.next()?, 16).ok()?;
        let ino = id.next()?.parse::<u64>().ok()?;
        ((maj, min, ino) == want).then(|| format!("pid {}", f[4]))
    })
}

/// The holder as recorded in the lock file, e.g. `pid 4242`, or `unknown`.
pub(crate) fn read_holder(file: &dyn FsFile) -> String {
    let mut buf = [0u8; 32];
    match file.read_at(&mut buf, 0) {
        Ok(n) if n > 0 => {
            // The record is the first line; the commit slots follow at 512 (SPEC §1).
            let record = buf.iter().take(n).take_while(|&&b| b != b'\n' && b != 0);
            let record: Vec<u8> = record.copied().collect();
            let text = String::from_utf8_lossy(&record);
            let text = text.trim();
            if text.starts_with("pid ") {
                text.to_string()
            } else {
                "unknown".to_string()
            }
        }
        _ => "unknown".to_string(),
    }
}

/// Opens a run's lock file read-only to read its commit slots (SPEC §3) without locking:
/// `Ok(None)` when it does not exist (the header's counter is then the newest one).
///
/// # Errors
/// [`Error::Io`] for any other failure to open it.
pub(crate) fn open_for_counters(fs: &dyn Fs, path: &Path) -> Result<Option<Arc<dyn FsFile>>> {
    match fs.open(path, OpenMode::Read) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("opening lock file", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdFs;

    #[test]
    fn the_holder_record_is_read_without_the_commit_slots_that_follow_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let fs = StdFs;
        let file = fs.open(&path, OpenMode::CreateTruncate).unwrap();
        let mut bytes = format!("pid {:<16}\n", 4242).into_bytes();
        bytes.resize(512, 0);
        bytes.extend_from_slice(b"SLOT");
        file.write_all_at(&bytes, 0).unwrap();
        assert_eq!(read_holder(file.as_ref()), "pid 4242");
        file.write_all_at(b"garbage\n", 0).unwrap();
        assert_eq!(read_holder(file.as_ref()), "unknown");
    }
}
