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
//! Every call runs on the `io` lane but `streamsWait` (the `wait` lane). A `WorldError`
//! rejects with `code` (`NOT_FOUND`, `CONFLICT`, `GONE`, `PRECONDITION_FAILED`,
//! `TOO_EARLY`, `INVALID_INPUT`, `BUSY`, or the store's own code for a storage fault),
//! `className` and `status` (the SDK's error class and HTTP-like status), and where they
//! apply `runId`, `stepId`, `hook`, `eventId`, `retryAfter`, `found`, `supported`, `field`.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use napi::bindgen_prelude::Unknown;
use napi::{Env, sys};
use napi_derive::napi;
use runlog::{RunId, RunLog};
use runlog_world::streams::{CHUNKS_PER_PAGE_DEFAULT, ChunkPage, ChunkRead, StreamInfo};
use runlog_world::{
    CancelOutcome, CreateEventParams, EventRequest, ListRunsParams, Pagination, ResolveData,
    RunStatus, SortOrder, StreamError, Streams, World, WorldConfig, WorldError,
};
use serde_json::Value;

use crate::call::{WAIT_TIMEOUT_MS_MAX, call, wait_sliced};
use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::event_page::{events_list_json, events_page_json};
use crate::js::{Arg, IntoJs, ObjOut, Raw, array, buffer, safe_number};
use crate::out::{Number, Unit};
use crate::pool::{self, Pool};
use crate::store::{Lease, Shared};

/// The backend of the World: a file store or PostgreSQL, behind the `RunLog` contract.
type Backend = Arc<dyn RunLog>;

/// The World layer of one opened store handle (either backend).
pub(crate) struct Worlds {
    world: World<Backend>,
    streams: Streams<Backend>,
}

impl Worlds {
    pub(crate) fn new(store: Backend) -> Worlds {
        Worlds {
            streams: Streams::new(store.clone()),
            world: World::new(store, WorldConfig::default()),
        }
    }
}

/// A call's use of the World: holds the store open (counted by `close()`) until dropped.
struct WorldLease {
    worlds: Arc<Worlds>,
    _lease: Lease,
}

/// The World of an open store (`store.world()`).
#[napi(js_name = "World")]
pub struct JsWorld {
    shared: Arc<Shared>,
}

impl JsWorld {
    pub(crate) fn new(shared: Arc<Shared>) -> JsWorld {
        JsWorld { shared }
    }

    fn lease(&self) -> Result<WorldLease, BindError> {
        let worlds = self
            .shared
            .world
            .lock()
            .clone()
            .ok_or_else(BindError::closed)?;
        let lease = self.shared.lease()?;
        Ok(WorldLease {
            worlds,
            _lease: lease,
        })
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
        call(env, lane, || self.lease(), args, work)
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

    /// [`JsWorld::world_call`] whose `Ok` is JSON text.
    fn json_call<A: Send + 'static>(
        &self,
        env: &Env,
        args: impl FnOnce() -> Result<A, BindError>,
        work: impl FnOnce(&Worlds, A) -> Result<String, BindError> + Send + 'static,
    ) -> napi::Result<Raw> {
        self.world_call(env, args, move |w, a| work(w, a).map(Json))
    }
}

/// One call of `createEvents`, as read on the JavaScript thread (texts only; parsed on the
/// worker).
struct CreateCall {
    run: Option<String>,
    request: String,
    params: Option<String>,
}

impl CreateCall {
    /// `[runId | null, request, params?]`; what is wrong names the call's index.
    fn read(call: &Arg) -> Result<CreateCall, BindError> {
        let mut items = call.array_items()?;
        if !(2..=3).contains(&items.len()) {
            return Err(BindError::invalid(
                call.name.clone(),
                "must be [runId | null, request, params?]",
            ));
        }
        // Named as `createEvent` names its arguments, so that errors read the same.
        for (item, name) in items.iter_mut().zip(["runId", "request", "params"]) {
            item.name = name.to_owned();
        }
        let params = match items.get(2) {
            Some(p) if !p.is_nullish()? => Some(p.json_text()?),
            _ => None,
        };
        Ok(CreateCall {
            run: items[0].opt_string()?,
            request: items[1].json_text()?,
            params,
        })
    }

    fn parse(self) -> Result<(Option<String>, EventRequest, CreateEventParams), BindError> {
        let request: EventRequest = serde_json::from_str(&self.request)
            .map_err(|e| BindError::invalid("request", e.to_string()))?;
        let params = match self.params {
            Some(text) => create_params(&parse_json(&text, "params")?)?,
            None => create_params(&Value::Object(Default::default()))?,
        };
        Ok((self.run, request, params))
    }
}

/// One outcome per call: a JSON text, or the `Error` the call rejects with.
struct Settled(Vec<Result<String, BindError>>);

impl IntoJs for Settled {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        let items = self
            .0
            .into_iter()
            .map(|r| match r {
                Ok(text) => Json(text).into_js(env),
                Err(e) => e.to_js(env),
            })
            .collect::<napi::Result<_>>()?;
        array(env, items)
    }
}

/// JSON text, resolved as a JavaScript string.
pub(crate) struct Json(pub(crate) String);

impl IntoJs for Json {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        if !self.0.is_ascii() {
            return unsafe {
                <String as napi::bindgen_prelude::ToNapiValue>::to_napi_value(env, self.0)
            };
        }
        // ASCII text is its own Latin-1: V8 copies it into a one-byte string without the
        // UTF-8 decoder (most result texts: payloads carry binary values as base64).
        let mut out = std::ptr::null_mut();
        let status = unsafe {
            sys::napi_create_string_latin1(
                env,
                self.0.as_ptr().cast(),
                self.0.len() as isize,
                &mut out,
            )
        };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_create_string_latin1 failed"));
        }
        Ok(out)
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, BindError> {
    serde_json::to_string(v)
        .map_err(|e| BindError::internal(format!("cannot serialize a result: {e}")))
}

/// The `code` of a World error (the error table's).
fn world_code(e: &WorldError) -> &'static str {
    e.code().as_str()
}

/// A `WorldError` as a rejection: its code, class and status (the error table,
/// `runlog_world::error_table`), `retryAfter` and the error's fields. A store-wide answer
/// that lies in unreadable runs (`WorldError::Unreadable`) carries the code of the first
/// run's fault, `runId` (that run) and `runIds` (every such run, joined by `,`).
pub(crate) fn from_world(e: WorldError) -> BindError {
    let (code, class) = (e.code(), e.class_name());
    let retry = e.retry_after_s();
    let message = e.to_string();
    let mut b = match e {
        WorldError::Storage(inner) => BindError::from_store(inner),
        WorldError::Unreadable { ref runs, .. } => {
            let first = runs.first();
            let ids: Vec<&str> = runs.iter().map(|f| f.run_id.as_str()).collect();
            BindError::with_code(code, class, message)
                .with_str("runId", first.map_or("", |f| &f.run_id))
                .with_str("runIds", ids.join(","))
        }
        _ => BindError::with_code(code, class, message),
    };
    if let Some(s) = retry {
        b = b.with_num("retryAfter", s);
    }
    b
}

fn world_fields(b: BindError, e: &WorldError) -> BindError {
    match e {
        WorldError::RunNotFound { run_id }
        | WorldError::EntityConflict { run_id, .. }
        | WorldError::RunExpired { run_id, .. }
        | WorldError::PreconditionFailed { run_id, .. }
        | WorldError::LegacySpecVersion { run_id, .. }
        | WorldError::Busy { run_id, .. }
        | WorldError::InvalidStoredEvent { run_id, .. } => b.with_str("runId", run_id),
        WorldError::StepNotFound { run_id, step_id }
        | WorldError::TooEarly {
            run_id, step_id, ..
        } => b.with_str("runId", run_id).with_str("stepId", step_id),
        WorldError::HookNotFound { hook } => b.with_str("hook", hook),
        WorldError::WaitNotFound { run_id, wait_id } => {
            b.with_str("runId", run_id).with_str("waitId", wait_id)
        }
        WorldError::EventNotFound { run_id, event_id }
        | WorldError::DuplicateEventId { run_id, event_id } => {
            b.with_str("runId", run_id).with_str("eventId", event_id)
        }
        WorldError::RunNotSupported {
            run_id,
            found,
            supported,
        } => b
            .with_str("runId", run_id)
            .with_num("found", u64::from(*found))
            .with_num("supported", u64::from(*supported)),
        WorldError::InvalidRequest { field, .. } => b.with_str("field", field),
        _ => b,
    }
}

fn world_err(e: WorldError) -> BindError {
    let fields = world_fields(BindError::internal(""), &e);
    let mut b = from_world(e);
    for (k, v) in fields.props {
        if !b.props.iter().any(|(key, _)| *key == k) {
            b.props.push((k, v));
        }
    }
    b
}

/// A `StreamError` as a rejection: its code, class and status (the error table).
fn stream_err(e: StreamError) -> BindError {
    let (code, class) = (e.code(), e.class_name());
    let message = e.to_string();
    match e {
        StreamError::Store(inner) => BindError::from_store(inner),
        StreamError::Closed { run, name } => BindError::with_code(code, class, message)
            .with_str("runId", run)
            .with_str("name", name),
        _ => BindError::with_code(code, class, message),
    }
}

fn parse_json(text: &str, field: &str) -> Result<Value, BindError> {
    serde_json::from_str(text).map_err(|e| BindError::invalid(field, format!("not JSON: {e}")))
}

fn opt_json(arg: Option<Unknown<'_>>, name: &str) -> Result<Value, BindError> {
    match arg.map(|a| Arg::new(a, name)) {
        Some(a) if !a.is_nullish()? => parse_json(&a.json_text()?, name),
        _ => Ok(Value::Object(Default::default())),
    }
}

fn obj<'a>(v: &'a Value, field: &str) -> Result<&'a serde_json::Map<String, Value>, BindError> {
    v.as_object()
        .ok_or_else(|| BindError::invalid(field, "must be an object"))
}

fn resolve_data(v: &Value, field: &str) -> Result<ResolveData, BindError> {
    match v.get("resolveData") {
        None | Some(Value::Null) => Ok(ResolveData::All),
        Some(Value::String(s)) if s == "all" => Ok(ResolveData::All),
        Some(Value::String(s)) if s == "none" => Ok(ResolveData::None),
        Some(_) => Err(BindError::invalid(
            format!("{field}.resolveData"),
            "must be 'all' or 'none'",
        )),
    }
}

fn opt_str(v: &Value, key: &str, field: &str) -> Result<Option<String>, BindError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(BindError::invalid(
            format!("{field}.{key}"),
            "must be a string",
        )),
    }
}

fn opt_uint(v: &Value, key: &str, field: &str) -> Result<Option<u64>, BindError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= MAX_SAFE_INTEGER as f64 => {
                Ok(Some(f as u64))
            }
            _ => Err(BindError::invalid(
                format!("{field}.{key}"),
                "must be a non-negative integer",
            )),
        },
        Some(_) => Err(BindError::invalid(
            format!("{field}.{key}"),
            "must be a number",
        )),
    }
}

/// `pagination: {limit, cursor, sortOrder}` of a list's params.
fn pagination(v: &Value, field: &str) -> Result<Pagination, BindError> {
    let p = match v.get("pagination") {
        None | Some(Value::Null) => return Ok(Pagination::default()),
        Some(p) => p,
    };
    let field = format!("{field}.pagination");
    obj(p, &field)?;
    let sort_order = match opt_str(p, "sortOrder", &field)?.as_deref() {
        None => None,
        Some("asc") => Some(SortOrder::Asc),
        Some("desc") => Some(SortOrder::Desc),
        Some(_) => {
            return Err(BindError::invalid(
                format!("{field}.sortOrder"),
                "must be 'asc' or 'desc'",
            ));
        }
    };
    Ok(Pagination {
        limit: opt_uint(p, "limit", &field)?.map(|n| n as usize),
        // An empty cursor is no cursor (the SDK's CLI passes `''` for the first page).
        cursor: opt_str(p, "cursor", &field)?.filter(|c| !c.is_empty()),
        sort_order,
    })
}

fn create_params(v: &Value) -> Result<CreateEventParams, BindError> {
    obj(v, "params")?;
    let state_updated_at_ms = match v.get("stateUpdatedAt") {
        Some(Value::String(s)) => Some(
            runlog_world::parse_iso_ms(s)
                .ok_or_else(|| BindError::invalid("params.stateUpdatedAt", "not a date"))?,
        ),
        _ => opt_uint(v, "stateUpdatedAt", "params")?,
    };
    Ok(CreateEventParams {
        resolve_data: resolve_data(v, "params")?,
        state_updated_at_ms,
        since_cursor: opt_str(v, "sinceCursor", "params")?,
        skip_preload: matches!(v.get("skipPreload"), Some(Value::Bool(true))),
        event_count: opt_uint(v, "eventCount", "params")?,
        resume_id: opt_str(v, "resumeId", "params")?,
        resume_payload_digest: opt_str(v, "resumePayloadDigest", "params")?,
    })
}

/// `createBatch`'s items, `[{event, occurredAt?, computeInstanceId?}]`: the requests.
fn batch_requests(text: &str) -> Result<Vec<EventRequest>, BindError> {
    let items = parse_json(text, "events")?;
    let Value::Array(items) = items else {
        return Err(BindError::invalid("events", "must be an array"));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, mut item)| {
            let event = item
                .get_mut("event")
                .map(Value::take)
                .ok_or_else(|| BindError::invalid(format!("events[{i}].event"), "required"))?;
            serde_json::from_value(event)
                .map_err(|e| BindError::invalid(format!("events[{i}].event"), e.to_string()))
        })
        .collect()
}

/// One `BatchEventItemResult`: `{status: 200, event, step?, wait?, run?}`, or `{status,
/// error, message}` with the class and status its single `create` would have failed with.
fn batch_item(answer: Result<runlog_world::EventResult, WorldError>) -> Result<Value, BindError> {
    match answer {
        Ok(r) => {
            let mut out = serde_json::Map::new();
            out.insert("status".into(), Value::from(200));
            for (key, value) in [
                ("event", serde_json::to_value(&r.event)),
                ("run", serde_json::to_value(&r.run)),
                ("step", serde_json::to_value(&r.step)),
                ("wait", serde_json::to_value(&r.wait)),
            ] {
                let value = value.map_err(|e| BindError::invalid("result", e.to_string()))?;
                if !value.is_null() {
                    out.insert(key.into(), value);
                }
            }
            Ok(Value::Object(out))
        }
        Err(e) => Ok(serde_json::json!({
            "status": e.status(),
            "error": e.class_name(),
            "message": e.to_string(),
        })),
    }
}

/// `cancelMany`'s request, `{runIds: string[], cancelReason?: string}`.
fn cancel_request(text: &str) -> Result<(Vec<String>, Option<String>), BindError> {
    let v = parse_json(text, "request")?;
    obj(&v, "request")?;
    let ids = match v.get("runIds") {
        Some(Value::Array(ids)) => ids
            .iter()
            .enumerate()
            .map(|(i, id)| match id {
                Value::String(s) => Ok(s.clone()),
                _ => Err(BindError::invalid(
                    format!("request.runIds[{i}]"),
                    "must be a string",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(BindError::invalid(
                "request.runIds",
                "must be an array of strings",
            ));
        }
    };
    Ok((ids, opt_str(&v, "cancelReason", "request")?))
}

/// `runs.experimentalSetAttributes`'s `changes`: `(key, value)` pairs, or (inner `Err`) why
/// an entry breaks the types `validateAttributeChanges` requires (an object with a string
/// `key` and a string or null `value`), which is an `AttributeValidationError` once the run
/// is known to exist.
///
/// # Errors
/// `INVALID_INPUT` (field `changes`) when `changes` is not a JSON array.
#[allow(clippy::type_complexity)]
fn attribute_changes(
    text: &str,
) -> Result<Result<Vec<(String, Option<String>)>, String>, BindError> {
    let Value::Array(items) = parse_json(text, "changes")? else {
        return Err(BindError::invalid("changes", "must be an array"));
    };
    let mut changes = Vec::with_capacity(items.len());
    for item in &items {
        let key = match item.get("key") {
            Some(Value::String(k)) => k.clone(),
            other => {
                return Ok(Err(format!(
                    "attribute key must be a string, got {}",
                    json_type(other)
                )));
            }
        };
        let value = match item.get("value") {
            Some(Value::String(v)) => Some(v.clone()),
            Some(Value::Null) => None,
            other => {
                return Ok(Err(format!(
                    "attribute value must be a string or null, got {}",
                    json_type(other)
                )));
            }
        };
        changes.push((key, value));
    }
    Ok(Ok(changes))
}

/// The JavaScript `typeof` of a JSON value (`undefined` when absent).
fn json_type(v: Option<&Value>) -> &'static str {
    match v {
        None => "undefined",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Null | Value::Array(_) | Value::Object(_)) => "object",
    }
}

/// `BulkCancelWorkflowRunsResult`: `{summary, results}`, the results in request order.
fn cancel_result(run_ids: &[String], outcomes: Vec<CancelOutcome>) -> Value {
    let mut counts = [0u32; 5];
    let results: Vec<Value> = run_ids
        .iter()
        .zip(outcomes)
        .map(|(id, outcome)| {
            let (at, v) = match outcome {
                CancelOutcome::Cancelled => (0, serde_json::json!({ "outcome": "cancelled" })),
                CancelOutcome::AlreadyCancelled => {
                    (1, serde_json::json!({ "outcome": "already_cancelled" }))
                }
                CancelOutcome::NotCancellable(status) => (
                    2,
                    serde_json::json!({ "outcome": "not_cancellable", "status": status.as_str() }),
                ),
                CancelOutcome::NotFound => (3, serde_json::json!({ "outcome": "not_found" })),
                CancelOutcome::Failed(e) => (
                    4,
                    serde_json::json!({
                        "outcome": "failed",
                        "code": world_code(&e),
                        "retryable": e.status() >= 500,
                    }),
                ),
            };
            counts[at] += 1;
            let mut v = v;
            v["runId"] = Value::from(id.as_str());
            v
        })
        .collect();
    serde_json::json!({
        "summary": {
            "requested": run_ids.len(),
            "cancelled": counts[0],
            "alreadyCancelled": counts[1],
            "notCancellable": counts[2],
            "notFound": counts[3],
            "failed": counts[4],
        },
        "results": results,
    })
}

fn run_status(s: &str) -> Result<RunStatus, BindError> {
    Ok(match s {
        "pending" => RunStatus::Pending,
        "running" => RunStatus::Running,
        "completed" => RunStatus::Completed,
        "failed" => RunStatus::Failed,
        "cancelled" => RunStatus::Cancelled,
        _ => return Err(BindError::invalid("params.status", "not a run status")),
    })
}

fn string_arg(v: Unknown<'_>, name: &str) -> Result<String, BindError> {
    Arg::new(v, name).string()
}

/// The run id of a stream call: any id the store can hold (`[A-Za-z0-9_-]`, 1–128 bytes).
/// Not only `wrun_<ULID>`: a stream lives in logs of its own (`stream-…`), whatever its run,
/// and the SDK's health check writes and reads one under `wrun_hc_<ULID>`, a run that never
/// exists (as the reference's local store allows). Any other id is `INVALID_INPUT` (400).
fn stream_run(v: Unknown<'_>) -> Result<RunId, BindError> {
    let s = Arg::new(v, "runId").string()?;
    RunId::new(&s).map_err(BindError::from_store)
}

/// A chunk list `[{index, data}]`.
fn chunks_js(
    env: sys::napi_env,
    chunks: &[runlog_world::streams::StreamChunk],
) -> napi::Result<sys::napi_value> {
    let items = chunks
        .iter()
        .map(|c| {
            Ok(ObjOut::new(env)?
                .set("index", c.index as f64)?
                .set_raw("data", buffer(env, &c.data)?)?
                .raw())
        })
        .collect::<napi::Result<_>>()?;
    array(env, items)
}

struct ReadOut(ChunkRead);

impl IntoJs for ReadOut {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        let r = self.0;
        Ok(ObjOut::new(env)?
            .set_raw("chunks", chunks_js(env, &r.chunks)?)?
            .set("nextIndex", r.next_index as f64)?
            .set("hasMore", r.has_more)?
            .set("done", r.done)?
            .raw())
    }
}

struct PageOut(ChunkPage);

impl IntoJs for PageOut {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        let p = self.0;
        Ok(ObjOut::new(env)?
            .set_raw("data", chunks_js(env, &p.data)?)?
            .set("cursor", p.cursor)?
            .set("hasMore", p.has_more)?
            .set("done", p.done)?
            .raw())
    }
}

struct InfoOut(StreamInfo);

impl IntoJs for InfoOut {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        Ok(ObjOut::new(env)?
            .set("tailIndex", self.0.tail_index as f64)?
            .set("done", self.0.done)?
            .raw())
    }
}

struct RangeOut(Range<u64>);

impl IntoJs for RangeOut {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        Ok(ObjOut::new(env)?
            .set("start", self.0.start as f64)?
            .set("end", self.0.end as f64)?
            .raw())
    }
}

struct Names(Vec<String>);

impl IntoJs for Names {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value> {
        let items = self
            .0
            .into_iter()
            .map(|n| unsafe {
                <String as napi::bindgen_prelude::ToNapiValue>::to_napi_value(env, n)
            })
            .collect::<napi::Result<_>>()?;
        array(env, items)
    }
}

#[napi]
impl JsWorld {
    /// Whether the store under this World was closed.
    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.shared.is_closed()
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
                let params = create_params(&opt_json(params, "params")?)?;
                Ok((run, text, params))
            },
            move |w, (run, text, params)| {
                // Parsed on the worker: the JavaScript thread only copies the text.
                let request: EventRequest = serde_json::from_str(&text)
                    .map_err(|e| BindError::invalid("request", e.to_string()))?;
                let r = w
                    .world
                    .create_event(run.as_deref(), request, &params)
                    .map_err(world_err)?;
                to_json(&r)
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
                let params = create_params(&opt_json(params, "params")?)?;
                Ok((run, text, params))
            },
            move |w, (run, text, params)| {
                let requests = batch_requests(&text)?;
                let answers = w
                    .world
                    .create_batch(&run, requests, &params)
                    .map_err(world_err)?;
                let results = answers
                    .into_iter()
                    .map(batch_item)
                    .collect::<Result<Vec<_>, _>>()?;
                to_json(&serde_json::json!({ "results": results }))
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
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                Ok((text, resolve))
            },
            move |w, (text, resolve)| {
                let ids: Vec<String> = serde_json::from_str(&text)
                    .map_err(|e| BindError::invalid("runIds", e.to_string()))?;
                to_json(&w.world.get_runs(&ids, resolve).map_err(world_err)?)
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
                let outcomes = w
                    .world
                    .cancel_runs(&ids, reason.as_deref())
                    .map_err(world_err)?;
                to_json(&cancel_result(&ids, outcomes))
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
                let options = opt_json(options, "options")?;
                let allow = match options.get("allowReservedAttributes") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(BindError::invalid(
                            "options.allowReservedAttributes",
                            "must be a boolean",
                        ));
                    }
                };
                let changes = attribute_changes(&text)?;
                Ok((run, allow, changes))
            },
            move |w, (run, allow, changes)| {
                let changes = match changes {
                    Ok(changes) => changes,
                    // The run is looked up first, as the reference does.
                    Err(reason) => {
                        w.world
                            .get_run(&run, ResolveData::None)
                            .map_err(world_err)?;
                        return Err(world_err(WorldError::AttributeValidation { reason }));
                    }
                };
                let attributes = w
                    .world
                    .set_run_attributes(&run, &changes, allow)
                    .map_err(world_err)?;
                to_json(&serde_json::json!({ "attributes": attributes }))
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
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                let timeout = Duration::from_millis(timeout_ms);
                Ok((run, resolve, timeout))
            },
            move |w, (run, resolve, timeout)| {
                to_json(
                    &w.world
                        .wait_for_terminal_run(&run, timeout, resolve)
                        .map_err(world_err)?,
                )
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
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                Ok((run, resolve))
            },
            move |w, (run, resolve)| to_json(&w.world.get_run(&run, resolve).map_err(world_err)?),
        )
    }

    /// `runsList(params?) → Promise<string>`: `{workflowName, status, pagination,
    /// resolveData}`.
    #[napi(ts_args_type = "params?: JsonArg", ts_return_type = "Promise<string>")]
    pub fn runs_list(&self, env: Env, params: Option<Unknown<'_>>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let v = opt_json(params, "params")?;
                obj(&v, "params")?;
                let p = ListRunsParams {
                    workflow_name: opt_str(&v, "workflowName", "params")?,
                    status: opt_str(&v, "status", "params")?
                        .as_deref()
                        .map(run_status)
                        .transpose()?,
                    pagination: pagination(&v, "params")?,
                    resolve_data: resolve_data(&v, "params")?,
                };
                Ok(p)
            },
            move |w, p| to_json(&w.world.list_runs(&p).map_err(world_err)?),
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
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                let step = string_arg(step, "stepId")?;
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                Ok((run, step, resolve))
            },
            move |w, (run, step, resolve)| {
                to_json(&w.world.get_step(&run, &step, resolve).map_err(world_err)?)
            },
        )
    }

    /// `stepsList(params) → Promise<string>`: `{runId, pagination, resolveData}`.
    #[napi(ts_args_type = "params: JsonArg", ts_return_type = "Promise<string>")]
    pub fn steps_list(&self, env: Env, params: Unknown<'_>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let v = opt_json(Some(params), "params")?;
                let run = opt_str(&v, "runId", "params")?
                    .ok_or_else(|| BindError::invalid("params.runId", "required"))?;
                let p = pagination(&v, "params")?;
                let resolve = resolve_data(&v, "params")?;
                Ok((run, p, resolve))
            },
            move |w, (run, p, resolve)| {
                to_json(&w.world.list_steps(&run, &p, resolve).map_err(world_err)?)
            },
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
        self.json_call(
            &env,
            || {
                let run = string_arg(run, "runId")?;
                let event = string_arg(event, "eventId")?;
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                Ok((run, event, resolve))
            },
            move |w, (run, event, resolve)| {
                to_json(
                    &w.world
                        .get_event(&run, &event, resolve)
                        .map_err(world_err)?,
                )
            },
        )
    }

    /// `eventsList(params) → Promise<[text, bytes, cursor, hasMore]>`: `{runId, pagination,
    /// resolveData}`; the page in the wire form of `event_page.rs`, the bytes of its binary
    /// values (or `null`), its cursor (or `null`) and `hasMore`.
    #[napi(
        ts_args_type = "params: JsonArg",
        ts_return_type = "Promise<EventPageWire>"
    )]
    pub fn events_list(&self, env: Env, params: Unknown<'_>) -> napi::Result<Raw> {
        self.world_call(
            &env,
            || {
                let v = opt_json(Some(params), "params")?;
                let run = opt_str(&v, "runId", "params")?
                    .ok_or_else(|| BindError::invalid("params.runId", "required"))?;
                let p = pagination(&v, "params")?;
                let resolve = resolve_data(&v, "params")?;
                Ok((run, p, resolve))
            },
            move |w, (run, p, resolve)| {
                if resolve == ResolveData::All
                    && let Some(page) = events_list_json(&w.world, &run, &p).map_err(world_err)?
                {
                    return Ok(page);
                }
                events_page_json(&w.world.list_events(&run, &p, resolve).map_err(world_err)?)
            },
        )
    }

    /// `eventsListByCorrelationId(params) → Promise<[text, bytes, cursor, hasMore]>`:
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
                let v = opt_json(Some(params), "params")?;
                let corr = opt_str(&v, "correlationId", "params")?
                    .ok_or_else(|| BindError::invalid("params.correlationId", "required"))?;
                let run = opt_str(&v, "runId", "params")?;
                let p = pagination(&v, "params")?;
                let resolve = resolve_data(&v, "params")?;
                Ok((corr, run, p, resolve))
            },
            move |w, (corr, run, p, resolve)| {
                let page = w
                    .world
                    .list_events_by_correlation_id(&corr, run.as_deref(), &p, resolve)
                    .map_err(world_err)?;
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
        self.json_call(
            &env,
            || {
                let hook = string_arg(hook, "hookId")?;
                let resolve = resolve_data(&opt_json(params, "params")?, "params")?;
                Ok((hook, resolve))
            },
            move |w, (hook, resolve)| {
                to_json(&w.world.get_hook(&hook, resolve).map_err(world_err)?)
            },
        )
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
            move |w, token| to_json(&w.world.get_hook_by_token(&token).map_err(world_err)?),
        )
    }

    /// `hooksList(params?) → Promise<string>`: `{runId?, pagination, resolveData}`.
    #[napi(ts_args_type = "params?: JsonArg", ts_return_type = "Promise<string>")]
    pub fn hooks_list(&self, env: Env, params: Option<Unknown<'_>>) -> napi::Result<Raw> {
        self.json_call(
            &env,
            || {
                let v = opt_json(params, "params")?;
                obj(&v, "params")?;
                let run = opt_str(&v, "runId", "params")?;
                let p = pagination(&v, "params")?;
                let resolve = resolve_data(&v, "params")?;
                Ok((run, p, resolve))
            },
            move |w, (run, p, resolve)| {
                let page = w
                    .world
                    .list_hooks(run.as_deref(), &p, resolve)
                    .map_err(world_err)?;
                to_json(&page)
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
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                let chunk = Arg::new(chunk, "chunk").bytes()?;
                Ok((run, name, chunk))
            },
            move |lease, (run, name, chunk)| {
                let i = lease
                    .worlds
                    .streams
                    .write(&run, &name, chunk)
                    .map_err(stream_err)?;
                Number::seq(i)
            },
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
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                let chunks = Arg::new(chunks, "chunks")
                    .array_items()?
                    .iter()
                    .map(|c| c.bytes().map(bytes::Bytes::from))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((run, name, chunks))
            },
            move |lease, (run, name, chunks)| {
                let r = lease
                    .worlds
                    .streams
                    .write_many(&run, &name, chunks)
                    .map_err(stream_err)?;
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
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                Ok((run, name))
            },
            move |lease, (run, name)| {
                lease
                    .worlds
                    .streams
                    .close(&run, &name)
                    .map_err(stream_err)?;
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
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                let start = match start.map(|s| Arg::new(s, "startIndex")) {
                    Some(a) if !a.is_nullish()? => a.int()?,
                    _ => 0,
                };
                let limit = match limit.map(|s| Arg::new(s, "limit")) {
                    Some(a) => {
                        a.uint_or(CHUNKS_PER_PAGE_DEFAULT as u64, MAX_SAFE_INTEGER)? as usize
                    }
                    None => CHUNKS_PER_PAGE_DEFAULT,
                };
                Ok((run, name, start, limit))
            },
            move |lease, (run, name, start, limit)| {
                let r = lease
                    .worlds
                    .streams
                    .read(&run, &name, start, limit)
                    .map_err(stream_err)?;
                Ok(ReadOut(r))
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
        self.call(
            &env,
            &pool::WAIT,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                let index = Arg::new(index, "index").uint(MAX_SAFE_INTEGER)?;
                let timeout = Arg::new(timeout_ms, "timeoutMs").uint(WAIT_TIMEOUT_MS_MAX)?;
                let deadline = Instant::now() + Duration::from_millis(timeout);
                let shared = self.shared.clone();
                Ok((run, name, index, deadline, shared))
            },
            move |lease, (run, name, index, deadline, shared)| {
                let info = wait_sliced(
                    || shared.is_closed(),
                    deadline,
                    |slice| {
                        let info = lease
                            .worlds
                            .streams
                            .wait(&run, &name, index, slice)
                            .map_err(stream_err)?;
                        let done = info.done || info.tail_index >= index as i64;
                        Ok((info, done))
                    },
                )?;
                Ok(InfoOut(info))
            },
        )
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
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                let v = opt_json(params, "params")?;
                obj(&v, "params")?;
                let limit = opt_uint(&v, "limit", "params")?.map(|n| n as usize);
                let cursor = opt_str(&v, "cursor", "params")?.filter(|c| !c.is_empty());
                Ok((run, name, limit, cursor))
            },
            move |lease, (run, name, limit, cursor)| {
                let p = lease
                    .worlds
                    .streams
                    .get_chunks(&run, &name, cursor.as_deref(), limit)
                    .map_err(stream_err)?;
                Ok(PageOut(p))
            },
        )
    }

    /// `streamsInfo(runId, name) → Promise<{tailIndex, done}>` (`tailIndex` −1: no chunk).
    #[napi(
        ts_args_type = "runId: string, name: string",
        ts_return_type = "Promise<StreamInfo>"
    )]
    pub fn streams_info(&self, env: Env, run: Unknown<'_>, name: Unknown<'_>) -> napi::Result<Raw> {
        self.call(
            &env,
            &pool::IO,
            || {
                let run = stream_run(run)?;
                let name = string_arg(name, "name")?;
                Ok((run, name))
            },
            move |lease, (run, name)| {
                Ok(InfoOut(
                    lease.worlds.streams.info(&run, &name).map_err(stream_err)?,
                ))
            },
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
            move |lease, run| Ok(Names(lease.worlds.streams.list(&run).map_err(stream_err)?)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::Prop;

    fn prop<'a>(e: &'a BindError, key: &str) -> Option<&'a Prop> {
        e.props.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    #[test]
    fn world_errors_carry_code_class_status_and_fields() {
        let e = world_err(WorldError::TooEarly {
            run_id: "wrun_1".into(),
            step_id: "step_1".into(),
            retry_after_s: 7,
        });
        assert_eq!(e.code.as_str(), "TOO_EARLY");
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("TooEarlyError".into()))
        );
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(425.0)));
        assert_eq!(prop(&e, "retryAfter"), Some(&Prop::Num(7.0)));
        assert_eq!(prop(&e, "stepId"), Some(&Prop::Str("step_1".into())));

        let cases = [
            (
                WorldError::RunNotFound {
                    run_id: "wrun_1".into(),
                },
                "NOT_FOUND",
                404.0,
            ),
            (
                WorldError::EntityConflict {
                    run_id: "wrun_1".into(),
                    message: "terminal".into(),
                },
                "CONFLICT",
                409.0,
            ),
            (
                WorldError::RunExpired {
                    run_id: "wrun_1".into(),
                    message: "ended".into(),
                },
                "GONE",
                410.0,
            ),
            (
                WorldError::InvalidRequest {
                    field: "runId".into(),
                    reason: "bad".into(),
                },
                "INVALID_INPUT",
                400.0,
            ),
        ];
        for (err, code, status) in cases {
            let b = world_err(err);
            assert_eq!(b.code.as_str(), code);
            assert_eq!(prop(&b, "status"), Some(&Prop::Num(status)));
        }
    }

    #[test]
    fn an_answer_lying_in_unreadable_runs_carries_the_first_faults_code_and_every_run() {
        let fault = |run: &str, code: &str| runlog_world::StorageFault {
            run_id: run.into(),
            code: code.into(),
            message: format!("corrupt run {run}"),
            readable_seq: 3,
            segment: None,
            offset: None,
        };
        let e = world_err(WorldError::Unreadable {
            what: "hooks.list",
            runs: vec![fault("wrun_1", "CORRUPT"), fault("wrun_2", "IO")],
        });
        assert_eq!(e.code.as_str(), "CORRUPT");
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("WorkflowWorldError".into()))
        );
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(500.0)));
        assert_eq!(prop(&e, "runId"), Some(&Prop::Str("wrun_1".into())));
        assert_eq!(prop(&e, "runIds"), Some(&Prop::Str("wrun_1,wrun_2".into())));
        assert!(e.message.contains("wrun_2"), "{}", e.message);
    }

    #[test]
    fn storage_faults_keep_the_store_code_and_a_5xx_status() {
        let e = world_err(WorldError::Storage(runlog::Error::corrupt(
            "wrun_1",
            "seg-00000001.log",
            4096,
            "crc",
        )));
        assert_eq!(e.code.as_str(), "CORRUPT");
        assert_eq!(prop(&e, "status"), Some(&Prop::Num(500.0)));
        assert_eq!(
            prop(&e, "className"),
            Some(&Prop::Str("WorkflowWorldError".into()))
        );
        let s = stream_err(StreamError::Closed {
            run: "wrun_1".into(),
            name: "s".into(),
        });
        assert_eq!(s.code.as_str(), "STREAM_CLOSED");
        assert_eq!(prop(&s, "status"), Some(&Prop::Num(409.0)));
    }
}
