//! The `Store` class: a runlog store as a Promise API, on either backend: a file store
//! directory (`runlog::Store`) or PostgreSQL (`runlog_pg::PgLog`, opened when the target is
//! a `postgres://` or `postgresql://` URL, as `runlog_pg::Target` classifies it;
//! `?schema=NAME` picks the schema; opened by `open::open_target`). Every call but
//! `commitStats` goes through the backend-neutral `runlog::RunLog` contract, so it means the
//! same on both; `commitStats` reads the file store's group commit counters and throws
//! `UNSUPPORTED` on PostgreSQL.
//!
//! Every method but `commitStats` returns a promise, checks its arguments first (a bad one
//! rejects with `INVALID_INPUT` before anything is queued), then runs the store call on the
//! addon's own threads (`pool`). Seqs, counts, times and byte lengths are JavaScript numbers:
//! inputs must be non-negative integers ≤ `Number.MAX_SAFE_INTEGER`, and an output beyond it
//! (2^53 events in one run: not reachable in practice) rejects with `OUT_OF_RANGE` rather
//! than lose precision.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::{ToNapiValue, Unknown};
use napi_derive::napi;
use runlog::{Config, NewEvent, RunId};
use runlog_world::Retention;

use crate::call::{WAIT_TIMEOUT_MS_MAX, call, wait_sliced};
use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::event_page::page_cache_bytes_from_env;
use crate::handle::{Backend, Lease, Shared};
use crate::js::{Arg, IntoJs, Raw, entry, spawn};
use crate::open::{Access, is_postgres, open_target};
use crate::out::{
    AppendedOut, EventsPage, InfoOut, MetaOut, Number, Numbers, RunsPage, Unit, VerifyOut,
};
use crate::pool::{self, Pool};

/// Default `limit` of `read` and `listRuns`.
const PAGE_DEFAULT: u64 = 1000;
/// Largest `limit` of `read` and `listRuns` (bounds one page's memory).
const PAGE_MAX: u64 = 100_000;
/// Longest default `retention.intervalMs`: a pass a minute (or every `finishedOlderThanMs`,
/// when shorter), so a run is collected at most a minute late.
const RETENTION_INTERVAL_DEFAULT_MS_MAX: u64 = 60_000;

/// An open runlog store (`Store.open` / `Store.openReadOnly`).
#[napi(js_name = "Store")]
pub struct JsStore {
    shared: Arc<Shared>,
}

impl IntoJs for JsStore {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.into_unknown(env)
    }
}

fn run_id(arg: &Arg<'_>) -> Result<RunId, BindError> {
    let s = arg.string()?;
    RunId::new(&s).map_err(BindError::from)
}

fn optional<'a>(value: Option<Unknown<'a>>, name: &str) -> Option<Arg<'a>> {
    value.map(|v| Arg::new(v, name))
}

/// `Config` from the `options` object of `open`, and its `retention` option (not resolved);
/// unknown keys are rejected.
fn config(options: Option<Arg<'_>>) -> Result<(Config, Option<Arg<'_>>), BindError> {
    let mut c = Config::default();
    let Some(o) = options else {
        return Ok((c, None));
    };
    if o.is_nullish()? {
        return Ok((c, None));
    }
    o.only_keys(&[
        "payloadLenBytesMax",
        "batchLenBytesMax",
        "batchEventsMax",
        "segmentLenBytesMax",
        "lockTimeoutMs",
        "waitPollIntervalMs",
        "openRunsMax",
        "preallocateFromBytes",
        "retention",
    ])?;
    let max = MAX_SAFE_INTEGER;
    c.payload_len_bytes_max = o
        .get("payloadLenBytesMax")?
        .uint_or(c.payload_len_bytes_max as u64, max)? as usize;
    c.batch_len_bytes_max = o
        .get("batchLenBytesMax")?
        .uint_or(c.batch_len_bytes_max.into(), u32::MAX.into())? as u32;
    c.batch_events_max = o
        .get("batchEventsMax")?
        .uint_or(c.batch_events_max as u64, max)? as usize;
    c.segment_len_bytes_max = o
        .get("segmentLenBytesMax")?
        .uint_or(c.segment_len_bytes_max, max)?;
    let ms = |d: Duration| d.as_millis() as u64;
    c.lock_timeout =
        Duration::from_millis(o.get("lockTimeoutMs")?.uint_or(ms(c.lock_timeout), max)?);
    c.wait_poll_interval = Duration::from_millis(
        o.get("waitPollIntervalMs")?
            .uint_or(ms(c.wait_poll_interval), max)?,
    );
    c.open_runs_max = o.get("openRunsMax")?.uint_or(c.open_runs_max as u64, max)? as usize;
    let prealloc = o.get("preallocateFromBytes")?;
    // `null` turns preallocation off (u64::MAX, which a JavaScript number cannot hold).
    c.preallocate_from_bytes = if prealloc.type_is_null()? {
        u64::MAX
    } else {
        prealloc.uint_or(c.preallocate_from_bytes, max)?
    };
    let retention = o.get("retention")?;
    Ok((c, (!retention.is_nullish()?).then_some(retention)))
}

/// The `retention` option of `open` (`{finishedOlderThanMs, intervalMs?, archiveDir?}`) for
/// the store at `dir` opened as `access`: `archiveDir` defaults to `<dir>/archive` (the
/// CLI's `runlog gc` default) and is required on PostgreSQL; `intervalMs` defaults to
/// `finishedOlderThanMs`, at most a minute. Both times are whole ms, at least 1.
fn retention(r: &Arg<'_>, dir: &str, access: Access) -> Result<Retention, BindError> {
    r.only_keys(&["finishedOlderThanMs", "intervalMs", "archiveDir"])?;
    let at_least_1 = |arg: Arg<'_>, default: Option<u64>| -> Result<u64, BindError> {
        let n = match default {
            Some(d) => arg.uint_or(d, MAX_SAFE_INTEGER)?,
            None => arg.uint(MAX_SAFE_INTEGER)?,
        };
        match n {
            0 => Err(BindError::invalid(arg.name, "must be at least 1 (ms)")),
            n => Ok(n),
        }
    };
    let older = at_least_1(r.get("finishedOlderThanMs")?, None)?;
    let interval = at_least_1(
        r.get("intervalMs")?,
        Some(older.min(RETENTION_INTERVAL_DEFAULT_MS_MAX)),
    )?;
    let archive = r.get("archiveDir")?;
    let archive_dir = match archive.opt_string()? {
        Some(d) if d.is_empty() => {
            return Err(BindError::invalid(archive.name, "must not be empty"));
        }
        Some(d) => PathBuf::from(d),
        None if is_postgres(dir) => {
            return Err(BindError::invalid(
                archive.name,
                "required on a PostgreSQL store (it has no directory of its own)",
            ));
        }
        None => Path::new(dir).join("archive"),
    };
    if access == Access::Read {
        return Err(BindError::invalid(
            r.name.clone(),
            "needs a writable store: Store.openReadOnly collects nothing",
        ));
    }
    Ok(Retention {
        finished_older_than_ms: older,
        interval_ms: interval,
        archive_dir,
    })
}

/// One element of an `events` array.
fn new_event(arg: &Arg<'_>) -> Result<NewEvent, BindError> {
    arg.only_keys(&[
        "kind",
        "payload",
        "correlationId",
        "key",
        "eventId",
        "createdAt",
    ])?;
    let mut e = NewEvent::new(arg.get("kind")?.string()?, arg.get("payload")?.bytes()?);
    if let Some(c) = arg.get("correlationId")?.opt_string()? {
        e = e.correlation_id(c);
    }
    if let Some(k) = arg.get("key")?.opt_string()? {
        e = e.key(k);
    }
    let id = arg.get("eventId")?;
    if let Some(s) = id.opt_string()? {
        let ulid = ulid::Ulid::from_string(&s)
            .map_err(|err| BindError::invalid(id.name.clone(), format!("not a ULID: {err}")))?;
        e = e.event_id(ulid);
    }
    let created = arg.get("createdAt")?;
    if !created.is_nullish()? {
        e = e.created_at_ms(created.uint(MAX_SAFE_INTEGER)?);
    }
    Ok(e)
}

fn events(arg: &Arg<'_>) -> Result<Vec<NewEvent>, BindError> {
    arg.array_items()?.iter().map(new_event).collect()
}

impl JsStore {
    /// [`call`] with this store's lease: `work` reaches the store through `Lease::store`.
    fn call<A, T>(
        &self,
        env: &Env,
        lane: &'static Pool,
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&Lease, A) -> Result<T, BindError> + Send + 'static,
    ) -> napi::Result<Raw>
    where
        A: Send + 'static,
        T: IntoJs,
    {
        call(env, lane, || self.shared.lease(), args, work)
    }
}

#[napi]
impl JsStore {
    /// `Store.open(target, options?) → Promise<Store>`: opens (creating if missing or empty)
    /// the file store at directory `target`, or the PostgreSQL store when `target` is a
    /// `postgres://`/`postgresql://` URL (creating its tables; `?schema=NAME` picks the
    /// schema). An unreachable server rejects with `IO` (`path` `postgres`). `options`:
    /// runlog's limits, and `retention` (`{finishedOlderThanMs, intervalMs?, archiveDir?}`),
    /// which starts the World's retention thread (`retentionStats()`; `close()` stops it).
    #[napi(
        ts_args_type = "dir: string, options?: StoreOptions",
        ts_return_type = "Promise<Store>"
    )]
    pub fn open(env: Env, dir: Unknown<'_>, options: Option<Unknown<'_>>) -> napi::Result<Raw> {
        open_with(env, dir, options, Access::Write)
    }

    /// `Store.openOrReadOnly(target, options?) → Promise<Store>`: a file store opened for
    /// writing when this process can write it, else read-only (`readOnly` true,
    /// `readOnlyCause` the refusal: `IO` with `errno` EACCES, EPERM or EROFS, naming the
    /// path); asked of the kernel by opening `FORMAT` for writing, nothing written. A
    /// missing directory is created, and one that cannot be created rejects with that
    /// error; foreign files reject with `NOT_A_STORE`. PostgreSQL: as `open`.
    #[napi(
        ts_args_type = "dir: string, options?: StoreOptions",
        ts_return_type = "Promise<Store>"
    )]
    pub fn open_or_read_only(
        env: Env,
        dir: Unknown<'_>,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        open_with(env, dir, options, Access::WriteOrRead)
    }

    /// `Store.openReadOnly(target, options?) → Promise<Store>`: no lock, no write, no
    /// recovery (`runlog::Store::open_read_only`); on PostgreSQL no migration, and the
    /// server refuses writes.
    #[napi(
        ts_args_type = "dir: string, options?: StoreOptions",
        ts_return_type = "Promise<Store>"
    )]
    pub fn open_read_only(
        env: Env,
        dir: Unknown<'_>,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        open_with(env, dir, options, Access::Read)
    }

    /// The store directory or URL as given to `open`.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.shared.path.clone()
    }

    /// `'file'` or `'postgres'`: the backend `open` chose for the target.
    #[napi(getter, ts_return_type = "'file' | 'postgres'")]
    pub fn backend(&self) -> String {
        self.shared.backend.to_owned()
    }

    /// Whether the store is read-only: opened with `openReadOnly`, or by `openOrReadOnly`
    /// on a store this process cannot write.
    #[napi(getter)]
    pub fn read_only(&self) -> bool {
        self.shared.read_only
    }

    /// Why `openOrReadOnly` opened the store read-only: the error of opening it for writing
    /// (code `IO`, `op`, `path`, `errno`); `null` otherwise.
    #[napi(getter, ts_return_type = "RunlogError | null")]
    pub fn read_only_cause(&self, env: Env) -> napi::Result<Option<Raw>> {
        match &self.shared.read_only_cause {
            Some(cause) => Ok(Some(Raw::new(cause.to_js(&env)?))),
            None => Ok(None),
        }
    }

    /// Whether `close()` was called.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// `createRun(runId, meta?) → Promise<void>`; `meta` ≤ 2 KiB (Buffer, Uint8Array or
    /// string).
    #[napi(
        ts_args_type = "runId: string, meta?: Bytes",
        ts_return_type = "Promise<void>"
    )]
    pub fn create_run(
        &self,
        env: Env,
        run: Unknown<'_>,
        meta: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                let meta = match optional(meta, "meta") {
                    Some(m) => m.bytes()?,
                    None => Vec::new(),
                };
                Ok((run, meta))
            },
            move |lease, (run, meta)| {
                lease.store.create_run(&run, &meta)?;
                Ok(Unit)
            },
        )
    }

    /// `appendFacts(runId, events) → Promise<{seq, duplicate}[]>`.
    #[napi(
        ts_args_type = "runId: string, events: NewEvent[]",
        ts_return_type = "Promise<Appended[]>"
    )]
    pub fn append_facts(&self, env: Env, run: Unknown<'_>, evs: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                let evs = events(&Arg::new(evs, "events"))?;
                Ok((run, evs))
            },
            move |lease, (run, evs)| AppendedOut::new(lease.store.append_facts(&run, evs)?),
        )
    }

    /// `appendDecisions(runId, expectedSeq, events) → Promise<number[]>` (the assigned
    /// seqs); rejects with `FENCED` (`expected`, `actual`) when the log is not at
    /// `expectedSeq`.
    #[napi(
        ts_args_type = "runId: string, expectedSeq: number, events: NewEvent[]",
        ts_return_type = "Promise<number[]>"
    )]
    pub fn append_decisions(
        &self,
        env: Env,
        run: Unknown<'_>,
        expected: Unknown<'_>,
        evs: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                let expected = Arg::new(expected, "expectedSeq").uint(MAX_SAFE_INTEGER)?;
                let evs = events(&Arg::new(evs, "events"))?;
                Ok((run, expected, evs))
            },
            move |lease, (run, expected, evs)| {
                Numbers::seqs(lease.store.append_decisions(&run, expected, evs)?)
            },
        )
    }

    /// `read(runId, after = 0, limit = 1000) → Promise<{events, next, hasMore}>`.
    #[napi(
        ts_args_type = "runId: string, after?: number, limit?: number",
        ts_return_type = "Promise<ReadPage>"
    )]
    pub fn read(
        &self,
        env: Env,
        run: Unknown<'_>,
        after: Option<Unknown<'_>>,
        limit: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                let after = seq_or_zero(optional(after, "after"))?;
                let limit = page_limit(optional(limit, "limit"))?;
                Ok((run, after, limit))
            },
            move |lease, (run, after, limit)| {
                EventsPage::new(lease.store.read(&run, after, limit)?)
            },
        )
    }

    /// `lastSeq(runId) → Promise<number>`.
    #[napi(ts_args_type = "runId: string", ts_return_type = "Promise<number>")]
    pub fn last_seq(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                Ok(run)
            },
            move |lease, run| Number::seq(lease.store.last_seq(&run)?),
        )
    }

    /// `wait(runId, after, timeoutMs) → Promise<number>`: the run's last seq once it exceeds
    /// `after`, or at the timeout (then ≤ `after`). The timeout counts from the call. Runs
    /// on the `wait` lane; `close()` rejects pending waits with `CLOSED`.
    #[napi(
        ts_args_type = "runId: string, after: number, timeoutMs: number",
        ts_return_type = "Promise<number>"
    )]
    pub fn wait(
        &self,
        env: Env,
        run: Unknown<'_>,
        after: Unknown<'_>,
        timeout_ms: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::WAIT,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                let after = Arg::new(after, "after").uint(MAX_SAFE_INTEGER)?;
                let timeout = Arg::new(timeout_ms, "timeoutMs").uint(WAIT_TIMEOUT_MS_MAX)?;
                let deadline = Instant::now() + Duration::from_millis(timeout);
                Ok((run, after, deadline))
            },
            move |lease, (run, after, deadline)| {
                let closed = || lease.shared.is_closed();
                Number::seq(wait_sliced(closed, deadline, |slice| {
                    let last = lease.store.wait(&run, after, slice)?;
                    Ok((last, last > after))
                })?)
            },
        )
    }

    /// `runInfo(runId) → Promise<RunInfo>`.
    #[napi(ts_args_type = "runId: string", ts_return_type = "Promise<RunInfo>")]
    pub fn run_info(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                Ok(run)
            },
            move |lease, run| InfoOut::new(lease.store.run_info(&run)?),
        )
    }

    /// `runMeta(runId) → Promise<Buffer>`: the metadata given to `createRun`.
    #[napi(ts_args_type = "runId: string", ts_return_type = "Promise<Buffer>")]
    pub fn run_meta(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                Ok(run)
            },
            move |lease, run| Ok(MetaOut(lease.store.run_meta(&run)?)),
        )
    }

    /// `listRuns(after?, limit = 1000) → Promise<{runs, next, hasMore, damaged}>`, in run id
    /// order after `after` (exclusive; `null`/`undefined` for the start).
    #[napi(
        ts_args_type = "after?: string | null, limit?: number",
        ts_return_type = "Promise<RunPage>"
    )]
    pub fn list_runs(
        &self,
        env: Env,
        after: Option<Unknown<'_>>,
        limit: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let after = match optional(after, "after") {
                    Some(a) if !a.is_nullish()? => Some(run_id(&a)?),
                    _ => None,
                };
                let limit = page_limit(optional(limit, "limit"))?;
                Ok((after, limit))
            },
            move |lease, (after, limit)| {
                RunsPage::new(lease.store.list_runs(after.as_ref(), limit)?)
            },
        )
    }

    /// `deleteRun(runId) → Promise<void>`. On a World's store (`world.runlog.store()`), the
    /// run's attribute and stream logs go with it and the World forgets the run.
    #[napi(ts_args_type = "runId: string", ts_return_type = "Promise<void>")]
    pub fn delete_run(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                Ok(run)
            },
            move |lease, run| {
                // Under a World, the World deletes the run with its attribute and stream
                // logs and forgets it (or it would go on folding it from its cache, and a
                // run created again under the id would inherit the deleted one's logs).
                // The handle's lock is let go before the deletion (a match would hold it).
                let worlds = lease.shared.world.lock().clone();
                match worlds {
                    Some(worlds) => worlds.world.delete_run(&run)?,
                    None => lease.store.delete_run(&run)?,
                }
                Ok(Unit)
            },
        )
    }

    /// `verifyRun(runId) → Promise<VerifyReport>`: every byte of the run checked; problems
    /// are in the report (`ok` false), not a rejection.
    #[napi(
        ts_args_type = "runId: string",
        ts_return_type = "Promise<VerifyReport>"
    )]
    pub fn verify_run(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = run_id(&Arg::new(run, "runId"))?;
                Ok(run)
            },
            move |lease, run| VerifyOut::new(lease.store.verify_run(&run)?),
        )
    }

    /// `world() → World`: the World layer (`runlog_world::World` and its streams) on this
    /// store, synchronous; every `World` object of one store shares one World and its
    /// caches, and rejects with `CLOSED` once the store is closed.
    #[napi(ts_return_type = "World")]
    pub fn world(&self) -> crate::world::JsWorld {
        crate::world::JsWorld::new(self.shared.clone())
    }

    /// `commitStats() → {groups, requests, events, groupSizes}` (synchronous): the group
    /// commit counters of this handle since it was opened (`runlog::Store::commit_stats`);
    /// after `close()`, the counters as of closing. A file store's only: on PostgreSQL it
    /// throws an `Error` with code `UNSUPPORTED` (each append is its own transaction).
    #[napi(ts_return_type = "CommitStats")]
    pub fn commit_stats(&self, env: Env) -> napi::Result<Raw> {
        if self.shared.backend != "file" {
            let e = BindError::unsupported(
                "commitStats",
                "commitStats: group commit counters are the file store's; this store is on PostgreSQL",
            );
            return throw(&env, &e);
        }
        let snapshot = match self.shared.store.lock().as_ref() {
            Some(Backend {
                file: Some(store), ..
            }) => store.commit_stats(),
            _ => self.shared.stats_at_close.lock().clone(),
        };
        let stats = crate::out::CommitStats::new(&snapshot);
        Ok(Raw::new(stats.into_unknown(&env)?))
    }

    /// `retentionStats() → {passes, collected, swept, failures, lastError} | null`
    /// (synchronous): the gc passes the World's retention thread (the `retention` option of
    /// `open`) completed, the runs it collected, the archived runs whose leftover logs it
    /// swept into their archives, its failures (runs it could not judge or collect,
    /// passes that failed as a whole: each such run stays live and is tried again) and the
    /// last failure's message, since the store was opened; a new kind of failure is also
    /// written once to stderr. After `close()`, the final counts (the thread is stopped).
    /// `null` when retention is off: not asked for, or the store is read-only.
    #[napi(ts_return_type = "RetentionStats | null")]
    pub fn retention_stats(&self) -> Option<crate::out::RetentionStats> {
        self.shared
            .retention
            .as_ref()
            .map(crate::out::RetentionStats::new)
    }

    /// `close() → Promise<void>`: new calls reject with `CLOSED` at once, pending `wait`s
    /// within 100 ms; resolves when the retention thread is stopped and joined (a pass
    /// under way ends first), every call made before it has settled and the store's files
    /// are released. Idempotent.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self, env: Env) -> napi::Result<Raw> {
        entry(&env, || {
            let taken = self.shared.store.lock().take();
            let world = self.shared.world.lock().take();
            if let Some(store) = taken.as_ref().and_then(|b| b.file.as_ref()) {
                *self.shared.stats_at_close.lock() = store.commit_stats();
            }
            let shared = self.shared.clone();
            // On the `wait` lane: this job blocks until the calls before it settle, and those
            // may still be queued on the `io` lane, which it must not occupy.
            spawn(&env, &pool::WAIT, move || {
                if let Some(task) = &shared.retention {
                    task.stop();
                }
                let mut n = shared.inflight.lock();
                while *n > 0 {
                    shared.idle.wait(&mut n);
                }
                drop(n);
                drop(world);
                if let Some(store) = taken.as_ref().and_then(|b| b.file.as_ref()) {
                    *shared.stats_at_close.lock() = store.commit_stats();
                }
                drop(taken);
                Ok(Unit)
            })
        })
    }
}

fn open_with(
    env: Env,
    dir: Unknown<'_>,
    options: Option<Unknown<'_>>,
    access: Access,
) -> napi::Result<Raw> {
    // Nothing to hold yet: the store is what the call opens.
    let hold = || Ok(());
    let args = || {
        let dir = Arg::new(dir, "dir").string()?;
        if dir.is_empty() {
            return Err(BindError::invalid("dir", "must not be empty"));
        }
        let (config, retention_arg) = config(optional(options, "options"))?;
        let retention = match retention_arg {
            Some(r) => Some(retention(&r, &dir, access)?),
            None => None,
        };
        // Read here, so that a bad value rejects the open (as the other options do).
        let page_cache_bytes = page_cache_bytes_from_env()?;
        Ok((dir, config, retention, page_cache_bytes))
    };
    call(
        &env,
        &pool::IO,
        hold,
        args,
        move |(), (dir, config, retention, page_cache_bytes)| {
            let opened = open_target(&dir, config, access)?;
            let store = Backend {
                log: opened.log,
                file: opened.file,
            };
            let cause = opened.read_only_cause.map(BindError::from);
            Ok(JsStore {
                shared: Arc::new(Shared::new(
                    dir,
                    store,
                    access == Access::Read,
                    cause,
                    retention,
                    page_cache_bytes,
                )),
            })
        },
    )
}

fn seq_or_zero(arg: Option<Arg<'_>>) -> Result<u64, BindError> {
    match arg {
        Some(a) => a.uint_or(0, MAX_SAFE_INTEGER),
        None => Ok(0),
    }
}

fn page_limit(arg: Option<Arg<'_>>) -> Result<usize, BindError> {
    let n = match arg {
        Some(a) => a.uint_or(PAGE_DEFAULT, PAGE_MAX)?,
        None => PAGE_DEFAULT,
    };
    if n == 0 {
        return Err(BindError::invalid("limit", "must be at least 1"));
    }
    Ok(n as usize)
}

/// Throws `err` into JavaScript from a synchronous method (the returned value is ignored).
fn throw(env: &Env, err: &BindError) -> napi::Result<Raw> {
    env.throw(err.to_js(env)?)?;
    Ok(Raw::new(().into_unknown(env)?))
}
