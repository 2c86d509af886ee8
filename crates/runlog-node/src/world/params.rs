//! The World's parameters, parsed once from their JSON text into typed structs (one per
//! shape, shared by the methods that take it) and then checked into `runlog_world`'s types.
//!
//! Parameters cross the boundary as JSON text (the package's `toJson` writes them, binary
//! values and all), so they are `serde::Deserialize` structs rather than `#[napi(object)]`:
//! one `serde_json` pass over the text on the JavaScript thread, no property reads through
//! Node-API, and the enums (`ResolveData`, `SortOrder`, `RunStatus`) through the
//! `Deserialize` they already derive in `runlog-world`.
//!
//! A field is read as a [`Given`]: absent or `null`, a value of its type, or a value of another
//! type. The parse itself never fails on a field, so each wrong one is named by the checks
//! here, with the field path and the reason the callers have always seen
//! (`params.pagination.sortOrder: must be 'asc' or 'desc'`); only text that is not JSON fails
//! the parse (`not JSON`). Objects are read by [`Obj`], which takes a JSON object only (serde's
//! derived structs would also take an array).

use std::fmt;
use std::marker::PhantomData;

use runlog_world::{
    CreateEventParams, EventRequest, ListRunsParams, Pagination, ResolveData, RunStatus, SortOrder,
};
use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{DeserializeOwned, IgnoredAny, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use napi::bindgen_prelude::Unknown;

use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::js::Arg;

/// A field as given: absent or `null`, a `T`, or a value of another type.
#[derive(Default)]
pub(crate) enum Given<T> {
    #[default]
    Absent,
    Value(T),
    Wrong,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Given<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Any<T> {
            Null(()),
            Value(T),
            Wrong(IgnoredAny),
        }
        Ok(match Any::<T>::deserialize(d)? {
            Any::Null(()) => Given::Absent,
            Any::Value(v) => Given::Value(v),
            Any::Wrong(_) => Given::Wrong,
        })
    }
}

impl<T> Given<T> {
    /// The value, `None` when absent; `INVALID_INPUT` naming `field` with `reason` when of
    /// another type.
    pub(crate) fn get(self, field: &str, reason: &str) -> Result<Option<T>, BindError> {
        match self {
            Given::Absent => Ok(None),
            Given::Value(v) => Ok(Some(v)),
            Given::Wrong => Err(BindError::invalid(field, reason)),
        }
    }
}

/// A JSON object read as `T` (an array or any other value is refused).
pub(crate) struct Obj<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        d.deserialize_any(Only(PhantomData))
    }
}

/// `text` (a parameter's JSON) as an object of `T`: `None` for `null` or a value that is no
/// object (each caller says whether that is an error).
///
/// # Errors
/// `INVALID_INPUT` naming `field` when `text` is not JSON.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, field: &str) -> Result<Option<T>, BindError> {
    let given: Given<Obj<T>> = serde_json::from_str(text)
        .map_err(|e| BindError::invalid(field, format!("not JSON: {e}")))?;
    Ok(match given {
        Given::Value(Obj(v)) => Some(v),
        Given::Absent | Given::Wrong => None,
    })
}

/// [`parse`] of an optional parameter (`None`: not given, as `{}`), any other value than an
/// object also as `{}`.
pub(crate) fn parse_or_default<T: DeserializeOwned + Default>(
    text: Option<&str>,
    field: &str,
) -> Result<T, BindError> {
    match text {
        Some(text) => Ok(parse(text, field)?.unwrap_or_default()),
        None => Ok(T::default()),
    }
}

/// [`parse`] of a parameter that must be an object when given (`None`: not given, as `{}`).
///
/// # Errors
/// `INVALID_INPUT` naming `field`: not JSON, or no object.
pub(crate) fn parse_object<T: DeserializeOwned + Default>(
    text: Option<&str>,
    field: &str,
) -> Result<T, BindError> {
    match text {
        Some(text) => {
            parse(text, field)?.ok_or_else(|| BindError::invalid(field, "must be an object"))
        }
        None => Ok(T::default()),
    }
}

/// `s` as a unit variant of `T` by `T`'s own `Deserialize` (`None`: no such variant).
fn variant<T: DeserializeOwned>(s: &str) -> Option<T> {
    let d: StrDeserializer<'_, serde::de::value::Error> = s.into_deserializer();
    T::deserialize(d).ok()
}

/// `resolveData`: `'all'` (also when absent) or `'none'`.
fn resolve_data(given: Given<ResolveData>, field: &str) -> Result<ResolveData, BindError> {
    let field = format!("{field}.resolveData");
    Ok(given
        .get(&field, "must be 'all' or 'none'")?
        .unwrap_or_default())
}

/// A string field (`None` when absent).
fn string(given: Given<String>, field: &str, key: &str) -> Result<Option<String>, BindError> {
    given.get(&format!("{field}.{key}"), "must be a string")
}

/// A non-negative integral number ≤ 2^53 − 1 (`None` when absent).
fn uint(given: Given<f64>, field: &str, key: &str) -> Result<Option<u64>, BindError> {
    let field = format!("{field}.{key}");
    match given.get(&field, "must be a number")? {
        None => Ok(None),
        Some(f) if f >= 0.0 && f.fract() == 0.0 && f <= MAX_SAFE_INTEGER as f64 => {
            Ok(Some(f as u64))
        }
        Some(_) => Err(BindError::invalid(field, "must be a non-negative integer")),
    }
}

/// Params that only say `resolveData` (`runs.get`, `steps.get`, `events.get`, `hooks.get`,
/// `runs.getMany`, `runs.waitForTerminalStatus`); any value that is no object is `{}`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResolveParams {
    #[serde(default)]
    resolve_data: Given<ResolveData>,
}

impl ResolveParams {
    /// The `resolveData` of `text` (`params`).
    pub(crate) fn read(text: Option<&str>) -> Result<ResolveData, BindError> {
        let p: ResolveParams = parse_or_default(text, "params")?;
        resolve_data(p.resolve_data, "params")
    }
}

/// `pagination: {limit, cursor, sortOrder}`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PaginationWire {
    #[serde(default)]
    limit: Given<f64>,
    #[serde(default)]
    cursor: Given<String>,
    #[serde(default)]
    sort_order: Given<String>,
}

fn pagination(given: Given<Obj<PaginationWire>>, field: &str) -> Result<Pagination, BindError> {
    let field = format!("{field}.pagination");
    let Some(Obj(p)) = given.get(&field, "must be an object")? else {
        return Ok(Pagination::default());
    };
    let sort_order = match string(p.sort_order, &field, "sortOrder")? {
        None => None,
        Some(s) => Some(variant::<SortOrder>(&s).ok_or_else(|| {
            BindError::invalid(format!("{field}.sortOrder"), "must be 'asc' or 'desc'")
        })?),
    };
    Ok(Pagination {
        limit: uint(p.limit, &field, "limit")?.map(|n| n as usize),
        // An empty cursor is no cursor (the SDK's CLI passes `''` for the first page).
        cursor: string(p.cursor, &field, "cursor")?.filter(|c| !c.is_empty()),
        sort_order,
    })
}

/// The params of a list of one run's entities or of a correlation id's events:
/// `{runId, correlationId, pagination, resolveData}` (`steps.list`, `events.list`,
/// `events.listByCorrelationId`, `hooks.list`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListParams {
    #[serde(default)]
    run_id: Given<String>,
    #[serde(default)]
    correlation_id: Given<String>,
    #[serde(default)]
    pagination: Given<Obj<PaginationWire>>,
    #[serde(default)]
    resolve_data: Given<ResolveData>,
}

/// [`ListParams`] checked: the run (if given), the correlation id (if given), the page.
pub(crate) struct List {
    pub(crate) run: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) pagination: Pagination,
    pub(crate) resolve: ResolveData,
}

impl List {
    /// A list's `params`; `object`: whether a value that is no object is refused (else `{}`).
    pub(crate) fn read(text: Option<&str>, object: bool) -> Result<List, BindError> {
        let p: ListParams = match object {
            true => parse_object(text, "params")?,
            false => parse_or_default(text, "params")?,
        };
        Ok(List {
            run: string(p.run_id, "params", "runId")?,
            correlation_id: string(p.correlation_id, "params", "correlationId")?,
            pagination: pagination(p.pagination, "params")?,
            resolve: resolve_data(p.resolve_data, "params")?,
        })
    }

    /// The run id, required.
    pub(crate) fn run_required(&self) -> Result<String, BindError> {
        self.run
            .clone()
            .ok_or_else(|| BindError::invalid("params.runId", "required"))
    }
}

/// `runs.list`'s params: `{workflowName, status, pagination, resolveData}`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunsListWire {
    #[serde(default)]
    workflow_name: Given<String>,
    #[serde(default)]
    status: Given<String>,
    #[serde(default)]
    pagination: Given<Obj<PaginationWire>>,
    #[serde(default)]
    resolve_data: Given<ResolveData>,
}

/// `runs.list`'s `params` (an object when given).
pub(crate) fn runs_list(text: Option<&str>) -> Result<ListRunsParams, BindError> {
    let p: RunsListWire = parse_object(text, "params")?;
    let status = match string(p.status, "params", "status")? {
        None => None,
        Some(s) => Some(
            variant::<RunStatus>(&s)
                .ok_or_else(|| BindError::invalid("params.status", "not a run status"))?,
        ),
    };
    Ok(ListRunsParams {
        workflow_name: string(p.workflow_name, "params", "workflowName")?,
        status,
        pagination: pagination(p.pagination, "params")?,
        resolve_data: resolve_data(p.resolve_data, "params")?,
    })
}

/// `stateUpdatedAt`: an ISO date or ms since the epoch.
#[derive(Deserialize)]
#[serde(untagged)]
enum DateOrMs {
    Iso(String),
    Ms(f64),
}

/// `CreateEventParams` as given (`events.create`, `events.createBatch`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateWire {
    #[serde(default)]
    resolve_data: Given<ResolveData>,
    #[serde(default)]
    state_updated_at: Given<DateOrMs>,
    #[serde(default)]
    since_cursor: Given<String>,
    /// Only `true` skips; any other value is no skip.
    #[serde(default)]
    skip_preload: Given<bool>,
    #[serde(default)]
    event_count: Given<f64>,
    #[serde(default)]
    resume_id: Given<String>,
    #[serde(default)]
    resume_payload_digest: Given<String>,
}

/// `events.create`'s `params` (an object when given).
pub(crate) fn create_params(text: Option<&str>) -> Result<CreateEventParams, BindError> {
    let p: CreateWire = parse_object(text, "params")?;
    let state_updated_at_ms = match p.state_updated_at {
        Given::Value(DateOrMs::Iso(s)) => Some(
            runlog_world::parse_iso_ms(&s)
                .ok_or_else(|| BindError::invalid("params.stateUpdatedAt", "not a date"))?,
        ),
        Given::Value(DateOrMs::Ms(n)) => uint(Given::Value(n), "params", "stateUpdatedAt")?,
        Given::Absent => None,
        Given::Wrong => uint(Given::Wrong, "params", "stateUpdatedAt")?,
    };
    Ok(CreateEventParams {
        resolve_data: resolve_data(p.resolve_data, "params")?,
        state_updated_at_ms,
        since_cursor: string(p.since_cursor, "params", "sinceCursor")?,
        skip_preload: matches!(p.skip_preload, Given::Value(true)),
        event_count: uint(p.event_count, "params", "eventCount")?,
        resume_id: string(p.resume_id, "params", "resumeId")?,
        resume_payload_digest: string(p.resume_payload_digest, "params", "resumePayloadDigest")?,
    })
}

/// The request of `events.create` (its shape is `runlog_world::EventRequest`'s own).
pub(crate) fn event_request(text: &str, field: &str) -> Result<EventRequest, BindError> {
    serde_json::from_str(text).map_err(|e| BindError::invalid(field, e.to_string()))
}

/// One item of `createBatch`'s `events`: `{event, occurredAt?, computeInstanceId?}` (only
/// `event` is read).
#[derive(Deserialize)]
struct BatchItemWire<'a> {
    #[serde(borrow, default)]
    event: Option<&'a RawValue>,
}

/// `createBatch`'s items, `[{event, occurredAt?, computeInstanceId?}]`: the requests.
pub(crate) fn batch_requests(text: &str) -> Result<Vec<EventRequest>, BindError> {
    // Raw JSON borrows from the text, which serde's buffering (`Given`) cannot: the kind of
    // each value is told by its first byte instead.
    let items: &RawValue = serde_json::from_str(text)
        .map_err(|e| BindError::invalid("events", format!("not JSON: {e}")))?;
    if !items.get().starts_with('[') {
        return Err(BindError::invalid("events", "must be an array"));
    }
    let items: Vec<&RawValue> = serde_json::from_str(items.get())
        .map_err(|e| BindError::invalid("events", format!("not JSON: {e}")))?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let field = format!("events[{i}].event");
            let event = match item.get().starts_with('{') {
                true => {
                    serde_json::from_str::<BatchItemWire<'_>>(item.get())
                        .map_err(|e| BindError::invalid(field.clone(), e.to_string()))?
                        .event
                }
                false => None,
            };
            match event {
                Some(event) => event_request(event.get(), &field),
                None => Err(BindError::invalid(field, "required")),
            }
        })
        .collect()
}

/// `runs.cancelMany`'s request as given.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelWire {
    #[serde(default)]
    run_ids: Given<Vec<Given<String>>>,
    #[serde(default)]
    cancel_reason: Given<String>,
}

/// `cancelMany`'s request, `{runIds: string[], cancelReason?: string}`.
pub(crate) fn cancel_request(text: &str) -> Result<(Vec<String>, Option<String>), BindError> {
    let v: CancelWire = parse_object(Some(text), "request")?;
    let Given::Value(ids) = v.run_ids else {
        return Err(BindError::invalid(
            "request.runIds",
            "must be an array of strings",
        ));
    };
    let ids = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| match id {
            Given::Value(s) => Ok(s),
            _ => Err(BindError::invalid(
                format!("request.runIds[{i}]"),
                "must be a string",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ids, string(v.cancel_reason, "request", "cancelReason")?))
}

/// `runs.experimentalSetAttributes`'s `options`: `{allowReservedAttributes}`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttributeOptions {
    #[serde(default)]
    allow_reserved_attributes: Given<bool>,
}

impl AttributeOptions {
    /// Whether `$` keys are allowed (`options`; any value that is no object is `{}`).
    pub(crate) fn read(text: Option<&str>) -> Result<bool, BindError> {
        let o: AttributeOptions = parse_or_default(text, "options")?;
        Ok(o.allow_reserved_attributes
            .get("options.allowReservedAttributes", "must be a boolean")?
            .unwrap_or(false))
    }
}

/// A JSON value by its JavaScript `typeof` (what an attribute change's wrong key or value
/// is reported as).
#[derive(Default, Deserialize)]
#[serde(untagged)]
enum Typed {
    /// Absent only (`null` is `Other`, as `typeof null` is `'object'`).
    #[default]
    #[serde(skip_deserializing)]
    Undefined,
    Str(String),
    // The variant is the answer; its value is never read.
    Bool(#[allow(dead_code)] bool),
    Num(#[allow(dead_code)] f64),
    Other(IgnoredAny),
}

impl Typed {
    fn type_of(&self) -> &'static str {
        match self {
            Typed::Undefined => "undefined",
            Typed::Str(_) => "string",
            Typed::Bool(_) => "boolean",
            Typed::Num(_) => "number",
            Typed::Other(_) => "object",
        }
    }
}

/// One change of `changes`: `{key, value}`.
#[derive(Default, Deserialize)]
struct ChangeWire {
    #[serde(default)]
    key: Typed,
    /// `None` when absent, `Some(None)` for `null`.
    #[serde(default, deserialize_with = "present")]
    value: Option<Option<Typed>>,
}

/// A field that is there, `null` included (`Some(None)`); absent it is `None` (the default).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `runs.experimentalSetAttributes`'s `changes`: `(key, value)` pairs, or (inner `Err`) why
/// an entry breaks the types `validateAttributeChanges` requires (an object with a string
/// `key` and a string or null `value`), which is an `AttributeValidationError` once the run
/// is known to exist.
///
/// # Errors
/// `INVALID_INPUT` (field `changes`) when `changes` is not a JSON array.
#[allow(clippy::type_complexity)]
pub(crate) fn attribute_changes(
    text: &str,
) -> Result<Result<Vec<(String, Option<String>)>, String>, BindError> {
    let items: Given<Vec<Given<Obj<ChangeWire>>>> = serde_json::from_str(text)
        .map_err(|e| BindError::invalid("changes", format!("not JSON: {e}")))?;
    let Given::Value(items) = items else {
        return Err(BindError::invalid("changes", "must be an array"));
    };
    let mut changes = Vec::with_capacity(items.len());
    for item in items {
        // An entry that is no object has neither key nor value (`undefined`).
        let ChangeWire { key, value } = match item {
            Given::Value(Obj(c)) => c,
            _ => ChangeWire::default(),
        };
        let Typed::Str(key) = key else {
            return Ok(Err(format!(
                "attribute key must be a string, got {}",
                key.type_of()
            )));
        };
        let value = match value {
            Some(Some(Typed::Str(v))) => Some(v),
            Some(None) => None,
            other => {
                let got = other.flatten().unwrap_or_default();
                return Ok(Err(format!(
                    "attribute value must be a string or null, got {}",
                    got.type_of()
                )));
            }
        };
        changes.push((key, value));
    }
    Ok(Ok(changes))
}

/// An optional JSON argument's text (`JSON.stringify` of an object), `None` for
/// `undefined`/`null`.
pub(crate) fn opt_text(arg: Option<Unknown<'_>>, name: &str) -> Result<Option<String>, BindError> {
    match arg.map(|a| Arg::new(a, name)) {
        Some(a) if !a.is_nullish()? => a.json_text().map(Some),
        _ => Ok(None),
    }
}

/// One call of `createEvents`, as read on the JavaScript thread (texts only; parsed on the
/// worker).
pub(crate) struct CreateCall {
    run: Option<String>,
    request: String,
    params: Option<String>,
}

impl CreateCall {
    /// `[runId | null, request, params?]`; what is wrong names the call's index.
    pub(crate) fn read(call: &Arg) -> Result<CreateCall, BindError> {
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

    /// The call parsed (on the worker): run, request, params.
    pub(crate) fn parse(
        self,
    ) -> Result<(Option<String>, EventRequest, CreateEventParams), BindError> {
        let request = event_request(&self.request, "request")?;
        let params = create_params(self.params.as_deref())?;
        Ok((self.run, request, params))
    }
}

/// `streams.getChunks`'s params: `{limit, cursor}`.
#[derive(Default, Deserialize)]
pub(crate) struct ChunksParams {
    #[serde(default)]
    limit: Given<f64>,
    #[serde(default)]
    cursor: Given<String>,
}

impl ChunksParams {
    /// `(limit, cursor)` of `params` (an object when given; an empty cursor is none).
    pub(crate) fn read(text: Option<&str>) -> Result<(Option<usize>, Option<String>), BindError> {
        let p: ChunksParams = parse_object(text, "params")?;
        Ok((
            uint(p.limit, "params", "limit")?.map(|n| n as usize),
            string(p.cursor, "params", "cursor")?.filter(|c| !c.is_empty()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the `INVALID_INPUT` that `r` failed with: `field: reason`.
    fn refusal<T>(r: Result<T, BindError>) -> String {
        match r {
            Ok(_) => panic!("accepted"),
            Err(e) => {
                assert_eq!(e.code.as_str(), "INVALID_INPUT", "{}", e.message);
                e.message
            }
        }
    }

    #[test]
    fn a_wrong_field_is_named_by_its_path_with_the_reason_callers_see() {
        let list = |text: &str| List::read(Some(text), true).map(|_| ());
        let cases = [
            (
                r#"{"resolveData":"some"}"#,
                "params.resolveData: must be 'all' or 'none'",
            ),
            (
                r#"{"resolveData":7}"#,
                "params.resolveData: must be 'all' or 'none'",
            ),
            (r#"{"runId":7}"#, "params.runId: must be a string"),
            (
                r#"{"pagination":[10]}"#,
                "params.pagination: must be an object",
            ),
            (
                r#"{"pagination":{"sortOrder":"up"}}"#,
                "params.pagination.sortOrder: must be 'asc' or 'desc'",
            ),
            (
                r#"{"pagination":{"sortOrder":1}}"#,
                "params.pagination.sortOrder: must be a string",
            ),
            (
                r#"{"pagination":{"limit":"9"}}"#,
                "params.pagination.limit: must be a number",
            ),
            (
                r#"{"pagination":{"limit":-1}}"#,
                "params.pagination.limit: must be a non-negative integer",
            ),
            (
                r#"{"pagination":{"limit":1.5}}"#,
                "params.pagination.limit: must be a non-negative integer",
            ),
            ("[]", "params: must be an object"),
            ("\"x\"", "params: must be an object"),
        ];
        for (text, want) in cases {
            assert_eq!(refusal(list(text)), want, "{text}");
        }
        assert!(refusal(list("{")).starts_with("params: not JSON: "));
    }

    #[test]
    fn a_list_takes_its_shape_and_null_is_absent() {
        let l = List::read(
            Some(
                r#"{"runId":"wrun_1","correlationId":null,"pagination":{"limit":5,"cursor":"","sortOrder":"desc"},"resolveData":"none","extra":1}"#,
            ),
            true,
        )
        .unwrap();
        assert_eq!(l.run.as_deref(), Some("wrun_1"));
        assert_eq!(l.correlation_id, None);
        assert_eq!(
            l.pagination,
            Pagination {
                limit: Some(5),
                cursor: None,
                sort_order: Some(SortOrder::Desc),
            }
        );
        assert_eq!(l.resolve, ResolveData::None);
        // Not an object where one is not required: `{}`, so the run is missing.
        let l = List::read(Some("[1]"), false).unwrap();
        assert_eq!(
            refusal(l.run_required()),
            "params.runId: required".to_owned()
        );
        assert_eq!(
            ResolveParams::read(Some("\"none\"")).unwrap(),
            ResolveData::All
        );
        assert_eq!(ResolveParams::read(None).unwrap(), ResolveData::All);
    }

    #[test]
    fn runs_list_status_goes_through_run_status_deserialize() {
        let p = runs_list(Some(r#"{"status":"cancelled","workflowName":"w"}"#)).unwrap();
        assert_eq!(p.status, Some(RunStatus::Cancelled));
        assert_eq!(p.workflow_name.as_deref(), Some("w"));
        for (text, want) in [
            (r#"{"status":"done"}"#, "params.status: not a run status"),
            (r#"{"status":7}"#, "params.status: must be a string"),
        ] {
            assert_eq!(refusal(runs_list(Some(text))), want);
        }
    }

    #[test]
    fn create_params_take_a_date_or_ms_and_only_true_skips_the_preload() {
        let p = create_params(Some(
            r#"{"stateUpdatedAt":"1970-01-01T00:00:01.500Z","skipPreload":true,"eventCount":3}"#,
        ))
        .unwrap();
        assert_eq!(p.state_updated_at_ms, Some(1500));
        assert!(p.skip_preload);
        assert_eq!(p.event_count, Some(3));
        let p = create_params(Some(r#"{"stateUpdatedAt":42,"skipPreload":"yes"}"#)).unwrap();
        assert_eq!(p.state_updated_at_ms, Some(42));
        assert!(!p.skip_preload);
        for (text, want) in [
            (
                r#"{"stateUpdatedAt":"noon"}"#,
                "params.stateUpdatedAt: not a date",
            ),
            (
                r#"{"stateUpdatedAt":true}"#,
                "params.stateUpdatedAt: must be a number",
            ),
            ("[]", "params: must be an object"),
        ] {
            assert_eq!(refusal(create_params(Some(text))), want);
        }
        assert_eq!(create_params(None).unwrap(), CreateEventParams::default());
    }

    #[test]
    fn cancel_and_batch_name_the_item_at_fault() {
        assert_eq!(
            cancel_request(r#"{"runIds":["a","b"],"cancelReason":"r"}"#).unwrap(),
            (vec!["a".to_owned(), "b".to_owned()], Some("r".to_owned()))
        );
        assert_eq!(
            refusal(cancel_request(r#"{"runIds":["a",2]}"#)),
            "request.runIds[1]: must be a string"
        );
        assert_eq!(
            refusal(cancel_request(r#"{"runIds":"a"}"#)),
            "request.runIds: must be an array of strings"
        );
        assert_eq!(
            refusal(batch_requests(r#"{"event":{}}"#)),
            "events: must be an array"
        );
        let item = r#"{"event":{"eventType":"run_started","specVersion":5}}"#;
        assert_eq!(batch_requests(&format!("[{item}]")).unwrap().len(), 1);
        assert_eq!(
            refusal(batch_requests(&format!("[{item}, \"x\"]"))),
            "events[1].event: required"
        );
        assert!(
            refusal(batch_requests(r#"[{"event":{"eventType":"nope"}}]"#))
                .starts_with("events[0].event: ")
        );
    }

    #[test]
    fn attribute_changes_report_the_javascript_type_at_fault() {
        let ok = attribute_changes(r#"[{"key":"a","value":"1"},{"key":"b","value":null}]"#);
        assert_eq!(
            ok.unwrap().unwrap(),
            vec![
                ("a".to_owned(), Some("1".to_owned())),
                ("b".to_owned(), None)
            ]
        );
        let why = |text: &str| attribute_changes(text).unwrap().unwrap_err();
        assert_eq!(
            why(r#"[{"key":1,"value":"x"}]"#),
            "attribute key must be a string, got number"
        );
        assert_eq!(
            why(r#"[{"key":null,"value":"x"}]"#),
            "attribute key must be a string, got object"
        );
        assert_eq!(why("[7]"), "attribute key must be a string, got undefined");
        assert_eq!(
            why(r#"[{"key":"a"}]"#),
            "attribute value must be a string or null, got undefined"
        );
        assert_eq!(
            why(r#"[{"key":"a","value":false}]"#),
            "attribute value must be a string or null, got boolean"
        );
        assert_eq!(
            refusal(attribute_changes(r#"{"key":"a"}"#)),
            "changes: must be an array"
        );
        assert!(AttributeOptions::read(Some(r#"{"allowReservedAttributes":true}"#)).unwrap());
        assert_eq!(
            refusal(AttributeOptions::read(Some(
                r#"{"allowReservedAttributes":1}"#
            ))),
            "options.allowReservedAttributes: must be a boolean"
        );
    }
}
