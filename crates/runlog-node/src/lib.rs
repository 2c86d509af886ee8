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
use crate::js::{Arg, Raw, entry, spawn};
use crate::out::Unit;

pub use crate::store::JsStore;
pub use crate::world::JsWorld;

/// The binding's version (the workspace version).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// One lane of `threadPoolStats()`.
#[napi(object)]
pub struct LaneStats {
    /// Threads running now.
    pub threads: f64,
    /// Threads waiting for a job.
    pub idle: f64,
    /// Jobs waiting for a thread.
    pub queued: f64,
    /// The most threads the lane runs at once.
    pub threads_max: f64,
    /// Threads started since the addon was loaded.
    pub threads_started: f64,
    /// Jobs handed to the lane (counted when queued, synchronously).
    pub jobs_queued: f64,
    /// Jobs that ended (counted after the job settled its promise).
    pub jobs_run: f64,
}

/// `threadPoolStats()`: the addon's worker threads, `io` (every call but wait) and `wait`.
#[napi(object)]
pub struct ThreadPoolStats {
    /// Every call but the waits.
    pub io: LaneStats,
    /// `wait` and `streamsWait`.
    pub wait: LaneStats,
}

/// `threadPoolStats() → {io, wait}`: each lane's `threads`, `idle`, `queued`, `threadsMax`,
/// `threadsStarted`, `jobsQueued` (jobs handed to the lane), `jobsRun` (jobs that ended)
/// (synchronous; diagnostics and tests).
#[napi]
pub fn thread_pool_stats() -> ThreadPoolStats {
    let lane = |p: &pool::Pool| {
        let s = p.stats();
        LaneStats {
            threads: s.threads as f64,
            idle: s.idle as f64,
            queued: s.queued as f64,
            threads_max: s.threads_max as f64,
            threads_started: s.threads_started as f64,
            jobs_queued: s.jobs_queued as f64,
            jobs_run: s.jobs_run as f64,
        }
    };
    ThreadPoolStats {
        io: lane(&pool::IO),
        wait: lane(&pool::WAIT),
    }
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
