//! The `World` class: `runlog_world::World` and `runlog_world::Streams` on an open store, as
//! a Promise API (`store.world()`). The store is either backend (a file store or PostgreSQL,
//! `store::Backend`): the World reaches it only through `runlog::RunLog`, so every rule and
//! error below holds on both.
//!
//! Requests, parameters and results cross the boundary as JSON text in the SDK's shapes
//! (`eventType`, `correlationId`, `eventData`, ...; dates as ISO strings; binary values as
//! the `{"__type":"Uint8Array","data":"<base64>"}` objects the SDK's local store writes):
//! the World keeps payload bytes exactly as given, so the text in is the text stored and
//! the text out. A request or parameter object may also be passed as an object (it is
//! stringified with `JSON.stringify`). Stream chunks are bytes (`Buffer`).
//!
//! This module holds the methods; `params` parses each parameter shape once into a typed
//! struct, `out` builds the results, `errors` turns World and stream errors into rejections.
//!
//! Every call runs on the `io` lane but `streamsWait` (the `wait` lane). A `WorldError`
//! rejects with `code` (`NOT_FOUND`, `CONFLICT`, `GONE`, `PRECONDITION_FAILED`,
//! `TOO_EARLY`, `INVALID_INPUT`, `BUSY`, or the store's own code for a storage fault),
//! `className` and `status` (the SDK's error class and HTTP-like status), and where they
//! apply `runId`, `stepId`, `hook`, `eventId`, `retryAfter`, `found`, `supported`, `field`.

mod errors;
mod out;
mod params;

use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;
use runlog::{RunId, RunLog};
use runlog_world::streams::CHUNKS_PER_PAGE_DEFAULT;
use runlog_world::{At, PAGE_LIMIT_MAX, Pagination, ResolveData, Streams, World, WorldError};
use serde::Serialize;

use crate::call::{WAIT_TIMEOUT_MS_MAX, call, call_each, wait_sliced};
use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::event_page::{PageWire, events_list_json, events_page_json};
use crate::handle::{Shared, WorldLease, Worlds};
use crate::js::{Arg, IntoJs, Raw, safe_number};
use crate::out::{Json, Number, Unit};
use crate::pool::{self, Pool};
use crate::world::errors::world_err;
use crate::world::out::{
    InfoOut, Names, PageOut, RangeOut, ReadOut, Settled, batch_item, cancel_result, to_json,
};
use crate::world::params::{
    AttributeOptions, ChunksParams, CreateCall, List, ResolveParams, attribute_changes,
    batch_requests, cancel_request, create_params, event_request, opt_text, runs_list,
};

/// The World of an open store (`store.world()`).
#[napi(js_name = "World")]
pub struct JsWorld {
    shared: Arc<Shared>,
}

impl JsWorld {
    pub(crate) fn new(shared: Arc<Shared>) -> JsWorld {
        JsWorld { shared }
    }

    /// [`call`] with this World's lease: `work` gets the World and its streams.
    fn call<A, T>(
        &self,
        env: &Env,
        lane: &'static Pool,
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&WorldLease, A) -> Result<T, BindError> + Send + 'static,
    ) -> napi::Result<Raw>
    where
        A: Send + 'static,
        T: IntoJs,
    {
        call(env, lane, || self.shared.world_lease(), args, work)
    }

    /// [`JsWorld::call`] of a stream method on `(runId, name)`, read first and in that order,
    /// then the rest (`args`); `work` gets the streams, the run, the name and the rest.
    fn stream_call<A, T>(
        &self,
        env: &Env,
        lane: &'static Pool,
        (run, name): (Unknown<'_>, Unknown<'_>),
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&Streams<Arc<dyn RunLog>>, &RunId, &str, A) -> Result<T, BindError>
        + Send
        + 'static,
    ) -> napi::Result<Raw>
    where
        A: Send + 'static,
        T: IntoJs,
    {
        let args = || Ok((stream_run(run)?, string_arg(name, "name")?, args()?));
        self.call(env, lane, args, move |lease, (run, name, a)| {
            work(&lease.worlds.streams, &run, &name, a)
        })
    }

    /// [`JsWorld::call`] on the `io` lane with the World alone.
    fn world_call<A, T>(
        &self,
        env: &Env,
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&Worlds, A) -> Result<T, BindError> + Send + 'static,
    ) -> napi::Result<Raw>
    where
        A: Send + 'static,
        T: IntoJs,
    {
        self.call(env, &pool::IO, args, move |lease, a| work(&lease.worlds, a))
    }

    /// [`JsWorld::world_call`] whose `Ok` is resolved as JSON text.
    fn json_call<A: Send + 'static, S: Serialize>(
        &self,
        env: &Env,
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&Worlds, A) -> Result<S, BindError> + Send + 'static,
    ) -> napi::Result<Raw> {
        self.world_call(env, args, move |w, a| to_json(&work(w, a)?).map(Json))
    }

    /// [`JsWorld::json_call`] of a getter `(id..., params?)`: the ids (strings, each with
    /// its argument name), then `params.resolveData`.
    fn get_call<const N: usize, S: Serialize>(
        &self,
        env: &Env,
        ids: [(Unknown<'_>, &str); N],
        params: Option<Unknown<'_>>,
        work: impl FnOnce(&World<Arc<dyn RunLog>>, [String; N], ResolveData) -> Result<S, BindError>
        + Send
        + 'static,
    ) -> napi::Result<Raw> {
        let args = || {
            let mut out: [String; N] = std::array::from_fn(|_| String::new());
            for (slot, (value, name)) in out.iter_mut().zip(ids) {
                *slot = string_arg(value, name)?;
            }
            Ok((
                out,
                ResolveParams::read(opt_text(params, "params")?.as_deref())?,
            ))
        };
        self.json_call(env, args, move |w, (ids, resolve)| {
            work(&w.world, ids, resolve)
        })
    }
}

fn string_arg(v: Unknown<'_>, name: &str) -> Result<String, BindError> {
    Arg::new(v, name).string()
}

/// A point of a run's log: a seq (a non-negative integer, or a string of digits) or an
/// ISO-8601 time string ([`At`]'s parser).
fn at_arg(v: Unknown<'_>, name: &str) -> Result<At, BindError> {
    let arg = Arg::new(v, name);
    if arg.is_string()? {
        let text = arg.string()?;
        return text
            .parse::<At>()
            .map_err(|e| BindError::invalid(name, e.to_string()));
    }
    arg.uint(MAX_SAFE_INTEGER).map(At::Seq).map_err(|_| {
        BindError::invalid(
            name,
            "must be a seq (a non-negative integer) or an ISO-8601 time string",
        )
    })
}

/// The run id of a stream call: any id the store can hold (`[A-Za-z0-9_-]`, 1–128 bytes).
/// One page of `run`'s events in the wire form: written from the log as it is read (or kept)
/// with `resolveData: 'all'`, else from the listed events (`eventsList`, each slice of
/// `eventsListSlices`).
fn run_events_page(
    w: &Worlds,
    run: &str,
    p: &Pagination,
    resolve: ResolveData,
) -> Result<PageWire, BindError> {
    if resolve == ResolveData::All
        && let Some(page) = events_list_json(&w.world, &w.pages, run, p)?
    {
        return Ok(page);
    }
    events_page_json(&w.world.list_events(run, p, resolve)?)
}

/// Most slices `eventsListSlices` takes.
pub(crate) const SLICES_MAX: usize = 64;

/// The `sizes` of `eventsListSlices`: 1 to [`SLICES_MAX`] integers, each 1 to
/// `PAGE_LIMIT_MAX`.
fn slice_sizes(v: Unknown<'_>) -> Result<Vec<usize>, BindError> {
    let arg = Arg::new(v, "sizes");
    let items = arg.array_items()?;
    if items.is_empty() || items.len() > SLICES_MAX {
        return Err(BindError::invalid(
            "sizes",
            format!("must hold 1 to {SLICES_MAX} sizes, got {}", items.len()),
        ));
    }
    items
        .iter()
        .map(|item| {
            let n = item.uint(PAGE_LIMIT_MAX as u64)?;
            if n == 0 {
                return Err(BindError::invalid(item.name.clone(), "must be at least 1"));
            }
            Ok(n as usize)
        })
        .collect()
}

/// Not only `wrun_<ULID>`: a stream lives in logs of its own (`stream-…`), whatever its run,
/// and the SDK's health check writes and reads one under `wrun_hc_<ULID>`, a run that never
/// exists (as the reference's local store allows). Any other id is `INVALID_INPUT` (400).
fn stream_run(v: Unknown<'_>) -> Result<RunId, BindError> {
    let s = Arg::new(v, "runId").string()?;
    RunId::new(&s).map_err(BindError::from_store)
}

/// `pageCacheStats()` of a World.
#[napi(object)]
pub struct PageCacheCounts {
    /// Listings that used a kept page.
    pub hits: f64,
    /// Listings that found a kept page under their key whose events differ from the log's.
    pub stale: f64,
    /// Pages kept now.
    pub pages: f64,
    /// Bytes kept now (texts, binary parts and fingerprints).
    pub bytes: f64,
    /// The most bytes kept (0: none).
    pub bytes_max: f64,
}

#[napi]
impl JsWorld {
    /// Whether the store under this World was closed.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// `pageCacheStats() → {hits, stale, pages, bytes, bytesMax} | null`: the `events.list`
    /// pages kept for their next listing (`src/event_page/cache.rs`): listings that used one,
    /// listings that found one whose events differ from the log's, the pages and bytes kept
    /// and the bound (`RUNLOG_NODE_PAGE_CACHE_BYTES`); null once the store is closed
    /// (synchronous; diagnostics and tests).
    #[napi]
    pub fn page_cache_stats(&self) -> Option<PageCacheCounts> {
        let worlds = self.shared.world.lock().clone()?;
        let s = worlds.pages.stats();
        Some(PageCacheCounts {
            hits: s.hits as f64,
            stale: s.stale as f64,
            pages: s.pages as f64,
            bytes: s.bytes as f64,
            bytes_max: s.bytes_max as f64,
        })
    }

    /// `createEvent(runId | null, request, params?) → Promise<string>`: `events.create`;
    /// `request` and `params` are JSON text (or objects); resolves with the `EventResult`
    /// as JSON text.
    #[napi(
        ts_args_type = "runId: string | null, request: JsonArg, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn create_event(
        &self,
        env: Env,
        run: Unknown<'_>,
        request: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let run = Arg::new(run, "runId").opt_string()?;
                let text = Arg::new(request, "request").json_text()?;
                let params = create_params(opt_text(params, "params")?.as_deref())?;
                Ok((run, text, params))
            },
            move |w, (run, text, params)| {
                // Parsed on the worker: the JavaScript thread only copies the text.
                let request = event_request(&text, "request")?;
                Ok(w.world.create_event(run.as_deref(), request, &params)?)
            },
        )
    }

    /// `createEvents(calls) → Promise<Array<string | Error>>`: several `events.create` at
    /// once. `calls` is an array of `[runId | null, request, params?]` (each as
    /// `createEvent` takes them); the promise resolves with one entry per call, in order:
    /// the `EventResult` as JSON text, or the `Error` (with its code and fields) that
    /// `createEvent` would have rejected with. The calls of one run are queued together on
    /// that run and meet in one group commit on one worker thread, instead of a thread and a
    /// promise each (`runlog_world::World::create_events`). Rejects as a whole only when
    /// `calls` is no array or the World is closed.
    #[napi(
        ts_args_type = "calls: Array<[runId: string | null, request: JsonArg, params?: JsonArg]>",
        ts_return_type = "Promise<Array<string | RunlogError>>"
    )]
    pub fn create_events(&self, env: Env, calls: Unknown<'_>) -> napi::Result<Raw> {
        self.world_call(
            &env,
            || {
                let calls = Arg::new(calls, "calls").array_items()?;
                let calls: Vec<Result<CreateCall, BindError>> =
                    calls.iter().map(CreateCall::read).collect();
                Ok(calls)
            },
            move |w, calls| {
                let mut out: Vec<Result<String, BindError>> = Vec::with_capacity(calls.len());
                let mut valid = Vec::with_capacity(calls.len());
                let mut places = Vec::with_capacity(calls.len());
                for call in calls {
                    match call.and_then(CreateCall::parse) {
                        Ok(parsed) => {
                            places.push(out.len());
                            out.push(Ok(String::new()));
                            valid.push(parsed);
                        }
                        Err(e) => out.push(Err(e)),
                    }
                }
                let answers = w.world.create_events(valid);
                for (place, answer) in places.into_iter().zip(answers) {
                    out[place] = answer.map_err(world_err).and_then(|r| to_json(&r));
                }
                Ok(Settled(out))
            },
        )
    }

    /// `createBatch(runId, events, params?) → Promise<string>`: `events.createBatch` of a
    /// slot run; `events` is `[{event, occurredAt?, computeInstanceId?}]` (JSON text or
    /// array); resolves with `{results: [...]}` as JSON text, one `BatchEventItemResult`
    /// per event (`runlog_world::World::create_batch`). Rejects as a whole for a batch the
    /// reference refuses.
    #[napi(
        ts_args_type = "runId: string, events: JsonArg, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn create_batch(
        &self,
        env: Env,
        run: Unknown<'_>,
        events: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                let text = Arg::new(events, "events").json_text()?;
                let params = create_params(opt_text(params, "params")?.as_deref())?;
                Ok((run, text, params))
            },
            move |w, (run, text, params)| {
                let requests = batch_requests(&text)?;
                let answers = w.world.create_batch(&run, requests, &params)?;
                let results = answers
                    .into_iter()
                    .map(batch_item)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(serde_json::json!({ "results": results }))
            },
        )
    }

    /// `runsGetMany(runIds, params?) → Promise<string>`: `(run | null)[]` in input order.
    #[napi(
        ts_args_type = "runIds: JsonArg, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn runs_get_many(
        &self,
        env: Env,
        runs: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let text = Arg::new(runs, "runIds").json_text()?;
                let resolve = ResolveParams::read(opt_text(params, "params")?.as_deref())?;
                Ok((text, resolve))
            },
            move |w, (text, resolve)| {
                let ids: Vec<String> = serde_json::from_str(&text)
                    .map_err(|e| BindError::invalid("runIds", e.to_string()))?;
                Ok(w.world.get_runs(&ids, resolve)?)
            },
        )
    }

    /// `runsCancelMany(request) → Promise<string>`: `runs.cancelMany`; `request` is
    /// `{runIds, cancelReason?}` (JSON text or object); resolves with the
    /// `BulkCancelWorkflowRunsResult` as JSON text (`runlog_world::World::cancel_runs`).
    /// Rejects as a whole (`INVALID_INPUT`) for a request the SDK's schema refuses.
    #[napi(ts_args_type = "request: JsonArg", ts_return_type = "Promise<string>")]
    pub fn runs_cancel_many(&self, env: Env, request: Unknown<'_>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let text = Arg::new(request, "request").json_text()?;
                Ok(text)
            },
            move |w, text| {
                let (ids, reason) = cancel_request(&text)?;
                let outcomes = w.world.cancel_runs(&ids, reason.as_deref())?;
                Ok(cancel_result(&ids, outcomes))
            },
        )
    }

    /// `runsSetAttributes(runId, changes, options?) → Promise<string>`:
    /// `runs.experimentalSetAttributes`; `changes` is `[{key, value}]` (`value: null` removes
    /// the key; JSON text or array), `options.allowReservedAttributes` permits `$` keys.
    /// Resolves with `{"attributes": {...}}`, the run's attributes after the change, as JSON
    /// text (`runlog_world::World::set_run_attributes`). Rejects with `NOT_FOUND` for an
    /// unknown run (checked first), with `INVALID_INPUT` / `AttributeValidationError` for
    /// changes breaking the SDK's rules (a key or value of the wrong type too, as
    /// `validateAttributeChanges` says), and with `INVALID_INPUT` when `changes` is no array.
    #[napi(
        ts_args_type = "runId: string, changes: JsonArg, options?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn runs_set_attributes(
        &self,
        env: Env,
        run: Unknown<'_>,
        changes: Unknown<'_>,
        options: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                let text = Arg::new(changes, "changes").json_text()?;
                let allow = AttributeOptions::read(opt_text(options, "options")?.as_deref())?;
                let changes = attribute_changes(&text)?;
                Ok((run, allow, changes))
            },
            move |w, (run, allow, changes)| {
                let changes = match changes {
                    Ok(changes) => changes,
                    // The run is looked up first, as the reference does.
                    Err(reason) => {
                        w.world.get_run(&run, ResolveData::None)?;
                        return Err(world_err(WorldError::AttributeValidation { reason }));
                    }
                };
                let attributes = w.world.set_run_attributes(&run, &changes, allow)?;
                Ok(serde_json::json!({ "attributes": attributes }))
            },
        )
    }

    /// `runsWaitForTerminalStatus(runId, timeoutMs, params?) → Promise<string>`: the run
    /// once terminal, or as it is after `timeoutMs` (waits on the run's log).
    #[napi(
        ts_args_type = "runId: string, timeoutMs: number, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn runs_wait_for_terminal_status(
        &self,
        env: Env,
        run: Unknown<'_>,
        timeout_ms: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                // Checked here like every argument (a typed `u32` threw synchronously for a
                // string and wrapped -1 to 2^32 - 1); the JS side passes at most 2^32 - 1.
                let timeout_ms = Arg::new(timeout_ms, "timeoutMs").uint(u32::MAX.into())?;
                let resolve = ResolveParams::read(opt_text(params, "params")?.as_deref())?;
                let timeout = Duration::from_millis(timeout_ms);
                Ok((run, resolve, timeout))
            },
            move |w, (run, resolve, timeout)| {
                Ok(w.world.wait_for_terminal_run(&run, timeout, resolve)?)
            },
        )
    }

    /// `runsGet(runId, params?) → Promise<string>` (`params.resolveData`).
    #[napi(
        ts_args_type = "runId: string, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn runs_get(
        &self,
        env: Env,
        run: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.get_call(&env, [(run, "runId")], params, |w, [run], resolve| {
            Ok(w.get_run(&run, resolve)?)
        })
    }

    /// `runAt(runId, at) → Promise<string>`: the run as of a seq of its log
    /// (`runlog_world::World::run_at`): `at` is a seq (a number, or a string of digits) or an
    /// ISO-8601 time string (the last seq whose event's `createdAt` is at or before it);
    /// resolves with `{seq, lastSeq, run, steps, hooks, waits}` as JSON text (`run` null
    /// before the log's `run_created`). Rejects `INVALID_INPUT` (400) for seq 0, a seq past
    /// the log's end or a time before its first event (with `runId`, `lastSeq`).
    #[napi(
        ts_args_type = "runId: string, at: number | string",
        ts_return_type = "Promise<string>"
    )]
    pub fn run_at(&self, env: Env, run: Unknown<'_>, at: Unknown<'_>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || Ok((string_arg(run, "runId")?, at_arg(at, "at")?)),
            move |w, (run, at)| Ok(w.world.run_at(&run, at)?),
        )
    }

    /// `runDiff(runId, from, to) → Promise<string>`: which entities of the run changed from
    /// `from` to `to` (each as `at` of `runAt`; `from` may be 0, the empty log), and by which
    /// events (`runlog_world::World::run_diff`): `{runId, from, to, changes: [{entity,
    /// id, change, events: [{seq, eventType}], before, after}], unchanged}` as JSON text.
    #[napi(
        ts_args_type = "runId: string, from: number | string, to: number | string",
        ts_return_type = "Promise<string>"
    )]
    pub fn run_diff(
        &self,
        env: Env,
        run: Unknown<'_>,
        from: Unknown<'_>,
        to: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                Ok((run, at_arg(from, "from")?, at_arg(to, "to")?))
            },
            move |w, (run, from, to)| Ok(w.world.run_diff(&run, from, to)?),
        )
    }

    /// `runsList(params?) → Promise<string>`: `{workflowName, status, pagination,
    /// resolveData}`.
    #[napi(ts_args_type = "params?: JsonArg", ts_return_type = "Promise<string>")]
    pub fn runs_list(&self, env: Env, params: Option<Unknown<'_>>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let p = runs_list(opt_text(params, "params")?.as_deref())?;
                Ok(p)
            },
            move |w, p| Ok(w.world.list_runs(&p)?),
        )
    }

    /// `stepsGet(runId, stepId, params?) → Promise<string>`.
    #[napi(
        ts_args_type = "runId: string, stepId: string, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn steps_get(
        &self,
        env: Env,
        run: Unknown<'_>,
        step: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        let ids = [(run, "runId"), (step, "stepId")];
        self.get_call(&env, ids, params, |w, [run, step], resolve| {
            Ok(w.get_step(&run, &step, resolve)?)
        })
    }

    /// `stepsList(params) → Promise<string>`: `{runId, pagination, resolveData}`.
    #[napi(ts_args_type = "params: JsonArg", ts_return_type = "Promise<string>")]
    pub fn steps_list(&self, env: Env, params: Unknown<'_>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let list = List::read(opt_text(Some(params), "params")?.as_deref(), false)?;
                Ok((list.run_required()?, list.pagination, list.resolve))
            },
            move |w, (run, p, resolve)| Ok(w.world.list_steps(&run, &p, resolve)?),
        )
    }

    /// `eventsGet(runId, eventId, params?) → Promise<string>`.
    #[napi(
        ts_args_type = "runId: string, eventId: string, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn events_get(
        &self,
        env: Env,
        run: Unknown<'_>,
        event: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        let ids = [(run, "runId"), (event, "eventId")];
        self.get_call(&env, ids, params, |w, [run, event], resolve| {
            Ok(w.get_event(&run, &event, resolve)?)
        })
    }

    /// `eventsList(params) → Promise<[text, part, cursor, hasMore]>`: `{runId, pagination,
    /// resolveData}`; the page in the wire form of `event_page.rs`: its text, its binary
    /// part (`null` in the fallback form), its cursor (or `null`) and `hasMore`.
    #[napi(
        ts_args_type = "params: JsonArg",
        ts_return_type = "Promise<EventPageWire>"
    )]
    pub fn events_list(&self, env: Env, params: Unknown<'_>) -> napi::Result<Raw> {
        self.world_call(
            &env,
            || {
                let list = List::read(opt_text(Some(params), "params")?.as_deref(), false)?;
                Ok((list.run_required()?, list.pagination, list.resolve))
            },
            move |w, (run, p, resolve)| run_events_page(w, &run, &p, resolve),
        )
    }

    /// `eventsListSlices(params, sizes) → Array<Promise<[text, part, cursor, hasMore] |
    /// null>>`: `eventsList` of one page as consecutive slices of `sizes` events (at most
    /// `SLICES_MAX` (64) sizes, each 1 to `PAGE_LIMIT_MAX`), all listed by one job on one of the
    /// addon's threads: each slice after the cursor of the one before (so together they are
    /// the page one call with their sum as `limit` lists), and each promise settled as soon
    /// as its slice is written, so JavaScript builds one slice while the next is written.
    /// Listing stops after a slice without `hasMore`, or after a slice that failed (its
    /// promise rejects); the promises after it resolve with `null`. An argument error gives
    /// an array of one rejected promise.
    #[napi(
        ts_args_type = "params: JsonArg, sizes: number[]",
        ts_return_type = "Array<Promise<EventPageWire | null>>"
    )]
    pub fn events_list_slices(
        &self,
        env: Env,
        params: Unknown<'_>,
        sizes: Unknown<'_>,
    ) -> napi::Result<Raw> {
        let args = || {
            let list = List::read(opt_text(Some(params), "params")?.as_deref(), false)?;
            let sizes = slice_sizes(sizes)?;
            let n = sizes.len();
            Ok((
                (list.run_required()?, list.pagination, list.resolve, sizes),
                n,
            ))
        };
        call_each(
            &env,
            &pool::IO,
            || self.shared.world_lease(),
            args,
            move |lease, (run, p, resolve, sizes), emit| {
                let w = &lease.worlds;
                let mut cursor = p.cursor.clone();
                for size in sizes {
                    let slice = Pagination {
                        limit: Some(size),
                        cursor: cursor.clone(),
                        sort_order: p.sort_order,
                    };
                    let page = run_events_page(w, &run, &slice, resolve);
                    let next = match &page {
                        Ok(page) if page.has_more => page.cursor.clone(),
                        _ => None,
                    };
                    let failed = page.is_err();
                    emit(page);
                    if failed || next.is_none() {
                        return;
                    }
                    cursor = next;
                }
            },
        )
    }

    /// `eventsListByCorrelationId(params) → Promise<[text, part, cursor, hasMore]>`:
    /// `{correlationId, runId?, pagination, resolveData}` (without `runId`: across the
    /// store); the same form as `eventsList`.
    #[napi(
        ts_args_type = "params: JsonArg",
        ts_return_type = "Promise<EventPageWire>"
    )]
    pub fn events_list_by_correlation_id(
        &self,
        env: Env,
        params: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.world_call(
            &env,
            || {
                let list = List::read(opt_text(Some(params), "params")?.as_deref(), false)?;
                let corr = list
                    .correlation_id
                    .ok_or_else(|| BindError::invalid("params.correlationId", "required"))?;
                Ok((corr, list.run, list.pagination, list.resolve))
            },
            move |w, (corr, run, p, resolve)| {
                let page =
                    w.world
                        .list_events_by_correlation_id(&corr, run.as_deref(), &p, resolve)?;
                events_page_json(&page)
            },
        )
    }

    /// `hooksGet(hookId, params?) → Promise<string>`.
    #[napi(
        ts_args_type = "hookId: string, params?: JsonArg",
        ts_return_type = "Promise<string>"
    )]
    pub fn hooks_get(
        &self,
        env: Env,
        hook: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        self.get_call(&env, [(hook, "hookId")], params, |w, [hook], resolve| {
            Ok(w.get_hook(&hook, resolve)?)
        })
    }

    /// `hooksGetByToken(token) → Promise<string>`.
    #[napi(ts_args_type = "token: string", ts_return_type = "Promise<string>")]
    pub fn hooks_get_by_token(&self, env: Env, token: Unknown<'_>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let token = string_arg(token, "token")?;
                Ok(token)
            },
            move |w, token| Ok(w.world.get_hook_by_token(&token)?),
        )
    }

    /// `hooksList(params?) → Promise<string>`: `{runId?, pagination, resolveData}`.
    #[napi(ts_args_type = "params?: JsonArg", ts_return_type = "Promise<string>")]
    pub fn hooks_list(&self, env: Env, params: Option<Unknown<'_>>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let list = List::read(opt_text(params, "params")?.as_deref(), true)?;
                Ok((list.run, list.pagination, list.resolve))
            },
            move |w, (run, p, resolve)| {
                let page = w.world.list_hooks(run.as_deref(), &p, resolve)?;
                Ok(page)
            },
        )
    }

    /// `streamsWrite(runId, name, chunk) → Promise<number>`: the chunk's index.
    #[napi(
        ts_args_type = "runId: string, name: string, chunk: Bytes",
        ts_return_type = "Promise<number>"
    )]
    pub fn streams_write(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
        chunk: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            || Arg::new(chunk, "chunk").bytes(),
            |streams, run, name, chunk| Number::seq(streams.write(run, name, chunk)?),
        )
    }

    /// `streamsWriteMulti(runId, name, chunks) → Promise<{start, end}>`: one atomic batch.
    #[napi(
        ts_args_type = "runId: string, name: string, chunks: Bytes[]",
        ts_return_type = "Promise<StreamRange>"
    )]
    pub fn streams_write_multi(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
        chunks: Unknown<'_>,
    ) -> napi::Result<Raw> {
        let chunks = || {
            Arg::new(chunks, "chunks")
                .array_items()?
                .iter()
                .map(|c| c.bytes().map(bytes::Bytes::from))
                .collect::<Result<Vec<_>, _>>()
        };
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            chunks,
            |streams, run, name, chunks| {
                let r = streams.write_many(run, name, chunks)?;
                safe_number("index", r.end)?;
                Ok(RangeOut(r))
            },
        )
    }

    /// `streamsClose(runId, name) → Promise<void>`.
    #[napi(
        ts_args_type = "runId: string, name: string",
        ts_return_type = "Promise<void>"
    )]
    pub fn streams_close(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
    ) -> napi::Result<Raw> {
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            || Ok(()),
            |streams, run, name, ()| {
                streams.close(run, name)?;
                Ok(Unit)
            },
        )
    }

    /// `streamsRead(runId, name, startIndex = 0, limit = 100) → Promise<{chunks, nextIndex,
    /// hasMore, done}>`; a negative `startIndex` counts back from the end.
    #[napi(
        ts_args_type = "runId: string, name: string, startIndex?: number, limit?: number",
        ts_return_type = "Promise<StreamRead>"
    )]
    pub fn streams_read(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
        start: Option<Unknown<'_>>,
        limit: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        let args = || {
            let start = match start.map(|s| Arg::new(s, "startIndex")) {
                Some(a) if !a.is_nullish()? => a.int()?,
                _ => 0,
            };
            let limit = match limit.map(|s| Arg::new(s, "limit")) {
                Some(a) => a.uint_or(CHUNKS_PER_PAGE_DEFAULT as u64, MAX_SAFE_INTEGER)? as usize,
                None => CHUNKS_PER_PAGE_DEFAULT,
            };
            Ok((start, limit))
        };
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            args,
            |streams, run, name, (start, limit)| {
                Ok(ReadOut(streams.read(run, name, start, limit)?))
            },
        )
    }

    /// `streamsWait(runId, name, index, timeoutMs) → Promise<{tailIndex, done}>`: until chunk
    /// `index` exists or the stream is closed, at most `timeoutMs`; on the `wait` lane;
    /// `close()` ends it with `CLOSED`.
    #[napi(
        ts_args_type = "runId: string, name: string, index: number, timeoutMs: number",
        ts_return_type = "Promise<StreamInfo>"
    )]
    pub fn streams_wait(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
        index: Unknown<'_>,
        timeout_ms: Unknown<'_>,
    ) -> napi::Result<Raw> {
        let args = || {
            let index = Arg::new(index, "index").uint(MAX_SAFE_INTEGER)?;
            let timeout = Arg::new(timeout_ms, "timeoutMs").uint(WAIT_TIMEOUT_MS_MAX)?;
            let deadline = Instant::now() + Duration::from_millis(timeout);
            Ok((index, deadline, self.shared.clone()))
        };
        let work = |streams: &Streams<Arc<dyn RunLog>>, run: &RunId, name: &str, args| {
            let (index, deadline, shared): (u64, Instant, Arc<Shared>) = args;
            let info = wait_sliced(
                || shared.is_closed(),
                deadline,
                |slice| {
                    let info = streams.wait(run, name, index, slice)?;
                    let done = info.done || info.tail_index >= index as i64;
                    Ok((info, done))
                },
            )?;
            Ok(InfoOut(info))
        };
        self.stream_call(&env, &pool::WAIT, (run, name), args, work)
    }

    /// `streamsGetChunks(runId, name, params?) → Promise<{data, cursor, hasMore, done}>`:
    /// `params` `{limit, cursor}`.
    #[napi(
        ts_args_type = "runId: string, name: string, params?: JsonArg",
        ts_return_type = "Promise<StreamChunkPage>"
    )]
    pub fn streams_get_chunks(
        &self,
        env: Env,
        run: Unknown<'_>,
        name: Unknown<'_>,
        params: Option<Unknown<'_>>,
    ) -> napi::Result<Raw> {
        let args = || ChunksParams::read(opt_text(params, "params")?.as_deref());
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            args,
            |streams, run, name, (limit, cursor)| {
                Ok(PageOut(streams.get_chunks(
                    run,
                    name,
                    cursor.as_deref(),
                    limit,
                )?))
            },
        )
    }

    /// `streamsInfo(runId, name) → Promise<{tailIndex, done}>` (`tailIndex` −1: no chunk).
    #[napi(
        ts_args_type = "runId: string, name: string",
        ts_return_type = "Promise<StreamInfo>"
    )]
    pub fn streams_info(&self, env: Env, run: Unknown<'_>, name: Unknown<'_>) -> napi::Result<Raw> {
        self.stream_call(
            &env,
            &pool::IO,
            (run, name),
            || Ok(()),
            |streams, run, name, ()| Ok(InfoOut(streams.info(run, name)?)),
        )
    }

    /// `streamsList(runId) → Promise<string[]>`: the run's stream names.
    #[napi(ts_args_type = "runId: string", ts_return_type = "Promise<string[]>")]
    pub fn streams_list(&self, env: Env, run: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                Ok(run)
            },
            move |lease, run| Ok(Names(lease.worlds.streams.list(&run)?)),
        )
    }
}
