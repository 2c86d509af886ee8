//! Online backup of a file store into another directory (`format/SPEC.md` §12).
//!
//! A backup copies each run's segments byte for byte up to the committed length of the
//! counter a reader reads (SPEC §3, §8), checks every batch it copies (checksums, density,
//! the counter's last seq), and writes the destination's own counter slots for exactly what
//! it copied; source writers are never locked. A second backup into the same directory
//! copies only what grew, after checking that what the destination holds is still a prefix
//! of the source. The manifest `BACKUP` says whether the destination is complete.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::event::{RunId, Seq};
use crate::format::{BATCH_LEN_READ_MAX, CounterSlot, HEADER_LEN, decode_batch_each};
use crate::io::{Fs, OpenMode};
use crate::lock::{self, LOCK_FILE};
use crate::run::{SUMMARY_FILE, check_summary, read_summary};
use crate::segment::{Access, Segment, segment_name};
use crate::store::{RUNS_DIR, Store, remove_run_files};
use crate::types::now_ms;

mod manifest;

pub use manifest::{BACKUP_FILE, BackupManifest, read_manifest};

/// Runs listed from the source per page.
const LIST_PAGE: usize = 512;

/// What a backup did with one run.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunBackupResult {
    /// Not in the destination before: copied whole.
    New,
    /// The destination held a prefix: only what grew was copied.
    Extended,
    /// The destination already held the run as the source has it.
    Unchanged,
    /// The destination held something that is not a prefix of the source run (another
    /// incarnation of the id, a repaired run, or appends made to the destination): replaced
    /// by a whole copy. The reason says which check failed.
    Recopied {
        /// Why the destination's copy was not a prefix.
        reason: String,
    },
    /// In the destination but no longer in the source (deleted there): kept as it was.
    Gone,
    /// The source run could not be read (damaged, unreadable): the destination's copy, if
    /// any, is left as it was and the backup is not complete.
    Failed {
        /// The source's error.
        error: Error,
    },
}

impl RunBackupResult {
    /// The result's name, as the CLI prints it: `new`, `extended`, `unchanged`, `recopied`,
    /// `gone` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            RunBackupResult::New => "new",
            RunBackupResult::Extended => "extended",
            RunBackupResult::Unchanged => "unchanged",
            RunBackupResult::Recopied { .. } => "recopied",
            RunBackupResult::Gone => "gone",
            RunBackupResult::Failed { .. } => "failed",
        }
    }
}

/// One run of a backup.
#[derive(Debug)]
pub struct RunBackup {
    /// The run.
    pub run: RunId,
    /// What was done.
    pub result: RunBackupResult,
    /// The run's last seq in the destination after the backup (0 for `failed`, `gone`).
    pub last_seq: Seq,
    /// Segment bytes written to the destination for this run (headers included).
    pub bytes_copied: u64,
}

/// The outcome of [`Store::backup`].
#[derive(Debug)]
pub struct BackupReport {
    /// The destination directory.
    pub dst: PathBuf,
    /// When the backup started (ms since the Unix epoch): every event acknowledged before
    /// it is in the destination, for every run that did not fail.
    pub started_at_ms: u64,
    /// When it finished.
    pub finished_at_ms: u64,
    /// Every run, in id order (`gone` ones after the source's).
    pub runs: Vec<RunBackup>,
    /// Whether the manifest now says `complete` (no run failed).
    pub complete: bool,
}

impl BackupReport {
    /// Segment bytes written in all, over every run.
    pub fn bytes_copied(&self) -> u64 {
        self.runs.iter().map(|r| r.bytes_copied).sum()
    }
}

/// Where a failure came from: the source run (recorded, the backup goes on) or the
/// destination (the backup stops: nothing after it can be trusted to be durable).
enum Fail {
    Source(Error),
    Dest(Error),
}

type Step<T> = std::result::Result<T, Fail>;

fn dest<T>(r: Result<T>) -> Step<T> {
    r.map_err(Fail::Dest)
}

fn source<T>(r: Result<T>) -> Step<T> {
    r.map_err(Fail::Source)
}

/// A segment of the source and the counter the copy is bounded by.
type Snapshot = Vec<(Arc<Segment>, CounterSlot)>;

impl Store {
    /// Backs this file store up into the directory `dst` while writers (threads and other
    /// processes) keep appending: no source lock is taken, so no writer waits.
    ///
    /// `dst` is created if missing; an existing one must be empty or an earlier backup (it
    /// holds a `BACKUP` manifest), and is then brought up to date copying only what grew
    /// (format/SPEC.md §12). Each run in `dst` is a prefix of its source run as of one moment
    /// after the backup started, and holds every event acknowledged before it started. Every
    /// file written is fdatasync'd and every directory changed is fsync'd before this
    /// returns; only then does the manifest say `complete`. `progress` is called after each
    /// run. Reading is all a backup does to this store; on a writable handle, opening a run
    /// still recovers it when its lock is free, as any writable open does (`runlog backup`
    /// opens the source read-only, [`Store::open_read_only`]).
    ///
    /// # Errors
    /// [`Error::BackupRefused`] for a destination that is not a backup, lies inside this
    /// store, or is held by another backup (nothing written); [`Error::Io`] /
    /// [`Error::DiskFull`] when writing `dst` fails (the backup stops; the manifest still says
    /// `incomplete`); the listing's errors of this store. A source run that cannot be read
    /// is no error here: it is a [`RunBackupResult::Failed`] row, and the backup is not
    /// complete.
    pub fn backup(
        &self,
        dst: impl AsRef<Path>,
        progress: &mut dyn FnMut(&RunBackup),
    ) -> Result<BackupReport> {
        let dst = Dest::prepare(self, dst.as_ref())?;
        let started_at_ms = now_ms();
        let src_path =
            std::fs::canonicalize(self.path()).unwrap_or_else(|_| self.path().to_path_buf());
        dst.write_manifest(&BackupManifest::started(&src_path, started_at_ms))?;
        let mut runs = Vec::new();
        let mut listed = BTreeSet::new();
        for id in self.all_run_ids()? {
            let done = match self.backup_run(&dst, &id) {
                Ok(done) => done,
                Err(Fail::Dest(e)) => return Err(e),
                Err(Fail::Source(error)) => RunBackup {
                    run: id.clone(),
                    result: RunBackupResult::Failed { error },
                    last_seq: 0,
                    bytes_copied: 0,
                },
            };
            progress(&done);
            listed.insert(id);
            runs.push(done);
        }
        for id in dst.run_ids()?.into_iter().filter(|id| !listed.contains(id)) {
            let done = RunBackup {
                run: id,
                result: RunBackupResult::Gone,
                last_seq: 0,
                bytes_copied: 0,
            };
            progress(&done);
            runs.push(done);
        }
        let complete = !runs
            .iter()
            .any(|r| matches!(r.result, RunBackupResult::Failed { .. }));
        let finished_at_ms = now_ms();
        if complete {
            let done = BackupManifest::completed(&src_path, started_at_ms, finished_at_ms);
            dst.write_manifest(&done)?;
        }
        Ok(BackupReport {
            dst: dst.root.clone(),
            started_at_ms,
            finished_at_ms,
            runs,
            complete,
        })
    }

    /// The manifest of this store's directory when it is a backup (format/SPEC.md §12):
    /// `complete: false` after an interrupted backup. `None` for a store that is no backup.
    ///
    /// # Errors
    /// [`Error::NotAStore`] for a `BACKUP` file that is not a manifest; [`Error::Io`].
    pub fn backup_manifest(&self) -> Result<Option<BackupManifest>> {
        read_manifest(self.fs().as_ref(), self.path())
    }

    /// Every run id of the store, in id order (damaged runs too: their backup fails loudly).
    fn all_run_ids(&self) -> Result<Vec<RunId>> {
        let mut ids = Vec::new();
        let mut after = None;
        loop {
            let page = self.list_runs(after.as_ref(), LIST_PAGE)?;
            ids.extend(page.runs.into_iter().map(|r| r.run));
            ids.extend(page.damaged.into_iter().map(|d| d.run));
            if !page.has_more || page.next.is_none() {
                break;
            }
            after = page.next;
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// Backs up one run: a whole copy when `dst` lacks it (or holds something else), else
    /// what grew.
    fn backup_run(&self, dst: &Dest, id: &RunId) -> Step<RunBackup> {
        let snapshot = match self.run(id).and_then(|r| r.committed_segments()) {
            Ok(s) => s,
            // Deleted since the listing: as if it had been deleted before.
            Err(Error::RunNotFound { .. }) => {
                return Ok(RunBackup {
                    run: id.clone(),
                    result: RunBackupResult::Gone,
                    last_seq: 0,
                    bytes_copied: 0,
                });
            }
            Err(e) => return Err(Fail::Source(e)),
        };
        let last_seq = snapshot.last().map_or(0, |(_, c)| c.last_seq);
        let src_dir = self.path().join(RUNS_DIR).join(id.as_str());
        let copy = RunCopy {
            fs: self.fs().as_ref(),
            run: id,
            src_dir: &src_dir,
            snapshot: &snapshot,
        };
        let (result, bytes_copied) = dst.update_run(&copy, self.config().lock_timeout)?;
        Ok(RunBackup {
            run: id.clone(),
            result,
            last_seq,
            bytes_copied,
        })
    }
}

/// One source run being copied: its committed view and where its files are.
struct RunCopy<'a> {
    fs: &'a dyn Fs,
    run: &'a RunId,
    src_dir: &'a Path,
    snapshot: &'a Snapshot,
}

impl RunCopy<'_> {
    fn last_seq(&self) -> Seq {
        self.snapshot.last().map_or(0, |(_, c)| c.last_seq)
    }

    /// Bytes `[from, to)` of source segment `seg`, every batch in them checked (checksum,
    /// density from `first_seq`, and that they end at the counter's `last_seq`).
    fn read_checked(&self, i: usize, from: u64, first_seq: Seq) -> Result<Vec<u8>> {
        let (seg, counter) = &self.snapshot[i];
        let run = self.run.as_str();
        let len = counter.committed_len.saturating_sub(from) as usize;
        let mut buf = vec![0u8; len];
        seg.read_exact(&mut buf, from).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                let detail = format!(
                    "file ends before its committed length {}",
                    counter.committed_len
                );
                Error::corrupt(run, &seg.name, from, detail)
            }
            _ => Error::io("reading", &seg.path, e),
        })?;
        let bytes = Bytes::from(buf);
        let (mut at, mut next) = (0usize, first_seq);
        while at < bytes.len() {
            let (h, _) = decode_batch_each(
                &bytes,
                at,
                seg.header.frame_key(),
                next,
                BATCH_LEN_READ_MAX,
                // Seq 0 is never stored: every record is checked, none handed over.
                0..=0,
                |_| {},
            )
            .map_err(|e| Error::corrupt(run, &seg.name, from + e.offset, e.detail))?;
            at += h.len as usize;
            next = h.first_seq + u64::from(h.count);
        }
        if next != counter.last_seq + 1 {
            let detail = format!(
                "batches end at seq {}, counter says {}",
                next - 1,
                counter.last_seq
            );
            return Err(Error::corrupt(
                run,
                &seg.name,
                counter.committed_len,
                detail,
            ));
        }
        Ok(bytes.to_vec())
    }

    /// Source segment `i` as the destination's file: its name, and its header (sector 0 and
    /// metadata as the source's; both counter slots, generations 1 and 2, the source's counter)
    /// followed by its checked batches `[4096, committed_len)`.
    fn segment_file(&self, i: usize) -> Result<(String, Vec<u8>)> {
        let (seg, counter) = &self.snapshot[i];
        let body = self.read_checked(i, HEADER_LEN, seg.header.base_seq)?;
        let slots = [1, 2].map(|generation| CounterSlot {
            generation,
            ..*counter
        });
        let mut file = seg.header.encode_with_slots(&slots);
        file.extend_from_slice(&body);
        Ok((segment_name(seg.header.segment_index), file))
    }

    /// The source's summary bytes when the summary is valid and counts no event past the
    /// copied view (SPEC §10: derived; copied only when a reader of the copy would use it).
    fn summary(&self) -> Option<Vec<u8>> {
        let (first, _) = self.snapshot.first()?;
        let bytes = read_summary(self.fs, self.src_dir)?;
        let fold = check_summary(
            self.fs,
            self.src_dir,
            self.run.as_str(),
            first.header.salt,
            &bytes,
        )?;
        (fold.last_seq <= self.last_seq()).then_some(bytes)
    }
}

/// The destination of a backup: a store directory holding the manifest, locked against a
/// second backup for as long as this value lives.
struct Dest {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    runs_dir: PathBuf,
    _lock: lock::LockGuard,
}

impl Dest {
    /// Checks and opens `dst` for `src`'s backup: refuses a directory inside the source, a
    /// non-empty store that is no backup, or one another backup holds; creates the store
    /// layout (`FORMAT`, `runs/`) when missing and removes what an interrupted backup left
    /// under temporary names.
    fn prepare(src: &Store, dst: &Path) -> Result<Dest> {
        let fs = src.fs().clone();
        let refuse = |detail: String| Error::BackupRefused {
            path: dst.to_path_buf(),
            detail,
        };
        inside_check(src.path(), dst).map_err(refuse)?;
        let is_backup = match read_manifest(fs.as_ref(), dst) {
            Ok(m) => m.is_some(),
            Err(e) => return Err(e),
        };
        if !is_backup && let Some(entry) = foreign_entry(fs.as_ref(), dst)? {
            let detail = format!(
                "holds {entry:?} and no BACKUP manifest: not a backup (a backup replaces runs \
                 that differ from the source)"
            );
            return Err(refuse(detail));
        }
        drop(Store::open_with_fs(fs.clone(), dst, src.config().clone())?);
        // Again now that `dst` exists, before anything in it is locked or removed.
        inside_check(src.path(), dst).map_err(refuse)?;
        let lock_path = dst.join(manifest::LOCK_NAME);
        let file = fs
            .open(&lock_path, OpenMode::CreateTruncate)
            .or_else(|_| fs.open(&lock_path, OpenMode::ReadWrite))
            .map_err(|e| Error::io("opening", &lock_path, e))?;
        let guard = lock::try_acquire(&file, &lock_path)?
            .ok_or_else(|| refuse("another backup into it is running".to_string()))?;
        let dest = Dest {
            runs_dir: dst.join(RUNS_DIR),
            root: dst.to_path_buf(),
            fs,
            _lock: guard,
        };
        dest.remove_leftovers()?;
        Ok(dest)
    }

    /// Clears what an interrupted backup left under temporary names in `runs/`:
    /// - `.replaced-<run>-<u>` is the copy a recopy renamed away. With its build directory
    ///   `.backup-<run>-<u>` still there, the recopy stopped between its two renames: the old
    ///   copy is renamed back to `runs/<run>` when no run is there (without that, when the
    ///   source had deleted the run meanwhile, the next backup removed the only copy of it:
    ///   found by a breaker), and left where it is when a writer of the destination has made
    ///   a run of that name since (a backup never deletes a run's events). Without it, the
    ///   new copy took its place: the old one is garbage, removed.
    /// - `.backup-<run>-*` (a copy a backup was building, a name only backups use) and
    ///   `.deleted-*` (a delete's garbage) are removed;
    /// - `.tmp-<run>-*` is a run being created by a writer of the destination (or left by one
    ///   that died, or by a backup of an earlier build): removed only when its name is more
    ///   than [`STALE_TMP_MS`] old (removing a live one emptied the run its writer then
    ///   renamed into place and reported made: found by a breaker).
    fn remove_leftovers(&self) -> Result<()> {
        let fs = self.fs.as_ref();
        let mut names = fs
            .read_dir(&self.runs_dir)
            .map_err(|e| Error::io("listing", &self.runs_dir, e))?;
        // The newest aside of a run first (its ULID sorts last).
        names.sort_unstable_by(|a, b| b.cmp(a));
        let building: std::collections::HashSet<&str> = names
            .iter()
            .filter_map(|n| n.strip_prefix(BUILD_PREFIX))
            .collect();
        let now = now_ms();
        for name in &names {
            let path = self.runs_dir.join(name);
            if let Some(rest) = name.strip_prefix(REPLACED_PREFIX)
                && let Some(run) = run_of_attempt(rest)
            {
                if !building.contains(rest) {
                    remove_aside(fs, &self.runs_dir, &path, &run);
                    continue;
                }
                let dir = self.runs_dir.join(run.as_str());
                let taken = fs
                    .is_dir(&dir)
                    .map_err(|e| Error::io("checking", &dir, e))?;
                if !taken {
                    match fs.rename(&path, &dir) {
                        Ok(()) => fs
                            .sync_dir(&self.runs_dir)
                            .map_err(|e| Error::io("syncing", &self.runs_dir, e))?,
                        // A writer of the destination made the run since: left where it is.
                        Err(e) if is_taken(&e) => {}
                        Err(e) => return Err(Error::io("renaming back", &path, e)),
                    }
                }
                continue;
            }
            let stale_tmp = name.starts_with(".tmp-")
                && name_time_ms(name).is_some_and(|t| now.saturating_sub(t) > STALE_TMP_MS);
            if stale_tmp || name.starts_with(BUILD_PREFIX) || name.starts_with(".deleted-") {
                remove_dir_files(fs, &path);
            }
        }
        Ok(())
    }

    /// The run ids in the destination.
    fn run_ids(&self) -> Result<Vec<RunId>> {
        let names = self
            .fs
            .read_dir(&self.runs_dir)
            .map_err(|e| Error::io("listing", &self.runs_dir, e))?;
        let mut ids: Vec<RunId> = names.iter().filter_map(|n| RunId::new(n).ok()).collect();
        ids.sort();
        Ok(ids)
    }

    fn write_manifest(&self, m: &BackupManifest) -> Result<()> {
        manifest::write_manifest(self.fs.as_ref(), &self.root, m)
    }

    /// Brings the destination's copy of `copy.run` up to the source's view.
    fn update_run(
        &self,
        copy: &RunCopy<'_>,
        timeout: std::time::Duration,
    ) -> Step<(RunBackupResult, u64)> {
        let dir = self.runs_dir.join(copy.run.as_str());
        let exists = self
            .fs
            .is_dir(&dir)
            .map_err(|e| Fail::Dest(Error::io("checking", &dir, e)))?;
        if !exists {
            let bytes = self.copy_whole(copy, false, timeout)?;
            return Ok((RunBackupResult::New, bytes));
        }
        let recopy = |reason: String| -> Step<(RunBackupResult, u64)> {
            let bytes = self.copy_whole(copy, true, timeout)?;
            Ok((RunBackupResult::Recopied { reason }, bytes))
        };
        let held = match dest(HeldRun::open(self.fs.as_ref(), &dir, copy.run, timeout))? {
            Ok(held) => held,
            Err(reason) => return recopy(reason),
        };
        let plan = match held.plan(copy) {
            Ok(plan) => plan,
            Err(reason) => {
                // The recopy takes the lock again for its swap only, not while it builds.
                drop(held);
                return recopy(reason);
            }
        };
        let bytes = held.extend(self.fs.as_ref(), copy, plan)?;
        let result = match bytes {
            0 => RunBackupResult::Unchanged,
            _ => RunBackupResult::Extended,
        };
        Ok((result, bytes))
    }

    /// Copies the whole run into `runs/.backup-<run>-<ulid>/` (every file synced, the directory
    /// synced) and renames it into place. With `replacing`, the existing copy is first
    /// renamed away to `.replaced-…`, under its run lock as a delete does (the commit point of
    /// a delete, SPEC §1), then renamed to `.deleted-…` and removed: a writer of the
    /// destination that holds the run open either commits before the swap, into the copy
    /// being replaced, or after it, when its deletion check finds another lock file at the
    /// path and its store opens the new copy. Without the lock, a writer mid-commit went on in
    /// the new directory by path (its roll made a segment file there, after the copy's last
    /// one) and acknowledged a seq a fresh writer gave out again (found by a breaker). A run
    /// a writer of the destination deleted meanwhile is copied as new; one it created
    /// meanwhile (the rename finds the name taken) is replaced like any copy that is not a
    /// prefix. Returns the segment bytes written.
    fn copy_whole(
        &self,
        copy: &RunCopy<'_>,
        replacing: bool,
        timeout: std::time::Duration,
    ) -> Step<u64> {
        let fs = self.fs.as_ref();
        let run = copy.run.as_str();
        // One ULID names the build directory and the aside of the copy it replaces: the next
        // backup tells a swap stopped between its renames (both there) from one done.
        let attempt = ulid::Ulid::generate();
        let tmp = self.runs_dir.join(format!("{BUILD_PREFIX}{run}-{attempt}"));
        let drop_tmp = || remove_run_files(fs, &tmp, copy.snapshot.len() as u32);
        let bytes = self.build_copy(&tmp, copy).inspect_err(|_| drop_tmp())?;
        let dir = self.runs_dir.join(run);
        let mut swapped = self.swap_in(&tmp, attempt, copy.run, replacing, timeout);
        if !replacing && matches!(&swapped, Ok(Swap::Taken)) {
            swapped = self.swap_in(&tmp, attempt, copy.run, true, timeout);
        }
        match swapped {
            Ok(Swap::Done) => Ok(bytes),
            Ok(Swap::Taken) => {
                drop_tmp();
                let e = io::Error::from(io::ErrorKind::AlreadyExists);
                Err(Fail::Dest(Error::io("renaming into place", &dir, e)))
            }
            Err(e) => {
                drop_tmp();
                Err(e)
            }
        }
    }

    /// Renames the built copy `tmp` to `runs/<run>`; with `replacing`, under the run lock of
    /// the copy there, which goes aside first and is removed after (see [`Self::copy_whole`]).
    /// `Swap::Taken` when, not replacing, a run of that name is there.
    fn swap_in(
        &self,
        tmp: &Path,
        attempt: ulid::Ulid,
        run: &RunId,
        replacing: bool,
        timeout: std::time::Duration,
    ) -> Step<Swap> {
        let fs = self.fs.as_ref();
        let dir = self.runs_dir.join(run.as_str());
        let held = match replacing {
            true => dest(lock_existing(fs, &dir, run, timeout))?,
            false => None,
        };
        let aside = self
            .runs_dir
            .join(format!("{REPLACED_PREFIX}{run}-{attempt}"));
        let mut replaced = false;
        if replacing {
            match fs.rename(&dir, &aside) {
                Ok(()) => replaced = true,
                // Deleted meanwhile by a writer of the destination: copied as new.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Fail::Dest(Error::io("renaming away", &dir, e))),
            }
        }
        if let Err(e) = fs.rename(tmp, &dir) {
            if replaced {
                // The old copy back in place (best effort; else the next backup does it).
                let _ = fs.rename(&aside, &dir);
            }
            if !replaced && is_taken(&e) {
                return Ok(Swap::Taken);
            }
            return Err(Fail::Dest(Error::io("renaming into place", &dir, e)));
        }
        fs.sync_dir(&self.runs_dir)
            .map_err(|e| Fail::Dest(Error::io("syncing", &self.runs_dir, e)))?;
        drop(held);
        if replaced {
            remove_aside(fs, &self.runs_dir, &aside, run);
        }
        Ok(Swap::Done)
    }

    /// Writes every segment of the copy, the lock file and the summary into `tmp`, each
    /// synced, then syncs `tmp`.
    fn build_copy(&self, tmp: &Path, copy: &RunCopy<'_>) -> Step<u64> {
        let fs = self.fs.as_ref();
        dest(
            fs.create_dir(tmp)
                .map_err(|e| Error::io("creating", tmp, e)),
        )?;
        let mut bytes = 0;
        for i in 0..copy.snapshot.len() {
            let (name, file) = source(copy.segment_file(i))?;
            dest(write_synced(fs, &tmp.join(name), &file))?;
            bytes += file.len() as u64;
        }
        dest(write_synced(fs, &tmp.join(LOCK_FILE), &[]))?;
        if let Some(summary) = copy.summary() {
            dest(write_synced(fs, &tmp.join(SUMMARY_FILE), &summary))?;
        }
        dest(fs.sync_dir(tmp).map_err(|e| Error::io("syncing", tmp, e)))?;
        Ok(bytes)
    }
}

/// A destination run opened for an incremental update, its lock held.
struct HeldRun {
    dir: PathBuf,
    segments: Vec<(Segment, CounterSlot, u64)>,
    /// The run's lock, held; its file is the lock file the announcement is written into.
    lock: lock::LockGuard,
}

/// What an incremental update does: extend segment `last` (its counter `from`) and create
/// the source's segments after it.
struct Plan {
    last: usize,
}

impl HeldRun {
    /// Opens the destination run `dir`: its lock file (locked: a writer of the destination
    /// waits), and its segment chain with each segment's counter. `Ok(Err(reason))` when the
    /// files are damaged (then the run is recopied); `Err` for an I/O error or a busy lock.
    fn open(
        fs: &dyn Fs,
        dir: &Path,
        run: &RunId,
        timeout: std::time::Duration,
    ) -> Result<std::result::Result<HeldRun, String>> {
        // The lock of the run there now (one a delete replaced while this waited would
        // exclude no writer of it).
        let Some(guard) = lock_existing(fs, dir, run, timeout)? else {
            return Ok(Err("its lock file is missing".to_string()));
        };
        let lock_file = guard.file().clone();
        let mut segments = Vec::new();
        for index in 1.. {
            let seg = match Segment::open_after_seal(fs, dir, run.as_str(), index, Access::Write) {
                Ok(Some(seg)) => seg,
                Ok(None) => break,
                Err(e) if e.is_environment() => return Err(e),
                Err(e) => return Ok(Err(format!("its segment {index} is unreadable: {e}"))),
            };
            let counter =
                match seg.read_counter_in_chain(fs, run.as_str(), Some(lock_file.as_ref())) {
                    Ok(c) => c,
                    Err(e) if e.is_environment() => return Err(e),
                    Err(e) => return Ok(Err(format!("its segment {index} is unreadable: {e}"))),
                };
            let sealed = counter.newest.sealed;
            segments.push((seg, counter.newest, counter.header_generation));
            if !sealed {
                break;
            }
        }
        if segments.is_empty() {
            return Ok(Err("its first segment is missing".to_string()));
        }
        Ok(Ok(HeldRun {
            dir: dir.to_path_buf(),
            segments,
            lock: guard,
        }))
    }

    /// Whether this copy is a prefix of the source's view (SPEC §12): each segment the same
    /// file (equal headers: same salt, base seq, run, metadata), its counter not past the
    /// source's, a seal only where the source sealed at the same length, and the last batch
    /// it holds (its checksum, as a run summary's anchor, SPEC §10) the source's batch at the
    /// same offset. `Err(reason)` when not.
    fn plan(&self, copy: &RunCopy<'_>) -> std::result::Result<Plan, String> {
        for (i, (seg, counter, _)) in self.segments.iter().enumerate() {
            let n = i + 1;
            let Some((src, src_counter)) = copy.snapshot.get(i) else {
                return Err(format!("it has segment {n}, the source does not"));
            };
            if seg.header != src.header {
                return Err(format!(
                    "its segment {n} is another file than the source's (another incarnation of \
                     the run id)"
                ));
            }
            if counter.committed_len > src_counter.committed_len
                || counter.last_seq > src_counter.last_seq
            {
                return Err(format!(
                    "it holds seq {} in segment {n}, the source {}",
                    counter.last_seq, src_counter.last_seq
                ));
            }
            if counter.sealed && src_counter.committed_len != counter.committed_len {
                return Err(format!(
                    "its segment {n} is sealed where the source's is not"
                ));
            }
            if !same_last_batch(seg, src, counter.committed_len) {
                return Err(format!(
                    "its last batch in segment {n} (ending at byte {}) differs from the \
                     source's",
                    counter.committed_len
                ));
            }
        }
        Ok(Plan {
            last: self.segments.len() - 1,
        })
    }

    /// Copies what grew: the rest of segment `plan.last` (appended past its counter, synced,
    /// then a new header counter, synced; a seal when the source sealed it), then each later
    /// source segment as a new file (temp name, synced, renamed, directory synced). Returns
    /// the bytes written.
    fn extend(&self, fs: &dyn Fs, copy: &RunCopy<'_>, plan: Plan) -> Step<u64> {
        let (seg, counter, header_generation) = &self.segments[plan.last];
        let (_, src_counter) = &copy.snapshot[plan.last];
        let grows = src_counter.committed_len > counter.committed_len
            || src_counter.sealed != counter.sealed;
        let adds = copy.snapshot.len() > plan.last + 1;
        // Before the first write, so that no failure or kill after it leaves a warm writer
        // of the destination uninformed.
        let announced = match grows || adds {
            true => dest(self.announce(seg, counter, *header_generation))?,
            false => 0,
        };
        let mut bytes = 0;
        if grows {
            let body =
                source(copy.read_checked(plan.last, counter.committed_len, counter.last_seq + 1))?;
            let slot = CounterSlot {
                generation: crate::format::next_header_generation(
                    counter.generation.max(announced),
                    *header_generation,
                ),
                ..*src_counter
            };
            let write = || -> io::Result<()> {
                // Bytes past the counter are an interrupted update's: never left behind.
                seg.truncate(counter.committed_len)?;
                seg.append(&body, counter.committed_len)?;
                seg.sync()?;
                seg.write_slot(&slot)?;
                seg.sync()
            };
            write().map_err(|e| Fail::Dest(Error::io("extending", &seg.path, e)))?;
            bytes += body.len() as u64;
        }
        for i in plan.last + 1..copy.snapshot.len() {
            bytes += self.add_segment(fs, copy, i)?;
        }
        // A summary the copy already holds is not written again (an unchanged run costs no
        // write and no sync).
        if let Some(summary) = copy
            .summary()
            .filter(|s| read_summary(fs, &self.dir).as_ref() != Some(s))
        {
            let path = self.dir.join(SUMMARY_FILE);
            dest(replace_synced(fs, &self.dir, &path, &summary))?;
        }
        Ok(bytes)
    }

    /// Tells a writer of the destination that holds this run open that the backup is about
    /// to change it, as a writer does before it seals (SPEC §5, the unchanged-slots
    /// shortcut; §12): the last segment's counter written again into the lock file's commit
    /// slots, one generation newer; returns that generation. Without it, a warm writer whose
    /// segment the backup sealed at the length it had (and followed with a new segment, or
    /// failed to) found the slots and the 4 bytes at its committed length as it left them,
    /// skipped its refresh and appended past the seal: acknowledged, read by nobody.
    fn announce(
        &self,
        seg: &Segment,
        counter: &CounterSlot,
        header_generation: u64,
    ) -> Result<u64> {
        seg.write_announcement(self.lock.file().as_ref(), counter, header_generation)
            .map(|slot| slot.generation)
            .map_err(|e| Error::io("writing commit counter of", self.dir.join(LOCK_FILE), e))
    }

    /// Writes source segment `i` as a new segment file of this run (whole or not at all).
    fn add_segment(&self, fs: &dyn Fs, copy: &RunCopy<'_>, i: usize) -> Step<u64> {
        let (name, file) = source(copy.segment_file(i))?;
        dest(replace_synced(fs, &self.dir, &self.dir.join(name), &file))?;
        Ok(file.len() as u64)
    }
}

/// Whether the batch ending at `len` has the same checksum in both segments (trivially true
/// for an empty region).
fn same_last_batch(a: &Segment, b: &Segment, len: u64) -> bool {
    if len <= HEADER_LEN {
        return true;
    }
    let (mut x, mut y) = ([0u8; 4], [0u8; 4]);
    a.read_exact(&mut x, len - 4).is_ok() && b.read_exact(&mut y, len - 4).is_ok() && x == y
}

/// Whether `dst` is inside (or is) the store directory `src`, as a refusal's reason. `dst`
/// may not exist yet: its deepest existing ancestor is resolved (symbolic links, `..`) and
/// the rest of the path is applied to it as the directories a backup creates will resolve
/// it, `..` included (a backup to `SRC/../missing/../SRC` was taken for another directory,
/// created `missing`, and copied the source into itself: found by a breaker).
fn inside_check(src: &Path, dst: &Path) -> std::result::Result<(), String> {
    let src = std::fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
    // Absolute (not resolved), so that the walk up ends at an ancestor that exists.
    let dst = &std::path::absolute(dst).unwrap_or_else(|_| dst.to_path_buf());
    let mut probe = Some(dst.to_path_buf());
    while let Some(p) = probe {
        if let Ok(mut real) = std::fs::canonicalize(&p) {
            let rest = dst.strip_prefix(&p).unwrap_or(Path::new(""));
            for part in rest.components() {
                match part {
                    std::path::Component::ParentDir => {
                        real.pop();
                    }
                    std::path::Component::Normal(name) => real.push(name),
                    _ => {}
                }
            }
            if real.starts_with(&src) {
                return Err(format!("it is inside the source store {}", src.display()));
            }
            return Ok(());
        }
        probe = p.parent().map(Path::to_path_buf);
    }
    Ok(())
}

/// The first entry of `dir` that makes it more than an empty store (or what a backup stopped
/// before its first manifest leaves: `FORMAT`, `FORMAT.tmp-…`, `BACKUP.…`, and `runs/` with
/// only dot-named leftovers); `None` for a missing directory.
fn foreign_entry(fs: &dyn Fs, dir: &Path) -> Result<Option<String>> {
    let list = |d: &Path| match fs.read_dir(d) {
        Ok(names) => Ok(names),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io("listing", d, e)),
    };
    for name in list(dir)? {
        let own = name.starts_with(crate::store::FORMAT_FILE) || name.starts_with(BACKUP_FILE);
        if name == RUNS_DIR {
            let runs = list(&dir.join(RUNS_DIR))?;
            if let Some(run) = runs.into_iter().find(|n| !n.starts_with('.')) {
                return Ok(Some(format!("{RUNS_DIR}/{run}")));
            }
        } else if !own {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Creates (or truncates) `path` with `bytes`, fdatasync'd.
fn write_synced(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<()> {
    let write = || -> io::Result<()> {
        let f = fs.open(path, OpenMode::CreateTruncate)?;
        f.write_all_at(bytes, 0)?;
        f.sync_data()
    };
    write().map_err(|e| Error::io("writing", path, e))
}

/// Writes `bytes` to `<name>.tmp` in `dir`, fdatasync'd, renames it to `path` and fsyncs
/// `dir`: `path` holds the old content or the new, whole. The temp name is fixed (as a
/// writer's `seg-N.log.tmp`; the caller holds the lock that excludes another writer of it),
/// so what a killed backup leaves is written over by the next one, not left to pile up (a
/// name of each attempt's own, `seg-N.log.tmp-<ulid>`, stayed in the run's directory for
/// good: found by a breaker).
pub(crate) fn replace_synced(fs: &dyn Fs, dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!("{name}.tmp"));
    let result = write_synced(fs, &tmp, bytes).and_then(|()| {
        fs.rename(&tmp, path)
            .and_then(|()| fs.sync_dir(dir))
            .map_err(|e| Error::io("renaming into place", path, e))
    });
    if result.is_err() {
        let _ = fs.remove_file(&tmp);
    }
    result
}

/// How a built copy's rename into place went.
enum Swap {
    Done,
    /// Not replacing, and a run of that name was there (made meanwhile by a writer of the
    /// destination).
    Taken,
}

/// Whether a rename failed because a directory of that name is there and not empty.
fn is_taken(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::DirectoryNotEmpty
        || matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST))
}

/// The prefix of the name a recopy gives the copy it replaces: `runs/.replaced-<run>-<ulid>`.
const REPLACED_PREFIX: &str = ".replaced-";

/// The prefix of the directory a backup builds a whole copy in: `runs/.backup-<run>-<ulid>`
/// (not a writer's `.tmp-`, so that a backup's start removes only its own).
const BUILD_PREFIX: &str = ".backup-";

/// Age past which a `runs/.tmp-<run>-<ulid>` directory is a dead creator's, not a run being
/// made (a creation takes milliseconds): one hour.
const STALE_TMP_MS: u64 = 60 * 60 * 1000;

/// The run of `<run>-<ulid>`, the rest of a recopy's directory name after its prefix.
fn run_of_attempt(rest: &str) -> Option<RunId> {
    let (run, ulid) = rest.rsplit_once('-')?;
    ulid::Ulid::from_string(ulid).ok()?;
    RunId::new(run).ok()
}

/// The time (ms) of the ULID that ends a `…-<ulid>` name.
fn name_time_ms(name: &str) -> Option<u64> {
    let (_, ulid) = name.rsplit_once('-')?;
    ulid::Ulid::from_string(ulid).ok().map(|u| u.timestamp_ms())
}

/// Removes the old copy `aside` of `run` that a recopy replaced: renamed to a delete's name
/// first, so that a kill while its files are removed leaves garbage, never a part of a
/// copy under a name the next backup could put back (best effort).
fn remove_aside(fs: &dyn Fs, runs_dir: &Path, aside: &Path, run: &RunId) {
    let garbage = runs_dir.join(format!(".deleted-{run}-{}", ulid::Ulid::generate()));
    match fs.rename(aside, &garbage) {
        Ok(()) => remove_dir_files(fs, &garbage),
        Err(_) => remove_dir_files(fs, aside),
    }
}

/// The run lock of the destination run in `dir`, taken (waiting at most `timeout` each
/// time); `None` when the run has no lock file (then no writer can hold it). The file locked
/// is checked to be the one still at `dir/lock` once the lock is held, as a writer checks
/// (a delete, or a delete and a create again, may have replaced it while this waited; the
/// old file's lock excludes no writer of the run there now: found by a breaker).
fn lock_existing(
    fs: &dyn Fs,
    dir: &Path,
    run: &RunId,
    timeout: std::time::Duration,
) -> Result<Option<lock::LockGuard>> {
    let path = dir.join(LOCK_FILE);
    for _ in 0..LOCK_ATTEMPTS_MAX {
        let file = match fs.open(&path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("opening", &path, e)),
        };
        let guard = lock::acquire(run.as_str(), &file, &path, timeout)?;
        if file
            .is_at(&path)
            .map_err(|e| Error::io("checking", &path, e))?
        {
            return Ok(Some(guard));
        }
    }
    let e = io::Error::other("replaced again each time its lock was taken");
    Err(Error::io("locking", &path, e))
}

/// How many times [`lock_existing`] takes a lock file that was replaced while it waited.
const LOCK_ATTEMPTS_MAX: usize = 16;

/// Removes every file of `dir`, then `dir` (best effort: a leftover dot-named directory is
/// never listed as a run, and the next backup tries again).
fn remove_dir_files(fs: &dyn Fs, dir: &Path) {
    for name in fs.read_dir(dir).unwrap_or_default() {
        let _ = fs.remove_file(&dir.join(name));
    }
    let _ = fs.remove_dir(dir);
}
