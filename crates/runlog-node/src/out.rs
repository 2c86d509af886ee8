//! Results on their way to JavaScript. Built on the worker thread (numbers checked against
//! `Number.MAX_SAFE_INTEGER` there, so a failure rejects with a code), turned into
//! JavaScript values on the JavaScript thread by [`IntoJs`]. Absent optional strings are
//! `null`; payloads and metadata are fresh `Buffer`s.

use napi::bindgen_prelude::{ToNapiValue, Unknown};
use napi::{Env, JsValue};
use runlog::{Appended, CommitStatsSnapshot, ReadPage, RunInfo, RunPage, VerifyReport};

use crate::errors::BindError;
use crate::js::{IntoJs, ObjOut, array, buffer, safe_number};

/// `undefined`.
pub(crate) struct Unit;

impl IntoJs for Unit {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        ().into_unknown(env)
    }
}

/// One number.
pub(crate) struct Number(f64);

impl Number {
    pub(crate) fn seq(seq: u64) -> Result<Number, BindError> {
        safe_number("seq", seq).map(Number)
    }
}

impl IntoJs for Number {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.0.into_unknown(env)
    }
}

/// An array of numbers.
pub(crate) struct Numbers(Vec<f64>);

impl Numbers {
    pub(crate) fn seqs(seqs: Vec<u64>) -> Result<Numbers, BindError> {
        seqs.into_iter()
            .map(|s| safe_number("seq", s))
            .collect::<Result<_, _>>()
            .map(Numbers)
    }
}

impl IntoJs for Numbers {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let items = self
            .0
            .into_iter()
            .map(|n| Number(n).into_js(env))
            .collect::<napi::Result<_>>()?;
        array(env, items)
    }
}

/// `[{seq, duplicate}]` of `appendFacts`.
pub(crate) struct AppendedOut(Vec<(f64, bool)>);

impl AppendedOut {
    pub(crate) fn new(appended: Vec<Appended>) -> Result<AppendedOut, BindError> {
        appended
            .into_iter()
            .map(|a| Ok((safe_number("seq", a.seq)?, a.duplicate)))
            .collect::<Result<_, _>>()
            .map(AppendedOut)
    }
}

impl IntoJs for AppendedOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let items = self
            .0
            .into_iter()
            .map(|(seq, duplicate)| {
                Ok(ObjOut::new(env)?
                    .set("seq", seq)?
                    .set("duplicate", duplicate)?
                    .done())
            })
            .collect::<napi::Result<_>>()?;
        array(env, items)
    }
}

/// `{events, next, hasMore}` of `read`.
pub(crate) struct EventsPage {
    page: ReadPage,
    next: f64,
}

impl EventsPage {
    pub(crate) fn new(page: ReadPage) -> Result<EventsPage, BindError> {
        for e in &page.events {
            safe_number("seq", e.seq)?;
            safe_number("createdAt", e.created_at_ms)?;
        }
        let next = safe_number("next", page.next)?;
        Ok(EventsPage { page, next })
    }
}

impl IntoJs for EventsPage {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let mut events = Vec::with_capacity(self.page.events.len());
        for e in self.page.events {
            let obj = ObjOut::new(env)?
                .set("seq", e.seq as f64)?
                .set("eventId", e.event_id.to_string())?
                .set("kind", e.kind)?
                .set("correlationId", e.correlation_id)?
                .set("key", e.key)?
                .set("createdAt", e.created_at_ms as f64)?
                .set("payload", buffer(env, &e.payload)?)?;
            events.push(obj.done());
        }
        let obj = ObjOut::new(env)?
            .set("events", array(env, events)?)?
            .set("next", self.next)?
            .set("hasMore", self.page.has_more)?;
        Ok(obj.done())
    }
}

/// `RunInfo`.
pub(crate) struct InfoOut(RunInfo);

impl InfoOut {
    pub(crate) fn new(info: RunInfo) -> Result<InfoOut, BindError> {
        safe_number("lastSeq", info.last_seq)?;
        safe_number("committedBytes", info.committed_bytes)?;
        safe_number("createdAt", info.created_at_ms)?;
        safe_number("updatedAt", info.updated_at_ms)?;
        Ok(InfoOut(info))
    }

    fn build(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let i = self.0;
        Ok(ObjOut::new(env)?
            .set("runId", i.run.as_str())?
            .set("lastSeq", i.last_seq as f64)?
            .set("committedBytes", i.committed_bytes as f64)?
            .set("createdAt", i.created_at_ms as f64)?
            .set("updatedAt", i.updated_at_ms as f64)?
            .set("segmentCount", i.segment_count)?
            .done())
    }
}

impl IntoJs for InfoOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.build(env)
    }
}

/// The metadata `Buffer` of `runMeta`.
pub(crate) struct MetaOut(pub(crate) Vec<u8>);

impl IntoJs for MetaOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        buffer(env, &self.0)
    }
}

/// `{runs, next, hasMore, damaged}` of `listRuns`.
pub(crate) struct RunsPage {
    runs: Vec<InfoOut>,
    page: RunPage,
}

impl RunsPage {
    pub(crate) fn new(mut page: RunPage) -> Result<RunsPage, BindError> {
        let runs = std::mem::take(&mut page.runs)
            .into_iter()
            .map(InfoOut::new)
            .collect::<Result<_, _>>()?;
        Ok(RunsPage { runs, page })
    }
}

impl IntoJs for RunsPage {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let runs = self
            .runs
            .into_iter()
            .map(|r| r.build(env))
            .collect::<napi::Result<_>>()?;
        let damaged = self
            .page
            .damaged
            .into_iter()
            .map(|d| {
                Ok(ObjOut::new(env)?
                    .set("runId", d.run.as_str())?
                    .set("error", d.error)?
                    .set("corrupt", d.corrupt)?
                    .done())
            })
            .collect::<napi::Result<_>>()?;
        Ok(ObjOut::new(env)?
            .set("runs", array(env, runs)?)?
            .set("next", self.page.next.map(|r| r.as_str().to_owned()))?
            .set("hasMore", self.page.has_more)?
            .set("damaged", array(env, damaged)?)?
            .done())
    }
}

/// `verifyRun`'s report.
pub(crate) struct VerifyOut(VerifyReport);

impl VerifyOut {
    pub(crate) fn new(report: VerifyReport) -> Result<VerifyOut, BindError> {
        safe_number("events", report.events)?;
        Ok(VerifyOut(report))
    }
}

impl IntoJs for VerifyOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        let r = self.0;
        let list = |problems: Vec<runlog::Problem>| -> napi::Result<Unknown<'_>> {
            let items = problems
                .into_iter()
                .map(|p| {
                    Ok(ObjOut::new(env)?
                        .set("segment", p.segment)?
                        .set("offset", p.offset as f64)?
                        .set("detail", p.detail)?
                        .done())
                })
                .collect::<napi::Result<_>>()?;
            array(env, items)
        };
        Ok(ObjOut::new(env)?
            .set("runId", r.run.as_str())?
            .set("ok", r.problems.is_empty())?
            .set("segments", r.segments)?
            .set("events", r.events as f64)?
            .set("problems", list(r.problems)?)?
            .set("notes", list(r.notes)?)?
            .done())
    }
}

/// `commitStats()`: `{groups, requests, events, groupSizes}`; `groupSizes[i]` counts the
/// groups of `(2^(i-1), 2^i]` requests (`groupSizes[0]`: groups of one).
pub(crate) fn commit_stats<'e>(env: &'e Env, s: &CommitStatsSnapshot) -> napi::Result<Unknown<'e>> {
    let sizes = s
        .group_sizes
        .iter()
        .map(|n| Number(*n as f64).into_js(env))
        .collect::<napi::Result<_>>()?;
    Ok(ObjOut::new(env)?
        .set("groups", s.groups as f64)?
        .set("requests", s.requests as f64)?
        .set("events", s.events as f64)?
        .set("groupSizes", array(env, sizes)?)?
        .done())
}
/// JSON text, resolved as a JavaScript string.
pub(crate) struct Json(pub(crate) String);

impl IntoJs for Json {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        if !self.0.is_ascii() {
            return self.0.into_unknown(env);
        }
        // ASCII text is its own Latin-1: V8 copies it into a one-byte string without the
        // UTF-8 decoder (most result texts: payloads carry binary values as base64).
        Ok(env.create_string_latin1(self.0.as_bytes())?.to_unknown())
    }
}
