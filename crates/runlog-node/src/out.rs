//! Results on their way to JavaScript. Built on the worker thread (numbers checked against
//! `Number.MAX_SAFE_INTEGER` there, so a failure rejects with a code), turned into
//! JavaScript values on the JavaScript thread by [`IntoJs`]. Absent optional strings are
//! `null`; payloads and metadata are fresh `Buffer`s.

use napi::bindgen_prelude::{ToNapiValue, Unknown};
use napi::{Env, JsValue};
use napi_derive::napi;
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

/// One entry of `appendFacts`' result.
#[napi(object, js_name = "Appended")]
pub(crate) struct AppendedJs {
    pub seq: f64,
    /// True when the key (or event id) existed: nothing appended, `seq` is the original.
    pub duplicate: bool,
}

/// `[{seq, duplicate}]` of `appendFacts`.
pub(crate) struct AppendedOut(Vec<AppendedJs>);

impl AppendedOut {
    pub(crate) fn new(appended: Vec<Appended>) -> Result<AppendedOut, BindError> {
        appended
            .into_iter()
            .map(|a| {
                Ok(AppendedJs {
                    seq: safe_number("seq", a.seq)?,
                    duplicate: a.duplicate,
                })
            })
            .collect::<Result<_, _>>()
            .map(AppendedOut)
    }
}

impl IntoJs for AppendedOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.0.into_unknown(env)
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
                .set("kind", &*e.kind)?
                .set("correlationId", e.correlation_id.as_deref())?
                .set("key", e.key.as_deref())?
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

/// `runInfo`'s result, and each run of `listRuns`.
#[napi(object, js_name = "RunInfo")]
pub(crate) struct RunInfoJs {
    pub run_id: String,
    pub last_seq: f64,
    pub committed_bytes: f64,
    pub created_at: f64,
    pub updated_at: f64,
    pub segment_count: u32,
}

impl RunInfoJs {
    fn new(info: RunInfo) -> Result<RunInfoJs, BindError> {
        Ok(RunInfoJs {
            last_seq: safe_number("lastSeq", info.last_seq)?,
            committed_bytes: safe_number("committedBytes", info.committed_bytes)?,
            created_at: safe_number("createdAt", info.created_at_ms)?,
            updated_at: safe_number("updatedAt", info.updated_at_ms)?,
            segment_count: info.segment_count,
            run_id: info.run.as_str().to_owned(),
        })
    }
}

/// `RunInfo`.
pub(crate) struct InfoOut(RunInfoJs);

impl InfoOut {
    pub(crate) fn new(info: RunInfo) -> Result<InfoOut, BindError> {
        RunInfoJs::new(info).map(InfoOut)
    }
}

impl IntoJs for InfoOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.0.into_unknown(env)
    }
}

/// The metadata `Buffer` of `runMeta`.
pub(crate) struct MetaOut(pub(crate) Vec<u8>);

impl IntoJs for MetaOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        buffer(env, &self.0)
    }
}

/// A run of a `listRuns` page whose files could not be read.
#[napi(object, js_name = "DamagedRun")]
pub(crate) struct DamagedRunJs {
    pub run_id: String,
    pub error: String,
    pub corrupt: bool,
}

/// `{runs, next, hasMore, damaged}` of `listRuns`.
#[napi(object, js_name = "RunPage", use_nullable = true)]
pub(crate) struct RunPageJs {
    pub runs: Vec<RunInfoJs>,
    /// Pass as `after` to continue; null when nothing was returned.
    pub next: Option<String>,
    pub has_more: bool,
    /// Runs of this page whose files could not be read.
    pub damaged: Vec<DamagedRunJs>,
}

/// `listRuns`' page.
pub(crate) struct RunsPage(RunPageJs);

impl RunsPage {
    pub(crate) fn new(page: RunPage) -> Result<RunsPage, BindError> {
        let runs = page
            .runs
            .into_iter()
            .map(RunInfoJs::new)
            .collect::<Result<_, _>>()?;
        let damaged = page
            .damaged
            .into_iter()
            .map(|d| DamagedRunJs {
                run_id: d.run.as_str().to_owned(),
                error: d.error,
                corrupt: d.corrupt,
            })
            .collect();
        Ok(RunsPage(RunPageJs {
            runs,
            next: page.next.map(|r| r.as_str().to_owned()),
            has_more: page.has_more,
            damaged,
        }))
    }
}

impl IntoJs for RunsPage {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.0.into_unknown(env)
    }
}

/// A problem (or note) of a `verifyRun` report.
#[napi(object, js_name = "Problem")]
pub(crate) struct ProblemJs {
    pub segment: String,
    pub offset: f64,
    pub detail: String,
}

/// `verifyRun`'s report.
#[napi(object, js_name = "VerifyReport")]
pub(crate) struct VerifyReportJs {
    pub run_id: String,
    /// No problem found.
    pub ok: bool,
    pub segments: u32,
    pub events: f64,
    pub problems: Vec<ProblemJs>,
    pub notes: Vec<ProblemJs>,
}

/// `verifyRun`'s report.
pub(crate) struct VerifyOut(VerifyReportJs);

impl VerifyOut {
    pub(crate) fn new(report: VerifyReport) -> Result<VerifyOut, BindError> {
        let list = |problems: Vec<runlog::Problem>| {
            problems
                .into_iter()
                .map(|p| ProblemJs {
                    segment: p.segment,
                    offset: p.offset as f64,
                    detail: p.detail,
                })
                .collect()
        };
        Ok(VerifyOut(VerifyReportJs {
            run_id: report.run.as_str().to_owned(),
            ok: report.problems.is_empty(),
            segments: report.segments,
            events: safe_number("events", report.events)?,
            problems: list(report.problems),
            notes: list(report.notes),
        }))
    }
}

impl IntoJs for VerifyOut {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>> {
        self.0.into_unknown(env)
    }
}

/// `retentionStats()`: what the World's retention thread did.
#[napi(object, use_nullable = true)]
pub struct RetentionStats {
    /// Gc passes completed.
    pub passes: f64,
    /// Runs collected (archived, then removed from the store).
    pub collected: f64,
    /// Runs already archived whose leftover stream or attribute logs were merged into their
    /// archive (and removed from the store).
    pub swept: f64,
    /// Runs that could not be judged or collected in a pass, and passes that failed as a
    /// whole (an archive directory that cannot be created or locked); each such run is
    /// still live and tried again at the next pass.
    pub failures: f64,
    /// The last failure's message, `null` while there was none.
    pub last_error: Option<String>,
}

impl RetentionStats {
    pub(crate) fn new(task: &runlog_world::RetentionTask) -> RetentionStats {
        RetentionStats {
            passes: task.passes() as f64,
            collected: task.collected() as f64,
            swept: task.swept() as f64,
            failures: task.failures() as f64,
            last_error: task.last_error(),
        }
    }
}

/// `commitStats()`: the group commit counters of a file store's handle.
#[napi(object)]
pub(crate) struct CommitStats {
    /// Group commits (each at most one write + one fdatasync).
    pub groups: f64,
    /// Append requests handled.
    pub requests: f64,
    /// Events written.
    pub events: f64,
    /// groupSizes[i]: groups of (2^(i-1), 2^i] requests; groupSizes[0]: groups of one.
    pub group_sizes: Vec<f64>,
}

impl CommitStats {
    pub(crate) fn new(s: &CommitStatsSnapshot) -> CommitStats {
        CommitStats {
            groups: s.groups as f64,
            requests: s.requests as f64,
            events: s.events as f64,
            group_sizes: s.group_sizes.iter().map(|n| *n as f64).collect(),
        }
    }
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
