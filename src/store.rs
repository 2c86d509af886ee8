//! The store directory: open, create/list/delete runs, and the per-process cache of open runs.
//!
//! Layout (`format/SPEC.md` §1): `<root>/FORMAT`, `<root>/runs/<run id>/seg-NNNNNNNN.log`,
//! `<root>/runs/<run id>/lock`.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::backend::RunLog;
use crate::error::{Error, Result};
use crate::event::{EventRef, NewEvent, RunId, Seq};
use crate::format::{HEADER_LEN, META_LEN_MAX, STORE_FORMAT_VERSION};
use crate::group::{AppendKind, Outcome};
use crate::io::{Fs, OpenMode, StdFs};
use crate::lock;
use crate::lock::LOCK_FILE;
use crate::run::Run;
use crate::segment::{Access, NewSegment, Segment, segment_name};
use crate::store_stats::{CommitStats, CommitStatsSnapshot};
use crate::types::{Appended, Config, DamagedRun, ReadPage, RunInfo, RunPage, RunSummary, now_ms};

/// Name of the store's format marker file.
pub const FORMAT_FILE: &str = "FORMAT";
/// How many times an open retries a run directory seen without its segment 1 (see
/// `Store::open_run`).
const OPEN_RETRIES: u32 = 5;
/// Directory where `repair_run` keeps the bytes it cut away.
pub const REPAIR_DIR: &str = "repair";
/// Directory holding one directory per run.
pub const RUNS_DIR: &str = "runs";

/// The store's collector lock file ([`RunLog::lock_collector`]: one gc of the store at a
/// time), created by the first gc.
pub const COLLECTOR_LOCK_FILE: &str = "gc.lock";
const FORMAT_PREFIX: &str = "runlog-store format ";

/// An embedded runlog store. Cheap to clone; `Send + Sync`; share it across threads.
///
/// Several `Store`s (in one or many processes) may open the same directory: every write
/// takes the run's kernel advisory lock and refreshes from disk first. A store opened with
/// [`Store::open_read_only`] reads beside them without ever writing, locking or recovering.
///
/// On a case-insensitive file system (APFS and NTFS by default) two run ids that differ only in
/// case would share one directory; the second is refused, and every call through it fails with
/// [`Error::RunIdCaseConflict`] naming both ids, never touching the existing run
/// (`format/SPEC.md` §1).
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    runs_dir: PathBuf,
    config: Arc<Config>,
    runs: Mutex<HashMap<RunId, Arc<Run>>>,
    stats: Arc<CommitStats>,
    /// [`Access::Read`] for a store opened with [`Store::open_read_only`].
    access: Access,
}

impl Store {
    /// Opens the store at `dir` on the real file system, creating it if `dir` is missing or
    /// empty. Lazy: no run is touched until used.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`]; [`Error::NotAStore`] for a non-empty directory without a
    /// `FORMAT` file; [`Error::UnsupportedVersion`] for another format version; [`Error::Io`].
    pub fn open(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        Store::open_with_fs(Arc::new(StdFs), dir, config)
    }

    /// [`Store::open`] over any [`Fs`] (the simulated one in crash tests).
    pub fn open_with_fs(fs: Arc<dyn Fs>, dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        config.check()?;
        let root = dir.as_ref().to_path_buf();
        init_or_check(fs.as_ref(), &root)?;
        Ok(Store::with_access(fs, root, config, Access::Write))
    }

    /// Opens the existing store at `dir` for reading only, on the real file system.
    ///
    /// Rules (`format/SPEC.md` §8): takes no lock; creates, writes and truncates nothing (no
    /// `FORMAT`, no `runs/`, no lock file, no holder record, no recovery); opens every file
    /// read-only, so it works on a store this user may only read or on a read-only mount.
    /// Each run shows exactly its committed view: what the counters say (the segment headers'
    /// slots and the lock file's commit slots, SPEC §3; a missing lock file leaves the header's
    /// counter as the newest). Bytes past the counter — a torn tail, or batches written but
    /// not yet counted (a process killed between its write and its sync) — are not shown;
    /// adopting or cutting them is the next writer's job (SPEC §6). Reads, `wait` (counter
    /// polling), `run_info`, `list_runs` and `verify_run` work as on a writable store; every
    /// write (`create_run*`, `append_*`, `delete_run`, `repair_run`) fails with
    /// [`Error::ReadOnly`] before anything is touched.
    ///
    /// An empty directory (or one holding only what an interrupted [`Store::open`] leaves:
    /// `runs/`, `FORMAT.tmp`) is an empty store.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`]; [`Error::NotAStore`] when `dir` is not an existing directory
    /// (nothing is created) or is a non-empty directory without a `FORMAT` file;
    /// [`Error::UnsupportedVersion`] for another format version; [`Error::Io`] (e.g. `EACCES`
    /// when `FORMAT` cannot be read).
    pub fn open_read_only(dir: impl AsRef<Path>, config: Config) -> Result<Store> {
        Store::open_read_only_with_fs(Arc::new(StdFs), dir, config)
    }

    /// [`Store::open_read_only`] over any [`Fs`] (the simulated one in crash tests).
    ///
    /// # Errors
    /// As [`Store::open_read_only`].
    pub fn open_read_only_with_fs(
        fs: Arc<dyn Fs>,
        dir: impl AsRef<Path>,
        config: Config,
    ) -> Result<Store> {
        config.check()?;
        let root = dir.as_ref().to_path_buf();
        check_read_only(fs.as_ref(), &root)?;
        Ok(Store::with_access(fs, root, config, Access::Read))
    }

    fn with_access(fs: Arc<dyn Fs>, root: PathBuf, config: Config, access: Access) -> Store {
        Store {
            inner: Arc::new(Inner {
                runs_dir: root.join(RUNS_DIR),
                fs,
                root,
                config: Arc::new(config),
                runs: Mutex::new(HashMap::new()),
                stats: Arc::new(CommitStats::default()),
                access,
            }),
        }
    }

    /// Whether this store was opened with [`Store::open_read_only`] (every write fails with
    /// [`Error::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.access == Access::Read
    }

    /// Refuses `op` on a read-only store, before anything is touched.
    fn check_writable(&self, op: impl FnOnce() -> String) -> Result<()> {
        match self.inner.access {
            Access::Write => Ok(()),
            Access::Read => Err(Error::ReadOnly {
                op: op(),
                path: self.inner.root.clone(),
            }),
        }
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.inner.root
    }

    /// The file system this store reads and writes through.
    pub(crate) fn fs(&self) -> &Arc<dyn Fs> {
        &self.inner.fs
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Counters of group commits in this `Store` handle since it was opened.
    pub fn commit_stats(&self) -> CommitStatsSnapshot {
        self.inner.stats.snapshot()
    }

    fn run_dir(&self, run: &RunId) -> PathBuf {
        self.inner.runs_dir.join(run.as_str())
    }

    /// Creates an empty run; durable when this returns (segment 1 written and synced in a
    /// temporary directory, renamed into place, parent synced; rule 4).
    ///
    /// # Errors
    /// [`Error::RunExists`]; [`Error::RunIdCaseConflict`] when the file system does not
    /// distinguish case and a run whose id differs from `run` only in case exists (nothing is
    /// created); [`Error::DiskFull`], [`Error::Io`]; [`Error::ReadOnly`] on a read-only store.
    pub fn create_run(&self, run: &RunId) -> Result<()> {
        self.create_run_with_meta(run, &[])
    }

    /// [`Store::create_run`] with an opaque metadata blob (≤ 2048 bytes) kept in segment 1's
    /// header, returned by [`Store::run_meta`]. Importers record provenance here.
    ///
    /// # Errors
    /// As `create_run`, plus [`Error::InvalidEvent`] (field `meta`) when `meta` is too long.
    pub fn create_run_with_meta(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        self.check_writable(|| format!("create run {run}"))?;
        if meta.len() > META_LEN_MAX {
            return Err(Error::InvalidEvent {
                field: "meta",
                reason: format!("{} bytes > limit {META_LEN_MAX}", meta.len()),
            });
        }
        let fs = self.inner.fs.as_ref();
        let dir = self.run_dir(run);
        if fs
            .is_dir(&dir)
            .map_err(|e| Error::io("checking", &dir, e))?
        {
            return Err(self.exists_error(run));
        }
        let tmp = self
            .inner
            .runs_dir
            .join(format!(".tmp-{run}-{}", ulid::Ulid::generate()));
        // A concurrent creator (of `run`, or on a case-insensitive file system of an id that
        // differs only in case) may have renamed its run into place since the check above.
        let result = self.build_run_dir(&tmp, run, meta).and_then(|()| {
            fs.rename(&tmp, &dir).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => self.exists_error(run),
                _ => Error::io("renaming into place", &dir, e),
            })
        });
        if let Err(e) = result {
            remove_run_files(fs, &tmp, 1);
            return Err(e);
        }
        fs.sync_dir(&self.inner.runs_dir)
            .map_err(|e| Error::io("syncing", &self.inner.runs_dir, e))
    }

    fn build_run_dir(&self, tmp: &Path, run: &RunId, meta: &[u8]) -> Result<()> {
        let fs = self.inner.fs.as_ref();
        fs.create_dir(tmp)
            .map_err(|e| Error::io("creating", tmp, e))?;
        let now = now_ms();
        Segment::create(
            fs,
            tmp,
            &NewSegment {
                run: run.as_str(),
                index: 1,
                base_seq: 1,
                run_created_at_ms: now,
                now_ms: now,
                meta,
            },
        )?;
        let lock = tmp.join(LOCK_FILE);
        fs.open(&lock, OpenMode::CreateNew)
            .and_then(|_| fs.sync_dir(tmp))
            .map_err(|e| Error::io("creating", lock, e))
    }

    /// Why `create_run(run)` finds `runs/<run>` taken: [`Error::RunIdCaseConflict`] when the
    /// directory belongs to a run whose id differs from `run` only in case, else
    /// [`Error::RunExists`].
    fn exists_error(&self, run: &RunId) -> Error {
        self.case_conflict(run).unwrap_or_else(|| Error::RunExists {
            run: run.to_string(),
        })
    }

    /// [`Error::RunIdCaseConflict`] when the existing directory `runs/<run>` is that of a run
    /// whose id differs from `run` only in case: a case-insensitive file system resolved the
    /// name to it, and its segment 1 header (SPEC §2) names the other id. `None` otherwise,
    /// also when segment 1 is missing or unreadable (the caller's own answer stands). Opens
    /// segment 1 read-only and writes nothing.
    fn case_conflict(&self, run: &RunId) -> Option<Error> {
        let fs = self.inner.fs.as_ref();
        match Segment::open(fs, &self.run_dir(run), run.as_str(), 1, Access::Read) {
            Err(e @ Error::RunIdCaseConflict { .. }) => Some(e),
            _ => None,
        }
    }

    /// Whether the run exists.
    ///
    /// # Errors
    /// [`Error::RunIdCaseConflict`] when the directory `run` names belongs to a run whose id
    /// differs from `run` only in case (a case-insensitive file system); [`Error::Io`].
    pub fn run_exists(&self, run: &RunId) -> Result<bool> {
        let dir = self.run_dir(run);
        let exists = self
            .inner
            .fs
            .is_dir(&dir)
            .map_err(|e| Error::io("checking", dir, e))?;
        match exists.then(|| self.case_conflict(run)).flatten() {
            Some(e) => Err(e),
            None => Ok(exists),
        }
    }

    /// The cached open run, unless another handle or process deleted it since (its lock file
    /// is unlinked: one fstat): then it is dropped, so the caller reopens whatever now exists.
    fn cached(&self, run: &RunId) -> Result<Option<Arc<Run>>> {
        let Some(r) = self.inner.runs.lock().get(run).cloned() else {
            return Ok(None);
        };
        if !r.is_deleted()? {
            return Ok(Some(r));
        }
        self.forget(run, &r);
        Ok(None)
    }

    /// Drops `handle` from the cache when it is still the cached handle of `run`.
    fn forget(&self, run: &RunId, handle: &Arc<Run>) {
        let mut runs = self.inner.runs.lock();
        if runs.get(run).is_some_and(|c| Arc::ptr_eq(c, handle)) {
            runs.remove(run);
        }
    }

    /// Submits an append. A cached handle is used without first asking whether the run was
    /// deleted ([`Self::cached`]'s path lookup, the largest system call of a commit after its
    /// write and sync): the commit asks under the run's lock, before any write. When it finds
    /// the run deleted, nothing was written; the handle leaves the cache and the batch goes
    /// once more to whatever the id names now (the run created again, or `RunNotFound`).
    fn submit(&self, run: &RunId, kind: AppendKind, events: Vec<NewEvent>) -> Result<Outcome> {
        let events = Arc::new(events);
        let cached = self.inner.runs.lock().get(run).cloned();
        if let Some(r) = cached {
            match r.submit(kind, events.clone()) {
                Err(Error::RunNotFound { .. }) if r.is_deleted().unwrap_or(true) => {
                    self.forget(run, &r)
                }
                out => return out,
            }
        }
        self.run(run)?.submit(kind, events)
    }

    /// Why a run cannot be opened when its first segment is absent: `RunNotFound` when its
    /// directory is gone too (deleted, or never created), else `Corrupt`: creation renames a
    /// whole directory with segment 1 into place and deletion renames it away first, so a run
    /// directory without segment 1 was damaged by an outside hand, and is reported, never
    /// hidden (rule 5).
    ///
    /// Concurrent delete and re-create swap whole directories, so "segment 1 absent, directory
    /// present, segment 1 still absent", checked in that order, is damage and not a race.
    fn missing_first_segment(&self, run: &RunId) -> Result<Error> {
        let dir = self.run_dir(run);
        let fs = self.inner.fs.as_ref();
        let first = dir.join(crate::segment::segment_name(1));
        let absent = || match fs.open(&first, OpenMode::Read) {
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(Error::io("opening segment", &first, e)),
        };
        let exists = absent()?
            && fs
                .is_dir(&dir)
                .map_err(|e| Error::io("checking", &dir, e))?
            && absent()?;
        Ok(match exists {
            true => Error::corrupt(
                run.as_str(),
                crate::segment::segment_name(1),
                0,
                "the run directory exists but its first segment is missing",
            ),
            false => Error::RunNotFound {
                run: run.to_string(),
            },
        })
    }

    /// Opens a run from its files. A directory seen without its segment 1 is damage only if
    /// it stays so: a delete and re-create racing this open swap whole directories and can
    /// make one look like that for a moment, so the open is retried a few times (a few ms
    /// apart) before the run is reported `Corrupt`.
    fn open_run(&self, run: &RunId) -> Result<Run> {
        let mut last = None;
        for attempt in 0..OPEN_RETRIES {
            if attempt > 0 {
                self.inner.fs.sleep(Duration::from_millis(2 << attempt));
            }
            let open = |access| {
                Run::open(
                    self.inner.fs.clone(),
                    self.run_dir(run),
                    run.clone(),
                    self.inner.config.clone(),
                    self.inner.stats.clone(),
                    access,
                )
            };
            let mut opened = open(self.inner.access);
            // A run whose files this user may read but not write (another user's, in a
            // store this user writes): its reads are served, and its writes refused with the
            // error opening it for writing met (`EACCES`), instead of every read failing too.
            let denied = match &opened {
                Err(Error::Io { op, path, source })
                    if self.inner.access == Access::Write
                        && source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    source.raw_os_error().map(|code| (*op, path.clone(), code))
                }
                _ => None,
            };
            if let Some((op, path, code)) = denied
                && let Ok(readable) = open(Access::Read)
            {
                opened = Ok(readable.refusing_writes(op, path, code));
            }
            match opened {
                Err(Error::RunNotFound { .. }) => match self.missing_first_segment(run)? {
                    e @ Error::Corrupt { .. } => last = Some(e),
                    other => return Err(other),
                },
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| Error::RunNotFound {
            run: run.to_string(),
        }))
    }

    /// The open run, from the cache or loaded from disk.
    pub(crate) fn run(&self, run: &RunId) -> Result<Arc<Run>> {
        if let Some(r) = self.cached(run)? {
            return Ok(r);
        }
        let loaded = Arc::new(self.open_run(run)?);
        let mut runs = self.inner.runs.lock();
        let handle = runs.entry(run.clone()).or_insert(loaded).clone();
        let closed = match runs.len() > self.inner.config.open_runs_max {
            true => close_idle_runs(&mut runs, self.inner.config.open_runs_max * 3 / 4),
            false => Vec::new(),
        };
        drop(runs);
        // Closing a run writes its summary (format/SPEC.md §10): not under the cache's lock.
        drop(closed);
        Ok(handle)
    }

    /// Appends facts (unfenced). Each event whose key or caller-supplied event id already
    /// exists in the run appends nothing and reports the original seq; the others are
    /// committed as one atomic batch at the next seqs. Returns one [`Appended`] per input, in
    /// order, after the batch is fdatasync'd (rule 4).
    ///
    /// # Errors
    /// [`Error::InvalidEvent`] (bounds; nothing written), [`Error::RunNotFound`],
    /// [`Error::Busy`], [`Error::Corrupt`], [`Error::DiskFull`], [`Error::Poisoned`], [`Error::Io`];
    /// [`Error::ReadOnly`] on a read-only store (checked first; nothing opened or written).
    pub fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        self.check_writable(|| format!("append to run {run}"))?;
        match self.submit(run, AppendKind::Facts, events)? {
            Outcome::Facts(a) => Ok(a),
            Outcome::Decisions(s) => Ok(s
                .into_iter()
                .map(|seq| Appended {
                    seq,
                    duplicate: false,
                })
                .collect()),
        }
    }

    /// Appends a decision batch fenced at `expected_seq`: committed atomically at
    /// `expected_seq + 1 ..` iff the run's last seq equals `expected_seq` at commit, checked
    /// under the run's serializer and lock (rules 1–3). Returns the assigned seqs.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the log is not at `expected_seq` — nothing written, no file
    /// or counter touched (rule 2); [`Error::DuplicateDecision`] when a key or caller event
    /// id already exists; and the errors of [`Store::append_facts`].
    pub fn append_decisions(
        &self,
        run: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        self.check_writable(|| format!("append to run {run}"))?;
        let kind = AppendKind::Decisions {
            expected: expected_seq,
        };
        match self.submit(run, kind, events)? {
            Outcome::Decisions(s) => Ok(s),
            Outcome::Facts(a) => Ok(a.into_iter().map(|a| a.seq).collect()),
        }
    }

    /// Reads up to `limit` events after seq `after`, in seq order. Every batch's checksum and
    /// the density of seqs are checked on every read (rule 5); a read after N is complete by
    /// density (rule 6); only committed events are returned (rule 7).
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Corrupt`] (run, segment file, byte offset), [`Error::Io`].
    pub fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        self.run(run)?.read(after, limit)
    }

    /// Like [`Store::read`], but hands each event to `f` as an [`EventRef`] borrowed from the
    /// mapped segment (nothing allocated or reference-counted per event) instead of
    /// collecting owned events: for callers that fold events into their own state (replay)
    /// or stream them out. Same checks (rules 5–7). Returns `(next, has_more)`: the cursor
    /// (the last seq handed to `f`, or `after` when none) and whether events follow it.
    ///
    /// When a later batch of the page fails its checks, `f` has already seen the events
    /// before it; the error names run, segment file and byte offset as for `read`.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Corrupt`], [`Error::Io`].
    pub fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        mut f: impl FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        self.run(run)?.read_each(after, limit, &mut f)
    }

    /// The run's last committed seq (0 when empty).
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Io`]; [`Error::Corrupt`] (run, segment file, byte
    /// offset) when the run is damaged: its log cannot be followed to its end, so the seq the
    /// readable events end at is not reported as the run's (rule 5: never a silently shorter
    /// log). [`Store::read`] still returns every event before the damage.
    pub fn last_seq(&self, run: &RunId) -> Result<Seq> {
        self.run(run)?.last_seq()
    }

    /// Waits until the run's last seq exceeds `after`, at most `timeout`; returns the last
    /// seq (≤ `after` on timeout). Woken at once by commits in this process; other
    /// processes' commits are seen by polling the counter every `Config::wait_poll_interval`.
    ///
    /// # Errors
    /// [`Error::RunNotFound`] when the run does not exist or is deleted while waiting (a run
    /// re-created under the same id is a new log); [`Error::Corrupt`] when the run is damaged
    /// (as [`Store::last_seq`]), [`Error::Io`].
    pub fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        self.run(run)?.wait(after, timeout)
    }

    /// Last seq, committed bytes, created/updated times and segment count.
    ///
    /// # Errors
    /// As [`Store::last_seq`]: a damaged run is [`Error::Corrupt`], never the info of the
    /// events before the damage.
    pub fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        self.run(run)?.info()
    }

    /// What a listing shows of events `1..=upto` of a run (`upto`: normally the last seq of
    /// its [`RunInfo`], so the summary and the info describe one view): event count, first and
    /// last event times, the distinct kinds in order of first occurrence. From the run's
    /// summary file (format/SPEC.md §10) when it is valid and covers exactly `upto`: then the
    /// run is not opened and only the summary and its last batch are read. Else from the
    /// summary and the events after it, or from a scan of the whole log, with every check of a
    /// read. A writable store writes the summary when it closes a run.
    ///
    /// # Errors
    /// Those of [`Store::read`].
    pub fn run_summary(&self, run: &RunId, upto: Seq) -> Result<RunSummary> {
        if self.cached(run)?.is_none() {
            let fs = self.inner.fs.as_ref();
            let dir = self.run_dir(run);
            if let Some(first) = Segment::open(fs, &dir, run.as_str(), 1, Access::Read)?
                && let Some(s) = crate::run::load_summary(fs, &dir, run.as_str(), first.header.salt)
                    .filter(|s| s.last_seq == upto)
            {
                return Ok(s.into());
            }
        }
        Ok(self.run(run)?.summary(upto)?.into())
    }

    /// The metadata blob given at creation (empty if none).
    pub fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        Ok(self.run(run)?.meta())
    }

    /// Lists runs in id order after `after` (exclusive), at most `limit`. Takes no run lock
    /// (rule 8); runs created or deleted concurrently may or may not appear. A run whose files
    /// cannot be read (damaged, its first segment missing, unreadable) does not hide the
    /// others: it is listed in [`RunPage::damaged`] with its error, in id order, and counts
    /// toward `limit`.
    ///
    /// # Errors
    /// [`Error::Io`] when the runs directory cannot be listed.
    pub fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        let dir = &self.inner.runs_dir;
        let names = match self.inner.fs.read_dir(dir) {
            Ok(names) => names,
            // A read-only open does not create `runs/` (a writable open makes sure it exists):
            // a store without it has no runs.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.is_read_only() => Vec::new(),
            Err(e) => return Err(Error::io("listing", dir, e)),
        };
        let mut ids: Vec<RunId> = names.iter().filter_map(|n| RunId::new(n).ok()).collect();
        ids.sort();
        let start = after.map_or(0, |a| ids.partition_point(|id| id <= a));
        let (mut runs, mut damaged, mut next) = (Vec::new(), Vec::new(), None);
        let mut rest = ids[start..].iter();
        while runs.len() + damaged.len() < limit {
            let Some(id) = rest.next() else { break };
            match self.peek_info(id) {
                Ok(info) => runs.push(info),
                Err(Error::RunNotFound { .. }) => continue,
                Err(e) => damaged.push(DamagedRun {
                    run: id.clone(),
                    error: e.to_string(),
                    corrupt: !e.is_environment(),
                }),
            }
            next = Some(id.clone());
        }
        Ok(RunPage {
            next,
            has_more: rest.len() > 0,
            runs,
            damaged,
        })
    }

    /// Run info for listing: from the open run when cached (`Corrupt` when its view found the
    /// run damaged, as [`Store::run_info`]), else from the segment headers and counters alone
    /// — no lock, no batch scan, no caching (rule 8; and listing 100k runs does not load 100k
    /// runs). Reflects the counters on disk. Opens every file read-only.
    fn peek_info(&self, run: &RunId) -> Result<RunInfo> {
        if let Some(r) = self.cached(run)? {
            return r.info();
        }
        let fs = self.inner.fs.as_ref();
        let dir = self.run_dir(run);
        let mut seg = match Segment::open(fs, &dir, run.as_str(), 1, Access::Read)? {
            Some(seg) => seg,
            // Rare: damage, or a delete and re-create racing this listing; the full open
            // tells the two apart.
            None => return self.open_run(run).and_then(|r| r.info()),
        };
        let created_at_ms = seg.header.run_created_at_ms;
        let (mut segment_count, mut committed_bytes) = (1u32, 0u64);
        let lock = lock::open_for_counters(fs, &dir.join(crate::lock::LOCK_FILE))?;
        loop {
            let slot = seg
                .read_counter_in_chain(fs, run.as_str(), lock.as_deref())?
                .newest;
            let file_len = seg.len()?;
            if slot.committed_len > file_len {
                let detail = format!(
                    "file is {file_len} bytes, counter says {}",
                    slot.committed_len
                );
                return Err(Error::corrupt(run.as_str(), &seg.name, file_len, detail));
            }
            committed_bytes = committed_bytes.saturating_add(slot.committed_len - HEADER_LEN);
            let next = if slot.sealed {
                let index = seg.header.segment_index + 1;
                Segment::open_after_seal(fs, &dir, run.as_str(), index, Access::Read)?
            } else {
                None
            };
            match next {
                Some(n) => {
                    seg = n;
                    segment_count += 1;
                }
                None => {
                    return Ok(RunInfo {
                        run: run.clone(),
                        last_seq: slot.last_seq,
                        committed_bytes,
                        created_at_ms,
                        updated_at_ms: slot.updated_at_ms,
                        segment_count,
                    });
                }
            }
        }
    }

    /// Deletes a run: through the run's serializer (no group commit of this process is in
    /// flight, so none can roll a segment into a run re-created under the same id) and under
    /// its kernel lock, renames its directory away (synced), removes its files, and unlinks
    /// the lock file last so a waiting writer sees the run is gone.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Busy`], [`Error::Io`]; [`Error::ReadOnly`] on a
    /// read-only store.
    pub fn delete_run(&self, run: &RunId) -> Result<()> {
        self.check_writable(|| format!("delete run {run}"))?;
        let handle = self.run(run)?;
        let grave = handle.exclusive(|| self.delete_locked(run, &handle, None))?;
        grave.remove(self.inner.fs.as_ref());
        Ok(())
    }

    /// Deletes a run as [`Store::delete_run`] does, only while its last seq is
    /// `expected_last_seq`: checked after a refresh under the run's write lock (in-process
    /// writer and kernel lock, which every commit holds), so no append commits between the
    /// check and the delete ([`RunLog::delete_run_at`]).
    ///
    /// # Errors
    /// [`Error::Fenced`] when the log's last seq differs (nothing deleted); [`Error::Corrupt`]
    /// when the run is damaged, so that its last seq cannot be known (nothing deleted;
    /// [`Store::delete_run`] deletes it); as [`Store::delete_run`] otherwise.
    pub fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()> {
        self.check_writable(|| format!("delete run {run}"))?;
        let handle = self.run(run)?;
        let grave =
            handle.exclusive(|| self.delete_locked(run, &handle, Some(expected_last_seq)))?;
        grave.remove(self.inner.fs.as_ref());
        Ok(())
    }

    /// The body of [`Store::delete_run`], with the run's writer and kernel lock held; with
    /// `expected`, only while the run's last seq is that. Returns the renamed-away directory,
    /// whose files the caller removes once the locks are released (rule 8: a leftover file
    /// may have to be found by listing it).
    fn delete_locked(&self, run: &RunId, handle: &Run, expected: Option<Seq>) -> Result<Grave> {
        let fs = self.inner.fs.as_ref();
        if handle.is_deleted()? {
            return Err(Error::RunNotFound {
                run: run.to_string(),
            });
        }
        handle.refresh()?;
        if let Some(expected) = expected {
            let actual = handle.last_seq()?;
            if actual != expected {
                return Err(Error::Fenced {
                    run: run.to_string(),
                    expected,
                    actual,
                });
            }
        }
        let grave = self
            .inner
            .runs_dir
            .join(format!(".deleted-{run}-{}", ulid::Ulid::generate()));
        fs.rename(&handle.dir, &grave)
            .map_err(|e| Error::io("renaming away", &handle.dir, e))?;
        self.inner.runs.lock().remove(run);
        fs.sync_dir(&self.inner.runs_dir)
            .map_err(|e| Error::io("syncing", &self.inner.runs_dir, e))?;
        let segments = handle.segment_paths().len() as u32 + 1;
        Ok(Grave {
            dir: grave,
            segments,
        })
    }

    /// Repairs a damaged run, only when asked: cuts it at its first bad batch so that it holds
    /// exactly the events before the damage and takes writes again. The bytes cut away are
    /// first kept, synced, in `<store>/repair/<run>-<ulid>.cut` (named in the result; never
    /// deleted). Returns `Ok(None)` when the run is not damaged (nothing changed).
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Busy`], [`Error::Corrupt`] when the damage cannot be
    /// cut (in a sealed segment, or the run's first segment), [`Error::Io`];
    /// [`Error::ReadOnly`] on a read-only store.
    pub fn repair_run(&self, run: &RunId) -> Result<Option<crate::run::Repair>> {
        self.check_writable(|| format!("repair run {run}"))?;
        let dir = self.inner.root.join(REPAIR_DIR);
        create_dir_racing(self.inner.fs.as_ref(), &dir)?;
        let saved = dir.join(format!("{run}-{}.cut", ulid::Ulid::generate()));
        let handle = self.run(run)?;
        let done = handle.exclusive(|| handle.repair(&saved))?;
        // Readers of this process reopen the run from its files.
        self.inner.runs.lock().remove(run);
        if done.is_none() {
            // The repair reads the last segment's batches; a sealed segment it takes from its
            // index. Damage there is never cut (it would orphan the segments after it), and
            // never answered with "nothing to repair" either: what verify finds is refused.
            let report = self.verify_run(run)?;
            if let Some(p) = report.problems.first() {
                let last = segment_name(handle.segment_paths().len() as u32);
                let which = match p.segment == last {
                    true => "found by verify",
                    false => "damage in a sealed segment",
                };
                return Err(Error::corrupt(
                    run.as_str(),
                    &p.segment,
                    p.offset,
                    format!("{} ({which}: not repaired automatically)", p.detail),
                ));
            }
        }
        Ok(done)
    }

    /// Writes again each lost seal of a run: the header slot of a sealed segment that says the
    /// chain goes on, damaged, zeroed or holding an older copy while its events and the
    /// segments after it are intact, which every read of the run reports as
    /// [`Error::Corrupt`] rather than end the run early. The seal is found from the segment's
    /// batches, read with every check of a read: they must end exactly at the seq before the
    /// next segment's base seq, with only zeros after them; nothing is cut or lost. Returns the seals written (none when no seal
    /// is lost). Run before [`Store::repair_run`], which never cuts a sealed segment.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::Busy`], [`Error::Io`]; [`Error::Corrupt`] when a
    /// segment's batches do not give its seal (damage there too: nothing is written for it);
    /// [`Error::ReadOnly`] on a read-only store.
    pub fn restore_seals(&self, run: &RunId) -> Result<Vec<crate::run::SealRestored>> {
        self.check_writable(|| format!("restore the seals of run {run}"))?;
        let restored = crate::run::restore_lost_seals(
            self.inner.fs.as_ref(),
            &self.run_dir(run),
            run.as_str(),
            self.inner.config.lock_timeout,
        )?;
        if !restored.is_empty() {
            // Views of this process that failed on the lost seal read the run again.
            self.inner.runs.lock().remove(run);
        }
        Ok(restored)
    }

    /// Checks every byte of a run's files independently of the cache: header and counter
    /// checksums, every batch checksum, density, the segment chain, counters vs content.
    ///
    /// # Errors
    /// [`Error::RunNotFound`], [`Error::RunIdCaseConflict`], [`Error::Io`]; problems found are
    /// in the report, not errors.
    pub fn verify_run(&self, run: &RunId) -> Result<crate::verify::VerifyReport> {
        crate::verify::verify_run(
            self.inner.fs.as_ref(),
            &self.run_dir(run),
            run,
            crate::format::BATCH_LEN_READ_MAX,
        )
    }
}

/// Closes runs nobody else holds until at most `keep` remain. Safe at any time: every write
/// refreshes from the files under the run lock, so a run reopened later (or still held by an
/// in-flight call) stays consistent. Poisoned runs stay (they refuse writes until reopen).
/// Returns the closed handles, for the caller to drop after releasing the cache.
fn close_idle_runs(runs: &mut HashMap<RunId, Arc<Run>>, keep: usize) -> Vec<Arc<Run>> {
    let idle: Vec<RunId> = runs
        .iter()
        .filter(|(_, r)| Arc::strong_count(r) == 1 && !r.is_poisoned())
        .map(|(id, _)| id.clone())
        .take(runs.len().saturating_sub(keep))
        .collect();
    idle.iter().filter_map(|id| runs.remove(id)).collect()
}

/// A deleted run's directory, renamed away (`runs/.deleted-<run>-<ulid>`), with the number
/// of segments it may hold.
#[must_use = "a grave's files are removed by `remove`"]
struct Grave {
    dir: PathBuf,
    segments: u32,
}

impl Grave {
    /// Removes its files and itself, best effort; with no lock held, it may list itself to
    /// find what a writer killed mid-write left under a name of its own (an index's
    /// `seg-N.idx.tmp-<ulid>`), which would otherwise keep the directory forever.
    fn remove(self, fs: &dyn Fs) {
        remove_run_files(fs, &self.dir, self.segments);
        if fs.is_dir(&self.dir).unwrap_or(false) {
            for name in fs.read_dir(&self.dir).unwrap_or_default() {
                let _ = fs.remove_file(&self.dir.join(name));
            }
            let _ = fs.remove_dir(&self.dir);
        }
    }
}

/// Removes the files runlog puts in a run directory (segments `1..=segments`, their temp
/// names, the lock file last), then the directory. Best effort: a leftover dot-named
/// directory is never listed as a run. Lists no directory (rule 8).
pub(crate) fn remove_run_files(fs: &dyn Fs, dir: &Path, segments: u32) {
    for i in 1..=segments {
        let name = segment_name(i);
        let _ = fs.remove_file(&dir.join(&name));
        let _ = fs.remove_file(&dir.join(format!("{name}.tmp")));
        let _ = fs.remove_file(&dir.join(crate::segment::index_name(i)));
    }
    let _ = fs.remove_file(&dir.join(crate::run::CUT_MARKER));
    let _ = fs.remove_file(&dir.join(crate::run::SUMMARY_FILE));
    let _ = fs.remove_file(&dir.join(LOCK_FILE));
    let _ = fs.remove_dir(dir);
}

/// The read-only counterpart of [`init_or_check`]: checks that `root` is a store (or an empty
/// or half-created one, which a writable open would initialize) and creates nothing.
fn check_read_only(fs: &dyn Fs, root: &Path) -> Result<()> {
    if !fs
        .is_dir(root)
        .map_err(|e| Error::io("checking", root, e))?
    {
        return Err(Error::NotAStore {
            path: root.to_path_buf(),
            detail: "not an existing directory (a read-only open creates nothing)".to_string(),
        });
    }
    let format = root.join(FORMAT_FILE);
    match read_small(fs, &format) {
        Ok(text) => return check_format(&format, &text),
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(Error::io("reading", &format, e));
        }
        Err(_) => {}
    }
    let entries = fs
        .read_dir(root)
        .map_err(|e| Error::io("listing", root, e))?;
    if entries
        .iter()
        .any(|n| n != RUNS_DIR && n != REPAIR_DIR && !n.starts_with(FORMAT_FILE))
    {
        return Err(Error::NotAStore {
            path: root.to_path_buf(),
            detail: format!("directory is not empty and has no {FORMAT_FILE} file"),
        });
    }
    Ok(())
}

/// Creates the store layout in an empty or missing directory, or checks the `FORMAT` file.
fn init_or_check(fs: &dyn Fs, root: &Path) -> Result<()> {
    let format = root.join(FORMAT_FILE);
    match read_small(fs, &format) {
        Ok(text) => {
            check_format(&format, &text)?;
            // A store is only usable with runs/; FORMAT is written after runs/ is durable,
            // so a missing runs/ means the directory was damaged outside runlog: recreate it.
            ensure_runs_dir(fs, root)?;
            // An earlier open may have failed at a directory sync, leaving FORMAT or runs/
            // live but not durable: make the layout durable before any run is built on it.
            return fs.sync_dir(root).map_err(|e| Error::io("syncing", root, e));
        }
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(Error::io("reading", &format, e));
        }
        Err(_) => {}
    }
    create_dir_all(fs, root)?;
    let entries = fs
        .read_dir(root)
        .map_err(|e| Error::io("listing", root, e))?;
    if entries
        .iter()
        .any(|n| n != RUNS_DIR && n != REPAIR_DIR && !n.starts_with(FORMAT_FILE))
    {
        return Err(Error::NotAStore {
            path: root.to_path_buf(),
            detail: format!("directory is not empty and has no {FORMAT_FILE} file"),
        });
    }
    create_dir_racing(fs, &root.join(RUNS_DIR))?;
    // A temp name of its own: concurrent creators of one store each write a complete FORMAT
    // and rename it into place; the renames replace each other atomically with equal content.
    let tmp = root.join(format!("{FORMAT_FILE}.tmp-{}", ulid::Ulid::generate()));
    let text = format!("{FORMAT_PREFIX}{STORE_FORMAT_VERSION}\n");
    let write = || -> io::Result<()> {
        let f = fs.open(&tmp, OpenMode::CreateTruncate)?;
        f.write_all_at(text.as_bytes(), 0)?;
        f.sync_all()?;
        fs.rename(&tmp, &format)?;
        fs.sync_dir(root)
    };
    write().map_err(|e| {
        let _ = fs.remove_file(&tmp);
        Error::io("creating", &format, e)
    })
}

/// Creates `runs/` if missing and makes it durable before anything depends on it.
fn ensure_runs_dir(fs: &dyn Fs, root: &Path) -> Result<()> {
    let runs = root.join(RUNS_DIR);
    if fs
        .is_dir(&runs)
        .map_err(|e| Error::io("checking", &runs, e))?
    {
        return Ok(());
    }
    create_dir_racing(fs, &runs)?;
    fs.sync_dir(root).map_err(|e| Error::io("syncing", root, e))
}

/// Creates a directory that a concurrent creator may create at the same moment: one that
/// already exists is fine.
fn create_dir_racing(fs: &dyn Fs, dir: &Path) -> Result<()> {
    match fs.create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(Error::io("creating", dir, e)),
        _ => Ok(()),
    }
}

fn check_format(path: &Path, text: &str) -> Result<()> {
    let version = text
        .strip_prefix(FORMAT_PREFIX)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or_else(|| Error::NotAStore {
            path: path.to_path_buf(),
            detail: format!("{FORMAT_FILE} does not start with {FORMAT_PREFIX:?}"),
        })?;
    if version != STORE_FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: STORE_FORMAT_VERSION,
        });
    }
    Ok(())
}

fn read_small(fs: &dyn Fs, path: &Path) -> io::Result<String> {
    let f = fs.open(path, OpenMode::Read)?;
    let mut buf = vec![0u8; 256];
    let n = f.read_at(&mut buf, 0)?;
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn create_dir_all(fs: &dyn Fs, dir: &Path) -> Result<()> {
    if fs.is_dir(dir).map_err(|e| Error::io("checking", dir, e))? {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all(fs, parent)?;
    }
    match fs.create_dir(dir) {
        Ok(()) => sync_parent(fs, dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io("creating", dir, e)),
    }
}

/// Makes the entry of `path` in its parent durable (rule 4: a new file or directory is durable
/// only after its parent directory is synced).
fn sync_parent(fs: &dyn Fs, path: &Path) -> Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs.sync_dir(parent)
        .map_err(|e| Error::io("syncing", parent, e))
}

/// The file store as a [`RunLog`] backend: each operation is the inherent method of the same
/// name (`create_run` is [`Store::create_run_with_meta`]).
impl RunLog for Store {
    fn create_run(&self, run: &RunId, meta: &[u8]) -> Result<()> {
        self.create_run_with_meta(run, meta)
    }
    fn append_facts(&self, run: &RunId, events: Vec<NewEvent>) -> Result<Vec<Appended>> {
        Store::append_facts(self, run, events)
    }
    fn append_decisions(
        &self,
        run: &RunId,
        expected: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Seq>> {
        Store::append_decisions(self, run, expected, events)
    }
    fn read(&self, run: &RunId, after: Seq, limit: usize) -> Result<ReadPage> {
        Store::read(self, run, after, limit)
    }
    fn read_each(
        &self,
        run: &RunId,
        after: Seq,
        limit: usize,
        f: &mut dyn FnMut(EventRef<'_>),
    ) -> Result<(Seq, bool)> {
        self.run(run)?.read_each(after, limit, f)
    }
    fn last_seq(&self, run: &RunId) -> Result<Seq> {
        Store::last_seq(self, run)
    }
    fn wait(&self, run: &RunId, after: Seq, timeout: Duration) -> Result<Seq> {
        Store::wait(self, run, after, timeout)
    }
    fn run_info(&self, run: &RunId) -> Result<RunInfo> {
        Store::run_info(self, run)
    }
    fn run_meta(&self, run: &RunId) -> Result<Vec<u8>> {
        Store::run_meta(self, run)
    }
    fn list_runs(&self, after: Option<&RunId>, limit: usize) -> Result<RunPage> {
        Store::list_runs(self, after, limit)
    }
    fn delete_run(&self, run: &RunId) -> Result<()> {
        Store::delete_run(self, run)
    }
    fn delete_run_at(&self, run: &RunId, expected_last_seq: Seq) -> Result<()> {
        Store::delete_run_at(self, run, expected_last_seq)
    }
    fn verify_run(&self, run: &RunId) -> Result<crate::verify::VerifyReport> {
        Store::verify_run(self, run)
    }
    fn lock_collector(&self) -> Result<crate::CollectorLock> {
        self.check_writable(|| "collect runs".to_string())?;
        let path = self.inner.root.join(COLLECTOR_LOCK_FILE);
        let what = "another gc of this store";
        let guard = crate::lock::lock_file_now(self.inner.fs.as_ref(), &path, what)?;
        Ok(crate::CollectorLock::new(guard))
    }
}
