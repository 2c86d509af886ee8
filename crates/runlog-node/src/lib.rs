//! Node.js binding of runlog (napi-rs 3): the store as a Promise API.
//!
//! ```js
//! const { Store } = require('./runlog_node.node');
//! const store = await Store.open('my.runlog');
//! await store.createRun('wrun_1');
//! const [{ seq }] = await store.appendFacts('wrun_1', [{ kind: 'step_completed', payload: Buffer.from('{}'), key: 'step_1' }]);
//! await store.appendDecisions('wrun_1', seq, [{ kind: 'run_completed' }]); // FENCED if the log grew
//! const { events, next, hasMore } = await store.read('wrun_1', 0, 100);
//! await store.close();
//! ```
//!
//! `Store.open('postgres://user@host/db?schema=wf')` opens the same API (and its `World`) on
//! PostgreSQL (`runlog-pg`); only `commitStats` is the file store's (`UNSUPPORTED` there).
//!
//! Every call runs on the addon's own threads (module `pool`), never on the JavaScript thread or
//! libuv's pool, so concurrent appends to one run meet in one group commit. Every failure
//! rejects the promise with an `Error` carrying a stable `code` (module `errors`); a panic is
//! caught and rejects with `PANICKED`; nothing aborts the process.
//!
//! Layers: `store` and `world` (the classes and their argument checks; `world/params`: the
//! World's parameters as typed structs, `world/out`: its results; `open`: writable or
//! read-only) → `handle` (the opened store both classes share, its leases) → `call` (the one
//! shape of a method: arguments, lease, lane; the one wait loop) → `js` (values across the
//! boundary on napi-rs's typed layer, promises) and `out` (results) → `pool` (threads) →
//! `errors`. `raw` holds the only raw Node-API calls, each with why.
#![deny(missing_docs)]
// Raw Node-API only in `raw` (its module allows it).
#![deny(unsafe_code)]

mod call;
mod errors;
mod event_page;
#[cfg(test)]
mod generated;
mod handle;
mod js;
mod open;
mod out;
mod pool;
mod raw;
mod store;
mod world;

use napi::Env;
use napi::bindgen_prelude::Unknown;
use napi_derive::napi;

use crate::errors::BindError;
use crate::js::{Arg, ObjOut, Raw, entry, spawn};
use crate::out::Unit;

pub use crate::store::JsStore;
pub use crate::world::JsWorld;

/// The binding's version (the workspace version).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// `threadPoolStats() → {io, wait}`: each lane's `threads`, `idle`, `queued`, `threadsMax`,
/// `threadsStarted`, `jobsQueued` (jobs handed to the lane), `jobsRun` (jobs that ended)
/// (synchronous; diagnostics and tests).
#[napi(ts_return_type = "ThreadPoolStats")]
pub fn thread_pool_stats(env: Env) -> napi::Result<Raw> {
    let lane = |p: &pool::Pool| -> napi::Result<_> {
        let s = p.stats();
        Ok(ObjOut::new(&env)?
            .set("threads", s.threads as f64)?
            .set("idle", s.idle as f64)?
            .set("queued", s.queued as f64)?
            .set("threadsMax", s.threads_max as f64)?
            .set("threadsStarted", s.threads_started as f64)?
            .set("jobsQueued", s.jobs_queued as f64)?
            .set("jobsRun", s.jobs_run as f64)?
            .done())
    };
    let obj = ObjOut::new(&env)?
        .set("io", lane(&pool::IO)?)?
        .set("wait", lane(&pool::WAIT)?)?;
    Ok(Raw::new(obj.done()))
}

/// `__panicForTest(where) → Promise<never>`: a test hook that panics inside the binding —
/// `'worker'` in a job on the `io` lane, `'entry'` on the JavaScript thread before any job
/// is queued — to prove that a panic rejects with `PANICKED` and the process goes on.
#[napi(
    ts_args_type = "where: 'entry' | 'worker'",
    js_name = "__panicForTest",
    ts_return_type = "Promise<never>"
)]
pub fn panic_for_test(env: Env, place: Unknown<'_>) -> napi::Result<Raw> {
    entry(&env, || {
        let place = Arg::new(place, "where").string()?;
        match place.as_str() {
            "entry" => panic!("test panic on the JavaScript thread"),
            "worker" => spawn(&env, &pool::IO, || -> Result<Unit, BindError> {
                panic!("test panic on a worker thread")
            }),
            _ => Err(BindError::invalid("where", "must be 'entry' or 'worker'")),
        }
    })
}
