//! The World's results on their way to JavaScript: JSON text (entities, pages, batch and
//! bulk-cancel results, built here from `runlog_world`'s types) and the streams' objects.

use std::ops::Range;

use napi::Env;
use napi::bindgen_prelude::{ToNapiValue, Unknown};
use napi_derive::napi;
use runlog_world::streams::{ChunkPage, ChunkRead, StreamInfo};
use runlog_world::{CancelOutcome, WorldError};
use serde_json::Value;

use crate::errors::BindError;
use crate::js::{IntoJs, ObjOut, array, buffer};
use crate::out::Json;
use crate::world::errors::world_code;

/// One outcome per call: a JSON text, or the `Error` the call rejects with.
pub(crate) struct Settled(pub(crate) Vec<Result<String, BindError>>);

impl IntoJs for Settled {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
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

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> Result<String, BindError> {
    serde_json::to_string(v)
        .map_err(|e| BindError::internal(format!("cannot serialize a result: {e}")))
}

/// One `BatchEventItemResult`: `{status: 200, event, step?, wait?, run?}`, or `{status,
/// error, message}` with the class and status its single `create` would have failed with.
pub(crate) fn batch_item(
    answer: Result<runlog_world::EventResult, WorldError>,
) -> Result<Value, BindError> {
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

/// `BulkCancelWorkflowRunsResult`: `{summary, results}`, the results in request order.
pub(crate) fn cancel_result(run_ids: &[String], outcomes: Vec<CancelOutcome>) -> Value {
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

/// A chunk list `[{index, data}]`.
fn chunks_js<'e>(
    env: &'e Env,
    chunks: &[runlog_world::streams::StreamChunk],
) -> napi::Result<Unknown<'e>> {
    let items = chunks
        .iter()
        .map(|c| {
            Ok(ObjOut::new(env)?
                .set("index", c.index as f64)?
                .set("data", buffer(env, &c.data)?)?
                .done())
        })
        .collect::<napi::Result<_>>()?;
    array(env, items)
}

pub(crate) struct ReadOut(pub(crate) ChunkRead);

impl IntoJs for ReadOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let r = self.0;
        Ok(ObjOut::new(env)?
            .set("chunks", chunks_js(env, &r.chunks)?)?
            .set("nextIndex", r.next_index as f64)?
            .set("hasMore", r.has_more)?
            .set("done", r.done)?
            .done())
    }
}

pub(crate) struct PageOut(pub(crate) ChunkPage);

impl IntoJs for PageOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let p = self.0;
        Ok(ObjOut::new(env)?
            .set("data", chunks_js(env, &p.data)?)?
            .set("cursor", p.cursor)?
            .set("hasMore", p.has_more)?
            .set("done", p.done)?
            .done())
    }
}

/// `streamsWait`, `streamsInfo`: the last chunk's index (−1: none) and whether the stream
/// is closed.
#[napi(object, js_name = "StreamInfo")]
pub(crate) struct StreamInfoJs {
    pub tail_index: f64,
    pub done: bool,
}

pub(crate) struct InfoOut(pub(crate) StreamInfo);

impl IntoJs for InfoOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        StreamInfoJs {
            tail_index: self.0.tail_index as f64,
            done: self.0.done,
        }
        .into_unknown(env)
    }
}

/// `streamsWriteMulti`: the indexes written, `start` inclusive, `end` exclusive.
#[napi(object)]
pub(crate) struct StreamRange {
    pub start: f64,
    pub end: f64,
}

pub(crate) struct RangeOut(pub(crate) Range<u64>);

impl IntoJs for RangeOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        StreamRange {
            start: self.0.start as f64,
            end: self.0.end as f64,
        }
        .into_unknown(env)
    }
}

pub(crate) struct Names(pub(crate) Vec<String>);

impl IntoJs for Names {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let items = self
            .0
            .into_iter()
            .map(|n| n.into_unknown(env))
            .collect::<napi::Result<_>>()?;
        array(env, items)
    }
}
